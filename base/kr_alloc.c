/* madvise and MADV_HUGEPAGE are not POSIX: ask glibc for them. */
#define _DEFAULT_SOURCE
#include "kr_alloc.h"

#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE_BYTES ((size_t)2 << 20)

void *kr_alloc_large(size_t bytes)
{
    if (bytes < HUGE_PAGE_BYTES)
        return malloc(bytes ? bytes : 1);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE_BYTES, bytes) != 0)
        return NULL;
#if defined(MADV_HUGEPAGE)
    /* Advice only: where huge pages are off or unavailable the buffer simply
     * stays on small pages, so the result is not checked. */
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

void *kr_alloc_array(size_t bytes)
{
    return bytes >= REF_ALLOC_ARRAY_HUGE_BYTES ? kr_alloc_large(bytes) : malloc(bytes ? bytes : 1);
}
