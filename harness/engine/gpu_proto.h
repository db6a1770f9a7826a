/* The GPU worker's protocol: what kreplay sends its worker process and what
 * comes back (gpu_session.c sends, gpu_serve.c answers).
 *
 * A request is one message on the worker's socket (isolate_worker_call, at
 * most ISOLATE_WORKER_REQUEST_MAX bytes); every bulk byte travels through
 * the shared arena (shm_arena.h), which both processes map at the same
 * address.  The worker writes its reply record and the outputs at
 * head.reply in the arena, within head.reply_cap bytes.
 *
 * Operands are blobs named by their content (length and content_hash64):
 * the worker keeps each on the device until told to drop it, so the bytes
 * of a case cross to the device once however many kernels, reruns and
 * references read them.  An operand whose blob the worker does not hold
 * yet carries the arena offset of its bytes. */
#ifndef KR_GPU_PROTO_H
#define KR_GPU_PROTO_H

#include <stdint.h>

#include "external_launch.h"
#include "fault_inject.h"
#include "gpu_run.h"
#include "registry.h"

#define GW_NAME_MAX 64
#define GW_EVICT_MAX 64
/* The offset of an operand the worker already holds. */
#define GW_RESIDENT UINT64_MAX
/* An absent array (a NULL pointer) among a host request's offsets. */
#define GW_NONE UINT64_MAX

typedef struct {
    uint64_t hash, bytes;       /* bytes 0: no operand */
} gw_blob_t;

typedef struct {
    gw_blob_t id;
    uint64_t offset;            /* where its bytes are in the arena, or GW_RESIDENT */
} gw_operand_t;

typedef enum {
    GW_OP_HELLO = 1,            /* open the device; gw_hello_reply_t */
    GW_OP_TWIN,                 /* a registry kernel's GPU twin; gw_twin_reply_t */
    GW_OP_REF,                  /* an fp32 reference or the fp64 oracle; C [M, N] */
    GW_OP_PLUGIN,               /* a GPU plugin's kernel; gw_launch_reply_t */
    GW_OP_HOST,                 /* a kernel's run_cpu in the worker (a persistent plugin) */
    GW_OP_PING,                 /* nothing: starts the worker (gw_head_t alone) */
} gw_op_t;

typedef struct {
    uint32_t op;
    uint32_t n_evict;
    uint64_t reply;             /* arena offset of the reply */
    uint64_t reply_cap;
    gw_blob_t evict[GW_EVICT_MAX];  /* blobs to drop before anything else */
} gw_head_t;

typedef struct {
    gw_head_t head;
    int standin;
    int device;
} gw_hello_req_t;

typedef struct {
    char name[128];
    char backend[16];
    uint64_t mem_free, mem_total;
    int device_count;           /* GPUs the worker sees (the stand-in: 1) */
} gw_hello_reply_t;

/* The weight, as the twins and the references read it. */
typedef struct {
    gw_operand_t packed, scales, case_ref, bf16;
    int scale_layout;           /* 0: [N, K/32], 1: [K/32, N] */
    int e8m0_zero_is_zero;
} gw_weight_t;

typedef struct {
    gw_head_t head;
    char kernel[GW_NAME_MAX];
    char fault[16];             /* "" or a fault kernel's name */
    int variant, reruns, timed_runs;
    uint64_t canary_bytes;
    kernel_options_t kopt;
    int64_t M, N, K, dispatch_M;
    int x_fmt;
    gw_operand_t x, xs, a_scales, xf, x_bf16, x_dequant;
    gw_weight_t w;
} gw_twin_req_t;

typedef struct {
    int ran;                    /* 0: the run could not happen (res says why) */
    int retire;                 /* the device is suspect: start a fresh worker */
    char err[256];
    gpu_run_result_t res;       /* its pointers NULL: the outputs follow */
    uint64_t out_offset, scale_offset;
} gw_twin_reply_t;

typedef struct {
    gw_head_t head;
    int f64;                    /* the fp64 oracle: C is double */
    int dense_bf16;             /* B is the bf16 weight [N, K], else the MXFP4 weight */
    int64_t M, N, K, panel_rows;
    gw_operand_t a;             /* A [M, K] fp32 */
    gw_weight_t w;
} gw_ref_req_t;

typedef struct {
    gw_head_t head;
    char kernel[GW_NAME_MAX];
    int runs;
    int64_t M, N, K, row_offset;
    gw_operand_t x, xs, weight, scales, ref;   /* as the kernel declared them */
} gw_plugin_req_t;

/* What a plugin launch in the worker sends back: the outcome, then out [M, N]. */
typedef struct {
    launch_outcome_t outcome;
    int retire;                 /* the device is suspect: start a fresh worker */
    uint64_t out_offset;
} gw_launch_reply_t;

/* run_cpu's inputs laid out in the arena (GW_NONE: NULL). */
typedef struct {
    gw_head_t head;
    char kernel[GW_NAME_MAX];
    kernel_options_t kopt;
    int runs;
    int64_t row_offset;
    int has_fault;
    fault_t fault;
    int64_t M, N, K, dispatch_M, weight_ref_len;
    int x_fp8_format, scale_layout, e8m0_mode;
    uint64_t x, x_fp8, x_scale, packed, scales, weight_ref, weight_bf16;
    int act_kind, act_fp8_format;
    char act_origin[96];
    uint64_t codes, token_scale, block_scale, dequant;
} gw_host_req_t;

#endif
