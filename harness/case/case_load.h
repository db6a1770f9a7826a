/* case_load: a case from either file format, chosen by the file's signature:
 * HDF5 (schema v1, case_read) or a torch.save zip ("PK", the MXFP4 dispatch's
 * bad-case dump, pt_import_case).  So `kreplay replay badcase_*.pt` works
 * wherever a command takes an HDF5 case. */
#ifndef KR_CASE_LOAD_H
#define KR_CASE_LOAD_H

#include "case.h"
#include "pt_import.h"

/* What a .pt dump does not say: the weight's order and, when N == K/32, the
 * scale layout.  Ignored for HDF5 cases, which declare both. */
typedef pt_import_options_t case_load_options_t;

/* Reads path into *c.  o may be NULL (defaults).  Returns 0, or -1 with one
 * line in err; *c is then left empty. */
int case_load(const char *path, case_t *c, const case_load_options_t *o, kr_error_t *err);

/* case_load in a child process.  libhdf5 itself can crash or hang on some
 * corrupt files (a damaged global heap under a string attribute, found by
 * fuzzing); reading in a child turns that into one error line ("... the
 * HDF5 library crashed reading it: the file is corrupt") and exit code 2
 * instead of a crash of kreplay.  One worker process (isolate.h) reads
 * every case of the run, so a read costs about what it costs in-process;
 * after a failed read it is replaced, and a crash or hang of a worker that
 * had read other files is retried by a fresh one before the file is
 * blamed.  The worker hands each case back as a flat binary image
 * (case_image.h) in an anonymous memory file; the parent checks the image
 * as untrusted bytes and reads it straight into the case's buffers (a large
 * image is discarded as it is read), so the parent never runs libhdf5 on
 * the file and never holds a large case twice.  The arrays the file stores
 * as they are (case_mapping.h) are not in the image: the worker only
 * locates them, and the parent maps them from the file itself, once it has
 * checked that the file is the one the worker read; a bf16 x is decoded by
 * the parent from the file.  Concurrent calls from
 * several threads are serialized.  timeout_s <= 0: $KREPLAY_READ_TIMEOUT,
 * else 120 s (a retried read can take twice that).
 * KREPLAY_READ_IN_PROCESS=1 reads in-process (for a debugger). */
int case_load_safe(const char *path, case_t *c, const case_load_options_t *o, double timeout_s,
                   kr_error_t *err);

/* 1 if path starts with a zip signature (a torch.save file), 0 if not or
 * unreadable. */
int case_load_is_torch(const char *path);

#endif
