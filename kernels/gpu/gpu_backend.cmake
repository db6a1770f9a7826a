# Which toolchain builds kernels/gpu: KREPLAY_GPU = AUTO | HIP | CUDA | OFF.
#   AUTO: hipcc found -> HIP; else an nvcc that CMake can use -> CUDA; else OFF.
# Included from the top-level CMakeLists.txt, because the GPU language must be
# enabled in the directory that links the kreplay binary and the tests.
# Sets KR_GPU_BACKEND to HIP, CUDA or OFF.
set(KREPLAY_GPU AUTO CACHE STRING "GPU backend: AUTO (hipcc, else nvcc, else none), HIP, CUDA or OFF")
set_property(CACHE KREPLAY_GPU PROPERTY STRINGS AUTO HIP CUDA OFF)
string(TOUPPER "${KREPLAY_GPU}" _kr_gpu_want)
set(KR_GPU_BACKEND OFF)

if(_kr_gpu_want STREQUAL "AUTO" OR _kr_gpu_want STREQUAL "HIP")
  find_program(KR_HIPCC hipcc HINTS /opt/rocm/bin)
  if(KR_HIPCC)
    set(KR_GPU_BACKEND HIP)
  elseif(_kr_gpu_want STREQUAL "HIP")
    message(FATAL_ERROR "KREPLAY_GPU=HIP, but hipcc was not found")
  endif()
endif()

if(KR_GPU_BACKEND STREQUAL "OFF" AND (_kr_gpu_want STREQUAL "AUTO" OR _kr_gpu_want STREQUAL "CUDA"))
  # nvcc is often installed off PATH, in /usr/local/cuda/bin.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    find_program(_kr_nvcc_on_path nvcc)
    if(NOT _kr_nvcc_on_path)
      set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
    endif()
  endif()
  # sm_90 by default: the fp8 mma needs sm_89+, the H200 is sm_90, and the
  # code compiles for it on machines without a GPU.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures for kernels/gpu")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(KR_GPU_BACKEND CUDA)
  elseif(_kr_gpu_want STREQUAL "CUDA")
    message(FATAL_ERROR "KREPLAY_GPU=CUDA, but no usable nvcc was found (set CUDACXX)")
  endif()
endif()

if(KR_GPU_BACKEND STREQUAL "HIP")
  # hipcc compiles the HIP sources itself (kernels/gpu/CMakeLists.txt):
  # CMake's HIP language wants ROCm's own layout (ROOT/lib/cmake/hip-lang),
  # which Debian's ROCm 5.2 does not have, while hipcc works with both.
  execute_process(COMMAND ${KR_HIPCC} --version OUTPUT_VARIABLE _kr_hipcc_version
                  ERROR_QUIET RESULT_VARIABLE _kr_hipcc_rc)
  if(NOT _kr_hipcc_rc EQUAL 0)
    message(FATAL_ERROR "KREPLAY_GPU=HIP: '${KR_HIPCC} --version' failed")
  endif()
  string(REGEX MATCH "HIP version: ([0-9.]+)" _kr_m "${_kr_hipcc_version}")
  set(KR_HIP_VERSION "${CMAKE_MATCH_1}")
  string(REGEX MATCH "clang version ([0-9]+)" _kr_m "${_kr_hipcc_version}")
  set(_kr_hip_clang_major "${CMAKE_MATCH_1}")
  # gfx1201 (RDNA4) needs clang 19 (ROCm 6.3+).  Older toolchains, such as
  # Debian's ROCm 5.2 on clang 15, build for gfx1030 (RDNA2, wave32 like
  # gfx12); the gfx1201 device code is still compiled by clang-19 in the
  # tests (test_gfx1201_compile).
  if(_kr_hip_clang_major AND _kr_hip_clang_major LESS 19)
    set(_kr_hip_arch gfx1030)
  else()
    set(_kr_hip_arch gfx1201)
  endif()
  set(KREPLAY_HIP_ARCHITECTURES ${_kr_hip_arch} CACHE STRING "AMD GPU targets for kernels/gpu (hipcc --offload-arch)")
  find_library(KR_AMDHIP64 amdhip64 HINTS /opt/rocm/lib)
  if(NOT KR_AMDHIP64)
    message(FATAL_ERROR "KREPLAY_GPU=HIP, but libamdhip64 was not found (apt-get install libamdhip64-dev)")
  endif()
  message(STATUS "kreplay HIP: ${KR_HIPCC} (HIP ${KR_HIP_VERSION}, clang ${_kr_hip_clang_major}) for ${KREPLAY_HIP_ARCHITECTURES}")
elseif(KR_GPU_BACKEND STREQUAL "CUDA")
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
message(STATUS "kreplay GPU backend: ${KR_GPU_BACKEND} (KREPLAY_GPU=${KREPLAY_GPU})")
