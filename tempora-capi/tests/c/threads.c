/* The C ABI under pthreads, with two driver threads firing:
 *  - churn: four threads create, arm, read, re-arm and delete timers of one owner while a
 *    fifth takes its events;
 *  - nothing lost: every one-shot timer a thread arms yields exactly one event to another;
 *  - callbacks that delete their own timer (each runs exactly once, however often its period
 *    came), and callbacks that re-arm their own timer before deleting it. */
#define _GNU_SOURCE
#include "check.h"
#include <pthread.h>
#include <stdatomic.h>

static tempora_t *service;
static tempora_owner_t *shared;
static atomic_int stop;

/* A small xorshift generator per thread. */
static uint32_t next_rand(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

#define CHURN_THREADS 4
#define CHURN_STEPS 20000
#define LIVE 64

static void *churn(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg * 2654435761u + 1;
    tempora_timer_t live[LIVE];
    int n = 0;
    struct tempora_sigevent none = {.notify = TEMPORA_SIGEV_NONE};
    for (int step = 0; step < CHURN_STEPS; step++) {
        uint32_t r = next_rand(&seed);
        if (n < LIVE && (n == 0 || r % 3 == 0)) {
            OK(tempora_timer_create(shared, CLOCK_MONOTONIC, r & 8 ? &none : NULL, &live[n]));
            n++;
            continue;
        }
        int i = (int)(r / 3 % (uint32_t)n);
        tempora_timer_t id = live[i];
        switch (r / 7 % 4) {
        case 0: {
            int64_t value = (int64_t)(r % 2000) * 1000; /* 0 (disarm) .. 2 ms */
            struct itimerspec set = its(value, r & 16 ? (int64_t)(r % 500 + 1) * 1000 : 0), old;
            OK(tempora_timer_settime(shared, id, 0, &set, &old));
            break;
        }
        case 1: {
            struct itimerspec cur;
            OK(tempora_timer_gettime(shared, id, &cur));
            CHECK(ts_ns(cur.it_value) <= 2 * MSEC && ts_ns(cur.it_interval) <= 500 * 1000);
            break;
        }
        case 2:
            CHECK(tempora_timer_getoverrun(shared, id) >= 0);
            break;
        default:
            OK(tempora_timer_delete(shared, id));
            live[i] = live[--n];
        }
    }
    while (n > 0)
        OK(tempora_timer_delete(shared, live[--n]));
    return NULL;
}

/* Takes the shared owner's events until told to stop. */
static void *drain(void *arg)
{
    atomic_long *taken = arg;
    struct timespec wait = ns_ts(MSEC);
    struct tempora_event ev;
    while (!atomic_load(&stop)) {
        if (tempora_event_wait(shared, &wait, &ev) == 0) {
            CHECK(ev.timer >= 0 && ev.overrun >= 0);
            atomic_fetch_add(taken, 1);
        } else {
            CHECK(errno == EAGAIN);
        }
    }
    return NULL;
}

static void churn_test(void)
{
    pthread_t churners[CHURN_THREADS], drainer;
    atomic_long taken = 0;
    atomic_store(&stop, 0);
    CHECK(pthread_create(&drainer, NULL, drain, &taken) == 0);
    for (uintptr_t i = 0; i < CHURN_THREADS; i++)
        CHECK(pthread_create(&churners[i], NULL, churn, (void *)i) == 0);
    for (int i = 0; i < CHURN_THREADS; i++)
        CHECK(pthread_join(churners[i], NULL) == 0);
    atomic_store(&stop, 1);
    CHECK(pthread_join(drainer, NULL) == 0);
    /* Every timer was deleted: no event can be left or come. */
    struct tempora_event ev;
    FAILS(tempora_event_try(shared, &ev), EAGAIN);
    printf("churn: %d threads x %d steps, %ld events taken\n", CHURN_THREADS, CHURN_STEPS,
           (long)atomic_load(&taken));
}

#define ONESHOTS 4000

struct lost_state {
    tempora_owner_t *owner;
    atomic_int armed;
};

static void *arm_oneshots(void *arg)
{
    struct lost_state *s = arg;
    uint32_t seed = 99;
    for (int i = 0; i < ONESHOTS; i++) {
        tempora_timer_t id;
        OK(tempora_timer_create(s->owner, CLOCK_MONOTONIC, NULL, &id));
        struct itimerspec set = its((int64_t)(next_rand(&seed) % 3000) * 1000 + 1, 0);
        OK(tempora_timer_settime(s->owner, id, 0, &set, NULL));
        atomic_fetch_add(&s->armed, 1);
    }
    return NULL;
}

static void nothing_lost_test(void)
{
    struct lost_state s = {.owner = tempora_owner_new(service)};
    CHECK(s.owner != NULL);
    pthread_t producer;
    CHECK(pthread_create(&producer, NULL, arm_oneshots, &s) == 0);
    static unsigned char seen[ONESHOTS];
    memset(seen, 0, sizeof seen);
    struct timespec wait = ns_ts(5 * SEC);
    for (int got = 0; got < ONESHOTS; got++) {
        struct tempora_event ev;
        OK(tempora_event_wait(s.owner, &wait, &ev));
        /* IDs are 0.. in creation order in a fresh owner whose timers are never deleted
         * before their event: each comes exactly once. */
        CHECK(ev.timer >= 0 && ev.timer < ONESHOTS);
        CHECK(seen[ev.timer] == 0);
        seen[ev.timer] = 1;
        CHECK(ev.overrun == 0);
        OK(tempora_timer_delete(s.owner, ev.timer));
    }
    CHECK(pthread_join(producer, NULL) == 0);
    struct tempora_event ev;
    FAILS(tempora_event_try(s.owner, &ev), EAGAIN);
    tempora_owner_free(s.owner);
    printf("nothing lost: %d one-shot timers, %d events\n", ONESHOTS, ONESHOTS);
}

#define SELF_DELETING 1000

static tempora_owner_t *cb_owner;
static atomic_int calls[SELF_DELETING];
static atomic_int deleted;

static void delete_myself(tempora_timer_t timer, int overrun, union sigval value)
{
    (void)overrun, (void)value;
    CHECK(timer >= 0 && timer < SELF_DELETING);
    atomic_fetch_add(&calls[timer], 1);
    OK(tempora_timer_delete(cb_owner, timer));
    atomic_fetch_add(&deleted, 1);
}

static atomic_int rearms[SELF_DELETING];

static void rearm_then_delete(tempora_timer_t timer, int overrun, union sigval value)
{
    (void)overrun;
    int n = atomic_fetch_add(&rearms[timer], 1) + 1;
    if (n < value.sival_int) {
        struct itimerspec set = its(100 * 1000, 0);
        OK(tempora_timer_settime(cb_owner, timer, 0, &set, NULL));
    } else {
        OK(tempora_timer_delete(cb_owner, timer));
        atomic_fetch_add(&deleted, 1);
    }
}

static void wait_for(atomic_int *n, int at_least)
{
    for (int i = 0; i < 10000 && atomic_load(n) < at_least; i++)
        sleep_ns(MSEC);
    CHECK(atomic_load(n) >= at_least);
}

static void self_delete_test(void)
{
    cb_owner = tempora_owner_new(service);
    CHECK(cb_owner != NULL);
    atomic_store(&deleted, 0);
    struct tempora_sigevent sev = {.notify = TEMPORA_SIGEV_THREAD, .callback = delete_myself};
    struct itimerspec set = its(MSEC, 50 * 1000); /* a 50 us period: due again at once */
    for (int i = 0; i < SELF_DELETING; i++) {
        tempora_timer_t id;
        OK(tempora_timer_create(cb_owner, CLOCK_MONOTONIC, &sev, &id));
        CHECK(id == i);
        OK(tempora_timer_settime(cb_owner, id, 0, &set, NULL));
    }
    wait_for(&deleted, SELF_DELETING);
    sleep_ns(5 * MSEC); /* a second call would come within a few periods */
    for (int i = 0; i < SELF_DELETING; i++) {
        if (atomic_load(&calls[i]) != 1)
            FAIL("timer %d: its callback ran %d times", i, atomic_load(&calls[i]));
        struct itimerspec cur;
        FAILS(tempora_timer_gettime(cb_owner, i, &cur), EINVAL);
    }

    /* Re-armed from its own callback three times, then deleted by it (a fresh owner: IDs
     * from 0 again). */
    tempora_owner_free(cb_owner);
    cb_owner = tempora_owner_new(service);
    CHECK(cb_owner != NULL);
    atomic_store(&deleted, 0);
    sev = (struct tempora_sigevent){
        .notify = TEMPORA_SIGEV_THREAD, .callback = rearm_then_delete, .value.sival_int = 4};
    set = its(100 * 1000, 0);
    for (int i = 0; i < SELF_DELETING; i++) {
        tempora_timer_t id;
        OK(tempora_timer_create(cb_owner, CLOCK_MONOTONIC, &sev, &id));
        CHECK(id == i);
        OK(tempora_timer_settime(cb_owner, id, 0, &set, NULL));
    }
    wait_for(&deleted, SELF_DELETING);
    sleep_ns(5 * MSEC);
    for (int i = 0; i < SELF_DELETING; i++)
        CHECK(atomic_load(&rearms[i]) == 4);
    tempora_owner_free(cb_owner);
    printf("callbacks: %d deleted themselves once each, %d re-armed themselves 3 times\n",
           SELF_DELETING, SELF_DELETING);
}

int main(void)
{
    struct tempora_config cfg;
    OK(tempora_config_init(&cfg, sizeof cfg));
    cfg.bases = 2;
    cfg.drivers = 2;
    service = tempora_new(&cfg);
    CHECK(service != NULL);
    shared = tempora_owner_new(service);
    CHECK(shared != NULL);
    churn_test();
    nothing_lost_test();
    self_delete_test();
    tempora_owner_free(shared);
    tempora_free(service);
    printf("threads ok\n");
    return 0;
}
