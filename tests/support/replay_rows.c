/* In-process replays for the judgement tests: see replay_rows.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "replay_rows.h"

const result_t *replay_find_row(const result_list_t *rows, const char *kernel, const char *reference)
{
    for (int64_t i = 0; i < rows->count; i++)
        if (!strcmp(rows->rows[i].kernel, kernel) && !strcmp(rows->rows[i].reference, reference))
            return &rows->rows[i];
    fail_msg("no row %s vs %s", kernel, reference);
    return NULL;
}

void replay_or_fail(const case_t *c, const replay_options_t *o, result_list_t *rows)
{
    kr_error_t err = {{0}};
    if (replay_case(c, o, rows, &err))
        fail_msg("replay_case: %s", err.msg);
}
