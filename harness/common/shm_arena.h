/* Shared memory between a process and the workers it forks: one anonymous
 * memory file (memfd) mapped once, before any fork, over a large reserved
 * range, so the worker inherits the mapping at the same address.  Growing
 * the file (shm_arena_reserve) makes more of the range usable in every
 * process at once: no remapping, no message.  A pointer into the arena
 * means the same bytes in the parent and in every worker forked after
 * shm_arena_open.
 *
 * Only the first `size` bytes may be touched (past the file's end is
 * SIGBUS); only the opener grows or shrinks it, and only while no worker is
 * using it.  Pages are taken as they are first written and given back by
 * shm_arena_trim. */
#ifndef KR_SHM_ARENA_H
#define KR_SHM_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "kr_error.h"

typedef struct {
    int fd;                 /* the memory file, -1 when closed */
    unsigned char *base;    /* the mapping */
    size_t reserved;        /* bytes of address space mapped */
    size_t size;            /* bytes usable: the file's size */
} shm_arena_t;

/* Opens an empty arena named `name` (shown in /proc/PID/maps) reserving up to
 * `reserve` bytes of address space (halved until the mapping succeeds, down
 * to 64 MiB).  Returns 0, or -1 with err saying why. */
int shm_arena_open(shm_arena_t *a, const char *name, size_t reserve, kr_error_t *err);

/* Makes [0, bytes) usable (grows the file; never shrinks it).  -1 with err
 * when bytes is over the reservation or the system refuses. */
int shm_arena_reserve(shm_arena_t *a, size_t bytes, kr_error_t *err);

/* Gives the pages of [keep, size) back to the system (their bytes become
 * zeros); the size is unchanged. */
void shm_arena_trim(shm_arena_t *a, size_t keep);

/* Unmaps and closes; a closed or never-opened arena (fd -1) is fine. */
void shm_arena_close(shm_arena_t *a);

/* Rounds up to a multiple of 64 (an arena offset for any element type). */
static inline size_t shm_arena_align(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

#endif
