/* report_full.md: the report page's content for a pull request, plots as
 * plots/NAME.png (report_html.h: report_full_md_write). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "markdown_parts.h"
#include "report_html.h"
#include "verdict.h"

static void md(FILE *fp, const char *s)
{
    esc_markdown(fp, s);
}

/* esc_put with the Markdown escaper: a name between fixed words. */
static void md_put(FILE *fp, const char *pre, const char *s, const char *post)
{
    esc_put(fp, md, pre, s, post);
}

/* "![TITLE](PNG)": a plot of report_full.md. */
static void md_image(FILE *fp, const report_plot_t *pl)
{
    md_put(fp, "![", pl->title, "](");
    fprintf(fp, "%s)\n\n", pl->png);
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
    md_row_identity(fp, r);
    md_num(fp, r->metrics.rel_fro);
    md_num(fp, r->threshold > 0 ? r->threshold : NAN);
    fprintf(fp, " %s | ", verdict_name(r->verdict));
    md_row_note_end(fp, r);
}

static const char *MD_BRIEF_HEAD = "| case | M | N | K | band | kernel | reference | rel_fro | threshold | verdict | note |\n"
                                   "|---|---:|---:|---:|---|---|---|---:|---:|---|---|\n";

static void md_provenance(FILE *fp, const report_doc_t *d);

/* The title and the run's one-paragraph summary. */
static void md_summary(FILE *fp, const report_doc_t *d)
{
    const result_list_t *rows = d->rows;
    int64_t counts[VERDICT_COUNT];
    int64_t failing = report_verdict_counts(rows, counts);
    char tally[1024];
    report_verdict_tally(counts, tally, sizeof tally);
    fputs("# ", fp);
    md(fp, d->title ? d->title : "kreplay report");
    if (d->meta)
        esc_put_nonempty(fp, md, ": ", d->meta->suite_name, "");
    fprintf(fp, "\n\n- **%s**: %lld of %lld rows fail", failing ? "FAIL" : "PASS", (long long)failing,
            (long long)rows->count);
    md_put(fp, "\n- verdicts: ", tally, "\n");
    static const report_line_style_t worst = {
        .esc = md, .lead = "- worst shape x band: ", .after_band = ", rel_fro ",
        .before_case = ", ", .tail = ")\n",
    };
    report_worst_cell_line(fp, rows, &worst);
    md_provenance(fp, d);
}

static void md_provenance(FILE *fp, const report_doc_t *d)
{
    if (d->meta) {
        fputs("- ", fp);
        md_build_line(fp, d->meta->version, d->meta->git_commit, d->meta->host,
                      d->meta->time_utc);
        esc_put_nonempty(fp, esc_markdown_code, "\n- command: ", d->meta->command, "");
        fputc('\n', fp);
    }
    fputs("- the same report with the plots inline: [report.html](report.html)\n", fp);
    if (d->plots_note)
        md_put(fp, "- ", d->plots_note, "\n");
    fputc('\n', fp);
}

/* Regressions, then the other failing rows (the first 100 of each). */
static const char *MD_REGRESSED_HEAD =
    "| case | M | N | K | band | kernel | reference | regressed metric | baseline | this run | change | verdict | note |\n"
    "|---|---:|---:|---:|---|---|---|---|---:|---:|---:|---|---|\n";

static void md_failing_head(FILE *fp, int pass)
{
    fprintf(fp, "## %s\n\n%s", pass == 0 ? "Regressions" : "Failing rows", pass == 0 ? MD_REGRESSED_HEAD : MD_BRIEF_HEAD);
}

static void md_row_regressed(FILE *fp, const result_t *r)
{
    char change[64];
    md_row_identity(fp, r);
    md_put(fp, " ", r->regressed_metric, " |");
    md_num(fp, r->regressed_base);
    md_num(fp, r->regressed_run);
    report_regression_change(r, change, sizeof change);
    fprintf(fp, " %s | %s | ", change, verdict_name(r->verdict));
    md_row_note_end(fp, r);
}

static void md_failing_end(FILE *fp, int64_t n_more)
{
    if (n_more > 0)
        fprintf(fp, "\n... and %lld more: see report.html\n", (long long)n_more);
    fputc('\n', fp);
}

static void md_failing(FILE *fp, const result_list_t *rows)
{
    static const report_failing_writer_t w = {md_failing_head, md_row_brief, md_failing_end, md_row_regressed};
    report_failing_sections(fp, rows, &w);
}

static void md_worst_and_plots(FILE *fp, const report_doc_t *d)
{
    const result_list_t *rows = d->rows;
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
            md_image(fp, &d->plots[i]);
        }
    }

}

static void md_groups(FILE *fp, const result_list_t *rows)
{
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
            md_put(fp, "", g[i].band, " | ");
            md_put(fp, "", g[i].kernel, " | ");
            md(fp, g[i].reference);
            fprintf(fp, " | %d |", g[i].rows);
            double v[REPORT_GROUP_NUMBERS];
            report_group_numbers(&g[i], v);
            for (int k = 0; k < REPORT_GROUP_NUMBERS; k++)
                md_num(fp, v[k]);
            md_put(fp, " ", t, " |\n");
        }
        fputc('\n', fp);
    }
    free(g);
}

static void md_nfmaps(FILE *fp, const report_doc_t *d)
{
    if (d->n_nfmaps) {
        fputs("## Non-finite inputs\n\n", fp);
        for (int m = 0; m < d->n_nfmaps; m++) {
            const report_nfmap_t *nm = &d->nfmaps[m];
            md_put(fp, "### ", nm->case_name, "\n\n");
            esc_put(fp, esc_markdown_code, "", nm->case_path, "\n\n```text\n");
            for (const char *p = nm->describe ? nm->describe : ""; *p; p++)
                fputc(*p == '`' ? '\'' : *p, fp);
            fputs("\n```\n\n", fp);
            if (nm->plot >= 0 && nm->plot < d->n_plots && d->plots[nm->plot].png)
                md_image(fp, &d->plots[nm->plot]);
        }
    }
}

static void md_history(FILE *fp, const report_doc_t *d)
{
    if (d->n_runs >= 2) {
        fputs("## Run history\n\n| run | time (UTC) | commit | rows | failing | regressed |\n"
              "|---|---|---|---:|---:|---:|\n",
              fp);
        for (int i = 0; i < d->n_runs; i++) {
            const report_run_t *r = &d->runs[i];
            md_put(fp, "| ", r->label, " | ");
            md_put(fp, "", r->time_utc, " | ");
            md(fp, r->git_commit);
            fprintf(fp, " | %lld | %lld | %lld |\n", (long long)r->rows, (long long)r->failing,
                    (long long)r->regressed);
        }
        fputc('\n', fp);
    }
}

void report_full_md_write(FILE *fp, const report_doc_t *d)
{
    md_summary(fp, d);
    md_headlines(fp, d->rows);
    md_failing(fp, d->rows);
    md_worst_and_plots(fp, d);
    md_groups(fp, d->rows);
    md_nfmaps(fp, d);
    md_history(fp, d);
}

