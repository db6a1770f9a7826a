#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "kr_string.h"
#include "out_stage.h"
#include "path_name.h"
#include "cli.h"
#include "cli_commands.h"
#include "cli_inject.h"
#include "cli_interrupt.h"
#include "cli_kernel_patterns.h"
#include "cli_gate_console.h"
#include "cli_options.h"
#include "cli_run_options.h"
#include "calibrate.h"
#include "gate.h"
#include "junit.h"
#include "report.h"
#include "report_bundle.h"
#include "results_store.h"
#include "baseline.h"
#include "run_lock.h"
#include "run_incomplete.h"

/* The run directory's lock, or the error said once: 0 when held. */
static int lock_run_dir(const char *dir, run_lock_t *lock)
{
    kr_error_t err = {{0}};
    if (run_lock_acquire(dir, lock, &err) == 0)
        return 0;
    cli_error(&err);
    return -1;
}

static int cli_gate(int argc, char **argv);
static int cli_merge(int argc, char **argv);
static int cli_baseline(int argc, char **argv);
static int cli_calibrate(int argc, char **argv);

enum {
    OPT_BASE = 256, OPT_JUNIT, OPT_POLICY, OPT_HISTORY, OPT_SHARD, OPT_RESUME, OPT_ONLY, OPT_LIST,
    OPT_SEEDS, OPT_ALLOW_MISSING, OPT_ONLY_CASE, OPT_GATE_KERNELS, OPT_ONLY_BAND, OPT_BASE_INIT, OPT_FORCE,
    OPT_GATE_DEVICE, OPT_GATE_GPUS, OPT_GATE_MODEL_ROWS,
    OPT_BASE_OTHER_SUITE,
};

/* What the gate's command line asks: the run, what the console shows, and
 * whether only the shapes are listed. */
typedef struct {
    gate_options_t o;
    gate_console_t console;
    int list;
} gate_args_t;

static const cli_option_t gate_options[] = {
    {'o', "out", 'o', "RUNDIR", CLI_DIR, NULL, "the run directory (required)",
     CLI_SET_STRING(gate_args_t, o.run_dir), CLI_ROWS_SAME},
    {OPT_BASE, "baseline", 0, "FILE", CLI_FILE, NULL,
     "a results.h5 to compare with: REGRESSED / IMPROVED; a\n"
     "baseline row this run lacks (MISSING) fails the gate\nunless --allow-missing",
     CLI_SET_STRING(gate_args_t, o.baseline_path), CLI_ROWS_SAME},
    {OPT_BASE_INIT, "baseline-init", 0, NULL, CLI_FLAG, NULL,
     "when the --baseline FILE does not exist, create it from\nthis run (making its directories) instead of refusing",
     CLI_SET_TRUE(gate_args_t, o.baseline_init), CLI_ROWS_SAME},
    {OPT_BASE_OTHER_SUITE, "baseline-other-suite", 0, NULL, CLI_FLAG, NULL,
     "compare with a --baseline of another suite all the same\n(refused otherwise: every row would be MISSING or NEW)",
     CLI_SET_TRUE(gate_args_t, o.baseline_other_suite), CLI_ROWS_SAME},
    {OPT_ALLOW_MISSING, "allow-missing", 0, NULL, CLI_FLAG, NULL,
     "baseline rows absent from this run do not fail the\ngate (implied by --shard)",
     CLI_SET_TRUE(gate_args_t, console.allow_missing), CLI_ROWS_SAME},
    {OPT_JUNIT, "junit", 0, "FILE", CLI_FILE, NULL, "JUnit XML, a testcase per case x kernel",
     CLI_SET_STRING(gate_args_t, o.junit_path), CLI_ROWS_SAME},
    {OPT_POLICY, "policy", 0, "FILE", CLI_FILE, NULL, "overrides the suite's policy",
     CLI_SET_STRING(gate_args_t, o.policy_path), CLI_ROWS_REJUDGED},
    {OPT_HISTORY, "history", 0, "DIR", CLI_DIR, NULL, "keep a copy of results.h5 in DIR (for trends)",
     CLI_SET_STRING(gate_args_t, o.history_dir), CLI_ROWS_SAME},
    {OPT_SHARD, "shard", 0, "I/N", CLI_STRING, NULL, "run the I-th of N interleaved slices of the cases",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_RESUME, "resume", 0, NULL, CLI_FLAG, NULL,
     "keep the cases RUNDIR/partial already holds (refused when\nthis run's options would give other rows)",
     CLI_SET_TRUE(gate_args_t, o.resume), CLI_ROWS_SAME},
    {OPT_FORCE, "force", 0, NULL, CLI_FLAG, NULL,
     "write into a RUNDIR that holds another run (another suite's\n"
     "or a replay's results, or an interrupted run's partial/),\nreplacing it",
     CLI_SET_TRUE(gate_args_t, o.force), CLI_ROWS_SAME},
    {OPT_ONLY, "only-shape", 0, "NxK", CLI_STRING, NULL, "only the cases of one shape (ctest's per-shape tests)",
     CLI_SET_STRING(gate_args_t, o.only_shape), CLI_ROWS_CHANGED},
    {OPT_ONLY_BAND, "only-band", 0, "BAND", CLI_STRING, NULL,
     "only the cases of one M band (decode, mid, prefill, tiled)", CLI_SET_STRING(gate_args_t, o.only_band),
     CLI_ROWS_CHANGED},
    {OPT_ONLY_CASE, "only-case", 0, "NAME", CLI_STRING, NULL,
     "only the case of this name (a row's case name; what each\nfailing row's rerun command uses)",
     CLI_SET_STRING(gate_args_t, o.only_case), CLI_ROWS_CHANGED},
    {OPT_GATE_KERNELS, "kernels", 'k', "PATTERNS", CLI_KERNELS, NULL, "kernel globs replacing the suite's kernels",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_LIST, "list-shapes", 0, NULL, CLI_FLAG, NULL, "print the suite's shapes, bands and kernel families",
     CLI_SET_TRUE(gate_args_t, list), CLI_ROWS_SAME},
    {OPT_SEEDS, "seeds", 0, "FIRST-LAST", CLI_STRING, NULL, "every synthetic item uses these seeds (at most 64)",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_GATE_DEVICE, "device", 0, "DEVICE", CLI_CHOICE, "cpu|gpu",
     "cpu or gpu: where the kernels run, overriding the\nsuite's 'device:' key", CLI_SET_STRING(gate_args_t, o.device),
     CLI_ROWS_CHANGED},
    {OPT_GATE_GPUS, "gpus", 0, "LIST", CLI_STRING, NULL,
     "spread a GPU run's cases over these GPUs (e.g. 0,1;\ndefault: every visible GPU)",
     CLI_SET_STRING(gate_args_t, o.gpus), CLI_ROWS_SAME},
    {OPT_GATE_MODEL_ROWS, "model-rows", 0, "N|all", CLI_STRING, NULL,
     "rows of each GPU kernel's output compared with its CPU\nmodel (default 32; all: every row; 0: none)",
     CLI_SET_STRING(gate_args_t, o.model_rows), CLI_ROWS_CHANGED},
    CLI_OPT_INJECT,
    CLI_OPT_ALL_ROWS(CLI_SET_TRUE(gate_args_t, console.all_rows)),
    CLI_OPT_QUIET(CLI_SET_TRUE(gate_args_t, console.quiet)),
    CLI_OPT_THREADS_SET(gate_args_t, o.threads),
};

const cli_command_t cli_gate_command = {
    .name = "gate",
    .synopsis = "SUITE -o RUNDIR [--baseline FILE] [--junit FILE] [options]",
    .summary = "the nightly gate: suite, policy, results file, baseline, JUnit",
    .description =
        "Runs a suite (cases/suites/*.yaml) through its kernels, judges every row by the\n"
        "suite's policy, writes RUNDIR/results.h5, results.json, results.csv and report.md,\n"
        "and compares with a baseline results file.  Prints the summary first, then the\n"
        "failing and regressed rows, each with the command that reruns it.",
    .operands = "file",
    CLI_ROWS(gate_options),
    .run = cli_gate,
};

enum { OPT_MERGE_JUNIT = 256, OPT_MERGE_BASELINE, OPT_MERGE_OTHER_SUITE };

typedef struct {
    const char *out_dir, *junit, *baseline;
    int other_suite;
} merge_args_t;

static const cli_option_t merge_options[] = {
    {'o', "out", 'o', "OUTDIR", CLI_DIR, NULL, "the merged run's directory (required)",
     CLI_SET_STRING(merge_args_t, out_dir), CLI_ROWS_SAME},
    {OPT_MERGE_JUNIT, "junit", 0, "FILE", CLI_FILE, NULL, "JUnit XML of the merged run",
     CLI_SET_STRING(merge_args_t, junit), CLI_ROWS_SAME},
    {OPT_MERGE_BASELINE, "baseline", 0, "FILE", CLI_FILE, NULL,
     "gate the merged run against this baseline, as 'kreplay gate' does",
     CLI_SET_STRING(merge_args_t, baseline), CLI_ROWS_SAME},
    {OPT_MERGE_OTHER_SUITE, "baseline-other-suite", 0, NULL, CLI_FLAG, NULL,
     "compare with a --baseline of another suite all the same", CLI_SET_TRUE(merge_args_t, other_suite),
     CLI_ROWS_SAME},
};

const cli_command_t cli_merge_command = {
    .name = "merge",
    .synopsis = "-o OUTDIR [--junit FILE] [--baseline FILE] SHARD_RESULTS.h5...",
    .summary = "combine shard results into one run",
    .description = "Combines the results of 'kreplay gate --shard I/N' runs into OUTDIR/results.h5\n"
                   "(exactly the rows of one unsharded run) and its reports.",
    .operands = "file",
    CLI_ROWS(merge_options),
    .run = cli_merge,
};

enum { OPT_BASELINE_FILE = 1, OPT_BASELINE_HISTORY, OPT_BASELINE_OTHER_SUITE };

typedef struct {
    const char *dest, *history;
    int other_suite;
} baseline_args_t;

static const cli_option_t baseline_options[] = {
    {OPT_BASELINE_FILE, "baseline", 0, "FILE", CLI_FILE, NULL,
     "the baseline to write (its directory is created)", CLI_SET_STRING(baseline_args_t, dest), CLI_ROWS_SAME},
    {OPT_BASELINE_HISTORY, "history", 0, "DIR", CLI_DIR, NULL, "also keep a copy in DIR, named by time and commit",
     CLI_SET_STRING(baseline_args_t, history), CLI_ROWS_SAME},
    {OPT_BASELINE_OTHER_SUITE, "baseline-other-suite", 0, NULL, CLI_FLAG, NULL,
     "replace a baseline of another suite all the same", CLI_SET_TRUE(baseline_args_t, other_suite), CLI_ROWS_SAME},
};

const cli_command_t cli_baseline_command = {
    .name = "baseline",
    .synopsis = "update RESULTS.h5|RUNDIR --baseline FILE [--history DIR]",
    .summary = "promote a run to the baseline",
    .description = "Checks that RESULTS.h5 (or RUNDIR/results.h5) is a valid results file and writes it,\n"
                   "atomically, as the baseline.",
    .operands = "update",
    CLI_ROWS(baseline_options),
    .run = cli_baseline,
};

typedef struct {
    gate_options_t o;
    double margin;
    const char *name, *dir;
} calibrate_args_t;

static const cli_option_t calibrate_options[] = {
    {'o', "out", 'o', "DIR", CLI_DIR, NULL, "writes DIR/calibration.md and DIR/policy.yaml (required)",
     CLI_SET_STRING(calibrate_args_t, dir), CLI_ROWS_SAME},
    {'s', "seeds", 0, "FIRST-LAST", CLI_STRING, NULL, "the seeds every synthetic item runs with (required)",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {'m', "margin", 0, "M", CLI_POS_NUMBER, NULL, "threshold = M x the largest value seen (default 2, >= 1)",
     CLI_SET_NUMBER(calibrate_args_t, margin), CLI_ROWS_SAME},
    {'n', "name", 0, "NAME", CLI_STRING, NULL, "the policy's name (default: calibrated)",
     CLI_SET_STRING(calibrate_args_t, name), CLI_ROWS_SAME},
    CLI_OPT_THREADS_SET(calibrate_args_t, o.threads),
};

const cli_command_t cli_calibrate_command = {
    .name = "calibrate",
    .synopsis = "SUITE --seeds FIRST-LAST -o DIR [--margin M] [--name NAME]",
    .summary = "thresholds from clean models over many seeds",
    .description = "Runs the suite's clean models over the seeds, and writes DIR/calibration.md (each\n"
                   "metric's distribution per kernel x reference x band) and DIR/policy.yaml (thresholds\n"
                   "= margin x the largest value seen; default margin 2).",
    .operands = "file",
    CLI_ROWS(calibrate_options),
    .run = cli_calibrate,
};

/* --seeds FIRST-LAST of gate and calibrate.  Returns CLI_GO_ON or the exit code. */
static int parse_seeds(const cli_command_t *cmd, const char *arg, gate_options_t *o)
{
    if (sscanf(arg, "%lld-%lld", &o->seed_first, &o->seed_last) != 2 || o->seed_first < 1)
        return cli_option_error(cmd, "seeds", "expected FIRST-LAST, got '%s'", arg);
    return CLI_GO_ON;
}

static int write_run_reports(const char *run_dir, const result_list_t *rows, const results_meta_t *meta,
                             const char *baseline, const char *history,
                             const char *const *failed, int n_failed, kr_error_t *err)
{
    run_info_t info;
    run_info_fill(&info, meta->command, meta->version, meta->git_commit);
    info.failed_inputs = failed;
    info.n_failed_inputs = n_failed;
    kr_error_t e = {{0}};
    if (report_write_dir(run_dir, rows, &info, &e)) {
        *err = e;
        return -1;
    }
    report_options_t ro;
    report_options_init(&ro);
    ro.meta = meta;
    ro.baseline_path = baseline;
    char title[128];
    if (n_failed > 0) {
        snprintf(title, sizeof title, "kreplay report (INCOMPLETE: %d input(s) could not be read or written)",
                 n_failed);
        ro.title = title;
    }
    char **hist = NULL;
    int nh = history ? report_history_paths(history, &hist, &e) : 0;
    if (nh < 0 || report_generate(run_dir, rows, (const char **)hist, nh > 0 ? nh : 0, &ro, &e)) {
        report_free_paths(hist, nh > 0 ? nh : 0);
        *err = e;
        return -1;
    }
    report_free_paths(hist, nh);
    return 0;
}

/* After a report failed part-way, results.json may already say the run is
 * complete: it is rewritten saying incomplete, or removed when even that
 * cannot be written. */
static void json_mark_incomplete(const char *run_dir, const result_list_t *rows, const results_meta_t *meta,
                                 const char *const *failed, int n_failed)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/results.json", run_dir);
    if (access(path, F_OK) != 0)
        return;
    run_info_t info;
    run_info_fill(&info, meta->command, meta->version, meta->git_commit);
    info.failed_inputs = failed;
    info.n_failed_inputs = n_failed;
    atomic_file_t f;
    kr_error_t e;
    if (atomic_file_open(&f, path, &e) == 0) {
        if (report_json_write(f.fp, rows, &info) == 0 && atomic_file_commit(&f, &e) == 0)
            return;
        atomic_file_abort(&f);
    }
    unlink(path);
}

/* junit_rows: the run's rows plus an ERROR row for each thing it could not do. */
static int write_junit_file(const char *junit_path, const result_list_t *junit_rows, const results_meta_t *meta,
                            double seconds, kr_error_t *err)
{
    atomic_file_t f;
    if (atomic_file_open(&f, junit_path, err))
        return -1;
    junit_run_t jr = {.suite_name = meta->suite_name, .seconds = seconds, .meta = meta};
    if (junit_write_run(f.fp, &jr, junit_rows) != 0) {
        int e = errno;
        atomic_file_abort(&f);
        return kr_fail(err, "%s: write failed: %s", junit_path, strerror(e));
    }
    return atomic_file_commit(&f, err);
}

/* The gate's options that are checked before any case runs. */
static int apply_gate_option(void *args, const cli_value_t *v)
{
    const cli_command_t *cmd = &cli_gate_command;
    gate_options_t *o = &((gate_args_t *)args)->o;
    switch (v->id) {
    case OPT_SHARD:
        if (sscanf(v->arg, "%d/%d", &o->shard_index, &o->shard_count) != 2 || o->shard_count < 1 ||
            o->shard_index < 1 || o->shard_index > o->shard_count)
            return cli_option_error(cmd, "shard", "expected I/N with 1 <= I <= N, got '%s'", v->arg);
        return CLI_GO_ON;
    case OPT_SEEDS:
        return parse_seeds(cmd, v->arg, o);
    case CLI_ID_INJECT: {
        /* Checked here, so a bad fault is an error before any case runs. */
        fault_t f;
        const char *kernels;
        char buf[256];
        int r = cli_parse_inject(cmd, v->arg, buf, sizeof buf, &f, &kernels);
        if (r)
            return r > 0 ? 0 : EXIT_USAGE;
        o->inject = v->arg;
        return CLI_GO_ON;
    }
    case OPT_GATE_KERNELS:
        if (cli_check_kernel_patterns(cmd, v->arg, NULL, 0))
            return EXIT_USAGE;
        o->kernels = v->arg;
        return CLI_GO_ON;
    default:
        return CLI_GO_ON;
    }
}

static int cli_gate(int argc, char **argv)
{
    gate_args_t a = {0};
    int rc = cli_parse(&cli_gate_command, argc, argv, &a, apply_gate_option);
    if (rc != CLI_GO_ON)
        return rc;
    if (optind != argc - 1) {
        fprintf(stderr, "kreplay gate: expected exactly one SUITE file\nRun 'kreplay help gate' for its options.\n");
        return EXIT_USAGE;
    }
    a.o.suite_path = argv[optind];
    a.o.allow_missing = a.console.allow_missing || a.o.shard_count > 0;
    char fingerprint[sizeof ((results_meta_t *)0)->options];
    if (cli_options_fingerprint(&cli_gate_command, argc, argv, fingerprint, sizeof fingerprint)) {
        fprintf(stderr, "kreplay gate: the options that change rows are too long to record (over %zu bytes)\n",
                sizeof fingerprint);
        return EXIT_USAGE;
    }
    a.o.options_fingerprint = fingerprint;
    kr_error_t err = {{0}};
    if (a.list) {
        if (gate_list_shapes(a.o.suite_path, &err)) {
            return cli_error(&err);
        }
        return 0;
    }
    if (!a.o.run_dir) {
        fprintf(stderr, "kreplay gate: -o RUNDIR is required\n");
        return EXIT_USAGE;
    }
    char *cmdline = cli_command_line(argc, argv);
    a.o.command = cmdline;
    a.o.version = cli_version();
    a.o.git_commit = cli_git_commit();
    a.o.progress = isatty(STDERR_FILENO);
    run_lock_t lock;
    if (lock_run_dir(a.o.run_dir, &lock)) {
        free(cmdline);
        return EXIT_USAGE;
    }
    result_list_t rows;
    results_meta_t meta;
    memset(&meta, 0, sizeof meta);
    gate_summary_t sum;
    cli_interrupt_arm(a.o.run_dir, argc, argv);
    int ran = gate_run(&a.o, &rows, &meta, &sum, &err);
    cli_interrupt_disarm();
    int status = 0;
    if (ran != 0) {
        status = cli_error(&err);
    }
    const char *failed[RUN_INCOMPLETE_MAX];
    int n_failed = gate_incomplete_list(&sum, ran != 0 ? err.msg : NULL, failed);
    kr_error_t werr = {{0}};
    if (rows.count > 0 || ran == 0) {
        if (write_run_reports(a.o.run_dir, &rows, &meta, a.o.baseline_path, a.o.history_dir, failed, n_failed,
                              &werr)) {
            /* After a run that stopped on an error (a full disk, most often),
             * that error was the one line: this is its echo. */
            if (ran == 0)
                cli_error(&werr);
            status = EXIT_USAGE;
            if (n_failed < RUN_INCOMPLETE_MAX)
                failed[n_failed++] = werr.msg;
            json_mark_incomplete(a.o.run_dir, &rows, &meta, failed, n_failed);
        }
    }
    /* Written whatever happened (an error before the first case too), so a CI
     * that reads only the JUnit file sees what the exit code says. */
    if (a.o.junit_path) {
        result_list_t junit_rows;
        kr_error_t jerr = {{0}};
        if (gate_rows_with_errors(&rows, failed, n_failed, &junit_rows))
            kr_fail(&jerr, "%s: out of memory", a.o.junit_path);
        if (jerr.msg[0] || write_junit_file(a.o.junit_path, &junit_rows, &meta, sum.seconds, &jerr)) {
            if (ran == 0 && !werr.msg[0])
                cli_error(&jerr);
            status = EXIT_USAGE;
            if (n_failed < RUN_INCOMPLETE_MAX)
                failed[n_failed++] = jerr.msg;
            json_mark_incomplete(a.o.run_dir, &rows, &meta, failed, n_failed);
        }
        result_list_free(&junit_rows);
    }
    run_lock_release(&lock);
    if (rows.count > 0 || ran == 0)
        gate_console_print(stdout, &a.console, &a.o, &rows, &sum, ran == 0);
    if (ran == 0 && sum.baseline_created)
        printf("baseline %s created from this run (%lld rows)\n", a.o.baseline_path, (long long)sum.rows);
    result_list_free(&rows);
    const int failed_gate = sum.failing || sum.baseline_failed;
    gate_summary_free(&sum);
    free(cmdline);
    if (status)
        return status;
    return failed_gate ? EXIT_VERDICT_FAILED : 0;
}

/* The merged rows against a baseline, as gate does it: regressed rows are
 * marked, the report printed; returns the regressed count, or -1 with err. */
static int64_t merge_against_baseline(result_list_t *rows, const results_meta_t *meta, const char *baseline,
                                      int other_suite, kr_error_t *err)
{
    result_list_t base = {0};
    results_meta_t base_meta;
    if (results_store_read(baseline, &base, &base_meta, err) ||
        baseline_check_usable(&base, &base_meta, baseline, meta->suite_name, other_suite, err)) {
        result_list_free(&base);
        return -1;
    }
    baseline_report_t rep;
    int64_t regressed = 0;
    if (baseline_compare(rows, &base, NULL, &rep) != 0) {
        result_list_free(&base);
        return kr_fail(err, "%s: out of memory comparing with the baseline", baseline);
    }
    baseline_report_print(stdout, &rep, rows, &base);
    regressed = rep.n[BASELINE_REGRESSED];
    baseline_report_free(&rep);
    result_list_free(&base);
    return regressed;
}

/* The merged run, written into the stage st: results.h5, its reports and
 * the JUnit file.  rows and meta are the merged run's. */
static int merge_into_stage(out_stage_t *st, const merge_args_t *a, const char **shards, int n_shards,
                            result_list_t *rows, results_meta_t *meta, int64_t *regressed, kr_error_t *err)
{
    char path[4400], staged_junit[4400];
    snprintf(path, sizeof path, "%s/results.h5", st->path);
    memset(rows, 0, sizeof *rows);
    if ((a->junit && out_stage_external(st, a->junit, staged_junit, sizeof staged_junit, err)) ||
        results_store_merge(shards, n_shards, path, err) || results_store_read(path, rows, meta, err))
        return -1;
    if (a->baseline && ((*regressed = merge_against_baseline(rows, meta, a->baseline, a->other_suite, err)) < 0 ||
                        results_store_write(path, rows, meta, err)))
        return -1;
    return write_run_reports(st->path, rows, meta, a->baseline, NULL, NULL, 0, err) ||
                   (a->junit && write_junit_file(staged_junit, rows, meta, 0.0, err))
               ? -1 : 0;
}

/* kreplay merge -o OUTDIR [--junit FILE] [--baseline FILE] SHARD.h5... */
static int cli_merge(int argc, char **argv)
{
    merge_args_t a = {0};
    int rc = cli_parse(&cli_merge_command, argc, argv, &a, NULL);
    if (rc != CLI_GO_ON)
        return rc;
    const char *out_dir = a.out_dir, *baseline = a.baseline;
    if (!out_dir || optind >= argc) {
        fprintf(stderr, "kreplay merge: need -o OUTDIR and at least one results file\n");
        return EXIT_USAGE;
    }
    kr_error_t err = {{0}};
    if (baseline && access(baseline, R_OK) != 0) {
        fprintf(stderr, "kreplay: error: %s: baseline: cannot read (%s); expected a results file "
                        "(create one with 'kreplay baseline update RUNDIR --baseline %s')\n",
                baseline, strerror(errno), baseline);
        return EXIT_USAGE;
    }
    run_lock_t lock;
    if (lock_run_dir(out_dir, &lock))
        return EXIT_USAGE;
    /* Every file of the merged run is staged and moved into place at once:
     * an interrupted merge leaves the earlier run's set whole. */
    static const char *const owned[] = {"results.h5", "report.html", "report_full.md", "plots",
                                        "results.json", "results.csv", "report.md"};
    out_stage_t st;
    result_list_t rows = {0};
    results_meta_t meta;
    int64_t regressed = 0;
    if (out_stage_begin(&st, out_dir, &err) ||
        merge_into_stage(&st, &a, (const char **)(argv + optind), argc - optind, &rows, &meta, &regressed, &err) ||
        out_stage_commit(&st, owned, (int)(sizeof owned / sizeof owned[0]), &err)) {
        out_stage_abort(&st);
        cli_error(&err);
        result_list_free(&rows);
        run_lock_release(&lock);
        return EXIT_USAGE;
    }
    run_lock_release(&lock);
    int64_t failing = 0;
    for (int64_t i = 0; i < rows.count; i++)
        failing += verdict_is_failure(rows.rows[i].verdict);
    printf("merged %d files: %lld rows, %lld failing -> %s/results.h5\n", argc - optind, (long long)rows.count,
           (long long)failing, out_dir);
    if (baseline)
        printf("merge: %lld regressed against %s\n", (long long)regressed, baseline);
    result_list_free(&rows);
    return failing || regressed ? EXIT_VERDICT_FAILED : 0;
}

/* An existing baseline of another suite is not replaced unless asked: a
 * slip of a path would lose another suite's baseline. */
static int check_replaced_baseline(const char *dest, const results_meta_t *meta, int other_suite, kr_error_t *err)
{
    results_meta_t was;
    kr_error_t ignored = {{0}};
    if (other_suite || access(dest, F_OK) != 0 || results_store_read_meta(dest, &was, NULL, &ignored))
        return 0;   /* an unreadable one is replaced: that is how it is repaired */
    if (was.suite_name[0] && meta->suite_name[0] && strcmp(was.suite_name, meta->suite_name) != 0)
        return kr_fail(err, "%s: baseline: of suite '%s', the run is of suite '%s'; expected a baseline of "
                            "the same suite (--baseline-other-suite replaces it anyway)",
                       dest, was.suite_name, meta->suite_name);
    return 0;
}

/* kreplay baseline update RESULTS.h5|RUNDIR --baseline FILE [--history DIR] */
static int cli_baseline(int argc, char **argv)
{
    baseline_args_t a = {0};
    int rc = cli_parse(&cli_baseline_command, argc, argv, &a, NULL);
    if (rc != CLI_GO_ON)
        return rc;
    const char *src = NULL, *dest = a.dest, *history = a.history;
    if (optind >= argc || strcmp(argv[optind], "update") != 0 || argc - optind > 2) {
        fprintf(stderr, "usage: kreplay baseline update RESULTS.h5|RUNDIR --baseline FILE [--history DIR]\n");
        return EXIT_USAGE;
    }
    if (argc - optind == 2)
        src = argv[optind + 1];
    if (!src || !dest) {
        fprintf(stderr, "kreplay baseline update: need RESULTS.h5|RUNDIR and --baseline FILE\n");
        return EXIT_USAGE;
    }
    char path[4400];
    if (access(src, F_OK) == 0 && strstr(src, ".h5") == NULL)
        snprintf(path, sizeof path, "%s/results.h5", src);
    else
        snprintf(path, sizeof path, "%s", src);
    /* Read it first: only a valid results file becomes the baseline. */
    result_list_t rows;
    results_meta_t meta;
    kr_error_t err = {{0}};
    /* The baseline's directory is made, so the first promotion works. */
    if (results_store_read(path, &rows, &meta, &err) || baseline_check_usable(&rows, &meta, path, NULL, 1, &err) ||
        check_replaced_baseline(dest, &meta, a.other_suite, &err) || make_parent_dirs(dest, &err) ||
        results_store_write(dest, &rows, &meta, &err)) {
        result_list_free(&rows);
        return cli_error(&err);
    }
    if (history) {
        /* Named from the file's provenance, which is anyone's text: one
         * path component of safe characters (path_name.h). */
        char hist[4400], when[64], commit[96];
        path_component(meta.time_utc, when, sizeof when);
        path_component(meta.git_commit, commit, sizeof commit);
        snprintf(hist, sizeof hist, "%s/%s_%s.h5", history, when, commit);
        if (make_dirs(history, &err) || results_store_write(hist, &rows, &meta, &err)) {
            cli_error(&err);
            result_list_free(&rows);
            return EXIT_USAGE;
        }
    }
    char suite[128], commit[64];
    kr_str_printable(meta.suite_name, suite, sizeof suite);
    kr_str_printable(meta.git_commit, commit, sizeof commit);
    printf("baseline %s <- %s (%lld rows, suite %s, commit %s)\n", dest, path, (long long)rows.count, suite,
           commit);
    result_list_free(&rows);
    return 0;
}

static int apply_calibrate_option(void *args, const cli_value_t *v)
{
    return v->id == 's' ? parse_seeds(&cli_calibrate_command, v->arg, &((calibrate_args_t *)args)->o) : CLI_GO_ON;
}

/* kreplay calibrate SUITE --seeds FIRST-LAST -o DIR [--margin M] [--name NAME] */
static int cli_calibrate(int argc, char **argv)
{
    calibrate_args_t a = {.margin = 2.0, .name = "calibrated"};
    int rc = cli_parse(&cli_calibrate_command, argc, argv, &a, apply_calibrate_option);
    if (rc != CLI_GO_ON)
        return rc;
    gate_options_t o = a.o;
    const double margin = a.margin;
    const char *name = a.name, *dir = a.dir;
    if (!dir || optind != argc - 1 || o.seed_first < 1 || !(margin >= 1)) {
        fprintf(stderr, "kreplay calibrate: need SUITE, --seeds FIRST-LAST, -o DIR and a margin >= 1\n");
        return EXIT_USAGE;
    }
    run_lock_t lock;
    if (lock_run_dir(dir, &lock))
        return EXIT_USAGE;
    char run_dir[4400];
    snprintf(run_dir, sizeof run_dir, "%s/run", dir);
    o.suite_path = argv[optind];
    o.run_dir = run_dir;
    o.force = 1;    /* DIR/run is calibrate's own: every calibration starts it over */
    o.version = cli_version();
    o.git_commit = cli_git_commit();
    o.progress = isatty(STDERR_FILENO);
    char *cmdline = cli_command_line(argc, argv);
    o.command = cmdline;
    result_list_t rows;
    results_meta_t meta;
    gate_summary_t sum;
    kr_error_t err = {{0}};
    calibration_t cal = {0};
    int status = 0;
    if (gate_run(&o, &rows, &meta, &sum, &err) || calibration_add_rows(&cal, rows.rows, rows.count, &err)) {
        status = cli_error(&err);
    } else {
        char how[512], path[4400];
        snprintf(how, sizeof how, "suite %s, seeds %lld-%lld, %lld cases, %lld rows, kreplay %s", meta.suite_name,
                 o.seed_first, o.seed_last, (long long)sum.cases_run, (long long)rows.count, meta.git_commit);
        atomic_file_t f;
        snprintf(path, sizeof path, "%s/calibration.md", dir);
        if (atomic_file_open(&f, path, &err) == 0) {
            calibration_write_table(f.fp, &cal, margin, how);
            if (atomic_file_commit(&f, &err))
                status = EXIT_USAGE;
        } else {
            status = EXIT_USAGE;
        }
        snprintf(path, sizeof path, "%s/policy.yaml", dir);
        if (status == 0 && atomic_file_open(&f, path, &err) == 0) {
            calibration_write_policy(f.fp, &cal, margin, name, how);
            if (atomic_file_commit(&f, &err))
                status = EXIT_USAGE;
        }
        if (status)
            cli_error(&err);
        else
            printf("calibrated %d groups from %lld rows (%s) -> %s/policy.yaml, %s/calibration.md\n",
                   cal.count, (long long)rows.count, how, dir, dir);
    }
    run_lock_release(&lock);
    gate_summary_free(&sum);
    calibration_free(&cal);
    result_list_free(&rows);
    free(cmdline);
    return status;
}
