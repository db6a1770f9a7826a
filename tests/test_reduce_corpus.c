/* kreplay reduce on the whole bug corpus (tests/bugs/buggy_kernels.c): each
 * bug's failing case, as test_bug_corpus makes it, reduced; the reduced case
 * replayed by `kreplay replay` alone must give the verdict and diagnosis
 * family the original gives there, and be at most 16 rows x 64 columns x 2
 * K-blocks unless the entry says why the failure needs more.  The correct
 * kernel is refused.  Prints the table (bug, case, sizes, kernel runs,
 * seconds, diagnosis before and after). */
/* ctest-labels: slow;corpus */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kreplay_checks.h"
#include "test_main.h"
#include "test_support.h"

typedef struct {
    const char *bug;
    const char *cas;        /* "main", "n48", "nan", "large" */
    const char *args;       /* extra options of the replay and the reduction */
    int64_t max_m, max_n, max_k;
    const char *why;        /* why it keeps more than 16 x 64 x 64, or NULL */
} entry_t;

#define SMALL 16, 64, 64

static const entry_t corpus[] = {
    {"nibble_swap", "main", "", SMALL, NULL},
    {"nibble_swap", "large", "", SMALL, NULL},
    {"e2m1_unsigned", "main", "", SMALL, NULL},
    {"fp8_e5m2", "main", "", SMALL, NULL},
    {"e8m0_bias128", "main", "", SMALL, NULL},
    {"scale_next_block", "main", "", SMALL, NULL},
    {"scale_next_row", "main", "", SMALL, NULL},
    {"scale_layout_nk", "main", "", SMALL, NULL},
    {"scale_twice", "main", "", SMALL, NULL},
    {"xscale_divided", "main", "", SMALL, NULL},
    {"xscale_by_column", "main", "", SMALL, NULL},
    {"drop_last_kblock", "main", "", SMALL, NULL},
    {"drop_last_kblock", "large", "", SMALL, NULL},
    {"first_kblock_twice", "main", "", SMALL, NULL},
    {"bf16_truncate", "main", "", 16, 256, 64,
     "the rounding-bias test needs a material share of differing outputs"},
    {"acc_bf16", "main", "", SMALL, NULL},
    {"acc_fp16", "main", "", SMALL, NULL},
    {"splitk_bf16", "main", "", 16, 64, 128,
     "4 K-blocks: split in two of one block each, it is the running sum rounded every block"},
    {"negate_odd_rows", "main", "", SMALL, NULL},
    {"m_tail_unwritten", "main", "", 17, 64, 64, "a full 16-row tile and a partial one"},
    {"n_tail_zero", "n48", "", SMALL, NULL},
    {"tile_transposed", "main", "", SMALL, NULL},
    {"col_stride_unwritten", "main", "", SMALL, NULL},
    {"tile_edge_row_copy", "main", "", SMALL, NULL},
    {"nan_masked_zero", "nan", "--fp8-quant traced --act-source quantize", SMALL, NULL},
    {"race_lost_update", "main", "--reruns 3", SMALL, NULL},
    {"crash_n_tail", "n48", "", SMALL, NULL},
    {"oob_m_tail", "main", "", SMALL, NULL},
};

static char g_dir[512];

static void plugin(const char *bug, char *buf, size_t cap)
{
    const char *bin = KREPLAY_BINARY, *slash = strrchr(bin, '/');
    snprintf(buf, cap, "%.*s/plugins/libkr_bug_%s.so", (int)(slash - bin), bin, bug);
}

static int setup(void **state)
{
    (void)state;
    if (test_tmp_dir(g_dir, sizeof g_dir, "reduce_corpus") != 0)
        return -1;
    static const char *const synth[][2] = {
        {"main", "--shape 256x1024 --m 37 --zero-rows 3 --seed 3"},
        {"n48", "--shape 48x5120 --m 5 --seed 4"},
        {"nan", "--shape 512x1024 --m 24 --nan-block 17x128@128 --seed 5"},
        {"large", "--shape mlp_gate_up --m 4 --seed 6"},
    };
    for (size_t i = 0; i < sizeof synth / sizeof synth[0]; i++) {
        char args[1024], *out = NULL;
        snprintf(args, sizeof args, "synth %s --out '%s' --name %s", synth[i][1], g_dir, synth[i][0]);
        if (test_run_kreplay(args, &out) != 0)
            fail_msg("kreplay %s failed:\n%s", args, out ? out : "");
        free(out);
    }
    return 0;
}

typedef struct {
    char verdict[32], family[32], diagnosis[400];
    int64_t m, n, k;
} row_t;

/* `kreplay replay --json` of the bug's kernel on PATH: its one row. */
static void replay_row(const entry_t *e, const char *lib, const char *path, row_t *r)
{
    char cmd[4096];
    /* reduce launches a kernel once unless told otherwise; so does this replay. */
    snprintf(cmd, sizeof cmd,
             "'%s' replay --json --plugin '%s' --kernels bug.%s --refs exact --no-recorded %s %s '%s' 2>/dev/null",
             KREPLAY_BINARY, lib, e->bug, strstr(e->args, "--reruns") ? "" : "--reruns 1", e->args, path);
    json_t *root = test_command_json(cmd);
    json_t *rows = json_object_get(root, "results");
    assert_int_equal(json_array_size(rows), 1);
    json_t *row = json_array_get(rows, 0);
    snprintf(r->verdict, sizeof r->verdict, "%s", test_json_str(row, "verdict"));
    const char *family = test_json_str(row, "diagnosis_family");
    snprintf(r->family, sizeof r->family, "%s", family[0] ? family : "none");
    const char *d = test_json_str(row, "diagnosis");
    snprintf(r->diagnosis, sizeof r->diagnosis, "%s", d[0] ? d : test_json_str(row, "note"));
    r->m = json_integer_value(json_object_get(row, "M"));
    r->n = json_integer_value(json_object_get(row, "N"));
    r->k = json_integer_value(json_object_get(row, "K"));
    json_decref(root);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One entry: reduce, then judge the result by replay alone.  Returns 1 when it scored. */
static int reduce_entry(const entry_t *e)
{
    char lib[600], cas[700], small[700], cmd[4096], *out = NULL;
    plugin(e->bug, lib, sizeof lib);
    snprintf(cas, sizeof cas, "%s/%s.h5", g_dir, e->cas);
    snprintf(small, sizeof small, "%s/%s-%s.h5", g_dir, e->bug, e->cas);
    snprintf(cmd, sizeof cmd, "'%s' reduce '%s' --plugin '%s' --kernels bug.%s %s -o '%s' 2>&1", KREPLAY_BINARY,
             cas, lib, e->bug, e->args, small);
    const double t0 = now_s();
    const int rc = test_sh(cmd, &out);
    const double seconds = now_s() - t0;
    const char *runs = out ? strstr(out, " kernel runs") : NULL;
    long n_runs = -1;
    while (runs && runs > out && runs[-1] >= '0' && runs[-1] <= '9')
        runs--;
    if (runs)
        n_runs = strtol(runs, NULL, 10);
    row_t before, after;
    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after);
    replay_row(e, lib, cas, &before);
    /* A race shows in some replays only: the reduced case must show it in
     * one of five (reduce kept only candidates that showed it five times
     * in a row). */
    const int nondet = strcmp(before.verdict, "NONDETERMINISTIC") == 0;
    for (int tries = 0; rc == 0 && tries < (nondet ? 5 : 1) && strcmp(after.verdict, before.verdict); tries++)
        replay_row(e, lib, small, &after);
    const int same = rc == 0 && strcmp(before.verdict, after.verdict) == 0 &&
                     (nondet || strcmp(before.family, after.family) == 0);
    const int small_enough = after.m <= e->max_m && after.n <= e->max_n && after.k <= e->max_k;
    printf("| %s | %s | %lld x %lld x %lld | %lld x %lld x %lld | %ld | %.1f | %s [%s] %.60s | %s [%s] %.60s |%s%s\n",
           e->bug, e->cas, (long long)before.m, (long long)before.n, (long long)before.k, (long long)after.m,
           (long long)after.n, (long long)after.k, n_runs, seconds, before.verdict, before.family,
           before.diagnosis, after.verdict, after.family, after.diagnosis, e->why ? " keeps more: " : "",
           e->why ? e->why : "");
    if (!same || !small_enough)
        print_error("%s on %s: exit %d, %s [%s] -> %s [%s], %lld x %lld x %lld (at most %lld x %lld x %lld)\n%s\n",
                    e->bug, e->cas, rc, before.verdict, before.family, after.verdict, after.family,
                    (long long)after.m, (long long)after.n, (long long)after.k, (long long)e->max_m,
                    (long long)e->max_n, (long long)e->max_k, out ? out : "");
    free(out);
    return same && small_enough;
}

static void test_corpus_reduces(void **state)
{
    (void)state;
    printf("\n| bug | case | original | reduced | kernel runs | seconds | before | after |\n"
           "|---|---|---|---|---|---|---|---|\n");
    int failures = 0;
    for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++)
        failures += !reduce_entry(&corpus[i]);
    fflush(stdout);
    assert_int_equal(failures, 0);
}

static void test_correct_is_refused(void **state)
{
    (void)state;
    static const char *const cases[] = {"main", "n48", "nan", "large"};
    char lib[600];
    plugin("correct", lib, sizeof lib);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[2048], *out;
        snprintf(cmd, sizeof cmd, "'%s' reduce '%s/%s.h5' --plugin '%s' --kernels bug.correct -o '%s/c.h5' 2>&1",
                 KREPLAY_BINARY, g_dir, cases[i], lib, g_dir);
        assert_int_equal(test_sh(cmd, &out), 2);
        assert_non_null(strstr(out, "nothing fails"));
        free(out);
    }
}

KR_TEST_MAIN_SETUP(setup, NULL, test_corpus_reduces, test_correct_is_refused);
