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
  if(NOT DEFINED CMAKE_HIP_ARCHITECTURES)
    set(CMAKE_HIP_ARCHITECTURES gfx1201 CACHE STRING "AMD GPU targets for kernels/gpu")
  endif()
  enable_language(HIP)
elseif(KR_GPU_BACKEND STREQUAL "CUDA")
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
message(STATUS "kreplay GPU backend: ${KR_GPU_BACKEND} (KREPLAY_GPU=${KREPLAY_GPU})")
