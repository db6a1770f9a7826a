# The HIP build of kr_gpu: each HIP source compiled by hipcc into an object
# (host code plus the device code for KREPLAY_HIP_ARCHITECTURES), the objects
# linked with the HIP runtime and libstdc++ into a module (the sources are
# C++; the module is linked by the C compiler) that kr_gpu, the C shim
# kr_gpu_lazy.c, opens on the first GPU call: kreplay itself does not load
# ROCm (see kr_gpu_lazy.c).
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
              ${CMAKE_CURRENT_SOURCE_DIR}/kr_gpu_numerics.h ${CMAKE_CURRENT_SOURCE_DIR}/kr_gpu_internal.h
      COMMENT "hipcc ${_kr_name}.hip (${KREPLAY_HIP_ARCHITECTURES})"
      VERBATIM)
  list(APPEND _kr_hip_objects ${_kr_obj})
endforeach()
add_library(kr_gpu_hip MODULE ${_kr_hip_objects})
# Next to kreplay, where the shim looks first; -Bsymbolic: the module's calls
# among its own kr_gpu_* functions stay inside it, never reaching the shim's
# functions of the same names.
set_target_properties(kr_gpu_hip PROPERTIES LINKER_LANGUAGE C OUTPUT_NAME kreplay_gpu_hip
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_link_libraries(kr_gpu_hip PRIVATE ${KR_AMDHIP64} stdc++ m)
target_link_options(kr_gpu_hip PRIVATE -Wl,-Bsymbolic -Wl,--no-undefined)

add_library(kr_gpu STATIC ${CMAKE_CURRENT_SOURCE_DIR}/kr_gpu_lazy.c)
add_dependencies(kr_gpu kr_gpu_hip)
target_compile_options(kr_gpu PRIVATE -Wall -Wextra $<$<BOOL:${KREPLAY_WERROR}>:-Werror>)
file(RELATIVE_PATH _kr_module_rel ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR}/kreplay)
target_compile_definitions(kr_gpu PRIVATE
    KR_GPU_MODULE_NAME="libkreplay_gpu_hip.so"
    KR_GPU_MODULE_BUILD_PATH="$<TARGET_FILE:kr_gpu_hip>"
    KR_GPU_MODULE_INSTALL_REL="${_kr_module_rel}"
    KR_GPU_TARGETS="${_kr_hip_targets}")
target_link_libraries(kr_gpu PUBLIC ${CMAKE_DL_LIBS})
