/* Hostile input that must neither run anything nor leak anything:
 *  - an output directory, case name or option holding shell syntax
 *    ("runs/x'; touch owned; '", $(...), backquotes) given to replay, gate
 *    (twice: the second run clears the first one's partials), report and
 *    compare runs nothing: no "owned" file appears, and the outputs land in
 *    the directory of that literal name;
 *  - HDF5 files that point outside themselves -- external raw storage on
 *    /etc/passwd, /dev/urandom and a relative path, an external link, a soft
 *    link through one, a virtual dataset -- are refused by name before any
 *    data is read, by the case reader (in process and through the CLI's
 *    reading worker, exit 2, nothing saved by --save-outputs), the results
 *    reader (report) and the outputs writer;
 *  - names are escaped for Markdown, HTML, CSV, XML and the terminal
 *    (reports/escape.h against hand-written expectations), and a case file
 *    named with a newline and pipes forges no row of report.md;
 *  - a .pt whose storage record inflates past the limit (a 1.1 MB zip bomb
 *    of 1.06 GiB of zeros; small ones under a lowered KREPLAY_PT_MAX_MB) is
 *    refused naming the file, the record and the limit, before the record is
 *    inflated.
 * Every fixture is built here (HDF5 C API, libzip), none is committed.
 * The kreplay binary is run with an argument vector (fork + execv), so the
 * hostile strings reach it exactly as a user's shell would pass them. */
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
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include "case_io.h"
#include "escape.h"
#include "hostile_files.h"
#include "output_store.h"
#include "results_store.h"
#include "test_main.h"
#include "test_support.h"
#include "torch_pt.h"

/* ------------------------------------------------------------------ helpers */

static void assert_contains(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle))
        fail_msg("expected \"%s\" in:\n  %s", needle, hay ? hay : "(null)");
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Runs kreplay with argv (argv[0] is ignored) in directory cwd; stdout and
 * stderr into *out (malloc'd).  Returns the exit code, or -1 on a signal. */
static int run_kreplay_in(const char *cwd, const char *const *argv, char **out)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[1]);
        if (cwd && chdir(cwd) != 0)
            _exit(126);
        int n = 0;
        while (argv[n])
            n++;
        char **v = calloc((size_t)n + 1, sizeof *v);
        v[0] = (char *)KREPLAY_BINARY;
        for (int i = 1; i < n; i++)
            v[i] = (char *)argv[i];
        execv(KREPLAY_BINARY, v);
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t got;
    while ((got = read(fd[0], buf + len, cap - len - 1)) > 0 || (got < 0 && errno == EINTR)) {
        if (got < 0)
            continue;
        len += (size_t)got;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    close(fd[0]);
    buf[len] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ARGV run in CWD exits with 0 .. MAX_RC, never an error; O names its
 * output directory in the message. */
static void expect_exit_in(const char *cwd, const char *const *argv, const char *o, int max_rc)
{
    char *out = NULL;
    int rc = run_kreplay_in(cwd, argv, &out);
    if (rc < 0 || rc > max_rc)
        fail_msg("%s%s%s: exit %d: %s", argv[1], o ? " -o " : "", o ? o : "", rc, out);
    free(out);
}

/* A verdict: exit 0 or 1. */
static void expect_verdict_in(const char *cwd, const char *const *argv, const char *o)
{
    expect_exit_in(cwd, argv, o, 1);
}

static void expect_success_in(const char *cwd, const char *const *argv, const char *o)
{
    expect_exit_in(cwd, argv, o, 0);
}

/* ARGV run in CWD is refused: exit 2 and an error holding MSG. */
static void expect_refused_in(const char *cwd, const char *const *argv, const char *msg)
{
    char *out = NULL;
    assert_int_equal(run_kreplay_in(cwd, argv, &out), 2);
    assert_contains(out, msg);
    free(out);
}

/* The hostile files are meant to fail: no HDF5 error stack in the log. */
static void h5_quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void make_dir(const char *path)
{
    assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("cannot read %s", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
    buf[n] = '\0';
    fclose(fp);
    if (len)
        *len = (size_t)n;
    return buf;
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    char *b = slurp(from, &n);
    FILE *fp = fopen(to, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, n, fp), n);
    fclose(fp);
    free(b);
}

/* A fresh working directory and the 64 x 64 case synthesized in its cases/. */
typedef struct {
    char dir[1024];
    char cs[1200];     /* the case */
    char other[1200];  /* other.h5 (not made here): the file hostile links point into */
} work_t;

static void work_dir_with_case(work_t *w)
{
    test_tmp_path(w->dir, sizeof w->dir, "security");
    make_dir(w->dir);
    char cases[1100];
    snprintf(cases, sizeof cases, "%s/cases", w->dir);
    const char *argv[] = {"kreplay", "synth", "--shape", "64x64", "--m", "4", "--out", cases, NULL};
    expect_success_in(w->dir, argv, NULL);
    snprintf(w->cs, sizeof w->cs, "%s/synth_N64_K64_M4_s1.h5", cases);
    assert_true(exists(w->cs));
    snprintf(w->other, sizeof w->other, "%s/other.h5", w->dir);
}

/* The work directory's case copied to cases/NAME (its path in path): a
 * hostile case name. */
static void copy_case_as(const work_t *w, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/cases/%s", w->dir, name);
    copy_file(w->cs, path);
}

/* The hostile names' `touch owned` never ran in DIR. */
static void assert_nothing_ran(const char *dir)
{
    char owned[1100];
    snprintf(owned, sizeof owned, "%s/owned", dir);
    assert_false(exists(owned));
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
    work_t w;
    work_dir_with_case(&w);
    char runs[1100];
    snprintf(runs, sizeof runs, "%s/runs", w.dir);
    make_dir(runs);

    char suite[1100];
    snprintf(suite, sizeof suite, "%s/suite.yaml", w.dir);
    assert_int_equal(test_write_text(suite, "suite: sec\ncases:\n  - synth:\n      shapes: [64x64]\n"
                                            "      m: [4]\n      seeds: [1]\n"
                                            "references: [exact]\ndevice: cpu\n"), 0);

    for (size_t h = 0; h < sizeof HOSTILE_DIRS / sizeof HOSTILE_DIRS[0]; h++) {
        const char *o = HOSTILE_DIRS[h];
        const char *replay[] = {"kreplay", "replay", "--kernels", "w4a8.folded", "-o", o, w.cs, NULL};
        expect_verdict_in(w.dir, replay, o);
        /* twice: the second run clears the first one's partials */
        for (int pass = 0; pass < 2; pass++) {
            char gdir[600];
            snprintf(gdir, sizeof gdir, "%s-gate", o);
            const char *gate[] = {"kreplay", "gate", "suite.yaml", "-o", gdir, NULL};
            expect_verdict_in(w.dir, gate, gdir);
            assert_nothing_ran(w.dir);
        }
        char res[1200], rdir[600];
        snprintf(res, sizeof res, "%s/results.h5", o);
        snprintf(rdir, sizeof rdir, "%s-report", o);
        /* plots only for the first name: test_no_gnuplot_injection_from_names covers gnuplot */
        const char *report[] = {"kreplay", "report", res, "-o", rdir, h ? "--no-plots" : NULL, NULL};
        expect_success_in(w.dir, report, rdir);
        char cdir[600];
        snprintf(cdir, sizeof cdir, "%s-compare", o);
        const char *compare[] = {"kreplay", "compare", "--synth", "64x64", "--m", "4", "-o", cdir, NULL};
        expect_verdict_in(w.dir, compare, cdir);
        assert_nothing_ran(w.dir);

        /* the outputs are in the directories of those literal names */
        char want[1400];
        snprintf(want, sizeof want, "%s/%s/results.json", w.dir, o);
        assert_true(exists(want));
        snprintf(want, sizeof want, "%s/%s-gate/results.h5", w.dir, o);
        assert_true(exists(want));
        snprintf(want, sizeof want, "%s/%s-report/report.html", w.dir, o);
        assert_true(exists(want));
    }
}

/* A case whose name is gnuplot syntax: the plots are drawn (or skipped),
 * nothing runs. */
static void test_no_gnuplot_injection_from_names(void **state)
{
    (void)state;
    work_t w;
    work_dir_with_case(&w);
    char evil[1400];
    copy_case_as(&w, "x\"; system(\"touch owned\"); print \"`touch owned`@owned.h5", evil, sizeof evil);
    /* NaN in x's first row: the report then draws the case's non-finite
     * map, whose title holds the case name */
    h5_quiet();
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
    expect_verdict_in(w.dir, replay, NULL);
    const char *report[] = {"kreplay", "report", "run/results.h5", "-o", "rep", "--case", evil,
                            "--title", "t\"; system(\"touch owned\"); print \"`touch owned`", NULL};
    expect_success_in(w.dir, report, NULL);
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

/* ------------------------------------------------- 2. HDF5 leaving the file */

static void write_str_attr(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(value));
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, t, value) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

typedef enum {
    H_EXTERNAL_STORAGE,     /* x's bytes in the file named by arg */
    H_EXTERNAL_LINK,        /* x is an external link to arg:/x */
    H_SOFT_THROUGH_LINK,    /* x is a soft link to /elsewhere/x, /elsewhere an external link */
    H_VIRTUAL,              /* x is a virtual dataset mapped from arg:/x */
} hostile_t;

/* A new file `other` holding a copy of the case's x. */
static void copy_x_to(const char *src, const char *other)
{
    hid_t s = H5Fopen(src, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t o = H5Fcreate(other, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(s >= 0 && o >= 0);
    assert_true(H5Ocopy(s, "x", o, "x", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(o);
    H5Fclose(s);
}

/* Dataset /x created with the creation properties DCPL (which it takes over),
 * tagged as bf16 like the real one. */
static void create_x_with(hid_t f, hid_t type, hid_t space, hid_t dcpl)
{
    hid_t d = H5Dcreate2(f, "x", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(d >= 0);
    write_str_attr(d, "dtype", "bfloat16");
    H5Dclose(d);
    H5Pclose(dcpl);
}

/* A copy of the case at src in dst whose x leaves the file; for the link
 * and virtual kinds, `other` gets a copy of the real x. */
static void make_hostile_case(const char *src, const char *dst, hostile_t kind, const char *arg,
                              const char *other)
{
    h5_quiet();
    copy_file(src, dst);
    if (other)
        copy_x_to(src, other);
    hid_t f = H5Fopen(dst, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t x = H5Dopen2(f, "x", H5P_DEFAULT);
    hid_t type = H5Dget_type(x), space = H5Dget_space(x);
    H5Dclose(x);
    assert_true(H5Ldelete(f, "x", H5P_DEFAULT) >= 0);
    switch (kind) {
    case H_EXTERNAL_STORAGE: {
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        assert_true(H5Pset_external(dcpl, arg, 0, H5F_UNLIMITED) >= 0);
        create_x_with(f, type, space, dcpl);
        break;
    }
    case H_EXTERNAL_LINK:
        assert_true(H5Lcreate_external(arg, "/x", f, "x", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        break;
    case H_SOFT_THROUGH_LINK:
        assert_true(H5Lcreate_external(arg, "/", f, "elsewhere", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        assert_true(H5Lcreate_soft("/elsewhere/x", f, "x", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        break;
    case H_VIRTUAL: {
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        assert_true(H5Pset_virtual(dcpl, space, arg, "/x", space) >= 0);
        create_x_with(f, type, space, dcpl);
        break;
    }
    }
    H5Tclose(type);
    H5Sclose(space);
    assert_true(H5Fclose(f) >= 0);
}

/* The message names the file, N1 and (unless NULL) N2. */
static void assert_error_names(const char *msg, const char *path, const char *n1, const char *n2)
{
    assert_contains(msg, path);
    assert_contains(msg, n1);
    if (n2)
        assert_contains(msg, n2);
}

/* make_hostile_case of the work directory's case as W/NAME (its path in
 * path): ARG for the external storage, or, when NULL, a link into w->other. */
static void hostile_in_work(const work_t *w, const char *name, hostile_t kind, const char *arg,
                            char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", w->dir, name);
    make_hostile_case(w->cs, path, kind, arg ? arg : w->other, arg ? NULL : w->other);
}

static void expect_case_refused(const char *path, const char *n1, const char *n2)
{
    case_t c;
    kr_error_t err = {{0}};
    assert_int_equal(case_read(path, &c, &err), -1);
    assert_null(c.x);
    assert_error_names(err.msg, path, n1, n2);
    assert_contains(err.msg, "refused");
}

static void test_hdf5_cases_leaving_the_file(void **state)
{
    (void)state;
    work_t w;
    work_dir_with_case(&w);
    char bad[1300], rel[1300];
    snprintf(rel, sizeof rel, "%s/cases/passwd_copy", w.dir);
    copy_file("/etc/passwd", rel);

    /* the untouched case reads */
    case_t c;
    kr_error_t err = {{0}};
    assert_int_equal(case_read(w.cs, &c, &err), 0);
    case_free(&c);

    const struct {
        const char *file;  /* under the work directory */
        hostile_t kind;
        const char *arg;   /* NULL: other.h5 */
        const char *msg;
    } hostile[] = {
        {"ext_passwd.h5", H_EXTERNAL_STORAGE, "/etc/passwd",
         "dataset /x uses external raw storage (/etc/passwd); refused"},
        {"ext_urandom.h5", H_EXTERNAL_STORAGE, "/dev/urandom",
         "dataset /x uses external raw storage (/dev/urandom); refused"},
        {"cases/ext_relative.h5", H_EXTERNAL_STORAGE, "passwd_copy",
         "dataset /x uses external raw storage (passwd_copy); refused"},
        {"elink.h5", H_EXTERNAL_LINK, NULL, "/x is an external link"},
        {"soft.h5", H_SOFT_THROUGH_LINK, NULL, "/elsewhere is an external link"},
        {"vds.h5", H_VIRTUAL, NULL, "dataset /x is a virtual dataset"},
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        hostile_in_work(&w, hostile[i].file, hostile[i].kind, hostile[i].arg, bad, sizeof bad);
        /* the link and virtual kinds point at other.h5, which the message names */
        expect_case_refused(bad, hostile[i].msg, hostile[i].arg ? NULL : w.other);
    }
}

/* Through the CLI (the case is read in the reading worker): exit 2, the
 * message, and no outputs file holding what /etc/passwd fed the kernels. */
static void test_hdf5_refused_by_cli(void **state)
{
    (void)state;
    work_t w;
    work_dir_with_case(&w);
    char bad[1300], outs[1300];
    hostile_in_work(&w, "ext_passwd.h5", H_EXTERNAL_STORAGE, "/etc/passwd", bad, sizeof bad);
    snprintf(outs, sizeof outs, "%s/outs.h5", w.dir);
    const char *replay[] = {"kreplay", "replay", "--save-outputs", outs, bad, NULL};
    expect_refused_in(w.dir, replay, "dataset /x uses external raw storage (/etc/passwd); refused");
    assert_false(exists(outs));

    hostile_in_work(&w, "elink.h5", H_EXTERNAL_LINK, NULL, bad, sizeof bad);
    const char *inspect[] = {"kreplay", "inspect", bad, NULL};
    expect_refused_in(w.dir, inspect, "/x is an external link");
}

/* results.h5 (report, merge, baseline) and an existing outputs file. */
static void test_hdf5_results_and_outputs(void **state)
{
    (void)state;
    work_t w;
    work_dir_with_case(&w);
    const char *replay[] = {"kreplay", "replay", "--kernels", "w4a8.folded", "-o", "run", w.cs, NULL};
    expect_verdict_in(w.dir, replay, NULL);
    char good[1300], bad[1300];
    snprintf(good, sizeof good, "%s/run/results.h5", w.dir);
    copy_x_to(w.cs, w.other);

    result_list_t rows;
    kr_error_t err = {{0}};
    assert_int_equal(results_store_read(good, &rows, NULL, &err), 0);
    assert_true(rows.count > 0);
    result_list_free(&rows);

    /* a dataset on external storage */
    snprintf(bad, sizeof bad, "%s/results_ext.h5", w.dir);
    copy_file(good, bad);
    hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    assert_true(H5Pset_external(dcpl, "/etc/passwd", 0, H5F_UNLIMITED) >= 0);
    hsize_t n = 64;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "junk", H5T_NATIVE_UINT8, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(d >= 0);
    H5Dclose(d);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Fclose(f);
    memset(&err, 0, sizeof err);
    assert_int_equal(results_store_read(bad, &rows, NULL, &err), -1);
    assert_contains(err.msg, bad);
    assert_contains(err.msg, "dataset /junk uses external raw storage (/etc/passwd); refused");
    const char *report[] = {"kreplay", "report", bad, "-o", "rep", NULL};
    expect_refused_in(w.dir, report, "dataset /junk uses external raw storage (/etc/passwd); refused");

    /* an external link */
    snprintf(bad, sizeof bad, "%s/results_elink.h5", w.dir);
    copy_file(good, bad);
    f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(H5Lcreate_external(w.other, "/x", f, "evil", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    memset(&err, 0, sizeof err);
    assert_int_equal(results_store_read(bad, &rows, NULL, &err), -1);
    assert_contains(err.msg, "/evil is an external link");

    /* an outputs file whose case group is an external link: nothing may be
     * written through it into the other file */
    char outs[1300];
    snprintf(outs, sizeof outs, "%s/outs.h5", w.dir);
    f = H5Fcreate(outs, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(H5Lcreate_external(w.other, "/", f, "victim", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    float deq[4 * 64];
    for (int i = 0; i < 4 * 64; i++)
        deq[i] = (float)(i % 7) - 3.0f;
    uint16_t o16[4 * 64];
    for (int i = 0; i < 4 * 64; i++)
        o16[i] = (uint16_t)(0x3F80 + i);
    kernel_act_t act;
    memset(&act, 0, sizeof act);
    act.M = 4;
    act.K = 64;
    act.dequant = deq;
    memset(&err, 0, sizeof err);
    assert_int_equal(output_store_save(outs, "victim", "bf16.sequential", &act, o16, 4, 64, &err), -1);
    assert_contains(err.msg, "/victim is an external link");
    f = H5Fopen(w.other, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(H5Lexists(f, "bf16.sequential", H5P_DEFAULT) == 0);
    H5Fclose(f);
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
    work_t w;
    work_dir_with_case(&w);
    char evil[1400];
    copy_case_as(&w, "a|b\n| forged | 1 | 2 | 3 | x | y | z |<img src=x onerror=alert(1)>.h5", evil,
                 sizeof evil);
    const char *replay[] = {"kreplay", "replay", "--kernels", "w4a8.folded", "--refs", "exact", "-o", "run", evil,
                            NULL};
    char *out = NULL;
    int rc = run_kreplay_in(w.dir, replay, &out);
    if (rc != 0 && rc != 1)
        fail_msg("replay: exit %d: %s", rc, out);
    /* the terminal table: no line starts with the forged text */
    assert_null(strstr(out, "\n| forged"));
    free(out);

    char path[1400];
    snprintf(path, sizeof path, "%s/run/report.md", w.dir);
    char *md = slurp(path, NULL);
    assert_null(strstr(md, "\n| forged"));
    assert_contains(md, "a\\|b \\| forged");
    assert_table_rows_intact(md);
    free(md);

    snprintf(path, sizeof path, "%s/run/results.csv", w.dir);
    char *csv = slurp(path, NULL);
    int lines = csv_records(csv);
    free(csv);
    snprintf(path, sizeof path, "%s/run/results.json", w.dir);
    /* one header record plus one per row: the row count from the JSON's "results" */
    char *json = slurp(path, NULL);
    json_error_t jerr;
    json_t *doc = json_loads(json, 0, &jerr);
    assert_non_null(doc);
    int rows = (int)json_array_size(json_object_get(doc, "results"));
    json_decref(doc);
    free(json);
    assert_true(rows > 0);
    assert_int_equal(lines, rows + 1);

    const char *report[] = {"kreplay", "report", "run/results.h5", "-o", "rep", NULL};
    expect_success_in(w.dir, report, NULL);
    snprintf(path, sizeof path, "%s/rep/report.html", w.dir);
    char *html = slurp(path, NULL);
    assert_null(strstr(html, "<img src=x"));
    assert_contains(html, "&lt;img src=x onerror=alert(1)&gt;");
    free(html);
    snprintf(path, sizeof path, "%s/rep/report_full.md", w.dir);
    md = slurp(path, NULL);
    assert_null(strstr(md, "\n| forged"));
    assert_table_rows_intact(md);
    free(md);
}

/* ------------------------------------------------------- 4. .pt zip bombs */

/* A torch.save zip of {'x': uint8 tensor of n bytes, all zero}, the storage
 * record deflated; the pickle is what torch writes for it (protocol 2). */
static void write_pt_bomb(const char *path, uint32_t n)
{
    static const char head[] =
        "\x80\x02}q\x00X\x01\x00\x00\x00xq\x01" "ctorch._utils\n_rebuild_tensor_v2\nq\x02((X\x07\x00\x00\x00"
        "storageq\x03" "ctorch\nByteStorage\nq\x04X\x01\x00\x00\x00" "0q\x05X\x03\x00\x00\x00" "cpuq\x06J";
    uint8_t pkl[512];
    size_t len = sizeof head - 1;
    memcpy(pkl, head, len);
    for (int i = 0; i < 4; i++)
        pkl[len++] = (uint8_t)(n >> (8 * i));
    static const char mid[] = "tq\x07QK\x00J";
    memcpy(pkl + len, mid, sizeof mid - 1);
    len += sizeof mid - 1;
    for (int i = 0; i < 4; i++)
        pkl[len++] = (uint8_t)(n >> (8 * i));
    static const char tail[] = "\x85q\x08K\x01\x85q\x09\x89" "ccollections\nOrderedDict\nq\x0a)Rq\x0btq\x0cRq\x0ds.";
    memcpy(pkl + len, tail, sizeof tail - 1);
    len += sizeof tail - 1;

    /* level 1: three times faster than 9 on zeros, ~230:1 instead of ~1030:1 */
    hostile_write_pt(path, "bomb", pkl, len, n, 1);
}

static void expect_pt_refused(const char *path, const char *n1, const char *n2)
{
    kr_error_t err = {{0}};
    pt_file_t *f = NULL;
    assert_int_equal(pt_open(path, &f, &err), -1);
    assert_null(f);
    assert_error_names(err.msg, path, n1, n2);
}

/* write_pt_bomb of N bytes at a fresh path NAME (in path), read under the
 * default limit: the environment's limit is cleared. */
static void pt_bomb_at_default_limit(char *path, size_t cap, const char *name, uint32_t n)
{
    test_tmp_path(path, cap, name);
    unsetenv(PT_MAX_MB_ENV);
    write_pt_bomb(path, n);
}

static void test_pt_bounds(void **state)
{
    (void)state;
    char path[1024];
    /* 3 MiB of zeros: within the default, over a 2 MiB limit, within 4 */
    pt_bomb_at_default_limit(path, sizeof path, "small.pt", 3u << 20);
    pt_file_t *f = NULL;
    kr_error_t err = {{0}};
    if (pt_open(path, &f, &err) != 0)
        fail_msg("the generated dump does not open: %s", err.msg);
    const pt_value_t *x = pt_dict_get(pt_root(f), "x");
    assert_non_null(x);
    assert_int_equal(x->kind, PT_TENSOR);
    assert_int_equal(x->tensor->numel, 3 << 20);
    pt_close(f);

    setenv(PT_MAX_MB_ENV, "2", 1);
    expect_pt_refused(path, "data/0", "over the limit of 2 MiB");
    expect_pt_refused(path, "inflates to 3145728 bytes", PT_MAX_MB_ENV);
    setenv(PT_MAX_MB_ENV, "4", 1);
    assert_int_equal(pt_open(path, &f, &err), 0);
    pt_close(f);
    setenv(PT_MAX_MB_ENV, "lots", 1);
    expect_pt_refused(path, PT_MAX_MB_ENV "=\"lots\"", "whole number of MiB");
    setenv(PT_MAX_MB_ENV, "0", 1);
    expect_pt_refused(path, PT_MAX_MB_ENV "=\"0\"", NULL);
    unsetenv(PT_MAX_MB_ENV);
    unlink(path);
}

/* The observed bomb's storage, 1.06 GiB inflated (from ~5 MB on disk here;
 * the observed 1.1 MB file was deflated harder), at the default limit,
 * through pt_open and the CLI: refused from the zip entry's size, before
 * anything is inflated. */
static void test_pt_zip_bomb(void **state)
{
    (void)state;
    char path[1024];
    pt_bomb_at_default_limit(path, sizeof path, "bomb.pt", 1138000000u);    /* 1.06 GiB */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size < 8000000);
    expect_pt_refused(path, "data/0", "over the limit of 1024 MiB");
    const char *replay[] = {"kreplay", "replay", path, NULL};
    char *out = NULL;
    assert_int_equal(run_kreplay_in(NULL, replay, &out), 2);
    assert_contains(out, "inflates to 1138000000 bytes");
    assert_contains(out, "over the limit of 1024 MiB");
    free(out);
    unlink(path);
}

KR_TEST_MAIN(
    test_escape_formats, test_pt_bounds, test_pt_zip_bomb, test_hdf5_cases_leaving_the_file,
    test_hdf5_refused_by_cli, test_hdf5_results_and_outputs, test_forged_rows,
    test_no_gnuplot_injection_from_names, test_no_shell_from_paths);
