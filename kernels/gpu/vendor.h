/* vendor.h: the one place that knows which GPU toolchain compiles the HIP
 * sources in this folder.
 *
 *   ROCm (hipcc):       includes <hip/hip_runtime.h>; everything is native.
 *   CUDA (nvcc):        maps the hip* runtime names the sources use onto the
 *                       CUDA runtime (the mirror of ggml's vendors/hip.h).
 *                       Debian's HIP 5.2 headers are NOT used: they do not
 *                       compile under CUDA 13.
 *   bare AMD device:    clang -x hip --offload-arch=gfx1201 -nogpulib -nogpuinc
 *                       --cuda-device-only (no HIP headers, no device libs):
 *                       provides threadIdx/blockIdx/blockDim/gridDim, the
 *                       __global__/__device__/__shared__ attributes,
 *                       __syncthreads, __threadfence and atomicAdd from clang
 *                       builtins.  Used by CI to compile the gfx1201 code.
 *
 * Exactly one of KR_GPU_CUDA, KR_GPU_HIP, KR_GPU_BARE is 1 afterwards.
 *
 * Rounded float operations (kr_fadd/kr_fmul/kr_fdiv/kr_fma) are spelled once
 * here: __fadd_rn & co. on CUDA, plain operators on AMD (the sources are built
 * with -ffp-contract=off there), so no compiler contraction can change bits. */
#ifndef KR_GPU_VENDOR_H
#define KR_GPU_VENDOR_H

#if defined(__CUDACC__)
#define KR_GPU_CUDA 1
#define KR_GPU_HIP 0
#define KR_GPU_BARE 0
#elif defined(__HIP__) && (defined(KR_GPU_FORCE_BARE) || !__has_include(<hip/hip_runtime.h>))
#define KR_GPU_CUDA 0
#define KR_GPU_HIP 0
#define KR_GPU_BARE 1
#elif defined(__HIP__) || defined(__HIPCC__)
#define KR_GPU_CUDA 0
#define KR_GPU_HIP 1
#define KR_GPU_BARE 0
#else
#error "kernels/gpu/vendor.h: compile with nvcc, hipcc, or clang -x hip"
#endif

/* ------------------------------------------------------------------ CUDA */
#if KR_GPU_CUDA
#include <cuda_runtime.h>
#include <stdint.h>

#define hipError_t cudaError_t
#define hipSuccess cudaSuccess
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceProp_t cudaDeviceProp
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipStream_t cudaStream_t
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipEvent_t cudaEvent_t
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipFuncSetAttribute(f, a, v) cudaFuncSetAttribute(f, a, v)
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipDriverGetVersion cudaDriverGetVersion
#define hipRuntimeGetVersion cudaRuntimeGetVersion
#define KR_GPU_BACKEND_NAME "cuda"

static __device__ __forceinline__ float kr_fadd(float a, float b) { return __fadd_rn(a, b); }
static __device__ __forceinline__ float kr_fsub(float a, float b) { return __fsub_rn(a, b); }
static __device__ __forceinline__ float kr_fmul(float a, float b) { return __fmul_rn(a, b); }
static __device__ __forceinline__ float kr_fdiv(float a, float b) { return __fdiv_rn(a, b); }
static __device__ __forceinline__ float kr_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
static __device__ __forceinline__ uint32_t kr_f2u(float f) { return __float_as_uint(f); }
static __device__ __forceinline__ float kr_u2f(uint32_t u) { return __uint_as_float(u); }
static __device__ __forceinline__ float kr_ldexpf(float x, int e) { return ldexpf(x, e); }
static __device__ __forceinline__ float kr_load_cg(const float *p) { return __ldcg(p); }
#define KR_RESTRICT __restrict__
#endif

/* ------------------------------------------------------------------ ROCm */
#if KR_GPU_HIP
#include <hip/hip_runtime.h>
#include <stdint.h>
#define KR_GPU_BACKEND_NAME "hip"
/* HIP's ldexpf (ocml): clang 15 lowers __builtin_ldexpf to a call to an
 * ldexpf that the device libraries do not define. */
static __device__ inline float kr_ldexpf(float x, int e) { return ldexpf(x, e); }
#define KR_RESTRICT __restrict__
#endif

/* ------------------------------------------- bare AMD device-only compile */
#if KR_GPU_BARE
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef signed char int8_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned long size_t;

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((amdgpu_flat_work_group_size(1, __VA_ARGS__)))
#define KR_RESTRICT __restrict__
#define KR_GPU_BACKEND_NAME "bare-amdgcn"

struct kr_bare_dim3 {
    unsigned x, y, z;
};
#define threadIdx                                                                            \
    (kr_bare_dim3{__builtin_amdgcn_workitem_id_x(), __builtin_amdgcn_workitem_id_y(),        \
                  __builtin_amdgcn_workitem_id_z()})
#define blockIdx                                                                             \
    (kr_bare_dim3{__builtin_amdgcn_workgroup_id_x(), __builtin_amdgcn_workgroup_id_y(),      \
                  __builtin_amdgcn_workgroup_id_z()})
#define blockDim                                                                             \
    (kr_bare_dim3{__builtin_amdgcn_workgroup_size_x(), __builtin_amdgcn_workgroup_size_y(),  \
                  __builtin_amdgcn_workgroup_size_z()})
#define gridDim                                                                              \
    (kr_bare_dim3{__builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(),      \
                  __builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y(),      \
                  __builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z()})

static __device__ inline void __syncthreads(void)
{
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
static __device__ inline void __threadfence(void) { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }
static __device__ inline int atomicAdd(int *p, int v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ inline float atomicAdd(float *p, float v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ inline float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
static __device__ inline float fminf(float a, float b) { return __builtin_fminf(a, b); }
static __device__ inline float fabsf(float a) { return __builtin_fabsf(a); }
static __device__ inline float copysignf(float a, float b) { return __builtin_copysignf(a, b); }
static __device__ inline float kr_ldexpf(float x, int e) { return __builtin_ldexpf(x, e); }
static __device__ inline int min(int a, int b) { return a < b ? a : b; }
static __device__ inline int max(int a, int b) { return a > b ? a : b; }
#endif

/* ------------------------------------- AMD (ROCm and bare device-only) */
/* clang compiles each operator to one IEEE operation, and -ffp-contract=off
 * keeps them apart: the plain operators are the rounded ones. */
#if KR_GPU_HIP || KR_GPU_BARE
static __device__ inline float kr_fadd(float a, float b) { return a + b; }
static __device__ inline float kr_fsub(float a, float b) { return a - b; }
static __device__ inline float kr_fmul(float a, float b) { return a * b; }
static __device__ inline float kr_fdiv(float a, float b) { return a / b; }
static __device__ inline float kr_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static __device__ inline uint32_t kr_f2u(float f) { return __builtin_bit_cast(uint32_t, f); }
static __device__ inline float kr_u2f(uint32_t u) { return __builtin_bit_cast(float, u); }
static __device__ inline float kr_load_cg(const float *p) { return *(const volatile float *)p; }
#endif

#endif
