/* What the results-store tests (test_results_store.c,
 * test_results_store_files.c) share: a private folder per test process for
 * their files, synthetic rows with every member set (NaN / +-Inf doubles,
 * strings full to the last byte or unterminated), provenance, and the
 * comparisons, member by member and doubles bit for bit, written out here
 * rather than through the field table, so a field the table forgot fails.
 * Include after <cmocka.h>'s prerequisites. */
#ifndef KR_RESULTS_ROWS_H
#define KR_RESULTS_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"
#include "results_store.h"

/* cmocka group setup / teardown: make, then remove, this process's folder
 * (kept with KR_TEST_KEEP_TMP set). */
int rs_dir_setup(void **state);
int rs_dir_teardown(void **state);

/* The folder rs_dir_setup made. */
const char *rs_dir(void);

/* A fresh path in that folder ending in name. */
void rs_tpath(char *buf, size_t cap, const char *name);

/* n rows of a synthetic run from seed: every member distinct and non-zero;
 * four rows per case (2 kernels x 2 references) share its path. */
void rs_make_rows(result_list_t *l, int n, uint64_t seed);

/* What a reader returns for r: every string cut at its member's size - 1. */
void rs_expect_cut(result_t *r);

/* Fails unless a and b hold the same rows, member by member. */
void rs_assert_lists_equal(const result_list_t *a, const result_list_t *b);

/* dst = a copy of src's rows. */
void rs_copy_list(result_list_t *dst, const result_list_t *src);

/* A provenance with every string set (a 3000-byte command among them). */
void rs_set_meta(results_meta_t *m, const char *tag, const char *suite_hash, const char *shard);

/* Fails unless b is a's provenance under the current schema. */
void rs_assert_meta_equal(const results_meta_t *a, const results_meta_t *b);

/* Fails unless err is one line naming path and containing p1 and p2 (each
 * may be NULL). */
void rs_assert_error(const kr_error_t *err, const char *path, const char *p1, const char *p2);

int rs_file_exists(const char *p);

/* Files in dir whose name contains s. */
int rs_count_matching(const char *dir, const char *s);

#endif
