/* Baseline comparison (harness/judge/baseline.h): a crafted baseline and run, one
 * pair of rows per rule, each checked for its class, its note (metric,
 * values, tolerance) and what it did to the run row's verdict; matching by
 * key whatever the row order; and the same through a stored results file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baseline.h"
#include "results_store.h"
#include "test_main.h"
#include "test_support.h"

typedef struct {
    double rel_fro, worst;
    int64_t identical, count;
    uint64_t max_ulp;
    verdict_t verdict;
    int64_t out_nan;
} spec_t;

static result_t *add_row(result_list_t *l, const char *case_name, const char *kernel,
                         const char *ref, const spec_t *s)
{
    result_t *r = result_list_add(l);
    assert_non_null(r);
    snprintf(r->case_path, sizeof r->case_path, "/data/cases/%s.h5", case_name);
    snprintf(r->case_name, sizeof r->case_name, "%s", case_name);
    r->M = 64;
    r->N = 5120;
    r->K = 17408;
    snprintf(r->band, sizeof r->band, "decode");
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    snprintf(r->reference, sizeof r->reference, "%s", ref);
    r->metrics.count = s->count;
    r->metrics.finite_count = s->count;
    r->metrics.rel_fro = s->rel_fro;
    r->metrics.nmse = s->rel_fro * s->rel_fro;
    r->metrics.worst_row_rel = s->worst;
    r->metrics.out_nf.nan = s->out_nan;
    r->ulp.count = s->count;
    r->ulp.identical = s->identical;
    r->ulp.identical_frac = (double)s->identical / (double)s->count;
    r->ulp.max_ulp = s->max_ulp;
    r->ulp.bins[0] = s->identical;
    r->ulp.bins[1] = s->count - s->identical;
    r->threshold = 0.02;
    r->verdict = s->verdict;
    snprintf(r->note, sizeof r->note, "rel_fro %.3g <= threshold 0.02", s->rel_fro);
    return r;
}

/* Rows named after what happens to them. */
typedef struct {
    const char *name;
    spec_t base, run;
    baseline_class_t expect;
    const char *note1, *note2;   /* phrases the entry's note must hold */
} scenario_t;

#define P VERDICT_PASS
static const scenario_t scenarios[] = {
    {"unchanged", {1.0e-3, 2.0e-3, 900, 1000, 2, P, 0}, {1.05e-3, 2.1e-3, 895, 1000, 2, P, 0},
     BASELINE_UNCHANGED, "within tolerance", NULL},
    {"rel_fro_worse", {1.0e-3, 2.0e-3, 900, 1000, 2, P, 0}, {1.2e-3, 2.0e-3, 900, 1000, 2, P, 0},
     BASELINE_REGRESSED, "rel_fro worse: 0.0012 vs baseline 0.001",
     "allowed 0.001101 = base x 1.1 + 1e-06"},
    {"improved", {1.0e-3, 2.0e-3, 900, 1000, 2, P, 0}, {4.0e-4, 1.0e-3, 900, 1000, 2, P, 0},
     BASELINE_IMPROVED, "rel_fro better: 0.0004 vs baseline 0.001", "worst_row_rel better"},
    {"worst_row_worse", {1.0e-3, 2.0e-3, 900, 1000, 2, P, 0}, {1.0e-3, 3.0e-3, 900, 1000, 2, P, 0},
     BASELINE_REGRESSED, "worst_row_rel worse: 0.003 vs baseline 0.002", "base x 1.1 + 1e-06"},
    {"max_ulp_up", {1.0e-3, 2.0e-3, 900, 1000, 1, P, 0}, {1.0e-3, 2.0e-3, 900, 1000, 2, P, 0},
     BASELINE_REGRESSED, "max_ulp up: 2 vs baseline 1", "allowed +0"},
    /* 3 of 4M elements: a differing fraction of 7e-7, under tol.abs, yet a regression. */
    {"bit_identical_lost", {0.0, 0.0, 4194304, 4194304, 0, P, 0},
     {5e-9, 1e-8, 4194301, 4194304, 1, P, 0}, BASELINE_REGRESSED,
     "was bit-identical, now 3 elements differ", "identical 4194301 of 4194304"},
    {"verdict_fails", {1.0e-3, 2.0e-3, 900, 1000, 2, P, 0},
     {1.0e-3, 2.0e-3, 900, 1000, 2, VERDICT_WRONG, 0}, BASELINE_REGRESSED, "verdict PASS -> WRONG",
     NULL},
    {"verdict_heals", {1.0e-3, 2.0e-3, 900, 1000, 2, VERDICT_MAGNITUDE, 0},
     {1.0e-3, 2.0e-3, 900, 1000, 2, P, 0}, BASELINE_IMPROVED, "verdict MAGNITUDE -> PASS", NULL},
    {"abs_tol_holds", {0.0, 0.0, 1000, 1000, 0, P, 0}, {5e-7, 5e-7, 1000, 1000, 0, P, 0},
     BASELINE_UNCHANGED, "within tolerance (rel 0.1, abs 1e-06", NULL},
    {"abs_tol_exceeded", {0.0, 0.0, 990, 1000, 1, P, 0}, {2e-6, 0.0, 990, 1000, 1, P, 0},
     BASELINE_REGRESSED, "rel_fro worse: 2e-06 vs baseline 0", "allowed 1e-06"},
    {"now_nan", {1.0e-3, 2.0e-3, 900, 1000, 2, P, 0}, {NAN, 2.0e-3, 900, 1000, 2, P, 0},
     BASELINE_REGRESSED, "rel_fro worse: nan vs baseline 0.001", NULL},
    {"identical_frac_drop", {1.0e-3, 2.0e-3, 950, 1000, 2, P, 0},
     {1.0e-3, 2.0e-3, 900, 1000, 2, P, 0}, BASELINE_REGRESSED,
     "identical_frac dropped: 0.9 vs baseline 0.95", "allowed 0.055001"},
    {"nonfinite_up", {1.0e-3, 2.0e-3, 900, 1000, 2, P, 0}, {1.0e-3, 2.0e-3, 900, 1000, 2, P, 3},
     BASELINE_REGRESSED, "non-finite outputs up: 3 vs baseline 0", NULL},
    {"infinite_both", {1.0e-3, INFINITY, 900, 1000, 2, P, 0},
     {1.0e-3, INFINITY, 900, 1000, 2, P, 0}, BASELINE_UNCHANGED, "within tolerance", NULL},
};
#undef P
#define N_SCEN ((int)(sizeof scenarios / sizeof scenarios[0]))

static void build(result_list_t *base, result_list_t *run, uint64_t shuffle_seed)
{
    memset(base, 0, sizeof *base);
    memset(run, 0, sizeof *run);
    for (int i = 0; i < N_SCEN; i++) {
        /* Two references per case: the scenario on R_exact, R_source steady. */
        spec_t steady = {3e-2, 5e-2, 10, 1000, 40, VERDICT_PASS, 0};
        add_row(base, scenarios[i].name, "w4a8.perblock", "R_exact", &scenarios[i].base);
        add_row(base, scenarios[i].name, "w4a8.perblock", "R_source", &steady);
        add_row(run, scenarios[i].name, "w4a8.perblock", "R_exact", &scenarios[i].run);
        add_row(run, scenarios[i].name, "w4a8.perblock", "R_source", &steady);
    }
    spec_t s = {1e-3, 2e-3, 900, 1000, 2, VERDICT_PASS, 0};
    add_row(run, "only_in_run", "w4a4.aiter", "R_exact", &s);
    add_row(base, "only_in_base", "w4a4.aiter", "R_exact", &s);
    add_row(base, "unchanged", "w4a4.aiter", "R_exact", &s);   /* a kernel dropped from the run */
    /* Run order unrelated to the baseline's. */
    test_rng_t g = {shuffle_seed};
    for (int64_t i = run->count - 1; i > 0; i--) {
        int64_t j = (int64_t)(test_rng_u64(&g) % (uint64_t)(i + 1));
        result_t t = run->rows[i];
        run->rows[i] = run->rows[j];
        run->rows[j] = t;
    }
}

static const baseline_entry_t *entry_for(const baseline_report_t *rep, const result_list_t *run,
                                         const result_list_t *base, const char *case_name,
                                         const char *kernel, const char *ref)
{
    for (int64_t i = 0; i < rep->count; i++) {
        const baseline_entry_t *e = &rep->entries[i];
        const result_t *r =
            e->run_index >= 0 ? &run->rows[e->run_index] : &base->rows[e->base_index];
        if (strcmp(r->case_name, case_name) == 0 && strcmp(r->kernel, kernel) == 0 &&
            strcmp(r->reference, ref) == 0)
            return e;
    }
    fail_msg("no entry for %s %s %s", case_name, kernel, ref);
    return NULL;
}

static void check_report(const baseline_report_t *rep, const result_list_t *run,
                         const result_list_t *base, const result_list_t *run_before)
{
    int64_t expect_n[BASELINE_CLASS_COUNT] = {0};
    for (int i = 0; i < N_SCEN; i++) {
        const scenario_t *s = &scenarios[i];
        expect_n[s->expect]++;
        expect_n[BASELINE_UNCHANGED]++;   /* its steady R_source row */
        const baseline_entry_t *e = entry_for(rep, run, base, s->name, "w4a8.perblock", "R_exact");
        if (e->cls != s->expect)
            fail_msg("%s: %s, expected %s (%s)", s->name, baseline_class_name(e->cls),
                     baseline_class_name(s->expect), e->note);
        if (s->note1 && !strstr(e->note, s->note1))
            fail_msg("%s: note lacks \"%s\": %s", s->name, s->note1, e->note);
        if (s->note2 && !strstr(e->note, s->note2))
            fail_msg("%s: note lacks \"%s\": %s", s->name, s->note2, e->note);
        assert_true(e->base_index >= 0 && e->run_index >= 0);
        assert_string_equal(base->rows[e->base_index].case_name, s->name);

        /* The run row: REGRESSED where it did not already fail, note leading
         * with the findings; already failing rows keep their verdict. */
        const result_t *r = &run->rows[e->run_index], *before = &run_before->rows[e->run_index];
        if (s->expect == BASELINE_REGRESSED && !verdict_is_failure(before->verdict)) {
            assert_int_equal(r->verdict, VERDICT_REGRESSED);
            assert_true(strncmp(r->note, "baseline: ", 10) == 0);
            assert_non_null(strstr(r->note, s->note1));
            assert_non_null(strstr(r->note, before->note));   /* the old reason kept */
        } else if (s->expect == BASELINE_REGRESSED) {
            assert_int_equal(r->verdict, before->verdict);
            assert_non_null(strstr(r->note, " | baseline: "));
            assert_non_null(strstr(r->note, s->note1));
        } else {
            assert_int_equal(r->verdict, before->verdict);
            assert_string_equal(r->note, before->note);
        }
    }
    const baseline_entry_t *e = entry_for(rep, run, base, "only_in_run", "w4a4.aiter", "R_exact");
    assert_int_equal(e->cls, BASELINE_NEW);
    assert_int_equal(e->base_index, -1);
    assert_non_null(strstr(e->note, "no baseline row"));
    e = entry_for(rep, run, base, "only_in_base", "w4a4.aiter", "R_exact");
    assert_int_equal(e->cls, BASELINE_MISSING);
    assert_int_equal(e->run_index, -1);
    assert_non_null(strstr(e->note, "absent from this run"));
    e = entry_for(rep, run, base, "unchanged", "w4a4.aiter", "R_exact");
    assert_int_equal(e->cls, BASELINE_MISSING);
    expect_n[BASELINE_NEW] += 1;
    expect_n[BASELINE_MISSING] += 2;
    for (int c = 0; c < BASELINE_CLASS_COUNT; c++)
        if (rep->n[c] != expect_n[c])
            fail_msg("%s: %lld entries, expected %lld", baseline_class_name((baseline_class_t)c),
                     (long long)rep->n[c], (long long)expect_n[c]);
    assert_int_equal(rep->count, run->count + 2);
    /* Entries: the run's rows in run order, then the missing ones. */
    for (int64_t i = 0; i < run->count; i++)
        assert_int_equal(rep->entries[i].run_index, i);
    assert_true(baseline_report_failed(rep));
}

static void copy_list(result_list_t *dst, const result_list_t *src)
{
    memset(dst, 0, sizeof *dst);
    for (int64_t i = 0; i < src->count; i++)
        *result_list_add(dst) = src->rows[i];
}

/* The report and the two lists it compared, freed. */
static void free_compared(baseline_report_t *rep, result_list_t *base, result_list_t *run)
{
    baseline_report_free(rep);
    result_list_free(base);
    result_list_free(run);
}

static void test_each_classification(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        result_list_t base, run, before;
        build(&base, &run, seed);
        copy_list(&before, &run);
        baseline_report_t rep;
        baseline_tol_t tol;
        baseline_tol_default(&tol);
        assert_true(tol.rel == 0.10 && tol.abs == 1e-6 && tol.ulp == 0);
        assert_int_equal(baseline_compare(&run, &base, &tol, &rep), 0);
        check_report(&rep, &run, &base, &before);

        char *buf = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&buf, &len);
        baseline_report_print(fp, &rep, &run, &base);
        fclose(fp);
        assert_non_null(strstr(buf, "baseline: 9 regressed, 2 improved"));
        assert_non_null(strstr(buf, "REGRESSED  bit_identical_lost:w4a8.perblock/R_exact  was "
                                    "bit-identical, now 3 elements differ"));
        assert_non_null(strstr(buf, "MISSING    only_in_base:w4a4.aiter/R_exact"));
        free(buf);
        free_compared(&rep, &base, &run);
        result_list_free(&before);
    }
}

static void test_tolerance_arguments(void **state)
{
    (void)state;
    result_list_t base, run;
    build(&base, &run, 9);
    /* Wide tolerances: the metric rules relax, the bit-identical rule does not. */
    baseline_tol_t wide = {.rel = 1.0, .abs = 1e-3, .ulp = 5};
    baseline_report_t rep;
    assert_int_equal(baseline_compare(&run, &base, &wide, &rep), 0);
    const baseline_entry_t *e =
        entry_for(&rep, &run, &base, "rel_fro_worse", "w4a8.perblock", "R_exact");
    assert_int_equal(e->cls, BASELINE_UNCHANGED);
    e = entry_for(&rep, &run, &base, "max_ulp_up", "w4a8.perblock", "R_exact");
    assert_int_equal(e->cls, BASELINE_UNCHANGED);
    e = entry_for(&rep, &run, &base, "bit_identical_lost", "w4a8.perblock", "R_exact");
    assert_int_equal(e->cls, BASELINE_REGRESSED);
    assert_non_null(strstr(e->note, "was bit-identical, now 3 elements differ"));
    assert_null(strstr(e->note, "max_ulp"));
    free_compared(&rep, &base, &run);

    /* NULL tolerance = the defaults. */
    result_list_t b2, r2;
    build(&b2, &r2, 9);
    assert_int_equal(baseline_compare(&r2, &b2, NULL, &rep), 0);
    assert_int_equal(rep.n[BASELINE_REGRESSED], 9);
    free_compared(&rep, &b2, &r2);
}

static void test_identical_run_passes(void **state)
{
    (void)state;
    result_list_t base, run;
    build(&base, &run, 4);
    /* The baseline against itself: all unchanged, nothing marked. */
    result_list_t same;
    copy_list(&same, &base);
    baseline_report_t rep;
    assert_int_equal(baseline_compare(&same, &base, NULL, &rep), 0);
    assert_int_equal(rep.n[BASELINE_UNCHANGED], base.count);
    assert_false(baseline_report_failed(&rep));
    for (int64_t i = 0; i < same.count; i++) {
        assert_int_equal(same.rows[i].verdict, base.rows[i].verdict);
        assert_string_equal(same.rows[i].note, base.rows[i].note);
    }
    free_compared(&rep, &base, &same);
    result_list_free(&run);
}

static void test_against_stored_baseline(void **state)
{
    (void)state;
    result_list_t base, run, before, stored;
    build(&base, &run, 5);
    copy_list(&before, &run);
    assert_int_equal(result_list_sort(&base), 0);
    char path[512];
    test_tmp_path(path, sizeof path, "baseline.h5");
    kr_error_t err = {{0}};
    results_meta_t meta;
    results_meta_init(&meta);
    if (results_store_write(path, &base, &meta, &err) != 0)
        fail_msg("%s", err.msg);
    if (results_store_read(path, &stored, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    baseline_report_t rep;
    assert_int_equal(baseline_compare(&run, &stored, NULL, &rep), 0);
    check_report(&rep, &run, &stored, &before);
    baseline_report_free(&rep);
    unlink(path);
    result_list_free(&base);
    result_list_free(&run);
    result_list_free(&before);
    result_list_free(&stored);
}

KR_TEST_MAIN(
    test_each_classification, test_tolerance_arguments, test_identical_run_passes,
    test_against_stored_baseline);
