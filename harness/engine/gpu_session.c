/* The GPU worker from kreplay's side: its process, the shared arena, and the
 * mirror of the blobs it holds (gpu_session.h). */
#include "gpu_session.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "gpu_bulk.h"
#include "gpu_serve.h"
#include "gpu_session_int.h"
#include "kr_string.h"
#include "mem_budget.h"
#include "progress.h"
#include "shm_arena.h"

/* Address space for the arena: the largest case's operands and its
 * largest reply (an fp64 reference) with room to spare; pages are taken
 * only as written. */
#define ARENA_RESERVE ((size_t)64 << 30)

typedef struct {
    gw_blob_t id;
    uint64_t last_use;          /* the request that last named it */
    uint64_t sent_in;           /* the request that sent its bytes */
    uint64_t offset;            /* where they are in that request's arena layout */
} held_t;

typedef struct {
    const void *p;
    size_t bytes;
    uint64_t hash;
} memo_t;

struct gpu_session {
    gpu_session_options_t o;
    shm_arena_t arena;
    gpu_serve_ctx_t serve;
    isolate_worker_t *worker;   /* NULL in process */
    int device_ready;           /* the current worker opened the device */
    int device_failed;          /* it could not: why says why (for the whole run) */
    char why[KR_ERROR_MSG_MAX];
    gw_hello_reply_t hello;
    held_t *held;               /* the blobs the current worker holds */
    int64_t n_held, cap_held;
    uint64_t held_bytes, budget, clock;
    memo_t *memo;               /* digests of the case's own buffers, by address */
    int64_t n_memo, cap_memo;
    size_t used;                /* arena bytes of the request being built */
    gw_blob_t evict[GW_EVICT_MAX];
    uint32_t n_evict;
    /* The thread that started the worker.  It lives until the session
     * closes: a child's parent-death signal fires when the *thread* that
     * forked it ends, and would kill the worker with it. */
    pthread_t warm;
    int warming;
    pthread_mutex_t warm_lock;
    pthread_cond_t warm_cond;
    int warm_done, closing;
    gpu_session_stats_t stats;
};

const gpu_session_options_t *gs_options(const gpu_session_t *s)
{
    return &s->o;
}

int gpu_session_is_standin(const gpu_session_t *s)
{
    return s->o.standin;
}

/* The budget for resident blobs: KREPLAY_GPU_RESIDENT_MB, else half the
 * device's free memory at open (the stand-in: the host's case budget). */
static uint64_t resident_budget(const gpu_session_t *s)
{
    const char *env = getenv("KREPLAY_GPU_RESIDENT_MB");
    if (env && atoll(env) > 0)
        return (uint64_t)atoll(env) << 20;
    if (s->hello.mem_free > 0)
        return s->hello.mem_free / 2;
    return (uint64_t)mem_budget_default();
}

/* The worker the mirror described is gone: nothing is held any more. */
static void mirror_reset(gpu_session_t *s)
{
    s->n_held = 0;
    s->held_bytes = 0;
    s->device_ready = 0;
}

void gs_retire(gpu_session_t *s)
{
    if (s->worker)
        isolate_worker_retire(s->worker);
    mirror_reset(s);
}

int gpu_session_open(gpu_session_t **out, const gpu_session_options_t *o, kr_error_t *err)
{
    *out = NULL;
    gpu_session_t *s = calloc(1, sizeof *s);
    if (!s)
        return kr_fail(err, "GPU session: out of memory");
    s->o = *o;
    if (shm_arena_open(&s->arena, "kreplay-gpu-arena", ARENA_RESERVE, err)) {
        free(s);
        return -1;
    }
    s->serve = (gpu_serve_ctx_t){.arena = s->arena.base, .extra = o->extra_kernels,
                                 .n_extra = o->n_extra_kernels};
    if (!o->in_process && !(s->worker = isolate_worker_new(gpu_serve, &s->serve, NULL, 0))) {
        shm_arena_close(&s->arena);
        free(s);
        return kr_fail(err, "GPU session: out of memory");
    }
    *out = s;
    return 0;
}

/* One message to the worker (or to the in-process server). */
static int send_request(gpu_session_t *s, const void *req, size_t bytes, int launches,
                        isolate_result_t *ir, kr_error_t *err)
{
    if (s->worker)
        return isolate_worker_call(s->worker, req, bytes,
                                   s->o.timeout_s * (launches > 1 ? launches : 1), ir, err);
    memset(ir, 0, sizeof *ir);
    kr_error_t e = {{0}};
    if (gpu_serve(&s->serve, req, bytes, &e)) {
        ir->status = ISOLATE_FAILED;
        kr_strlcpy(ir->message, e.msg[0] ? e.msg : "failed without a message", sizeof ir->message);
    }
    return 0;
}

/* A worker that is not running (never started, or ended by a crash) is
 * forked by a ping, on the calling thread: fork copies only that thread, and
 * the warm-up thread must never fork while the main thread holds a lock
 * (an allocator's, stdio's) the child would wait on for ever.  The fresh
 * worker holds nothing. */
static int start_worker(gpu_session_t *s, kr_error_t *err)
{
    const int running = s->worker ? isolate_worker_calls_served(s->worker) > 0 : s->stats.workers > 0;
    if (running)
        return 0;
    mirror_reset(s);
    s->stats.workers++;
    if (!s->worker)
        return 0;
    gw_head_t ping = {.op = GW_OP_PING};
    isolate_result_t ir;
    if (send_request(s, &ping, sizeof ping, 1, &ir, err))
        return -1;
    return ir.status == ISOLATE_OK ? 0 : kr_fail(err, "the GPU worker did not start: %s", ir.message);
}

/* The worker up, and for a GPU session its device open. */
static int ensure_worker(gpu_session_t *s, kr_error_t *err)
{
    if (start_worker(s, err))
        return -1;
    if (s->o.device < 0 || s->device_ready)
        return 0;
    if (s->device_failed)
        return kr_fail(err, "%s", s->why);
    s->used = 0;
    gw_hello_req_t q = {.head = {.op = GW_OP_HELLO}, .standin = s->o.standin, .device = s->o.device};
    if (gs_reply(s, sizeof(gw_hello_reply_t), &q.head, err))
        return -1;
    isolate_result_t ir;
    if (send_request(s, &q, sizeof q, 1, &ir, err))
        return -1;
    if (ir.status != ISOLATE_OK) {
        /* A device that cannot be opened will not open on the next try either. */
        s->device_failed = 1;
        kr_strlcpy(s->why, ir.status == ISOLATE_FAILED ? "" : "the GPU worker: ", sizeof s->why);
        kr_strlcpy(s->why + strlen(s->why), ir.message, sizeof s->why - strlen(s->why));
        if (s->worker)
            isolate_worker_retire(s->worker);
        return kr_fail(err, "%s", s->why);
    }
    memcpy(&s->hello, gs_at(s, q.head.reply), sizeof s->hello);
    s->device_ready = 1;
    progress_log("gpu-worker-ready");
    s->budget = resident_budget(s);
    return 0;
}

static void *warm_main(void *arg)
{
    gpu_session_t *s = arg;
    kr_error_t ignored = {{0}};
    (void)ensure_worker(s, &ignored);
    pthread_mutex_lock(&s->warm_lock);
    s->warm_done = 1;
    pthread_cond_broadcast(&s->warm_cond);
    while (!s->closing)
        pthread_cond_wait(&s->warm_cond, &s->warm_lock);
    pthread_mutex_unlock(&s->warm_lock);
    return NULL;
}

void gpu_session_prewarm(gpu_session_t *s)
{
    if (!s || s->warming || s->o.in_process || s->o.device < 0)
        return;
    kr_error_t ignored = {{0}};
    if (start_worker(s, &ignored))
        return;   /* the first call says why */
    pthread_mutex_init(&s->warm_lock, NULL);
    pthread_cond_init(&s->warm_cond, NULL);
    s->warming = pthread_create(&s->warm, NULL, warm_main, s) == 0;
}

/* Waits until the thread has started the worker (it stays, idle). */
static void join_warm(gpu_session_t *s)
{
    if (!s->warming)
        return;
    pthread_mutex_lock(&s->warm_lock);
    while (!s->warm_done)
        pthread_cond_wait(&s->warm_cond, &s->warm_lock);
    pthread_mutex_unlock(&s->warm_lock);
}

static void end_warm(gpu_session_t *s)
{
    if (!s->warming)
        return;
    pthread_mutex_lock(&s->warm_lock);
    s->closing = 1;
    pthread_cond_broadcast(&s->warm_cond);
    pthread_mutex_unlock(&s->warm_lock);
    pthread_join(s->warm, NULL);
    pthread_cond_destroy(&s->warm_cond);
    pthread_mutex_destroy(&s->warm_lock);
    s->warming = 0;
}

int gpu_session_device(gpu_session_t *s, char *name, size_t name_cap, char *why, size_t why_cap)
{
    join_warm(s);
    kr_error_t err = {{0}};
    if (ensure_worker(s, &err)) {
        kr_strlcpy(why, err.msg, why_cap);
        return 0;
    }
    kr_strlcpy(name, s->hello.name, name_cap);
    return 1;
}

int gpu_session_device_count(gpu_session_t *s)
{
    char name[8], why[8];
    return gpu_session_device(s, name, sizeof name, why, sizeof why) ? s->hello.device_count : 0;
}

int gpu_session_refs_supported(gpu_session_t *s)
{
    char name[8], why[8];
    if (s->o.device < 0 || !gpu_session_device(s, name, sizeof name, why, sizeof why))
        return 0;
    return s->o.standin || !strcmp(s->hello.backend, "cuda");
}

void gpu_session_stats(const gpu_session_t *s, gpu_session_stats_t *out)
{
    *out = s->stats;
}

void gpu_session_case_end(gpu_session_t *s)
{
    if (s)
        s->n_memo = 0;
}

void gpu_session_close(gpu_session_t *s)
{
    if (!s)
        return;
    join_warm(s);
    isolate_worker_free(s->worker);
    end_warm(s);
    gpu_serve_ctx_release(&s->serve);
    shm_arena_close(&s->arena);
    free(s->held);
    free(s->memo);
    free(s);
}

/* ------------------------------------------------------------ requests */

int gs_begin(gpu_session_t *s, kr_error_t *err)
{
    join_warm(s);
    if (ensure_worker(s, err))
        return -1;
    s->used = 0;
    s->n_evict = 0;
    s->clock++;
    return 0;
}

void *gs_at(gpu_session_t *s, uint64_t offset)
{
    return s->arena.base + offset;
}

/* Room for `bytes` in the arena: its offset. */
static int arena_take(gpu_session_t *s, size_t bytes, uint64_t *offset, kr_error_t *err)
{
    const size_t at = shm_arena_align(s->used);
    if (shm_arena_reserve(&s->arena, at + bytes, err))
        return -1;
    *offset = at;
    s->used = at + bytes;
    return 0;
}

int gs_array(gpu_session_t *s, const void *p, size_t bytes, uint64_t *offset, kr_error_t *err)
{
    *offset = GW_NONE;
    if (!p)
        return 0;
    if (arena_take(s, bytes, offset, err))
        return -1;
    gpu_bulk_copy(s->arena.base + *offset, p, bytes);
    return 0;
}

int gs_reply(gpu_session_t *s, size_t cap, gw_head_t *h, kr_error_t *err)
{
    uint64_t at;
    if (arena_take(s, cap, &at, err))
        return -1;
    h->reply = at;
    h->reply_cap = cap;
    return 0;
}

static uint64_t digest(gpu_session_t *s, const void *p, size_t bytes, int stable)
{
    for (int64_t i = 0; stable && i < s->n_memo; i++)
        if (s->memo[i].p == p && s->memo[i].bytes == bytes)
            return s->memo[i].hash;
    const uint64_t h = gpu_bulk_digest(p, bytes);
    memo_t *m = stable ? ARRAY_APPEND_ZEROED(s->memo, s->n_memo, s->cap_memo, 16) : NULL;
    if (m)
        *m = (memo_t){.p = p, .bytes = bytes, .hash = h};
    return h;
}

/* Drops the least recently named blobs not named by this request until
 * `bytes` more fit the budget (or nothing more can go). */
static void make_room(gpu_session_t *s, uint64_t bytes)
{
    while (s->held_bytes + bytes > s->budget && s->n_evict < GW_EVICT_MAX) {
        int64_t victim = -1;
        for (int64_t i = 0; i < s->n_held; i++)
            if (s->held[i].last_use < s->clock &&
                (victim < 0 || s->held[i].last_use < s->held[victim].last_use))
                victim = i;
        if (victim < 0)
            return;
        s->evict[s->n_evict++] = s->held[victim].id;
        s->held_bytes -= s->held[victim].id.bytes;
        s->held[victim] = s->held[--s->n_held];
    }
}

int gs_operand(gpu_session_t *s, const void *p, size_t bytes, int stable, gw_operand_t *o,
               kr_error_t *err)
{
    memset(o, 0, sizeof *o);
    o->offset = GW_RESIDENT;
    if (!p || !bytes)
        return 0;
    o->id = (gw_blob_t){.hash = digest(s, p, bytes, stable), .bytes = bytes};
    for (int64_t i = 0; i < s->n_held; i++)
        if (s->held[i].id.hash == o->id.hash && s->held[i].id.bytes == o->id.bytes) {
            s->held[i].last_use = s->clock;
            /* Sent by this very request for another operand: the same bytes,
             * whichever of the two the worker takes first. */
            if (s->held[i].sent_in == s->clock)
                o->offset = s->held[i].offset;
            return 0;
        }
    make_room(s, bytes);
    held_t *h = ARRAY_APPEND_ZEROED(s->held, s->n_held, s->cap_held, 16);
    if (!h)
        return kr_fail(err, "GPU session: out of memory");
    *h = (held_t){.id = o->id, .last_use = s->clock, .sent_in = s->clock};
    s->held_bytes += bytes;
    s->stats.operand_bytes += (int64_t)bytes;
    if (gs_array(s, p, bytes, &o->offset, err))
        return -1;
    h = &s->held[s->n_held - 1];
    h->offset = o->offset;
    return 0;
}

int gs_call(gpu_session_t *s, gw_head_t *h, size_t bytes, int launches, isolate_result_t *ir,
            kr_error_t *err)
{
    h->n_evict = s->n_evict;
    memcpy(h->evict, s->evict, sizeof s->evict[0] * s->n_evict);
    s->stats.requests++;
    if (send_request(s, h, bytes, launches, ir, err)) {
        mirror_reset(s);
        return -1;
    }
    if (ir->status == ISOLATE_OK)
        return 0;
    /* The worker died (it is gone already), or failed half-way through the
     * request's operands: nothing it held can be counted on. */
    gs_retire(s);
    return 0;
}
