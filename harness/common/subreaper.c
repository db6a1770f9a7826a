/* subreaper: isolated children and the orphans they leave (subreaper.h). */
/* prctl's PR_SET_CHILD_SUBREAPER and getsid are Linux / XSI. */
#define _GNU_SOURCE

#include "subreaper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* At most this many processes are handled per pass; a pass that had more
 * is followed by another. */
#define MAX_PIDS 1024

void subreaper_become(void)
{
#if defined(__linux__) && defined(PR_SET_CHILD_SUBREAPER)
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
}

/* Appends the pids in a "children" file (space-separated) to out. */
static int read_pid_list(const char *path, pid_t *out, int n, int cap)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return n;
    char buf[8192];
    size_t len = 0;
    for (;;) {
        const ssize_t got = read(fd, buf + len, sizeof buf - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
        if (len == sizeof buf - 1)
            break;
    }
    close(fd);
    buf[len] = '\0';
    for (char *p = buf, *end; n < cap; p = end) {
        const long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (v > 0)
            out[n++] = (pid_t)v;
    }
    return n;
}

/* pid's children, every thread's, appended to out[n..cap). */
static int list_children(pid_t pid, pid_t *out, int n, int cap)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%ld/task", (long)pid);
    DIR *d = opendir(dir);
    if (!d)
        return n;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < cap) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[128];
        snprintf(path, sizeof path, "%s/%.20s/children", dir, e->d_name);
        n = read_pid_list(path, out, n, cap);
    }
    closedir(d);
    return n;
}

/* The state letter of /proc/PID/stat ('Z' a zombie), and its parent; 0
 * when the process is gone. */
static char proc_state(pid_t pid, pid_t *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    const ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0)
        return 0;
    buf[got] = '\0';
    /* "PID (COMM) S PPID ...": COMM may hold spaces and parentheses. */
    const char *close_paren = strrchr(buf, ')');
    char state = 0;
    long parent = 0;
    if (!close_paren || sscanf(close_paren + 1, " %c %ld", &state, &parent) != 2)
        return 0;
    *ppid = (pid_t)parent;
    return state;
}

static void nap_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

void subreaper_end_children(void)
{
    for (int pass = 0; pass < 200; pass++) {
        pid_t kids[MAX_PIDS];
        const int n = list_children(getpid(), kids, 0, MAX_PIDS);
        if (n == 0)
            return;
        for (int i = 0; i < n; i++)
            kill(kids[i], SIGKILL);
        /* Each dies at once (SIGKILL); its own children come to us. */
        for (int i = 0; i < n; i++)
            while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
                ;
    }
}

void subreaper_kill_descendants(pid_t pid)
{
    if (pid <= 0)
        return;
    for (int pass = 0; pass < 200; pass++) {
        /* Breadth first from pid: its children, theirs, ... */
        pid_t all[MAX_PIDS];
        int n = list_children(pid, all, 0, MAX_PIDS);
        for (int i = 0; i < n && n < MAX_PIDS; i++)
            n = list_children(all[i], all, n, MAX_PIDS);
        int alive = 0;
        for (int i = 0; i < n; i++) {
            pid_t parent = 0;
            const char state = proc_state(all[i], &parent);
            if (state && state != 'Z') {
                kill(all[i], SIGKILL);
                alive++;
            }
        }
        if (!alive)
            return;
        /* Let the killed die, so that their children are handed to pid. */
        nap_ms(1);
    }
}

static void reap_adopted(void)
{
    const pid_t own_session = getsid(0);
    for (int pass = 0; pass < 200; pass++) {
        pid_t kids[MAX_PIDS];
        const int n = list_children(getpid(), kids, 0, MAX_PIDS);
        int found = 0;
        for (int i = 0; i < n; i++) {
            const pid_t sid = getsid(kids[i]);
            if (sid < 0 || sid == own_session)
                continue;
            kill(kids[i], SIGKILL);
            while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
                ;
            found++;
        }
        if (!found)
            return;
    }
}

void subreaper_reap_group(pid_t pid)
{
    if (pid <= 0)
        return;
    for (int waited_ms = 0; waited_ms < 2000;) {
        const pid_t got = waitpid(-pid, NULL, WNOHANG);
        if (got > 0 || (got < 0 && errno == EINTR))
            continue;
        /* Members killed but not yet dead, or not yet handed to us. */
        if (kill(-pid, 0) != 0)
            break;
        nap_ms(1);
        waited_ms++;
    }
    reap_adopted();
}
