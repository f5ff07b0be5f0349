/* A program built against the C library alone that uses both kinds of clock: CPU-time clocks
 * (the process's, and a thread's from pthread_getcpuclockid) and CLOCK_TAI, which only the
 * kernel times, beside CLOCK_MONOTONIC. Run as it is, every timer is the kernel's; with
 * libtempora-posix (preloaded or linked) the CLOCK_MONOTONIC one is tempora's and the others
 * stay the kernel's: both kinds fire, each call reaches the timer its timer_t names, and
 * deleting one kind leaves the other armed. It prints the same lines either way, but the
 * last, which says whose each timer is (tests/dropin.rs checks it).
 *
 * Built -static with -DFULLY_STATIC, where there is no C library's timer_create to ask and
 * the drop-in makes the kernel's timers with the system call, the thread CPU-time timer
 * (SIGEV_THREAD, which only the C library's helper thread serves) is refused with EINVAL, as
 * the drop-in documents; the program says so and goes on without it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MS 1000000L

static void fail(int line, const char *what)
{
    fprintf(stderr, "mixed.c:%d: %s (errno %d %s)\n", line, what, errno, strerror(errno));
    exit(1);
}
#define CHECK(c)                                                                            \
    do {                                                                                    \
        if (!(c))                                                                           \
            fail(__LINE__, #c);                                                             \
    } while (0)

static const char *err_name(int e)
{
    switch (e) {
    case EINVAL: return "EINVAL";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    default: return "other";
    }
}

/* The high 32 bits libtempora-posix tags its timer_t with ("tpos"). */
static const char *whose(timer_t t)
{
    return ((uint64_t)(uintptr_t)t >> 32) == 0x74706f73u ? "tempora" : "kernel";
}

static sem_t mono_fired, thread_cpu_fired;

static void on_mono(union sigval v)
{
    CHECK(v.sival_int == 1);
    sem_post(&mono_fired);
}

static void on_thread_cpu(union sigval v)
{
    CHECK(v.sival_int == 2);
    sem_post(&thread_cpu_fired);
}

static struct itimerspec after(long ns, long every)
{
    struct itimerspec s = {.it_value = {ns / 1000000000L, ns % 1000000000L},
                           .it_interval = {every / 1000000000L, every % 1000000000L}};
    return s;
}

/* Burns this thread's CPU until `done` says so (at most about 10 s of it). */
static volatile unsigned long sink;
static void burn_until(int (*done)(void))
{
    for (long i = 0; i < 100000000L && !done(); i++)
        for (int j = 0; j < 1000; j++)
            sink += (unsigned long)j;
    CHECK(done());
}

static int cpu_signal_pending(void)
{
    sigset_t p;
    CHECK(sigpending(&p) == 0);
    return sigismember(&p, SIGUSR1);
}

static int thread_cpu_posted(void)
{
    static int posted;
    if (!posted)
        posted = sem_trywait(&thread_cpu_fired) == 0;
    return posted;
}

int main(void)
{
    CHECK(sem_init(&mono_fired, 0, 0) == 0);
    CHECK(sem_init(&thread_cpu_fired, 0, 0) == 0);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    CHECK(pthread_sigmask(SIG_BLOCK, &usr1, NULL) == 0);

    /* The process's CPU clock, SIGEV_SIGNAL, every 5 ms of CPU. */
    struct sigevent sig;
    memset(&sig, 0, sizeof sig);
    sig.sigev_notify = SIGEV_SIGNAL;
    sig.sigev_signo = SIGUSR1;
    sig.sigev_value.sival_int = 7;
    timer_t cpu = NULL, mono = NULL, thread_cpu = NULL, tai = NULL;
    CHECK(timer_create(CLOCK_PROCESS_CPUTIME_ID, &sig, &cpu) == 0);
    /* CLOCK_MONOTONIC, SIGEV_THREAD. */
    struct sigevent th;
    memset(&th, 0, sizeof th);
    th.sigev_notify = SIGEV_THREAD;
    th.sigev_notify_function = on_mono;
    th.sigev_value.sival_int = 1;
    CHECK(timer_create(CLOCK_MONOTONIC, &th, &mono) == 0);
    /* This thread's CPU clock, SIGEV_THREAD (the C library's helper thread). */
    clockid_t mine;
    CHECK(pthread_getcpuclockid(pthread_self(), &mine) == 0);
    th.sigev_notify_function = on_thread_cpu;
    th.sigev_value.sival_int = 2;
#ifdef FULLY_STATIC
    int have_thread_cpu = 0;
    errno = 0;
    int refused = timer_create(mine, &th, &thread_cpu);
    CHECK(refused == -1 && errno == EINVAL);
    printf("thread CPU-time SIGEV_THREAD timer, fully static: -1 EINVAL\n");
#else
    int have_thread_cpu = 1;
    CHECK(timer_create(mine, &th, &thread_cpu) == 0);
#endif
    /* CLOCK_TAI, SIGEV_NONE. */
    struct sigevent none;
    memset(&none, 0, sizeof none);
    none.sigev_notify = SIGEV_NONE;
    CHECK(timer_create(CLOCK_TAI, &none, &tai) == 0);
    printf("created: CPU-time, CLOCK_MONOTONIC, thread CPU-time, CLOCK_TAI\n");

    struct itimerspec s = after(5 * MS, 5 * MS);
    CHECK(timer_settime(cpu, 0, &s, NULL) == 0);
    s = after(10 * MS, 0);
    CHECK(timer_settime(mono, 0, &s, NULL) == 0);
    s = after(3 * MS, 0);
    if (have_thread_cpu)
        CHECK(timer_settime(thread_cpu, 0, &s, NULL) == 0);
    s = after(3600L * 1000 * MS, 0);
    CHECK(timer_settime(tai, 0, &s, NULL) == 0);

    burn_until(cpu_signal_pending);
    siginfo_t si;
    struct timespec zero = {0, 0};
    CHECK(sigtimedwait(&usr1, &si, &zero) == SIGUSR1);
    printf("CPU-time timer: SIGUSR1, si_code SI_TIMER %s, sival_int %d, si_timerid matches %s\n",
           si.si_code == SI_TIMER ? "yes" : "no", si.si_value.sival_int,
           si.si_timerid == (int)(intptr_t)cpu ? "yes" : "no");
    if (have_thread_cpu) {
        burn_until(thread_cpu_posted);
        printf("thread CPU-time timer: its function ran\n");
    }
    struct timespec until;
    CHECK(clock_gettime(CLOCK_REALTIME, &until) == 0);
    until.tv_sec += 5;
    CHECK(sem_timedwait(&mono_fired, &until) == 0);
    printf("CLOCK_MONOTONIC timer: its function ran\n");

    struct itimerspec cur;
    CHECK(timer_gettime(tai, &cur) == 0);
    printf("CLOCK_TAI timer: about an hour left %s\n",
           cur.it_value.tv_sec > 3500 && cur.it_value.tv_sec <= 3600 ? "yes" : "no");
    CHECK(timer_gettime(cpu, &cur) == 0);
    printf("CPU-time timer: interval %ld ms, getoverrun >= 0 %s\n", cur.it_interval.tv_nsec / MS,
           timer_getoverrun(cpu) >= 0 ? "yes" : "no");

    /* Deleting one kind leaves the other armed; a deleted kernel one is EINVAL after
     * (glibc's SIGEV_THREAD timer_t is not to be used once deleted). */
    CHECK(timer_delete(mono) == 0);
    CHECK(timer_gettime(cpu, &cur) == 0);
    printf("after deleting the CLOCK_MONOTONIC timer: CPU-time timer armed %s\n",
           cur.it_value.tv_sec > 0 || cur.it_value.tv_nsec > 0 ? "yes" : "no");
    CHECK(timer_delete(cpu) == 0);
    errno = 0;
    int r = timer_gettime(cpu, &cur);
    printf("CPU-time timer deleted: gettime %d %s\n", r, err_name(errno));
    if (have_thread_cpu)
        CHECK(timer_delete(thread_cpu) == 0);
    CHECK(timer_delete(tai) == 0);
    errno = 0;
    timer_t raw;
    r = timer_create(CLOCK_MONOTONIC_RAW, &none, &raw);
    printf("create on CLOCK_MONOTONIC_RAW: %d %s\n", r, err_name(errno));
    printf("whose: CPU-time %s, CLOCK_MONOTONIC %s, thread CPU-time %s, CLOCK_TAI %s\n",
           whose(cpu), whose(mono), whose(thread_cpu), whose(tai));
    return 0;
}
