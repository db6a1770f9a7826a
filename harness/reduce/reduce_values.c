#include "reduce_values.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "mxfp4_weight.h"
#include "reduce_slice.h"

#define E2M1_ONE 0x2u            /* e2m1 code of 1.0 */
#define BF16_ONE 0x3F80u

const char *simplify_kind_name(simplify_kind_t k)
{
    static const char *const names[SIMPLIFY_COUNT] = {
        [SIMPLIFY_X_ZERO] = "activation 32-blocks set to zero",
        [SIMPLIFY_W_ZERO] = "weight 32-blocks set to zero",
        [SIMPLIFY_SCALE_127] = "weight scales set to 127 (2^0)",
        [SIMPLIFY_XSCALE_ONE] = "x_scale set to 1",
        [SIMPLIFY_X_ONE] = "activation 32-blocks set to one code (1.0)",
        [SIMPLIFY_W_ONE] = "weight 32-blocks set to one code (1.0)",
    };
    return (unsigned)k < SIMPLIFY_COUNT ? names[k] : "?";
}

static uint8_t fp8_one(fp8_format_t f)
{
    return f == FP8_E4M3FNUZ ? 0x40 : 0x38;
}

static float fp8_value(fp8_format_t f, uint8_t code)
{
    return f == FP8_E4M3FNUZ ? e4m3fnuz_decode(code) : e4m3fn_decode(code);
}

static int fp8_is_nan(fp8_format_t f, uint8_t code)
{
    return isnan(fp8_value(f, code));
}

int64_t simplify_unit_count(const case_t *c, simplify_kind_t k)
{
    const int64_t nb = c->K / 32;
    switch (k) {
    case SIMPLIFY_X_ZERO:
    case SIMPLIFY_X_ONE:
        return c->x || c->x_fp8 ? c->M * nb : 0;
    case SIMPLIFY_W_ZERO:
    case SIMPLIFY_W_ONE:
        return c->weight || c->weight_bf16 ? c->N * nb : 0;
    case SIMPLIFY_SCALE_127:
        return c->weight ? c->N * nb : 0;
    case SIMPLIFY_XSCALE_ONE:
        return c->x_scale ? c->M : 0;
    case SIMPLIFY_COUNT:
        break;
    }
    return 0;
}

/* Does activation block (m, b) hold only zeros (want 0), or zeros and the
 * one code where finite (want 1)?  With recorded codes they decide; x alone
 * must then be one value across the block. */
static int x_block_is(const case_t *c, int64_t m, int64_t b, int want)
{
    const uint8_t one = fp8_one(c->x_fp8_format);
    float v = 0.0f;
    for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
        const int64_t i = m * c->K + k;
        if (c->x_fp8) {
            const uint8_t q = c->x_fp8[i];
            if (q != 0 && !(want && (q == one || fp8_is_nan(c->x_fp8_format, q))))
                return 0;
            if (!want && c->x && c->x[i] != 0.0f)
                return 0;
            continue;
        }
        const float e = c->x[i];
        if (e == 0.0f || (want && !isfinite(e)))
            continue;
        if (!want || (v != 0.0f && e != v))
            return 0;
        v = e;
    }
    return 1;
}

/* Does weight block (n, b) hold only zero codes (want 0), or zero or one
 * codes (want 1)? */
static int w_block_is(const case_t *c, const uint8_t *w, int64_t n, int64_t b, int want)
{
    for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
        if (w) {
            const uint8_t code = mxfp4_code_at(w, c->K, n, k);
            if (code != 0 && !(want && code == E2M1_ONE))
                return 0;
        }
        if (c->weight_bf16) {
            const uint16_t h = c->weight_bf16[n * c->K + k];
            if (h != 0 && !(want && h == BF16_ONE))
                return 0;
        }
    }
    return 1;
}

int64_t simplify_pending_units(const case_t *c, simplify_kind_t k, int64_t *units)
{
    const int64_t count = simplify_unit_count(c, k), nb = c->K / 32;
    uint8_t *w = NULL;
    if ((k == SIMPLIFY_W_ZERO || k == SIMPLIFY_W_ONE) && c->weight) {
        kr_error_t err = {{0}};
        if (!(w = reduce_weight_checkpoint(c, &err)))
            return 0;
    }
    int64_t n = 0;
    for (int64_t u = 0; u < count; u++) {
        int simple = 0;
        switch (k) {
        case SIMPLIFY_X_ZERO:
        case SIMPLIFY_X_ONE:
            simple = x_block_is(c, u / nb, u % nb, k == SIMPLIFY_X_ONE);
            break;
        case SIMPLIFY_W_ZERO:
        case SIMPLIFY_W_ONE:
            simple = w_block_is(c, w, u / nb, u % nb, k == SIMPLIFY_W_ONE);
            break;
        case SIMPLIFY_SCALE_127:
            simple = mxfp4_scale_at(c->weight_scale, c->scale_layout, c->N, c->K, u / nb, u % nb) == 127;
            break;
        case SIMPLIFY_XSCALE_ONE:
            simple = c->x_scale[u] == 1.0f;
            break;
        case SIMPLIFY_COUNT:
            break;
        }
        if (!simple)
            units[n++] = u;
    }
    free(w);
    return n;
}

static void x_block_set(case_t *c, int64_t m, int64_t b, int one)
{
    const uint8_t code = one ? fp8_one(c->x_fp8_format) : 0;
    const float scale = c->x_scale ? c->x_scale[m] : 1.0f;
    for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
        const int64_t i = m * c->K + k;
        const int keep_fp8 = one && c->x_fp8 && fp8_is_nan(c->x_fp8_format, c->x_fp8[i]);
        const int keep_x = one && c->x && !isfinite(c->x[i]);
        if (c->x_fp8 && !keep_fp8)
            c->x_fp8[i] = code;
        if (c->x && !keep_x)
            c->x[i] = one ? scale : 0.0f;
    }
}

/* Sets the nibble of element (n, k) of a checkpoint-order packed weight. */
static void w_code_set(uint8_t *w, int64_t K, int64_t n, int64_t k, uint8_t code)
{
    uint8_t *byte = &w[n * (K / 2) + k / 2];
    *byte = (k & 1) ? (uint8_t)((*byte & 0x0F) | (code << 4)) : (uint8_t)((*byte & 0xF0) | code);
}

static int apply_weight_blocks(case_t *c, int one, const int64_t *units, int64_t n, kr_error_t *err)
{
    const int64_t nb = c->K / 32;
    uint8_t *w = NULL;
    if (c->weight && !(w = reduce_weight_checkpoint(c, err)))
        return -1;
    for (int64_t i = 0; i < n; i++) {
        const int64_t row = units[i] / nb, b = units[i] % nb;
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
            if (w)
                w_code_set(w, c->K, row, k, one ? E2M1_ONE : 0);
            if (c->weight_bf16)
                c->weight_bf16[row * c->K + k] = one ? BF16_ONE : 0;
        }
    }
    const int rc = w ? reduce_weight_store(c, w, err) : 0;
    free(w);
    return rc;
}

int simplify_apply(case_t *c, simplify_kind_t k, const int64_t *units, int64_t n, kr_error_t *err)
{
    const int64_t nb = c->K / 32;
    switch (k) {
    case SIMPLIFY_X_ZERO:
    case SIMPLIFY_X_ONE:
        for (int64_t i = 0; i < n; i++)
            x_block_set(c, units[i] / nb, units[i] % nb, k == SIMPLIFY_X_ONE);
        return 0;
    case SIMPLIFY_W_ZERO:
    case SIMPLIFY_W_ONE:
        return apply_weight_blocks(c, k == SIMPLIFY_W_ONE, units, n, err);
    case SIMPLIFY_SCALE_127:
        for (int64_t i = 0; i < n; i++) {
            const int64_t row = units[i] / nb, b = units[i] % nb;
            c->weight_scale[c->scale_layout == SCALE_LAYOUT_NK ? row * nb + b : b * c->N + row] = 127;
        }
        return 0;
    case SIMPLIFY_XSCALE_ONE:
        for (int64_t i = 0; i < n; i++) {
            const int64_t m = units[i];
            c->x_scale[m] = 1.0f;
            /* x stays the value of its row's codes, its non-finite elements kept. */
            for (int64_t kk = 0; c->x && c->x_fp8 && kk < c->K; kk++)
                if (isfinite(c->x[m * c->K + kk]))
                    c->x[m * c->K + kk] = fp8_value(c->x_fp8_format, c->x_fp8[m * c->K + kk]);
        }
        return 0;
    case SIMPLIFY_COUNT:
        break;
    }
    return kr_fail(err, "unknown simplification %d", (int)k);
}
