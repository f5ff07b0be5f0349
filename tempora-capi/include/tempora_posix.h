/*
 * tempora_posix.h: the POSIX timer calls, served by tempora. A program written against
 * timer_create & co. switches by including this header after <signal.h> and <time.h> (or
 * instead of them) and linking -ltempora; its calls then go to one process-wide tempora owner
 * (tempora_default_owner(): the default service, one driver thread), with the errno values
 * Linux sets and none of the kernel's per-user timer limit.
 *
 * What maps, and how it differs from the kernel's timers:
 *   timer_create     SIGEV_NONE, SIGEV_THREAD (sigev_notify_function, sigev_value),
 *                    SIGEV_SIGNAL, SIGEV_THREAD_ID and a NULL sigevent.
 *                    SIGEV_THREAD's function runs on tempora's driver thread, not on a new
 *                    thread per expiry (sigev_notify_attributes is ignored); one that blocks
 *                    hands the driver to a spare thread, so other timers still fire: timers
 *                    of other kinds however many block, other functions while fewer than 64
 *                    block at once (tempora_config's spare_drivers). A timer's function
 *                    never runs twice at once: expiries meanwhile make one more call.
 *                    It must return normally: a C++ exception that escapes it aborts the
 *                    process, and pthread_exit, longjmp or a cancellation out of it is
 *                    undefined behaviour (under glibc, pthread_exit would end only the
 *                    thread it starts for the call).
 *                    SIGEV_SIGNAL (sigev_signo, sigev_value) and SIGEV_THREAD_ID (to the
 *                    thread sigev_notify_thread_id) queue a real signal at each expiry, as the
 *                    kernel's timers do (si_code SI_TIMER, si_timerid, si_overrun, si_value;
 *                    one pending per timer); a NULL sigevent is SIGEV_SIGNAL with SIGALRM and
 *                    sival_int the timer's ID, as in Linux. tempora's threads block every
 *                    signal, so a thread of the program takes it. The periods a queued signal
 *                    misses are what timer_getoverrun says once it is delivered, and go into
 *                    the next signal's si_overrun, not its own (a queued siginfo cannot be
 *                    rewritten); a signal queued before timer_settime or timer_delete cannot be
 *                    taken back: it is delivered all the same (the kernel discards it).
 *                    Checked in Linux's order: the clock (EINVAL for one the kernel does not
 *                    know, EOPNOTSUPP for one tempora does not time), then the sigevent,
 *                    EINVAL for another sigev_notify, a sigev_notify_thread_id that is not a
 *                    thread of this process, then a sigev_signo outside 1..64.
 *   timer_settime, timer_gettime, timer_getoverrun, timer_delete: as the kernel's, but for
 *                    timer_getoverrun inside a SIGEV_THREAD function's call made for expiries
 *                    that came while its previous call ran: it says only the last one's
 *                    lateness, not how many came (tempora.h's tempora_callback_fn is told).
 *   timer_t          becomes tempora_timer_t (an int): IDs from 0 up, per process, as Linux's.
 *
 * Everything is a macro over a static inline function, so it works from C and C++ (warning
 * free under -Wall -Wextra); take the header out and the same source builds against the C
 * library again.
 */
#ifndef TEMPORA_POSIX_H
#define TEMPORA_POSIX_H

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "tempora.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Linux's value, where <signal.h> does not name it. */
#ifdef SIGEV_THREAD_ID
#define TEMPORA_POSIX_SIGEV_THREAD_ID SIGEV_THREAD_ID
#else
#define TEMPORA_POSIX_SIGEV_THREAD_ID 4
#endif

/* The target thread of a SIGEV_THREAD_ID sigevent: sigev_notify_thread_id where <signal.h>
 * names it (musl, newer glibc), glibc's union member otherwise. */
#ifdef sigev_notify_thread_id
#define TEMPORA_POSIX_SIGEV_TID(sev) ((sev)->sigev_notify_thread_id)
#else
#define TEMPORA_POSIX_SIGEV_TID(sev) ((sev)->_sigev_un._tid)
#endif

static inline int tempora_posix_timer_create(clockid_t clock, struct sigevent *sev,
                                             tempora_timer_t *timerid)
{
    struct tempora_sigevent tsev;
    tempora_owner_t *owner = tempora_default_owner();
    if (owner == NULL)
        return -1; /* errno says why: EAGAIN if its driver thread cannot start */
    /* memset, not `= {0}`: C++ warns of the members it leaves out (-Wextra). */
    memset(&tsev, 0, sizeof tsev);
    tsev.notify = TEMPORA_SIGEV_NONE;
    if (sev == NULL) {
        /* Linux's meaning: SIGEV_SIGNAL with SIGALRM, sival_int the timer's ID. */
        tsev.notify = TEMPORA_SIGEV_SIGNAL_ID;
        tsev.signo = SIGALRM;
    } else if (sev->sigev_notify == SIGEV_SIGNAL ||
               sev->sigev_notify == TEMPORA_POSIX_SIGEV_THREAD_ID) {
        tsev.value = sev->sigev_value;
        tsev.signo = sev->sigev_signo;
        if (sev->sigev_notify == SIGEV_SIGNAL) {
            tsev.notify = TEMPORA_SIGEV_SIGNAL;
        } else {
            tsev.notify = TEMPORA_SIGEV_THREAD_ID;
            tsev.tid = TEMPORA_POSIX_SIGEV_TID(sev);
        }
    } else if (sev->sigev_notify == SIGEV_THREAD) {
        tsev.notify = TEMPORA_SIGEV_THREAD;
        tsev.value = sev->sigev_value;
        tsev.notify_function = sev->sigev_notify_function;
    } else if (sev->sigev_notify != SIGEV_NONE) {
        /* Refused, but after the clock, which Linux checks first: given a NULL timerid,
         * tempora_timer_create checks the clock, then fails with EFAULT and creates nothing. */
        if (tempora_timer_create(owner, clock, &tsev, NULL) == -1 && errno != EFAULT)
            return -1;
        errno = EINVAL;
        return -1;
    }
    /* tempora_timer_create checks the clock, then the sigevent (the thread, then the signal
     * number), as Linux does. */
    return tempora_timer_create(owner, clock, &tsev, timerid);
}

static inline int tempora_posix_timer_settime(tempora_timer_t timerid, int flags,
                                              const struct itimerspec *new_value,
                                              struct itimerspec *old_value)
{
    return tempora_timer_settime(tempora_default_owner(), timerid, flags, new_value, old_value);
}

static inline int tempora_posix_timer_gettime(tempora_timer_t timerid, struct itimerspec *curr)
{
    return tempora_timer_gettime(tempora_default_owner(), timerid, curr);
}

static inline int tempora_posix_timer_getoverrun(tempora_timer_t timerid)
{
    return tempora_timer_getoverrun(tempora_default_owner(), timerid);
}

static inline int tempora_posix_timer_delete(tempora_timer_t timerid)
{
    return tempora_timer_delete(tempora_default_owner(), timerid);
}

#ifdef __cplusplus
}
#endif

#define timer_t tempora_timer_t
#define timer_create tempora_posix_timer_create
#define timer_settime tempora_posix_timer_settime
#define timer_gettime tempora_posix_timer_gettime
#define timer_getoverrun tempora_posix_timer_getoverrun
#define timer_delete tempora_posix_timer_delete

#endif /* TEMPORA_POSIX_H */
