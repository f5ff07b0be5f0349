/* When timers may fire, through the C ABI: tempora_timer_set_precision and _get_precision
 * (every kind and every refused argument), the owner's default slack, a deferrable timer's
 * bound (max_deferral_ns, and no bound) and its firing when the service polls anyway; then
 * spare_drivers: with spares, a SIGEV_THREAD function that blocks does not hold back another
 * timer's; with spare_drivers = 0 it does. Real clocks; the only timing bounds are a slack or a deferral
 * (never early, never past the bound) and a 300 ms sleep against a 10 ms offset. */
#define _GNU_SOURCE
#include "check.h"
#include <stdatomic.h>

#define USEC 1000LL

static void kinds_and_errors(void)
{
    struct tempora_config cfg;
    OK(tempora_config_init(&cfg, sizeof cfg));
    CHECK(cfg.spare_drivers == -1 && cfg.max_deferral_ns == 0);
    cfg.drivers = 0;
    tempora_t *t = tempora_new(&cfg);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    tempora_timer_t id;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));

    int kind = -1;
    int64_t slack = -1;
    OK(tempora_timer_get_precision(o, id, &kind, &slack));
    CHECK(kind == TEMPORA_PRECISION_DEFAULT && slack == 0);
    OK(tempora_timer_set_precision(o, id, TEMPORA_PRECISION_SLACK, 3 * SEC));
    OK(tempora_timer_get_precision(o, id, &kind, &slack));
    CHECK(kind == TEMPORA_PRECISION_SLACK && slack == 3 * SEC);
    OK(tempora_timer_set_precision(o, id, TEMPORA_PRECISION_DEFERRABLE, 0));
    OK(tempora_timer_get_precision(o, id, &kind, &slack));
    CHECK(kind == TEMPORA_PRECISION_DEFERRABLE && slack == 0);
    OK(tempora_timer_set_precision(o, id, TEMPORA_PRECISION_PRECISE, 0));
    OK(tempora_timer_get_precision(o, id, &kind, &slack));
    CHECK(kind == TEMPORA_PRECISION_PRECISE && slack == 0);

    FAILS(tempora_timer_set_precision(o, id, 4, 0), EINVAL);
    FAILS(tempora_timer_set_precision(o, id, -1, 0), EINVAL);
    FAILS(tempora_timer_set_precision(o, id, TEMPORA_PRECISION_SLACK, 0), EINVAL);
    FAILS(tempora_timer_set_precision(o, id, TEMPORA_PRECISION_SLACK, -5), EINVAL);
    FAILS(tempora_timer_set_precision(o, id, TEMPORA_PRECISION_PRECISE, 5), EINVAL);
    FAILS(tempora_timer_set_precision(o, id + 1, TEMPORA_PRECISION_PRECISE, 0), EINVAL);
    FAILS(tempora_timer_set_precision(o, -1, TEMPORA_PRECISION_PRECISE, 0), EINVAL);
    FAILS(tempora_timer_set_precision(NULL, id, TEMPORA_PRECISION_PRECISE, 0), EINVAL);
    FAILS(tempora_timer_get_precision(o, id, NULL, &slack), EFAULT);
    FAILS(tempora_timer_get_precision(o, id, &kind, NULL), EFAULT);
    FAILS(tempora_timer_get_precision(o, id + 1, &kind, &slack), EINVAL);
    FAILS(tempora_owner_set_default_slack(o, -1), EINVAL);
    FAILS(tempora_owner_set_default_slack(NULL, 0), EINVAL);

    struct tempora_config bad;
    OK(tempora_config_init(&bad, sizeof bad));
    bad.spare_drivers = -2;
    FAILS_NULL(tempora_new(&bad), EINVAL);

    tempora_owner_free(o);
    tempora_free(t);
    printf("kinds and errors ok\n");
}

/* A polled service: where tempora_next_deadline puts slack and deferrable timers, and a
 * deferrable timer fired early by a poll that happens anyway (never before its expiry). */
static void placement(void)
{
    struct tempora_config cfg;
    OK(tempora_config_init(&cfg, sizeof cfg));
    cfg.drivers = 0;
    cfg.max_deferral_ns = 50 * MSEC;
    tempora_t *t = tempora_new(&cfg);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    struct timespec deadline;

    /* Slack: fires somewhere in [expiry, expiry + slack], never before. */
    tempora_timer_t slack;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &slack));
    OK(tempora_timer_set_precision(o, slack, TEMPORA_PRECISION_SLACK, 3 * SEC));
    struct itimerspec ten = its(10 * SEC, 0);
    int64_t before = now_ns(CLOCK_MONOTONIC);
    OK(tempora_timer_settime(o, slack, 0, &ten, NULL));
    int64_t after = now_ns(CLOCK_MONOTONIC);
    CHECK(tempora_next_deadline(t, &deadline) == 1);
    CHECK(ts_ns(deadline) >= before + 10 * SEC);
    CHECK(ts_ns(deadline) <= after + 13 * SEC + 2 * USEC);
    OK(tempora_timer_delete(o, slack));

    /* The owner's default slack applies to timers that say nothing. */
    OK(tempora_owner_set_default_slack(o, 3 * SEC));
    tempora_timer_t dflt;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &dflt));
    before = now_ns(CLOCK_MONOTONIC);
    OK(tempora_timer_settime(o, dflt, 0, &ten, NULL));
    after = now_ns(CLOCK_MONOTONIC);
    CHECK(tempora_next_deadline(t, &deadline) == 1);
    CHECK(ts_ns(deadline) >= before + 10 * SEC);
    CHECK(ts_ns(deadline) <= after + 13 * SEC + 2 * USEC);
    OK(tempora_timer_delete(o, dflt));
    OK(tempora_owner_set_default_slack(o, 0));

    /* Deferrable: the service's deadline is its expiry plus max_deferral_ns... */
    tempora_timer_t def;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &def));
    OK(tempora_timer_set_precision(o, def, TEMPORA_PRECISION_DEFERRABLE, 0));
    struct itimerspec twenty = its(20 * MSEC, 0);
    before = now_ns(CLOCK_MONOTONIC);
    OK(tempora_timer_settime(o, def, 0, &twenty, NULL));
    after = now_ns(CLOCK_MONOTONIC);
    CHECK(tempora_next_deadline(t, &deadline) == 1);
    CHECK(ts_ns(deadline) >= before + 70 * MSEC);
    CHECK(ts_ns(deadline) <= after + 70 * MSEC + 2 * USEC);
    /* ...not before its expiry does a poll fire it... */
    CHECK(tempora_poll(t) == 0);
    struct tempora_event ev;
    FAILS(tempora_event_try(o, &ev), EAGAIN);
    /* ...but a poll that happens anyway after its expiry does, before the bound. */
    sleep_ns(after + 25 * MSEC - now_ns(CLOCK_MONOTONIC));
    CHECK(tempora_poll(t) == 1);
    OK(tempora_event_try(o, &ev));
    CHECK(ev.timer == def);
    CHECK(tempora_next_deadline(t, &deadline) == 0);

    tempora_owner_free(o);
    tempora_free(t);
    printf("placement ok\n");
}

static atomic_int blocker_done;
static atomic_int other_ran;
static atomic_int other_saw_blocker_done;

static void blocker(union sigval value)
{
    (void)value;
    sleep_ns(300 * MSEC);
    atomic_store(&blocker_done, 1);
}

static void other(union sigval value)
{
    (void)value;
    atomic_store(&other_saw_blocker_done, atomic_load(&blocker_done));
    atomic_store(&other_ran, 1);
}

/* One function blocks for 300 ms; another timer is due 10 ms after it. With spares the other
 * runs while the first still sleeps; without, only after it returns. */
static void spares(int spare_drivers)
{
    struct tempora_config cfg;
    OK(tempora_config_init(&cfg, sizeof cfg));
    cfg.spare_drivers = spare_drivers;
    tempora_t *t = tempora_new(&cfg);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    atomic_store(&blocker_done, 0);
    atomic_store(&other_ran, 0);
    atomic_store(&other_saw_blocker_done, -1);
    struct tempora_sigevent sev = {.notify = TEMPORA_SIGEV_THREAD, .notify_function = blocker};
    tempora_timer_t a, b;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &a));
    sev.notify_function = other;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &b));
    int64_t t0 = now_ns(CLOCK_MONOTONIC) + 20 * MSEC;
    struct itimerspec at_a = its(t0, 0), at_b = its(t0 + 10 * MSEC, 0);
    OK(tempora_timer_settime(o, a, TIMER_ABSTIME, &at_a, NULL));
    OK(tempora_timer_settime(o, b, TIMER_ABSTIME, &at_b, NULL));
    for (int i = 0; i < 5000 && !(atomic_load(&other_ran) && atomic_load(&blocker_done)); i++)
        sleep_ns(MSEC);
    CHECK(atomic_load(&other_ran) && atomic_load(&blocker_done));
    CHECK(atomic_load(&other_saw_blocker_done) == (spare_drivers == 0 ? 1 : 0));
    tempora_owner_free(o);
    tempora_free(t);
    printf("spare_drivers %d ok\n", spare_drivers);
}

/* max_deferral_ns = UINT64_MAX: an armed deferrable timer needs no wake-up of its own, so
 * the service says there is none (0, -1) until another timer or a poll comes. */
static void unbounded_deferral(void)
{
    struct tempora_config cfg;
    OK(tempora_config_init(&cfg, sizeof cfg));
    cfg.drivers = 0;
    cfg.max_deferral_ns = UINT64_MAX;
    tempora_t *t = tempora_new(&cfg);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    tempora_timer_t def, other;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &def));
    OK(tempora_timer_set_precision(o, def, TEMPORA_PRECISION_DEFERRABLE, 0));
    struct itimerspec set = its(MSEC, 0), cur;
    OK(tempora_timer_settime(o, def, 0, &set, NULL));
    OK(tempora_timer_gettime(o, def, &cur));
    CHECK(ts_ns(cur.it_value) > 0); /* armed */
    struct timespec deadline;
    errno = 0;
    CHECK(tempora_next_deadline(t, &deadline) == 0);
    CHECK(tempora_next_timeout(t) == -1 && errno == 0);
    /* A precise timer needs one; the deferrable timer fires at that poll. */
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &other));
    set = its(5 * MSEC, 0);
    OK(tempora_timer_settime(o, other, 0, &set, NULL));
    CHECK(tempora_next_deadline(t, &deadline) == 1);
    sleep_ns(ts_ns(deadline) - now_ns(CLOCK_MONOTONIC) + MSEC);
    CHECK(tempora_poll(t) == 2);
    /* -1 is also a NULL service's answer: errno tells them apart. */
    errno = 0;
    CHECK(tempora_next_timeout(NULL) == -1 && errno == EINVAL);
    tempora_owner_free(o);
    tempora_free(t);
}

int main(void)
{
    kinds_and_errors();
    placement();
    unbounded_deferral();
    spares(-1);
    spares(0);
    printf("precision ok\n");
    return 0;
}
