/* sig_waitinfo.c: a SIGEV_SIGNAL timer on SIGRTMIN with the signal blocked, taken with
 * sigwaitinfo (a one-shot) and sigtimedwait (a periodic timer, three periods); before the timer
 * is armed, sigtimedwait finds nothing. Prints:
 *   create SIGEV_SIGNAL SIGRTMIN sival_int 7: 0
 *   sigtimedwait 20 ms, timer not armed: -1 EAGAIN
 *   sigwaitinfo one-shot: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 7, si_overrun 0
 *   sigwaitinfo one-shot: getoverrun 0
 *   sigtimedwait periodic N: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 7, si_overrun >= 0
 *   sigtimedwait periodic N: getoverrun >= si_overrun: yes          (N = 1, 2, 3)
 *   delete: 0 */
#define _GNU_SOURCE
#include "sig.h"

int main(void)
{
    watchdog(20);
    block(SIGRTMIN);
    sigset_t rt = sigset_of(SIGRTMIN);
    struct sigevent sev = sigev_signal(SIGRTMIN, 7);
    timer_t t = create("create SIGEV_SIGNAL SIGRTMIN sival_int 7", CLOCK_MONOTONIC, &sev);
    siginfo_t si;
    struct timespec wait = ns_ts(20 * MS);
    SHOW("sigtimedwait 20 ms, timer not armed", sigtimedwait(&rt, &si, &wait));

    arm(t, 10 * MS, 0);
    int r;
    while ((r = sigwaitinfo(&rt, &si)) == -1 && errno == EINTR) {
    }
    CHECK(r == SIGRTMIN);
    print_siginfo("sigwaitinfo one-shot", &si, t, 1);
    printf("sigwaitinfo one-shot: getoverrun %d\n", timer_getoverrun(t));

    arm(t, 10 * MS, 10 * MS);
    for (int i = 0; i < 3; i++) {
        char what[48];
        snprintf(what, sizeof what, "sigtimedwait periodic %d", i + 1);
        si = take(&rt);
        /* Read before the next signal is taken: it says this one's overrun. */
        int overrun = timer_getoverrun(t);
        print_siginfo(what, &si, t, 0);
        /* Equal on the kernel; with tempora only for a signal taken within its period (see
         * sig_signalfd.c). */
        printf("%s: getoverrun >= si_overrun: %s\n", what, overrun >= si.si_overrun ? "yes" : "no");
        fprintf(stderr, "sig_waitinfo: %s: getoverrun %d, si_overrun %d\n", what, overrun,
                si.si_overrun);
    }
    arm(t, 0, 0);
    SHOW("delete", timer_delete(t));
    return 0;
}
