/* tempora in an epoll loop, as an event-driven C server holds it:
 *  - no driver thread: the service's deadline fd and the owner's event fd beside a pipe; the
 *    loop polls when the deadline fd is readable and drains events when the event fd is; every
 *    one-shot comes once and never early, a periodic timer keeps coming, both fds go quiet
 *    once nothing is due or queued;
 *  - a driver thread and the event fd alone, edge-triggered, one consumer that drains;
 *  - the service freed: the event fd stays readable and the next try says ESHUTDOWN. */
#define _GNU_SOURCE
#include "check.h"
#include <sys/epoll.h>
#include <unistd.h>

#define ONESHOTS 50

static void add(int ep, int fd, uint32_t events)
{
    struct epoll_event e = {.events = events, .data.fd = fd};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) == 0);
}

/* How many of `fd`'s readiness `epoll_wait` reports within `ms`. */
static int ready(int ep, int fd, int ms)
{
    struct epoll_event evs[8];
    int n = epoll_wait(ep, evs, 8, ms), hits = 0;
    CHECK(n >= 0);
    for (int i = 0; i < n; i++)
        hits += evs[i].data.fd == fd;
    return hits;
}

static void no_driver(void)
{
    struct tempora_config cfg;
    OK(tempora_config_init(&cfg, sizeof cfg));
    cfg.drivers = 0;
    tempora_t *t = tempora_new(&cfg);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    int dfd = tempora_deadline_fd(t), efd = tempora_owner_event_fd(o), pipefd[2];
    CHECK(dfd >= 0 && efd >= 0 && dfd != efd);
    CHECK(pipe(pipefd) == 0);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    add(ep, dfd, EPOLLIN);
    add(ep, efd, EPOLLIN);
    add(ep, pipefd[0], EPOLLIN);

    /* Nothing armed, nothing queued: both quiet. */
    CHECK(ready(ep, dfd, 0) == 0 && ready(ep, efd, 0) == 0);

    int64_t deadline[ONESHOTS + 1];
    int seen[ONESHOTS + 1] = {0};
    tempora_timer_t periodic;
    for (int i = 0; i < ONESHOTS; i++) {
        tempora_timer_t id;
        OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
        CHECK(id == i);
        struct itimerspec set = its((int64_t)(ONESHOTS - i) % 20 * MSEC + MSEC, 0);
        deadline[i] = now_ns(CLOCK_MONOTONIC) + ts_ns(set.it_value);
        OK(tempora_timer_settime(o, id, 0, &set, NULL));
    }
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &periodic));
    struct itimerspec every2ms = its(2 * MSEC, 2 * MSEC);
    deadline[periodic] = now_ns(CLOCK_MONOTONIC) + 2 * MSEC;
    OK(tempora_timer_settime(o, periodic, 0, &every2ms, NULL));

    int oneshots = 0, ticks = 0, polls = 0, pipe_seen = 0;
    while (oneshots < ONESHOTS || ticks < 5 || !pipe_seen) {
        struct epoll_event evs[8];
        int n = epoll_wait(ep, evs, 8, 5000);
        CHECK(n > 0); /* something was due within 5 s */
        for (int k = 0; k < n; k++) {
            int fd = evs[k].data.fd;
            if (fd == dfd) {
                CHECK(tempora_poll(t) >= 0);
                polls++;
            } else if (fd == efd) {
                struct tempora_event ev;
                while (tempora_event_try(o, &ev) == 0) {
                    int64_t now = now_ns(CLOCK_MONOTONIC);
                    if (ev.timer == periodic) {
                        CHECK(now >= deadline[periodic]);
                        deadline[periodic] += 2 * MSEC * (1 + ev.overrun);
                        if (++ticks == 5) {
                            struct itimerspec off = its(0, 0);
                            OK(tempora_timer_settime(o, periodic, 0, &off, NULL));
                        }
                        continue;
                    }
                    CHECK(ev.timer >= 0 && ev.timer < ONESHOTS);
                    CHECK(seen[ev.timer]++ == 0);
                    if (now < deadline[ev.timer])
                        FAIL("timer %d came %lld ns early", ev.timer,
                             (long long)(deadline[ev.timer] - now));
                    if (++oneshots == ONESHOTS / 2)
                        CHECK(write(pipefd[1], "x", 1) == 1);
                }
                CHECK(errno == EAGAIN);
            } else {
                char c;
                CHECK(fd == pipefd[0] && read(pipefd[0], &c, 1) == 1 && c == 'x');
                pipe_seen = 1;
            }
        }
    }
    /* Drained, and nothing armed: neither fd wakes the loop again. */
    CHECK(tempora_poll(t) == 0);
    CHECK(ready(ep, efd, 0) == 0);
    CHECK(ready(ep, dfd, 20) == 0);
    CHECK(tempora_next_timeout(t) == -1);
    printf("no driver: %d one-shots once each and never early, %d periodic events, %d polls\n",
           oneshots, ticks, polls);
    close(ep);
    close(pipefd[0]);
    close(pipefd[1]);
    tempora_owner_free(o);
    tempora_free(t);
}

static void driver_edge_triggered(void)
{
    tempora_t *t = tempora_new(NULL);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    int efd = tempora_owner_event_fd(o);
    CHECK(efd >= 0);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    add(ep, efd, EPOLLIN | EPOLLET);
    enum { N = 200 };
    for (int i = 0; i < N; i++) {
        tempora_timer_t id;
        OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
        struct itimerspec set = its((int64_t)(i % 10) * MSEC + 1, 0);
        OK(tempora_timer_settime(o, id, 0, &set, NULL));
    }
    int got = 0, wakes = 0;
    while (got < N) {
        CHECK(ready(ep, efd, 5000) == 1);
        wakes++;
        struct tempora_event ev;
        while (tempora_event_try(o, &ev) == 0)
            got++;
        CHECK(errno == EAGAIN);
    }
    CHECK(got == N);
    CHECK(ready(ep, efd, 20) == 0);

    /* The service freed: readable for good, and the reason is ESHUTDOWN. */
    tempora_free(t);
    CHECK(ready(ep, efd, 5000) == 1);
    struct tempora_event ev;
    FAILS(tempora_event_try(o, &ev), ESHUTDOWN);
    printf("edge-triggered with a driver: %d events in %d wake-ups\n", got, wakes);
    close(ep);
    tempora_owner_free(o);
}

int main(void)
{
    no_driver();
    driver_edge_triggered();
    printf("epoll ok\n");
    return 0;
}
