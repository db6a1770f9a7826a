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
 * instead of a crash of kreplay.  The child re-writes the case with
 * case_write into a private temporary file, which the parent then reads:
 * a file kreplay wrote itself.  timeout_s <= 0: $KREPLAY_READ_TIMEOUT, else
 * 120 s.  KREPLAY_READ_IN_PROCESS=1 reads in-process (for a debugger). */
int case_load_safe(const char *path, case_t *c, const case_load_options_t *o, double timeout_s,
                   kr_error_t *err);

/* 1 if path starts with a zip signature (a torch.save file), 0 if not or
 * unreadable. */
int case_load_is_torch(const char *path);

#endif
