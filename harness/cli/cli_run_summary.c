#include "cli_run_summary.h"

#include <stdlib.h>
#include <string.h>

#include "fault_inject.h"
#include "report.h"

void cli_summary_line(FILE *fp, const result_list_t *rows, int cases_not_read)
{
    char *line = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&line, &len);
    if (mem) {
        report_summary_line(mem, rows);
        fclose(mem);
    }
    if (!line) {
        report_summary_line(fp, rows);
        return;
    }
    while (len > 0 && line[len - 1] == '\n')
        line[--len] = '\0';
    fputs(line, fp);
    free(line);
    if (cases_not_read > 0)
        fprintf(fp, "; %d case%s not read (%s above)", cases_not_read, cases_not_read == 1 ? "" : "s",
                cases_not_read == 1 ? "its error is" : "their errors are");
    fputc('\n', fp);
}

static int fault_did_nothing(const result_t *r)
{
    return strstr(r->note, FAULT_NO_EFFECT_NOTE) != NULL;
}

void cli_fault_summary(FILE *fp, const result_list_t *rows)
{
    /* The kernels, rows and cases (a case's rows are adjacent, in a
     * replay's order and a run's sort) whose fault did nothing. */
    const char *kernels[64];
    int n_kernels = 0;
    int64_t n_rows = 0, n_cases = 0;
    const char *last_case = NULL;
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!fault_did_nothing(r))
            continue;
        n_rows++;
        n_cases += !last_case || strcmp(last_case, r->case_path) != 0;
        last_case = r->case_path;
        int k = 0;
        while (k < n_kernels && strcmp(kernels[k], r->kernel) != 0)
            k++;
        if (k == n_kernels && n_kernels < 64)
            kernels[n_kernels++] = r->kernel;
    }
    if (n_rows == 0)
        return;
    fprintf(fp, "%s of ", FAULT_NO_EFFECT_NOTE);
    for (int k = 0; k < n_kernels; k++)
        fprintf(fp, "%s%s", k ? ", " : "", kernels[k]);
    fprintf(fp, " (%lld row%s of %lld case%s): the fault was not tested there\n", (long long)n_rows,
            n_rows == 1 ? "" : "s", (long long)n_cases, n_cases == 1 ? "" : "s");
}

int cli_rows_compared_nothing(const char *cmd, const result_list_t *rows)
{
    int64_t unsupported = 0;
    const result_t *first = NULL;
    for (int64_t i = 0; i < rows->count; i++) {
        if (rows->rows[i].verdict != VERDICT_UNSUPPORTED)
            return 0;
        unsupported++;
        if (!first)
            first = &rows->rows[i];
    }
    if (rows->count == 0)
        fprintf(stderr, "kreplay %s: the run selected no rows: nothing was checked\n", cmd);
    else
        fprintf(stderr, "kreplay %s: no row compared anything: all %lld rows are UNSUPPORTED (%s: %s); select "
                        "kernels that serve these cases ('kreplay list kernels --verbose')\n",
                cmd, (long long)unsupported, first->kernel, first->note);
    return 1;
}
