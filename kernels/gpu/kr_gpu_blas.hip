// Reference GEMMs on the GPU (kr_gpu.h, "reference GEMMs"): cuBLAS SGEMM in
// pedantic math mode and DGEMM on CUDA builds; unsupported on ROCm.
#include "vendor.h"

#include <stdio.h>

#include "kr_gpu.h"

#if !KR_GPU_BARE

extern "C" int kr_gpu_internal_fail(int status, const char *what, const char *detail);

#if KR_GPU_CUDA
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>

namespace {

// cuBLAS is opened on the first reference GEMM, not linked: loading it (and
// the cuBLASLt it pulls in, some 500 MB) at start-up cost every kreplay run
// 50-100 ms, GPU or not, for the few runs that ask for a GPU reference.
struct cublas_api {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const float *, const float *, int, const float *, int, const float *,
                            float *, int);
    cublasStatus_t (*dgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const double *, const double *, int, const double *, int,
                            const double *, double *, int);
};

// The soname the build linked against first (found through the binary's
// run path), then the file; once per process (pthread_once: two threads may
// ask for a GPU reference at once).
cublas_api cublas;
int cublas_state; // 1: loaded, -1: failed
char cublas_reason[160];
pthread_once_t cublas_once = PTHREAD_ONCE_INIT;

void cublas_open()
{
    void *lib = dlopen(KR_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        lib = dlopen(KR_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(cublas_reason, sizeof cublas_reason, "cannot open %s: %s", KR_CUBLAS_SONAME,
                 dlerror());
        cublas_state = -1;
        return;
    }
    cublas.create = (decltype(cublas.create))dlsym(lib, "cublasCreate_v2");
    cublas.destroy = (decltype(cublas.destroy))dlsym(lib, "cublasDestroy_v2");
    cublas.set_math_mode = (decltype(cublas.set_math_mode))dlsym(lib, "cublasSetMathMode");
    cublas.set_stream = (decltype(cublas.set_stream))dlsym(lib, "cublasSetStream_v2");
    cublas.sgemm = (decltype(cublas.sgemm))dlsym(lib, "cublasSgemm_v2");
    cublas.dgemm = (decltype(cublas.dgemm))dlsym(lib, "cublasDgemm_v2");
    cublas_state = cublas.create && cublas.destroy && cublas.set_math_mode && cublas.set_stream &&
                           cublas.sgemm && cublas.dgemm
                       ? 1
                       : -1;
    if (cublas_state < 0)
        snprintf(cublas_reason, sizeof cublas_reason, "%s lacks a cuBLAS v2 entry point",
                 KR_CUBLAS_SONAME);
}

const cublas_api *cublas_load(const char **why)
{
    pthread_once(&cublas_once, cublas_open);
    *why = cublas_reason;
    return cublas_state > 0 ? &cublas : nullptr;
}

// Device buffers of one call, freed on every path.
struct gemm_buffers {
    void *a = nullptr, *b = nullptr, *c = nullptr;
    cublasHandle_t handle = nullptr;
    const cublas_api *api = nullptr;
    ~gemm_buffers()
    {
        cudaFree(a);
        cudaFree(b);
        cudaFree(c);
        if (handle)
            api->destroy(handle);
    }
};

int fail_rt(const char *what, cudaError_t e)
{
    return kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, what, cudaGetErrorString(e));
}

int fail_blas(const char *what, cublasStatus_t s)
{
    char detail[64];
    snprintf(detail, sizeof detail, "cuBLAS status %d", (int)s);
    return kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, what, detail);
}

// Row-major C[M,N] = A B^T is column-major C^T[N,M] = B^T(op T of the
// col-major K x N view of B) times A (the col-major K x M view of A).
template <typename T>
cublasStatus_t gemm_call(const cublas_api *api, cublasHandle_t h, const T *A, const T *B, int64_t M,
                         int64_t N, int64_t K, T *C)
{
    const T one = 1, zero = 0;
    if constexpr (sizeof(T) == 4)
        return api->sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one,
                          (const float *)B, (int)K, (const float *)A, (int)K, &zero, (float *)C,
                          (int)N);
    else
        return api->dgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one,
                          (const double *)B, (int)K, (const double *)A, (int)K, &zero,
                          (double *)C, (int)N);
}

bool shape_ok(const void *A, const void *B, const void *C, int64_t M, int64_t N, int64_t K)
{
    return A && B && C && M > 0 && N > 0 && K > 0 && M <= INT32_MAX && N <= INT32_MAX &&
           K <= INT32_MAX;
}

// A handle in pedantic math mode: no TF32 and no reduced-precision
// reductions, a reference in IEEE fp32.
cublasStatus_t pedantic_handle(const cublas_api *api, cublasHandle_t *h)
{
    cublasStatus_t s = api->create(h);
    if (s == CUBLAS_STATUS_SUCCESS && (s = api->set_math_mode(*h, CUBLAS_PEDANTIC_MATH)) !=
                                          CUBLAS_STATUS_SUCCESS) {
        api->destroy(*h);
        *h = nullptr;
    }
    return s;
}

template <typename T>
int gemm_nt(const T *A, const T *B, int64_t M, int64_t N, int64_t K, T *C, const char *who)
{
    if (!shape_ok(A, B, C, M, N, K))
        return kr_gpu_internal_fail(KR_GPU_ERR_ARG, who, "bad shape or NULL operand");
    gemm_buffers g;
    const char *why = "";
    if (!(g.api = cublas_load(&why)))
        return kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, who, why);
    const size_t ab = (size_t)M * (size_t)K * sizeof(T), bb = (size_t)N * (size_t)K * sizeof(T),
                 cb = (size_t)M * (size_t)N * sizeof(T);
    cudaError_t e;
    if ((e = cudaMalloc(&g.a, ab)) != cudaSuccess || (e = cudaMalloc(&g.b, bb)) != cudaSuccess ||
        (e = cudaMalloc(&g.c, cb)) != cudaSuccess)
        return fail_rt(who, e);
    if ((e = cudaMemcpy(g.a, A, ab, cudaMemcpyHostToDevice)) != cudaSuccess ||
        (e = cudaMemcpy(g.b, B, bb, cudaMemcpyHostToDevice)) != cudaSuccess)
        return fail_rt(who, e);
    cublasStatus_t s = pedantic_handle(g.api, &g.handle);
    if (s != CUBLAS_STATUS_SUCCESS)
        return fail_blas(who, s);
    if ((s = gemm_call<T>(g.api, g.handle, (const T *)g.a, (const T *)g.b, M, N, K, (T *)g.c)) !=
        CUBLAS_STATUS_SUCCESS)
        return fail_blas(who, s);
    if ((e = cudaMemcpy(C, g.c, cb, cudaMemcpyDeviceToHost)) != cudaSuccess)
        return fail_rt(who, e);
    return KR_GPU_OK;
}

// The device-operand GEMMs share one handle for the process: the GPU
// worker's, on its one device, made on the first call (a handle costs a few
// milliseconds and some memory; a worker calls it for every reference).
cublasHandle_t dev_handle;

template <typename T>
int gemm_nt_dev(const T *A, const T *B, int64_t M, int64_t N, int64_t K, T *C,
                kr_gpu_stream_t stream, const char *who)
{
    if (!shape_ok(A, B, C, M, N, K))
        return kr_gpu_internal_fail(KR_GPU_ERR_ARG, who, "bad shape or NULL operand");
    const char *why = "";
    const cublas_api *api = cublas_load(&why);
    if (!api)
        return kr_gpu_internal_fail(KR_GPU_ERR_RUNTIME, who, why);
    cublasStatus_t s;
    if (!dev_handle && (s = pedantic_handle(api, &dev_handle)) != CUBLAS_STATUS_SUCCESS)
        return fail_blas(who, s);
    if ((s = api->set_stream(dev_handle, (cudaStream_t)stream)) != CUBLAS_STATUS_SUCCESS ||
        (s = gemm_call<T>(api, dev_handle, A, B, M, N, K, C)) != CUBLAS_STATUS_SUCCESS)
        return fail_blas(who, s);
    return KR_GPU_OK;
}

} // namespace

extern "C" int kr_gpu_gemm_f32_nt(const float *A, const float *B, int64_t M, int64_t N,
                                  int64_t K, float *C)
{
    return gemm_nt<float>(A, B, M, N, K, C, "gemm_f32_nt (cuBLAS SGEMM, pedantic)");
}

extern "C" int kr_gpu_gemm_f64_nt(const double *A, const double *B, int64_t M, int64_t N,
                                  int64_t K, double *C)
{
    return gemm_nt<double>(A, B, M, N, K, C, "gemm_f64_nt (cuBLAS DGEMM)");
}

extern "C" int kr_gpu_gemm_f32_nt_dev(const float *A, const float *B, int64_t M, int64_t N,
                                      int64_t K, float *C, kr_gpu_stream_t stream)
{
    return gemm_nt_dev<float>(A, B, M, N, K, C, stream, "gemm_f32_nt_dev (cuBLAS SGEMM, pedantic)");
}

extern "C" int kr_gpu_gemm_f64_nt_dev(const double *A, const double *B, int64_t M, int64_t N,
                                      int64_t K, double *C, kr_gpu_stream_t stream)
{
    return gemm_nt_dev<double>(A, B, M, N, K, C, stream, "gemm_f64_nt_dev (cuBLAS DGEMM)");
}

#else // ROCm

extern "C" int kr_gpu_gemm_f32_nt(const float *, const float *, int64_t, int64_t, int64_t,
                                  float *)
{
    return kr_gpu_internal_fail(KR_GPU_ERR_UNSUPPORTED, "gemm_f32_nt",
                                "GPU references need cuBLAS (a CUDA build)");
}

extern "C" int kr_gpu_gemm_f64_nt(const double *, const double *, int64_t, int64_t, int64_t,
                                  double *)
{
    return kr_gpu_internal_fail(KR_GPU_ERR_UNSUPPORTED, "gemm_f64_nt",
                                "GPU references need cuBLAS (a CUDA build)");
}

extern "C" int kr_gpu_gemm_f32_nt_dev(const float *, const float *, int64_t, int64_t, int64_t,
                                      float *, kr_gpu_stream_t)
{
    return kr_gpu_internal_fail(KR_GPU_ERR_UNSUPPORTED, "gemm_f32_nt_dev",
                                "GPU references need cuBLAS (a CUDA build)");
}

extern "C" int kr_gpu_gemm_f64_nt_dev(const double *, const double *, int64_t, int64_t, int64_t,
                                      double *, kr_gpu_stream_t)
{
    return kr_gpu_internal_fail(KR_GPU_ERR_UNSUPPORTED, "gemm_f64_nt_dev",
                                "GPU references need cuBLAS (a CUDA build)");
}

#endif
#endif // !KR_GPU_BARE
