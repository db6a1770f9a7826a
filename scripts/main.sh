#!/usr/bin/env bash
# The main job: set up, build, and run the default suite (cases/suites/default.yaml:
# the bundled samples in cases/samples/ plus a small synthetic sweep) through
# every kernel model, reference and the default policy.  Prints the results
# table and writes the report directory (default: kreplay-out/default).
#   scripts/main.sh [REPORT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build -DKREPLAY_TESTS=OFF
out=${1:-kreplay-out/default}
exec build/kreplay gate cases/suites/default.yaml -o "$out"
