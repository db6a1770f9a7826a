/* libFuzzer target: the results-file reader as every command runs it
 * (results_store_read: libhdf5 in the reading process, the rows handed back
 * and checked as untrusted bytes), and the checks on what it returns
 * (results_validate.h).  libhdf5 1.10 itself crashes or hangs on some
 * corrupt results files -- see tests/fixtures/corrupt_results -- which must
 * end as one error, never a crash of this process. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "fuzz_tmp.h"
#include "results_store.h"
#include "results_validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    if (fuzz_write_tmp(path, sizeof path, "h5", data, size) != 0)
        return 0;
    setenv("KREPLAY_READ_TIMEOUT", "2", 0);
    result_list_t rows;
    results_meta_t meta;
    kr_error_t err;
    if (results_store_read(path, &rows, &meta, &err) == 0) {
        (void)results_check_unique(&rows, path, &err);
        result_list_free(&rows);
    }
    int64_t n = 0;
    (void)results_store_read_meta(path, &meta, &n, &err);
    unlink(path);
    return 0;
}
