/* tempora_posix.h's timer_create with the sigevents libc would take and those it refuses
 * (dropin.c compares the rest with libc): SIGEV_SIGNAL, SIGEV_THREAD_ID and a NULL sigevent
 * (SIGEV_SIGNAL with SIGALRM, sival_int the timer's ID) create signal timers; a signal number
 * outside 1..64 or a thread outside the process is EINVAL, as is any other sigev_notify; the
 * clock is checked first, then the sigevent (the thread, then the signal number), then the
 * timer ID's address, as Linux does; a refusal creates nothing and leaves *timerid alone. */
#define _GNU_SOURCE
#include <signal.h>
#include <time.h>
#include <unistd.h>

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

static struct sigevent to_thread(pid_t tid, int signo)
{
    struct sigevent sev = sigevent_of(SIGEV_THREAD_ID);
    sev.sigev_signo = signo;
    sev._sigev_un._tid = tid; /* glibc 2.36 names no member for it */
    return sev;
}

/* Arms `id` to fire once in 1 ms and takes its signal `signo` (blocked) within 5 s. */
static siginfo_t fire_and_take(timer_t id, int signo)
{
    struct itimerspec once = its(MSEC, 0);
    struct timespec wait = {.tv_sec = 5};
    sigset_t set;
    siginfo_t info;
    sigemptyset(&set);
    sigaddset(&set, signo);
    OK(timer_settime(id, 0, &once, NULL));
    memset(&info, 0, sizeof info);
    if (sigtimedwait(&set, &info, &wait) != signo)
        FAIL("no signal %d from timer %p", signo, (void *)id);
    return info;
}

int main(void)
{
    struct sigevent sig = sigevent_of(SIGEV_SIGNAL), tid = to_thread(gettid(), SIGUSR1),
                    inval = sigevent_of(12345), none = sigevent_of(SIGEV_NONE),
                    thread = sigevent_of(SIGEV_THREAD), negative = sigevent_of(-1);
    timer_t untouched = (timer_t)(intptr_t)77, id = untouched;

    /* Invalid sigev_notify. */
    REFUSED(timer_create(CLOCK_MONOTONIC, &inval, &id), EINVAL);
    REFUSED(timer_create(CLOCK_MONOTONIC, &negative, &id), EINVAL);
    REFUSED(timer_create(CLOCK_MONOTONIC, &thread, &id), EINVAL); /* no function */
    /* Signal numbers outside 1..64, to the process or to this thread. */
    const int bad_signos[] = {0, 65, -1};
    for (size_t i = 0; i < sizeof bad_signos / sizeof bad_signos[0]; i++) {
        struct sigevent s = sigevent_of(SIGEV_SIGNAL);
        s.sigev_signo = bad_signos[i];
        REFUSED(timer_create(CLOCK_MONOTONIC, &s, &id), EINVAL);
        s = to_thread(gettid(), bad_signos[i]);
        REFUSED(timer_create(CLOCK_MONOTONIC, &s, &id), EINVAL);
    }
    /* Threads outside the process: the parent's main thread, none at all. The thread is
     * checked before the signal number. */
    const pid_t bad_tids[] = {getppid(), 0x7fffffff, 0, -1};
    for (size_t i = 0; i < sizeof bad_tids / sizeof bad_tids[0]; i++) {
        struct sigevent s = to_thread(bad_tids[i], SIGUSR1);
        REFUSED(timer_create(CLOCK_MONOTONIC, &s, &id), EINVAL);
        s = to_thread(bad_tids[i], 65);
        REFUSED(timer_create(CLOCK_MONOTONIC, &s, &id), EINVAL);
        if (strstr(tempora_last_error(), "thread") == NULL)
            FAIL("tid %d with signal 65: the thread not reported first: %s", (int)bad_tids[i],
                 tempora_last_error());
    }
    /* The clock first: a clock ID the kernel does not know is EINVAL, one it knows but
     * tempora does not time (nor the kernel's timers) EOPNOTSUPP, whatever the sigevent. */
    struct sigevent bad_signo = sigevent_of(SIGEV_SIGNAL), bad_tid = to_thread(getppid(), 0);
    bad_signo.sigev_signo = 0;
    const struct sigevent *all[] = {NULL, &sig, &tid, &inval, &none, &bad_signo, &bad_tid};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        REFUSED(timer_create(12345, (struct sigevent *)all[i], &id), EINVAL);
        REFUSED(timer_create(CLOCK_MONOTONIC_RAW, (struct sigevent *)all[i], &id), EOPNOTSUPP);
    }
    /* Then the sigevent, then the timer ID's address. */
    REFUSED(timer_create(CLOCK_MONOTONIC, &bad_signo, NULL), EINVAL);
    REFUSED(timer_create(CLOCK_MONOTONIC, &bad_tid, NULL), EINVAL);
    REFUSED(timer_create(CLOCK_MONOTONIC, &none, NULL), EFAULT);
    REFUSED(timer_create(CLOCK_MONOTONIC, &sig, NULL), EFAULT);
    REFUSED(timer_create(CLOCK_MONOTONIC, NULL, NULL), EFAULT);
    CHECK(id == untouched);

    /* Nothing was created: the first timer is ID 0. */
    thread.sigev_notify_function = on_expiry;
    OK(timer_create(CLOCK_MONOTONIC, &thread, &id));
    CHECK(id != NULL && tempora_posix_timer_id(id) == 0);
    OK(timer_delete(id));

    /* The signal sigevents create timers, and their signals carry what Linux's carry. */
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGALRM);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGRTMIN);
    OK(pthread_sigmask(SIG_BLOCK, &block, NULL));

    OK(timer_create(CLOCK_MONOTONIC, NULL, &id)); /* SIGALRM, sival_int the ID */
    siginfo_t info = fire_and_take(id, SIGALRM);
    CHECK(info.si_code == SI_TIMER && info.si_timerid == tempora_posix_timer_id(id) && info.si_overrun == 0);
    CHECK(info.si_value.sival_int == tempora_posix_timer_id(id));
    OK(timer_delete(id));

    sig.sigev_value.sival_int = 4242;
    OK(timer_create(CLOCK_REALTIME, &sig, &id));
    info = fire_and_take(id, SIGUSR1);
    CHECK(info.si_code == SI_TIMER && info.si_value.sival_int == 4242);
    OK(timer_delete(id));

    tid.sigev_signo = SIGRTMIN;
    tid.sigev_value.sival_ptr = &info;
    OK(timer_create(CLOCK_BOOTTIME, &tid, &id));
    info = fire_and_take(id, SIGRTMIN);
    CHECK(info.si_code == SI_TIMER && info.si_value.sival_ptr == (void *)&info);
    OK(timer_delete(id));

    /* The edges of 1..64. */
    sig.sigev_signo = 1;
    OK(timer_create(CLOCK_MONOTONIC, &sig, &id));
    OK(timer_delete(id));
    sig.sigev_signo = 64;
    OK(timer_create(CLOCK_MONOTONIC, &sig, &id));
    OK(timer_delete(id));

    /* timer_t is the C library's pointer: the everyday idioms compile (-Wall -Werror), a
     * tempora timer_t is never NULL, and one it did not make (NULL) is EINVAL. */
    timer_t none_yet = NULL;
    CHECK(none_yet == NULL);
    OK(timer_create(CLOCK_MONOTONIC, &sig, &none_yet));
    if (none_yet != NULL) {
        char shown[32];
        snprintf(shown, sizeof shown, "%p", (void *)none_yet);
        CHECK(strncmp(shown, "0x74656d70", 10) == 0);
        CHECK((int)(intptr_t)none_yet == tempora_posix_timer_id(none_yet));
    }
    OK(timer_delete(none_yet));
    struct itimerspec cur;
    REFUSED(timer_gettime(NULL, &cur), EINVAL);
    REFUSED(timer_delete((timer_t)(intptr_t)5), EINVAL);
    printf("posix ok\n");
    return 0;
}
