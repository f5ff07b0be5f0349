/* sig_handler.c: a SIGEV_SIGNAL timer on SIGRTMIN caught by an SA_SIGINFO handler, which also
 * calls timer_getoverrun on its timer. A one-shot (waited for with sem_wait), then a periodic
 * timer for three periods (waited for with sigsuspend). Prints:
 *   create SIGEV_SIGNAL SIGRTMIN sival_int 42: 0
 *   one-shot: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 42, si_overrun 0
 *   one-shot: 1 handler call, getoverrun in the handler 0
 *   periodic N: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 42, si_overrun >= 0
 *   periodic N: getoverrun in the handler >= si_overrun: yes        (N = 1, 2, 3)
 *   delete: 0
 * (A periodic signal's si_overrun depends on how late it is taken: printed only as >= 0.) */
#define _GNU_SOURCE
#include "sig.h"

struct seen {
    int signo, code, timerid, value, overrun, getoverrun;
};

static timer_t timer;
static struct seen seen[8];
static atomic_int calls;
static sem_t got;

static void on_timer(int signo, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved = errno;
    int i = atomic_fetch_add(&calls, 1);
    if (i < 8)
        seen[i] = (struct seen){signo, si->si_code, si->si_timerid, si->si_value.sival_int,
                                si->si_overrun, timer_getoverrun(timer)};
    sem_post(&got);
    errno = saved;
}

int main(void)
{
    watchdog(20);
    CHECK(sem_init(&got, 0, 0) == 0);
    on(SIGRTMIN, on_timer);
    struct sigevent sev = sigev_signal(SIGRTMIN, 42);
    timer = create("create SIGEV_SIGNAL SIGRTMIN sival_int 42", CLOCK_MONOTONIC, &sev);

    /* One-shot: the handler runs once, with the timer's fields. Armed with the signal
     * blocked, so that the handler cannot interrupt timer_settime itself. */
    block(SIGRTMIN);
    arm(timer, 10 * MS, 0);
    unblock(SIGRTMIN);
    while (sem_wait(&got) != 0)
        CHECK(errno == EINTR);
    sleep_until(now_ns() + 50 * MS); /* a second call would come meanwhile */
    struct seen s = seen[0];
    print_fields("one-shot", s.signo, s.code, s.timerid, timer, s.value, s.overrun, 1);
    printf("one-shot: %d handler call, getoverrun in the handler %d\n", atomic_load(&calls),
           s.getoverrun);

    /* Periodic, 3 periods: SIGRTMIN blocked but while sigsuspend waits. */
    atomic_store(&calls, 0);
    sigset_t old;
    sigset_t rt = sigset_of(SIGRTMIN);
    CHECK(pthread_sigmask(SIG_BLOCK, &rt, &old) == 0);
    arm(timer, 10 * MS, 10 * MS);
    while (atomic_load(&calls) < 3)
        sigsuspend(&old);
    arm(timer, 0, 0);
    for (int i = 0; i < 3; i++) {
        char what[32];
        snprintf(what, sizeof what, "periodic %d", i + 1);
        s = seen[i];
        print_fields(what, s.signo, s.code, s.timerid, timer, s.value, s.overrun, 0);
        /* Equal on the kernel; with tempora only for a signal taken within its period (see
         * sig_signalfd.c). */
        printf("%s: getoverrun in the handler >= si_overrun: %s\n", what,
               s.getoverrun >= s.overrun ? "yes" : "no");
    }
    SHOW("delete", timer_delete(timer));
    return 0;
}
