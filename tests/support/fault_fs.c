/* A failing file system for the fault tests, without root or mounts: an
 * LD_PRELOAD library that makes writes below one directory fail the way a
 * full or broken disk does.
 *
 *   KR_FAULT_DIR    absolute directory; only files below it are affected
 *   KR_FAULT_AFTER  bytes that may still be written there (default 0): the
 *                   write that would pass this budget fails, and so does every
 *                   later write, fsync and fdatasync of a file there (a full
 *                   disk stays full; the page cache's late errors come at fsync)
 *   KR_FAULT_ERRNO  ENOSPC (default) | EIO | EROFS.  EROFS refuses at once
 *                   every creation, write-open, mkdir, rename and unlink below
 *                   the directory, as a read-only mount does (for root too).
 *   KR_FAULT_SIGNAL_AT_RENAME  N: right after the N-th rename below the
 *                   directory, the process sends itself KR_FAULT_SIGNAL (INT,
 *                   the default, or TERM): a Ctrl-C or a kill at that exact
 *                   point of a run.  Writes then never fail (KR_FAULT_AFTER
 *                   defaults to no limit).
 *
 * HDF5's sec2 driver uses open/pwrite/write, which are charged as they
 * happen; stdio streams are charged when flushed or closed (below).  The
 * calls relative to a directory descriptor (openat, renameat, renameat2,
 * unlinkat, mkdirat) and fdopen are covered too, and a path through
 * "/proc/self/fd/N/..." counts as the directory N is. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FDS 4096
#define MAX_STREAMS 64

typedef struct {
    char dir[PATH_MAX];
    size_t dir_len;
    long long budget;           /* bytes left; < 0 once exhausted */
    int err;
    int active;
    long signal_at_rename;      /* > 0: raise signal after that rename below dir */
    int signal;
    long renames;               /* renames below dir so far */
} fault_cfg_t;

static fault_cfg_t cfg;
static int cfg_loaded;
static unsigned char tracked[MAX_FDS];
static struct {
    FILE *fp;
    int fd;
    long long charged;          /* bytes of the file already charged to the budget */
} streams[MAX_STREAMS];

static void load_cfg(void)
{
    if (cfg_loaded)
        return;
    cfg_loaded = 1;
    const char *d = getenv("KR_FAULT_DIR");
    if (!d || d[0] != '/' || strlen(d) >= sizeof cfg.dir)
        return;
    strcpy(cfg.dir, d);
    cfg.dir_len = strlen(cfg.dir);
    while (cfg.dir_len > 1 && cfg.dir[cfg.dir_len - 1] == '/')
        cfg.dir[--cfg.dir_len] = '\0';
    const char *at = getenv("KR_FAULT_SIGNAL_AT_RENAME");
    cfg.signal_at_rename = at ? atol(at) : 0;
    const char *sig = getenv("KR_FAULT_SIGNAL");
    cfg.signal = sig && !strcmp(sig, "TERM") ? SIGTERM : SIGINT;
    const char *a = getenv("KR_FAULT_AFTER");
    cfg.budget = a ? atoll(a) : cfg.signal_at_rename > 0 ? LLONG_MAX : 0;
    const char *e = getenv("KR_FAULT_ERRNO");
    cfg.err = !e || !strcmp(e, "ENOSPC") ? ENOSPC : !strcmp(e, "EIO") ? EIO : EROFS;
    cfg.active = 1;
}

/* Whether path (relative paths against the working directory) is the
 * directory or below it. */
static int below(const char *path)
{
    load_cfg();
    if (!cfg.active || !path)
        return 0;
    char abs[2 * PATH_MAX];
    static const char fd_prefix[] = "/proc/self/fd/";
    if (!strncmp(path, fd_prefix, sizeof fd_prefix - 1)) {
        /* A path through an open directory: that directory's own path. */
        char *end;
        const long fd = strtol(path + sizeof fd_prefix - 1, &end, 10);
        char link[64], dir[PATH_MAX];
        snprintf(link, sizeof link, "%s%ld", fd_prefix, fd);
        const ssize_t n = readlink(link, dir, sizeof dir - 1);
        if (n <= 0)
            return 0;
        dir[n] = '\0';
        snprintf(abs, sizeof abs, "%s%s", dir, end);
    } else if (path[0] == '/') {
        snprintf(abs, sizeof abs, "%s", path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return 0;
        snprintf(abs, sizeof abs, "%s/%s", cwd, path);
    }
    return !strncmp(abs, cfg.dir, cfg.dir_len) && (abs[cfg.dir_len] == '/' || abs[cfg.dir_len] == '\0');
}

static int writes_refused(void)
{
    return cfg.err == EROFS;
}

/* The next definition of name (libc's, or a sanitizer's interceptor). */
#define REAL(name)                                                                        \
    static __typeof__(&name) real_##name;                                                  \
    if (!real_##name)                                                                      \
    real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

static int is_write_open(int flags)
{
    return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND)) != 0;
}

static int open_common(const char *name, const char *path, int flags, mode_t mode)
{
    typedef int (*open_fn)(const char *, int, ...);
    open_fn real = (open_fn)dlsym(RTLD_NEXT, name);
    int hit = below(path) && is_write_open(flags);
    if (hit && writes_refused()) {
        errno = EROFS;
        return -1;
    }
    int fd = real(path, flags, mode);
    if (fd >= 0 && fd < MAX_FDS)
        tracked[fd] = (unsigned char)hit;
    return fd;
}

/* The optional mode argument exists only when the flags create a file, so
 * it can be read only in a variadic body, after its last named parameter. */
#define FAULT_MODE(flags, last, mode)                                                              \
    do {                                                                                           \
        if ((flags) & (O_CREAT | O_TMPFILE)) {                                                     \
            va_list ap;                                                                            \
            va_start(ap, last);                                                                    \
            mode = (mode_t)va_arg(ap, int);                                                        \
            va_end(ap);                                                                            \
        }                                                                                          \
    } while (0)

/* open and open64 are the same wrapper. */
#define FAULT_OPEN_WRAPPER(fn)                                                                     \
    int fn(const char *path, int flags, ...)                                                       \
    {                                                                                              \
        mode_t mode = 0;                                                                           \
        FAULT_MODE(flags, flags, mode);                                                            \
        return open_common(#fn, path, flags, mode);                                                \
    }

FAULT_OPEN_WRAPPER(open)
FAULT_OPEN_WRAPPER(open64)

int creat(const char *path, mode_t mode)
{
    return open_common("open", path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* Charges n bytes to the budget; -1 with errno once it is spent. */
static int charge(int fd, size_t n)
{
    if (fd < 0 || fd >= MAX_FDS || !tracked[fd])
        return 0;
    if (cfg.budget < 0 || (long long)n > cfg.budget) {
        cfg.budget = -1;
        errno = cfg.err;
        return -1;
    }
    cfg.budget -= (long long)n;
    return 0;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    REAL(write);
    if (charge(fd, n))
        return -1;
    return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    REAL(pwrite);
    if (charge(fd, n))
        return -1;
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    REAL(pwrite64);
    if (charge(fd, n))
        return -1;
    return real_pwrite64(fd, buf, n, off);
}

static int sync_fails(int fd)
{
    if (fd >= 0 && fd < MAX_FDS && tracked[fd] && cfg.budget < 0) {
        errno = cfg.err;
        return 1;
    }
    return 0;
}

int fsync(int fd)
{
    REAL(fsync);
    return sync_fails(fd) ? -1 : real_fsync(fd);
}

int fdatasync(int fd)
{
    REAL(fdatasync);
    return sync_fails(fd) ? -1 : real_fdatasync(fd);
}

int close(int fd)
{
    REAL(close);
    if (fd >= 0 && fd < MAX_FDS)
        tracked[fd] = 0;
    return real_close(fd);
}

static int refuse_if_below(const char *path)
{
    if (below(path) && writes_refused()) {
        errno = EROFS;
        return -1;
    }
    return 0;
}

int mkdir(const char *path, mode_t mode)
{
    REAL(mkdir);
    /* A read-only mount answers EEXIST for a directory that is there. */
    struct stat st;
    if (below(path) && writes_refused() && stat(path, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return refuse_if_below(path) ? -1 : real_mkdir(path, mode);
}

/* After a rename below the directory: the signal, at the rename asked for. */
static int after_rename(int rc, const char *to)
{
    if (rc == 0 && cfg.signal_at_rename > 0 && below(to) && ++cfg.renames == cfg.signal_at_rename)
        raise(cfg.signal);
    return rc;
}

int rename(const char *from, const char *to)
{
    REAL(rename);
    if (refuse_if_below(from) || refuse_if_below(to))
        return -1;
    return after_rename(real_rename(from, to), to);
}

int unlink(const char *path)
{
    REAL(unlink);
    return refuse_if_below(path) ? -1 : real_unlink(path);
}

int access(const char *path, int mode)
{
    REAL(access);
    if ((mode & W_OK) && below(path) && writes_refused()) {
        errno = EROFS;
        return -1;
    }
    return real_access(path, mode);
}

/* ---- stdio: charged at fflush and fclose ----
 *
 * glibc's stdio writes through its internal write, which no preloaded
 * library sees.  A stream opened for writing below the directory is a normal
 * stream; what it wrote (the file's size) is charged when it is flushed or
 * closed, and past the budget the file is cut at the budget and the flush or
 * close fails with the configured errno, as delayed allocation on a full
 * disk does. */

static int stream_index(FILE *fp)
{
    for (int i = 0; fp && i < MAX_STREAMS; i++)
        if (streams[i].fp == fp)
            return i;
    return -1;
}

/* -1 with errno when the stream's new bytes do not fit the budget. */
static int charge_stream(int i)
{
    struct stat st;
    if (fstat(streams[i].fd, &st) != 0)
        return 0;
    long long delta = (long long)st.st_size - streams[i].charged;
    if (delta <= 0)
        return 0;
    if (cfg.budget < 0 || delta > cfg.budget) {
        long long keep = streams[i].charged + (cfg.budget > 0 ? cfg.budget : 0);
        if (ftruncate(streams[i].fd, (off_t)keep) != 0)
            keep = st.st_size;
        streams[i].charged = keep;
        cfg.budget = -1;
        errno = cfg.err;
        return -1;
    }
    cfg.budget -= delta;
    streams[i].charged = st.st_size;
    return 0;
}

static FILE *fopen_common(const char *name, const char *path, const char *mode)
{
    typedef FILE *(*fopen_fn)(const char *, const char *);
    fopen_fn real = (fopen_fn)dlsym(RTLD_NEXT, name);
    int writing = strpbrk(mode, "wa+") != NULL;
    if (!writing || !below(path))
        return real(path, mode);
    if (writes_refused()) {
        errno = EROFS;
        return NULL;
    }
    FILE *fp = real(path, mode);
    if (!fp)
        return NULL;
    REAL(fileno);
    int fd = real_fileno(fp);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (!streams[i].fp) {
            streams[i].fp = fp;
            streams[i].fd = fd;
            streams[i].charged = 0;
            if (fd >= 0 && fd < MAX_FDS)
                tracked[fd] = 1;
            break;
        }
    return fp;
}

FILE *fopen(const char *path, const char *mode)
{
    return fopen_common("fopen", path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
    return fopen_common("fopen64", path, mode);
}

int fflush(FILE *fp)
{
    REAL(fflush);
    int r = real_fflush(fp);
    if (r != 0)
        return r;
    if (!fp) {
        int bad = 0;
        for (int i = 0; i < MAX_STREAMS; i++)
            if (streams[i].fp && charge_stream(i))
                bad = 1;
        return bad ? EOF : 0;
    }
    int i = stream_index(fp);
    return i >= 0 && charge_stream(i) ? EOF : 0;
}

int fclose(FILE *fp)
{
    REAL(fclose);
    REAL(fflush);
    int i = stream_index(fp);
    if (i < 0)
        return real_fclose(fp);
    int bad = real_fflush(fp) != 0;
    int e = errno;
    if (!bad && charge_stream(i)) {
        bad = 1;
        e = errno;
    }
    if (streams[i].fd >= 0 && streams[i].fd < MAX_FDS)
        tracked[streams[i].fd] = 0;
    streams[i].fp = NULL;
    int r = real_fclose(fp);
    if (bad) {
        errno = e;
        return EOF;
    }
    return r;
}

/* ---- calls relative to a directory descriptor ---- */

/* dirfd/name as one path (dirfd AT_FDCWD: name as it is). */
static void at_path(int dirfd, const char *name, char *out, size_t cap)
{
    if (!name || name[0] == '/' || dirfd == AT_FDCWD) {
        snprintf(out, cap, "%s", name ? name : "");
        return;
    }
    snprintf(out, cap, "/proc/self/fd/%d/%s", dirfd, name);
}

static int openat_common(const char *fn, int dirfd, const char *name, int flags, mode_t mode)
{
    typedef int (*openat_fn)(int, const char *, int, ...);
    openat_fn real = (openat_fn)dlsym(RTLD_NEXT, fn);
    char path[2 * PATH_MAX];
    at_path(dirfd, name, path, sizeof path);
    int hit = below(path) && is_write_open(flags);
    if (hit && writes_refused()) {
        errno = EROFS;
        return -1;
    }
    int fd = real(dirfd, name, flags, mode);
    if (fd >= 0 && fd < MAX_FDS)
        tracked[fd] = (unsigned char)hit;
    return fd;
}

#define FAULT_OPENAT_WRAPPER(fn)                                                                   \
    int fn(int dirfd, const char *name, int flags, ...)                                            \
    {                                                                                              \
        mode_t mode = 0;                                                                           \
        FAULT_MODE(flags, flags, mode);                                                            \
        return openat_common(#fn, dirfd, name, flags, mode);                                       \
    }

FAULT_OPENAT_WRAPPER(openat)
FAULT_OPENAT_WRAPPER(openat64)

static int refuse_at(int dirfd, const char *name)
{
    char path[2 * PATH_MAX];
    at_path(dirfd, name, path, sizeof path);
    return refuse_if_below(path);
}

int mkdirat(int dirfd, const char *name, mode_t mode)
{
    REAL(mkdirat);
    return refuse_at(dirfd, name) ? -1 : real_mkdirat(dirfd, name, mode);
}

int unlinkat(int dirfd, const char *name, int flags)
{
    REAL(unlinkat);
    return refuse_at(dirfd, name) ? -1 : real_unlinkat(dirfd, name, flags);
}

int renameat(int olddir, const char *from, int newdir, const char *to)
{
    REAL(renameat);
    if (refuse_at(olddir, from) || refuse_at(newdir, to))
        return -1;
    char path[2 * PATH_MAX];
    at_path(newdir, to, path, sizeof path);
    return after_rename(real_renameat(olddir, from, newdir, to), path);
}

int renameat2(int olddir, const char *from, int newdir, const char *to, unsigned flags)
{
    REAL(renameat2);
    if (refuse_at(olddir, from) || refuse_at(newdir, to))
        return -1;
    char path[2 * PATH_MAX];
    at_path(newdir, to, path, sizeof path);
    return after_rename(real_renameat2(olddir, from, newdir, to, flags), path);
}

/* A stream over a descriptor opened below the directory is charged like
 * one fopen'd there. */
FILE *fdopen(int fd, const char *mode)
{
    REAL(fdopen);
    FILE *fp = real_fdopen(fd, mode);
    if (!fp || fd < 0 || fd >= MAX_FDS || !tracked[fd] || !strpbrk(mode, "wa+"))
        return fp;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (!streams[i].fp) {
            streams[i].fp = fp;
            streams[i].fd = fd;
            streams[i].charged = 0;
            break;
        }
    return fp;
}
