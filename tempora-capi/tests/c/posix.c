/* tempora_posix.h's timer_create where it refuses what libc would create (dropin.c compares
 * the rest with libc): SIGEV_SIGNAL, SIGEV_THREAD_ID and a NULL sigevent (which means
 * SIGEV_SIGNAL) are ENOTSUP, as tempora delivers no signals; any other sigev_notify is
 * EINVAL, as Linux says; the clock is checked first, as Linux does; a refusal creates
 * nothing and leaves *timerid alone. */
#define _GNU_SOURCE
#include <signal.h>
#include <time.h>

#include "check.h"
#include <tempora_posix.h>

/* `call` returns -1 with errno `err`. */
#define REFUSED(call, err)                                                                  \
    do {                                                                                    \
        errno = 0;                                                                          \
        int r_ = (call);                                                                    \
        int e_ = errno;                                                                     \
        if (r_ != -1 || e_ != (err))                                                        \
            FAIL("%s returned %d with errno %s, expected -1 with %s", #call, r_,           \
                 e_ ? strerror(e_) : "0", strerror(err));                                   \
    } while (0)

static void on_expiry(union sigval v)
{
    (void)v;
}

static struct sigevent sigevent_of(int notify)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = notify;
    sev.sigev_signo = SIGUSR1;
    return sev;
}

int main(void)
{
    struct sigevent sig = sigevent_of(SIGEV_SIGNAL), tid = sigevent_of(SIGEV_THREAD_ID),
                    inval = sigevent_of(12345), none = sigevent_of(SIGEV_NONE),
                    thread = sigevent_of(SIGEV_THREAD), negative = sigevent_of(-1);
    tid._sigev_un._tid = gettid(); /* glibc names no member for it */
    timer_t id = 77;

    /* Valid, but needs signals. */
    REFUSED(timer_create(CLOCK_MONOTONIC, NULL, &id), ENOTSUP);
    REFUSED(timer_create(CLOCK_MONOTONIC, &sig, &id), ENOTSUP);
    REFUSED(timer_create(CLOCK_MONOTONIC, &tid, &id), ENOTSUP);
    /* Invalid. */
    REFUSED(timer_create(CLOCK_MONOTONIC, &inval, &id), EINVAL);
    REFUSED(timer_create(CLOCK_MONOTONIC, &negative, &id), EINVAL);
    REFUSED(timer_create(CLOCK_MONOTONIC, &thread, &id), EINVAL); /* no function */
    /* The clock first: a clock ID the kernel does not know is EINVAL, one it knows but
     * tempora does not time (nor the kernel's timers) EOPNOTSUPP, whatever the sigevent. */
    const struct sigevent *all[] = {NULL, &sig, &tid, &inval, &none};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        REFUSED(timer_create(12345, (struct sigevent *)all[i], &id), EINVAL);
        REFUSED(timer_create(CLOCK_MONOTONIC_RAW, (struct sigevent *)all[i], &id), EOPNOTSUPP);
    }
    /* Then the timer ID's address. */
    REFUSED(timer_create(CLOCK_MONOTONIC, &none, NULL), EFAULT);
    CHECK(id == 77);

    /* Nothing was created: the first timer is ID 0. */
    thread.sigev_notify_function = on_expiry;
    OK(timer_create(CLOCK_MONOTONIC, &thread, &id));
    CHECK(id == 0);
    OK(timer_delete(id));
    printf("posix ok\n");
    return 0;
}
