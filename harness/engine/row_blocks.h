/* Replaying a large case in blocks of rows (tokens) and folding each
 * block's rows into the rows of the whole case.
 *
 * Every kernel model, quantizer and reference treats the rows of the
 * activations independently, so a case's output rows [m0, m1) come from its
 * input rows [m0, m1) alone.  Replaying a case block by block bounds the
 * memory of the outputs and references (each M x N) by one block, while the
 * weight and the activations stay as the case holds them.
 *
 * One accumulator per (kernel, reference) row of the whole case keeps what
 * the row's final values need: the metrics with their fp64 sums
 * (metrics_merge_rows), the ULP histogram, the output digest continued block
 * after block (so it equals the digest of the whole output), the model time,
 * and the first block's row for everything else (header, threshold,
 * activation origin, notes, diagnosis). */
#ifndef KR_ROW_BLOCKS_H
#define KR_ROW_BLOCKS_H

#include <stdint.h>

#include "metrics.h"
#include "result.h"

/* Counts a row kind may keep per row (summed over blocks). */
#define ROW_BLOCK_COUNTS 12

/* How a row's verdict follows from its metrics (the finishing rule). */
typedef enum {
    ROW_KIND_COMPARED = 0, /* an output against a reference: judge_row */
    ROW_KIND_QUANT,        /* a quantizer's operand against x: judge_row */
    ROW_KIND_VS,           /* --vs: one model's bits against another's */
    ROW_KIND_RERUN,        /* recorded out against out_rerun: bitwise */
    ROW_KIND_NOTE,         /* no metrics (UNSUPPORTED, ERROR, CRASHED ...) */
} row_kind_t;

typedef struct {
    row_kind_t kind;
    result_t first;                /* the row as the first block produced it */
    int64_t first_block_offset;    /* that block's first row */
    int64_t blocks;                /* blocks folded so far */
    metrics_t metrics;
    metrics_sums_t sums;
    ulp_stats_t ulp;
    nonfinite_t input_nf;          /* summed over blocks when input_nf_blockwise */
    int input_nf_blockwise;        /* the row's input counts are of its block's operands */
    uint64_t digest;               /* bf16_digest state over the blocks so far */
    int has_digest;
    double seconds;
    char extra_note[512];          /* what the first block appended after its verdict note */
    int64_t counts[ROW_BLOCK_COUNTS]; /* row-kind specific counts, summed over blocks */
} row_block_acc_t;

typedef struct {
    row_block_acc_t *accs;         /* in the order rows first appeared */
    int64_t count, cap;
    int64_t full_M;                /* rows of the whole case */
    int64_t block_offset;          /* first row of the block being replayed */
    int64_t block_rows;            /* rows of that block */
} row_blocks_t;

/* The accumulator of (kernel, reference), created empty when absent (NULL
 * only when memory runs out). */
row_block_acc_t *row_blocks_find(row_blocks_t *b, const char *kernel, const char *reference);

/* Folds one block's finished row into its accumulator.  sums are the row's
 * metric sums and cols the width of the matrices it compared (N, or K for a
 * quantizer's activations); both ignored for ROW_KIND_NOTE.  out_bits/n_out,
 * when out_bits is not NULL, continue the output digest.  Returns -1 when
 * out of memory. */
int row_blocks_fold(row_blocks_t *b, const result_t *r, row_kind_t kind,
                    const metrics_sums_t *sums, int64_t cols, int input_nf_blockwise,
                    const uint16_t *out_bits, int64_t n_out);

/* Records a note the current block appended to r after its verdict; kept
 * from the first block that produced the row only.  rows_scoped: the note
 * counts things in the block's rows, so it is prefixed with their range. */
void row_blocks_extra_note(row_blocks_t *b, const result_t *r, const char *text, int rows_scoped);

/* Adds n (<= ROW_BLOCK_COUNTS) counts of the current block to r's row. */
void row_blocks_add_counts(row_blocks_t *b, const result_t *r, const int64_t *counts, int n);

void row_blocks_free(row_blocks_t *b);

#endif
