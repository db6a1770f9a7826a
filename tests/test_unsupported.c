/* One rule for ERROR against UNSUPPORTED: a kernel that cannot take a case
 * (a shape or option it does not serve) gives an UNSUPPORTED row, never an
 * ERROR.  K = 64 is a multiple of the MX block but not of w4a8.decode's
 * 4 splits x 32: before the rule the decode kernel's row was ERROR while the
 * skinny bf16 kernel's row for the same kind of limit was UNSUPPORTED. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "case_io.h"
#include "replay.h"
#include "synth.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"

static void test_shape_limit_is_unsupported(void **state)
{
    (void)state;
    case_t c;
    test_synth_default_or_fail(4, 64, 64, 21, &c);
    kr_error_t err = {{0}};
    replay_options_t opt;
    replay_options_default(&opt);
    result_list_t rows = {0};
    assert_int_equal(replay_case(&c, &opt, &rows, &err), 0);
    int decode_rows = 0, errors = 0;
    for (int64_t i = 0; i < rows.count; i++) {
        const result_t *r = &rows.rows[i];
        errors += r->verdict == VERDICT_ERROR;
        if (r->verdict == VERDICT_ERROR)
            print_error("%s vs %s: ERROR: %s\n", r->kernel, r->reference, r->note);
        if (!strcmp(r->kernel, "w4a8.decode")) {
            decode_rows++;
            assert_int_equal(r->verdict, VERDICT_UNSUPPORTED);
            assert_non_null(strstr(r->note, "not a multiple of SK*32 = 128"));
        }
    }
    assert_int_equal(decode_rows, 1);
    assert_int_equal(errors, 0);
    /* With 2 splits the same kernel takes the case and is judged. */
    opt.kernel.decode_splits = 2;
    result_list_t rows2 = {0};
    assert_int_equal(replay_case(&c, &opt, &rows2, &err), 0);
    int judged = 0;
    for (int64_t i = 0; i < rows2.count; i++)
        if (!strcmp(rows2.rows[i].kernel, "w4a8.decode"))
            judged += rows2.rows[i].verdict != VERDICT_UNSUPPORTED &&
                      rows2.rows[i].verdict != VERDICT_ERROR;
    assert_true(judged >= 1);
    result_list_free(&rows);
    result_list_free(&rows2);
    case_free(&c);
}

KR_TEST_MAIN(test_shape_limit_is_unsupported);
