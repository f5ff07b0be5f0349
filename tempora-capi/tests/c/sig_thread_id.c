/* sig_thread_id.c: SIGEV_THREAD_ID (Linux's: SIGEV_SIGNAL to one thread, named by its gettid()
 * in sigev_notify_thread_id). SIGRTMIN is blocked in every thread and taken with sigwaitinfo /
 * sigtimedwait.
 *   A periodic timer to a second thread, which takes three signals while main waits.
 *   A one-shot to main: the second thread, waiting 300 ms with sigtimedwait, never sees it
 *   (it is the thread's, not the process's); main takes it.
 *   What timer_create refuses: a tid that is no thread of this process, signal numbers out
 *   of [1, SIGRTMAX] (SIGKILL and SIGSTOP are accepted; those timers are never armed).
 * Prints:
 *   create SIGEV_THREAD_ID to the second thread sival_int 21: 0
 *   to the second thread: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 21, si_overrun >= 0
 *   to the second thread: 3 signals, taken by the second thread
 *   create SIGEV_THREAD_ID to main sival_int 22: 0
 *   to main: the second thread's sigtimedwait 300 ms: -1 EAGAIN
 *   to main: si_signo SIGRTMIN, si_code SI_TIMER, si_timerid matches, sival_int 22, si_overrun 0
 *   to main: taken by main
 *   then one "create ...: 0" or "create ...: -1 EINVAL" line per refused or accepted case. */
#define _GNU_SOURCE
#include "sig.h"

static sem_t ready, done;
static pid_t worker_tid;
static siginfo_t first;
static int all_here = 1, wait_result, wait_errno;

static void *worker(void *arg)
{
    (void)arg;
    sigset_t rt = sigset_of(SIGRTMIN);
    worker_tid = gettid();
    sem_post(&ready);
    /* Three from the periodic timer aimed here. */
    for (int i = 0; i < 3; i++) {
        siginfo_t si = take(&rt);
        if (i == 0)
            first = si;
        if (gettid() != worker_tid)
            all_here = 0;
    }
    sem_post(&done);
    /* Then a one-shot aimed at main: never this thread's. */
    CHECK(sem_wait(&ready) == 0);
    struct timespec wait = ns_ts(300 * MS);
    siginfo_t si;
    errno = 0;
    wait_result = sigtimedwait(&rt, &si, &wait);
    wait_errno = errno;
    sem_post(&done);
    return NULL;
}

static void wait_sem(sem_t *s)
{
    while (sem_wait(s) != 0)
        CHECK(errno == EINTR);
}

/* timer_create with SIGEV_THREAD_ID (or `notify`) to `tid` with `signo`, printed; a timer it
 * makes is deleted unarmed. */
static void try_create(const char *what, int notify, pid_t tid, int signo)
{
    struct sigevent sev = sigev_signal(signo, 0);
    sev.sigev_notify = notify;
    sev.sigev_notify_thread_id = tid;
    timer_t t;
    errno = 0;
    int r = timer_create(CLOCK_MONOTONIC, &sev, &t);
    printf("%s: %d%s%s\n", what, r, r == -1 ? " " : "", r == -1 ? err_name(errno) : "");
    if (r == 0)
        CHECK(timer_delete(t) == 0);
}

int main(void)
{
    watchdog(20);
    block(SIGRTMIN); /* before the second thread starts, so every thread has it blocked */
    CHECK(sem_init(&ready, 0, 0) == 0 && sem_init(&done, 0, 0) == 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, worker, NULL) == 0);
    wait_sem(&ready);

    struct sigevent sev = sigev_signal(SIGRTMIN, 21);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_notify_thread_id = worker_tid;
    timer_t t = create("create SIGEV_THREAD_ID to the second thread sival_int 21",
                       CLOCK_MONOTONIC, &sev);
    arm(t, 10 * MS, 10 * MS);
    wait_sem(&done);
    CHECK(timer_delete(t) == 0);
    print_siginfo("to the second thread", &first, t, 0);
    printf("to the second thread: 3 signals, taken by %s\n",
           all_here ? "the second thread" : "ANOTHER THREAD");

    sev = sigev_signal(SIGRTMIN, 22);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_notify_thread_id = gettid();
    t = create("create SIGEV_THREAD_ID to main sival_int 22", CLOCK_MONOTONIC, &sev);
    arm(t, 10 * MS, 0);
    sem_post(&ready);
    wait_sem(&done);
    printf("to main: the second thread's sigtimedwait 300 ms: %d%s%s\n", wait_result,
           wait_result == -1 ? " " : "", wait_result == -1 ? err_name(wait_errno) : "");
    sigset_t rt = sigset_of(SIGRTMIN);
    siginfo_t si = take(&rt);
    print_siginfo("to main", &si, t, 1);
    printf("to main: taken by %s\n", gettid() == getpid() ? "main" : "ANOTHER THREAD");
    CHECK(timer_delete(t) == 0);
    CHECK(pthread_join(th, NULL) == 0);

    try_create("create SIGEV_THREAD_ID to the parent process", SIGEV_THREAD_ID, getppid(),
               SIGRTMIN);
    try_create("create SIGEV_THREAD_ID to tid 0", SIGEV_THREAD_ID, 0, SIGRTMIN);
    try_create("create SIGEV_THREAD_ID to tid -1", SIGEV_THREAD_ID, -1, SIGRTMIN);
    try_create("create SIGEV_THREAD_ID to main", SIGEV_THREAD_ID, gettid(), SIGRTMIN);
    try_create("create SIGEV_THREAD_ID to main, signal 0", SIGEV_THREAD_ID, gettid(), 0);
    try_create("create SIGEV_THREAD_ID to main, signal 65", SIGEV_THREAD_ID, gettid(), 65);
    try_create("create SIGEV_THREAD_ID|SIGEV_THREAD to main", SIGEV_THREAD_ID | SIGEV_THREAD,
               gettid(), SIGRTMIN);
    try_create("create SIGEV_SIGNAL signal 0", SIGEV_SIGNAL, 0, 0);
    try_create("create SIGEV_SIGNAL signal -1", SIGEV_SIGNAL, 0, -1);
    try_create("create SIGEV_SIGNAL signal 65", SIGEV_SIGNAL, 0, 65);
    try_create("create SIGEV_SIGNAL signal 1", SIGEV_SIGNAL, 0, 1);
    try_create("create SIGEV_SIGNAL SIGRTMAX", SIGEV_SIGNAL, 0, SIGRTMAX);
    try_create("create SIGEV_SIGNAL SIGKILL", SIGEV_SIGNAL, 0, SIGKILL);
    try_create("create SIGEV_SIGNAL SIGSTOP", SIGEV_SIGNAL, 0, SIGSTOP);
    return 0;
}
