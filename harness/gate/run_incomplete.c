#include "run_incomplete.h"

#include <math.h>
#include <string.h>

#include "kr_string.h"

int gate_incomplete_list(const gate_summary_t *sum, const char *stop_error,
                         const char *list[RUN_INCOMPLETE_MAX])
{
    int n = 0;
    for (int i = 0; i < sum->n_failed_keys && n < RUN_INCOMPLETE_MAX - 1; i++)
        list[n++] = sum->failed_keys[i];
    /* With unreadable inputs the run's error only counts them: they are listed already. */
    if (stop_error && stop_error[0] && sum->input_errors == 0)
        list[n++] = stop_error;
    return n;
}

int gate_rows_with_errors(const result_list_t *rows, const char *const *list, int n,
                          result_list_t *out)
{
    memset(out, 0, sizeof *out);
    for (int64_t i = 0; i < rows->count; i++) {
        result_t *r = result_list_add(out);
        if (!r)
            goto oom;
        *r = rows->rows[i];
    }
    for (int i = 0; i < n; i++) {
        result_t *r = result_list_add(out);
        if (!r)
            goto oom;
        kr_strlcpy(r->case_path, list[i], sizeof r->case_path);
        kr_strlcpy(r->case_name, list[i], sizeof r->case_name);
        kr_strlcpy(r->kernel, "-", sizeof r->kernel);
        kr_strlcpy(r->reference, "-", sizeof r->reference);
        kr_strlcpy(r->band, "none", sizeof r->band);
        kr_strlcpy(r->note, "not run or not written: the run is incomplete", sizeof r->note);
        r->verdict = VERDICT_ERROR;
        r->threshold = NAN;
        r->metrics.rel_fro = NAN;
        r->metrics.worst_row_rel = NAN;
        r->ref_f32_vs_f64 = NAN;
        r->time_ms = r->tflops = r->gbps = NAN;
        r->canary_ok = -1;
    }
    return 0;
oom:
    result_list_free(out);
    memset(out, 0, sizeof *out);
    return -1;
}
