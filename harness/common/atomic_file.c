/* getentropy, O_NOFOLLOW and O_DIRECTORY are not all in C11's POSIX. */
#define _DEFAULT_SOURCE

#include "atomic_file.h"
#include "file_kind.h"
#include "kr_string.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Splits path into its directory (".", "/" or the part before the last
 * '/') and last component; -1 when there is no usable last component. */
static int split_path(const char *path, char *dir, size_t dir_cap, char *name, size_t name_cap)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..") || strlen(base) >= name_cap)
        return -1;
    kr_strlcpy(name, base, name_cap);
    if (!slash)
        kr_strlcpy(dir, ".", dir_cap);
    else if (slash == path)
        kr_strlcpy(dir, "/", dir_cap);
    else
        kr_strlcpy(dir, path, (size_t)(slash - path) + 1 < dir_cap ? (size_t)(slash - path) + 1
                                                                     : dir_cap);
    return 0;
}

int atomic_target_open(atomic_target_t *t, const char *path, kr_error_t *err)
{
    memset(t, 0, sizeof *t);
    t->dir_fd = -1;
    if (!path || !*path)
        return kr_fail(err, "(null): no path given; expected a file path to write");
    kr_strlcpy(t->path, path, sizeof t->path);
    char dir[4096];
    if (strlen(path) >= sizeof t->path || split_path(path, dir, sizeof dir, t->name, sizeof t->name))
        return kr_fail(err, "%s: not a usable file name (too long, or a directory); expected a "
                            "file path to write", path);
    t->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (t->dir_fd < 0)
        return kr_fail(err, "%s: cannot create the temporary file: its directory %s cannot be "
                            "opened (%s); expected a writable directory", path, dir, strerror(errno));
    /* Renaming over a device or a directory would replace it (/dev/full as
     * root), so only a regular file, a symbolic link (the link is replaced,
     * never its target) or nothing may be at path. */
    struct stat st;
    if (fstatat(t->dir_fd, t->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode) &&
        !S_ISLNK(st.st_mode)) {
        atomic_target_abort(t);
        return kr_fail(err, "%s: exists and is %s, not a regular file (a rename would replace it); "
                            "expected a file path to write", path, file_kind_name(st.st_mode));
    }
    return 0;
}

void atomic_target_draw_name(atomic_target_t *t)
{
    uint64_t r = 0;
    if (getentropy(&r, sizeof r) != 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)t;
    }
    /* The ".tmp." infix is what readers of a folder skip as a write in
     * progress (partials, history). */
    snprintf(t->tmp_name, sizeof t->tmp_name, "%.200s.tmp.%ld.%012llx", t->name, (long)getpid(),
             (unsigned long long)(r & 0xffffffffffffull));
    const char *slash = strrchr(t->path, '/');
    if (slash)
        snprintf(t->tmp, sizeof t->tmp, "%.*s/%s", (int)(slash - t->path), t->path, t->tmp_name);
    else
        kr_strlcpy(t->tmp, t->tmp_name, sizeof t->tmp);
}

int atomic_target_create(atomic_target_t *t, kr_error_t *err)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        atomic_target_draw_name(t);
        const int fd = openat(t->dir_fd, t->tmp_name,
                              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST) {
            const int e = errno;
            t->tmp_name[0] = '\0';
            return kr_fail(err, "%s: cannot write: %s", t->path, strerror(e));
        }
    }
    t->tmp_name[0] = '\0';
    return kr_fail(err, "%s: cannot write: no free temporary name in its directory", t->path);
}

void atomic_target_tmp_path(const atomic_target_t *t, char *buf, size_t cap)
{
    char fd_dir[64];
    struct stat st;
    snprintf(fd_dir, sizeof fd_dir, "/proc/self/fd/%d", t->dir_fd);
    if (t->dir_fd >= 0 && stat(fd_dir, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(buf, cap, "%s/%s", fd_dir, t->tmp_name);
    else
        kr_strlcpy(buf, t->tmp, cap);
}

int atomic_target_commit(atomic_target_t *t, kr_error_t *err)
{
    if (t->dir_fd < 0 || !t->tmp_name[0]) {
        atomic_target_abort(t);
        return kr_fail(err, "%s: write failed: the file was not open", t->path);
    }
    const int fd = openat(t->dir_fd, t->tmp_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        const int e = errno;
        if (fd >= 0)
            close(fd);
        atomic_target_abort(t);
        return kr_fail(err, "%s: write failed: %s", t->path, strerror(e));
    }
    close(fd);
    if (renameat(t->dir_fd, t->tmp_name, t->dir_fd, t->name) != 0) {
        const int e = errno;
        atomic_target_abort(t);
        return kr_fail(err, "%s: cannot move into place: %s", t->path, strerror(e));
    }
    t->tmp_name[0] = '\0';
    (void)fsync(t->dir_fd); /* best effort: some file systems refuse it */
    atomic_target_abort(t);
    return 0;
}

void atomic_target_abort(atomic_target_t *t)
{
    /* A target never opened (zeroed) has no name and owns no descriptor. */
    const int open_dir = t->dir_fd >= 0 && t->name[0];
    if (open_dir && t->tmp_name[0])
        (void)unlinkat(t->dir_fd, t->tmp_name, 0);
    t->tmp_name[0] = '\0';
    if (open_dir)
        close(t->dir_fd);
    t->dir_fd = -1;
}

int atomic_file_open(atomic_file_t *f, const char *path, kr_error_t *err)
{
    memset(f, 0, sizeof *f);
    kr_strlcpy(f->path, path ? path : "", sizeof f->path);
    if (atomic_target_open(&f->target, path, err))
        return -1;
    const int fd = atomic_target_create(&f->target, err);
    if (fd < 0) {
        atomic_target_abort(&f->target);
        return -1;
    }
    kr_strlcpy(f->tmp, f->target.tmp, sizeof f->tmp);
    f->fp = fdopen(fd, "w");
    if (!f->fp) {
        const int e = errno;
        close(fd);
        atomic_target_abort(&f->target);
        return kr_fail(err, "%s: cannot write: %s", path, strerror(e));
    }
    return 0;
}

/* fsync of the folder that holds path, so the rename itself is durable.
 * Best effort: some file systems refuse fsync on a directory. */
void sync_parent_dir(const char *path)
{
    char dir[4096];
    kr_strlcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash)
        kr_strlcpy(dir, ".", sizeof dir);
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int atomic_file_commit(atomic_file_t *f, kr_error_t *err)
{
    if (!f->fp) {
        atomic_file_abort(f);
        return kr_fail(err, "%s: write failed: the file was not open", f->path);
    }
    errno = 0;
    int bad = ferror(f->fp) || fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0;
    int saved = errno;
    bad |= fclose(f->fp) != 0;
    f->fp = NULL;
    if (bad) {
        atomic_target_abort(&f->target);
        return kr_fail(err, "%s: write failed: %s", f->path, strerror(saved ? saved : errno));
    }
    return atomic_target_commit(&f->target, err);
}

void atomic_file_abort(atomic_file_t *f)
{
    if (f->fp)
        fclose(f->fp);
    f->fp = NULL;
    atomic_target_abort(&f->target);
}
int make_dirs(const char *path, kr_error_t *err)
{
    char buf[4096];
    kr_strlcpy(buf, path, sizeof buf);
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/')
        buf[--len] = '\0';
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return kr_fail(err, "%s: cannot create directory %s: %s", path, buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return kr_fail(err, "%s: cannot create directory: %s", path, strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return kr_fail(err, "%s: exists and is not a directory", path);
    if (access(buf, W_OK) != 0)
        return kr_fail(err, "%s: directory is not writable", path);
    return 0;
}

int make_parent_dirs(const char *path, kr_error_t *err)
{
    char dir[4096];
    kr_strlcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    return make_dirs(dir, err);
}
