/* The progress line where stderr is not a terminal (a CI log, ctest, a
 * pipe): one whole line, newline-terminated, no carriage return, every
 * interval; nothing from a run shorter than the interval; a last line at
 * the end of a run that wrote one before; KREPLAY_PROGRESS_SECONDS sets the
 * interval (0: silent). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kreplay_checks.h"
#include "progress.h"
#include "test_main.h"

/* One step of a scripted run: wait this long, then report done (or a step
 * name when step is set). */
typedef struct {
    double wait;
    int done;
    const char *step;
} beat_t;

/* What a log-mode progress of total items, interval `every`, writes for
 * the beats, then progress_finish (malloc'd). */
static char *log_of(double every, int total, const beat_t *beats, int n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    progress_t p;
    progress_start_log(&p, fp, every, "kreplay replay", total);
    for (int i = 0; i < n; i++) {
        struct timespec ts = {(time_t)beats[i].wait, (long)((beats[i].wait - (double)(time_t)beats[i].wait) * 1e9)};
        nanosleep(&ts, NULL);
        if (beats[i].step)
            progress_step(&p, beats[i].step);
        else
            progress_update(&p, beats[i].done);
    }
    progress_finish(&p);
    fclose(fp);
    return buf;
}

static void test_short_run_writes_nothing(void **state)
{
    (void)state;
    const beat_t beats[] = {{0, 1, NULL}, {0, 2, NULL}, {0, 3, NULL}};
    char *out = log_of(5.0, 3, beats, 3);
    assert_string_equal(out, "");
    free(out);
}

static void test_long_run_writes_whole_lines(void **state)
{
    (void)state;
    /* 1 before the interval: nothing; a step after it: a line naming it; 2
     * within the interval of that line: nothing; 3 after another interval;
     * 4, the end: its line whatever the interval. */
    const beat_t beats[] = {{0, 1, NULL}, {0.08, 0, "w4a8.folded"}, {0, 2, NULL}, {0.08, 3, NULL}, {0, 4, NULL}};
    char *out = log_of(0.05, 4, beats, 5);
    assert_int_equal(test_count_substr(out, "\n"), 3);
    TEST_EXPECT_PHRASES(out, "[kreplay replay] 1/4 (25%), ", ": w4a8.folded\n", "[kreplay replay] 3/4 (75%), ",
                        "[kreplay replay] 4/4 (100%), ");
    assert_null(strstr(out, "2/4"));
    assert_null(strchr(out, '\r'));
    free(out);
}

/* A run that stops short of its total still ends its log with a line. */
static void test_stopped_run_ends_its_log(void **state)
{
    (void)state;
    const beat_t beats[] = {{0.08, 2, NULL}, {0, 3, NULL}};
    char *out = log_of(0.05, 10, beats, 2);
    assert_int_equal(test_count_substr(out, "\n"), 2);
    TEST_EXPECT_PHRASES(out, "[kreplay replay] 2/10 (20%), ", "[kreplay replay] 3/10 (30%), ");
    free(out);
}

static void test_interval_from_environment(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        double seconds;
    } cases[] = {{"2.5", 2.5}, {"0", 0}, {"soon", 10}, {"-1", 10}, {NULL, 10}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].value)
            setenv("KREPLAY_PROGRESS_SECONDS", cases[i].value, 1);
        else
            unsetenv("KREPLAY_PROGRESS_SECONDS");
        assert_true(progress_log_seconds() == cases[i].seconds);
    }
    /* 0: silent however long the run */
    const beat_t beats[] = {{0.02, 1, NULL}, {0, 2, NULL}};
    char *out = log_of(0, 2, beats, 2);
    assert_string_equal(out, "");
    free(out);
}

KR_TEST_MAIN(test_short_run_writes_nothing, test_long_run_writes_whole_lines, test_stopped_run_ends_its_log,
             test_interval_from_environment);
