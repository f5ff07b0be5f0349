/* What every C test of tempora's ABI uses: checks that name the failing line, and the small
 * time helpers. A failed check prints the file, the line, the expression, errno and
 * tempora_last_error(), and exits 1 (tests/c_suite.rs reports the output). */
#ifndef TEMPORA_CHECK_H
#define TEMPORA_CHECK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tempora.h>
#include <time.h>

#define FAIL(...)                                                                           \
    do {                                                                                    \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                     \
        fprintf(stderr, __VA_ARGS__);                                                       \
        fprintf(stderr, " (errno %d %s; last error: %s)\n", errno, strerror(errno),         \
                tempora_last_error());                                                      \
        exit(1);                                                                            \
    } while (0)

/* `cond` holds. */
#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond))                                                                        \
            FAIL("check failed: %s", #cond);                                                \
    } while (0)

/* `call` succeeds (returns 0 or more). */
#define OK(call)                                                                            \
    do {                                                                                    \
        errno = 0;                                                                          \
        if ((call) < 0)                                                                     \
            FAIL("%s failed", #call);                                                       \
    } while (0)

/* `call` returns -1 with errno `err`, and tempora_last_error() says something. */
#define FAILS(call, err)                                                                    \
    do {                                                                                    \
        errno = 0;                                                                          \
        long r_ = (long)(call);                                                             \
        int e_ = errno;                                                                     \
        if (r_ != -1 || e_ != (err))                                                        \
            FAIL("%s returned %ld with errno %s, expected -1 with %s", #call, r_,           \
                 e_ ? strerror(e_) : "0", strerror(err));                                   \
        if (tempora_last_error()[0] == '\0')                                                \
            FAIL("%s: no message in tempora_last_error()", #call);                          \
    } while (0)

/* `call` returns NULL with errno `err`. */
#define FAILS_NULL(call, err)                                                               \
    do {                                                                                    \
        errno = 0;                                                                          \
        const void *p_ = (call);                                                            \
        int e_ = errno;                                                                     \
        if (p_ != NULL || e_ != (err))                                                      \
            FAIL("%s returned %p with errno %s, expected NULL with %s", #call, p_,          \
                 e_ ? strerror(e_) : "0", strerror(err));                                   \
    } while (0)

static inline int64_t ts_ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline struct timespec ns_ts(int64_t ns)
{
    struct timespec t = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
    return t;
}

static inline int64_t now_ns(clockid_t clock)
{
    struct timespec t;
    if (clock_gettime(clock, &t) != 0)
        FAIL("clock_gettime(%d)", (int)clock);
    return ts_ns(t);
}

static inline void sleep_ns(int64_t ns)
{
    struct timespec t = ns_ts(ns);
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* An itimerspec of `value_ns` then every `interval_ns`. */
static inline struct itimerspec its(int64_t value_ns, int64_t interval_ns)
{
    struct itimerspec s = {.it_interval = ns_ts(interval_ns), .it_value = ns_ts(value_ns)};
    return s;
}

#define SEC 1000000000LL
#define MSEC 1000000LL

#endif
