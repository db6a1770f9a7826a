/* A case's identity: a digest of its operands, so a row is matched to its
 * baseline by what was computed, never by the path the case was read from
 * (which changes with the working directory). */
#ifndef KR_CASE_IDENTITY_H
#define KR_CASE_IDENTITY_H

#include <pthread.h>

#include "case.h"

/* 64-bit FNV-1a, as 16 hex digits, over M, N, K, the weight's order and
 * scale layout, and every operand a kernel or reference reads: x (its fp32
 * bits), x_fp8 with its format and x_scale, the MXFP4 weight, its scales and
 * weight_ref, and weight_bf16.  Recorded outputs and provenance are not
 * operands and do not enter it. */
void case_content_id(const case_t *c, char out[17]);

/* case_content_id beside other work: the digest is a byte-serial pass over
 * every operand (about 0.06 s for a 64 x 17408 x 5120 case), so a replay
 * starts it on a thread of its own and takes the digest when its rows are
 * done.  Small cases, or no thread to be had, compute it at finish.  The
 * case must not change in between. */
typedef struct {
    const case_t *c;
    char id[17];
    int threaded;           /* a thread computes id: finish joins it */
    pthread_t thread;
} case_id_job_t;

void case_id_job_start(case_id_job_t *job, const case_t *c);
void case_id_job_finish(case_id_job_t *job, char out[17]);

#endif
