#include "report_bundle.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "out_stage.h"
#include "case_io.h"
#include "case_load.h"
#include "case_name.h"
#include "escape.h"
#include "gnuplot.h"
#include "input_health.h"
#include "kr_string.h"
#include "plots.h"
#include "progress.h"
#include "ref_parallel.h"
#include "report.h"
#include "report_history.h"
#include "report_html.h"
#include "verdict.h"

#define MAX_NFMAPS 8

static const report_options_t REPORT_DEFAULTS = {
    .find_cases = 1,
    .history_last = 10,
    .plots = 1,
    .progress = 1,
};

const char *const REPORT_DIR_NAMES[6] = {"report.html", "report_full.md", "plots",
                                         "results.json", "results.csv", "report.md"};

void report_options_init(report_options_t *o)
{
    *o = REPORT_DEFAULTS;
}

static void warn(const report_options_t *o, const char *fmt, const char *a, const char *b)
{
    if (o->quiet)
        return;
    fputs("kreplay report: warning: ", stderr);
    fprintf(stderr, fmt, a ? a : "", b ? b : "");
    fputc('\n', stderr);
}

/* ------------------------------------------------------------------ history */

/* What a run is called: its directory (RUNDIR/results.h5), else its file's
 * stem -- unless that is only the time stamp a history file is named by. */
static void run_name(const char *path, const results_meta_t *m, char *buf, size_t cap)
{
    char p[512];
    kr_strlcpy(p, path, sizeof p);
    char *base = strrchr(p, '/');
    if (base && !strcmp(base + 1, "results.h5")) {
        *base = '\0';
        base = strrchr(p, '/');
    }
    const char *name = base ? base + 1 : p;
    char stem[128];
    kr_strlcpy(stem, name, sizeof stem);
    const size_t n = strlen(stem);
    if (n > 3 && !strcmp(stem + n - 3, ".h5"))
        stem[n - 3] = '\0';
    const size_t tl = strlen(m->time_utc);
    snprintf(buf, cap, "%s", tl >= 10 && !strncmp(stem, m->time_utc, 10) ? "" : stem);
}

/* "today 05-01 03:00 abcdef1": the run's name, time (to the second with
 * seconds, when asked) and short commit. */
static void run_label(const char *path, const results_meta_t *m, int seconds, char *buf, size_t cap)
{
    const char *t = m->time_utc;
    char when[32] = "", name[64];
    if (strlen(t) >= 19)
        snprintf(when, sizeof when, "%.5s %.*s", t + 5, seconds ? 8 : 5, t + 11);
    else
        kr_strlcpy(when, t, sizeof when);
    run_name(path, m, name, sizeof name);
    snprintf(buf, cap, "%s%s%s %.7s", name, name[0] ? " " : "", when, m->git_commit);
}

/* The trend's labels made distinct: both of two that read the same get
 * their seconds, then any still the same are numbered. */
static void distinct_labels(report_run_t *runs, int n, const hist_run_t *const *src)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (!strcmp(runs[i].label, runs[j].label) && src[i] && src[j]) {
                run_label(src[i]->path, &src[i]->meta, 1, runs[i].label, sizeof runs[i].label);
                run_label(src[j]->path, &src[j]->meta, 1, runs[j].label, sizeof runs[j].label);
            }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (!strcmp(runs[i].label, runs[j].label)) {
                const size_t l = strlen(runs[j].label);
                snprintf(runs[j].label + l, sizeof runs[j].label - l, " #%d", j + 1);
            }
}

int report_run_injected(const results_meta_t *m)
{
    return m && strstr(m->command, "--inject") != NULL;
}

static void run_counts(const result_list_t *rows, report_run_t *r)
{
    r->rows = rows->count;
    r->failing = r->regressed = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        r->failing += verdict_is_failure(rows->rows[i].verdict);
        r->regressed += rows->rows[i].verdict == VERDICT_REGRESSED;
    }
}

/* ------------------------------------------------------------ nfmap cases */

typedef struct {
    report_nfmap_t map;
    char *describe;
} nfmap_item_t;

static int path_listed(char paths[][512], int n, const char *p)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(paths[i], p))
            return 1;
    return 0;
}

/* The name rows use for a case path, else the file's short name. */
static void name_for_case(const result_list_t *rows, const char *path, char *buf, int cap)
{
    for (int64_t i = 0; i < rows->count; i++)
        if (!strcmp(rows->rows[i].case_path, path)) {
            kr_strlcpy(buf, rows->rows[i].case_name, (size_t)cap);
            return;
        }
    case_short_name(path, buf, cap);
}

/* Maps one case: its description, and a plot when x has non-finite values. */
static int map_case(const char *path, const result_list_t *rows, plot_list_t *pl, nfmap_item_t *out,
                    const report_options_t *o, kr_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->map.plot = -1;
    case_t c;
    kr_error_t e = {{0}};
    if (case_load_safe(path, &c, NULL, 0, &e)) {   /* a path from a file: read in isolation */
        warn(o, "no non-finite map: %s%s", e.msg, "");
        return 1;
    }
    kr_strlcpy(out->map.case_path, path, sizeof out->map.case_path);
    name_for_case(rows, path, out->map.case_name, (int)sizeof out->map.case_name);
    int rc = 0;
    if (!c.x) {
        out->describe = strdup("x: not in the case (no map)");
    } else {
        input_map_t m;
        if (input_map_compute(c.x, c.M, c.K, &m, &e)) {
            case_free(&c);
            return kr_fail(err, "%s: %s", path, e.msg);
        }
        char buf[4096];
        input_map_describe(&m, buf, sizeof buf);
        out->describe = strdup(buf);
        if (nonfinite_total(&m.nf) > 0) {
            int before = pl->count;
            rc = plots_nfmap(pl, out->map.case_name, path, c.x, c.M, c.K, &m, err);
            if (rc == 0 && pl->count > before)
                out->map.plot = before;
        }
        input_map_free(&m);
    }
    case_free(&c);
    if (!out->describe)
        return kr_fail(err, "out of memory");
    out->map.describe = out->describe;
    return rc;
}

/* ------------------------------------------------------------ file writing */

static int write_bytes(const char *path, const char *data, size_t len, kr_error_t *err)
{
    atomic_file_t f;
    if (atomic_file_open(&f, path, err))
        return -1;
    if (len && fwrite(data, 1, len, f.fp) != len) {
        int e = errno;
        atomic_file_abort(&f);
        return kr_fail(err, "%s: write failed: %s", path, strerror(e));
    }
    return atomic_file_commit(&f, err);
}

/* ------------------------------------------------------------------- main */

/* One report's working state, shared by the steps of report_generate. */
typedef struct {
    const report_options_t *o;
    const result_list_t *rows;
    hist_run_t *hist;                   /* earlier runs, oldest first */
    int n_hist;
    hist_run_t base;
    int have_base;
    char base_of[64];                   /* the history run the baseline is a copy of ("" none) */
    plot_run_t *pruns;
    report_run_t *truns;
    int n_runs;                         /* baseline + kept history + this run */
    plot_list_t pl;
    nfmap_item_t *maps;
    int n_maps;
    report_plot_t *refs;
    char **svgs;
    int *written;
    char (*pngs)[128];
    char note[512];
    report_outcome_t outcome;
} report_build_t;

static int write_tables(const char *out_dir, const result_list_t *rows, const report_options_t *o,
                        kr_error_t *err)
{
    run_info_t info;
    const results_meta_t *m = o->meta;
    run_info_fill(&info, m ? m->command : "", m && m->version[0] ? m->version : "unknown",
                  m && m->git_commit[0] ? m->git_commit : "unknown");
    if (m && m->host[0])
        kr_strlcpy(info.host, m->host, sizeof info.host);
    if (m && m->time_utc[0])
        kr_strlcpy(info.time_utc, m->time_utc, sizeof info.time_utc);
    return report_write_dir(out_dir, rows, &info, err);
}

/* A baseline is a copy of a run: a history run that is the same run is
 * the baseline's point (named in its label), and a baseline that is this
 * very run is no point of its own. */
static void drop_baseline_copies(report_build_t *b)
{
    const results_meta_t *bm = &b->base.meta;
    if (report_same_run(b->o->meta, bm, b->rows->count, b->base.rows.count)) {
        result_list_free(&b->base.rows);
        b->have_base = 0;
        return;
    }
    int k = 0;
    for (int i = 0; i < b->n_hist; i++) {
        if (report_same_run(bm, &b->hist[i].meta, b->base.rows.count, b->hist[i].rows.count)) {
            run_name(b->hist[i].path, &b->hist[i].meta, b->base_of, sizeof b->base_of);
            result_list_free(&b->hist[i].rows);
            continue;
        }
        b->hist[k++] = b->hist[i];
    }
    b->n_hist = k;
}

/* The history: earlier runs, oldest first, the last history_last of them;
 * and the baseline, when one is named and readable. */
static int load_history(report_build_t *b, const char **history_paths, int n_history, kr_error_t *err)
{
    const report_options_t *o = b->o;
    if (report_history_load(history_paths, n_history, o->history_last, o->meta, b->rows->count,
                            o->quiet, &b->hist, &b->n_hist, err))
        return -1;
    if (o->baseline_path) {
        kr_error_t e = {{0}};
        if (results_store_read(o->baseline_path, &b->base.rows, &b->base.meta, &e))
            warn(o, "baseline not in the trend: %s%s", e.msg, "");
        else {
            b->have_base = 1;
            kr_strlcpy(b->base.path, o->baseline_path, sizeof b->base.path);
        }
    }
    if (b->have_base)
        drop_baseline_copies(b);
    return 0;
}

/* An earlier run (or the baseline) as a trend point. */
static void trend_run(plot_run_t *pr, report_run_t *tr, const hist_run_t *h)
{
    pr->rows = &h->rows;
    kr_strlcpy(tr->path, h->path, sizeof tr->path);
    kr_strlcpy(tr->time_utc, h->meta.time_utc, sizeof tr->time_utc);
    kr_strlcpy(tr->git_commit, h->meta.git_commit, sizeof tr->git_commit);
    run_counts(&h->rows, tr);
}

/* The runs of the trend: the baseline, the kept history, this run. */
static int fill_runs(report_build_t *b, kr_error_t *err)
{
    b->n_runs = b->have_base + b->n_hist + 1;
    b->pruns = calloc((size_t)b->n_runs, sizeof *b->pruns);
    b->truns = calloc((size_t)b->n_runs, sizeof *b->truns);
    b->maps = calloc(MAX_NFMAPS, sizeof *b->maps);
    const hist_run_t **src = calloc((size_t)b->n_runs, sizeof *src);
    if (!b->pruns || !b->truns || !b->maps || !src) {
        free(src);
        return kr_fail(err, "report: out of memory");
    }
    int k = 0;
    if (b->have_base) {
        trend_run(&b->pruns[k], &b->truns[k], &b->base);
        snprintf(b->truns[k].label, sizeof b->truns[k].label, "baseline%s%s", b->base_of[0] ? " = " : "",
                 b->base_of);
        k++;
    }
    /* This run in time order among the others (runs newer than it -- drills
     * reported beside it -- come after it). */
    const char *now = b->o->meta ? b->o->meta->time_utc : "";
    int here = -1;
    for (int i = 0; i <= b->n_hist; i++, k++) {
        if (here < 0 && (i == b->n_hist || (now[0] && strcmp(b->hist[i].meta.time_utc, now) > 0))) {
            here = k;
            b->pruns[k].rows = b->rows;
            kr_strlcpy(b->truns[k].label, "this run", sizeof b->truns[k].label);
            kr_strlcpy(b->truns[k].time_utc, now, sizeof b->truns[k].time_utc);
            if (b->o->meta)
                kr_strlcpy(b->truns[k].git_commit, b->o->meta->git_commit, sizeof b->truns[k].git_commit);
            run_counts(b->rows, &b->truns[k]);
            k++;
        }
        if (i == b->n_hist)
            break;
        trend_run(&b->pruns[k], &b->truns[k], &b->hist[i]);
        run_label(b->hist[i].path, &b->hist[i].meta, 0, b->truns[k].label, sizeof b->truns[k].label);
        src[k] = &b->hist[i];
    }
    distinct_labels(b->truns, b->n_runs, src);
    free(src);
    for (int i = 0; i < b->n_runs; i++)
        b->pruns[i].label = b->truns[i].label;
    return 0;
}

/* The cases whose non-finite inputs get a map: those named (--case), then,
 * with find_cases, those of rows with non-finite inputs still readable. */
static int list_nfmap_cases(const report_build_t *b, char listed[MAX_NFMAPS][512])
{
    const report_options_t *o = b->o;
    const result_list_t *rows = b->rows;
    int n_listed = 0;
    for (int i = 0; i < o->n_case_paths && n_listed < MAX_NFMAPS; i++)
        if (!path_listed(listed, n_listed, o->case_paths[i]))
            kr_strlcpy(listed[n_listed++], o->case_paths[i], 512);
    int explicit_n = n_listed;
    for (int64_t i = 0; o->find_cases && i < rows->count && n_listed < MAX_NFMAPS; i++) {
        const result_t *r = &rows->rows[i];
        if (nonfinite_total(&r->input_nf) == 0 || path_listed(listed, n_listed, r->case_path) ||
            access(r->case_path, R_OK) != 0)
            continue;
        /* a --case naming the same file another way (./x.h5, an absolute path) */
        int dup = 0;
        char rn[128], ln[128];
        case_short_name(r->case_path, rn, sizeof rn);
        for (int j = 0; j < explicit_n && !dup; j++) {
            case_short_name(listed[j], ln, sizeof ln);
            dup = !strcmp(rn, ln);
        }
        if (!dup)
            kr_strlcpy(listed[n_listed++], r->case_path, 512);
    }
    return n_listed;
}

/* The plots built from rows, then the trend, then the non-finite maps. */
static int build_plots(report_build_t *b, kr_error_t *err)
{
    if (plots_from_rows(&b->pl, b->rows, err) ||
        (b->n_runs >= 2 && plots_trend(&b->pl, b->pruns, b->n_runs, err)))
        return -1;
    char listed[MAX_NFMAPS][512];
    int n_listed = list_nfmap_cases(b, listed);
    for (int i = 0; i < n_listed; i++) {
        int m = map_case(listed[i], b->rows, &b->pl, &b->maps[b->n_maps], b->o, err);
        if (m < 0)
            return -1;
        if (m == 0)
            b->n_maps++;
    }
    b->outcome.nfmaps = 0;
    for (int i = 0; i < b->n_maps; i++)
        b->outcome.nfmaps += b->maps[i].map.plot >= 0;
    b->outcome.history_runs = b->n_runs >= 2 ? b->n_runs : 0;
    return 0;
}

/* Plot i from its two renders (SVG kept in memory for the HTML, and PNG),
 * under plots_dir.  A plot gnuplot cannot draw is a warning; a file that
 * cannot be written is an error. */
static int write_one_plot(report_build_t *b, int i, gnuplot_job_t *svg, gnuplot_job_t *png,
                          const char *plots_dir, kr_error_t *err)
{
    const plot_t *p = &b->pl.items[i];
    char path[4400];
    if (svg->rc) {
        warn(b->o, "plot %s not drawn: %s", p->name, svg->err.msg);
        b->outcome.plots_failed++;
        return 0;
    }
    b->svgs[i] = svg->out;
    svg->out = NULL;
    snprintf(path, sizeof path, "%s/%s.svg", plots_dir, p->name);
    if (write_bytes(path, b->svgs[i], svg->out_len, err))
        return -1;
    b->written[i] = 1;
    b->outcome.plots_drawn++;
    if (png->rc == 0) {
        snprintf(path, sizeof path, "%s/%s.png", plots_dir, p->name);
        if (write_bytes(path, png->out, png->out_len, err))
            return -1;
        snprintf(b->pngs[i], sizeof b->pngs[i], "plots/%.100s.png", p->name);
    } else {
        warn(b->o, "PNG of plot %s not drawn: %s", p->name, png->err.msg);
    }
    return 0;
}

static int draw_plots(report_build_t *b, const char *plots_dir, kr_error_t *err)
{
    const report_options_t *o = b->o;
    if (!o->plots) {
        snprintf(b->note, sizeof b->note, "Plots not drawn (plots turned off).");
        return 0;
    }
    if (!b->outcome.gnuplot_found) {
        snprintf(b->note, sizeof b->note,
                 "Plots not drawn: gnuplot was not found on PATH (install gnuplot-nox, then run kreplay report "
                 "again).");
        warn(o, "gnuplot not found on PATH: writing the report without plots%s%s", "", "");
        return 0;
    }
    if (!b->pl.count)
        return 0;
    if (make_dirs(plots_dir, err))
        return -1;
    progress_t prog;
    if (o->progress)
        progress_start(&prog, "kreplay report: plots", b->pl.count);
    else
        progress_start_on(&prog, stderr, 0, "", b->pl.count);
    /* Every plot's SVG and PNG rendered first, a gnuplot per core at once,
     * then written in plot order (the same files and warnings as one by one). */
    const int n = b->pl.count;
    gnuplot_job_t *jobs = calloc((size_t)(2 * n), sizeof *jobs);
    if (!jobs) {
        progress_finish(&prog);
        return kr_fail(err, "out of memory rendering %d plots", n);
    }
    for (int i = 0; i < n; i++) {
        const plot_t *p = &b->pl.items[i];
        jobs[2 * i] = (gnuplot_job_t){.script = p->script, .term = GNUPLOT_SVG,
                                      .width = p->width, .height = p->height};
        jobs[2 * i + 1] = (gnuplot_job_t){.script = p->script, .term = GNUPLOT_PNG,
                                          .width = p->width, .height = p->height};
    }
    gnuplot_render_all(jobs, 2 * n, ref_default_threads());
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        rc = write_one_plot(b, i, &jobs[2 * i], &jobs[2 * i + 1], plots_dir, err);
        progress_update(&prog, i + 1);
    }
    for (int i = 0; i < 2 * n; i++)
        free(jobs[i].out);
    free(jobs);
    progress_finish(&prog);
    if (rc)
        return -1;
    if (b->outcome.plots_failed)
        snprintf(b->note, sizeof b->note, "%d of %d plots could not be drawn (gnuplot's message is on stderr).",
                 b->outcome.plots_failed, b->pl.count);
    return 0;
}

/* report.html, then report_full.md, from the drawn plots and maps. */
static int write_documents(report_build_t *b, const char *out_dir, kr_error_t *err)
{
    for (int i = 0; i < b->pl.count; i++) {
        b->refs[i].name = b->pl.items[i].name;
        b->refs[i].title = b->pl.items[i].title;
        b->refs[i].kind = b->pl.items[i].kind;
        b->refs[i].case_path = b->pl.items[i].case_path;
        b->refs[i].svg = b->svgs[i];
        b->refs[i].png = b->pngs[i][0] ? b->pngs[i] : NULL;
    }
    report_nfmap_t *mv = calloc((size_t)(b->n_maps ? b->n_maps : 1), sizeof *mv);
    if (!mv)
        return kr_fail(err, "report: out of memory");
    for (int i = 0; i < b->n_maps; i++)
        mv[i] = b->maps[i].map;
    report_doc_t doc = {
        .rows = b->rows, .meta = b->o->meta, .plots = b->refs, .n_plots = b->pl.count, .nfmaps = mv,
        .n_nfmaps = b->n_maps, .runs = b->truns, .n_runs = b->n_runs >= 2 ? b->n_runs : 0,
        .plots_note = b->note[0] ? b->note : NULL, .title = b->o->title};
    char path[4400];
    atomic_file_t f;
    int rc;
    snprintf(path, sizeof path, "%s/report.html", out_dir);
    if (atomic_file_open(&f, path, err) == 0) {
        report_html_write(f.fp, &doc);
        rc = atomic_file_commit(&f, err);
    } else {
        rc = -1;
    }
    snprintf(path, sizeof path, "%s/report_full.md", out_dir);
    if (rc == 0 && atomic_file_open(&f, path, err) == 0) {
        report_full_md_write(f.fp, &doc);
        rc = atomic_file_commit(&f, err);
    } else if (rc == 0) {
        rc = -1;
    }
    free(mv);
    return rc;
}

/* Draws the plots and writes the documents (into the staging directory: its
 * plots/ holds this report's plots alone). */
static int draw_and_write(report_build_t *b, const char *out_dir, kr_error_t *err)
{
    size_t n = (size_t)(b->pl.count ? b->pl.count : 1);
    b->refs = calloc(n, sizeof *b->refs);
    b->svgs = calloc(n, sizeof *b->svgs);
    b->written = calloc(n, sizeof *b->written);
    b->pngs = calloc(n, sizeof *b->pngs);
    if (!b->refs || !b->svgs || !b->written || !b->pngs)
        return kr_fail(err, "report: out of memory");
    char plots_dir[4200];
    if ((size_t)snprintf(plots_dir, sizeof plots_dir, "%s/plots", out_dir) >= sizeof plots_dir)
        return kr_fail(err, "%s: path too long; expected under 4096 bytes", out_dir);
    b->outcome.gnuplot_found = gnuplot_available();
    if (draw_plots(b, plots_dir, err))
        return -1;
    return write_documents(b, out_dir, err);
}

static void report_build_free(report_build_t *b)
{
    for (int i = 0; i < b->pl.count && b->svgs; i++)
        free(b->svgs[i]);
    free(b->svgs);
    free(b->written);
    free(b->refs);
    free(b->pngs);
    for (int i = 0; i < b->n_maps; i++)
        free(b->maps[i].describe);
    free(b->maps);
    plot_list_free(&b->pl);
    free(b->pruns);
    free(b->truns);
    report_history_free(b->hist, b->n_hist);
    if (b->have_base)
        result_list_free(&b->base.rows);
}

int report_generate(const char *out_dir, const result_list_t *rows, const char **history_paths, int n_history,
                    const report_options_t *opt_in, kr_error_t *err)
{
    report_options_t defaults;
    report_options_init(&defaults);
    const report_options_t *o = opt_in ? opt_in : &defaults;
    if (!out_dir || !out_dir[0])
        return kr_fail(err, "report: no output directory");
    /* Written into a fresh staging directory, moved into place whole. */
    out_stage_t st;
    if (out_stage_begin(&st, out_dir, err))
        return -1;
    report_build_t b;
    memset(&b, 0, sizeof b);
    b.o = o;
    b.rows = rows;
    int rc = (o->write_tables && write_tables(st.path, rows, o, err)) ||
                     load_history(&b, history_paths, n_history, err) || fill_runs(&b, err) ||
                     build_plots(&b, err) || draw_and_write(&b, st.path, err) ||
                     out_stage_commit(&st, REPORT_DIR_NAMES, o->write_tables ? 6 : 3, err)
                 ? -1 : 0;
    if (rc)
        out_stage_abort(&st);
    if (o->outcome)
        *o->outcome = b.outcome;
    report_build_free(&b);
    return rc;
}
