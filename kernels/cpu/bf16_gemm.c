/* bf16.skinny and bf16.sequential: unquantized bf16 projections,
 * C[M, N] = x[M, K] @ W[N, K]^T with W the case's weight_bf16.
 *
 * bf16.skinny models the skinny dispatch's R4D kernel gemm_bf16_nt_m64 (and
 * its stand-in pq_skinny_bf16, "same contract"): split-K with SK splits per
 * (N, K) from the dispatch's measured tables,
 *   _CFG        (always on):                  (256, 2048) -> SK 16   (MoE gate)
 *   _CFG_TAXED  (RADIANCE_SKINNY_GEMM=all):   (48, 5120), (96, 5120),
 *                                             (1280, 5120), (256, 5120) -> SK 8
 * Any other (N, K) is declined by the dispatch ("a split-K config carried
 * over to a shape it was not measured on is a guess"), so the model refuses
 * it ("no measured split-K config for NxK") unless opt->decode_splits > 0
 * names SK (the option w4a8.decode also reads; here it means "run this
 * unmeasured shape, or this measured one, with SK splits").  An override
 * needs K % (16 * SK) == 0: the kernel steps K 16 at a time (one WMMA).
 *
 * Accumulation order, per output (m, n), IEEE fp32, no FMA:
 *   K is cut into SK equal contiguous ranges of S = K / SK;
 *   partial[s] = 0; for k in [s*S, (s+1)*S) ascending: partial[s] += x[m][k] * w[n][k]
 *   acc = partial[0]; for s = 1 .. SK-1: acc += partial[s]     (split order)
 *   out[m][n] = bf16_rne(acc)
 * bf16.sequential (rocBLAS / torch's bf16 GEMM as the harness models it,
 * the path the skinny kernel replaces):
 *   acc = 0; for k = 0 .. K-1 ascending: acc += x[m][k] * w[n][k];  out = bf16_rne(acc)
 *
 * Operands: x is the case's x rounded to bf16 (exact when x was stored as
 * bf16; a float32 x is rounded with bf16_encode, since production hands the
 * kernel bf16 activations).  bf16 x bf16 products have at most 16
 * significant bits, so they are exact in fp32 and an FMA would give the same
 * bits: the order of the additions is the whole contract.
 *
 * Assumed, not known (docs/NUMERICS.md, assumption 5): inside one split the GPU
 * kernel feeds 16 k at a time to a 16x16x16 WMMA whose internal order and
 * width are undocumented; the model sums a split's products one by one in
 * fp32.  The last-arriving block's reduction of the partials is modelled in
 * split order.  rocBLAS's real order is not known either: bf16.sequential is
 * the plain sequential dot, not a measured rocBLAS schedule.  pq_skinny_bf16
 * sizes its scratch for K/256 partials per output; if it really splits K/256
 * ways (20 at K=5120), --decode-splits K/256 models it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_prepare.h"
#include "byte_tile.h"    /* the vector transpose of the weight fill */
#include "formats.h"
#include "registry.h"
#include "tile_gemm.h"
#include "weight_tile.h"    /* TILE_N */

enum { BF16_SEQUENTIAL = 0, BF16_SKINNY = 1 };     /* kernel_desc_t.config */

#ifdef BYTE_TILE_VECTOR
typedef uint32_t bf_u32x8 __attribute__((vector_size(32)));

/* After transpose_8x8, v[i] is column bitrev3[i] of the input rows. */
static const uint8_t bitrev3[8] = {0, 4, 2, 6, 1, 5, 3, 7};

/* Transposes an 8x8 matrix of uint16 (v[r] = row r, 16 bytes) by three
 * interleave rounds: byte_tile's last three, over 8 rows. */
static inline void transpose_8x8(bt_u8x16 v[8])
{
    bt_u8x16 x[8];
    byte_tile_zip(v, x, 4, 2);
    byte_tile_zip(x, v, 4, 4);
    byte_tile_zip(v, x, 4, 8);
    memcpy(v, x, sizeof x);
}
#endif

/* The skinny dispatch's measured split-K per (N, K). */
static const struct {
    int64_t n, k;
    int sk;
    const char *table;
} skinny_cfg[] = {
    {256, 2048, 16, "_CFG"},
    {48, 5120, 8, "_CFG_TAXED"},
    {96, 5120, 8, "_CFG_TAXED"},
    {1280, 5120, 8, "_CFG_TAXED"},
    {256, 5120, 8, "_CFG_TAXED"},
};

/* SK for this shape: the override, else the table.  Returns SK > 0, or 0
 * with err filled; *source says where SK came from. */
static int skinny_splits(int64_t N, int64_t K, const kernel_options_t *opt, const char **source,
                         kr_error_t *err)
{
    if (opt && opt->decode_splits > 0) {
        const int sk = opt->decode_splits;
        if (K % (16 * (int64_t)sk) != 0) {
            kr_fail(err, "split-K %d (decode_splits) does not cut K=%lld into equal multiples of "
                         "16", sk, (long long)K);
            return 0;
        }
        *source = "decode_splits override";
        return sk;
    }
    for (size_t i = 0; i < sizeof skinny_cfg / sizeof skinny_cfg[0]; i++)
        if (skinny_cfg[i].n == N && skinny_cfg[i].k == K) {
            *source = skinny_cfg[i].table;
            return skinny_cfg[i].sk;
        }
    kr_fail(err, "no measured split-K config for %lldx%lld (the skinny dispatch declines it; "
                 "decode_splits > 0 runs it anyway)", (long long)N, (long long)K);
    return 0;
}

/* kernel_desc_t.split_k: the dispatch's SK for the skinny kernel, one split
 * for the sequential dot (the GPU twin runs both on the split-K kernel). */
static int bf16_split_k(const kernel_desc_t *k, int64_t M, int64_t N, int64_t K,
                        const kernel_options_t *opt, kr_error_t *err)
{
    (void)M;
    const char *source = NULL;
    return k->config == BF16_SKINNY ? skinny_splits(N, K, opt, &source, err) : 1;
}

/* The activations a bf16 kernel consumes: x rounded to bf16, held in
 * `dequant` (no codes, no scales).  Shared in spirit with ref_linear.c. */
static int bf16_prepare_act(const kernel_desc_t *k, const kernel_inputs_t *in,
                            const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err)
{
    memset(act, 0, sizeof *act);
    if (!in->weight_bf16)
        return kr_fail(err, "the case has no bf16 weight (weight_bf16); %s runs unquantized "
                            "layers only", k->name);
    if (!in->x)
        return kr_fail(err, "the case has no source activations x; %s consumes x as bf16 "
                            "(x_fp8 cannot stand in)", k->name);
    if (k->config == BF16_SKINNY) {
        const char *source = NULL;
        if (skinny_splits(in->N, in->K, opt, &source, err) == 0)
            return -1;
    }
    return act_prepare_bf16_values(in, act, err);
}

/* tile_gemm's fill: columns [n0, n0 + TILE_N) of the bf16 weight for k in
 * [k0, k1), k-major, as fp32 (bf16_decode: the bits shifted up).  Rows
 * past N are 0 (+0.0). */
static void bf16_fill(const tile_gemm_t *g, int64_t n0, int64_t width, int64_t k0, int64_t k1,
                      float *value, float *block_scale)
{
    (void)block_scale;
    const uint16_t *wb = g->fill_ctx;
    const int64_t K = g->K;
    /* Columns written: a half-width tile's other half is never read. */
    const int64_t filled = width <= TILE_N / 2 ? TILE_N / 2 : TILE_N;
    int64_t k_done = k0;
#ifdef BYTE_TILE_VECTOR
    /* 8 rows x 8 k at a time: transpose in registers, widen, shift, store
     * 8 columns of one k row. */
    static const uint16_t zero_row[8];
    k_done = k0 + (k1 - k0) / 8 * 8;
    for (int64_t grp = 0; grp < filled / 8; grp++) {
        const uint16_t *row[8];
        for (int r = 0; r < 8; r++) {
            const int64_t j = 8 * grp + r;
            row[r] = j < width ? wb + (n0 + j) * K : NULL;
        }
        for (int64_t c = k0; c < k_done; c += 8) {
            bt_u8x16 v[8];
            for (int r = 0; r < 8; r++) {
                if (row[r] && (c & 31) == 0 && c + 512 < K)
                    __builtin_prefetch(row[r] + c + 512);
                memcpy(&v[r], row[r] ? row[r] + c : zero_row, sizeof v[r]);
            }
            transpose_8x8(v);
            for (int i = 0; i < 8; i++) {
                /* v[i]: element c + bitrev3[i] of each row */
                const bf_u32x8 u = __builtin_convertvector((bt_u16x8)v[i], bf_u32x8) << 16;
                memcpy(value + (c + bitrev3[i] - k0) * TILE_N + 8 * grp, &u, sizeof u);
            }
        }
    }
#endif
    for (int64_t k = k_done; k < k1; k++)
        for (int64_t j = 0; j < filled; j++)
            value[(k - k0) * TILE_N + j] = j < width ? bf16_decode(wb[(n0 + j) * K + k]) : 0.0f;
}

static int bf16_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                    const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                    kr_error_t *err)
{
    if (!in->weight_bf16 || !act->dequant)
        return kr_fail(err, "%s: no bf16 weight or activations", k->name);
    int64_t splits = 1;
    if (k->config == BF16_SKINNY) {
        const char *source = NULL;
        splits = skinny_splits(in->N, in->K, opt, &source, err);
        if (splits == 0)
            return -1;
        if (info)
            snprintf(info->note, sizeof info->note, "split-K %lld (%s)", (long long)splits,
                     source);
    }
    const tile_gemm_t g = {.M = in->M, .N = in->N, .K = in->K, .x = act->dequant,
                           .order = TILE_SUM_SPLITS, .splits = splits, .fill = bf16_fill,
                           .fill_ctx = in->weight_bf16, .out = out};
    tile_gemm_run(&g, opt ? opt->threads : 0);
    return 0;
}

/* Both are one model on the split-K GPU kernel, judged against R_source. */
#define BF16_FIELDS                                                                           \
    .family = "bf16", KERNEL_BF16_ACT, .weight_format = "bf16 [N,K] (weight_bf16)",           \
    .weight_kind = WEIGHT_KIND_BF16, .weight = OPERAND_BF16, .op = KERNEL_OP_GEMM,            \
    .refs = REF_SOURCE, .rel_tol_exact = 0.0, .rel_tol_source = 0.01,                         \
    .gpu_entry = KERNEL_GPU_BF16_SPLITK,                                                      \
    .split_k = bf16_split_k, .prepare_act = bf16_prepare_act, .run_cpu = bf16_run

const kernel_desc_t kernel_bf16_skinny = {
    .name = "bf16.skinny",
    BF16_FIELDS,
    .summary = "R4D gemm_bf16_nt_m64 / pq_skinny_bf16: split-K skinny bf16 GEMM, SK from the "
               "skinny dispatch's measured (N, K) tables",
    .accumulation = "SK equal contiguous K ranges (SK 16 for 256x2048 from _CFG; 8 for 48x5120, "
                    "96x5120, 1280x5120, 256x5120 from _CFG_TAXED; else decode_splits): "
                    "partial[s] += x*w over k ascending in range s (exact products, fp32 adds); "
                    "acc = partial[0] + partial[1] + ... in split order; out = bf16(acc)",
    .k_multiple = 256,
    .m_min = 6,
    .m_max = 64,
    .config = BF16_SKINNY,
};

const kernel_desc_t kernel_bf16_sequential = {
    .name = "bf16.sequential",
    BF16_FIELDS,
    .summary = "bf16 GEMM as rocBLAS/torch is modelled: one sequential fp32 dot per output",
    .accumulation = "acc += x*w over k = 0..K-1 ascending (exact products, fp32 adds); "
                    "out = bf16(acc)",
    KERNEL_ANY_M_K32,
    .config = BF16_SEQUENTIAL,
    .compare_role = COMPARE_ROLE_BF16_LAYER,
};
