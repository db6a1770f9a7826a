#!/usr/bin/env bash
# The main job: set up, build, and replay the bundled default cases
# (cases/samples/) through every kernel model and reference.  Prints the
# results table and writes the report directory (default: kreplay-out/samples).
#   scripts/main.sh [REPORT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build -DKREPLAY_TESTS=OFF
out=${1:-kreplay-out/samples}
exec build/kreplay replay cases/samples -o "$out"
