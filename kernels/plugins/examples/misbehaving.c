/* Plugins that compute the W4A8 per-block product correctly (w4a8_spec.h)
 * but misbehave the way real kernel libraries do: what kreplay must contain
 * or detect (tests/test_plugin_isolation.c).  One source, one behaviour per
 * build, chosen by KR_MISBEHAVIOUR:
 *   1 stdout       prints to stdout during launch (a debug print left in)
 *   2 ctor_crash   a library constructor that segfaults at load time
 *   3 ctor_exit    a library constructor that calls exit(0)
 *   4 fork         launch forks a helper process that outlives the launch
 *                  (its pid goes to the file $KR_TEST_PIDFILE)
 *   5 tile_overrun stores the padding rows of its last 64-row M tile in the
 *                  last 64 columns: writes past the end of out that skip
 *                  the first (N - 64) elements after it
 *   6 mtail        16-row M tiles with a wrong tail path (rows of a partial
 *                  last tile read the tile's first activation row): correct
 *                  whenever M % 16 == 0; logs "M=<M>" per launch to
 *                  $KR_TEST_LAUNCH_LOG
 *   7 race         split-K over 8 threads adding into one fp32 buffer with
 *                  no lock (load early, store late: lost updates)
 *   8 splitk_ok    the same split-K with one partial buffer per thread,
 *                  reduced in split order after the join: deterministic
 *   9 daemon       launch starts a daemon the way one detaches from its
 *                  parent: fork, setsid() (out of the launch's process group
 *                  and session), fork again and let the middle process exit
 *                  (its pid goes to the file $KR_TEST_PIDFILE) */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "w4a8_spec.h"

#ifndef KR_MISBEHAVIOUR
#error "build with -DKR_MISBEHAVIOUR=1..9"
#endif

#define MB_STDOUT 1
#define MB_CTOR_CRASH 2
#define MB_CTOR_EXIT 3
#define MB_FORK 4
#define MB_TILE_OVERRUN 5
#define MB_MTAIL 6
#define MB_RACE 7
#define MB_SPLITK_OK 8
#define MB_DAEMON 9

#if KR_MISBEHAVIOUR == MB_STDOUT
#define KERNEL_NAME "misbehave.stdout"
#elif KR_MISBEHAVIOUR == MB_CTOR_CRASH
#define KERNEL_NAME "misbehave.ctor_crash"
#elif KR_MISBEHAVIOUR == MB_CTOR_EXIT
#define KERNEL_NAME "misbehave.ctor_exit"
#elif KR_MISBEHAVIOUR == MB_FORK
#define KERNEL_NAME "misbehave.fork"
#elif KR_MISBEHAVIOUR == MB_TILE_OVERRUN
#define KERNEL_NAME "misbehave.tile_overrun"
#elif KR_MISBEHAVIOUR == MB_MTAIL
#define KERNEL_NAME "misbehave.mtail"
#elif KR_MISBEHAVIOUR == MB_RACE
#define KERNEL_NAME "misbehave.race"
#elif KR_MISBEHAVIOUR == MB_SPLITK_OK
#define KERNEL_NAME "misbehave.splitk_ok"
#elif KR_MISBEHAVIOUR == MB_DAEMON
#define KERNEL_NAME "misbehave.daemon"
#endif

#if KR_MISBEHAVIOUR == MB_CTOR_CRASH
__attribute__((constructor)) static void crash_at_load(void)
{
    volatile uintptr_t bad = 16;
    *(volatile int *)bad = 1;
}
#endif

#if KR_MISBEHAVIOUR == MB_CTOR_EXIT
__attribute__((constructor)) static void exit_at_load(void)
{
    exit(0);
}
#endif

#if KR_MISBEHAVIOUR == MB_FORK || KR_MISBEHAVIOUR == MB_DAEMON
/* A helper that lingers (a compile server, a profiler agent); as a daemon,
 * in a session of its own and orphaned at once. */
static void spawn_helper(void)
{
    int fds[2];
    const int daemon = KR_MISBEHAVIOUR == MB_DAEMON && pipe(fds) == 0;
    pid_t pid = fork();
    if (pid == 0) {
        if (daemon) {
            setsid();
            const pid_t grandchild = fork();
            if (grandchild != 0) {
                if (write(fds[1], &grandchild, sizeof grandchild) < 0)
                    _exit(1);
                _exit(0);
            }
        }
        for (;;)
            pause();
    }
    if (daemon) {
        pid_t grandchild = -1;
        if (read(fds[0], &grandchild, sizeof grandchild) != (ssize_t)sizeof grandchild)
            grandchild = -1;
        close(fds[0]);
        close(fds[1]);
        waitpid(pid, NULL, 0);
        pid = grandchild;
    }
    const char *file = getenv("KR_TEST_PIDFILE");
    if (pid > 0 && file) {
        FILE *f = fopen(file, "a");
        if (f) {
            fprintf(f, "%ld\n", (long)pid);
            fclose(f);
        }
    }
}
#endif

#if KR_MISBEHAVIOUR == MB_MTAIL
static void log_launch(int64_t M)
{
    const char *file = getenv("KR_TEST_LAUNCH_LOG");
    if (!file)
        return;
    const int fd = open(file, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return;
    char line[64];
    const int n = snprintf(line, sizeof line, "M=%lld\n", (long long)M);
    if (write(fd, line, (size_t)n) != n) {
        /* the log is best effort */
    }
    close(fd);
}

/* The tail tile's rows all read the tile's first activation row and scale. */
static void mtail_rows(const uint8_t *x, const uint8_t *w, const uint8_t *es, const float *x_scale,
                       uint16_t *out, int64_t M, int64_t N, int64_t K)
{
    const int64_t full = M / 16 * 16;
    spec_rows(x, w, es, x_scale, out, 0, full, N, K);
    for (int64_t m = full; m < M; m++)
        for (int64_t n = 0; n < N; n++)
            out[m * N + n] =
                kreplay_bf16_rne(spec_partial(x, w, es, full, n, N, K, 0, K / 32) * x_scale[full]);
}
#endif

#if KR_MISBEHAVIOUR == MB_RACE || KR_MISBEHAVIOUR == MB_SPLITK_OK
#define SPLITS 8

typedef struct {
    const uint8_t *x, *w, *es;
    int64_t M, N, K, b0, b1;
    float *acc;                 /* race: the shared sum; splitk_ok: this split's own */
    pthread_barrier_t *start;
} split_job_t;

static void *split_main(void *arg)
{
    const split_job_t *j = arg;
    pthread_barrier_wait(j->start);
    volatile float *acc = j->acc;
    for (int64_t m = 0; m < j->M; m++)
        for (int64_t n = 0; n < j->N; n++) {
            const int64_t i = m * j->N + n;
#if KR_MISBEHAVIOUR == MB_RACE
            /* The bug: the cell is read before the partial is computed and
             * written after, with no lock, while 7 other splits do the same. */
            const float old = acc[i];
            const float p = spec_partial(j->x, j->w, j->es, m, n, j->N, j->K, j->b0, j->b1);
            acc[i] = old + p;
#else
            acc[i] = spec_partial(j->x, j->w, j->es, m, n, j->N, j->K, j->b0, j->b1);
#endif
        }
    return NULL;
}

static int splitk_rows(const uint8_t *x, const uint8_t *w, const uint8_t *es, const float *x_scale,
                       uint16_t *out, int64_t M, int64_t N, int64_t K)
{
    const int64_t MN = M * N, nb = K / 32;
    const int own = KR_MISBEHAVIOUR == MB_SPLITK_OK;
    float *acc = calloc((size_t)MN * (own ? SPLITS : 1), sizeof(float));
    if (!acc)
        return 4;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, SPLITS);
    split_job_t jobs[SPLITS];
    pthread_t th[SPLITS];
    for (int s = 0; s < SPLITS; s++) {
        jobs[s] = (split_job_t){.x = x, .w = w, .es = es, .M = M, .N = N, .K = K,
                                .b0 = nb * s / SPLITS, .b1 = nb * (s + 1) / SPLITS,
                                .acc = acc + (own ? (int64_t)s * MN : 0), .start = &start};
        pthread_create(&th[s], NULL, split_main, &jobs[s]);
    }
    for (int s = 0; s < SPLITS; s++)
        pthread_join(th[s], NULL);
    pthread_barrier_destroy(&start);
    for (int64_t i = 0; i < MN; i++) {
        float sum = acc[i];
        for (int s = 1; own && s < SPLITS; s++)
            sum += acc[(int64_t)s * MN + i];
        out[i] = kreplay_bf16_rne(sum * x_scale[i / N]);
    }
    free(acc);
    return 0;
}
#endif

static KREPLAY_LAUNCH(misbehaving_launch)
{
    const uint8_t *x = x_fp8, *w = weight, *es = weight_scale;
    uint16_t *o = out;
    if (stream || weight_ref || M < 1 || N < 1 || K < 32 || K % 32)
        return kreplay_fail("a CPU per-block kernel: stream and weight_ref NULL, K a multiple of 32", 1);
#if KR_MISBEHAVIOUR == MB_STDOUT
    printf("debug: launch M=%lld N=%lld K=%lld\n", (long long)M, (long long)N, (long long)K);
    spec_rows(x, w, es, x_scale, o, 0, M, N, K);
    printf("debug: done\n");
#elif KR_MISBEHAVIOUR == MB_FORK || KR_MISBEHAVIOUR == MB_DAEMON
    spawn_helper();
    spec_rows(x, w, es, x_scale, o, 0, M, N, K);
#elif KR_MISBEHAVIOUR == MB_TILE_OVERRUN
    spec_rows(x, w, es, x_scale, o, 0, M, N, K);
    const int64_t m_pad = (M + 63) / 64 * 64, n0 = N > 64 ? N - 64 : 0;
    for (int64_t m = M; m < m_pad; m++)
        for (int64_t n = n0; n < N; n++)
            o[m * N + n] = 0;   /* the padding rows' (zero) results, stored anyway */
#elif KR_MISBEHAVIOUR == MB_MTAIL
    log_launch(M);
    mtail_rows(x, w, es, x_scale, o, M, N, K);
#elif KR_MISBEHAVIOUR == MB_RACE || KR_MISBEHAVIOUR == MB_SPLITK_OK
    if (splitk_rows(x, w, es, x_scale, o, M, N, K))
        return kreplay_fail("out of memory", 4);
#else
    spec_rows(x, w, es, x_scale, o, 0, M, N, K);
#endif
    return kreplay_ok();
}

KREPLAY_PLUGIN_ONE_KERNEL("misbehave", kreplay_last_error,
                          .name = KERNEL_NAME,
                          .summary = "W4A8 per-block from the spec, with a misbehaviour "
                                     "(kernels/plugins/examples/misbehaving.c)",
                          .accumulation = "per 32-block sums over k ascending, blocks ascending; "
                                          "out = bf16(acc * x_scale)",
                          KREPLAY_W4A8_PERBLOCK_OPERANDS,
                          .k_multiple = 32,
                          .launch = misbehaving_launch);
