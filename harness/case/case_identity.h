/* A case's identity: a digest of its operands, so a row is matched to its
 * baseline by what was computed, never by the path the case was read from
 * (which changes with the working directory). */
#ifndef KR_CASE_IDENTITY_H
#define KR_CASE_IDENTITY_H

#include "case.h"

/* 64-bit FNV-1a, as 16 hex digits, over M, N, K, the weight's order and
 * scale layout, and every operand a kernel or reference reads: x (its fp32
 * bits), x_fp8 with its format and x_scale, the MXFP4 weight, its scales and
 * weight_ref, and weight_bf16.  Recorded outputs and provenance are not
 * operands and do not enter it. */
void case_content_id(const case_t *c, char out[17]);

#endif
