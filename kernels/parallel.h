/* A minimal parallel-for over independent tasks, on a persistent pool of
 * pthreads.  The CPU models split work by output elements, so every output
 * element is computed by exactly one thread in a fixed order: threading
 * never changes bits. */
#ifndef KR_PARALLEL_H
#define KR_PARALLEL_H

#include <stdint.h>

typedef void (*parallel_task_fn)(void *ctx, int64_t task);

/* Runs fn(ctx, t) for t in [0, n_tasks) on up to `threads` threads, the
 * caller included (0 = KREPLAY_THREADS from the environment, else the number
 * of online CPUs).  Returns when every task is done.  Safe to call from any
 * thread, from a task, and after fork(); a call made while another is in
 * flight runs its tasks on the calling thread. */
void parallel_for(int64_t n_tasks, int threads, parallel_task_fn fn, void *ctx);

/* The work one extra thread must get to be worth waking, in the units of
 * parallel_for_cost (a rough estimate of nanoseconds of one core's work):
 * waking a parked worker and handing the job back costs some 10-30 us. */
#define PARALLEL_MIN_THREAD_COST 3.0e4

/* parallel_for for tasks of about `task_cost` units each: uses no more
 * threads than the job keeps busy for PARALLEL_MIN_THREAD_COST each, and
 * runs a small job on the calling thread alone. */
void parallel_for_cost(int64_t n_tasks, int threads, double task_cost, parallel_task_fn fn,
                       void *ctx);

/* The thread count `threads` resolves to (0: the default), at most 64. */
int parallel_thread_count(int threads);

#endif
