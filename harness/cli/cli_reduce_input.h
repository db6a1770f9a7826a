/* What `kreplay reduce` starts from: a case file (HDF5 or torch .pt), a
 * gate's synthetic case named by its key ("synth:LAYER:NxK:M<M>:s<seed>:i<item>",
 * the case_path of its rows) within its suite, or a row of a results file. */
#ifndef KR_CLI_REDUCE_INPUT_H
#define KR_CLI_REDUCE_INPUT_H

#include "case.h"
#include "kr_error.h"
#include "result.h"
#include "results_store.h"
#include "suite.h"

/* Row `index` (0-based, the order of results.h5's /rows) of a results
 * file, with the file's provenance.  Returns 0, or -1 with err. */
int reduce_input_row(const char *results_path, long long index, result_t *row, results_meta_t *meta,
                     kr_error_t *err);

/* 1 when path is a synthetic case's key. */
int reduce_input_is_synthetic(const char *path);

/* The case at path: a file, or (with suite) a synthetic case by its key,
 * made as the gate made it.  Returns 0, or -1 with err. */
int reduce_input_load(const char *path, const suite_t *suite, case_t *c, kr_error_t *err);

#endif
