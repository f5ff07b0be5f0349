/* fork(2) of a program whose POSIX timers are busy: each child starts as the kernel's does.
 * It sees none of the parent's timers (timer_gettime and timer_delete of a parent's ID fail
 * with EINVAL), and a timer it creates fires (SIGEV_THREAD). Built twice (tests/c_suite.rs):
 * against libc, and with -DUSE_TEMPORA through tempora_posix.h; both print the same lines.
 * The parent's busy timers are SIGEV_SIGNAL ones on both, and on tempora SIGEV_THREAD ones
 * too (callbacks on its driver at the fork); not on libc, whose SIGEV_THREAD timers start a
 * thread per expiry, and whose children then hang when forked meanwhile (about one in ten
 * here, glibc's own limit: not what this program checks).
 * FORKS (environment) sets the number of children, 100 by default. Each child has a
 * watchdog (alarm); the parent kills one still running after 10 s and says so. */
#define _GNU_SOURCE
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef USE_TEMPORA
#include <tempora_posix.h>
#endif

#define BUSY 8

static atomic_long fired;
static sem_t own;

#ifdef USE_TEMPORA
static void count(union sigval v)
{
    (void)v;
    atomic_fetch_add(&fired, 1);
}
#endif

static void on_signal(int signo)
{
    (void)signo;
    atomic_fetch_add(&fired, 1);
}

static void post(union sigval v)
{
    (void)v;
    sem_post(&own);
}

static const char *err_name(int r, int e)
{
    if (r == 0)
        return "0";
    return e == EINVAL ? "EINVAL" : strerror(e);
}

/* The child's checks: 0 if all passed; prints its lines if `say`. */
static int child(timer_t parent, int say)
{
    struct itimerspec cur, its;
    struct sigevent sev;
    struct timespec until;
    timer_t mine;
    int r, ok = 1;
    alarm(15);
    int e;
    /* errno is read once, before printf, which may set it (stdout's first use). */
    errno = 0;
    r = timer_gettime(parent, &cur);
    e = errno;
    if (say)
        printf("child: timer_gettime of the parent's timer: %s\n", err_name(r, e));
    ok &= r == -1 && e == EINVAL;
    errno = 0;
    r = timer_delete(parent);
    e = errno;
    if (say)
        printf("child: timer_delete of the parent's timer: %s\n", err_name(r, e));
    ok &= r == -1 && e == EINVAL;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD;
    sev.sigev_notify_function = post;
    if (sem_init(&own, 0, 0) != 0 || timer_create(CLOCK_MONOTONIC, &sev, &mine) != 0) {
        fprintf(stderr, "child: timer_create: %s\n", strerror(errno));
        return 1;
    }
    memset(&its, 0, sizeof its);
    its.it_value.tv_nsec = 1000000;
    if (timer_settime(mine, 0, &its, NULL) != 0) {
        fprintf(stderr, "child: timer_settime: %s\n", strerror(errno));
        return 1;
    }
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while ((r = sem_timedwait(&own, &until)) == -1 && errno == EINTR)
        ;
    if (say)
        printf("child: its own timer fired: %s\n", r == 0 ? "yes" : "no");
    ok &= r == 0;
    ok &= timer_delete(mine) == 0;
    fflush(stdout);
    return ok ? 0 : 1;
}

int main(void)
{
    const char *env = getenv("FORKS");
    int forks = env ? atoi(env) : 100, passed = 0, failed = 0, stuck = 0, n;
    timer_t busy[BUSY], parent;
    struct sigevent sev;
    struct itimerspec its;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGRTMIN, &sa, NULL);
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGRTMIN;
    memset(&its, 0, sizeof its);
    its.it_value.tv_nsec = 1000000;
    its.it_interval.tv_nsec = 1000000;
    for (n = 0; n < BUSY; n++) {
#ifdef USE_TEMPORA
        if (n % 2 == 1) {
            sev.sigev_notify = SIGEV_THREAD;
            sev.sigev_notify_function = count;
        } else {
            sev.sigev_notify = SIGEV_SIGNAL;
        }
#endif
        if (timer_create(CLOCK_MONOTONIC, &sev, &busy[n]) != 0 ||
            timer_settime(busy[n], 0, &its, NULL) != 0) {
            perror("busy timer");
            return 1;
        }
    }
    sev.sigev_notify = SIGEV_NONE;
    its.it_value.tv_sec = 100;
    its.it_value.tv_nsec = 0;
    if (timer_create(CLOCK_MONOTONIC, &sev, &parent) != 0 ||
        timer_settime(parent, 0, &its, NULL) != 0) {
        perror("parent timer");
        return 1;
    }
    for (n = 0; n < forks; n++) {
        pid_t pid;
        int status = 0;
        struct timespec began, now;
        fflush(stdout);
        pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0)
            _exit(child(parent, n == 0));
        clock_gettime(CLOCK_MONOTONIC, &began);
        for (;;) {
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) {
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                    passed++;
                else {
                    fprintf(stderr, "fork %d: status %#x\n", n, status);
                    failed++;
                }
                break;
            }
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - began.tv_sec > 10) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                fprintf(stderr, "fork %d: stuck: killed\n", n);
                stuck++;
                break;
            }
            usleep(200);
        }
    }
    printf("children: %s, failed %d, stuck %d\n", passed == forks ? "all passed" : "not all",
           failed, stuck);
    printf("parent: its timers fired meanwhile: %s; its timer still armed: %s\n",
           atomic_load(&fired) > 0 ? "yes" : "no",
           timer_gettime(parent, &its) == 0 && its.it_value.tv_sec > 0 ? "yes" : "no");
    for (n = 0; n < BUSY; n++)
        timer_delete(busy[n]);
    timer_delete(parent);
    return 0;
}
