/* case_mapping: a case file's bytes mapped into memory, so that the arrays
 * an HDF5 file stores plainly (contiguous, no filter, native byte order,
 * aligned) are used where the page cache already holds them instead of
 * being copied into fresh buffers.
 *
 * Why: a replay's inputs are read once and never grown; copying them costs
 * a page fault per fresh page, which on virtual machines that trap each
 * fault is most of a load's time.  Measured on a 2-core AVX-512 EPYC guest,
 * `kreplay inspect` of a 60 MiB synthetic case (17408 x 5120, M = 1024, x
 * stored as bf16): 0.49-0.58 s when the reading process copied every array
 * into an image and the parent copied it out again, 0.14 s with the arrays
 * mapped (x still decoded to fp32 in a fresh buffer).
 *
 * The mapping is private and writable: a write to a mapped array (a test
 * poisoning an input, a fault injected in place) copies that page and never
 * reaches the file.  The file must not be truncated while mapped (its pages
 * past the new end would fault with SIGBUS); kreplay's own writers replace
 * a case atomically (a new file renamed over the old), which is safe. */
#ifndef KR_CASE_MAPPING_H
#define KR_CASE_MAPPING_H

#include <stddef.h>
#include <stdint.h>

#include "kr_error.h"

/* What identifies a file's content for as long as nobody writes it: the
 * reading process records it, the process that maps the file afterwards
 * checks it. */
typedef struct {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
} case_file_identity_t;

typedef struct {
    void *base;                 /* NULL: nothing mapped */
    size_t bytes;               /* the bytes mapped (from the file's start) */
    case_file_identity_t id;
} case_mapping_t;

/* Maps the first `bytes` of fd (opened for reading; 0 or more than the file:
 * the whole file) privately and records its identity.  Nothing is read yet.
 * A case is judged by its arrays, not by its size: a file padded to 8 GiB
 * around 18 KiB of data maps the part its arrays lie in, so an address-space
 * limit (ulimit -v) below the file's size does not stop it.  Returns 0, or
 * -1 with err set (an empty file is not mapped: -1). */
int case_mapping_map_fd(int fd, const char *path, uint64_t bytes, case_mapping_t *m,
                        kr_error_t *err);

/* Opens path and maps its first `bytes` (0: all of it), refusing when its
 * identity is not `expect` (the file was replaced or written since it was
 * validated).  Returns 0, or -1 with err set. */
int case_mapping_open_expecting(const char *path, const case_file_identity_t *expect,
                                uint64_t bytes, case_mapping_t *m, kr_error_t *err);

/* Identity of an open file. */
int case_file_identity_of(int fd, case_file_identity_t *id);

/* 1 when [p, p + bytes) lies inside the mapping (0 for no mapping, m NULL). */
int case_mapping_holds(const case_mapping_t *m, const void *p, size_t bytes);

/* Maps the page-cache pages of [off, off + bytes) now, in one call, rather
 * than one fault at a time later (best effort). */
void case_mapping_prefault(const case_mapping_t *m, uint64_t off, uint64_t bytes);

void case_mapping_unmap(case_mapping_t *m);

/* Makes a bus error (SIGBUS: what reading a mapped page past a file's new
 * end gives) print why it most likely happened before the process dies of
 * it, instead of a bare "Bus error".  For a program's main thread, once;
 * children that reset SIGBUS to its default are unaffected. */
void case_mapping_explain_bus_errors(void);

#endif
