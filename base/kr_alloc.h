/* Allocation of large buffers: the buffer the fp32 reference dequantizes
 * into, and the replay's references, outputs, activations and case arrays. */
#ifndef KR_ALLOC_H
#define KR_ALLOC_H

#include <stddef.h>

/* A buffer of `bytes` (uninitialized), released with free().  Buffers of 2 MiB
 * and more are 2 MiB-aligned and, where the system has transparent huge
 * pages, advised to use them: a buffer is written in full right after it is
 * allocated, and first-touch page faults at 4 KiB cost several times the
 * writing itself (measured on a KVM guest: 57 MiB took 30 ms to fault in with
 * 4 KiB pages, 5.5 ms with huge pages).  NULL when out of memory. */
void *kr_alloc_large(size_t bytes);

/* An array of `bytes` (uninitialized), released with free(): on huge pages
 * as kr_alloc_large from REF_ALLOC_ARRAY_HUGE_BYTES on, a plain malloc
 * below.  A fresh 4 KiB page costs a fault each; on a KVM guest that traps
 * faults (2-core AVX-512 EPYC), touching a fresh 36 MiB array took 91-100 ms
 * on 4 KiB pages every time, 56 ms on huge pages the first time and 2.5-3 ms
 * once the system had huge pages freed by an earlier process.  Replays of
 * 17408 x 5120, w4a8.perblock alone, wall time with the threshold at 32 MiB
 * -> 2 MiB (three runs each, alternating): M = 512 1.18-1.21 s -> 1.08-1.10
 * s, M = 1024 2.14-2.16 s -> 2.00-2.02 s; every kernel at M = 512 4.47-4.53 s
 * -> 4.09-4.15 s (system time 0.70-0.78 s -> 0.36-0.38 s).  (On a Zen 3 KVM
 * guest, a 2 MiB threshold had measured M = 1024 6% slower; the faults there
 * were cheaper than the heap's reuse of freed blocks.) */
#define REF_ALLOC_ARRAY_HUGE_BYTES ((size_t)2 << 20)
void *kr_alloc_array(size_t bytes);

#endif
