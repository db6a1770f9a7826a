#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_headline.h"
#include "escape.h"
#include "report.h"
#include "result_fields.h"
#include "term_layout.h"
#include "verdict.h"

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

/* The table's columns, in print order.  keep: how long a column stays when
 * the width is short (the fitting steps below drop the lowest first; 100:
 * never dropped); name columns are cut in the middle instead. */
enum { C_CASE, C_M, C_N, C_K, C_BAND, C_KERNEL, C_REF, C_REL, C_THR, C_WORST, C_MAXABS, C_MAG, C_NONFIN, C_IDENT,
       C_VERDICT, C_ORACLE, N_COLS };

static const struct {
    const char *head;
    int right;
} COLS[N_COLS] = {
    [C_CASE] = {"case", 0},         [C_M] = {"M", 1},           [C_N] = {"N", 1},
    [C_K] = {"K", 1},               [C_BAND] = {"band", 0},     [C_KERNEL] = {"kernel", 0},
    [C_REF] = {"reference", 0},     [C_REL] = {"rel_fro", 1},   [C_THR] = {"threshold", 1},
    [C_WORST] = {"worst_row", 1},   [C_MAXABS] = {"max_abs", 1}, [C_MAG] = {"|o|/|r|", 1},
    [C_NONFIN] = {"nonfin", 1},     [C_IDENT] = {"ident", 1},   [C_VERDICT] = {"verdict", 0},
    [C_ORACLE] = {"ref_f32_vs_f64", 1},
};

/* Fitting a table to the width, one step at a time until it fits: drop a
 * column (>= 0), or cut the names to their short widths (SHORT_NAMES) or
 * their shortest (SHORTEST_NAMES).  Dropped columns that fit again once
 * everything is done come back, most useful first. */
#define SHORT_NAMES (-1)
#define SHORTEST_NAMES (-2)
static const int FIT_STEPS[] = {C_BAND, C_NONFIN, C_MAXABS, C_ORACLE, SHORT_NAMES, C_MAG, C_IDENT,
                                C_K,    C_N,      C_M,      C_WORST,  SHORTEST_NAMES};
static const int NAME_COLS[3] = {C_CASE, C_KERNEL, C_REF};
static const int SHORT_WIDTH[3] = {24, 20, 11}, SHORTEST_WIDTH[3] = {12, 12, 9};

/* A cell holds the longest name (case_name). */
#define CELL ((int)sizeof(((result_t *)0)->case_name))
typedef char row_cells_t[N_COLS][CELL];

static void fill_cells(const result_t *r, row_cells_t c)
{
    /* Names may hold anything (a file name with a newline or a terminal
     * escape): one row stays one line. */
    esc_terminal(r->case_name, c[C_CASE], CELL);
    esc_terminal(r->kernel, c[C_KERNEL], CELL);
    esc_terminal(r->reference, c[C_REF], CELL);
    snprintf(c[C_M], CELL, "%lld", (long long)r->M);
    snprintf(c[C_N], CELL, "%lld", (long long)r->N);
    snprintf(c[C_K], CELL, "%lld", (long long)r->K);
    esc_terminal(r->band, c[C_BAND], CELL);
    snprintf(c[C_VERDICT], CELL, "%s", verdict_name(r->verdict));
    if (!strcmp(r->reference, "-")) {
        for (int k = C_REL; k <= C_IDENT; k++)
            snprintf(c[k], CELL, "-");
        snprintf(c[C_ORACLE], CELL, "-");
        return;
    }
    result_format_number(c[C_REL], CELL, 4, r->metrics.rel_fro);
    result_format_number(c[C_THR], CELL, 4, r->threshold);
    result_format_number(c[C_WORST], CELL, 4, r->metrics.worst_row_rel);
    result_format_number(c[C_MAXABS], CELL, 4, r->metrics.max_abs);
    result_format_number(c[C_MAG], CELL, 4, r->metrics.mag_ratio);
    snprintf(c[C_NONFIN], CELL, "%lld", (long long)nonfinite_total(&r->metrics.out_nf));
    fmt_ident(c[C_IDENT], CELL, &r->ulp);
    result_format_number(c[C_ORACLE], CELL, 4, r->ref_f32_vs_f64);
}

typedef struct {
    int width[N_COLS];
    int shown[N_COLS];
    int dropped[N_COLS];      /* dropped to fit (not: never there) */
    int natural;              /* the width with every column and whole names */
    int name_natural[3];      /* the names' own widths (NAME_COLS) */
} layout_t;

static int total_width(const layout_t *l)
{
    int t = 0, n = 0;
    for (int k = 0; k < N_COLS; k++)
        if (l->shown[k]) {
            t += l->width[k];
            n++;
        }
    return t + (n > 0 ? n - 1 : 0);
}

static void cut_names(layout_t *l, const int *to)
{
    for (int j = 0; j < 3; j++)
        if (l->width[NAME_COLS[j]] > to[j])
            l->width[NAME_COLS[j]] = to[j] > (int)strlen(COLS[NAME_COLS[j]].head) ? to[j]
                                                                                    : (int)strlen(COLS[NAME_COLS[j]].head);
}

/* Names back toward `to` (reference, kernel, case: the short ones first)
 * while the table stays within width; never past their own length. */
static void grow_names(layout_t *l, const int *to, int width)
{
    for (int j = 2; j >= 0; j--) {
        const int k = NAME_COLS[j];
        const int want = to ? (to[j] < l->name_natural[j] ? to[j] : l->name_natural[j]) : l->name_natural[j];
        const int spare = width - total_width(l);
        if (l->width[k] < want && spare > 0)
            l->width[k] += want - l->width[k] < spare ? want - l->width[k] : spare;
    }
}

static void fit(layout_t *l, int width)
{
    for (int j = 0; j < 3; j++)
        l->name_natural[j] = l->width[NAME_COLS[j]];
    for (size_t s = 0; s < sizeof FIT_STEPS / sizeof FIT_STEPS[0] && total_width(l) > width; s++) {
        const int step = FIT_STEPS[s];
        if (step == SHORT_NAMES)
            cut_names(l, SHORT_WIDTH);
        else if (step == SHORTEST_NAMES)
            cut_names(l, SHORTEST_WIDTH);
        else if (l->shown[step]) {
            l->shown[step] = 0;
            l->dropped[step] = 1;
        }
    }
    /* What room is left: names first up to their short widths, then the
     * dropped columns that fit again (most useful first), then whole names. */
    grow_names(l, SHORT_WIDTH, width);
    for (int s = (int)(sizeof FIT_STEPS / sizeof FIT_STEPS[0]) - 1; s >= 0; s--) {
        const int k = FIT_STEPS[s];
        if (k < 0 || !l->dropped[k])
            continue;
        l->shown[k] = 1;
        if (total_width(l) > width)
            l->shown[k] = 0;
        else
            l->dropped[k] = 0;
    }
    grow_names(l, NULL, width);
}

static int shown_row(const result_t *r, const report_table_options_t *o)
{
    return !o->failed_only || verdict_is_failure(r->verdict);
}

static void layout_rows(const result_list_t *rows, const report_table_options_t *o, int width, layout_t *l)
{
    memset(l, 0, sizeof *l);
    int oracle = 0;
    for (int64_t i = 0; i < rows->count; i++)
        oracle |= !isnan(rows->rows[i].ref_f32_vs_f64);
    for (int k = 0; k < N_COLS; k++) {
        l->shown[k] = k != C_ORACLE || oracle;
        l->width[k] = (int)strlen(COLS[k].head);
    }
    for (int64_t i = 0; i < rows->count; i++) {
        if (!shown_row(&rows->rows[i], o))
            continue;
        row_cells_t c;
        fill_cells(&rows->rows[i], c);
        for (int k = 0; k < N_COLS; k++)
            if ((int)strlen(c[k]) > l->width[k])
                l->width[k] = (int)strlen(c[k]);
    }
    l->natural = total_width(l);
    if (width > 0)
        fit(l, width);
}

static void print_cells(FILE *fp, const layout_t *l, const char cells[N_COLS][CELL])
{
    int first = 1;
    char cut[CELL];
    for (int k = 0; k < N_COLS; k++) {
        if (!l->shown[k])
            continue;
        term_middle(cells[k], l->width[k], cut, sizeof cut);
        const int last = k == C_VERDICT && !l->shown[C_ORACLE];
        if (last)
            fprintf(fp, "%s%s", first ? "" : " ", cut);
        else
            fprintf(fp, COLS[k].right ? "%s%*s" : "%s%-*s", first ? "" : " ", l->width[k], cut);
        first = 0;
    }
    fputc('\n', fp);
}

/* Why a row failed (the judgement's note: the metric, its value, the
 * threshold and the rule's origin), and what the diagnosis matched: under
 * every failing row, and the note of a row that compared nothing. */
static void print_reasons(FILE *fp, const result_t *r, int width)
{
    const int noted = verdict_is_failure(r->verdict) || !strcmp(r->reference, "-");
    char text[sizeof r->note > sizeof r->diagnosis ? sizeof r->note : sizeof r->diagnosis];
    if (noted && r->note[0]) {
        esc_terminal(r->note, text, sizeof text);
        term_wrap(fp, "    why: ", text, 8, width);
    }
    if (r->diagnosis[0]) {
        esc_terminal(r->diagnosis, text, sizeof text);
        term_wrap(fp, "    diagnosis: ", text, 8, width);
    }
}

void report_table_print_with(FILE *fp, const result_list_t *rows, const report_table_options_t *o)
{
    const int width = o->width ? o->width : term_width(fp);
    layout_t l;
    layout_rows(rows, o, width > 0 && width < TERM_WIDTH_MIN ? TERM_WIDTH_MIN : width, &l);
    char head[N_COLS][CELL];
    for (int k = 0; k < N_COLS; k++)
        snprintf(head[k], CELL, "%s", COLS[k].head);
    print_cells(fp, &l, (const char(*)[CELL])head);
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!shown_row(r, o))
            continue;
        row_cells_t c;
        fill_cells(r, c);
        print_cells(fp, &l, (const char(*)[CELL])c);
        print_reasons(fp, r, width);
    }
    int n_dropped = 0;
    for (int k = 0; k < N_COLS; k++)
        n_dropped += l.dropped[k];
    if (n_dropped) {
        char list[256] = "";
        size_t len = 0;
        for (int k = 0; k < N_COLS; k++)
            if (l.dropped[k] && len < sizeof list)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", COLS[k].head);
        char text[512];
        snprintf(text, sizeof text, "(not shown at width %d: %s; COLUMNS=%d shows every column, --json every field)",
                 width, list, l.natural);
        term_wrap(fp, "", text, 1, width);
    }
}

void report_table_print(FILE *fp, const result_list_t *rows)
{
    const report_table_options_t o = {0, 0};
    report_table_print_with(fp, rows, &o);
}

void report_console_print(FILE *fp, const result_list_t *rows, int failed_only)
{
    const int width = term_width(fp);
    case_headlines_print(fp, rows, width);
    fputc('\n', fp);
    const report_table_options_t o = {width, failed_only};
    int64_t failing = 0;
    for (int64_t i = 0; i < rows->count; i++)
        failing += verdict_is_failure(rows->rows[i].verdict);
    if (!failed_only || failing)
        report_table_print_with(fp, rows, &o);
    if (failed_only)
        fprintf(fp, "%lld failing row%s shown (--failed); ", (long long)failing, failing == 1 ? "" : "s");
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
