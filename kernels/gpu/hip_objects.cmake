# The HIP build of kr_gpu: each HIP source compiled by hipcc into an object
# (host code plus the device code for KREPLAY_HIP_ARCHITECTURES), the objects
# archived as kr_gpu, linked with the HIP runtime and libstdc++ (the sources
# are C++; the binaries are linked by the C compiler).
# -ffp-contract=off: no contraction anywhere (the SIMT kernels are bit contracts).
set(_kr_hip_flags -O3 -std=c++17 -fPIC -ffp-contract=off -Wall -Wextra
    -I${CMAKE_CURRENT_SOURCE_DIR})
if(KREPLAY_WERROR)
  list(APPEND _kr_hip_flags -Werror)
endif()
foreach(_kr_arch ${KREPLAY_HIP_ARCHITECTURES})
  list(APPEND _kr_hip_flags --offload-arch=${_kr_arch})
endforeach()
string(REPLACE ";" "," _kr_hip_targets "${KREPLAY_HIP_ARCHITECTURES}")
set(_kr_hip_objects)
foreach(_kr_src ${KR_GPU_HIP_SOURCES})
  get_filename_component(_kr_name ${_kr_src} NAME_WE)
  set(_kr_obj ${CMAKE_CURRENT_BINARY_DIR}/${_kr_name}.o)
  set(_kr_defs)
  if(_kr_name STREQUAL "kr_gpu_info")
    set(_kr_defs "-DKR_GPU_TARGETS=\"${_kr_hip_targets}\"")
  endif()
  add_custom_command(
      OUTPUT ${_kr_obj}
      COMMAND ${KR_HIPCC} ${_kr_hip_flags} ${_kr_defs} -c ${_kr_src} -o ${_kr_obj}
      DEPENDS ${_kr_src} ${CMAKE_CURRENT_SOURCE_DIR}/vendor.h ${CMAKE_CURRENT_SOURCE_DIR}/kr_gpu.h
              ${CMAKE_CURRENT_SOURCE_DIR}/kr_gpu_numerics.h
      COMMENT "hipcc ${_kr_name}.hip (${KREPLAY_HIP_ARCHITECTURES})"
      VERBATIM)
  list(APPEND _kr_hip_objects ${_kr_obj})
endforeach()
add_library(kr_gpu STATIC ${_kr_hip_objects})
set_target_properties(kr_gpu PROPERTIES LINKER_LANGUAGE C)
target_link_libraries(kr_gpu PUBLIC ${KR_AMDHIP64} stdc++ m)
