/* An index map of whole output rows or columns learned from the output
 * itself (learned_map.c), tried when no composition of the grammar
 * reproduces the output: each wrong column (row) is matched, within a
 * bf16 rounding, with the reference column (row) it holds, and the map found
 * is stated only when re-evaluating the kernel as specified at the mapped
 * positions gives the output bit for bit. */
#ifndef KR_LEARNED_MAP_H
#define KR_LEARNED_MAP_H

#include "diag_ctx.h"
#include "hyp_eval.h"

/* 1 when a map was found and checked (the diagnosis is set), 0 when none,
 * -1 when out of memory. */
int g_learned_line_map(dctx_t *x, const g_ops_t *g);

#endif
