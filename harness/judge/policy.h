/* Policies: the thresholds a gate applies per kernel x reference x band
 * (cases/policies/NAME.yaml; format and examples in cases/suites/README.md).
 *
 *     policy: default
 *     margin: 2.0            # calibration margin: a calibrated threshold = margin x the p99.9
 *                            # of the metric over clean runs (informational here; default 2.0)
 *     rules:                 # first match wins; kernel, reference, band are fnmatch globs
 *       - kernel: "w4a8.*"   #   (each defaults to "*")
 *         reference: R_exact
 *         band: "*"
 *         rel_fro: 0.0035    # required: max rel_fro
 *         worst_row_rel: 0.006   # optional: max worst-row relative error
 *         max_ulp: 2         # optional: max bf16 ULP distance vs the bf16-rounded reference
 *         identical_min: 0.97    # optional: min bit-identical fraction
 *         nonfinite: forbid  # forbid (default) | allow: non-finite outputs from finite inputs
 *         bias_z: 8          # optional: rounding-bias limits (see policy_rule_t; root-level
 *         bias_frac: 0.25    #   bias_z / bias_frac / bias_share set the defaults of every rule)
 *         bias_share: 0.001
 *
 * A (kernel, reference) that no rule matches falls back to a DERIVED rule
 * (policy_derived_rule), in the spirit of composable_kernel's check_err,
 * which sets a relative tolerance from the formats' mantissa bits and the
 * number of accumulations.  With u(m) = 2^-(m+1), the unit roundoff of a
 * format with m explicit mantissa bits (bf16 m=7: 2^-8; fp32 m=23: 2^-24;
 * fp8 e4m3 m=3: 2^-4; e2m1 m=1: 2^-2):
 *
 *     rel_fro(R_exact,  K) = u(out) + K * u(acc)                = 2^-8 + K * 2^-24
 *     rel_fro(R_source, K) = u(out) + K * u(acc) + u(act)
 *     rel_fro(x)           = u(act)          (quant.* kernels: dequantized operands vs x, no sum)
 *     out_rerun            : rel_fro 0 and identical_min 1 (a rerun must be bit-identical)
 *
 * u(out): the output is rounded once to bf16.  K * u(acc): the worst-case
 * growth of an fp32 sum of K terms (check_err's acc_error, linear in the
 * number of accumulations).  R_exact sees the kernel's own quantized
 * operands, whose products are exact in fp32, so the input formats do not
 * enter it (W4A4 and W4A8 get the same R_exact bound); R_source adds the
 * activation format's quantization error u(act): e4m3 (W4A8) 2^-4, e2m1
 * (W4A4) 2^-2, bf16 (the bf16 kernels) 2^-8.  Where composable_kernel takes
 * max(midway, acc), the derived rule adds the terms: each is a separate
 * error source of the same row.  Derived rules check rel_fro and non-finite
 * outputs (forbid) only; worst_row_rel, max_ulp and identical_min have no
 * a-priori bound and come from calibrated rules in the policy file.  The
 * margin is not applied to derived rules: they are bounds, not statistics. */
#ifndef KR_POLICY_H
#define KR_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "kr_error.h"
#include "registry.h"
#include "result.h"

/* A-priori rounding-bias limits: a correctly rounding kernel's differing
 * elements split toward / away from zero like fair coin flips, so z > 8 is
 * never chance; truncation leans ~100%.  The calibration
 * (cases/policies/default-calibration.md) measures the clean models' largest. */
#define POLICY_BIAS_Z_DEFAULT 8.0
#define POLICY_BIAS_FRAC_DEFAULT 0.25
/* ... and the lean must matter: the net count pushed to one side over more
 * than bias_share of all compared outputs, unless the outputs fit a rounding
 * other than nearest-even.  Hopper's matrix units round a few internal sums
 * toward zero (a real triton dot_scaled leaned 1078:514 over 21 million
 * outputs, 2.7e-5 of them): statistically certain, of no consequence. */
#define POLICY_BIAS_SHARE_DEFAULT 0.001

typedef enum {
    POLICY_NONFINITE_FORBID = 0,
    POLICY_NONFINITE_ALLOW,
} policy_nonfinite_t;

typedef struct {
    char kernel[96];            /* fnmatch glob over kernel names (registry names and recorded.*) */
    char reference[32];         /* glob over R_exact, R_source, out_rerun, x, model:NAME */
    char band[16];              /* glob over decode, mid, prefill, tiled */
    double rel_fro;             /* max rel_fro */
    double worst_row_rel;       /* max worst_row_rel; NaN = not checked */
    int64_t max_ulp;            /* max bf16 ULP distance; -1 = not checked */
    double identical_min;       /* min identical fraction; NaN = not checked */
    policy_nonfinite_t nonfinite;
    /* Rounding bias (R_exact and model: rows): the row fails when the
     * elements that differ from the reference lean to one side by more than
     * bias_z standard deviations AND by more than bias_frac of them
     * (|toward - away| / (toward + away)), AND the net lean is over bias_share
     * of all compared outputs or the outputs fit a rounding other than
     * nearest-even.  NaN = the policy's default. */
    double bias_z;
    double bias_frac;
    double bias_share;
    int line;                   /* 1-based line of the rule in its file; 0 = derived */
    char origin[160];           /* "PATH:LINE", or "derived: <formula with numbers>" */
} policy_rule_t;

typedef struct {
    char *path;
    char *name;
    char *description;          /* "" when absent */
    double margin;
    double bias_z;              /* defaults for rules without their own (POLICY_BIAS_*) */
    double bias_frac;
    double bias_share;
    policy_rule_t *rules;
    int n_rules;
    char hash[17];              /* 64-bit FNV-1a of the file bytes, hex */
} policy_t;

/* A rule for (kernel, reference) over every band that checks nothing but
 * non-finite outputs and the a-priori rounding-bias limits: the start of every
 * parsed, derived and fallback rule. */
void policy_rule_init(policy_rule_t *rule, const char *kernel, const char *reference);

/* Loads and validates a policy file.  Returns 0, or -1 with err in the form
 * "PATH:LINE: what is wrong; expected what" (unknown keys, wrong types, a
 * missing required key, a kernel / reference / band glob that matches
 * nothing, negative thresholds, identical_min outside [0, 1], margin < 1). */
int policy_load(const char *path, policy_t *p, kr_error_t *err);
int policy_load_bytes(const char *name, const char *bytes, size_t len, policy_t *p, kr_error_t *err);
void policy_free(policy_t *p);

/* The first rule whose three globs match, or NULL. */
const policy_rule_t *policy_match(const policy_t *p, const char *kernel, const char *reference,
                                  const char *band);

/* u(out) + K u(acc) [+ u(act) when act_mant >= 0] with u(m) = 2^-(m+1). */
double policy_derived_rel(int out_mant, int acc_mant, int act_mant, int64_t K);

/* The derived rule of kernel k (bf16 output, fp32 accumulation, activation
 * bits from k->act_format, else from k->family: w4a8 3, w4a4 1, bf16 7)
 * against REFERENCE at reduction length K.  Globs are set to the exact
 * names; band "*".  Returns 0, or -1 for an unknown reference or K < 1. */
int policy_derived_rule(const kernel_desc_t *k, const char *reference, int64_t K, policy_rule_t *rule);

/* The rule for a row: the first matching rule of p (p may be NULL), else the
 * derived rule.  Rows of recorded outputs, which have no registry entry,
 * derive from the kernel the replay compares them as: recorded.aiter ->
 * w4a4.aiter, other recorded.* -> w4a8.perblock.  Returns 0, or -1 when
 * nothing matches and nothing can be derived. */
int policy_rule_for(const policy_t *p, const char *kernel, const char *reference, const char *band,
                    int64_t K, policy_rule_t *rule);


#endif
