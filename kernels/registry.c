#include "registry.h"
#include "kr_string.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

extern const kernel_desc_t kernel_quant_fp8_token, kernel_quant_fp8_token_traced,
    kernel_quant_fp8_token_pure, kernel_quant_mxfp4, kernel_quant_mxfp4_ocp, kernel_quant_mxfp4_ceil;
extern const kernel_desc_t kernel_w4a8_perblock;
extern const kernel_desc_t kernel_w4a8_folded, kernel_w4a8_folded_wperm, kernel_w4a8_atiled;
extern const kernel_desc_t kernel_w4a8_decode, kernel_w4a8_r4d, kernel_w4a8_partitioned;
extern const kernel_desc_t kernel_w4a4_aiter;
extern const kernel_desc_t kernel_bf16_skinny, kernel_bf16_sequential, kernel_ref_linear;

/* The registry.  One line per kernel; the order is the order of reports. */
static const kernel_desc_t *const kernel_table[] = {
    &kernel_quant_fp8_token,
    &kernel_quant_fp8_token_traced,
    &kernel_quant_fp8_token_pure,
    &kernel_quant_mxfp4,
    &kernel_quant_mxfp4_ocp,
    &kernel_quant_mxfp4_ceil,
    &kernel_w4a8_perblock,
    &kernel_w4a8_folded,
    &kernel_w4a8_folded_wperm,
    &kernel_w4a8_atiled,
    &kernel_w4a8_decode,
    &kernel_w4a8_r4d,
    &kernel_w4a8_partitioned,
    &kernel_w4a4_aiter,
    &kernel_bf16_skinny,
    &kernel_bf16_sequential,
    &kernel_ref_linear,
};

int kernel_count(void)
{
    return (int)(sizeof kernel_table / sizeof kernel_table[0]);
}

const kernel_desc_t *kernel_at(int i)
{
    return (i >= 0 && i < kernel_count()) ? kernel_table[i] : NULL;
}

const kernel_desc_t *kernel_find(const char *name)
{
    for (int i = 0; i < kernel_count(); i++)
        if (strcmp(kernel_table[i]->name, name) == 0)
            return kernel_table[i];
    return NULL;
}

int kernel_name_matches(const char *name, const char *patterns)
{
    if (!patterns || !*patterns)
        return 1;
    char buf[1024];
    kr_strlcpy(buf, patterns, sizeof buf);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        while (*p == ' ')
            p++;
        if (fnmatch(p, name, 0) == 0)
            return 1;
    }
    return 0;
}

const char *kernel_unsupported_reason(const kernel_desc_t *k, int64_t M, int64_t N, int64_t K,
                                      char *buf, int cap)
{
    (void)N;
    if (k->k_multiple > 0 && K % k->k_multiple != 0) {
        snprintf(buf, (size_t)cap, "K=%lld is not a multiple of %d", (long long)K, k->k_multiple);
        return buf;
    }
    if (M < k->m_min || (k->m_max > 0 && M > k->m_max)) {
        snprintf(buf, (size_t)cap, "M=%lld is outside the kernel's band [%lld, %lld]",
                 (long long)M, (long long)k->m_min, (long long)k->m_max);
        return buf;
    }
    return NULL;
}

const kernel_desc_t *kernel_for_role(compare_role_t role)
{
    for (int i = 0; role != COMPARE_ROLE_NONE && i < kernel_count(); i++)
        if (kernel_table[i]->compare_role == role)
            return kernel_table[i];
    return NULL;
}

int kernel_is_w4a8(const kernel_desc_t *k)
{
    if (!k || k->op != KERNEL_OP_GEMM || k->weight.elem != ELEM_E2M1)
        return 0;
    return k->act.elem == ELEM_E4M3FN || k->act.elem == ELEM_E4M3FNUZ || k->act.elem == ELEM_E5M2;
}

/* names[v], or "?" for a value the table does not name. */
static const char *enum_name(const char *const *names, size_t count, long v)
{
    return v >= 0 && (size_t)v < count && names[v] ? names[v] : "?";
}

#define ENUM_NAME(names, v) enum_name(names, sizeof names / sizeof names[0], (long)(v))

const char *elem_format_name(elem_format_t f)
{
    static const char *const names[] = {
        [ELEM_NONE] = "none", [ELEM_E2M1] = "e2m1", [ELEM_E4M3FN] = "e4m3fn",
        [ELEM_E4M3FNUZ] = "e4m3fnuz", [ELEM_E5M2] = "e5m2", [ELEM_BF16] = "bf16",
        [ELEM_FP32] = "fp32",
    };
    return ENUM_NAME(names, f);
}

const char *scale_kind_name(scale_kind_t s)
{
    static const char *const names[] = {
        [SCALE_NONE] = "none", [SCALE_PER_TOKEN] = "per-token", [SCALE_PER_ROW] = "per-row",
        [SCALE_E8M0_PER_BLOCK] = "e8m0-per-block", [SCALE_FP32] = "fp32",
    };
    return ENUM_NAME(names, s);
}

const char *ref_kind_name(ref_kind_t r)
{
    static const char *const names[] = {[REF_EXACT] = "R_exact", [REF_SOURCE] = "R_source"};
    return ENUM_NAME(names, r);
}

void kernel_options_default(kernel_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->act_source = ACT_SOURCE_AUTO;
    o->fp8_variant = FP8_TOKEN_VLLM;
    o->mxfp4_variant = MXFP4_AITER_EVEN;
    o->threads = 0;
}
