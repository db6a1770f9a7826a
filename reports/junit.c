#include "junit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    int failing, errors, rows, unsupported, diagnosed;
    double seconds;
} group_t;

static void write_property(FILE *fp, const char *name, const char *value)
{
    if (!value || !value[0])
        return;
    fputs("    <property name=\"", fp);
    esc_xml(fp, name, 1);
    fputs("\" value=\"", fp);
    esc_xml(fp, value, 1);
    fputs("\"/>\n", fp);
}

/* timestamp (ISO 8601 without the zone, as the JUnit schema has it) and hostname. */
static void suite_identity(const results_meta_t *meta, char *ts, size_t ts_cap, char *host,
                           size_t host_cap)
{
    if (meta && meta->time_utc[0]) {
        snprintf(ts, ts_cap, "%s", meta->time_utc);
    } else {
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(ts, ts_cap, "%Y-%m-%dT%H:%M:%S", &tm);
    }
    size_t n = strlen(ts);
    if (n && ts[n - 1] == 'Z')
        ts[n - 1] = '\0';
    if (meta && meta->host[0])
        snprintf(host, host_cap, "%s", meta->host);
    else if (gethostname(host, host_cap - 1) != 0)
        snprintf(host, host_cap, "unknown");
    host[host_cap - 1] = '\0';
}

static void write_properties(FILE *fp, const results_meta_t *m)
{
    if (!m)
        return;
    fputs("  <properties>\n", fp);
    write_property(fp, "commit", m->git_commit);
    write_property(fp, "suite_hash", m->suite_hash);
    write_property(fp, "policy", m->policy);
    write_property(fp, "blas_core", m->blas_core);
    write_property(fp, "blas", m->blas);
    write_property(fp, "version", m->version);
    write_property(fp, "device", m->device);
    write_property(fp, "kernel_build_id", m->kernel_build_id);
    write_property(fp, "suite_name", m->suite_name);
    write_property(fp, "shard", m->shard);
    write_property(fp, "command", m->command);
    fputs("  </properties>\n", fp);
}

/* <error> (ERROR rows) or <failure> (the other failing rows) of group k. */
static void write_problem(FILE *fp, const result_list_t *rows, const int64_t *gid, int64_t k,
                          const group_t *g, int errors)
{
    int64_t n = rows->count, first = -1;
    char line[2048];
    for (int64_t i = g->first; i < n && first < 0; i++)
        if (gid[i] == k && (errors ? rows->rows[i].verdict == VERDICT_ERROR
                                   : verdict_is_failure(rows->rows[i].verdict) != 0))
            first = i;
    const result_t *f = &rows->rows[first];
    failure_line(line, sizeof line, f);
    fprintf(fp, "    <%s message=\"", errors ? "error" : "failure");
    esc_xml(fp, line, 1);
    fputs("\" type=\"", fp);
    esc_xml(fp, verdict_name(f->verdict), 1);
    fputs("\">", fp);
    for (int64_t i = g->first; i < n; i++) {
        if (gid[i] != k || !verdict_is_failure(rows->rows[i].verdict))
            continue;
        failure_line(line, sizeof line, &rows->rows[i]);
        esc_xml(fp, line, 0);
        fputc('\n', fp);
    }
    fprintf(fp, "</%s>\n", errors ? "error" : "failure");
}

/* Each failing or diagnosed row of group k, with its diagnosis. */
static void write_system_out(FILE *fp, const result_list_t *rows, const int64_t *gid, int64_t k,
                             const group_t *g)
{
    char line[2048];
    fputs("    <system-out>", fp);
    for (int64_t i = g->first; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (gid[i] != k || (!verdict_is_failure(r->verdict) && !r->diagnosis[0]))
            continue;
        failure_line(line, sizeof line, r);
        esc_xml(fp, line, 0);
        fputc('\n', fp);
        if (r->diagnosis[0]) {
            fputs("  diagnosis: ", fp);
            esc_xml(fp, r->diagnosis, 0);
            fputc('\n', fp);
        }
    }
    fputs("</system-out>\n", fp);
}

int junit_write(FILE *fp, const char *suite_name, const result_list_t *rows, double seconds)
{
    junit_run_t run = {.suite_name = suite_name, .seconds = seconds, .meta = NULL};
    return junit_write_run(fp, &run, rows);
}

int junit_write_run(FILE *fp, const junit_run_t *run, const result_list_t *rows)
{
    const char *suite_name = run->suite_name;
    double seconds = run->seconds;
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
        g[k].errors += r->verdict == VERDICT_ERROR;
        g[k].diagnosed += r->diagnosis[0] != '\0';
        g[k].unsupported += r->verdict == VERDICT_UNSUPPORTED;
        if (isfinite(r->seconds))
            g[k].seconds += r->seconds;
    }
    int64_t nfail = 0, nerr = 0, nskip = 0;
    for (int64_t k = 0; k < ng; k++) {
        nerr += g[k].errors > 0;
        nfail += g[k].failing > 0 && g[k].errors == 0;
        nskip += g[k].failing == 0 && g[k].unsupported == g[k].rows;
    }

    char ts[40], host[256];
    suite_identity(run->meta, ts, sizeof ts, host, sizeof host);
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n", fp);
    fputs("<testsuite name=\"", fp);
    esc_xml(fp, suite_name ? suite_name : "kreplay", 1);
    fprintf(fp, "\" tests=\"%lld\" failures=\"%lld\" errors=\"%lld\" skipped=\"%lld\" "
                "time=\"%.3f\" timestamp=\"", (long long)ng, (long long)nfail, (long long)nerr,
            (long long)nskip, isfinite(seconds) ? seconds : 0.0);
    esc_xml(fp, ts, 1);
    fputs("\" hostname=\"", fp);
    esc_xml(fp, host, 1);
    fputs("\">\n", fp);
    write_properties(fp, run->meta);
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
        if (g[k].failing || g[k].diagnosed) {
            fputs(">\n", fp);
            if (g[k].failing)
                write_problem(fp, rows, gid, k, &g[k], g[k].errors > 0);
            write_system_out(fp, rows, gid, k, &g[k]);
            fputs("  </testcase>\n", fp);
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
