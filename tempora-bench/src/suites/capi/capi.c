/*
 * The capi bench suite's C side (tempora-bench/src/suites/capi/mod.rs drives it): tight loops over
 * the C ABI of tempora.h and over the kernel's POSIX timers through libc, as a C program
 * writes them. Each loop times itself with clock_gettime(CLOCK_MONOTONIC) and returns the
 * nanoseconds per call of `passes` passes over its `n` timers, or minus the errno of the first
 * call that failed (the loop stops there).
 *
 * The settime loops re-arm timer i with a relative one-shot of 1 s plus a spread below 1 s
 * (capi_spread_nsec, the same sequence as the Rust loops' workload::spread_nsec at pass 0,
 * which a unit test checks through capi_spread_nsec_at), returning the old setting; the
 * gettime loops read each timer; the create-delete loops create a timer and delete it, `n`
 * times per pass. Every returned setting is folded into capi_sink, so no call's result is
 * unused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tempora.h"

/* What the loops fold their results into (read by nobody: it keeps the results used). */
volatile uint64_t capi_sink;

/* The tv_nsec of timer i's arming: the spread of the service suite's settime-arm (pass 0). */
static inline long capi_spread_nsec(size_t i) {
    return (long)((i * 7919u) % 1000000u) * 1000L;
}

/* capi_spread_nsec for the Rust side's test that both languages compute the same sequence. */
long capi_spread_nsec_at(size_t i) {
    return capi_spread_nsec(i);
}

static inline uint64_t capi_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double capi_per_call(uint64_t start, size_t n, int passes) {
    return (double)(capi_now_ns() - start) / ((double)n * (double)passes);
}

static double capi_failed(void) {
    return -(double)(errno != 0 ? errno : EIO);
}

/* ---- tempora, through tempora.h ---- */

double capi_settime_tempora(const tempora_owner_t *o, const int32_t *ids, size_t n, int passes) {
    uint64_t sum = 0;
    uint64_t start = capi_now_ns();
    for (int p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++) {
            struct itimerspec new_ = {{0, 0}, {1, capi_spread_nsec(i)}}, old;
            if (tempora_timer_settime(o, ids[i], 0, &new_, &old) != 0)
                return capi_failed();
            sum += (uint64_t)old.it_value.tv_nsec;
        }
    }
    double ns = capi_per_call(start, n, passes);
    capi_sink += sum;
    return ns;
}

double capi_gettime_tempora(const tempora_owner_t *o, const int32_t *ids, size_t n, int passes) {
    uint64_t sum = 0;
    uint64_t start = capi_now_ns();
    for (int p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++) {
            struct itimerspec cur;
            if (tempora_timer_gettime(o, ids[i], &cur) != 0)
                return capi_failed();
            sum += (uint64_t)cur.it_value.tv_nsec;
        }
    }
    double ns = capi_per_call(start, n, passes);
    capi_sink += sum;
    return ns;
}

double capi_create_delete_tempora(const tempora_owner_t *o, size_t n, int passes) {
    uint64_t sum = 0;
    uint64_t start = capi_now_ns();
    for (int p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++) {
            tempora_timer_t id;
            if (tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id) != 0)
                return capi_failed();
            if (tempora_timer_delete(o, id) != 0)
                return capi_failed();
            sum += (uint64_t)id;
        }
    }
    double ns = capi_per_call(start, n, passes);
    capi_sink += sum;
    return ns;
}

/* ---- the kernel's POSIX timers, through libc ---- */

/* The notification of every kernel timer here: `signo` queued to thread `tid` only
 * (SIGEV_THREAD_ID), carrying `value`; the caller keeps `signo` blocked. */
static void capi_kernel_sigevent(struct sigevent *sev, int signo, int tid, int value) {
    memset(sev, 0, sizeof *sev);
    sev->sigev_notify = SIGEV_THREAD_ID;
    sev->sigev_signo = signo;
    sev->sigev_value.sival_int = value;
#ifdef sigev_notify_thread_id
    sev->sigev_notify_thread_id = tid;
#else
    /* Older glibc headers name the field only by its union member. */
    sev->_sigev_un._tid = tid;
#endif
}

/* Creates n kernel timers on CLOCK_MONOTONIC into `out`; how many it made (fewer than n with
 * errno set when the kernel refused one). */
size_t capi_kernel_create(timer_t *out, size_t n, int signo, int tid) {
    for (size_t i = 0; i < n; i++) {
        struct sigevent sev;
        capi_kernel_sigevent(&sev, signo, tid, (int)i);
        if (timer_create(CLOCK_MONOTONIC, &sev, &out[i]) != 0)
            return i;
    }
    return n;
}

void capi_kernel_delete(const timer_t *timers, size_t n) {
    for (size_t i = 0; i < n; i++)
        timer_delete(timers[i]);
}

double capi_settime_kernel(const timer_t *timers, size_t n, int passes) {
    uint64_t sum = 0;
    uint64_t start = capi_now_ns();
    for (int p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++) {
            struct itimerspec new_ = {{0, 0}, {1, capi_spread_nsec(i)}}, old;
            if (timer_settime(timers[i], 0, &new_, &old) != 0)
                return capi_failed();
            sum += (uint64_t)old.it_value.tv_nsec;
        }
    }
    double ns = capi_per_call(start, n, passes);
    capi_sink += sum;
    return ns;
}

double capi_gettime_kernel(const timer_t *timers, size_t n, int passes) {
    uint64_t sum = 0;
    uint64_t start = capi_now_ns();
    for (int p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++) {
            struct itimerspec cur;
            if (timer_gettime(timers[i], &cur) != 0)
                return capi_failed();
            sum += (uint64_t)cur.it_value.tv_nsec;
        }
    }
    double ns = capi_per_call(start, n, passes);
    capi_sink += sum;
    return ns;
}

double capi_create_delete_kernel(size_t n, int passes, int signo, int tid) {
    struct sigevent sev;
    capi_kernel_sigevent(&sev, signo, tid, -1);
    uint64_t sum = 0;
    uint64_t start = capi_now_ns();
    for (int p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++) {
            timer_t t;
            if (timer_create(CLOCK_MONOTONIC, &sev, &t) != 0)
                return capi_failed();
            if (timer_delete(t) != 0)
                return capi_failed();
            sum += (uint64_t)(uintptr_t)t;
        }
    }
    double ns = capi_per_call(start, n, passes);
    capi_sink += sum;
    return ns;
}

/* ---- the drop-in: libtempora-posix's timer_* calls ----
 *
 * The functions a program gets from libtempora-posix.so (preloaded or linked), which the Rust
 * side loads with dlopen (RTLD_LOCAL: they stand in for nobody else's calls in this process)
 * and hands over as pointers: a call through one is what a call through the PLT is. The
 * timers are the drop-in's (its default owner, of its own copy of tempora), made with
 * SIGEV_NONE: nothing is delivered, as nothing comes due. */
struct capi_dropin {
    int (*create)(clockid_t, struct sigevent *, timer_t *);
    int (*settime)(timer_t, int, const struct itimerspec *, struct itimerspec *);
    int (*gettime)(timer_t, struct itimerspec *);
    int (*delete_)(timer_t);
    /* Used by the sigwait-latency loop only (below). */
    int (*getoverrun)(timer_t);
    int (*sigwait)(const sigset_t *, int *);
};

static void capi_dropin_sigevent(struct sigevent *sev) {
    memset(sev, 0, sizeof *sev);
    sev->sigev_notify = SIGEV_NONE;
}

/* Creates n drop-in timers on CLOCK_MONOTONIC into `out`; how many it made (fewer than n with
 * errno set when one was refused). */
size_t capi_dropin_create(const struct capi_dropin *f, timer_t *out, size_t n) {
    struct sigevent sev;
    capi_dropin_sigevent(&sev);
    for (size_t i = 0; i < n; i++)
        if (f->create(CLOCK_MONOTONIC, &sev, &out[i]) != 0)
            return i;
    return n;
}

void capi_dropin_delete(const struct capi_dropin *f, const timer_t *timers, size_t n) {
    for (size_t i = 0; i < n; i++)
        f->delete_(timers[i]);
}

double capi_settime_dropin(const struct capi_dropin *f, const timer_t *timers, size_t n,
                           int passes) {
    uint64_t sum = 0;
    uint64_t start = capi_now_ns();
    for (int p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++) {
            struct itimerspec new_ = {{0, 0}, {1, capi_spread_nsec(i)}}, old;
            if (f->settime(timers[i], 0, &new_, &old) != 0)
                return capi_failed();
            sum += (uint64_t)old.it_value.tv_nsec;
        }
    }
    double ns = capi_per_call(start, n, passes);
    capi_sink += sum;
    return ns;
}

double capi_gettime_dropin(const struct capi_dropin *f, const timer_t *timers, size_t n,
                           int passes) {
    uint64_t sum = 0;
    uint64_t start = capi_now_ns();
    for (int p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++) {
            struct itimerspec cur;
            if (f->gettime(timers[i], &cur) != 0)
                return capi_failed();
            sum += (uint64_t)cur.it_value.tv_nsec;
        }
    }
    double ns = capi_per_call(start, n, passes);
    capi_sink += sum;
    return ns;
}

double capi_create_delete_dropin(const struct capi_dropin *f, size_t n, int passes) {
    struct sigevent sev;
    capi_dropin_sigevent(&sev);
    uint64_t sum = 0;
    uint64_t start = capi_now_ns();
    for (int p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++) {
            timer_t t;
            if (f->create(CLOCK_MONOTONIC, &sev, &t) != 0)
                return capi_failed();
            if (f->delete_(t) != 0)
                return capi_failed();
            sum += (uint64_t)(uintptr_t)t;
        }
    }
    double ns = capi_per_call(start, n, passes);
    capi_sink += sum;
    return ns;
}

/* ---- sigwait-latency: a latency tool's loop, expiry to sigwait's return ----
 *
 * What a latency tool's measuring thread does, on the calling thread (the Rust side starts one
 * for each run, sigwait.rs): set its timer slack to 1 ns, block `signo`, create a
 * CLOCK_MONOTONIC timer that signals this thread alone (SIGEV_THREAD_ID), arm it at
 * now + lead_ns (TIMER_ABSTIME) with period period_ns, then n times: sigwait for the signal,
 * read CLOCK_MONOTONIC into wake[i] at once, and timer_getoverrun into overrun[i]. Which expiry
 * each wake-up stands for, and so its lateness, is the Rust side's arithmetic. Both sides call
 * the same four timer calls and sigwait through the same pointers: the C library's
 * (capi_sigwait_kernel) or the drop-in's (capi_sigwait_dropin). `*stop` set (read after each
 * sigwait) ends the loop without counting that wake-up: the Rust side sets it, and signals the
 * thread, when the signals stopped coming. */

struct capi_wait_calls {
    int (*create)(clockid_t, struct sigevent *, timer_t *);
    int (*settime)(timer_t, int, const struct itimerspec *, struct itimerspec *);
    int (*getoverrun)(timer_t);
    int (*delete_)(timer_t);
    int (*sigwait)(const sigset_t *, int *);
};

/* One run's outcome besides the samples: the first expiry, how many signals were taken, and
 * the call that failed (NULL if none did). */
struct capi_wait_run {
    uint64_t start_ns;
    size_t got;
    const char *failed;
};

/* The loop above: 0, or minus the errno of the call `out->failed` names (the samples taken
 * before it are in out->got). */
static int capi_sigwait_loop(const struct capi_wait_calls *c, int signo, uint64_t lead_ns,
                             uint64_t period_ns, size_t n, uint64_t *wake, int *overrun,
                             const int *stop, struct capi_wait_run *out) {
    out->start_ns = 0;
    out->got = 0;
    out->failed = NULL;
    if (prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) != 0) {
        out->failed = "prctl(PR_SET_TIMERSLACK)";
        return (int)capi_failed();
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    int e = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (e != 0) {
        out->failed = "pthread_sigmask";
        return -e;
    }
    struct sigevent sev;
    capi_kernel_sigevent(&sev, signo, (int)syscall(SYS_gettid), 0);
    timer_t t;
    if (c->create(CLOCK_MONOTONIC, &sev, &t) != 0) {
        out->failed = "timer_create";
        return (int)capi_failed();
    }
    uint64_t start = capi_now_ns() + lead_ns;
    struct itimerspec its = {{(time_t)(period_ns / 1000000000u), (long)(period_ns % 1000000000u)},
                             {(time_t)(start / 1000000000u), (long)(start % 1000000000u)}};
    if (c->settime(t, TIMER_ABSTIME, &its, NULL) != 0) {
        int r = (int)capi_failed();
        c->delete_(t);
        out->failed = "timer_settime";
        return r;
    }
    out->start_ns = start;
    int r = 0;
    size_t i = 0;
    while (i < n) {
        int sig;
        e = c->sigwait(&set, &sig);
        uint64_t now = capi_now_ns();
        if (e != 0) {
            out->failed = "sigwait";
            r = -e;
            break;
        }
        if (__atomic_load_n(stop, __ATOMIC_RELAXED))
            break;
        int o = c->getoverrun(t);
        if (o < 0) {
            out->failed = "timer_getoverrun";
            r = (int)capi_failed();
            break;
        }
        wake[i] = now;
        overrun[i] = o;
        i++;
    }
    out->got = i;
    c->delete_(t);
    return r;
}

int capi_sigwait_kernel(int signo, uint64_t lead_ns, uint64_t period_ns, size_t n,
                        uint64_t *wake, int *overrun, const int *stop,
                        struct capi_wait_run *out) {
    static const struct capi_wait_calls libc_calls = {timer_create, timer_settime,
                                                      timer_getoverrun, timer_delete, sigwait};
    return capi_sigwait_loop(&libc_calls, signo, lead_ns, period_ns, n, wake, overrun, stop, out);
}

int capi_sigwait_dropin(const struct capi_dropin *f, int signo, uint64_t lead_ns,
                        uint64_t period_ns, size_t n, uint64_t *wake, int *overrun,
                        const int *stop, struct capi_wait_run *out) {
    const struct capi_wait_calls calls = {f->create, f->settime, f->getoverrun, f->delete_,
                                          f->sigwait};
    return capi_sigwait_loop(&calls, signo, lead_ns, period_ns, n, wake, overrun, stop, out);
}

/* ---- deliver-signal: a timer's real signal, expiry to sigtimedwait ----
 *
 * The service suite's deliver-signal case (tempora-bench/src/suites/service/signals.rs says
 * what is measured and why) written as a C program writes it: timers whose expiries queue a
 * real-time signal to the process (SIGEV_SIGNAL), the signal blocked in every thread and taken
 * with sigtimedwait. The kernel's timers come from timer_create; tempora's from
 * tempora_timer_create with a TEMPORA_SIGEV_SIGNAL sigevent, compiled only when tempora.h
 * defines that constant (capi_tempora_signals says whether it did).
 *
 * A burst: n one-shot timers, made for the run, all due at `lead_ns` from now. The calling
 * thread (pinned to its CPU by the caller, so the kernel's hrtimers are queued there) sleeps
 * until `ahead_ns` before the expiry, spins across it until `window_ns` after it reading the
 * clock (gaps in its readings minus its run_delay growth: the interrupt time on its CPU; the
 * process CPU clock minus its own: the other threads'), then takes the n signals. A periodic
 * timer: `count` signals, each one's lateness from the first expiry it stands for. */

/* One burst's cost per signal, ns, and what was taken. */
struct capi_burst {
    double expire_ns;
    double irq_ns;
    double dequeue_ns;
    int64_t got;
    int64_t bad;
};

/* How one implementation makes, arms and deletes timer i of a case. */
struct capi_sig_ops {
    void *ctx;
    int (*create)(void *ctx, size_t i, int signo);
    int (*arm)(void *ctx, size_t i, uint64_t at, uint64_t period);
    void (*del)(void *ctx, size_t i);
};

/* The spin's gap threshold: a clock reading takes ~25 ns. */
#define CAPI_GAP_NS 500u

static uint64_t capi_clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's run_delay (time runnable, waiting for a CPU), ns. */
static uint64_t capi_run_delay_ns(void) {
    char buf[128];
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return 0;
    buf[len] = 0;
    unsigned long long exec = 0, delay = 0;
    if (sscanf(buf, "%llu %llu", &exec, &delay) != 2)
        return 0;
    return delay;
}

static int capi_wait_signal(int signo, uint64_t timeout_ns, int *code, int *value, int *overrun) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    struct timespec ts = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
    siginfo_t info;
    for (;;) {
        int r = sigtimedwait(&set, &info, &ts);
        if (r > 0)
            break;
        if (errno != EINTR)
            return 0;
    }
    *code = info.si_code;
    *value = info.si_value.sival_int;
    *overrun = info.si_overrun;
    return 1;
}

static int64_t capi_drain(int signo) {
    int64_t count = 0;
    int code, value, overrun;
    while (capi_wait_signal(signo, 0, &code, &value, &overrun))
        count++;
    return count;
}

static void capi_delete_all(const struct capi_sig_ops *ops, size_t n) {
    for (size_t i = 0; i < n; i++)
        ops->del(ops->ctx, i);
}

/* Creates n timers; 0, or minus the errno of the one that failed (the made ones deleted). */
static int capi_create_all(const struct capi_sig_ops *ops, size_t n, int signo) {
    for (size_t i = 0; i < n; i++) {
        if (ops->create(ops->ctx, i, signo) != 0) {
            int e = errno != 0 ? errno : EIO;
            capi_delete_all(ops, i);
            return -e;
        }
    }
    return 0;
}

/* A burst (above): 0 with *out filled, 1 when the spin would have started late (nothing
 * measured: try again), or minus an errno. */
static int capi_burst(const struct capi_sig_ops *ops, size_t n, int signo, uint64_t lead_ns,
                      uint64_t ahead_ns, uint64_t window_ns, struct capi_burst *out) {
    unsigned char *seen = calloc(n, 1);
    if (seen == NULL)
        return -ENOMEM;
    int r = capi_create_all(ops, n, signo);
    if (r != 0) {
        free(seen);
        return r;
    }
    uint64_t at = capi_clock_ns(CLOCK_MONOTONIC) + lead_ns;
    for (size_t i = 0; i < n; i++) {
        if (ops->arm(ops->ctx, i, at, 0) != 0) {
            r = -(errno != 0 ? errno : EIO);
            capi_delete_all(ops, n);
            capi_drain(signo);
            free(seen);
            return r;
        }
    }
    uint64_t start = at - ahead_ns;
    struct timespec ts = {(time_t)(start / 1000000000u), (long)(start % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
    if (capi_clock_ns(CLOCK_MONOTONIC) + ahead_ns / 2 > at) {
        capi_delete_all(ops, n);
        capi_drain(signo);
        free(seen);
        return 1;
    }
    /* The spin. */
    uint64_t end = at + window_ns;
    uint64_t p0 = capi_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t m0 = capi_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    uint64_t r0 = capi_run_delay_ns();
    uint64_t prev = capi_clock_ns(CLOCK_MONOTONIC), gaps = 0;
    while (prev < end) {
        uint64_t t = capi_clock_ns(CLOCK_MONOTONIC);
        if (t - prev > CAPI_GAP_NS)
            gaps += t - prev;
        prev = t;
    }
    uint64_t r1 = capi_run_delay_ns();
    uint64_t m1 = capi_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    uint64_t p1 = capi_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t others = (p1 - p0) > (m1 - m0) ? (p1 - p0) - (m1 - m0) : 0;
    uint64_t irq = gaps > (r1 - r0) ? gaps - (r1 - r0) : 0;
    /* The dequeue. */
    int64_t got = 0, bad = 0;
    uint64_t p2 = capi_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    while ((size_t)got < n) {
        int code, value, overrun;
        if (!capi_wait_signal(signo, 1000000000u, &code, &value, &overrun))
            break;
        if (code == SI_TIMER && value >= 0 && (size_t)value < n && !seen[value]) {
            seen[value] = 1;
            got++;
        } else {
            bad++;
        }
    }
    uint64_t p3 = capi_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    capi_delete_all(ops, n);
    bad += capi_drain(signo);
    free(seen);
    out->expire_ns = (double)(others + irq) / (double)n;
    out->irq_ns = (double)irq / (double)n;
    out->dequeue_ns = (double)(p3 - p2) / (double)n;
    out->got = got;
    out->bad = bad;
    return 0;
}

/* One periodic timer's `count` signals: each one's lateness into late[] (ns after the first
 * expiry it stands for), the process's CPU time per signal, the sum of their si_overrun and
 * how many came (fewer than count: none within 1 s). 0, or minus an errno. */
static int capi_periodic(const struct capi_sig_ops *ops, int signo, uint64_t period_ns,
                         size_t count, double *late, double *cpu_per_signal, uint64_t *overruns,
                         size_t *got) {
    int r = capi_create_all(ops, 1, signo);
    if (r != 0)
        return r;
    uint64_t at = capi_clock_ns(CLOCK_MONOTONIC) + 2000000u;
    if (ops->arm(ops->ctx, 0, at, period_ns) != 0) {
        r = -(errno != 0 ? errno : EIO);
        capi_delete_all(ops, 1);
        return r;
    }
    uint64_t p0 = capi_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t expiry = 0, over = 0;
    size_t k = 0;
    while (k < count) {
        int code, value, overrun;
        if (!capi_wait_signal(signo, 1000000000u, &code, &value, &overrun))
            break;
        uint64_t now = capi_clock_ns(CLOCK_MONOTONIC);
        late[k++] = (double)now - (double)(at + expiry * period_ns);
        uint64_t o = overrun > 0 ? (uint64_t)overrun : 0;
        expiry += 1 + o;
        over += o;
    }
    uint64_t p1 = capi_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    capi_delete_all(ops, 1);
    capi_drain(signo);
    *cpu_per_signal = k > 0 ? (double)(p1 - p0) / (double)k : 0.0;
    *overruns = over;
    *got = k;
    return 0;
}

/* The kernel's side: timer_create(CLOCK_MONOTONIC, {SIGEV_SIGNAL, signo, sival_int = i}). */
static int capi_sig_kernel_create(void *ctx, size_t i, int signo) {
    timer_t *timers = ctx;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = signo;
    sev.sigev_value.sival_int = (int)i;
    return timer_create(CLOCK_MONOTONIC, &sev, &timers[i]);
}

static int capi_sig_kernel_arm(void *ctx, size_t i, uint64_t at, uint64_t period) {
    timer_t *timers = ctx;
    struct itimerspec its = {{(time_t)(period / 1000000000u), (long)(period % 1000000000u)},
                             {(time_t)(at / 1000000000u), (long)(at % 1000000000u)}};
    return timer_settime(timers[i], TIMER_ABSTIME, &its, NULL);
}

static void capi_sig_kernel_del(void *ctx, size_t i) {
    timer_t *timers = ctx;
    timer_delete(timers[i]);
}

int capi_burst_kernel(size_t n, int signo, uint64_t lead_ns, uint64_t ahead_ns,
                      uint64_t window_ns, struct capi_burst *out) {
    timer_t *timers = calloc(n, sizeof *timers);
    if (timers == NULL)
        return -ENOMEM;
    struct capi_sig_ops ops = {timers, capi_sig_kernel_create, capi_sig_kernel_arm,
                               capi_sig_kernel_del};
    int r = capi_burst(&ops, n, signo, lead_ns, ahead_ns, window_ns, out);
    free(timers);
    return r;
}

int capi_periodic_kernel(int signo, uint64_t period_ns, size_t count, double *late,
                         double *cpu_per_signal, uint64_t *overruns, size_t *got) {
    timer_t timer;
    struct capi_sig_ops ops = {&timer, capi_sig_kernel_create, capi_sig_kernel_arm,
                               capi_sig_kernel_del};
    return capi_periodic(&ops, signo, period_ns, count, late, cpu_per_signal, overruns, got);
}

/* tempora's side, through tempora.h: lights up once tempora.h defines TEMPORA_SIGEV_SIGNAL
 * (a sigevent whose `signo` field is the signal number, `value` its sigev_value). Until then
 * its entry points return -ENOSYS and capi_tempora_signals() is 0, so the suite plans no
 * tempora-c row for this case. */
#ifdef TEMPORA_SIGEV_SIGNAL

struct capi_sig_tempora {
    const tempora_owner_t *owner;
    tempora_timer_t *ids;
};

static int capi_sig_tempora_create(void *ctx, size_t i, int signo) {
    struct capi_sig_tempora *t = ctx;
    struct tempora_sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.notify = TEMPORA_SIGEV_SIGNAL;
    sev.signo = signo;
    sev.value.sival_int = (int)i;
    return tempora_timer_create(t->owner, CLOCK_MONOTONIC, &sev, &t->ids[i]);
}

static int capi_sig_tempora_arm(void *ctx, size_t i, uint64_t at, uint64_t period) {
    struct capi_sig_tempora *t = ctx;
    struct itimerspec its = {{(time_t)(period / 1000000000u), (long)(period % 1000000000u)},
                             {(time_t)(at / 1000000000u), (long)(at % 1000000000u)}};
    return tempora_timer_settime(t->owner, t->ids[i], TEMPORA_TIMER_ABSTIME, &its, NULL);
}

static void capi_sig_tempora_del(void *ctx, size_t i) {
    struct capi_sig_tempora *t = ctx;
    tempora_timer_delete(t->owner, t->ids[i]);
}

int capi_tempora_signals(void) {
    return 1;
}

int capi_burst_tempora(const tempora_owner_t *o, size_t n, int signo, uint64_t lead_ns,
                       uint64_t ahead_ns, uint64_t window_ns, struct capi_burst *out) {
    struct capi_sig_tempora t = {o, calloc(n, sizeof(tempora_timer_t))};
    if (t.ids == NULL)
        return -ENOMEM;
    struct capi_sig_ops ops = {&t, capi_sig_tempora_create, capi_sig_tempora_arm,
                               capi_sig_tempora_del};
    int r = capi_burst(&ops, n, signo, lead_ns, ahead_ns, window_ns, out);
    free(t.ids);
    return r;
}

int capi_periodic_tempora(const tempora_owner_t *o, int signo, uint64_t period_ns,
                          size_t count, double *late, double *cpu_per_signal,
                          uint64_t *overruns, size_t *got) {
    tempora_timer_t id;
    struct capi_sig_tempora t = {o, &id};
    struct capi_sig_ops ops = {&t, capi_sig_tempora_create, capi_sig_tempora_arm,
                               capi_sig_tempora_del};
    return capi_periodic(&ops, signo, period_ns, count, late, cpu_per_signal, overruns, got);
}

#else

int capi_tempora_signals(void) {
    return 0;
}

int capi_burst_tempora(const tempora_owner_t *o, size_t n, int signo, uint64_t lead_ns,
                       uint64_t ahead_ns, uint64_t window_ns, struct capi_burst *out) {
    (void)o, (void)n, (void)signo, (void)lead_ns, (void)ahead_ns, (void)window_ns, (void)out;
    return -ENOSYS;
}

int capi_periodic_tempora(const tempora_owner_t *o, int signo, uint64_t period_ns,
                          size_t count, double *late, double *cpu_per_signal,
                          uint64_t *overruns, size_t *got) {
    (void)o, (void)signo, (void)period_ns, (void)count, (void)late, (void)cpu_per_signal;
    (void)overruns, (void)got;
    return -ENOSYS;
}

#endif
