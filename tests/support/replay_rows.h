/* In-process replays for the judgement tests (test_judge.c,
 * test_judge_routes.c): a replay that fails the test on error, the row of a
 * kernel against a reference among its results, and the NaN-head sample. */
#ifndef KR_REPLAY_ROWS_H
#define KR_REPLAY_ROWS_H

#include "case_io.h"
#include "replay.h"

#define NANHEAD KREPLAY_SOURCE_DIR "/cases/samples/gdn_out_proj_slice_N512_K3072_M17_nanhead.h5"

/* The row of KERNEL against REFERENCE; fails the test when there is none. */
const result_t *replay_find_row(const result_list_t *rows, const char *kernel, const char *reference);

/* replay_case(c, o, rows); fails the test with its message when it fails. */
void replay_or_fail(const case_t *c, const replay_options_t *o, result_list_t *rows);

#endif
