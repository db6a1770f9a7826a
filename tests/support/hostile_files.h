/* Helpers of the hostile-input tests (test_hostile_*.c, test_lost_output.c):
 * results files forged through the library's own writer, a tiny gate suite
 * and its clean run, and kreplay run under a time limit, so that an input
 * that hangs an old build fails the test instead of hanging it.
 * Include after <cmocka.h>'s prerequisites. */
#ifndef KR_HOSTILE_FILES_H
#define KR_HOSTILE_FILES_H

#include <stddef.h>

#include "result.h"
#include "results_store.h"

/* Exit code of a kreplay run that hit hostile_run's time limit. */
#define HOSTILE_TIMED_OUT 124

/* Runs `timeout 60 kreplay ARGS 2>&1` through /bin/sh (args printf-formatted
 * and already quoted); its output into *out (malloc'd).  Returns the exit
 * code: HOSTILE_TIMED_OUT when it hung, -1 when killed by a signal.  The
 * binary is this build's, or $KREPLAY_HOSTILE_BINARY (to show that an older
 * build fails these tests). */
int hostile_run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The kreplay binary hostile_run runs (this build's, or
 * $KREPLAY_HOSTILE_BINARY). */
const char *hostile_binary(void);

/* Runs the shell command (printf-formatted) and fails the test unless it
 * exits 0. */
void hostile_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Fails the test unless out holds needle (shown with the whole output). */
void hostile_expect(const char *out, const char *needle);

/* rows[0..n) of case "case<i>" (path DIR-less "hostile/case<i>.h5", a
 * case_id of its own), one kernel and reference each, verdict v. */
void hostile_rows(result_list_t *rows, int n, verdict_t v);

/* A provenance of suite `suite` at time `when` (ISO 8601). */
void hostile_meta(results_meta_t *m, const char *suite, const char *when);

/* Writes rows and meta to path (results_store_write); fails the test on error. */
void hostile_write(const char *path, const result_list_t *rows, const results_meta_t *m);

/* A torch.save zip at path: PREFIX/data.pkl (pkl, stored as it is),
 * PREFIX/byteorder ("little") and PREFIX/data/0, `bytes` zero bytes
 * deflated at `level` (calloc'd: unbacked pages cost time, not memory). */
void hostile_write_pt(const char *path, const char *prefix, const void *pkl, size_t pkl_len,
                      size_t bytes, int level);

/* The root attribute `name` of the HDF5 file at path replaced by the
 * variable-length string value. */
void hostile_set_attr(const char *path, const char *name, const char *value);

/* A fresh directory DIR (into dir) holding tiny.yaml, a suite of 4
 * synthetic cases (64x256, M 1 and 8, seeds 1 and 2) and one kernel
 * (w4a8.folded); with run != 0 also DIR/run, a clean gate run of it. */
void hostile_tiny_run(char *dir, size_t cap, const char *name, int run);

#endif
