/* Operand misreads: the ways a kernel can read its operands wrongly, each
 * one row of a table (misread_table.c), each re-evaluated by
 * harness/judge/diagnosis/misreads.c on a sample of rows and columns as
 *     alt[m][n] = XS(m, n) * sum_b SV(n, b) * sum_{k in b} XA(m, k) * WV(n, k)
 * with every factor read the hypothesis's way.  Adding a hypothesis is one
 * table entry; a new way of reading is one enum value and its case in
 * misreads.c. */
#ifndef KR_MISREAD_H
#define KR_MISREAD_H

typedef enum {
    MR_W_AS_IS = 0,
    MR_W_NIBBLES_SWAPPED,   /* element 2j read from the high nibble, 2j+1 from the low */
    MR_W_SIGN_IGNORED,      /* e2m1 bit 3 ignored: |w| */
} mr_weight_t;

typedef enum {
    MR_S_AS_IS = 0,
    MR_S_K_NEXT,            /* block b takes block b+1's exponent (the last keeps its own) */
    MR_S_K_PREV,            /* block b takes block b-1's (the first keeps its own) */
    MR_S_N_NEXT,            /* row n takes row n+1's (the last keeps its own) */
    MR_S_N_PREV,
    MR_S_KN_AS_NK,          /* the [K/32, N] bytes (what a KN kernel is handed) read as [N, K/32] */
    MR_S_NK_AS_KN,          /* the [N, K/32] bytes read as [K/32, N] */
} mr_scale_index_t;

typedef enum {
    MR_SV_AS_IS = 0,
    MR_SV_TWICE,            /* 2^(E-127) applied twice */
    MR_SV_BIAS_128,         /* 2^(E-128) */
    MR_SV_BIAS_126,         /* 2^(E-126) */
} mr_scale_value_t;

typedef enum {
    MR_X_AS_IS = 0,
    MR_X_E4M3FNUZ,          /* the fp8 codes decoded as e4m3fnuz (bias 8, 0x80 NaN) */
    MR_X_E5M2,              /* decoded as e5m2 */
    MR_X_E4M3FN,            /* decoded as e4m3fn (when the codes are fnuz) */
} mr_act_t;

typedef enum {
    MR_XS_AS_IS = 0,
    MR_XS_INVERTED,         /* divided by x_scale[m] instead of multiplied */
    MR_XS_BY_COLUMN,        /* x_scale[n % M]: indexed by the output column */
    MR_XS_MISSING,          /* never applied */
    MR_XS_TWICE,            /* applied twice */
} mr_xscale_t;

typedef struct {
    const char *name;       /* "nibble-order" */
    const char *meaning;    /* the fault, in the kernel author's words */
    mr_weight_t w;
    mr_scale_index_t si;
    mr_scale_value_t sv;
    mr_act_t xa;
    mr_xscale_t xs;
} misread_t;

/* The table, and its length. */
extern const misread_t misread_table[];
extern const int misread_count;

#endif
