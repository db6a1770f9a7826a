/* The GPU worker on a real GPU (a CUDA build with a device; skipped, 77,
 * without one), through the kreplay binary:
 *   - kreplay's own W4A8 kernel as a GPU plugin (kernels/plugins/gpu,
 *     KREPLAY_PLUGIN_GPU) passes both references and is bit-identical to the
 *     w4a8.perblock model (--vs) on the samples and a 300 x 1280 x 5120 case;
 *   - its variants that segfault, hang and write 64 elements past out give
 *     CRASHED, TIMEOUT and OOB_WRITE, and every row after them (the correct
 *     plugin after the bad ones, the next case) equals a run without them;
 *   - `replay --device gpu` (twins, GPU references, the model check on
 *     every row) has the CPU run's verdict on every one of its rows, and every
 *     twin is bit-identical to its model on every row. */
/* ctest-labels: gpu */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_session.h"
#include "run_rows.h"
#include "test_main.h"
#include "test_support.h"

#define SAMPLES KREPLAY_SOURCE_DIR "/cases/samples"
#define SAMPLE_A SAMPLES "/gdn_in_proj_ba_N48_K5120_M17.h5"
#define SAMPLE_B SAMPLES "/moe_gate_N256_K2048_M8.h5"

static char g_synth[1200];

/* A 300 x 1280 x 5120 case: partial 128-row and -column tiles of the tiled kernel. */
static int setup(void **state)
{
    (void)state;
    char dir[1024], cmd[2400];
    test_tmp_path(dir, sizeof dir, "gpu_plugin_cases");
    snprintf(cmd, sizeof cmd, "'%s' synth --shape 1280x5120 --m 300 --seed 5 --out '%s' >/dev/null",
             KREPLAY_BINARY, dir);
    snprintf(g_synth, sizeof g_synth, "%s/synth_N1280_K5120_M300_s5.h5", dir);
    return test_exit_code(system(cmd)) == 0 && access(g_synth, R_OK) == 0 ? 0 : -1;
}

static const char *verdict_of(json_t *row)
{
    return json_string_value(json_object_get(row, "verdict"));
}

static void test_gpu_plugin_bit_identical(void **state)
{
    (void)state;
    char lib[512], args[4096];
    test_plugin_file(lib, sizeof lib, "gpu_w4a8");
    snprintf(args, sizeof args, "replay --json --kernels 'gpu.*' --vs w4a8.perblock --plugin '%s' "
             SAMPLES " '%s'", lib, g_synth);
    run_json_t r = run_json("0", "", args);
    json_t *rows = rows_of(r.root), *row;
    size_t i;
    int vs = 0, refs = 0;
    json_array_foreach(rows, i, row) {
        const char *ref = json_string_value(json_object_get(row, "reference"));
        if (!strcmp(ref, "model:w4a8.perblock")) {
            vs++;
            assert_true(json_real_value(json_object_get(json_object_get(row, "ulp"),
                                                        "identical_frac")) == 1.0);
        } else if (!strcmp(ref, "R_exact") || !strcmp(ref, "R_source")) {
            refs++;
            assert_true(!strcmp(verdict_of(row), "PASS") || !strcmp(verdict_of(row), "POISONED_INPUT"));
        }
    }
    assert_true(vs >= 5);
    assert_true(refs >= 2 * vs);
    json_decref(r.root);
}

/* "replay ... --plugin LIB..." for the listed GPU plugin libraries, then the two samples. */
static run_json_t replay_plugins(const char *const *names, int n)
{
    char args[8192] = "replay --json --kernels 'w4a8.perblock,gpu.*' --timeout 5 --reruns 1 --device gpu";
    for (int i = 0; i < n; i++) {
        char lib[512];
        test_plugin_file(lib, sizeof lib, names[i]);
        const size_t len = strlen(args);
        snprintf(args + len, sizeof args - len, " --plugin '%s'", lib);
    }
    const size_t len = strlen(args);
    snprintf(args + len, sizeof args - len, " %s %s", SAMPLE_A, SAMPLE_B);
    return run_json("0", "", args);
}

static void test_gpu_plugins_misbehaving(void **state)
{
    (void)state;
    static const char *const bad_then_ok[] = {"gpu_segv", "gpu_hang", "gpu_oob", "gpu_w4a8"};
    run_json_t bad = replay_plugins(bad_then_ok, 4);
    run_json_t clean = replay_plugins(bad_then_ok + 3, 1);
    static const struct {
        const char *kernel, *verdict;
    } want[] = {{"gpu.segv", "CRASHED"}, {"gpu.hang", "TIMEOUT"}, {"gpu.oob", "OOB_WRITE"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        for (int c = 0; c < 2; c++) {
            json_t *row = find_row(rows_of(bad.root),
                                   c ? "moe_gate_N256_K2048_M8" : "gdn_in_proj_ba_N48_K5120_M17",
                                   want[i].kernel, "-");
            assert_non_null(row);
            assert_string_equal(verdict_of(row), want[i].verdict);
        }
    assert_int_equal(rows_equal(clean.root, bad.root, 1), 6);
    json_decref(bad.root);
    json_decref(clean.root);
}

static void test_gpu_run_verdicts_equal_cpu(void **state)
{
    (void)state;
    char args[4096];
    snprintf(args, sizeof args, "replay --json " SAMPLES " '%s'", g_synth);
    run_json_t cpu = run_json("0", "", args);
    snprintf(args, sizeof args, "replay --json --device gpu --model-rows all " SAMPLES " '%s'", g_synth);
    run_json_t gpu = run_json("0", "", args);
    json_t *crows = rows_of(cpu.root), *grows = rows_of(gpu.root), *row;
    size_t i;
    int model_rows = 0;
    json_array_foreach(crows, i, row) {
        json_t *g = find_row(grows, json_string_value(json_object_get(row, "case_name")),
                             json_string_value(json_object_get(row, "kernel")),
                             json_string_value(json_object_get(row, "reference")));
        assert_non_null(g);
        if (strcmp(verdict_of(row), verdict_of(g)))
            fail_msg("%s %s %s: cpu %s, gpu %s", json_string_value(json_object_get(row, "case_name")),
                     json_string_value(json_object_get(row, "kernel")),
                     json_string_value(json_object_get(row, "reference")), verdict_of(row),
                     verdict_of(g));
    }
    json_array_foreach(grows, i, row) {
        const char *ref = json_string_value(json_object_get(row, "reference"));
        if (!strncmp(ref, "model:", 6) && strcmp(ref, "model:codes") &&
            !strchr(json_string_value(json_object_get(row, "kernel")), '+')) {
            model_rows++;
            assert_string_equal(verdict_of(row), "PASS");
        }
    }
    assert_true(count_verdict(grows, "UNSUPPORTED") <= count_verdict(crows, "UNSUPPORTED"));
    assert_true(model_rows >= 20);
    json_decref(cpu.root);
    json_decref(gpu.root);
}

int main(void)
{
    char name[128], why[KR_ERROR_MSG_MAX];
    kr_error_t err = {{0}};
    gpu_session_t *s = NULL;
    const gpu_session_options_t so = {.device = 0, .timeout_s = 120};
    const int ok = gpu_session_open(&s, &so, &err) == 0 &&
                   gpu_session_device(s, name, sizeof name, why, sizeof why) &&
                   gpu_session_refs_supported(s);
    gpu_session_close(s);
    char lib[512];
    test_plugin_file(lib, sizeof lib, "gpu_w4a8");
    if (!ok || access(lib, R_OK) != 0) {
        printf("test_gpu_plugin: skipped: %s\n", !ok ? (err.msg[0] ? err.msg : why) : "no GPU plugin built");
        return 77;
    }
    printf("test_gpu_plugin: on %s\n", name);
    KR_RUN_TESTS(setup, NULL, test_gpu_plugin_bit_identical, test_gpu_plugins_misbehaving,
                 test_gpu_run_verdicts_equal_cpu);
}
