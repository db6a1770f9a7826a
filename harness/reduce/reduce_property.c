/* The property a reduction keeps: one replay of a candidate, its row, and
 * whether that row fails the way the original did. */
#include <string.h>

#include "kr_string.h"
#include "reduce.h"
#include "row_reference.h"

int reduce_row_is_recorded(const char *kernel)
{
    return strncmp(kernel, "recorded.", 9) == 0;
}

/* The options of a replay that computes the row and little else. */
static replay_options_t row_options(const reduce_options_t *o)
{
    replay_options_t r = o->replay;
    const int recorded = reduce_row_is_recorded(o->kernel);
    /* No kernel name holds '/' (plugin_loader.c), so "/" runs no kernel. */
    r.kernel_patterns = recorded ? "/" : o->kernel;
    r.refs = strcmp(o->reference, "R_source") == 0 || strcmp(o->reference, ROW_REF_SANITIZED) == 0
                 ? REF_SOURCE
                 : REF_EXACT;
    r.include_recorded = recorded;
    r.diagnose = 1;
    r.skip_identities = 1;
    r.progress = NULL;
    r.save_outputs_path = NULL;
    r.oracle = 0;
    return r;
}

int reduce_replay_row(const case_t *c, const reduce_options_t *o, reduce_outcome_t *out,
                      kr_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->verdict = VERDICT_COUNT;
    kr_strlcpy(out->family, "none", sizeof out->family);
    const replay_options_t r = row_options(o);
    result_list_t rows = {0};
    if (replay_case(c, &r, &rows, err)) {
        result_list_free(&rows);
        return -1;
    }
    for (int64_t i = 0; i < rows.count; i++) {
        const result_t *row = &rows.rows[i];
        /* A kernel that crashed, hung or wrote out of bounds has one row
         * (reference "-") in place of its compared rows. */
        if (strcmp(row->kernel, o->kernel) != 0 ||
            (strcmp(row->reference, o->reference) != 0 && strcmp(row->reference, ROW_REF_NONE) != 0))
            continue;
        out->verdict = row->verdict;
        out->over_threshold = row->metrics.rel_fro > row->threshold;
        kr_strlcpy(out->acc_model, row->acc_fit.model, sizeof out->acc_model);
        if (row->diagnosis_family[0])
            kr_strlcpy(out->family, row->diagnosis_family, sizeof out->family);
        kr_strlcpy(out->diagnosis, row->diagnosis, sizeof out->diagnosis);
        kr_strlcpy(out->note, row->note, sizeof out->note);
        out->rel_fro = row->metrics.rel_fro;
        break;
    }
    result_list_free(&rows);
    return 0;
}

int reduce_same_way(const reduce_outcome_t *a, const reduce_outcome_t *b)
{
    if (a->verdict == VERDICT_COUNT || a->verdict != b->verdict)
        return 0;
    /* The diagnosis of a nondeterministic row is of one of its runs, whose
     * wrong elements change from run to run: the verdict is the failure. */
    if (a->verdict == VERDICT_NONDETERMINISTIC)
        return 1;
    if (strcmp(a->family, b->family) != 0)
        return 0;
    /* The accumulation fit names its model in a field of its own: a
     * split-K partial in bf16 is not a running sum in bf16. */
    if (strcmp(a->family, "acc_precision") == 0 && strcmp(a->acc_model, b->acc_model) != 0)
        return 0;
    /* Without a diagnosis, which side of the threshold rel_fro is on still
     * tells a rel_fro failure from one of the judgement's other tests (a
     * rounding bias, max_ulp, ...). */
    return strcmp(a->family, "none") != 0 || a->over_threshold == b->over_threshold;
}
