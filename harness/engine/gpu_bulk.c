#include "gpu_bulk.h"

#include <stdlib.h>
#include <string.h>

#include "content_hash.h"
#include "parallel.h"

typedef struct {
    unsigned char *dst;
    const unsigned char *src;
    size_t bytes;
    uint64_t *hashes;
} bulk_job_t;

static size_t chunk_len(const bulk_job_t *j, int64_t t)
{
    const size_t at = (size_t)t * GPU_BULK_CHUNK;
    return j->bytes - at < GPU_BULK_CHUNK ? j->bytes - at : GPU_BULK_CHUNK;
}

static void copy_chunk(void *ctx, int64_t t)
{
    const bulk_job_t *j = ctx;
    const size_t at = (size_t)t * GPU_BULK_CHUNK;
    memcpy(j->dst + at, j->src + at, chunk_len(j, t));
}

static void hash_chunk(void *ctx, int64_t t)
{
    const bulk_job_t *j = ctx;
    j->hashes[t] = content_hash64(j->src + (size_t)t * GPU_BULK_CHUNK, chunk_len(j, t), (uint64_t)t);
}

static int64_t chunks(size_t bytes)
{
    return (int64_t)((bytes + GPU_BULK_CHUNK - 1) / GPU_BULK_CHUNK);
}

void gpu_bulk_copy(void *dst, const void *src, size_t bytes)
{
    bulk_job_t j = {.dst = dst, .src = src, .bytes = bytes};
    /* A chunk is some milliseconds of one core: worth a thread each. */
    parallel_for_cost(chunks(bytes), 0, (double)GPU_BULK_CHUNK / 4.0, copy_chunk, &j);
}

uint64_t gpu_bulk_digest(const void *p, size_t bytes)
{
    if (bytes < GPU_BULK_CHUNK)
        return content_hash64(p, bytes, 0);
    const int64_t n = chunks(bytes);
    uint64_t *hashes = malloc((size_t)n * sizeof *hashes);
    if (!hashes)
        return content_hash64(p, bytes, 1);  /* another digest: at worst the bytes are sent again */
    bulk_job_t j = {.src = p, .bytes = bytes, .hashes = hashes};
    parallel_for_cost(n, 0, (double)GPU_BULK_CHUNK / 4.0, hash_chunk, &j);
    const uint64_t h = content_hash64(hashes, (size_t)n * sizeof *hashes, bytes);
    free(hashes);
    return h;
}
