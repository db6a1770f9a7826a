/* kreplay gate end to end: a suite through its policy into a results file;
 * a baseline that an unchanged run passes and perturbed kernels fail with
 * the right verdict and a JUnit failure; shards that merge to exactly the
 * unsharded run; a killed run that --resume finishes; bad suites. */
/* ctest-labels: gate */
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

#include "kreplay_checks.h"
#include "results_store.h"
#include "row_reference.h"
#include "suite_file.h"
#include "test_main.h"
#include "test_support.h"

static char dir[1024];
static char suite[1200];

static int setup(void **state)
{
    (void)state;
    test_tmp_path(dir, sizeof dir, "gate");
    mkdir(dir, 0777);
    snprintf(suite, sizeof suite, "%s/suite.yaml", dir);
    const test_suite_spec_t spec = {
        .name = "gate-test", .files = KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5",
        .shapes = "64x256, gdn_in_proj_ba_tp2", .m = "1, 8, 80", .seeds = "1, 2",
        .kernels = "\"w4a8.perblock\", \"w4a8.folded\", \"w4a4.aiter\", \"quant.fp8_token\"",
    };
    test_write_suite(suite, &spec);
    return 0;
}

static int gate(const char *extra, char **out)
{
    char args[8192];
    snprintf(args, sizeof args, "gate '%s' %s", suite, extra);
    return test_run_kreplay(args, out);
}

/* The gate run <dir>/<name> against the baseline `base`, its JUnit in
 * <dir>/<name>.xml, with the fault `inject` (NULL: none); its output once its
 * exit code is checked to be rc (malloc'd, caller frees). */
static char *gate_against(const char *base, const char *name, const char *inject, int rc)
{
    char args[8192];
    int n = snprintf(args, sizeof args, "gate '%s' -o '%s/%s' --baseline '%s' --junit '%s/%s.xml'",
                     suite, dir, name, base, dir, name);
    if (inject)
        snprintf(args + n, sizeof args - (size_t)n, " --inject '%s'", inject);
    return test_kreplay_output(args, rc);
}

static void read_rows(const char *path, result_list_t *rows)
{
    kr_error_t err;
    if (results_store_read(path, rows, NULL, &err))
        fail_msg("%s", err.msg);
}

/* The rows of the run in <dir>/<run>. */
static void read_run_rows(const char *run, result_list_t *rows)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s/results.h5", dir, run);
    read_rows(path, rows);
}

/* Every stored field except wall-clock time must agree. */
static void assert_same_rows(const result_list_t *a, const result_list_t *b)
{
    assert_int_equal(a->count, b->count);
    for (int64_t i = 0; i < a->count; i++) {
        result_t x = a->rows[i], y = b->rows[i];
        x.seconds = y.seconds = 0;
        assert_string_equal(x.case_path, y.case_path);
        assert_string_equal(x.kernel, y.kernel);
        assert_string_equal(x.reference, y.reference);
        assert_string_equal(x.out_digest, y.out_digest);
        assert_int_equal(x.verdict, y.verdict);
        assert_memory_equal(&x.metrics, &y.metrics, sizeof x.metrics);
        assert_memory_equal(&x.ulp, &y.ulp, sizeof x.ulp);
    }
}

static void test_baseline_and_drills(void **state)
{
    (void)state;
    char extra[4096], base[1200], *out;
    snprintf(extra, sizeof extra, "-o '%s/base'", dir);
    assert_int_equal(gate(extra, &out), 0);
    assert_non_null(strstr(out, "0 failing, 0 regressed"));
    free(out);
    snprintf(base, sizeof base, "%s/base/results.h5", dir);
    result_list_t rows;
    read_rows(base, &rows);
    assert_true(rows.count >= 30);
    result_list_free(&rows);

    /* An unchanged run passes against the baseline. */
    out = gate_against(base, "same", NULL, 0);
    assert_non_null(strstr(out, "0 regressed"));
    free(out);

    /* One bf16 ULP in 1% of w4a8.folded's outputs: every metric stays under its
     * threshold, but the bits moved, and the gate must say so. */
    out = gate_against(base, "nudge", "w4a8.folded=ulp-nudge:0.01", 1);
    assert_non_null(strstr(out, "REGRESSED"));
    assert_non_null(strstr(out, "output bits changed since the baseline"));
    assert_null(strstr(out, "w4a8.perblock/R_exact  output bits changed")); /* only the perturbed kernel */
    free(out);
    char path[1200], cmd[2600];
    snprintf(path, sizeof path, "%s/nudge.xml", dir);
    snprintf(cmd, sizeof cmd, "grep -q '<failure message=\"REGRESSED' '%s'", path);
    assert_int_equal(system(cmd), 0);
    /* Every failing testcase is the folded kernel's: the line before each
     * <failure> opens its testcase. */
    snprintf(cmd, sizeof cmd, "grep -B1 '<failure' '%s' | grep '<testcase' | grep -v -q ':w4a8.folded\"'", path);
    assert_int_not_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "grep -B1 '<failure' '%s' | grep -q ':w4a8.folded\"'", path);
    assert_int_equal(system(cmd), 0);

    /* One 16 x 32 tile scaled by 1.5: the metrics fail the policy outright. */
    out = gate_against(base, "tile", "w4a8.folded=tile-scale:1.5", 1);
    assert_non_null(strstr(out, "WRONG"));
    assert_non_null(strstr(out, "diagnosis: rows 0-"));
    free(out);
    snprintf(cmd, sizeof cmd, "grep -q '<failure message=\"WRONG R_exact: rel_fro' '%s/tile.xml'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_shards_merge_to_one_run(void **state)
{
    (void)state;
    char extra[4096], *out;
    snprintf(extra, sizeof extra, "-o '%s/whole'", dir);
    assert_int_equal(gate(extra, &out), 0);
    free(out);
    for (int i = 1; i <= 3; i++) {
        snprintf(extra, sizeof extra, "-o '%s/shard%d' --shard %d/3", dir, i, i);
        assert_int_equal(gate(extra, &out), 0);
        free(out);
    }
    char args[8192];
    snprintf(args, sizeof args, "merge -o '%s/merged' '%s/shard1/results.h5' '%s/shard3/results.h5' '%s/shard2/results.h5'",
             dir, dir, dir, dir);
    assert_int_equal(test_run_kreplay(args, &out), 0);
    free(out);
    result_list_t whole, merged;
    read_run_rows("whole", &whole);
    read_run_rows("merged", &merged);
    assert_same_rows(&whole, &merged);
    char a[1200];
    snprintf(a, sizeof a, "%s/whole/results.h5", dir);

    /* merge --baseline gates the merged run like gate does: against the whole
     * run nothing regresses; against a baseline whose one row was twice as
     * good, exactly that row does (exit 1); --junit carries the provenance. */
    snprintf(args, sizeof args, "merge -o '%s/merged-gated' --baseline '%s' --junit '%s/m.xml' "
             "'%s/shard1/results.h5' '%s/shard2/results.h5' '%s/shard3/results.h5'",
             dir, a, dir, dir, dir, dir);
    test_kreplay_expect(args, 0, "merge: 0 regressed");
    char *xml = test_read_in_dir(dir, "m.xml");
    assert_non_null(strstr(xml, "errors=\"0\""));
    assert_non_null(strstr(xml, "<property name=\"suite_hash\" value=\""));
    assert_non_null(strstr(xml, "<property name=\"blas_core\" value=\""));
    free(xml);
    int64_t victim = -1;
    for (int64_t i = 0; i < whole.count && victim < 0; i++)
        if (strcmp(whole.rows[i].reference, "-") && isfinite(whole.rows[i].metrics.rel_fro) &&
            whole.rows[i].metrics.rel_fro > 1e-4 && !verdict_is_failure(whole.rows[i].verdict))
            victim = i;
    assert_true(victim >= 0);
    whole.rows[victim].metrics.rel_fro *= 0.5;
    char doctored[1300];
    snprintf(doctored, sizeof doctored, "%s/doctored.h5", dir);
    kr_error_t werr = {{0}};
    if (results_store_write(doctored, &whole, NULL, &werr) != 0)
        fail_msg("%s", werr.msg);
    snprintf(args, sizeof args, "merge -o '%s/merged-regressed' --baseline '%s' "
             "'%s/shard1/results.h5' '%s/shard2/results.h5' '%s/shard3/results.h5'",
             dir, doctored, dir, dir, dir);
    assert_int_equal(test_run_kreplay(args, &out), 1);
    assert_non_null(strstr(out, "merge: 1 regressed"));
    assert_non_null(strstr(out, whole.rows[victim].kernel));
    free(out);
    snprintf(args, sizeof args, "merge -o '%s/merged-nobase' --baseline '%s/nonexistent.h5' "
             "'%s/shard1/results.h5'", dir, dir, dir);
    test_kreplay_expect(args, 2, "baseline update");
    result_list_free(&whole);
    result_list_free(&merged);

    /* The same shard twice is refused. */
    snprintf(args, sizeof args, "merge -o '%s/bad' '%s/shard1/results.h5' '%s/shard1/results.h5'", dir, dir, dir);
    assert_int_equal(test_run_kreplay(args, &out), 2);
    free(out);
}

static void test_resume_after_kill(void **state)
{
    (void)state;
    char extra[4096], cmd[4096], *out;
    snprintf(extra, sizeof extra, "-o '%s/killed'", dir);
    assert_int_equal(gate(extra, &out), 0);
    free(out);
    /* A killed run: no results.h5 yet, and only some cases finished. */
    snprintf(cmd, sizeof cmd, "cd '%s/killed' && rm results.h5 && ls partial/*.h5 | head -4 | xargs rm", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(extra, sizeof extra, "-o '%s/killed' --resume", dir);
    assert_int_equal(gate(extra, &out), 0);
    assert_non_null(strstr(out, "resumed)"));
    assert_null(strstr(out, "(0 resumed)"));
    free(out);
    result_list_t whole, resumed;
    read_run_rows("whole", &whole);
    read_run_rows("killed", &resumed);
    assert_same_rows(&whole, &resumed);
    /* The resumed partials held more than GEMM rows: a quantizer's rows
     * (against x) too, which --resume once refused as unknown. */
    int quantizer_rows = 0;
    for (int64_t i = 0; i < resumed.count; i++)
        quantizer_rows += !strcmp(resumed.rows[i].reference, ROW_REF_INPUT);
    assert_true(quantizer_rows > 0);
    result_list_free(&whole);
    result_list_free(&resumed);
}

static void test_bad_suite_and_list(void **state)
{
    (void)state;
    char bad[1200], args[2600], *out;
    snprintf(bad, sizeof bad, "%s/bad.yaml", dir);
    FILE *fp = fopen(bad, "w");
    fputs("suite: bad\ncases:\n  - synth:\n      shapes: [64x256]\n      m: [1]\n      colour: blue\n", fp);
    fclose(fp);
    snprintf(args, sizeof args, "gate '%s' -o '%s/badrun'", bad, dir);
    char where[1300];
    snprintf(where, sizeof where, "%s:6:", bad);
    test_kreplay_expect(args, 2, where);

    snprintf(args, sizeof args, "gate '%s' --list-shapes", suite);
    assert_int_equal(test_run_kreplay(args, &out), 0);
    /* Then one line per shape x band, for ctest's per-band labels. */
    TEST_EXPECT_PHRASES(out, "64x256 bands=decode,mid", "48x5120 ", "families=quant,w4a8,w4a4",
                        "\n64x256 band=decode families=", "\n64x256 band=mid families=");
    assert_null(strstr(out, "64x256 band=prefill"));
    free(out);
}

KR_TEST_MAIN_SETUP(setup, NULL,
    test_baseline_and_drills, test_shards_merge_to_one_run, test_resume_after_kill,
    test_bad_suite_and_list);
