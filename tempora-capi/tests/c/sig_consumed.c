/* sig_consumed.c: a timer's signal taken without a handler running, and an expiry that comes
 * as the signal is taken.
 *
 * Part 1: four 100 ms periodic SIGEV_SIGNAL timers, their signals blocked from before the
 * arming for 1.05 s, then unblocked; timer_getoverrun right after. The kernel takes a blocked
 * signal at the unblock, which settles its overrun, whatever then becomes of it:
 *   handler:        a handler runs: 9
 *   SIGCONT SIG_DFL: consumed by its default action (nothing): 9
 *   SIG_IGN before: ignored throughout, queued only because blocked, discarded at the unblock: 9
 *   SIG_IGN while blocked: queued while handled, then SIG_IGN discards it unseen: 0
 * and 250 ms later (the signal now ignored and unblocked, or handled) the same counts, but for
 * the handler's timer, whose later signals are delivered.
 *
 * Part 2: a timer at 200 ms, then every 300 ms, its signal (SIGALRM) blocked until just after
 * the expiry at 800 ms: the expiries at 500 and 800 ms came while the first signal was
 * pending, so they are its overruns: one handler call at the unblock, getoverrun 2, and no
 * other call before the next period (1100 ms).
 *
 * Prints:
 *   create SIGEV_SIGNAL: 0
 *   handler: getoverrun 9, 1 handler call
 *   SIGCONT SIG_DFL: getoverrun 9
 *   SIG_IGN before: getoverrun 9
 *   SIG_IGN while blocked: getoverrun 0
 *   later: handler calls went on: yes, SIGCONT SIG_DFL 9, SIG_IGN before 9, SIG_IGN while blocked 0
 *   at the expiry: 1 handler call, getoverrun 2
 *   before the next period: 1 handler call
 * A part held up past its window (so that a count could differ by one) starts again, up to 5
 * times. */
#define _GNU_SOURCE
#include "sig.h"

#define PERIOD (100 * MS)

static atomic_int calls_rt, calls_alrm;

static void on_rt(int signo, siginfo_t *si, void *uc)
{
    (void)signo, (void)si, (void)uc;
    atomic_fetch_add(&calls_rt, 1);
}

static void on_alrm(int signo, siginfo_t *si, void *uc)
{
    (void)signo, (void)si, (void)uc;
    atomic_fetch_add(&calls_alrm, 1);
}

static void disposition(int signo, void (*h)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    CHECK(sigaction(signo, &sa, NULL) == 0);
}

static void block_all(const int *signos, int n)
{
    for (int i = 0; i < n; i++)
        block(signos[i]);
}

int main(void)
{
    watchdog(30);
    const int HANDLER = SIGRTMIN + 1, IGN_BEFORE = SIGRTMIN + 2, IGN_WHILE = SIGRTMIN + 3;
    const int signos[4] = {HANDLER, SIGCONT, IGN_BEFORE, IGN_WHILE};
    timer_t t[4];

    for (int attempt = 0;; attempt++) {
        on(HANDLER, on_rt);
        disposition(SIGCONT, SIG_DFL);
        disposition(IGN_BEFORE, SIG_IGN);
        on(IGN_WHILE, on_rt);
        block_all(signos, 4);
        atomic_store(&calls_rt, 0);
        for (int i = 0; i < 4; i++) {
            struct sigevent sev = sigev_signal(signos[i], i);
            if (attempt == 0 && i == 0)
                t[i] = create("create SIGEV_SIGNAL", CLOCK_MONOTONIC, &sev);
            else
                CHECK(timer_create(CLOCK_MONOTONIC, &sev, &t[i]) == 0);
        }
        int64_t t0 = now_ns();
        for (int i = 0; i < 4; i++)
            arm(t[i], PERIOD, PERIOD);
        int64_t t1 = now_ns();
        sleep_until(t1 + 21 * PERIOD / 2);
        disposition(IGN_WHILE, SIG_IGN);
        int64_t b = now_ns();
        for (int i = 0; i < 4; i++)
            unblock(signos[i]); /* the handler runs here */
        int o[4];
        for (int i = 0; i < 4; i++)
            o[i] = timer_getoverrun(t[i]);
        int64_t a = now_ns();
        int n = atomic_load(&calls_rt);
        sleep_until(a + 5 * PERIOD / 2);
        int later[4];
        for (int i = 0; i < 4; i++)
            later[i] = timer_getoverrun(t[i]);
        int later_calls = atomic_load(&calls_rt);
        for (int i = 0; i < 4; i++)
            CHECK(timer_delete(t[i]) == 0);
        /* Every step of the unblock within the 11th period of every arming. */
        if (!(b - t1 >= 10 * PERIOD && a - t0 < 11 * PERIOD) && attempt < 4) {
            fprintf(stderr, "sig_consumed: part 1 held up (unblocked at %lld ms), again\n",
                    (long long)((a - t0) / MS));
            block_all(signos, 4);
            continue;
        }
        printf("handler: getoverrun %d, %d handler call%s\n", o[0], n, n == 1 ? "" : "s");
        printf("SIGCONT SIG_DFL: getoverrun %d\n", o[1]);
        printf("SIG_IGN before: getoverrun %d\n", o[2]);
        printf("SIG_IGN while blocked: getoverrun %d\n", o[3]);
        /* The handler's timer's later count depends on how promptly its handler ran (the
         * timers module's table, first row): only that it went on is printed. */
        printf("later: handler calls went on: %s, SIGCONT SIG_DFL %d, SIG_IGN before %d, "
               "SIG_IGN while blocked %d\n",
               later_calls > n ? "yes" : "no", later[1], later[2], later[3]);
        fprintf(stderr, "sig_consumed: the handler's timer's getoverrun later: %d\n", later[0]);
        break;
    }

    on(SIGALRM, on_alrm);
    block(SIGALRM);
    for (int attempt = 0;; attempt++) {
        struct sigevent sev = sigev_signal(SIGALRM, 0);
        timer_t u;
        CHECK(timer_create(CLOCK_MONOTONIC, &sev, &u) == 0);
        atomic_store(&calls_alrm, 0);
        int64_t t0 = now_ns();
        arm(u, 2 * PERIOD, 3 * PERIOD);
        int64_t t1 = now_ns();
        sleep_until(t1 + 8 * PERIOD); /* just after the expiry at 800 ms */
        unblock(SIGALRM);             /* the handler runs here */
        int o = timer_getoverrun(u);
        block(SIGALRM);
        int64_t a = now_ns();
        int n = atomic_load(&calls_alrm);
        unblock(SIGALRM);
        sleep_until(t0 + 21 * PERIOD / 2);
        int m = atomic_load(&calls_alrm);
        block(SIGALRM);
        int64_t c = now_ns();
        CHECK(timer_delete(u) == 0);
        /* The unblock before the period at 1100 ms, the last count too. */
        if (!(a - t0 < 11 * PERIOD && c - t0 < 11 * PERIOD) && attempt < 4) {
            fprintf(stderr, "sig_consumed: part 2 held up (at %lld ms), again\n",
                    (long long)((c - t0) / MS));
            continue;
        }
        printf("at the expiry: %d handler call%s, getoverrun %d\n", n, n == 1 ? "" : "s", o);
        printf("before the next period: %d handler call%s\n", m, m == 1 ? "" : "s");
        break;
    }
    return 0;
}
