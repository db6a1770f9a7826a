/* file_kind: a path's kind, checked without blocking (file_kind.h). */
#include "file_kind.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *file_kind_name(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "not a file";
}

static int refuse_kind(const char *path, mode_t mode, const char *want, const char *expected,
                       kr_error_t *err)
{
    return kr_fail(err, "%s: file: is %s, not %s; expected %s", path, file_kind_name(mode), want,
                   expected);
}

int file_open_regular(const char *path, const char *expected, kr_error_t *err)
{
    if (!path)
        return kr_fail(err, "(null): file: no path given; expected %s", expected);
    struct stat before;
    if (stat(path, &before) != 0)
        return kr_fail(err, "%s: file: cannot open (%s); expected %s", path, strerror(errno),
                       expected);
    if (!S_ISREG(before.st_mode))
        return refuse_kind(path, before.st_mode, "a regular file", expected, err);
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return kr_fail(err, "%s: file: cannot open (%s); expected %s", path, strerror(errno),
                       expected);
    struct stat now;
    if (fstat(fd, &now) != 0) {
        const int e = errno;
        close(fd);
        return kr_fail(err, "%s: file: fstat failed (%s); expected %s", path, strerror(e),
                       expected);
    }
    if (!S_ISREG(now.st_mode) || now.st_dev != before.st_dev || now.st_ino != before.st_ino) {
        close(fd);
        if (!S_ISREG(now.st_mode))
            return refuse_kind(path, now.st_mode, "a regular file", expected, err);
        return kr_fail(err, "%s: file: replaced while it was being opened; expected %s", path,
                       expected);
    }
    /* Reads of a regular file never block anyway; the flag only matters to
     * what the descriptor is handed on to. */
    const int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int file_check_regular(const char *path, const char *expected, kr_error_t *err)
{
    const int fd = file_open_regular(path, expected, err);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

int file_stat_regular(const char *path, const char *expected, struct stat *st, kr_error_t *err)
{
    const int fd = file_open_regular(path, expected, err);
    if (fd < 0)
        return -1;
    const int e = fstat(fd, st) == 0 ? 0 : errno;
    close(fd);
    return e ? kr_fail(err, "%s: file: fstat failed (%s); expected %s", path, strerror(e), expected)
             : 0;
}

FILE *file_fopen_regular(const char *path, const char *expected, kr_error_t *err)
{
    const int fd = file_open_regular(path, expected, err);
    if (fd < 0)
        return NULL;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        kr_fail(err, "%s: file: cannot open (%s); expected %s", path, strerror(errno), expected);
        close(fd);
    }
    return fp;
}

int file_check_dir(const char *path, const char *expected, kr_error_t *err)
{
    if (!path)
        return kr_fail(err, "(null): no path given; expected %s", expected);
    struct stat st;
    if (stat(path, &st) != 0)
        return kr_fail(err, "%s: cannot open (%s); expected %s", path, strerror(errno), expected);
    if (!S_ISDIR(st.st_mode))
        return kr_fail(err, "%s: is %s, not a directory; expected %s", path,
                       file_kind_name(st.st_mode), expected);
    return 0;
}
