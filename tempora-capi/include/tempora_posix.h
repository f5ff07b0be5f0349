/*
 * tempora_posix.h: the POSIX timer calls, served by tempora. There are two ways to switch a
 * program written against timer_create & co.:
 *
 *   - At compile time, this header: include it after <signal.h> and <time.h> (or instead of
 *     them) and link -ltempora. Only the translation units that include it are switched: one
 *     compiled without it hands a tempora timer_t to the C library, which (glibc >= 2.34) takes
 *     its low 32 bits for a kernel timer's ID.
 *   - At link time, the drop-in library libtempora-posix (crate tempora-posix): run the
 *     unmodified program with LD_PRELOAD=libtempora-posix.so, or link it with -ltempora-posix
 *     (or libtempora-posix.a). Every call of the program and of the libraries it loads is
 *     switched, and no recompiling. Leave this header out then.
 *
 * Either way the calls go to one process-wide tempora owner (tempora_default_owner(): the
 * default service, one driver thread), with the errno values Linux sets and none of the
 * kernel's per-user timer limit, and through the same mapping (tempora_posix_create_on).
 *
 * What maps:
 *   timer_create     SIGEV_NONE, SIGEV_THREAD (sigev_notify_function, sigev_value),
 *                    SIGEV_SIGNAL (sigev_signo, sigev_value), SIGEV_THREAD_ID (to the thread
 *                    sigev_notify_thread_id, glibc's _sigev_un._tid) and a NULL sigevent
 *                    (SIGEV_SIGNAL with SIGALRM and sival_int the timer's ID, as in Linux),
 *                    checked in Linux's order: the clock (EINVAL for one the kernel does not
 *                    know), then the sigevent (EINVAL for another sigev_notify, a
 *                    sigev_notify_thread_id that is not a thread of this process, then a
 *                    sigev_signo outside 1..64), then the timer ID's address (EFAULT).
 *                    Signal timers queue a real signal at each expiry, as the kernel's do
 *                    (si_code SI_TIMER, si_timerid, si_overrun, si_value; one pending per
 *                    timer); tempora's threads block every signal, so a thread of the program
 *                    takes it.
 *   timer_settime, timer_gettime, timer_getoverrun, timer_delete: as the kernel's.
 *   timer_t          stays the C library's (a pointer): a tempora timer's is its ID in the
 *                    low 32 bits and a tag in the high 32, so timer_t t = NULL,
 *                    if (t != NULL) and printf("%p", (void *)t) are everyday C, and
 *                    (int)(intptr_t)t is the si_timerid of its signals (and a NULL sigevent's
 *                    sival_int), as with glibc's kernel timers. This header's tag is
 *                    TEMPORA_POSIX_TIMER_TAG ("temp": %p prints 0x74656d70000000NN), the
 *                    drop-in's "tpos" (0x74706f73000000NN): a timer_t of one never names a
 *                    timer of the other. No kernel timer_t has either (glibc's are
 *                    0..INT_MAX, or have the sign bit set for SIGEV_THREAD); a timer_t without
 *                    this header's tag (NULL, a kernel timer's) is EINVAL here.
 *                    tempora_posix_timer_id() gives a timer_t's tempora ID.
 *
 * Where a program sees tempora differ from the kernel's timers (glibc's calls), and why:
 *
 *   a program ...              kernel (glibc)              tempora
 *   ------------------------   -------------------------   -----------------------------------
 *   creates a timer on a CPU-  times it                    header: EOPNOTSUPP (tempora times
 *   time clock (its own, a                                 CLOCK_REALTIME, _MONOTONIC and
 *   thread's from pthread_                                 _BOOTTIME only). Drop-in: the
 *   getcpuclockid), CLOCK_TAI                              kernel's timer, made by the C
 *   or an alarm clock                                      library's timer_create (dlsym
 *                                                          RTLD_NEXT; in a -static program the
 *                                                          system call, so SIGEV_THREAD there
 *                                                          is EINVAL): the kernel's behaviour
 *   creates a SIGEV_THREAD     glibc >= 2.34: a helper     the function runs on tempora's
 *   timer                      thread per timer, made      driver thread; one that blocks
 *                              with sigev_notify_          hands the driver to a spare thread,
 *                              attributes, calls the       so other timers still fire: timers
 *                              function at each expiry     of other kinds however many block,
 *                                                          other functions while fewer than
 *                                                          64 block at once (tempora_config's
 *                                                          spare_drivers).
 *                                                          sigev_notify_attributes is ignored
 *                                                          (stack size, scheduling, affinity,
 *                                                          detach state do not apply);
 *                                                          pthread_self() and thread-locals
 *                                                          are the driver's; every signal is
 *                                                          blocked there. A timer's function
 *                                                          never runs twice at once: expiries
 *                                                          meanwhile make one more call
 *   ends a SIGEV_THREAD call   pthread_exit ends the       must return normally: a C++
 *   other than by returning    helper thread's call        exception aborts the process;
 *                                                          pthread_exit, longjmp or a
 *                                                          cancellation is undefined behaviour
 *   calls timer_getoverrun in  the overrun of that         the last expiry's lateness only,
 *   a SIGEV_THREAD call made   expiry                      not how many came (tempora.h's
 *   for expiries that came                                 tempora_callback_fn is told)
 *   while the previous ran
 *   delays a periodic signal   its si_overrun counts the   the periods count in the next
 *   (blocked, taken late)      periods                     signal's si_overrun (a queued
 *                                                          siginfo cannot be rewritten);
 *                                                          timer_getoverrun says them once
 *                                                          the signal is delivered
 *   re-arms, disarms or        the queued signal is        it is delivered all the same (user
 *   deletes a timer whose      discarded                   space cannot take back a queued
 *   signal is queued                                       signal)
 *   holds many signal timers   EAGAIN past RLIMIT_         any number (a queued signal counts
 *                              SIGPENDING                  against the limit, not a timer)
 *   reads a timer_t's value    a small int (or glibc's     the tagged value above: a program
 *   as a number                tagged pointer)             that indexes an array with it, or
 *                                                          prints it, sees another number
 *   forks                      the child has none of the   the same: the parent's timer_t is
 *                              parent's timers             EINVAL in the child, whose own
 *                                                          timers start from ID 0
 *
 * The signals' other differences, which user space imposes (several timers sharing a signal
 * number, a standard signal shared with kill, a thread ID reused), are the tempora crate's
 * `timers` module doc's table "Signals: where tempora differs from the kernel".
 *
 * Everything here is a macro over a static inline function, so it works from C and C++
 * (warning free under -Wall -Wextra); take the header out and the same source builds against
 * the C library again.
 */
#ifndef TEMPORA_POSIX_H
#define TEMPORA_POSIX_H

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
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

#if UINTPTR_MAX <= 0xffffffffu
#error "tempora_posix.h tags a tempora ID in a timer_t's high 32 bits: it needs 64-bit pointers"
#endif

/* A tempora timer_t's high 32 bits ("temp"): above every kernel timer's (0..INT_MAX) and below
 * glibc's SIGEV_THREAD timers' (the sign bit set), so it names no timer of the C library. */
#define TEMPORA_POSIX_TIMER_TAG 0x74656d70u

/* The timer_t of tempora timer `id`. */
static inline timer_t tempora_posix_timer_of(tempora_timer_t id)
{
    return (timer_t)(uintptr_t)(((uint64_t)TEMPORA_POSIX_TIMER_TAG << 32) | (uint32_t)id);
}

/* The tempora ID of `t`, or -1 for a timer_t this header did not make. */
static inline tempora_timer_t tempora_posix_timer_id(timer_t t)
{
    uint64_t v = (uint64_t)(uintptr_t)t;
    if ((v >> 32) != TEMPORA_POSIX_TIMER_TAG || (uint32_t)v > INT32_MAX)
        return -1;
    return (tempora_timer_t)(uint32_t)v;
}

/* timer_create's mapping of a C library sigevent onto tempora's, on `owner` (NULL: the
 * default owner could not be made, and errno says why: EAGAIN if its driver thread cannot
 * start), with the ID as tempora gives it (timer_create below tags it; the drop-in library
 * shares this). */
static inline int tempora_posix_create_on(tempora_owner_t *owner, clockid_t clock,
                                          struct sigevent *sev, tempora_timer_t *timerid)
{
    struct tempora_sigevent tsev;
    if (owner == NULL)
        return -1;
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

static inline int tempora_posix_timer_create(clockid_t clock, struct sigevent *sev,
                                             timer_t *timerid)
{
    tempora_timer_t id;
    /* A NULL timerid stays NULL: tempora_timer_create fails it with EFAULT in Linux's order. */
    if (tempora_posix_create_on(tempora_default_owner(), clock, sev,
                                timerid == NULL ? NULL : &id) == -1)
        return -1;
    *timerid = tempora_posix_timer_of(id);
    return 0;
}

/* A negative ID names no timer: EINVAL, as for an unknown one. */
static inline int tempora_posix_timer_settime(timer_t timerid, int flags,
                                              const struct itimerspec *new_value,
                                              struct itimerspec *old_value)
{
    return tempora_timer_settime(tempora_default_owner(), tempora_posix_timer_id(timerid), flags,
                                 new_value, old_value);
}

static inline int tempora_posix_timer_gettime(timer_t timerid, struct itimerspec *curr)
{
    return tempora_timer_gettime(tempora_default_owner(), tempora_posix_timer_id(timerid), curr);
}

static inline int tempora_posix_timer_getoverrun(timer_t timerid)
{
    return tempora_timer_getoverrun(tempora_default_owner(), tempora_posix_timer_id(timerid));
}

static inline int tempora_posix_timer_delete(timer_t timerid)
{
    return tempora_timer_delete(tempora_default_owner(), tempora_posix_timer_id(timerid));
}

#ifdef __cplusplus
}
#endif

#define timer_create tempora_posix_timer_create
#define timer_settime tempora_posix_timer_settime
#define timer_gettime tempora_posix_timer_gettime
#define timer_getoverrun tempora_posix_timer_getoverrun
#define timer_delete tempora_posix_timer_delete

#endif /* TEMPORA_POSIX_H */
