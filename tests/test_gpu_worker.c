/* The GPU worker (harness/engine/gpu_session.h) on the stand-in device
 * (KREPLAY_GPU_STANDIN=1: host memory, the CPU models), as CI runs it with
 * no GPU:
 *   - a twin's output through the worker is the CPU model's, bit for bit,
 *     and its references are reference/gemm_ref.h's fp32 and fp64 results
 *     (the independent computation on the same operands);
 *   - the launch's checks catch the fault kernels (as the stand-in emulates
 *     them): NONDETERMINISTIC, OOB_WRITE after the output, 32 columns
 *     unwritten in every launch, and nothing on the honest run;
 *   - a case's operands cross to the worker once: a second kernel, rerun or
 *     reference on the same operands sends no operand byte; the next case
 *     with the same weight bytes sends its activations only; a budget of
 *     1 MiB forces evictions and the rows do not change;
 *   - the model check on a sample of rows equals the full model's rows
 *     there (w4a8.decode, whose split-K depends on the case's M);
 *   - `replay --device gpu` gives every row of the CPU run with the same
 *     verdict, note, metrics, ULP histogram and digest, plus model rows,
 *     and no more UNSUPPORTED rows; in process (--no-isolate) too;
 *   - GPU plugins that segfault, hang and write past their output give
 *     CRASHED, TIMEOUT and OOB_WRITE, each ends the worker, and the rows
 *     after them (a correct GPU plugin, the next case) equal a run without
 *     them; --inject reaches a GPU plugin (MAGNITUDE, the fault named);
 *   - `gate --device gpu` overrides the suite's `device: cpu`, has no more
 *     UNSUPPORTED rows than the CPU gate, and gives the same rows over two
 *     workers on one device (`--gpus 0,0`) as over one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_io.h"
#include "gemm_ref.h"
#include "gpu_session.h"
#include "model_sample.h"
#include "replay.h"
#include "run_rows.h"
#include "suite_file.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"

#define SAMPLES KREPLAY_SOURCE_DIR "/cases/samples"
#define SAMPLE_A SAMPLES "/gdn_in_proj_ba_N48_K5120_M17.h5"
#define SAMPLE_B SAMPLES "/moe_gate_N256_K2048_M8.h5"

/* ---------------------------------------------------------------- the API */

static gpu_session_t *standin_session(int in_process)
{
    const gpu_session_options_t so = {.device = 0, .standin = 1, .in_process = in_process,
                                      .timeout_s = 120};
    gpu_session_t *s = NULL;
    kr_error_t err = {{0}};
    if (gpu_session_open(&s, &so, &err))
        fail_msg("%s", err.msg);
    return s;
}

static kernel_options_t g_kopt;

static kernel_inputs_t inputs_of(const case_t *c)
{
    return (kernel_inputs_t){
        .M = c->M, .N = c->N, .K = c->K, .x = c->x, .x_fp8 = c->x_fp8, .x_scale = c->x_scale,
        .x_fp8_format = c->x_fp8_format,
        .weight = {.packed = c->weight, .scales = c->weight_scale, .layout = c->scale_layout,
                   .e8m0_mode = E8M0_SPEC, .N = c->N, .K = c->K},
        .weight_ref = c->weight_ref, .weight_ref_len = c->weight_ref_len,
    };
}

/* A synthetic case, its inputs, and one kernel's activations on them. */
typedef struct {
    case_t c;
    kernel_inputs_t in;
    kernel_act_t act;
    const kernel_desc_t *k;
} prepared_t;

static void prepare(prepared_t *p, int64_t M, int64_t N, int64_t K, uint64_t seed, const char *kernel)
{
    test_synth_default_or_fail(M, N, K, seed, &p->c);
    p->in = inputs_of(&p->c);
    p->k = kernel_find(kernel);
    kr_error_t err = {{0}};
    if (!p->k || p->k->prepare_act(p->k, &p->in, &g_kopt, &p->act, &err))
        fail_msg("%s: %s", kernel, err.msg);
}

static void prepared_free(prepared_t *p)
{
    kernel_act_free(&p->act);
    case_free(&p->c);
}

/* A twin through the worker against run_cpu; operands sent once; the
 * references against gemm_ref on the same operands. */
static void test_twin_and_references(void **state)
{
    (void)state;
    prepared_t p;
    prepare(&p, 40, 96, 512, 7, "w4a8.perblock");
    const case_t c = p.c;
    const kernel_inputs_t in = p.in;
    const kernel_act_t act = p.act;
    const kernel_desc_t *k = p.k;
    kr_error_t err = {{0}};
    uint16_t *model = malloc((size_t)(c.M * c.N) * 2);
    kernel_run_info_t info = {{0}};
    assert_int_equal(k->run_cpu(k, &in, &act, &g_kopt, model, &info, &err), 0);

    gpu_session_t *s = standin_session(0);
    gpu_run_options_t go;
    gpu_run_options_default(&go);
    go.timed_runs = 0;
    gpu_run_result_t gr;
    isolate_result_t ir;
    assert_int_equal(gpu_session_twin(s, k, &in, &act, &g_kopt, &go, &gr, &ir, &err), 0);
    assert_int_equal(ir.status, ISOLATE_OK);
    assert_int_equal(gr.verdict, VERDICT_PASS);
    assert_int_equal(gr.reruns, 3);
    assert_memory_equal(gr.out, model, (size_t)(c.M * c.N) * 2);
    gpu_session_stats_t st1, st2;
    gpu_session_stats(s, &st1);
    assert_true(st1.operand_bytes > c.N * c.K / 2);   /* the weight crossed */
    gpu_run_result_free(&gr);
    /* The same operands again: nothing crosses but the request. */
    assert_int_equal(gpu_session_twin(s, k, &in, &act, &g_kopt, &go, &gr, &ir, &err), 0);
    gpu_session_stats(s, &st2);
    assert_int_equal(st2.operand_bytes, st1.operand_bytes);
    assert_int_equal(st2.workers, 1);
    gpu_run_result_free(&gr);

    float *cpu = malloc((size_t)(c.M * c.N) * 4), *via = malloc((size_t)(c.M * c.N) * 4);
    double *cpu64 = malloc((size_t)(c.M * c.N) * 8), *via64 = malloc((size_t)(c.M * c.N) * 8);
    assert_int_equal(gemm_ref_f32(act.dequant, c.M, &in.weight, 0, cpu, &err), 0);
    assert_int_equal(gpu_session_ref_mxfp4(s, act.dequant, c.M, &in.weight, 0, 0, via, &err), 0);
    assert_memory_equal(cpu, via, (size_t)(c.M * c.N) * 4);
    assert_int_equal(gemm_ref_f64(c.x, c.M, &in.weight, 0, cpu64, &err), 0);
    assert_int_equal(gpu_session_ref_mxfp4(s, c.x, c.M, &in.weight, 1, 0, via64, &err), 0);
    assert_memory_equal(cpu64, via64, (size_t)(c.M * c.N) * 8);
    gpu_session_stats(s, &st1);
    /* R_exact's operand was sent with the twin (its fp32 values): only x is new. */
    assert_int_equal(st1.operand_bytes - st2.operand_bytes, c.M * c.K * 4);
    gpu_session_close(s);
    TEST_FREE_ALL(model, cpu, via, cpu64, via64);
    prepared_free(&p);
}

/* The weight stays on the worker across cases: a second case whose weight has
 * the first's bytes, in buffers of its own (the content, not the address,
 * matches), sends its activations and nothing of the weight; its output is
 * its CPU model's, bit for bit. */
static void test_weight_stays_across_cases(void **state)
{
    (void)state;
    prepared_t a, b;
    prepare(&a, 40, 96, 512, 7, "w4a8.perblock");
    prepare(&b, 24, 96, 512, 8, "w4a8.perblock");
    const size_t N = 96, K = 512;
    const size_t ref = a.in.weight_ref_len == a.in.N ? N : 0;
    uint8_t *packed = malloc(N * K / 2), *scales = malloc(N * K / 32), *wref = malloc(N);
    memcpy(packed, a.in.weight.packed, N * K / 2);
    memcpy(scales, a.in.weight.scales, N * K / 32);
    if (ref)
        memcpy(wref, a.in.weight_ref, N);
    b.in.weight.packed = packed;
    b.in.weight.scales = scales;
    b.in.weight.layout = a.in.weight.layout;
    b.in.weight_ref = ref ? wref : a.in.weight_ref;
    b.in.weight_ref_len = a.in.weight_ref_len;
    kr_error_t err = {{0}};
    uint16_t *model = malloc((size_t)(b.in.M * b.in.N) * 2);
    kernel_run_info_t info = {{0}};
    assert_int_equal(b.k->run_cpu(b.k, &b.in, &b.act, &g_kopt, model, &info, &err), 0);

    gpu_run_options_t go;
    gpu_run_options_default(&go);
    go.timed_runs = 0;
    gpu_run_result_t gr;
    isolate_result_t ir;
    gpu_session_stats_t st0, st1, fresh_st;
    gpu_session_t *warm = standin_session(0);
    assert_int_equal(gpu_session_twin(warm, a.k, &a.in, &a.act, &g_kopt, &go, &gr, &ir, &err), 0);
    gpu_run_result_free(&gr);
    gpu_session_case_end(warm);
    gpu_session_stats(warm, &st0);
    assert_int_equal(gpu_session_twin(warm, b.k, &b.in, &b.act, &g_kopt, &go, &gr, &ir, &err), 0);
    assert_int_equal(ir.status, ISOLATE_OK);
    assert_memory_equal(gr.out, model, (size_t)(b.in.M * b.in.N) * 2);
    gpu_run_result_free(&gr);
    gpu_session_stats(warm, &st1);
    assert_int_equal(st1.workers, 1);
    gpu_session_close(warm);
    /* The same request in a session that holds nothing: the weight crosses too. */
    gpu_session_t *fresh = standin_session(0);
    assert_int_equal(gpu_session_twin(fresh, b.k, &b.in, &b.act, &g_kopt, &go, &gr, &ir, &err), 0);
    assert_memory_equal(gr.out, model, (size_t)(b.in.M * b.in.N) * 2);
    gpu_run_result_free(&gr);
    gpu_session_stats(fresh, &fresh_st);
    gpu_session_close(fresh);
    const int64_t sent = st1.operand_bytes - st0.operand_bytes;
    assert_true(sent > 0);   /* the activations crossed */
    assert_int_equal(fresh_st.operand_bytes - sent, (int64_t)(N * K / 2 + N * K / 32 + ref));
    TEST_FREE_ALL(packed, scales, wref, model);
    prepared_free(&a);
    prepared_free(&b);
}

/* The launch's checks on the stand-in's emulated fault kernels: a rerun that
 * moves one element, one element written past the end, the last 32 columns
 * left poisoned; and nothing on the honest run. */
static void test_fault_checks(void **state)
{
    (void)state;
    prepared_t p;
    prepare(&p, 24, 200, 256, 11, "w4a8.folded");
    kr_error_t err = {{0}};
    gpu_session_t *s = standin_session(0);
    static const struct {
        const char *fault;
        verdict_t want;
        int64_t unwritten;
    } cases[] = {{NULL, VERDICT_PASS, 0}, {"race", VERDICT_NONDETERMINISTIC, 0},
                 {"oob", VERDICT_OOB_WRITE, 0}, {"unwritten", VERDICT_WRONG, 24 * 32}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gpu_run_options_t go;
        gpu_run_options_default(&go);
        go.fault = cases[i].fault;
        go.reruns = 4;
        go.timed_runs = 0;
        gpu_run_result_t gr;
        isolate_result_t ir;
        assert_int_equal(gpu_session_twin(s, p.k, &p.in, &p.act, &g_kopt, &go, &gr, &ir, &err), 0);
        assert_int_equal(ir.status, ISOLATE_OK);
        assert_int_equal(gr.verdict, cases[i].want);
        assert_int_equal(gr.unwritten, cases[i].unwritten * 4);
        if (cases[i].want == VERDICT_NONDETERMINISTIC)
            assert_int_equal(gr.rerun_diff, 3);     /* one element moved in each of 3 reruns */
        if (cases[i].want == VERDICT_OOB_WRITE)
            assert_int_equal(gr.canary_bad_after, gr.canary_bad);
        if (cases[i].unwritten)
            assert_int_equal(gr.first_unwritten, 200 - 32);
        gpu_run_result_free(&gr);
    }
    gpu_session_close(s);
    prepared_free(&p);
}

/* The model on sampled rows is the full model's rows there, for a split-K
 * kernel whose split count the case's M decides. */
static void test_model_sample_rows(void **state)
{
    (void)state;
    case_t c;
    test_synth_default_or_fail(300, 64, 1024, 3, &c);
    const kernel_inputs_t in = inputs_of(&c);
    const char *names[] = {"w4a8.decode", "w4a8.perblock", "w4a4.aiter"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const kernel_desc_t *k = kernel_find(names[i]);
        kernel_act_t act;
        kr_error_t err = {{0}};
        assert_int_equal(k->prepare_act(k, &in, &g_kopt, &act, &err), 0);
        uint16_t *full = malloc((size_t)(c.M * c.N) * 2);
        kernel_run_info_t info = {{0}};
        assert_int_equal(k->run_cpu(k, &in, &act, &g_kopt, full, &info, &err), 0);
        model_sample_t ms;
        assert_int_equal(model_sample_run(k, &in, &act, &g_kopt, 7, &ms, &err), 0);
        assert_int_equal(ms.n, 7);
        assert_int_equal(ms.rows[0], 0);
        assert_int_equal(ms.rows[6], c.M - 1);
        for (int64_t r = 0; r < ms.n; r++)
            assert_memory_equal(ms.model + r * c.N, full + ms.rows[r] * c.N, (size_t)c.N * 2);
        assert_int_equal(model_sample_take(&ms, full, c.N), 0);
        assert_memory_equal(ms.out, ms.model, (size_t)(ms.n * c.N) * 2);
        model_sample_free(&ms);
        kernel_act_free(&act);
        free(full);
    }
    assert_int_equal(model_sample_count(300, -1), 300);
    assert_int_equal(model_sample_count(5, 32), 5);
    case_free(&c);
}

/* ------------------------------------------------------- through kreplay */

static void test_replay_rows_equal_cpu(void **state)
{
    (void)state;
    run_json_t cpu = run_json("1", "", "replay --json " SAMPLES);
    run_json_t gpu = run_json("1", "", "replay --json --device gpu " SAMPLES);
    /* In process, and with a budget far below one case's operands (evictions),
     * on two of the samples: their rows are the worker's. */
    run_json_t inproc = run_json("1", "", "replay --json --device gpu --no-isolate " SAMPLE_A " " SAMPLE_B);
    run_json_t tight = run_json("1", "KREPLAY_GPU_RESIDENT_MB=1", "replay --json --device gpu "
                                SAMPLE_A " " SAMPLE_B);
    assert_int_equal(cpu.rc, 0);
    assert_int_equal(gpu.rc, 0);
    assert_true(rows_equal(cpu.root, gpu.root, 0) > 0);
    assert_true(rows_equal(inproc.root, gpu.root, 1) > 0);
    assert_int_equal(rows_equal(inproc.root, tight.root, 0), 0);
    assert_true(count_verdict(rows_of(gpu.root), "UNSUPPORTED") <=
                count_verdict(rows_of(cpu.root), "UNSUPPORTED"));
    json_t *r = find_row(rows_of(gpu.root), "moe_gate_N256_K2048_M8", "w4a8.perblock",
                         "model:w4a8.perblock");
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "verdict")), "PASS");
    assert_non_null(strstr(json_string_value(json_object_get(r, "device")), "stand-in"));
    json_decref(cpu.root);
    json_decref(gpu.root);
    json_decref(inproc.root);
    json_decref(tight.root);
}

static void test_plugins_crash_hang_oob(void **state)
{
    (void)state;
    char ok[512], crash[512], hang[512], oob[512], args[4096];
    test_plugin_file(ok, sizeof ok, "gpustandin_ok");
    test_plugin_file(crash, sizeof crash, "gpustandin_crash");
    test_plugin_file(hang, sizeof hang, "gpustandin_hang");
    test_plugin_file(oob, sizeof oob, "gpustandin_oob");
    const char *kernels = "--kernels 'w4a8.perblock,gpustandin.*' --timeout 2 --reruns 1 --device gpu";
    snprintf(args, sizeof args, "replay --json %s --plugin '%s' --plugin '%s' --plugin '%s' --plugin '%s' "
             SAMPLE_A " " SAMPLE_B, kernels, crash, hang, oob, ok);
    run_json_t bad = run_json("1", "", args);
    snprintf(args, sizeof args, "replay --json %s --plugin '%s' " SAMPLE_A " " SAMPLE_B, kernels, ok);
    run_json_t clean = run_json("1", "", args);
    assert_int_equal(bad.rc, 1);
    assert_int_equal(clean.rc, 0);
    json_t *rows = rows_of(bad.root);
    static const struct {
        const char *kernel, *verdict, *note;
    } want[] = {{"gpustandin.crash", "CRASHED", "SIGSEGV"},
                {"gpustandin.hang", "TIMEOUT", "no result after 2 s"},
                {"gpustandin.oob", "OOB_WRITE", "128 after its end"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        for (int c = 0; c < 2; c++) {
            json_t *r = find_row(rows, c ? "moe_gate_N256_K2048_M8" : "gdn_in_proj_ba_N48_K5120_M17",
                                 want[i].kernel, "-");
            assert_non_null(r);
            assert_string_equal(json_string_value(json_object_get(r, "verdict")), want[i].verdict);
            assert_non_null(strstr(json_string_value(json_object_get(r, "note")), want[i].note));
        }
    }
    /* Every row of the clean run (the correct plugin after the bad ones, the
     * registry kernel of the second case after the first's crashes) stands. */
    assert_int_equal(rows_equal(clean.root, bad.root, 1), 6);
    assert_int_equal(count_verdict(rows_of(clean.root), "PASS"), (int)json_array_size(rows_of(clean.root)));
    json_decref(bad.root);
    json_decref(clean.root);
    /* --inject reaches a GPU plugin too: its output scaled by 4 after it came back. */
    snprintf(args, sizeof args, "replay --json --kernels 'gpustandin.*' --refs exact --device gpu "
             "--inject scale-const:4 --plugin '%s' " SAMPLE_B, ok);
    run_json_t injected = run_json("1", "", args);
    json_t *r = find_row(rows_of(injected.root), "moe_gate_N256_K2048_M8", "gpustandin.w4a8_ok", "R_exact");
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "verdict")), "MAGNITUDE");
    assert_non_null(strstr(json_string_value(json_object_get(r, "note")), "injected fault scale-const"));
    json_decref(injected.root);
}

static void test_gate_device_and_two_workers(void **state)
{
    (void)state;
    char dir[512], suite[600], args[4096];
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "gpu_worker_gate"), 0);
    snprintf(suite, sizeof suite, "%s/suite.yaml", dir);
    const test_suite_spec_t spec = {.name = "gpu-worker", .files = SAMPLE_B,
                                    .shapes = "64x256, 48x512", .m = "1, 17", .seeds = "1",
                                    .kernels = "\"*\""};
    test_write_suite(suite, &spec);
    char out_cpu[700], out_one[700], out_two[700];
    snprintf(out_cpu, sizeof out_cpu, "%s/cpu", dir);
    snprintf(out_one, sizeof out_one, "%s/one", dir);
    snprintf(out_two, sizeof out_two, "%s/two", dir);
    const char *outs[] = {out_cpu, out_one, out_two};
    const char *opts[] = {"", "--device gpu", "--device gpu --gpus 0,0"};
    run_json_t runs[3];
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "gate '%s' -o '%s' -q %s >/dev/null; cat '%s/results.json'", suite,
                 outs[i], opts[i], outs[i]);
        runs[i] = run_json("1", "", args);
    }
    assert_true(rows_equal(runs[0].root, runs[1].root, 0) > 0);
    assert_int_equal(rows_equal(runs[1].root, runs[2].root, 0), 0);
    assert_true(count_verdict(rows_of(runs[1].root), "UNSUPPORTED") <=
                count_verdict(rows_of(runs[0].root), "UNSUPPORTED"));
    /* The GPU rows came from the stand-in: --device gpu overrode device: cpu. */
    json_t *r = find_row(rows_of(runs[2].root), "moe_gate_N256_K2048_M8", "w4a8.folded",
                         "model:w4a8.folded");
    assert_non_null(r);
    for (int i = 0; i < 3; i++)
        json_decref(runs[i].root);
}

int main(void)
{
    setenv("KREPLAY_GPU_STANDIN", "1", 1);
    kernel_options_default(&g_kopt);
    KR_RUN_TESTS(NULL, NULL, test_twin_and_references, test_weight_stays_across_cases, test_fault_checks,
                 test_model_sample_rows,
                 test_replay_rows_equal_cpu, test_plugins_crash_hang_oob,
                 test_gate_device_and_two_workers);
}
