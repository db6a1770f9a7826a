/* memfd_create is Linux's. */
#define _GNU_SOURCE

#include "anon_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int anon_file_open(const char *name, kr_error_t *err)
{
#if defined(__linux__) && defined(MFD_CLOEXEC)
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd >= 0)
        return fd;
    /* ENOSYS (an old kernel) or a sandbox that forbids it: a file will do. */
#endif
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-XXXXXX", dir && *dir ? dir : "/tmp", name);
    int tfd = mkstemp(path);
    if (tfd < 0)
        return kr_fail(err, "%s: cannot create a temporary file %s: %s", name, path,
                       strerror(errno));
    unlink(path);   /* gone from the directory; lives as long as the descriptor */
    (void)fcntl(tfd, F_SETFD, FD_CLOEXEC);
    return tfd;
}
