/* Re-evaluation of a grammar hypothesis (grammar.h) from the operands the
 * kernel consumed, bit for bit in the route's canonical order:
 *
 *   W4A8  per output (m, n): s_b = sum over k in 32-block b of a_k * w_k (fp32, k
 *         ascending); acc += s_b * ws_b (fp32, b ascending); out = bf16(acc * xs_m)
 *   W4A4  the same with acc += s_b * (xb_b * ws_b), out = bf16(acc)
 *   bf16  acc = sum over k of a_k * w_k (fp32, k ascending); out = bf16(acc)
 *
 * (w4a8.perblock, the plugin ABI's per-block specification, w4a4.aiter,
 * bf16.sequential), with the hypothesis's primitives applied: the index maps
 * of an operand's axes (two on one slot in the hypothesis's order), then its
 * 2-D map; its value maps in table order (decodings first); the structure
 * row; the output's value maps, then its index maps (the output at (m, n) is
 * what the kernel computed for the mapped position).  A single-bit or byte
 * fault acts on the code before it is decoded.  The definitions of the rows
 * the held-out corpora draw from are written in C and numpy for their
 * kernels (tests/bugs/heldout/gen_plugin.c, grammar_ref.py); the single-bit
 * and byte rows are checked against a hand computation (tests/test_grammar.c). */
#ifndef KR_HYP_EVAL_H
#define KR_HYP_EVAL_H

#include <stdint.h>

#include "formats.h"
#include "grammar.h"
#include "gemm_ref.h"

/* The operands a hypothesis is evaluated on: the kernel's own. */
typedef struct {
    g_shape_t shape;
    int64_t M, N, K, nb;
    const uint8_t *xcodes;      /* W4A8: fp8 codes; W4A4: e2m1 codes, one a byte [M, K] */
    const float *xvals;         /* bf16: the activations' values (bf16) [M, K] */
    const float *xscale;        /* W4A8 [M] */
    const uint8_t *xbscale;     /* W4A4 [M, K/32] */
    int fp8_fnuz;
    const mxfp4_weight_t *w;    /* MXFP4 routes */
    const uint16_t *wbf16;      /* bf16 [N, K] */
    const g_prim_t *prims;      /* the enumeration */
    int n_prims;
    float xlut[256];            /* the activation codes' values as read as specified (g_ops_ready) */
} g_ops_t;

/* The lowest value row set in a mask of rows (loops over a plan's value
 * maps visit only the rows it holds). */
static inline int r_of(uint64_t rows)
{
    return __builtin_ctzll(rows);
}

/* Fills g->xlut once the operands are set. */
void g_ops_ready(g_ops_t *g);

/* A hypothesis made ready to evaluate. */
#define G_PLAN_MAPS 2
typedef struct {
    const g_index_row_t *maps[G_OPERAND_COUNT][G_AXIS_COUNT][G_PLAN_MAPS];
    int n_maps[G_OPERAND_COUNT][G_AXIS_COUNT];
    uint64_t values[G_OPERAND_COUNT];       /* 1 << value row */
    const g_struct_row_t *acc;              /* a rounding or split structure, or NULL */
    const g_struct_row_t *kw[2];            /* K ranges dropped or doubled */
    int n_kw;
    int has_xlut;                           /* xlut holds the activation codes' values under
                                               the plan's value maps (MXFP4/fp8 routes) */
    float xlut[2][256];                     /* [odd K][code] */
} g_plan_t;

void g_plan_make(const g_ops_t *g, const g_hyp_t *h, g_plan_t *p);

/* The index on axis `axis` of operand `op` that index i becomes. */
int64_t g_plan_index(const g_plan_t *p, g_operand_t op, g_axis_t axis, int64_t i, int64_t len);

/* The K index each element of operand op (G_XC or G_WC) reads under the
 * plan's K maps: malloc'd [K], or NULL when there are none (or out of
 * memory: the callers then evaluate the maps element by element). */
int32_t *g_k_index(const g_plan_t *p, g_operand_t op, int64_t K);

/* Row m's activations a[K] as the hypothesis reads them (a may be NULL),
 * and (W4A4) its block scales xb[nb] (NULL: not wanted).  kidx: the K
 * indices (g_k_index), or NULL to evaluate the plan's K maps here. */
void g_x_row(const g_ops_t *g, const g_plan_t *p, int64_t m, const int32_t *kidx, float *a, float *xb);

/* Column n's weights w[K] (may be NULL) and block scales ws[nb] (NULL on
 * bf16, or not wanted); kidx as for g_x_row. */
void g_w_col(const g_ops_t *g, const g_plan_t *p, int64_t n, const int32_t *kidx, float *w, float *ws);

/* W4A8: the x_scale output (m, n) is multiplied by; 1 elsewhere. */
float g_x_scale(const g_ops_t *g, const g_plan_t *p, int64_t m, int64_t n);

/* The weight of each element k (K-range rows): c[K] of 0, 1 or 2. */
void g_k_weights(const g_ops_t *g, const g_plan_t *p, float *c);

/* The value before the output's rounding, from one row's and one column's
 * operands. */
float g_value(const g_ops_t *g, const g_plan_t *p, const float *a, const float *xb,
              const float *w, const float *ws, const float *c, float xs);

/* The output as the kernel stores it (a bf16 value, as fp32), from v. */
float g_store(const g_plan_t *p, float v);

/* (m, n) -> the position whose value the output holds there. */
void g_out_position(const g_ops_t *g, const g_plan_t *p, int64_t *m, int64_t *n);

/* alt[i] = the output at (pm[i], pn[i]) under h, bit for bit.  Returns 0, or
 * -1 when out of memory. */
int g_eval(const g_ops_t *g, const g_hyp_t *h, const int64_t *pm, const int64_t *pn, int64_t count,
           float *alt);

/* x rounded (nearest even) through fmt; bf16 and fp16 overflow to Inf, e4m3
 * saturates at 448, e5m2 overflows to Inf from 61440. */
float g_round(float x, g_fmt_t fmt);

#endif
