/* The run every folded W4A8 model shares (w4a8.folded and its layouts,
 * w4a8.partitioned, w4a8.decode, w4a8.r4d): build the folded weight plan,
 * then per output (m, n), with p the activation copy serving column n,
 *   K cut into SK equal contiguous ranges R_s;
 *   partial[s] = +0; for k in R_s ascending: partial[s] += fp8(x_p[m][k]) * w8[n][k]
 *   acc = partial[0]; for s = 1 .. SK-1: acc += partial[s]      (split order)
 *   out[m][n] = bf16_rne(acc * (x_scale_p[m] * 2^(ref[n] - 127)))
 * in IEEE fp32, no FMA.  With one copy and SK = 1 this is w4a8.folded's
 * order; each model's header comment states its own. */
#ifndef KR_FOLDED_MODEL_H
#define KR_FOLDED_MODEL_H

#include "folded_weight.h"

#define FOLDED_MAX_PARTS 3

/* What one model reads and how it sums. */
typedef struct {
    folded_wlayout_t wlayout;   /* where the weight bytes are read from */
    int parts;                  /* activation copies, 1 .. FOLDED_MAX_PARTS */
    folded_act_t act[FOLDED_MAX_PARTS];
    /* copy p serves the columns [part_end[p - 1], part_end[p]) (from 0);
     * the last copy's end is N */
    int64_t part_end[FOLDED_MAX_PARTS];
    int splits;                 /* SK >= 1; K % (SK * 32) == 0 */
    const char *layout_note;    /* the model's own sentence for the note, or "" */
} folded_model_t;

/* Runs the model over the case's weight on opt->threads threads into
 * out[M][N].  On success, when info is given, its note is layout_note,
 * then "ref = case weight_ref" when the reference exponents came from the
 * case, then the underflow sentence (folded_stats_note), joined by "; ".
 * Returns 0, or -1 with err filled. */
int folded_model_run(const folded_model_t *model, const kernel_inputs_t *in,
                     const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                     kr_error_t *err);

#endif
