# kr_plugin_library(TARGET SOURCE [LIBS...]): one dlopen-only (MODULE) plugin
# built from SOURCE as <build>/plugins/lib<TARGET>.so, seeing kernels/plugin.h
# and kernels/plugin_util.h and nothing else of kreplay, exporting only what
# it marks KREPLAY_PLUGIN_EXPORT, compiled without FMA contraction (kreplay
# compares bits) and linked with libm and LIBS.  The example plugins and the
# bug corpus (tests/bugs) are all built this way.
function(kr_plugin_library target source)
  add_library(${target} MODULE ${source})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/kernels)
  target_compile_options(${target} PRIVATE -ffp-contract=off)
  set_target_properties(${target} PROPERTIES
      PREFIX "lib"
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/plugins
      C_VISIBILITY_PRESET hidden)
  if(MATH_LIBRARY)
    target_link_libraries(${target} PRIVATE ${MATH_LIBRARY})
  endif()
  if(ARGN)
    target_link_libraries(${target} PRIVATE ${ARGN})
  endif()
endfunction()
