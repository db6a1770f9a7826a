/* Checks on the rows ("results") of a `kreplay replay --json` run, as the
 * tests of kernels run through the binary need them. */
#ifndef KR_JSON_ROWS_H
#define KR_JSON_ROWS_H

#include <jansson.h>

typedef enum {
    IDENTICAL_UNCHECKED,
    IDENTICAL_MODEL_ROWS,   /* rows against a "model:" reference */
    IDENTICAL_EVERY_ROW,
} identical_check_t;

/* Which rows to count, and what each of them must hold. */
typedef struct {
    const char *kernel;       /* NULL: every kernel */
    const char *ref;          /* NULL: every reference */
    int ref_substring;        /* ref is found inside the row's reference, not equal to it */
    const char *verdict;      /* NULL: any verdict */
    const char *note, *note2; /* NULL, or text the row's note holds */
    identical_check_t identical;  /* rows whose ulp.identical_frac must be 1 */
} json_rows_want_t;

/* The number of rows of ROOT that WANT selects; fails the running test at
 * the first selected row that lacks what WANT asks of it. */
int json_rows_count(json_t *root, const json_rows_want_t *want);

/* test_replay_json_py(ARGS, TARGET): its JSON, failing the running test when
 * it printed none; its exit code in *rc, or, with rc NULL, failing the test
 * when that is not 0. */
json_t *json_rows_replay_py(const char *args, const char *target, int *rc);

#endif
