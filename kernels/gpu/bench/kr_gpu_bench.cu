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
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kr_gpu.h"

#define CK(call)                                                                            \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(2);                                                                        \
        }                                                                                   \
    } while (0)
#define KK(call)                                                                            \
    do {                                                                                    \
        int s_ = (call);                                                                    \
        if (s_ != KR_GPU_OK) {                                                              \
            fprintf(stderr, "%s:%d %s: %s: %s\n", __FILE__, __LINE__, #call,               \
                    kr_gpu_status_name(s_), kr_gpu_last_error());                          \
            exit(2);                                                                        \
        }                                                                                   \
    } while (0)
#define LK(call)                                                                            \
    do {                                                                                    \
        cublasStatus_t s_ = (call);                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                  \
            fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #call, (int)s_); \
            exit(2);                                                                        \
        }                                                                                   \
    } while (0)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng()
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// fp8 e4m3fn codes that are finite (no 0x7F / 0xFF), magnitudes spread.
static void fill_fp8(std::vector<uint8_t> &v)
{
    for (auto &b : v) {
        uint8_t c;
        do c = (uint8_t)rng(); while ((c & 0x7F) == 0x7F);
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

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("kr_gpu_bench: no CUDA device; nothing to measure\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, sm_%d%d, %d SMs, L2 %d MiB\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, prop.l2CacheSize >> 20);
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<Row> rows;
    auto elapsed = [&]() {
        float ms = 0;
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        return (double)ms;
    };

    // ---- 1. copy bandwidth ----
    const size_t cbytes = (size_t)1 << 30;
    void *ca = dalloc(cbytes), *cb = dalloc(cbytes);
    CK(cudaMemset(ca, 1, cbytes));
    std::vector<double> ct;
    for (int i = 0; i < 12; i++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaMemcpyAsync(cb, ca, cbytes, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(e1, st));
        double ms = elapsed();
        if (i >= 2)
            ct.push_back(ms);
    }
    const double copy_ms = median(ct);
    const double copy_gbps = 2.0 * (double)cbytes / (copy_ms * 1e-3) / 1e9;
    CK(cudaFree(ca));
    CK(cudaFree(cb));
    {
        Row r{};
        snprintf(r.name, sizeof r.name, "d2d copy (read+write)");
        snprintf(r.shape, sizeof r.shape, "2 x 1 GiB");
        r.ms = copy_ms;
        r.tflops = 0;
        r.gbps = copy_gbps;
        r.pct = 100.0;
        r.pct_of = "copy";
        rows.push_back(r);
    }

    // ---- 2. decode band ----
    const int64_t N = 17408, K = 5120;
    const size_t wbytes = (size_t)N * K / 2, sbytes = (size_t)N * K / 32;
    const int copies = (int)std::max<int64_t>(4, (3 * (int64_t)prop.l2CacheSize) / (int64_t)(wbytes + sbytes) + 1);
    std::vector<uint8_t> hw(wbytes), hs(sbytes);
    for (auto &b : hw)
        b = (uint8_t)rng();
    std::vector<kr_gpu_mxfp4_t> W(copies);
    std::vector<uint8_t *> refs(copies), decs(copies);
    for (int c = 0; c < copies; c++) {
        for (auto &b : hw)
            b ^= (uint8_t)rng();
        for (auto &b : hs)
            b = (uint8_t)(118 + rng() % 10);   // 10 binades of block exponents
        W[c] = kr_gpu_mxfp4_t{(const uint8_t *)dupload(hw.data(), wbytes),
                              (const uint8_t *)dupload(hs.data(), sbytes), 1 /* [K/32, N] */, 0, N, K};
        refs[c] = (uint8_t *)dalloc((size_t)N);
        KK(kr_gpu_w4a8_row_ref(&W[c], nullptr, refs[c], st));
        decs[c] = (uint8_t *)dalloc(kr_gpu_w4a8_decode_layout_bytes(N, K));
        KK(kr_gpu_w4a8_decode_layout(&W[c], decs[c], st));
    }
    printf("decode: %d weight copies of %.1f MB rotated (L2 %d MiB)\n", copies,
           (double)(wbytes + sbytes) / 1e6, prop.l2CacheSize >> 20);
    const int splits = 4;
    for (int M : {1, 8, 64}) {
        std::vector<uint8_t> hx((size_t)M * K);
        fill_fp8(hx);
        std::vector<float> hxs(M);
        for (auto &v : hxs)
            v = 0.001f + (float)(rng() % 1000) * 1e-5f;
        uint8_t *dx = (uint8_t *)dupload(hx.data(), hx.size());
        float *dxs = (float *)dupload(hxs.data(), hxs.size() * 4);
        const size_t scratch_bytes = kr_gpu_w4a8_decode_scratch_bytes(M, N, splits);
        float *scratch = (float *)dalloc(scratch_bytes);
        const int64_t ncount = kr_gpu_w4a8_decode_counters(N);
        int *counters = (int *)dalloc((size_t)ncount * sizeof(int));
        CK(cudaMemset(counters, 0, (size_t)ncount * sizeof(int)));
        uint16_t *out = (uint16_t *)dalloc((size_t)M * N * 2);
        for (int i = 0; i < copies; i++)
            KK(kr_gpu_w4a8_decode(dx, 0, dxs, M, &W[i], decs[i], refs[i], splits, scratch,
                                  scratch_bytes, counters, ncount, out, st));
        CK(cudaStreamSynchronize(st));
        std::vector<double> t;
        const int reps = quick ? 3 : 7, per = copies * (quick ? 2 : 4);
        for (int r = 0; r < reps; r++) {
            CK(cudaEventRecord(e0, st));
            for (int i = 0; i < per; i++)
                KK(kr_gpu_w4a8_decode(dx, 0, dxs, M, &W[i % copies], decs[i % copies],
                                      refs[i % copies], splits, scratch, scratch_bytes, counters,
                                      ncount, out, st));
            CK(cudaEventRecord(e1, st));
            t.push_back(elapsed() / per);
        }
        CK(cudaGetLastError());
        if (M == 8) {
            // The checkpoint-order read (no load-time permutation): same bits, its own time.
            std::vector<uint16_t> a((size_t)M * N), b((size_t)M * N);
            CK(cudaMemcpy(a.data(), out, a.size() * 2, cudaMemcpyDeviceToHost));
            KK(kr_gpu_w4a8_decode(dx, 0, dxs, M, &W[0], nullptr, refs[0], splits, scratch,
                                  scratch_bytes, counters, ncount, out, st));
            KK(kr_gpu_w4a8_decode(dx, 0, dxs, M, &W[(per - 1) % copies], nullptr,
                                  refs[(per - 1) % copies], splits, scratch, scratch_bytes,
                                  counters, ncount, out, st));
            CK(cudaMemcpy(b.data(), out, b.size() * 2, cudaMemcpyDeviceToHost));
            printf("decode M=8: checkpoint-order read %s the warp-contiguous read\n",
                   memcmp(a.data(), b.data(), a.size() * 2) ? "DIFFERS from" : "is bit-identical to");
            std::vector<double> t2;
            for (int rr = 0; rr < reps; rr++) {
                CK(cudaEventRecord(e0, st));
                for (int i = 0; i < per; i++)
                    KK(kr_gpu_w4a8_decode(dx, 0, dxs, M, &W[i % copies], nullptr, refs[i % copies],
                                          splits, scratch, scratch_bytes, counters, ncount, out, st));
                CK(cudaEventRecord(e1, st));
                t2.push_back(elapsed() / per);
            }
            Row r2{};
            snprintf(r2.name, sizeof r2.name, "w4a8.decode SIMT SK=%d ckpt-order", splits);
            snprintf(r2.shape, sizeof r2.shape, "M=%d N=%lld K=%lld", M, (long long)N, (long long)K);
            r2.ms = median(t2);
            r2.tflops = 2.0 * M * (double)N * K / (r2.ms * 1e-3) / 1e12;
            r2.gbps = (double)(wbytes + sbytes) / (r2.ms * 1e-3) / 1e9;
            r2.pct = 100.0 * r2.gbps / copy_gbps;
            r2.pct_of = "copy";
            rows.push_back(r2);
        }
        Row r{};
        snprintf(r.name, sizeof r.name, "w4a8.decode SIMT SK=%d", splits);
        snprintf(r.shape, sizeof r.shape, "M=%d N=%lld K=%lld", M, (long long)N, (long long)K);
        r.ms = median(t);
        r.tflops = 2.0 * M * (double)N * K / (r.ms * 1e-3) / 1e12;
        r.gbps = (double)(wbytes + sbytes) / (r.ms * 1e-3) / 1e9;
        r.pct = 100.0 * r.gbps / copy_gbps;
        r.pct_of = "copy";
        rows.push_back(r);
        CK(cudaFree(dx));
        CK(cudaFree(dxs));
        CK(cudaFree(scratch));
        CK(cudaFree(counters));
        CK(cudaFree(out));
    }

    // ---- 3. MMA prefill vs cuBLASLt fp8 ----
    const int64_t PM = 4096;
    std::vector<uint8_t> hx((size_t)PM * K);
    fill_fp8(hx);
    std::vector<float> hxs(PM, 0.01f);
    uint8_t *dx = (uint8_t *)dupload(hx.data(), hx.size());
    float *dxs = (float *)dupload(hxs.data(), hxs.size() * 4);
    uint8_t *w8 = (uint8_t *)dalloc((size_t)N * K);
    KK(kr_gpu_w4a8_preshift(&W[0], refs[0], w8, st));
    uint16_t *out = (uint16_t *)dalloc((size_t)PM * N * 2);
    const double flops = 2.0 * PM * (double)N * K;
    for (int bn : {256, 128}) {
        kr_gpu_w4a8_mma_set_tile(bn);
        std::vector<double> t;
        for (int i = 0; i < (quick ? 4 : 12); i++) {
            CK(cudaEventRecord(e0, st));
            KK(kr_gpu_w4a8_mma(dx, dxs, PM, w8, refs[0], 0, N, K, out, st));
            CK(cudaEventRecord(e1, st));
            double ms = elapsed();
            if (i >= 2)
                t.push_back(ms);
        }
        Row r{};
        snprintf(r.name, sizeof r.name, "w4a8 MMA mma.sync e4m3 128x%d", bn);
        snprintf(r.shape, sizeof r.shape, "M=%lld N=%lld K=%lld", (long long)PM, (long long)N, (long long)K);
        r.ms = median(t);
        r.tflops = flops / (r.ms * 1e-3) / 1e12;
        r.gbps = ((double)PM * K + (double)N * K + 2.0 * PM * N) / (r.ms * 1e-3) / 1e9;
        rows.push_back(r);
    }
    kr_gpu_w4a8_mma_set_tile(256);
    double blas_tflops = 0;
    {
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
            for (int i = 0; i < (quick ? 4 : 12); i++) {
                CK(cudaEventRecord(e0, st));
                LK(cublasLtMatmul(lt, op, &alpha, w8, la, dx, lb, &beta, out, lc, out, lc,
                                  &heur.algo, ws, ws_bytes, st));
                CK(cudaEventRecord(e1, st));
                double ms = elapsed();
                if (i >= 2)
                    t.push_back(ms);
            }
            Row r{};
            snprintf(r.name, sizeof r.name, "cuBLASLt fp8 e4m3 (bf16 out)");
            snprintf(r.shape, sizeof r.shape, "M=%lld N=%lld K=%lld", (long long)PM, (long long)N, (long long)K);
            r.ms = median(t);
            r.tflops = flops / (r.ms * 1e-3) / 1e12;
            r.gbps = ((double)PM * K + (double)N * K + 2.0 * PM * N) / (r.ms * 1e-3) / 1e9;
            blas_tflops = r.tflops;
            rows.push_back(r);
        }
        CK(cudaFree(ws));
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulDescDestroy(op);
        cublasLtDestroy(lt);
    }
    for (auto &r : rows)
        if (strncmp(r.name, "w4a8 MMA", 8) == 0 || strncmp(r.name, "cuBLASLt", 8) == 0) {
            r.pct = blas_tflops > 0 ? 100.0 * r.tflops / blas_tflops : 0.0;
            r.pct_of = "cuBLASLt";
        }

    printf("\n%-34s %-24s %10s %9s %9s %8s\n", "kernel", "shape", "ms", "TFLOP/s", "GB/s", "ratio");
    for (auto &r : rows)
        printf("%-34s %-24s %10.4f %9.1f %9.1f %7.1f%% of %s\n", r.name, r.shape, r.ms, r.tflops,
               r.gbps, r.pct, r.pct_of ? r.pct_of : "-");
    printf("targets: decode >= 50%% of copy bandwidth (GB/s counts packed e2m1 + e8m0 weight bytes);"
           " MMA prefill >= 30%% of cuBLASLt\n");
    return 0;
}
