/* An event loop with no timer thread: tempora's deadline fd and an owner's event fd in one
 * epoll set beside a pipe (standing in for a socket). The loop calls tempora_poll when the
 * deadline fd is readable and drains the event fd with tempora_event_try until EAGAIN. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <tempora.h>
#include <time.h>
#include <unistd.h>

#define TIMERS 5

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(void)
{
    struct tempora_config config;
    tempora_config_init(&config, sizeof config);
    config.drivers = 0; /* this loop fires the timers */
    tempora_t *service = tempora_new(&config);
    tempora_owner_t *owner = tempora_owner_new(service);
    int deadline_fd = tempora_deadline_fd(service), event_fd = tempora_owner_event_fd(owner);
    int pipe_fds[2];
    if (!owner || deadline_fd < 0 || event_fd < 0 || pipe(pipe_fds) < 0) {
        fprintf(stderr, "setup: %s (%s)\n", strerror(errno), tempora_last_error());
        return 1;
    }

    int ep = epoll_create1(EPOLL_CLOEXEC);
    int fds[] = {deadline_fd, event_fd, pipe_fds[0]};
    for (int i = 0; i < 3; i++) {
        struct epoll_event e = {.events = EPOLLIN, .data.fd = fds[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
    }

    /* Five one-shot timers, 10 ms apart; a byte on the pipe after the third. */
    long long start = now_ns(), due[TIMERS];
    for (int i = 0; i < TIMERS; i++) {
        tempora_timer_t id;
        struct itimerspec at = {.it_value = {0, (i + 1) * 10000000L}};
        due[i] = start + (i + 1) * 10000000LL;
        if (tempora_timer_create(owner, CLOCK_MONOTONIC, NULL, &id) < 0 ||
            tempora_timer_settime(owner, id, 0, &at, NULL) < 0)
            return 1;
    }

    int events = 0, wrote = 0;
    while (events < TIMERS && now_ns() - start < 5000000000LL) {
        struct epoll_event ready[3];
        /* The next timer's deadline bounds the wait (the deadline fd would wake it too). */
        int n = epoll_wait(ep, ready, 3, tempora_next_timeout(service));
        for (int i = 0; i < n; i++) {
            int fd = ready[i].data.fd;
            if (fd == deadline_fd) {
                tempora_poll(service); /* fires what is due and re-arms the fd */
            } else if (fd == event_fd) {
                struct tempora_event ev;
                while (tempora_event_try(owner, &ev) == 0) {
                    long long late = now_ns() - due[ev.timer];
                    printf("timer %d fired %.3f ms after its expiry\n", ev.timer, late / 1e6);
                    if (late < 0) return 1; /* never early */
                    if (++events == 3 && !wrote) wrote = write(pipe_fds[1], "x", 1) == 1;
                }
                if (errno != EAGAIN) return 1; /* the owner closed: tempora_last_error says why */
            } else {
                char c;
                if (read(fd, &c, 1) == 1) printf("the pipe had a byte: sockets share the loop\n");
            }
        }
    }
    tempora_owner_free(owner);
    tempora_free(service);
    return events == TIMERS ? 0 : 1;
}
