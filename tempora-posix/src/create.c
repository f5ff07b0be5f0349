/* timer_create's sigevent mapping for the drop-in: tempora_posix.h's, the one a program
 * recompiled with that header gets, so that both switch a program the same way. */
#define _GNU_SOURCE
#include <tempora_posix.h>

int tempora_posix_dropin_create(tempora_owner_t *owner, clockid_t clock, struct sigevent *sev,
                                tempora_timer_t *timerid);

int tempora_posix_dropin_create(tempora_owner_t *owner, clockid_t clock, struct sigevent *sev,
                                tempora_timer_t *timerid)
{
    return tempora_posix_create_on(owner, clock, sev, timerid);
}
