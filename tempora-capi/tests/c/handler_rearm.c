/* Timer calls from a signal handler that interrupted the same thread inside a timer call.
 * POSIX makes timer_settime, timer_gettime and timer_getoverrun async-signal-safe.
 *
 * 1. The handler re-arms a timer while the main loop reads the same timer with timer_gettime:
 *    every re-arm completes (tempora's gettime holds no lock).
 * 2. The main loop re-arms the timer while the handler reads it and re-arms it: each handler
 *    call completes or, on tempora, fails at once with EDEADLK where the interrupted call
 *    holds what it needs; none hangs.
 *
 * Built against libc and with -DUSE_TEMPORA (tempora_posix.h); both print the same lines.
 * argv[1] sets the signals of case 1 (default 300000; case 2 sends a third). The sender sleeps
 * until each signal was handled (the handler writes an eventfd) rather than spinning beside
 * the main thread for its CPU. An alarm, re-armed at every signal handled, ends a run in
 * which no signal was handled for 60 s: a hang (before tempora's handler rules, case 1 spun
 * for ever in the handler, waiting for the lock its own thread held in timer_gettime), not a
 * slow machine. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#ifdef USE_TEMPORA
#include <tempora_posix.h>
#endif

#define CHECK(c)                                                                            \
    do {                                                                                    \
        if (!(c)) {                                                                         \
            fprintf(stderr, "handler_rearm.c:%d: %s: %s\n", __LINE__, #c, strerror(errno)); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static timer_t timer;
static atomic_int mode; /* 0: re-arm; 1: read, overrun, re-arm */
static atomic_long handled, completed, refused, wrong;
static const struct itimerspec period = {{0, 200000}, {0, 200000}};
static int handled_fd; /* written by the handler once per signal, read by the sender */
#define STALL_SECONDS 60

static void tally(int r)
{
    if (r >= 0)
        atomic_fetch_add(&completed, 1);
    else if (errno == EDEADLK)
        atomic_fetch_add(&refused, 1);
    else
        atomic_fetch_add(&wrong, 1);
}

static void on_usr1(int signo)
{
    int saved = errno;
    struct itimerspec now;
    (void)signo;
    if (atomic_load(&mode) == 0) {
        tally(timer_settime(timer, 0, &period, NULL));
    } else {
        tally(timer_gettime(timer, &now));
        tally(timer_getoverrun(timer));
        tally(timer_settime(timer, 0, &period, NULL));
    }
    atomic_fetch_add(&handled, 1);
    {
        uint64_t one = 1;
        /* write(2) is async-signal-safe; an eventfd adds the 8 bytes to its count. */
        (void)!write(handled_fd, &one, sizeof one);
    }
    errno = saved;
}

struct sender {
    pthread_t target;
    long n;
};

static void *send_signals(void *arg)
{
    struct sender *s = arg;
    for (long i = 0; i < s->n; i++) {
        uint64_t count;
        CHECK(pthread_kill(s->target, SIGUSR1) == 0);
        CHECK(read(handled_fd, &count, sizeof count) == sizeof count && count == 1);
        alarm(STALL_SECONDS);
    }
    return NULL;
}

/* Sends n signals to this thread while `step` runs in a loop. */
static void run_case(int m, long n, void (*step)(void))
{
    struct sender s = {pthread_self(), n};
    pthread_t t;
    long start = atomic_load(&handled);
    atomic_store(&mode, m);
    atomic_store(&completed, 0);
    atomic_store(&refused, 0);
    CHECK(pthread_create(&t, NULL, send_signals, &s) == 0);
    while (atomic_load(&handled) < start + n)
        step();
    CHECK(pthread_join(t, NULL) == 0);
}

static void read_timer(void)
{
    struct itimerspec now;
    CHECK(timer_gettime(timer, &now) == 0);
    CHECK(now.it_interval.tv_nsec == period.it_interval.tv_nsec);
}

static void rearm_timer(void)
{
    CHECK(timer_settime(timer, 0, &period, NULL) == 0);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 300000;
    struct sigevent sev;
    struct sigaction sa;
    alarm(STALL_SECONDS);
    handled_fd = eventfd(0, EFD_CLOEXEC);
    CHECK(handled_fd >= 0);
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_NONE;
    CHECK(timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0);
    CHECK(timer_settime(timer, 0, &period, NULL) == 0);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);

    run_case(0, n, read_timer);
    printf("re-arms from the handler while main reads: %s\n",
           atomic_load(&completed) == n && atomic_load(&refused) == 0 ? "all completed"
                                                                       : "some failed");
    run_case(1, n / 3, rearm_timer);
    printf("handler calls while main re-arms: none hung, completed some: %s, other errors: %ld\n",
           atomic_load(&completed) > 0 ? "yes" : "no", atomic_load(&wrong));
    CHECK(timer_delete(timer) == 0);
    return 0;
}
