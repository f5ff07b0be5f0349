/* sig_ignored.c: the kernel selftest's check_sig_ign, shorter. A 100 ms periodic SIGEV_SIGNAL
 * timer on SIGRTMIN whose signal is ignored (SIG_IGN) for a while, then caught again: one
 * signal, and timer_getoverrun counts every period since the first expiry.
 *   blocked:   signal blocked throughout; SIG_IGN at 0.25 s from the arming (the first
 *              expiry's signal is pending then), the handler back at 0.55 s, unblocked at
 *              0.85 s: 8 expiries, so one call and an overrun of 7.
 *   unblocked: SIG_IGN from the arming, so the first expiry's signal (0.1 s) comes while
 *              ignored; the handler back at 0.55 s: 5 expiries, one call, overrun 4. The
 *              kernel queues the signal during the sigaction call that restores the handler;
 *              user space cannot see that call, and tempora queues it at its next look (10 ms
 *              at most): the program waits 25 ms with the signal unblocked before counting.
 * Prints:
 *   create SIGEV_SIGNAL SIGRTMIN: 0
 *   blocked: before SIG_IGN: SIGRTMIN pending
 *   blocked: while ignored: SIGRTMIN not pending
 *   blocked: handler back: SIGRTMIN pending, 0 handler calls
 *   blocked: after unblocking: 1 handler call, getoverrun 7
 *   blocked: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 3, si_overrun >= 0
 *   unblocked: handler back: 1 handler call, getoverrun 4
 *   unblocked: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 3, si_overrun >= 0
 * si_overrun is printed only as >= 0 (see sig_blocked.c; its value goes to stderr). A part
 * held up past a step's 100 ms window (so that a count could differ by one) starts again
 * with a new timer, up to 5 times. */
#define _GNU_SOURCE
#include "sig.h"

#define PERIOD (100 * MS)

static timer_t timer;
static atomic_int calls;
static int signo_seen, code, timerid, value, overrun;

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
    }
    errno = saved;
}

static void ignore(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    CHECK(sigaction(SIGRTMIN, &sa, NULL) == 0);
}

static const char *pending(void)
{
    sigset_t set;
    CHECK(sigpending(&set) == 0);
    return sigismember(&set, SIGRTMIN) ? "pending" : "not pending";
}

static struct sigevent sev;
static int64_t t0, t1;

/* A new timer, armed for 100 ms every 100 ms; t0 and t1 bracket the arming. */
static timer_t start(void)
{
    static int created;
    timer_t t;
    if (created++ == 0)
        t = create("create SIGEV_SIGNAL SIGRTMIN", CLOCK_MONOTONIC, &sev);
    else
        CHECK(timer_create(CLOCK_MONOTONIC, &sev, &t) == 0);
    timer = t;
    atomic_store(&calls, 0);
    t0 = now_ns();
    arm(t, PERIOD, PERIOD);
    t1 = now_ns();
    return t;
}

/* Whether [before, after] lies within [k, k + 1) periods of the arming, whichever instant in
 * [t0, t1] it was. */
static int within(int64_t before, int64_t after, int k)
{
    return before - t1 >= k * PERIOD && after - t0 < (k + 1) * PERIOD;
}

static void print_handler(const char *what, timer_t t)
{
    if (atomic_load(&calls) > 0)
        print_fields(what, signo_seen, code, timerid, t, value, overrun, 0);
    fprintf(stderr, "sig_ignored: %s: the handler's si_overrun: %d\n", what, overrun);
}

int main(void)
{
    watchdog(30);
    sev = sigev_signal(SIGRTMIN, 3);
    on(SIGRTMIN, on_timer);
    block(SIGRTMIN);
    for (int attempt = 0;; attempt++) {
        timer_t t = start();
        sleep_until(t0 + 5 * PERIOD / 2);
        int64_t b1 = now_ns();
        const char *p1 = pending();
        ignore();
        int64_t a1 = now_ns();
        const char *p2 = pending();
        sleep_until(t0 + 11 * PERIOD / 2);
        int64_t b2 = now_ns();
        on(SIGRTMIN, on_timer);
        int64_t a2 = now_ns();
        const char *p3 = pending();
        int calls_blocked = atomic_load(&calls);
        sleep_until(t0 + 17 * PERIOD / 2);
        int64_t b3 = now_ns();
        unblock(SIGRTMIN); /* the handler runs here */
        block(SIGRTMIN);
        int64_t a3 = now_ns();
        int n = atomic_load(&calls);
        int o = timer_getoverrun(t);
        arm(t, 0, 0);
        if (!(within(b1, a1, 2) && within(b2, a2, 5) && within(b3, a3, 8)) && attempt < 4) {
            fprintf(stderr,
                    "sig_ignored: blocked part held up (steps at %lld, %lld, %lld ms; %d calls, "
                    "getoverrun %d), again\n",
                    (long long)((a1 - t0) / MS), (long long)((a2 - t0) / MS),
                    (long long)((a3 - t0) / MS), n, o);
            continue;
        }
        printf("blocked: before SIG_IGN: SIGRTMIN %s\n", p1);
        printf("blocked: while ignored: SIGRTMIN %s\n", p2);
        printf("blocked: handler back: SIGRTMIN %s, %d handler calls\n", p3, calls_blocked);
        printf("blocked: after unblocking: %d handler call%s, getoverrun %d\n", n,
               n == 1 ? "" : "s", o);
        print_handler("blocked", t);
        break;
    }

    ignore();
    unblock(SIGRTMIN);
    for (int attempt = 0;; attempt++) {
        timer_t t = start();
        sleep_until(t0 + 11 * PERIOD / 2);
        int64_t b = now_ns();
        on(SIGRTMIN, on_timer); /* the kernel runs the handler here; tempora within 10 ms */
        sleep_until(t0 + 11 * PERIOD / 2 + 25 * MS);
        block(SIGRTMIN);
        int64_t a = now_ns();
        int n = atomic_load(&calls);
        int o = timer_getoverrun(t);
        arm(t, 0, 0);
        if (!within(b, a, 5) && attempt < 4) {
            fprintf(stderr,
                    "sig_ignored: unblocked part held up (at %lld ms; %d calls, getoverrun %d), "
                    "again\n",
                    (long long)((a - t0) / MS), n, o);
            ignore();
            unblock(SIGRTMIN);
            continue;
        }
        printf("unblocked: handler back: %d handler call%s, getoverrun %d\n", n,
               n == 1 ? "" : "s", o);
        print_handler("unblocked", t);
        break;
    }
    return 0;
}
