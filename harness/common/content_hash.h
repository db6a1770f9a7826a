/* A fast 64-bit hash of a byte range, for naming buffers by their content:
 * two buffers of the same length and hash are taken to be the same bytes
 * (the GPU worker keeps one device copy of each, harness/engine/gpu_session.h).
 * Four independent multiply-rotate lanes over 32-byte stripes (the xxHash64
 * construction), so it runs at memory speed; not a cryptographic hash. */
#ifndef KR_CONTENT_HASH_H
#define KR_CONTENT_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t content_hash64(const void *data, size_t bytes, uint64_t seed);

#endif
