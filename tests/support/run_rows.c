#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_rows.h"
#include "test_support.h"

run_json_t run_json(const char *standin, const char *env, const char *args)
{
    char log[512], cmd[8192];
    test_tmp_path(log, sizeof log, "run_rows.err");
    snprintf(cmd, sizeof cmd, "KREPLAY_GPU_STANDIN=%s %s '%s' %s 2>'%s'", standin, env, KREPLAY_BINARY,
             args, log);
    char *out = NULL;
    run_json_t r = {.rc = test_exit_code(test_shell(cmd, &out))};
    json_error_t je;
    r.root = json_loads(out ? out : "", 0, &je);
    if (!r.root) {
        char *err = test_read_file(log, NULL);
        fail_msg("%s: no JSON (exit %d): %s", args, r.rc, err ? err : "");
    }
    free(out);
    return r;
}

json_t *rows_of(json_t *root)
{
    json_t *rows = json_object_get(root, "results");
    assert_non_null(rows);
    return rows;
}

json_t *find_row(json_t *rows, const char *case_name, const char *kernel, const char *ref)
{
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r) {
        if (!strcmp(json_string_value(json_object_get(r, "case_name")), case_name) &&
            !strcmp(json_string_value(json_object_get(r, "kernel")), kernel) &&
            !strcmp(json_string_value(json_object_get(r, "reference")), ref))
            return r;
    }
    return NULL;
}

int count_verdict(json_t *rows, const char *verdict)
{
    size_t i;
    json_t *r;
    int n = 0;
    json_array_foreach(rows, i, r)
        n += !strcmp(json_string_value(json_object_get(r, "verdict")), verdict);
    return n;
}

int rows_equal(json_t *base, json_t *run, int extra_ok)
{
    static const char *const fields[] = {"verdict", "note", "metrics", "ulp", "out_digest",
                                         "threshold", "diagnosis", "act_origin"};
    json_t *brows = rows_of(base), *rrows = rows_of(run), *b;
    size_t i;
    json_array_foreach(brows, i, b) {
        const char *cn = json_string_value(json_object_get(b, "case_name"));
        const char *kn = json_string_value(json_object_get(b, "kernel"));
        const char *rf = json_string_value(json_object_get(b, "reference"));
        json_t *r = find_row(rrows, cn, kn, rf);
        if (!r)
            fail_msg("row %s %s %s missing", cn, kn, rf);
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
            if (!json_equal(json_object_get(b, fields[f]), json_object_get(r, fields[f])))
                fail_msg("row %s %s %s: %s differs", cn, kn, rf, fields[f]);
    }
    const int extra = (int)json_array_size(rrows) - (int)json_array_size(brows);
    json_array_foreach(rrows, i, b) {
        const char *rf = json_string_value(json_object_get(b, "reference"));
        if (!extra_ok && !find_row(brows, json_string_value(json_object_get(b, "case_name")),
                                   json_string_value(json_object_get(b, "kernel")), rf))
            assert_true(!strncmp(rf, "model:", 6));
    }
    return extra;
}
