/* memfd_create, MAP_NORESERVE, fallocate's punch hole: Linux. */
#define _GNU_SOURCE

#include "shm_arena.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SHM_ARENA_MIN_RESERVE ((size_t)64 << 20)

int shm_arena_open(shm_arena_t *a, const char *name, size_t reserve, kr_error_t *err)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    const int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return kr_fail(err, "shared arena %s: memfd_create: %s", name, strerror(errno));
    /* Mapping past the file's end is allowed; touching it is not until the
     * file grows.  NORESERVE: the range is address space, not memory. */
    for (size_t r = reserve; r >= SHM_ARENA_MIN_RESERVE; r /= 2) {
        void *p = mmap(NULL, r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        if (p != MAP_FAILED) {
            a->fd = fd;
            a->base = p;
            a->reserved = r;
            return 0;
        }
    }
    const int e = errno;
    close(fd);
    return kr_fail(err, "shared arena %s: cannot map %zu MiB of address space: %s", name,
                   SHM_ARENA_MIN_RESERVE >> 20, strerror(e));
}

int shm_arena_reserve(shm_arena_t *a, size_t bytes, kr_error_t *err)
{
    if (bytes <= a->size)
        return 0;
    if (bytes > a->reserved)
        return kr_fail(err, "shared arena: %zu MiB wanted, %zu MiB reserved", bytes >> 20,
                       a->reserved >> 20);
    /* Grow in steps of at least a quarter, so a run of slightly larger
     * requests does not resize every time. */
    size_t want = a->size + a->size / 4;
    if (want < bytes)
        want = bytes;
    if (want > a->reserved)
        want = a->reserved;
    want = (want + 4095) & ~(size_t)4095;
    if (ftruncate(a->fd, (off_t)want) != 0)
        return kr_fail(err, "shared arena: cannot grow to %zu MiB: %s", want >> 20, strerror(errno));
    a->size = want;
    return 0;
}

void shm_arena_trim(shm_arena_t *a, size_t keep)
{
    keep = (keep + 4095) & ~(size_t)4095;
    if (a->fd < 0 || keep >= a->size)
        return;
    (void)fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)keep,
                    (off_t)(a->size - keep));
}

void shm_arena_close(shm_arena_t *a)
{
    if (a->base)
        munmap(a->base, a->reserved);
    if (a->fd >= 0)
        close(a->fd);
    memset(a, 0, sizeof *a);
    a->fd = -1;
}
