/* What the sig_*.c programs share. Each of them is built twice (tests/c_suite.rs): against libc
 * (the kernel's POSIX timers) and with -DUSE_TEMPORA, where tempora_posix.h maps timer_create
 * & co. onto tempora, which sends the signals itself; both builds must print the same lines.
 * So a program prints only what POSIX lets it observe deterministically: never a timing, never
 * a timer ID's value (the kernel's and tempora's differ), but e.g. "si_timerid matches".
 * A program includes this after defining _GNU_SOURCE. A failed check prints the file, the
 * line, the expression and errno on stderr and exits 1; a watchdog ends a program that hangs
 * (a signal that never comes) with exit status 2. */
#ifndef TEMPORA_SIG_H
#define TEMPORA_SIG_H

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef USE_TEMPORA
#include <tempora_posix.h>
#endif

/* glibc before 2.35 does not name it. */
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define MS 1000000LL
#define SEC 1000000000LL

static inline void sig_fail(const char *file, int line, const char *what)
{
    int e = errno;
    fprintf(stderr, "%s:%d: check failed: %s (errno %d %s)\n", file, line, what, e, strerror(e));
    fflush(stdout);
    exit(1);
}
#define CHECK(c)                                                                            \
    do {                                                                                    \
        if (!(c))                                                                           \
            sig_fail(__FILE__, __LINE__, #c);                                               \
    } while (0)

static inline const char *err_name(int e)
{
    switch (e) {
    case 0: return "0";
    case EINVAL: return "EINVAL";
    case EAGAIN: return "EAGAIN";
    case ENOTSUP: return "ENOTSUP";
    case EFAULT: return "EFAULT";
    case EINTR: return "EINTR";
    case ENOMEM: return "ENOMEM";
    default: return "other";
    }
}

/* A call's result as the program sees it: its value and errno, as dropin.c prints them. */
#define SHOW(what, call)                                                                    \
    do {                                                                                    \
        errno = 0;                                                                          \
        int r_ = (call);                                                                    \
        printf("%s: %d%s%s\n", what, r_, r_ == -1 ? " " : "", r_ == -1 ? err_name(errno) : ""); \
    } while (0)

static inline const char *sig_name(int s)
{
    static char buf[32];
    if (s == SIGALRM)
        return "SIGALRM";
    if (s == SIGUSR1)
        return "SIGUSR1";
    if (s == SIGKILL)
        return "SIGKILL";
    if (s == SIGSTOP)
        return "SIGSTOP";
    if (s == SIGRTMIN)
        return "SIGRTMIN";
    if (s == SIGRTMAX)
        return "SIGRTMAX";
    if (s > SIGRTMIN && s < SIGRTMAX)
        snprintf(buf, sizeof buf, "SIGRTMIN+%d", s - SIGRTMIN);
    else
        snprintf(buf, sizeof buf, "signal %d", s);
    return buf;
}

static inline const char *code_name(int c)
{
    static char buf[32];
    switch (c) {
    case SI_TIMER: return "SI_TIMER";
    case SI_QUEUE: return "SI_QUEUE";
    case SI_USER: return "SI_USER";
    case SI_TKILL: return "SI_TKILL";
    default: snprintf(buf, sizeof buf, "si_code %d", c); return buf;
    }
}

/* A timer_t as the int the kernel (si_timerid, ssi_tid) and tempora name a timer by. */
static inline int timer_int(timer_t t)
{
    return (int)(intptr_t)t;
}

static inline int64_t now_ns(void)
{
    struct timespec t;
    CHECK(clock_gettime(CLOCK_MONOTONIC, &t) == 0);
    return (int64_t)t.tv_sec * SEC + t.tv_nsec;
}

static inline struct timespec ns_ts(int64_t ns)
{
    struct timespec t = {.tv_sec = ns / SEC, .tv_nsec = ns % SEC};
    return t;
}

/* Sleeps until CLOCK_MONOTONIC reads `deadline` (ns), through signal handlers. */
static inline void sleep_until(int64_t deadline)
{
    struct timespec t = ns_ts(deadline);
    int r;
    while ((r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL)) == EINTR) {
    }
    CHECK(r == 0);
}

/* An itimerspec of `value_ns` then every `interval_ns`. */
static inline struct itimerspec its(int64_t value_ns, int64_t interval_ns)
{
    struct itimerspec s = {.it_interval = ns_ts(interval_ns), .it_value = ns_ts(value_ns)};
    return s;
}

static inline void arm(timer_t t, int64_t value_ns, int64_t interval_ns)
{
    struct itimerspec s = its(value_ns, interval_ns);
    CHECK(timer_settime(t, 0, &s, NULL) == 0);
}

/* A sigevent for SIGEV_SIGNAL with `signo` and sival_int `value`. */
static inline struct sigevent sigev_signal(int signo, int value)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = signo;
    sev.sigev_value.sival_int = value;
    return sev;
}

/* timer_create, printed as "<what>: 0"; a failure is printed, then ends the program. */
static inline timer_t create(const char *what, clockid_t clock, struct sigevent *sev)
{
    timer_t t;
    memset(&t, 0, sizeof t);
    errno = 0;
    int r = timer_create(clock, sev, &t);
    int e = errno;
    printf("%s: %d%s%s\n", what, r, r == -1 ? " " : "", r == -1 ? err_name(e) : "");
    if (r != 0) {
        fprintf(stderr, "%s: timer_create failed: %s\n", what, strerror(e));
        fflush(stdout);
        exit(1);
    }
    return t;
}

static inline sigset_t sigset_of(int signo)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    return set;
}

static inline void block(int signo)
{
    sigset_t set = sigset_of(signo);
    CHECK(pthread_sigmask(SIG_BLOCK, &set, NULL) == 0);
}

static inline void unblock(int signo)
{
    sigset_t set = sigset_of(signo);
    CHECK(pthread_sigmask(SIG_UNBLOCK, &set, NULL) == 0);
}

/* Installs an SA_SIGINFO handler (SIG_IGN and SIG_DFL as `sa_handler`). */
static inline void on(int signo, void (*fn)(int, siginfo_t *, void *))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_flags = SA_SIGINFO;
    sa.sa_sigaction = fn;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(signo, &sa, NULL) == 0);
}

/* A signal taken by sigtimedwait within 5 s (a program that waits longer has failed). */
static inline siginfo_t take(const sigset_t *set)
{
    struct timespec five = {5, 0};
    siginfo_t si;
    int r;
    while ((r = sigtimedwait(set, &si, &five)) == -1 && errno == EINTR) {
    }
    CHECK(r > 0);
    return si;
}

/* Prints what a timer's siginfo says: the signal, the code, whether si_timerid names `t`, the
 * value; si_overrun as its value or, with `overrun_exact` 0, only as ">= 0". */
static inline void print_fields(const char *what, int signo, int code, int timerid, timer_t t,
                                int value, int overrun, int overrun_exact)
{
    printf("%s: si_signo %s, si_code %s, si_timerid %s, sival_int %d, ", what, sig_name(signo),
           code_name(code), timerid == timer_int(t) ? "matches" : "DIFFERS", value);
    if (overrun_exact)
        printf("si_overrun %d\n", overrun);
    else
        printf("si_overrun %s\n", overrun >= 0 ? ">= 0" : "NEGATIVE");
}

static inline void print_siginfo(const char *what, const siginfo_t *si, timer_t t,
                                 int overrun_exact)
{
    print_fields(what, si->si_signo, si->si_code, si->si_timerid, t, si->si_value.sival_int,
                 si->si_overrun, overrun_exact);
}

static inline void *watchdog_thread(void *arg)
{
    int seconds = (int)(intptr_t)arg;
    struct timespec t = {seconds, 0};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
    fprintf(stderr, "watchdog: still running after %d s: a signal never came?\n", seconds);
    fflush(stdout);
    _exit(2);
}

/* Ends the program with status 2 after `seconds`: a thread with every signal blocked. */
static inline void watchdog(int seconds)
{
    sigset_t all, old;
    sigfillset(&all);
    CHECK(pthread_sigmask(SIG_SETMASK, &all, &old) == 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, watchdog_thread, (void *)(intptr_t)seconds) == 0);
    CHECK(pthread_detach(th) == 0);
    CHECK(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0);
}

#endif
