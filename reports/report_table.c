#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"
#include "report.h"
#include "result_fields.h"
#include "verdict.h"

static void fmt_metric(char *buf, size_t cap, double v)
{
    result_format_number(buf, cap, 4, v);
}

/* The identical fraction rounded down: 1.000 only when every element is
 * bit-identical (2047 of 2048 shows 0.999). */
static void fmt_ident(char *buf, size_t cap, const ulp_stats_t *u)
{
    if (u->count <= 0)
        snprintf(buf, cap, "-");
    else if (u->identical == u->count)
        snprintf(buf, cap, "1.000");
    else
        snprintf(buf, cap, "%.3f", floor((double)u->identical * 1000.0 / (double)u->count) / 1000.0);
}

/* Columns as wide as their longest entry: names are never cut. */
static int width_of(const result_list_t *rows, size_t offset, int min)
{
    int w = min;
    for (int64_t i = 0; i < rows->count; i++) {
        int n = (int)strlen((const char *)&rows->rows[i] + offset);
        if (n > w)
            w = n;
    }
    return w;
}

void report_table_print(FILE *fp, const result_list_t *rows)
{
    int oracle = 0;
    for (int64_t i = 0; i < rows->count; i++)
        oracle |= rows->rows[i].ref_f32_vs_f64 == rows->rows[i].ref_f32_vs_f64;
    const int wc = width_of(rows, offsetof(result_t, case_name), 4);
    const int wk = width_of(rows, offsetof(result_t, kernel), 6);
    const int wr = width_of(rows, offsetof(result_t, reference), 9);
    fprintf(fp, "%-*s %6s %6s %6s %-7s %-*s %-*s %10s %10s %10s %9s %9s %7s %7s %-15s%s\n", wc, "case", "M",
            "N", "K", "band", wk, "kernel", wr, "reference", "rel_fro", "threshold", "worst_row", "max_abs",
            "|o|/|r|", "nonfin", "ident", "verdict", oracle ? " ref_f32_vs_f64" : "");
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        char rel[32], thr[32], worst[32], maxabs[32], mag[32], ident[32];
        /* Names and notes may hold anything (a file name with a newline or
         * a terminal escape): one row stays one line. */
        char name[sizeof r->case_name], band[sizeof r->band], kernel[sizeof r->kernel],
            ref[sizeof r->reference], note[sizeof r->note], diag[sizeof r->diagnosis];
        esc_terminal(r->case_name, name, sizeof name);
        esc_terminal(r->band, band, sizeof band);
        esc_terminal(r->kernel, kernel, sizeof kernel);
        esc_terminal(r->reference, ref, sizeof ref);
        esc_terminal(r->note, note, sizeof note);
        esc_terminal(r->diagnosis, diag, sizeof diag);
        fmt_metric(thr, sizeof thr, r->threshold);
        if (strcmp(r->reference, "-") == 0) {
            fprintf(fp, "%-*s %6lld %6lld %6lld %-7s %-*s %-*s %10s %10s %10s %9s %9s %7s %7s %-15s %s\n", wc,
                    name, (long long)r->M, (long long)r->N, (long long)r->K, band, wk, kernel,
                    wr, "-", "-", "-", "-", "-", "-", "-", "-", verdict_name(r->verdict), note);
            continue;
        }
        fmt_metric(rel, sizeof rel, r->metrics.rel_fro);
        fmt_metric(worst, sizeof worst, r->metrics.worst_row_rel);
        fmt_metric(maxabs, sizeof maxabs, r->metrics.max_abs);
        fmt_metric(mag, sizeof mag, r->metrics.mag_ratio);
        fmt_ident(ident, sizeof ident, &r->ulp);
        fprintf(fp, "%-*s %6lld %6lld %6lld %-7s %-*s %-*s %10s %10s %10s %9s %9s %7lld %7s %-15s", wc,
                name, (long long)r->M, (long long)r->N, (long long)r->K, band, wk, kernel, wr,
                ref, rel, thr, worst, maxabs, mag, (long long)nonfinite_total(&r->metrics.out_nf),
                ident, verdict_name(r->verdict));
        if (oracle) {
            char refe[32];
            fmt_metric(refe, sizeof refe, r->ref_f32_vs_f64);
            fprintf(fp, " %s", refe);
        }
        fputc('\n', fp);
        if (r->diagnosis[0])
            fprintf(fp, "    diagnosis: %s\n", diag);
    }
}

void report_summary_line_marked(FILE *fp, const result_list_t *rows, const char *const *before, const char *after)
{
    int64_t counts[VERDICT_COUNT] = {0};
    for (int64_t i = 0; i < rows->count; i++)
        counts[rows->rows[i].verdict]++;
    fprintf(fp, "%lld rows:", (long long)rows->count);
    const char *sep = " ";
    for (int v = 0; v < VERDICT_COUNT; v++) {
        if (!counts[v])
            continue;
        fprintf(fp, "%s%lld %s%s%s", sep, (long long)counts[v], before ? before[v] : "", verdict_name((verdict_t)v),
                before ? after : "");
        sep = ", ";
    }
    fprintf(fp, "\n");
}

void report_summary_line(FILE *fp, const result_list_t *rows)
{
    report_summary_line_marked(fp, rows, NULL, "");
}
