/* Reports that show pass and fail (reports/plots.h, report_bundle.h), on
 * rows built here with known thresholds and verdicts:
 *  - every relative-error panel draws each series' threshold (the rows'
 *    own values, stepping at the band edge), the failing rows crossed and
 *    the regressed rows circled at their own rel_fro; two kernels with the
 *    same numbers are one series, the second named under it in the key;
 *  - the W4A8-vs-W4A4 bars carry their thresholds and failing marks;
 *  - the heatmap colours rel_fro / threshold: a W4A4 row at 0.3 x its
 *    threshold is green-to-yellow (log10 0.3 < 0), a failing cell at least
 *    red (>= 0) and labelled, whatever the raw errors;
 *  - equal ULP histograms are drawn once;
 *  - the baseline comparison stores the metric that regressed with both
 *    values, and the page, report_full.md, results.csv and the regressions
 *    plot show them in their own columns;
 *  - the trend plots rel_fro / threshold with the threshold at 1, its run
 *    labels are distinct (to the second, then numbered), and a run given
 *    twice (a run directory and its history copy, a baseline copied from a
 *    run) is one point;
 *  - `kreplay report` of several runs reports the newest without an
 *    injected fault, not the drill.
 * Each plot is also drawn by gnuplot when it is installed, and its SVG holds
 * the key entries checked here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "gnuplot.h"
#include "kr_string.h"
#include "kreplay_checks.h"
#include "plots.h"
#include "report_bundle.h"
#include "results_store.h"
#include "test_main.h"
#include "test_support.h"

static result_t *row(result_list_t *l, const char *kernel, const char *ref, int64_t M, double rel, double thr,
                     verdict_t v)
{
    result_t *r = result_list_add(l);
    assert_non_null(r);
    snprintf(r->case_name, sizeof r->case_name, "c_M%lld", (long long)M);
    snprintf(r->case_path, sizeof r->case_path, "mem/c_M%lld.h5", (long long)M);
    r->M = M;
    r->N = 64;
    r->K = 256;
    kr_strlcpy(r->band, m_band_name(M), sizeof r->band);
    kr_strlcpy(r->kernel, kernel, sizeof r->kernel);
    kr_strlcpy(r->reference, ref, sizeof r->reference);
    r->metrics.rel_fro = rel;
    r->metrics.mag_ratio = 1.0;
    r->threshold = thr;
    r->verdict = v;
    r->ulp.count = 1000;
    r->ulp.bins[0] = 900;
    r->ulp.bins[1] = 100;
    r->ulp.identical = 900;
    r->ulp.identical_frac = 0.9;
    return r;
}

/* w4a8.folded and w4a8.atiled with the same numbers, w4a4.aiter beside them,
 * at M = 4 (decode) and 300 (prefill), against R_exact and R_source; the
 * thresholds differ per band.  w4a4.aiter fails R_exact at M = 4;
 * w4a8.folded regressed against R_source at M = 300. */
static void build(result_list_t *l)
{
    static const char *const k8[2] = {"w4a8.folded", "w4a8.atiled"};
    for (int m = 0; m < 2; m++) {
        const int64_t M = m ? 300 : 4;
        for (int k = 0; k < 2; k++) {
            row(l, k8[k], "R_exact", M, m ? 0.0011 : 0.0017, m ? 0.0037 : 0.0050, VERDICT_PASS);
            row(l, k8[k], "R_source", M, m ? 0.011 : 0.021, m ? 0.041 : 0.070,
                k == 0 && m ? VERDICT_REGRESSED : VERDICT_PASS);
        }
        row(l, "w4a4.aiter", "R_exact", M, m ? 0.0019 : 0.0300, m ? 0.0042 : 0.0054,
            m ? VERDICT_PASS : VERDICT_WRONG);
        row(l, "w4a4.aiter", "R_source", M, m ? 0.080 : 0.140, m ? 0.300 : 0.465, VERDICT_PASS);
    }
}

static const plot_t *find_plot(const plot_list_t *pl, const char *name)
{
    for (int i = 0; i < pl->count; i++)
        if (!strcmp(pl->items[i].name, name))
            return &pl->items[i];
    fail_msg("no plot %s", name);
    return NULL;
}

/* The data block $NAME of a script, up to its EOD (malloc'd). */
static char *block(const char *script, const char *name)
{
    char head[64];
    snprintf(head, sizeof head, "$%s << EOD\n", name);
    const char *p = strstr(script, head);
    if (!p)
        fail_msg("no data block %s in:\n%s", name, script);
    p += strlen(head);
    const char *end = strstr(p, "EOD\n");
    assert_non_null(end);
    char *b = malloc((size_t)(end - p) + 1);
    memcpy(b, p, (size_t)(end - p));
    b[end - p] = '\0';
    return b;
}

/* Draws the plot with gnuplot (when installed): it must render, and its SVG
 * hold each key text given. */
static void renders(const plot_t *p, const char *const *texts)
{
    if (!gnuplot_available())
        return;
    char *svg = NULL;
    size_t len = 0;
    kr_error_t err = {{0}};
    if (gnuplot_render(p->script, GNUPLOT_SVG, p->width, p->height, &svg, &len, &err))
        fail_msg("%s: %s", p->name, err.msg);
    for (int i = 0; texts[i]; i++)
        if (!strstr(svg, texts[i]))
            fail_msg("%s: \"%s\" not in its SVG", p->name, texts[i]);
    free(svg);
}

static void test_relerr_thresholds_marks_identical(void **state)
{
    (void)state;
    result_list_t l = {0};
    build(&l);
    plot_list_t pl = {0};
    kr_error_t err = {{0}};
    assert_int_equal(plots_from_rows(&pl, &l, &err), 0);
    const plot_t *p = find_plot(&pl, "relerr_64x256");
    const char *s = p->script;
    /* the thresholds of the rows drawn, level over each band, stepping at its edge:
     * w4a4.aiter against R_exact is the first block ($t0), w4a8.atiled ($t1) is drawn for both */
    char *t0 = block(s, "t0"), *t1 = block(s, "t1");
    TEST_EXPECT_PHRASES(t0, "4 0.0054\n", "64.5 0.0054\n\n", "255.5 0.0042\n", "300 0.0042\n");
    TEST_EXPECT_PHRASES(t1, "4 0.005\n", "300 0.0037\n");
    assert_int_equal(test_count_substr(s, "title \"threshold (dashed)\""), 2);
    /* the failing row crossed, the regressed row circled, at their own rel_fro */
    char *f0 = block(s, "f0"), *g1 = block(s, "g1");
    assert_string_equal(f0, "4 0.03\n");
    assert_string_equal(g1, "300 0.011\n");
    TEST_EXPECT_PHRASES(s, "$f0 using 1:2 with points pt 2", "title \"failing rows\"", "title \"regressed rows\"");
    assert_null(strstr(s, "$f1"));     /* nothing fails against R_source */
    /* the two W4A8 kernels with the same numbers: one series, both named */
    assert_int_equal(test_count_substr(s, "title \"w4a8.atiled\""), 2);
    assert_int_equal(test_count_substr(s, "title \"w4a8.folded\""), 0);
    assert_int_equal(test_count_substr(s, "keyentry with lines lc rgb \"#ffffff\" title \"= w4a8.folded (identical)\""), 2);
    renders(p, (const char *const[]){"threshold (dashed)", "failing rows", "regressed rows",
                                     "= w4a8.folded (identical)", NULL});
    /* the W4A8 vs W4A4 bars: the thresholds as ticks; the regressed W4A8 row marks its bar */
    const plot_t *w = find_plot(&pl, "w4a8_vs_w4a4");
    char *wd = block(w->script, "w");
    TEST_EXPECT_PHRASES(wd, " 0.021 0.14 0.07 0.465 0 0\n", " 0.011 0.08 0.041 0.3 1 0\n");
    TEST_EXPECT_PHRASES(w->script, "with vectors nohead dt 2", "title \"threshold (dashed)\"",
                        "($7 > 0 ? $3 : NaN) with points pt 2");
    renders(w, (const char *const[]){"threshold (dashed)", "failing rows", NULL});
    /* the ULP histograms, all equal here: drawn once, the others named */
    const plot_t *u = find_plot(&pl, "ulp_R_exact");
    assert_int_equal(test_count_substr(u->script, "$u"), 2);   /* one block, one series */
    TEST_EXPECT_PHRASES(u->script, "title \"= w4a8.atiled (identical)\"", "title \"= w4a8.folded (identical)\"");
    TEST_FREE_ALL(t0, t1, f0, g1, wd);
    plot_list_free(&pl);
    result_list_free(&l);
}

static void test_heatmap_ratio(void **state)
{
    (void)state;
    result_list_t l = {0};
    build(&l);
    plot_list_t pl = {0};
    kr_error_t err = {{0}};
    assert_int_equal(plots_from_rows(&pl, &l, &err), 0);
    const plot_t *h = find_plot(&pl, "heatmap_worst");
    char *data = block(h->script, "h");
    print_message("%s", data);
    /* decode: w4a4.aiter fails R_exact, 0.03 / 0.0054 = 5.56 x: colour log10(5.56) = 0.745 */
    TEST_EXPECT_PHRASES(data, "0 0 0.7447", "\"5.6 x thr FAIL\" 1\n");
    /* prefill: nothing fails but the regression; the worst ratio w4a8.folded 0.011 / 0.041, regressed */
    TEST_EXPECT_PHRASES(data, "1 0 0 \"0.27 x thr REGRESSED\" 1\n");
    /* the passing W4A4 errors (0.14, 0.08) do not colour anything: the scale is the ratio */
    TEST_EXPECT_PHRASES(h->script, "set cbrange [-2:1]", "0 \"#f46d43\"", "-0.001 \"#fee08b\"");
    renders(h, (const char *const[]){"failing rows (framed)", "5.6 x thr FAIL", NULL});
    free(data);
    plot_list_free(&pl);
    /* only passing rows, W4A4 at 0.3 of its threshold: a green-to-yellow cell, not red */
    result_list_t pass = {0};
    row(&pass, "w4a4.aiter", "R_source", 4, 0.14, 0.465, VERDICT_PASS);
    row(&pass, "w4a8.folded", "R_source", 4, 0.021, 0.070, VERDICT_PASS);
    assert_int_equal(plots_from_rows(&pl, &pass, &err), 0);
    data = block(find_plot(&pl, "heatmap_worst")->script, "h");
    print_message("%s", data);
    double colour = 0;
    assert_int_equal(sscanf(data, "0 0 %lf", &colour), 1);
    assert_true(fabs(colour - log10(0.14 / 0.465)) < 1e-6);
    assert_true(colour < 0);
    assert_null(strstr(data, "FAIL"));
    free(data);
    plot_list_free(&pl);
    result_list_free(&pass);
    result_list_free(&l);
}

static void test_regression_columns(void **state)
{
    (void)state;
    /* the baseline comparison stores what regressed */
    result_list_t base = {0}, run = {0};
    result_t *b = row(&base, "w4a8.folded", "R_exact", 4, 0.0017, 0.005, VERDICT_PASS);
    b->ulp.identical = 934;
    b->ulp.identical_frac = 0.934;
    kr_strlcpy(b->case_id, "0123456789abcdef", sizeof b->case_id);
    result_t *r = row(&run, "w4a8.folded", "R_exact", 4, 0.0017, 0.005, VERDICT_PASS);
    r->ulp.identical = 924;
    r->ulp.identical_frac = 0.924;
    kr_strlcpy(r->case_id, "0123456789abcdef", sizeof r->case_id);
    baseline_report_t rep;
    assert_int_equal(baseline_compare(&run, &base, NULL, &rep), 0);
    baseline_report_free(&rep);
    assert_int_equal(r->verdict, VERDICT_REGRESSED);
    assert_string_equal(r->regressed_metric, "identical_frac");
    assert_true(fabs(r->regressed_base - 0.934) < 1e-12 && fabs(r->regressed_run - 0.924) < 1e-12);

    /* the report: the page, report_full.md, results.csv and a plot of baseline vs run */
    char dir[1024];
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "passfail-reg"), 0);
    report_options_t o;
    report_options_init(&o);
    o.write_tables = 1;
    o.find_cases = 0;
    o.progress = 0;
    kr_error_t err = {{0}};
    assert_int_equal(report_generate(dir, &run, NULL, 0, &o, &err), 0);
    char *html = test_read_in_dir(dir, "report.html"), *md = test_read_in_dir(dir, "report_full.md"),
         *csv = test_read_in_dir(dir, "results.csv");
    TEST_EXPECT_PHRASES(html, "<th>regressed metric</th><th>baseline</th><th>this run</th><th>change</th>",
                        "<td class=\"metric\">identical_frac</td><td class=\"n\">0.934</td><td class=\"n\">0.924</td>"
                        "<td class=\"n\">-0.01 (-1.07%)</td>");
    TEST_EXPECT_PHRASES(md, "| regressed metric | baseline | this run | change |", "| identical_frac | 0.934 | 0.924 |");
    TEST_EXPECT_PHRASES(csv, "regressed_metric,regressed_base,regressed_run", ",\"identical_frac\",0.934000",
                        ",0.924000");
    plot_list_t pl = {0};
    assert_int_equal(plots_from_rows(&pl, &run, &err), 0);
    const plot_t *p = find_plot(&pl, "regressions");
    char *data = block(p->script, "r0");
    assert_string_equal(data, "0.934 0.924\n");
    TEST_EXPECT_PHRASES(p->script, "identical_frac: baseline vs this run (below the diagonal = worse)",
                        "plot x with lines");
    renders(p, (const char *const[]){"regressed rows", "unchanged (diagonal)", NULL});
    TEST_FREE_ALL(html, md, csv, data);
    plot_list_free(&pl);
    result_list_free(&base);
    result_list_free(&run);
}

/* Writes rows as a results file at path with the time, commit and command given. */
static void write_run(const char *path, const result_list_t *rows, const char *time, const char *command)
{
    results_meta_t m;
    results_meta_init(&m);
    kr_strlcpy(m.time_utc, time, sizeof m.time_utc);
    kr_strlcpy(m.git_commit, "abc1234def00", sizeof m.git_commit);
    kr_strlcpy(m.suite_hash, "h1", sizeof m.suite_hash);
    kr_strlcpy(m.command, command, sizeof m.command);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    assert_int_equal(system(cmd), 0);
    kr_error_t err = {{0}};
    if (results_store_write(path, rows, &m, &err))
        fail_msg("%s", err.msg);
}

static void test_trend_once_and_distinct(void **state)
{
    (void)state;
    result_list_t l = {0};
    build(&l);
    char dir[1024], first[1200], a[1200], b[1200], today[1200], copy[1200], base[1200];
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "passfail-trend"), 0);
    snprintf(first, sizeof first, "%s/runs/first/results.h5", dir);
    /* two runs in one minute, from directories of the same name */
    snprintf(a, sizeof a, "%s/x/run/results.h5", dir);
    snprintf(b, sizeof b, "%s/y/run/results.h5", dir);
    snprintf(today, sizeof today, "%s/runs/today/results.h5", dir);
    snprintf(copy, sizeof copy, "%s/history/2024-01-03T00:00:00Z_abc1234def00.h5", dir);
    snprintf(base, sizeof base, "%s/baselines/main.h5", dir);
    write_run(first, &l, "2024-01-01T00:00:00Z", "gate");
    write_run(a, &l, "2024-01-02T10:00:10Z", "gate");
    write_run(b, &l, "2024-01-02T10:00:50Z", "gate");
    write_run(today, &l, "2024-01-03T00:00:00Z", "gate");
    write_run(copy, &l, "2024-01-03T00:00:00Z", "gate");    /* baseline update --history's copy of today */
    write_run(base, &l, "2024-01-03T00:00:00Z", "gate");    /* and the baseline made from it */
    results_meta_t drill;
    results_meta_init(&drill);
    kr_strlcpy(drill.time_utc, "2024-01-04T00:00:00Z", sizeof drill.time_utc);
    kr_strlcpy(drill.git_commit, "abc1234def00", sizeof drill.git_commit);
    kr_strlcpy(drill.suite_hash, "h1", sizeof drill.suite_hash);
    report_options_t o;
    report_options_init(&o);
    o.meta = &drill;
    o.baseline_path = base;
    o.find_cases = 0;
    o.progress = 0;
    report_outcome_t outcome;
    o.outcome = &outcome;
    const char *history[] = {first, a, b, today, copy};
    char out[1200];
    snprintf(out, sizeof out, "%s/report", dir);
    kr_error_t err = {{0}};
    assert_int_equal(report_generate(out, &l, history, 5, &o, &err), 0);
    /* baseline (= today, and its history copy), first, the two runs, this run */
    assert_int_equal(outcome.history_runs, 5);
    char *html = test_read_in_dir(out, "report.html");
    const char *hist = strstr(html, "<section id=\"history\">");
    assert_non_null(hist);
    TEST_EXPECT_PHRASES(hist, "<td>baseline = today</td>", "<td>first 01-01 00:00 abc1234</td>",
                        "<td>run 01-02 10:00:10 abc1234</td>", "<td>run 01-02 10:00:50 abc1234</td>",
                        "<td>this run</td>");
    assert_int_equal(test_count_substr(hist, "2024-01-03T00:00:00Z"), 1);
    free(html);
    /* the trend: rel_fro / threshold, the threshold at 1, failing runs crossed */
    plot_run_t runs[2] = {{"first", &l}, {"this run", &l}};
    plot_list_t pl = {0};
    assert_int_equal(plots_trend(&pl, runs, 2, &err), 0);
    const plot_t *t = find_plot(&pl, "trend");
    TEST_EXPECT_PHRASES(t->script, "plot 1 with lines dt 2 lw 2 lc rgb \"#d62728\" title \"threshold (ratio 1)\"",
                        "title \"failing rows\"", "rel_fro / threshold");
    char *x = block(t->script, "x");
    /* w4a4.aiter fails in both runs (its worst R_source ratio: 0.14 / 0.465), w4a8.folded
     * regressed (0.021 / 0.07) */
    char want[128];
    snprintf(want, sizeof want, "0 %.9g\n1 %.9g\n0 %.9g\n1 %.9g\n", 0.14 / 0.465, 0.14 / 0.465, 0.021 / 0.07,
             0.021 / 0.07);
    assert_string_equal(x, want);
    renders(t, (const char *const[]){"threshold (ratio 1)", "failing rows", NULL});
    free(x);
    plot_list_free(&pl);
    result_list_free(&l);
}

static void test_report_skips_the_drill(void **state)
{
    (void)state;
    result_list_t l = {0};
    build(&l);
    char dir[1024], today[1200], drill[1200], args[4096];
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "passfail-newest"), 0);
    snprintf(today, sizeof today, "%s/today/results.h5", dir);
    snprintf(drill, sizeof drill, "%s/drill/results.h5", dir);
    write_run(today, &l, "2024-01-03T00:00:00Z", "kreplay gate default.yaml -o today");
    write_run(drill, &l, "2024-01-04T00:00:00Z",
              "kreplay gate default.yaml -o drill --inject w4a8.folded=tile-scale:1.5");
    snprintf(args, sizeof args, "report '%s' '%s' -o '%s/report' --no-plots", drill, today, dir);
    /* the rows hold a failing row, so the report exits 1 as the gate would */
    char *out = test_kreplay_output(args, 1);
    char want[1400];
    snprintf(want, sizeof want, "reporting the newest without an injected fault, %s", today);
    TEST_EXPECT_PHRASES(out, want, "with the other 1 as its history");
    free(out);
    result_list_free(&l);
}

KR_TEST_MAIN(test_relerr_thresholds_marks_identical, test_heatmap_ratio, test_regression_columns,
             test_trend_once_and_distinct, test_report_skips_the_drill);
