#include "parallel.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "ref_parallel.h"

/* One process-wide pool of worker threads, created on first use and kept.
 * Creating and joining threads on every call cost more than a small model
 * run itself; parked workers cost nothing: they sleep on a condition
 * variable (a futex wait) until a job is posted, and never spin, so an idle
 * pool takes no core from the caller or from OpenBLAS.
 *
 * A job is posted under `lock` with a generation number; each worker that
 * wakes for it claims a helper slot (at most helpers_wanted of them) and
 * then takes tasks from the shared counter, as the caller does.  When the
 * caller runs out of tasks it closes the job to late joiners and waits only
 * for the helpers still inside a task, so a worker that wakes late never
 * holds the caller up.
 *
 * One job at a time: a second caller (another thread, or a task that calls
 * parallel_for itself) finds the pool busy and runs its tasks inline.  The
 * results do not depend on which thread runs a task, so that is always
 * correct; it is only slower.
 *
 * fork(): the child has the pool's memory but none of its threads.  An
 * atfork handler takes `lock` around the fork (so the child never inherits
 * it held mid-update) and, in the child, forgets the workers and builds
 * fresh synchronisation objects; the child's first parallel_for starts its
 * own workers.  Workers are detached and parked at exit; the pool is static
 * storage, so nothing here is a leak. */

#define POOL_MAX_THREADS 64

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t job_posted;      /* workers wait here for a new generation */
    pthread_cond_t helpers_done;    /* the caller waits here for helpers_active == 0 */
    int workers;                    /* threads started (they never exit) */
    uint64_t generation;            /* bumped by every posted job */
    /* The current job; read by a helper only after it joined under `lock`. */
    parallel_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    atomic_llong next_task;
    int helpers_wanted, helpers_joined, helpers_active;
} pool_t;

static pool_t pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .job_posted = PTHREAD_COND_INITIALIZER,
    .helpers_done = PTHREAD_COND_INITIALIZER,
};
/* 1 while a caller owns the pool; an atomic, not a mutex, so the fork child
 * can simply reset it. */
static atomic_int pool_in_use;
static pthread_once_t pool_atfork_once = PTHREAD_ONCE_INIT;

static void run_tasks(parallel_task_fn fn, void *ctx, int64_t n_tasks, atomic_llong *next)
{
    for (;;) {
        const int64_t t = atomic_fetch_add_explicit(next, 1, memory_order_relaxed);
        if (t >= n_tasks)
            return;
        fn(ctx, t);
    }
}

static void *pool_worker(void *arg)
{
    (void)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.generation == seen)
            pthread_cond_wait(&pool.job_posted, &pool.lock);
        seen = pool.generation;
        if (pool.helpers_joined >= pool.helpers_wanted)
            continue;           /* enough helpers, or the job is already closed */
        pool.helpers_joined++;
        pool.helpers_active++;
        const parallel_task_fn fn = pool.fn;
        void *const ctx = pool.ctx;
        const int64_t n_tasks = pool.n_tasks;
        pthread_mutex_unlock(&pool.lock);
        run_tasks(fn, ctx, n_tasks, &pool.next_task);
        pthread_mutex_lock(&pool.lock);
        if (--pool.helpers_active == 0)
            pthread_cond_signal(&pool.helpers_done);
    }
    return NULL;
}

static void pool_before_fork(void)
{
    pthread_mutex_lock(&pool.lock);
}

static void pool_after_fork_parent(void)
{
    pthread_mutex_unlock(&pool.lock);
}

static void pool_after_fork_child(void)
{
    /* Only the forking thread exists here: no worker, no job in flight. */
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.job_posted, NULL);
    pthread_cond_init(&pool.helpers_done, NULL);
    pool.workers = 0;
    pool.generation = 0;
    pool.helpers_wanted = pool.helpers_joined = pool.helpers_active = 0;
    atomic_store(&pool_in_use, 0);
}

static void pool_register_atfork(void)
{
    pthread_atfork(pool_before_fork, pool_after_fork_parent, pool_after_fork_child);
}

/* Starts workers until there are `want` (or thread creation fails).  Called
 * with `lock` held.  Workers block every signal a process can be sent, so
 * signals keep going to the threads that expect them; faults (SIGSEGV and
 * the like) are raised in the faulting thread whatever the mask. */
static void pool_grow(int want)
{
    if (pool.workers >= want)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (pool.workers < want) {
        pthread_t tid;
        if (pthread_create(&tid, &attr, pool_worker, NULL) != 0)
            break;
        pool.workers++;
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int parallel_thread_count(int threads)
{
    if (threads <= 0)
        threads = ref_default_threads();     /* KREPLAY_THREADS or the CPUs */
    return threads > POOL_MAX_THREADS ? POOL_MAX_THREADS : threads;
}

static void run_inline(int64_t n_tasks, parallel_task_fn fn, void *ctx)
{
    for (int64_t t = 0; t < n_tasks; t++)
        fn(ctx, t);
}

void parallel_for(int64_t n_tasks, int threads, parallel_task_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return;
    threads = parallel_thread_count(threads);
    if (threads > n_tasks)
        threads = (int)n_tasks;
    int expected = 0;
    if (threads <= 1 ||
        !atomic_compare_exchange_strong(&pool_in_use, &expected, 1)) {
        run_inline(n_tasks, fn, ctx);
        return;
    }
    pthread_once(&pool_atfork_once, pool_register_atfork);

    pthread_mutex_lock(&pool.lock);
    pool_grow(threads - 1);
    if (pool.workers == 0) {        /* no thread could be started */
        pthread_mutex_unlock(&pool.lock);
        atomic_store(&pool_in_use, 0);
        run_inline(n_tasks, fn, ctx);
        return;
    }
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n_tasks = n_tasks;
    atomic_store_explicit(&pool.next_task, 0, memory_order_relaxed);
    pool.helpers_wanted = threads - 1;
    pool.helpers_joined = 0;
    pool.helpers_active = 0;
    pool.generation++;
    pthread_cond_broadcast(&pool.job_posted);
    pthread_mutex_unlock(&pool.lock);

    run_tasks(fn, ctx, n_tasks, &pool.next_task);   /* the caller works too */

    pthread_mutex_lock(&pool.lock);
    pool.helpers_wanted = pool.helpers_joined;      /* closed: no late joiner */
    while (pool.helpers_active > 0)
        pthread_cond_wait(&pool.helpers_done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    atomic_store(&pool_in_use, 0);
}

void parallel_for_cost(int64_t n_tasks, int threads, double task_cost, parallel_task_fn fn,
                       void *ctx)
{
    if (n_tasks <= 0)
        return;
    threads = parallel_thread_count(threads);
    /* Each helper must get at least PARALLEL_MIN_THREAD_COST of work, or
     * waking it costs more than it saves. */
    const double total = task_cost * (double)n_tasks;
    const double useful = total / PARALLEL_MIN_THREAD_COST;
    if (useful < (double)threads)
        threads = useful < 1.0 ? 1 : (int)useful;
    parallel_for(n_tasks, threads, fn, ctx);
}
