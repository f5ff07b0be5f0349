/* A process that cannot start a thread (pthread_create fails with EAGAIN, as at a thread
 * limit): tempora_new, tempora_default_owner and tempora_posix.h's timer_create fail with
 * EAGAIN, as pthread_create and timer_create do, and write nothing to stderr; once threads
 * start again, the default owner is made and its timers fire. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>

#include "check.h"
#include <tempora_posix.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static create_fn real_create;
static atomic_int refuse = 1;

/* Interposes the C library's: libtempora.so's calls come here. */
int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                   void *arg)
{
    if (atomic_load(&refuse))
        return EAGAIN;
    return real_create(thread, attr, start, arg);
}

static sem_t fired;

static void on_expiry(union sigval v)
{
    (void)v;
    sem_post(&fired);
}

int main(void)
{
    *(void **)&real_create = dlsym(RTLD_NEXT, "pthread_create");
    CHECK(real_create != NULL);
    CHECK(sem_init(&fired, 0, 0) == 0);

    FAILS_NULL(tempora_new(NULL), EAGAIN);
    FAILS_NULL(tempora_default_owner(), EAGAIN);
    CHECK(strstr(tempora_last_error(), "panic") == NULL);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD;
    sev.sigev_notify_function = on_expiry;
    timer_t id = NULL;
    FAILS(timer_create(CLOCK_MONOTONIC, &sev, &id), EAGAIN);
    CHECK(id == NULL);

    /* Threads start again: the default owner is made now, and works. */
    atomic_store(&refuse, 0);
    CHECK(tempora_default_owner() != NULL);
    OK(timer_create(CLOCK_MONOTONIC, &sev, &id));
    struct itimerspec set = its(MSEC, 0);
    OK(timer_settime(id, 0, &set, NULL));
    struct timespec until;
    CHECK(clock_gettime(CLOCK_REALTIME, &until) == 0);
    until.tv_sec += 5;
    CHECK(sem_timedwait(&fired, &until) == 0);
    OK(timer_delete(id));
    printf("nothreads ok\n");
    return 0;
}
