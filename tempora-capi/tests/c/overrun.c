/* A callback's overrun argument and tempora_timer_getoverrun, on a service with no driver
 * where the test decides which thread takes each expiry:
 *  - a call made for one expiry: getoverrun inside it equals its overrun;
 *  - expiries taken while that call runs are folded into one more call, after it, whose
 *    overrun counts them all but one (1 + each one's lateness, less 1); getoverrun inside
 *    that call is only the last expiry's lateness, which the folded call does not change. */
#define _GNU_SOURCE
#include "check.h"
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

static tempora_t *service;
static tempora_owner_t *owner;
static sem_t first_started, release_first;
static atomic_int calls;
static int arg[8], read_inside[8];

static void wait_sem(sem_t *s)
{
    struct timespec until = ns_ts(now_ns(CLOCK_REALTIME) + 5 * SEC);
    while (sem_timedwait(s, &until) != 0)
        CHECK(errno == EINTR);
}

static void on_expiry(tempora_timer_t timer, int overrun, union sigval value)
{
    (void)value;
    int n = atomic_load(&calls);
    CHECK(n < 8);
    arg[n] = overrun;
    read_inside[n] = tempora_timer_getoverrun(owner, timer);
    atomic_store(&calls, n + 1);
    if (n == 0) {
        sem_post(&first_started);
        wait_sem(&release_first);
    }
}

/* Polls until the first call starts; that poll returns once the call and the one folded
 * behind it have run. */
static void *first_poller(void *unused)
{
    (void)unused;
    while (atomic_load(&calls) == 0) {
        sleep_ns(MSEC);
        CHECK(tempora_poll(service) >= 0);
    }
    return NULL;
}

int main(void)
{
    CHECK(sem_init(&first_started, 0, 0) == 0 && sem_init(&release_first, 0, 0) == 0);
    struct tempora_config cfg;
    OK(tempora_config_init(&cfg, sizeof cfg));
    cfg.drivers = 0;
    service = tempora_new(&cfg);
    CHECK(service != NULL);
    owner = tempora_owner_new(service);
    CHECK(owner != NULL);
    struct tempora_sigevent sev = {.notify = TEMPORA_SIGEV_THREAD, .callback = on_expiry};
    tempora_timer_t id;
    OK(tempora_timer_create(owner, CLOCK_MONOTONIC, &sev, &id));
    struct itimerspec set = its(MSEC, MSEC);
    OK(tempora_timer_settime(owner, id, 0, &set, NULL));

    pthread_t poller;
    CHECK(pthread_create(&poller, NULL, first_poller, NULL) == 0);
    wait_sem(&first_started);
    /* The first call, made for one expiry, read what it was told. */
    CHECK(read_inside[0] == arg[0]);

    /* Three more expiries, each taken by a poll here while the first call runs: folded. Each
     * one's lateness is what getoverrun says right after its poll. */
    int folded = 0, last = -1;
    for (int taken = 0; taken < 3;) {
        sleep_ns(2 * MSEC);
        int fired = tempora_poll(service);
        CHECK(fired >= 0);
        if (fired == 0)
            continue;
        last = tempora_timer_getoverrun(owner, id);
        CHECK(last >= 0);
        folded += 1 + last;
        taken++;
    }
    CHECK(atomic_load(&calls) == 1); /* folded: no call beside the running one */
    sem_post(&release_first);
    CHECK(pthread_join(poller, NULL) == 0);

    CHECK(atomic_load(&calls) == 2);
    CHECK(arg[1] == folded - 1);      /* every folded expiry but the one delivered */
    CHECK(read_inside[1] == last);    /* the last expiry's lateness only */
    CHECK(arg[1] > read_inside[1]);   /* so they differ */
    CHECK(tempora_timer_getoverrun(owner, id) == last);
    tempora_owner_free(owner);
    tempora_free(service);
    printf("overrun ok: a folded call was told %d, getoverrun said %d\n", arg[1], last);
    return 0;
}
