#include "case_identity.h"

#include <stdio.h>
#include <string.h>

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

/* A field: its tag and length first, so an absent operand and an empty one,
 * or two operands whose bytes run together, never hash alike. */
static uint64_t field(uint64_t h, char tag, const void *data, size_t n)
{
    uint64_t len = data ? (uint64_t)n : UINT64_MAX;
    h = fnv(h, &tag, 1);
    h = fnv(h, &len, sizeof len);
    return data ? fnv(h, data, n) : h;
}

void case_content_id(const case_t *c, char out[17])
{
    const size_t M = (size_t)c->M, N = (size_t)c->N, K = (size_t)c->K;
    int64_t shape[3] = {c->M, c->N, c->K};
    int32_t layout[3] = {(int32_t)c->weight_order, (int32_t)c->scale_layout, (int32_t)c->x_fp8_format};
    uint64_t h = FNV_OFFSET;
    h = field(h, 's', shape, sizeof shape);
    h = field(h, 'l', layout, sizeof layout);
    h = field(h, 'x', c->x, M * K * sizeof(float));
    h = field(h, 'q', c->x_fp8, M * K);
    h = field(h, 'a', c->x_scale, M * sizeof(float));
    h = field(h, 'w', c->weight, N * (K / 2));
    h = field(h, 'e', c->weight_scale, N * (K / 32));
    h = field(h, 'r', c->weight_ref, (size_t)(c->weight_ref ? c->weight_ref_len : 0));
    h = field(h, 'b', c->weight_bf16, N * K * sizeof(uint16_t));
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

static void *case_id_job_run(void *arg)
{
    case_id_job_t *job = arg;
    case_content_id(job->c, job->id);
    return NULL;
}

/* Below this many operand bytes the digest costs less than a thread. */
#define CASE_ID_THREAD_BYTES (1u << 22)

void case_id_job_start(case_id_job_t *job, const case_t *c)
{
    job->c = c;
    job->threaded = 0;
    const size_t M = (size_t)c->M, N = (size_t)c->N, K = (size_t)c->K;
    const size_t bytes = (c->x ? M * K * sizeof(float) : 0) + (c->weight ? N * (K / 2) : 0) +
                         (c->weight_bf16 ? N * K * sizeof(uint16_t) : 0);
    if (bytes >= CASE_ID_THREAD_BYTES)
        job->threaded = pthread_create(&job->thread, NULL, case_id_job_run, job) == 0;
}

void case_id_job_finish(case_id_job_t *job, char out[17])
{
    if (job->threaded)
        pthread_join(job->thread, NULL);
    else
        case_content_id(job->c, job->id);
    job->threaded = 0;
    memcpy(out, job->id, 17);
}
