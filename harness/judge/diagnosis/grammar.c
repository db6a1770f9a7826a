/* The hypothesis grammar's tables (grammar.h): the index maps, value maps
 * and structure rows, the (operand, axis) slots of each route, and the
 * enumeration of the primitives a case's shape allows. */
#include "grammar.h"

#include <stdio.h>
#include <string.h>

/* ---- index functions: each returns an index inside [0, len) ---- */

static int64_t keep_inside(int64_t j, int64_t i, int64_t len)
{
    return j >= 0 && j < len ? j : i;
}

/* i + d * unit; the edge keeps its own index. */
static int64_t ix_shift(int64_t i, int64_t len, int d, int unit)
{
    return keep_inside(i + (int64_t)d * unit, i, len);
}

static int64_t ix_first(int64_t i, int64_t len, int a, int b)
{
    (void)i, (void)len, (void)a, (void)b;
    return 0;
}

/* The first index of i's aligned group of 2^j. */
static int64_t ix_group_first(int64_t i, int64_t len, int j, int b)
{
    (void)len, (void)b;
    return i & ~(((int64_t)1 << j) - 1);
}

static int64_t ix_reverse(int64_t i, int64_t len, int a, int b)
{
    (void)a, (void)b;
    return len - 1 - i;
}

/* The base of i's aligned group of g, or -1 when the group is cut by the
 * end of the axis (the partial group is left alone). */
static int64_t full_group(int64_t i, int64_t len, int64_t g)
{
    const int64_t base = i & ~(g - 1);
    return base + g <= len ? base : -1;
}

static int64_t ix_group_reverse(int64_t i, int64_t len, int j, int b)
{
    (void)b;
    const int64_t g = (int64_t)1 << j, base = full_group(i, len, g);
    return base < 0 ? i : base + (g - 1 - (i - base));
}

/* The halves of each aligned group of 2^j swapped. */
static int64_t ix_group_swap(int64_t i, int64_t len, int j, int b)
{
    (void)b;
    const int64_t g = (int64_t)1 << j;
    return full_group(i, len, g) < 0 ? i : i ^ (g >> 1);
}

/* Reads r + d within each aligned group of 2^j. */
static int64_t ix_group_rotate(int64_t i, int64_t len, int j, int d)
{
    const int64_t g = (int64_t)1 << j, base = full_group(i, len, g);
    return base < 0 ? i : base + ((i - base + d + g) % g);
}

/* Each aligned group of 2^j read as a 2^a x 2^(j-a) grid, transposed: the
 * element at (p, q) is read from (q, p) of the 2^(j-a) x 2^a grid. */
static int64_t ix_group_transpose(int64_t i, int64_t len, int j, int a)
{
    const int64_t g = (int64_t)1 << j, base = full_group(i, len, g);
    if (base < 0)
        return i;
    const int64_t cols = (int64_t)1 << (j - a), r = i - base;
    return base + (r % cols) * ((int64_t)1 << a) + r / cols;
}

/* The index within its aligned group of 2^j: a tile-relative index whose
 * tile base was forgotten. */
static int64_t ix_mod(int64_t i, int64_t len, int j, int b)
{
    (void)len, (void)b;
    return i & (((int64_t)1 << j) - 1);
}

static int64_t ix_stride_mul(int64_t i, int64_t len, int j, int b)
{
    (void)b;
    return (i << j) % len;
}

static int64_t ix_stride_div(int64_t i, int64_t len, int j, int b)
{
    (void)len, (void)b;
    return i >> j;
}

static int64_t ix_other_half(int64_t i, int64_t len, int a, int b)
{
    (void)a, (void)b;
    return (i + len / 2) % len;
}

/* The same place in the neighbouring tile of t (i xor t). */
static int64_t ix_neighbour_tile(int64_t i, int64_t len, int t, int b)
{
    (void)b;
    return keep_inside(i ^ t, i, len);
}

/* The partial tile at the end reads the last index of the last full tile. */
static int64_t ix_clamp_tile(int64_t i, int64_t len, int t, int b)
{
    (void)b;
    const int64_t c = len / t * t - 1;
    return c >= 0 && i > c ? c : i;
}

/* ---- 2-D maps ---- */

/* The weight scales' [K/32, N] bytes (what a kernel declaring that layout
 * is handed) read as [N, K/32]: logical (n, b) = byte n * nb + b, which holds
 * row i % N, block i / N. */
static void ix2_kn_as_nk(int64_t *n, int64_t *b, int64_t N, int64_t nb, int a)
{
    (void)a;
    const int64_t i = *n * nb + *b;
    *n = i % N;
    *b = i / N;
}

/* The [N, K/32] bytes read as [K/32, N]. */
static void ix2_nk_as_kn(int64_t *n, int64_t *b, int64_t N, int64_t nb, int a)
{
    (void)a;
    const int64_t i = *b * N + *n;
    *n = i / nb;
    *b = i % nb;
}

/* WPERM on the packed bytes [N, K/2]: view(N/16, 16, K/16, 2, 4) permuted
 * (0, 2, 3, 1, 4).  inverse 0: the kernel indexes a checkpoint-order buffer
 * as fragment order (what unpermute_w gives); 1: the converse (permute_w). */
static void ix2_wperm(int64_t *n, int64_t *k, int64_t N, int64_t K, int inverse)
{
    const int64_t half = K / 2, j = *k / 2, nib = *k & 1;
    int64_t n2, j2;
    if (!inverse) {
        const int64_t p = ((((*n / 16) * (K / 16) + j / 8) * 2 + (j / 4) % 2) * 16 + *n % 16) * 4 + j % 4;
        n2 = p / half;
        j2 = p % half;
    } else {
        int64_t q = *n * half + j;
        const int64_t j3 = q % 4;
        q /= 4;
        const int64_t nn2 = q % 16;
        q /= 16;
        const int64_t jj2 = q % 2;
        q /= 2;
        const int64_t j1 = q % (K / 16), n1 = q / (K / 16);
        n2 = n1 * 16 + nn2;
        j2 = j1 * 8 + jj2 * 4 + j3;
    }
    (void)N;
    *n = n2;
    *k = 2 * j2 + nib;
}

/* An operand read with its row pitch halved (a = 0: row r starts at
 * element r * cols / 2) or doubled (a = 1: at r * cols * 2, wrapping). */
static void ix2_pitch(int64_t *r, int64_t *c, int64_t rows, int64_t cols, int a)
{
    const int64_t i = a ? (*r * 2 * cols + *c) % (rows * cols) : *r * (cols / 2) + *c;
    *r = i / cols;
    *c = i % cols;
}

/* An XOR swizzle within 32-element groups: column c read at
 * c ^ ((r mod 2^bits) << shift), a = bits * 8 + shift (a tile stored one way
 * and read the other). */
static void ix2_swizzle(int64_t *r, int64_t *c, int64_t rows, int64_t cols, int a)
{
    (void)rows;
    const int64_t j = (*c & ~(int64_t)31) | ((*c & 31) ^ ((*r & ((1 << (a / 8)) - 1)) << (a % 8)));
    *c = j < cols ? j : *c;
}

/* Every full t x t output tile written transposed. */
static void ix2_tile_transpose(int64_t *m, int64_t *n, int64_t M, int64_t N, int t)
{
    const int64_t m0 = *m / t * t, n0 = *n / t * t;
    if (m0 + t > M || n0 + t > N)
        return;
    const int64_t dm = *m - m0, dn = *n - n0;
    *m = m0 + dn;
    *n = n0 + dm;
}

/* The per-row x_scale indexed by the output column: (m, n) -> n % M. */
static void ix2_from_column(int64_t *m, int64_t *n, int64_t M, int64_t N, int a)
{
    (void)N, (void)a;
    *m = *n % M;
}

#define AX_MN (G_A(G_AX_M) | G_A(G_AX_N))
#define AX_1D (G_A(G_AX_M) | G_A(G_AX_N) | G_A(G_AX_K) | G_A(G_AX_B))
#define AX_2D G_A(G_AX_2D)
#define GRP(j) ((int64_t)1 << (j))

#define SWAP(j, g) {"swap" g, "the halves of each aligned group of " g " swapped", ix_group_swap, NULL, j, 0, GRP(j), AX_1D, 0, 0}
#define FIRST(j, g) {"first" g, "each aligned group of " g " reads its first index", ix_group_first, NULL, j, 0, GRP(j), AX_1D, 0, 0}
#define REV(j, g) {"rev" g, "reversed within aligned groups of " g, ix_group_reverse, NULL, j, 0, GRP(j), AX_1D, 0, 0}
#define ROT(j, d, g, ds) {"rot" g ds, "rotated within aligned groups of " g " (reads i" ds ")", ix_group_rotate, NULL, j, d, GRP(j), AX_1D, 0, 0}
#define TR(j, a, r, c) {"tr" r "x" c, "each aligned group of " r "x" c " read transposed", ix_group_transpose, NULL, j, a, GRP(j), AX_1D, 0, 0}
#define MAP2(nm, meaning, fn, a, len, op, routes) {nm, meaning, NULL, fn, a, 0, len, AX_2D, G_O(op), routes}
#define SWZ(bits, shift, m, sh) {"swz" m "<<" sh, "swizzled: element k of row r read at k xor ((r & " m ") << " sh ") within 32", NULL, ix2_swizzle, bits * 8 + shift, 0, 2, AX_2D, G_O(G_XC) | G_O(G_WC), 0}

const g_index_row_t g_index_rows[] = {
    {"next", "reads index i+1 (the last keeps its own)", ix_shift, NULL, 1, 1, 2, AX_1D, 0, 0},
    {"prev", "reads index i-1 (the first keeps its own)", ix_shift, NULL, -1, 1, 2, AX_1D, 0, 0},
    {"next32", "reads k+32, the next 32-block (the last keeps its own)", ix_shift, NULL, 1, 32, 64,
     G_A(G_AX_K), 0, 0},
    {"prev32", "reads k-32, the previous 32-block (the first keeps its own)", ix_shift, NULL, -1, 32,
     64, G_A(G_AX_K), 0, 0},
    {"next16", "reads i+16, the next 16-tile (the last keeps its own)", ix_shift, NULL, 1, 16, 32,
     AX_MN, 0, 0},
    {"prev16", "reads i-16, the previous 16-tile (the first keeps its own)", ix_shift, NULL, -1, 16,
     32, AX_MN, 0, 0},
    {"bcast0", "every index reads index 0", ix_first, NULL, 0, 0, 2, AX_1D, 0, 0},
    {"reverse", "read in reverse order", ix_reverse, NULL, 0, 0, 2, AX_1D, 0, 0},
    SWAP(1, "2"), SWAP(2, "4"), SWAP(3, "8"), SWAP(4, "16"), SWAP(5, "32"), SWAP(6, "64"),
    FIRST(1, "2"), FIRST(2, "4"), FIRST(3, "8"), FIRST(4, "16"), FIRST(5, "32"), FIRST(6, "64"),
    REV(2, "4"), REV(3, "8"), REV(4, "16"), REV(5, "32"), REV(6, "64"),
    ROT(2, +1, "4", "+1"), ROT(2, -1, "4", "-1"), ROT(3, +1, "8", "+1"), ROT(3, -1, "8", "-1"),
    ROT(4, +1, "16", "+1"), ROT(4, -1, "16", "-1"), ROT(5, +1, "32", "+1"),
    ROT(5, -1, "32", "-1"), ROT(6, +1, "64", "+1"), ROT(6, -1, "64", "-1"),
    TR(2, 1, "2", "2"), TR(3, 1, "2", "4"), TR(3, 2, "4", "2"), TR(4, 1, "2", "8"),
    TR(4, 2, "4", "4"), TR(4, 3, "8", "2"), TR(5, 1, "2", "16"), TR(5, 2, "4", "8"),
    TR(5, 3, "8", "4"), TR(5, 4, "16", "2"), TR(6, 1, "2", "32"), TR(6, 2, "4", "16"),
    TR(6, 3, "8", "8"), TR(6, 4, "16", "4"), TR(6, 5, "32", "2"),
    {"stride*2", "index times 2 (wrapping)", ix_stride_mul, NULL, 1, 0, 4, AX_1D, 0, 0},
    {"stride*4", "index times 4 (wrapping)", ix_stride_mul, NULL, 2, 0, 8, AX_1D, 0, 0},
    {"stride*8", "index times 8 (wrapping)", ix_stride_mul, NULL, 3, 0, 16, AX_1D, 0, 0},
    {"stride/2", "index divided by 2", ix_stride_div, NULL, 1, 0, 4, AX_1D, 0, 0},
    {"stride/4", "index divided by 4", ix_stride_div, NULL, 2, 0, 8, AX_1D, 0, 0},
    {"stride/8", "index divided by 8", ix_stride_div, NULL, 3, 0, 16, AX_1D, 0, 0},
    {"mod4", "reads i mod 4 (the tile base of a 4-tile forgotten)", ix_mod, NULL, 2, 0, 5, AX_1D, 0, 0},
    {"mod8", "reads i mod 8 (the tile base of an 8-tile forgotten)", ix_mod, NULL, 3, 0, 9, AX_1D, 0, 0},
    {"mod16", "reads i mod 16 (the tile base of a 16-tile forgotten)", ix_mod, NULL, 4, 0, 17, AX_1D, 0, 0},
    {"mod32", "reads i mod 32 (the tile base of a 32-tile forgotten)", ix_mod, NULL, 5, 0, 33, AX_1D, 0, 0},
    {"mod64", "reads i mod 64 (the tile base of a 64-tile forgotten)", ix_mod, NULL, 6, 0, 65, AX_1D, 0, 0},
    {"half", "reads the other half (i + len/2)", ix_other_half, NULL, 0, 0, 2, AX_1D, 0, 0},
    {"nbr16", "reads the neighbouring 16-tile (i xor 16)", ix_neighbour_tile, NULL, 16, 0, 32,
     AX_MN, 0, 0},
    {"nbr64", "reads the neighbouring 64-tile (i xor 64)", ix_neighbour_tile, NULL, 64, 0, 128,
     AX_MN, 0, 0},
    {"nbr32", "reads the neighbouring 32-block (k xor 32)", ix_neighbour_tile, NULL, 32, 0, 64,
     G_A(G_AX_K), 0, 0},
    {"nbr128", "reads the neighbouring 128-tile (k xor 128)", ix_neighbour_tile, NULL, 128, 0, 256,
     G_A(G_AX_K), 0, 0},
    {"clamp16", "the partial 16-tile reads the last full tile's last index", ix_clamp_tile, NULL,
     16, 0, 17, AX_MN, 0, 0},
    {"clamp64", "the partial 64-tile reads the last full tile's last index", ix_clamp_tile, NULL,
     64, 0, 65, AX_MN, 0, 0},
    MAP2("kn-as-nk", "its [K/32, N] bytes read as [N, K/32] (layout transposed)", ix2_kn_as_nk, 0,
         2, G_WS, 0),
    MAP2("nk-as-kn", "its [N, K/32] bytes read as [K/32, N] (layout transposed)", ix2_nk_as_kn, 0,
         2, G_WS, 0),
    MAP2("nk-as-kn", "its [N, K] elements read as a [K, N] buffer transposed (element (n, k) from k N + n)",
         ix2_nk_as_kn, 0, 2, G_WC, G_R(G_ROUTE_BF16)),
    MAP2("mk-as-km", "its [M, K] elements read as a [K, M] buffer transposed (element (m, k) from k M + m)",
         ix2_nk_as_kn, 0, 2, G_XC, G_R(G_ROUTE_BF16)),
    MAP2("wperm-undone", "checkpoint-order bytes indexed as WPERM fragment order", ix2_wperm, 0, 16,
         G_WC, G_R_MX),
    MAP2("wperm-applied", "fragment-order indexing undone on checkpoint-order bytes", ix2_wperm, 1,
         16, G_WC, G_R_MX),
    MAP2("tile-transpose16", "every full 16x16 tile written transposed", ix2_tile_transpose, 16, 16,
         G_OUT, 0),
    MAP2("tile-transpose64", "every full 64x64 tile written transposed", ix2_tile_transpose, 64, 64,
         G_OUT, 0),
    MAP2("by-column", "indexed by the output column (n % M), not the row", ix2_from_column, 0, 1,
         G_XS, G_R(G_ROUTE_W4A8)),
    {"pitch/2", "rows read with half the row pitch (row r from element r * K / 2)", NULL, ix2_pitch, 0,
     0, 2, AX_2D, G_O(G_XC) | G_O(G_WC), 0},
    {"pitch*2", "rows read with twice the row pitch (row r from element 2 r K, wrapping)", NULL,
     ix2_pitch, 1, 0, 2, AX_2D, G_O(G_XC) | G_O(G_WC), 0},
    SWZ(1, 0, "1", "0"), SWZ(1, 1, "1", "1"), SWZ(1, 2, "1", "2"), SWZ(1, 3, "1", "3"), SWZ(1, 4, "1", "4"),
    SWZ(2, 0, "3", "0"), SWZ(2, 1, "3", "1"), SWZ(2, 2, "3", "2"), SWZ(2, 3, "3", "3"),
    SWZ(3, 0, "7", "0"), SWZ(3, 1, "7", "1"), SWZ(3, 2, "7", "2"),
};

const int g_index_row_count = (int)(sizeof g_index_rows / sizeof g_index_rows[0]);

/* ---- value maps ---- */

#define E_CODES (G_E_FP8 | G_E_E2M1 | G_E_BF16)
/* Single-bit faults of a code: each bit stuck at 0, stuck at 1, inverted
 * (value_row_applies keeps the bits a format has, and leaves the sign's
 * stuck-at-0 and inversion to abs and neg). */
#define BIT_ELEMS (G_E_FP8 | G_E_E2M1 | G_E_BF16 | G_E_E8M0)
#define BITS(b) \
    {"bit" #b "-clear", "bit " #b " of each code (of a bf16 word's high byte) stuck at 0", GV_BIT_CLEAR, b, BIT_ELEMS, 0, 0}, \
    {"bit" #b "-set", "bit " #b " of each code (of a bf16 word's high byte) stuck at 1", GV_BIT_SET, b, BIT_ELEMS, 0, 0}, \
    {"bit" #b "-flip", "bit " #b " of each code (of a bf16 word's high byte) inverted", GV_BIT_FLIP, b, BIT_ELEMS, 0, 0}
const g_value_row_t g_value_rows[] = {
    {"e5m2", "fp8 codes decoded as e5m2, not e4m3", GV_DECODE_E5M2, 0, G_E_FP8, 0, 0},
    {"e4m3fnuz", "fp8 codes decoded as e4m3fnuz (bias 8), not e4m3fn", GV_DECODE_E4M3FNUZ, 0,
     G_E_FP8, 0, 0},
    {"e4m3fn", "fp8 codes decoded as e4m3fn, not e4m3fnuz", GV_DECODE_E4M3FN, 0, G_E_FP8, 0, 0},
    {"int8", "fp8 codes read as signed 8-bit integers", GV_DECODE_INT8, 0, G_E_FP8, 0, 0},
    {"int4", "e2m1 codes read as two's complement 4-bit integers", GV_DECODE_INT4, 0, G_E_E2M1, 0, 0},
    {"fp16", "bf16 bits read as fp16", GV_DECODE_FP16, 0, G_E_BF16, 0, 0},
    {"flush", "subnormal values read as 0", GV_FLUSH_SUBNORMAL, 0, G_E_E2M1, 0, 0},
    {"flush", "subnormal values read as 0", GV_FLUSH_SUBNORMAL, 0, G_E_FP8 | G_E_BF16 | G_E_OUT, 1, 0},
    {"abs", "the sign dropped", GV_ABS, 0, E_CODES | G_E_OUT, 0, 0},
    {"neg", "the sign flipped", GV_NEG, 0, E_CODES | G_E_OUT, 0, 0},
    {"round-e5m2", "rounded through e5m2", GV_ROUND, G_FMT_E5M2, G_E_FP8 | G_E_BF16, 0, 0},
    {"round-e4m3", "rounded through e4m3", GV_ROUND, G_FMT_E4M3, G_E_BF16, 0, 0},
    {"round-fp16", "rounded through fp16", GV_ROUND, G_FMT_FP16, G_E_BF16 | G_E_FP32, 1, 0},
    {"round-bf16", "rounded through bf16", GV_ROUND, G_FMT_BF16, G_E_FP32, 1, 0},
    {"inverted", "divided by instead of multiplied by", GV_INVERT, 0, G_E_FP32, 0, 0},
    {"missing", "never applied", GV_ONE, 0, G_E_FP32 | G_E_E8M0, 0, 0},
    {"twice", "applied twice", GV_TWICE, 0, G_E_FP32 | G_E_E8M0, 0, 0},
    {"bias128", "e8m0 decoded with bias 128 (2^(E-128))", GV_EXP_BIAS, 1, G_E_E8M0, 0, 0},
    {"bias126", "e8m0 decoded with bias 126 (2^(E-126))", GV_EXP_BIAS, -1, G_E_E8M0, 0, 0},
    {"zero-byte", "e8m0 byte 0 read as 0, not 2^-127", GV_E8M0_ZERO, 0, G_E_E8M0, 1, 0},
    {"trunc", "rounded toward zero to bf16, not to nearest even", GV_TRUNC_BF16, 0, G_E_OUT, 1, 0},
    {"double-round", "rounded to fp16 first, then to bf16", GV_DOUBLE_ROUND_FP16, 0, G_E_OUT, 1, 0},
    {"fp16-bits", "written as fp16 bits into the bf16 output", GV_ENCODE_FP16, 0, G_E_OUT, 0, 0},
    {"neg-zero", "negative values read as 0", GV_NEG_ZERO, 0, E_CODES, 0, 0},
    {"hi-neg-zero", "at odd K (the high nibble), negative values read as 0", GV_NEG_ZERO, 0, G_E_E2M1, 0, 1},
    {"hi-abs", "at odd K (the high nibble), the sign dropped", GV_ABS, 0, G_E_E2M1, 0, 1},
    {"hi-neg", "at odd K (the high nibble), the sign flipped", GV_NEG, 0, G_E_E2M1, 0, 1},
    {"lo-neg-zero", "at even K (the low nibble), negative values read as 0", GV_NEG_ZERO, 0, G_E_E2M1, 0, 2},
    {"lo-abs", "at even K (the low nibble), the sign dropped", GV_ABS, 0, G_E_E2M1, 0, 2},
    {"lo-neg", "at even K (the low nibble), the sign flipped", GV_NEG, 0, G_E_E2M1, 0, 2},
    {"exp-wrap8", "e8m0 exponent E - 127 taken in unsigned 8 bits (bytes below 127 give +Inf)",
     GV_EXP_WRAP8, 0, G_E_E8M0, 0, 0},
    BITS(0), BITS(1), BITS(2), BITS(3), BITS(4), BITS(5), BITS(6), BITS(7),
    {"lo-byte-zero", "each bf16 word's low byte read as 0 (its high byte only)", GV_BYTES, 0, G_E_BF16, 0, 0},
    {"hi-byte-zero", "each bf16 word's high byte read as 0 (its low byte only)", GV_BYTES, 1, G_E_BF16, 0, 0},
    {"bytes-swapped", "each bf16 word's two bytes swapped", GV_BYTES, 2, G_E_BF16, 0, 0},
};
const int g_value_row_count = (int)(sizeof g_value_rows / sizeof g_value_rows[0]);
/* a plan holds an operand's value maps as a 64-bit mask of rows */
_Static_assert(sizeof g_value_rows / sizeof g_value_rows[0] <= 64, "value rows beyond a 64-bit mask");

/* ---- structure ---- */

#define W8 G_R(G_ROUTE_W4A8)
#define SUM(nm, f, every, xs, what) {nm, "running sum rounded to " what, GS_ROUND_SUM, f, every, xs, 0, 0, 0, 0, xs ? W8 : G_R_ALL, 0, 0, 0, 0}
#define XS_IN ", x_scale applied to each product"
#define SPLIT(nm, f, parts, what) {nm, "split-K in " #parts " parts, each partial stored as " what " before the reduction", GS_SPLIT_STORE, f, 0, 0, parts, 0, 0, 0, G_R_ALL, 0, 0, 0, 0}
#define KW(nm, what, unit, parts, last, weight) {nm, what, GS_K_WEIGHT, G_FMT_BF16, 0, 0, parts, unit, last, weight, G_R_ALL, 0, 0, 0, 0}
#define CARRY(nm, what, along, tile) {nm, what, GS_CARRY, G_FMT_BF16, 0, 0, 0, 0, 0, 0, G_R_ALL, 0, 0, along, tile}
const g_struct_row_t g_struct_rows[] = {
    SUM("bf16-elem", G_FMT_BF16, 1, 0, "bf16 after every element"),
    SUM("bf16-k16", G_FMT_BF16, 16, 0, "bf16 every 16-K block"),
    SUM("bf16-k32", G_FMT_BF16, 32, 0, "bf16 every 32-K block"),
    SUM("bf16-k64", G_FMT_BF16, 64, 0, "bf16 every 64-K block"),
    SUM("bf16-k128", G_FMT_BF16, 128, 0, "bf16 every 128-K block"),
    SUM("bf16-k256", G_FMT_BF16, 256, 0, "bf16 every 256-K tile"),
    SUM("fp16-elem", G_FMT_FP16, 1, 0, "fp16 after every element"),
    SUM("fp16-k16", G_FMT_FP16, 16, 0, "fp16 every 16-K block"),
    SUM("fp16-k32", G_FMT_FP16, 32, 0, "fp16 every 32-K block"),
    SUM("fp16-k64", G_FMT_FP16, 64, 0, "fp16 every 64-K block"),
    SUM("fp16-k128", G_FMT_FP16, 128, 0, "fp16 every 128-K block"),
    SUM("fp16-k256", G_FMT_FP16, 256, 0, "fp16 every 256-K tile"),
    SUM("bf16-elem-xs", G_FMT_BF16, 1, 1, "bf16 after every element" XS_IN),
    SUM("bf16-k32-xs", G_FMT_BF16, 32, 1, "bf16 every 32-K block" XS_IN),
    SUM("bf16-k128-xs", G_FMT_BF16, 128, 1, "bf16 every 128-K block" XS_IN),
    SUM("fp16-elem-xs", G_FMT_FP16, 1, 1, "fp16 after every element" XS_IN),
    SUM("fp16-k32-xs", G_FMT_FP16, 32, 1, "fp16 every 32-K block" XS_IN),
    SUM("fp16-k128-xs", G_FMT_FP16, 128, 1, "fp16 every 128-K block" XS_IN),
    {"prod-bf16", "each product rounded to bf16 before it is added", GS_ROUND_PRODUCT, G_FMT_BF16,
     0, 0, 0, 0, 0, 0, G_R(G_ROUTE_BF16), 0, 0, 0, 0},
    {"prod-fp16", "each product rounded to fp16 before it is added", GS_ROUND_PRODUCT, G_FMT_FP16,
     0, 0, 0, 0, 0, 0, G_R(G_ROUTE_BF16), 0, 0, 0, 0},
    {"prod-bf16-xs", "each product, x_scale applied, rounded to bf16 before it is added",
     GS_ROUND_PRODUCT, G_FMT_BF16, 0, 1, 0, 0, 0, 0, W8, 0, 0, 0, 0},
    SPLIT("bf16-split2", G_FMT_BF16, 2, "bf16"),
    SPLIT("bf16-split4", G_FMT_BF16, 4, "bf16"),
    SPLIT("bf16-split8", G_FMT_BF16, 8, "bf16"),
    SPLIT("fp16-split2", G_FMT_FP16, 2, "fp16"),
    SPLIT("fp16-split4", G_FMT_FP16, 4, "fp16"),
    SPLIT("fp16-split8", G_FMT_FP16, 8, "fp16"),
    KW("k-last-elem-dropped", "the K loop stops one element early", 1, 0, 1, 0),
    KW("k-first-elem-dropped", "the K loop starts one element late", 1, 0, 0, 0),
    KW("k-last-elem-twice", "the last K element counted twice", 1, 0, 1, 2),
    KW("k-first-elem-twice", "the first K element counted twice", 1, 0, 0, 2),
    KW("k-last-block-dropped", "the K loop stops one 32-block early", 32, 0, 1, 0),
    KW("k-first-block-dropped", "the K loop skips the first 32-block", 32, 0, 0, 0),
    KW("k-last-block-twice", "the last 32-block counted twice", 32, 0, 1, 2),
    KW("k-first-block-twice", "the first 32-block counted twice", 32, 0, 0, 2),
    KW("k-last-tile-dropped", "the K loop stops one 128-tile early", 128, 0, 1, 0),
    KW("k-first-tile-dropped", "the K loop skips the first 128-tile", 128, 0, 0, 0),
    KW("k-last-tile-twice", "the last 128-tile counted twice", 128, 0, 1, 2),
    KW("k-first-tile-twice", "the first 128-tile counted twice", 128, 0, 0, 2),
    KW("split2-last-dropped", "split-K in 2: the last part's partial lost", 0, 2, 1, 0),
    KW("split2-first-dropped", "split-K in 2: the first part's partial lost", 0, 2, 0, 0),
    KW("split2-last-twice", "split-K in 2: the last part's partial added twice", 0, 2, 1, 2),
    KW("split2-first-twice", "split-K in 2: the first part's partial added twice", 0, 2, 0, 2),
    KW("split4-last-dropped", "split-K in 4: the last part's partial lost", 0, 4, 1, 0),
    KW("split4-first-dropped", "split-K in 4: the first part's partial lost", 0, 4, 0, 0),
    KW("split4-last-twice", "split-K in 4: the last part's partial added twice", 0, 4, 1, 2),
    KW("split4-first-twice", "split-K in 4: the first part's partial added twice", 0, 4, 0, 2),
    KW("split8-last-dropped", "split-K in 8: the last part's partial lost", 0, 8, 1, 0),
    KW("split8-first-dropped", "split-K in 8: the first part's partial lost", 0, 8, 0, 0),
    KW("split8-last-twice", "split-K in 8: the last part's partial added twice", 0, 8, 1, 2),
    KW("split8-first-twice", "split-K in 8: the first part's partial added twice", 0, 8, 0, 2),
    {"fp16-chunk4", "K in chunks of 4, each summed in fp16 (every addition rounded)", GS_CHUNK, G_FMT_FP16, 4, 0, 0, 0, 0, 0, G_R_ALL, 0, 0, 0, 0},
    {"fp16-chunk8", "K in chunks of 8, each summed in fp16 (every addition rounded)", GS_CHUNK, G_FMT_FP16, 8, 0, 0, 0, 0, 0, G_R_ALL, 0, 0, 0, 0},
    {"fp16-chunk16", "K in chunks of 16, each summed in fp16 (every addition rounded)", GS_CHUNK, G_FMT_FP16, 16, 0, 0, 0, 0, 0, G_R_ALL, 0, 0, 0, 0},
    {"bf16-chunk8", "K in chunks of 8, each summed in bf16 (every addition rounded)", GS_CHUNK, G_FMT_BF16, 8, 0, 0, 0, 0, 0, G_R_ALL, 0, 0, 0, 0},
    {"bf16-chunk16", "K in chunks of 16, each summed in bf16 (every addition rounded)", GS_CHUNK, G_FMT_BF16, 16, 0, 0, 0, 0, 0, G_R_ALL, 0, 0, 0, 0},
    CARRY("carry-n", "the accumulator not reset between output columns (each starts from the previous column's)", 1, 0),
    CARRY("carry-n16", "the accumulator not reset between output columns within each 16-column tile", 1, 16),
    CARRY("carry-n64", "the accumulator not reset between output columns within each 64-column tile", 1, 64),
    CARRY("carry-m", "the accumulator not reset between output rows (each starts from the previous row's)", 2, 0),
    CARRY("carry-m16", "the accumulator not reset between output rows within each 16-row tile", 2, 16),
    {"k-first-quarter-only", "the K loop covers only the first quarter of K", GS_K_WEIGHT, G_FMT_BF16, 0,
     0, 4, 0, 1, 0, G_R_ALL, 3, 0, 0, 0},
    {"k-first-eighth-only", "the K loop covers only the first eighth of K", GS_K_WEIGHT, G_FMT_BF16, 0, 0,
     8, 0, 1, 0, G_R_ALL, 7, 0, 0, 0},
    {"k-odd-dropped", "the odd K elements skipped (a loop stepping by 2)", GS_K_WEIGHT, G_FMT_BF16, 0, 0, 0,
     1, 0, 0, G_R_ALL, 0, 1, 0, 0},
    {"k-even-dropped", "the even K elements skipped (a loop stepping by 2 from 1)", GS_K_WEIGHT,
     G_FMT_BF16, 0, 0, 0, 1, 0, 0, G_R_ALL, 0, 2, 0, 0},
};
const int g_struct_row_count = (int)(sizeof g_struct_rows / sizeof g_struct_rows[0]);

/* ---- slots ---- */

const g_slot_t g_slots[] = {
    {G_XC, G_AX_M, G_R_ALL, "x-rows", "activation rows"},
    {G_XC, G_AX_K, G_R_ALL, "x-k", "activation codes along K"},
    {G_XC, G_AX_2D, G_R_ALL, "x", "the activations"},
    {G_XS, G_AX_M, G_R_MX, "xs-rows", "activation scales, row index"},
    {G_XS, G_AX_B, G_R(G_ROUTE_W4A4), "xs-blocks", "activation block scales along K"},
    {G_XS, G_AX_2D, G_R(G_ROUTE_W4A8), "xs", "x_scale"},
    {G_WC, G_AX_N, G_R_ALL, "w-rows", "weight rows (output columns)"},
    {G_WC, G_AX_K, G_R_ALL, "w-k", "weight codes along K"},
    {G_WC, G_AX_2D, G_R_ALL, "w", "the weight"},
    {G_WS, G_AX_N, G_R_MX, "ws-rows", "weight scales, row index"},
    {G_WS, G_AX_B, G_R_MX, "ws-blocks", "weight scales along K"},
    {G_WS, G_AX_2D, G_R_MX, "ws", "the weight scales"},
    {G_OUT, G_AX_M, G_R_ALL, "out-rows", "output rows"},
    {G_OUT, G_AX_N, G_R_ALL, "out-cols", "output columns"},
    {G_OUT, G_AX_2D, G_R_ALL, "out", "the output"},
};
const int g_slot_count = (int)(sizeof g_slots / sizeof g_slots[0]);

/* Names the diagnosis has given some primitives before the grammar existed
 * (its operand-misread table); kept so a report reads the same. */
typedef struct {
    g_kind_t kind;
    g_operand_t op;
    g_axis_t axis;          /* index maps */
    unsigned routes;
    const char *row;
    const char *alias;
} g_alias_t;

static const g_alias_t aliases[] = {
    {G_KIND_INDEX, G_WC, G_AX_K, G_R_MX, "swap2", "nibble-order"},
    {G_KIND_VALUE, G_WC, 0, G_R_MX, "abs", "e2m1-sign"},
    {G_KIND_INDEX, G_WS, G_AX_B, G_R_MX, "next", "scale-k-next"},
    {G_KIND_INDEX, G_WS, G_AX_B, G_R_MX, "prev", "scale-k-prev"},
    {G_KIND_INDEX, G_WS, G_AX_N, G_R_MX, "next", "scale-n-next"},
    {G_KIND_INDEX, G_WS, G_AX_N, G_R_MX, "prev", "scale-n-prev"},
    {G_KIND_INDEX, G_WS, G_AX_2D, G_R_MX, "kn-as-nk", "scale-kn-read-as-nk"},
    {G_KIND_INDEX, G_WS, G_AX_2D, G_R_MX, "nk-as-kn", "scale-nk-read-as-kn"},
    {G_KIND_VALUE, G_WS, 0, G_R_MX, "twice", "scale-twice"},
    {G_KIND_VALUE, G_WS, 0, G_R_MX, "bias128", "e8m0-bias-128"},
    {G_KIND_VALUE, G_WS, 0, G_R_MX, "bias126", "e8m0-bias-126"},
    {G_KIND_VALUE, G_XC, 0, W8, "e4m3fnuz", "fp8-e4m3fnuz"},
    {G_KIND_VALUE, G_XC, 0, W8, "e5m2", "fp8-e5m2"},
    {G_KIND_VALUE, G_XC, 0, W8, "e4m3fn", "fp8-e4m3fn"},
    {G_KIND_VALUE, G_XS, 0, W8, "inverted", "x_scale-inverted"},
    {G_KIND_INDEX, G_XS, G_AX_2D, W8, "by-column", "x_scale-by-column"},
    {G_KIND_VALUE, G_XS, 0, W8, "missing", "x_scale-missing"},
    {G_KIND_VALUE, G_XS, 0, W8, "twice", "x_scale-twice"},
};

static const char *alias_of(g_kind_t kind, g_operand_t op, g_axis_t axis, g_route_t route,
                            const char *row)
{
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        const g_alias_t *a = &aliases[i];
        if (a->kind == kind && a->op == op && (kind != G_KIND_INDEX || a->axis == axis) &&
            (a->routes & G_R(route)) && !strcmp(a->row, row))
            return a->alias;
    }
    return NULL;
}

/* ---- enumeration ---- */

int64_t g_axis_len(const g_shape_t *s, g_axis_t axis)
{
    switch (axis) {
    case G_AX_M: return s->M;
    case G_AX_N: return s->N;
    case G_AX_K: return s->K;
    case G_AX_B: return s->K / 32;
    case G_AX_2D:
    case G_AXIS_COUNT: break;
    }
    return 0;
}

/* The element format of an operand on a route (G_E_*), 0 when it has none. */
static unsigned elem_of(g_route_t route, g_operand_t op)
{
    static const unsigned e[G_ROUTE_COUNT][G_OPERAND_COUNT] = {
        [G_ROUTE_W4A8] = {G_E_FP8, G_E_FP32, G_E_E2M1, G_E_E8M0, G_E_OUT, 0},
        [G_ROUTE_W4A4] = {G_E_E2M1, G_E_E8M0, G_E_E2M1, G_E_E8M0, G_E_OUT, 0},
        [G_ROUTE_BF16] = {G_E_BF16, 0, G_E_BF16, 0, G_E_OUT, 0},
    };
    return e[route][op];
}

/* Whether index row r maps an axis of length len as row q does (q NULL: as
 * the identity).  Every map of the table is periodic in groups of at most
 * 256 away from the ends, or differs from another map almost everywhere
 * (strides, halves), so the first 2048 indices, the last 256 and an odd
 * stride through the rest decide it. */
static int same_map(const g_index_row_t *r, const g_index_row_t *q, int64_t len)
{
    const int64_t step = len > 8192 ? (len / 4096) | 1 : 1;
    for (int64_t i = 0; i < len; i += (i < 2048 || i >= len - 256) ? 1 : step) {
        const int64_t a = r->fn(i, len, r->a, r->b), b = q ? q->fn(i, len, q->a, q->b) : i;
        if (a != b)
            return 0;
    }
    return 1;
}

static int index_row_applies(const g_shape_t *s, const g_slot_t *slot, const g_index_row_t *r)
{
    if (!(r->axes & G_A(slot->axis)) || (r->operands && !(r->operands & G_O(slot->op))) ||
        (r->routes && !(r->routes & G_R(s->route))))
        return 0;
    if (slot->axis == G_AX_2D) {
        if (r->fn2 == NULL)
            return 0;
        if (slot->op == G_WC && !s->wperm_ok && r->fn2 == ix2_wperm)
            return 0;
        if (slot->op == G_OUT)
            return s->M >= r->a && s->N >= r->a;
        if (slot->op == G_XS)
            return s->M >= 2 && s->N >= 2;
        if (slot->op == G_XC)
            return s->M >= 2 && s->K >= 64;
        return s->N >= 2 && s->K >= 64;
    }
    const int64_t len = g_axis_len(s, slot->axis);
    return len >= 2 && len >= r->min_len && r->fn != NULL && !same_map(r, NULL, len);
}

static int value_row_applies(const g_shape_t *s, g_operand_t op, const g_value_row_t *r)
{
    const unsigned e = elem_of(s->route, op);
    if (!e || !(r->elems & e))
        return 0;
    if (r->kind == GV_DECODE_E4M3FNUZ && s->fp8_fnuz)
        return 0;
    if (r->kind == GV_DECODE_E4M3FN && !s->fp8_fnuz)
        return 0;
    if (r->kind >= GV_BIT_CLEAR && r->kind <= GV_BIT_FLIP) {
        const int width = e == G_E_E2M1 ? 4 : 8;
        if (r->param >= width || (r->param == width - 1 && r->kind != GV_BIT_SET && e != G_E_E8M0))
            return 0;
    }
    return 1;
}

static int struct_row_applies(const g_shape_t *s, const g_struct_row_t *r)
{
    const int64_t nb = s->K / 32;
    if (!(r->routes & G_R(s->route)))
        return 0;
    switch (r->kind) {
    case GS_ROUND_SUM:
        return r->every < s->K;
    case GS_ROUND_PRODUCT:
        return 1;
    case GS_SPLIT_STORE:
        return nb % r->parts == 0 && nb / r->parts >= 1 && r->parts < nb;
    case GS_K_WEIGHT:
        return r->unit ? s->K >= 2 * r->unit : nb % r->parts == 0 && r->parts < nb;
    case GS_CHUNK:
        return r->every < s->K && s->K % r->every == 0;
    case GS_CARRY: {
        const int64_t len = r->carry == 1 ? s->N : s->M;
        return len >= 2 && (r->tile == 0 || r->tile < len);
    }
    }
    return 0;
}

static int push(g_prim_t *out, int count, int cap, g_prim_t p)
{
    if (count < cap)
        out[count] = p;
    return count + 1;
}

int g_enumerate(const g_shape_t *s, g_prim_t *out, int cap)
{
    int count = 0;
    for (int si = 0; si < g_slot_count; si++) {
        const g_slot_t *slot = &g_slots[si];
        if (!(slot->routes & G_R(s->route)))
            continue;
        const int first = count;
        for (int r = 0; r < g_index_row_count; r++) {
            const g_index_row_t *row = &g_index_rows[r];
            if (!index_row_applies(s, slot, row))
                continue;
            /* A map that reads this axis exactly as an earlier one does is the
             * same hypothesis under another name: the first row keeps it. */
            int dup = 0;
            for (int i = first; i < count && i < cap && !dup && slot->axis != G_AX_2D; i++)
                dup = same_map(row, &g_index_rows[out[i].row], g_axis_len(s, slot->axis));
            if (dup)
                continue;
            count = push(out, count, cap,
                         (g_prim_t){G_KIND_INDEX, slot->op, slot->axis, r, si, 0,
                                    alias_of(G_KIND_INDEX, slot->op, slot->axis, s->route, row->name)});
        }
    }
    for (int op = 0; op < G_ACC; op++)
        for (int r = 0; r < g_value_row_count; r++)
            if (value_row_applies(s, (g_operand_t)op, &g_value_rows[r]))
                count = push(out, count, cap,
                             (g_prim_t){G_KIND_VALUE, (g_operand_t)op, G_AX_2D, r, -1,
                                        g_value_rows[r].fine,
                                        alias_of(G_KIND_VALUE, (g_operand_t)op, G_AX_2D, s->route,
                                                 g_value_rows[r].name)});
    for (int r = 0; r < g_struct_row_count; r++)
        if (struct_row_applies(s, &g_struct_rows[r]))
            count = push(out, count, cap,
                         (g_prim_t){G_KIND_STRUCT, G_ACC, G_AX_2D, r, -1,
                                    g_struct_rows[r].kind != GS_K_WEIGHT, NULL});
    return count < cap ? count : cap;
}

/* ---- names ---- */

static const char *const operand_names[G_OPERAND_COUNT] = {"x", "xs", "w", "ws", "out", "acc"};
static const char *const operand_whats[G_OPERAND_COUNT] = {
    "activation codes", "activation scales", "weight codes", "weight scales", "output",
    "accumulation"};

/* "slot:row" (what = 0) or "what it reads: the row's meaning" (what = 1). */
static void describe(const g_prim_t *p, int what, char *buf, int cap)
{
    const char *head = "", *text = "";
    switch (p->kind) {
    case G_KIND_INDEX:
        head = what ? g_slots[p->slot].what : g_slots[p->slot].name;
        text = what ? g_index_rows[p->row].meaning : g_index_rows[p->row].name;
        break;
    case G_KIND_VALUE:
        head = what ? operand_whats[p->op] : operand_names[p->op];
        text = what ? g_value_rows[p->row].meaning : g_value_rows[p->row].name;
        break;
    case G_KIND_STRUCT:
        head = what ? "" : "acc";
        text = what ? g_struct_rows[p->row].meaning : g_struct_rows[p->row].name;
        break;
    }
    snprintf(buf, (size_t)cap, "%s%s%s", head, head[0] ? (what ? ": " : ":") : "", text);
}

void g_prim_name(const g_prim_t *p, char *buf, int cap)
{
    if (p->alias)
        snprintf(buf, (size_t)cap, "%s", p->alias);
    else
        describe(p, 0, buf, cap);
}

void g_prim_meaning(const g_prim_t *p, char *buf, int cap)
{
    describe(p, 1, buf, cap);
}

/* ---- compositions ---- */

int g_ordered(const g_prim_t *a, const g_prim_t *b)
{
    return a->kind == G_KIND_INDEX && b->kind == G_KIND_INDEX && a->slot == b->slot;
}

int g_compatible(const g_prim_t *a, const g_prim_t *b)
{
    if (a->kind != b->kind)
        return 1;
    switch (a->kind) {
    case G_KIND_INDEX:
        /* one 2-D map an operand (they reinterpret the whole layout) */
        return a->slot != b->slot || (a->row != b->row && a->axis != G_AX_2D);
    case G_KIND_VALUE:
        /* Two readings of one operand's values compose, unless both decode
         * or both round (one replaces the other). */
        if (a->op != b->op)
            return 1;
        if (a->row == b->row)
            return 0;
        {
            const g_value_kind_t ka = g_value_rows[a->row].kind, kb = g_value_rows[b->row].kind;
            const int da = ka <= GV_DECODE_FP16, db = kb <= GV_DECODE_FP16;
            return !(da && db) && !(ka == kb);
        }
    case G_KIND_STRUCT: {
        const g_struct_kind_t ka = g_struct_rows[a->row].kind, kb = g_struct_rows[b->row].kind;
        return a->row != b->row && (ka != kb || ka == GS_K_WEIGHT);
    }
    }
    return 0;
}
