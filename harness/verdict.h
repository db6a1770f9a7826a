/* From metrics to a disposition, with a one-line reason. */
#ifndef KR_VERDICT_H
#define KR_VERDICT_H

#include "metrics.h"
#include "result.h"

/* |out|/|ref| outside [1/MAGNITUDE_FACTOR, MAGNITUDE_FACTOR] with an error
 * over threshold is a scale or layout bug, not an accuracy problem. */
#define MAGNITUDE_FACTOR 2.0

/* input_nf: non-finite elements of the activations the kernel consumed. */
verdict_t verdict_decide(const metrics_t *m, const nonfinite_t *input_nf, double threshold,
                         char *note, int cap);

/* Total of a nonfinite_t. */
int64_t nonfinite_total(const nonfinite_t *nf);

#endif
