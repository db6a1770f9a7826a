/* The hypothesis grammar of the diagnosis: every explanation the engine
 * tries is a composition of at most two primitives, and every primitive is
 * one row of a table in grammar.c.  Nothing else in the engine names a
 * fault: the enumeration (g_enumerate), the re-evaluation (hyp_eval.c), the
 * screen (hyp_screen.c) and the report (hyp_search.c) all read these rows.
 *
 * A primitive transforms one operand of the kernel, or its computation:
 *
 *   operand  G_XC  activation codes [M, K]: fp8 (W4A8), e2m1 (W4A4), bf16 values (bf16)
 *            G_XS  activation scales: fp32 per row [M] (W4A8), e8m0 per 32-block [M, K/32] (W4A4)
 *            G_WC  weight codes [N, K]: e2m1 (W4A8, W4A4), bf16 (bf16)
 *            G_WS  weight block scales, e8m0 [N, K/32]
 *            G_OUT the output [M, N]
 *            G_ACC the computation: products, partial sums, split-K parts, the K loop
 *   index map  (g_index_row_t) on one axis of an operand -- M, N, K, the 32-block
 *            index B -- or on both axes at once (G_AX_2D): which element the
 *            kernel reads (or, on the output, where it writes) instead of the
 *            right one.  Every map returns an index inside the axis: a shift
 *            keeps its own index at the edge, a stride wraps, a clamp clamps.
 *   value map  (g_value_row_t) on the values of one operand: another decoding,
 *            subnormals flushed, the sign dropped or flipped, another exponent
 *            bias, a rounding through a narrower format, a scale inverted,
 *            missing or applied twice.
 *   structure  (g_struct_row_t) of the computation: partial sums held in bf16
 *            or fp16 at a granularity, products rounded, split-K partials
 *            stored in a narrower format, a K range dropped or counted twice,
 *            short K chunks summed in a narrow format, an accumulator carried
 *            from one output to the next (not reset).
 *
 * The primitives of a case are the rows crossed with the (operand, axis)
 * slots of its route (g_slot_t) that its shape allows; a hypothesis is the
 * empty composition (the kernel as specified), one primitive, or two.
 * Adding a hypothesis is adding a row: an existing map function with other
 * parameters, or a new function of a few lines beside the others. */
#ifndef KR_GRAMMAR_H
#define KR_GRAMMAR_H

#include <stdint.h>

typedef enum { G_ROUTE_W4A8 = 0, G_ROUTE_W4A4, G_ROUTE_BF16, G_ROUTE_COUNT } g_route_t;
#define G_R(route) (1u << (route))
#define G_R_ALL (G_R(G_ROUTE_W4A8) | G_R(G_ROUTE_W4A4) | G_R(G_ROUTE_BF16))
#define G_R_MX (G_R(G_ROUTE_W4A8) | G_R(G_ROUTE_W4A4))

typedef enum { G_XC = 0, G_XS, G_WC, G_WS, G_OUT, G_ACC, G_OPERAND_COUNT } g_operand_t;
#define G_O(op) (1u << (op))

typedef enum { G_AX_M = 0, G_AX_N, G_AX_K, G_AX_B, G_AX_2D, G_AXIS_COUNT } g_axis_t;
#define G_A(ax) (1u << (ax))

/* Formats a value can be rounded through. */
typedef enum { G_FMT_BF16 = 0, G_FMT_FP16, G_FMT_E4M3, G_FMT_E5M2 } g_fmt_t;

/* ---- index maps ---- */

/* i in [0, len) -> the index read instead, in [0, len). */
typedef int64_t (*g_index_fn)(int64_t i, int64_t len, int a, int b);
/* (r, c) of a [rows, cols] operand (the output's (m, n) for the activation
 * scales) -> the element read instead. */
typedef void (*g_index2_fn)(int64_t *r, int64_t *c, int64_t rows, int64_t cols, int a);

typedef struct {
    const char *name;       /* "swap-2" */
    const char *meaning;    /* "the halves of each aligned group of 2 swapped" */
    g_index_fn fn;          /* 1-D maps */
    g_index2_fn fn2;        /* 2-D maps (axis G_AX_2D) */
    int a, b;
    int64_t min_len;        /* the axis must be at least this long (a group of 2^j: 2^j) */
    unsigned axes;          /* G_A(axis) of the axes it applies to */
    unsigned operands;      /* G_O(operand) of the operands it applies to; 0 = every one */
    unsigned routes;        /* 0 = every route */
} g_index_row_t;

/* ---- value maps ---- */

typedef enum {
    GV_DECODE_E5M2 = 0,     /* fp8 codes decoded as e5m2 */
    GV_DECODE_E4M3FNUZ,     /* fp8 codes decoded as e4m3fnuz (when they are e4m3fn) */
    GV_DECODE_E4M3FN,       /* fp8 codes decoded as e4m3fn (when they are e4m3fnuz) */
    GV_DECODE_INT8,         /* fp8 codes read as signed 8-bit integers */
    GV_DECODE_INT4,         /* e2m1 codes read as two's complement 4-bit integers */
    GV_DECODE_FP16,         /* bf16 bits read as fp16 */
    GV_FLUSH_SUBNORMAL,     /* subnormal values read as 0 */
    GV_ABS,                 /* the sign dropped */
    GV_NEG,                 /* the sign flipped */
    GV_EXP_BIAS,            /* an exponent with another bias: the value times 2^-param */
    GV_ROUND,               /* rounded (nearest even) through g_fmt_t param */
    GV_TRUNC_BF16,          /* rounded toward zero to bf16 (the output) */
    GV_DOUBLE_ROUND_FP16,   /* rounded to fp16, then to bf16 (the output) */
    GV_ENCODE_FP16,         /* written as fp16 bits into the bf16 output */
    GV_INVERT,              /* divided by instead of multiplied by */
    GV_ONE,                 /* never applied */
    GV_TWICE,               /* applied twice */
    GV_E8M0_ZERO,           /* e8m0 byte 0 read as 0, not 2^-127 */
    GV_NEG_ZERO,            /* negative values read as 0 */
    GV_EXP_WRAP8,           /* e8m0: E - 127 in unsigned 8 bits (E < 127 gives 2^(E+129): +Inf) */
    GV_BIT_CLEAR,           /* bit `param` of the code stuck at 0 (a bf16 word: of its high byte) */
    GV_BIT_SET,             /* ... stuck at 1 */
    GV_BIT_FLIP,            /* ... inverted */
    GV_BYTES,               /* a bf16 word's bytes: param 0 the low byte read as 0, 1 the high
                               byte read as 0, 2 the two swapped */
} g_value_kind_t;

/* The element formats a value map applies to (the operand's on the route). */
enum {
    G_E_FP8 = 1,            /* W4A8 activation codes */
    G_E_E2M1 = 2,           /* MXFP4 codes: weights, W4A4 activations */
    G_E_BF16 = 4,           /* bf16 activations and weights */
    G_E_FP32 = 8,           /* W4A8 per-row activation scales */
    G_E_E8M0 = 16,          /* MXFP4 block scales */
    G_E_OUT = 32,           /* the output */
};

typedef struct {
    const char *name;
    const char *meaning;
    g_value_kind_t kind;
    int param;
    unsigned elems;         /* G_E_* of the element formats it applies to */
    int fine;               /* 1: moves the output by rounding-sized amounts only, so the
                               real-arithmetic screen cannot see it; tried with the
                               bit-faithful re-evaluation only */
    int parity;             /* 0: every element; 1: the elements at odd K only (an e2m1
                               byte's high nibble); 2: at even K only (its low nibble) */
} g_value_row_t;

/* ---- structure of the computation ---- */

typedef enum {
    GS_ROUND_SUM = 0,       /* the running sum rounded to fmt every `every` K (1: each element) */
    GS_ROUND_PRODUCT,       /* each product rounded to fmt before it is added */
    GS_SPLIT_STORE,         /* K in `parts` equal splits, each partial stored in fmt, added in fp32 */
    GS_K_WEIGHT,            /* a K range counted `weight` times (0: dropped, 2: twice) */
    GS_CHUNK,               /* K in aligned chunks of `every`, each summed in fmt (every
                               addition rounded), the chunks added in fp32 where the
                               kernel adds elements */
    GS_CARRY,               /* the fp32 accumulator (before the epilogue) of an output
                               starts from the previous output's along `carry` instead of
                               0; reset at each tile of `tile` (0: never) */
} g_struct_kind_t;

typedef struct {
    const char *name;
    const char *meaning;
    g_struct_kind_t kind;
    g_fmt_t fmt;
    int every;              /* GS_ROUND_SUM: K elements between roundings (1, 16, 32, ...) */
    int xs_inside;          /* W4A8: products scaled by x_scale before they are summed */
    int parts;              /* GS_SPLIT_STORE / GS_K_WEIGHT with unit 0: split-K parts */
    int unit;               /* GS_K_WEIGHT: the range's length, 1 / 32 / 128; 0 = K / parts */
    int last;               /* GS_K_WEIGHT: the last range (1) or the first (0) */
    int weight;             /* GS_K_WEIGHT: 0 or 2 */
    unsigned routes;
    int span;               /* GS_K_WEIGHT with unit 0: the range is this many parts (0: one) */
    int parity;             /* GS_K_WEIGHT: 1 the odd elements, 2 the even ones (unit 1), not a range */
    int carry;              /* GS_CARRY: 1 along N (output columns), 2 along M (rows) */
    int tile;               /* GS_CARRY: the accumulator is reset every `tile` outputs (0: never) */
} g_struct_row_t;

/* ---- the slots and the primitives of a case ---- */

/* An (operand, axis) an index map may act on, on a route. */
typedef struct {
    g_operand_t op;
    g_axis_t axis;
    unsigned routes;
    const char *name;       /* "w-k" */
    const char *what;       /* "weight codes along K" */
} g_slot_t;

typedef enum { G_KIND_INDEX = 0, G_KIND_VALUE, G_KIND_STRUCT } g_kind_t;

/* One primitive: a row of one of the tables, on one slot (index maps) or
 * operand (value maps). */
typedef struct {
    g_kind_t kind;
    g_operand_t op;
    g_axis_t axis;          /* index maps */
    int row;                /* into g_index_rows / g_value_rows / g_struct_rows */
    int slot;               /* index maps: into g_slots */
    int fine;               /* see g_value_row_t.fine; every structure row but K weights is fine */
    const char *alias;      /* a name the diagnosis has used for it ("nibble-order"), or NULL */
} g_prim_t;

/* A composition: n primitives (0 = the kernel as specified), applied in
 * order p[0], p[1] where order matters (two index maps on one slot). */
typedef struct {
    int n;
    int p[2];
} g_hyp_t;

extern const g_index_row_t g_index_rows[];
extern const int g_index_row_count;
extern const g_value_row_t g_value_rows[];
extern const int g_value_row_count;
extern const g_struct_row_t g_struct_rows[];
extern const int g_struct_row_count;
extern const g_slot_t g_slots[];
extern const int g_slot_count;

/* The shape a case gives the enumeration. */
typedef struct {
    g_route_t route;
    int64_t M, N, K;
    int fp8_fnuz;           /* W4A8: the activation codes are e4m3fnuz */
    int wperm_ok;           /* N % 16 == 0 and K % 16 == 0 */
} g_shape_t;

/* The primitives the shape allows, in table order (index maps slot by slot,
 * then value maps, then structure), into out[cap]; returns how many (at most
 * cap). */
int g_enumerate(const g_shape_t *s, g_prim_t *out, int cap);

/* The length of an axis of an operand on a shape (M, N, K, or K/32). */
int64_t g_axis_len(const g_shape_t *s, g_axis_t axis);

/* "w-k:swap-2", or the alias. */
void g_prim_name(const g_prim_t *p, char *buf, int cap);

/* "weight codes along K: the halves of each aligned group of 2 swapped". */
void g_prim_meaning(const g_prim_t *p, char *buf, int cap);

/* Whether the composition (a, b) is worth enumerating: not the same row
 * twice on one slot, at most one structure row of each kind. */
int g_compatible(const g_prim_t *a, const g_prim_t *b);

/* Whether the order of a and b matters (both index maps on one slot). */
int g_ordered(const g_prim_t *a, const g_prim_t *b);

#endif
