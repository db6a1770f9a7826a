/* gnuplot through a pipe (reports/gnuplot.h) and the report without it:
 *  - gnuplot is looked up on PATH: a PATH of an empty directory finds none,
 *    a fake "gnuplot" there is found and its failure (exit code, stderr) is
 *    reported as one line, without a hang and without SIGPIPE killing us
 *    while a long script is still being written;
 *  - the real gnuplot (when installed) draws SVG and PNG of the requested
 *    size from a script whose data is inline, and leaves no file behind (the
 *    working directory and TMPDIR stay empty); a batch of renders run
 *    several at once gives each job the bytes it gets rendered alone;
 *  - report_generate with no gnuplot on PATH succeeds, warns once on
 *    stderr, writes the page without plots and says why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gnuplot.h"
#include "kreplay_checks.h"
#include "report_bundle.h"
#include "test_support.h"

static char saved_path[8192];
static int path_saved;

static void save_path(void)
{
    const char *p = getenv("PATH");
    snprintf(saved_path, sizeof saved_path, "%s", p ? p : "/usr/bin:/bin");
    path_saved = 1;
}

static void restore_path(void)
{
    if (path_saved)
        setenv("PATH", saved_path, 1);
    path_saved = 0;
}

/* Teardown: PATH back even when an assertion failed midway. */
static int restore_path_td(void **state)
{
    (void)state;
    restore_path();
    return 0;
}

static void make_dir(char *buf, size_t cap, const char *name)
{
    test_tmp_path(buf, cap, name);
    assert_int_equal(mkdir(buf, 0777), 0);
}

/* Entries of a directory other than . and .. */
static int dir_entries(const char *dir, char *first, size_t cap)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n == 0 && first)
            snprintf(first, cap, "%s", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

#define read_all test_read_file

static void test_not_on_path(void **state)
{
    (void)state;
    char empty[512], buf[4096];
    make_dir(empty, sizeof empty, "gp-empty");
    save_path();
    setenv("PATH", empty, 1);
    assert_int_equal(gnuplot_available(), 0);
    assert_int_equal(gnuplot_find(buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    char *img = (char *)1;
    size_t len = 99;
    kr_error_t err = {{0}};
    assert_int_equal(gnuplot_render("plot x\n", GNUPLOT_SVG, 300, 200, &img, &len, &err), -1);
    assert_null(img);
    assert_int_equal(len, 0);
    assert_non_null(strstr(err.msg, "not found on PATH"));
    /* A non-executable file named gnuplot is not gnuplot either. */
    char fake[700];
    snprintf(fake, sizeof fake, "%s/gnuplot", empty);
    FILE *f = fopen(fake, "w");
    fputs("#!/bin/sh\nexit 0\n", f);
    fclose(f);
    chmod(fake, 0644);
    assert_int_equal(gnuplot_available(), 0);
    restore_path();
}

/* A fake gnuplot that fails at once: the error comes back, we survive the
 * broken pipe of a long script, and nothing hangs. */
static void test_failing_gnuplot(void **state)
{
    (void)state;
    char dir[512], fake[700];
    make_dir(dir, sizeof dir, "gp-fake");
    snprintf(fake, sizeof fake, "%s/gnuplot", dir);
    FILE *f = fopen(fake, "w");
    fputs("#!/bin/sh\necho 'line 3: undefined function: kaput' >&2\nexit 3\n", f);
    fclose(f);
    chmod(fake, 0755);
    save_path();
    char path[1200];
    snprintf(path, sizeof path, "%s:/usr/bin:/bin", dir);
    setenv("PATH", path, 1);
    char found[4096];
    assert_int_equal(gnuplot_find(found, sizeof found), 1);
    assert_string_equal(found, fake);

    /* 4 MB of script: far more than a pipe holds, so the writes hit EPIPE. */
    size_t big = 4u << 20;
    char *script = malloc(big + 1);
    memset(script, '#', big);
    for (size_t i = 79; i < big; i += 80)
        script[i] = '\n';
    script[big] = '\0';
    char *img = NULL;
    size_t len = 0;
    kr_error_t err = {{0}};
    assert_int_equal(gnuplot_render(script, GNUPLOT_PNG, 300, 200, &img, &len, &err), -1);
    assert_null(img);
    assert_non_null(strstr(err.msg, "exit 3"));
    assert_non_null(strstr(err.msg, "undefined function: kaput"));

    /* The same through the batch, more jobs than children at once: every
     * job fails on its own, none hangs on another's pipe. */
    gnuplot_job_t jobs[3];
    for (int i = 0; i < 3; i++)
        jobs[i] = (gnuplot_job_t){.script = script, .term = GNUPLOT_SVG, .width = 300, .height = 200};
    gnuplot_render_all(jobs, 3, 2);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(jobs[i].rc, -1);
        assert_null(jobs[i].out);
        assert_non_null(strstr(jobs[i].err.msg, "exit 3"));
    }
    free(script);
    restore_path();
}

/* Where test_real_svg_and_png moved the working directory and TMPDIR
 * from: put back even when an assertion fails. */
static char old_cwd[4096], saved_tmp[4096];
static int moved, had_tmp;

static int restore_cwd(void **state)
{
    (void)state;
    if (moved) {
        if (had_tmp)
            setenv("TMPDIR", saved_tmp, 1);
        else
            unsetenv("TMPDIR");
        if (chdir(old_cwd) != 0)
            return -1;
        moved = 0;
    }
    return 0;
}

static void test_real_svg_and_png(void **state)
{
    (void)state;
    if (!gnuplot_available()) {
        print_message("gnuplot not installed: drawing not tested\n");
        skip();
    }
    char version[128];
    gnuplot_version(version, sizeof version);
    assert_non_null(strstr(version, "gnuplot"));

    /* cwd and TMPDIR in an empty directory: nothing may be left there. */
    char dir[512];
    make_dir(dir, sizeof dir, "gp-clean");
    assert_non_null(getcwd(old_cwd, sizeof old_cwd));
    const char *old_tmp = getenv("TMPDIR");
    had_tmp = old_tmp != NULL;
    if (old_tmp)
        snprintf(saved_tmp, sizeof saved_tmp, "%s", old_tmp);
    assert_int_equal(chdir(dir), 0);
    moved = 1;
    setenv("TMPDIR", dir, 1);

    const char *script = "$d << EOD\n1 1\n2 4\n3 9\nEOD\n"
                         "set title \"squares <&>\"\n"
                         "plot $d using 1:2 with linespoints title \"a_b\"\n";
    char *img = NULL;
    size_t len = 0;
    kr_error_t err = {{0}};
    assert_int_equal(gnuplot_render(script, GNUPLOT_SVG, 640, 360, &img, &len, &err), 0);
    assert_true(len > 500);
    assert_int_equal(strlen(img), len);
    /* gnuplot escapes its text; noenhanced keeps a_b literal */
    TEST_EXPECT_PHRASES(img, "<svg", "</svg>", "width=\"640\" height=\"360\"", "gnuplot_plot_1",
                        "squares &lt;&amp;", ">a_b<");
    free(img);

    assert_int_equal(gnuplot_render(script, GNUPLOT_PNG, 640, 360, &img, &len, &err), 0);
    const unsigned char *u = (const unsigned char *)img;
    assert_true(len > 1000);
    assert_memory_equal(u, "\x89PNG\r\n\x1a\n", 8);
    unsigned w = (unsigned)u[16] << 24 | (unsigned)u[17] << 16 | (unsigned)u[18] << 8 | u[19];
    unsigned h = (unsigned)u[20] << 24 | (unsigned)u[21] << 16 | (unsigned)u[22] << 8 | u[23];
    assert_int_equal(w, 640);
    assert_int_equal(h, 360);
    free(img);

    /* A script error: -1 and gnuplot's own message. */
    assert_int_equal(gnuplot_render("plot no_such_function(x)\n", GNUPLOT_SVG, 300, 200, &img, &len, &err), -1);
    assert_null(img);
    assert_non_null(strstr(err.msg, "no_such_function"));

    /* A batch, three gnuplots at once, one script failing in the middle:
     * each job gets exactly the bytes it gets rendered alone, in its slot. */
    enum { JOBS = 7 };
    char scripts[JOBS][200];
    gnuplot_job_t jobs[JOBS];
    for (int i = 0; i < JOBS; i++) {
        if (i == 3)
            snprintf(scripts[i], sizeof scripts[i], "plot job_%d_missing(x)\n", i);
        else
            snprintf(scripts[i], sizeof scripts[i],
                     "$d << EOD\n1 %d\n2 %d\nEOD\nset title \"job %d\"\nplot $d using 1:2 with lines\n",
                     i, 3 * i + 1, i);
        jobs[i] = (gnuplot_job_t){.script = scripts[i], .term = i % 2 ? GNUPLOT_PNG : GNUPLOT_SVG,
                                  .width = 300 + 10 * i, .height = 200};
    }
    gnuplot_render_all(jobs, JOBS, 3);
    for (int i = 0; i < JOBS; i++) {
        char *alone = NULL;
        size_t alone_len = 0;
        kr_error_t e = {{0}};
        const int rc = gnuplot_render(jobs[i].script, jobs[i].term, jobs[i].width, jobs[i].height,
                                      &alone, &alone_len, &e);
        assert_int_equal(jobs[i].rc, rc);
        if (i == 3) {
            assert_int_equal(rc, -1);
            assert_null(jobs[i].out);
            assert_non_null(strstr(jobs[i].err.msg, "job_3_missing"));
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(jobs[i].out_len, alone_len);
        assert_memory_equal(jobs[i].out, alone, alone_len);
        if (jobs[i].term == GNUPLOT_SVG) {
            char title[32];
            snprintf(title, sizeof title, "job %d", i);
            assert_non_null(strstr(jobs[i].out, title));
        }
        free(alone);
        free(jobs[i].out);
    }

    char left[256] = "";
    int n = dir_entries(dir, left, sizeof left);
    if (n)
        fail_msg("gnuplot left %d files in the working directory / TMPDIR, e.g. %s", n, left);
}

static void add_row(result_list_t *l, const char *kernel, const char *ref, int64_t M, double rel, verdict_t v)
{
    result_t *r = result_list_add(l);
    snprintf(r->case_path, sizeof r->case_path, "synth:64x256:M%lld", (long long)M);
    snprintf(r->case_name, sizeof r->case_name, "synth-M%lld", (long long)M);
    r->M = M;
    r->N = 64;
    r->K = 256;
    snprintf(r->band, sizeof r->band, "%s", M <= 64 ? "decode" : "prefill");
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    snprintf(r->reference, sizeof r->reference, "%s", ref);
    r->metrics.rel_fro = rel;
    r->threshold = 0.01;
    r->verdict = v;
    r->ulp.count = 64 * M;
    r->ulp.identical = 60 * M;
    r->ulp.identical_frac = 60.0 / 64;
    r->ulp.bins[0] = 60 * M;
    r->ulp.bins[1] = 4 * M;
    r->ulp.max_ulp = 1;
    r->ref_f32_vs_f64 = NAN;
}

static void test_report_without_gnuplot(void **state)
{
    (void)state;
    result_list_t rows = {0};
    add_row(&rows, "w4a8.folded", "R_exact", 4, 0.002, VERDICT_PASS);
    add_row(&rows, "w4a8.folded", "R_source", 4, 0.02, VERDICT_PASS);
    add_row(&rows, "w4a4.aiter", "R_source", 300, 0.12, VERDICT_WRONG);

    char out[512], empty[512], errpath[700];
    test_tmp_path(out, sizeof out, "report-nognuplot");
    make_dir(empty, sizeof empty, "gp-nopath");
    /* a stale plot from an earlier report in the same directory */
    char plots[700];
    snprintf(plots, sizeof plots, "%s/plots", out);
    assert_int_equal(mkdir(out, 0777), 0);
    assert_int_equal(mkdir(plots, 0777), 0);
    char stale[800];
    snprintf(stale, sizeof stale, "%s/old.svg", plots);
    FILE *f = fopen(stale, "w");
    fputs("<svg/>", f);
    fclose(f);

    save_path();
    setenv("PATH", empty, 1);
    /* stderr into a file, to read the warning */
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", empty);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    close(fd);

    report_options_t opt;
    report_options_init(&opt);
    report_outcome_t outcome;
    opt.outcome = &outcome;
    opt.write_tables = 1;
    kr_error_t err = {{0}};
    int rc = report_generate(out, &rows, NULL, 0, &opt, &err);

    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    restore_path();
    if (rc)
        fail_msg("report_generate: %s", err.msg);
    assert_int_equal(outcome.gnuplot_found, 0);
    assert_int_equal(outcome.plots_drawn, 0);

    char *warn = read_all(errpath, NULL);
    assert_non_null(warn);
    assert_int_equal(test_count_substr(warn, "gnuplot not found on PATH"), 1);
    free(warn);

    char path[800];
    snprintf(path, sizeof path, "%s/report.html", out);
    char *html = read_all(path, NULL);
    assert_non_null(html);
    assert_int_equal(test_count_substr(html, "<svg"), 0);
    assert_non_null(strstr(html, "gnuplot was not found on PATH"));
    assert_non_null(strstr(html, "data-expected-plots=\"0\""));
    assert_non_null(strstr(html, "FAIL: 1 of 3 rows fail"));
    free(html);
    snprintf(path, sizeof path, "%s/report_full.md", out);
    char *md = read_all(path, NULL);
    assert_non_null(md);
    assert_null(strstr(md, ".png)"));
    assert_non_null(strstr(md, "gnuplot was not found on PATH"));
    free(md);
    /* the tables were written too, and the stale plot is gone with the
     * earlier report's plots/: this report drew none */
    snprintf(path, sizeof path, "%s/results.csv", out);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/report.md", out);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(access(stale, F_OK), -1);
    assert_int_equal(access(plots, F_OK), -1);
    result_list_free(&rows);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_not_on_path, restore_path_td),
        cmocka_unit_test_teardown(test_failing_gnuplot, restore_path_td),
        cmocka_unit_test_teardown(test_real_svg_and_png, restore_cwd),
        cmocka_unit_test_teardown(test_report_without_gnuplot, restore_path_td),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
