/* The persistent thread pool behind parallel_for: every task runs exactly
 * once, a second thread really joins, nested and concurrent calls run
 * correctly (inline), a small job stays on the calling thread, and a child
 * process made by fork() gets a working pool of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "parallel.h"
#include "test_main.h"
#include "test_support.h"

#define MAX_TASKS 4096

typedef struct {
    atomic_int runs[MAX_TASKS];
} count_job_t;

static void count_task(void *ctx, int64_t t)
{
    count_job_t *job = ctx;
    atomic_fetch_add(&job->runs[t], 1);
}

static int every_task_once(count_job_t *job, int64_t n)
{
    for (int64_t t = 0; t < n; t++)
        if (atomic_load(&job->runs[t]) != 1)
            return 0;
    return 1;
}

static void test_every_task_once(void **state)
{
    (void)state;
    static const int64_t counts[] = {0, 1, 2, 3, 7, 64, 1000, MAX_TASKS};
    static const int threads[] = {0, 1, 2, 3, 8, 100};
    count_job_t *job = malloc(sizeof *job);
    assert_non_null(job);
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++)
            for (int rep = 0; rep < 20; rep++) {
                for (int i = 0; i < MAX_TASKS; i++)
                    atomic_init(&job->runs[i], 0);
                parallel_for(counts[c], threads[t], count_task, job);
                assert_true(every_task_once(job, counts[c]));
                for (int64_t i = counts[c]; i < MAX_TASKS; i++)
                    assert_int_equal(atomic_load(&job->runs[i]), 0);
            }
    free(job);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Task 0 waits (up to 10 s) for any other task to start: it can only
 * finish early if a second thread took one. */
typedef struct {
    atomic_int others_started;
    atomic_int task0_saw_helper;
    pthread_t task0_thread;
    atomic_int other_thread_ran;
} join_job_t;

static void join_task(void *ctx, int64_t t)
{
    join_job_t *job = ctx;
    if (t == 0) {
        job->task0_thread = pthread_self();
        const double deadline = now_s() + 10.0;
        while (!atomic_load(&job->others_started) && now_s() < deadline)
            sched_yield();
        atomic_store(&job->task0_saw_helper, atomic_load(&job->others_started));
        return;
    }
    atomic_store(&job->others_started, 1);
}

static int second_thread_joins(void)
{
    join_job_t job;
    memset(&job, 0, sizeof job);
    atomic_init(&job.others_started, 0);
    atomic_init(&job.task0_saw_helper, 0);
    parallel_for(2, 2, join_task, &job);
    return atomic_load(&job.task0_saw_helper);
}

static void test_second_thread_joins(void **state)
{
    (void)state;
    for (int rep = 0; rep < 5; rep++)
        assert_true(second_thread_joins());
}

/* A task that runs a parallel_for of its own: the inner call finds the pool
 * busy and runs inline, with the same results. */
typedef struct {
    count_job_t *inner[8];
} nested_job_t;

static void nested_task(void *ctx, int64_t t)
{
    nested_job_t *job = ctx;
    parallel_for(100, 2, count_task, job->inner[t]);
}

static void test_nested_calls(void **state)
{
    (void)state;
    nested_job_t job;
    for (int i = 0; i < 8; i++) {
        job.inner[i] = malloc(sizeof(count_job_t));
        assert_non_null(job.inner[i]);
        for (int k = 0; k < MAX_TASKS; k++)
            atomic_init(&job.inner[i]->runs[k], 0);
    }
    parallel_for(8, 2, nested_task, &job);
    for (int i = 0; i < 8; i++) {
        assert_true(every_task_once(job.inner[i], 100));
        free(job.inner[i]);
    }
}

/* Two threads calling parallel_for at once, many times. */
static void *concurrent_caller(void *arg)
{
    count_job_t *job = arg;
    for (int rep = 0; rep < 300; rep++) {
        for (int i = 0; i < 50; i++)
            atomic_store(&job->runs[i], 0);
        parallel_for(50, 2, count_task, job);
        if (!every_task_once(job, 50))
            return (void *)1;
    }
    return NULL;
}

static void test_concurrent_callers(void **state)
{
    (void)state;
    count_job_t *jobs = malloc(2 * sizeof *jobs);
    assert_non_null(jobs);
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, concurrent_caller, &jobs[0]), 0);
    void *mine = concurrent_caller(&jobs[1]);
    void *theirs = NULL;
    pthread_join(tid, &theirs);
    assert_null(mine);
    assert_null(theirs);
    free(jobs);
}

/* A small job (by its stated cost) runs on the calling thread alone. */
typedef struct {
    pthread_t caller;
    atomic_int elsewhere;
} where_job_t;

static void where_task(void *ctx, int64_t t)
{
    (void)t;
    where_job_t *job = ctx;
    if (!pthread_equal(pthread_self(), job->caller))
        atomic_store(&job->elsewhere, 1);
}

static void test_small_job_inline(void **state)
{
    (void)state;
    where_job_t job = {.caller = pthread_self()};
    atomic_init(&job.elsewhere, 0);
    for (int rep = 0; rep < 200; rep++)
        parallel_for_cost(4, 2, PARALLEL_MIN_THREAD_COST / 8, where_task, &job);
    assert_int_equal(atomic_load(&job.elsewhere), 0);
    assert_int_equal(parallel_thread_count(1), 1);
    assert_int_equal(parallel_thread_count(1000), 64);
}

/* After fork() the child has no worker threads; its parallel_for must start
 * its own (a helper really joins) and the parent's pool must keep working. */
static void test_fork_child_gets_a_pool(void **state)
{
    (void)state;
    assert_true(second_thread_joins());      /* the parent's pool exists */
    for (int rep = 0; rep < 3; rep++) {
        const pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            count_job_t *job = calloc(1, sizeof *job);
            int ok = job != NULL && second_thread_joins();
            if (ok) {
                parallel_for(MAX_TASKS, 2, count_task, job);
                ok = every_task_once(job, MAX_TASKS);
            }
            free(job);
            _exit(ok ? 0 : 1);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_true(second_thread_joins());
    }
}

static void test_thread_count_from_environment(void **state)
{
    (void)state;
    setenv("KREPLAY_THREADS", "3", 1);
    assert_int_equal(parallel_thread_count(0), 3);
    assert_int_equal(parallel_thread_count(2), 2);
    unsetenv("KREPLAY_THREADS");
    assert_true(parallel_thread_count(0) >= 1);
}

KR_TEST_MAIN(
    test_every_task_once, test_second_thread_joins, test_nested_calls, test_concurrent_callers,
    test_small_job_inline, test_fork_child_gets_a_pool, test_thread_count_from_environment);
