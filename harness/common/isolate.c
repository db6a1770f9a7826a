/* MAP_ANONYMOUS, SOCK_CLOEXEC and MSG_NOSIGNAL are not all POSIX. */
#define _DEFAULT_SOURCE

#include "isolate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child_guard.h"
#include "kr_string.h"
#include "subreaper.h"

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

/* What every isolated child does first: die with its parent, dump no
 * core, and let a crash be reported by its own signal. */
static void child_setup(pid_t parent)
{
    /* Its own process group, so that whatever it spawns is killed with it
     * (end_group).  In the background of a terminal, it must neither stop
     * on a write to it nor on a read. */
    setpgid(0, 0);
    signal(SIGTTOU, SIG_IGN);
    signal(SIGTTIN, SIG_IGN);
    /* kreplay's stdout carries tables and JSON: what a kernel prints goes
     * to stderr. */
    dup2(STDERR_FILENO, STDOUT_FILENO);
    child_guard(parent);
    /* What it starts and abandons (a setsid daemon too) stays its own. */
    subreaper_become();
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
}

/* fork(), with nothing left buffered that the child would write a second
 * time; when it fails, the pair of descriptors meant for the child is closed
 * and the error said.  For the one-call child (run_child) and the worker
 * (worker_start). */
static pid_t fork_flushed(const int fds[2], kr_error_t *err)
{
    fflush(stdout);
    fflush(stderr);
    subreaper_become();   /* a crashed child's orphans come back here */
    const pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        kr_fail(err, "isolate: fork: %s", strerror(e));
    }
    return pid;
}

/* The child: never returns. */
static void child_main(isolate_fn fn, void *ctx, void *shared, size_t out_bytes, pid_t parent)
{
    child_setup(parent);
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
    subreaper_end_children();
    _exit(0);
}

static void nap_seconds(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* res for a child that ended without answering: killed by a signal, or
 * exited.  `finished`: it had produced its result first. */
static void describe_abnormal_end(isolate_result_t *res, int status, int finished)
{
    res->status = ISOLATE_CRASHED;
    if (WIFSIGNALED(status)) {
        char sig[32];
        res->signal = WTERMSIG(status);
        const char *desc = strsignal(res->signal);
        snprintf(res->message, sizeof res->message, "killed by %s (%s)%s",
                 isolate_signal_name(res->signal, sig, sizeof sig), desc ? desc : "?",
                 finished ? " after finishing" : "");
    } else {
        res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        snprintf(res->message, sizeof res->message, "exited with status %d before finishing",
                 res->exit_code);
    }
}

static void describe_timeout(isolate_result_t *res, double timeout_s)
{
    res->status = ISOLATE_TIMEOUT;
    res->signal = SIGKILL;
    snprintf(res->message, sizeof res->message, "no result after %g s: killed (SIGKILL)",
             timeout_s);
}

static pid_t wait_retry(pid_t pid, int *status, int flags)
{
    for (;;) {
        pid_t w = waitpid(pid, status, flags);
        if (w >= 0 || errno != EINTR)
            return w;
    }
}

/* Kills everything left in an isolated child's process group (the child
 * leads it; processes it forked stay in it).  Called while the child is
 * unreaped, so the group's id cannot have been reused. */
static void end_group(pid_t pid)
{
    if (pid > 0) {
        subreaper_kill_descendants(pid);   /* those that left the group (setsid) */
        killpg(pid, SIGKILL);
    }
}

/* Has the child ended?  1 (left unreaped, *status not yet known), 0 not
 * yet, -1 lost (errno). */
static int child_ended(pid_t pid)
{
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0)
            return si.si_pid == pid ? 1 : 0;
        if (errno != EINTR)
            return -1;
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
    const pid_t parent = getpid();
    const double t0 = now_seconds();
    const pid_t pid = fork_flushed(fds, err);
    if (pid < 0) {
        munmap(shared, bytes);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        child_main(fn, ctx, shared, out_bytes, parent);   /* holds fds[1] until it ends */
    }
    close(fds[1]);
    setpgid(pid, pid);  /* as the child does: whichever runs first */
    res->pid = pid;

    const double deadline = timeout_s > 0 ? t0 + timeout_s : 0;
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    int status = 0, timed_out = 0, lost = 0;
    double reap_wait = 20e-6;
    for (;;) {
        const int ended = child_ended(pid);
        if (ended == 1) {
            end_group(pid);
            if (wait_retry(pid, &status, 0) != pid)
                lost = errno ? errno : ECHILD;
            break;
        }
        if (ended < 0) {        /* reaped by someone else (SIGCHLD ignored?) */
            lost = errno;
            end_group(pid);
            break;
        }
        double slice = 0.05;
        if (deadline > 0) {
            double left = deadline - now_seconds();
            if (left <= 0) {
                end_group(pid);
                if (wait_retry(pid, &status, 0) != pid)
                    lost = errno ? errno : ECHILD;
                timed_out = 1;
                break;
            }
            if (left < slice)
                slice = left;
        }
        /* The pipe wakes us the moment the child ends (or, if a grandchild
         * kept the pipe, waitpid sees the exit within a slice). */
        if (pfd.fd >= 0) {
            int n = poll(&pfd, 1, (int)(slice * 1000.0) + 1);
            if (n > 0 && (pfd.revents & (POLLHUP | POLLIN | POLLERR | POLLNVAL)))
                pfd.fd = -1;
            continue;
        }
        /* Hung up: the child closes its descriptors late in its exit, when
         * it is microseconds from being reapable.  Short, growing sleeps
         * keep that from costing a whole millisecond per isolated call. */
        if (reap_wait > slice)
            reap_wait = slice;
        nap_seconds(reap_wait);
        reap_wait *= 2;
    }
    res->seconds = now_seconds() - t0;
    close(fds[0]);
    if (!lost)
        subreaper_reap_group(pid);

    const isolate_header_t *h = shared;
    const int done = __atomic_load_n(&h->done, __ATOMIC_ACQUIRE);
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
        describe_timeout(res, timeout_s);
    } else {
        describe_abnormal_end(res, status, done);
    }
    *shared_out = shared;
    *map_bytes = bytes;
    return 0;
}

static int run_and_copy(isolate_fn fn, void *ctx, void *out, size_t out_bytes, double timeout_s,
                        int copy_on_failure, isolate_result_t *res, kr_error_t *err)
{
    void *shared;
    size_t bytes;
    if (run_child(fn, ctx, out_bytes, timeout_s, res, err, &shared, &bytes))
        return -1;
    const int copy = res->status == ISOLATE_OK || (copy_on_failure && res->status == ISOLATE_FAILED);
    if (copy && out && out_bytes)
        memcpy(out, (char *)shared + ISOLATE_HEADER_BYTES, out_bytes);
    munmap(shared, bytes);
    return 0;
}

int isolate_run(isolate_fn fn, void *ctx, void *out, size_t out_bytes, double timeout_s,
                isolate_result_t *res, kr_error_t *err)
{
    return run_and_copy(fn, ctx, out, out_bytes, timeout_s, 0, res, err);
}

int isolate_run_returned(isolate_fn fn, void *ctx, void *out, size_t out_bytes, double timeout_s,
                         isolate_result_t *res, kr_error_t *err)
{
    return run_and_copy(fn, ctx, out, out_bytes, timeout_s, 1, res, err);
}

int isolate_run_split(isolate_fn fn, void *ctx, void *head, size_t head_bytes, void *body,
                      size_t body_bytes, double timeout_s, isolate_result_t *res, kr_error_t *err)
{
    void *shared;
    size_t bytes;
    if (run_child(fn, ctx, head_bytes + body_bytes, timeout_s, res, err, &shared, &bytes))
        return -1;
    const char *region = (const char *)shared + ISOLATE_HEADER_BYTES;
    if (res->status == ISOLATE_OK) {
        if (head && head_bytes)
            memcpy(head, region, head_bytes);
        if (body && body_bytes)
            memcpy(body, region + head_bytes, body_bytes);
    }
    munmap(shared, bytes);
    return 0;
}

/* ------------------------------------------------------------------ workers */

struct isolate_worker {
    isolate_serve_fn fn;
    void *ctx;
    int keep_fds[8];
    int n_keep_fds;
    pid_t pid;                  /* the running worker, 0 if none */
    int sock;                   /* the parent's end of the socket, -1 if none */
    int calls_served;           /* by the running worker */
};

/* The worker's answer to one call. */
typedef struct {
    int rc;
    char msg[KR_ERROR_MSG_MAX];
} worker_reply_t;

isolate_worker_t *isolate_worker_new(isolate_serve_fn fn, void *ctx, const int *keep_fds,
                                     int n_keep_fds)
{
    const int cap = (int)(sizeof ((isolate_worker_t *)0)->keep_fds / sizeof(int));
    if (!fn || n_keep_fds < 0 || n_keep_fds > cap || (n_keep_fds > 0 && !keep_fds))
        return NULL;
    isolate_worker_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->fn = fn;
    w->ctx = ctx;
    for (int i = 0; i < n_keep_fds; i++)
        w->keep_fds[i] = keep_fds[i];
    w->n_keep_fds = n_keep_fds;
    w->sock = -1;
    return w;
}

int isolate_worker_calls_served(const isolate_worker_t *w)
{
    return w && w->pid > 0 ? w->calls_served : 0;
}

static int keeps_fd(const isolate_worker_t *w, int sock, int fd)
{
    if (fd <= 2 || fd == sock)
        return 1;
    for (int i = 0; i < w->n_keep_fds; i++)
        if (w->keep_fds[i] == fd)
            return 1;
    return 0;
}

/* Closes every inherited descriptor the worker was not told to keep.  The
 * listing comes first and the closing after, so the directory stream's own
 * descriptor is never pulled from under it. */
static void close_inherited_fds(const isolate_worker_t *w, int sock)
{
    int to_close[1024];
    int n = 0, more = 1;
    while (more) {
        more = 0;
        n = 0;
        DIR *d = opendir("/proc/self/fd");
        if (!d)
            return;     /* no /proc: keep what was inherited */
        const int own = dirfd(d);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            char *end;
            long fd = strtol(e->d_name, &end, 10);
            if (*end || end == e->d_name || fd == own || keeps_fd(w, sock, (int)fd))
                continue;
            if (n == (int)(sizeof to_close / sizeof to_close[0])) {
                more = 1;   /* close this batch, then list again */
                break;
            }
            to_close[n++] = (int)fd;
        }
        closedir(d);
        for (int i = 0; i < n; i++)
            close(to_close[i]);
    }
}

/* The worker: answers calls until the parent closes its end.  Never
 * returns. */
static void worker_main(const isolate_worker_t *w, int sock, pid_t parent)
{
    child_setup(parent);
    /* The parent's handlers are not the worker's: it lives as long as the
     * parent's run, and a SIGINT or SIGTERM should end it, not run code
     * meant for the parent. */
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0)
            continue;
        if (!(sa.sa_flags & SA_SIGINFO) && (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
    }
    close_inherited_fds(w, sock);
#ifdef __GLIBC__
    /* The parent's free heap came with the fork.  Dropping it here means
     * the parent's later writes there copy nothing on our account, and the
     * worker pins no more of the parent's memory than was live. */
    malloc_trim(0);
#endif
    /* One request at a time, copied here so fn may keep nothing of the
     * parent's buffers. */
    static _Alignas(max_align_t) char request[ISOLATE_WORKER_REQUEST_MAX];
    for (;;) {
        ssize_t n = recv(sock, request, sizeof request, MSG_TRUNC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            subreaper_end_children();
            _exit(0);           /* the parent hung up (or is gone): done */
        }
        worker_reply_t reply;
        memset(&reply, 0, sizeof reply);
        if ((size_t)n > sizeof request) {
            reply.rc = -1;
            snprintf(reply.msg, sizeof reply.msg, "isolate: a request of %zd bytes; at most %zu",
                     n, sizeof request);
        } else {
            kr_error_t e;
            memset(&e, 0, sizeof e);
            reply.rc = w->fn(w->ctx, request, (size_t)n, &e);
            memcpy(reply.msg, e.msg, sizeof reply.msg);
            reply.msg[sizeof reply.msg - 1] = '\0';
        }
        fflush(stdout);
        fflush(stderr);
        if (send(sock, &reply, sizeof reply, MSG_NOSIGNAL) != (ssize_t)sizeof reply) {
            subreaper_end_children();
            _exit(0);
        }
    }
}

static int worker_start(isolate_worker_t *w, kr_error_t *err)
{
    int sv[2];
    /* Sequenced packets: one request, one reply, each a whole message; a
     * peer that is gone is EPIPE on send (MSG_NOSIGNAL), not SIGPIPE. */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return kr_fail(err, "isolate: socketpair: %s", strerror(errno));
    const pid_t parent = getpid();
    const pid_t pid = fork_flushed(sv, err);
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(sv[0]);
        worker_main(w, sv[1], parent);
    }
    close(sv[1]);
    setpgid(pid, pid);
    w->pid = pid;
    w->sock = sv[0];
    w->calls_served = 0;
    return 0;
}

/* Closes the parent's end and forgets the worker (already reaped, or to be
 * reaped by the caller). */
static void worker_forget(isolate_worker_t *w)
{
    if (w->pid > 0)
        subreaper_reap_group(w->pid);
    if (w->sock >= 0)
        close(w->sock);
    w->sock = -1;
    w->pid = 0;
    w->calls_served = 0;
}

void isolate_worker_retire(isolate_worker_t *w)
{
    if (!w || w->pid <= 0) {
        if (w)
            worker_forget(w);
        return;
    }
    end_group(w->pid);
    int status;
    (void)wait_retry(w->pid, &status, 0);
    worker_forget(w);
}

void isolate_worker_free(isolate_worker_t *w)
{
    if (!w)
        return;
    isolate_worker_retire(w);
    free(w);
}

/* The worker hung up without answering: reap it and say how it ended.  It
 * closes its socket only in its exit, microseconds from being reapable; a
 * second bounds the wait should it linger. */
static void worker_reap_after_hangup(isolate_worker_t *w, isolate_result_t *res)
{
    const double give_up = now_seconds() + 1.0;
    double nap = 20e-6;
    int status = 0;
    for (;;) {
        const int ended = child_ended(w->pid);
        pid_t got = 0;
        if (ended == 1) {
            end_group(w->pid);
            got = wait_retry(w->pid, &status, 0);
        } else if (ended < 0) {
            got = -1;
        }
        if (got == w->pid) {
            describe_abnormal_end(res, status, 0);
            break;
        }
        if (got < 0) {          /* reaped by someone else (SIGCHLD ignored?) */
            res->status = ISOLATE_CRASHED;
            snprintf(res->message, sizeof res->message, "ended without an answer (status lost: %s)",
                     strerror(errno));
            break;
        }
        if (now_seconds() >= give_up) {
            end_group(w->pid);
            (void)wait_retry(w->pid, &status, 0);
            res->status = ISOLATE_CRASHED;
            res->signal = SIGKILL;
            snprintf(res->message, sizeof res->message, "hung up without an answer: killed (SIGKILL)");
            break;
        }
        nap_seconds(nap);
        if (nap < 0.01)
            nap *= 2;
    }
    worker_forget(w);
}

int isolate_worker_call(isolate_worker_t *w, const void *request, size_t request_bytes,
                        double timeout_s, isolate_result_t *res, kr_error_t *err)
{
    memset(res, 0, sizeof *res);
    if (request_bytes > ISOLATE_WORKER_REQUEST_MAX)
        return kr_fail(err, "isolate: a request of %zu bytes; at most %zu", request_bytes,
                       ISOLATE_WORKER_REQUEST_MAX);
    /* A worker that ended between calls (killed from outside, say) is
     * found on the send and replaced once. */
    for (int attempt = 0;; attempt++) {
        if (w->pid <= 0 && worker_start(w, err))
            return -1;
        if (send(w->sock, request, request_bytes, MSG_NOSIGNAL) == (ssize_t)request_bytes)
            break;
        const int e = errno;
        isolate_worker_retire(w);
        if (attempt > 0 || (e != EPIPE && e != ECONNRESET))
            return kr_fail(err, "isolate: sending a request to the worker: %s", strerror(e));
    }
    res->pid = w->pid;

    const double t0 = now_seconds();
    const double deadline = timeout_s > 0 ? t0 + timeout_s : 0;
    worker_reply_t reply;
    for (;;) {
        int ms = -1;
        if (deadline > 0) {
            double left = deadline - now_seconds();
            if (left <= 0) {
                isolate_worker_retire(w);
                res->seconds = now_seconds() - t0;
                describe_timeout(res, timeout_s);
                return 0;
            }
            ms = left > 1000.0 ? 1000000 : (int)(left * 1000.0) + 1;
        }
        struct pollfd pfd = {.fd = w->sock, .events = POLLIN};
        int n = poll(&pfd, 1, ms);
        if (n < 0 && errno != EINTR)
            return kr_fail(err, "isolate: poll: %s", strerror(errno));
        if (n <= 0)
            continue;
        ssize_t got = recv(w->sock, &reply, sizeof reply, MSG_DONTWAIT);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got == (ssize_t)sizeof reply)
            break;
        /* EOF, an error or a short message: the worker is gone or broken. */
        worker_reap_after_hangup(w, res);
        res->seconds = now_seconds() - t0;
        return 0;
    }
    res->seconds = now_seconds() - t0;
    w->calls_served++;
    if (reply.rc == 0) {
        res->status = ISOLATE_OK;
    } else {
        res->status = ISOLATE_FAILED;
        reply.msg[sizeof reply.msg - 1] = '\0';
        kr_strlcpy(res->message, reply.msg[0] ? reply.msg : "failed without a message",
                   sizeof res->message);
    }
    return 0;
}
