/* A GPU plugin's kernel (kernels/plugin.h, KREPLAY_PLUGIN_GPU) launched in
 * the GPU worker on operands already on the device, on the worker's stream:
 * `runs` launches, each after the guards around the output are filled with
 * 0xA5 and the output with the bf16 poison 0x7FC1; after each, the guards
 * are scanned (OOB_WRITE with where the writes lie), the poison left counted
 * (the row's note) and a rerun compared with launch 1 on the device, so
 * only launch 1's output comes to the host.  A launch that returns nonzero
 * is an ERROR; a runtime error after it (an illegal address) too, and like
 * an out-of-bounds write it leaves the device suspect: *retire asks for a
 * fresh worker before the next launch. */
#ifndef KR_GPU_PLUGIN_LAUNCH_H
#define KR_GPU_PLUGIN_LAUNCH_H

#include "external_launch.h"
#include "gpu_device.h"

typedef struct {
    const void *x, *xs, *weight, *scales, *ref;   /* device pointers, laid out as declared */
    int64_t M, N, K;
} gpu_plugin_operands_t;

/* out_host [M, N] receives launch 1's output when res->ok.  Returns 0 with
 * res filled (the plugin's failures are res), or -1 with err when the
 * harness itself failed (out of memory). */
int gpu_plugin_launch(gpu_device_t *d, const kernel_desc_t *k, const gpu_plugin_operands_t *op,
                      int runs, int64_t row_offset, uint16_t *out_host, launch_outcome_t *res,
                      int *retire, kr_error_t *err);

#endif
