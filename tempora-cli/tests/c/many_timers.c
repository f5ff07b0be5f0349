/* A program built against the C library alone: it makes N timers (argv[1], default 50000) of
 * mixed kinds with timer_create, arms some, writes one line per timer to stdout
 * ("<timer_t> <clock> <kind> <signo> <armed>"), then "ready", and waits until its stdin
 * closes. Its timers never fire while it waits (an hour away): `tempora ls` lists them.
 * Built with -DUSE_TEMPORA_H, the same through tempora.h's calls on the default owner (the
 * IDs printed in decimal, and queue timers in place of a quarter of the none ones).
 * argv[2] (default 0) more timers, not printed, fire every millisecond (SIGEV_THREAD, an
 * empty function): a load whose lateness tempora's statistics record (BENCHMARKS.md's
 * lateness during a listing). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef USE_TEMPORA_H
#include <tempora.h>
#endif

static void tick(union sigval v) { (void)v; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 50000;
    const clockid_t clocks[3] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME};
    const char *clock_names[3] = {"realtime", "monotonic", "boottime"};
    pid_t tid = (pid_t)syscall(SYS_gettid);
    for (int i = 0; i < n; i++) {
        struct sigevent sev;
        memset(&sev, 0, sizeof sev);
        const char *kind;
        int signo = 0;
        switch (i % 4) {
        case 0:
            sev.sigev_notify = SIGEV_NONE;
            kind = "none";
            break;
        case 1:
            sev.sigev_notify = SIGEV_SIGNAL;
            sev.sigev_signo = signo = SIGRTMIN + (i % 5);
            sev.sigev_value.sival_int = i;
            kind = "signal";
            break;
        case 2:
            sev.sigev_notify = SIGEV_THREAD;
            sev.sigev_notify_function = tick;
            kind = "callback";
            break;
        default:
            sev.sigev_notify = SIGEV_THREAD_ID;
            sev._sigev_un._tid = tid;
            sev.sigev_signo = signo = SIGUSR1;
            kind = "signal";
            break;
        }
        int armed = i % 3 != 2 || i % 7 == 0;
        struct itimerspec its = {{i % 2, 0}, {3600, 0}};
#ifdef USE_TEMPORA_H
        struct tempora_owner_t *owner = tempora_default_owner();
        tempora_sigevent tsev;
        memset(&tsev, 0, sizeof tsev);
        tsev.notify = sev.sigev_notify == SIGEV_NONE      ? TEMPORA_SIGEV_NONE
                      : sev.sigev_notify == SIGEV_SIGNAL    ? TEMPORA_SIGEV_SIGNAL
                      : sev.sigev_notify == SIGEV_THREAD    ? TEMPORA_SIGEV_THREAD
                                                            : TEMPORA_SIGEV_THREAD_ID;
        if (i % 16 == 0) {
            tsev.notify = TEMPORA_SIGEV_QUEUE;
            kind = "queue";
        }
        tsev.notify_function = sev.sigev_notify == SIGEV_THREAD ? tick : NULL;
        tsev.signo = signo;
        tsev.tid = tid;
        tempora_timer_t t;
        if (tempora_timer_create(owner, clocks[i % 3], &tsev, &t) != 0) {
            perror("tempora_timer_create");
            return 1;
        }
        if (armed && tempora_timer_settime(owner, t, 0, &its, NULL) != 0) {
            perror("tempora_timer_settime");
            return 1;
        }
        printf("%d %s %s %d %d\n", t, clock_names[i % 3], kind, signo, armed);
#else
        timer_t t;
        if (timer_create(clocks[i % 3], &sev, &t) != 0) {
            perror("timer_create");
            return 1;
        }
        if (armed && timer_settime(t, 0, &its, NULL) != 0) {
            perror("timer_settime");
            return 1;
        }
        printf("%#jx %s %s %d %d\n", (uintmax_t)(uintptr_t)t, clock_names[i % 3], kind,
               signo, armed);
#endif
    }
    int periodic = argc > 2 ? atoi(argv[2]) : 0;
    for (int i = 0; i < periodic; i++) {
        struct sigevent sev;
        memset(&sev, 0, sizeof sev);
        sev.sigev_notify = SIGEV_THREAD;
        sev.sigev_notify_function = tick;
        timer_t t;
        struct itimerspec its = {{0, 1000000}, {0, 1000000 + i * 1000}};
        if (timer_create(CLOCK_MONOTONIC, &sev, &t) != 0 || timer_settime(t, 0, &its, NULL) != 0) {
            perror("periodic timer");
            return 1;
        }
    }
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    return 0;
}
