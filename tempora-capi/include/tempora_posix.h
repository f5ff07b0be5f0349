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
 * Either way the calls are one implementation (tempora-capi's src/posix.rs: this header's
 * tempora_posix_timer_* calls in libtempora, the drop-in's exports in libtempora-posix), with
 * the errno values Linux sets and none of the kernel's per-user timer limit. A timer on a
 * clock tempora times (CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME) is one of the
 * process-wide tempora owner's (tempora_default_owner(): the default service, one driver
 * thread); a timer on any other clock (the CPU-time clocks, clock_getcpuclockid's and
 * pthread_getcpuclockid's included, CLOCK_TAI, the alarm clocks) is the C library's own
 * kernel timer, made by its timer_create (dlsym RTLD_NEXT; in a -static program the system
 * call, so SIGEV_THREAD there is EINVAL), and so are the errno values of clocks the kernel
 * refuses. The other calls go to whichever made the timer_t.
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
 *                    sival_int), as with glibc's kernel timers. This header's tag is "temp"
 *                    (%p prints 0x74656d70000000NN), the drop-in's "tpos" (0x74706f73000000NN):
 *                    a program switched both ways holds two copies of tempora, and a timer_t
 *                    of one never names a timer of the other. No kernel timer_t has either
 *                    (glibc's are 0..INT_MAX, or have the sign bit set for SIGEV_THREAD); any
 *                    timer_t without the tag goes to the C library, which answers for it.
 *                    tempora_posix_timer_id() gives a timer_t's tempora ID.
 *
 * Where a program sees tempora differ from the kernel's timers (glibc's calls), and why: the
 * signals' differences (a periodic signal delayed, a queued signal of a re-armed or deleted
 * timer, many signal timers, several timers sharing a signal number, a standard signal shared
 * with kill, a thread ID reused, ...) are the tempora crate's `timers` module doc's table
 * "Signals: where tempora differs from the kernel", which holds them for this header and the
 * drop-in alike. The others:
 *
 *   a program ...              kernel (glibc)              tempora
 *   ------------------------   -------------------------   -----------------------------------
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
 *   reads a timer_t's value    a small int (or glibc's     the tagged value above: a program
 *   as a number                tagged pointer)             that indexes an array with it, or
 *                                                          prints it, sees another number
 *   forks                      the child has none of the   the same: the parent's timer_t is
 *                              parent's timers             EINVAL in the child, whose own
 *                                                          timers start from ID 0
 *
 * Everything here is a macro over a function, so it works from C and C++ (warning free under
 * -Wall -Wextra); take the header out and the same source builds against the C library
 * again.
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

#if UINTPTR_MAX <= 0xffffffffu
#error "tempora_posix.h tags a tempora ID in a timer_t's high 32 bits: it needs 64-bit pointers"
#endif

/* The calls, in libtempora (tempora-capi's src/posix.rs, which the drop-in library shares):
 * timer_create, timer_settime, timer_gettime, timer_getoverrun and timer_delete with the C
 * library's types, routed as the comment above says. They are declared here, not in
 * tempora.h, which does not need <signal.h>'s struct sigevent. */
int tempora_posix_timer_create(clockid_t clock, struct sigevent *sev, timer_t *timerid);
int tempora_posix_timer_settime(timer_t timerid, int flags, const struct itimerspec *new_value,
                                struct itimerspec *old_value);
int tempora_posix_timer_gettime(timer_t timerid, struct itimerspec *curr);
int tempora_posix_timer_getoverrun(timer_t timerid);
int tempora_posix_timer_delete(timer_t timerid);

/* The tempora ID of a timer_t this header's timer_create made, or -1 for any other. */
tempora_timer_t tempora_posix_timer_id(timer_t t);

#ifdef __cplusplus
}
#endif

#define timer_create tempora_posix_timer_create
#define timer_settime tempora_posix_timer_settime
#define timer_gettime tempora_posix_timer_gettime
#define timer_getoverrun tempora_posix_timer_getoverrun
#define timer_delete tempora_posix_timer_delete

#endif /* TEMPORA_POSIX_H */
