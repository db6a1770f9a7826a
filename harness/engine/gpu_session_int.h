/* gpu_session.c's insides, for the request builders (gpu_session_ops.c):
 * a request is laid out in the arena from offset 0 (gs_begin), its
 * operands placed (gs_operand: sent or named resident) and raw arrays
 * copied (gs_array), its reply room reserved (gs_reply), then sent
 * (gs_call).  The reply is read from the arena before the next request. */
#ifndef KR_GPU_SESSION_INT_H
#define KR_GPU_SESSION_INT_H

#include <stddef.h>
#include <stdint.h>

#include "gpu_proto.h"
#include "gpu_session.h"

/* Starts a request: the arena's layout from the top, the worker running
 * (and its device opened, for a GPU session).  -1 with err when no worker
 * or no device. */
int gs_begin(gpu_session_t *s, kr_error_t *err);

/* An operand of `bytes` at p (NULL or 0 bytes: none).  stable: p lives as
 * long as the case (its digest is remembered by address until
 * gpu_session_case_end); else it is hashed every time. */
int gs_operand(gpu_session_t *s, const void *p, size_t bytes, int stable, gw_operand_t *o,
               kr_error_t *err);

/* Raw bytes copied into the arena for this request only: their offset, or
 * GW_NONE for p NULL. */
int gs_array(gpu_session_t *s, const void *p, size_t bytes, uint64_t *offset, kr_error_t *err);

/* Room for the reply; h->reply and h->reply_cap set. */
int gs_reply(gpu_session_t *s, size_t cap, gw_head_t *h, kr_error_t *err);

/* Sends the request (h->op set; the evictions are added here), allowing
 * the timeout once for each of its `launches`.  0 when the request ran,
 * however it ended (ir), -1 with err when no worker could be started.  A
 * reply that asks to retire (gw_*_reply_t.retire) is the caller's:
 * gs_retire. */
int gs_call(gpu_session_t *s, gw_head_t *h, size_t bytes, int launches, isolate_result_t *ir,
            kr_error_t *err);

/* A pointer into the arena. */
void *gs_at(gpu_session_t *s, uint64_t offset);

/* Ends the worker: the next request starts a fresh one. */
void gs_retire(gpu_session_t *s);

const gpu_session_options_t *gs_options(const gpu_session_t *s);

#endif
