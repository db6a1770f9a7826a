/* A gate's cases spread over several GPUs: one lane per GPU (or per entry
 * of --gpus: "0,0" is two workers on GPU 0), each a process forked from the
 * gate with its own GPU worker, taking the next case of the plan as it
 * finishes one (a shared counter), and sending the case's rows back.  The
 * gate's own process stays the only writer of partials and summaries, in
 * the order the cases finish; the rows, sorted at the end, are a one-GPU
 * run's.  A lane that dies loses the case it was on (an error naming it)
 * and the others go on. */
#ifndef KR_GATE_LANES_H
#define KR_GATE_LANES_H

#include <stdint.h>

#include "kr_error.h"
#include "result.h"

typedef struct {
    void *ctx;
    int64_t n_items;
    /* In a lane's process, first: its worker on GPU `device`; last: its end. */
    int (*lane_begin)(void *ctx, int device, kr_error_t *err);
    void (*lane_end)(void *ctx);
    /* In a lane's process: item i's rows appended to rows, what happened in
     * *outcome and why in cerr. */
    void (*run_item)(void *ctx, int64_t i, result_list_t *rows, int *outcome, kr_error_t *cerr);
    /* In the gate's process, as each item's report arrives: 0, or -1 with
     * err to stop the run (a partial that cannot be written). */
    int (*apply)(void *ctx, int64_t i, int outcome, const kr_error_t *cerr, const result_t *rows,
                 int64_t n_rows, kr_error_t *err);
    /* The outcome that says a lane died on an item (its rows lost). */
    int lost_outcome;
} gate_lanes_t;

/* Runs every item over n_lanes lanes on devices[0..n_lanes).  0, or -1 with
 * err (a lane could not be started, apply stopped the run). */
int gate_lanes_run(const gate_lanes_t *l, const int *devices, int n_lanes, kr_error_t *err);

#endif
