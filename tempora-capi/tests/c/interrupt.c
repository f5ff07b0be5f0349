/* tempora_event_wait interrupted by a signal handler: -1 with EINTR, as sigtimedwait, with or
 * without SA_RESTART and with or without a timeout, so a loop whose handler sets a quit flag
 * leaves a wait that has no timeout. An event already queued is taken first; an interrupted
 * wait leaves the owner as it was. Before tempora waited on the readiness fd, the wait with no
 * timeout never returned (the alarm below ends such a run). */
#define _GNU_SOURCE
#include "check.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

static atomic_int handled;
static volatile sig_atomic_t quit;

static void on_usr1(int signo)
{
    (void)signo;
    atomic_fetch_add(&handled, 1);
    quit = 1;
}

static void install(int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
}

struct pester {
    pthread_t target;
    atomic_int stop;
};

/* Sends SIGUSR1 to the target thread every 20 ms until told to stop: a signal that came
 * before the wait began would leave a wait with no timeout waiting, so one keeps coming. */
static void *pester(void *arg)
{
    struct pester *p = arg;
    while (!atomic_load(&p->stop)) {
        sleep_ns(20 * MSEC);
        pthread_kill(p->target, SIGUSR1);
    }
    return NULL;
}

static pthread_t start(struct pester *p)
{
    p->target = pthread_self();
    atomic_store(&p->stop, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, pester, p) == 0);
    return th;
}

static void stop(struct pester *p, pthread_t th)
{
    atomic_store(&p->stop, 1);
    CHECK(pthread_join(th, NULL) == 0);
}

int main(void)
{
    /* A run whose wait never returns ends here (SIGALRM's default action) and fails. */
    alarm(20);
    tempora_t *t = tempora_new(NULL);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    struct tempora_event ev;
    struct pester p;

    /* No timeout, no SA_RESTART. */
    install(0);
    pthread_t th = start(&p);
    FAILS(tempora_event_wait(o, NULL, &ev), EINTR);
    CHECK(atomic_load(&handled) > 0);
    stop(&p, th);

    /* SA_RESTART changes nothing (sigtimedwait is never restarted either), and a wait with
     * a timeout is interrupted as well, long before the timeout. */
    install(SA_RESTART);
    int before = atomic_load(&handled);
    th = start(&p);
    struct timespec ten = {10, 0};
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    FAILS(tempora_event_wait(o, &ten, &ev), EINTR);
    CHECK(now_ns(CLOCK_MONOTONIC) - t0 < 5 * SEC);
    CHECK(atomic_load(&handled) > before);
    stop(&p, th);

    /* An event already queued is taken, signal or not. */
    tempora_timer_t id;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
    struct itimerspec soon = its(MSEC, 0);
    OK(tempora_timer_settime(o, id, 0, &soon, NULL));
    sleep_ns(50 * MSEC);
    th = start(&p);
    sleep_ns(60 * MSEC); /* signals have come meanwhile */
    OK(tempora_event_wait(o, NULL, &ev));
    CHECK(ev.timer == id);
    stop(&p, th);

    /* An interrupted wait leaves the owner working: the next wait takes the next event. */
    OK(tempora_timer_settime(o, id, 0, &soon, NULL));
    OK(tempora_event_wait(o, NULL, &ev));
    CHECK(ev.timer == id);
    /* And a timeout with no signal is still EAGAIN, after the timeout. */
    struct timespec short_wait = {0, 30 * MSEC};
    t0 = now_ns(CLOCK_MONOTONIC);
    FAILS(tempora_event_wait(o, &short_wait, &ev), EAGAIN);
    CHECK(now_ns(CLOCK_MONOTONIC) - t0 >= 30 * MSEC);

    /* The loop the issue asked for: a periodic timer's events until the handler sets quit. */
    struct itimerspec every = its(5 * MSEC, 5 * MSEC);
    OK(tempora_timer_settime(o, id, 0, &every, NULL));
    install(0);
    quit = 0;
    int events = 0, interrupted = 0;
    th = start(&p);
    while (!quit) {
        if (tempora_event_wait(o, NULL, &ev) == 0) {
            CHECK(ev.timer == id);
            events++;
        } else {
            CHECK(errno == EINTR);
            interrupted++;
        }
    }
    stop(&p, th);
    CHECK(quit);
    OK(tempora_timer_delete(o, id));

    tempora_owner_free(o);
    tempora_free(t);
    printf("interrupt ok (%d events, %d interrupted waits)\n", events, interrupted);
    return 0;
}
