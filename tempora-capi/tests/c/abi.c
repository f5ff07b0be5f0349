/* A struct tempora_config that grows: built against tempora.h as it is, and against a copy
 * whose struct has a field appended as a later version's would (TEMPORA_LATER_FIELD, made by
 * tests/c_suite.rs), both run against the same library. Neither may be read or written past
 * its struct; the later field is taken at 0 and refused set; sizes that are not a struct's,
 * and the struct of a program built before `size` existed, are refused with EINVAL. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

/* The struct with bytes after it that must stay as they were. */
struct guarded {
    struct tempora_config c;
    unsigned char after[64];
};

static void after_untouched(const struct guarded *g)
{
    for (size_t i = 0; i < sizeof g->after; i++)
        CHECK(g->after[i] == 0xAB);
}

/* A service from `c` runs a timer (no driver: fired by tempora_poll). */
static void runs(const struct tempora_config *c)
{
    tempora_t *t = tempora_new(c);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    tempora_timer_t id;
    OK(tempora_timer_create(o, CLOCK_MONOTONIC, NULL, &id));
    struct itimerspec now = {{0, 0}, {0, 1}}, cur;
    OK(tempora_timer_settime(o, id, 0, &now, NULL));
    OK(tempora_timer_gettime(o, id, &cur));
    OK(tempora_timer_delete(o, id));
    tempora_owner_free(o);
    tempora_free(t);
}

/* The struct of a program built before `size` existed: the fields it had then. */
struct config_without_size {
    uint32_t bases;
    int32_t drivers;
    uint64_t tick_ns;
    uint32_t id_bits;
    int32_t spare_drivers;
    uint64_t max_deferral_ns;
};

int main(void)
{
    struct guarded g;
    memset(&g, 0xAB, sizeof g);
    OK(tempora_config_init(&g.c, sizeof g.c));
    after_untouched(&g);
    CHECK(g.c.size == sizeof g.c);
    CHECK(g.c.bases == 0 && g.c.drivers == -1 && g.c.tick_ns == 0 && g.c.id_bits == 0);
    CHECK(g.c.spare_drivers == -1 && g.c.max_deferral_ns == 0);
#ifdef TEMPORA_LATER_FIELD
    /* Past what the library knows: set to 0, its default. */
    CHECK(g.c.later == 0);
#endif
    g.c.drivers = 0;
    runs(&g.c);
    after_untouched(&g);
#ifdef TEMPORA_LATER_FIELD
    /* A setting this library does not have is refused, not ignored. */
    g.c.later = 5;
    FAILS_NULL(tempora_new(&g.c), E2BIG);
    g.c.later = 0;
    /* The header is newer than the library: the program can tell. */
    CHECK(tempora_version() < TEMPORA_VERSION_NUMBER);
#else
    CHECK(tempora_version() == TEMPORA_VERSION_NUMBER);
#endif

    /* Sizes that are not a struct's: refused, nothing written. */
    const size_t bad[] = {0, 1, 8, sizeof g.c + 1, 4097, (size_t)-1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&g, 0xAB, sizeof g);
        FAILS(tempora_config_init(&g.c, bad[i]), EINVAL);
        for (size_t b = 0; b < sizeof g; b++)
            CHECK(((const unsigned char *)&g)[b] == 0xAB);
        OK(tempora_config_init(&g.c, sizeof g.c));
        g.c.size = bad[i];
        FAILS_NULL(tempora_new(&g.c), EINVAL);
    }
    /* An uninitialised struct: a size of garbage. */
    memset(&g, 0xAB, sizeof g);
    FAILS_NULL(tempora_new(&g.c), EINVAL);

    /* A program built before `size` existed: its first 8 bytes (bases and drivers) read as
     * the size, which no value of `drivers` but 0 makes one (see tempora_config_init(3)). */
    struct config_without_size old = {0, -1, 0, 0, -1, 0};
    FAILS_NULL(tempora_new((const struct tempora_config *)(const void *)&old), EINVAL);
    old.drivers = 0;
    FAILS_NULL(tempora_new((const struct tempora_config *)(const void *)&old), EINVAL);
    old.bases = 4;
    old.drivers = 1;
    FAILS_NULL(tempora_new((const struct tempora_config *)(const void *)&old), EINVAL);

    printf("abi ok: header %d, library %d, sizeof(struct tempora_config) %zu\n",
           TEMPORA_VERSION_NUMBER, tempora_version(), sizeof(struct tempora_config));
    return 0;
}
