/* results_store: a run's rows in one HDF5 file (schema kreplay.results/2),
 * shard merging, and per-case partial files for --resume.
 *
 * File layout:
 *   /rows   1-D compound dataset, one element per result_t row, one member
 *           per column of result_fields.h (results_table.h: variable-length
 *           UTF-8 strings, no sub-arrays, measured counts float64 so a
 *           missing one is NaN).  pandas.DataFrame(f["rows"][:]) reads it.
 *   root attributes (variable-length UTF-8 strings): schema
 *           "kreplay.results/2", version, git_commit, host, device,
 *           kernel_build_id, suite_name, suite_hash, time_utc, command,
 *           shard ("i/n", "" for an unsharded run, "merged k of n"),
 *           blas_core, blas, policy, options (the options fingerprint,
 *           run_options.h) (these last two optional on read).
 *           Partial files also carry case_key.
 * h5py reads it: f["rows"]["metrics.rel_fro"], f.attrs["suite_hash"].
 *
 * The reader matches /rows's members to result_t BY NAME: members it does
 * not know are ignored and member order does not matter, so files stay
 * readable across versions (schema 1 files too); a missing (non-optional)
 * field is an error naming the file and the field.  Every failure is one line in err
 * ("<path>: <object>: <problem>; expected <what>"); nothing crashes on a
 * truncated, corrupt or non-HDF5 file.
 *
 * Row order (result_list_sort): by case_path, then kernel, then reference,
 * each compared bytewise (strcmp); rows with equal keys keep their order
 * (stable).  Every writer of a run sorts first, so a merge of shards equals
 * the unsharded run row for row. */
#ifndef KR_RESULTS_STORE_H
#define KR_RESULTS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "kr_error.h"
#include "result.h"

#define RESULTS_SCHEMA_V2 "kreplay.results/2"   /* written */
#define RESULTS_SCHEMA_V1 "kreplay.results/1"   /* still read */

/* Provenance (root attributes).  Strings longer than a member are cut at
 * its size on read. */
typedef struct {
    char schema[32];            /* on read: the file's; ignored on write (always v2) */
    char version[32];           /* kreplay version */
    char git_commit[64];
    char host[128];
    char device[128];           /* "cpu", or the GPU(s) */
    char kernel_build_id[256];  /* whatever identifies the kernels' build; the caller's string */
    char suite_name[128];
    char suite_hash[128];
    char time_utc[32];          /* ISO 8601 */
    char command[4096];
    char shard[64];             /* "i/n", "" unsharded, "merged k of n" */
    char blas_core[32];         /* the OpenBLAS core the references ran on (blas_info.h) */
    char blas[512];             /* core, threads and OpenBLAS' build configuration */
    char policy[512];           /* the policy file the rows were judged by ("" none) */
    char options[2048];         /* the options that change rows (run_options.h; "" none) */
} results_meta_t;

/* Zeroes *m and fills schema, host (gethostname), time_utc (now) and the
 * BLAS core of this process. */
void results_meta_init(results_meta_t *m);

/* Stable sort by (case_path, kernel, reference), strcmp order each.
 * Returns 0, or -1 if out of memory (the list is then unchanged). */
int result_list_sort(result_list_t *l);
/* The key comparison result_list_sort uses. */
int result_key_cmp(const result_t *a, const result_t *b);

/* Writes rows and meta (NULL: empty provenance) to path atomically: a fresh
 * temporary "<path>.tmp.<pid>.<random>" created in the directory opened
 * once (never through a planted link: atomic_file.h), fsync'd, renamed over
 * path, directory fsync'd.  A failure leaves any existing file untouched.
 * Rows are written in the order given (sort them first). */
int results_store_write(const char *path, const result_list_t *rows, const results_meta_t *meta,
                        kr_error_t *err);
/* results_store_write of n rows, with the root attribute case_key when
 * case_key is not NULL (a partial file: results_store_append_case). */
int results_store_write_rows(const char *path, const result_t *rows, int64_t n,
                             const results_meta_t *meta, const char *case_key, kr_error_t *err);

/* Reads path in this process (what the reading process of results_reader.h
 * runs).  rows and meta may be NULL when count_only is given: then only the
 * provenance is read and /rows' length goes to *count_only.  case_key
 * (key_cap bytes): the partial file's case_key attribute, required when not
 * NULL. */
int results_read_direct(const char *path, result_list_t *rows, results_meta_t *meta,
                        char *case_key, size_t key_cap, int64_t *count_only, kr_error_t *err);

/* Forces the terminating NUL of every string member of m (bytes that came
 * from another process). */
void results_meta_terminate(results_meta_t *m);

/* Reads a results file into *rows (initialised here; free with
 * result_list_free) and *meta (may be NULL), in a separate process
 * (results_reader.h): a file that crashes or hangs libhdf5 is one error
 * naming it.  On error *rows is empty. */
int results_store_read(const char *path, result_list_t *rows, results_meta_t *meta,
                       kr_error_t *err);

/* The provenance of a results file and the number of rows it holds,
 * without reading the rows (what a history of many runs is sorted by before
 * the newest are loaded).  n_rows may be NULL. */
int results_store_read_meta(const char *path, results_meta_t *meta, int64_t *n_rows,
                            kr_error_t *err);

/* Merges shard files into out_path (atomically).  The rows are the union,
 * sorted by result_list_sort's key, i.e. exactly those of one unsharded run.
 * Refused with one line naming both files: different suite_hash; two shards
 * claiming the same "i/n", or "i/n" with different n; the same (case_path,
 * kernel, reference) key in two files (overlapping shards).  Provenance: the
 * first file's, with shard = "merged k of n" (k files; n from the first
 * file's "i/n", else k). */
int results_store_merge(const char **paths, int n, const char *out_path, kr_error_t *err);

/* ---- resume: one small file per finished case in RUNDIR/partial/ ----
 *
 * results_store_append_case writes rows (all rows of one finished case) to
 * RUNDIR/partial/<16 hex digits of FNV-1a(case_key)>-<readable tail>.h5,
 * atomically, creating the folder; appending the same key again replaces
 * that case's file.  meta may be NULL.
 *
 * results_store_load_partials appends every partial's rows to *rows (which
 * may already hold rows; initialise it to {0} otherwise) and returns the
 * keys of the cases they hold (*done_keys, malloc'd, free with
 * results_store_free_keys), in file-name order.  A missing partial/ folder
 * is 0 cases, not an error; leftover "*.tmp.*" files of a killed write are
 * ignored; a partial that cannot be read is an error naming it (delete it
 * to re-run that case).  To resume: load, skip cases whose key is in
 * done_keys, append each newly finished case, and at the end sort the whole
 * list (result_list_sort) and results_store_write RUNDIR/results.h5. */
int results_store_append_case(const char *run_dir, const char *case_key, const result_t *rows,
                              int64_t n_rows, const results_meta_t *meta, kr_error_t *err);
int results_store_load_partials(const char *run_dir, result_list_t *rows, char ***done_keys,
                                int *n_done, kr_error_t *err);
void results_store_free_keys(char **keys, int n);

/* RUNDIR/partial/<file> of the case with that key (what append_case writes). */
void results_store_partial_path(const char *run_dir, const char *case_key, char *buf, size_t cap);

/* The finished partial files of RUNDIR/partial ("*.h5"; a killed write's
 * "*.h5.tmp.PID" is left out), sorted by name, into *names (*n of them;
 * free with results_store_free_keys), and the folder's path into dir.  A
 * missing folder is 0 files, not an error. */
int results_store_partial_names(const char *run_dir, char *dir, size_t dir_cap, char ***names,
                                int *n, kr_error_t *err);

#endif
