/* A program written against POSIX timers and nothing else: SIGEV_THREAD and SIGEV_NONE,
 * relative and absolute settings, intervals, gettime, getoverrun, delete, and the errors a
 * caller meets. It is built twice (tests/c_suite.rs): against libc, and with -DUSE_TEMPORA,
 * where tempora_posix.h maps the same calls onto tempora. Both builds must print the same
 * lines: what it prints is what POSIX lets a program observe, never a timing. */
#define _GNU_SOURCE
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef USE_TEMPORA
#include <tempora_posix.h>
#endif

#define MS 1000000L

static void die(int line)
{
    fprintf(stderr, "dropin.c:%d: %s\n", line, strerror(errno));
    exit(1);
}
#define CHECK(c)                                                                            \
    do {                                                                                    \
        if (!(c))                                                                           \
            die(__LINE__);                                                                  \
    } while (0)

static const char *err_name(int e)
{
    switch (e) {
    case 0: return "0";
    case EINVAL: return "EINVAL";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EAGAIN: return "EAGAIN";
    case EFAULT: return "EFAULT";
    default: return "other";
    }
}

/* A call's result as the program sees it: its value and errno. */
#define SHOW(what, call)                                                                    \
    do {                                                                                    \
        errno = 0;                                                                          \
        int r_ = (call);                                                                    \
        printf("%s: %d%s%s\n", what, r_, r_ == -1 ? " " : "", r_ == -1 ? err_name(errno) : ""); \
    } while (0)

static long long ns(struct timespec t)
{
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static struct timespec ts(long long n)
{
    struct timespec t = {n / 1000000000LL, n % 1000000000LL};
    return t;
}

static long long now(clockid_t c)
{
    struct timespec t;
    CHECK(clock_gettime(c, &t) == 0);
    return ns(t);
}

static void show_spec(const char *what, timer_t t)
{
    struct itimerspec cur;
    CHECK(timer_gettime(t, &cur) == 0);
    printf("%s: value %lld.%09ld, interval %lld.%09ld\n", what, (long long)cur.it_value.tv_sec,
           cur.it_value.tv_nsec, (long long)cur.it_interval.tv_sec, cur.it_interval.tv_nsec);
}

static sem_t fired;
static atomic_int calls;
static int marker;
static atomic_int value_ok = 1;

static void on_expiry(union sigval v)
{
    if (v.sival_ptr != &marker)
        atomic_store(&value_ok, 0);
    atomic_fetch_add(&calls, 1);
    sem_post(&fired);
}

static void wait_fired(void)
{
    struct timespec until;
    CHECK(clock_gettime(CLOCK_REALTIME, &until) == 0);
    until.tv_sec += 5;
    while (sem_timedwait(&fired, &until) != 0)
        CHECK(errno == EINTR);
}

int main(void)
{
    CHECK(sem_init(&fired, 0, 0) == 0);
    timer_t th, none;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD;
    sev.sigev_notify_function = on_expiry;
    sev.sigev_value.sival_ptr = &marker;
    SHOW("create SIGEV_THREAD on CLOCK_MONOTONIC", timer_create(CLOCK_MONOTONIC, &sev, &th));
    struct sigevent nsev;
    memset(&nsev, 0, sizeof nsev);
    nsev.sigev_notify = SIGEV_NONE;
    SHOW("create SIGEV_NONE on CLOCK_REALTIME", timer_create(CLOCK_REALTIME, &nsev, &none));
    show_spec("fresh timer", th);

    /* A relative one-shot: the function runs once with the value, then the timer is idle. */
    struct itimerspec set = {.it_value = ts(10 * MS)}, old;
    SHOW("settime 10 ms one-shot", timer_settime(th, 0, &set, NULL));
    wait_fired();
    printf("one-shot: %d call, value %s\n", atomic_load(&calls),
           atomic_load(&value_ok) ? "as given" : "WRONG");
    show_spec("after it fired", th);

    /* Absolute: never before the deadline. */
    long long deadline = now(CLOCK_MONOTONIC) + 20 * MS;
    set = (struct itimerspec){.it_value = ts(deadline)};
    SHOW("settime TIMER_ABSTIME +20 ms", timer_settime(th, TIMER_ABSTIME, &set, NULL));
    wait_fired();
    printf("absolute: %s\n", now(CLOCK_MONOTONIC) >= deadline ? "not early" : "EARLY");

    /* Periodic: five calls, then disarmed; the old setting says the period. */
    atomic_store(&calls, 0);
    set = (struct itimerspec){.it_value = ts(2 * MS), .it_interval = ts(2 * MS)};
    SHOW("settime 2 ms every 2 ms", timer_settime(th, 0, &set, NULL));
    for (int i = 0; i < 5; i++)
        wait_fired();
    printf("getoverrun >= 0: %s\n", timer_getoverrun(th) >= 0 ? "yes" : "no");
    set = (struct itimerspec){{0, 0}, {0, 0}};
    SHOW("disarm", timer_settime(th, 0, &set, &old));
    printf("old interval: %lld.%09ld, old value within it: %s\n", (long long)old.it_interval.tv_sec,
           old.it_interval.tv_nsec,
           ns(old.it_value) > 0 && ns(old.it_value) <= 2 * MS ? "yes" : "no");
    show_spec("disarmed", th);

    /* SIGEV_NONE: nothing is delivered; gettime shows the state. */
    set = (struct itimerspec){.it_value = ts(now(CLOCK_REALTIME) + 3600LL * 1000 * MS),
                              .it_interval = ts(2500 * MS)};
    SHOW("settime TIMER_ABSTIME +1 h every 2.5 s", timer_settime(none, TIMER_ABSTIME, &set, NULL));
    struct itimerspec cur;
    CHECK(timer_gettime(none, &cur) == 0);
    printf("remaining about an hour: %s, interval %lld.%09ld\n",
           ns(cur.it_value) > 3590LL * 1000 * MS && ns(cur.it_value) <= 3600LL * 1000 * MS ? "yes"
                                                                                          : "no",
           (long long)cur.it_interval.tv_sec, cur.it_interval.tv_nsec);
    set = (struct itimerspec){.it_value = ts(MS), .it_interval = ts(MS)};
    SHOW("settime 1 ms every 1 ms", timer_settime(none, 0, &set, &old));
    printf("old interval: %lld.%09ld\n", (long long)old.it_interval.tv_sec,
           old.it_interval.tv_nsec);
    struct timespec pause = ts(10 * MS);
    nanosleep(&pause, NULL);
    CHECK(timer_gettime(none, &cur) == 0);
    printf("periodic SIGEV_NONE after 10 periods: value within a period: %s\n",
           ns(cur.it_value) > 0 && ns(cur.it_value) <= MS ? "yes" : "no");
    set = (struct itimerspec){.it_value = ts(now(CLOCK_REALTIME) - 1000 * MS)};
    SHOW("settime TIMER_ABSTIME in the past", timer_settime(none, TIMER_ABSTIME, &set, NULL));
    show_spec("one-shot past its time", none);

    /* What a caller gets wrong. */
    set = (struct itimerspec){.it_value = {0, 1000000000}};
    SHOW("settime tv_nsec 1000000000", timer_settime(none, 0, &set, NULL));
    set = (struct itimerspec){.it_value = {-1, 0}};
    SHOW("settime tv_sec -1", timer_settime(none, 0, &set, NULL));
    timer_t bad;
    SHOW("create on clock 12345", timer_create(12345, &nsev, &bad));
    SHOW("create on CLOCK_MONOTONIC_RAW", timer_create(CLOCK_MONOTONIC_RAW, &nsev, &bad));
    /* An invalid sigev_notify, and which is checked first: the clock. */
    struct sigevent inval;
    memset(&inval, 0, sizeof inval);
    inval.sigev_notify = 12345;
    SHOW("create with sigev_notify 12345", timer_create(CLOCK_MONOTONIC, &inval, &bad));
    SHOW("create on clock 12345 with sigev_notify 12345", timer_create(12345, &inval, &bad));
    SHOW("create on CLOCK_MONOTONIC_RAW with sigev_notify 12345",
         timer_create(CLOCK_MONOTONIC_RAW, &inval, &bad));
    struct sigevent sig;
    memset(&sig, 0, sizeof sig);
    sig.sigev_notify = SIGEV_SIGNAL;
    sig.sigev_signo = SIGUSR1;
    SHOW("create SIGEV_SIGNAL on clock 12345", timer_create(12345, &sig, &bad));
    SHOW("create SIGEV_SIGNAL on CLOCK_MONOTONIC_RAW", timer_create(CLOCK_MONOTONIC_RAW, &sig, &bad));
    SHOW("create with a NULL sigevent on clock 12345", timer_create(12345, NULL, &bad));

    SHOW("delete SIGEV_THREAD", timer_delete(th));
    SHOW("delete SIGEV_NONE", timer_delete(none));
    SHOW("gettime after delete", timer_gettime(none, &cur));
    SHOW("delete again", timer_delete(none));
    return 0;
}
