#include "json_rows.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "test_support.h"

static int row_selected(const json_rows_want_t *want, const char *rk, const char *rr)
{
    if (want->kernel && (!rk || strcmp(rk, want->kernel)))
        return 0;
    if (!want->ref)
        return 1;
    if (!rr)
        return 0;
    return want->ref_substring ? strstr(rr, want->ref) != NULL : strcmp(rr, want->ref) == 0;
}

static void check_note(const char *rk, const char *rn, const char *text)
{
    if (text && (!rn || !strstr(rn, text)))
        fail_msg("%s: note \"%s\" lacks \"%s\"", rk ? rk : "?", rn ? rn : "", text);
}

int json_rows_count(json_t *root, const json_rows_want_t *want)
{
    json_t *rows = json_object_get(root, "results");
    assert_non_null(rows);
    int n = 0;
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r) {
        const char *rk = json_string_value(json_object_get(r, "kernel"));
        const char *rr = json_string_value(json_object_get(r, "reference"));
        if (!row_selected(want, rk, rr))
            continue;
        const char *rv = json_string_value(json_object_get(r, "verdict"));
        const char *rn = json_string_value(json_object_get(r, "note"));
        if (want->verdict && (!rv || strcmp(rv, want->verdict)))
            fail_msg("%s vs %s: verdict %s, expected %s (note: %s)", rk ? rk : "?", rr ? rr : "?",
                     rv ? rv : "?", want->verdict, rn ? rn : "");
        check_note(rk, rn, want->note);
        check_note(rk, rn, want->note2);
        const int identical = want->identical == IDENTICAL_EVERY_ROW ||
                              (want->identical == IDENTICAL_MODEL_ROWS && rr &&
                               !strncmp(rr, "model:", 6));
        if (identical) {
            json_t *idf = json_object_get(json_object_get(r, "ulp"), "identical_frac");
            if (!idf || json_real_value(idf) != 1.0)
                fail_msg("%s vs %s: identical_frac %g, expected 1", rk ? rk : "?", rr ? rr : "?",
                         idf ? json_real_value(idf) : -1.0);
        }
        n++;
    }
    return n;
}

json_t *json_rows_replay_py(const char *args, const char *target, int *rc)
{
    json_t *root = NULL;
    char err[8192];
    const int status = test_replay_json_py(args, target, &root, err, sizeof err);
    if (!root)
        fail_msg("no JSON (exit %d): %s", status, err);
    if (rc)
        *rc = status;
    else if (status != 0)
        fail_msg("exit %d; stderr: %s", status, err);
    return root;
}
