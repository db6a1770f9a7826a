#include "parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    parallel_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    atomic_llong next;
} parallel_job_t;

static void *parallel_worker(void *arg)
{
    parallel_job_t *job = arg;
    for (;;) {
        int64_t t = atomic_fetch_add(&job->next, 1);
        if (t >= job->n_tasks)
            return NULL;
        job->fn(job->ctx, t);
    }
}

static int default_threads(void)
{
    const char *env = getenv("KREPLAY_THREADS");
    if (env && atoi(env) > 0)
        return atoi(env);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void parallel_for(int64_t n_tasks, int threads, parallel_task_fn fn, void *ctx)
{
    if (threads <= 0)
        threads = default_threads();
    if (threads > 64)
        threads = 64;
    if (threads > n_tasks)
        threads = (int)n_tasks;
    parallel_job_t job = {.fn = fn, .ctx = ctx, .n_tasks = n_tasks};
    atomic_init(&job.next, 0);
    if (threads <= 1) {
        parallel_worker(&job);
        return;
    }
    pthread_t tids[64];
    int started = 0;
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&tids[started], NULL, parallel_worker, &job) == 0)
            started++;
    }
    parallel_worker(&job); /* the caller works too; if no thread started it does everything */
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
}
