#define _GNU_SOURCE             /* sched_getaffinity, CPU_COUNT */
#include "ref_parallel.h"

#include <limits.h>
#include <sched.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* The CPUs this process may run on: under taskset, a Slurm allocation or a
 * container's cpuset that is fewer than the machine has online, and one
 * thread per online CPU would oversubscribe them (OpenBLAS counts the same
 * way). */
static long usable_cpus(void)
{
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    return sysconf(_SC_NPROCESSORS_ONLN);
}

int ref_default_threads(void)
{
    const char *env = getenv("KREPLAY_THREADS");
    long n = env ? strtol(env, NULL, 10) : 0;
    if (n <= 0 || n > INT_MAX)
        n = usable_cpus();
    return n < 1 ? 1 : n > INT_MAX ? INT_MAX : (int)n;
}

int ref_thread_count(void)
{
    const int n = ref_default_threads();
    return n > REF_PARALLEL_MAX_THREADS ? REF_PARALLEL_MAX_THREADS : n;
}

typedef struct {
    ref_range_fn fn;
    void *arg;
    int64_t begin, end;
} ref_piece_t;

static void *ref_piece_run(void *p)
{
    ref_piece_t *piece = p;
    piece->fn(piece->arg, piece->begin, piece->end);
    return NULL;
}

void ref_parallel_ranges(int64_t begin, int64_t end, int64_t min_per_thread, int threads,
                         ref_range_fn fn, void *arg)
{
    const int64_t total = end - begin;
    if (total <= 0)
        return;
    if (threads <= 0)
        threads = ref_thread_count();
    if (threads > REF_PARALLEL_MAX_THREADS)
        threads = REF_PARALLEL_MAX_THREADS;
    if (min_per_thread < 1)
        min_per_thread = 1;
    int64_t pieces = total / min_per_thread;
    if (pieces > threads)
        pieces = threads;
    if (pieces <= 1) {
        fn(arg, begin, end);
        return;
    }
    /* Equal pieces, the first `extra` one element longer. */
    ref_piece_t piece[REF_PARALLEL_MAX_THREADS];
    const int64_t base = total / pieces, extra = total % pieces;
    int64_t at = begin;
    for (int64_t i = 0; i < pieces; i++) {
        const int64_t len = base + (i < extra ? 1 : 0);
        piece[i] = (ref_piece_t){.fn = fn, .arg = arg, .begin = at, .end = at + len};
        at += len;
    }
    pthread_t tid[REF_PARALLEL_MAX_THREADS];
    int started[REF_PARALLEL_MAX_THREADS] = {0};
    for (int64_t i = 1; i < pieces; i++)
        started[i] = pthread_create(&tid[i], NULL, ref_piece_run, &piece[i]) == 0;
    ref_piece_run(&piece[0]);
    for (int64_t i = 1; i < pieces; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            ref_piece_run(&piece[i]);
    }
}
