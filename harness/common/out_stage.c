/* out_stage: an output set staged and moved into place whole (out_stage.h). */
/* renameat2, O_NOFOLLOW, O_DIRECTORY, getentropy: Linux / POSIX.1-2008. */
#define _GNU_SOURCE

#include "out_stage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "kr_string.h"

#define STAGE_PREFIX ".kreplay-new-"
#define EXTERNAL_PREFIX ".external-"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* Removes name in the directory parent_fd and, for a directory, all it
 * holds; links are removed as links, never followed. */
static void remove_tree_at(int parent_fd, const char *name, int depth)
{
    struct stat st;
    if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return;
    if (!S_ISDIR(st.st_mode) || depth > 16) {
        (void)unlinkat(parent_fd, name, 0);
        return;
    }
    const int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d) {
        /* Names first, removal after: the stream is not read while its
         * directory changes. */
        char (*names)[256] = NULL;
        size_t n = 0, cap = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 32;
                char (*grown)[256] = realloc(names, cap * sizeof *names);
                if (!grown)
                    break;
                names = grown;
            }
            kr_strlcpy(names[n++], e->d_name, sizeof names[0]);
        }
        for (size_t i = 0; i < n; i++)
            remove_tree_at(dirfd(d), names[i], depth + 1);
        free(names);
        closedir(d);
    } else if (fd >= 0) {
        close(fd);
    }
    (void)unlinkat(parent_fd, name, AT_REMOVEDIR);
}

/* A staging directory whose writer is gone: ".kreplay-new-PID-..." with no
 * process PID, or PID this very process (reused by a new run of ours). */
static int stage_is_stale(const char *name)
{
    if (strncmp(name, STAGE_PREFIX, strlen(STAGE_PREFIX)) != 0)
        return 0;
    const long pid = strtol(name + strlen(STAGE_PREFIX), NULL, 10);
    return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static void remove_stale_stages(int dir_fd)
{
    const int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    char stale[16][64];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 16;)
        if (stage_is_stale(e->d_name) && strlen(e->d_name) < sizeof stale[0])
            kr_strlcpy(stale[n++], e->d_name, sizeof stale[0]);
    closedir(d);
    for (int i = 0; i < n; i++)
        remove_tree_at(dir_fd, stale[i], 0);
}

int out_stage_begin(out_stage_t *st, const char *dir, kr_error_t *err)
{
    memset(st, 0, sizeof *st);
    st->dir_fd = st->stage_fd = -1;
    if (!dir || !*dir)
        return kr_fail(err, "(null): no output directory given; expected a directory");
    kr_strlcpy(st->dir, dir, sizeof st->dir);
    if (make_dirs(dir, err))
        return -1;
    st->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st->dir_fd < 0)
        return kr_fail(err, "%s: cannot open the directory: %s", dir, strerror(errno));
    remove_stale_stages(st->dir_fd);
    for (int attempt = 0; attempt < 16; attempt++) {
        uint64_t r = 0;
        if (getentropy(&r, sizeof r) != 0)
            r = (uint64_t)time(NULL) * 2654435761u + (uint64_t)attempt;
        snprintf(st->stage_name, sizeof st->stage_name, STAGE_PREFIX "%ld-%08llx", (long)getpid(),
                 (unsigned long long)(r & 0xffffffffull));
        if (mkdirat(st->dir_fd, st->stage_name, 0700) == 0)
            break;
        if (errno != EEXIST || attempt == 15) {
            const int e = errno;
            close(st->dir_fd);
            st->dir_fd = -1;
            return kr_fail(err, "%s: cannot create a staging directory in it: %s", dir,
                           strerror(e));
        }
    }
    st->stage_fd = openat(st->dir_fd, st->stage_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (st->stage_fd < 0) {
        const int e = errno;
        out_stage_abort(st);
        return kr_fail(err, "%s: cannot open its staging directory: %s", dir, strerror(e));
    }
    snprintf(st->path, sizeof st->path, "%s/%s", dir, st->stage_name);
    return 0;
}

int out_stage_external(out_stage_t *st, const char *final_path, char *staged, size_t cap,
                       kr_error_t *err)
{
    if (st->n_external == OUT_STAGE_MAX_EXTERNAL)
        return kr_fail(err, "%s: more than %d files outside %s in one output set", final_path,
                       OUT_STAGE_MAX_EXTERNAL, st->dir);
    kr_strlcpy(st->external[st->n_external], final_path, sizeof st->external[0]);
    snprintf(staged, cap, "%s/" EXTERNAL_PREFIX "%d", st->path, st->n_external);
    st->n_external++;
    return 0;
}

/* The staged external file i into its final place: a rename when it is on
 * the same file system, else a copy through an atomic write there. */
static int place_external(out_stage_t *st, int i, kr_error_t *err)
{
    char staged[64];
    snprintf(staged, sizeof staged, EXTERNAL_PREFIX "%d", i);
    atomic_target_t t;
    if (atomic_target_open(&t, st->external[i], err))
        return -1;
    int rc = 0;
    if (renameat(st->stage_fd, staged, t.dir_fd, t.name) != 0) {
        if (errno != EXDEV) {
            rc = kr_fail(err, "%s: cannot move into place: %s", st->external[i], strerror(errno));
        } else {
            const int in = openat(st->stage_fd, staged, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            const int out = in >= 0 ? atomic_target_create(&t, err) : -1;
            char buf[65536];
            ssize_t got = 0;
            while (out >= 0 && (got = read(in, buf, sizeof buf)) > 0)
                if (write(out, buf, (size_t)got) != got)
                    got = -1;
            if (in < 0 || out < 0 || got < 0)
                rc = kr_fail(err, "%s: cannot copy into place: %s", st->external[i],
                             strerror(errno));
            if (out >= 0)
                close(out);
            if (in >= 0)
                close(in);
            if (rc == 0)
                return atomic_target_commit(&t, err);
        }
    }
    atomic_target_abort(&t);
    return rc;
}

/* One staged entry over its old self in DIR.  A directory on either side is
 * exchanged (the old one lands in the stage, to be removed with it). */
static int place_entry(out_stage_t *st, const char *name, kr_error_t *err)
{
    struct stat now, staged;
    const int exists = fstatat(st->dir_fd, name, &now, AT_SYMLINK_NOFOLLOW) == 0;
    if (fstatat(st->stage_fd, name, &staged, AT_SYMLINK_NOFOLLOW) != 0)
        return kr_fail(err, "%s/%s: the staged file vanished", st->dir, name);
    if (exists && (S_ISDIR(now.st_mode) || S_ISDIR(staged.st_mode))) {
        if (renameat2(st->stage_fd, name, st->dir_fd, name, RENAME_EXCHANGE) == 0)
            return 0;
        /* No exchange here (an old kernel or file system): the old one
         * into the stage first, then the new one out. */
        char old[300];
        snprintf(old, sizeof old, ".old-%.250s", name);
        if (renameat(st->dir_fd, name, st->stage_fd, old) != 0)
            return kr_fail(err, "%s/%s: cannot move the earlier one aside: %s", st->dir, name,
                           strerror(errno));
    }
    if (renameat(st->stage_fd, name, st->dir_fd, name) != 0)
        return kr_fail(err, "%s/%s: cannot move into place: %s", st->dir, name, strerror(errno));
    return 0;
}

/* The staged entries' names (not the external files'). */
static int staged_names(out_stage_t *st, char (*names)[256], int cap)
{
    const int fd = openat(st->stage_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < cap;) {
        if (e->d_name[0] == '.')
            continue;   /* ".", "..", external files and temporaries */
        kr_strlcpy(names[n++], e->d_name, sizeof names[0]);
    }
    closedir(d);
    return n;
}

static int commit_blocked(out_stage_t *st, const char *const *owned, int n_owned, kr_error_t *err)
{
    char names[64][256];
    const int n = staged_names(st, names, 64);
    if (n < 0)
        return kr_fail(err, "%s: cannot list its staging directory: %s", st->dir, strerror(errno));
    for (int i = 0; i < st->n_external; i++)
        if (place_external(st, i, err))
            return -1;
    for (int i = 0; i < n; i++)
        if (place_entry(st, names[i], err))
            return -1;
    /* What an earlier set had and this one has not: moved out with it. */
    for (int i = 0; i < n_owned; i++) {
        int staged = 0;
        for (int j = 0; j < n && !staged; j++)
            staged = !strcmp(names[j], owned[i]);
        char old[300];
        snprintf(old, sizeof old, ".gone-%.250s", owned[i]);
        struct stat sb;
        if (!staged && fstatat(st->dir_fd, owned[i], &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
            renameat(st->dir_fd, owned[i], st->stage_fd, old) != 0)
            return kr_fail(err, "%s/%s: cannot remove the earlier one: %s", st->dir, owned[i],
                           strerror(errno));
    }
    (void)fsync(st->dir_fd);
    return 0;
}

/* An interrupt that comes during a commit, held until it is done: a handler
 * (not a blocked mask, which would hold it off in this thread only) notes
 * it, and it is raised again once the old handlers are back. */
static volatile sig_atomic_t held_signal;

static void hold_signal(int sig)
{
    if (!held_signal)
        held_signal = sig;
}

int out_stage_commit(out_stage_t *st, const char *const *owned, int n_owned, kr_error_t *err)
{
    if (st->dir_fd < 0 || st->stage_fd < 0)
        return kr_fail(err, "%s: no staged output to commit", st->dir);
    static const int held[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    enum { N_HELD = sizeof held / sizeof held[0] };
    struct sigaction was[N_HELD], sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = hold_signal;
    sigfillset(&sa.sa_mask);
    held_signal = 0;
    for (int i = 0; i < N_HELD; i++) {
        (void)sigaction(held[i], NULL, &was[i]);
        if (was[i].sa_handler != SIG_IGN)
            (void)sigaction(held[i], &sa, NULL);
    }
    const int rc = commit_blocked(st, owned, n_owned, err);
    out_stage_abort(st);    /* the stage, holding what was displaced */
    for (int i = 0; i < N_HELD; i++)
        (void)sigaction(held[i], &was[i], NULL);
    if (held_signal)
        raise(held_signal);
    return rc;
}

void out_stage_abort(out_stage_t *st)
{
    if (st->stage_fd >= 0)
        close(st->stage_fd);
    st->stage_fd = -1;
    if (st->dir_fd >= 0) {
        if (st->stage_name[0])
            remove_tree_at(st->dir_fd, st->stage_name, 0);
        close(st->dir_fd);
    }
    st->dir_fd = -1;
    st->stage_name[0] = '\0';
}
