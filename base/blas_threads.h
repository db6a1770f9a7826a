/* Putting OpenBLAS' worker threads to sleep between references.
 *
 * After each call OpenBLAS' pthread workers spin (sched_yield) for about
 * 2^28 cycles waiting for the next one.  A replay alternates references with
 * the models, which run on their own threads: the spinning workers then take
 * the cores from them (on 2 cores, 20% of a replay in sched_yield).  The
 * thread count cannot be lowered to avoid it: OpenBLAS' bits depend on it
 * (measured with 0.3.21 on Zen, Haswell and Prescott kernels: one thread
 * and two give different last bits for most M), and the references' bits
 * must not change.  Parking ends the workers instead; the next BLAS call
 * starts them again (about 0.1 ms), with the same thread count and so the
 * same bits. */
#ifndef KR_BLAS_THREADS_H
#define KR_BLAS_THREADS_H

/* Ends OpenBLAS' idle workers now.  Call it only when no other thread of the
 * process is inside a BLAS call.  A no-op with a BLAS that has no such
 * workers (or does not export blas_thread_shutdown_). */
void blas_threads_park(void);

#endif
