#include <string.h>

#include "escape.h"
#include "markdown_parts.h"
#include "report.h"
#include "report_html.h"
#include "verdict.h"

static void md_cell_number(FILE *fp, double v)
{
    if (v != v)
        fputs(" nan |", fp);
    else
        fprintf(fp, " %.4g |", v);
}

/* "identical_frac 0.934 -> 0.924 |": the baseline's finding, empty when none. */
static void md_regression_cell(FILE *fp, const result_t *r)
{
    if (r->regressed_metric[0]) {
        esc_markdown(fp, r->regressed_metric);
        if (r->regressed_base == r->regressed_base && r->regressed_run == r->regressed_run)
            fprintf(fp, " %.6g -> %.6g", r->regressed_base, r->regressed_run);
        else
            fputs(" changed", fp);
    }
    fputs(" |", fp);
}

void report_markdown_write(FILE *fp, const result_list_t *rows, const run_info_t *info)
{
    int64_t counts[VERDICT_COUNT];
    int64_t failing = report_verdict_counts(rows, counts);
    fprintf(fp, "# kreplay report\n\n");
    if (info->n_failed_inputs > 0) {
        fprintf(fp, "**INCOMPLETE: %d input(s) could not be read:**\n\n", info->n_failed_inputs);
        for (int i = 0; i < info->n_failed_inputs; i++)
        {
            fputs("- ", fp);
            esc_markdown_code(fp, info->failed_inputs[i]);
            fputc('\n', fp);
        }
        fputc('\n', fp);
    }
    /* An incomplete run is never reported as a pass. */
    fprintf(fp, "- **%s**: %lld of %lld rows fail\n",
            failing ? "FAIL" : info->n_failed_inputs > 0 ? "INCOMPLETE" : "PASS", (long long)failing,
            (long long)rows->count);
    fprintf(fp, "- verdicts:");
    for (int v = 0; v < VERDICT_COUNT; v++)
        if (counts[v])
            fprintf(fp, " %s %lld;", verdict_name((verdict_t)v), (long long)counts[v]);
    fputs("\n- ", fp);
    md_build_line(fp, info->version, info->git_commit, info->host, info->time_utc);
    fputs("\n- command: ", fp);
    esc_markdown_code(fp, info->command ? info->command : "");
    fputs("\n\n", fp);

    md_headlines(fp, rows);
    /* Failures first: they are what a reader opens the report for. */
    for (int pass = 0; pass < 2; pass++) {
        int header = 0;
        for (int64_t i = 0; i < rows->count; i++) {
            const result_t *r = &rows->rows[i];
            if (verdict_is_failure(r->verdict) != (pass == 0))
                continue;
            if (!header) {
                fprintf(fp, "## %s\n\n", pass == 0 ? "Failing rows" : "Other rows");
                fprintf(fp, "| case | M | N | K | band | kernel | reference | rel_fro | worst_row_rel | "
                            "max_abs | cosine | \\|out\\|/\\|ref\\| | out non-finite | identical | regressed "
                            "(baseline -> this run) | verdict | note |\n");
                fprintf(fp, "|---|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n");
                header = 1;
            }
            md_row_identity(fp, r);
            if (strcmp(r->reference, "-") == 0) {
                fprintf(fp, " | | | | | | | | %s | ", verdict_name(r->verdict));
                esc_markdown(fp, r->note);
                fputs(" |\n", fp);
                continue;
            }
            md_cell_number(fp, r->metrics.rel_fro);
            md_cell_number(fp, r->metrics.worst_row_rel);
            md_cell_number(fp, r->metrics.max_abs);
            md_cell_number(fp, r->metrics.cosine);
            md_cell_number(fp, r->metrics.mag_ratio);
            fprintf(fp, " %lld | %.4f | ", (long long)nonfinite_total(&r->metrics.out_nf), r->ulp.identical_frac);
            md_regression_cell(fp, r);
            fprintf(fp, " %s | ", verdict_name(r->verdict));
            md_row_note_end(fp, r);
        }
        if (header)
            fputc('\n', fp);
    }
}
