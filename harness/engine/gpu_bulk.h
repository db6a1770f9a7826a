/* The GPU session's bulk work on the host, spread over the cores: copies
 * into and out of the shared arena, and the content digest naming an
 * operand.  A prefill case moves hundreds of MiB each way; one core copies
 * or hashes some 5-10 GB/s. */
#ifndef KR_GPU_BULK_H
#define KR_GPU_BULK_H

#include <stddef.h>
#include <stdint.h>

void gpu_bulk_copy(void *dst, const void *src, size_t bytes);

/* content_hash64 of the bytes, or, from GPU_BULK_CHUNK up, content_hash64
 * of the chunks' hashes (the same bytes always get the same digest). */
uint64_t gpu_bulk_digest(const void *p, size_t bytes);

#define GPU_BULK_CHUNK ((size_t)8 << 20)

#endif
