#include "gnuplot.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kr_string.h"

extern char **environ;

int gnuplot_find(char *buf, size_t cap)
{
    if (cap)
        buf[0] = '\0';
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    const char *p = path;
    for (;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char cand[4096];
        if (len == 0)
            snprintf(cand, sizeof cand, "./gnuplot");   /* an empty entry is the current directory */
        else if (len < sizeof cand - 16)
            snprintf(cand, sizeof cand, "%.*s/gnuplot", (int)len, p);
        else
            cand[0] = '\0';
        struct stat st;
        if (cand[0] && stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
            if (strlen(cand) >= cap)
                return 0;
            kr_strlcpy(buf, cand, cap);
            return 1;
        }
        if (!end)
            return 0;
        p = end + 1;
    }
}

int gnuplot_available(void)
{
    char buf[4096];
    return gnuplot_find(buf, sizeof buf);
}

/* Starts exe with no arguments beyond argv[0] (no shell: nothing is ever
 * parsed by /bin/sh), stdin from in_fd (-1: /dev/null), stdout and stderr
 * onto out_fd and err_fd.  Returns the child's pid, or -1 with errno set. */
static pid_t spawn_gnuplot(const char *exe, char *const argv[], int in_fd, int out_fd, int err_fd)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    int bad = 0;
    if (in_fd >= 0)
        bad |= posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    else
        bad |= posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    bad |= posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    bad |= posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    pid_t pid = -1;
    int e = bad ? ENOMEM : posix_spawn(&pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) {
        errno = e;
        return -1;
    }
    return pid;
}

/* The child's wait status, retrying on EINTR; -1 when it cannot be had. */
static int wait_child(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

/* The whole of an anonymous file, from its start. */
static char *slurp(FILE *f, size_t *len)
{
    *len = 0;
    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        return NULL;
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf)
        return NULL;
    /* gnuplot wrote through a duplicate of this descriptor: the offset is
     * shared, so go back to the start before reading. */
    if (fseek(f, 0, SEEK_SET) != 0) {
        free(buf);
        return NULL;
    }
    size_t got = fread(buf, 1, size, f);
    buf[got] = '\0';
    *len = got;
    return buf;
}

/* The first few lines of gnuplot's stderr, on one line. */
static void first_lines(const char *text, char *out, size_t cap)
{
    size_t n = 0;
    int lines = 0;
    out[0] = '\0';
    for (const char *p = text; *p && n + 2 < cap && lines < 6; p++) {
        if (*p == '\n') {
            lines++;
            if (n && out[n - 1] != ' ' && p[1])
                out[n++] = ' ';
            continue;
        }
        out[n++] = (*p == '\t' || *p == '\r') ? ' ' : *p;
    }
    out[n] = '\0';
}

/* One gnuplot child between its start and its end. */
typedef struct {
    pid_t pid;
    FILE *img, *errf;
    char exe[4096];
} gp_child_t;

/* Starts gnuplot on job's script (SIGPIPE already ignored by the caller: a
 * gnuplot that exits early must make the write fail, not kill us).  On
 * failure job->rc and job->err are set and c->pid is -1. */
static void gp_start(gnuplot_job_t *job, gp_child_t *c)
{
    c->pid = -1;
    c->img = c->errf = NULL;
    job->out = NULL;
    job->out_len = 0;
    job->rc = 0;
    kr_error_t *err = &job->err;
    if (!gnuplot_find(c->exe, sizeof c->exe)) {
        job->rc = kr_fail(err, "gnuplot: not found on PATH");
        return;
    }
    c->img = tmpfile();
    c->errf = tmpfile();
    if (!c->img || !c->errf) {
        job->rc = kr_fail(err, "gnuplot: cannot create an anonymous file: %s", strerror(errno));
        return;
    }
    /* Another job's gnuplot must not hold these open (nor the pipe's write
     * end, or this gnuplot never sees EOF). */
    fcntl(fileno(c->img), F_SETFD, FD_CLOEXEC);
    fcntl(fileno(c->errf), F_SETFD, FD_CLOEXEC);
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        job->rc = kr_fail(err, "gnuplot: cannot create a pipe: %s", strerror(errno));
        return;
    }
    fcntl(pipefd[0], F_SETFD, FD_CLOEXEC);
    fcntl(pipefd[1], F_SETFD, FD_CLOEXEC);
    fflush(NULL);
    char argv0[] = "gnuplot";
    char *argv[] = {argv0, NULL};
    c->pid = spawn_gnuplot(c->exe, argv, pipefd[0], fileno(c->img), fileno(c->errf));
    int spawn_errno = errno;
    close(pipefd[0]);
    FILE *gp = c->pid < 0 ? NULL : fdopen(pipefd[1], "w");
    if (!gp) {
        int e = c->pid < 0 ? spawn_errno : errno;
        close(pipefd[1]);
        if (c->pid >= 0)
            wait_child(c->pid);
        c->pid = -1;
        job->rc = kr_fail(err, "gnuplot: cannot start %s: %s", c->exe, strerror(e));
        return;
    }
    const int width = job->width > 0 ? job->width : 800;
    const int height = job->height > 0 ? job->height : 500;
    if (job->term == GNUPLOT_SVG)
        fprintf(gp, "set terminal svg size %d,%d noenhanced font \"Helvetica,12\" background rgb \"white\"\n",
                width, height);
    else
        fprintf(gp, "set terminal pngcairo size %d,%d noenhanced font \"Sans,10\" background rgb \"white\"\n",
                width, height);
    fputs("set output\n", gp);
    fputs(job->script, gp);
    fputs("\nunset output\nexit\n", gp);
    fclose(gp);
}

/* Waits for a started job and takes its image, or its error. */
static void gp_finish(gnuplot_job_t *job, gp_child_t *c)
{
    if (c->pid < 0) {
        if (c->img)
            fclose(c->img);
        if (c->errf)
            fclose(c->errf);
        return;
    }
    int status = wait_child(c->pid);
    size_t elen = 0;
    char *etext = slurp(c->errf, &elen);
    fclose(c->errf);
    size_t ilen = 0;
    char *image = slurp(c->img, &ilen);
    fclose(c->img);

    kr_error_t *err = &job->err;
    int rc = 0;
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char lines[600];
        first_lines(etext ? etext : "", lines, sizeof lines);
        if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 127)
            rc = kr_fail(err, "gnuplot: %s could not be run", c->exe);
        else
            rc = kr_fail(err, "gnuplot failed (%s %d): %s",
                         status != -1 && WIFEXITED(status) ? "exit" : "status",
                         status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : status,
                         lines[0] ? lines : "no message");
    } else if (!image || ilen == 0) {
        rc = kr_fail(err, "gnuplot: wrote no image");
    }
    free(etext);
    job->rc = rc;
    if (rc) {
        free(image);
        return;
    }
    job->out = image;
    job->out_len = ilen;
}

void gnuplot_render_all(gnuplot_job_t *jobs, int n, int parallel)
{
    if (n <= 0)
        return;
    int window = parallel < 1 ? 1 : parallel < n ? parallel : n;
    gp_child_t one, *slots = window > 1 ? calloc((size_t)window, sizeof *slots) : NULL;
    if (!slots) {               /* one at a time (or no memory for more) */
        slots = &one;
        window = 1;
    }
    struct sigaction ign, old;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old);
    /* Up to `window` children, finished in job order (job i in slot
     * i % window). */
    int started = 0;
    for (int done = 0; done < n; done++) {
        for (; started < n && started - done < window; started++)
            gp_start(&jobs[started], &slots[started % window]);
        gp_finish(&jobs[done], &slots[done % window]);
    }
    sigaction(SIGPIPE, &old, NULL);
    if (slots != &one)
        free(slots);
}

int gnuplot_render(const char *script, gnuplot_term_t term, int width, int height, char **out,
                   size_t *out_len, kr_error_t *err)
{
    gnuplot_job_t job = {.script = script, .term = term, .width = width, .height = height};
    gnuplot_render_all(&job, 1, 1);
    *out = job.out;
    *out_len = job.out_len;
    if (job.rc && err)
        *err = job.err;
    return job.rc;
}

void gnuplot_version(char *buf, size_t cap)
{
    if (cap)
        buf[0] = '\0';
    char exe[4096];
    if (!gnuplot_find(exe, sizeof exe))
        return;
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return;
    fcntl(pipefd[0], F_SETFD, FD_CLOEXEC);
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return;
    }
    fflush(NULL);
    char argv0[] = "gnuplot", argv1[] = "--version";
    char *argv[] = {argv0, argv1, NULL};
    pid_t pid = spawn_gnuplot(exe, argv, -1, pipefd[1], devnull);
    close(pipefd[1]);
    close(devnull);
    FILE *p = pid < 0 ? NULL : fdopen(pipefd[0], "r");
    if (!p) {
        close(pipefd[0]);
        if (pid >= 0)
            wait_child(pid);
        return;
    }
    char line[256] = "";
    if (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\r\n")] = '\0';
        kr_strlcpy(buf, line, cap);
    }
    fclose(p);
    wait_child(pid);
}
