/* Checkpoint in one process, restore in another with the same IDs:
 *   checkpoint save PATH      timers with chosen IDs in every state, written to PATH
 *   checkpoint restore PATH   a fresh process restores PATH and checks every timer
 * The saved owner holds: 7 (queue, one-shot in 1 h), 1000 (none, 2 h then every 10 s), 123456
 * (a callback named "tick", 30 min then every minute), 42 (disarmed), 99 (fired: its event
 * is pending), exact-ID mode off again, so the next ID is 100 (after 99, the last exact ID made). */
#define _GNU_SOURCE
#include "check.h"
#include <poll.h>
#include <stdatomic.h>

struct ticks {
    atomic_int calls;
    atomic_int timer;
    int resolved;
};

static void tick(tempora_timer_t timer, int overrun, union sigval value)
{
    struct ticks *t = value.sival_ptr;
    (void)overrun;
    atomic_store(&t->timer, timer);
    atomic_fetch_add(&t->calls, 1);
}

static struct ticks saved_ticks;

static void create_at(tempora_owner_t *o, tempora_timer_t want, const struct tempora_sigevent *sev,
                      int64_t value, int64_t interval)
{
    tempora_timer_t id = want;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, sev, &id));
    CHECK(id == want);
    struct itimerspec set = its(value, interval);
    OK(tempora_timer_settime(o, id, 0, &set, NULL));
}

static int save(const char *path)
{
    tempora_t *t = tempora_new(NULL);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    OK(tempora_owner_restore_ids(o, TEMPORA_RESTORE_IDS_ON));
    struct tempora_sigevent none = {.notify = TEMPORA_SIGEV_NONE};
    struct tempora_sigevent cb = {.notify = TEMPORA_SIGEV_THREAD, .callback = tick,
                                  .value.sival_ptr = &saved_ticks, .name = "tick"};
    create_at(o, 7, NULL, 3600 * SEC, 0);
    create_at(o, 1000, &none, 7200 * SEC, 10 * SEC);
    create_at(o, 123456, &cb, 1800 * SEC, 60 * SEC);
    create_at(o, 42, NULL, 0, 0);
    create_at(o, 99, NULL, 1, 0);
    OK(tempora_owner_restore_ids(o, TEMPORA_RESTORE_IDS_OFF));

    /* Wait until 99's event is queued, without taking it. */
    struct pollfd p = {.fd = tempora_owner_event_fd(o), .events = POLLIN};
    CHECK(p.fd >= 0 && poll(&p, 1, 5000) == 1);

    OK(tempora_owner_checkpoint(o, path));
    /* What the restored owner must reproduce: the next ID. */
    tempora_timer_t next;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &next));
    CHECK(next == 100);
    tempora_owner_free(o);
    tempora_free(t);
    printf("saved 5 timers to %s\n", path);
    return 0;
}

static int resolve(const char *name, struct tempora_sigevent *out, void *ctx)
{
    struct ticks *t = ctx;
    if (strcmp(name, "tick") != 0)
        return -1;
    t->resolved++;
    out->notify = TEMPORA_SIGEV_THREAD;
    out->callback = tick;
    out->value.sival_ptr = t;
    return 0;
}

static void check_spec(tempora_owner_t *o, tempora_timer_t id, int64_t value, int64_t interval)
{
    struct itimerspec cur;
    OK(tempora_timer_gettime(o, id, &cur));
    if (ts_ns(cur.it_interval) != interval)
        FAIL("timer %d: interval %lld, saved %lld", id, (long long)ts_ns(cur.it_interval),
             (long long)interval);
    /* The remaining time went on while the snapshot waited (not more than a minute here). */
    if (value == 0 ? ts_ns(cur.it_value) != 0
                   : ts_ns(cur.it_value) > value || ts_ns(cur.it_value) < value - 60 * SEC)
        FAIL("timer %d: %lld ns remain, saved %lld", id, (long long)ts_ns(cur.it_value),
             (long long)value);
}

static void check_restored(tempora_owner_t *o, struct ticks *ticks)
{
    check_spec(o, 7, 3600 * SEC, 0);
    check_spec(o, 1000, 7200 * SEC, 10 * SEC);
    check_spec(o, 123456, 1800 * SEC, 60 * SEC);
    check_spec(o, 42, 0, 0);
    check_spec(o, 99, 0, 0);
    struct itimerspec cur;
    FAILS(tempora_timer_gettime(o, 8, &cur), EINVAL);
    CHECK(tempora_owner_restore_ids(o, TEMPORA_RESTORE_IDS_GET) == 0);

    /* 99's pending event came along; nothing else is queued. */
    struct tempora_event ev;
    OK(tempora_event_try(o, &ev));
    CHECK(ev.timer == 99 && ev.overrun == 0);
    FAILS(tempora_event_try(o, &ev), EAGAIN);

    /* The callback is this process's function with this process's value. */
    struct itimerspec soon = its(MSEC, 0);
    OK(tempora_timer_settime(o, 123456, 0, &soon, NULL));
    for (int i = 0; i < 5000 && atomic_load(&ticks->calls) == 0; i++)
        sleep_ns(MSEC);
    CHECK(atomic_load(&ticks->calls) == 1 && atomic_load(&ticks->timer) == 123456);
}

static int restore(const char *path)
{
    tempora_t *t = tempora_new(NULL);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    struct ticks ticks = {0};
    OK(tempora_owner_restore(o, path, resolve, &ticks));
    CHECK(ticks.resolved >= 1);
    check_restored(o, &ticks);
    tempora_timer_t next;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &next));
    CHECK(next == 100);
    OK(tempora_timer_delete(o, next));

    /* A restored owner checkpoints again under the same names: restore that in a third. */
    char again[4096];
    snprintf(again, sizeof again, "%s.again", path);
    struct itimerspec back = its(1800 * SEC, 60 * SEC);
    OK(tempora_timer_settime(o, 123456, 0, &back, NULL));
    /* 99's event was taken above: queue it again so the snapshot holds one. */
    struct itimerspec now = its(1, 0);
    OK(tempora_timer_settime(o, 99, 0, &now, NULL));
    struct tempora_event ev;
    struct timespec wait = {5, 0};
    struct pollfd p = {.fd = tempora_owner_event_fd(o), .events = POLLIN};
    CHECK(p.fd >= 0 && poll(&p, 1, 5000) == 1);
    OK(tempora_owner_checkpoint(o, again));
    tempora_owner_t *third = tempora_owner_new(t);
    CHECK(third != NULL);
    struct ticks ticks3 = {0};
    OK(tempora_owner_restore(third, again, resolve, &ticks3));
    check_restored(third, &ticks3);
    OK(tempora_event_wait(o, &wait, &ev)); /* the checkpoint left o's event in place */
    CHECK(ev.timer == 99);
    remove(again);
    tempora_owner_free(third);
    tempora_owner_free(o);
    tempora_free(t);
    printf("restored 5 timers with their IDs from %s\n", path);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "save") == 0)
        return save(argv[2]);
    if (argc == 3 && strcmp(argv[1], "restore") == 0)
        return restore(argv[2]);
    fprintf(stderr, "usage: %s save|restore PATH\n", argv[0]);
    return 2;
}
