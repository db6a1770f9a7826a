#include "run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

int run_lock_acquire(const char *dir, run_lock_t *lock, kr_error_t *err)
{
    lock->fd = -1;
    if (make_dirs(dir, err))
        return -1;
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/" LOCK_NAME, dir) >= sizeof path)
        return kr_fail(err, "%s: path too long; expected under 4096 bytes", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return kr_fail(err, "%s: cannot create the lock file %s: %s", dir, path, strerror(errno));
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
