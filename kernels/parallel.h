/* A minimal parallel-for over independent tasks, with pthreads.  The CPU
 * models split work by output columns, so every output element is computed
 * by exactly one thread in a fixed order: threading never changes bits. */
#ifndef KR_PARALLEL_H
#define KR_PARALLEL_H

#include <stdint.h>

typedef void (*parallel_task_fn)(void *ctx, int64_t task);

/* Runs fn(ctx, t) for t in [0, n_tasks) on up to `threads` threads
 * (0 = KREPLAY_THREADS from the environment, else the number of online CPUs). */
void parallel_for(int64_t n_tasks, int threads, parallel_task_fn fn, void *ctx);

#endif
