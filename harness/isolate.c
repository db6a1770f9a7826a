/* MAP_ANONYMOUS and PR_SET_PDEATHSIG are not POSIX. */
#define _DEFAULT_SOURCE

#include "isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "kr_string.h"

/* The head of the shared mapping; the output follows at ISOLATE_HEADER_BYTES. */
typedef struct {
    volatile int done;          /* set by the child once fn has returned */
    int rc;                     /* fn's return code */
    char msg[KR_ERROR_MSG_MAX]; /* fn's error */
} isolate_header_t;

#define ISOLATE_HEADER_BYTES ((sizeof(isolate_header_t) + 63) / 64 * 64)

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *isolate_status_name(isolate_status_t s)
{
    switch (s) {
    case ISOLATE_OK: return "OK";
    case ISOLATE_FAILED: return "FAILED";
    case ISOLATE_CRASHED: return "CRASHED";
    case ISOLATE_TIMEOUT: return "TIMEOUT";
    }
    return "?";
}

verdict_t isolate_verdict(const isolate_result_t *r)
{
    switch (r->status) {
    case ISOLATE_OK: return VERDICT_PASS;
    case ISOLATE_FAILED: return VERDICT_ERROR;
    case ISOLATE_CRASHED: return VERDICT_CRASHED;
    case ISOLATE_TIMEOUT: return VERDICT_TIMEOUT;
    }
    return VERDICT_ERROR;
}

const char *isolate_signal_name(int sig, char *buf, size_t cap)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        {SIGSEGV, "SIGSEGV"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGILL, "SIGILL"},   {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},
        {SIGQUIT, "SIGQUIT"}, {SIGHUP, "SIGHUP"},   {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"},
        {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},   {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
        {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig) {
            kr_strlcpy(buf, names[i].name, cap);
            return buf;
        }
    snprintf(buf, cap, "signal %d", sig);
    return buf;
}

/* The child: never returns. */
static void child_main(isolate_fn fn, void *ctx, void *shared, size_t out_bytes, pid_t parent)
{
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)    /* the parent died before the line above */
        _exit(127);
#else
    (void)parent;
#endif
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    sigset_t unblock;
    sigemptyset(&unblock);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal[i], &sa, NULL);
        sigaddset(&unblock, fatal[i]);
    }
    sigprocmask(SIG_UNBLOCK, &unblock, NULL);

    isolate_header_t *h = shared;
    kr_error_t e;
    memset(&e, 0, sizeof e);
    const int rc = fn(ctx, (char *)shared + ISOLATE_HEADER_BYTES, out_bytes, &e);
    h->rc = rc;
    memcpy(h->msg, e.msg, sizeof h->msg);
    h->msg[sizeof h->msg - 1] = '\0';
    __atomic_store_n(&h->done, 1, __ATOMIC_RELEASE);
    fflush(stdout);
    fflush(stderr);
    _exit(0);
}

static pid_t wait_retry(pid_t pid, int *status, int flags)
{
    for (;;) {
        pid_t w = waitpid(pid, status, flags);
        if (w >= 0 || errno != EINTR)
            return w;
    }
}

/* Forks, runs fn in the child, waits.  On return 0 *shared is the mapping
 * (HEADER + out_bytes), still mapped: the caller reads it and munmaps. */
static int run_child(isolate_fn fn, void *ctx, size_t out_bytes, double timeout_s,
                     isolate_result_t *res, kr_error_t *err, void **shared_out, size_t *map_bytes)
{
    memset(res, 0, sizeof *res);
    *shared_out = NULL;
    const size_t bytes = ISOLATE_HEADER_BYTES + out_bytes;
    void *shared = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return kr_fail(err, "isolate: cannot map %zu shared bytes: %s", bytes, strerror(errno));
    memset(shared, 0, ISOLATE_HEADER_BYTES);
    int fds[2];
    if (pipe(fds) != 0) {
        int e = errno;
        munmap(shared, bytes);
        return kr_fail(err, "isolate: pipe: %s", strerror(e));
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    /* Nothing buffered may be written twice (by the child too). */
    fflush(stdout);
    fflush(stderr);
    const pid_t parent = getpid();
    const double t0 = now_seconds();
    const pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        munmap(shared, bytes);
        return kr_fail(err, "isolate: fork: %s", strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        child_main(fn, ctx, shared, out_bytes, parent);   /* holds fds[1] until it ends */
    }
    close(fds[1]);
    res->pid = pid;

    const double deadline = timeout_s > 0 ? t0 + timeout_s : 0;
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    int status = 0, timed_out = 0, lost = 0;
    for (;;) {
        pid_t w = wait_retry(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0) {            /* reaped by someone else (SIGCHLD ignored?) */
            lost = errno;
            break;
        }
        double slice = 0.05;
        if (deadline > 0) {
            double left = deadline - now_seconds();
            if (left <= 0) {
                kill(pid, SIGKILL);
                if (wait_retry(pid, &status, 0) != pid)
                    lost = errno ? errno : ECHILD;
                timed_out = 1;
                break;
            }
            if (left < slice)
                slice = left;
        }
        int ms = (int)(slice * 1000.0) + 1;
        /* The pipe wakes us the moment the child ends; once it has hung up,
         * poll on no descriptor is a plain sleep until waitpid sees the exit
         * (or, if a grandchild kept the pipe, until the deadline). */
        int n = poll(&pfd, 1, pfd.fd >= 0 ? ms : 1);
        if (n > 0 && (pfd.revents & (POLLHUP | POLLIN | POLLERR | POLLNVAL)))
            pfd.fd = -1;
    }
    res->seconds = now_seconds() - t0;
    close(fds[0]);

    const isolate_header_t *h = shared;
    const int done = __atomic_load_n(&h->done, __ATOMIC_ACQUIRE);
    char sig[32];
    if (lost) {
        munmap(shared, bytes);
        return kr_fail(err, "isolate: lost child %ld: %s", (long)pid, strerror(lost));
    }
    if (WIFEXITED(status) && done) {
        /* Finished (possibly just as the deadline passed: the result stands). */
        if (h->rc == 0) {
            res->status = ISOLATE_OK;
        } else {
            res->status = ISOLATE_FAILED;
            kr_strlcpy(res->message, h->msg[0] ? h->msg : "failed without a message",
                       sizeof res->message);
        }
    } else if (timed_out) {
        res->status = ISOLATE_TIMEOUT;
        res->signal = SIGKILL;
        snprintf(res->message, sizeof res->message, "no result after %g s: killed (SIGKILL)",
                 timeout_s);
    } else if (WIFSIGNALED(status)) {
        res->status = ISOLATE_CRASHED;
        res->signal = WTERMSIG(status);
        const char *desc = strsignal(res->signal);
        snprintf(res->message, sizeof res->message, "killed by %s (%s)%s",
                 isolate_signal_name(res->signal, sig, sizeof sig), desc ? desc : "?",
                 done ? " after finishing" : "");
    } else {
        res->status = ISOLATE_CRASHED;
        res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        snprintf(res->message, sizeof res->message, "exited with status %d before finishing",
                 res->exit_code);
    }
    *shared_out = shared;
    *map_bytes = bytes;
    return 0;
}

int isolate_run(isolate_fn fn, void *ctx, void *out, size_t out_bytes, double timeout_s,
                isolate_result_t *res, kr_error_t *err)
{
    void *shared;
    size_t bytes;
    if (run_child(fn, ctx, out_bytes, timeout_s, res, err, &shared, &bytes))
        return -1;
    if (res->status == ISOLATE_OK && out && out_bytes)
        memcpy(out, (char *)shared + ISOLATE_HEADER_BYTES, out_bytes);
    munmap(shared, bytes);
    return 0;
}

/* ------------------------------------------------------------------ kernels */

typedef struct {
    const kernel_desc_t *k;
    const kernel_inputs_t *in;
    const kernel_act_t *act;
    const kernel_options_t *opt;
} kernel_job_t;

/* The kernel's info first, then the output bits. */
#define INFO_BYTES ((sizeof(kernel_run_info_t) + 63) / 64 * 64)

static int kernel_child(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)out_bytes;
    const kernel_job_t *job = ctx;
    kernel_run_info_t info;
    memset(&info, 0, sizeof info);
    int rc = job->k->run_cpu(job->k, job->in, job->act, job->opt,
                             (uint16_t *)(void *)((char *)out + INFO_BYTES), &info, err);
    memcpy(out, &info, sizeof info);
    return rc;
}

int isolate_run_kernel(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                       const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                       double timeout_s, isolate_result_t *res, kr_error_t *err)
{
    if (!k->run_cpu)
        return kr_fail(err, "isolate: kernel %s has no run function", k->name);
    kernel_job_t job = {.k = k, .in = in, .act = act, .opt = opt};
    const size_t out_bytes = (size_t)in->M * (size_t)in->N * sizeof(uint16_t);
    void *shared;
    size_t bytes;
    if (run_child(kernel_child, &job, INFO_BYTES + out_bytes, timeout_s, res, err, &shared,
                  &bytes))
        return -1;
    const char *region = (const char *)shared + ISOLATE_HEADER_BYTES;
    if (res->status == ISOLATE_OK) {
        memcpy(out, region + INFO_BYTES, out_bytes);
        if (info)
            memcpy(info, region, sizeof *info);
    }
    munmap(shared, bytes);
    return 0;
}
