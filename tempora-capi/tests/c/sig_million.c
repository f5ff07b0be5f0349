/* sig_million.c: a million SIGEV_SIGNAL timers under RLIMIT_SIGPENDING's soft limit lowered to
 * 1024. The kernel gives each signal timer a preallocated signal and counts it against the
 * limit, so it refuses the create past it (EAGAIN); tempora queues a signal only when a timer
 * fires and so holds them all. The two builds intentionally print different lines:
 *   libc (the kernel's timers):
 *     kernel refuses past RLIMIT_SIGPENDING: EAGAIN
 *   tempora:
 *     created 1000000
 *     armed 1000000 for an hour
 *     armed 1000 of them for 10 ms
 *     received 1000 signals, each from one of the 1000, none twice
 *     sigtimedwait 20 ms: -1 EAGAIN
 *     deleted 1000000
 * The libc build stops at the refusal, deleting what it made. tempora's 1000 signals are
 * queued with the limit back at its old value (a queued signal counts against it). */
#define _GNU_SOURCE
#include "sig.h"
#include <sys/resource.h>

#define N 1000000
#define SOON 1000 /* timers 0, N / SOON, 2 * N / SOON, ... fire soon */

static int by_value(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    watchdog(120);
    struct rlimit old, low;
    CHECK(getrlimit(RLIMIT_SIGPENDING, &old) == 0);
    low = old;
    low.rlim_cur = old.rlim_max < 1024 ? old.rlim_max : 1024;
    CHECK(setrlimit(RLIMIT_SIGPENDING, &low) == 0);

    timer_t *timers = calloc(N, sizeof *timers);
    CHECK(timers != NULL);
    int n = 0, err = 0;
    for (; n < N; n++) {
        struct sigevent sev = sigev_signal(SIGRTMIN, n);
        if (timer_create(CLOCK_MONOTONIC, &sev, &timers[n]) != 0) {
            err = errno;
            break;
        }
    }
    if (n < N) {
        for (int i = 0; i < n; i++)
            CHECK(timer_delete(timers[i]) == 0);
        free(timers);
        if (err != EAGAIN) {
            printf("create failed: %s\n", err_name(err));
            return 1;
        }
        printf("kernel refuses past RLIMIT_SIGPENDING: EAGAIN\n");
        return 0;
    }
    printf("created %d\n", n);

    for (int i = 0; i < N; i++)
        arm(timers[i], 3600 * SEC, 0);
    printf("armed %d for an hour\n", N);
    CHECK(setrlimit(RLIMIT_SIGPENDING, &old) == 0);
    block(SIGRTMIN);
    int soon[SOON];
    for (int k = 0; k < SOON; k++) {
        arm(timers[k * (N / SOON)], 10 * MS, 0);
        soon[k] = timer_int(timers[k * (N / SOON)]);
    }
    printf("armed %d of them for 10 ms\n", SOON);
    qsort(soon, SOON, sizeof soon[0], by_value);

    static char seen[SOON];
    sigset_t rt = sigset_of(SIGRTMIN);
    int good = 0;
    for (int i = 0; i < SOON; i++) {
        siginfo_t si = take(&rt);
        const int *hit = bsearch(&si.si_timerid, soon, SOON, sizeof soon[0], by_value);
        int index = si.si_value.sival_int; /* the timer's index, from its sigevent */
        if (si.si_signo == SIGRTMIN && si.si_code == SI_TIMER && hit != NULL &&
            index % (N / SOON) == 0 && index >= 0 && index < N &&
            timer_int(timers[index]) == si.si_timerid && !seen[hit - soon]) {
            seen[hit - soon] = 1;
            good++;
        }
    }
    printf("received %d signals, each from one of the %d, none twice%s\n", SOON, SOON,
           good == SOON ? "" : ": NO");
    siginfo_t si;
    struct timespec wait = ns_ts(20 * MS);
    SHOW("sigtimedwait 20 ms", sigtimedwait(&rt, &si, &wait));
    for (int i = 0; i < N; i++)
        CHECK(timer_delete(timers[i]) == 0);
    printf("deleted %d\n", N);
    free(timers);
    return 0;
}
