/* What was left of the hostile-input corpora: the environment, processes a
 * kernel leaves behind, a sparse case, a slow .pt, unwritten datasets.
 *
 * Feeds kreplay (the binary):
 * - OPENBLAS_CORETYPE=garbage, which OpenBLAS ignores: the provenance (the
 *   --version line, a results file's blas attribute) says it was ignored,
 *   never that the core was "chosen by OPENBLAS_CORETYPE";
 * - a C plugin (libkr_plugin_daemon.so) and a Python kernel that start a
 *   daemon with setsid() (out of the launch's process group and session):
 *   no daemon is left once kreplay has exited;
 * - a numpy.py planted in the directory kreplay runs in and in the user's
 *   site-packages ($HOME/.local), beside a Python kernel that imports numpy
 *   (named by an absolute path, and by a dotted name found in the working
 *   directory): the kernel gets the installed numpy, never a planted one;
 * - a case of 18 KiB of arrays padded to 8 GiB (a sparse file), replayed
 *   under an address-space limit of 4 GiB (ulimit -v): judged by its arrays,
 *   it replays; and a case read under a limit too small for it: the error
 *   names the limit, not "the HDF5 library crashed ... corrupt";
 * - a .pt of about 1 MB whose storage record inflates to 1000 MiB (under the
 *   1024 MiB limit) read under a time limit it cannot meet: the error names
 *   the record, its inflated size and the size limit;
 * - a case whose x_scale dataset was created and never written (no storage
 *   allocated: it would read as zeros): refused naming the dataset;
 * - a case attribute whose value holds a newline: the error is one line. */
/* ctest-labels: security;malformed */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <hdf5.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zip.h>

#include "hostile_files.h"
#include "python_ready.h"
#include "results_store.h"
#include "test_main.h"
#include "test_support.h"

static char dir[512];
static char case_path[768];   /* a 64 x 256 case, M = 4 */

static int setup(void **state)
{
    (void)state;
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "leftovers"), 0);
    char *out = NULL;
    const int rc = hostile_run(&out, "synth --shape 64x256 --m 4 --out '%s/cases'", dir);
    if (rc != 0)
        fail_msg("synth: exit %d: %s", rc, out);
    free(out);
    snprintf(case_path, sizeof case_path, "%s/cases/synth_N64_K256_M4_s1.h5", dir);
    assert_int_equal(access(case_path, R_OK), 0);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

/* --------------------------------------------------- OPENBLAS_CORETYPE */

static void test_ignored_coretype_is_said(void **state)
{
    (void)state;
    /* Where the core OpenBLAS picks does not fit the CPU, kreplay restarts
     * itself with the right one: then the line says so.  It never credits
     * the garbage. */
    char *out = NULL;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "OPENBLAS_CORETYPE=garbage timeout 60 '%s' --version", hostile_binary());
    int rc = test_sh(cmd, &out);
    assert_int_equal(rc, 0);
    if (strstr(out, "chosen by OPENBLAS_CORETYPE"))
        fail_msg("a core OpenBLAS did not take is called chosen:\n%s", out);
    if (!strstr(out, "OPENBLAS_CORETYPE=garbage ignored by OpenBLAS") &&
        !strstr(out, "set by kreplay through OPENBLAS_CORETYPE"))
        fail_msg("the ignored OPENBLAS_CORETYPE is not said:\n%s", out);
    free(out);

    char run[1024];
    snprintf(run, sizeof run, "%s/coretype-run", dir);
    snprintf(cmd, sizeof cmd, "OPENBLAS_CORETYPE=garbage timeout 60 '%s' replay -o '%s' '%s'",
             hostile_binary(), run, case_path);
    rc = test_sh(cmd, &out);
    if (rc != 0)
        fail_msg("%s: exit %d: %s", cmd, rc, out);
    free(out);
    strcat(run, "/results.h5");
    result_list_t rows;
    results_meta_t m;
    kr_error_t err = {{0}};
    assert_int_equal(results_store_read(run, &rows, &m, &err), 0);
    result_list_free(&rows);
    assert_null(strstr(m.blas, "chosen by OPENBLAS_CORETYPE"));
    if (!strstr(m.blas, "ignored by OpenBLAS") && !strstr(m.blas, "set by kreplay"))
        fail_msg("results provenance: %s", m.blas);
}

/* ------------------------------------------------------------- daemons */

static int process_alive(long pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    char *stat = test_read_file(path, NULL);
    if (!stat)
        return 0;
    const char *close = strrchr(stat, ')');
    const int alive = !(close && close[1] == ' ' && close[2] == 'Z');
    free(stat);
    return alive;
}

/* The pids in pidfile: none may be alive (each is killed if it is, after
 * the check); returns how many there were. */
static int expect_no_daemon_left(const char *pidfile)
{
    char *pids = test_read_file(pidfile, NULL);
    if (!pids)
        fail_msg("no daemon pid was written to %s", pidfile);
    int n = 0, alive = 0, used = 0;
    long pid;
    for (const char *p = pids; sscanf(p, "%ld%n", &pid, &used) == 1; p += used, n++) {
        /* Killed ones take a moment to be reaped. */
        int waited = 0;
        while (process_alive(pid) && waited++ < 200)
            usleep(10000);
        alive += process_alive(pid);
        kill((pid_t)pid, SIGKILL);   /* a no-op on one that is gone */
    }
    free(pids);
    unlink(pidfile);
    if (alive)
        fail_msg("%d of %d daemons outlived kreplay", alive, n);
    return n;
}

static void test_daemons_end_with_the_launch(void **state)
{
    (void)state;
    char lib[512], pidfile[1024], cmd[8192], *out = NULL;
    test_plugin_file(lib, sizeof lib, "daemon");
    snprintf(pidfile, sizeof pidfile, "%s/daemon-pids", dir);
    /* The output goes to a file: a daemon left holding a pipe of ours
     * would keep the test reading it. */
    snprintf(cmd, sizeof cmd, "KR_TEST_PIDFILE='%s' timeout 60 '%s' replay --plugin '%s' "
                              "--kernels misbehave.daemon '%s' > '%s.log' 2>&1; rc=$?; cat '%s.log'; exit $rc",
             pidfile, hostile_binary(), lib, case_path, pidfile, pidfile);
    int rc = test_sh(cmd, &out);
    if (rc != 0)
        fail_msg("%s: exit %d: %s", cmd, rc, out);
    free(out);
    assert_int_equal(expect_no_daemon_left(pidfile), 3);   /* one per run of the 3 reruns */

    /* A Python kernel's daemon (subprocess with start_new_session). */
    if (test_python_missing("numpy")) {
        fprintf(stderr, "  %s: the Python kernel's part skipped\n", test_python_missing("numpy"));
        return;
    }
    char py[1024];
    snprintf(py, sizeof py, "%s/daemon_kernel.py", dir);
    static const char *const source[] = {
        "import os, subprocess",
        "def daemon(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):",
        "    p = subprocess.Popen(['sleep', '300'], start_new_session=True)",
        "    with open(os.environ['KR_TEST_PIDFILE'], 'a') as f:",
        "        f.write('%d\\n' % p.pid)",
        "    raise RuntimeError('left a daemon behind')",
    };
    FILE *fp = fopen(py, "w");
    assert_non_null(fp);
    for (size_t i = 0; i < sizeof source / sizeof source[0]; i++)
        fprintf(fp, "%s\n", source[i]);
    assert_int_equal(fclose(fp), 0);
    snprintf(cmd, sizeof cmd, "KR_TEST_PIDFILE='%s' KREPLAY_PYTHON=/usr/bin/python3 timeout 60 '%s' "
                              "replay --py '%s:daemon' --kernels 'py.*' '%s' > '%s.log' 2>&1; rc=$?; "
                              "cat '%s.log'; exit $rc",
             pidfile, hostile_binary(), py, case_path, pidfile, pidfile);
    rc = test_sh(cmd, &out);
    if (rc != 1)   /* the kernel's exception: an ERROR row */
        fail_msg("%s: exit %d: %s", cmd, rc, out);
    free(out);
    assert_true(expect_no_daemon_left(pidfile) >= 1);
}

/* ------------------------------------------------- a planted numpy.py */

/* A module that says it was imported, in place of numpy. */
static void plant_numpy(const char *in_dir)
{
    hostile_sh("mkdir -p '%s' && printf 'raise ImportError(\"PLANTED numpy.py imported\")\\n' "
               "> '%s/numpy.py'", in_dir, in_dir);
}

/* A kernel whose ERROR row names the numpy it imported. */
static void write_numpy_kernel(const char *path)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "import numpy\n"
                "def which(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):\n"
                "    raise RuntimeError('numpy from ' + numpy.__file__)\n");
    assert_int_equal(fclose(fp), 0);
}

/* kreplay replay --py SPEC run in cwd with HOME=home: the kernel's error must
 * name the installed numpy (under /usr), and no planted one was imported. */
static void expect_installed_numpy(const char *cwd, const char *home, const char *spec)
{
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s' && HOME='%s' KREPLAY_PYTHON=/usr/bin/python3 timeout 120 '%s' "
                              "replay --json --py '%s' --kernels 'py.*' --refs exact '%s' 2>&1",
             cwd, home, hostile_binary(), spec, case_path);
    const int rc = test_sh(cmd, &out);
    if (rc != 1 || strstr(out, "PLANTED") || !strstr(out, "numpy from /usr/"))
        fail_msg("%s: exit %d (want 1: the kernel's ERROR row naming numpy under /usr): %s", cmd, rc,
                 out);
    free(out);
}

static void test_planted_numpy_never_imported(void **state)
{
    (void)state;
    if (test_python_missing("numpy")) {
        skip();
    }
    char cwd[1024], home[1024], kdir[1024], site[1400], kernel[1200], *ver = NULL;
    snprintf(cwd, sizeof cwd, "%s/numpy-cwd", dir);
    snprintf(home, sizeof home, "%s/numpy-home", dir);
    snprintf(kdir, sizeof kdir, "%s/numpy-kernels", dir);
    assert_int_equal(test_sh("/usr/bin/python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2], "
                             "end=\"\")'", &ver), 0);
    snprintf(site, sizeof site, "%s/.local/lib/python%s/site-packages", home, ver);
    free(ver);
    plant_numpy(cwd);
    plant_numpy(site);
    hostile_sh("mkdir -p '%s'", kdir);
    snprintf(kernel, sizeof kernel, "%s/which_numpy.py", kdir);
    write_numpy_kernel(kernel);
    char spec[1400];
    snprintf(spec, sizeof spec, "%s:which", kernel);
    expect_installed_numpy(cwd, home, spec);        /* a kernel named by an absolute path */
    snprintf(kernel, sizeof kernel, "%s/which_numpy_here.py", cwd);
    write_numpy_kernel(kernel);
    expect_installed_numpy(cwd, home, "which_numpy_here:which");   /* found in the working dir */
}

/* ------------------------------------------------ address-space limits */


static void test_sparse_case_under_ulimit(void **state)
{
    (void)state;
#if TEST_UNDER_ASAN   /* its shadow memory is terabytes of address space */
    fprintf(stderr, "  (sanitizer build: no ulimit -v, part skipped)\n");
#else
    char sparse[1024], cmd[4096], *out = NULL;
    snprintf(sparse, sizeof sparse, "%s/sparse.h5", dir);
    hostile_sh("cp '%s' '%s' && truncate -s 8G '%s'", case_path, sparse, sparse);
    snprintf(cmd, sizeof cmd, "ulimit -v 4194304 && timeout 120 '%s' replay '%s'", hostile_binary(),
             sparse);
    int rc = test_sh(cmd, &out);
    if (rc != 0)
        fail_msg("a sparse 8 GiB case of 18 KiB of arrays under ulimit -v 4G: exit %d:\n%s", rc,
                 out);
    hostile_expect(out, "PASS");
    free(out);
    unlink(sparse);

    /* A reading process that dies under a limit: the limit is named, since
     * it may be the cause (here the file is one that crashes libhdf5). */
    snprintf(cmd, sizeof cmd, "ulimit -v 8388608 && timeout 120 '%s' inspect '%s'", hostile_binary(),
             KREPLAY_SOURCE_DIR "/tests/fixtures/corrupt_h5/segv_global_heap.h5");
    rc = test_sh(cmd, &out);
    assert_int_equal(rc, 2);
    hostile_expect(out, "segv_global_heap.h5: reading it failed (killed by SIGSEGV");
    hostile_expect(out, "under an address-space limit (ulimit -v) of 8192 MiB");
    free(out);
#endif
}

/* ------------------------------------------------------ a slow .pt */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A torch.save zip of {"M": M, "N": 32, "K": 64, "weight_bf16": 0, "x": a
 * float32 [M, 64] tensor of zeros}, the storage deflated at level 9: the
 * importer reaches x, and inflates its record, before anything else fails. */
static void write_slow_pt(const char *path, uint32_t m)
{
    uint8_t pkl[1024];
    size_t n = 0;
#define PUT(lit) (memcpy(pkl + n, lit, sizeof lit - 1), n += sizeof lit - 1)
#define PUT_U32(v) (put_u32(pkl + n, v), n += 4)
    PUT("\x80\x02}q\x00" "X\x01\x00\x00\x00MJ");
    PUT_U32(m);
    PUT("sX\x01\x00\x00\x00NK\x20sX\x01\x00\x00\x00KK\x40s"
        "X\x0b\x00\x00\x00weight_bf16K\x00s"
        "X\x01\x00\x00\x00x" "ctorch._utils\n_rebuild_tensor_v2\nq\x02((X\x07\x00\x00\x00"
        "storageq\x03" "ctorch\nFloatStorage\nq\x04X\x01\x00\x00\x00" "0q\x05X\x03\x00\x00\x00" "cpuq\x06J");
    PUT_U32(m * 64u);
    PUT("tq\x07QK\x00J");
    PUT_U32(m);
    PUT("K\x40\x86q\x08K\x40K\x01\x86q\x09\x89" "ccollections\nOrderedDict\nq\x0a)Rq\x0btq\x0cRq\x0ds.");
#undef PUT
#undef PUT_U32
    hostile_write_pt(path, "slow", pkl, n, (size_t)m * 64u * 4u, 9);
}

static void test_slow_pt_names_the_size_limit(void **state)
{
    (void)state;
    char pt[1024], cmd[4096], *out = NULL;
    snprintf(pt, sizeof pt, "%s/slow.pt", dir);
    write_slow_pt(pt, 4096000u);    /* 4096000 x 64 float32: 1000 MiB */
    struct stat st;
    assert_int_equal(stat(pt, &st), 0);
    assert_true(st.st_size < 2000000);
    snprintf(cmd, sizeof cmd, "KREPLAY_READ_TIMEOUT=0.3 timeout 60 '%s' replay '%s'", hostile_binary(), pt);
    const int rc = test_sh(cmd, &out);
    assert_int_equal(rc, 2);
    hostile_expect(out, "slow.pt: reading it did not finish");
    hostile_expect(out, "its largest record, slow/data/0, inflates to 1000 MiB");
    hostile_expect(out, "the size limit is 1024 MiB");
    free(out);
    unlink(pt);
}

/* ------------------------------------------------ unwritten datasets */

static void copy_case(const char *to)
{
    hostile_sh("cp '%s' '%s'", case_path, to);
}

static void test_unwritten_dataset_refused(void **state)
{
    (void)state;
    char path[1024], *out = NULL;
    snprintf(path, sizeof path, "%s/unwritten.h5", dir);
    copy_case(path);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_int_equal(H5Ldelete(f, "x_scale", H5P_DEFAULT), 0);
    hsize_t dims[1] = {4};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t ds = H5Dcreate2(f, "x_scale", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);   /* created, never written */
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
    const int rc = hostile_run(&out, "replay '%s'", path);
    assert_int_equal(rc, 2);
    hostile_expect(out, "unwritten.h5: dataset /x_scale: no storage allocated");
    free(out);
}

static void test_attribute_newline_in_a_case(void **state)
{
    (void)state;
    char path[1024], *out = NULL;
    snprintf(path, sizeof path, "%s/newline-attr.h5", dir);
    copy_case(path);
    hostile_set_attr(path, "schema", "kreplay.case/9\nkreplay: error: forged");
    const int rc = hostile_run(&out, "inspect '%s'", path);
    assert_int_equal(rc, 2);
    hostile_expect(out, "newline-attr.h5");
    hostile_expect(out, "kreplay.case/9?kreplay: error: forged");
    assert_int_equal(test_count_substr(out, "\n"), 1);
    free(out);
}

KR_TEST_MAIN_SETUP(setup, NULL, test_ignored_coretype_is_said, test_daemons_end_with_the_launch,
                   test_planted_numpy_never_imported, test_sparse_case_under_ulimit, test_slow_pt_names_the_size_limit,
                   test_unwritten_dataset_refused, test_attribute_newline_in_a_case);
