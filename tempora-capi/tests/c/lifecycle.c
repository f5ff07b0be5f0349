/* The whole life of a timer through the C ABI, on every clock tempora times: create, settime
 * (relative, absolute, absolute in the past, periodic), gettime, the event with its overrun,
 * getoverrun, disarm, delete; each notification (queue, none, both callback forms); a service
 * with no driver fired by tempora_poll; a service freed under its owner; the process-wide
 * default owner. Real clocks: timers are a few milliseconds long and every wait is bounded. */
#define _GNU_SOURCE
#include "check.h"
#include <semaphore.h>
#include <stdatomic.h>

static const clockid_t CLOCKS[] = {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME};
static const char *const NAMES[] = {"CLOCK_REALTIME", "CLOCK_MONOTONIC", "CLOCK_BOOTTIME"};

static const struct timespec FIVE_SECONDS = {.tv_sec = 5, .tv_nsec = 0};

struct counter {
    atomic_int calls;
    atomic_int last_timer;
    atomic_int overruns;
};

static void on_expiry(tempora_timer_t timer, int overrun, union sigval value)
{
    struct counter *c = value.sival_ptr;
    atomic_store(&c->last_timer, timer);
    atomic_fetch_add(&c->overruns, overrun);
    atomic_fetch_add(&c->calls, 1);
}

static atomic_int notified;
static atomic_int notified_value;

static void on_notify(union sigval value)
{
    atomic_store(&notified_value, value.sival_int);
    atomic_fetch_add(&notified, 1);
}

/* Waits (at most 5 s) until `*n` reaches `at_least`. */
static void wait_for(atomic_int *n, int at_least)
{
    for (int i = 0; i < 5000 && atomic_load(n) < at_least; i++)
        sleep_ns(MSEC);
    CHECK(atomic_load(n) >= at_least);
}

static void check_disarmed(tempora_owner_t *o, tempora_timer_t id)
{
    struct itimerspec cur = its(7, 7);
    OK(tempora_timer_gettime(o, id, &cur));
    CHECK(ts_ns(cur.it_value) == 0 && ts_ns(cur.it_interval) == 0);
}

static void queue_timer(tempora_owner_t *o, clockid_t clock)
{
    tempora_timer_t id = -1;
    OK(tempora_timer_create(o, clock, NULL, &id));
    CHECK(id >= 0);
    check_disarmed(o, id);

    /* Relative one-shot: the old setting is the disarmed one; gettime counts down; the event
     * comes no earlier than the expiry, once; the timer is then disarmed. */
    struct itimerspec set = its(2 * MSEC, 0), old = its(7, 7), cur;
    int64_t armed = now_ns(clock);
    OK(tempora_timer_settime(o, id, 0, &set, &old));
    CHECK(ts_ns(old.it_value) == 0 && ts_ns(old.it_interval) == 0);
    OK(tempora_timer_gettime(o, id, &cur));
    CHECK(ts_ns(cur.it_value) > 0 && ts_ns(cur.it_value) <= 2 * MSEC);
    CHECK(ts_ns(cur.it_interval) == 0);
    struct tempora_event ev = {-1, -1};
    OK(tempora_event_wait(o, &FIVE_SECONDS, &ev));
    CHECK(now_ns(clock) >= armed + 2 * MSEC);
    CHECK(ev.timer == id && ev.overrun == 0);
    CHECK(tempora_timer_getoverrun(o, id) == 0);
    check_disarmed(o, id);
    FAILS(tempora_event_try(o, &ev), EAGAIN);

    /* Absolute: not before the deadline on the timer's own clock. */
    int64_t deadline = now_ns(clock) + 3 * MSEC;
    set = its(deadline, 0);
    OK(tempora_timer_settime(o, id, TEMPORA_TIMER_ABSTIME, &set, NULL));
    OK(tempora_event_wait(o, &FIVE_SECONDS, &ev));
    CHECK(ev.timer == id);
    CHECK(now_ns(clock) >= deadline);

    /* Absolute in the past: fires at once. */
    set = its(now_ns(clock) - SEC, 0);
    OK(tempora_timer_settime(o, id, TEMPORA_TIMER_ABSTIME, &set, NULL));
    OK(tempora_event_wait(o, &FIVE_SECONDS, &ev));
    CHECK(ev.timer == id);

    /* Periodic, left unread for 20 periods: one pending event whose overrun counts the
     * periods missed, as getoverrun does after; taking it re-arms the timer. */
    set = its(MSEC, MSEC);
    OK(tempora_timer_settime(o, id, 0, &set, NULL));
    sleep_ns(20 * MSEC);
    OK(tempora_event_wait(o, &FIVE_SECONDS, &ev));
    CHECK(ev.timer == id && ev.overrun >= 1);
    CHECK(tempora_timer_getoverrun(o, id) == ev.overrun);
    OK(tempora_event_wait(o, &FIVE_SECONDS, &ev));
    CHECK(ev.timer == id);

    /* Disarm: the old setting is the period and a remaining time within it. */
    set = its(0, 0);
    OK(tempora_timer_settime(o, id, 0, &set, &old));
    CHECK(ts_ns(old.it_interval) == MSEC);
    CHECK(ts_ns(old.it_value) > 0 && ts_ns(old.it_value) <= MSEC);
    check_disarmed(o, id);

    /* An armed timer deleted: gone, and its event never comes. */
    set = its(MSEC, 0);
    OK(tempora_timer_settime(o, id, 0, &set, NULL));
    OK(tempora_timer_delete(o, id));
    FAILS(tempora_timer_gettime(o, id, &cur), EINVAL);
    struct timespec short_wait = ns_ts(10 * MSEC);
    FAILS(tempora_event_wait(o, &short_wait, &ev), EAGAIN);
}

static void none_timer(tempora_owner_t *o, clockid_t clock)
{
    struct tempora_sigevent sev = {.notify = TEMPORA_SIGEV_NONE};
    tempora_timer_t id;
    OK(tempora_timer_create(o, clock, &sev, &id));
    struct itimerspec set = its(10 * SEC, 0), cur;
    OK(tempora_timer_settime(o, id, 0, &set, NULL));
    OK(tempora_timer_gettime(o, id, &cur));
    CHECK(ts_ns(cur.it_value) > 9 * SEC && ts_ns(cur.it_value) <= 10 * SEC);

    /* A periodic SIGEV_NONE timer is forwarded by gettime: the value stays within a period. */
    set = its(MSEC, MSEC);
    OK(tempora_timer_settime(o, id, 0, &set, NULL));
    sleep_ns(5 * MSEC);
    OK(tempora_timer_gettime(o, id, &cur));
    CHECK(ts_ns(cur.it_value) > 0 && ts_ns(cur.it_value) <= MSEC);
    CHECK(ts_ns(cur.it_interval) == MSEC);
    CHECK(tempora_timer_getoverrun(o, id) == 0);
    struct tempora_event ev;
    FAILS(tempora_event_try(o, &ev), EAGAIN);
    OK(tempora_timer_delete(o, id));
}

static void callback_timers(tempora_owner_t *o, clockid_t clock)
{
    /* The callback form: told the timer and its overrun, with the user's pointer. */
    struct counter c = {0};
    struct tempora_sigevent sev = {
        .notify = TEMPORA_SIGEV_THREAD, .value.sival_ptr = &c, .callback = on_expiry};
    tempora_timer_t id;
    OK(tempora_timer_create(o, clock, &sev, &id));
    struct itimerspec set = its(MSEC, MSEC);
    OK(tempora_timer_settime(o, id, 0, &set, NULL));
    wait_for(&c.calls, 3);
    CHECK(atomic_load(&c.last_timer) == id);
    OK(tempora_timer_delete(o, id));

    /* The POSIX form: only the sigval. */
    atomic_store(&notified, 0);
    sev = (struct tempora_sigevent){
        .notify = TEMPORA_SIGEV_THREAD, .value.sival_int = 42, .notify_function = on_notify};
    OK(tempora_timer_create(o, clock, &sev, &id));
    set = its(MSEC, 0);
    OK(tempora_timer_settime(o, id, 0, &set, NULL));
    wait_for(&notified, 1);
    CHECK(atomic_load(&notified_value) == 42);
    OK(tempora_timer_delete(o, id));
}

/* No driver: nothing fires until tempora_poll, which fires what is due. */
static void polled(clockid_t clock)
{
    struct tempora_config cfg;
    OK(tempora_config_init(&cfg, sizeof cfg));
    cfg.drivers = 0;
    tempora_t *t = tempora_new(&cfg);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    struct timespec deadline;
    errno = 0;
    CHECK(tempora_next_deadline(t, &deadline) == 0);
    CHECK(tempora_next_timeout(t) == -1 && errno == 0);

    tempora_timer_t id;
    OK(tempora_timer_create(o, clock, NULL, &id));
    struct itimerspec set = its(3 * MSEC, 0);
    int64_t armed = now_ns(CLOCK_MONOTONIC);
    OK(tempora_timer_settime(o, id, 0, &set, NULL));
    CHECK(tempora_next_deadline(t, &deadline) == 1);
    /* The deadline is when a poll fires it: the end of the 1 us tick its expiry falls in, so
     * up to two ticks after the expiry settime computed (never before it). */
    CHECK(ts_ns(deadline) >= armed + 3 * MSEC &&
          ts_ns(deadline) <= now_ns(CLOCK_MONOTONIC) + 3 * MSEC + 2000);
    int ms = tempora_next_timeout(t);
    CHECK(ms >= 1 && ms <= 4); /* 3 ms and up to two ticks, rounded up */
    CHECK(tempora_poll(t) == 0);
    struct tempora_event ev;
    FAILS(tempora_event_try(o, &ev), EAGAIN);

    sleep_ns(ts_ns(deadline) - now_ns(CLOCK_MONOTONIC) + MSEC);
    CHECK(tempora_next_timeout(t) == 0);
    CHECK(tempora_poll(t) == 1);
    OK(tempora_event_try(o, &ev));
    CHECK(ev.timer == id);
    CHECK(tempora_next_deadline(t, &deadline) == 0);

    /* Freed with a timer armed and an event pending: nothing leaks, nothing fires. */
    OK(tempora_timer_settime(o, id, 0, &set, NULL));
    tempora_owner_free(o);
    tempora_free(t);
}

static sem_t slow_started;
static atomic_int slow_done;

/* Blocks its driver thread for 50 ms on its first call. */
static void slow_call(tempora_timer_t timer, int overrun, union sigval value)
{
    (void)timer, (void)overrun, (void)value;
    if (atomic_load(&slow_done) == 0) {
        sem_post(&slow_started);
        sleep_ns(50 * MSEC);
        atomic_store(&slow_done, 1);
    }
}

/* tempora_free stops the service at once, with owners alive: a callback running on a driver
 * finishes before it returns, no timer fires after it, and an armed timer then reads 1 ns
 * left for good. */
static void service_freed_under_its_owner(void)
{
    CHECK(sem_init(&slow_started, 0, 0) == 0);
    tempora_t *t = tempora_new(NULL);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    struct counter c = {0};
    struct tempora_sigevent sev = {.notify = TEMPORA_SIGEV_THREAD, .callback = on_expiry};
    sev.value.sival_ptr = &c;
    tempora_timer_t periodic, slow;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &periodic));
    sev.callback = slow_call;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &slow));
    struct itimerspec set = its(MSEC, MSEC);
    OK(tempora_timer_settime(o, periodic, 0, &set, NULL));
    set = its(MSEC, 0);
    OK(tempora_timer_settime(o, slow, 0, &set, NULL));
    struct timespec until = ns_ts(now_ns(CLOCK_REALTIME) + 5 * SEC);
    while (sem_timedwait(&slow_started, &until) != 0)
        CHECK(errno == EINTR);
    wait_for(&c.calls, 3);

    tempora_free(t);
    CHECK(atomic_load(&slow_done) == 1); /* the running call was waited for */
    int calls = atomic_load(&c.calls);
    sleep_ns(30 * MSEC);
    CHECK(atomic_load(&c.calls) == calls); /* 30 periods, no call */
    struct itimerspec cur;
    OK(tempora_timer_gettime(o, periodic, &cur));
    CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 1);
    CHECK(ts_ns(cur.it_interval) == MSEC);
    FAILS(tempora_timer_settime(o, periodic, 0, &set, NULL), ESHUTDOWN);
    tempora_owner_free(o);
    sem_destroy(&slow_started);
}

int main(void)
{
    for (size_t i = 0; i < sizeof CLOCKS / sizeof CLOCKS[0]; i++) {
        tempora_t *t = tempora_new(NULL);
        CHECK(t != NULL);
        tempora_owner_t *o = tempora_owner_new(t);
        CHECK(o != NULL);
        queue_timer(o, CLOCKS[i]);
        none_timer(o, CLOCKS[i]);
        callback_timers(o, CLOCKS[i]);
        tempora_owner_free(o);
        tempora_free(t);
        polled(CLOCKS[i]);
        printf("%s: lifecycle ok\n", NAMES[i]);
    }

    service_freed_under_its_owner();
    printf("service freed: stopped at once\n");

    /* The default owner: made once, the same after. */
    tempora_owner_t *d = tempora_default_owner();
    CHECK(d != NULL && d == tempora_default_owner());
    tempora_timer_t id;
    OK(tempora_timer_create(d, CLOCK_MONOTONIC, NULL, &id));
    struct itimerspec set = its(MSEC, 0);
    OK(tempora_timer_settime(d, id, 0, &set, NULL));
    struct tempora_event ev;
    OK(tempora_event_wait(d, &FIVE_SECONDS, &ev));
    CHECK(ev.timer == id);
    OK(tempora_timer_delete(d, id));
    tempora_free(NULL);
    tempora_owner_free(NULL);
    printf("default owner ok\n");
    return 0;
}
