/* Memory exhaustion through tempora_posix.h: under RLIMIT_AS, timer_create until one fails.
 * The failure is -1 with EAGAIN (the kernel's timer_create when it cannot allocate), never an
 * abort; the service stays whole: a timer made before still fires, deletes work, and creates
 * succeed again after them. The limit is the process's VmSize when it is set plus HEADROOM, so
 * it does not depend on the machine. */
#define _GNU_SOURCE
#include <semaphore.h>
#include <signal.h>
#include <sys/resource.h>

#include "check.h"
#include <tempora_posix.h>

#define HEADROOM (24LL << 20)
#define MAX_TIMERS 2000000

static sem_t fired;

static void on_expiry(union sigval v)
{
    (void)v;
    sem_post(&fired);
}

/* The address-space size (VmSize), in bytes. */
static long long vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL);
    char line[256];
    long long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %lld kB", &kib) == 1)
            break;
    fclose(f);
    CHECK(kib > 0);
    return kib * 1024;
}

static void wait_fired(void)
{
    struct timespec until;
    CHECK(clock_gettime(CLOCK_REALTIME, &until) == 0);
    until.tv_sec += 10;
    CHECK(sem_timedwait(&fired, &until) == 0);
}

int main(void)
{
    CHECK(sem_init(&fired, 0, 0) == 0);
    /* Before the limit: a callback timer (the driver starts now), armed far off, and this
     * thread's first failed call (its message's thread-local is made once per thread). */
    struct sigevent thread;
    memset(&thread, 0, sizeof thread);
    thread.sigev_notify = SIGEV_THREAD;
    thread.sigev_notify_function = on_expiry;
    timer_t early;
    OK(timer_create(CLOCK_MONOTONIC, &thread, &early));
    /* Its first expiry runs before the limit too: a driver's first callback starts the spare
     * that stands by while it runs (a thread tempora starts allocates, infallibly, once). */
    struct itimerspec soon = its(MSEC, 0);
    OK(timer_settime(early, 0, &soon, NULL));
    wait_fired();
    struct itimerspec far = its(3600LL * 1000 * MSEC, 0);
    OK(timer_settime(early, 0, &far, NULL));
    /* A timer_t without tempora's tag would be the C library's to answer (glibc follows a
     * negative one as a pointer): a NULL new value is tempora's EINVAL. */
    FAILS(timer_settime(early, 0, NULL, NULL), EINVAL);
    timer_t *ids = calloc(MAX_TIMERS, sizeof *ids);
    CHECK(ids != NULL);

    struct rlimit limit = {.rlim_cur = (rlim_t)(vm_size() + HEADROOM), .rlim_max = RLIM_INFINITY};
    CHECK(setrlimit(RLIMIT_AS, &limit) == 0);

    struct sigevent none;
    memset(&none, 0, sizeof none);
    none.sigev_notify = SIGEV_NONE;
    int made = 0;
    for (;;) {
        CHECK(made < MAX_TIMERS);
        errno = 0;
        if (timer_create(CLOCK_MONOTONIC, &none, &ids[made]) != 0)
            break;
        made++;
    }
    int err = errno;
    if (err != EAGAIN)
        FAIL("timer_create %d failed with %s, not EAGAIN", made, strerror(err));
    CHECK(strstr(tempora_last_error(), "out of memory") != NULL);
    CHECK(made > 0);

    /* The timer made before fires. */
    OK(timer_settime(early, 0, &soon, NULL));
    wait_fired();

    /* Deletes work; half as many creates as deletes succeed again. */
    int freed = made < 6000 ? made : 6000;
    for (int i = 0; i < freed; i++)
        OK(timer_delete(ids[made - 1 - i]));
    for (int i = 0; i < freed / 2; i++)
        OK(timer_create(CLOCK_MONOTONIC, &none, &ids[made - 1 - i]));
    struct itimerspec left;
    OK(timer_gettime(ids[made - 1], &left));
    OK(timer_delete(early));
    printf("memory ok: EAGAIN after %d creates\n", made);
    return 0;
}
