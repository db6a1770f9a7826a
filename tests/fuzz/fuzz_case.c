/* libFuzzer target: the HDF5 case reader and validator as the CLI runs them
 * (case_load_safe: case_read, which runs case_validate, in a child process,
 * because libhdf5 1.10 itself crashes or hangs on some corrupt files -- see
 * tests/fixtures/corrupt_h5).  Inputs go through a temporary file; a valid
 * case is validated again in memory, as the writer would. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "case_io.h"
#include "case_load.h"
#include "fuzz_tmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    if (fuzz_write_tmp(path, sizeof path, "h5", data, size) != 0)
        return 0;
    case_t c = {0};
    kr_error_t err;
    if (case_load_safe(path, &c, NULL, 2.0, &err) == 0) {
        (void)case_validate(&c, path, &err);
        case_free(&c);
    }
    unlink(path);
    return 0;
}
