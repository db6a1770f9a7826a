/* kreplay report RESULTS.h5|RUNDIR... -o DIR [--history DIR] [--baseline FILE] [--case CASE.h5]... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_commands.h"
#include "kr_string.h"
#include "report_bundle.h"
#include "results_store.h"
#include "results_validate.h"

static int cli_report(int argc, char **argv);

enum { OPT_HISTORY = 256, OPT_LAST, OPT_BASE, OPT_CASE, OPT_NOLOOKUP, OPT_NOPLOTS, OPT_TITLE };

typedef struct {
    char **v;
    int n, cap;
} paths_t;

static int paths_add(paths_t *p, const char *s)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        char **v = realloc(p->v, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n] = strdup(s);
    return p->v[p->n] ? (p->n++, 0) : -1;
}

static void paths_free(paths_t *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->v[i]);
    free(p->v);
    memset(p, 0, sizeof *p);
}

/* A directory's *.h5 files in name order, or the file itself. */
static int add_history(paths_t *p, const char *arg)
{
    char **v = NULL;
    kr_error_t err = {{0}};
    int n = report_history_paths(arg, &v, &err);
    if (n < 0) {
        fprintf(stderr, "kreplay report: --history: %s\n", err.msg);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = paths_add(p, v[i]);
    report_free_paths(v, n);
    return rc;
}

/* What report's command line asks: the report's options, where it goes, and
 * the history and case files named. */
typedef struct {
    report_options_t opt;
    const char *out_dir;
    paths_t history, cases;
} report_args_t;

static const cli_option_t report_options[] = {
    {'o', "out", 'o', "DIR", CLI_DIR, NULL, "the report directory (required)",
     CLI_SET_STRING(report_args_t, out_dir), CLI_ROWS_SAME},
    {OPT_HISTORY, "history", 0, "DIR|FILE", CLI_FILE, NULL,
     "earlier runs' results files (a directory: its *.h5),\nfor the error trend; may be repeated",
     CLI_BY_CODE, CLI_ROWS_SAME},
    {OPT_LAST, "last", 0, "N", CLI_POS_INT, NULL, "the trend keeps the last N history runs (default 10)",
     CLI_SET_INT(report_args_t, opt.history_last), CLI_ROWS_SAME},
    {OPT_BASE, "baseline", 0, "FILE", CLI_FILE, NULL, "a baseline results file: the trend's first point",
     CLI_SET_STRING(report_args_t, opt.baseline_path), CLI_ROWS_SAME},
    {OPT_CASE, "case", 0, "CASE.h5", CLI_FILE, NULL,
     "draw the non-finite map of this case's x; may be repeated\n"
     "(cases the rows name are mapped when their files exist and\n"
     "their x held non-finite values)", CLI_BY_CODE, CLI_ROWS_SAME},
    {OPT_NOLOOKUP, "no-case-lookup", 0, NULL, CLI_FLAG, NULL, "map only the --case files",
     CLI_SET_FALSE(report_args_t, opt.find_cases), CLI_ROWS_SAME},
    {OPT_NOPLOTS, "no-plots", 0, NULL, CLI_FLAG, NULL, "do not run gnuplot",
     CLI_SET_FALSE(report_args_t, opt.plots), CLI_ROWS_SAME},
    {OPT_TITLE, "title", 0, "TEXT", CLI_STRING, NULL, "the page's title",
     CLI_SET_STRING(report_args_t, opt.title), CLI_ROWS_SAME},
    {'q', "quiet", 'q', NULL, CLI_FLAG, NULL, "no warnings", CLI_SET_TRUE(report_args_t, opt.quiet), CLI_ROWS_SAME},
};

const cli_command_t cli_report_command = {
    .name = "report",
    .synopsis = "RESULTS.h5|RUNDIR... -o DIR [options]",
    .summary = "HTML page (plots inline) and Markdown from results files",
    .description =
        "Regenerates a report directory from results files alone: DIR/report.html (one\n"
        "self-contained page, plots inline as SVG), DIR/report_full.md (plots as\n"
        "plots/*.png), DIR/plots/, and results.json, results.csv, report.md.  Files whose\n"
        "rows do not overlap (the shards of one run) are reported as one run; files of\n"
        "several runs (the same rows twice) report the newest run, with the others as its\n"
        "history.  Plots need gnuplot on PATH; without it the report is written without plots.\n"
        "Exits as the gate would on the same rows: 1 when any row fails.",
    .operands = "file",
    CLI_ROWS(report_options),
    .run = cli_report,
};

/* The index of the first row whose key equals the one before it (rows
 * sorted), or -1. */
static int64_t first_repeated_row(const result_list_t *rows)
{
    for (int64_t j = 1; j < rows->count; j++)
        if (result_key_cmp(&rows->rows[j - 1], &rows->rows[j]) == 0)
            return j;
    return -1;
}

static int any_time_twice(const paths_t *times)
{
    for (int a = 0; a < times->n; a++)
        for (int b = a + 1; b < times->n; b++)
            if (strcmp(times->v[a], times->v[b]) == 0)
                return 1;
    return 0;
}

static void print_outcome(const char *out_dir, int64_t n_rows, int n_files, const report_outcome_t *outcome)
{
    printf("report: %s/report.html, %s/report_full.md (%lld rows from %d file%s; %d plots", out_dir, out_dir,
           (long long)n_rows, n_files, n_files == 1 ? "" : "s", outcome->plots_drawn);
    if (outcome->plots_failed)
        printf(", %d failed", outcome->plots_failed);
    if (!outcome->gnuplot_found)
        printf(": gnuplot not on PATH");
    if (outcome->nfmaps)
        printf("; %d non-finite map%s", outcome->nfmaps, outcome->nfmaps == 1 ? "" : "s");
    if (outcome->history_runs)
        printf("; trend over %d runs", outcome->history_runs);
    printf(")\n");
}

static int apply_report_option(void *args, const cli_value_t *v)
{
    report_args_t *a = args;
    int bad = 0;
    if (v->id == OPT_HISTORY)
        bad = add_history(&a->history, v->arg);
    else if (v->id == OPT_CASE)
        bad = paths_add(&a->cases, v->arg);
    return bad ? EXIT_USAGE : CLI_GO_ON;
}

static int cli_report(int argc, char **argv)
{
    report_args_t a;
    memset(&a, 0, sizeof a);
    report_options_init(&a.opt);
    a.opt.write_tables = 1;
    int rc = cli_parse(&cli_report_command, argc, argv, &a, apply_report_option);
    if (rc != CLI_GO_ON) {
        paths_free(&a.history);
        paths_free(&a.cases);
        return rc;
    }
    report_options_t opt = a.opt;
    const char *out_dir = a.out_dir;
    paths_t history = a.history, cases = a.cases;
    int status = 0;
    if (status == 0 && (!out_dir || optind >= argc)) {
        fprintf(stderr, "kreplay report: need -o DIR and at least one results file (or run directory)\n"
                        "Run 'kreplay help report' for its options.\n");
        status = EXIT_USAGE;
    }
    result_list_t rows = {0};
    results_meta_t meta;
    memset(&meta, 0, sizeof meta);
    kr_error_t err = {{0}};
    int n_files = 0;
    paths_t files = {0}, times = {0};
    char newest_time[64] = "";
    int newest = -1, newest_drill = 0, drills = 0;
    for (int i = optind; status == 0 && i < argc; i++) {
        char path[4400];
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            snprintf(path, sizeof path, "%s/results.h5", argv[i]);
        else
            snprintf(path, sizeof path, "%s", argv[i]);
        result_list_t part;
        results_meta_t m;
        if (results_store_read(path, &part, &m, &err) || results_check_unique(&part, path, &err)) {
            result_list_free(&part);
            status = cli_error(&err);
            break;
        }
        if (n_files == 0)
            meta = m;
        /* A drill (an injected fault) is the report's run only when no other run is given. */
        const int drill = report_run_injected(&m);
        drills += drill;
        if (newest < 0 || (newest_drill && !drill) || (drill == newest_drill && strcmp(m.time_utc, newest_time) > 0)) {
            newest = n_files;
            newest_drill = drill;
            snprintf(newest_time, sizeof newest_time, "%s", m.time_utc);
        }
        for (int64_t j = 0; j < part.count; j++) {
            result_t *r = result_list_add(&rows);
            if (!r) {
                fprintf(stderr, "kreplay: error: out of memory\n");
                status = EXIT_USAGE;
                break;
            }
            *r = part.rows[j];
        }
        result_list_free(&part);
        if (paths_add(&files, path) || paths_add(&times, m.time_utc))
            status = EXIT_USAGE;
        n_files++;
    }
    if (status == 0 && n_files > 1) {
        if (result_list_sort(&rows)) {
            fprintf(stderr, "kreplay: error: out of memory\n");
            status = EXIT_USAGE;
        }
        int64_t overlap = status == 0 ? first_repeated_row(&rows) : -1;
        /* Files from one run (the same time) may only be its shards. */
        int same_run = any_time_twice(&times);
        if (overlap >= 0 && same_run) {
            kr_fail(&err, "the row (%s, %s, %s) is in two of the files: overlapping shards or the same run twice",
                    rows.rows[overlap].case_path, rows.rows[overlap].kernel, rows.rows[overlap].reference);
            status = cli_error(&err);
        } else if (overlap >= 0) {
            /* The same rows in several files: several runs (one results.h5 per run),
             * not shards.  The newest is the report's run, the others its trend. */
            result_list_free(&rows);
            memset(&rows, 0, sizeof rows);
            if (results_store_read(files.v[newest], &rows, &meta, &err)) {
                status = cli_error(&err);
            }
            for (int k = 0; status == 0 && k < files.n; k++)
                if (k != newest && paths_add(&history, files.v[k]))
                    status = EXIT_USAGE;
            char shown[sizeof newest_time];
            kr_str_printable(newest_time, shown, sizeof shown);
            if (status == 0)
                printf("report: %d runs' results (the same rows in each): reporting the newest%s, %s (%s), "
                       "with the other %d as its history\n",
                       n_files, drills && !newest_drill ? " without an injected fault" : "", files.v[newest],
                       shown, n_files - 1);
        } else {
            snprintf(meta.shard, sizeof meta.shard, "merged %d files", n_files);
        }
    }
    paths_free(&files);
    paths_free(&times);
    if (status == 0) {
        report_outcome_t outcome;
        opt.meta = &meta;
        opt.case_paths = (const char **)cases.v;
        opt.n_case_paths = cases.n;
        opt.outcome = &outcome;
        if (report_generate(out_dir, &rows, (const char **)history.v, history.n, &opt, &err)) {
            status = cli_error(&err);
        } else {
            print_outcome(out_dir, rows.count, n_files, &outcome);
            /* As the gate would exit on these rows: 1 when any fails. */
            for (int64_t i = 0; i < rows.count && status == 0; i++)
                if (verdict_is_failure(rows.rows[i].verdict))
                    status = EXIT_VERDICT_FAILED;
        }
    }
    result_list_free(&rows);
    paths_free(&history);
    paths_free(&cases);
    return status;
}
