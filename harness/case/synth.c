#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_io.h"
#include "formats.h"
#include "quant_fp8.h"
#include "quant_mxfp4.h"

/* splitmix64: small, seedable, and identical on every platform. */
typedef struct {
    uint64_t s;
} synth_rng_t;

static uint64_t rng_u64(synth_rng_t *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_uniform(synth_rng_t *r)
{
    return ((double)(rng_u64(r) >> 11) + 0.5) * 0x1.0p-53;
}

static double rng_normal(synth_rng_t *r)
{
    return sqrt(-2.0 * log(rng_uniform(r))) * cos(6.283185307179586 * rng_uniform(r));
}

/* Student-t with 4 degrees of freedom: the heavy tails of real activations. */
static double rng_student_t4(synth_rng_t *r)
{
    double chi2 = 0;
    for (int i = 0; i < 4; i++) {
        double g = rng_normal(r);
        chi2 += g * g;
    }
    return rng_normal(r) / sqrt(chi2 / 4.0);
}

/* Every other field zero: no name, no provenance, the mxfp4 weight only. */
static const synth_params_t SYNTH_DEFAULTS = {
    .seed = 1,
    .outlier_channels = 4,
    .outlier_gain = 100.0,
    .token_spread = 1.5,
    .weight_exp_spread = 3.0,
    .scale_layout = SCALE_LAYOUT_NK,
    .weight_order = WEIGHT_ORDER_CHECKPOINT,
};

void synth_params_default(synth_params_t *p)
{
    *p = SYNTH_DEFAULTS;
}

static char *dup_string(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static void synth_activations(const synth_params_t *p, synth_rng_t *rng, float *x)
{
    const int64_t M = p->M, K = p->K;
    double *channel_gain = malloc((size_t)K * sizeof(double));
    for (int64_t k = 0; k < K; k++)
        channel_gain[k] = exp(0.3 * rng_normal(rng));
    for (int i = 0; i < p->outlier_channels && K > 0; i++)
        channel_gain[rng_u64(rng) % (uint64_t)K] *= p->outlier_gain;
    for (int64_t m = 0; m < M; m++) {
        double token_scale = exp2(p->token_spread * rng_normal(rng));
        for (int64_t k = 0; k < K; k++) {
            double v = rng_student_t4(rng) * channel_gain[k] * token_scale * 0.05;
            /* Activations arrive in bf16: store exactly representable values. */
            x[m * K + k] = bf16_decode(bf16_encode((float)v));
        }
    }
    free(channel_gain);
    for (int64_t m = M - p->zero_rows; m < M; m++)
        if (m >= 0)
            memset(x + m * K, 0, (size_t)K * sizeof(float));
    for (int64_t m = 0; m < p->nan_rows && m < M; m++)
        for (int64_t k = p->nan_col0; k < p->nan_col0 + p->nan_cols && k < K; k++)
            x[m * K + k] = NAN;
}

const char *synth_weight_format_name(synth_weight_format_t f)
{
    switch (f) {
    case SYNTH_WEIGHT_MXFP4: return "mxfp4";
    case SYNTH_WEIGHT_BF16: return "bf16";
    case SYNTH_WEIGHT_BOTH: return "both";
    }
    return "?";
}

int synth_weight_format_from_name(const char *s, synth_weight_format_t *out)
{
    static const synth_weight_format_t all[] = {SYNTH_WEIGHT_MXFP4, SYNTH_WEIGHT_BF16,
                                                SYNTH_WEIGHT_BOTH};
    for (size_t i = 0; s && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(s, synth_weight_format_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return -1;
}

/* Gaussian weights with per-block gains spread over binades, quantized the
 * way a checkpoint is (OCP MX rule) into packed/scales_nk, and/or rounded to
 * bf16 (RNE) into bf16 [N, K].  Either output may be NULL; the random draws
 * are the same whichever is asked for. */
static int synth_weights(const synth_params_t *p, synth_rng_t *rng, uint8_t *packed,
                         uint8_t *scales_nk, uint16_t *bf16)
{
    const int64_t N = p->N, K = p->K;
    float *row = malloc((size_t)K * sizeof(float));
    uint8_t *codes = malloc((size_t)K);
    if (!row || !codes) {
        free(row);
        free(codes);
        return -1;
    }
    for (int64_t n = 0; n < N; n++) {
        double row_gain = 0.02 * exp2(0.5 * rng_normal(rng));
        for (int64_t b = 0; b < K / 32; b++) {
            /* Exponential spread: most blocks near the row's scale, a tail far below. */
            double binades = -p->weight_exp_spread * log(rng_uniform(rng));
            double gain = row_gain * exp2(-binades);
            for (int64_t k = b * 32; k < b * 32 + 32; k++)
                row[k] = (float)(rng_normal(rng) * gain);
        }
        if (packed) {
            mxfp4_quant(row, 1, K, MXFP4_OCP, codes, scales_nk + n * (K / 32));
            mxfp4_pack(codes, 1, K, packed + n * (K / 2));
        }
        if (bf16)
            for (int64_t k = 0; k < K; k++)
                bf16[n * K + k] = bf16_encode(row[k]);
    }
    free(row);
    free(codes);
    return 0;
}

int synth_case(const synth_params_t *p, case_t *c, kr_error_t *err)
{
    memset(c, 0, sizeof *c);
    const int64_t M = p->M, N = p->N, K = p->K;
    if (M <= 0 || N <= 0 || K <= 0 || K % 64 != 0)
        return kr_fail(err, "synth: need M, N, K > 0 and K a multiple of 64 (got %lldx%lld, M=%lld)",
                       (long long)N, (long long)K, (long long)M);
    if (M * K > (1ll << 32) || N * K > (1ll << 36))
        return kr_fail(err, "synth: %lldx%lld at M=%lld is too large", (long long)N,
                       (long long)K, (long long)M);
    if (p->weight_format != SYNTH_WEIGHT_MXFP4 && p->weight_format != SYNTH_WEIGHT_BF16 &&
        p->weight_format != SYNTH_WEIGHT_BOTH)
        return kr_fail(err, "synth: weight format %d is unknown; expected mxfp4, bf16 or both",
                       (int)p->weight_format);
    const int want_mxfp4 = p->weight_format != SYNTH_WEIGHT_BF16;
    const int want_bf16 = p->weight_format != SYNTH_WEIGHT_MXFP4;
    if (p->weight_order == WEIGHT_ORDER_FRAGMENT && !want_mxfp4)
        return kr_fail(err, "synth: fragment order is a layout of the MXFP4 weight; weight format "
                            "bf16 has none (use mxfp4 or both)");
    if (p->weight_order == WEIGHT_ORDER_FRAGMENT && (N % 16 || K % 16))
        return kr_fail(err, "synth: fragment order needs N and K divisible by 16");
    c->M = M;
    c->N = N;
    c->K = K;
    int oom = 0;
    uint8_t *scales_nk = NULL;
    c->x = malloc((size_t)(M * K) * sizeof(float));
    oom |= !c->x;
    if (want_mxfp4) {
        /* The W4A8 path's operands; a bf16-only layer has no fp8 activations
         * and no MXFP4 route argument. */
        c->x_fp8 = malloc((size_t)(M * K));
        c->x_scale = malloc((size_t)M * sizeof(float));
        c->weight = malloc((size_t)(N * K / 2));
        c->weight_scale = malloc((size_t)(N * K / 32));
        c->weight_ref = malloc((size_t)N);
        scales_nk = malloc((size_t)(N * K / 32));
        oom |= !c->x_fp8 || !c->x_scale || !c->weight || !c->weight_scale || !c->weight_ref ||
               !scales_nk;
    }
    if (want_bf16) {
        c->weight_bf16 = malloc((size_t)(N * K) * sizeof(uint16_t));
        oom |= !c->weight_bf16;
    }
    if (oom) {
        free(scales_nk);
        case_free(c);
        return kr_fail(err, "synth: out of memory");
    }
    synth_rng_t rng = {p->seed * 0x2545F4914F6CDD1Dull + 0x1234567ull};
    synth_activations(p, &rng, c->x);
    c->x_storage = X_STORED_BF16;
    if (want_mxfp4) {
        /* What the production W4A8 path hands the kernel: vLLM's per-token quant. */
        fp8_token_quant(c->x, M, K, FP8_TOKEN_VLLM, FP8_E4M3FN, c->x_fp8, c->x_scale);
        c->x_fp8_format = FP8_E4M3FN;
    }

    uint8_t *checkpoint = c->weight;
    if (want_mxfp4 && p->weight_order == WEIGHT_ORDER_FRAGMENT) {
        checkpoint = malloc((size_t)(N * K / 2));
        if (!checkpoint) {
            free(scales_nk);
            case_free(c);
            return kr_fail(err, "synth: out of memory");
        }
    }
    if (synth_weights(p, &rng, checkpoint, scales_nk, c->weight_bf16)) {
        if (checkpoint != c->weight)
            free(checkpoint);
        free(scales_nk);
        case_free(c);
        return kr_fail(err, "synth: out of memory");
    }
    if (want_mxfp4) {
        if (p->weight_order == WEIGHT_ORDER_FRAGMENT) {
            wperm_permute(checkpoint, N, K, c->weight);
            free(checkpoint);
        }
        c->weight_order = p->weight_order;
        if (p->scale_layout == SCALE_LAYOUT_NK)
            memcpy(c->weight_scale, scales_nk, (size_t)(N * K / 32));
        else
            mxfp4_scales_transpose(scales_nk, SCALE_LAYOUT_NK, N, K, c->weight_scale);
        c->scale_layout = p->scale_layout;
        /* The folded path's per-row reference exponent (make_row_ref). */
        for (int64_t n = 0; n < N; n++) {
            uint8_t mx = 0;
            for (int64_t b = 0; b < K / 32; b++)
                if (scales_nk[n * (K / 32) + b] > mx)
                    mx = scales_nk[n * (K / 32) + b];
            c->weight_ref[n] = mx;
        }
        c->weight_ref_len = N;
        free(scales_nk);
    }

    char env[256];
    snprintf(env, sizeof env, "KREPLAY_SYNTH_SEED=%llu", (unsigned long long)p->seed);
    if (p->weight_format != SYNTH_WEIGHT_MXFP4)   /* the default adds nothing: same bytes as before */
        snprintf(env + strlen(env), sizeof env - strlen(env), "\nKREPLAY_SYNTH_WEIGHT_FORMAT=%s",
                 synth_weight_format_name(p->weight_format));
    c->kernel_path = dup_string("synthetic");
    c->layer = dup_string(p->layer ? p->layer : "synthetic");
    c->model = dup_string(p->model ? p->model : "synthetic");
    c->capture_time = dup_string("1970-01-01T00:00:00Z"); /* fixed: files must be reproducible */
    c->env_flags = dup_string(env);
    return 0;
}
