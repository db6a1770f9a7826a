/* A GPU twin against its CPU model on a sample of rows (MODEL_MISMATCH).
 * Every output row of a GEMM depends on its own activation row alone, and
 * the configuration (split-K) on the case's M, which the sample keeps: the
 * model run on the sampled rows gives exactly those rows of a run on all.
 * At prefill sizes the model costs more than everything else of a GPU run;
 * the twins are bit-identical to the models by test (tests/test_gpu.c), so
 * a run samples them; --model-rows all checks every row. */
#ifndef KR_MODEL_SAMPLE_H
#define KR_MODEL_SAMPLE_H

#include <stdint.h>

#include "kr_error.h"
#include "registry.h"

typedef struct {
    int64_t n;                  /* rows checked (0: none) */
    int64_t *rows;              /* their indices in the case, ascending */
    uint16_t *model;            /* the model's bits on them [n, N] */
    uint16_t *out;              /* the same rows of the output checked, [n, N] */
    char note[256];             /* the model's run note (kernel_run_info_t: its configuration) */
} model_sample_t;

/* The rows a sample of `want` rows of M takes: all when want < 0 or want >=
 * M, else want rows spread evenly, the first and the last included. */
int64_t model_sample_count(int64_t M, int64_t want);

/* Runs k's model on the sampled rows of (in, act).  Returns 0 (s->n 0 when
 * want is 0), or with err filled: KERNEL_RUN_UNSUPPORTED when the model
 * declines the case, -1 when it failed or memory ran out. */
int model_sample_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                     const kernel_options_t *kopt, int64_t want, model_sample_t *s, kr_error_t *err);

/* s->out: the sampled rows of an output [M, N] (-1 when out of memory). */
int model_sample_take(model_sample_t *s, const uint16_t *out, int64_t N);

void model_sample_free(model_sample_t *s);

#endif
