/* kreplay report RESULTS.h5|RUNDIR... -o DIR [--history DIR] [--baseline FILE] [--case CASE.h5]... */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "report_bundle.h"
#include "results_store.h"

static void report_usage(FILE *fp)
{
    fprintf(fp,
            "usage: kreplay report RESULTS.h5|RUNDIR... -o DIR [options]\n"
            "\n"
            "Regenerates a report directory from results files alone: DIR/report.html (one\n"
            "self-contained page, plots inline as SVG), DIR/report_full.md (plots as\n"
            "plots/*.png), DIR/plots/, and results.json, results.csv, report.md.  Several\n"
            "files (the shards of one run) are reported as one run.\n"
            "\n"
            "  -o, --out DIR            the report directory (required)\n"
            "      --history DIR|FILE   earlier runs' results files (a directory: its *.h5),\n"
            "                           for the error trend; may be repeated\n"
            "      --last N             the trend keeps the last N history runs (default 10)\n"
            "      --baseline FILE      a baseline results file: the trend's first point\n"
            "      --case CASE.h5       draw the non-finite map of this case's x; may be repeated\n"
            "                           (cases the rows name are mapped when their files exist and\n"
            "                           their x held non-finite values)\n"
            "      --no-case-lookup     map only the --case files\n"
            "      --no-plots           do not run gnuplot\n"
            "      --title TEXT         the page's title\n"
            "  -q, --quiet              no warnings\n"
            "\n"
            "Plots need gnuplot on PATH; without it the report is written without plots.\n"
            "Exit: 0 written, 2 usage or input error.\n");
}

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

int cli_report(int argc, char **argv)
{
    enum { OPT_HISTORY = 256, OPT_LAST, OPT_BASE, OPT_CASE, OPT_NOLOOKUP, OPT_NOPLOTS, OPT_TITLE };
    static const struct option longopts[] = {
        {"out", required_argument, 0, 'o'},
        {"history", required_argument, 0, OPT_HISTORY},
        {"last", required_argument, 0, OPT_LAST},
        {"baseline", required_argument, 0, OPT_BASE},
        {"case", required_argument, 0, OPT_CASE},
        {"no-case-lookup", no_argument, 0, OPT_NOLOOKUP},
        {"no-plots", no_argument, 0, OPT_NOPLOTS},
        {"title", required_argument, 0, OPT_TITLE},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    report_options_t opt;
    report_options_init(&opt);
    opt.write_tables = 1;
    const char *out_dir = NULL;
    paths_t history = {0}, cases = {0};
    int status = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out_dir = optarg; break;
        case OPT_HISTORY:
            if (add_history(&history, optarg))
                status = EXIT_USAGE;
            break;
        case OPT_LAST:
            opt.history_last = atoi(optarg);
            if (opt.history_last < 1) {
                fprintf(stderr, "kreplay report: --last: expected a positive count, got '%s'\n", optarg);
                status = EXIT_USAGE;
            }
            break;
        case OPT_BASE: opt.baseline_path = optarg; break;
        case OPT_CASE:
            if (paths_add(&cases, optarg))
                status = EXIT_USAGE;
            break;
        case OPT_NOLOOKUP: opt.find_cases = 0; break;
        case OPT_NOPLOTS: opt.plots = 0; break;
        case OPT_TITLE: opt.title = optarg; break;
        case 'q': opt.quiet = 1; break;
        case 'h':
            report_usage(stdout);
            paths_free(&history);
            paths_free(&cases);
            return 0;
        default:
            report_usage(stderr);
            paths_free(&history);
            paths_free(&cases);
            return EXIT_USAGE;
        }
    }
    if (status == 0 && (!out_dir || optind >= argc)) {
        fprintf(stderr, "kreplay report: need -o DIR and at least one results file (or run directory)\n");
        report_usage(stderr);
        status = EXIT_USAGE;
    }
    result_list_t rows = {0};
    results_meta_t meta;
    memset(&meta, 0, sizeof meta);
    kr_error_t err = {{0}};
    int n_files = 0;
    for (int i = optind; status == 0 && i < argc; i++) {
        char path[4400];
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            snprintf(path, sizeof path, "%s/results.h5", argv[i]);
        else
            snprintf(path, sizeof path, "%s", argv[i]);
        result_list_t part;
        results_meta_t m;
        if (results_store_read(path, &part, &m, &err)) {
            fprintf(stderr, "kreplay: error: %s\n", err.msg);
            status = EXIT_USAGE;
            break;
        }
        if (n_files == 0)
            meta = m;
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
        n_files++;
    }
    if (status == 0 && n_files > 1) {
        if (result_list_sort(&rows)) {
            fprintf(stderr, "kreplay: error: out of memory\n");
            status = EXIT_USAGE;
        }
        for (int64_t j = 1; status == 0 && j < rows.count; j++)
            if (result_key_cmp(&rows.rows[j - 1], &rows.rows[j]) == 0) {
                fprintf(stderr,
                        "kreplay: error: the row (%s, %s, %s) is in two of the files: overlapping shards or the "
                        "same run twice\n",
                        rows.rows[j].case_path, rows.rows[j].kernel, rows.rows[j].reference);
                status = EXIT_USAGE;
            }
        snprintf(meta.shard, sizeof meta.shard, "merged %d files", n_files);
    }
    if (status == 0) {
        report_outcome_t outcome;
        opt.meta = &meta;
        opt.case_paths = (const char **)cases.v;
        opt.n_case_paths = cases.n;
        opt.outcome = &outcome;
        if (report_generate(out_dir, &rows, (const char **)history.v, history.n, &opt, &err)) {
            fprintf(stderr, "kreplay: error: %s\n", err.msg);
            status = EXIT_USAGE;
        } else {
            printf("report: %s/report.html, %s/report_full.md (%lld rows from %d file%s; %d plots",
                   out_dir, out_dir, (long long)rows.count, n_files, n_files == 1 ? "" : "s", outcome.plots_drawn);
            if (outcome.plots_failed)
                printf(", %d failed", outcome.plots_failed);
            if (!outcome.gnuplot_found)
                printf(": gnuplot not on PATH");
            if (outcome.nfmaps)
                printf("; %d non-finite map%s", outcome.nfmaps, outcome.nfmaps == 1 ? "" : "s");
            if (outcome.history_runs)
                printf("; trend over %d runs", outcome.history_runs);
            printf(")\n");
        }
    }
    result_list_free(&rows);
    paths_free(&history);
    paths_free(&cases);
    return status;
}
