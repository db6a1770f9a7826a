#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "baseline.h"
#include "cli.h"
#include "calibrate.h"
#include "gate.h"
#include "junit.h"
#include "report.h"
#include "report_bundle.h"
#include "results_store.h"
#include "run_incomplete.h"
#include "run_lock.h"

static void gate_usage(FILE *fp)
{
    fprintf(fp,
            "usage: kreplay gate SUITE -o RUNDIR [--baseline FILE] [--junit FILE] [options]\n"
            "\n"
            "Runs a suite (cases/suites/*.yaml) through its kernels, judges every row by the\n"
            "suite's policy, writes RUNDIR/results.h5, results.json, results.csv and report.md,\n"
            "and compares with a baseline results file.\n"
            "\n"
            "  -o, --out RUNDIR         the run directory (required)\n"
            "      --baseline FILE      a results.h5 to compare with: REGRESSED / IMPROVED\n"
            "      --baseline-init      when the --baseline FILE does not exist, create it from\n"
            "                           this run (making its directories) instead of refusing\n"
            "      --junit FILE         JUnit XML, a testcase per case x kernel\n"
            "      --policy FILE        overrides the suite's policy\n"
            "      --history DIR        keep a copy of results.h5 in DIR (for trends)\n"
            "      --shard I/N          run the I-th of N interleaved slices of the cases\n"
            "      --resume             keep the cases RUNDIR/partial already holds\n"
            "      --only-shape NxK     only the cases of one shape (ctest's per-shape tests)\n"
            "      --only-band BAND     only the cases of one M band (decode, mid, prefill, tiled)\n"
            "      --list-shapes        print the suite's shapes, bands and kernel families\n"
            "      --seeds FIRST-LAST   every synthetic item uses these seeds (at most 64)\n"
            "      --inject [K=]FAULT   run kernels matching K with a deliberate fault (a drill:\n"
            "                           the gate must fail; see 'kreplay replay --help')\n"
            "  -t, --threads N\n"
            "\n"
            "Exit: 0 pass, 1 the gate failed (a failing verdict or a regression), 2 usage or\n"
            "input error.\n");
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

int cli_gate(int argc, char **argv)
{
    enum { OPT_BASE = 256, OPT_JUNIT, OPT_POLICY, OPT_HISTORY, OPT_SHARD, OPT_RESUME, OPT_ONLY,
           OPT_LIST, OPT_INJECT, OPT_SEEDS, OPT_ONLY_BAND, OPT_BASE_INIT };
    static const struct option longopts[] = {
        {"out", required_argument, 0, 'o'},
        {"baseline", required_argument, 0, OPT_BASE},
        {"baseline-init", no_argument, 0, OPT_BASE_INIT},
        {"junit", required_argument, 0, OPT_JUNIT},
        {"policy", required_argument, 0, OPT_POLICY},
        {"history", required_argument, 0, OPT_HISTORY},
        {"shard", required_argument, 0, OPT_SHARD},
        {"resume", no_argument, 0, OPT_RESUME},
        {"only-shape", required_argument, 0, OPT_ONLY},
        {"only-band", required_argument, 0, OPT_ONLY_BAND},
        {"list-shapes", no_argument, 0, OPT_LIST},
        {"inject", required_argument, 0, OPT_INJECT},
        {"seeds", required_argument, 0, OPT_SEEDS},
        {"threads", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    gate_options_t o = {0};
    int list = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': o.run_dir = optarg; break;
        case OPT_BASE: o.baseline_path = optarg; break;
        case OPT_BASE_INIT: o.baseline_init = 1; break;
        case OPT_JUNIT: o.junit_path = optarg; break;
        case OPT_POLICY: o.policy_path = optarg; break;
        case OPT_HISTORY: o.history_dir = optarg; break;
        case OPT_SHARD:
            if (sscanf(optarg, "%d/%d", &o.shard_index, &o.shard_count) != 2 || o.shard_count < 1 ||
                o.shard_index < 1 || o.shard_index > o.shard_count) {
                fprintf(stderr, "kreplay gate: --shard: expected I/N with 1 <= I <= N, got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_RESUME: o.resume = 1; break;
        case OPT_ONLY: o.only_shape = optarg; break;
        case OPT_ONLY_BAND: o.only_band = optarg; break;
        case OPT_LIST: list = 1; break;
        case OPT_INJECT: o.inject = optarg; break;
        case OPT_SEEDS:
            if (sscanf(optarg, "%lld-%lld", &o.seed_first, &o.seed_last) != 2 || o.seed_first < 1) {
                fprintf(stderr, "kreplay gate: --seeds: expected FIRST-LAST, got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 't': o.threads = atoi(optarg); break;
        case 'h': gate_usage(stdout); return 0;
        default: gate_usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "kreplay gate: expected exactly one SUITE file\n");
        gate_usage(stderr);
        return EXIT_USAGE;
    }
    o.suite_path = argv[optind];
    kr_error_t err = {{0}};
    if (list) {
        if (gate_list_shapes(o.suite_path, &err)) {
            fprintf(stderr, "kreplay: error: %s\n", err.msg);
            return EXIT_USAGE;
        }
        return 0;
    }
    if (!o.run_dir) {
        fprintf(stderr, "kreplay gate: -o RUNDIR is required\n");
        return EXIT_USAGE;
    }
    char *cmdline = cli_command_line(argc, argv);
    o.command = cmdline;
    o.version = cli_version();
    o.git_commit = cli_git_commit();
    o.progress = isatty(STDERR_FILENO);
    run_lock_t lock;
    if (run_lock_acquire(o.run_dir, &lock, &err)) {
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        free(cmdline);
        return EXIT_USAGE;
    }
    result_list_t rows;
    results_meta_t meta;
    memset(&meta, 0, sizeof meta);
    gate_summary_t sum;
    int ran = gate_run(&o, &rows, &meta, &sum, &err);
    int status = 0;
    if (ran != 0) {
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        status = EXIT_USAGE;
    }
    const char *failed[RUN_INCOMPLETE_MAX];
    int n_failed = gate_incomplete_list(&sum, ran != 0 ? err.msg : NULL, failed);
    kr_error_t werr = {{0}};
    if (rows.count > 0 || ran == 0) {
        report_table_print(stdout, &rows);
        report_summary_line(stdout, &rows);
        if (write_run_reports(o.run_dir, &rows, &meta, o.baseline_path, o.history_dir, failed, n_failed,
                              &werr)) {
            /* After a run that stopped on an error (a full disk, most often),
             * that error was the one line: this is its echo. */
            if (ran == 0)
                fprintf(stderr, "kreplay: error: %s\n", werr.msg);
            status = EXIT_USAGE;
            if (n_failed < RUN_INCOMPLETE_MAX)
                failed[n_failed++] = werr.msg;
            json_mark_incomplete(o.run_dir, &rows, &meta, failed, n_failed);
        }
    }
    /* Written whatever happened (an error before the first case too), so a CI
     * that reads only the JUnit file sees what the exit code says. */
    if (o.junit_path) {
        result_list_t junit_rows;
        kr_error_t jerr = {{0}};
        if (gate_rows_with_errors(&rows, failed, n_failed, &junit_rows))
            kr_fail(&jerr, "%s: out of memory", o.junit_path);
        if (jerr.msg[0] || write_junit_file(o.junit_path, &junit_rows, &meta, sum.seconds, &jerr)) {
            if (ran == 0 && !werr.msg[0])
                fprintf(stderr, "kreplay: error: %s\n", jerr.msg);
            status = EXIT_USAGE;
            if (n_failed < RUN_INCOMPLETE_MAX)
                failed[n_failed++] = jerr.msg;
            json_mark_incomplete(o.run_dir, &rows, &meta, failed, n_failed);
        }
        result_list_free(&junit_rows);
    }
    run_lock_release(&lock);
    if (ran == 0 && sum.baseline_created)
        printf("baseline %s created from this run (%lld rows)\n", o.baseline_path, (long long)sum.rows);
    if (ran == 0)
        printf("gate: %lld cases (%lld resumed), %lld rows, %lld failing, %lld regressed, %lld improved, "
               "%.1f s -> %s/results.h5\n",
               (long long)sum.cases_planned, (long long)sum.cases_resumed, (long long)sum.rows,
               (long long)sum.failing, (long long)sum.regressed, (long long)sum.improved, sum.seconds,
               o.run_dir);
    result_list_free(&rows);
    free(cmdline);
    if (status)
        return status;
    return (sum.failing || sum.regressed) ? EXIT_VERDICT_FAILED : 0;
}

/* The merged rows against a baseline, as gate does it: regressed rows are
 * marked, the report printed; returns the regressed count, or -1 with err. */
static int64_t merge_against_baseline(result_list_t *rows, const char *baseline, kr_error_t *err)
{
    result_list_t base = {0};
    if (results_store_read(baseline, &base, NULL, err))
        return -1;
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

/* kreplay merge -o OUTDIR [--junit FILE] [--baseline FILE] SHARD.h5... */
int cli_merge(int argc, char **argv)
{
    enum { OPT_JUNIT = 256, OPT_BASELINE };
    const char *out_dir = NULL, *junit = NULL, *baseline = NULL;
    optind = 1;
    int c;
    static const struct option longopts[] = {
        {"out", required_argument, 0, 'o'}, {"junit", required_argument, 0, OPT_JUNIT},
        {"baseline", required_argument, 0, OPT_BASELINE}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        if (c == 'o')
            out_dir = optarg;
        else if (c == OPT_JUNIT)
            junit = optarg;
        else if (c == OPT_BASELINE)
            baseline = optarg;
        else {
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: kreplay merge -o OUTDIR [--junit FILE] [--baseline FILE] "
                    "SHARD_RESULTS.h5...\n"
                    "Combines the results of 'kreplay gate --shard I/N' runs into OUTDIR/results.h5\n"
                    "(exactly the rows of one unsharded run) and its reports; --baseline gates the\n"
                    "merged run against a baseline as 'kreplay gate' does, --junit writes JUnit XML.\n");
            return c == 'h' ? 0 : EXIT_USAGE;
        }
    }
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
    if (run_lock_acquire(out_dir, &lock, &err)) {
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        return EXIT_USAGE;
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/results.h5", out_dir);
    if (results_store_merge((const char **)(argv + optind), argc - optind, path, &err)) {
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        run_lock_release(&lock);
        return EXIT_USAGE;
    }
    result_list_t rows;
    results_meta_t meta;
    int64_t regressed = 0;
    if (results_store_read(path, &rows, &meta, &err) ||
        (baseline && ((regressed = merge_against_baseline(&rows, baseline, &err)) < 0 ||
                      results_store_write(path, &rows, &meta, &err))) ||
        write_run_reports(out_dir, &rows, &meta, baseline, NULL, NULL, 0, &err) ||
        (junit && write_junit_file(junit, &rows, &meta, 0.0, &err))) {
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        result_list_free(&rows);
        run_lock_release(&lock);
        return EXIT_USAGE;
    }
    run_lock_release(&lock);
    int64_t failing = 0;
    for (int64_t i = 0; i < rows.count; i++)
        failing += verdict_is_failure(rows.rows[i].verdict);
    printf("merged %d files: %lld rows, %lld failing -> %s\n", argc - optind, (long long)rows.count,
           (long long)failing, path);
    if (baseline)
        printf("merge: %lld regressed against %s\n", (long long)regressed, baseline);
    result_list_free(&rows);
    return failing || regressed ? EXIT_VERDICT_FAILED : 0;
}

/* kreplay baseline update RESULTS.h5|RUNDIR --baseline FILE [--history DIR] */
int cli_baseline(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "update") != 0) {
        fprintf(stderr, "usage: kreplay baseline update RESULTS.h5|RUNDIR --baseline FILE [--history DIR]\n");
        return EXIT_USAGE;
    }
    const char *src = NULL, *dest = NULL, *history = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--baseline") && i + 1 < argc)
            dest = argv[++i];
        else if (!strcmp(argv[i], "--history") && i + 1 < argc)
            history = argv[++i];
        else if (!src)
            src = argv[i];
        else {
            fprintf(stderr, "kreplay baseline: unexpected argument '%s'\n", argv[i]);
            return EXIT_USAGE;
        }
    }
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
    if (results_store_read(path, &rows, &meta, &err) || make_parent_dirs(dest, &err) ||
        results_store_write(dest, &rows, &meta, &err)) {
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        return EXIT_USAGE;
    }
    if (history) {
        char hist[4400];
        snprintf(hist, sizeof hist, "%s/%s_%s.h5", history, meta.time_utc, meta.git_commit);
        if (make_dirs(history, &err) || results_store_write(hist, &rows, &meta, &err)) {
            fprintf(stderr, "kreplay: error: %s\n", err.msg);
            result_list_free(&rows);
            return EXIT_USAGE;
        }
    }
    printf("baseline %s <- %s (%lld rows, suite %s, commit %s)\n", dest, path, (long long)rows.count,
           meta.suite_name, meta.git_commit);
    result_list_free(&rows);
    return 0;
}

/* kreplay calibrate SUITE --seeds FIRST-LAST -o DIR [--margin M] [--name NAME] */
int cli_calibrate(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"out", required_argument, 0, 'o'}, {"seeds", required_argument, 0, 's'},
        {"margin", required_argument, 0, 'm'}, {"name", required_argument, 0, 'n'},
        {"threads", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    gate_options_t o = {0};
    double margin = 2.0;
    const char *name = "calibrated", *dir = NULL;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:s:m:n:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': dir = optarg; break;
        case 's':
            if (sscanf(optarg, "%lld-%lld", &o.seed_first, &o.seed_last) != 2 || o.seed_first < 1) {
                fprintf(stderr, "kreplay calibrate: --seeds: expected FIRST-LAST, got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'm': margin = atof(optarg); break;
        case 'n': name = optarg; break;
        case 't': o.threads = atoi(optarg); break;
        default:
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: kreplay calibrate SUITE --seeds FIRST-LAST -o DIR [--margin M] [--name NAME]\n"
                    "Runs the suite's clean models over the seeds, and writes DIR/calibration.md (each\n"
                    "metric's distribution per kernel x reference x band) and DIR/policy.yaml (thresholds\n"
                    "= margin x the largest value seen; default margin 2).\n");
            return c == 'h' ? 0 : EXIT_USAGE;
        }
    }
    if (!dir || optind != argc - 1 || o.seed_first < 1 || !(margin >= 1)) {
        fprintf(stderr, "kreplay calibrate: need SUITE, --seeds FIRST-LAST, -o DIR and a margin >= 1\n");
        return EXIT_USAGE;
    }
    kr_error_t lerr = {{0}};
    run_lock_t lock;
    if (run_lock_acquire(dir, &lock, &lerr)) {
        fprintf(stderr, "kreplay: error: %s\n", lerr.msg);
        return EXIT_USAGE;
    }
    char run_dir[4400];
    snprintf(run_dir, sizeof run_dir, "%s/run", dir);
    o.suite_path = argv[optind];
    o.run_dir = run_dir;
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
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        status = EXIT_USAGE;
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
            fprintf(stderr, "kreplay: error: %s\n", err.msg);
        else
            printf("calibrated %d groups from %lld rows (%s) -> %s/policy.yaml, %s/calibration.md\n",
                   cal.count, (long long)rows.count, how, dir, dir);
    }
    run_lock_release(&lock);
    calibration_free(&cal);
    result_list_free(&rows);
    free(cmdline);
    return status;
}
