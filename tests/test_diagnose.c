/* ctest-labels: blas-bits */
/* Diagnosis hypotheses, each proven by injecting exactly the fault it names:
 * a synthetic case is run through a registry model with the fault, R_exact
 * (or R_source) is built the way replay builds it (fp32 GEMM on the
 * harness's own activations), and diagnose() must name the fault.  A clean
 * run gets no diagnosis, and an unrelated corruption matches nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_prepare.h"
#include "case_io.h"
#include "diagnose.h"
#include "fault_inject.h"
#include "formats.h"
#include "gemm_ref.h"
#include "mxfp4_weight.h"
#include "replay.h"
#include "synth.h"
#include "test_main.h"
#include "test_support.h"

typedef struct {
    case_t c;
    uint8_t *weight_owned;
    kernel_inputs_t in;
    kernel_options_t kopt;
    const kernel_desc_t *k;
    kernel_act_t act;           /* the harness's activations (R_exact's operand) */
    float *ref;                 /* [M, N] */
    const char *ref_name;
    double threshold;
    uint16_t *bits;             /* the kernel's output */
    float *out;
} scenario_t;

typedef struct {
    const char *kernel;
    int64_t M, N, K;
    int64_t nan_rows, nan_cols, nan_col0;
    scale_layout_t layout;
    weight_order_t order;
    int source;                 /* compare against R_source instead of R_exact */
    int traced;                 /* quantize x the 'traced' way (NaN poisons the row's operands) */
} setup_t;

static void setup_defaults(setup_t *s, const char *kernel)
{
    memset(s, 0, sizeof *s);
    s->kernel = kernel;
    s->M = 8;
    s->N = 64;
    s->K = 256;
}

static setup_t setup_for(const char *kernel)
{
    setup_t s;
    setup_defaults(&s, kernel);
    return s;
}

/* A NaN block: rows 0..rows-1 x columns col0..col0+cols-1 of x. */
static void setup_nan(setup_t *s, int64_t rows, int64_t cols, int64_t col0)
{
    s->nan_rows = rows;
    s->nan_cols = cols;
    s->nan_col0 = col0;
}

/* The default w4a8.perblock case with a NaN block (setup_nan), judged
 * against R_source when `source`: the poisoned-input scenarios. */
static setup_t setup_nan_case(int64_t rows, int64_t cols, int64_t col0, int source)
{
    setup_t s = setup_for("w4a8.perblock");
    setup_nan(&s, rows, cols, col0);
    s.source = source;
    return s;
}

static void scenario_build(scenario_t *s, const setup_t *p)
{
    memset(s, 0, sizeof *s);
    synth_params_t sp;
    synth_params_default(&sp);
    sp.M = p->M;
    sp.N = p->N;
    sp.K = p->K;
    sp.seed = 7;
    sp.nan_rows = p->nan_rows;
    sp.nan_cols = p->nan_cols;
    sp.nan_col0 = p->nan_col0;
    sp.scale_layout = p->layout;
    sp.weight_order = p->order;
    kr_error_t err = {{0}};
    assert_int_equal(synth_case(&sp, &s->c, &err), 0);
    const uint8_t *w = case_weight_checkpoint(&s->c, &s->weight_owned, &err);
    assert_non_null(w);
    s->in = (kernel_inputs_t){
        .M = p->M, .N = p->N, .K = p->K,
        .x = s->c.x, .x_fp8 = s->c.x_fp8, .x_scale = s->c.x_scale,
        .x_fp8_format = s->c.x_fp8_format,
        .weight = {.packed = w, .scales = s->c.weight_scale, .layout = s->c.scale_layout,
                   .e8m0_mode = E8M0_SPEC, .N = p->N, .K = p->K},
        .weight_ref = s->c.weight_ref, .weight_ref_len = s->c.weight_ref_len,
    };
    kernel_options_default(&s->kopt);
    s->kopt.threads = 1;
    if (p->traced) {
        s->kopt.fp8_variant = FP8_TOKEN_TRACED;
        s->kopt.act_source = ACT_SOURCE_QUANTIZE;
    }
    s->k = kernel_find(p->kernel);
    assert_non_null(s->k);
    assert_int_equal(s->k->prepare_act(s->k, &s->in, &s->kopt, &s->act, &err), 0);
    const int64_t MN = p->M * p->N;
    s->ref = malloc((size_t)MN * sizeof(float));
    s->bits = malloc((size_t)MN * sizeof(uint16_t));
    s->out = malloc((size_t)MN * sizeof(float));
    assert_non_null(s->ref);
    if (p->source) {
        assert_int_equal(gemm_ref_f32(s->in.x, p->M, &s->in.weight, 0, s->ref, &err), 0);
        s->ref_name = "R_source";
        s->threshold = s->k->rel_tol_source;
    } else {
        assert_int_equal(gemm_ref_f32(s->act.dequant, p->M, &s->in.weight, 0, s->ref, &err), 0);
        s->ref_name = "R_exact";
        s->threshold = s->k->rel_tol_exact;
    }
}

/* Runs the kernel with `spec` injected ("none" = clean) and decodes the output. */
static void scenario_run(scenario_t *s, const char *spec)
{
    kr_error_t err = {{0}};
    kernel_run_info_t info = {{0}};
    fault_t f = {0};
    if (strcmp(spec, "none") != 0)
        assert_int_equal(fault_parse(spec, &f, &err), 0);
    if (f.kind == FAULT_NONE)
        assert_int_equal(s->k->run_cpu(s->k, &s->in, &s->act, &s->kopt, s->bits, &info, &err), 0);
    else if (fault_run_kernel(&f, s->k, &s->in, &s->kopt, &s->act, s->bits, &info, &err)) {
        print_error("%s\n", err.msg);
        fail();
    }
    for (int64_t i = 0; i < s->in.M * s->in.N; i++)
        s->out[i] = bf16_decode(s->bits[i]);
}

/* The scenario of p, run with `spec`. */
static void scenario_start(scenario_t *s, const setup_t *p, const char *spec)
{
    scenario_build(s, p);
    scenario_run(s, spec);
}

static void scenario_diagnose(scenario_t *s, const char *kernel_name, diag_result_t *r)
{
    diag_input_t d = {
        .c = &s->c, .in = &s->in, .act = &s->act, .kernel = kernel_name ? kernel_name : s->k->name,
        .out = s->out, .ref = s->ref, .ref_name = s->ref_name, .threshold = s->threshold,
        .kopt = &s->kopt,
    };
    kr_error_t err = {{0}};
    assert_int_equal(diagnose(&d, r, &err), 0);
}

/* The scenario of p run with `spec`, and its output diagnosed as it is. */
static void diagnosed(scenario_t *s, const setup_t *p, const char *spec, diag_result_t *r)
{
    scenario_start(s, p, spec);
    scenario_diagnose(s, NULL, r);
}

/* The 3-row NaN head judged against R_source (non-finite on those rows),
 * run with `spec` and diagnosed. */
static void diagnosed_nan_head_source(scenario_t *s, const char *spec, diag_result_t *r)
{
    setup_t p = setup_nan_case(3, 32, 64, 1);
    diagnosed(s, &p, spec, r);
}

static void scenario_free(scenario_t *s)
{
    kernel_act_free(&s->act);
    TEST_FREE_ALL(s->ref, s->bits, s->out, s->weight_owned);
    case_free(&s->c);
}

static void expect(const diag_result_t *r, diag_hypothesis_t h, const char *phrase)
{
    if (getenv("KREPLAY_TEST_VERBOSE"))
        fprintf(stderr, "  [%s, %d GEMMs] %s\n", diag_hypothesis_name(r->hypothesis), r->gemms,
                r->line);
    if (!r->matched || r->hypothesis != h || !strstr(r->line, phrase)) {
        print_error("want %s containing \"%s\"\n got matched=%d %s: %s\n", diag_hypothesis_name(h),
                    phrase, r->matched, diag_hypothesis_name(r->hypothesis), r->line);
        fail();
    }
}

/* The default w4a8.perblock scenario with M rows (0: the default), built,
 * and run clean unless only `built`: the hand-made outputs start here. */
static setup_t perblock_scenario(scenario_t *s, int64_t M, int built)
{
    setup_t p = setup_for("w4a8.perblock");
    p.M = M ? M : p.M;
    if (built)
        scenario_build(s, &p);
    else
        scenario_start(s, &p, "none");
    return p;
}

/* The scenario's output diagnosed as it is: hypothesis h, its line naming `phrase`. */
static diag_result_t diagnosis_is(scenario_t *s, diag_hypothesis_t h, const char *phrase)
{
    diag_result_t r;
    scenario_diagnose(s, NULL, &r);
    expect(&r, h, phrase);
    return r;
}

/* Injects `spec` into `kernel` on the setup and expects hypothesis h naming `phrase`. */
static void prove(const setup_t *p, const char *spec, diag_hypothesis_t h, const char *phrase)
{
    scenario_t s;
    scenario_start(&s, p, spec);
    const diag_result_t r = diagnosis_is(&s, h, phrase);
    assert_true(r.rel <= s.threshold);
    assert_true(r.base_rel > s.threshold || r.base_nonfinite_mismatch > 0);
    scenario_free(&s);
}

/* ---- clean rows ---- */

static void test_clean_gets_no_diagnosis(void **state)
{
    (void)state;
    const char *kernels[] = {"w4a8.perblock", "w4a4.aiter"};
    for (int i = 0; i < 2; i++) {
        for (int source = 0; source < 2; source++) {
            for (int nan = 0; nan < 2; nan++) {
                if (source && nan)
                    continue;   /* R_source of NaN input is non-finite: covered below */
                setup_t p = setup_for(kernels[i]);
                p.source = source;
                if (nan) {
                    setup_nan(&p, 3, 32, 64);
                }
                scenario_t s;
                diag_result_t r;
                diagnosed(&s, &p, "none", &r);
                if (r.matched || r.hypothesis != DIAG_CLEAN ||
                    !strstr(r.line, "no hypothesis needed")) {
                    print_error("%s source=%d nan=%d: %s\n", kernels[i], source, nan, r.line);
                    fail();
                }
                assert_int_equal(r.gemms, 0);
                scenario_free(&s);
            }
        }
    }
}

/* ---- every injected fault named: one line per proof ---- */

/* A fault injected into a registry model on a small case, and what the
 * diagnosis must say.  M, N 0: the default 8 x 64; nan_rows > 0: a NaN block
 * rows 0..nan_rows-1 x columns nan_col0..+nan_cols. */
typedef struct {
    const char *kernel;
    int64_t M, N, nan_rows, nan_cols, nan_col0;
    scale_layout_t layout;
    int source;
    const char *spec;
    diag_hypothesis_t h;
    const char *phrase;
} proof_t;

static const proof_t proofs[] = {
    /* a: weight order (against R_source too, with its looser threshold) */
    {"w4a8.perblock", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "wperm", DIAG_WPERM_UNDONE,
     "the kernel read checkpoint-order weights as fragment order (WPERM flag mismatch)"},
    {"w4a8.perblock", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 1, "wperm", DIAG_WPERM_UNDONE,
     "matches R_source on unpermute_w(W)"},
    {"w4a4.aiter", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "wperm-inverse", DIAG_WPERM_APPLIED,
     "the kernel read fragment-order weights as checkpoint order"},
    /* b: scale layout, either way */
    {"w4a8.perblock", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "scale-layout", DIAG_SCALE_LAYOUT,
     "the scales read as [K/32, N] instead of [N, K/32]"},
    {"w4a8.perblock", 0, 0, 0, 0, 0, SCALE_LAYOUT_KN, 0, "scale-layout", DIAG_SCALE_LAYOUT,
     "the scales read as [N, K/32] instead of [K/32, N]"},
    /* c, d: scale factors; a power of two is not a "constant factor" */
    {"w4a8.perblock", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "scale-pow2:3", DIAG_SCALE_POW2,
     "a scale off by 2^3: x_scale or block exponent bias"},
    {"w4a8.perblock", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "scale-pow2:-2", DIAG_SCALE_POW2,
     "out = 2^-2 x R_exact"},
    {"w4a4.aiter", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "scale-pow2:1", DIAG_SCALE_POW2, "off by 2^1"},
    {"w4a8.perblock", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "scale-const:0.02857142857",
     DIAG_SCALE_CONST, "|out| is 1/35.0 of R_exact"},
    {"w4a8.perblock", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "scale-const:3", DIAG_SCALE_CONST,
     "a scale off by a constant factor"},
    {"w4a8.perblock", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "scale-const:0.25", DIAG_SCALE_POW2,
     "off by 2^-2"},
    /* e: sanitized input */
    {"w4a8.perblock", 0, 0, 3, 32, 64, SCALE_LAYOUT_NK, 0, "sanitize", DIAG_SANITIZED,
     "matches R_exact on sanitized x: the kernel zeroed non-finite inputs"},
    /* f: another quantizer; fp8 variants differ by a code on ties, except on
     * NaN input, where 'traced' makes the whole row NaN: the operands the
     * reference was built from (the recorded codes) are finite there, so the
     * NaN rows are the kernel's own quantizer's, not poisoned input */
    {"w4a4.aiter", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "quant-variant:ocp", DIAG_QUANT_VARIANT,
     "activations were quantized with 'ocp', not 'aiter-even'"},
    {"w4a4.aiter", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "quant-variant:ceil", DIAG_QUANT_VARIANT,
     "activations were quantized with 'ceil', not 'aiter-even'"},
    {"w4a8.perblock", 0, 0, 3, 32, 64, SCALE_LAYOUT_NK, 0, "quant-variant:traced",
     DIAG_QUANT_VARIANT, "activations were quantized with 'traced', not the recorded x_fp8/x_scale"},
    /* g: NaN rows where x has NaN but the operands the reference was built
     * from ('vllm': NaN -> +448) are finite: not poisoned input; 'traced'
     * quantization reproduces the output */
    {"w4a8.perblock", 0, 0, 3, 128, 128, SCALE_LAYOUT_NK, 0, "rows-nan", DIAG_QUANT_VARIANT,
     "activations were quantized with 'traced'"},
    /* rows 0..r-1 poisoned with finite input: not the input's fault, a block of rows */
    {"w4a8.perblock", 0, 0, 0, 0, 0, SCALE_LAYOUT_NK, 0, "rows-nan:2", DIAG_ROWS,
     "rows 0-1 are wrong (all NaN"},
    /* h: tiles */
    {"w4a8.perblock", 0, 48, 0, 0, 0, SCALE_LAYOUT_NK, 0, "tile-unwritten", DIAG_COLUMNS,
     "columns 32-47 (the partial N tile: N=48 is not a multiple of 64) are wrong (all NaN"},
    {"w4a8.perblock", 0, 64, 0, 0, 0, SCALE_LAYOUT_NK, 0, "tile-zeros:16", DIAG_COLUMNS,
     "columns 48-63 (the last N tile) are wrong"},
    {"w4a8.perblock", 0, 64, 0, 0, 0, SCALE_LAYOUT_NK, 0, "tile-zeros:16", DIAG_COLUMNS, "all zero"},
};

static void test_each_fault_is_named(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof proofs / sizeof proofs[0]; i++) {
        const proof_t *f = &proofs[i];
        setup_t p = setup_for(f->kernel);
        p.M = f->M ? f->M : p.M;
        p.N = f->N ? f->N : p.N;
        p.nan_rows = f->nan_rows;
        p.nan_cols = f->nan_cols;
        p.nan_col0 = f->nan_col0;
        p.layout = f->layout;
        p.source = f->source;
        prove(&p, f->spec, f->h, f->phrase);
    }
}

/* ---- a: weight order, the case's side ---- */

/* The reverse scenario: the case stores the weight in fragment order but
 * says checkpoint.  Production's kernel read the bytes as fragment order
 * (correct), the harness's reference read them as checkpoint order. */
static void test_case_weight_fragment_but_unmarked(void **state)
{
    (void)state;
    setup_t p = setup_for("w4a8.perblock");
    p.order = WEIGHT_ORDER_FRAGMENT;
    scenario_t truth;   /* the case as it really is: its output is production's */
    scenario_build(&truth, &p);
    scenario_run(&truth, "none");

    scenario_t s;       /* the same bytes, mislabelled */
    scenario_build(&s, &p);
    free(s.weight_owned);
    s.weight_owned = NULL;
    s.c.weight_order = WEIGHT_ORDER_CHECKPOINT;
    s.in.weight.packed = s.c.weight;
    kr_error_t err = {{0}};
    assert_int_equal(gemm_ref_f32(s.act.dequant, p.M, &s.in.weight, 0, s.ref, &err), 0);
    memcpy(s.out, truth.out, (size_t)(p.M * p.N) * sizeof(float));
    diag_result_t r;
    scenario_diagnose(&s, "recorded.out", &r);
    expect(&r, DIAG_WPERM_UNDONE,
           "matches R_exact with WPERM undone");
    assert_non_null(strstr(r.line, "the case's weight is in fragment order but not marked so; "
                                   "the reference read permuted weights"));
    assert_true(r.base_rel > 1.0);      /* the "rel ~1.4" of the unpermute_w docstring */
    scenario_free(&s);
    scenario_free(&truth);
}

/* ---- e: sanitized input ---- */

static void test_sanitize(void **state)
{
    (void)state;
    scenario_t s;
    diag_result_t r;
    diagnosed_nan_head_source(&s, "sanitize", &r);
    /* R_source of NaN rows is NaN: the row is explained by the reference's poisoned rows, or by
     * sanitizing; either names the NaN rows' cause, never a weight or scale fault. */
    assert_true(r.matched);
    assert_true(r.hypothesis == DIAG_REF_ROWS_POISONED || r.hypothesis == DIAG_SANITIZED);
    scenario_free(&s);
}

/* The converse: the reference's activations were sanitized, the kernel's not. */
static void test_unsanitized(void **state)
{
    (void)state;
    setup_t p = setup_nan_case(2, 16, 8, 0);
    scenario_t s;
    scenario_start(&s, &p, "none");   /* the kernel on the recorded (unsanitized) x_fp8 */
    /* The harness's act from sanitized x, and R_exact from it. */
    float *clean = malloc((size_t)(p.M * p.K) * sizeof(float));
    for (int64_t i = 0; i < p.M * p.K; i++)
        clean[i] = isfinite(s.c.x[i]) ? s.c.x[i] : 0.0f;
    kernel_inputs_t in2 = s.in;
    in2.x = clean;
    kernel_options_t o2 = s.kopt;
    o2.act_source = ACT_SOURCE_QUANTIZE;
    kernel_act_free(&s.act);
    kr_error_t err = {{0}};
    assert_int_equal(s.k->prepare_act(s.k, &in2, &o2, &s.act, &err), 0);
    assert_int_equal(gemm_ref_f32(s.act.dequant, p.M, &s.in.weight, 0, s.ref, &err), 0);
    diagnosis_is(&s, DIAG_UNSANITIZED, "matches R_exact on unsanitized x");
    free(clean);
    scenario_free(&s);
}

/* ---- g: poisoned rows ---- */

/* R_source of a NaN row is NaN while vLLM's quantizer made the kernel's row finite. */
static void test_reference_rows_poisoned(void **state)
{
    (void)state;
    scenario_t s;
    diag_result_t r;
    diagnosed_nan_head_source(&s, "none", &r);
    expect(&r, DIAG_REF_ROWS_POISONED, "R_source is non-finite on rows 0-2");
    /* the quantizer actually used is named, not a fixed one */
    if (!strstr(r.line, "the kernel's activations (recorded x_fp8/x_scale) hold finite codes on those rows"))
        fail_msg("%s", r.line);
    scenario_free(&s);
}

/* ---- nothing matches; budget ---- */

static void test_unrelated_corruption_matches_nothing(void **state)
{
    (void)state;
    scenario_t s;
    const setup_t p = perblock_scenario(&s, 0, 0);
    test_rng_t rng = {42};
    for (int64_t i = 0; i < p.M * p.N; i++)
        s.out[i] = (float)test_rng_normal(&rng) * fabsf(s.ref[i] + 1e-3f);
    diag_result_t r;
    scenario_diagnose(&s, NULL, &r);
    if (r.matched) {
        print_error("unexpected match: %s\n", r.line);
        fail();
    }
    assert_int_equal(r.hypothesis, DIAG_NONE);
    assert_false(r.checked);
    /* what is known for certain, no guessed cause */
    assert_non_null(strstr(r.line, "no hypothesis reproduces the output ("));
    assert_non_null(strstr(r.line, "grammar primitives"));
    assert_non_null(strstr(r.line, "; where: every row x every column"));
    assert_non_null(strstr(r.line, "; how much: rel "));
    /* wperm x2 + scale-layout; sanitize needs non-finite x; the fp8 variants whose codes differ
     * from the recorded (vllm) ones: vllm itself is skipped without a GEMM, and on this data
     * traced or pure may give the very same codes. */
    assert_true(r.gemms >= 2 + 1 && r.gemms <= 2 + 1 + 3);
    scenario_free(&s);
}

/* Input is blamed only where the kernel's own operands are non-finite.  The
 * 17 x 128 NaN head makes every row of x NaN; the 'vllm' quantizer maps it
 * to finite codes (+448), so a kernel that writes NaN everywhere made the
 * NaN itself: no "poisoned input", and no hypothesis reproduces it (NaN
 * agreeing with NaN proves no reading).  With the 'traced' quantizer the
 * operands are NaN on those rows, and a kernel that propagates it is not to
 * blame, and is said not to be. */
static void test_nan_head_blames_input_only_when_operands_are(void **state)
{
    (void)state;
    setup_t p = setup_for("w4a8.perblock");
    p.M = 17;
    setup_nan(&p, 17, 128, 128);
    scenario_t s;
    scenario_start(&s, &p, "rows-nan:17");
    for (int64_t i = 0; i < p.M * p.N; i++)
        assert_true(isnan(s.out[i]));
    for (int64_t i = 0; i < p.M * p.K; i++)
        assert_true(isfinite(s.act.dequant[i]));
    diag_result_t r;
    scenario_diagnose(&s, NULL, &r);
    if (strstr(r.line, "poisoned input") || r.matched || r.checked)
        fail_msg("%s", r.line);
    assert_non_null(strstr(r.line, "no hypothesis reproduces the output"));
    assert_non_null(strstr(r.line, "1088 non-finite where R_exact is finite"));
    scenario_free(&s);

    p.traced = 1;
    p.M = 24;
    scenario_start(&s, &p, "none");
    scenario_diagnose(&s, NULL, &r);
    expect(&r, DIAG_ROWS_POISONED, "not the kernel: rows 0-16 (x: rows 0-16 x columns 128-255 (17 x 128 = "
                                   "2176 NaN)) have NaN input, and the output and R_exact are non-finite on "
                                   "exactly those rows");
    scenario_free(&s);
}

/* The GEMM-costing hypotheses stop at the budget.  A sanitizing kernel on a
 * NaN case: the finite rows match, so only the hypotheses about the
 * poisoned input remain, and wperm (2 GEMMs) comes before sanitize. */
static void test_gemm_budget(void **state)
{
    (void)state;
    setup_t p = setup_nan_case(3, 32, 64, 0);
    scenario_t s;
    scenario_start(&s, &p, "sanitize");
    diag_input_t d = {.c = &s.c, .in = &s.in, .act = &s.act, .kernel = s.k->name, .out = s.out,
                      .ref = s.ref, .ref_name = s.ref_name, .threshold = s.threshold,
                      .kopt = &s.kopt, .max_gemms = 2};
    diag_result_t r;
    kr_error_t err = {{0}};
    assert_int_equal(diagnose(&d, &r, &err), 0);
    /* The quantizer ('vllm') maps the NaN to finite codes, so the rows are
     * judged: they are the place found, and no more is claimed. */
    assert_int_equal(r.gemms, 2);
    assert_int_equal(r.hypothesis, DIAG_ROWS);
    assert_false(r.checked);
    assert_non_null(strstr(r.line, "rows 0-2 are wrong"));
    assert_non_null(strstr(r.line, "GEMM budget of 2 spent"));
    d.max_gemms = 4;
    assert_int_equal(diagnose(&d, &r, &err), 0);
    expect(&r, DIAG_SANITIZED, "matches R_exact on sanitized x");
    scenario_free(&s);
}


/* ---- the general engine: factors, K blocks, places, misreads ---- */

/* An exact factor of 2 is MAGNITUDE with 2^-1 whichever side of 0.5 the
 * rounding noise leaves |out|/|ref| (0.4998 and 0.5001 both). */
static void test_pow2_through_rounding_noise(void **state)
{
    (void)state;
    scenario_t s;
    const setup_t p = perblock_scenario(&s, 0, 0);
    const double tilt[2] = {0.9996, 1.0002};
    for (int t = 0; t < 2; t++) {
        double oo = 0, rr = 0;
        for (int64_t i = 0; i < p.M * p.N; i++) {
            /* bf16 output of a kernel whose result is exactly half: the reference halved,
             * tilted by a hair and rounded to bf16 (round to nearest even). */
            s.out[i] = bf16_decode(bf16_encode((float)(0.5 * tilt[t] * s.ref[i])));
            oo += (double)s.out[i] * s.out[i];
            rr += (double)s.ref[i] * s.ref[i];
        }
        const double ratio = sqrt(oo / rr);
        assert_true(t == 0 ? ratio < 0.5 : ratio > 0.5);
        const diag_result_t r = diagnosis_is(&s, DIAG_SCALE_POW2, "out = 2^-1 x R_exact");
        assert_int_equal(diag_refine_verdict(&r, VERDICT_WRONG), VERDICT_MAGNITUDE);
        assert_int_equal(diag_refine_verdict(&r, VERDICT_PASS), VERDICT_PASS);
    }
    scenario_free(&s);
}

/* out = R_exact minus K block j's partial product, that product computed
 * here in fp64 from the dequantized operands: the K fit names block j. */
static void test_k_block_missing(void **state)
{
    (void)state;
    scenario_t s;
    const setup_t p = perblock_scenario(&s, 16, 1);
    const int64_t K = p.K, N = p.N, j = 3;
    float *w = malloc((size_t)K * sizeof(float));
    for (int64_t n = 0; n < N; n++) {
        mxfp4_dequant_row(s.in.weight.packed, s.in.weight.scales, s.in.weight.layout, N, K, n,
                          E8M0_SPEC, w);
        for (int64_t m = 0; m < p.M; m++) {
            double part = 0;
            for (int64_t k = 32 * j; k < 32 * j + 32; k++)
                part += (double)s.act.dequant[m * K + k] * w[k];
            s.out[m * N + n] = bf16_decode(bf16_encode((float)(s.ref[m * N + n] - part)));
        }
    }
    free(w);
    diagnosis_is(&s, DIAG_K_BLOCKS, "block 3 (k 96-127) missing");
    scenario_free(&s);
}

/* Odd rows negated, and one element of an odd row left right (a near-miss):
 * the pattern is still "the odd rows", judged per row. */
static void test_parity_rows_with_near_miss(void **state)
{
    (void)state;
    scenario_t s;
    const setup_t p = perblock_scenario(&s, 12, 0);
    for (int64_t m = 1; m < p.M; m += 2)
        for (int64_t n = 0; n < p.N; n++)
            s.out[m * p.N + n] = -s.out[m * p.N + n];
    s.out[3 * p.N + 7] = -s.out[3 * p.N + 7];
    const diag_result_t r = diagnosis_is(&s, DIAG_ROWS, "the odd rows are wrong (negated: out = -R_exact there");
    /* a place and what reproduces it there, no guessed cause */
    assert_true(r.checked);
    assert_null(strstr(r.line, "unwritten"));
    assert_null(strstr(r.line, "masked"));
    assert_null(strstr(r.line, "inputs"));
    scenario_free(&s);

    /* rows 4-7 wrong by an arbitrary amount: the place, unchecked, and nothing else */
    const setup_t q = perblock_scenario(&s, 12, 0);
    test_rng_t rng = {7};
    for (int64_t m = 4; m < 8; m++)
        for (int64_t n = 0; n < q.N; n++)
            s.out[m * q.N + n] *= (float)(1.0 + 0.5 * test_rng_normal(&rng));
    diag_result_t any;
    scenario_diagnose(&s, NULL, &any);
    if (!strstr(any.line, "rows 4-7") || any.checked || strstr(any.line, "unwritten") || strstr(any.line, "tile "))
        fail_msg("%s", any.line);
    scenario_free(&s);
}

/* A grammar primitive (the misread table's 'e2m1-sign'), by hand: the e2m1
 * sign ignored, computed here from the codes in fp64 (not by the engine's
 * evaluator). */
static void test_misread_sign_by_hand(void **state)
{
    (void)state;
    scenario_t s;
    const setup_t p = perblock_scenario(&s, 0, 1);
    const int64_t K = p.K, N = p.N;
    for (int64_t m = 0; m < p.M; m++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) {
                const uint8_t code = mxfp4_code_at(s.in.weight.packed, K, n, k) & 7;
                const uint8_t e = mxfp4_scale_at(s.in.weight.scales, s.in.weight.layout, N, K, n,
                                                 k / 32);
                acc += (double)s.act.dequant[m * K + k] * e2m1_decode(code) * ldexp(1.0, e - 127);
            }
            s.out[m * N + n] = bf16_decode(bf16_encode((float)acc));
        }
    const diag_result_t r = diagnosis_is(&s, DIAG_GRAMMAR, "operand misread 'e2m1-sign'");
    assert_int_equal(diag_refine_verdict(&r, VERDICT_MAGNITUDE), VERDICT_WRONG);
    /* summed in fp64, not in the per-block order: the line says how it was
     * checked (bit for bit where the roundings agree, else within the threshold) */
    assert_true(r.checked);
    assert_non_null(strstr(r.line, "(checked: "));
    scenario_free(&s);
}

/* On a NaN-head case the finite rows are judged apart: a fault there is
 * named, after what was done with the poisoned rows. */
static void test_finite_part_of_poisoned_case(void **state)
{
    (void)state;
    setup_t p = setup_nan_case(4, 32, 64, 0);
    p.M = 12;
    p.traced = 1;       /* the kernel's own operands are NaN on rows 0-3: those are judged apart */
    scenario_t s;
    scenario_start(&s, &p, "none");
    for (int64_t m = 4; m < p.M; m++)
        for (int64_t n = 0; n < p.N; n++)
            s.out[m * p.N + n] = bf16_decode(bf16_encode(0.25f * s.ref[m * p.N + n]));
    diagnosis_is(&s, DIAG_SCALE_POW2, "rows 0-3: NaN input, judged apart; on the finite rows: out = 2^-2");
    scenario_free(&s);
}

/* ---- fault strings ---- */

static void test_fault_parse(void **state)
{
    (void)state;
    fault_t f;
    kr_error_t err = {{0}};
    assert_int_equal(fault_parse("wperm", &f, &err), 0);
    assert_int_equal(f.kind, FAULT_WPERM_READ);
    assert_int_equal(fault_parse("scale-pow2:3", &f, &err), 0);
    assert_int_equal(f.kind, FAULT_SCALE_POW2);
    assert_true(f.param == 3);
    assert_int_equal(fault_parse("scale-pow2", &f, &err), 0);
    assert_true(f.param == 1);
    assert_int_equal(fault_parse("scale-const:0.02857", &f, &err), 0);
    assert_true(f.param == 0.02857);
    assert_int_equal(fault_parse("tile-unwritten", &f, &err), 0);
    assert_int_equal(f.kind, FAULT_TILE_UNWRITTEN);
    assert_true(f.param == 32);
    assert_int_equal(fault_parse("quant-variant:traced", &f, &err), 0);
    assert_string_equal(f.variant, "traced");
    assert_int_equal(fault_parse("quant-variant", &f, &err), 0);
    assert_string_equal(f.variant, "");
    assert_int_equal(fault_parse("sanitize", &f, &err), 0);
    assert_int_equal(fault_parse("rows-nan:4", &f, &err), 0);
    char d[160];
    fault_describe(&f, d, sizeof d);
    assert_non_null(strstr(d, "rows-nan:4"));

    const char *bad[] = {"", "nope", "wperm:1", "scale-pow2:1.5", "scale-pow2:0",
                         "scale-const:-1", "scale-const:abc", "quant-variant:fast",
                         "tile-zeros:0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = '\0';
        if (fault_parse(bad[i], &f, &err) != -1 || !err.msg[0]) {
            print_error("\"%s\" was accepted\n", bad[i]);
            fail();
        }
    }
    assert_non_null(strstr(fault_usage(), "scale-pow2"));
}

KR_TEST_MAIN(
    test_clean_gets_no_diagnosis, test_each_fault_is_named, test_case_weight_fragment_but_unmarked,
    test_sanitize, test_unsanitized, test_reference_rows_poisoned,
    test_unrelated_corruption_matches_nothing, test_gemm_budget, test_fault_parse,
    test_pow2_through_rounding_noise, test_k_block_missing, test_parity_rows_with_near_miss,
    test_misread_sign_by_hand, test_finite_part_of_poisoned_case,
    test_nan_head_blames_input_only_when_operands_are);
