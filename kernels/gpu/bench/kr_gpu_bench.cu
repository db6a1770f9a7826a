// kr_gpu_bench: the GPU performance numbers, side by side in one run.
//   1. device-to-device copy bandwidth (cudaMemcpyAsync, bytes read + written)
//   2. w4a8.decode (the bit-faithful split-K SIMT kernel) at M = 1, 8, 64,
//      N = 17408, K = 5120: time, GB/s counting weight bytes (packed e2m1 +
//      e8m0 scales), as % of the copy bandwidth.  Weights rotate over enough
//      copies to defeat the L2.
//   3. the fp8 MMA prefill W4A8 (kr_gpu_w4a8_mma) at M = 4096 against
//      cuBLASLt's fp8 e4m3 GEMM (bf16 out, fp32 compute) on the same shape.
// Usage: kr_gpu_bench [--quick]
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kr_gpu.h"

// Every failed call ends the run the same way: where, which call, and why.
[[noreturn]] static void fail_at(const char *file, int line, const char *call, const char *fmt, ...)
{
    fprintf(stderr, "%s:%d %s: ", file, line, call);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}
#define CK(call)                                                                            \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess)                                                              \
            fail_at(__FILE__, __LINE__, #call, "%s", cudaGetErrorString(e_));               \
    } while (0)
#define KK(call)                                                                            \
    do {                                                                                    \
        int s_ = (call);                                                                    \
        if (s_ != KR_GPU_OK)                                                                \
            fail_at(__FILE__, __LINE__, #call, "%s: %s", kr_gpu_status_name(s_),            \
                    kr_gpu_last_error());                                                   \
    } while (0)
#define LK(call)                                                                            \
    do {                                                                                    \
        cublasStatus_t s_ = (call);                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                    \
            fail_at(__FILE__, __LINE__, #call, "cublas status %d", (int)s_);                \
    } while (0)

// splitmix64, seeded: every run draws the same operands.
struct Rng {
    uint64_t state = 0x9E3779B97F4A7C15ull;
    uint64_t next()
    {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
};

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// fp8 e4m3fn codes that are finite (no 0x7F / 0xFF), magnitudes spread.
static void fill_fp8(Rng &rng, std::vector<uint8_t> &v)
{
    for (auto &b : v) {
        uint8_t c;
        do c = (uint8_t)rng.next(); while ((c & 0x7F) == 0x7F);
        b = c;
    }
}

static void *dalloc(size_t bytes)
{
    void *p = nullptr;
    CK(cudaMalloc(&p, bytes));
    return p;
}

static void *dupload(const void *h, size_t bytes)
{
    void *p = dalloc(bytes);
    CK(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice));
    return p;
}

struct Row {
    char name[64];
    char shape[48];
    double ms, tflops, gbps, pct;
    const char *pct_of;
};

// The stream, the two timing events and the run's options, shared by the
// measurements.
struct Bench {
    cudaStream_t st;
    cudaEvent_t e0, e1;
    cudaDeviceProp prop;
    bool quick;
    Rng rng;
    std::vector<Row> rows;

    double elapsed()
    {
        float ms = 0;
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        return (double)ms;
    }
};

// The decode band's shape and its weight copies, rotated to defeat the L2.
static const int64_t BENCH_N = 17408, BENCH_K = 5120;
struct DecodeWeights {
    size_t wbytes, sbytes;
    int copies;
    std::vector<kr_gpu_mxfp4_t> W;
    std::vector<uint8_t *> refs, decs;
};

static Row make_row(const char *name, const char *shape, double ms, double tflops, double gbps)
{
    Row r{};
    snprintf(r.name, sizeof r.name, "%s", name);
    snprintf(r.shape, sizeof r.shape, "%s", shape);
    r.ms = ms;
    r.tflops = tflops;
    r.gbps = gbps;
    return r;
}

// 1. device-to-device copy bandwidth; returns GB/s (bytes read + written).
static double bench_copy(Bench &b)
{
    const size_t cbytes = (size_t)1 << 30;
    void *ca = dalloc(cbytes), *cb = dalloc(cbytes);
    CK(cudaMemset(ca, 1, cbytes));
    std::vector<double> ct;
    for (int i = 0; i < 12; i++) {
        CK(cudaEventRecord(b.e0, b.st));
        CK(cudaMemcpyAsync(cb, ca, cbytes, cudaMemcpyDeviceToDevice, b.st));
        CK(cudaEventRecord(b.e1, b.st));
        double ms = b.elapsed();
        if (i >= 2)
            ct.push_back(ms);
    }
    const double copy_ms = median(ct);
    const double copy_gbps = 2.0 * (double)cbytes / (copy_ms * 1e-3) / 1e9;
    CK(cudaFree(ca));
    CK(cudaFree(cb));
    Row r = make_row("d2d copy (read+write)", "2 x 1 GiB", copy_ms, 0, copy_gbps);
    r.pct = 100.0;
    r.pct_of = "copy";
    b.rows.push_back(r);
    return copy_gbps;
}

static void upload_decode_weights(Bench &b, DecodeWeights &d)
{
    const int64_t N = BENCH_N, K = BENCH_K;
    d.wbytes = (size_t)N * K / 2;
    d.sbytes = (size_t)N * K / 32;
    d.copies = (int)std::max<int64_t>(4, (3 * (int64_t)b.prop.l2CacheSize) / (int64_t)(d.wbytes + d.sbytes) + 1);
    std::vector<uint8_t> hw(d.wbytes), hs(d.sbytes);
    for (auto &x : hw)
        x = (uint8_t)b.rng.next();
    d.W.resize(d.copies);
    d.refs.resize(d.copies);
    d.decs.resize(d.copies);
    for (int c = 0; c < d.copies; c++) {
        for (auto &x : hw)
            x ^= (uint8_t)b.rng.next();
        for (auto &x : hs)
            x = (uint8_t)(118 + b.rng.next() % 10);   // 10 binades of block exponents
        d.W[c] = kr_gpu_mxfp4_t{(const uint8_t *)dupload(hw.data(), d.wbytes),
                                (const uint8_t *)dupload(hs.data(), d.sbytes), 1 /* [K/32, N] */, 0, N, K};
        d.refs[c] = (uint8_t *)dalloc((size_t)N);
        KK(kr_gpu_w4a8_row_ref(&d.W[c], nullptr, d.refs[c], b.st));
        d.decs[c] = (uint8_t *)dalloc(kr_gpu_w4a8_decode_layout_bytes(N, K));
        KK(kr_gpu_w4a8_decode_layout(&d.W[c], d.decs[c], b.st));
    }
    printf("decode: %d weight copies of %.1f MB rotated (L2 %d MiB)\n", d.copies,
           (double)(d.wbytes + d.sbytes) / 1e6, b.prop.l2CacheSize >> 20);
}

// One decode launch's device buffers at one M.
struct DecodeRun {
    int M, splits;
    uint8_t *dx;
    float *dxs, *scratch;
    size_t scratch_bytes;
    int *counters;
    int64_t ncount;
    uint16_t *out;
};

static void decode_launch(Bench &b, const DecodeWeights &d, const DecodeRun &r, int copy, bool warp_layout)
{
    KK(kr_gpu_w4a8_decode(r.dx, 0, r.dxs, r.M, &d.W[copy], warp_layout ? d.decs[copy] : nullptr, d.refs[copy],
                          r.splits, r.scratch, r.scratch_bytes, r.counters, r.ncount, r.out, b.st));
}

// The median time of one decode over `reps` timed rounds of `per` launches.
static double decode_time(Bench &b, const DecodeWeights &d, const DecodeRun &r, bool warp_layout, int reps, int per)
{
    std::vector<double> t;
    for (int rep = 0; rep < reps; rep++) {
        CK(cudaEventRecord(b.e0, b.st));
        for (int i = 0; i < per; i++)
            decode_launch(b, d, r, i % d.copies, warp_layout);
        CK(cudaEventRecord(b.e1, b.st));
        t.push_back(b.elapsed() / per);
    }
    return median(t);
}

static Row decode_row(const char *name, const DecodeWeights &d, int M, double ms, double copy_gbps)
{
    char shape[48];
    snprintf(shape, sizeof shape, "M=%d N=%lld K=%lld", M, (long long)BENCH_N, (long long)BENCH_K);
    Row r = make_row(name, shape, ms, 2.0 * M * (double)BENCH_N * BENCH_K / (ms * 1e-3) / 1e12,
                     (double)(d.wbytes + d.sbytes) / (ms * 1e-3) / 1e9);
    r.pct = 100.0 * r.gbps / copy_gbps;
    r.pct_of = "copy";
    return r;
}

// The checkpoint-order read (no load-time permutation): same bits, its own time.
static void bench_decode_checkpoint_order(Bench &b, const DecodeWeights &d, const DecodeRun &r, int reps, int per,
                                          double copy_gbps)
{
    std::vector<uint16_t> x((size_t)r.M * BENCH_N), y((size_t)r.M * BENCH_N);
    CK(cudaMemcpy(x.data(), r.out, x.size() * 2, cudaMemcpyDeviceToHost));
    decode_launch(b, d, r, 0, false);
    decode_launch(b, d, r, (per - 1) % d.copies, false);
    CK(cudaMemcpy(y.data(), r.out, y.size() * 2, cudaMemcpyDeviceToHost));
    printf("decode M=8: checkpoint-order read %s the warp-contiguous read\n",
           memcmp(x.data(), y.data(), x.size() * 2) ? "DIFFERS from" : "is bit-identical to");
    char name[64];
    snprintf(name, sizeof name, "w4a8.decode SIMT SK=%d ckpt-order", r.splits);
    b.rows.push_back(decode_row(name, d, r.M, decode_time(b, d, r, false, reps, per), copy_gbps));
}

// 2. w4a8.decode at one M.
static void bench_decode(Bench &b, const DecodeWeights &d, int M, double copy_gbps)
{
    const int64_t N = BENCH_N, K = BENCH_K;
    DecodeRun r{};
    r.M = M;
    r.splits = 4;
    std::vector<uint8_t> hx((size_t)M * K);
    fill_fp8(b.rng, hx);
    std::vector<float> hxs(M);
    for (auto &v : hxs)
        v = 0.001f + (float)(b.rng.next() % 1000) * 1e-5f;
    r.dx = (uint8_t *)dupload(hx.data(), hx.size());
    r.dxs = (float *)dupload(hxs.data(), hxs.size() * 4);
    r.scratch_bytes = kr_gpu_w4a8_decode_scratch_bytes(M, N, r.splits);
    r.scratch = (float *)dalloc(r.scratch_bytes);
    r.ncount = kr_gpu_w4a8_decode_counters(N);
    r.counters = (int *)dalloc((size_t)r.ncount * sizeof(int));
    CK(cudaMemset(r.counters, 0, (size_t)r.ncount * sizeof(int)));
    r.out = (uint16_t *)dalloc((size_t)M * N * 2);
    for (int i = 0; i < d.copies; i++)
        decode_launch(b, d, r, i, true);
    CK(cudaStreamSynchronize(b.st));
    const int reps = b.quick ? 3 : 7, per = d.copies * (b.quick ? 2 : 4);
    const double ms = decode_time(b, d, r, true, reps, per);
    CK(cudaGetLastError());
    if (M == 8)
        bench_decode_checkpoint_order(b, d, r, reps, per, copy_gbps);
    char name[64];
    snprintf(name, sizeof name, "w4a8.decode SIMT SK=%d", r.splits);
    b.rows.push_back(decode_row(name, d, M, ms, copy_gbps));
    CK(cudaFree(r.dx));
    CK(cudaFree(r.dxs));
    CK(cudaFree(r.scratch));
    CK(cudaFree(r.counters));
    CK(cudaFree(r.out));
}

// The prefill operands: fp8 activations and pre-shifted e4m3 weights.
struct PrefillRun {
    int64_t M;
    uint8_t *dx, *w8, *ref;
    float *dxs;
    uint16_t *out;
};

static double prefill_flops(const PrefillRun &p) { return 2.0 * p.M * (double)BENCH_N * BENCH_K; }

static Row prefill_row(const char *name, const PrefillRun &p, double ms)
{
    char shape[48];
    snprintf(shape, sizeof shape, "M=%lld N=%lld K=%lld", (long long)p.M, (long long)BENCH_N, (long long)BENCH_K);
    const double N = (double)BENCH_N, K = (double)BENCH_K;
    return make_row(name, shape, ms, prefill_flops(p) / (ms * 1e-3) / 1e12,
                    ((double)p.M * K + N * K + 2.0 * p.M * N) / (ms * 1e-3) / 1e9);
}

// 3a. the fp8 MMA prefill at both tile widths.
static void bench_mma(Bench &b, const PrefillRun &p)
{
    for (int bn : {256, 128}) {
        kr_gpu_w4a8_mma_set_tile(bn);
        std::vector<double> t;
        for (int i = 0; i < (b.quick ? 4 : 12); i++) {
            CK(cudaEventRecord(b.e0, b.st));
            KK(kr_gpu_w4a8_mma(p.dx, p.dxs, p.M, p.w8, p.ref, 0, BENCH_N, BENCH_K, p.out, b.st));
            CK(cudaEventRecord(b.e1, b.st));
            double ms = b.elapsed();
            if (i >= 2)
                t.push_back(ms);
        }
        char name[64];
        snprintf(name, sizeof name, "w4a8 MMA mma.sync e4m3 128x%d", bn);
        b.rows.push_back(prefill_row(name, p, median(t)));
    }
    kr_gpu_w4a8_mma_set_tile(256);
}

// 3b. cuBLASLt's fp8 e4m3 GEMM on the same operands; returns its TFLOP/s
// (0 when it has no algorithm for the shape).
static double bench_cublaslt(Bench &b, const PrefillRun &p)
{
    const int64_t N = BENCH_N, K = BENCH_K, PM = p.M;
    double blas_tflops = 0;
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    cublasLtMatmulDesc_t op;
    LK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    // out^T [N, M] (column-major, ld N) = W8[N, K] (row-major, i.e. K x N column-major, op T)
    //                                    x X^T (X row-major [M, K] = K x M column-major)
    cublasLtMatrixLayout_t la, lb, lc;
    LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K));
    LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, PM, K));
    LK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, PM, N));
    cublasLtMatmulPreference_t pref;
    LK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws_bytes = (size_t)64 << 20;
    void *ws = dalloc(ws_bytes);
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    LK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
    if (!found) {
        printf("cuBLASLt: no fp8 algorithm for this shape\n");
    } else {
        const float alpha = 1.0f, beta = 0.0f;
        std::vector<double> t;
        for (int i = 0; i < (b.quick ? 4 : 12); i++) {
            CK(cudaEventRecord(b.e0, b.st));
            LK(cublasLtMatmul(lt, op, &alpha, p.w8, la, p.dx, lb, &beta, p.out, lc, p.out, lc,
                              &heur.algo, ws, ws_bytes, b.st));
            CK(cudaEventRecord(b.e1, b.st));
            double ms = b.elapsed();
            if (i >= 2)
                t.push_back(ms);
        }
        Row r = prefill_row("cuBLASLt fp8 e4m3 (bf16 out)", p, median(t));
        blas_tflops = r.tflops;
        b.rows.push_back(r);
    }
    CK(cudaFree(ws));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    return blas_tflops;
}

// 3. the MMA prefill against cuBLASLt, each row as a share of cuBLASLt.
static void bench_prefill(Bench &b, const DecodeWeights &d)
{
    PrefillRun p{};
    p.M = 4096;
    std::vector<uint8_t> hx((size_t)p.M * BENCH_K);
    fill_fp8(b.rng, hx);
    std::vector<float> hxs(p.M, 0.01f);
    p.dx = (uint8_t *)dupload(hx.data(), hx.size());
    p.dxs = (float *)dupload(hxs.data(), hxs.size() * 4);
    p.w8 = (uint8_t *)dalloc((size_t)BENCH_N * BENCH_K);
    p.ref = d.refs[0];
    KK(kr_gpu_w4a8_preshift(&d.W[0], d.refs[0], p.w8, b.st));
    p.out = (uint16_t *)dalloc((size_t)p.M * BENCH_N * 2);
    bench_mma(b, p);
    const double blas_tflops = bench_cublaslt(b, p);
    for (auto &r : b.rows)
        if (strncmp(r.name, "w4a8 MMA", 8) == 0 || strncmp(r.name, "cuBLASLt", 8) == 0) {
            r.pct = blas_tflops > 0 ? 100.0 * r.tflops / blas_tflops : 0.0;
            r.pct_of = "cuBLASLt";
        }
}

int main(int argc, char **argv)
{
    Bench b{};
    b.quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("kr_gpu_bench: no CUDA device; nothing to measure\n");
        return 77;
    }
    CK(cudaGetDeviceProperties(&b.prop, 0));
    printf("device: %s, sm_%d%d, %d SMs, L2 %d MiB\n", b.prop.name, b.prop.major, b.prop.minor,
           b.prop.multiProcessorCount, b.prop.l2CacheSize >> 20);
    CK(cudaStreamCreate(&b.st));
    CK(cudaEventCreate(&b.e0));
    CK(cudaEventCreate(&b.e1));

    const double copy_gbps = bench_copy(b);
    DecodeWeights d;
    upload_decode_weights(b, d);
    for (int M : {1, 8, 64})
        bench_decode(b, d, M, copy_gbps);
    bench_prefill(b, d);

    printf("\n%-34s %-24s %10s %9s %9s %8s\n", "kernel", "shape", "ms", "TFLOP/s", "GB/s", "ratio");
    for (auto &r : b.rows)
        printf("%-34s %-24s %10.4f %9.1f %9.1f %7.1f%% of %s\n", r.name, r.shape, r.ms, r.tflops,
               r.gbps, r.pct, r.pct_of ? r.pct_of : "-");
    printf("targets: decode >= 50%% of copy bandwidth (GB/s counts packed e2m1 + e8m0 weight bytes);"
           " MMA prefill >= 30%% of cuBLASLt\n");
    return 0;
}
