/* The generated W4A8 bugs of the held-out corpus: one plugin per bug, built
 * with -DBUG_SPEC="slot:row,slot:row" (generated_plugins.cmake), computing
 * the W4A8 per-block kernel with the spec's grammar primitives applied.
 * Written against kernels/plugin.h and plugin_util.h alone, from the
 * grammar's definitions (harness/judge/diagnosis/grammar.h), not from its
 * code: an index map on an operand's axis (two on one axis in spec order,
 * then a 2-D map), value maps in table order, one structure row, then the
 * output's value and index maps.  grammar_ref.py is the same in numpy.  The
 * second round's rows (mod maps, the e2m1 and fp8 sign maps, exp-wrap8, the
 * carry and narrow-chunk structures) included: ../heldout2/ builds its C bugs
 * from this file too.
 *
 * The kernel without primitives, per output (m, n), IEEE fp32, no FMA:
 *     acc = 0; for each 32-block b: s = sum over k in b of x[m][k] * w[n][k];
 *     acc += s * 2^(E[n][b] - 127);   out[m][n] = bf16_rne(acc * x_scale[m]) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_util.h"

#ifndef BUG_SPEC
#error "build with -DBUG_SPEC=\"slot:row,...\" -DBUG_NAME=\"id\""
#endif

#define MAX_PRIMS 4

typedef struct {
    char slot[16];
    char row[32];
} prim_t;

static prim_t prims[MAX_PRIMS];
static int n_prims = -1;

static void parse_spec(void)
{
    if (n_prims >= 0)
        return;
    n_prims = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", BUG_SPEC);
    for (char *tok = strtok(buf, ","); tok && n_prims < MAX_PRIMS; tok = strtok(NULL, ",")) {
        char *colon = strchr(tok, ':');
        if (!colon)
            continue;
        *colon = '\0';
        snprintf(prims[n_prims].slot, sizeof prims[n_prims].slot, "%s", tok);
        snprintf(prims[n_prims].row, sizeof prims[n_prims].row, "%s", colon + 1);
        n_prims++;
    }
}

static int has(const char *slot, const char *row)
{
    for (int i = 0; i < n_prims; i++)
        if (!strcmp(prims[i].slot, slot) && !strcmp(prims[i].row, row))
            return 1;
    return 0;
}

/* The structure row of the spec whose name holds `part` ("carry-", "-chunk"). */
static const char *acc_row_with(const char *part)
{
    for (int i = 0; i < n_prims; i++)
        if (!strcmp(prims[i].slot, "acc") && strstr(prims[i].row, part))
            return prims[i].row;
    return NULL;
}

/* The rounding structure row (sum, product, split), if any. */
static const char *struct_row(void)
{
    for (int i = 0; i < n_prims; i++)
        if (!strcmp(prims[i].slot, "acc") && strncmp(prims[i].row, "k-", 2) &&
            !strstr(prims[i].row, "-dropped") && !strstr(prims[i].row, "-twice") &&
            !strstr(prims[i].row, "carry-") && !strstr(prims[i].row, "-chunk"))
            return prims[i].row;
    return NULL;
}

/* ---- index maps, from their definitions ---- */

static int64_t keep(int64_t j, int64_t i, int64_t L)
{
    return j >= 0 && j < L ? j : i;
}

static int log2i(int64_t g)
{
    int j = 0;
    while (((int64_t)1 << j) < g)
        j++;
    return j;
}

static int64_t map1(const char *r, int64_t i, int64_t L)
{
    int a = 0, b = 0;
    char sign = 0;
    if (!strcmp(r, "next")) return keep(i + 1, i, L);
    if (!strcmp(r, "prev")) return keep(i - 1, i, L);
    if (!strcmp(r, "next32")) return keep(i + 32, i, L);
    if (!strcmp(r, "prev32")) return keep(i - 32, i, L);
    if (!strcmp(r, "next16")) return keep(i + 16, i, L);
    if (!strcmp(r, "prev16")) return keep(i - 16, i, L);
    if (!strcmp(r, "bcast0")) return 0;
    if (!strcmp(r, "reverse")) return L - 1 - i;
    if (!strcmp(r, "half")) return (i + L / 2) % L;
    if (sscanf(r, "stride*%d", &a) == 1) return (i * a) % L;
    if (sscanf(r, "stride/%d", &a) == 1) return i / a;
    if (sscanf(r, "nbr%d", &a) == 1) return keep(i ^ a, i, L);
    if (sscanf(r, "clamp%d", &a) == 1) {
        const int64_t c = L / a * a - 1;
        return c >= 0 && i > c ? c : i;
    }
    if (sscanf(r, "first%d", &a) == 1) return i / a * a;
    if (sscanf(r, "mod%d", &a) == 1) return i % a;
    int64_t g = 0;
    if (sscanf(r, "swap%d", &a) == 1 || sscanf(r, "rev%d", &a) == 1 ||
        sscanf(r, "rot%d%c1", &a, &sign) == 2)
        g = a;
    if (sscanf(r, "tr%dx%d", &a, &b) == 2)
        g = (int64_t)a * b;
    if (g == 0)
        return i;
    const int64_t base = i / g * g, p = i - base;
    if (base + g > L)
        return i;
    if (r[0] == 's') return base + (p ^ (g / 2));
    if (r[0] == 'r' && r[1] == 'e') return base + g - 1 - p;
    if (r[0] == 'r') return base + (p + (sign == '+' ? 1 : g - 1)) % g;
    /* tr AxB: the group as an A x B grid (row p / B, column p % B) read from the
     * transposed B x A grid */
    (void)log2i;
    return base + (p % b) * a + p / b;
}

/* The index array of one slot: identity, then each of its 1-D maps in spec order. */
static int64_t *slot_index(const char *slot, int64_t L)
{
    int64_t *ix = malloc((size_t)L * sizeof *ix);
    if (!ix)
        return NULL;
    for (int64_t i = 0; i < L; i++)
        ix[i] = i;
    for (int p = 0; p < n_prims; p++)
        if (!strcmp(prims[p].slot, slot))
            for (int64_t i = 0; i < L; i++)
                ix[i] = map1(prims[p].row, ix[i], L);
    return ix;
}

/* WPERM on the packed bytes: a byte's place is a number in the mixed radix
 * (N/16, 16, K/16, 2, 4) of checkpoint order; fragment order lists the same
 * digits as (N/16, K/16, 2, 16, 4).  inverse 0: the byte the kernel reads
 * for (n, k) is at the checkpoint place whose digits, read in fragment
 * order, give (n, k)'s place; 1: the converse. */
static void wperm(int64_t *n, int64_t *k, int64_t K, int inverse)
{
    static const int ckpt_to_frag[5] = {0, 3, 1, 2, 4};     /* digit i of checkpoint order sits at */
    const int64_t radix_ckpt[5] = {0, 16, K / 16, 2, 4};
    int64_t radix_frag[5], digits[5], out[5];
    for (int i = 0; i < 5; i++)
        radix_frag[ckpt_to_frag[i]] = radix_ckpt[i];
    const int64_t *from = inverse ? radix_frag : radix_ckpt, *to = inverse ? radix_ckpt : radix_frag;
    int64_t place = *n * (K / 2) + *k / 2;
    for (int i = 4; i >= 1; i--) {
        digits[i] = place % from[i];
        place /= from[i];
    }
    digits[0] = place;
    for (int i = 0; i < 5; i++)
        out[inverse ? i : ckpt_to_frag[i]] = digits[inverse ? ckpt_to_frag[i] : i];
    int64_t q = out[0];
    for (int i = 1; i < 5; i++)
        q = q * to[i] + out[i];
    *n = q / (K / 2);
    *k = 2 * (q % (K / 2)) + (*k & 1);
}

/* ---- values ---- */

static float e5m2_value(uint8_t c)
{
    const int s = c >> 7, e = (c >> 2) & 31, m = c & 3;
    const float v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexpf((float)m, -16) : ldexpf((float)(4 + m), e - 17);
    return s ? -v : v;
}

static float fnuz_value(uint8_t c)
{
    if (c == 0x80)
        return NAN;
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    const float v = e == 0 ? ldexpf((float)m, -10) : ldexpf((float)(8 + m), e - 11);
    return s ? -v : v;
}

static float round_fmt(float v, const char *fmt)
{
    if (isnan(v) || isinf(v) || v == 0.0f)
        return v;
    if (!strcmp(fmt, "bf16")) {
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
        memcpy(&v, &u, sizeof v);
        return v;
    }
    int mant = 10, emin = -14;
    double top = 65520.0;
    if (!strcmp(fmt, "e5m2")) {
        mant = 2;
        top = 61440.0;
    }
    int e;
    frexp(fabs((double)v), &e);
    e -= 1;
    if (e < emin)
        e = emin;
    const double q = ldexp(1.0, e - mant), r = nearbyint((double)v / q) * q;
    return fabs(r) >= top ? (r > 0 ? INFINITY : -INFINITY) : (float)r;
}

static float x_value(uint8_t c)
{
    float v;
    if (has("x", "e5m2"))
        v = e5m2_value(c);
    else if (has("x", "e4m3fnuz"))
        v = fnuz_value(c);
    else if (has("x", "int8"))
        v = (float)(int8_t)c;
    else
        v = kreplay_e4m3fn_value(c);
    if (has("x", "flush") && v != 0.0f && fabsf(v) < 0x1p-6f)
        v = copysignf(0.0f, v);
    if (has("x", "abs"))
        v = fabsf(v);
    if (has("x", "neg"))
        v = -v;
    if (has("x", "round-e5m2"))
        v = round_fmt(v, "e5m2");
    if (has("x", "neg-zero") && v < 0.0f)
        v = 0.0f;
    return v;
}

/* The second round's maps on the weight codes: on every element, or on those
 * at odd K (hi: the high nibble) or even K (lo) alone. */
static float w_value_r2(float v, int64_t k)
{
    static const char *const sides[2] = {"lo", "hi"};
    char row[32];
    if (has("w", "neg-zero") && v < 0.0f)
        v = 0.0f;
    snprintf(row, sizeof row, "%s-neg-zero", sides[k & 1]);
    if (has("w", row) && v < 0.0f)
        v = 0.0f;
    snprintf(row, sizeof row, "%s-abs", sides[k & 1]);
    if (has("w", row))
        v = fabsf(v);
    snprintf(row, sizeof row, "%s-neg", sides[k & 1]);
    if (has("w", row))
        v = -v;
    return v;
}

static float w_value(uint8_t c, int64_t k)
{
    static const float int4[16] = {0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1};
    float v = has("w", "int4") ? int4[c & 15] : kreplay_e2m1_value(c);
    if (has("w", "flush") && fabsf(v) == 0.5f)
        v = copysignf(0.0f, v);
    if (has("w", "abs"))
        v = fabsf(v);
    if (has("w", "neg"))
        v = -v;
    return w_value_r2(v, k);
}

static float ws_value(uint8_t b)
{
    float v = kreplay_e8m0_value(b);
    if (has("ws", "zero-byte") && b == 0)
        v = 0.0f;
    if (has("ws", "exp-wrap8") && b < 127)
        v = INFINITY;     /* E - 127 in unsigned 8 bits: 2^(E + 129), past fp32's range */
    if (has("ws", "missing"))
        v = 1.0f;
    if (has("ws", "twice"))
        v = v * v;
    if (has("ws", "bias128"))
        v = v * 0.5f;
    if (has("ws", "bias126"))
        v = v * 2.0f;
    return v;
}

static float xs_value(float s)
{
    if (has("xs", "round-fp16"))
        s = round_fmt(s, "fp16");
    if (has("xs", "round-bf16"))
        s = round_fmt(s, "bf16");
    if (has("xs", "inverted"))
        s = 1.0f / s;
    if (has("xs", "missing"))
        s = 1.0f;
    if (has("xs", "twice"))
        s = s * s;
    return s;
}

/* The weight of element k: the K-weight structure rows. */
static float k_weight(int64_t k, int64_t K)
{
    float c = 1.0f;
    for (int p = 0; p < n_prims; p++) {
        if (strcmp(prims[p].slot, "acc"))
            continue;
        const char *r = prims[p].row;
        int64_t len = 0;
        int parts = 0;
        if (!strncmp(r, "k-", 2))
            len = strstr(r, "-elem-") ? 1 : strstr(r, "-block-") ? 32 : strstr(r, "-tile-") ? 128 : 0;
        else if (sscanf(r, "split%d-", &parts) == 1 && (strstr(r, "-dropped") || strstr(r, "-twice")))
            len = K / parts;
        if (!len)
            continue;
        const int last = strstr(r, "-last-") != NULL;
        const int in = last ? k >= K - len : k < len;
        if (in)
            c *= strstr(r, "-twice") ? 2.0f : 0.0f;
    }
    return c;
}

/* ---- the computation ---- */

static float acc_round(float v, const char *row)
{
    return round_fmt(v, strstr(row, "bf16") ? "bf16" : "fp16");
}

/* The value before the output rounding, for one (m, n): a[K] the row's
 * activations, w[K] the column's weights, ws[nb] its block scales, xs. */
static float dot(const float *a, const float *w, const float *c, const float *ws, float xs, int64_t K)
{
    const int64_t nb = K / 32;
    const char *row = struct_row();
    float acc = 0.0f;
    int every = 0, parts = 0;
    const int inside = row && strstr(row, "-xs") != NULL;
    const float in = inside ? xs : 1.0f;
    const char *chunk = acc_row_with("-chunk");
    if (chunk) {
        /* each aligned chunk summed in the narrow format, every addition rounded;
         * the chunks added in fp32 inside the block sum */
        const int size = atoi(strstr(chunk, "-chunk") + 6);
        for (int64_t b = 0; b < nb; b++) {
            float s = 0.0f;
            for (int64_t k0 = 32 * b; k0 < 32 * b + 32; k0 += size) {
                float h = 0.0f;
                for (int64_t k = k0; k < k0 + size; k++)
                    h = acc_round(h + a[k] * w[k] * c[k], chunk);
                s = s + h;
            }
            acc = acc + s * ws[b];
        }
        return acc * xs;
    }
    if (row && sscanf(row, "%*4s-split%d", &parts) == 1) {
        const int64_t per = nb / parts;
        for (int s = 0; s < parts; s++) {
            float p = 0.0f;
            for (int64_t b = s * per; b < (s + 1) * per; b++) {
                float t = 0.0f;
                for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                    t += a[k] * w[k] * c[k];
                p += t * ws[b];
            }
            acc += acc_round(p * xs, row);
        }
        return acc;
    }
    if (row && !strncmp(row, "prod", 4)) {
        for (int64_t k = 0; k < K; k++)
            acc += acc_round(((a[k] * w[k] * c[k]) * ws[k / 32]) * in, row);
        return acc;
    }
    if (row)
        every = strstr(row, "-elem") ? 1 : atoi(strstr(row, "-k") + 2);
    if (every == 1) {
        for (int64_t k = 0; k < K; k++)
            acc = acc_round(acc + ((a[k] * w[k] * c[k]) * ws[k / 32]) * in, row);
    } else if (every == 16) {
        for (int64_t h = 0; h < K / 16; h++) {
            float t = 0.0f;
            for (int64_t k = 16 * h; k < 16 * h + 16; k++)
                t += a[k] * w[k] * c[k];
            acc = acc_round(acc + (t * ws[h / 2]) * in, row);
        }
    } else {
        const int64_t per = every ? every / 32 : 1;
        for (int64_t b0 = 0; b0 < nb; b0 += per) {
            float t = 0.0f;
            for (int64_t b = b0; b < b0 + per && b < nb; b++) {
                float s = 0.0f;
                for (int64_t k = 32 * b; k < 32 * b + 32; k++)
                    s += a[k] * w[k] * c[k];
                t += (s * ws[b]) * in;
            }
            acc = every ? acc_round(acc + t, row) : acc + t;
        }
    }
    return inside ? acc : acc * xs;
}

static uint16_t out_bits(float v)
{
    if (has("out", "abs"))
        v = fabsf(v);
    if (has("out", "neg"))
        v = -v;
    uint16_t bits;
    if (has("out", "trunc")) {
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        bits = isnan(v) ? (uint16_t)((u >> 16 & 0x8000u) | 0x7FC0u) : (uint16_t)(u >> 16);
    } else if (has("out", "double-round")) {
        bits = kreplay_bf16_rne(round_fmt(v, "fp16"));
    } else if (has("out", "fp16-bits")) {
        _Float16 h = (_Float16)v;
        memcpy(&bits, &h, sizeof bits);
    } else {
        bits = kreplay_bf16_rne(v);
    }
    if (has("out", "flush") && (bits & 0x7F80u) == 0 && (bits & 0x7Fu) != 0)
        bits &= 0x8000u;
    return bits;
}

/* carry-n, carry-n16, carry-n64, carry-m, carry-m16: output (m, n)'s fp32
 * accumulator (pre[], before x_scale) starts from the previous output's final
 * one along N (or M), from 0 at each tile of 16 or 64 (never without one). */
static void carry_out(const char *row, const float *pre, const float *xsv, uint16_t *res, int64_t M, int64_t N)
{
    const int along_n = row[6] == 'n';
    const int tile = atoi(row + 7);
    const int64_t lines = along_n ? M : N, len = along_n ? N : M;
    for (int64_t l = 0; l < lines; l++) {
        float run = 0.0f;
        for (int64_t j = 0; j < len; j++) {
            const int64_t i = along_n ? l * N + j : j * N + l;
            if (j == 0 || (tile && j % tile == 0))
                run = 0.0f;
            run = run + pre[i];
            res[i] = out_bits(run * xsv[i]);
        }
    }
}

static KREPLAY_LAUNCH(gen_launch)
{
    (void)weight_ref, (void)stream;
    if (K % 32)
        return kreplay_fail("K must be a multiple of 32", 3);
    const uint8_t *x = x_fp8, *wp = weight, *es = weight_scale;
    uint16_t *o = out;
    parse_spec();
    const int64_t nb = K / 32;
    int64_t *xr = slot_index("x-rows", M), *xk = slot_index("x-k", K), *wr = slot_index("w-rows", N),
            *wk = slot_index("w-k", K), *sr = slot_index("ws-rows", N), *sb = slot_index("ws-blocks", nb),
            *xsr = slot_index("xs-rows", M), *orow = slot_index("out-rows", M),
            *ocol = slot_index("out-cols", N);
    float *a = malloc((size_t)(M * K) * sizeof(float)), *wv = malloc((size_t)K * sizeof(float)),
          *ws = malloc((size_t)nb * sizeof(float)), *c = malloc((size_t)K * sizeof(float));
    uint16_t *res = malloc((size_t)(M * N) * sizeof(uint16_t));
    const char *carry = acc_row_with("carry-");
    float *pre = malloc((size_t)(M * N) * sizeof(float)), *xsv = malloc((size_t)(M * N) * sizeof(float));
    int status = 0;
    if (!xr || !xk || !wr || !wk || !sr || !sb || !xsr || !orow || !ocol || !a || !wv || !ws || !c || !res ||
        !pre || !xsv) {
        status = kreplay_fail("out of memory", 4);
        goto done;
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++)
            a[m * K + k] = x_value(x[xr[m] * K + xk[k]]);
    for (int64_t k = 0; k < K; k++)
        c[k] = k_weight(k, K);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) {
            int64_t nn = wr[n], kk = wk[k];
            if (has("w", "wperm-undone") || has("w", "wperm-applied"))
                wperm(&nn, &kk, K, has("w", "wperm-applied"));
            wv[k] = w_value(kreplay_e2m1_code(wp + nn * (K / 2), kk), k);
        }
        for (int64_t b = 0; b < nb; b++) {
            int64_t nn = sr[n], bb = sb[b];
            if (has("ws", "kn-as-nk")) {
                const int64_t i = nn * nb + bb;
                nn = i % N;
                bb = i / N;
            } else if (has("ws", "nk-as-kn")) {
                const int64_t i = bb * N + nn;
                nn = i / nb;
                bb = i % nb;
            }
            ws[b] = ws_value(es[bb * N + nn]);
        }
        for (int64_t m = 0; m < M; m++) {
            const int64_t xm = has("xs", "by-column") ? n % M : xsr[m];
            xsv[m * N + n] = xs_value(x_scale[xm]);
            pre[m * N + n] = dot(a + m * K, wv, c, ws, carry ? 1.0f : xsv[m * N + n], K);
            res[m * N + n] = out_bits(pre[m * N + n]);
        }
    }
    if (carry)
        carry_out(carry, pre, xsv, res, M, N);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            int64_t mm = orow[m], cc = ocol[n];
            int t = 0;
            if (has("out", "tile-transpose16"))
                t = 16;
            if (has("out", "tile-transpose64"))
                t = 64;
            if (t && mm / t * t + t <= M && cc / t * t + t <= N) {
                const int64_t m0 = mm / t * t, n0 = cc / t * t, dm = mm - m0;
                mm = m0 + (cc - n0);
                cc = n0 + dm;
            }
            o[m * N + n] = res[mm * N + cc];
        }
    status = kreplay_ok();
done:
    free(xr), free(xk), free(wr), free(wk), free(sr), free(sb), free(xsr), free(orow), free(ocol);
    free(a), free(wv), free(ws), free(c), free(res), free(pre), free(xsv);
    return status;
}

KREPLAY_PLUGIN_ONE_KERNEL("heldout_" BUG_NAME, kreplay_last_error, KREPLAY_W4A8_PERBLOCK_OPERANDS,
                          .name = "bug." BUG_NAME, .launch = gen_launch, .k_multiple = 32,
                          .summary = "held-out corpus: " BUG_SPEC,
                          .accumulation = "per 32-block, with the spec's primitives");
