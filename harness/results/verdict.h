/* Constants and helpers of the verdicts; the judgement itself is judge.h. */
#ifndef KR_VERDICT_H
#define KR_VERDICT_H

#include "metrics.h"
#include "result.h"

/* |out|/|ref| outside [1/MAGNITUDE_FACTOR, MAGNITUDE_FACTOR] with an error
 * over threshold is a scale or layout bug, not an accuracy problem. */
#define MAGNITUDE_FACTOR 2.0

/* Total of a nonfinite_t. */
int64_t nonfinite_total(const nonfinite_t *nf);

#endif
