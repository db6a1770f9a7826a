/* The worker a run needs, from its options (the command line, a suite):
 *   - a GPU worker (gpu_session.h) for --device gpu or a GPU plugin, on the
 *     first GPU of --gpus (else GPU 0), the stand-in with KREPLAY_GPU_STANDIN=1;
 *   - a host worker for persistent plugins (Python kernels) alone;
 *   - none otherwise.
 * And the parsing of --gpus and --model-rows, shared by replay and gate. */
#ifndef KR_GPU_SETUP_H
#define KR_GPU_SETUP_H

#include "kr_error.h"
#include "replay.h"

#define GPU_LIST_MAX 16

typedef struct {
    int n;                      /* GPUs listed; 0: every visible one */
    int index[GPU_LIST_MAX];    /* may repeat: two workers on one GPU */
} gpu_list_t;

/* "0,1,3", or "all" (every visible GPU).  -1 with err saying what was expected. */
int gpu_list_parse(const char *text, gpu_list_t *l, kr_error_t *err);

/* "all" or a row count >= 0 (0: no model check). */
int gpu_model_rows_parse(const char *text, int64_t *rows, kr_error_t *err);

/* Does a run with these options need a GPU worker? */
int gpu_setup_needs_device(const replay_options_t *opt);

/* Opens opt->gpu as the options need (NULL when they need none) and starts
 * it in the background.  -1 with err when the session cannot be made. */
int gpu_setup_open(replay_options_t *opt, int device, kr_error_t *err);

/* Waits for the device a GPU run needs: 0, or -1 with err naming why it
 * cannot be used (no GPU support built, no device, the runtime's error). */
int gpu_setup_ready(replay_options_t *opt, kr_error_t *err);

/* Ends the worker; opt->gpu NULL after. */
void gpu_setup_close(replay_options_t *opt);

#endif
