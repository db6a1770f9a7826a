/* The parts of the summary, and the numbers of the shape x band tables, that
 * report.html and report_full.md both show, written once with the format's
 * escaper and words. */
#include <math.h>
#include <stdlib.h>

#include "escape.h"
#include "plots.h"
#include "report_html.h"
#include "verdict.h"

void report_worst_cell_line(FILE *fp, const result_list_t *rows, const report_line_style_t *st)
{
    plot_cell_t *cells = NULL;
    int nc = plots_cells(rows, &cells);
    if (nc > 0) {
        int w = 0;
        for (int c = 1; c < nc; c++)
            if (cells[c].worst_rel > cells[w].worst_rel)
                w = c;
        const result_t *r = &rows->rows[cells[w].worst_index];
        fprintf(fp, "%s%lldx%lld ", st->lead, (long long)cells[w].N, (long long)cells[w].K);
        st->esc(fp, cells[w].band);
        fprintf(fp, "%s%.4g (", st->after_band, cells[w].worst_rel);
        esc_put(fp, st->esc, "", r->kernel, " vs ");
        esc_put(fp, st->esc, "", r->reference, st->before_case);
        esc_put(fp, st->esc, "", r->case_name, st->tail);
    }
    free(cells);
}

void report_group_numbers(const report_group_t *g, double v[REPORT_GROUP_NUMBERS])
{
    v[0] = g->worst_rel;
    v[1] = g->n_rel ? g->sum_rel / g->n_rel : NAN;
    v[2] = g->threshold;
    v[3] = g->worst_ratio;
    v[4] = g->min_identical;
}

void report_failing_sections(FILE *fp, const result_list_t *rows, const report_failing_writer_t *w)
{
    for (int pass = 0; pass < 2; pass++) {
        int64_t n = 0;
        for (int64_t i = 0; i < rows->count; i++) {
            const result_t *r = &rows->rows[i];
            int is_reg = r->verdict == VERDICT_REGRESSED;
            if (pass == 0 ? !is_reg : (is_reg || !verdict_is_failure(r->verdict)))
                continue;
            if (n == 0)
                w->head(fp, pass);
            if (n < REPORT_FAILING_SHOWN)
                w->row(fp, r);
            n++;
        }
        if (n)
            w->end(fp, n - REPORT_FAILING_SHOWN);
    }
}
