// tempora.h and tempora_posix.h from C++: the header's extern "C" block, its structs
// initialised the C++ way, and a lambda without captures as a callback.
#include <tempora.h>

#include <atomic>
#include <cstdio>
#include <semaphore.h>

static std::atomic<int> calls{0};
static sem_t fired;

int main()
{
    sem_init(&fired, 0, 0);
    tempora_t *t = tempora_new(nullptr);
    tempora_owner_t *o = tempora_owner_new(t);
    if (t == nullptr || o == nullptr)
        return 1;
    tempora_sigevent sev{};
    sev.notify = TEMPORA_SIGEV_THREAD;
    sev.callback = [](tempora_timer_t, int, union sigval) {
        calls++;
        sem_post(&fired);
    };
    tempora_timer_t id = -1;
    itimerspec set{};
    set.it_value.tv_nsec = 1000000;
    if (tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id) != 0 ||
        tempora_timer_settime(o, id, 0, &set, nullptr) != 0)
        return 1;
    timespec until{};
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    if (sem_timedwait(&fired, &until) != 0 || calls != 1)
        return 1;
    tempora_owner_free(o);
    tempora_free(t);
    std::printf("c++ ok\n");
    return 0;
}
