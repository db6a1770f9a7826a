/* case_t: one captured GEMM call, as read from a schema-v1 case file
 * (cases/SCHEMA.md).  Every array is owned by the case and freed by
 * case_free(); absent optional datasets are NULL.  An array may instead lie
 * in `mapping`, the case file mapped privately (case_mapping.h): case_free
 * unmaps it, and case_owns() tells the two kinds apart. */
#ifndef KR_CASE_H
#define KR_CASE_H

#include <stdint.h>

#include "case_mapping.h"
#include "formats.h"
#include "kr_error.h"
#include "mxfp4_weight.h"
#include "quant_fp8.h"

#define CASE_SCHEMA_V1 "kreplay.case/1"

typedef enum {
    X_STORED_NONE = 0,
    X_STORED_BF16,      /* uint16 dataset with attribute dtype = "bfloat16" */
    X_STORED_F32,
} x_storage_t;

typedef enum {
    WEIGHT_ORDER_CHECKPOINT = 0, /* [N, K/2], row n holds W[n][0..K) */
    WEIGHT_ORDER_FRAGMENT,       /* WPERM fragment order (attribute order = "fragment") */
} weight_order_t;

typedef struct {
    char *path;                 /* file it came from (owned) */
    int64_t M, N, K;

    /* Source activations, decoded to fp32.  NULL if the case has none. */
    float *x;                   /* [M, K] */
    x_storage_t x_storage;

    /* Activations as the production kernel received them.  NULL if absent. */
    uint8_t *x_fp8;             /* [M, K] fp8 codes */
    fp8_format_t x_fp8_format;
    float *x_scale;             /* [M] */

    /* MXFP4 weight, as stored (fragment order is NOT undone on read).  NULL
     * (with weight_scale) when the case holds only weight_bf16: a case has an
     * MXFP4 weight, a bf16 weight (weight_bf16, at the end), or both. */
    uint8_t *weight;            /* [N, K/2] */
    weight_order_t weight_order;
    uint8_t *weight_scale;      /* [N, K/32] or [K/32, N] by scale_layout */
    scale_layout_t scale_layout;
    uint8_t *weight_ref;        /* the kernel's route/folding argument; NULL if absent */
    int64_t weight_ref_len;     /* N (folded), 2 (per-block), 1 (aiter) */

    /* Outputs recorded in production, bf16 bits [M, N].  NULL if absent. */
    uint16_t *out;
    uint16_t *out_rerun;
    uint16_t *aiter;

    /* Provenance (owned strings; NULL if absent). */
    char *kernel_path;          /* e.g. "radiance::mxfp4_linear" */
    char *layer;
    char *model;
    char *capture_time;         /* ISO 8601 */
    char *env_flags;            /* "KEY=VALUE" lines, '\n'-separated */
    /* Written by the capture hook (scripts/capture; cases/SCHEMA.md). */
    char *route;                /* "w4a8", "w4a4", "bf16_skinny" or "partitioned" */
    char *tp_rank;              /* tensor-parallel rank, decimal */
    char *versions;             /* "torch=...\nvllm=...\nrocm=..." lines */
    char *gpu_arch;             /* e.g. "gfx1201", "sm_90", "cpu" */
    char *extension_path;       /* the loaded kernel extension's file */
    char *capture_time_source;  /* "recorded" (the hook's clock) or "file mtime" */

    uint16_t *weight_bf16;      /* [N, K] bf16 bits of an unquantized layer, or NULL */

    /* The fp32 reference the serve computed in-process, [M, N], or NULL: the
     * MXFP4 dispatch's _debug_compare dump stores _exact_ref's result under
     * the misnamed key "aiter" (dataset ref_recorded, cases/SCHEMA.md). */
    float *ref_recorded;

    /* The file the arrays that are not owned lie in (base NULL: none). */
    case_mapping_t mapping;
    /* Only in a case read for its image (case_read_for_image): x's bf16 bits
     * where the mapped file holds them, x left NULL; the image's reader
     * decodes them.  NULL everywhere else. */
    const uint16_t *x_bf16_in_file;
} case_t;

#endif
