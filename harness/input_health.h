/* Health of a case's activations: where the non-finite values are. */
#ifndef KR_INPUT_HEALTH_H
#define KR_INPUT_HEALTH_H

#include <stdint.h>

#include "case.h"
#include "metrics.h"

typedef struct {
    nonfinite_t x_nf;        /* of x (if present) */
    int64_t x_fp8_nan;       /* NaN codes in the recorded x_fp8 (if present) */
    int64_t x_scale_nonfinite;
    int64_t rows_hit, cols_hit;     /* rows / columns of x with any non-finite element */
} input_health_t;

void input_health_compute(const case_t *c, input_health_t *h);

/* One line, e.g. "x: 2176 non-finite (2176 NaN) in 17 rows x 128 columns". */
void input_health_describe(const input_health_t *h, char *buf, int cap);

#endif
