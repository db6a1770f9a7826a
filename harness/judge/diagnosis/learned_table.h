/* A decode table learned from the output (learned_table.c): the values the
 * kernel's e2m1 codes and e8m0 scale bytes were read as, fitted by least
 * squares and snapped to the format's grid, stated where they differ from
 * the specification and only when re-evaluating the kernel with them
 * reproduces the output bit for bit.  Tried when no composition of the
 * grammar reproduces the output. */
#ifndef KR_LEARNED_TABLE_H
#define KR_LEARNED_TABLE_H

#include "diag_ctx.h"
#include "hyp_eval.h"

/* 1 when a table was found and checked (the diagnosis is set), 0 when none,
 * -1 when out of memory. */
int g_learned_table(dctx_t *x, const g_ops_t *g);

#endif
