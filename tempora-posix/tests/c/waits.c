/* waits.c: sigwait, sigwaitinfo and sigtimedwait on a timer's signal, as a program built
 * against the C library alone uses them. On the drop-in the three are its own (a thread that
 * waits for a tempora timer's signal fires the timers itself meanwhile); the program prints
 * the same lines on the C library and on the drop-in (tests/dropin.rs), so the waits return
 * what the C library's return:
 *   - each wait takes a SIGEV_THREAD_ID periodic timer's signals, its siginfo the kernel's;
 *   - the expiries woke the waiting thread alone: the drop-in's driver thread (there is none
 *     on the C library) woke for at most a third of them;
 *   - a timeout with nothing due is EAGAIN no sooner than asked, and timers due meanwhile
 *     fire (a SIGEV_THREAD timer's calls go on); an invalid timeout is EINVAL, a zero one
 *     EAGAIN at once;
 *   - a handler that runs in sigwaitinfo makes it return EINTR, while sigwait goes on;
 *   - a handler that runs long inside the wait does not stop the other timers;
 *   - a thread cancelled in sigwait ends as cancelled, and the timers go on firing, however
 *     often waiters are cancelled, and wherever the cancel lands. */
#define _GNU_SOURCE
#include "../../../tempora-capi/tests/c/sig.h"
#include <dirent.h>
#include <sys/syscall.h>

#define COUNT 30

static int sig_a, sig_b;
static atomic_int calls;
static atomic_int handled;

static void on_expiry(union sigval v)
{
    (void)v;
    atomic_fetch_add(&calls, 1);
}

static void on_usr1(int s, siginfo_t *si, void *uc)
{
    (void)s;
    (void)si;
    (void)uc;
    atomic_fetch_add(&handled, 1);
}

/* The handler that runs long: 200 ms inside the wait it interrupted. */
static void on_usr2(int s, siginfo_t *si, void *uc)
{
    (void)s;
    (void)si;
    (void)uc;
    struct timespec t = {0, 200 * MS};
    while (nanosleep(&t, &t) == -1 && errno == EINTR) {
    }
    atomic_fetch_add(&handled, 1);
}

/* The voluntary context switches of the drop-in's driver thread, tempora-driver-0 (its
 * comm, 15 characters, is "tempora-driver-"); 0 if there is none: the C library's timers
 * have no driver thread. */
static long driver_switches(void)
{
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL);
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) == NULL)
            comm[0] = 0;
        fclose(f);
        if (strncmp(comm, "tempora-driver-", 15) != 0)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        CHECK(f != NULL);
        char line[256];
        while (fgets(line, sizeof line, f) != NULL)
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
                break;
        fclose(f);
    }
    closedir(d);
    return n;
}

static timer_t thread_timer(const char *what, int signo, int value)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = signo;
    sev.sigev_value.sival_int = value;
    sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
    return create(what, CLOCK_MONOTONIC, &sev);
}

/* COUNT signals of `t` (every 2 ms) taken by `how`: 0 sigwait, 1 sigwaitinfo, 2
 * sigtimedwait. */
static void take_count(const char *name, int how, timer_t t, int value)
{
    sigset_t set = sigset_of(sig_a);
    long before = driver_switches();
    arm(t, 2 * MS, 2 * MS);
    int fields_ok = 1;
    for (int i = 0; i < COUNT; i++) {
        siginfo_t si;
        int s;
        struct timespec second = {1, 0};
        if (how == 0) {
            CHECK(sigwait(&set, &s) == 0);
            CHECK(s == sig_a);
            continue;
        }
        s = how == 1 ? sigwaitinfo(&set, &si) : sigtimedwait(&set, &si, &second);
        CHECK(s == sig_a);
        fields_ok &= si.si_signo == sig_a && si.si_code == SI_TIMER &&
                     si.si_timerid == timer_int(t) && si.si_value.sival_int == value;
    }
    arm(t, 0, 0);
    long woke = driver_switches() - before;
    printf("%s: %d signals%s\n", name, COUNT, how == 0 ? "" : fields_ok ? ", fields as a timer's" : ", fields differ");
    printf("%s: the driver woke for at most a third of them: %s\n", name,
           woke <= COUNT / 3 ? "yes" : "no");
    /* Whatever came after the disarm (at most one signal) is not the next part's. */
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) > 0) {
    }
}

struct interrupt {
    pthread_t target;
    int signo;
    int64_t after;
};

static void *interrupter(void *arg)
{
    struct interrupt *it = arg;
    sleep_until(now_ns() + it->after);
    CHECK(pthread_kill(it->target, it->signo) == 0);
    return NULL;
}

static pthread_t interrupt_in(int signo, int64_t after)
{
    static struct interrupt it;
    it.target = pthread_self();
    it.signo = signo;
    it.after = after;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, interrupter, &it) == 0);
    return th;
}

static void *cancelled_waiter(void *arg)
{
    (void)arg;
    block(sig_b);
    timer_t mine = thread_timer("the waiter's own timer", sig_b, 3);
    arm(mine, 10 * SEC, 0);
    sigset_t set = sigset_of(sig_b);
    int s;
    sigwait(&set, &s);
    printf("sigwait returned in the thread to cancel\n");
    return NULL;
}

/* Waits for the signal `arg` points to, for ever (until cancelled). */
static void *process_waiter(void *arg)
{
    sigset_t set = sigset_of(*(int *)arg);
    int s;
    for (;;)
        sigwait(&set, &s);
    return NULL;
}

int main(void)
{
    sig_a = SIGRTMIN + 1;
    sig_b = SIGRTMIN + 2;
    block(sig_a);
    block(sig_b);
    watchdog(30);
    on(SIGUSR1, on_usr1);
    on(SIGUSR2, on_usr2);

    timer_t t = thread_timer("create SIGEV_THREAD_ID every 2 ms", sig_a, 7);
    take_count("sigwait", 0, t, 7);
    take_count("sigwaitinfo", 1, t, 7);
    take_count("sigtimedwait", 2, t, 7);

    /* Timeouts, with a SIGEV_THREAD timer firing every 3 ms beside them. */
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD;
    sev.sigev_notify_function = on_expiry;
    timer_t th = create("create SIGEV_THREAD every 3 ms", CLOCK_MONOTONIC, &sev);
    arm(th, 3 * MS, 3 * MS);
    sigset_t set = sigset_of(sig_a);
    struct timespec fifty = {0, 50 * MS};
    int before = atomic_load(&calls);
    int64_t start = now_ns();
    errno = 0;
    int r = sigtimedwait(&set, NULL, &fifty);
    int e = errno;
    int64_t took = now_ns() - start;
    printf("sigtimedwait 50 ms with nothing due: %d %s, no sooner: %s\n", r, err_name(e),
           took >= 50 * MS ? "yes" : "no");
    sleep_until(now_ns() + 10 * MS);
    printf("the SIGEV_THREAD timer's calls went on meanwhile: %s\n",
           atomic_load(&calls) > before ? "yes" : "no");
    struct timespec bad = {0, SEC};
    SHOW("sigtimedwait with tv_nsec 1e9", sigtimedwait(&set, NULL, &bad));
    struct timespec negative = {-1, 0};
    SHOW("sigtimedwait with tv_sec -1", sigtimedwait(&set, NULL, &negative));
    struct timespec zero = {0, 0};
    SHOW("sigtimedwait with a zero timeout", sigtimedwait(&set, NULL, &zero));

    /* A handler in the wait: sigwaitinfo returns EINTR, sigwait goes on. */
    arm(t, 500 * MS, 0);
    pthread_t k = interrupt_in(SIGUSR1, 20 * MS);
    siginfo_t si;
    SHOW("sigwaitinfo interrupted by a handler", sigwaitinfo(&set, &si));
    CHECK(pthread_join(k, NULL) == 0);
    arm(t, 100 * MS, 0);
    k = interrupt_in(SIGUSR1, 20 * MS);
    int s = 0;
    SHOW("sigwait with a handler run inside it", sigwait(&set, &s));
    printf("sigwait took %s after the handler ran %d times\n", sig_name(s),
           atomic_load(&handled));
    CHECK(pthread_join(k, NULL) == 0);

    /* A handler that runs 200 ms inside the wait: the SIGEV_THREAD timer (every 3 ms) goes
     * on meanwhile. */
    arm(t, 2 * SEC, 0);
    atomic_store(&handled, 0);
    k = interrupt_in(SIGUSR2, 20 * MS);
    before = atomic_load(&calls);
    errno = 0;
    r = sigwaitinfo(&set, &si);
    e = errno;
    int during = atomic_load(&calls) - before;
    printf("sigwaitinfo with a 200 ms handler inside it: %d %s\n", r, err_name(e));
    printf("the SIGEV_THREAD timer's calls went on meanwhile (20 or more): %s\n",
           during >= 20 ? "yes" : "no");
    CHECK(pthread_join(k, NULL) == 0);
    arm(t, 0, 0);

    /* A thread cancelled in sigwait; the timers go on after it. */
    pthread_t w;
    CHECK(pthread_create(&w, NULL, cancelled_waiter, NULL) == 0);
    sleep_until(now_ns() + 50 * MS);
    CHECK(pthread_cancel(w) == 0);
    void *res = NULL;
    CHECK(pthread_join(w, &res) == 0);
    printf("a thread cancelled in sigwait: %s\n", res == PTHREAD_CANCELED ? "cancelled" : "not cancelled");
    before = atomic_load(&calls);
    sleep_until(now_ns() + 100 * MS);
    printf("the SIGEV_THREAD timer's calls went on after it (10 or more): %s\n",
           atomic_load(&calls) - before >= 10 ? "yes" : "no");
    arm(t, 2 * MS, 2 * MS);
    CHECK(sigwait(&set, &s) == 0);
    printf("a wait after it takes %s\n", sig_name(s));

    /* A waiter cancelled at any moment, while it waits or while it fires the timers, never
     * leaves a timer dead: a process-directed 1 ms timer keeps its period through 100
     * cancels of threads waiting for its signal. */
    int sig_c = SIGRTMIN + 3;
    block(sig_c);
    struct sigevent sc;
    memset(&sc, 0, sizeof sc);
    sc.sigev_notify = SIGEV_SIGNAL;
    sc.sigev_signo = sig_c;
    timer_t tc = create("create SIGEV_SIGNAL every 1 ms", CLOCK_MONOTONIC, &sc);
    arm(tc, MS, MS);
    int dead = 0;
    unsigned seed = 1;
    for (int i = 0; i < 100; i++) {
        CHECK(pthread_create(&w, NULL, process_waiter, &sig_c) == 0);
        seed = seed * 1103515245u + 12345u;
        sleep_until(now_ns() + (int64_t)(seed >> 16) % (3 * MS));
        CHECK(pthread_cancel(w) == 0);
        CHECK(pthread_join(w, NULL) == 0);
        struct itimerspec cur;
        CHECK(timer_gettime(tc, &cur) == 0);
        dead += cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 0;
    }
    sigset_t cset = sigset_of(sig_c);
    siginfo_t csi = take(&cset);
    printf("a timer whose waiter was cancelled 100 times: %s, and its signal comes: %s\n",
           dead == 0 ? "armed" : "dead", csi.si_signo == sig_c ? "yes" : "no");
    arm(tc, 0, 0);

    printf("deleted: %d %d %d\n", timer_delete(t), timer_delete(th), timer_delete(tc));
    return 0;
}
