/* Kernel outputs and operands saved for offline inspection (--save-outputs):
 * one HDF5 file, a group per case and kernel:
 *   /<case>/<kernel>/out            [M, N] uint16 (bf16 bits)
 *   /<case>/<kernel>/act_codes      [M, K] uint8 (fp8 or e2m1 codes)
 *   /<case>/<kernel>/act_scale      [M] float32 (fp8 per-token) or [M, K/32] uint8 (e8m0)
 *   /<case>/<kernel>/act_values     [M, K] float32, instead of codes, for unquantized kernels
 * with attributes act_kind ("fp8_per_token" / "mxfp4_per_block" / "values") and
 * act_format ("e4m3fn" / "e4m3fnuz" / "e2m1"). */
#ifndef KR_OUTPUT_STORE_H
#define KR_OUTPUT_STORE_H

#include <stdint.h>

#include "kr_error.h"
#include "registry.h"

int output_store_save(const char *path, const char *case_name, const char *kernel,
                      const kernel_act_t *act, const uint16_t *out, int64_t M, int64_t N,
                      kr_error_t *err);

/* The outputs file is written at tmp (output_store_save's path) and moved
 * to path only when complete: fsync'd, then renamed.  discard (a case
 * stopped part-way) removes tmp instead and fails naming path.  No tmp (no
 * output saved) is 0. */
int output_store_commit(const char *tmp, const char *path, int discard, kr_error_t *err);

#endif
