/* The kreplay command line as users script against it: exit codes, error
 * lines that name the file, the report directory, filters, and the samples'
 * reproducibility. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "case_io.h"
#include "kreplay_checks.h"
#include "test_main.h"
#include "test_support.h"

#define SAMPLES KREPLAY_SOURCE_DIR "/cases/samples"

static int run(const char *args, char **out)
{
    return test_run_kreplay(args, out);
}

static void test_usage_errors(void **state)
{
    (void)state;
    test_kreplay_expect("", 2, "usage");
    test_kreplay_expect("frobnicate", 2, "unknown command 'frobnicate'");
    test_kreplay_expect("replay", 2, "no case given");
    test_kreplay_expect("replay --kernels 'nosuch.*' " SAMPLES, 2, "matches no kernel");
    test_kreplay_expect("replay --fp8-quant sloppy " SAMPLES, 2, "unknown variant 'sloppy'");
}

static void test_bad_case_files(void **state)
{
    (void)state;
    char path[1024], args[2048], *out;
    test_tmp_path(path, sizeof path, "not-hdf5.h5");
    FILE *fp = fopen(path, "w");
    fputs("this is a text file, not a case\n", fp);
    fclose(fp);
    snprintf(args, sizeof args, "replay '%s'", path);
    assert_int_equal(run(args, &out), 2);
    assert_non_null(strstr(out, path));
    assert_non_null(strstr(out, "kreplay: error:"));
    free(out);
    unlink(path);

    test_kreplay_expect("replay /nonexistent/case.h5", 2, "/nonexistent/case.h5");

    /* A bad case among good ones: the good ones are still replayed and
     * reported, the exit code still says an input was bad. */
    test_tmp_path(path, sizeof path, "truncated.h5");
    snprintf(args, sizeof args, "head -c 5000 '%s/moe_gate_N256_K2048_M8.h5' > '%s'", SAMPLES, path);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof args, "replay --json '%s' '%s/moe_gate_N256_K2048_M8.h5'", path, SAMPLES);
    assert_int_equal(run(args, &out), 2);
    assert_non_null(strstr(out, path));
    assert_non_null(strstr(out, "\"moe_gate_N256_K2048_M8\""));
    free(out);
    unlink(path);
}

static int count_lines(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    int n = 0, ch;
    while ((ch = fgetc(fp)) != EOF)
        n += ch == '\n';
    fclose(fp);
    return n;
}

static void test_report_directory(void **state)
{
    (void)state;
    char dir[1024], args[2048], path[1200], *out;
    test_tmp_path(dir, sizeof dir, "report-dir");
    snprintf(args, sizeof args, "replay -o '%s/nested/run' " SAMPLES, dir);
    int rc = run(args, &out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "POISONED_INPUT"));  /* the NaN-head sample */
    assert_non_null(strstr(out, "PASS"));
    free(out);

    snprintf(path, sizeof path, "%s/nested/run/results.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    assert_non_null(root);
    json_t *results = json_object_get(root, "results");
    size_t rows = json_array_size(results);
    assert_true(rows >= 20);  /* 5 samples x 2 kernels x 2 references */
    assert_non_null(json_object_get(json_object_get(root, "kreplay"), "git_commit"));
    json_decref(root);

    snprintf(path, sizeof path, "%s/nested/run/results.csv", dir);
    assert_int_equal(count_lines(path), (int)rows + 1);
    snprintf(path, sizeof path, "%s/nested/run/report.md", dir);
    assert_true(count_lines(path) > (int)rows);

    /* Nothing half-written is left behind. */
    snprintf(path, sizeof path, "%s/nested/run", dir);
    DIR *d = opendir(path);
    struct dirent *e;
    while ((e = readdir(d)))
        assert_null(strstr(e->d_name, ".tmp."));
    closedir(d);
}

static void test_unwritable_report_directory(void **state)
{
    (void)state;
    char dir[1024], args[2048], *out;
    test_tmp_path(dir, sizeof dir, "readonly");
    assert_int_equal(mkdir(dir, 0555), 0);
    if (access(dir, W_OK) == 0) {  /* root ignores permissions: use a file in the way instead */
        rmdir(dir);
        FILE *fp = fopen(dir, "w");
        fclose(fp);
    }
    snprintf(args, sizeof args, "replay -o '%s/run' " SAMPLES "/moe_gate_N256_K2048_M8.h5", dir);
    assert_int_equal(run(args, &out), 2);
    assert_non_null(strstr(out, dir));
    free(out);
}

static void test_kernel_filter(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run("replay --json --kernels 'w4a8.per*' " SAMPLES "/moe_gate_N256_K2048_M8.h5", &out), 0);
    json_t *root = json_loads(out, 0, NULL);
    assert_non_null(root);
    json_t *results = json_object_get(root, "results");
    assert_int_equal(json_array_size(results), 2);
    for (size_t i = 0; i < json_array_size(results); i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(results, i), "kernel")),
                            "w4a8.perblock");
    json_decref(root);
    free(out);

    /* A family glob selects the whole family and nothing else. */
    assert_int_equal(run("replay --json --kernels 'w4a8.*' --refs exact " SAMPLES "/moe_gate_N256_K2048_M8.h5", &out), 0);
    root = json_loads(out, 0, NULL);
    results = json_object_get(root, "results");
    assert_true(json_array_size(results) >= 4);
    for (size_t i = 0; i < json_array_size(results); i++)
        assert_memory_equal(json_string_value(json_object_get(json_array_get(results, i), "kernel")),
                            "w4a8.", 5);
    json_decref(root);
    free(out);

    assert_int_equal(run("list kernels --verbose", &out), 0);
    assert_non_null(strstr(out, "w4a8.perblock"));
    assert_non_null(strstr(out, "w4a4.aiter"));
    assert_non_null(strstr(out, "accumulation:"));
    free(out);
}

static void test_poisoned_input_is_named(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run("inspect " SAMPLES "/gdn_out_proj_slice_N512_K3072_M17_nanhead.h5", &out), 0);
    /* 17 rows x 128 columns of NaN: one GDN head. */
    assert_non_null(strstr(out, "2176 non-finite (2176 NaN, 0 +Inf, 0 -Inf) in 17 rows x 128 columns"));
    free(out);
}

static void compare_cases(const char *a, const char *b, int expect_equal)
{
    case_t ca, cb;
    kr_error_t err;
    assert_int_equal(case_read(a, &ca, &err), 0);
    assert_int_equal(case_read(b, &cb, &err), 0);
    assert_int_equal(ca.M, cb.M);
    int equal = memcmp(ca.x, cb.x, (size_t)(ca.M * ca.K) * sizeof(float)) == 0 &&
                memcmp(ca.weight, cb.weight, (size_t)(ca.N * ca.K / 2)) == 0 &&
                memcmp(ca.weight_scale, cb.weight_scale, (size_t)(ca.N * ca.K / 32)) == 0 &&
                memcmp(ca.x_fp8, cb.x_fp8, (size_t)(ca.M * ca.K)) == 0;
    assert_int_equal(equal, expect_equal);
    case_free(&ca);
    case_free(&cb);
}

static void test_samples_regenerate(void **state)
{
    (void)state;
    char dir[1024], cmd[4096];
    test_tmp_path(dir, sizeof dir, "samples");
    snprintf(cmd, sizeof cmd, "'%s/scripts/make_samples.sh' '%s' '%s'", KREPLAY_SOURCE_DIR,
             KREPLAY_BINARY, dir);
    assert_int_equal(system(cmd), 0);
    DIR *d = opendir(SAMPLES);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".h5"))
            continue;
        char a[2048], b[2048];
        snprintf(a, sizeof a, "%s/%s", SAMPLES, e->d_name);
        snprintf(b, sizeof b, "%s/%s", dir, e->d_name);
        compare_cases(a, b, 1);
        n++;
    }
    closedir(d);
    assert_int_equal(n, 5);
}

static void test_synth_seeds(void **state)
{
    (void)state;
    char dir[1024], args[2048], a[1200], b[1200], c[1200];
    test_tmp_path(dir, sizeof dir, "synth");
    snprintf(args, sizeof args, "synth --shape 64x256 --m 3 --seed 7 --out '%s/a'", dir);
    assert_int_equal(run(args, NULL), 0);
    snprintf(args, sizeof args, "synth --shape 64x256 --m 3 --seed 7 --out '%s/b'", dir);
    assert_int_equal(run(args, NULL), 0);
    snprintf(args, sizeof args, "synth --shape 64x256 --m 3 --seed 8 --out '%s/b'", dir);
    assert_int_equal(run(args, NULL), 0);
    snprintf(a, sizeof a, "%s/a/synth_N64_K256_M3_s7.h5", dir);
    snprintf(b, sizeof b, "%s/b/synth_N64_K256_M3_s7.h5", dir);
    snprintf(c, sizeof c, "%s/b/synth_N64_K256_M3_s8.h5", dir);
    compare_cases(a, b, 1);
    compare_cases(a, c, 0);
    assert_int_equal(run("synth --shape 64x100 --m 3 --out /tmp", NULL), 2);  /* K % 64 */
}

/* Every subcommand answers `help CMD` and `CMD --help` with exit 0 and its
 * own usage, built from the same option rows as its parser. */
static void test_help_for_every_command(void **state)
{
    (void)state;
    const char *cmds[] = {"replay", "list", "synth", "inspect", "compare", "gate", "merge", "baseline",
                          "calibrate", "import", "report", "completion", "man", "help", "version"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[128], want[64];
        snprintf(want, sizeof want, "usage: kreplay %s", cmds[i]);
        snprintf(args, sizeof args, "help %s", cmds[i]);
        test_kreplay_expect(args, 0, want);
        if (!strcmp(cmds[i], "help") || !strcmp(cmds[i], "version"))
            continue;
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        test_kreplay_expect(args, 0, want);
    }
    test_kreplay_expect("replay --inject help", 0, "ulp-nudge");
}

/* The option contracts: typos answered with the nearest name, each kernel
 * pattern checked, options never taken as file names, --decode-splits. */
static void test_option_contracts(void **state)
{
    (void)state;
    char *out;
    test_kreplay_expect("replay --kernels 'w4a8.folded,w4a8.foldd' " SAMPLES, 2,
                        "'w4a8.foldd' matches no kernel (did you mean w4a8.folded?)");
    test_kreplay_expect("replay --jsno " SAMPLES, 2,
                        "unknown option '--jsno' (did you mean --json?)");
    test_kreplay_expect("replay --threads zero " SAMPLES, 2,
                        "--threads: 'zero' is not a positive integer");
    assert_int_equal(run("inspect --json " SAMPLES "/moe_gate_N256_K2048_M8.h5", &out), 2);
    assert_non_null(strstr(out, "unknown option '--json'"));
    assert_null(strstr(out, "--json: "));   /* not opened as a file */
    free(out);
    test_kreplay_expect("gate --inject nosuchfault x.yaml -o /nonexistent/run", 2, "--inject");

    /* --decode-splits sets w4a8.decode's split-K: K = 2048 in 2 splits of
     * 1024 instead of the default 4 of 512. */
    char *a, *b;
    assert_int_equal(run("replay --json --no-recorded --kernels w4a8.decode --refs exact " SAMPLES
                         "/moe_gate_N256_K2048_M8.h5", &a), 0);
    assert_int_equal(run("replay --json --no-recorded --decode-splits 2 --kernels w4a8.decode --refs exact " SAMPLES
                         "/moe_gate_N256_K2048_M8.h5", &b), 0);
    assert_non_null(strstr(a, "decode SK=4 (4 x 512 k)"));
    assert_non_null(strstr(b, "decode SK=2 (2 x 1024 k)"));
    free(a);
    free(b);
    test_kreplay_expect("replay --decode-splits 0 " SAMPLES, 2,
                        "--decode-splits: '0' is not a positive integer");
}

/* The completion script and the man page come from the option rows: the
 * script is valid bash naming every replay option, the page is valid roff. */
static void test_completion_and_man(void **state)
{
    (void)state;
    char path[1024], cmd[4096], *out;
    test_tmp_path(path, sizeof path, "completion.bash");
    snprintf(cmd, sizeof cmd, "completion bash > '%s'", path);
    assert_int_equal(run(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "bash -n '%s' && grep -q -- '--decode-splits' '%s' && grep -q 'vllm traced pure reciprocal' '%s'",
             path, path, path);
    assert_int_equal(system(cmd), 0);
    /* Sourced in a shell, it completes an option prefix. */
    snprintf(cmd, sizeof cmd,
             "bash -c 'source \"%s\"; COMP_WORDS=(kreplay replay --decode); COMP_CWORD=2; _kreplay; "
             "[ \"${COMPREPLY[*]}\" = --decode-splits ]'", path);
    assert_int_equal(system(cmd), 0);
    unlink(path);
    test_tmp_path(path, sizeof path, "kreplay.1");
    snprintf(cmd, sizeof cmd, "man > '%s'", path);
    assert_int_equal(run(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "grep -q '^.TH KREPLAY 1' '%s' && grep -q 'decode\\\\-splits' '%s'", path, path);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "command -v groff >/dev/null || exit 0; groff -man -Tutf8 -ww -z '%s' 2>&1 | grep . && exit 1; exit 0", path);
    assert_int_equal(system(cmd), 0);
    unlink(path);
}

KR_TEST_MAIN(
    test_usage_errors, test_bad_case_files, test_report_directory,
    test_unwritable_report_directory, test_kernel_filter, test_poisoned_input_is_named,
    test_samples_regenerate, test_synth_seeds, test_help_for_every_command, test_option_contracts,
    test_completion_and_man);
