#include "run_lock.h"

/* O_NOFOLLOW and O_DIRECTORY are not all in C11's POSIX. */
#define _DEFAULT_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"

#define LOCK_NAME ".kreplay.lock"

static long holder_pid(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return strtol(buf, NULL, 10);
}

/* DIR/.kreplay.lock, opened in DIR (opened once) without following a link:
 * someone else's file planted there, as a symbolic or a hard link, is never
 * written (the pid below would truncate it). */
static int open_lock_file(const char *dir, const char *path, kr_error_t *err)
{
    const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return kr_fail(err, "%s: cannot open the directory: %s", dir, strerror(errno));
    int fd = openat(dfd, LOCK_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    const int e = errno;
    close(dfd);
    if (fd < 0) {
        if (e == ELOOP)
            return kr_fail(err, "%s: the lock file %s is a symbolic link; refused (remove it: "
                                "kreplay creates its own)", dir, path);
        return kr_fail(err, "%s: cannot create the lock file %s: %s", dir, path, strerror(e));
    }
    struct stat st;
    const int ok_stat = fstat(fd, &st) == 0;
    if (!ok_stat || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        close(fd);
        if (ok_stat && S_ISREG(st.st_mode))
            return kr_fail(err, "%s: the lock file %s has %lu links (a hard link to another "
                                "file?); refused (remove it: kreplay creates its own)", dir, path,
                           (unsigned long)st.st_nlink);
        return kr_fail(err, "%s: the lock file %s is not a regular file; refused (remove it: "
                            "kreplay creates its own)", dir, path);
    }
    return fd;
}

int run_lock_acquire(const char *dir, run_lock_t *lock, kr_error_t *err)
{
    lock->fd = -1;
    if (make_dirs(dir, err))
        return -1;
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/" LOCK_NAME, dir) >= sizeof path)
        return kr_fail(err, "%s: path too long; expected under 4096 bytes", dir);
    int fd = open_lock_file(dir, path, err);
    if (fd < 0)
        return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        long pid = holder_pid(fd);
        close(fd);
        if (e == EWOULDBLOCK) {
            if (pid > 0)
                return kr_fail(err, "%s is being written by another kreplay (pid %ld); wait for it "
                                    "or choose another directory", dir, pid);
            return kr_fail(err, "%s is being written by another kreplay; wait for it or choose "
                                "another directory", dir);
        }
        return kr_fail(err, "%s: cannot lock %s: %s", dir, path, strerror(e));
    }
    /* The pid is for the refusal message only: the flock is the lock. */
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        int e = errno;
        close(fd);
        return kr_fail(err, "%s: cannot write the lock file %s: %s", dir, path, strerror(e));
    }
    lock->fd = fd;
    return 0;
}

void run_lock_release(run_lock_t *lock)
{
    if (lock->fd >= 0)
        close(lock->fd);
    lock->fd = -1;
}
