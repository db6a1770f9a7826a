# `ctest` from the source tree's root (the README's `ctest -L nightly`): the
# tests of the build directory build/, which scripts/main.sh and the README
# build.  Without one, a failing test says what to do, where ctest would
# otherwise print "No tests were found!!!" and exit 0, which a CI script
# reads as a pass.  Another build directory: `ctest --test-dir DIR`, or run
# ctest inside it.
if(EXISTS "build/CTestTestfile.cmake")   # ctest reads this file in its own directory
  subdirs("build")
else()
  set(say "no build/ here: build first (scripts/build.sh, or cmake -S . -B build && cmake --build build),")
  string(APPEND say " or run ctest in your build directory (ctest --test-dir DIR)")
  add_test(no_build_directory /bin/sh -c "echo '${say}' >&2; exit 1")
  set_tests_properties(no_build_directory PROPERTIES LABELS "nightly;gate;unit;slow")
endif()
