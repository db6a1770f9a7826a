/* Run and output directories prepared by someone else (a shared Slurm file
 * system), and names from files that become paths.
 *
 * Feeds kreplay (the binary):
 * - RUNDIR/.kreplay.lock planted as a symbolic link to another file, and as
 *   a hard link to one, before replay -o, gate -o and merge -o: refused by
 *   name, the other file untouched (a planted link was followed and its
 *   target truncated); RUNDIR/partial planted as a link to another folder
 *   before gate -o RUNDIR: refused, that folder's .h5 files neither deleted
 *   nor joined by partials;
 * - DIR/plots planted as a symbolic link to another folder before report -o
 *   DIR over an earlier report, and DIR/report.html as a link to another
 *   file: nothing in that folder or file is touched (the .png/.svg there
 *   were deleted), DIR/plots becomes this report's own folder, and no
 *   staging directory is left in DIR;
 * - a results file whose time_utc is "../escaped" given to baseline update
 *   --history DIR: the copy lands in DIR, under a name of safe characters,
 *   and nothing is written outside it (it was written beside DIR);
 * - a suite naming "link/../x.h5", where link points into another folder:
 *   the file replayed is the one the OS resolves (beside link's target),
 *   not the lexically cleaned "x.h5". */
/* ctest-labels: security */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostile_files.h"
#include "kr_string.h"
#include "results_store.h"
#include "test_main.h"
#include "test_support.h"

static char dir[512];   /* the tiny suite, its clean run (dir/run) and a case (dir/cases) */

static int setup(void **state)
{
    (void)state;
    hostile_tiny_run(dir, sizeof dir, "hostile-paths", 1);
    hostile_sh("'%s' synth --shape 64x256 --m 4 --out '%s/cases' >/dev/null", hostile_binary(), dir);
    return 0;
}

static void expect_text(const char *path, const char *text)
{
    char *got = test_read_file(path, NULL);
    if (!got || strcmp(got, text) != 0)
        fail_msg("%s was changed: now \"%s\"", path, got ? got : "(gone)");
    free(got);
}

/* -------------------------------------------------------- the run lock */

static void test_planted_lock_links(void **state)
{
    (void)state;
    char victim[1024], run[1024], lock[1100], *out = NULL;
    snprintf(victim, sizeof victim, "%s/victim.txt", dir);
    snprintf(run, sizeof run, "%s/lock-run", dir);
    snprintf(lock, sizeof lock, "%s/.kreplay.lock", run);
    static const char precious[] = "someone else's file\n";
    assert_int_equal(test_write_text(victim, precious), 0);
    assert_int_equal(mkdir(run, 0755), 0);
    assert_int_equal(symlink(victim, lock), 0);

    int rc = hostile_run(&out, "replay -o '%s' '%s/cases'", run, dir);
    assert_int_equal(rc, 2);
    hostile_expect(out, "lock file");
    hostile_expect(out, "symbolic link");
    free(out);
    rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s' -q", dir, run);
    assert_int_equal(rc, 2);
    hostile_expect(out, "symbolic link");
    free(out);
    rc = hostile_run(&out, "merge -o '%s' '%s/run/results.h5'", run, dir);
    assert_int_equal(rc, 2);
    hostile_expect(out, "symbolic link");
    free(out);
    expect_text(victim, precious);

    /* A hard link: the same file under the lock's name. */
    assert_int_equal(unlink(lock), 0);
    assert_int_equal(link(victim, lock), 0);
    rc = hostile_run(&out, "merge -o '%s' '%s/run/results.h5'", run, dir);
    assert_int_equal(rc, 2);
    hostile_expect(out, "links");
    free(out);
    expect_text(victim, precious);
}

static void test_planted_partial_folder(void **state)
{
    (void)state;
    char run[1024], other[1024], keep[1100], link_path[1100], *out = NULL;
    snprintf(run, sizeof run, "%s/partial-run", dir);
    snprintf(other, sizeof other, "%s/someone-elses-h5", dir);
    hostile_sh("mkdir -p '%s' '%s'", run, other);
    snprintf(keep, sizeof keep, "%s/keep.h5", other);
    static const char precious[] = "not a partial\n";
    assert_int_equal(test_write_text(keep, precious), 0);
    snprintf(link_path, sizeof link_path, "%s/partial", run);
    assert_int_equal(symlink(other, link_path), 0);
    const int rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s' -q", dir, run);
    assert_int_equal(rc, 2);
    hostile_expect(out, "partial: is a symbolic link; refused");
    free(out);
    expect_text(keep, precious);
    assert_int_equal(test_count_files(other, ".h5"), 1);
}

/* -------------------------------------------------- the report directory */

static int count_entries(const char *path, const char *prefix)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    closedir(d);
    return n;
}

static void test_planted_links_in_a_report_dir(void **state)
{
    (void)state;
    char rep[1024], other[1024], keep[1100], victim[1024], link_path[1100], *out = NULL;
    snprintf(rep, sizeof rep, "%s/link-report", dir);
    snprintf(other, sizeof other, "%s/someone-elses-plots", dir);
    snprintf(victim, sizeof victim, "%s/someone-elses.html", dir);
    assert_int_equal(mkdir(other, 0755), 0);
    static const char precious[] = "<p>not a report</p>\n";
    assert_int_equal(test_write_text(victim, precious), 0);
    static const char *const names[] = {"keep.png", "keep.svg", "relerr_64x256.svg"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(keep, sizeof keep, "%s/%s", other, names[i]);
        assert_int_equal(test_write_text(keep, precious), 0);
    }
    /* An earlier report, then the planted links. */
    int rc = hostile_run(&out, "report '%s/run' -o '%s'", dir, rep);
    if (rc != 0)
        fail_msg("report: exit %d: %s", rc, out);
    free(out);
    hostile_sh("rm -rf '%s/plots' '%s/report.html'", rep, rep);
    snprintf(link_path, sizeof link_path, "%s/plots", rep);
    assert_int_equal(symlink(other, link_path), 0);
    snprintf(link_path, sizeof link_path, "%s/report.html", rep);
    assert_int_equal(symlink(victim, link_path), 0);

    rc = hostile_run(&out, "report '%s/run' -o '%s'", dir, rep);
    if (rc != 0)
        fail_msg("report over planted links: exit %d: %s", rc, out);
    free(out);
    /* The other folder and file hold exactly what they held. */
    assert_int_equal(count_entries(other, ""), 2 + 3);   /* ".", "..", three files */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(keep, sizeof keep, "%s/%s", other, names[i]);
        expect_text(keep, precious);
    }
    expect_text(victim, precious);
    /* DIR's own entries replace the links. */
    struct stat st;
    snprintf(link_path, sizeof link_path, "%s/plots", rep);
    if (lstat(link_path, &st) == 0)
        assert_true(S_ISDIR(st.st_mode));
    snprintf(link_path, sizeof link_path, "%s/report.html", rep);
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(count_entries(rep, ".kreplay-new-"), 0);
}

/* ------------------------------------------------ names from a file */

static void test_history_name_from_time_utc(void **state)
{
    (void)state;
    char src[1024], hist[1024], above[1024], *out = NULL;
    snprintf(hist, sizeof hist, "%s/hist-root/sub", dir);
    snprintf(above, sizeof above, "%s/hist-root", dir);
    hostile_sh("mkdir -p '%s'", hist);
    result_list_t rows;
    results_meta_t m;
    kr_error_t err = {{0}};
    snprintf(src, sizeof src, "%s/run/results.h5", dir);
    assert_int_equal(results_store_read(src, &rows, &m, &err), 0);
    kr_strlcpy(m.time_utc, "../escaped", sizeof m.time_utc);
    kr_strlcpy(m.git_commit, "abc", sizeof m.git_commit);
    snprintf(src, sizeof src, "%s/evil-time.h5", dir);
    hostile_write(src, &rows, &m);
    result_list_free(&rows);

    const int rc = hostile_run(&out, "baseline update '%s' --baseline '%s/evil-base.h5' --history '%s'",
                               src, dir, hist);
    if (rc != 0)
        fail_msg("baseline update: exit %d: %s", rc, out);
    free(out);
    /* One copy, in the history folder, nothing above it or beside the run. */
    assert_int_equal(test_count_files(hist, ".h5"), 1);
    assert_int_equal(count_entries(above, "escaped"), 0);
    assert_int_equal(count_entries(dir, "escaped"), 0);
    assert_int_equal(count_entries(hist, "_._escaped_abc.h5"), 1);
}

/* ---------------------------------------------------- suite paths */

static void test_suite_paths_resolved_by_the_os(void **state)
{
    (void)state;
    char root[1024], *out = NULL;
    snprintf(root, sizeof root, "%s/suite-paths", dir);
    /* root/x.h5 (K 256) is what "x.h5" cleaned lexically names; root/far/x.h5
     * (K 512) is what link/../x.h5 is, link being root/far/sub. */
    hostile_sh("mkdir -p '%s/far/sub' && cd '%s' && ln -s far/sub link && "
               "'%s' synth --shape 64x256 --m 4 --out a >/dev/null && mv a/*.h5 x.h5 && "
               "'%s' synth --shape 64x512 --m 4 --out b >/dev/null && mv b/*.h5 far/x.h5",
               root, root, hostile_binary(), hostile_binary());
    char suite[1200], text[2048];
    snprintf(suite, sizeof suite, "%s/s.yaml", root);
    snprintf(text, sizeof text, "suite: paths\ncases:\n  - files: [\"link/../x.h5\"]\n"
                                "kernels: [\"w4a8.folded\"]\n");
    assert_int_equal(test_write_text(suite, text), 0);
    const int rc = hostile_run(&out, "gate '%s' -o '%s/run' -q", suite, root);
    if (rc != 0)
        fail_msg("gate: exit %d: %s", rc, out);
    free(out);
    char results[1200];
    snprintf(results, sizeof results, "%s/run/results.h5", root);
    result_list_t rows;
    kr_error_t err = {{0}};
    assert_int_equal(results_store_read(results, &rows, NULL, &err), 0);
    assert_true(rows.count > 0);
    for (int64_t i = 0; i < rows.count; i++) {
        assert_int_equal(rows.rows[i].K, 512);
        if (!strstr(rows.rows[i].case_path, "/far/x.h5"))
            fail_msg("row %lld replayed %s, not far/x.h5", (long long)i, rows.rows[i].case_path);
    }
    result_list_free(&rows);
}

KR_TEST_MAIN_SETUP(setup, NULL, test_planted_lock_links, test_planted_partial_folder,
                   test_planted_links_in_a_report_dir,
                   test_history_name_from_time_utc, test_suite_paths_resolved_by_the_os);
