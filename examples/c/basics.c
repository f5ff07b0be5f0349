/* The five POSIX calls on tempora, a callback timer, and a checkpoint restored with the same
 * IDs. Each tempora_timer_* call is its POSIX original with an owner in front. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tempora.h>
#include <unistd.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        if ((call) < 0) {                                                                 \
            fprintf(stderr, "%s: %s (%s)\n", #call, strerror(errno), tempora_last_error()); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static sem_t fired;

/* Runs on the driver thread, like a SIGEV_THREAD function: keep it short. */
static void on_expiry(tempora_timer_t timer, int overrun, union sigval value)
{
    printf("callback: timer %d fired (%s, overrun %d)\n", timer, (char *)value.sival_ptr, overrun);
    sem_post(&fired);
}

/* A restore maps each recorded callback name back to a function of this process. */
static int resolve(const char *name, struct tempora_sigevent *out, void *ctx)
{
    (void)ctx;
    if (strcmp(name, "on_expiry") != 0) return -1; /* unknown: the restore fails, EINVAL */
    out->notify = TEMPORA_SIGEV_THREAD;
    out->callback = on_expiry;
    out->value.sival_ptr = "restored";
    return 0;
}

int main(void)
{
    tempora_t *service = tempora_new(NULL); /* a base per CPU, one driver thread */
    tempora_owner_t *owner = tempora_owner_new(service);
    if (!service || !owner) return 1;
    sem_init(&fired, 0, 0);

    /* timer_create(CLOCK_MONOTONIC, NULL, &tick): NULL means events on the owner's queue. */
    tempora_timer_t tick, once;
    CHECK(tempora_timer_create(owner, CLOCK_MONOTONIC, NULL, &tick));
    struct tempora_sigevent sev = {
        .notify = TEMPORA_SIGEV_THREAD,
        .value.sival_ptr = "one-shot",
        .callback = on_expiry,
        .name = "on_expiry", /* what a checkpoint records it as */
    };
    CHECK(tempora_timer_create(owner, CLOCK_MONOTONIC, &sev, &once));

    /* timer_settime: every 10 ms from 10 ms on; the other once, after 25 ms. */
    struct itimerspec every_10ms = {.it_value = {0, 10000000}, .it_interval = {0, 10000000}};
    struct itimerspec in_25ms = {.it_value = {0, 25000000}};
    CHECK(tempora_timer_settime(owner, tick, 0, &every_10ms, NULL));
    CHECK(tempora_timer_settime(owner, once, 0, &in_25ms, NULL));

    /* Three events of the periodic timer, as sigtimedwait would give its signals. */
    struct timespec limit = {5, 0};
    for (int i = 0; i < 3; i++) {
        struct tempora_event ev;
        CHECK(tempora_event_wait(owner, &limit, &ev));
        /* timer_getoverrun: the periods missed before this event was taken. */
        printf("event: timer %d, overrun %d (getoverrun %d)\n", ev.timer, ev.overrun,
               tempora_timer_getoverrun(owner, ev.timer));
    }
    sem_wait(&fired);

    /* timer_gettime, and what a bad argument gets: EINVAL, as from the kernel. */
    struct itimerspec now;
    CHECK(tempora_timer_gettime(owner, tick, &now));
    printf("gettime: %ld ns left, period %ld ns\n", now.it_value.tv_nsec, now.it_interval.tv_nsec);
    struct itimerspec bad = {.it_value = {0, 1000000000}};
    if (tempora_timer_settime(owner, tick, 0, &bad, NULL) == -1)
        printf("tv_nsec = 1e9: %s: %s\n", strerror(errno), tempora_last_error());

    /* Checkpoint, then restore into a fresh owner: same IDs, same settings. */
    char path[] = "/tmp/tempora-basics-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    CHECK(tempora_owner_checkpoint(owner, path));
    tempora_owner_t *again = tempora_owner_new(service);
    CHECK(tempora_owner_restore(again, path, resolve, NULL));
    CHECK(tempora_timer_gettime(again, tick, &now));
    printf("restored: timer %d, period %ld ns\n", tick, now.it_interval.tv_nsec);
    remove(path);

    /* timer_delete, then the handles: an owner frees its timers with it. */
    CHECK(tempora_timer_delete(owner, tick));
    tempora_owner_free(again);
    tempora_owner_free(owner);
    tempora_free(service);
    return 0;
}
