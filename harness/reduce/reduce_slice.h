/* A smaller case cut out of a case: some of its activation rows, some of
 * its weight rows (output columns) and some of its 32-blocks along K, in
 * their order.  The result is a whole schema-v1 case of its own (every
 * provenance string carried over, the weight order and scale layout
 * unchanged), owning every array.
 *
 * The operands are cut consistently: x and x_fp8 by rows and K-blocks,
 * x_scale by rows (a per-token scale stays the scale of its row's codes),
 * the weight by weight rows and K-blocks in checkpoint order -- a
 * fragment-order (WPERM) weight is unpermuted, cut and permuted again, so
 * the kept columns must stay a multiple of 16 -- its scales in the case's
 * layout, weight_bf16 alike, and a per-row weight_ref ([N], the folded
 * path's reference exponent) by weight rows (a [2] or [1] route argument is
 * kept).  The recorded outputs (out, out_rerun, aiter, ref_recorded) are
 * what production returned for the whole K: with keep_recorded they are
 * cut by rows and columns (valid only while every K-block is kept), else
 * they are dropped. */
#ifndef KR_REDUCE_SLICE_H
#define KR_REDUCE_SLICE_H

#include <stdint.h>

#include "case.h"
#include "kr_error.h"

typedef struct {
    const int64_t *rows;     /* activation rows kept, ascending; NULL = all */
    int64_t n_rows;
    const int64_t *cols;     /* weight rows (output columns) kept, ascending; NULL = all */
    int64_t n_cols;
    const int64_t *kblocks;  /* 32-blocks along K kept, ascending; NULL = all */
    int64_t n_kblocks;
} reduce_keep_t;

/* *out = the parts of c that keep names (c is not changed).  Returns 0, or
 * -1 with err (out of memory, a fragment-order cut that is not a multiple
 * of 16 columns). */
int reduce_slice(const case_t *c, const reduce_keep_t *keep, int keep_recorded, case_t *out,
                 kr_error_t *err);

/* A whole copy of c that owns every array (reduce_slice keeping everything). */
int reduce_copy(const case_t *c, int keep_recorded, case_t *out, kr_error_t *err);

/* The weight of c in checkpoint order, malloc'd ([N, K/2]); NULL with err. */
uint8_t *reduce_weight_checkpoint(const case_t *c, kr_error_t *err);

/* Stores w ([N, K/2], checkpoint order) as c's weight in c's own order.
 * Returns 0, or -1 with err. */
int reduce_weight_store(case_t *c, const uint8_t *w, kr_error_t *err);

#endif
