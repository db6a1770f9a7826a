/* The default replay budget: MemAvailable read from a meminfo file, a
 * quarter of it, clamped to [16 MiB, 4 GiB]; 16 MiB when unreadable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>

#include "mem_budget.h"
#include "replay.h"
#include "synth.h"
#include "test_main.h"
#include "test_support.h"

static const char *write_meminfo(const char *name, const char *text)
{
    static char path[1024];
    test_tmp_path(path, sizeof path, name);
    assert_int_equal(test_write_text(path, text), 0);
    return path;
}

static void test_reads_mem_available(void **state)
{
    (void)state;
    const char *p = write_meminfo("meminfo_ok", "MemTotal:       24683584 kB\n"
                                                "MemFree:         1000000 kB\n"
                                                "MemAvailable:   23785736 kB\n"
                                                "Buffers:          123456 kB\n");
    assert_int_equal(mem_available_from_file(p), (int64_t)23785736 * 1024);
    /* No MemAvailable line (kernels before 3.14), a unit that is not kB, a
     * negative or missing value, no file: unknown. */
    assert_int_equal(mem_available_from_file(write_meminfo("meminfo_none", "MemTotal: 100 kB\n")), -1);
    assert_int_equal(mem_available_from_file(write_meminfo("meminfo_unit", "MemAvailable: 100 MB\n")), -1);
    assert_int_equal(mem_available_from_file(write_meminfo("meminfo_neg", "MemAvailable: -5 kB\n")), -1);
    assert_int_equal(mem_available_from_file(write_meminfo("meminfo_empty", "MemAvailable:\n")), -1);
    assert_int_equal(mem_available_from_file("/nonexistent/meminfo"), -1);
}

static void test_budget_clamps(void **state)
{
    (void)state;
    const int64_t MiB = (int64_t)1 << 20;
    assert_int_equal(mem_budget_for_available(-1), 16 * MiB);          /* unknown */
    assert_int_equal(mem_budget_for_available(0), 16 * MiB);
    assert_int_equal(mem_budget_for_available(40 * MiB), 16 * MiB);    /* 10 MiB: the floor */
    assert_int_equal(mem_budget_for_available(1000 * MiB), 250 * MiB);
    assert_int_equal(mem_budget_for_available(16384 * MiB), 4096 * MiB);
    assert_int_equal(mem_budget_for_available(512 * 1024 * MiB), 4096 * MiB); /* the ceiling */
}

/* --block-mb still decides when given; the default follows the machine. */
static void test_replay_uses_it(void **state)
{
    (void)state;
    case_t c = {0};
    c.M = 4096;
    c.N = 17408;
    c.K = 5120;
    replay_options_t opt;
    replay_options_default(&opt);
    opt.block_bytes = 16 << 20;                 /* the old default: 512-row blocks */
    assert_int_equal(replay_block_rows(&c, &opt), 512);
    opt.block_bytes = 0;
    /* 1.3 GB by replay_bytes_per_row's estimate: whole on a machine with
     * room to spare (checked with a margin: MemAvailable moves). */
    const int64_t need = c.M * (c.N * 14 + c.K * 13);
    if (mem_budget_default() >= 2 * need)
        assert_int_equal(replay_block_rows(&c, &opt), c.M);
    else
        assert_true(replay_block_rows(&c, &opt) % 512 == 0);
}

KR_TEST_MAIN(test_reads_mem_available, test_budget_clamps, test_replay_uses_it);
