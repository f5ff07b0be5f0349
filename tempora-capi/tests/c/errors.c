/* Every way a call of the C ABI fails: the errno (what Linux sets for the POSIX call, checked
 * against the running kernel for clock IDs), a message in tempora_last_error(), and
 * out-parameters left as they were. Then a service freed under its owner (ESHUTDOWN). */
#define _GNU_SOURCE
#include "check.h"
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <unistd.h>

static void on_expiry(tempora_timer_t timer, int overrun, union sigval value)
{
    (void)timer, (void)overrun, (void)value;
}

static void on_notify(union sigval value)
{
    (void)value;
}

/* A sentinel an out-parameter must still hold after a failed call. */
#define UNTOUCHED 0x5a5a5a5a

static int spec_untouched(const struct itimerspec *s)
{
    return s->it_value.tv_sec == UNTOUCHED && s->it_value.tv_nsec == UNTOUCHED &&
           s->it_interval.tv_sec == UNTOUCHED && s->it_interval.tv_nsec == UNTOUCHED;
}

static struct itimerspec sentinel_spec(void)
{
    struct itimerspec s = {{UNTOUCHED, UNTOUCHED}, {UNTOUCHED, UNTOUCHED}};
    return s;
}

static void config_and_service(void)
{
    FAILS(tempora_config_init(NULL, sizeof(struct tempora_config)), EFAULT);
    struct tempora_config cfg;
    OK(tempora_config_init(&cfg, sizeof cfg));
    CHECK(cfg.bases == 0 && cfg.drivers == -1 && cfg.tick_ns == 0 && cfg.id_bits == 0);

    struct tempora_config bad = cfg;
    bad.bases = 65537;
    FAILS_NULL(tempora_new(&bad), EINVAL);
    bad = cfg;
    bad.bases = 1;
    bad.drivers = 2;
    FAILS_NULL(tempora_new(&bad), EINVAL);
    bad = cfg;
    bad.id_bits = 32;
    FAILS_NULL(tempora_new(&bad), EINVAL);
    bad = cfg;
    bad.drivers = -2;
    FAILS_NULL(tempora_new(&bad), EINVAL);
    /* A tick above 1 s (a 1 h tick left a 10 ms timer unfired for the hour). */
    bad = cfg;
    bad.tick_ns = 1000000001;
    FAILS_NULL(tempora_new(&bad), EINVAL);
    CHECK(strstr(tempora_last_error(), "tick") != NULL);
    bad.tick_ns = 3600 * 1000000000ULL;
    FAILS_NULL(tempora_new(&bad), EINVAL);
    bad.tick_ns = UINT64_MAX;
    FAILS_NULL(tempora_new(&bad), EINVAL);
    struct tempora_config longest = cfg;
    longest.drivers = 0;
    longest.tick_ns = 1000000000;
    tempora_t *t = tempora_new(&longest);
    CHECK(t != NULL);
    tempora_free(t);
    FAILS_NULL(tempora_owner_new(NULL), EINVAL);
}

/* Each clock ID from -16 to 40: what the kernel's timer_create says, tempora says, except
 * that a clock the kernel times and tempora does not is EOPNOTSUPP. */
static void clocks_match_the_kernel(tempora_owner_t *o)
{
    for (clockid_t c = -16; c <= 40; c++) {
        struct sigevent ksev = {.sigev_notify = SIGEV_NONE};
        timer_t kid;
        errno = 0;
        int kr = timer_create(c, &ksev, &kid);
        int kerr = errno;
        if (kr == 0)
            timer_delete(kid);
        tempora_timer_t id = UNTOUCHED;
        errno = 0;
        int r = tempora_timer_create(o, c, NULL, &id);
        int err = errno;
        if (c == CLOCK_REALTIME || c == CLOCK_MONOTONIC || c == CLOCK_BOOTTIME) {
            CHECK(kr == 0 && r == 0);
            OK(tempora_timer_delete(o, id));
            continue;
        }
        int want = kr == 0 ? EOPNOTSUPP : kerr;
        if (r != -1 || err != want)
            FAIL("clock %d: tempora %d/%s, kernel %d/%s", (int)c, r, strerror(err), kr,
                 strerror(kerr));
        CHECK(id == UNTOUCHED);
    }
    /* The kernel's order: a bad clock is EINVAL even with a NULL timerid. */
    FAILS(tempora_timer_create(o, 12345, NULL, NULL), EINVAL);
}

static void create(tempora_owner_t *o)
{
    tempora_timer_t id = UNTOUCHED;
    FAILS(tempora_timer_create(NULL, CLOCK_MONOTONIC, NULL, &id), EINVAL);
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, NULL), EFAULT);

    struct tempora_sigevent sev = {.notify = 7};
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id), EINVAL);
    sev = (struct tempora_sigevent){.notify = TEMPORA_SIGEV_THREAD};
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id), EINVAL); /* no function */
    sev.callback = on_expiry;
    sev.notify_function = on_notify;
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id), EINVAL); /* two functions */
    sev.notify_function = NULL;
    sev.name = "\xff\xfe";
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id), EINVAL); /* not UTF-8 */
    sev.name = "none";
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id), EINVAL); /* reserved */
    sev.name = "queue";
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id), EINVAL);
    char *long_name = malloc(70000);
    CHECK(long_name != NULL);
    memset(long_name, 'a', 69999);
    long_name[69999] = '\0';
    sev.name = long_name;
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id), EINVAL); /* too long */
    free(long_name);
    CHECK(id == UNTOUCHED);

    sev.name = "tick";
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id));
    CHECK(id >= 0);
    OK(tempora_timer_delete(o, id));

    /* A function with any other notify: a TEMPORA_SIGEV_THREAD sigevent whose notify was left
     * 0 (TEMPORA_SIGEV_QUEUE) would make a queue timer whose function is never called. */
    id = UNTOUCHED;
    int others[] = {TEMPORA_SIGEV_QUEUE, TEMPORA_SIGEV_NONE, TEMPORA_SIGEV_SIGNAL,
                    TEMPORA_SIGEV_SIGNAL_ID};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        sev = (struct tempora_sigevent){.notify = others[i], .signo = SIGUSR1,
                                        .notify_function = on_notify};
        FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id), EINVAL);
        CHECK(strstr(tempora_last_error(), "TEMPORA_SIGEV_THREAD") != NULL);
        sev.notify_function = NULL;
        sev.callback = on_expiry;
        FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id), EINVAL);
    }
    CHECK(id == UNTOUCHED);
}

/* A time past KTIME_MAX (INT64_MAX ns, about 292 years) is clamped to it, as the kernel clamps
 * it: an absolute or relative LLONG_MAX s reads back as the time left to KTIME_MAX (about
 * 9.2e9 s, not 1.8e10 s), an LLONG_MAX s interval as KTIME_MAX. Checked against a kernel
 * timer set alike. */
static void times_past_ktime_max(tempora_owner_t *o)
{
    tempora_timer_t id;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
    struct sigevent ksev = {.sigev_notify = SIGEV_NONE};
    timer_t kid;
    CHECK(timer_create(CLOCK_MONOTONIC, &ksev, &kid) == 0);
    const struct timespec huge = {LLONG_MAX, 999999999};
    const struct itimerspec set = {.it_value = huge, .it_interval = huge};
    for (int flags = 0; flags <= TEMPORA_TIMER_ABSTIME; flags += TEMPORA_TIMER_ABSTIME) {
        struct itimerspec cur, kcur;
        OK(tempora_timer_settime(o, id, flags, &set, NULL));
        CHECK(timer_settime(kid, flags, &set, NULL) == 0);
        OK(tempora_timer_gettime(o, id, &cur));
        CHECK(timer_gettime(kid, &kcur) == 0);
        int64_t left = INT64_MAX - now_ns(CLOCK_MONOTONIC);
        CHECK(cur.it_interval.tv_sec == 9223372036 && cur.it_interval.tv_nsec == 854775807);
        CHECK(kcur.it_interval.tv_sec == 9223372036 && kcur.it_interval.tv_nsec == 854775807);
        CHECK(ts_ns(cur.it_value) >= left && ts_ns(cur.it_value) - left < SEC);
        CHECK(llabs(ts_ns(cur.it_value) - ts_ns(kcur.it_value)) < SEC);
    }
    timer_delete(kid);
    OK(tempora_timer_delete(o, id));
}

static void settime_gettime_overrun_delete(tempora_owner_t *o)
{
    tempora_timer_t id;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
    struct itimerspec set = its(SEC, 0), old = sentinel_spec(), cur = sentinel_spec();

    FAILS(tempora_timer_settime(NULL, id, 0, &set, &old), EINVAL);
    FAILS(tempora_timer_settime(o, id, 0, NULL, &old), EINVAL);
    struct itimerspec bad[] = {
        {.it_value = {0, 1000000000}},
        {.it_value = {0, -1}},
        {.it_value = {-1, 0}},
        {.it_value = {1, 0}, .it_interval = {0, 1000000000}},
        {.it_value = {1, 0}, .it_interval = {-1, 0}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FAILS(tempora_timer_settime(o, id, 0, &bad[i], &old), EINVAL);
        FAILS(tempora_timer_settime(o, id, TEMPORA_TIMER_ABSTIME, &bad[i], &old), EINVAL);
    }
    FAILS(tempora_timer_settime(o, id + 1000, 0, &set, &old), EINVAL);
    FAILS(tempora_timer_settime(o, -1, 0, &set, &old), EINVAL);
    FAILS(tempora_timer_settime(o, INT_MIN, 0, &set, &old), EINVAL);
    CHECK(spec_untouched(&old));
    /* The failed calls armed nothing. */
    OK(tempora_timer_gettime(o, id, &cur));
    CHECK(ts_ns(cur.it_value) == 0);

    cur = sentinel_spec();
    FAILS(tempora_timer_gettime(NULL, id, &cur), EINVAL);
    FAILS(tempora_timer_gettime(o, id + 1000, &cur), EINVAL);
    FAILS(tempora_timer_gettime(o, -5, &cur), EINVAL);
    CHECK(spec_untouched(&cur));
    FAILS(tempora_timer_gettime(o, id, NULL), EFAULT);
    /* The kernel finds the timer before it copies out. */
    FAILS(tempora_timer_gettime(o, id + 1000, NULL), EINVAL);

    FAILS(tempora_timer_getoverrun(NULL, id), EINVAL);
    FAILS(tempora_timer_getoverrun(o, id + 1000), EINVAL);
    FAILS(tempora_timer_getoverrun(o, -1), EINVAL);

    FAILS(tempora_timer_delete(NULL, id), EINVAL);
    FAILS(tempora_timer_delete(o, id + 1000), EINVAL);
    FAILS(tempora_timer_delete(o, -1), EINVAL);
    OK(tempora_timer_delete(o, id));
    FAILS(tempora_timer_delete(o, id), EINVAL);
    FAILS(tempora_timer_settime(o, id, 0, &set, NULL), EINVAL);
    FAILS(tempora_timer_getoverrun(o, id), EINVAL);
}

static void exact_ids(tempora_owner_t *o)
{
    FAILS(tempora_owner_restore_ids(NULL, TEMPORA_RESTORE_IDS_GET), EINVAL);
    FAILS(tempora_owner_restore_ids(o, 3), EINVAL);
    FAILS(tempora_owner_restore_ids(o, -1), EINVAL);
    CHECK(tempora_owner_restore_ids(o, TEMPORA_RESTORE_IDS_GET) == 0);
    OK(tempora_owner_restore_ids(o, TEMPORA_RESTORE_IDS_ON));
    CHECK(tempora_owner_restore_ids(o, TEMPORA_RESTORE_IDS_GET) == 1);

    tempora_timer_t id = 500;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
    CHECK(id == 500);
    id = 500;
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id), EBUSY);
    CHECK(id == 500);
    id = -1;
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id), EINVAL);
    CHECK(id == -1);
    id = INT_MAX;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
    CHECK(id == INT_MAX);
    OK(tempora_timer_delete(o, INT_MAX));

    /* Off again: the next free ID after the last exact one. */
    OK(tempora_owner_restore_ids(o, TEMPORA_RESTORE_IDS_OFF));
    CHECK(tempora_owner_restore_ids(o, TEMPORA_RESTORE_IDS_GET) == 0);
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
    CHECK(id == 0);
    OK(tempora_timer_delete(o, id));
    OK(tempora_timer_delete(o, 500));
}

static void id_space(void)
{
    /* A 2-bit ID space: four timers, then EAGAIN; an exact ID beyond it is EINVAL. */
    struct tempora_config cfg;
    OK(tempora_config_init(&cfg, sizeof cfg));
    cfg.drivers = 0;
    cfg.id_bits = 2;
    tempora_t *t = tempora_new(&cfg);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    tempora_timer_t id;
    for (int i = 0; i < 4; i++)
        OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
    id = UNTOUCHED;
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id), EAGAIN);
    CHECK(id == UNTOUCHED);
    OK(tempora_timer_delete(o, 2));
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
    CHECK(id == 2);
    OK(tempora_owner_restore_ids(o, TEMPORA_RESTORE_IDS_ON));
    id = 4;
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id), EINVAL);
    tempora_owner_free(o);
    tempora_free(t);
}

static void events_and_fds(tempora_t *t, tempora_owner_t *o)
{
    struct tempora_event ev = {UNTOUCHED, UNTOUCHED};
    struct timespec zero = {0, 0}, bad = {0, 1000000000}, neg = {-1, 0};
    FAILS(tempora_event_wait(NULL, &zero, &ev), EINVAL);
    FAILS(tempora_event_wait(o, &zero, NULL), EFAULT);
    FAILS(tempora_event_wait(o, &bad, &ev), EINVAL);
    FAILS(tempora_event_wait(o, &neg, &ev), EINVAL);
    FAILS(tempora_event_wait(o, &zero, &ev), EAGAIN);
    FAILS(tempora_event_try(NULL, &ev), EINVAL);
    FAILS(tempora_event_try(o, NULL), EFAULT);
    FAILS(tempora_event_try(o, &ev), EAGAIN);
    CHECK(ev.timer == UNTOUCHED && ev.overrun == UNTOUCHED);

    FAILS(tempora_owner_event_fd(NULL), EINVAL);
    int fd = tempora_owner_event_fd(o);
    CHECK(fd >= 0 && fd == tempora_owner_event_fd(o));
    CHECK(fcntl(fd, F_GETFD) >= 0);

    FAILS(tempora_poll(NULL), EINVAL);
    FAILS(tempora_deadline_fd(NULL), EINVAL);
    FAILS(tempora_deadline_fd(t), EINVAL); /* t has a driver thread */
    struct timespec deadline = {UNTOUCHED, UNTOUCHED};
    FAILS(tempora_next_deadline(NULL, &deadline), EINVAL);
    FAILS(tempora_next_deadline(t, NULL), EFAULT);
    CHECK(deadline.tv_sec == UNTOUCHED && deadline.tv_nsec == UNTOUCHED);
    FAILS(tempora_next_timeout(NULL), EINVAL);
}

static int resolve_none(const char *name, struct tempora_sigevent *out, void *ctx)
{
    (void)name, (void)out, (void)ctx;
    return -1;
}

static int resolve_bad(const char *name, struct tempora_sigevent *out, void *ctx)
{
    (void)name, (void)ctx;
    out->notify = TEMPORA_SIGEV_THREAD; /* no function: not a valid sigevent */
    return 0;
}

static void checkpoints(tempora_t *t, tempora_owner_t *o)
{
    char dir[] = "/tmp/tempora-errors-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], garbage[256], missing[256];
    snprintf(path, sizeof path, "%s/snap", dir);
    snprintf(garbage, sizeof garbage, "%s/garbage", dir);
    snprintf(missing, sizeof missing, "%s/no/such/dir/snap", dir);

    FAILS(tempora_owner_checkpoint(NULL, path), EINVAL);
    FAILS(tempora_owner_checkpoint(o, NULL), EFAULT);
    FAILS(tempora_owner_checkpoint(o, missing), ENOENT);

    struct tempora_sigevent sev = {.notify = TEMPORA_SIGEV_THREAD, .callback = on_expiry,
                                   .name = "tick"};
    tempora_timer_t id;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, &sev, &id));
    OK(tempora_owner_checkpoint(o, path));

    FILE *f = fopen(garbage, "w");
    CHECK(f != NULL);
    fputs("not a tempora snapshot\n", f);
    fclose(f);

    tempora_owner_t *fresh = tempora_owner_new(t);
    CHECK(fresh != NULL);
    FAILS(tempora_owner_restore(NULL, path, resolve_none, NULL), EINVAL);
    FAILS(tempora_owner_restore(fresh, NULL, resolve_none, NULL), EFAULT);
    FAILS(tempora_owner_restore(fresh, missing, resolve_none, NULL), ENOENT);
    FAILS(tempora_owner_restore(fresh, garbage, resolve_none, NULL), EINVAL);
    FAILS(tempora_owner_restore(fresh, path, NULL, NULL), EINVAL);        /* no resolver */
    FAILS(tempora_owner_restore(fresh, path, resolve_none, NULL), EINVAL); /* unknown name */
    FAILS(tempora_owner_restore(fresh, path, resolve_bad, NULL), EINVAL);  /* bad answer */
    FAILS(tempora_owner_restore(o, path, resolve_none, NULL), EBUSY);     /* o has timers */
    /* All or nothing: the failed restores created nothing. */
    struct itimerspec cur;
    FAILS(tempora_timer_gettime(fresh, id, &cur), EINVAL);
    tempora_owner_free(fresh);
    OK(tempora_timer_delete(o, id));

    unlink(path);
    unlink(garbage);
    rmdir(dir);
}

/* The service freed while an owner lives: its timers stay readable, arming them fails with
 * ESHUTDOWN, and waiting for an event says so instead of hanging. */
static void service_freed(void)
{
    tempora_t *t = tempora_new(NULL);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    tempora_timer_t id;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
    struct itimerspec set = its(10 * SEC, 0), cur;
    OK(tempora_timer_settime(o, id, 0, &set, NULL));
    tempora_free(t);

    OK(tempora_timer_gettime(o, id, &cur));
    FAILS(tempora_timer_settime(o, id, 0, &set, NULL), ESHUTDOWN);
    tempora_timer_t other = UNTOUCHED;
    FAILS(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &other), ESHUTDOWN);
    CHECK(other == UNTOUCHED);
    struct tempora_event ev;
    FAILS(tempora_event_wait(o, NULL, &ev), ESHUTDOWN);
    FAILS(tempora_event_try(o, &ev), ESHUTDOWN);
    CHECK(tempora_timer_getoverrun(o, id) == 0);
    OK(tempora_timer_delete(o, id));
    tempora_owner_free(o);
}

int main(void)
{
    config_and_service();
    tempora_t *t = tempora_new(NULL);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    clocks_match_the_kernel(o);
    create(o);
    settime_gettime_overrun_delete(o);
    times_past_ktime_max(o);
    exact_ids(o);
    id_space();
    events_and_fds(t, o);
    checkpoints(t, o);
    tempora_owner_free(o);
    tempora_free(t);
    service_freed();
    printf("errors ok\n");
    return 0;
}
