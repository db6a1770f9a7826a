/* Plugins that misbehave the way real kernel libraries do, run through the
 * kreplay binary as a kernel author runs them (`kreplay replay --plugin`).
 * Each plugin is kernels/plugins/examples/misbehaving.c built for one
 * behaviour, or one of the crash / hang examples; every case is a synthetic
 * schema-v1 case written by `kreplay synth`.
 *
 *   --inject on a plugin: a segfault is a CRASHED row and a hang a TIMEOUT
 *     row (exit 1), not the end of kreplay (139) or a hang; the fault is
 *     still applied to a correct plugin (MAGNITUDE, scale x4, named).
 *   a plugin that prints during launch: `replay --json`'s stdout is valid
 *     JSON, the prints are on stderr.
 *   a constructor that segfaults or calls exit(0): exit 2 with an error
 *     naming the plugin file and how loading ended.
 *   a launch that forks a lingering helper: no helper is left once kreplay
 *     has exited.
 *   a kernel storing its last 64-row tile's padding rows in its last 64
 *     columns (M=54, N=2560: bytes +4992 .. +51199 past out, skipping the
 *     first 4992): OOB_WRITE with 1280 canary bytes and the offset +4992 /
 *     element [54, 2496], all worked out by hand from the plugin's loops.
 *   a correct kernel with a wrong M-tail path (16-row tiles), replayed (by
 *     replay_case, which can make row panels of one row) with a budget so
 *     small that the case goes in blocks of 54 + 10 rows: it passes, and
 *     its launch log shows only launches with M=64 (the case's), as many
 *     as the runs.
 *   split-K over 8 threads adding into one fp32 buffer without a lock:
 *     NONDETERMINISTIC with the count and positions of the differing
 *     elements, on every one of several replays; the same split-K with a
 *     buffer per split: PASS, never NONDETERMINISTIC. */
#define _DEFAULT_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "case_io.h"
#include "plugin_loader.h"
#include "replay.h"
#include "synth.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"


static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return calloc(1, 1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

typedef struct {
    int status;         /* exit status; 128 + signal when killed by one */
    char *out, *err;    /* stdout and stderr, apart */
    double seconds;
} run_t;

static void run_free(run_t *r)
{
    free(r->out);
    free(r->err);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* `env kreplay args` under `timeout 120` (a hang must not hang the test),
 * stdout and stderr captured apart. */
static run_t run_kreplay(const char *env, const char *args)
{
    char out_path[512], err_path[512], cmd[4096 + 2048];
    test_tmp_path(out_path, sizeof out_path, "stdout");
    test_tmp_path(err_path, sizeof err_path, "stderr");
    snprintf(cmd, sizeof cmd, "%s timeout -s KILL 120 '%s' %s >'%s' 2>'%s'", env ? env : "",
             KREPLAY_BINARY, args, out_path, err_path);
    run_t r = {0};
    const double t0 = now_seconds();
    const int st = system(cmd);
    r.seconds = now_seconds() - t0;
    assert_true(st != -1 && WIFEXITED(st));
    r.status = WEXITSTATUS(st);
    r.out = slurp(out_path);
    r.err = slurp(err_path);
    unlink(out_path);
    unlink(err_path);
    return r;
}

/* A synthetic case NxK with M rows: its path. */
static void make_case(char *path, size_t cap, const char *shape, int M, const char *name)
{
    char dir[512], args[1024];
    test_tmp_path(dir, sizeof dir, "cases");
    snprintf(args, sizeof args, "synth --shape %s --m %d --out '%s' --name %s", shape, M, dir, name);
    char *output = NULL;
    const int st = test_run_kreplay(args, &output);
    if (st != 0)
        fprintf(stderr, "%s\n", output);
    free(output);
    assert_int_equal(st, 0);
    const int n = snprintf(path, cap, "%s/%s.h5", dir, name);
    assert_true(n > 0 && (size_t)n < cap);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
}

/* The rows of a `replay --json` run (valid JSON, or the test fails). */
static json_t *json_rows(const run_t *r)
{
    json_error_t je;
    json_t *root = json_loads(r->out, 0, &je);
    if (!root)
        fprintf(stderr, "stdout is not JSON (%s at line %d): %.400s\n", je.text, je.line, r->out);
    assert_non_null(root);
    return root;
}

/* The rows of kernel in the JSON: count of rows with that verdict, and of all. */
static int count_rows(json_t *root, const char *kernel, const char *verdict, int *all,
                      const char **a_note)
{
    json_t *rows = json_object_get(root, "results");
    assert_true(json_is_array(rows));
    int n = 0, total = 0;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        if (strcmp(json_string_value(json_object_get(row, "kernel")), kernel) != 0)
            continue;
        total++;
        if (strcmp(json_string_value(json_object_get(row, "verdict")), verdict) == 0) {
            n++;
            if (a_note)
                *a_note = json_string_value(json_object_get(row, "note"));
        }
    }
    if (all)
        *all = total;
    return n;
}

/* `kreplay replay --plugin <plugin NAME> OPTS CASE_PATH` under ENV; the
 * plugin's path in lib[cap], for the messages that must name it. */
static run_t replay_with_plugin(const char *env, const char *name, const char *opts,
                                const char *case_path, char *lib, size_t cap)
{
    char args[4096];
    test_plugin_file(lib, cap, name);
    snprintf(args, sizeof args, "replay --plugin '%s' %s '%s'", lib, opts, case_path);
    return run_kreplay(env, args);
}

static void dump_on_failure(const run_t *r)
{
    fprintf(stderr, "exit %d\n--- stdout\n%.3000s\n--- stderr\n%.3000s\n", r->status, r->out, r->err);
}

/* Exit STATUS, and STREAM (r's stdout or stderr) holds A and, unless NULL, B. */
static void expect_exit_with(const run_t *r, int status, const char *stream, const char *a,
                             const char *b)
{
    if (r->status != status || !strstr(stream, a) || (b && !strstr(stream, b)))
        dump_on_failure(r);
    assert_int_equal(r->status, status);
    assert_non_null(strstr(stream, a));
    if (b)
        assert_non_null(strstr(stream, b));
}

/* A `replay --json` run with exit STATUS whose rows of KERNEL are ROWS in
 * number (ROWS < 0: at least one), every one of them VERDICT.  Returns the
 * JSON (for the caller to free) and in *note the note of such a row. */
static json_t *expect_rows_all(const run_t *r, const char *kernel, const char *verdict, int status,
                               int rows, const char **note)
{
    json_t *root = json_rows(r);
    int all = 0;
    const int n = count_rows(root, kernel, verdict, &all, note);
    const int rows_ok = rows < 0 ? all >= 1 : all == rows;
    if (r->status != status || !rows_ok || n != all)
        dump_on_failure(r);
    assert_int_equal(r->status, status);
    if (rows < 0)
        assert_true(all >= 1);
    else
        assert_int_equal(all, rows);
    assert_int_equal(n, all);
    return root;
}

/* What one `replay --json --plugin` run must give, as expect_rows_all has
 * it; the note of a row of the verdict holds every string of note_has. */
typedef struct {
    const char *plugin, *opts, *kernel, *verdict;
    int status, rows;
    const char *const *note_has;   /* NULL-terminated, or NULL */
} plugin_rows_t;

/* The run checked; its output in *keep when KEEP (the caller frees it). */
static void expect_plugin_rows(const char *case_path, const plugin_rows_t *want, run_t *keep)
{
    char lib[512];
    run_t r = replay_with_plugin(NULL, want->plugin, want->opts, case_path, lib, sizeof lib);
    const char *note = NULL;
    json_t *root = expect_rows_all(&r, want->kernel, want->verdict, want->status, want->rows, &note);
    for (const char *const *has = want->note_has; has && *has; has++)
        assert_non_null(strstr(note, *has));
    json_decref(root);
    if (keep)
        *keep = r;
    else
        run_free(&r);
}

/* ------------------------------------------------------------ 1: --inject */

static void test_inject_runs_plugins_isolated(void **state)
{
    (void)state;
    char c[512], lib[512];
    make_case(c, sizeof c, "256x256", 16, "inject");

    run_t r = replay_with_plugin(NULL, "crash", "--kernels testplugin.crash --inject scale-const:2",
                                 c, lib, sizeof lib);
    /* a failing verdict, not a dead kreplay (139) */
    expect_exit_with(&r, 1, r.out, "CRASHED", "SIGSEGV");
    run_free(&r);

    r = replay_with_plugin(NULL, "hang", "--kernels testplugin.hang --timeout 2 --inject scale-const:2",
                           c, lib, sizeof lib);
    expect_exit_with(&r, 1, r.out, "TIMEOUT", NULL);   /* not killed by the test's timeout (137) */
    assert_true(r.seconds < 60);
    run_free(&r);

    /* The fault still reaches a plugin that runs in the child. */
    static const char *const injected[] = {"injected fault", NULL};
    const plugin_rows_t magnitude = {
        "example_w4a8", "--json --refs exact --kernels example.w4a8_perblock --inject scale-const:4",
        "example.w4a8_perblock", "MAGNITUDE", 1, 1, injected};
    expect_plugin_rows(c, &magnitude, NULL);
}

/* ------------------------------------------------------------ 2: stdout */

static void test_plugin_prints_do_not_corrupt_json(void **state)
{
    (void)state;
    char c[512];
    make_case(c, sizeof c, "128x256", 8, "chatty");
    const plugin_rows_t pass = {"stdout", "--json --kernels misbehave.stdout", "misbehave.stdout",
                                "PASS", 0, -1, NULL};
    run_t r;
    expect_plugin_rows(c, &pass, &r);
    assert_null(strstr(r.out, "debug:"));
    assert_non_null(strstr(r.err, "debug: launch M=8 N=128 K=256"));
    run_free(&r);
}

/* ------------------------------------------------------------ 3: constructors */

static void test_constructor_crash_and_exit_named(void **state)
{
    (void)state;
    char c[512], lib[512];
    make_case(c, sizeof c, "128x256", 4, "ctor");

    run_t r = replay_with_plugin(NULL, "ctor_crash", "", c, lib, sizeof lib);
    expect_exit_with(&r, 2, r.err, lib, "loading the plugin crashed: killed by SIGSEGV");
    assert_int_equal(r.out[0], '\0');
    run_free(&r);

    r = replay_with_plugin(NULL, "ctor_exit", "", c, lib, sizeof lib);
    /* not a silent exit 0 */
    expect_exit_with(&r, 2, r.err, lib, "a library constructor called exit(0)");
    run_free(&r);
}

/* ------------------------------------------------------------ 4: forks */

/* Is pid gone (no such process, or a zombie left for init to reap)? */
static int process_gone(long pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    char *stat = slurp(path);
    const char *close = strrchr(stat, ')');
    const int gone = stat[0] == '\0' || (close && close[1] == ' ' && close[2] == 'Z');
    free(stat);
    return gone;
}

static void test_forked_helpers_die_with_the_launch(void **state)
{
    (void)state;
    char c[512], lib[512], pidfile[512], env[640];
    make_case(c, sizeof c, "128x256", 4, "forks");
    test_tmp_path(pidfile, sizeof pidfile, "helper-pids");
    snprintf(env, sizeof env, "KR_TEST_PIDFILE='%s'", pidfile);
    run_t r = replay_with_plugin(env, "fork", "--kernels misbehave.fork", c, lib, sizeof lib);
    expect_exit_with(&r, 0, r.out, "", NULL);
    run_free(&r);

    char *pids = slurp(pidfile);
    unlink(pidfile);
    int helpers = 0, alive = 0;
    for (char *p = pids, *end; *p; p = end) {
        const long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        helpers++;
        double give_up = now_seconds() + 2.0;
        while (!process_gone(pid) && now_seconds() < give_up)
            usleep(10000);
        if (!process_gone(pid)) {
            alive++;
            kill((pid_t)pid, SIGKILL);  /* leave nothing behind, then fail */
        }
    }
    free(pids);
    assert_int_equal(helpers, 3);       /* one per run: the default 3 runs of a plugin */
    assert_int_equal(alive, 0);
}

/* ------------------------------------------------------------ 5: canaries */

static void test_write_past_the_last_tile_is_out_of_bounds(void **state)
{
    (void)state;
    char c[512];
    make_case(c, sizeof c, "2560x256", 54, "overrun");
    /* Rows 54-63 x columns 2496-2559: 640 elements, 1280 bytes; the first is
     * element 54 * 2560 + 2496, 2496 elements = 4992 bytes past the end of
     * the 54 x 2560 output; the last 9 * 2560 + 2559 elements past it. */
    static const char *const canaries[] = {
        "1280 of the", "1280 after its end, bytes +4992 to +51199 past it", "element [54, 2496]",
        "none before its start", NULL};
    const plugin_rows_t oob = {"tile_overrun", "--json --kernels misbehave.tile_overrun",
                               "misbehave.tile_overrun", "OOB_WRITE", 1, 1, canaries};
    expect_plugin_rows(c, &oob, NULL);
}

/* ------------------------------------------------------------ 6: whole M */

static void test_plugin_launched_on_the_whole_m(void **state)
{
    (void)state;
    char lib[512], log[512];
    test_plugin_file(lib, sizeof lib, "mtail");
    kr_plugin_t *plugin = NULL;
    kr_error_t err = {{0}};
    if (plugin_load(lib, &plugin, &err))
        fail_msg("%s", err.msg);
    const kernel_desc_t *k = plugin_kernel_find(plugin, "misbehave.mtail");
    assert_non_null(k);
    synth_params_t p = test_synth_params(64, 256, 256, 3);
    case_t c;
    assert_int_equal(synth_case(&p, &c, &err), 0);

    replay_options_t opt;
    replay_options_default(&opt);
    const kernel_desc_t *extra[] = {k};
    opt.extra_kernels = extra;
    opt.n_extra_kernels = 1;
    opt.kernel_patterns = "misbehave.mtail";
    opt.include_recorded = 0;
    /* Blocks of 54 rows (54 + 10, as a large case's were): panels of one
     * row, and the smallest budget that gives 54 by the replay's estimate. */
    opt.ref_panel_rows = 1;
    opt.block_bytes = 1;
    while (replay_block_rows(&c, &opt) < 54)
        opt.block_bytes *= 2;
    while (replay_block_rows(&c, &opt) > 54)
        opt.block_bytes--;
    assert_int_equal(replay_block_rows(&c, &opt), 54);

    test_tmp_path(log, sizeof log, "launch-log");
    assert_int_equal(setenv("KR_TEST_LAUNCH_LOG", log, 1), 0);
    result_list_t rows = {0};
    assert_int_equal(replay_case(&c, &opt, &rows, &err), 0);
    unsetenv("KR_TEST_LAUNCH_LOG");
    assert_true(rows.count >= 2);       /* R_exact and R_source */
    for (int64_t i = 0; i < rows.count; i++) {
        const result_t *r = &rows.rows[i];
        if (r->verdict != VERDICT_PASS)
            fail_msg("%s vs %s: %s: %s; %s", r->kernel, r->reference, verdict_name(r->verdict),
                     r->note, r->diagnosis);
        assert_int_equal(r->M, 64);
    }
    result_list_free(&rows);
    char *lines = slurp(log);
    unlink(log);
    assert_string_equal(lines, "M=64\nM=64\nM=64\n");  /* the default 3 runs, each on M=64 */
    free(lines);
    case_free(&c);
    plugin_unload(plugin);
}

/* ------------------------------------------------------------ 7: reruns */

static void test_split_k_race_is_nondeterministic(void **state)
{
    (void)state;
    char c[512];
    make_case(c, sizeof c, "256x1024", 32, "splitk");
    static const char *const differing[] = {
        "reruns differ: ", " of 8192 elements changed bits across 3 runs", "first at [", NULL};
    const plugin_rows_t race = {"race", "--json --refs exact --reruns 3 --kernels misbehave.race",
                                "misbehave.race", "NONDETERMINISTIC", 1, 1, differing};
    for (int attempt = 0; attempt < 3; attempt++)
        expect_plugin_rows(c, &race, NULL);
    const plugin_rows_t pass = {"splitk_ok", "--json --refs exact --reruns 3 --kernels misbehave.splitk_ok",
                                "misbehave.splitk_ok", "PASS", 0, 1, NULL};
    expect_plugin_rows(c, &pass, NULL);
}

KR_TEST_MAIN(
    test_inject_runs_plugins_isolated, test_plugin_prints_do_not_corrupt_json,
    test_constructor_crash_and_exit_named, test_forked_helpers_die_with_the_launch,
    test_write_past_the_last_tile_is_out_of_bounds, test_plugin_launched_on_the_whole_m,
    test_split_k_race_is_nondeterministic);
