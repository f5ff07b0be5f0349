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
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

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
