/* Reusable buffers for the operand copies a model makes on every run (the
 * decoded activations).  A fresh malloc of a few MB per run is a fresh
 * mmap: every page is faulted in and zeroed again, which on small shapes
 * costs as much as the GEMM.  A few buffers are kept between runs instead,
 * up to SCRATCH_MAX_CACHED bytes each: larger requests are allocated per
 * run (on huge pages, kr_alloc.h), since their shapes' GEMMs
 * dwarf the page faults and keeping them would raise the process's
 * resident memory for good.
 * Thread-safe without locks; a buffer is never shared by two runs at once,
 * and after fork() the child simply starts with what was free. */
#ifndef KR_SCRATCH_H
#define KR_SCRATCH_H

#include <stddef.h>

#define SCRATCH_MAX_CACHED ((size_t)16 << 20)

typedef struct {
    void *data;
    int slot;           /* the cache slot held, or -1 (plain malloc) */
} scratch_t;

/* At least `bytes` bytes, 64-byte aligned, contents undefined; NULL on
 * allocation failure. */
void *scratch_get(scratch_t *s, size_t bytes);
/* Gives the buffer back (no-op for an empty scratch_t). */
void scratch_put(scratch_t *s);

#endif
