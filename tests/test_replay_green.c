/* A replay never passes what it did not check.  Each check is a command
 * that used to end in a table of PASS rows and exit 0:
 *   - `--kernels` that leaves out the kernel of an explicit --plugin or --py
 *     dropped it silently: now exit 2 naming it and the --kernels to use;
 *   - an --inject KERNELS glob that matches none of the kernels run;
 *   - an injected fault that changed no output bit (sanitize on a clean
 *     case, a quantizer variant that agrees): now said on each row and in
 *     the summary.  The oracle is the outputs themselves (--save-outputs,
 *     read back with HDF5): the row says "changed no output bit" exactly
 *     when the faulty and the clean outputs are bit-identical, and "changed
 *     N of M" with N the count of differing elements;
 *   - a case that could not be read: the summary said "4 rows: 4 PASS"
 *     before exit 2; now it says the case was not read;
 *   - a replay whose every row is UNSUPPORTED compared nothing: exit 2. */
/* ctest-labels: replay */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_inject.h"
#include "kreplay_checks.h"
#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

#define SAMPLE KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5"
#define SAMPLE_NAME "moe_gate_N256_K2048_M8"

static char dir[1024];

static int setup(void **state)
{
    (void)state;
    return test_tmp_dir(dir, sizeof dir, "replay-green");
}

static void test_named_kernels_are_run(void **state)
{
    (void)state;
    char lib[1024], args[4096];
    snprintf(lib, sizeof lib, "%s", KREPLAY_BINARY);
    *strrchr(lib, '/') = '\0';
    strcat(lib, "/plugins/libkr_bug_correct.so");
    snprintf(args, sizeof args, "replay --kernels w4a8.perblock --plugin '%s' '%s'", lib, SAMPLE);
    char *out = test_kreplay_output(args, 2);
    TEST_EXPECT_PHRASES(out, "--plugin", "its kernel bug.correct is not run", "--kernels 'w4a8.perblock,bug.correct'");
    assert_null(strstr(out, "PASS"));
    free(out);
    snprintf(args, sizeof args, "replay --kernels 'w4a8.perblock,bug.*' --plugin '%s' '%s'", lib, SAMPLE);
    out = test_kreplay_output(args, 0);
    TEST_EXPECT_PHRASES(out, "bug.correct");
    free(out);
    /* An --inject glob that names no kernel this run replays. */
    snprintf(args, sizeof args, "replay --kernels w4a8.perblock --inject 'w4a8.foldd=ulp-nudge:0.01' '%s'", SAMPLE);
    test_kreplay_expect(args, 2, "'w4a8.foldd' matches none of the kernels this run replays");
    snprintf(args, sizeof args, "replay --kernels w4a8.perblock --inject 'w4a8.folded=ulp-nudge:0.01' '%s'", SAMPLE);
    test_kreplay_expect(args, 2, "it names w4a8.folded, which --kernels 'w4a8.perblock' leaves out");
}

static void test_python_kernel_is_run(void **state)
{
    (void)state;
    if (test_python_lacks("numpy", "no numpy"))
        skip();
    char py[1200], args[4096];
    snprintf(py, sizeof py, "%s/mine.py", dir);
    assert_int_equal(test_write_text(py, "def kern(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):\n"
                                         "    raise RuntimeError('not to be run here')\n"),
                     0);
    snprintf(args, sizeof args,
             "KREPLAY_PYTHON=/usr/bin/python3 '%s' replay --kernels w4a8.perblock --py '%s:kern' '%s'", KREPLAY_BINARY,
             py, SAMPLE);
    char *out = NULL;
    assert_int_equal(test_sh(args, &out), 2);
    TEST_EXPECT_PHRASES(out, "--py", "its kernel py.mine.kern is not run", "'w4a8.perblock,py.mine.kern'");
    free(out);
}

/* The kernel's saved output (--save-outputs) as bf16 bits, malloc'd. */
static uint16_t *saved_output(const char *file, const char *kernel, size_t *n)
{
    char path[256];
    snprintf(path, sizeof path, "/%s/%s/out", SAMPLE_NAME, kernel);
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t sp = H5Dget_space(d);
    *n = (size_t)H5Sget_simple_extent_npoints(sp);
    uint16_t *bits = malloc(*n * sizeof *bits);
    assert_true(H5Dread(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits) >= 0);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    return bits;
}

/* Replays the sample with --inject SPEC (or none) into a saved-outputs file;
 * returns the JSON rows. */
static json_t *replay_saving(const char *spec, const char *kernels, const char *save)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' replay --json --kernels '%s' %s%s%s --save-outputs '%s' '%s'", KREPLAY_BINARY,
             kernels, spec ? "--inject '" : "", spec ? spec : "", spec ? "'" : "", save, SAMPLE);
    return test_command_json(cmd);
}

/* The rows of kernel with a reference say the fault's effect as the saved
 * outputs measure it. */
static void check_fault_effect(const char *spec, const char *kernel)
{
    char clean_path[1200], faulty_path[1200];
    snprintf(clean_path, sizeof clean_path, "%s/clean-%s.h5", dir, kernel);
    snprintf(faulty_path, sizeof faulty_path, "%s/faulty-%s-%d.h5", dir, kernel, (int)strlen(spec));
    json_decref(replay_saving(NULL, kernel, clean_path));
    json_t *root = replay_saving(spec, kernel, faulty_path);
    size_t n = 0, m = 0;
    uint16_t *clean = saved_output(clean_path, kernel, &n);
    uint16_t *faulty = saved_output(faulty_path, kernel, &m);
    assert_int_equal(n, m);
    size_t differ = n;
    for (size_t i = 0; i < n; i++)
        differ -= clean[i] == faulty[i];
    char changed[128];
    snprintf(changed, sizeof changed, "injected fault changed %zu of %zu output elements", differ, n);
    const char *want = differ ? changed : FAULT_NO_EFFECT_NOTE;
    json_t *rows = json_object_get(root, "results");
    int checked = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        if (strcmp(test_json_str(r, "kernel"), kernel) != 0 || !strcmp(test_json_str(r, "reference"), "-"))
            continue;
        if (!strstr(test_json_str(r, "note"), want))
            fail_msg("--inject %s, %s / %s: note lacks '%s': %s", spec, kernel, test_json_str(r, "reference"), want,
                     test_json_str(r, "note"));
        checked++;
    }
    assert_true(checked >= 2);
    printf("--inject %s on %s: %zu of %zu output elements changed; the rows say so\n", spec, kernel, differ, n);
    json_decref(root);
    free(clean);
    free(faulty);
}

static void test_fault_effect_said(void **state)
{
    (void)state;
    check_fault_effect("sanitize", "w4a8.folded");          /* a clean case: nothing to sanitize */
    check_fault_effect("quant-variant:traced", "w4a8.folded");
    check_fault_effect("ulp-nudge:0.01", "w4a8.folded");
    check_fault_effect("tile-scale:1.5", "w4a8.perblock");
    /* The summary of the table says it too, for the fault that did nothing. */
    char args[4096];
    snprintf(args, sizeof args, "replay --kernels 'w4a8.folded,w4a8.perblock' --inject sanitize '%s'", SAMPLE);
    char *out = test_kreplay_output(args, 0);
    TEST_EXPECT_PHRASES(out, "4 rows: 4 PASS\n",
                        FAULT_NO_EFFECT_NOTE " of w4a8.perblock, w4a8.folded (4 rows of 1 case)");
    free(out);
    snprintf(args, sizeof args, "replay --kernels w4a8.folded --inject 'tile-scale:1.5' '%s'", SAMPLE);
    out = test_kreplay_output(args, 1);
    assert_null(strstr(out, FAULT_NO_EFFECT_NOTE));
    free(out);
}

static void test_unread_case_in_summary(void **state)
{
    (void)state;
    char cases[1200], cmd[4096];
    snprintf(cases, sizeof cases, "%s/cases", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s/a.h5' && head -c 30000 '%s' > '%s/b.h5'", cases, SAMPLE,
             cases, SAMPLE, cases);
    assert_int_equal(test_exit_code(system(cmd)), 0);
    char args[4096];
    snprintf(args, sizeof args, "replay --kernels 'w4a8.folded,w4a8.perblock' '%s'", cases);
    char *out = test_kreplay_output(args, 2);
    TEST_EXPECT_PHRASES(out, "b.h5", "4 rows: 4 PASS; 1 case not read");
    free(out);
}

static void test_nothing_compared(void **state)
{
    (void)state;
    char args[4096];
    snprintf(args, sizeof args, "replay --kernels bf16.skinny '%s'", SAMPLE);
    char *out = test_kreplay_output(args, 2);
    TEST_EXPECT_PHRASES(out, "no row compared anything", "bf16.skinny");
    free(out);
    snprintf(args, sizeof args, "replay --json --kernels bf16.skinny '%s'", SAMPLE);
    test_kreplay_expect(args, 2, "no row compared anything");
}

KR_TEST_MAIN_SETUP(setup, NULL, test_named_kernels_are_run, test_python_kernel_is_run, test_fault_effect_said,
                   test_unread_case_in_summary, test_nothing_compared);
