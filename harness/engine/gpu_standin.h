/* The stand-in's "launch" of a GPU twin (gpu_device.h): the descriptor's
 * CPU model on the operand buffers (host memory on the stand-in), and the
 * fault kernels emulated on its output.  For gpu_launch.c only. */
#ifndef KR_GPU_STANDIN_H
#define KR_GPU_STANDIN_H

#include "kr_gpu_entry.h"
#include "registry.h"

/* Writes o->out (and o->scale_out for a quantizer) as k's twin would.
 * matrix: the matrix-unit variant (the stand-in has none: unsupported).
 * fault: NULL, "race", "oob" or "unwritten"; launch: 1 for the first launch
 * of a run, 2 for the next, ... (the race moves with it).  A kr_gpu_status_t. */
int gpu_standin_launch(const kernel_desc_t *k, const kernel_options_t *kopt,
                       const kr_gpu_operands_t *o, int matrix, const char *fault, int launch);

#endif
