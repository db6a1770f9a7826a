/* The report directory (reports/report_bundle.h) for a known row set built
 * in memory:
 *  - the HTML page holds exactly the plots the rows call for, counted here
 *    from the rows' make-up (2 shapes x {R_exact, R_source} relative-error
 *    plots, ULP histograms for R_exact and R_source, W4A8 vs W4A4, the
 *    heatmap, the trend over the history, the non-finite map of the one
 *    case whose x is poisoned), each inline with its ids made unique, and
 *    the same plots as plots/NAME.svg + NAME.png, referenced by report_full.md;
 *  - the summary's verdict counts are the rows' (counted here), failing rows
 *    come before the rest, and the worst shape x band is the failing row's;
 *  - every string from the rows is escaped: a note holding <script>, quotes,
 *    '&' and a byte that is not UTF-8, a case name holding <&>";
 *  - the history is ordered by provenance time whatever the order given, a
 *    copy of this very run is not counted twice, an unreadable file is skipped;
 *  - no temporary file is left in the directory;
 *  - `kreplay report` does the same from results files (--case, --history);
 *  - the progress line prints only where told (a terminal), with done/total
 *    and an ETA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gnuplot.h"
#include "progress.h"
#include "report_bundle.h"
#include "results_store.h"
#include "test_main.h"
#include "test_support.h"

#define NANHEAD KREPLAY_SOURCE_DIR "/cases/samples/gdn_out_proj_slice_N512_K3072_M17_nanhead.h5"

static const char *EVIL_NOTE = "<script>alert(\"x\")</script> & 'q' | pipe \xff end";
static const char *EVIL_CASE = "evil<case>&\"name\"";

#define read_all(path) test_read_file(path, NULL)

/* DIR/NAME, all of it; fails the test when it cannot be read. */
static char *read_output(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = read_all(path);
    if (!text)
        fail_msg("cannot read %s", path);
    return text;
}

static result_t *row(result_list_t *l, const char *case_name, int64_t M, int64_t N, int64_t K, const char *kernel,
                     const char *ref, double rel, verdict_t v)
{
    result_t *r = result_list_add(l);
    snprintf(r->case_path, sizeof r->case_path, "mem/%s.h5", case_name);
    snprintf(r->case_name, sizeof r->case_name, "%s", case_name);
    r->M = M;
    r->N = N;
    r->K = K;
    snprintf(r->band, sizeof r->band, "%s", M <= 64 ? "decode" : "prefill");
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    snprintf(r->reference, sizeof r->reference, "%s", ref);
    r->metrics.rel_fro = rel;
    r->metrics.mag_ratio = 1.0;
    r->threshold = strcmp(ref, "R_exact") ? 0.2 : 0.01;
    r->verdict = v;
    snprintf(r->note, sizeof r->note, "rel_fro %.3g", rel);
    r->ref_f32_vs_f64 = NAN;
    if (strcmp(ref, "-") != 0) {
        int64_t n = M * N;
        r->ulp.count = n;
        r->ulp.bins[0] = n / 2;
        r->ulp.bins[1] = n / 4;
        r->ulp.bins[3] = n - n / 2 - n / 4;
        r->ulp.identical = n / 2;
        r->ulp.identical_frac = (double)(n / 2) / (double)n;
        r->ulp.max_ulp = 4;
    }
    return r;
}

/* 2 shapes x 2 M (decode 4, prefill 300) x {w4a8.folded, w4a4.aiter} x
 * {R_exact, R_source}; one WRONG row with an evil note and a diagnosis; one
 * REGRESSED; one UNSUPPORTED (reference "-"); one POISONED_INPUT row of the
 * sample case whose x holds a NaN head (its file exists: the map is found). */
static void build_rows(result_list_t *rows, int64_t *counts)
{
    memset(counts, 0, sizeof(int64_t) * VERDICT_COUNT);
    static const int64_t shapes[2][2] = {{64, 256}, {128, 512}};
    static const int64_t ms[2] = {4, 300};
    static const char *kernels[2] = {"w4a8.folded", "w4a4.aiter"};
    static const char *refs[2] = {"R_exact", "R_source"};
    for (int s = 0; s < 2; s++)
        for (int m = 0; m < 2; m++) {
            char name[128];
            snprintf(name, sizeof name, "%s_%lldx%lld_M%lld", s == 0 && m == 0 ? EVIL_CASE : "case",
                     (long long)shapes[s][0], (long long)shapes[s][1], (long long)ms[m]);
            for (int k = 0; k < 2; k++)
                for (int j = 0; j < 2; j++) {
                    /* W4A4's total error ~7x W4A8's; the 128x512 prefill cell is the worst */
                    double rel = j == 0 ? 0.002 : (k == 0 ? 0.02 : 0.14);
                    if (s == 1 && m == 1)
                        rel *= 1.5;
                    verdict_t v = VERDICT_PASS;
                    if (s == 0 && m == 0 && k == 0 && j == 0)
                        v = VERDICT_WRONG, rel = 0.05;
                    if (s == 1 && m == 0 && k == 1 && j == 0)
                        v = VERDICT_REGRESSED;
                    result_t *r = row(rows, name, ms[m], shapes[s][0], shapes[s][1], kernels[k], refs[j], rel, v);
                    if (v == VERDICT_WRONG) {
                        snprintf(r->note, sizeof r->note, "%s", EVIL_NOTE);
                        snprintf(r->diagnosis, sizeof r->diagnosis,
                                 "columns 0-31 <b>(a 32-column block)</b> are wrong: unwritten & masked");
                    }
                    counts[v]++;
                }
        }
    row(rows, "case_64x256_M4", 4, 64, 256, "bf16.skinny", "-", 0, VERDICT_UNSUPPORTED);
    counts[VERDICT_UNSUPPORTED]++;
    result_t *p = row(rows, "gdn_out_proj_slice_N512_K3072_M17_nanhead", 17, 512, 3072, "w4a8.folded", "R_sanitized",
                      11.6, VERDICT_POISONED_INPUT);
    snprintf(p->case_path, sizeof p->case_path, "%s", NANHEAD);
    p->input_nf.nan = 2176;
    p->ulp.count = 0;  /* no histogram of R_sanitized */
    counts[VERDICT_POISONED_INPUT]++;
}

/* Two earlier runs, written here; returns their paths (given newest first). */
static void write_history(char paths[3][600], const result_list_t *rows, results_meta_t *this_meta)
{
    char dir[512];
    test_tmp_path(dir, sizeof dir, "history");
    assert_int_equal(mkdir(dir, 0777), 0);
    const char *times[2] = {"2024-02-01T00:00:00Z", "2024-01-01T00:00:00Z"};
    const char *commits[2] = {"bbbbbbb22222", "aaaaaaa11111"};
    for (int i = 0; i < 2; i++) {
        results_meta_t m;
        results_meta_init(&m);
        snprintf(m.time_utc, sizeof m.time_utc, "%s", times[i]);
        snprintf(m.git_commit, sizeof m.git_commit, "%s", commits[i]);
        snprintf(m.suite_hash, sizeof m.suite_hash, "h1");
        snprintf(paths[i], 600, "%s/run%d.h5", dir, i);
        kr_error_t err = {{0}};
        if (results_store_write(paths[i], rows, &m, &err))
            fail_msg("%s", err.msg);
    }
    /* this very run, as gate --history copies it */
    results_meta_init(this_meta);
    snprintf(this_meta->time_utc, sizeof this_meta->time_utc, "2024-03-01T00:00:00Z");
    snprintf(this_meta->git_commit, sizeof this_meta->git_commit, "ccccccc33333");
    snprintf(this_meta->suite_hash, sizeof this_meta->suite_hash, "h1");
    snprintf(this_meta->suite_name, sizeof this_meta->suite_name, "unit<suite>");
    snprintf(paths[2], 600, "%s/this.h5", dir);
    kr_error_t err = {{0}};
    if (results_store_write(paths[2], rows, this_meta, &err))
        fail_msg("%s", err.msg);
}

static void no_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp.") || strstr(e->d_name, ".gp") || strstr(e->d_name, ".dat"))
            fail_msg("temporary file left: %s/%s", dir, e->d_name);
    closedir(d);
}


static void check_counts(const char *html, const int64_t *counts, int64_t total)
{
    int64_t failing = 0;
    for (int v = 0; v < VERDICT_COUNT; v++) {
        char want[200];
        snprintf(want, sizeof want, "<tr data-verdict=\"%s\">", verdict_name((verdict_t)v));
        const char *p = strstr(html, want);
        if (!counts[v]) {
            assert_null(p);
            continue;
        }
        assert_non_null(p);
        char cell[64];
        snprintf(cell, sizeof cell, "<td class=\"n\">%lld</td></tr>", (long long)counts[v]);
        const char *end = strstr(p, "</tr>");
        assert_non_null(end);
        const char *c = strstr(p, cell);
        if (!c || c > end)
            fail_msg("verdict %s: expected count %lld", verdict_name((verdict_t)v), (long long)counts[v]);
    }
    failing = counts[VERDICT_WRONG] + counts[VERDICT_REGRESSED];
    char banner[128];
    snprintf(banner, sizeof banner, "FAIL: %lld of %lld rows fail, %lld regressed", (long long)failing,
             (long long)total, (long long)counts[VERDICT_REGRESSED]);
    assert_non_null(strstr(html, banner));
}

/* The known rows with their counts by verdict, and two earlier runs of
 * them written as history (hist[2] is this run's own file). */
typedef struct {
    result_list_t rows;
    int64_t counts[VERDICT_COUNT];
    char hist[3][600];
    results_meta_t meta;
} known_run_t;

static void known_run(known_run_t *k)
{
    memset(k, 0, sizeof *k);
    build_rows(&k->rows, k->counts);
    write_history(k->hist, &k->rows, &k->meta);
}

static void test_report_known_rows(void **state)
{
    (void)state;
    known_run_t k;
    known_run(&k);
    char missing[700];
    snprintf(missing, sizeof missing, "%s.nope", k.hist[0]);
    const char *history[4] = {k.hist[0], k.hist[1], k.hist[2], missing}; /* newest first, this run, a bad one */

    char out[512];
    test_tmp_path(out, sizeof out, "report-known");
    report_options_t opt;
    report_options_init(&opt);
    report_outcome_t outcome;
    opt.outcome = &outcome;
    opt.meta = &k.meta;
    opt.quiet = 1;
    kr_error_t err = {{0}};
    if (report_generate(out, &k.rows, history, 4, &opt, &err))
        fail_msg("report_generate: %s", err.msg);

    int gp = gnuplot_available();
    /* relerr x2 shapes, ulp R_exact + R_source, w4a8_vs_w4a4, heatmap, trend, nfmap */
    int expected = gp ? 2 + 2 + 1 + 1 + 1 + 1 : 0;
    assert_int_equal(outcome.gnuplot_found, gp);
    assert_int_equal(outcome.plots_failed, 0);
    assert_int_equal(outcome.plots_drawn, expected);
    assert_int_equal(outcome.history_runs, 3);   /* two earlier runs + this one, not this one twice */
    assert_int_equal(outcome.nfmaps, 1);

    char *html = read_output(out, "report.html");
    assert_int_equal(test_count_substr(html, "<svg"), expected);
    assert_int_equal(test_count_substr(html, "</svg>"), expected);
    assert_int_equal(test_count_substr(html, "<svg class=\"kr-plot\""), expected);
    char attr[64];
    snprintf(attr, sizeof attr, "data-expected-plots=\"%d\"", expected);
    assert_non_null(strstr(html, attr));
    /* self-contained: one inline script, no external resource */
    assert_int_equal(test_count_substr(html, "<script"), 1);
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, " src="));
    assert_null(strstr(html, "<?xml"));
    if (gp) {
        static const char *names[] = {"relerr_64x256", "relerr_128x512", "ulp_R_exact", "ulp_R_source",
                                      "w4a8_vs_w4a4", "heatmap_worst", "trend",
                                      "nfmap_gdn_out_proj_slice_N512_K3072_M17_nanhead"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            char want[200];
            snprintf(want, sizeof want, "data-plot=\"%s\"", names[i]);
            if (test_count_substr(html, want) != 1)
                fail_msg("plot %s: %d times in the page", names[i], test_count_substr(html, want));
        }
        /* ids made unique per plot */
        assert_null(strstr(html, "id='gpDot'"));
        assert_int_equal(test_count_substr(html, "id=\"gnuplot_canvas\""), 0);
        assert_int_equal(test_count_substr(html, "id='kp0-gpDot'"), 1);
        assert_int_equal(test_count_substr(html, "id='kp1-gpDot'"), 1);
        assert_non_null(strstr(html, "xlink:href='#kp1-gpPt"));
        /* the non-finite map sits in its case's detail, after its description */
        const char *det = strstr(html, "<summary><b>gdn_out_proj_slice_N512_K3072_M17_nanhead</b>");
        assert_non_null(det);
        const char *desc = strstr(det, "block: rows 0-16 x columns 1024-1151");
        const char *fig = strstr(det, "data-plot=\"nfmap_gdn_out_proj_slice_N512_K3072_M17_nanhead\"");
        assert_non_null(desc);
        assert_non_null(fig);
        assert_true(desc < fig);
    }
    /* summary counts, failing rows before the others */
    check_counts(html, k.counts, k.rows.count);
    const char *fail_h = strstr(html, "<h2 id=\"failing\">");
    const char *reg_h = strstr(html, "<h2 id=\"regressions\">");
    const char *worst_h = strstr(html, "<h2 id=\"worst\">");
    const char *plots_h = strstr(html, "<section id=\"plots\">");
    assert_non_null(fail_h);
    assert_non_null(reg_h);
    assert_non_null(worst_h);
    assert_non_null(plots_h);
    assert_true(reg_h < fail_h && fail_h < worst_h && worst_h < plots_h);
    /* the failing row's cell, not the passing row of the largest rel_fro (128x512 prefill, 0.21) */
    assert_non_null(strstr(html, "<b>Worst shape x band:</b> 64x256 decode: rel_fro 0.05 = 5 x its threshold 0.01, "
                                 "WRONG (w4a8.folded vs R_exact"));
    assert_non_null(strstr(html, "W4A4 / W4A8 = 7.00"));
    assert_non_null(strstr(html, "<b>Poisoned inputs:</b> 1 row (their rel_fro covers the finite part only) in <a href=\"#case-2\">gdn_out_proj_slice_N512_K3072_M17_nanhead</a> (1 row)"));
    /* escaping */
    assert_null(strstr(html, "<script>alert"));
    assert_null(strstr(html, "<b>(a 32-column"));
    assert_non_null(strstr(html, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39; | pipe &#xFFFD; end"));
    assert_non_null(strstr(html, "diagnosis: columns 0-31 &lt;b&gt;(a 32-column block)&lt;/b&gt; are wrong: unwritten &amp; masked"));
    assert_non_null(strstr(html, "evil&lt;case&gt;&amp;&quot;name&quot;_64x256_M4"));
    assert_null(strstr(html, "evil<case>"));
    assert_non_null(strstr(html, "unit&lt;suite&gt;"));
    assert_null(strstr(html, "\xff"));
    /* the history, oldest first, this run last */
    const char *h = strstr(html, "<section id=\"history\">");
    assert_non_null(h);
    const char *a = strstr(h, "2024-01-01T00:00:00Z"), *b = strstr(h, "2024-02-01T00:00:00Z"), *c = strstr(h, "this run");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_true(a < b && b < c);
    assert_int_equal(test_count_substr(h, "<tr><td>"), 3);
    free(html);

    /* the Markdown beside it */
    char *md = read_output(out, "report_full.md");
    assert_int_equal(test_count_substr(md, ".png)"), expected);
    if (gp) {
        char plots[700];
        snprintf(plots, sizeof plots, "%s/plots", out);
        assert_int_equal(test_count_files(plots, ".svg"), expected);
        assert_int_equal(test_count_files(plots, ".png"), expected);
        /* every referenced PNG exists */
        for (const char *p = md; (p = strstr(p, "](plots/")) != NULL; p++) {
            char rel[256];
            assert_int_equal(sscanf(p + 2, "%255[^)]", rel), 1);
            char path[800];
            snprintf(path, sizeof path, "%s/%s", out, rel);
            if (access(path, R_OK) != 0)
                fail_msg("report_full.md references %s, not written", rel);
        }
        no_temp_files(plots);
    }
    assert_non_null(strstr(md, "&lt;script&gt;alert(\"x\")&lt;/script&gt; &amp; 'q' \\| pipe"));
    assert_null(strstr(md, "<script"));
    assert_non_null(strstr(md, "- **FAIL**: 2 of 18 rows fail"));
    assert_non_null(strstr(md, "block: rows 0-16 x columns 1024-1151"));
    free(md);
    no_temp_files(out);
    result_list_free(&k.rows);
}

/* kreplay report: the results file, --history, --case (no lookup). */
static void test_cli_report(void **state)
{
    (void)state;
    known_run_t k;
    known_run(&k);
    char out[512], args[4096], *output = NULL;
    test_tmp_path(out, sizeof out, "report-cli");
    /* the rows' case path does not exist from here: only --case maps it */
    snprintf(k.rows.rows[k.rows.count - 1].case_path, sizeof k.rows.rows[0].case_path, "elsewhere/nanhead.h5");
    char res[700];
    snprintf(res, sizeof res, "%s-results.h5", out);
    kr_error_t err = {{0}};
    assert_int_equal(results_store_write(res, &k.rows, &k.meta, &err), 0);
    snprintf(args, sizeof args, "report '%s' -o '%s' --history '%s' --history '%s' --case '%s' --no-case-lookup", res,
             out, k.hist[0], k.hist[1], NANHEAD);
    int rc = test_run_kreplay(args, &output);
    if (rc != 1)   /* 2 of its 18 rows fail: exit 1, as the gate would */
        fail_msg("kreplay %s -> %d: %s", args, rc, output);
    assert_non_null(strstr(output, "18 rows from 1 file"));
    assert_non_null(strstr(output, "1 non-finite map"));
    assert_non_null(strstr(output, "trend over 3 runs"));
    free(output);
    char *html = read_output(out, "report.html");
    assert_non_null(strstr(html, "block: rows 0-16 x columns 1024-1151"));
    if (gnuplot_available())
        assert_int_equal(test_count_substr(html, "<svg class=\"kr-plot\""), 8);
    free(html);
    static const char *files[] = {"results.json", "results.csv", "report.md", "report_full.md"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s", out, files[i]);
        assert_int_equal(access(path, R_OK), 0);
    }
    /* usage errors */
    assert_int_equal(test_run_kreplay("report", NULL), 2);
    snprintf(args, sizeof args, "report '%s'", res);
    assert_int_equal(test_run_kreplay(args, NULL), 2);
    snprintf(args, sizeof args, "report '%s.nope' -o '%s'", res, out);
    assert_int_equal(test_run_kreplay(args, &output), 2);
    assert_non_null(strstr(output, ".nope"));
    free(output);
    /* the same file twice: overlapping rows are refused */
    snprintf(args, sizeof args, "report '%s' '%s' -o '%s'", res, res, out);
    assert_int_equal(test_run_kreplay(args, &output), 2);
    assert_non_null(strstr(output, "in two of the files"));
    free(output);
    result_list_free(&k.rows);
}

/* No rows at all: still a page, a Markdown file and no plot. */
static void test_empty_rows(void **state)
{
    (void)state;
    result_list_t rows = {0};
    char out[512];
    test_tmp_path(out, sizeof out, "report-empty");
    report_options_t opt;
    report_options_init(&opt);
    opt.write_tables = 1;
    report_outcome_t outcome;
    opt.outcome = &outcome;
    kr_error_t err = {{0}};
    if (report_generate(out, &rows, NULL, 0, &opt, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(outcome.plots_drawn, 0);
    char *html = read_output(out, "report.html");
    assert_non_null(strstr(html, "PASS: 0 of 0 rows fail"));
    assert_non_null(strstr(html, "No plots in this report."));
    assert_int_equal(test_count_substr(html, "<svg"), 0);
    free(html);
    char path[800];
    snprintf(path, sizeof path, "%s/report_full.md", out);
    assert_int_equal(access(path, R_OK), 0);
    no_temp_files(out);
}

static void test_progress_line(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    progress_t p;
    progress_start_on(&p, fp, 0, "x", 10);   /* disabled: silent */
    progress_update(&p, 5);
    progress_finish(&p);
    fflush(fp);
    assert_int_equal(len, 0);

    progress_start_on(&p, fp, 1, "kreplay gate", 10);
    progress_update(&p, 3);
    fflush(fp);
    assert_non_null(strstr(buf, "\r[kreplay gate] 3/10 (30%)"));
    assert_non_null(strstr(buf, "ETA"));
    size_t before = len;
    progress_update(&p, 4);  /* within 0.2 s: not redrawn */
    fflush(fp);
    assert_int_equal(len, before);
    progress_update(&p, 10); /* the last one always is */
    progress_finish(&p);
    fflush(fp);
    assert_non_null(strstr(buf, "10/10 (100%)"));
    assert_int_equal(buf[len - 1], '\n');
    fclose(fp);
    free(buf);

    char s[64];
    progress_format_seconds(42.4, s, sizeof s);
    assert_string_equal(s, "42 s");
    progress_format_seconds(185, s, sizeof s);
    assert_string_equal(s, "3 min 05 s");
    progress_format_seconds(3720, s, sizeof s);
    assert_string_equal(s, "1 h 02 min");

    /* progress_start decides by stderr: a file here, so it stays silent */
    if (!isatty(STDERR_FILENO)) {
        progress_start(&p, "x", 3);
        assert_int_equal(p.enabled, 0);
    }
}

KR_TEST_MAIN(test_report_known_rows, test_cli_report, test_empty_rows, test_progress_line);
