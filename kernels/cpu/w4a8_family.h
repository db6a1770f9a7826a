/* The descriptor fields every W4A8 model states alike (w4a8.folded and its
 * layouts, .partitioned, .perblock, .decode, .r4d): fp8 per-token
 * activations times an MXFP4 weight, K a multiple of 64, judged against the
 * exact and the source references with the family's default thresholds.
 * Written once, so the family's models cannot drift apart on them. */
#ifndef KR_W4A8_FAMILY_H
#define KR_W4A8_FAMILY_H

#include "act_prepare.h"
#include "registry.h"

#define W4A8_FAMILY_FIELDS                                                                    \
    .family = "w4a8", .act = OPERAND_E4M3FN_PER_TOKEN, .weight = OPERAND_MXFP4,               \
    .prepare_act = act_prepare_fp8_token, .op = KERNEL_OP_GEMM, .k_multiple = 64, .m_min = 1, \
    .refs = REF_EXACT | REF_SOURCE, .rel_tol_exact = 0.01, .rel_tol_source = 0.08

#endif
