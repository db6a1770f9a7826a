/* POSIX interfaces (fork, pipes, clock_gettime) under -std=c11. */
#define _DEFAULT_SOURCE

#include "plugin_probe.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child_guard.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The child: never returns. */
static void probe_child(const char *open_path, int answer_fd, pid_t parent)
{
    setpgid(0, 0);
    child_guard(parent);
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        signal(fatal[i], SIG_DFL);
    /* A constructor's prints must not land in kreplay's stdout (JSON, tables). */
    dup2(STDERR_FILENO, STDOUT_FILENO);
    void *h = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
    const char answer = h ? 'L' : 'F';
    if (write(answer_fd, &answer, 1) != 1)
        _exit(126);
    _exit(0);
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
    }
}

/* Kills what the child left in its group and reaps the child. */
static int end_child(pid_t pid, int *status)
{
    killpg(pid, SIGKILL);
    for (;;) {
        if (waitpid(pid, status, 0) == pid)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

int plugin_probe_load(const char *path, const char *open_path, double timeout_s, kr_error_t *err)
{
    int fds[2];
    if (pipe(fds) != 0)
        return kr_fail(err, "%s: cannot probe the plugin: pipe: %s", path, strerror(errno));
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    fflush(stdout);
    fflush(stderr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        const int e = errno;
        close(fds[0]);
        close(fds[1]);
        return kr_fail(err, "%s: cannot probe the plugin: fork: %s", path, strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        probe_child(open_path, fds[1], parent);
    }
    close(fds[1]);
    setpgid(pid, pid);  /* also done by the child: whichever runs first */

    const double deadline = now_seconds() + timeout_s;
    char answer = 0;
    int timed_out = 0;
    for (;;) {
        const double left = deadline - now_seconds();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        const int n = poll(&pfd, 1, (int)(left * 1000.0) + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0) {
            /* An answer, or end of file: the child ended without one. */
            if (read(fds[0], &answer, 1) != 1)
                answer = 0;
            break;
        }
    }
    close(fds[0]);
    int status = 0;
    if (end_child(pid, &status))
        return kr_fail(err, "%s: lost the probe process %ld: %s", path, (long)pid, strerror(errno));
    if (answer == 'L' || answer == 'F')
        return 0;
    if (timed_out)
        return kr_fail(err,
                       "%s: loading the plugin did not finish within %g s (a library constructor "
                       "hangs): refused",
                       path, timeout_s);
    if (WIFSIGNALED(status))
        return kr_fail(err,
                       "%s: loading the plugin crashed: killed by %s (%s) in a library "
                       "constructor, before any kernel ran: refused",
                       path, signal_name(WTERMSIG(status)), strsignal(WTERMSIG(status)));
    return kr_fail(err,
                   "%s: loading the plugin ended the process: a library constructor called "
                   "exit(%d) before any kernel ran: refused",
                   path, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}
