/* Which kernels a replay runs (the registry's and its extra kernels, those
 * matching --kernels), and whether a pattern aimed at them (the KERNELS of
 * `--inject KERNELS=FAULT`) names any: a glob that matches none of them
 * would leave the run as if it had not been given, so it is an error. */
#ifndef KR_KERNEL_SELECTION_H
#define KR_KERNEL_SELECTION_H

#include "kr_error.h"
#include "replay.h"

/* Is k one of the kernels opt runs? */
int kernel_selected(const replay_options_t *opt, const kernel_desc_t *k);

/* 0 when every comma-separated glob of globs matches a kernel opt runs;
 * else -1 with err: "OPTION: 'GLOB' matches none of the kernels this run
 * replays (did you mean NAME?)", and when the glob names a kernel --kernels
 * left out, says so. */
int kernel_selection_check(const replay_options_t *opt, const char *option, const char *globs, kr_error_t *err);

#endif
