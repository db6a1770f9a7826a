/* results_validate: rows that no kreplay run writes, refused before they
 * are merged, reported or compared.
 *
 * A run has one row per (case, kernel, reference): a results file, a shard
 * or a partial that repeats one -- the same row copied, or a row given a
 * second case path for the same case (the same case_name and content
 * digest case_id) -- would count it twice (a merge of 8 rows for a run of
 * 4, a gate that passes 102 rows for a suite of 4). */
#ifndef KR_RESULTS_VALIDATE_H
#define KR_RESULTS_VALIDATE_H

#include "kr_error.h"
#include "result.h"

/* 0 when every (case_path, kernel, reference) and every (case_name,
 * case_id, kernel, reference) with a case_id occurs once; else -1 with err:
 * "WHERE: rows: case X, kernel K, reference R occurs twice (rows i and j);
 * expected each row once". */
int results_check_unique(const result_list_t *rows, const char *where, kr_error_t *err);

#endif
