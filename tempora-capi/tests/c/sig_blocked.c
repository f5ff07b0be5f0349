/* sig_blocked.c: the kernel selftest's check_overrun. A 100 ms periodic SIGEV_SIGNAL timer
 * whose signal (SIGRTMIN, with a handler) stays blocked for 1.05 s from the arming: ten
 * expiries, but a timer has at most one signal queued, so unblocking runs the handler once
 * and timer_getoverrun says the nine expiries folded into it. Prints:
 *   create SIGEV_SIGNAL SIGRTMIN: 0
 *   while blocked: SIGRTMIN pending, 0 handler calls
 *   after unblocking: 1 handler call
 *   handler: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 5, si_overrun >= 0
 *   getoverrun in the handler: 9
 *   getoverrun after: 9
 * si_overrun is printed only as >= 0: the kernel fills it in when the signal is taken (9),
 * tempora when it queues the signal, and a queued signal cannot be changed from user space;
 * its value goes to stderr, which the builds need not agree on.
 * If the program was held up so long that the count could be 8 or 10 (unblocked outside
 * [1.0 s, 1.1 s) after the arming), it starts again with a new timer, up to 5 times. */
#define _GNU_SOURCE
#include "sig.h"

#define PERIOD (100 * MS)

static timer_t timer;
static atomic_int calls;
static int signo_seen, code, timerid, value, overrun, getoverrun;

static void on_timer(int signo, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved = errno;
    if (si->si_timerid == timer_int(timer) && atomic_fetch_add(&calls, 1) == 0) {
        signo_seen = signo;
        code = si->si_code;
        timerid = si->si_timerid;
        value = si->si_value.sival_int;
        overrun = si->si_overrun;
        getoverrun = timer_getoverrun(timer);
    }
    errno = saved;
}

int main(void)
{
    watchdog(30);
    on(SIGRTMIN, on_timer);
    block(SIGRTMIN);
    struct sigevent sev = sigev_signal(SIGRTMIN, 5);
    for (int attempt = 0;; attempt++) {
        timer_t t;
        if (attempt == 0)
            t = create("create SIGEV_SIGNAL SIGRTMIN", CLOCK_MONOTONIC, &sev);
        else
            CHECK(timer_create(CLOCK_MONOTONIC, &sev, &t) == 0);
        timer = t;
        atomic_store(&calls, 0);
        int64_t t0 = now_ns();
        arm(t, PERIOD, PERIOD);
        int64_t t1 = now_ns();
        sleep_until(t0 + 10 * PERIOD + PERIOD / 2);
        sigset_t pending;
        CHECK(sigpending(&pending) == 0);
        int was_pending = sigismember(&pending, SIGRTMIN);
        int calls_blocked = atomic_load(&calls);
        int64_t before = now_ns();
        unblock(SIGRTMIN); /* the handler runs here, before it returns */
        block(SIGRTMIN);
        int64_t after = now_ns();
        int after_overrun = timer_getoverrun(t);
        arm(t, 0, 0);
        /* Expiries at start + k * PERIOD, start in [t0, t1]: 10 of them by the unblocking. */
        if ((before - t1 < 10 * PERIOD || after - t0 >= 11 * PERIOD) && attempt < 4) {
            fprintf(stderr, "sig_blocked: held up (unblocked at %lld ms; getoverrun %d), again\n",
                    (long long)((after - t0) / MS), after_overrun);
            continue;
        }
        printf("while blocked: SIGRTMIN %s, %d handler calls\n",
               was_pending ? "pending" : "NOT PENDING", calls_blocked);
        int n = atomic_load(&calls);
        printf("after unblocking: %d handler call%s\n", n, n == 1 ? "" : "s");
        if (n > 0) {
            print_fields("handler", signo_seen, code, timerid, t, value, overrun, 0);
            printf("getoverrun in the handler: %d\n", getoverrun);
        }
        printf("getoverrun after: %d\n", after_overrun);
        fprintf(stderr, "sig_blocked: the handler's si_overrun: %d\n", overrun);
        break;
    }
    return 0;
}
