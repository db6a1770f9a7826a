/* The enum-name lookups of reference/name_table.h: both directions over a
 * hand-written table, the edges (out of range, NULL, a near miss in case or
 * length), that a failed lookup leaves *out alone, and the generated pair
 * of functions on a table of the test's own; plus blas_info's ISA table,
 * whose values are written down here from OpenBLAS' core list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "blas_info.h"
#include "name_table.h"
#include "test_main.h"

typedef enum { COLOUR_RED, COLOUR_GREEN, COLOUR_BLUE, COLOUR_COUNT } colour_t;

static const char *const colour_names[COLOUR_COUNT] = {
    [COLOUR_RED] = "red",
    [COLOUR_GREEN] = "green",
    [COLOUR_BLUE] = "blue",
};

NAME_TABLE_LOOKUPS(colour, colour_t, colour_names)

static void test_lookup_both_ways(void **state)
{
    (void)state;
    assert_string_equal(name_table_name(colour_names, COLOUR_COUNT, 0), "red");
    assert_string_equal(name_table_name(colour_names, COLOUR_COUNT, 2), "blue");
    assert_string_equal(name_table_name(colour_names, COLOUR_COUNT, 3), "unknown");
    assert_string_equal(name_table_name(colour_names, COLOUR_COUNT, -1), "unknown");
    assert_int_equal(name_table_find(colour_names, COLOUR_COUNT, "green"), 1);
    assert_int_equal(name_table_find(colour_names, COLOUR_COUNT, "Green"), -1);
    assert_int_equal(name_table_find(colour_names, COLOUR_COUNT, "gree"), -1);
    assert_int_equal(name_table_find(colour_names, COLOUR_COUNT, "greens"), -1);
    assert_int_equal(name_table_find(colour_names, COLOUR_COUNT, NULL), -1);
    /* a count short of the table hides its last entry */
    assert_int_equal(name_table_find(colour_names, 2, "blue"), -1);

    /* the pair NAME_TABLE_LOOKUPS defines */
    assert_string_equal(colour_name(COLOUR_GREEN), "green");
    assert_string_equal(colour_name((colour_t)7), "unknown");
    colour_t got = COLOUR_RED;
    assert_int_equal(colour_from_name("blue", &got), 0);
    assert_int_equal(got, COLOUR_BLUE);
    assert_int_equal(colour_from_name("purple", &got), -1);
    assert_int_equal(got, COLOUR_BLUE);     /* untouched */
    assert_int_equal(colour_from_name(NULL, &got), -1);
    assert_int_equal(got, COLOUR_BLUE);
}

static void test_blas_isa_table(void **state)
{
    (void)state;
    assert_string_equal(blas_isa_name(BLAS_ISA_UNKNOWN), "unknown");
    assert_string_equal(blas_isa_name(BLAS_ISA_SSE3), "SSE3");
    assert_string_equal(blas_isa_name(BLAS_ISA_AVX), "AVX");
    assert_string_equal(blas_isa_name(BLAS_ISA_AVX2), "AVX2");
    assert_string_equal(blas_isa_name(BLAS_ISA_AVX512), "AVX-512");
    assert_string_equal(blas_isa_name((blas_isa_t)99), "unknown");
    assert_string_equal(blas_core_for_isa(BLAS_ISA_AVX), "Sandybridge");
    assert_string_equal(blas_core_for_isa((blas_isa_t)99), "");
    /* each ISA's core is a core of that ISA in the core table */
    for (int isa = BLAS_ISA_SSE3; isa <= BLAS_ISA_AVX512; isa++)
        assert_int_equal(blas_core_isa(blas_core_for_isa((blas_isa_t)isa)), isa);
}

KR_TEST_MAIN(test_lookup_both_ways, test_blas_isa_table);
