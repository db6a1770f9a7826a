/* results_reader: a results file (results_store.h) read by libhdf5 in a
 * separate process, like a case (case_load.h's case_load_safe).
 *
 * Every results file kreplay reads -- `report`'s, `merge`'s shards, a
 * baseline, the --history runs, the partials of --resume -- is untrusted
 * input: libhdf5 1.10 itself crashes (a damaged global heap under a
 * variable-length string, in an attribute or in the rows' compound
 * conversion) or hangs on some corrupt files
 * (tests/fixtures/corrupt_results).  So one worker process (isolate_reader.h)
 * reads them, under a time limit ($KREPLAY_READ_TIMEOUT, else 120 s) and an
 * address-space limit (the reading process's own size plus 1 GiB plus 16
 * times the file's), after the same checks as every read (a regular file,
 * opened without blocking; nothing that points outside the file,
 * h5_safety.h).  It hands the rows back as raw result_t records in an
 * anonymous file; the parent checks them as untrusted bytes (sizes, every
 * string terminated, verdicts in range) before using them.  A crash or a
 * hang is one error naming the file: "FILE: the HDF5 library crashed
 * reading it (killed by SIGSEGV ...): the file is corrupt; expected a
 * readable results file".  KREPLAY_READ_IN_PROCESS=1 reads in this process
 * (for a debugger). */
#ifndef KR_RESULTS_READER_H
#define KR_RESULTS_READER_H

#include <stddef.h>
#include <stdint.h>

#include "kr_error.h"
#include "result.h"
#include "results_store.h"

/* results_read_direct (results_store.h) in the reading process. */
int results_read_isolated(const char *path, result_list_t *rows, results_meta_t *meta,
                          char *case_key, size_t key_cap, int64_t *count_only, kr_error_t *err);

#endif
