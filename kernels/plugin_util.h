/* kreplay plugin helpers: optional, header-only, on top of plugin.h.
 *
 * What nearly every plugin writes again: the operand formats of plugin.h
 * decoded from their definitions, the "why the last launch failed" slot, and
 * the exported structure of a library with one kernel.  Plain C on <math.h>,
 * <stdint.h> and <string.h>; it shares no code with kreplay's models, so a
 * kernel built on it is still checked against an independent reference.
 * Copy it beside plugin.h into your tree if you like; link with -lm.
 *
 *     #include "plugin_util.h"
 *     static KREPLAY_LAUNCH(my_launch) { ...; if (bad) return kreplay_fail("why", 3); ...; return kreplay_ok(); }
 *     KREPLAY_PLUGIN_ONE_KERNEL("mylib", kreplay_last_error,
 *                               .name = "mylib.w4a8", .summary = "my W4A8 GEMM",
 *                               KREPLAY_W4A8_PERBLOCK_OPERANDS, .launch = my_launch);
 */
#ifndef KREPLAY_PLUGIN_UTIL_H
#define KREPLAY_PLUGIN_UTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "plugin.h"

/* ---- the operand formats ------------------------------------------------ */

/* OCP e4m3fn: bias 7, subnormal step 2^-9, 0x7F/0xFF NaN, no infinities. */
static inline float kreplay_e4m3fn_value(uint8_t c)
{
    const int sign = c >> 7, e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7)
        return sign ? -NAN : NAN;
    /* normal: (1 + m/8) * 2^(e-7) = (8 + m) * 2^(e-10); subnormal: m * 2^-9 */
    const float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    return sign ? -v : v;
}

/* e2m1 (MXFP4 element): sign bit 3, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6. */
static inline float kreplay_e2m1_value(uint8_t c)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return (c & 8) ? -mag[c & 7] : mag[c & 7];
}

/* Element k of a packed e2m1 row: element 2j is the low nibble of byte j. */
static inline uint8_t kreplay_e2m1_code(const uint8_t *row, int64_t k)
{
    const uint8_t byte = row[k / 2];
    return (k & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
}

/* e8m0 block scale: 2^(e-127), exact (2^-127 included); 0xFF NaN. */
static inline float kreplay_e8m0_value(uint8_t e)
{
    return e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127);
}

/* fp32 -> bf16 bits, round to nearest even; NaN -> 0x7FC0 with its sign. */
static inline uint16_t kreplay_bf16_rne(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (isnan(v))
        return (uint16_t)((u >> 16 & 0x8000u) | 0x7FC0u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* ---- why the last launch failed ----------------------------------------- */

/* The library's one message slot (a string literal, never freed). */
static inline const char **kreplay_error_slot(void)
{
    static const char *why = "";
    return &why;
}

/* Records why the launch fails and returns its nonzero status. */
static inline int kreplay_fail(const char *why, int status)
{
    *kreplay_error_slot() = why;
    return status;
}

/* Clears the message of an earlier failure; returns 0 (success). */
static inline int kreplay_ok(void)
{
    *kreplay_error_slot() = "";
    return 0;
}

/* A kreplay_plugin_t.last_error that reads the slot. */
static inline const char *kreplay_last_error(void)
{
    return *kreplay_error_slot();
}

/* Defines (after `static`, say) a launch `fn` of plugin.h's kreplay_launch_fn
 * type, its parameters named as there -- the names KREPLAY_UNUSED_OPERANDS
 * marks used:  static KREPLAY_LAUNCH(my_launch) { ...; return kreplay_ok(); } */
#define KREPLAY_LAUNCH(fn)                                                                   \
    int fn(const void *x_fp8, const void *weight, const void *weight_scale,                 \
           const void *weight_ref, const float *x_scale, void *out, int64_t M, int64_t N,   \
           int64_t K, void *stream)

/* In a launch that reads none of its operands (a test plugin that only
 * crashes, hangs or aborts): its parameters, named as in plugin.h's
 * kreplay_launch_fn, marked used. */
#define KREPLAY_UNUSED_OPERANDS()                                                            \
    ((void)x_fp8, (void)weight, (void)weight_scale, (void)weight_ref, (void)x_scale,        \
     (void)out, (void)M, (void)N, (void)K, (void)stream)

/* ---- the exported structure ---------------------------------------------- */

/* The operand fields of a CPU W4A8 kernel on the per-block path: fp8 e4m3fn
 * per-token activations, checkpoint-order weights, [K/32, N] scales, no
 * weight_ref.  For a kreplay_kernel_t's designated initialiser. */
#define KREPLAY_W4A8_PERBLOCK_OPERANDS                                                       \
    .act_format = KREPLAY_ACT_FP8_E4M3FN_TOKEN, .weight_order = KREPLAY_WEIGHT_CHECKPOINT, \
    .scale_layout = KREPLAY_SCALES_KN, .weight_ref = KREPLAY_WREF_NONE

/* Defines and exports `kreplay_plugin` for a CPU library of one kernel:
 * `plugin_name`, its last_error function (or NULL), then the fields of its
 * kreplay_kernel_t as designated initialisers. */
#define KREPLAY_PLUGIN_ONE_KERNEL(plugin_name, last_error_fn, ...)                           \
    KREPLAY_PLUGIN_ONE_KERNEL_FLAGS(plugin_name, 0, last_error_fn, __VA_ARGS__)

/* The same with the plugin's flags (KREPLAY_PLUGIN_GPU for a GPU library). */
#define KREPLAY_PLUGIN_ONE_KERNEL_FLAGS(plugin_name, plugin_flags, last_error_fn, ...)       \
    static const kreplay_kernel_t kreplay_plugin_kernels_[] = {{__VA_ARGS__}};              \
    KREPLAY_PLUGIN_EXPORT const kreplay_plugin_t kreplay_plugin = {                         \
        .abi_version = KREPLAY_PLUGIN_ABI_VERSION,                                          \
        .struct_size = sizeof(kreplay_plugin_t),                                            \
        .name = (plugin_name),                                                              \
        .flags = (plugin_flags),                                                            \
        .kernel_count = 1,                                                                  \
        .kernels = kreplay_plugin_kernels_,                                                 \
        .last_error = (last_error_fn),                                                      \
    }

#endif
