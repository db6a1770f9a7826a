#!/usr/bin/env bash
# CI: the ROCm build with Debian's HIP (hipcc, libamdhip64-dev: ROCm 5.2).
#   scripts/ci_hip_build.sh [BUILD_DIR]        (default: build-hip)
# Installs the two packages, builds kreplay and the GPU tests with
# -DKREPLAY_GPU=HIP -DKREPLAY_WERROR=ON (device code for gfx1030: ROCm 5.2's
# clang 15 has no gfx1201, which the gfx1201 compile test covers with
# clang-19), then checks that
#   - 'kreplay --version' names the HIP backend and its runtime,
#   - on a machine without an AMD GPU (no /dev/kfd), 'kreplay replay --device
#     gpu' says "no ROCm device" and exits 2,
#   - kreplay does not load ROCm until a GPU call: no libamdhip64 among its
#     libraries, and with the GPU module unreachable a CPU replay still runs
#     while '--device gpu' names the module it could not open;
#   - the GPU tests (ctest -L gpu) pass or skip; without a device they skip;
#   - test_gpu_backend_info (the version line and the no-device message).
# Prints the time it took.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
build=${1:-build-hip}
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq hipcc libamdhip64-dev >/dev/null
scripts/setup.sh --tests
mkdir -p "$build"
if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKREPLAY_WERROR=ON -DKREPLAY_GPU=HIP &&
       cmake --build "$build" -j"$(nproc)" --target kreplay test_gpu test_gpu_ref test_gpu_plugin test_gpu_backend_info; } >"$build/build.log" 2>&1; then
    cat "$build/build.log" >&2
    echo "ci_hip_build: the HIP build failed (log: $build/build.log)" >&2
    exit 1
fi
grep -m1 "kreplay HIP:" "$build/build.log" || true
version=$("$build/kreplay" --version)
echo "$version"
grep -q "^GPU backend: HIP (runtime " <<<"$version" || { echo "ci_hip_build: --version does not name the HIP runtime" >&2; exit 1; }
if [[ ! -e /dev/kfd ]]; then
    rc=0
    err=$("$build/kreplay" replay --device gpu cases/samples/moe_gate_N256_K2048_M8.h5 2>&1 >/dev/null) || rc=$?
    echo "without a device: exit $rc: $err"
    if [[ $rc != 2 ]] || ! grep -q "no ROCm device" <<<"$err"; then
        echo "ci_hip_build: expected exit 2 and 'no ROCm device'" >&2
        exit 1
    fi
fi
if readelf -d "$build/kreplay" | grep -q "NEEDED.*amdhip"; then
    echo "ci_hip_build: kreplay links libamdhip64 (it must open the GPU module on its first GPU call)" >&2
    exit 1
fi
sample=cases/samples/moe_gate_N256_K2048_M8.h5
KREPLAY_GPU_MODULE=/nonexistent "$build/kreplay" replay --kernels w4a8.perblock "$sample" >/dev/null ||
    { echo "ci_hip_build: a CPU replay failed without the GPU module" >&2; exit 1; }
rc=0
err=$(KREPLAY_GPU_MODULE=/nonexistent "$build/kreplay" replay --device gpu "$sample" 2>&1 >/dev/null) || rc=$?
echo "without the GPU module: exit $rc: $err"
if [[ $rc != 2 ]] || ! grep -q "KREPLAY_GPU_MODULE=/nonexistent" <<<"$err"; then
    echo "ci_hip_build: expected exit 2 naming the missing GPU module" >&2
    exit 1
fi
(cd "$build" && ctest --output-on-failure -L gpu && ctest --output-on-failure -R test_gpu_backend_info)
echo "ci_hip_build: PASS in $(($(date +%s) - t0)) s"
