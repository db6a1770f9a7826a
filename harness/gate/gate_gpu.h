/* A gate's GPU: `--device cpu|gpu` (over the suite's `device:`), `--gpus`,
 * `--model-rows`, the run's worker (harness/engine/gpu_setup.h), and how
 * many lanes its cases spread over (gate_lanes.h). */
#ifndef KR_GATE_GPU_H
#define KR_GATE_GPU_H

#include "gate.h"
#include "gpu_setup.h"
#include "replay.h"

/* The replay options' device and model check, and the worker they need
 * (started in the background; a GPU run waits for its device here).  -1
 * with err naming the suite and why. */
int gate_gpu_setup(const char *suite_path, const char *suite_device, const gate_options_t *o,
                   replay_options_t *ropt, gpu_list_t *gpus, kr_error_t *err);

/* The GPUs the cases go to: --gpus' entries, else every GPU the worker sees
 * (one lane each); 1 for a CPU run.  devices[GPU_LIST_MAX]. */
int gate_gpu_lanes(replay_options_t *ropt, const gpu_list_t *gpus, int *devices);

/* The device the results record: --device, else the suite's. */
const char *gate_gpu_device_name(const gate_options_t *o, const char *suite_device);

#endif
