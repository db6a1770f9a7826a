/* kreplay reduce (harness/reduce/): the two searches against hand-made
 * predicates; a case cut by rows, columns and K-blocks against an
 * independent reading of the original (fragment-order weight, [K/32, N]
 * scales); and the command on a few bugs of the corpus: every accepted
 * candidate (--steps) replayed on its own fails the same way, the result
 * is small, the same case and seed give the same bytes, M bands and K
 * multiples hold, a correct kernel is refused, --max-runs cuts the search
 * short and still writes a failing case, a results row and a recorded
 * output's row reduce, and a gate's failing row prints a reduce command
 * that works. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_io.h"
#include "kreplay_checks.h"
#include "reduce_search.h"
#include "reduce_slice.h"
#include "suite_file.h"
#include "synth.h"
#include "test_main.h"
#include "test_support.h"

/* ---- the searches ---- */

typedef struct {
    int64_t needed[4];
    int n_needed;
    int64_t calls;
    int64_t last[128];          /* the last set that held */
    int64_t n_last;
} predicate_t;

/* Holds when the set contains every needed item. */
static int contains_needed(void *ctx, const int64_t *set, int64_t n)
{
    predicate_t *p = ctx;
    p->calls++;
    for (int i = 0; i < p->n_needed; i++) {
        int found = 0;
        for (int64_t j = 0; j < n && !found; j++)
            found = set[j] == p->needed[i];
        if (!found)
            return 0;
    }
    memcpy(p->last, set, (size_t)n * sizeof *set);
    p->n_last = n;
    return 1;
}

/* Holds when the set avoids every needed item (what cannot be simplified). */
static int avoids_needed(void *ctx, const int64_t *set, int64_t n)
{
    predicate_t *p = ctx;
    p->calls++;
    for (int64_t j = 0; j < n; j++)
        for (int i = 0; i < p->n_needed; i++)
            if (set[j] == p->needed[i])
                return 0;
    memcpy(p->last, set, (size_t)n * sizeof *set);
    p->n_last = n;
    return 1;
}

static void test_ddmin_finds_the_needed_items(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 4; seed++) {
        int64_t items[100], n = 100;
        for (int i = 0; i < 100; i++)
            items[i] = i;
        predicate_t p = {.needed = {3, 71}, .n_needed = 2};
        assert_int_equal(search_ddmin(items, &n, 1, seed, contains_needed, &p), 0);
        assert_int_equal(n, 2);
        assert_int_equal(items[0], 3);
        assert_int_equal(items[1], 71);
        assert_true(p.calls < 100);     /* far fewer than one test per subset */
    }
    /* Never below min_keep: five items, the two needed among them, in order. */
    int64_t items[100], n = 100;
    for (int i = 0; i < 100; i++)
        items[i] = i;
    predicate_t p = {.needed = {3, 71}, .n_needed = 2};
    assert_int_equal(search_ddmin(items, &n, 5, 0, contains_needed, &p), 0);
    assert_int_equal(n, 5);
    int has3 = 0, has71 = 0;
    for (int64_t i = 0; i < n; i++) {
        has3 |= items[i] == 3;
        has71 |= items[i] == 71;
        if (i > 0)
            assert_true(items[i] > items[i - 1]);
    }
    assert_true(has3 && has71);
}

static void test_ddmin_seed_is_deterministic(void **state)
{
    (void)state;
    int64_t calls[2];
    for (int run = 0; run < 2; run++) {
        int64_t items[64], n = 64;
        for (int i = 0; i < 64; i++)
            items[i] = i;
        predicate_t p = {.needed = {10, 20, 40}, .n_needed = 3};
        assert_int_equal(search_ddmin(items, &n, 1, 12345, contains_needed, &p), 0);
        assert_int_equal(n, 3);
        calls[run] = p.calls;
    }
    assert_int_equal(calls[0], calls[1]);
}

static void test_simplify_takes_all_but_the_needed(void **state)
{
    (void)state;
    int64_t items[40];
    for (int i = 0; i < 40; i++)
        items[i] = 100 + i;
    predicate_t p = {.needed = {105, 133}, .n_needed = 2};
    int64_t taken = 0;
    assert_int_equal(search_simplify(items, 40, 0, avoids_needed, &p, &taken), 0);
    assert_int_equal(taken, 38);
    assert_int_equal(p.n_last, 38);
    for (int64_t i = 0; i < p.n_last; i++)
        assert_true(p.last[i] != 105 && p.last[i] != 133);
}

/* ---- cutting a case ---- */

/* The e2m1 code of element (n, k) of a fragment-order packed weight, read
 * from the WPERM definition: checkpoint bytes viewed (N/16, 16, K/16, 2, 4)
 * and permuted (0, 2, 3, 1, 4). */
static uint8_t fragment_code(const uint8_t *w, int64_t K, int64_t n, int64_t k)
{
    const int64_t byte = k / 2, a = n / 16, r = n % 16, b = byte / 8, h = (byte % 8) / 4, c = byte % 4;
    const int64_t flat = (((a * (K / 16) + b) * 2 + h) * 16 + r) * 4 + c;
    return (k & 1) ? (uint8_t)(w[flat] >> 4) : (uint8_t)(w[flat] & 15);
}

static void test_slice_cuts_every_operand_consistently(void **state)
{
    (void)state;
    synth_params_t sp;
    synth_params_default(&sp);
    /* WPERM order and [K/32, N] scales: the layouts a cut must keep valid. */
    sp.M = 7;
    sp.weight_order = WEIGHT_ORDER_FRAGMENT;
    sp.N = 64;
    sp.scale_layout = SCALE_LAYOUT_KN;
    sp.K = 256;
    sp.seed = 21;
    case_t c;
    kr_error_t err = {{0}};
    assert_int_equal(synth_case(&sp, &c, &err), 0);
    const int64_t rows[] = {1, 4, 6}, cols[] = {16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
                                                 30, 31, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
                                                 60, 61, 62, 63};
    const int64_t kb[] = {0, 3, 7};
    const reduce_keep_t keep = {rows, 3, cols, 32, kb, 3};
    case_t s;
    assert_int_equal(reduce_slice(&c, &keep, 0, &s, &err), 0);
    assert_int_equal(s.M, 3);
    assert_int_equal(s.N, 32);
    assert_int_equal(s.K, 96);
    assert_int_equal(s.weight_order, WEIGHT_ORDER_FRAGMENT);
    assert_int_equal(s.scale_layout, SCALE_LAYOUT_KN);
    assert_string_equal(s.layer ? s.layer : "", c.layer ? c.layer : "");
    assert_int_equal(case_validate(&s, "slice", &err), 0);
    for (int64_t i = 0; i < 3; i++) {
        assert_true(s.x_scale[i] == c.x_scale[rows[i]]);
        for (int64_t k = 0; k < s.K; k++) {
            const int64_t ok = kb[k / 32] * 32 + k % 32;
            assert_int_equal(s.x_fp8[i * s.K + k], c.x_fp8[rows[i] * c.K + ok]);
            assert_true(s.x[i * s.K + k] == c.x[rows[i] * c.K + ok]);
        }
    }
    for (int64_t j = 0; j < 32; j++) {
        assert_int_equal(s.weight_ref[j], c.weight_ref[cols[j]]);
        for (int64_t k = 0; k < s.K; k++)
            assert_int_equal(fragment_code(s.weight, s.K, j, k),
                             fragment_code(c.weight, c.K, cols[j], kb[k / 32] * 32 + k % 32));
        for (int64_t b = 0; b < 3; b++)     /* [K/32, N] */
            assert_int_equal(s.weight_scale[b * s.N + j], c.weight_scale[kb[b] * c.N + cols[j]]);
    }
    case_free(&s);
    /* A fragment-order weight cut to a column count that is not a multiple of 16 is refused. */
    const reduce_keep_t odd = {NULL, 0, cols, 8, NULL, 0};
    assert_int_equal(reduce_slice(&c, &odd, 0, &s, &err), -1);
    assert_non_null(strstr(err.msg, "16"));
    case_free(&c);
}

/* ---- the command ---- */

static char g_dir[512];

static void plugin(const char *bug, char *buf, size_t cap)
{
    const char *bin = KREPLAY_BINARY, *slash = strrchr(bin, '/');
    snprintf(buf, cap, "%.*s/plugins/libkr_bug_%s.so", (int)(slash - bin), bin, bug);
}

static void make_case(const char *name, const char *args)
{
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "synth %s --out '%s' --name %s", args, g_dir, name);
    if (test_run_kreplay(cmd, &out) != 0)
        fail_msg("kreplay %s failed:\n%s", cmd, out ? out : "");
    free(out);
}

static int setup(void **state)
{
    (void)state;
    if (test_tmp_dir(g_dir, sizeof g_dir, "reduce") != 0)
        return -1;
    make_case("main", "--shape 256x1024 --m 37 --zero-rows 3 --seed 3");
    make_case("skinny", "--shape 64x1024 --m 20 --weight-format both --seed 9");
    return 0;
}

/* `kreplay reduce ARGS`: exit code, output in *out. */
static int reduce(const char *args, char **out)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "reduce %s 2>&1", args);
    return test_run_kreplay(cmd, out);
}

/* The row of `kreplay replay --json ARGS PATH` (exactly one row). */
static void replay_row(const char *args, const char *path, char *verdict, char *family, int64_t dims[3])
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' replay --json --no-recorded %s '%s' 2>/dev/null", KREPLAY_BINARY, args,
             path);
    json_t *root = test_command_json(cmd);
    json_t *rows = json_object_get(root, "results");
    assert_int_equal(json_array_size(rows), 1);
    json_t *row = json_array_get(rows, 0);
    snprintf(verdict, 32, "%s", test_json_str(row, "verdict"));
    snprintf(family, 32, "%s", test_json_str(row, "diagnosis_family"));
    dims[0] = json_integer_value(json_object_get(row, "M"));
    dims[1] = json_integer_value(json_object_get(row, "N"));
    dims[2] = json_integer_value(json_object_get(row, "K"));
    json_decref(root);
}

/* Every step file DIR/step-NNN.h5 replayed on its own: the same verdict and
 * family, and each no larger than the one before.  Returns the count. */
static int check_steps(const char *dir, const char *args, const char *verdict, const char *family,
                       int64_t min_m, int64_t k_multiple)
{
    int64_t prev = INT64_MAX;
    int n = 0;
    for (;; n++) {
        char path[800];
        snprintf(path, sizeof path, "%s/step-%03d.h5", dir, n + 1);
        FILE *f = fopen(path, "rb");
        if (!f)
            break;
        fclose(f);
        char v[32], fam[32];
        int64_t d[3];
        replay_row(args, path, v, fam, d);
        if (strcmp(v, verdict) != 0 || strcmp(fam, family) != 0)
            fail_msg("%s: %s [%s], the original %s [%s]", path, v, fam, verdict, family);
        assert_true(d[0] >= min_m);
        assert_int_equal(d[2] % k_multiple, 0);
        assert_true(d[0] * d[1] * d[2] <= prev);
        prev = d[0] * d[1] * d[2];
    }
    return n;
}

static void test_reduce_keeps_the_failure_at_every_step(void **state)
{
    (void)state;
    char lib[600], args[1200], steps[700], small[700], cmd[4096], *out;
    plugin("nibble_swap", lib, sizeof lib);
    snprintf(args, sizeof args, "--plugin '%s' --kernels bug.nibble_swap --refs exact --reruns 1", lib);
    snprintf(steps, sizeof steps, "%s/steps", g_dir);
    snprintf(small, sizeof small, "%s/ns.h5", g_dir);
    snprintf(cmd, sizeof cmd, "'%s/main.h5' --plugin '%s' --kernels bug.nibble_swap --steps '%s' -o '%s'", g_dir,
             lib, steps, small);
    assert_int_equal(reduce(cmd, &out), 0);
    /* the nibble swap is a composition of the hypothesis grammar (diag_family.h) */
    assert_non_null(strstr(out, "original: 37 x 256 x 1024: WRONG [grammar]"));
    /* The log's last line is the command that replays the reduced case. */
    const char *last = strstr(out, "replay the reduced case:\n");
    assert_non_null(last);
    char replay_cmd[4096];
    snprintf(replay_cmd, sizeof replay_cmd, "%s", last + strlen("replay the reduced case:\n"));
    *strchr(replay_cmd, '\n') = '\0';
    free(out);
    assert_true(check_steps(steps, args, "WRONG", "grammar", 1, 32) >= 3);
    char v[32], fam[32];
    int64_t d[3];
    replay_row(args, small, v, fam, d);
    assert_string_equal(v, "WRONG");
    assert_string_equal(fam, "grammar");
    assert_true(d[0] <= 16 && d[1] <= 64 && d[2] <= 64);
    /* The printed command shows it: exit 1, the misread named. */
    assert_int_equal(test_sh(replay_cmd, &out), 1);
    assert_non_null(strstr(out, "misread 'nibble-order'"));
    free(out);
}

static void test_reduce_is_deterministic(void **state)
{
    (void)state;
    char lib[600];
    plugin("first_kblock_twice", lib, sizeof lib);
    for (int seed = 0; seed < 8; seed += 7) {
        char *files[2];
        size_t lens[2];
        for (int run = 0; run < 2; run++) {
            char path[700], cmd[2048], *out;
            snprintf(path, sizeof path, "%s/det-%d-%d.h5", g_dir, seed, run);
            snprintf(cmd, sizeof cmd, "'%s/main.h5' --plugin '%s' --kernels bug.first_kblock_twice --seed %d -o '%s'",
                     g_dir, lib, seed, path);
            assert_int_equal(reduce(cmd, &out), 0);
            free(out);
            files[run] = test_read_file(path, &lens[run]);
            assert_non_null(files[run]);
        }
        assert_int_equal(lens[0], lens[1]);
        assert_memory_equal(files[0], files[1], lens[0]);
        free(files[0]);
        free(files[1]);
    }
}

static void test_reduce_refuses_a_correct_kernel(void **state)
{
    (void)state;
    char lib[600], cmd[2048], *out;
    plugin("correct", lib, sizeof lib);
    snprintf(cmd, sizeof cmd, "'%s/main.h5' --plugin '%s' --kernels bug.correct -o '%s/c.h5'", g_dir, lib, g_dir);
    assert_int_equal(reduce(cmd, &out), 2);
    assert_non_null(strstr(out, "nothing fails: bug.correct / R_exact"));
    free(out);
    char path[700];
    snprintf(path, sizeof path, "%s/c.h5", g_dir);
    assert_null(fopen(path, "rb"));
}

/* bf16.skinny serves M in [6, 64] and needs K % 256: no candidate goes
 * below either, and the fault's family (a factor) is kept. */
static void test_reduce_respects_band_and_multiples(void **state)
{
    (void)state;
    char steps[700], cmd[2048], *out;
    const char *opts = "--kernels bf16.skinny --decode-splits 2 --inject scale-const:0.5";
    snprintf(steps, sizeof steps, "%s/skinny-steps", g_dir);
    snprintf(cmd, sizeof cmd, "'%s/skinny.h5' %s --steps '%s' -o '%s/skinny-small.h5'", g_dir, opts, steps, g_dir);
    assert_int_equal(reduce(cmd, &out), 0);
    assert_non_null(strstr(out, "MAGNITUDE [magnitude]"));
    free(out);
    assert_true(check_steps(steps, opts, "MAGNITUDE", "magnitude", 6, 256) >= 2);
    char path[700], v[32], fam[32];
    int64_t d[3];
    snprintf(path, sizeof path, "%s/skinny-small.h5", g_dir);
    replay_row(opts, path, v, fam, d);
    assert_int_equal(d[0], 6);          /* the band's least M, not 1 */
    assert_int_equal(d[2], 256);        /* one K unit of the kernel */
    assert_int_equal(d[1] % 16, 0);     /* whole 16-column units */
}

static void test_reduce_cut_short_still_fails(void **state)
{
    (void)state;
    char lib[600], cmd[2048], *out;
    plugin("drop_last_kblock", lib, sizeof lib);
    snprintf(cmd, sizeof cmd, "'%s/main.h5' --plugin '%s' --kernels bug.drop_last_kblock --max-runs 3 -o '%s/cut.h5'",
             g_dir, lib, g_dir);
    /* Exit 0 only when the written case, read back, fails the same way. */
    assert_int_equal(reduce(cmd, &out), 0);
    assert_non_null(strstr(out, "in 3 kernel runs"));
    assert_non_null(strstr(out, "cut short by --max-runs 3"));
    free(out);
}

static void test_reduce_a_results_row(void **state)
{
    (void)state;
    char lib[600], cmd[4096], *out;
    plugin("crash_n_tail", lib, sizeof lib);
    make_case("n48", "--shape 48x5120 --m 5 --seed 4");
    snprintf(cmd, sizeof cmd, "'%s' replay --plugin '%s' --kernels bug.crash_n_tail --refs exact -o '%s/run' '%s/n48.h5'",
             KREPLAY_BINARY, lib, g_dir, g_dir);
    assert_int_equal(test_sh(cmd, &out), 1);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s/run/results.h5' --row 0 --plugin '%s' -o '%s/crash.h5'", g_dir, lib, g_dir);
    assert_int_equal(reduce(cmd, &out), 0);
    assert_non_null(strstr(out, "CRASHED [none]"));
    assert_non_null(strstr(out, "-> 1 x 16 x 32"));
    free(out);
    /* A row that is not there. */
    snprintf(cmd, sizeof cmd, "'%s/run/results.h5' --row 9 --plugin '%s'", g_dir, lib);
    assert_int_equal(reduce(cmd, &out), 2);
    assert_non_null(strstr(out, "no row 9"));
    free(out);
}

/* The dump's recorded output is 0.37 x its exact result: the recorded row
 * is reduced by rows and columns only, K kept. */
static void test_reduce_a_recorded_output(void **state)
{
    (void)state;
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "'%s/tests/fixtures/pt/diag/scale_const.pt' --kernels recorded.out -o '%s/rec.h5'",
             KREPLAY_SOURCE_DIR, g_dir);
    assert_int_equal(reduce(cmd, &out), 0);
    assert_non_null(strstr(out, "MAGNITUDE [magnitude]"));
    assert_non_null(strstr(out, "8 x 64 x 256 -> 1 x 16 x 256"));
    free(out);
}

/* A gate's failing row prints the command that reduces it, and that
 * command works. */
static void test_gate_prints_a_reduce_command(void **state)
{
    (void)state;
    char suite[700], cmd[4096], *out;
    snprintf(suite, sizeof suite, "%s/suite.yaml", g_dir);
    const test_suite_spec_t spec = {.name = "reduce", .files = "main.h5", .shapes = "64x256", .m = "3",
                                    .kernels = "\"w4a8.perblock\""};
    test_write_suite(suite, &spec);
    snprintf(cmd, sizeof cmd, "'%s' gate '%s' -o '%s/gate' --inject 'w4a8.perblock=scale-const:0.5' 2>&1",
             KREPLAY_BINARY, suite, g_dir);
    assert_int_equal(test_sh(cmd, &out), 1);
    char reduce_cmd[4096];
    test_console_command(out, "    reduce: ", reduce_cmd, sizeof reduce_cmd - 8);
    strcat(reduce_cmd, " 2>&1");
    free(out);
    assert_int_equal(test_sh(reduce_cmd, &out), 0);
    assert_non_null(strstr(out, "MAGNITUDE [magnitude]"));
    free(out);
}

KR_TEST_MAIN_FULL(NULL, setup, NULL, test_ddmin_finds_the_needed_items, test_ddmin_seed_is_deterministic,
                  test_simplify_takes_all_but_the_needed, test_slice_cuts_every_operand_consistently,
                  test_reduce_keeps_the_failure_at_every_step, test_reduce_is_deterministic,
                  test_reduce_refuses_a_correct_kernel, test_reduce_respects_band_and_multiples,
                  test_reduce_cut_short_still_fails, test_reduce_a_results_row, test_reduce_a_recorded_output,
                  test_gate_prints_a_reduce_command);
