#include "verdict.h"

#include <stdio.h>

int64_t nonfinite_total(const nonfinite_t *nf)
{
    return nf->nan + nf->pos_inf + nf->neg_inf;
}

verdict_t verdict_decide(const metrics_t *m, const nonfinite_t *input_nf, double threshold,
                         char *note, int cap)
{
    const int64_t in_bad = nonfinite_total(input_nf);
    const int64_t out_bad = nonfinite_total(&m->out_nf);
    const int64_t ref_bad = nonfinite_total(&m->ref_nf);
    const int over = !(m->rel_fro <= threshold); /* NaN rel_fro counts as over */
    const int magnitude = m->mag_ratio < 1.0 / MAGNITUDE_FACTOR || m->mag_ratio > MAGNITUDE_FACTOR;

    /* A poisoned input decides the row: the kernel may be faithful to
     * garbage, so the note carries the numbers and the verdict says where
     * the fault is. */
    if (in_bad) {
        snprintf(note, (size_t)cap,
                 "input has %lld non-finite (%lld NaN, %lld +Inf, %lld -Inf); output %lld non-finite; "
                 "on finite pairs rel %.4g, |out|/|ref| %.4g",
                 (long long)in_bad, (long long)input_nf->nan, (long long)input_nf->pos_inf,
                 (long long)input_nf->neg_inf, (long long)out_bad, m->rel_fro, m->mag_ratio);
        return VERDICT_POISONED_INPUT;
    }
    if (over && m->finite_count > 0) {
        if (magnitude) {
            snprintf(note, (size_t)cap, "rel %.4g > %.4g and |out|/|ref| = %.4g: a scale or layout error",
                     m->rel_fro, threshold, m->mag_ratio);
            return VERDICT_MAGNITUDE;
        }
        snprintf(note, (size_t)cap, "rel %.4g > %.4g", m->rel_fro, threshold);
        return VERDICT_WRONG;
    }
    if (out_bad > ref_bad) {
        snprintf(note, (size_t)cap, "%lld non-finite outputs (%lld NaN, %lld +Inf, %lld -Inf) from finite input",
                 (long long)out_bad, (long long)m->out_nf.nan, (long long)m->out_nf.pos_inf,
                 (long long)m->out_nf.neg_inf);
        return VERDICT_NONFINITE_OUT;
    }
    if (over) {
        snprintf(note, (size_t)cap, "no finite element to compare");
        return VERDICT_WRONG;
    }
    snprintf(note, (size_t)cap, "rel %.4g <= %.4g", m->rel_fro, threshold);
    return VERDICT_PASS;
}
