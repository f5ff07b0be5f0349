/* tempora_owner_free on the process-wide default owner (the one tempora_posix.h maps the
 * POSIX calls onto) is refused with EINVAL and a message, and changes nothing: the default
 * owner, its timers and the POSIX calls through tempora_posix.h go on working. */
#include "check.h"
#include <tempora_posix.h>

int main(void)
{
    tempora_owner_t *d = tempora_default_owner();
    CHECK(d != NULL);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_NONE;
    timer_t before;
    OK(timer_create(CLOCK_MONOTONIC, &sev, &before));
    struct itimerspec set = {.it_value = {.tv_sec = 100}};
    OK(timer_settime(before, 0, &set, NULL));

    FAILS(tempora_owner_free(d), EINVAL);
    CHECK(strstr(tempora_last_error(), "default owner") != NULL);
    FAILS(tempora_owner_free(tempora_default_owner()), EINVAL);

    /* Nothing was freed or deleted: the timer made before is still armed, new ones work. */
    CHECK(tempora_default_owner() == d);
    struct itimerspec cur;
    OK(timer_gettime(before, &cur));
    CHECK(cur.it_value.tv_sec > 90);
    timer_t after;
    OK(timer_create(CLOCK_MONOTONIC, &sev, &after));
    OK(timer_settime(after, 0, &set, NULL));
    OK(timer_gettime(after, &cur));
    CHECK(cur.it_value.tv_sec > 90);
    OK(timer_delete(after));
    OK(timer_delete(before));

    /* NULL and an owner of its own are still freed as before. */
    OK(tempora_owner_free(NULL));
    tempora_t *t = tempora_new(NULL);
    CHECK(t != NULL);
    tempora_owner_t *o = tempora_owner_new(t);
    CHECK(o != NULL);
    OK(tempora_owner_free(o));
    tempora_free(t);
    printf("default owner free ok\n");
    return 0;
}
