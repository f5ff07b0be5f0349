/* sig_signalfd.c: a SIGEV_SIGNAL timer on SIGRTMIN read from a signalfd in an epoll loop: a
 * one-shot, then a periodic timer for three periods. Prints:
 *   create SIGEV_SIGNAL SIGRTMIN sival_int 99: 0
 *   read the signalfd, timer not armed: -1 EAGAIN
 *   one-shot: ssi_signo SIGRTMIN, ssi_code SI_TIMER, ssi_tid matches, ssi_int 99, ssi_overrun 0
 *   periodic N: ssi_signo SIGRTMIN, ssi_code SI_TIMER, ssi_tid matches, ssi_int 99, ssi_overrun >= 0
 *   periodic N: getoverrun >= ssi_overrun: yes          (N = 1, 2, 3)
 *   delete: 0 */
#define _GNU_SOURCE
#include "sig.h"
#include <sys/epoll.h>
#include <sys/signalfd.h>

static int sfd, ep;

/* The next signal the loop reads (epoll_wait within 5 s, then one read). */
static struct signalfd_siginfo next(void)
{
    struct epoll_event ev;
    int n;
    while ((n = epoll_wait(ep, &ev, 1, 5000)) == -1 && errno == EINTR) {
    }
    CHECK(n == 1 && ev.data.fd == sfd);
    struct signalfd_siginfo ssi;
    CHECK(read(sfd, &ssi, sizeof ssi) == (ssize_t)sizeof ssi);
    return ssi;
}

static void print_ssi(const char *what, const struct signalfd_siginfo *ssi, timer_t t,
                      int overrun_exact)
{
    printf("%s: ssi_signo %s, ssi_code %s, ssi_tid %s, ssi_int %d, ", what,
           sig_name((int)ssi->ssi_signo), code_name(ssi->ssi_code),
           (int)ssi->ssi_tid == timer_int(t) ? "matches" : "DIFFERS", ssi->ssi_int);
    if (overrun_exact)
        printf("ssi_overrun %u\n", ssi->ssi_overrun);
    else
        printf("ssi_overrun >= 0\n"); /* unsigned */
}

int main(void)
{
    watchdog(20);
    block(SIGRTMIN);
    sigset_t rt = sigset_of(SIGRTMIN);
    CHECK((sfd = signalfd(-1, &rt, SFD_NONBLOCK | SFD_CLOEXEC)) >= 0);
    CHECK((ep = epoll_create1(EPOLL_CLOEXEC)) >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = sfd};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) == 0);
    struct sigevent sev = sigev_signal(SIGRTMIN, 99);
    timer_t t = create("create SIGEV_SIGNAL SIGRTMIN sival_int 99", CLOCK_MONOTONIC, &sev);
    struct signalfd_siginfo ssi;
    SHOW("read the signalfd, timer not armed", (int)read(sfd, &ssi, sizeof ssi));

    arm(t, 10 * MS, 0);
    ssi = next();
    print_ssi("one-shot", &ssi, t, 1);

    arm(t, 10 * MS, 10 * MS);
    for (int i = 0; i < 3; i++) {
        char what[32];
        snprintf(what, sizeof what, "periodic %d", i + 1);
        ssi = next();
        int overrun = timer_getoverrun(t);
        print_ssi(what, &ssi, t, 0);
        /* Equal on the kernel, which computes both at the dequeue; with tempora only for a
         * signal taken within its period (a loaded machine may take it later): the periods
         * that pass while it is pending are in getoverrun and the next signal's ssi_overrun,
         * never in this one's (the timers module's divergence table). */
        printf("%s: getoverrun >= ssi_overrun: %s\n", what,
               overrun >= (int)ssi.ssi_overrun ? "yes" : "no");
        fprintf(stderr, "sig_signalfd: %s: getoverrun %d, ssi_overrun %u\n", what, overrun,
                ssi.ssi_overrun);
    }
    arm(t, 0, 0);
    SHOW("delete", timer_delete(t));
    return 0;
}
