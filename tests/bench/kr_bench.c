/* kr_bench: side-by-side timings of the reference and the models against sgemm.
 *
 *   1. The fp32 reference against one bare cblas_sgemm of the same dimensions
 *      on the weights already dequantized (ratio ref / sgemm, target 1.15x),
 *      in the two situations a replay meets:
 *        cold:   the first reference on a weight, gemm_ref_f32 (a temporary
 *                context with the default budget: allocation, dequant of
 *                every chunk, one sgemm per chunk);
 *        cached: a further reference on the same weight through a context
 *                whose budget holds the whole dequantized W (one sgemm).
 *      INFO lines break the cold time down, so a miss shows what it is made
 *      of: the same sgemm issued in the context's chunks alone (the rest is
 *      dequant, allocation and page faults), and for scale the dequant of all
 *      of W in one pass (threaded, and on one thread).  They also give the
 *      first call of a fresh whole-W context and the repeated call of a
 *      default-budget context (chunked, no allocation).
 *   2. run_cpu of w4a8.perblock, w4a8.folded and w4a4.aiter: FLOP rate
 *      2*M*N*K / time as a percentage of the sgemm's FLOP rate at the same
 *      shape (activation preparation, prepare_act, is not timed).
 *
 * Operands are random (fixed seed): MXFP4 weight with e8m0 scales 118..127
 * in the checkpoint [N, K/32] layout, activations ~ N(0,1)-ish fp32.  Every
 * timing is the best of a few repetitions; in item 1 the measurements take
 * turns within each repetition, so a burst of load from elsewhere does not
 * land on one side only.  OpenBLAS threads are left at their default.
 *
 * Output: one line per measurement, "ROW|<item>|<what>|<measured>|<target>|PASS/MISS",
 * plus "INFO|..." lines; scripts/bench.sh collects them into its table.
 * Usage: kr_bench [--quick]   (--quick: decode shapes only, for a smoke run)
 *        kr_bench --models M REPS   (the three models' run_cpu seconds at M rows)
 *        kr_bench --sgemm M N K REPS   (one bare sgemm size, best of REPS) */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm_ref.h"
#include "mxfp4_dequant.h"
#include "mxfp4_weight.h"
#include "ref_parallel.h"
#include "registry.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static float frand(void) /* roughly N(0,1): sum of 4 uniforms, centred */
{
    double s = 0;
    for (int i = 0; i < 4; i++)
        s += (double)(rng() >> 11) * (1.0 / 9007199254740992.0);
    return (float)((s - 2.0) * 1.7320508);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "kr_bench: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

typedef struct {
    int64_t N, K;
    uint8_t *packed, *scales;
    float *Wd; /* [N, K] dequantized, for the bare sgemm */
    mxfp4_weight_t w;
} weight_t;

static void weight_make(weight_t *W, int64_t N, int64_t K)
{
    W->N = N;
    W->K = K;
    W->packed = xmalloc((size_t)(N * K / 2));
    W->scales = xmalloc((size_t)(N * K / 32));
    for (int64_t i = 0; i < N * K / 2; i++)
        W->packed[i] = (uint8_t)rng();
    for (int64_t i = 0; i < N * K / 32; i++)
        W->scales[i] = (uint8_t)(118 + rng() % 10);
    W->w = (mxfp4_weight_t){.packed = W->packed, .scales = W->scales, .layout = SCALE_LAYOUT_NK,
                            .e8m0_mode = E8M0_SPEC, .N = N, .K = K};
    W->Wd = xmalloc((size_t)(N * K) * sizeof(float));
}

static void weight_free(weight_t *W)
{
    free(W->packed);
    free(W->scales);
    free(W->Wd);
}

static const char *verdict(int pass) { return pass ? "PASS" : "MISS"; }

static double sgemm_once(const float *A, int64_t M, const weight_t *W, float *C)
{
    double t0 = now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)W->N, (int)W->K, 1.0f, A,
                (int)W->K, W->Wd, (int)W->K, 0.0f, C, (int)W->N);
    return now_s() - t0;
}

/* The sgemm alone, issued in chunks of `rows` rows of the dequantized W. */
static double chunked_sgemm_once(const float *A, int64_t M, const weight_t *W, int64_t rows,
                                 float *C)
{
    const int64_t N = W->N, K = W->K;
    double t0 = now_s();
    for (int64_t n0 = 0; n0 < N; n0 += rows) {
        const int64_t n = N - n0 < rows ? N - n0 : rows;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)n, (int)K, 1.0f, A,
                    (int)K, W->Wd + n0 * K, (int)K, 0.0f, C + n0, (int)N);
    }
    return now_s() - t0;
}

static double dequant_all_once(const weight_t *W, int threads)
{
    double t0 = now_s();
    mxfp4_dequant_rows_parallel(MXFP4_DEQUANT_AUTO, W->packed, W->scales, W->w.layout, W->N,
                                W->K, 0, W->N, W->w.e8m0_mode, threads, W->Wd);
    return now_s() - t0;
}

static void check(int rc, const char *what, const kr_error_t *err)
{
    if (rc) {
        fprintf(stderr, "kr_bench: %s: %s\n", what, err->msg);
        exit(2);
    }
}

static double min2(double a, double b) { return a < b ? a : b; }

static double sgemm_rate[2][2]; /* [shape][band] GFLOP/s, the models are measured against it */

static void item1(int shape_i, weight_t *W, int64_t M, int band, int reps)
{
    const int64_t N = W->N, K = W->K;
    float *A = xmalloc((size_t)(M * K) * sizeof(float));
    float *C = xmalloc((size_t)(M * N) * sizeof(float));
    for (int64_t i = 0; i < M * K; i++)
        A[i] = frand();
    kr_error_t err;

    /* A context holding the whole dequantized W ("cached per case and
     * shape"), and one with the default budget (chunked for large W). */
    const int64_t whole_w = N * K * (int64_t)sizeof(float);
    gemm_ref_ctx_t *cached, *chunked;
    check(gemm_ref_ctx_init(&cached, &W->w, whole_w, &err), "gemm_ref_ctx_init", &err);
    check(gemm_ref_ctx_init(&chunked, &W->w, 0, &err), "gemm_ref_ctx_init", &err);
    const int64_t rows = gemm_ref_chunk_rows(N, K);
    check(gemm_ref_ctx_f32(cached, A, M, C, &err), "gemm_ref_ctx_f32", &err);
    check(gemm_ref_ctx_f32(chunked, A, M, C, &err), "gemm_ref_ctx_f32", &err);

    double t_sg = 1e30, t_cold = 1e30, t_cached = 1e30, t_chunked = 1e30, t_cached_first = 1e30;
    double t_deq = 1e30, t_deq1 = 1e30, t_chunk_sg = 1e30, t0;
    for (int r = 0; r < reps; r++) {
        /* the first call of a fresh whole-W context: allocation, dequant of
         * all of W, one sgemm */
        gemm_ref_ctx_t *fresh;
        t0 = now_s();
        check(gemm_ref_ctx_init(&fresh, &W->w, whole_w, &err), "gemm_ref_ctx_init", &err);
        check(gemm_ref_ctx_f32(fresh, A, M, C, &err), "gemm_ref_ctx_f32", &err);
        gemm_ref_ctx_free(fresh);
        t_cached_first = min2(t_cached_first, now_s() - t0);
        t_sg = min2(t_sg, sgemm_once(A, M, W, C));
        t0 = now_s();
        check(gemm_ref_f32(A, M, &W->w, 0, C, &err), "gemm_ref_f32", &err);
        t_cold = min2(t_cold, now_s() - t0);
        t0 = now_s();
        check(gemm_ref_ctx_f32(cached, A, M, C, &err), "gemm_ref_ctx_f32", &err);
        t_cached = min2(t_cached, now_s() - t0);
        t0 = now_s();
        check(gemm_ref_ctx_f32(chunked, A, M, C, &err), "gemm_ref_ctx_f32", &err);
        t_chunked = min2(t_chunked, now_s() - t0);
        t_chunk_sg = min2(t_chunk_sg, chunked_sgemm_once(A, M, W, rows, C));
        t_deq = min2(t_deq, dequant_all_once(W, 0));
        t_deq1 = min2(t_deq1, dequant_all_once(W, 1));
    }
    gemm_ref_ctx_free(cached);
    gemm_ref_ctx_free(chunked);

    const double flop = 2.0 * (double)M * (double)N * (double)K;
    const int64_t chunks = (N + rows - 1) / rows;
    sgemm_rate[shape_i][band] = flop / t_sg * 1e-9;
    const double cold = t_cold / t_sg, warm = t_cached / t_sg;
    printf("ROW|1 ref/sgemm cold|M=%lld N=%lld K=%lld, first call on a weight|%.2fx|<= 1.15x|%s\n",
           (long long)M, (long long)N, (long long)K, cold, verdict(cold <= 1.15));
    printf("ROW|1 ref/sgemm cached|M=%lld N=%lld K=%lld, context holding W|%.2fx|<= 1.15x|%s\n",
           (long long)M, (long long)N, (long long)K, warm, verdict(warm <= 1.15));
    printf("INFO|1 cold|M=%lld N=%lld K=%lld|ref %.3f s vs sgemm %.3f s (%.1f GFLOP/s); "
           "%lld chunks of %lld rows (%.0f MiB buffer): those chunks' sgemm calls alone %.3f s "
           "(%.2fx the single sgemm), so dequant + allocation + page faults add %.3f s; for "
           "scale, dequantizing all of W in one pass (to DRAM) takes %.3f s (%.2f ns/elem on %d "
           "threads; %.3f s on one)\n",
           (long long)M, (long long)N, (long long)K, t_cold, t_sg, flop / t_sg * 1e-9,
           (long long)chunks, (long long)rows, (double)(rows * K * 4) / 1048576.0, t_chunk_sg,
           t_chunk_sg / t_sg, t_cold - t_chunk_sg, t_deq, t_deq / (double)(N * K) * 1e9,
           ref_thread_count(), t_deq1);
    printf("INFO|1 cached|M=%lld N=%lld K=%lld|ref %.3f s vs sgemm %.3f s; context of %.0f MiB "
           "(the whole W): its first call %.3f s = %.2fx (allocation + dequant of all of W + one "
           "sgemm); a default-budget context's repeated call (%lld chunks, one buffer, no "
           "allocation) %.3f s = %.2fx\n",
           (long long)M, (long long)N, (long long)K, t_cached, t_sg, (double)whole_w / 1048576.0,
           t_cached_first, t_cached_first / t_sg, (long long)chunks, t_chunked, t_chunked / t_sg);
    fflush(stdout);
    free(A);
    free(C);
}

static const char *const model_names[] = {"w4a8.perblock", "w4a8.folded", "w4a4.aiter"};
#define MODEL_COUNT (sizeof model_names / sizeof model_names[0])

/* The best of reps run_cpu calls of kernel name on W at M rows of random x
 * (prepare_act not timed); a negative value when the kernel is missing. */
static double model_best_seconds(const char *name, const weight_t *W, const float *x, int64_t M,
                                 uint16_t *out, int reps)
{
    const kernel_desc_t *k = kernel_find(name);
    if (!k)
        return -1.0;
    kernel_inputs_t in = {.M = M, .N = W->N, .K = W->K, .x = x, .weight = W->w};
    kernel_options_t opt;
    kernel_options_default(&opt);
    kernel_act_t act;
    memset(&act, 0, sizeof act);
    kr_error_t err;
    if (k->prepare_act(k, &in, &opt, &act, &err)) {
        fprintf(stderr, "kr_bench: %s prepare_act: %s\n", name, err.msg);
        exit(2);
    }
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        kernel_run_info_t info;
        memset(&info, 0, sizeof info);
        const double t0 = now_s();
        if (k->run_cpu(k, &in, &act, &opt, out, &info, &err)) {
            fprintf(stderr, "kr_bench: %s run_cpu: %s\n", name, err.msg);
            exit(2);
        }
        best = min2(best, now_s() - t0);
    }
    kernel_act_free(&act);
    return best;
}

static float *random_rows(int64_t M, int64_t K)
{
    float *x = xmalloc((size_t)(M * K) * sizeof(float));
    for (int64_t i = 0; i < M * K; i++)
        x[i] = frand();
    return x;
}

static void item2(const weight_t *W, int64_t M, int band, int reps)
{
    const int64_t N = W->N, K = W->K;
    float *x = random_rows(M, K);
    uint16_t *out = xmalloc((size_t)(M * N) * sizeof(uint16_t));
    const double flop = 2.0 * (double)M * (double)N * (double)K;
    for (size_t i = 0; i < MODEL_COUNT; i++) {
        const double best = model_best_seconds(model_names[i], W, x, M, out, reps);
        if (best < 0) {
            printf("ROW|2 model/sgemm|%s M=%lld|missing|>= 25%%|MISS\n", model_names[i], (long long)M);
            continue;
        }
        const double rate = flop / best * 1e-9;
        const double pct = 100.0 * rate / sgemm_rate[0][band];
        printf("ROW|2 model/sgemm rate|%s M=%lld N=%lld K=%lld|%.1f%%|>= 25%%|%s\n", model_names[i],
               (long long)M, (long long)N, (long long)K, pct, verdict(pct >= 25.0));
        printf("INFO|2 rate|%s M=%lld|%.3f s, %.1f GFLOP/s vs sgemm %.1f GFLOP/s\n", model_names[i],
               (long long)M, best, rate, sgemm_rate[0][band]);
        fflush(stdout);
    }
    free(x);
    free(out);
}

/* --models M REPS: "MODEL <name> <seconds>", the best of REPS run_cpu calls
 * of each model at M rows on 17408x5120 (random operands, fixed seed): for
 * builds of the models compared side by side, one process after another. */
static int models_only(int64_t M, int reps)
{
    weight_t W;
    weight_make(&W, 17408, 5120);
    float *x = random_rows(M, W.K);
    uint16_t *out = xmalloc((size_t)(M * W.N) * sizeof(uint16_t));
    for (size_t i = 0; i < MODEL_COUNT; i++)
        printf("MODEL %s %.6f\n", model_names[i], model_best_seconds(model_names[i], &W, x, M, out, reps));
    free(x);
    free(out);
    weight_free(&W);
    return 0;
}

/* --sgemm M N K REPS: the best of REPS bare cblas_sgemm calls C[M, N] =
 * A[M, K] @ B[N, K]^T (random fp32, default OpenBLAS threads), printed as
 * "SGEMM <seconds>": scripts/bench.sh's lower bound for a replay. */
static int sgemm_only(int64_t M, int64_t N, int64_t K, int reps)
{
    float *A = xmalloc((size_t)(M * K) * sizeof(float));
    float *B = xmalloc((size_t)(N * K) * sizeof(float));
    float *C = xmalloc((size_t)(M * N) * sizeof(float));
    for (int64_t i = 0; i < M * K; i++)
        A[i] = frand();
    for (int64_t i = 0; i < N * K; i++)
        B[i] = frand();
    /* Even one timed call is a warm one: C's pages are touched and
     * OpenBLAS's threads started by a small call first. */
    memset(C, 0, (size_t)(M * N) * sizeof(float));
    const int64_t w = M < 64 ? M : 64;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)w, (int)w, (int)K, 1.0f, A, (int)K, B,
                (int)K, 0.0f, C, (int)w);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, A,
                    (int)K, B, (int)K, 0.0f, C, (int)N);
        best = min2(best, now_s() - t0);
    }
    printf("SGEMM %.6f\n", best);
    free(A);
    free(B);
    free(C);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "--sgemm"))
        return sgemm_only(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), atoi(argv[5]));
    if (argc == 4 && !strcmp(argv[1], "--models"))
        return models_only(atoll(argv[2]), atoi(argv[3]));
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    const int64_t shapes[2][2] = {{17408, 5120}, {5120, 8704}};
    const int64_t Ms[2] = {64, 512};
    printf("INFO|setup|openblas|%s, %d threads; dequant %s on %d threads\n",
           openblas_get_config(), openblas_get_num_threads(),
           mxfp4_dequant_isa_name(mxfp4_dequant_isa_resolve(MXFP4_DEQUANT_AUTO)),
           ref_thread_count());
    for (int s = 0; s < 2; s++) {
        weight_t W;
        weight_make(&W, shapes[s][0], shapes[s][1]);
        for (int b = 0; b < (quick ? 1 : 2); b++)
            item1(s, &W, Ms[b], b, b == 0 ? 5 : 3);
        if (s == 0)
            for (int b = 0; b < (quick ? 1 : 2); b++)
                item2(&W, Ms[b], b, b == 0 ? 2 : 1);
        weight_free(&W);
    }
    return 0;
}
