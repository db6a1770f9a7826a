/* A diagnosis's family as a short, stable token: what the diagnosis found,
 * without its wording or numbers.  `kreplay reduce` keeps a failing row's
 * (verdict, family) while it shrinks the case, so the token must not change
 * when the sentence does: it is taken from the structured result of
 * diagnose() (the hypothesis that won).  Two kinds share a hypothesis
 * value, and only there the line decides, by the word diagnose() itself
 * tests: tiles "transposed" (diagnose.c) and "isolated elements" (the rows'
 * hypothesis, localise.c); a structured place kind would replace both.
 *
 *   none            no hypothesis explained the row (or none was asked)
 *   magnitude       out = s x reference (a scale off by 2^k or a constant)
 *   place:rows      a place explains it: rows (one run, parity, a stride, ...)
 *   place:columns   columns
 *   place:tiles     a set of output tiles
 *   place:elements  a few isolated elements (a lost update, a torn store)
 *   tiles_transposed  every full output tile stored transposed (explains
 *                   every element, so not a bare place)
 *   k_blocks        some 32-blocks along K missing, doubled or scaled
 *   wperm           the weight read with WPERM undone or applied
 *   scale_layout    the scales read in the other layout
 *   misread         an entry of the operand misread table
 *   acc_precision   partial sums rounded to bf16 / fp16
 *   grammar         a composition of the hypothesis grammar's primitives
 *   poison          non-finite output rows are the rows with non-finite input
 *   poison_masked   the kernel wrote finite values where its operands give
 *                   non-finite ones
 *   sanitize        the input (or the reference's) was sanitized
 *   quant_variant   another activation quantizer */
#ifndef KR_DIAG_FAMILY_H
#define KR_DIAG_FAMILY_H

#include "diagnose.h"

#define DIAG_FAMILY_MAX 24  /* bytes, the NUL included (result_t.diagnosis_family) */

/* The token of a diagnosis (a static string): "none" unless r matched. */
const char *diag_family(const diag_result_t *r);

#endif
