/* Allocation of the large buffers the fp32 reference dequantizes into. */
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

#endif
