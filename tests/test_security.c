/* Hostile names that must neither run anything nor forge anything:
 *  - an output directory, case name or option holding shell syntax
 *    ("runs/x'; touch owned; '", $(...), backquotes) given to replay, gate
 *    (twice: the second run clears the first one's partials), report and
 *    compare runs nothing: no "owned" file appears, and the outputs land in
 *    the directory of that literal name;
 *  - names are escaped for Markdown, HTML, CSV, XML and the terminal
 *    (reports/escape.h against hand-written expectations), and a case file
 *    named with a newline and pipes forges no row of report.md.
 * Hostile files (HDF5 leaving itself, .pt zip bombs) are in
 * test_security_files.c.  The kreplay binary is run with an argument vector
 * (support/security_runs.c: fork + execv), so the hostile strings reach it
 * exactly as a user's shell would pass them. */
/* ctest-labels: security */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "escape.h"
#include "security_runs.h"
#include "test_main.h"
#include "test_support.h"

/* The hostile names' `touch owned` never ran in DIR. */
static void assert_nothing_ran(const char *dir)
{
    char owned[1100];
    snprintf(owned, sizeof owned, "%s/owned", dir);
    assert_false(sec_exists(owned));
}

/* -------------------------------------------------------- 1. no shell at all */

static const char *const HOSTILE_DIRS[] = {
    "runs/x'; touch owned; '",
    "runs/y\"; touch owned; \"",
    "runs/$(touch owned)",
    "runs/`touch owned`",
};

static void test_no_shell_from_paths(void **state)
{
    (void)state;
    sec_work_t w;
    sec_work_dir_with_case(&w);
    char runs[1100];
    snprintf(runs, sizeof runs, "%s/runs", w.dir);
    sec_make_dir(runs);

    char suite[1100];
    snprintf(suite, sizeof suite, "%s/suite.yaml", w.dir);
    assert_int_equal(test_write_text(suite, "suite: sec\ncases:\n  - synth:\n      shapes: [64x64]\n"
                                            "      m: [4]\n      seeds: [1]\n"
                                            "references: [exact]\ndevice: cpu\n"), 0);

    for (size_t h = 0; h < sizeof HOSTILE_DIRS / sizeof HOSTILE_DIRS[0]; h++) {
        const char *o = HOSTILE_DIRS[h];
        const char *replay[] = {"kreplay", "replay", "--kernels", "w4a8.folded", "-o", o, w.cs, NULL};
        sec_expect_verdict_in(w.dir, replay, o);
        /* twice: the second run clears the first one's partials */
        for (int pass = 0; pass < 2; pass++) {
            char gdir[600];
            snprintf(gdir, sizeof gdir, "%s-gate", o);
            const char *gate[] = {"kreplay", "gate", "suite.yaml", "-o", gdir, NULL};
            sec_expect_verdict_in(w.dir, gate, gdir);
            assert_nothing_ran(w.dir);
        }
        char res[1200], rdir[600];
        snprintf(res, sizeof res, "%s/results.h5", o);
        snprintf(rdir, sizeof rdir, "%s-report", o);
        /* plots only for the first name: test_no_gnuplot_injection_from_names covers gnuplot */
        const char *report[] = {"kreplay", "report", res, "-o", rdir, h ? "--no-plots" : NULL, NULL};
        sec_expect_success_in(w.dir, report, rdir);
        char cdir[600];
        snprintf(cdir, sizeof cdir, "%s-compare", o);
        const char *compare[] = {"kreplay", "compare", "--synth", "64x64", "--m", "4", "-o", cdir, NULL};
        sec_expect_verdict_in(w.dir, compare, cdir);
        assert_nothing_ran(w.dir);

        /* the outputs are in the directories of those literal names */
        char want[1400];
        snprintf(want, sizeof want, "%s/%s/results.json", w.dir, o);
        assert_true(sec_exists(want));
        snprintf(want, sizeof want, "%s/%s-gate/results.h5", w.dir, o);
        assert_true(sec_exists(want));
        snprintf(want, sizeof want, "%s/%s-report/report.html", w.dir, o);
        assert_true(sec_exists(want));
    }
}

/* A case whose name is gnuplot syntax: the plots are drawn (or skipped),
 * nothing runs. */
static void test_no_gnuplot_injection_from_names(void **state)
{
    (void)state;
    sec_work_t w;
    sec_work_dir_with_case(&w);
    char evil[1400];
    sec_copy_case_as(&w, "x\"; system(\"touch owned\"); print \"`touch owned`@owned.h5", evil, sizeof evil);
    /* NaN in x's first row: the report then draws the case's non-finite
     * map, whose title holds the case name */
    sec_h5_quiet();
    hid_t f = H5Fopen(evil, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t x = H5Dopen2(f, "x", H5P_DEFAULT);
    uint16_t xv[4 * 64];
    assert_true(H5Dread(x, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, xv) >= 0);
    for (int k = 0; k < 40; k++)
        xv[k] = 0x7FC0;
    assert_true(H5Dwrite(x, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, xv) >= 0);
    H5Dclose(x);
    H5Fclose(f);
    const char *replay[] = {"kreplay", "replay", "-o", "run", evil, NULL};
    sec_expect_verdict_in(w.dir, replay, NULL);
    const char *report[] = {"kreplay", "report", "run/results.h5", "-o", "rep", "--case", evil,
                            "--title", "t\"; system(\"touch owned\"); print \"`touch owned`", NULL};
    sec_expect_success_in(w.dir, report, NULL);
    assert_nothing_ran(w.dir);
    /* the name did reach a plot: the non-finite map was drawn (when gnuplot is there) */
    char plots[1200];
    snprintf(plots, sizeof plots, "%s/rep/plots", w.dir);
    DIR *d = opendir(plots);
    if (d) {
        int nfmap = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            nfmap |= strncmp(e->d_name, "nfmap_", 6) == 0;
        closedir(d);
        assert_true(nfmap);
    }
}

/* ------------------------------------------------------------ 3. escaping */

/* What one of the escapers writes for IN (FLAG: csv's always-quote, xml's
 * attribute mode) is exactly WANT. */
static void expect_escaped(void (*plain)(FILE *, const char *),
                           void (*flagged)(FILE *, const char *, int), const char *in, int flag,
                           const char *want)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    if (plain)
        plain(fp, in);
    else
        flagged(fp, in, flag);
    fclose(fp);
    assert_string_equal(buf, want);
    free(buf);
}

static void expect_md(const char *in, const char *want)
{
    expect_escaped(esc_markdown, NULL, in, 0, want);
}

static void expect_md_code(const char *in, const char *want)
{
    expect_escaped(esc_markdown_code, NULL, in, 0, want);
}

static void expect_html(const char *in, const char *want)
{
    expect_escaped(esc_html, NULL, in, 0, want);
}

static void expect_csv(const char *in, int always, const char *want)
{
    expect_escaped(NULL, esc_csv, in, always, want);
}

static void expect_xml(const char *in, int attr, const char *want)
{
    expect_escaped(NULL, esc_xml, in, attr, want);
}

static void test_escape_formats(void **state)
{
    (void)state;
    /* Markdown cell: no pipe, newline, code span, link or tag survives */
    expect_md("plain_name-1.5", "plain_name-1.5");
    expect_md("a|b\n| forged | row |", "a\\|b \\| forged \\| row \\|");
    expect_md("x\\|y", "x\\\\\\|y");
    expect_md("`code` *em* [l](u) ~~s~~", "\\`code\\` \\*em\\* \\[l\\](u) \\~\\~s\\~\\~");
    expect_md("<script>&amp;", "&lt;script&gt;&amp;amp;");
    expect_md("tab\there\r\x1b[31m", "tab here  \\[31m");
    expect_md("caf\xc3\xa9 \xff!", "caf\xc3\xa9 \xef\xbf\xbd!");
    expect_md(NULL, "");
    /* Markdown code span */
    expect_md_code("cases/a.h5", "`cases/a.h5`");
    expect_md_code("a`b", "``a`b``");
    expect_md_code("``x", "``` ``x ```");
    expect_md_code("line1\nline2", "`line1 line2`");
    /* HTML */
    expect_html("<b a=\"1\" c='2'>&</b>", "&lt;b a=&quot;1&quot; c=&#39;2&#39;&gt;&amp;&lt;/b&gt;");
    expect_html("a\nb\tc\x01" "d\x7f" "e\xc0\xaf", "a\nb\tc&#xFFFD;d&#xFFFD;e&#xFFFD;&#xFFFD;");
    expect_html("\xe2\x82\xac", "\xe2\x82\xac");
    /* CSV (RFC 4180) and formulas */
    expect_csv("plain", 0, "plain");
    expect_csv("plain", 1, "\"plain\"");
    expect_csv("a,b", 0, "\"a,b\"");
    expect_csv("say \"hi\"", 0, "\"say \"\"hi\"\"\"");
    expect_csv("two\nlines", 0, "\"two\nlines\"");
    expect_csv("=HYPERLINK(\"x\")", 0, "\"'=HYPERLINK(\"\"x\"\")\"");
    expect_csv("+1+cmd", 1, "\"'+1+cmd\"");
    expect_csv("@SUM(A1)", 0, "\"'@SUM(A1)\"");
    expect_csv("-2+3", 0, "\"'-2+3\"");
    expect_csv("-", 0, "-");
    expect_csv("-1.5e-3", 0, "-1.5e-3");
    expect_csv(NULL, 1, "\"\"");
    /* XML 1.0 attribute and text */
    expect_xml("a<b>&\"'", 1, "a&lt;b&gt;&amp;&quot;&apos;");
    expect_xml("l1\nl2\tt\rr", 1, "l1&#10;l2&#9;t&#13;r");
    expect_xml("l1\nl2", 0, "l1\nl2");
    expect_xml("nul\x01" "bell\x07" "esc\x1b" "del\x7f", 0, "nul?bell?esc?del?");
    /* U+FFFE, U+FFFF: one each; a surrogate is three bytes that are not UTF-8 */
    expect_xml("\xef\xbf\xbe\xef\xbf\xbf\xed\xa0\x80ok", 1, "?????ok");
    expect_xml("\xef\xbf\xbd\xf0\x9f\x98\x80", 0, "\xef\xbf\xbd\xf0\x9f\x98\x80");
    /* terminal: one line, no escape sequences */
    char t[16];
    esc_terminal("a\nb\x1b[2Jc", t, sizeof t);
    assert_string_equal(t, "a?b?[2Jc");
    esc_terminal("0123456789abcdefghij", t, sizeof t);
    assert_string_equal(t, "0123456789abcde");
    esc_terminal("0123456789abcd\xc3\xa9", t, sizeof t);
    assert_string_equal(t, "0123456789abcd");
}

/* Records of an RFC 4180 file (quoted newlines inside a record). */
static int csv_records(const char *s)
{
    int n = 0, q = 0;
    for (; *s; s++) {
        if (*s == '"')
            q = !q;
        else if (*s == '\n' && !q)
            n++;
    }
    return n;
}

/* Cell separators of a GFM table line: '|' not escaped by a backslash. */
static int md_separators(const char *line, size_t len)
{
    int n = 0;
    for (size_t i = 0; i < len; i++) {
        if (line[i] == '\\')
            i++;
        else if (line[i] == '|')
            n++;
    }
    return n;
}

/* Every line of every table has its header's number of cells, and no table
 * line holds a raw tag (outside tables, names appear in code spans only). */
static void assert_table_rows_intact(const char *md)
{
    int want = -1;
    for (const char *line = md; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > 0 && line[0] == '|') {
            int n = md_separators(line, len);
            if (want < 0)
                want = n;
            else if (n != want)
                fail_msg("a table line has %d cell separators, its header %d:\n%.*s", n, want,
                         (int)len, line);
            char *copy = strndup(line, len);
            assert_null(strstr(copy, "<img"));
            free(copy);
        } else {
            want = -1;
        }
        line += len + (end ? 1 : 0);
    }
}

static void test_forged_rows(void **state)
{
    (void)state;
    sec_work_t w;
    sec_work_dir_with_case(&w);
    char evil[1400];
    sec_copy_case_as(&w, "a|b\n| forged | 1 | 2 | 3 | x | y | z |<img src=x onerror=alert(1)>.h5", evil,
                 sizeof evil);
    const char *replay[] = {"kreplay", "replay", "--kernels", "w4a8.folded", "--refs", "exact", "-o", "run", evil,
                            NULL};
    char *out = NULL;
    int rc = sec_run_kreplay_in(w.dir, replay, &out);
    if (rc != 0 && rc != 1)
        fail_msg("replay: exit %d: %s", rc, out);
    /* the terminal table: no line starts with the forged text */
    assert_null(strstr(out, "\n| forged"));
    free(out);

    char path[1400];
    snprintf(path, sizeof path, "%s/run/report.md", w.dir);
    char *md = sec_slurp(path, NULL);
    assert_null(strstr(md, "\n| forged"));
    sec_assert_contains(md, "a\\|b \\| forged");
    assert_table_rows_intact(md);
    free(md);

    snprintf(path, sizeof path, "%s/run/results.csv", w.dir);
    char *csv = sec_slurp(path, NULL);
    int lines = csv_records(csv);
    free(csv);
    snprintf(path, sizeof path, "%s/run/results.json", w.dir);
    /* one header record plus one per row: the row count from the JSON's "results" */
    char *json = sec_slurp(path, NULL);
    json_error_t jerr;
    json_t *doc = json_loads(json, 0, &jerr);
    assert_non_null(doc);
    int rows = (int)json_array_size(json_object_get(doc, "results"));
    json_decref(doc);
    free(json);
    assert_true(rows > 0);
    assert_int_equal(lines, rows + 1);

    const char *report[] = {"kreplay", "report", "run/results.h5", "-o", "rep", NULL};
    sec_expect_success_in(w.dir, report, NULL);
    snprintf(path, sizeof path, "%s/rep/report.html", w.dir);
    char *html = sec_slurp(path, NULL);
    assert_null(strstr(html, "<img src=x"));
    sec_assert_contains(html, "&lt;img src=x onerror=alert(1)&gt;");
    free(html);
    snprintf(path, sizeof path, "%s/rep/report_full.md", w.dir);
    md = sec_slurp(path, NULL);
    assert_null(strstr(md, "\n| forged"));
    assert_table_rows_intact(md);
    free(md);
}

KR_TEST_MAIN(
    test_escape_formats, test_forged_rows, test_no_gnuplot_injection_from_names,
    test_no_shell_from_paths);
