// tempora.h and tempora_posix.h from C++ (built with the suite's -Wall -Wextra -Werror): the
// headers' extern "C" blocks, their structs initialised the C++ way, lambdas without captures
// as a callback and as a POSIX SIGEV_THREAD function.
//   cxx                      prints "c++ ok"
//   cxx throw                a callback throws: the process aborts (SIGABRT), never goes on
//   cxx throw-resolver PATH  a restore's resolver throws: likewise
#include <tempora.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <semaphore.h>
#include <stdexcept>
#include <tempora_posix.h>

static std::atomic<int> calls{0};
static sem_t fired;

static bool wait_fired()
{
    timespec until{};
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    return sem_timedwait(&fired, &until) == 0;
}

// Creates a callback timer calling `callback` and arms it to fire once, 1 ms from now.
static bool arm_callback(tempora_owner_t *o, tempora_callback_fn callback)
{
    tempora_sigevent sev{};
    sev.notify = TEMPORA_SIGEV_THREAD;
    sev.callback = callback;
    tempora_timer_t id = -1;
    itimerspec set{};
    set.it_value.tv_nsec = 1000000;
    return tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id) == 0 &&
           tempora_timer_settime(o, id, 0, &set, nullptr) == 0;
}

// A callback that throws: the exception must not come back out of tempora.
static int callback_throws(tempora_owner_t *o)
{
    if (!arm_callback(o, [](tempora_timer_t, int, union sigval) {
            sem_post(&fired);
            throw std::runtime_error("out of a callback");
        }))
        return 1;
    wait_fired();
    // The abort comes on the driver thread; give it time, then fail if it did not.
    timespec pause{};
    pause.tv_sec = 2;
    nanosleep(&pause, nullptr);
    std::fprintf(stderr, "cxx.cpp: still running after the callback threw\n");
    return 1;
}

// A resolver that throws during a restore, on the calling thread.
static int resolver_throws(tempora_t *t, tempora_owner_t *o, const char *path)
{
    tempora_sigevent sev{};
    sev.notify = TEMPORA_SIGEV_THREAD;
    sev.callback = [](tempora_timer_t, int, union sigval) {};
    sev.name = "named";
    tempora_timer_t id = -1;
    if (tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id) != 0 ||
        tempora_owner_checkpoint(o, path) != 0)
        return 1;
    tempora_owner_t *fresh = tempora_owner_new(t);
    try {
        tempora_owner_restore(
            fresh, path,
            [](const char *, tempora_sigevent *, void *) -> int {
                throw std::runtime_error("out of a resolver");
            },
            nullptr);
    } catch (...) {
        std::fprintf(stderr, "cxx.cpp: the resolver's exception came out of tempora\n");
        return 1;
    }
    std::fprintf(stderr, "cxx.cpp: still running after the resolver threw\n");
    return 1;
}

int main(int argc, char **argv)
{
    sem_init(&fired, 0, 0);
    tempora_t *t = tempora_new(nullptr);
    tempora_owner_t *o = tempora_owner_new(t);
    if (t == nullptr || o == nullptr)
        return 1;
    if (argc == 2 && std::strcmp(argv[1], "throw") == 0)
        return callback_throws(o);
    if (argc == 3 && std::strcmp(argv[1], "throw-resolver") == 0)
        return resolver_throws(t, o, argv[2]);
    if (!arm_callback(o, [](tempora_timer_t, int, union sigval) {
            calls++;
            sem_post(&fired);
        }))
        return 1;
    if (!wait_fired() || calls != 1)
        return 1;
    // The POSIX calls, through tempora_posix.h.
    struct sigevent psev{};
    psev.sigev_notify = SIGEV_THREAD;
    psev.sigev_notify_function = [](union sigval v) {
        if (v.sival_int == 42) {
            calls++;
            sem_post(&fired);
        }
    };
    psev.sigev_value.sival_int = 42;
    timer_t pid;
    itimerspec set{};
    set.it_value.tv_nsec = 1000000;
    if (timer_create(CLOCK_MONOTONIC, &psev, &pid) != 0 ||
        timer_settime(pid, 0, &set, nullptr) != 0)
        return 1;
    if (!wait_fired() || calls != 2 || timer_getoverrun(pid) != 0 || timer_delete(pid) != 0)
        return 1;
    tempora_owner_free(o);
    tempora_free(t);
    std::printf("c++ ok\n");
    return 0;
}
