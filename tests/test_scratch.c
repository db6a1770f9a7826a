/* The models' scratch buffers (kernels/cpu/scratch.h): reused between runs,
 * never handed to two holders at once (also from two threads), aligned, and
 * large requests are plain allocations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/scratch.h"
#include "test_main.h"
#include "test_support.h"

static void test_reuse_and_alignment(void **state)
{
    (void)state;
    scratch_t a;
    void *p = scratch_get(&a, 1000);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, 1, 1000);
    scratch_put(&a);
    scratch_t b;
    void *q = scratch_get(&b, 500);
    assert_ptr_equal(p, q);             /* the free buffer, big enough, comes back */
    scratch_put(&b);
}

static void test_holders_never_share(void **state)
{
    (void)state;
    enum { HOLDERS = 10 };              /* more than the cache keeps */
    scratch_t s[HOLDERS];
    for (int i = 0; i < HOLDERS; i++) {
        unsigned char *p = scratch_get(&s[i], 4096 + (size_t)i);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        memset(p, i, 4096 + (size_t)i);
    }
    for (int i = 0; i < HOLDERS; i++) {
        const unsigned char *p = s[i].data;
        for (size_t k = 0; k < 4096 + (size_t)i; k++)
            assert_int_equal(p[k], i);
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(s[i].data, s[j].data);
    }
    for (int i = 0; i < HOLDERS; i++)
        scratch_put(&s[i]);
}

static void test_large_is_not_cached(void **state)
{
    (void)state;
    scratch_t s;
    void *p = scratch_get(&s, SCRATCH_MAX_CACHED + 1);
    assert_non_null(p);
    assert_int_equal(s.slot, -1);
    scratch_put(&s);
    assert_null(s.data);
}

/* Two threads getting, filling, checking and putting buffers of changing
 * sizes: a buffer handed to both would show the other's bytes. */
static void *hammer(void *arg)
{
    const unsigned char mark = (unsigned char)(uintptr_t)arg;
    for (int rep = 0; rep < 2000; rep++) {
        const size_t bytes = 1000 + (size_t)((rep * 7919) % 50000);
        scratch_t s;
        unsigned char *p = scratch_get(&s, bytes);
        if (!p)
            return (void *)1;
        memset(p, mark, bytes);
        for (size_t k = 0; k < bytes; k += 97)
            if (p[k] != mark)
                return (void *)1;
        scratch_put(&s);
    }
    return NULL;
}

static void test_two_threads(void **state)
{
    (void)state;
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, hammer, (void *)(uintptr_t)0xA5), 0);
    void *mine = hammer((void *)(uintptr_t)0x5A);
    void *theirs = NULL;
    pthread_join(tid, &theirs);
    assert_null(mine);
    assert_null(theirs);
}

KR_TEST_MAIN(
    test_reuse_and_alignment, test_holders_never_share, test_large_is_not_cached,
    test_two_threads);
