/* The names a row's reference column takes: the one list the replay writes
 * rows with and a resumed run's partials are checked against, so that a new
 * kind of row cannot be written without being known to --resume. */
#ifndef KR_ROW_REFERENCE_H
#define KR_ROW_REFERENCE_H

/* Besides ref_kind_name()'s "R_exact" and "R_source": */
#define ROW_REF_INPUT "x"                 /* a quantizer's dequantized operand against x */
#define ROW_REF_SANITIZED "R_sanitized"   /* against x with its non-finite values zeroed */
#define ROW_REF_RERUN "out_rerun"         /* the recorded output against its recorded rerun */
#define ROW_REF_NONE "-"                  /* a row that compared nothing (a note) */
#define ROW_REF_MODEL_PREFIX "model:"     /* a kernel against a model ("model:NAME") */

/* The I-th fixed reference name (ref_kind_name()'s first), NULL past the
 * last; "model:NAME" references are not in it. */
const char *row_reference_name(int i);

/* 1 when a replay writes rows against this reference: a fixed name, or a
 * model's. */
int row_reference_known(const char *reference);

#endif
