#include "report_html.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "case_headline.h"
#include "escape.h"
#include "plots.h"
#include "result_fields.h"
#include "verdict.h"

/* ------------------------------------------------------------------ escaping */

void report_html_escape(FILE *fp, const char *s)
{
    esc_html(fp, s);
}

#define E(s) report_html_escape(fp, (s))
#define E_PUT(pre, s, post) esc_put(fp, report_html_escape, (pre), (s), (post))
#define E_PUT_NONEMPTY(pre, s, post) esc_put_nonempty(fp, report_html_escape, (pre), (s), (post))

static void num_cell(FILE *fp, double v)
{
    char text[RESULT_NUMBER_CHARS];
    fprintf(fp, "<td class=\"n\">%s</td>", result_format_number(text, sizeof text, 4, v));
}

static const char *verdict_class(verdict_t v)
{
    if (v == VERDICT_PASS)
        return "v-pass";
    if (v == VERDICT_REGRESSED)
        return "v-regressed";
    if (verdict_is_failure(v))
        return "v-fail";
    return "v-other";
}

/* ------------------------------------------------------------------ the page */

static const char *CSS =
    "body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1400px}"
    "h1{font-size:1.6em;margin:0 0 .3em}h2{border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:1.6em}"
    "table{border-collapse:collapse;margin:.5em 0 1em;font-size:13px}"
    "th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    ".banner{font-size:1.3em;font-weight:bold;padding:8px 14px;border-radius:6px;display:inline-block}"
    ".banner.pass{background:#e3f4e1;color:#1d6b16}.banner.fail{background:#fde2e1;color:#a11}"
    ".v-pass{color:#1d6b16}.v-fail{color:#b00;font-weight:bold}.v-regressed{color:#7a1fa2;font-weight:bold}"
    ".v-other{color:#8a6d00}tr.fail td{background:#fff4f4}"
    ".diag{color:#004a8f}.note{color:#555}.prov{color:#555;font-size:13px}"
    "figure{margin:1em 0 2em}figcaption{font-size:13px;color:#444;margin-bottom:4px}"
    "svg.kr-plot{max-width:100%;height:auto;border:1px solid #eee}"
    "details{margin:.4em 0;border:1px solid #e5e5e5;border-radius:4px;padding:4px 8px}"
    "summary{cursor:pointer}pre{background:#f7f7f7;padding:6px;overflow-x:auto;font-size:12px}"
    "#kr-selftest{color:#aaa;font-size:11px;margin-top:3em}"
    ".toc a{margin-right:1em}.headline{color:#333}#kr-headlines li{margin:.3em 0}";

/* Runs on load: counts the plots, the empty ones and the page's errors, and
 * the threshold lines, failing and regressed markers drawn: a plot element
 * whose key text says so and that holds more than its key sample (data in
 * the plot).
 * (No "<" in it: the page's only "<svg" are the plots.) */
static const char *SELFTEST_JS =
    "(function(){\n"
    "var errors=[];\n"
    "window.addEventListener('error',function(e){errors.push(String(e.message||(e.target&&(e.target.src||e.target.href))||'error'));},true);\n"
    "window.addEventListener('load',function(){\n"
    " var ds=document.querySelectorAll('details'),was=[];\n"
    " for(var i=0;ds.length>i;i++){was.push(ds[i].open);ds[i].open=true;}\n"
    " var svgs=document.querySelectorAll('svg.kr-plot'),empty=0,bad=[];\n"
    " for(var i=0;svgs.length>i;i++){\n"
    "  var s=svgs[i],r=s.getBoundingClientRect(),ok=r.width>0&&r.height>0,data=0;\n"
    "  var gs=s.querySelectorAll('g[id*=\"gnuplot_plot_\"]');\n"
    "  for(var j=0;gs.length>j;j++){try{var b=gs[j].getBBox();if(b.width>0||b.height>0)data++;}catch(x){}}\n"
    "  if(!ok||data==0){empty++;bad.push(s.getAttribute('data-plot'));}\n"
    " }\n"
    " var drawn={threshold:0,failing:0,regressed:0};\n"
    " var gs=document.querySelectorAll('svg.kr-plot g[id*=\"gnuplot_plot_\"]');\n"
    " for(var j=0;gs.length>j;j++){\n"
    "  var ts=gs[j].querySelectorAll('text'),name='',kind=null;\n"
    "  for(var q=0;ts.length>q;q++)name+=ts[q].textContent;\n"
    "  if(name.indexOf('threshold')==0)kind='threshold';\n"
    "  else if(name.indexOf('failing rows')==0)kind='failing';\n"
    "  else if(name.indexOf('regressed rows')==0)kind='regressed';\n"
    "  if(!kind)continue;\n"
    "  var marks=gs[j].querySelectorAll('use').length,ps=gs[j].querySelectorAll('path');\n"
    "  for(var q=0;ps.length>q;q++)marks+=((ps[q].getAttribute('d')||'').match(/M/g)||[]).length;\n"
    "  if(marks>1)drawn[kind]++;\n"
    " }\n"
    " for(var i=0;ds.length>i;i++)ds[i].open=was[i];\n"
    " var el=document.getElementById('kr-selftest');\n"
    " el.textContent='plots='+svgs.length+' expected='+el.getAttribute('data-expected-plots')+' empty='+empty+\n"
    "  ' errors='+errors.length+' thresholds='+drawn.threshold+' failing='+drawn.failing+' regressed='+drawn.regressed+\n"
    "  (bad.length?' empty-plots='+bad.join(','):'')+(errors.length?' first-error='+errors[0]:'');\n"
    "});\n"
    "})();\n";

/* Does s at p start an attribute we rename (id=, href=#, url(#)?  Returns
 * the length of the prefix to copy before inserting the plot's prefix. */
static size_t id_ref_at(const char *svg, const char *p)
{
    char prev = p > svg ? p[-1] : ' ';
    if ((prev == ' ' || prev == '\t' || prev == '\n') && (!strncmp(p, "id='", 4) || !strncmp(p, "id=\"", 4)))
        return 4;
    if ((prev == ':' || prev == ' ' || prev == '\t' || prev == '\n') &&
        (!strncmp(p, "href='#", 7) || !strncmp(p, "href=\"#", 7)))
        return 7;
    if (!strncmp(p, "url(#", 5))
        return 5;
    return 0;
}

/* gnuplot's SVG, inline: no XML prolog, class kr-plot, and every id (and
 * reference to one) prefixed with the plot's number, so that twenty plots
 * in one page do not share ids. */
static void write_svg_inline(FILE *fp, const char *svg, int index, const char *name, const char *title)
{
    const char *start = strstr(svg, "<svg");
    if (!start)
        return;
    fprintf(fp, "<svg class=\"kr-plot\" data-plot=\"");
    E_PUT("", name, "\" role=\"img\" aria-label=\"");
    E(title);
    fputc('"', fp);
    const char *p = start + 4;
    char prefix[16];
    snprintf(prefix, sizeof prefix, "kp%d-", index);
    const char *end = strstr(p, "</svg>");
    const char *stop = end ? end + 6 : p + strlen(p);
    while (p < stop) {
        size_t k = id_ref_at(svg, p);
        if (k) {
            fwrite(p, 1, k, fp);
            fputs(prefix, fp);
            p += k;
            continue;
        }
        fputc(*p, fp);
        p++;
    }
    fputc('\n', fp);
}

static void figure(FILE *fp, const report_doc_t *d, int i)
{
    const report_plot_t *pl = &d->plots[i];
    if (!pl->svg)
        return;
    E_PUT("<figure id=\"plot-", pl->name, "\"><figcaption>");
    E_PUT("", pl->title, "</figcaption>\n");
    write_svg_inline(fp, pl->svg, i, pl->name, pl->title);
    fputs("</figure>\n", fp);
}

/* The verdict cell and the note cell (with the diagnosis below the note)
 * that end a row of every row table, and the row's end. */
static void verdict_note_cells(FILE *fp, const result_t *r)
{
    fprintf(fp, "<td class=\"%s\">%s</td><td><span class=\"note\">", verdict_class(r->verdict), verdict_name(r->verdict));
    E_PUT("", r->note, "</span>");
    E_PUT_NONEMPTY("<br><span class=\"diag\">diagnosis: ", r->diagnosis, "</span>");
    fputs("</td></tr>\n", fp);
}

/* "<tr><td>CASE</td><td>M</td>...<td>REFERENCE</td>": a row's first cells. */
static void row_identity_cells(FILE *fp, const result_t *r)
{
    fprintf(fp, "<tr class=\"%s\"><td>", verdict_is_failure(r->verdict) ? "fail" : "");
    E(r->case_name);
    fprintf(fp, "</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td>", (long long)r->M,
            (long long)r->N, (long long)r->K);
    E_PUT("", r->band, "</td><td>");
    E_PUT("", r->kernel, "</td><td>");
    E_PUT("", r->reference, "</td>");
}

static void row_brief(FILE *fp, const result_t *r)
{
    row_identity_cells(fp, r);
    num_cell(fp, r->metrics.rel_fro);
    num_cell(fp, r->threshold);
    num_cell(fp, r->threshold > 0 ? r->metrics.rel_fro / r->threshold : NAN);
    verdict_note_cells(fp, r);
}

static const char *BRIEF_HEAD =
    "<table><tr><th>case</th><th>M</th><th>N</th><th>K</th><th>band</th><th>kernel</th><th>reference</th>"
    "<th>rel_fro</th><th>threshold</th><th>rel/thr</th><th>verdict</th><th>note / diagnosis</th></tr>\n";

/* The cases of a run: rows grouped by case_path in O(n log n). */
typedef struct {
    int64_t n;          /* cases */
    int64_t *order;     /* [n] case ids, cases with a failing or poisoned row first, then by first row */
    int64_t *first;     /* [n] a case's first row */
    int64_t *next;      /* [rows] the next row of the same case, -1 after the last */
} case_index_t;

typedef struct {
    const char *path;
    int64_t i;
} path_ref_t;

static int path_ref_cmp(const void *a, const void *b)
{
    const path_ref_t *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void case_index_free(case_index_t *ci)
{
    free(ci->order);
    free(ci->first);
    free(ci->next);
    memset(ci, 0, sizeof *ci);
}

static int case_index_build(const result_list_t *rows, case_index_t *ci)
{
    memset(ci, 0, sizeof *ci);
    size_t n = (size_t)(rows->count ? rows->count : 1);
    path_ref_t *refs = malloc(n * sizeof *refs);
    ci->order = malloc(n * sizeof *ci->order);
    ci->first = malloc(n * sizeof *ci->first);
    ci->next = malloc(n * sizeof *ci->next);
    int64_t *firsts = malloc(n * sizeof *firsts);
    unsigned char *bad = calloc(n, 1);
    if (!refs || !ci->order || !ci->first || !ci->next || !firsts || !bad) {
        free(refs);
        free(firsts);
        free(bad);
        case_index_free(ci);
        return -1;
    }
    for (int64_t i = 0; i < rows->count; i++) {
        refs[i].path = rows->rows[i].case_path;
        refs[i].i = i;
        ci->next[i] = -1;
    }
    if (rows->count > 1)
        qsort(refs, (size_t)rows->count, sizeof *refs, path_ref_cmp);
    /* firsts: the first row of each case; chains in row order */
    int64_t nc = 0;
    for (int64_t j = 0; j < rows->count; j++) {
        if (j == 0 || strcmp(refs[j].path, refs[j - 1].path))
            firsts[nc++] = refs[j].i;
        else
            ci->next[refs[j - 1].i] = refs[j].i;
    }
    if (nc > 1)
        qsort(firsts, (size_t)nc, sizeof *firsts, i64_cmp);
    for (int64_t c = 0; c < nc; c++) {
        ci->first[c] = firsts[c];
        for (int64_t i = firsts[c]; i >= 0; i = ci->next[i]) {
            verdict_t v = rows->rows[i].verdict;
            bad[c] |= verdict_is_failure(v) || v == VERDICT_POISONED_INPUT;
        }
    }
    int64_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t c = 0; c < nc; c++)
            if (bad[c] == (pass == 0))
                ci->order[k++] = c;
    ci->n = nc;
    free(refs);
    free(firsts);
    free(bad);
    return 0;
}

/* The cases whose input is poisoned, linked to their detail. */
static void poisoned_line(FILE *fp, const result_list_t *rows)
{
    int64_t n_rows = 0, n_cases = 0;
    for (int64_t i = 0; i < rows->count; i++)
        n_rows += rows->rows[i].verdict == VERDICT_POISONED_INPUT;
    if (!n_rows)
        return;
    case_index_t ci;
    if (case_index_build(rows, &ci))
        return;
    fprintf(fp, "<p id=\"kr-poisoned\"><b>Poisoned inputs:</b> %lld row%s (their rel_fro covers the finite "
                "part only) in ", (long long)n_rows, n_rows == 1 ? "" : "s");
    for (int64_t o = 0; o < ci.n; o++) {
        int64_t c = ci.order[o], k = 0;
        for (int64_t i = ci.first[c]; i >= 0; i = ci.next[i])
            k += rows->rows[i].verdict == VERDICT_POISONED_INPUT;
        if (!k)
            continue;
        if (n_cases++ < 20) {
            fprintf(fp, "%s<a href=\"#case-%lld\">", n_cases > 1 ? ", " : "", (long long)o);
            E(rows->rows[ci.first[c]].case_name);
            fprintf(fp, "</a> (%lld row%s)", (long long)k, k == 1 ? "" : "s");
        }
    }
    if (n_cases > 20)
        fprintf(fp, " and %lld more cases", (long long)(n_cases - 20));
    fputs("</p>\n", fp);
    case_index_free(&ci);
}

/* One line per case with a party at fault: who, the verdict, why. */
static void headlines(FILE *fp, const result_list_t *rows)
{
    int64_t more, clean;
    char *list = case_headlines_text(rows, report_html_escape, "<li class=\"headline\">", "</li>\n", 50, &more,
                                     &clean);
    if (!list)
        return;
    fprintf(fp, "<h2 id=\"at-fault\">Who is at fault</h2>\n<ul id=\"kr-headlines\">\n%s", list);
    if (more)
        fprintf(fp, "<li>... and %lld more cases (see the per-case detail)</li>\n", (long long)more);
    fprintf(fp, "</ul>\n<p class=\"prov\">%lld other case%s: no party at fault.</p>\n", (long long)clean,
            clean == 1 ? "" : "s");
    free(list);
}

static const char *REGRESSED_HEAD =
    "<table id=\"kr-regressions\"><tr><th>case</th><th>M</th><th>N</th><th>K</th><th>band</th><th>kernel</th>"
    "<th>reference</th><th>regressed metric</th><th>baseline</th><th>this run</th><th>change</th><th>verdict</th>"
    "<th>note / diagnosis</th></tr>\n";

static void failing_head(FILE *fp, int pass)
{
    fprintf(fp, "<h2 id=\"%s\">%s</h2>\n%s", pass == 0 ? "regressions" : "failing",
            pass == 0 ? "Regressions" : "Failing rows", pass == 0 ? REGRESSED_HEAD : BRIEF_HEAD);
}

/* A regression: the metric that regressed, before and after, in columns. */
static void row_regressed(FILE *fp, const result_t *r)
{
    row_identity_cells(fp, r);
    E_PUT("<td class=\"metric\">", r->regressed_metric, "</td>");
    /* a finding without numbers (a verdict, a digest): empty cells, not "nan" */
    if (isnan(r->regressed_base) && isnan(r->regressed_run)) {
        fputs("<td class=\"n\"></td><td class=\"n\"></td>", fp);
    } else {
        num_cell(fp, r->regressed_base);
        num_cell(fp, r->regressed_run);
    }
    char change[64];
    report_regression_change(r, change, sizeof change);
    fprintf(fp, "<td class=\"n\">%s</td>", change);
    verdict_note_cells(fp, r);
}

static void failing_end(FILE *fp, int64_t n_more)
{
    if (n_more > 0)
        fprintf(fp, "<tr><td colspan=\"12\">... and %lld more (see the per-case detail)</td></tr>\n",
                (long long)n_more);
    fputs("</table>\n", fp);
}

static void summary(FILE *fp, const report_doc_t *d)
{
    const result_list_t *rows = d->rows;
    int64_t counts[VERDICT_COUNT];
    int64_t failing = report_verdict_counts(rows, counts);
    fputs("<section id=\"summary\">\n", fp);
    fprintf(fp, "<div class=\"banner %s\" id=\"kr-verdict\">%s: %lld of %lld rows fail",
            failing ? "fail" : "pass", failing ? "FAIL" : "PASS", (long long)failing, (long long)rows->count);
    if (counts[VERDICT_REGRESSED])
        fprintf(fp, ", %lld regressed", (long long)counts[VERDICT_REGRESSED]);
    fputs("</div>\n", fp);

    fputs("<h2>Verdicts</h2>\n<table id=\"kr-verdict-counts\"><tr><th>verdict</th><th>rows</th></tr>\n", fp);
    for (int v = 0; v < VERDICT_COUNT; v++)
        if (counts[v])
            fprintf(fp, "<tr data-verdict=\"%s\"><td class=\"%s\">%s</td><td class=\"n\">%lld</td></tr>\n",
                    verdict_name((verdict_t)v), verdict_class((verdict_t)v), verdict_name((verdict_t)v),
                    (long long)counts[v]);
    fprintf(fp, "<tr data-verdict=\"total\"><th>total</th><th class=\"n\">%lld</th></tr>\n</table>\n",
            (long long)rows->count);

    static const report_line_style_t worst = {
        .esc = report_html_escape, .lead = "<p id=\"kr-worst-cell\"><b>Worst shape x band:</b> ",
        .after_band = ": rel_fro ", .before_case = ", case ", .tail = ")</p>\n",
    };
    report_worst_cell_line(fp, rows, &worst);

    const char *a8 = plots_w4a8_kernel(rows), *a4 = plots_w4a4_kernel();
    if (a8 && a4) {
        double sa = 0, sb = 0;
        int na = 0, nb = 0;
        for (int64_t i = 0; i < rows->count; i++) {
            const result_t *r = &rows->rows[i];
            if (!plots_is_error_row(r, "R_source"))
                continue;
            if (!strcmp(r->kernel, a8)) {
                sa += r->metrics.rel_fro;
                na++;
            } else if (!strcmp(r->kernel, a4)) {
                sb += r->metrics.rel_fro;
                nb++;
            }
        }
        if (na && nb) {
            fputs("<p><b>W4A8 vs W4A4:</b> mean rel_fro vs R_source ", fp);
            E(a8);
            fprintf(fp, " %.4g, ", sa / na);
            E(a4);
            fprintf(fp, " %.4g (W4A4 / W4A8 = %.2f)</p>\n", sb / nb, (sb / nb) / (sa / na));
        }
    }

    if (d->meta) {
        const results_meta_t *m = d->meta;
        fputs("<p class=\"prov\">", fp);
        E_PUT_NONEMPTY("suite <b>", m->suite_name, "</b>; ");
        E_PUT("kreplay ", m->version, " (commit ");
        E_PUT("", m->git_commit, ") on ");
        E(m->host);
        E_PUT_NONEMPTY(", device ", m->device, "");
        E_PUT(", ", m->time_utc, "");
        E_PUT_NONEMPTY(", shard ", m->shard, "");
        E_PUT_NONEMPTY("<br>command: <code>", m->command, "</code>");
        fputs("</p>\n", fp);
    }
    if (d->plots_note)
        E_PUT("<p class=\"note\" id=\"kr-plots-note\">", d->plots_note, "</p>\n");
    poisoned_line(fp, rows);
    headlines(fp, rows);

    static const report_failing_writer_t failing_writer = {failing_head, row_brief, failing_end, row_regressed};
    report_failing_sections(fp, rows, &failing_writer);

    int64_t idx[10];
    int n_off = report_worst_offenders(rows, idx, 10);
    if (n_off) {
        fputs("<h2 id=\"worst\">Worst offenders</h2>\n<p class=\"prov\">Failing rows first, then by rel_fro / "
              "threshold.</p>\n",
              fp);
        fputs(BRIEF_HEAD, fp);
        for (int j = 0; j < n_off; j++)
            row_brief(fp, &rows->rows[idx[j]]);
        fputs("</table>\n", fp);
    }

    fputs("</section>\n", fp);
}

static void group_tables(FILE *fp, const report_doc_t *d)
{
    report_group_t *g = NULL;
    int n = report_groups(d->rows, &g);
    if (n <= 0) {
        free(g);
        return;
    }
    fputs("<section id=\"shapes\"><h2>Per shape x band</h2>\n<p class=\"prov\">Rows pooled per kernel x "
          "reference: worst and mean rel_fro over the cases, the largest threshold and rel_fro / threshold, "
          "the smallest bit-identical fraction and the largest bf16 ULP distance.</p>\n",
          fp);
    for (int i = 0; i < n; i++) {
        if (i == 0 || g[i].N != g[i - 1].N || g[i].K != g[i - 1].K || strcmp(g[i].band, g[i - 1].band)) {
            if (i)
                fputs("</table>\n", fp);
            fprintf(fp, "<h3 id=\"shape-%lldx%lld-", (long long)g[i].N, (long long)g[i].K);
            E(g[i].band);
            fprintf(fp, "\">N=%lld K=%lld, band ", (long long)g[i].N, (long long)g[i].K);
            E(g[i].band);
            fputs("</h3>\n<table class=\"shape-band\"><tr><th>kernel</th><th>reference</th><th>rows</th>"
                  "<th>worst rel_fro</th><th>mean rel_fro</th><th>threshold</th><th>worst rel/thr</th>"
                  "<th>min identical</th><th>max ULP</th><th>verdicts</th></tr>\n",
                  fp);
        }
        int fail = 0;
        for (int v = 0; v < VERDICT_COUNT; v++)
            fail |= g[i].verdicts[v] && verdict_is_failure((verdict_t)v);
        fprintf(fp, "<tr class=\"%s\"><td>", fail ? "fail" : "");
        E_PUT("", g[i].kernel, "</td><td>");
        E(g[i].reference);
        fprintf(fp, "</td><td class=\"n\">%d</td>", g[i].rows);
        double v[REPORT_GROUP_NUMBERS];
        report_group_numbers(&g[i], v);
        for (int k = 0; k < REPORT_GROUP_NUMBERS; k++)
            num_cell(fp, v[k]);
        if (isnan(g[i].min_identical))
            fputs("<td class=\"n\"></td>", fp);
        else
            fprintf(fp, "<td class=\"n\">%llu</td>", (unsigned long long)g[i].max_ulp);
        char tally[256];
        report_verdict_tally(g[i].verdicts, tally, sizeof tally);
        fprintf(fp, "<td class=\"%s\">", fail ? "v-fail" : "");
        E_PUT("", tally, "</td></tr>\n");
    }
    fputs("</table>\n", fp);
    /* Kernels that could not take a shape: one line per shape x band. */
    free(g);
    fputs("</section>\n", fp);
}

static void history_table(FILE *fp, const report_doc_t *d)
{
    if (d->n_runs < 2)
        return;
    fputs("<section id=\"history\"><h2>Run history</h2>\n<table><tr><th>run</th><th>time (UTC)</th><th>commit</th>"
          "<th>rows</th><th>failing</th><th>regressed</th><th>file</th></tr>\n",
          fp);
    for (int i = 0; i < d->n_runs; i++) {
        const report_run_t *r = &d->runs[i];
        fputs("<tr><td>", fp);
        E_PUT("", r->label, "</td><td>");
        E_PUT("", r->time_utc, "</td><td>");
        E(r->git_commit);
        fprintf(fp, "</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td>",
                (long long)r->rows, (long long)r->failing, (long long)r->regressed);
        E_PUT("", r->path, "</td></tr>\n");
    }
    fputs("</table></section>\n", fp);
}

/* Beyond this many cases, passing cases get one line each, not a detail table. */
#define CASE_DETAIL_MAX 300

static int nfmap_matches(const report_nfmap_t *nm, const result_t *r)
{
    return !strcmp(nm->case_path, r->case_path) || !strcmp(nm->case_name, r->case_name);
}

static int nfmap_has_rows(const report_doc_t *d, const report_nfmap_t *nm)
{
    for (int64_t i = 0; i < d->rows->count; i++)
        if (nfmap_matches(nm, &d->rows->rows[i]))
            return 1;
    return 0;
}

/* The case's headline (case_headline.h) above its rows. */
static void case_headline_para(FILE *fp, const result_list_t *rows, const case_index_t *ci, int64_t id)
{
    int64_t n = 0;
    for (int64_t i = ci->first[id]; i >= 0; i = ci->next[i])
        n++;
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    if (!idx)
        return;
    n = 0;
    for (int64_t i = ci->first[id]; i >= 0; i = ci->next[i])
        idx[n++] = i;
    case_headline_t h;
    case_headline_of(rows, idx, n, &h);
    fprintf(fp, "<p class=\"headline\" data-party=\"%s\" data-rule=\"%s\"><b>", case_party_word(h.party), h.rule);
    E_PUT("", h.line, "</b></p>\n");
    free(idx);
}

static void case_detail(FILE *fp, const report_doc_t *d)
{
    const result_list_t *rows = d->rows;
    case_index_t ci;
    if (case_index_build(rows, &ci))
        return;
    fputs("<section id=\"cases\"><h2>Cases</h2>\n", fp);
    int compact = 0;
    for (int64_t c = 0; c < ci.n; c++) {
        int64_t id = ci.order[c];
        const result_t *h = &rows->rows[ci.first[id]];
        int64_t counts[VERDICT_COUNT] = {0};
        int bad = 0;
        nonfinite_t in = {0, 0, 0};
        for (int64_t i = ci.first[id]; i >= 0; i = ci.next[i]) {
            const result_t *r = &rows->rows[i];
            counts[r->verdict]++;
            bad |= verdict_is_failure(r->verdict) || r->verdict == VERDICT_POISONED_INPUT;
            if (nonfinite_total(&r->input_nf) > nonfinite_total(&in))
                in = r->input_nf;
        }
        char tally[512];
        report_verdict_tally(counts, tally, sizeof tally);
        int mapped = 0;
        for (int m = 0; m < d->n_nfmaps; m++)
            mapped |= nfmap_matches(&d->nfmaps[m], h);
        if (ci.n > CASE_DETAIL_MAX && !bad && !mapped) {
            /* a large run: passing cases in one compact table */
            if (!compact++)
                fprintf(fp, "<h3>Passing cases</h3>\n<p class=\"prov\">%lld cases: the rows of passing cases are in "
                            "results.csv.</p>\n<table><tr><th>case</th><th>M</th><th>N</th><th>K</th><th>band</th>"
                            "<th>verdicts</th></tr>\n",
                        (long long)ci.n);
            fprintf(fp, "<tr id=\"case-%lld\"><td>", (long long)c);
            E(h->case_name);
            fprintf(fp, "</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td>",
                    (long long)h->M, (long long)h->N, (long long)h->K);
            E_PUT("", h->band, "</td><td>");
            E_PUT("", tally, "</td></tr>\n");
            continue;
        }
        fprintf(fp, "<details class=\"case\" id=\"case-%lld\"%s><summary><b>", (long long)c, bad ? " open" : "");
        E(h->case_name);
        fprintf(fp, "</b> &mdash; M=%lld N=%lld K=%lld, ", (long long)h->M, (long long)h->N, (long long)h->K);
        E_PUT("", h->band, " &mdash; ");
        E_PUT("", tally, "</summary>\n<p class=\"prov\">");
        E(h->case_path);
        if (nonfinite_total(&in))
            fprintf(fp, "; x holds %lld non-finite (%lld NaN, %lld +Inf, %lld -Inf)", (long long)nonfinite_total(&in),
                    (long long)in.nan, (long long)in.pos_inf, (long long)in.neg_inf);
        fputs("</p>\n", fp);
        case_headline_para(fp, rows, &ci, id);
        for (int m = 0; m < d->n_nfmaps; m++) {
            const report_nfmap_t *nm = &d->nfmaps[m];
            if (!nfmap_matches(nm, h))
                continue;
            E_PUT("<pre class=\"nfmap\">", nm->describe, "</pre>\n");
            if (nm->plot >= 0 && nm->plot < d->n_plots)
                figure(fp, d, nm->plot);
        }
        fputs("<table><tr><th>kernel</th><th>reference</th><th>activations</th><th>rel_fro</th><th>threshold</th>"
              "<th>worst_row_rel</th><th>max_abs</th><th>|out|/|ref|</th><th>out non-finite</th><th>identical</th>"
              "<th>max ULP</th><th>verdict</th><th>note / diagnosis</th></tr>\n",
              fp);
        for (int64_t i = ci.first[id]; i >= 0; i = ci.next[i]) {
            const result_t *r = &rows->rows[i];
            fprintf(fp, "<tr class=\"%s\"><td>", verdict_is_failure(r->verdict) ? "fail" : "");
            E_PUT("", r->kernel, "</td><td>");
            E_PUT("", r->reference, "</td><td>");
            E_PUT("", r->act_origin, "</td>");
            if (!strcmp(r->reference, "-")) {
                fputs("<td colspan=\"8\"></td>", fp);
            } else {
                num_cell(fp, r->metrics.rel_fro);
                num_cell(fp, r->threshold);
                num_cell(fp, r->metrics.worst_row_rel);
                num_cell(fp, r->metrics.max_abs);
                num_cell(fp, r->metrics.mag_ratio);
                fprintf(fp, "<td class=\"n\">%lld</td>", (long long)nonfinite_total(&r->metrics.out_nf));
                num_cell(fp, r->ulp.count > 0 ? r->ulp.identical_frac : NAN);
                fprintf(fp, "<td class=\"n\">%llu</td>", (unsigned long long)r->ulp.max_ulp);
            }
            verdict_note_cells(fp, r);
        }
        fputs("</table>\n</details>\n", fp);
    }
    if (compact)
        fputs("</table>\n", fp);
    fputs("</section>\n", fp);
    case_index_free(&ci);
}

void report_html_write(FILE *fp, const report_doc_t *d)
{
    const char *title = d->title ? d->title : "kreplay report";
    int drawn = 0;
    for (int i = 0; i < d->n_plots; i++)
        drawn += d->plots[i].svg != NULL;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          fp);
    E(title);
    if (d->meta)
        E_PUT_NONEMPTY(": ", d->meta->suite_name, "");
    fprintf(fp, "</title>\n<style>%s</style>\n<script>\n%s</script>\n</head>\n<body>\n<h1>", CSS, SELFTEST_JS);
    E(title);
    fprintf(fp, "</h1>\n<p class=\"toc\"><a href=\"#summary\">summary</a><a href=\"#plots\">plots</a>"
                "<a href=\"#shapes\">shape x band</a>%s<a href=\"#cases\">cases</a></p>\n",
            d->n_runs >= 2 ? "<a href=\"#history\">history</a>" : "");
    summary(fp, d);

    fputs("<section id=\"plots\"><h2>Plots</h2>\n", fp);
    int shown = 0;
    for (int i = 0; i < d->n_plots; i++) {
        if (!strcmp(d->plots[i].kind, "nfmap") || !d->plots[i].svg)
            continue;
        figure(fp, d, i);
        shown++;
    }
    /* Non-finite maps appear with their case below; a map of a case no row
     * names is shown here. */
    for (int m = 0; m < d->n_nfmaps; m++) {
        const report_nfmap_t *nm = &d->nfmaps[m];
        if (nfmap_has_rows(d, nm)) {
            if (nm->plot >= 0 && nm->plot < d->n_plots && d->plots[nm->plot].svg) {
                E_PUT("<p>Non-finite map of <a href=\"#plot-", d->plots[nm->plot].name, "\">");
                E_PUT("", nm->case_name, "</a>: with its case below.</p>\n");
            }
            continue;
        }
        E_PUT("<pre class=\"nfmap\">", nm->case_path, "\n");
        E_PUT("", nm->describe, "</pre>\n");
        if (nm->plot >= 0 && nm->plot < d->n_plots) {
            figure(fp, d, nm->plot);
            shown++;
        }
    }
    if (!shown)
        fputs("<p class=\"note\">No plots in this report.</p>\n", fp);
    fputs("</section>\n", fp);
    group_tables(fp, d);
    history_table(fp, d);
    case_detail(fp, d);
    fprintf(fp, "<div id=\"kr-selftest\" data-expected-plots=\"%d\">not run</div>\n</body>\n</html>\n", drawn);
}
