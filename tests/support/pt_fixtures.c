/* The torch.save fixtures of the .pt reader's tests: see pt_fixtures.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <hdf5.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "pt_fixtures.h"

void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("expected \"%s\" in the message:\n  %s", needle, hay);
}

/* 1 when every fixture either test reads is under FIX, else 0. */
static int fixtures_present(void)
{
    const char *need[] = {"dump.pt", "dump.h5", "dump_noncontig.pt", "dump_square.pt",
                          "dtypes.pt", "dtypes.h5", "unsupported_complex.pt",
                          "unsupported_set.pt", "dtypes_typed.pt", "dtypes_v3.pt",
                          "dtypes_more.h5", "refused_int16.pt", "refused_uint16.pt",
                          "refused_e5m2fnuz.pt"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        char p[1024];
        struct stat st;
        snprintf(p, sizeof p, FIX "/%s", need[i]);
        if (stat(p, &st) != 0)
            return 0;
    }
    return 1;
}

int pt_tests_ready(const char *test)
{
    if (!fixtures_present()) {
        fprintf(stderr, "%s: fixtures missing under %s (run "
                        "scripts/fixtures/make_pt_fixtures.py with torch); skipped\n", test, FIX);
        return 0;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 1;
}
