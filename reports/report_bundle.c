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
#include "case_io.h"
#include "case_name.h"
#include "escape.h"
#include "gnuplot.h"
#include "input_health.h"
#include "kr_string.h"
#include "plots.h"
#include "progress.h"
#include "report.h"
#include "report_html.h"
#include "verdict.h"

#define MAX_NFMAPS 8

void report_options_init(report_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->find_cases = 1;
    o->history_last = 10;
    o->plots = 1;
    o->progress = 1;
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

typedef struct {
    result_list_t rows;
    results_meta_t meta;
    char path[512];
} hist_run_t;

static int hist_cmp(const void *a, const void *b)
{
    const hist_run_t *x = a, *y = b;
    int c = strcmp(x->meta.time_utc, y->meta.time_utc);
    return c ? c : strcmp(x->path, y->path);
}

static int same_run(const results_meta_t *a, const results_meta_t *b, int64_t rows_a, int64_t rows_b)
{
    return a && b && a->time_utc[0] && !strcmp(a->time_utc, b->time_utc) && !strcmp(a->git_commit, b->git_commit) &&
           !strcmp(a->suite_hash, b->suite_hash) && rows_a == rows_b;
}

/* "2024-05-01T03:00:00Z" + "abcdef123456" -> "05-01 03:00 abcdef1" */
static void run_label(const results_meta_t *m, const char *fallback, char *buf, size_t cap)
{
    const char *t = m->time_utc;
    char when[32] = "";
    if (strlen(t) >= 16)
        snprintf(when, sizeof when, "%.5s %.5s", t + 5, t + 11);
    else
        kr_strlcpy(when, t, sizeof when);
    if (when[0] || m->git_commit[0])
        snprintf(buf, cap, "%s %.7s", when, m->git_commit);
    else
        kr_strlcpy(buf, fallback, cap);
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
    if (case_read(path, &c, &e)) {
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

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Removes DIR/plots/ *.svg and *.png that this report did not write. */
static void remove_stale_plots(const char *plots_dir, const plot_list_t *pl, const int *written)
{
    DIR *d = opendir(plots_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (!ends_with(n, ".svg") && !ends_with(n, ".png"))
            continue;
        int keep = 0;
        for (int i = 0; i < pl->count && !keep; i++) {
            size_t len = strlen(pl->items[i].name);
            keep = written[i] && !strncmp(n, pl->items[i].name, len) && (!strcmp(n + len, ".svg") || !strcmp(n + len, ".png"));
        }
        if (!keep) {
            char path[4600];
            snprintf(path, sizeof path, "%s/%s", plots_dir, n);
            unlink(path);
        }
    }
    closedir(d);
}

/* --------------------------------------------------------------- Markdown */

static void md(FILE *fp, const char *s)
{
    esc_markdown(fp, s);
}

static void md_num(FILE *fp, double v)
{
    if (isnan(v))
        fputs(" |", fp);
    else
        fprintf(fp, " %.4g |", v);
}

static void md_row_brief(FILE *fp, const result_t *r)
{
    fputs("| ", fp);
    md(fp, r->case_name);
    fprintf(fp, " | %lld | %lld | %lld | ", (long long)r->M, (long long)r->N, (long long)r->K);
    md(fp, r->band);
    fputs(" | ", fp);
    md(fp, r->kernel);
    fputs(" | ", fp);
    md(fp, r->reference);
    fputs(" |", fp);
    md_num(fp, r->metrics.rel_fro);
    md_num(fp, r->threshold > 0 ? r->threshold : NAN);
    fprintf(fp, " %s | ", verdict_name(r->verdict));
    md(fp, r->note);
    if (r->diagnosis[0]) {
        fputs(" **Diagnosis:** ", fp);
        md(fp, r->diagnosis);
    }
    fputs(" |\n", fp);
}

static const char *MD_BRIEF_HEAD = "| case | M | N | K | band | kernel | reference | rel_fro | threshold | verdict | note |\n"
                                   "|---|---:|---:|---:|---|---|---|---:|---:|---|---|\n";

static void markdown_full(FILE *fp, const report_doc_t *d)
{
    const result_list_t *rows = d->rows;
    int64_t counts[VERDICT_COUNT] = {0}, failing = 0;
    for (int64_t i = 0; i < rows->count; i++) {
        counts[rows->rows[i].verdict]++;
        failing += verdict_is_failure(rows->rows[i].verdict);
    }
    char tally[1024];
    report_verdict_tally(counts, tally, sizeof tally);
    fputs("# ", fp);
    md(fp, d->title ? d->title : "kreplay report");
    if (d->meta && d->meta->suite_name[0]) {
        fputs(": ", fp);
        md(fp, d->meta->suite_name);
    }
    fprintf(fp, "\n\n- **%s**: %lld of %lld rows fail", failing ? "FAIL" : "PASS", (long long)failing,
            (long long)rows->count);
    fputs("\n- verdicts: ", fp);
    md(fp, tally);
    fputc('\n', fp);
    plot_cell_t *cells = NULL;
    int nc = plots_cells(rows, &cells);
    if (nc > 0) {
        int w = 0;
        for (int c = 1; c < nc; c++)
            if (cells[c].worst_rel > cells[w].worst_rel)
                w = c;
        const result_t *r = &rows->rows[cells[w].worst_index];
        fprintf(fp, "- worst shape x band: %lldx%lld ", (long long)cells[w].N, (long long)cells[w].K);
        md(fp, cells[w].band);
        fprintf(fp, ", rel_fro %.4g (", cells[w].worst_rel);
        md(fp, r->kernel);
        fputs(" vs ", fp);
        md(fp, r->reference);
        fputs(", ", fp);
        md(fp, r->case_name);
        fputs(")\n", fp);
    }
    free(cells);
    if (d->meta) {
        fputs("- kreplay ", fp);
        md(fp, d->meta->version);
        fputs(" (commit ", fp);
        md(fp, d->meta->git_commit);
        fputs(") on ", fp);
        md(fp, d->meta->host);
        fputs(" at ", fp);
        md(fp, d->meta->time_utc);
        if (d->meta->command[0]) {
            fputs("\n- command: ", fp);
            esc_markdown_code(fp, d->meta->command);
        }
        fputc('\n', fp);
    }
    fputs("- the same report with the plots inline: [report.html](report.html)\n", fp);
    if (d->plots_note) {
        fputs("- ", fp);
        md(fp, d->plots_note);
        fputc('\n', fp);
    }
    fputc('\n', fp);

    for (int pass = 0; pass < 2; pass++) {
        int64_t n = 0;
        for (int64_t i = 0; i < rows->count; i++) {
            const result_t *r = &rows->rows[i];
            int is_reg = r->verdict == VERDICT_REGRESSED;
            if (pass == 0 ? !is_reg : (is_reg || !verdict_is_failure(r->verdict)))
                continue;
            if (n == 0)
                fprintf(fp, "## %s\n\n%s", pass == 0 ? "Regressions" : "Failing rows", MD_BRIEF_HEAD);
            if (n < 100)
                md_row_brief(fp, r);
            n++;
        }
        if (n > 100)
            fprintf(fp, "\n... and %lld more: see report.html\n", (long long)(n - 100));
        if (n)
            fputc('\n', fp);
    }
    int64_t idx[10];
    int n_off = report_worst_offenders(rows, idx, 10);
    if (n_off) {
        fprintf(fp, "## Worst offenders\n\nFailing rows first, then by rel_fro / threshold.\n\n%s", MD_BRIEF_HEAD);
        for (int j = 0; j < n_off; j++)
            md_row_brief(fp, &rows->rows[idx[j]]);
        fputc('\n', fp);
    }

    int any_plot = 0;
    for (int i = 0; i < d->n_plots; i++)
        any_plot |= d->plots[i].png != NULL && strcmp(d->plots[i].kind, "nfmap") != 0;
    if (any_plot) {
        fputs("## Plots\n\n", fp);
        for (int i = 0; i < d->n_plots; i++) {
            if (!d->plots[i].png || !strcmp(d->plots[i].kind, "nfmap"))
                continue;
            fputs("![", fp);
            md(fp, d->plots[i].title);
            fprintf(fp, "](%s)\n\n", d->plots[i].png);
        }
    }

    report_group_t *g = NULL;
    int ng = report_groups(rows, &g);
    if (ng > 0) {
        fputs("## Per shape x band\n\n| shape | band | kernel | reference | rows | worst rel_fro | mean rel_fro | "
              "threshold | worst rel/thr | min identical | verdicts |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|---|\n",
              fp);
        for (int i = 0; i < ng; i++) {
            char t[256];
            report_verdict_tally(g[i].verdicts, t, sizeof t);
            fprintf(fp, "| %lldx%lld | ", (long long)g[i].N, (long long)g[i].K);
            md(fp, g[i].band);
            fputs(" | ", fp);
            md(fp, g[i].kernel);
            fputs(" | ", fp);
            md(fp, g[i].reference);
            fprintf(fp, " | %d |", g[i].rows);
            md_num(fp, g[i].worst_rel);
            md_num(fp, g[i].n_rel ? g[i].sum_rel / g[i].n_rel : NAN);
            md_num(fp, g[i].threshold);
            md_num(fp, g[i].worst_ratio);
            md_num(fp, g[i].min_identical);
            fputc(' ', fp);
            md(fp, t);
            fputs(" |\n", fp);
        }
        fputc('\n', fp);
    }
    free(g);

    if (d->n_nfmaps) {
        fputs("## Non-finite inputs\n\n", fp);
        for (int m = 0; m < d->n_nfmaps; m++) {
            const report_nfmap_t *nm = &d->nfmaps[m];
            fputs("### ", fp);
            md(fp, nm->case_name);
            fputs("\n\n", fp);
            esc_markdown_code(fp, nm->case_path);
            fputs("\n\n```text\n", fp);
            for (const char *p = nm->describe ? nm->describe : ""; *p; p++)
                fputc(*p == '`' ? '\'' : *p, fp);
            fputs("\n```\n\n", fp);
            if (nm->plot >= 0 && nm->plot < d->n_plots && d->plots[nm->plot].png) {
                fputs("![", fp);
                md(fp, d->plots[nm->plot].title);
                fprintf(fp, "](%s)\n\n", d->plots[nm->plot].png);
            }
        }
    }
    if (d->n_runs >= 2) {
        fputs("## Run history\n\n| run | time (UTC) | commit | rows | failing | regressed |\n"
              "|---|---|---|---:|---:|---:|\n",
              fp);
        for (int i = 0; i < d->n_runs; i++) {
            const report_run_t *r = &d->runs[i];
            fputs("| ", fp);
            md(fp, r->label);
            fputs(" | ", fp);
            md(fp, r->time_utc);
            fputs(" | ", fp);
            md(fp, r->git_commit);
            fprintf(fp, " | %lld | %lld | %lld |\n", (long long)r->rows, (long long)r->failing,
                    (long long)r->regressed);
        }
        fputc('\n', fp);
    }
}

/* ---------------------------------------------------------------- history */

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void report_free_paths(char **paths, int n)
{
    for (int i = 0; i < n && paths; i++)
        free(paths[i]);
    free(paths);
}

int report_history_paths(const char *dir_or_file, char ***paths, kr_error_t *err)
{
    *paths = NULL;
    struct stat st;
    if (stat(dir_or_file, &st) != 0)
        return kr_fail(err, "%s: history: no such file or directory", dir_or_file);
    int n = 0, cap = 16;
    char **v = malloc((size_t)cap * sizeof *v);
    if (!v)
        return kr_fail(err, "out of memory");
    if (!S_ISDIR(st.st_mode)) {
        v[0] = strdup(dir_or_file);
        if (!v[0]) {
            free(v);
            return kr_fail(err, "out of memory");
        }
        *paths = v;
        return 1;
    }
    DIR *d = opendir(dir_or_file);
    if (!d) {
        free(v);
        return kr_fail(err, "%s: history: cannot read the directory", dir_or_file);
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 3 || strcmp(e->d_name + len - 3, ".h5") || strstr(e->d_name, ".tmp."))
            continue;
        if (n == cap) {
            cap *= 2;
            char **nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        size_t need = strlen(dir_or_file) + len + 2;
        v[n] = malloc(need);
        if (!v[n])
            break;
        snprintf(v[n], need, "%s/%s", dir_or_file, e->d_name);
        n++;
    }
    int broke = e != NULL;
    closedir(d);
    if (broke) {
        report_free_paths(v, n);
        return kr_fail(err, "out of memory");
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, str_cmp);
    *paths = v;
    return n;
}

/* ------------------------------------------------------------------- main */

int report_generate(const char *out_dir, const result_list_t *rows, const char **history_paths, int n_history,
                    const report_options_t *opt_in, kr_error_t *err)
{
    report_options_t defaults;
    report_options_init(&defaults);
    const report_options_t *o = opt_in ? opt_in : &defaults;
    if (!out_dir || !out_dir[0])
        return kr_fail(err, "report: no output directory");
    if (make_dirs(out_dir, err))
        return -1;
    report_outcome_t outcome = {0};
    int rc = 0;

    if (o->write_tables) {
        run_info_t info;
        const results_meta_t *m = o->meta;
        run_info_fill(&info, m ? m->command : "", m && m->version[0] ? m->version : "unknown",
                      m && m->git_commit[0] ? m->git_commit : "unknown");
        if (m && m->host[0])
            kr_strlcpy(info.host, m->host, sizeof info.host);
        if (m && m->time_utc[0])
            kr_strlcpy(info.time_utc, m->time_utc, sizeof info.time_utc);
        if (report_write_dir(out_dir, rows, &info, err))
            return -1;
    }

    /* The history: earlier runs, oldest first, the last history_last of them. */
    hist_run_t *hist = calloc((size_t)(n_history + 1), sizeof *hist);
    hist_run_t base;
    memset(&base, 0, sizeof base);
    int n_hist = 0, have_base = 0;
    if (!hist)
        return kr_fail(err, "report: out of memory");
    for (int i = 0; i < n_history; i++) {
        kr_error_t e = {{0}};
        hist_run_t *h = &hist[n_hist];
        if (results_store_read(history_paths[i], &h->rows, &h->meta, &e)) {
            warn(o, "history run skipped: %s%s", e.msg, "");
            continue;
        }
        if (same_run(o->meta, &h->meta, rows->count, h->rows.count)) {
            result_list_free(&h->rows);
            continue;
        }
        kr_strlcpy(h->path, history_paths[i], sizeof h->path);
        n_hist++;
    }
    if (n_hist > 1)
        qsort(hist, (size_t)n_hist, sizeof *hist, hist_cmp);
    int keep_from = o->history_last > 0 && n_hist > o->history_last ? n_hist - o->history_last : 0;
    if (o->baseline_path) {
        kr_error_t e = {{0}};
        if (results_store_read(o->baseline_path, &base.rows, &base.meta, &e))
            warn(o, "baseline not in the trend: %s%s", e.msg, "");
        else {
            have_base = 1;
            kr_strlcpy(base.path, o->baseline_path, sizeof base.path);
        }
    }
    int n_runs = have_base + (n_hist - keep_from) + 1;
    plot_run_t *pruns = calloc((size_t)n_runs, sizeof *pruns);
    report_run_t *truns = calloc((size_t)n_runs, sizeof *truns);
    plot_list_t pl = {0};
    nfmap_item_t *maps = calloc(MAX_NFMAPS, sizeof *maps);
    report_plot_t *refs = NULL;
    char **svgs = NULL;
    int *written = NULL;
    int n_maps = 0;
    char note[512] = "";
    if (!pruns || !truns || !maps) {
        rc = kr_fail(err, "report: out of memory");
        goto done;
    }
    {
        int k = 0;
        if (have_base) {
            pruns[k].rows = &base.rows;
            kr_strlcpy(truns[k].label, "baseline", sizeof truns[k].label);
            kr_strlcpy(truns[k].path, base.path, sizeof truns[k].path);
            kr_strlcpy(truns[k].time_utc, base.meta.time_utc, sizeof truns[k].time_utc);
            kr_strlcpy(truns[k].git_commit, base.meta.git_commit, sizeof truns[k].git_commit);
            run_counts(&base.rows, &truns[k]);
            k++;
        }
        for (int i = keep_from; i < n_hist; i++, k++) {
            pruns[k].rows = &hist[i].rows;
            run_label(&hist[i].meta, "run", truns[k].label, sizeof truns[k].label);
            kr_strlcpy(truns[k].path, hist[i].path, sizeof truns[k].path);
            kr_strlcpy(truns[k].time_utc, hist[i].meta.time_utc, sizeof truns[k].time_utc);
            kr_strlcpy(truns[k].git_commit, hist[i].meta.git_commit, sizeof truns[k].git_commit);
            run_counts(&hist[i].rows, &truns[k]);
        }
        pruns[k].rows = rows;
        kr_strlcpy(truns[k].label, "this run", sizeof truns[k].label);
        if (o->meta) {
            kr_strlcpy(truns[k].time_utc, o->meta->time_utc, sizeof truns[k].time_utc);
            kr_strlcpy(truns[k].git_commit, o->meta->git_commit, sizeof truns[k].git_commit);
        }
        run_counts(rows, &truns[k]);
        for (int i = 0; i < n_runs; i++)
            pruns[i].label = truns[i].label;
    }

    /* The plots built from rows, then the trend, then the non-finite maps. */
    if (plots_from_rows(&pl, rows, err) || (n_runs >= 2 && plots_trend(&pl, pruns, n_runs, err))) {
        rc = -1;
        goto done;
    }
    {
        char listed[MAX_NFMAPS][512];
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
        for (int i = 0; i < n_listed; i++) {
            int m = map_case(listed[i], rows, &pl, &maps[n_maps], o, err);
            if (m < 0) {
                rc = -1;
                goto done;
            }
            if (m == 0)
                n_maps++;
        }
    }
    outcome.nfmaps = 0;
    for (int i = 0; i < n_maps; i++)
        outcome.nfmaps += maps[i].map.plot >= 0;
    outcome.history_runs = n_runs >= 2 ? n_runs : 0;

    /* Draw. */
    refs = calloc((size_t)(pl.count ? pl.count : 1), sizeof *refs);
    svgs = calloc((size_t)(pl.count ? pl.count : 1), sizeof *svgs);
    written = calloc((size_t)(pl.count ? pl.count : 1), sizeof *written);
    char (*pngs)[128] = calloc((size_t)(pl.count ? pl.count : 1), sizeof *pngs);
    if (!refs || !svgs || !written || !pngs) {
        free(pngs);
        rc = kr_fail(err, "report: out of memory");
        goto done;
    }
    char plots_dir[4200];
    snprintf(plots_dir, sizeof plots_dir, "%s/plots", out_dir);
    outcome.gnuplot_found = gnuplot_available();
    if (!o->plots) {
        snprintf(note, sizeof note, "Plots not drawn (plots turned off).");
    } else if (!outcome.gnuplot_found) {
        snprintf(note, sizeof note,
                 "Plots not drawn: gnuplot was not found on PATH (install gnuplot-nox, then run kreplay report "
                 "again).");
        warn(o, "gnuplot not found on PATH: writing the report without plots%s%s", "", "");
    } else if (pl.count) {
        if (make_dirs(plots_dir, err)) {
            free(pngs);
            rc = -1;
            goto done;
        }
        progress_t prog;
        if (o->progress)
            progress_start(&prog, "kreplay report: plots", pl.count);
        else
            progress_start_on(&prog, stderr, 0, "", pl.count);
        for (int i = 0; i < pl.count; i++) {
            const plot_t *p = &pl.items[i];
            char path[4400];
            size_t len = 0;
            kr_error_t e = {{0}};
            char *img = NULL;
            if (gnuplot_render(p->script, GNUPLOT_SVG, p->width, p->height, &svgs[i], &len, &e)) {
                warn(o, "plot %s not drawn: %s", p->name, e.msg);
                outcome.plots_failed++;
                progress_update(&prog, i + 1);
                continue;
            }
            snprintf(path, sizeof path, "%s/%s.svg", plots_dir, p->name);
            if (write_bytes(path, svgs[i], len, err)) {
                progress_finish(&prog);
                free(pngs);
                rc = -1;
                goto done;
            }
            written[i] = 1;
            outcome.plots_drawn++;
            if (gnuplot_render(p->script, GNUPLOT_PNG, p->width, p->height, &img, &len, &e) == 0) {
                snprintf(path, sizeof path, "%s/%s.png", plots_dir, p->name);
                if (write_bytes(path, img, len, err)) {
                    free(img);
                    progress_finish(&prog);
                    free(pngs);
                    rc = -1;
                    goto done;
                }
                snprintf(pngs[i], sizeof pngs[i], "plots/%.100s.png", p->name);
            } else {
                warn(o, "PNG of plot %s not drawn: %s", p->name, e.msg);
            }
            free(img);
            progress_update(&prog, i + 1);
        }
        progress_finish(&prog);
        if (outcome.plots_failed)
            snprintf(note, sizeof note, "%d of %d plots could not be drawn (gnuplot's message is on stderr).",
                     outcome.plots_failed, pl.count);
    }
    remove_stale_plots(plots_dir, &pl, written);
    for (int i = 0; i < pl.count; i++) {
        refs[i].name = pl.items[i].name;
        refs[i].title = pl.items[i].title;
        refs[i].kind = pl.items[i].kind;
        refs[i].case_path = pl.items[i].case_path;
        refs[i].svg = svgs[i];
        refs[i].png = pngs[i][0] ? pngs[i] : NULL;
    }
    {
        report_nfmap_t *mv = calloc((size_t)(n_maps ? n_maps : 1), sizeof *mv);
        if (!mv) {
            free(pngs);
            rc = kr_fail(err, "report: out of memory");
            goto done;
        }
        for (int i = 0; i < n_maps; i++)
            mv[i] = maps[i].map;
        report_doc_t doc = {
            .rows = rows, .meta = o->meta, .plots = refs, .n_plots = pl.count, .nfmaps = mv, .n_nfmaps = n_maps,
            .runs = truns, .n_runs = n_runs >= 2 ? n_runs : 0, .plots_note = note[0] ? note : NULL, .title = o->title};
        char path[4400];
        atomic_file_t f;
        snprintf(path, sizeof path, "%s/report.html", out_dir);
        if (atomic_file_open(&f, path, err) == 0) {
            report_html_write(f.fp, &doc);
            rc = atomic_file_commit(&f, err);
        } else {
            rc = -1;
        }
        snprintf(path, sizeof path, "%s/report_full.md", out_dir);
        if (rc == 0 && atomic_file_open(&f, path, err) == 0) {
            markdown_full(f.fp, &doc);
            rc = atomic_file_commit(&f, err);
        } else if (rc == 0) {
            rc = -1;
        }
        free(mv);
    }
    free(pngs);

done:
    if (o->outcome)
        *o->outcome = outcome;
    for (int i = 0; i < pl.count && svgs; i++)
        free(svgs[i]);
    free(svgs);
    free(written);
    free(refs);
    for (int i = 0; i < n_maps; i++)
        free(maps[i].describe);
    free(maps);
    plot_list_free(&pl);
    free(pruns);
    free(truns);
    for (int i = 0; i < n_hist; i++)
        result_list_free(&hist[i].rows);
    free(hist);
    if (have_base)
        result_list_free(&base.rows);
    return rc;
}
