/* kreplay compare: two kernels fed from the same source activations (each
 * quantizes x its own way), each against R_source and against each other,
 * aggregated per shape and M band.  The default pair is W4A8 against W4A4:
 * what running fp8 activations costs or buys against the checkpoint's
 * declared MXFP4 numerics. */
#ifndef KR_COMPARE_H
#define KR_COMPARE_H

#include <stdint.h>

#include "case.h"
#include "registry.h"
#include "policy.h"
#include "result.h"

/* Squared norms summed over cases, so a group's error is pooled
 * (sqrt(sum ||a - r||^2 / sum ||r||^2)), not an average of ratios. */
typedef struct {
    char shape[48];             /* catalogue name or "NxK" */
    int64_t N, K;
    char band[16];
    int cases;
    double a_err2, b_err2, ab_err2, ref2;   /* sums over finite elements */
    double a_exact_err2, a_exact_ref2, b_exact_err2, b_exact_ref2;
} compare_group_t;

typedef struct {
    const kernel_desc_t *a, *b;
    compare_group_t *groups;
    int count;
    int64_t cap;
    result_list_t rows;         /* per case: each kernel against R_source and its own
                                   R_exact, for the report (kreplay report's plots) */
    /* The judgement's thresholds (judge.h) for those rows: NULL = the
     * calibrated default policy, loaded on the first case into default_policy. */
    const policy_t *policy;
    policy_t default_policy;
    int default_loaded;
} compare_t;

/* Runs both kernels on one case and adds it to its (shape, band) group.
 * shape_name may be NULL ("NxK" is used).  Cases without x are refused. */
int compare_add_case(compare_t *cmp, const case_t *c, const char *shape_name,
                     const kernel_options_t *opt, kr_error_t *err);

void compare_free(compare_t *cmp);

/* Pooled relative errors of a group. */
double compare_rel(double err2, double ref2);

#endif
