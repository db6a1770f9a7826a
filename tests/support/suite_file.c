#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>

#include "suite_file.h"
#include "test_support.h"

void test_write_suite(const char *path, const test_suite_spec_t *spec)
{
    char seeds[256] = "";
    if (spec->seeds)
        snprintf(seeds, sizeof seeds, "      seeds: [%s]\n", spec->seeds);
    char text[4096];
    const int n = snprintf(text, sizeof text,
                           "suite: %s\n"
                           "cases:\n"
                           "  - files: [\"%s\"]\n"
                           "  - synth:\n"
                           "      shapes: [%s]\n"
                           "      m: [%s]\n"
                           "%s"
                           "kernels: [%s]\n",
                           spec->name, spec->files, spec->shapes, spec->m, seeds, spec->kernels);
    if (n < 0 || (size_t)n >= sizeof text)
        fail_msg("suite %s: text does not fit", path);
    if (test_write_text(path, text) != 0)
        fail_msg("cannot write the suite %s", path);
}
