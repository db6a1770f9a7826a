#!/usr/bin/env bash
# Sets up, builds with warnings as errors, and runs every test under ctest.
#   scripts/test.sh                 the normal build (build-test/)
#   KREPLAY_SANITIZE=1 scripts/test.sh   the same under ASan + UBSan (build-asan/)
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
cd "$build_dir"
ctest --output-on-failure -j"$(nproc)" ${KREPLAY_CTEST_ARGS:-}
