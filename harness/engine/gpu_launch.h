/* A GPU twin's launches on operands already on the device (gpu_device.h):
 * the heart of every GPU run, in process (gpu_run.h) or in the GPU worker
 * (gpu_session.h).
 *
 *   - the entry's own buffers (split-K scratch, a pre-shifted weight), once;
 *   - the output between canary_bytes of 0xA5 on each side;
 *   - `reruns` launches, each after a canary fill and the poison (bf16
 *     0x7FC1, or byte 0xFF for a quantizer's codes): the canaries and the
 *     poison left are scanned and every rerun is compared with the first,
 *     where the data is (on the device), so only launch 1's output crosses
 *     to the host, once;
 *   - each launch timed with events: ms_median / ms_min over the warm ones
 *     (all but the first when there are several) and `timed_runs` more.
 *
 * The stand-in runs the descriptor's CPU model as "the kernel" (and its
 * prepare_act for a quantizer), and emulates the fault kernels on its
 * output: "oob" writes one element past the end, "unwritten" leaves the
 * last 32 columns poisoned, "race" moves one element by 1 ULP in every
 * launch after the first. */
#ifndef KR_GPU_LAUNCH_H
#define KR_GPU_LAUNCH_H

#include "gpu_device.h"
#include "gpu_run.h"
#include "kr_gpu_entry.h"

/* Host bytes of the first launch's output (codes for a quantizer) and of a
 * quantizer's scales (0 for a GEMM). */
size_t gpu_launch_out_bytes(const kernel_desc_t *k, int64_t M, int64_t N, int64_t K);
size_t gpu_launch_scale_bytes(const kernel_desc_t *k, int64_t M, int64_t K);

/* Runs k's twin on op (inputs on the device; out and scale_out are made
 * here).  res must come from gpu_run_result_init; on return its counts,
 * times and verdict are set and out_host [gpu_launch_out_bytes] and
 * scale_host [gpu_launch_scale_bytes] hold launch 1's output (res's own
 * output pointers are left NULL).  Returns 0, or -1 with err (res->verdict
 * ERROR or UNSUPPORTED, res->note why) when the run could not happen. */
int gpu_launch_twin(gpu_device_t *d, const kernel_desc_t *k, const kernel_options_t *kopt,
                    kr_gpu_operands_t *op, const gpu_run_options_t *opt, gpu_run_result_t *res,
                    void *out_host, void *scale_host, kr_error_t *err);

/* The descriptor's split-K count for these inputs (0: it declines them). */
int gpu_launch_splits(const kernel_desc_t *k, int64_t M, int64_t dispatch_M, int64_t N,
                      int64_t K, const kernel_options_t *kopt);

#endif
