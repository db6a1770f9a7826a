/* pt_import: the MXFP4 dispatch's bad-case dump (torch.save) -> a schema-v1 case.
 *
 * `_debug_compare` in the dispatch writes
 *   torch.save({"x_fp8", "x_scale", "weight", "weight_scale", "weight_ref", "out",
 *               "out_rerun", "aiter", "x", "M", "N", "K"}, "/cache/badcase_<pid>_<N>_<K>_<M>.pt")
 * and this maps it onto case_t (cases/SCHEMA.md):
 *
 *   x_fp8         float8_e4m3fn (or a uint8 view of its codes) [M, K] -> x_fp8, format e4m3fn
 *   x_scale       float32 [M] or [M, 1]                                -> x_scale [M]
 *   weight        uint8 [N, K/2] packed e2m1                          -> weight, order from the
 *                 options (the dump does not say whether RADIANCE_MXFP4_WPERM=1 had put it in
 *                 fragment order; default checkpoint)
 *   weight_scale  uint8 e8m0, [N, K/32] or [K/32, N] (the dispatch holds [K/32, N]): the layout
 *                 comes from the shape; when N == K/32 the shape cannot tell and the options
 *                 must; an option that contradicts the shape is an error
 *   weight_ref    uint8 [N] (folded), [2] (per-block) or [1] (aiter route)
 *   out, out_rerun  bfloat16 [M, N]                                    -> bf16 bits
 *   aiter         float32 [M, N] -> ref_recorded: despite its name it is NOT aiter's output but
 *                 _exact_ref's fp32 result, the reference the serve computed in-process
 *   x             bfloat16 or float32 [M, K]                           -> x (fp32), x_storage
 *   M, N, K       ints, checked against every shape
 *
 * The capture hook's .pt (scripts/capture) uses the same names and adds:
 *   aiter         bfloat16 [M, N]: aiter's own output               -> aiter
 *   ref_recorded  float32 [M, N]                                    -> ref_recorded
 *   weight_bf16   bfloat16 [N, K] (the skinny route; no weight then) -> weight_bf16
 *   x_fp8         also float8_e4m3fnuz, or uint8 with x_fp8_format "e4m3fnuz"
 *   weight, weight_scale  also float4_e2m1fn_x2 / float8_e8m0fnu
 *   weight_order, scale_layout  strings, used unless the options say otherwise
 *   kernel_path, layer, model, capture_time, env_flags, route, versions, gpu_arch,
 *   extension_path  strings; tp_rank an int                       -> the case's provenance
 *
 * Tensors may be non-contiguous views (strides and storage offsets are
 * applied).  Other keys are ignored.  Provenance without the hook's strings:
 * kernel_path "radiance::mxfp4_linear (torch.save bad-case dump)", capture_time
 * the file's mtime (UTC, ISO 8601) with capture_time_source "file mtime", path
 * the file; with the hook's capture_time, capture_time_source "recorded". */
#ifndef KR_PT_IMPORT_H
#define KR_PT_IMPORT_H

#include "case.h"

#define PT_IMPORT_KERNEL_PATH "radiance::mxfp4_linear (torch.save bad-case dump)"

typedef struct {
    int weight_order_set;           /* --weight-order given */
    weight_order_t weight_order;
    int scale_layout_set;           /* --scale-layout given */
    scale_layout_t scale_layout;
} pt_import_options_t;

/* Reads a torch.save bad-case dump into *c (validated with case_validate).
 * o may be NULL (checkpoint order, layout from the shape).  Returns 0, or -1
 * with one line in err naming the file, the key and what was expected; *c is
 * then left empty. */
int pt_import_case(const char *path, case_t *c, const pt_import_options_t *o, kr_error_t *err);

#endif
