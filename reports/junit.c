#include "junit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"

/* The text of one failing row: "WRONG R_exact: rel_fro 0.31 (threshold 0.01): note". */
static void failure_line(char *buf, size_t cap, const result_t *r)
{
    char thr[48];
    if (isnan(r->threshold))
        snprintf(thr, sizeof thr, "no threshold");
    else
        snprintf(thr, sizeof thr, "threshold %.6g", r->threshold);
    snprintf(buf, cap, "%s %s: rel_fro %.6g (%s), worst_row_rel %.6g, max_ulp %llu: %s",
             verdict_name(r->verdict), r->reference, r->metrics.rel_fro, thr,
             r->metrics.worst_row_rel, (unsigned long long)r->ulp.max_ulp, r->note);
}

static int same_group(const result_t *a, const result_t *b)
{
    return strncmp(a->case_path, b->case_path, sizeof a->case_path) == 0 &&
           strncmp(a->case_name, b->case_name, sizeof a->case_name) == 0 &&
           strncmp(a->kernel, b->kernel, sizeof a->kernel) == 0;
}

typedef struct {
    int64_t first;       /* row index of the group's first row */
    int failing, rows, unsupported;
    double seconds;
} group_t;

int junit_write(FILE *fp, const char *suite_name, const result_list_t *rows, double seconds)
{
    int64_t n = rows ? rows->count : 0;
    /* Groups in order of first appearance; rows need not be adjacent. */
    int64_t *gid = malloc((size_t)(n ? n : 1) * sizeof *gid);
    group_t *g = calloc((size_t)(n ? n : 1), sizeof *g);
    if (!gid || !g) {
        free(gid);
        free(g);
        return -1;
    }
    int64_t ng = 0;
    for (int64_t i = 0; i < n; i++) {
        const result_t *r = &rows->rows[i];
        int64_t k = ng - 1;
        /* Rows of a group are normally adjacent: try the last group first. */
        if (!(k >= 0 && same_group(&rows->rows[g[k].first], r)))
            for (k = 0; k < ng && !same_group(&rows->rows[g[k].first], r); k++)
                ;
        if (k < 0 || k == ng) {
            k = ng++;
            g[k].first = i;
        }
        gid[i] = k;
        g[k].rows++;
        g[k].failing += verdict_is_failure(r->verdict) != 0;
        g[k].unsupported += r->verdict == VERDICT_UNSUPPORTED;
        if (isfinite(r->seconds))
            g[k].seconds += r->seconds;
    }
    int64_t nfail = 0, nskip = 0;
    for (int64_t k = 0; k < ng; k++) {
        nfail += g[k].failing > 0;
        nskip += g[k].failing == 0 && g[k].unsupported == g[k].rows;
    }

    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n", fp);
    fputs("<testsuite name=\"", fp);
    esc_xml(fp, suite_name ? suite_name : "kreplay", 1);
    fprintf(fp,
            "\" tests=\"%lld\" failures=\"%lld\" errors=\"0\" skipped=\"%lld\" time=\"%.3f\">\n",
            (long long)ng, (long long)nfail, (long long)nskip, isfinite(seconds) ? seconds : 0.0);
    char line[2048];
    for (int64_t k = 0; k < ng; k++) {
        const result_t *r0 = &rows->rows[g[k].first];
        fprintf(fp, "  <testcase classname=\"kreplay.%lldx%lld.", (long long)r0->N,
                (long long)r0->K);
        esc_xml(fp, r0->band, 1);
        fputs("\" name=\"", fp);
        esc_xml(fp, r0->case_name, 1);
        fputc(':', fp);
        esc_xml(fp, r0->kernel, 1);
        fprintf(fp, "\" time=\"%.6f\"", g[k].seconds);
        if (g[k].failing) {
            int64_t first_fail = -1;
            for (int64_t i = g[k].first; i < n && first_fail < 0; i++)
                if (gid[i] == k && verdict_is_failure(rows->rows[i].verdict))
                    first_fail = i;
            const result_t *f = &rows->rows[first_fail];
            failure_line(line, sizeof line, f);
            fputs(">\n    <failure message=\"", fp);
            esc_xml(fp, line, 1);
            fputs("\" type=\"", fp);
            esc_xml(fp, verdict_name(f->verdict), 1);
            fputs("\">", fp);
            for (int64_t i = g[k].first; i < n; i++) {
                if (gid[i] != k || !verdict_is_failure(rows->rows[i].verdict))
                    continue;
                failure_line(line, sizeof line, &rows->rows[i]);
                esc_xml(fp, line, 0);
                fputc('\n', fp);
            }
            fputs("</failure>\n  </testcase>\n", fp);
        } else if (g[k].unsupported == g[k].rows) {
            fputs(">\n    <skipped message=\"", fp);
            esc_xml(fp, "UNSUPPORTED: ", 1);
            esc_xml(fp, r0->note, 1);
            fputs("\"/>\n  </testcase>\n", fp);
        } else {
            fputs("/>\n", fp);
        }
    }
    fputs("</testsuite>\n</testsuites>\n", fp);
    free(gid);
    free(g);
    return ferror(fp) ? -1 : 0;
}
