/* results_validate: repeated rows refused (results_validate.h). */
#include "results_validate.h"

#include <stdlib.h>
#include <string.h>

#include "result_order.h"
#include "results_store.h"

static int identity_cmp(const result_t *a, const result_t *b)
{
    static const result_text_key_t keys[] = {
        RESULT_TEXT_KEY(case_name), RESULT_TEXT_KEY(case_id), RESULT_TEXT_KEY(kernel),
        RESULT_TEXT_KEY(reference),
    };
    return result_text_keys_cmp(a, b, keys, (int)(sizeof keys / sizeof keys[0]));
}

/* The first two rows equal under cmp (skipping rows without a case_id when
 * by_identity), or -1. */
static int64_t first_repeat(const result_list_t *rows, result_cmp_fn cmp, int by_identity,
                            int64_t *other, int *oom)
{
    int64_t *perm = result_order(rows->rows, rows->count, cmp);
    if (!perm) {
        *oom = 1;
        return -1;
    }
    int64_t found = -1;
    for (int64_t k = 1; k < rows->count && found < 0; k++) {
        const result_t *a = &rows->rows[perm[k - 1]], *b = &rows->rows[perm[k]];
        if (by_identity && !b->case_id[0])
            continue;
        if (cmp(a, b) == 0) {
            found = perm[k];
            *other = perm[k - 1];
        }
    }
    free(perm);
    return found;
}

int results_check_unique(const result_list_t *rows, const char *where, kr_error_t *err)
{
    if (rows->count < 2)
        return 0;
    int oom = 0;
    int64_t other = -1;
    int64_t at = first_repeat(rows, result_key_cmp, 0, &other, &oom);
    if (at >= 0) {
        const result_t *r = &rows->rows[at];
        return kr_fail(err, "%s: rows: case %s, kernel %s, reference %s occurs twice (rows %lld "
                            "and %lld); expected each row once, as a run writes it",
                       where, r->case_path, r->kernel, r->reference, (long long)other,
                       (long long)at);
    }
    at = oom ? -1 : first_repeat(rows, identity_cmp, 1, &other, &oom);
    if (at >= 0) {
        const result_t *r = &rows->rows[at], *o = &rows->rows[other];
        return kr_fail(err, "%s: rows: case %s (content %s), kernel %s, reference %s occurs "
                            "twice, as %s and as %s; expected each row once, as a run writes it",
                       where, r->case_name, r->case_id, r->kernel, r->reference, o->case_path,
                       r->case_path);
    }
    if (oom)
        return kr_fail(err, "%s: rows: out of memory checking %lld rows; expected to fit in memory",
                       where, (long long)rows->count);
    return 0;
}
