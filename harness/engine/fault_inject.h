/* Deliberate faults injected into a kernel run, one per diagnosis
 * hypothesis (harness/judge/diagnose.h), so that each hypothesis can be proven:
 * inject the fault, replay, and the diagnosis must name it.
 *
 * A fault only changes what the KERNEL sees or writes.  The harness keeps
 * building its references from the honest operands, exactly as it would
 * for a real kernel with that bug.  Faults act at two points:
 *   - before the model runs: fault_inputs_apply() gives the faulty kernel's
 *     operands (owned copies where they differ) and kernel options;
 *   - after it ran: fault_output_apply() edits the bf16 output in place.
 * fault_run_kernel() does both around k->prepare_act / k->run_cpu. */
#ifndef KR_FAULT_INJECT_H
#define KR_FAULT_INJECT_H

#include <stdint.h>

#include "kr_error.h"
#include "registry.h"

typedef enum {
    FAULT_NONE = 0,
    FAULT_WPERM_READ,       /* "wperm": the kernel reads checkpoint-order weights as fragment
                               order (RADIANCE_MXFP4_WPERM on in the kernel, off at load):
                               it computes on unpermute_w(W) */
    FAULT_WPERM_INVERSE,    /* "wperm-inverse": the kernel reads fragment-order weights as
                               checkpoint order (permuted at load, kernel flag off): permute_w(W) */
    FAULT_SCALE_LAYOUT,     /* "scale-layout": the scale bytes are read in the other layout
                               ([N, K/32] <-> [K/32, N]) */
    FAULT_SCALE_POW2,       /* "scale-pow2:k": every weight block exponent off by k (default 1) */
    FAULT_SCALE_CONST,      /* "scale-const:c": the output multiplied by c (default 1/35) */
    FAULT_SANITIZE,         /* "sanitize": the kernel quantizes nan_to_num(x) (non-finite -> 0) */
    FAULT_QUANT_VARIANT,    /* "quant-variant:name": the kernel quantizes x with another
                               variant (fp8: vllm/traced/pure/reciprocal; mxfp4:
                               aiter-even/ocp/ceil; default traced for fp8, ocp for mxfp4) */
    FAULT_TILE_UNWRITTEN,   /* "tile-unwritten:T": the last N tile of width T (default 32; the
                               partial one when N % T != 0) never written: bf16 0xFFFF (NaN,
                               what a 0xFF memset leaves) */
    FAULT_TILE_ZEROS,       /* "tile-zeros:T": the same columns written as zeros */
    FAULT_ROWS_NAN,         /* "rows-nan:r": output rows whose input row is non-finite become
                               NaN (a NaN-propagating quantizer); with finite input, rows
                               0..r-1 (default 1) */
    FAULT_ULP_NUDGE,        /* "ulp-nudge:p": a fraction p (default 0.01) of the outputs, picked
                               by a fixed hash of their index, moved one bf16 ULP away from
                               zero: the smallest change a gate must still see */
    FAULT_TILE_SCALE,       /* "tile-scale:c": one 16 x 32 output tile (rows 0-15, columns
                               0-31) multiplied by c (default 2) */
    FAULT_COUNT
} fault_kind_t;

typedef struct {
    fault_kind_t kind;
    double param;           /* k, c, T or r; set to the default by fault_parse when omitted */
    char variant[24];       /* FAULT_QUANT_VARIANT: the variant name ("" = default) */
} fault_t;

/* What a row's note says when its kernel's injected fault left every output
 * bit as the clean kernel's: the run tested nothing there (a sanitize fault
 * on a clean case, a quantizer variant that agrees, a tiny nudge).  The
 * summaries count the rows that carry it. */
#define FAULT_NO_EFFECT_NOTE "injected fault changed no output bit"

/* "wperm", "scale-layout", "scale-pow2", ... (NULL for an unknown kind). */
const char *fault_name(fault_kind_t k);

/* Parses "name[:param]" (e.g. "scale-pow2:3", "scale-const:0.02857", "wperm",
 * "tile-unwritten", "quant-variant:traced").  Returns 0, or -1 with err
 * naming the bad part and the known faults. */
int fault_parse(const char *spec, fault_t *f, kr_error_t *err);

/* "scale-pow2:3 (every weight block exponent off by 3)". */
void fault_describe(const fault_t *f, char *buf, int cap);

/* Every fault, one per line, for --help. */
const char *fault_usage(void);

/* The faulty kernel's operands.  `in` points at the caller's arrays except
 * where owned copies replace them. */
typedef struct {
    kernel_inputs_t in;
    kernel_options_t opt;
    int act_changed;        /* the faulty kernel quantizes its own activations (opt says how) */
    uint8_t *weight_owned;
    uint8_t *scales_owned;
    float *x_owned;
} fault_inputs_t;

/* Returns 0, or -1 with err set (allocation failure, or a precondition:
 * WPERM needs N and K divisible by 16; sanitize and quant-variant need x;
 * scale faults need an MXFP4 weight). */
int fault_inputs_apply(const fault_t *f, const kernel_inputs_t *in, const kernel_options_t *opt,
                       fault_inputs_t *fi, kr_error_t *err);
void fault_inputs_free(fault_inputs_t *fi);

/* Edits out[M, N] (bf16 bits) in place for the output faults (scale-const,
 * tile-*, rows-nan); a no-op for the others.  `in` gives the shape and x,
 * `act` (may be NULL) the input rows when x is absent. */
int fault_output_apply(const fault_t *f, const kernel_inputs_t *in, const kernel_act_t *act,
                       uint16_t *out, kr_error_t *err);

/* Runs kernel k as if it had fault f.  `act` is the activations the harness
 * prepared for k (its R_exact operand); the faulty kernel reuses them unless
 * the fault changes how it quantizes.  out: [M, N] bf16 bits. */
int fault_run_kernel(const fault_t *f, const kernel_desc_t *k, const kernel_inputs_t *in,
                     const kernel_options_t *opt, const kernel_act_t *act, uint16_t *out,
                     kernel_run_info_t *info, kr_error_t *err);

#endif
