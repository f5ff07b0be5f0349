/* sig_null_sigevent.c: timer_create with a NULL sigevent means SIGEV_SIGNAL with SIGALRM and
 * sival_int the timer's ID. The signal is blocked and taken with sigtimedwait. Prints:
 *   create CLOCK_MONOTONIC NULL sigevent: 0
 *   si_signo SIGALRM, si_code SI_TIMER, si_timerid matches, si_overrun 0
 *   sival_int == timer id: yes
 *   delete: 0 */
#define _GNU_SOURCE
#include "sig.h"

int main(void)
{
    watchdog(20);
    block(SIGALRM);
    timer_t t = create("create CLOCK_MONOTONIC NULL sigevent", CLOCK_MONOTONIC, NULL);
    arm(t, 10 * MS, 0);
    sigset_t alrm = sigset_of(SIGALRM);
    siginfo_t si = take(&alrm);
    printf("si_signo %s, si_code %s, si_timerid %s, si_overrun %d\n", sig_name(si.si_signo),
           code_name(si.si_code), si.si_timerid == timer_int(t) ? "matches" : "DIFFERS",
           si.si_overrun);
    printf("sival_int == timer id: %s\n", si.si_value.sival_int == timer_int(t) ? "yes" : "no");
    SHOW("delete", timer_delete(t));
    return 0;
}
