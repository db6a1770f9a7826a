#!/usr/bin/env bash
# Sets up, builds with warnings as errors, and runs every test under ctest
# except those labelled slow (.ci/run runs those after this).  Then the tests
# labelled blas-bits, which compare reference-derived numbers exactly, run
# again under each other OpenBLAS core this CPU can run (scripts/blas_cores.sh),
# unless the environment already chose one with OPENBLAS_CORETYPE.
#   scripts/test.sh                 the normal build (build-test/)
#   KREPLAY_SANITIZE=1 scripts/test.sh   the same under ASan + UBSan (build-asan/)
#   KREPLAY_CTEST_ARGS="..."        replaces the ctest selection (default: -LE slow)
#   KREPLAY_BLAS_CORES="Haswell"    the cores for the blas-bits runs ("none": skip them)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
if [[ "${KREPLAY_SANITIZE:-0}" == "1" ]]; then
    build_dir=build-asan
    scripts/build.sh "$build_dir" -DKREPLAY_WERROR=ON -DKREPLAY_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
else
    build_dir=build-test
    scripts/build.sh "$build_dir" -DKREPLAY_WERROR=ON
fi
cores=${KREPLAY_BLAS_CORES:-$(scripts/blas_cores.sh)}
[[ "$cores" == "none" ]] && cores=""
cd "$build_dir"
# --no-tests=error: a selection that matches no test fails, never passes.
# shellcheck disable=SC2086
ctest --output-on-failure --no-tests=error -j"$(nproc)" ${KREPLAY_CTEST_ARGS:--LE slow}
if [[ -n "${OPENBLAS_CORETYPE:-}" ]]; then
    echo "test.sh: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE is set; the tests ran on that core only"
    exit 0
fi
for core in $cores; do
    echo "== tests labelled blas-bits under OPENBLAS_CORETYPE=$core"
    OPENBLAS_CORETYPE=$core ctest --output-on-failure --no-tests=error -j"$(nproc)" -L blas-bits
done
