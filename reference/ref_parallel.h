/* Splitting a range of work over plain pthreads, for the reference's own
 * bulk loops (the weight dequantization).  reference/ depends on nothing
 * else in the project, so it does not share kernels/parallel.c; the
 * thread-count rule is defined here and kernels/parallel.c uses it. */
#ifndef KR_REF_PARALLEL_H
#define KR_REF_PARALLEL_H

#include <stdint.h>

#define REF_PARALLEL_MAX_THREADS 64

/* KREPLAY_THREADS when set to a positive number, otherwise the online CPU
 * count; at least 1.  The one place that variable is read: kernels/parallel.c
 * takes its default from here too, with its own cap. */
int ref_default_threads(void);

/* ref_default_threads(), at most REF_PARALLEL_MAX_THREADS. */
int ref_thread_count(void);

typedef void (*ref_range_fn)(void *arg, int64_t begin, int64_t end);

/* Calls fn on contiguous pieces that cover [begin, end) exactly once, each at
 * least min_per_thread long (except when the whole range is shorter), on at
 * most `threads` threads (<= 0: ref_thread_count()); the calling thread takes
 * the first piece.  A thread that cannot be started leaves its piece to the
 * calling thread, so fn always covers the whole range.  Returns when every
 * piece is done. */
void ref_parallel_ranges(int64_t begin, int64_t end, int64_t min_per_thread, int threads,
                         ref_range_fn fn, void *arg);

#endif
