/* sig_sigwait_main.c: main blocks SIGRTMIN and SIGALRM and takes them with sigwait, from two
 * periodic SIGEV_SIGNAL timers (5 ms and 7 ms), while a SIGEV_THREAD timer runs beside them
 * (on tempora: its driver thread exists). Both signals are process-directed and kill the
 * process if a thread that does not block them takes them: every thread a timer library
 * starts must block them. Prints:
 *   create SIGEV_THREAD every 3 ms: 0
 *   create SIGEV_SIGNAL SIGRTMIN every 5 ms: 0
 *   create SIGEV_SIGNAL SIGALRM every 7 ms: 0
 *   sigwait in main: 20 signals
 *   both SIGRTMIN and SIGALRM among them: yes
 *   SIGEV_THREAD function: at least 3 calls
 *   deleted: 0 0 0 */
#define _GNU_SOURCE
#include "sig.h"

static atomic_int thread_calls;
static sem_t three;

static void on_expiry(union sigval v)
{
    (void)v;
    if (atomic_fetch_add(&thread_calls, 1) == 2)
        sem_post(&three);
}

int main(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN);
    sigaddset(&set, SIGALRM);
    CHECK(pthread_sigmask(SIG_BLOCK, &set, NULL) == 0);
    watchdog(20);
    CHECK(sem_init(&three, 0, 0) == 0);

    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD;
    sev.sigev_notify_function = on_expiry;
    timer_t th = create("create SIGEV_THREAD every 3 ms", CLOCK_MONOTONIC, &sev);
    sev = sigev_signal(SIGRTMIN, 1);
    timer_t rt = create("create SIGEV_SIGNAL SIGRTMIN every 5 ms", CLOCK_MONOTONIC, &sev);
    sev = sigev_signal(SIGALRM, 2);
    timer_t alrm = create("create SIGEV_SIGNAL SIGALRM every 7 ms", CLOCK_MONOTONIC, &sev);
    arm(th, 3 * MS, 3 * MS);
    arm(rt, 5 * MS, 5 * MS);
    arm(alrm, 7 * MS, 7 * MS);

    int n = 0, rts = 0, alrms = 0;
    while (n < 20) {
        int sig;
        CHECK(sigwait(&set, &sig) == 0);
        n++;
        rts += sig == SIGRTMIN;
        alrms += sig == SIGALRM;
    }
    printf("sigwait in main: %d signals\n", n);
    printf("both SIGRTMIN and SIGALRM among them: %s\n",
           rts > 0 && alrms > 0 && rts + alrms == n ? "yes" : "no");
    struct timespec until;
    CHECK(clock_gettime(CLOCK_REALTIME, &until) == 0);
    until.tv_sec += 5;
    while (sem_timedwait(&three, &until) != 0)
        CHECK(errno == EINTR);
    printf("SIGEV_THREAD function: at least 3 calls\n");
    int d1 = timer_delete(rt), d2 = timer_delete(alrm), d3 = timer_delete(th);
    printf("deleted: %d %d %d\n", d1, d2, d3);
    return 0;
}
