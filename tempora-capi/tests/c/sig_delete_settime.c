/* sig_delete_settime.c: the kernel selftest's check_rearm and check_delete. A 10 ms periodic
 * SIGEV_SIGNAL timer on SIGRTMIN (a handler installed, the signal blocked) has its signal
 * pending; then the timer is re-armed (a one-shot in 10 s), disarmed, or deleted. Linux
 * (6.13 and later) discards the pending signal when it would be taken: sigpending still
 * shows it, but sigtimedwait with a zero timeout finds nothing (and it is gone then), and
 * unblocking runs no handler. It prints what the program observes; for each of
 * "re-armed", "disarmed" and "deleted":
 *   create SIGEV_SIGNAL SIGRTMIN: 0                                  (once)
 *   <op>: sigpending before: SIGRTMIN pending
 *   <op>: sigpending after: SIGRTMIN pending
 *   <op>: sigtimedwait 0: -1 EAGAIN
 *   <op>: sigpending after sigtimedwait: SIGRTMIN not pending
 *   <op>: unblocked: 0 handler calls
 * (sigtimedwait and the unblocking are tried on two timers, one each.) On tempora the signal
 * already queued is delivered: "sigtimedwait 0: <SIGRTMIN>" and "unblocked: 1 handler calls"
 * (user space cannot retract a queued signal: the divergence table of tempora's `timers`
 * module; tests/c_suite.rs checks exactly that difference). */
#define _GNU_SOURCE
#include "sig.h"

static atomic_int calls;

static void on_timer(int signo, siginfo_t *si, void *uc)
{
    (void)signo;
    (void)si;
    (void)uc;
    atomic_fetch_add(&calls, 1);
}

static const char *pending(void)
{
    sigset_t set;
    CHECK(sigpending(&set) == 0);
    return sigismember(&set, SIGRTMIN) ? "pending" : "not pending";
}

enum op { REARM, DISARM, DELETE };

/* A new periodic timer, its signal pending (blocked) when this returns. */
static timer_t pending_timer(void)
{
    static int created;
    struct sigevent sev = sigev_signal(SIGRTMIN, 11);
    timer_t t;
    if (created++ == 0)
        t = create("create SIGEV_SIGNAL SIGRTMIN", CLOCK_MONOTONIC, &sev);
    else
        CHECK(timer_create(CLOCK_MONOTONIC, &sev, &t) == 0);
    arm(t, 10 * MS, 10 * MS);
    int64_t give_up = now_ns() + 5 * SEC;
    while (strcmp(pending(), "pending") != 0) {
        CHECK(now_ns() < give_up);
        sleep_until(now_ns() + MS);
    }
    return t;
}

static void apply(enum op op, timer_t t)
{
    switch (op) {
    case REARM: arm(t, 10 * SEC, 0); break;
    case DISARM: arm(t, 0, 0); break;
    case DELETE: CHECK(timer_delete(t) == 0); break;
    }
}

int main(void)
{
    watchdog(20);
    on(SIGRTMIN, on_timer);
    static const char *const names[] = {"re-armed", "disarmed", "deleted"};
    sigset_t rt = sigset_of(SIGRTMIN);
    for (enum op op = REARM; op <= DELETE; op++) {
        const char *name = names[op];
        block(SIGRTMIN);
        timer_t t = pending_timer();
        printf("%s: sigpending before: SIGRTMIN %s\n", name, pending());
        apply(op, t);
        printf("%s: sigpending after: SIGRTMIN %s\n", name, pending());
        siginfo_t si;
        struct timespec zero = {0, 0};
        char what[64];
        snprintf(what, sizeof what, "%s: sigtimedwait 0", name);
        SHOW(what, sigtimedwait(&rt, &si, &zero));
        printf("%s: sigpending after sigtimedwait: SIGRTMIN %s\n", name, pending());
        if (op != DELETE)
            CHECK(timer_delete(t) == 0);

        t = pending_timer();
        atomic_store(&calls, 0);
        apply(op, t);
        unblock(SIGRTMIN); /* a pending signal's handler would run here */
        printf("%s: unblocked: %d handler calls\n", name, atomic_load(&calls));
        if (op != DELETE)
            CHECK(timer_delete(t) == 0);
    }
    return 0;
}
