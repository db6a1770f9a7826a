/* The BLAS core check: OpenBLAS' core names mapped to their instruction sets
 * (from OpenBLAS' kernel directories: Prescott..Nehalem SSE3-class,
 * Sandybridge and the Bulldozer family AVX, Haswell/Zen/Excavator AVX2,
 * SkylakeX/Cooperlake/SapphireRapids AVX-512), the mismatch rule, and the
 * restart as kreplay does it: an OPENBLAS_CORETYPE the test sets is taken for
 * the detected core (KREPLAY_BLAS_CORE_AS_DETECTED), and kreplay must come
 * back on the core of the CPU's widest instructions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_info.h"
#include "test_main.h"
#include "test_support.h"

static void test_core_table(void **state)
{
    (void)state;
    assert_int_equal(blas_core_isa("Prescott"), BLAS_ISA_SSE3);
    assert_int_equal(blas_core_isa("prescott"), BLAS_ISA_SSE3);
    assert_int_equal(blas_core_isa("Nehalem"), BLAS_ISA_SSE3);
    assert_int_equal(blas_core_isa("Sandybridge"), BLAS_ISA_AVX);
    assert_int_equal(blas_core_isa("Haswell"), BLAS_ISA_AVX2);
    assert_int_equal(blas_core_isa("Zen"), BLAS_ISA_AVX2);
    assert_int_equal(blas_core_isa("SkylakeX"), BLAS_ISA_AVX512);
    assert_int_equal(blas_core_isa("SapphireRapids"), BLAS_ISA_AVX512);
    assert_int_equal(blas_core_isa("NoSuchCore"), BLAS_ISA_UNKNOWN);
    assert_int_equal(blas_core_isa(NULL), BLAS_ISA_UNKNOWN);
    assert_string_equal(blas_core_for_isa(BLAS_ISA_AVX512), "SkylakeX");
    assert_string_equal(blas_core_for_isa(BLAS_ISA_AVX2), "Haswell");
    assert_string_equal(blas_core_for_isa(BLAS_ISA_SSE3), "Prescott");
    assert_string_equal(blas_core_for_isa(BLAS_ISA_UNKNOWN), "");
}

static void test_mismatch_rule(void **state)
{
    (void)state;
    blas_info_t b = {.core_isa = BLAS_ISA_SSE3, .cpu_isa = BLAS_ISA_AVX512};
    assert_true(blas_info_core_mismatch(&b));
    b.core_isa = BLAS_ISA_AVX512;
    assert_false(blas_info_core_mismatch(&b));
    b.core_isa = BLAS_ISA_AVX2;
    assert_true(blas_info_core_mismatch(&b));
    b.cpu_isa = BLAS_ISA_AVX2;
    assert_false(blas_info_core_mismatch(&b));
    b.core_isa = BLAS_ISA_UNKNOWN; /* a core we do not know is never "wrong" */
    assert_false(blas_info_core_mismatch(&b));
}

/* This process: the core is a name of the table, and a CPU with AVX2 runs at
 * least AVX2 kernels unless the environment chose otherwise. */
static void test_this_process(void **state)
{
    (void)state;
    blas_info_t b;
    blas_info_get(&b);
    assert_true(strlen(b.core) > 0);
    assert_true(b.threads >= 1);
    assert_non_null(strstr(b.config, "OpenBLAS"));
    char line[512];
    blas_info_format(&b, line, sizeof line);
    assert_non_null(strstr(line, b.core));
    if (!getenv("OPENBLAS_CORETYPE"))
        assert_false(blas_info_core_mismatch(&b));
}

static void test_restart(void **state)
{
    (void)state;
    blas_info_t b;
    blas_info_get(&b);
    if (b.cpu_isa <= BLAS_ISA_SSE3) {
        print_message("this CPU has nothing wider than SSE3: no core to restart on\n");
        skip();
    }
    char *out = NULL;
    /* the user's choice stands, and is said to be theirs */
    setenv("OPENBLAS_CORETYPE", "Prescott", 1);
    unsetenv("KREPLAY_BLAS_CORE_AS_DETECTED");
    assert_int_equal(test_run_kreplay("--version", &out), 0);
    assert_non_null(strstr(out, "BLAS: Prescott core"));
    assert_non_null(strstr(out, "chosen by OPENBLAS_CORETYPE"));
    free(out);
    /* a misdetected core: kreplay restarts itself on the right one */
    setenv("KREPLAY_BLAS_CORE_AS_DETECTED", "1", 1);
    assert_int_equal(test_run_kreplay("--version", &out), 0);
    char want[64];
    snprintf(want, sizeof want, "BLAS: %s core", blas_core_for_isa(b.cpu_isa));
    if (!strstr(out, want) || !strstr(out, "set by kreplay")) {
        print_error("expected \"%s ... set by kreplay\", got:\n%s\n", want, out);
        fail();
    }
    assert_null(strstr(out, "warning"));
    free(out);
    unsetenv("KREPLAY_BLAS_CORE_AS_DETECTED");
    unsetenv("OPENBLAS_CORETYPE");
}

KR_TEST_MAIN(test_core_table, test_mismatch_rule, test_this_process, test_restart);
