/* Allocation of large buffers: the buffer the fp32 reference dequantizes
 * into, and the replay's references, outputs, activations and case arrays. */
#ifndef KR_REF_ALLOC_H
#define KR_REF_ALLOC_H

#include <stddef.h>

/* A buffer of `bytes` (uninitialized), released with free().  Buffers of 2 MiB
 * and more are 2 MiB-aligned and, where the system has transparent huge
 * pages, advised to use them: a buffer is written in full right after it is
 * allocated, and first-touch page faults at 4 KiB cost several times the
 * writing itself (measured on a KVM guest: 57 MiB took 30 ms to fault in with
 * 4 KiB pages, 5.5 ms with huge pages).  NULL when out of memory. */
void *ref_alloc_large(size_t bytes);

/* An array of `bytes` (uninitialized), released with free(): on huge pages
 * as ref_alloc_large from REF_ALLOC_ARRAY_HUGE_BYTES on, a plain malloc
 * below.  Below glibc's largest mmap threshold (32 MiB) a freed block goes
 * back to the heap and the next array of its size reuses it without faulting
 * again; above it every array is mapped and faulted afresh.  Measured on a
 * KVM guest replaying 17408 x 5120: huge pages from 32 MiB made M = 4096
 * 4% faster and left M = 1024 unchanged; from 2 MiB, M = 1024 was 6% slower
 * (more system time). */
#define REF_ALLOC_ARRAY_HUGE_BYTES ((size_t)32 << 20)
void *ref_alloc_array(size_t bytes);

#endif
