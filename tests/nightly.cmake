# The nightly gate under ctest: `ctest -L nightly` runs the default suite, one
# test per shape, discovered at test time from the built kreplay.  Included
# from the top-level CMakeLists.txt, so every build directory has it, with or
# without the unit tests (KREPLAY_TESTS=OFF, as scripts/main.sh builds).
set(KR_NIGHTLY_SUITE ${PROJECT_SOURCE_DIR}/cases/suites/default.yaml)
set(KR_NIGHTLY_DIR ${CMAKE_BINARY_DIR}/nightly)
configure_file(${PROJECT_SOURCE_DIR}/tests/nightly_tests.cmake.in ${CMAKE_BINARY_DIR}/nightly_tests.cmake.gen @ONLY)
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/nightly_tests.cmake INPUT ${CMAKE_BINARY_DIR}/nightly_tests.cmake.gen)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_BINARY_DIR}/nightly_tests.cmake)
