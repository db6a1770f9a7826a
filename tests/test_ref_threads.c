/* The default thread count follows the CPUs this process may run on (its
 * affinity mask, as taskset, Slurm and cpusets set it), not the CPUs online;
 * KREPLAY_THREADS overrides it. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sched.h>
#include <stdlib.h>

#include "ref_parallel.h"
#include "test_main.h"

/* Restricts this process to the first `count` CPUs of its current mask;
 * returns how many it got (fewer when the mask has fewer). */
static int pin_to_first(const cpu_set_t *all, int count)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    int got = 0;
    for (int c = 0; c < CPU_SETSIZE && got < count; c++)
        if (CPU_ISSET(c, all)) {
            CPU_SET(c, &set);
            got++;
        }
    assert_int_equal(sched_setaffinity(0, sizeof set, &set), 0);
    return got;
}

static void test_follows_affinity(void **state)
{
    (void)state;
    cpu_set_t all;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    unsetenv("KREPLAY_THREADS");
    assert_int_equal(ref_default_threads(), CPU_COUNT(&all));
    assert_int_equal(pin_to_first(&all, 1), 1);
    assert_int_equal(ref_default_threads(), 1);
    if (CPU_COUNT(&all) >= 2) {
        assert_int_equal(pin_to_first(&all, 2), 2);
        assert_int_equal(ref_default_threads(), 2);
    }
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
}

static void test_env_overrides(void **state)
{
    (void)state;
    cpu_set_t all;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    assert_int_equal(pin_to_first(&all, 1), 1);
    setenv("KREPLAY_THREADS", "3", 1);
    assert_int_equal(ref_default_threads(), 3);
    setenv("KREPLAY_THREADS", "0", 1);          /* not a count: the default */
    assert_int_equal(ref_default_threads(), 1);
    unsetenv("KREPLAY_THREADS");
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
}

KR_TEST_MAIN(test_follows_affinity, test_env_overrides);
