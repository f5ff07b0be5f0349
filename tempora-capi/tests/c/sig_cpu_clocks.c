/* sig_cpu_clocks.c: timers on the CPU-time clocks (the process's, the calling thread's, a
 * process's from clock_getcpuclockid, a thread's from pthread_getcpuclockid), which tempora
 * does not time: they are the C library's kernel timers whichever way the program is switched
 * (tempora_posix.h or the drop-in), beside a tempora timer. Prints:
 *   create CLOCK_PROCESS_CPUTIME_ID SIGEV_NONE: 0
 *   gettime: 0, armed: yes
 *   delete: 0
 *   create CLOCK_THREAD_CPUTIME_ID SIGEV_NONE: 0
 *   gettime: 0, armed: yes
 *   delete: 0
 *   create clock_getcpuclockid(getpid()) SIGEV_NONE: 0
 *   gettime: 0, armed: yes
 *   delete: 0
 *   create pthread_getcpuclockid(pthread_self()) SIGEV_NONE: 0
 *   gettime: 0, armed: yes
 *   delete: 0
 *   create CLOCK_MONOTONIC SIGEV_NONE: 0
 *   create CLOCK_PROCESS_CPUTIME_ID SIGUSR1: 0
 *   si_signo SIGUSR1, si_code SI_TIMER, si_timerid matches, sival_int 7
 *   monotonic timer still armed: yes
 *   delete: 0 0
 *   create CLOCK_PROCESS_CPUTIME_ID sigev_notify 99: -1 EINVAL
 *   create CLOCK_PROCESS_CPUTIME_ID signal 65: -1 EINVAL */
#define _GNU_SOURCE
#include "sig.h"

/* A one-second SIGEV_NONE timer on `clock`: created, read back armed, deleted. */
static void one(const char *what, clockid_t clock)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_NONE;
    timer_t t = create(what, clock, &sev);
    arm(t, SEC, 0);
    struct itimerspec cur;
    errno = 0;
    int r = timer_gettime(t, &cur);
    printf("gettime: %d, armed: %s\n", r,
           r == 0 && (cur.it_value.tv_sec > 0 || cur.it_value.tv_nsec > 0) ? "yes" : "no");
    SHOW("delete", timer_delete(t));
}

int main(void)
{
    watchdog(20);
    one("create CLOCK_PROCESS_CPUTIME_ID SIGEV_NONE", CLOCK_PROCESS_CPUTIME_ID);
    one("create CLOCK_THREAD_CPUTIME_ID SIGEV_NONE", CLOCK_THREAD_CPUTIME_ID);
    clockid_t process;
    CHECK(clock_getcpuclockid(getpid(), &process) == 0);
    one("create clock_getcpuclockid(getpid()) SIGEV_NONE", process);
    clockid_t thread;
    CHECK(pthread_getcpuclockid(pthread_self(), &thread) == 0);
    one("create pthread_getcpuclockid(pthread_self()) SIGEV_NONE", thread);

    /* A CPU-time signal timer beside a tempora one: each call goes to its timer's maker. */
    struct sigevent none;
    memset(&none, 0, sizeof none);
    none.sigev_notify = SIGEV_NONE;
    timer_t mono = create("create CLOCK_MONOTONIC SIGEV_NONE", CLOCK_MONOTONIC, &none);
    arm(mono, 60 * SEC, 0);
    block(SIGUSR1);
    struct sigevent sev = sigev_signal(SIGUSR1, 7);
    timer_t cpu = create("create CLOCK_PROCESS_CPUTIME_ID SIGUSR1", CLOCK_PROCESS_CPUTIME_ID, &sev);
    arm(cpu, 5 * MS, 0);
    /* Burn CPU until the signal is pending. */
    sigset_t usr1 = sigset_of(SIGUSR1);
    struct timespec zero = {0, 0};
    siginfo_t si;
    volatile uint64_t spin = 0;
    while (sigtimedwait(&usr1, &si, &zero) == -1) {
        CHECK(errno == EAGAIN || errno == EINTR);
        for (int i = 0; i < 100000; i++)
            spin += (uint64_t)i;
    }
    printf("si_signo %s, si_code %s, si_timerid %s, sival_int %d\n", sig_name(si.si_signo),
           code_name(si.si_code), si.si_timerid == timer_int(cpu) ? "matches" : "DIFFERS",
           si.si_value.sival_int);
    struct itimerspec cur;
    CHECK(timer_gettime(mono, &cur) == 0);
    printf("monotonic timer still armed: %s\n", cur.it_value.tv_sec > 0 ? "yes" : "no");
    int d1 = timer_delete(cpu);
    int d2 = timer_delete(mono);
    printf("delete: %d %d\n", d1, d2);

    /* The sigevent is checked as the kernel checks it, after the clock. */
    timer_t t;
    struct sigevent bad;
    memset(&bad, 0, sizeof bad);
    bad.sigev_notify = 99;
    SHOW("create CLOCK_PROCESS_CPUTIME_ID sigev_notify 99",
         timer_create(CLOCK_PROCESS_CPUTIME_ID, &bad, &t));
    bad = sigev_signal(65, 0);
    SHOW("create CLOCK_PROCESS_CPUTIME_ID signal 65",
         timer_create(CLOCK_PROCESS_CPUTIME_ID, &bad, &t));
    return 0;
}
