#!/usr/bin/env bash
# Configures and builds kreplay into a build directory (default: build/).
# Quiet on success; on failure prints the build log.
#   scripts/build.sh [BUILD_DIR] [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true
mkdir -p "$build_dir"
log="$build_dir/build.log"
if ! { cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" &&
       cmake --build "$build_dir" -j"$(nproc)"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "build: failed (log: $log)" >&2
    exit 1
fi
