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
 * Where a program sees tempora differ from the kernel's timers (glibc's calls), and why, is one
 * table for this header, tempora.h and the preloaded drop-in alike: the tempora crate's
 * `timers` module doc, "Where tempora differs from the kernel" (signals, SIGEV_THREAD calls,
 * the timer_t value). `cargo doc -p tempora --open` shows it; the source is
 * tempora/src/timers/mod.rs.
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
