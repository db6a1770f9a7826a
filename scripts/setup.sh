#!/usr/bin/env bash
# Installs what kreplay needs to build, run and test on Debian or Ubuntu.
# Idempotent and quiet: prints nothing when everything is already there.
#   scripts/setup.sh            build and run dependencies
#   scripts/setup.sh --tests    also what the test suite needs
set -euo pipefail

packages=(build-essential cmake pkg-config libopenblas-dev libhdf5-dev hdf5-tools
          gnuplot-nox libyaml-dev libjansson-dev libzip-dev)
if [[ "${1:-}" == "--tests" ]]; then
    # clang-19 + lld-19: the gfx1201 device-code compile test (tests/test_gfx1201_compile.c)
    # chromium: the report page checked in a headless browser (tests/test_browser.c)
    # python3-torch (CPU): real torch.save dumps and the Python kernels (test_capture_hook,
    # test_py_kernel)
    # clang + libclang-rt-14-dev: libFuzzer for the fuzz targets (scripts/fuzz.sh)
    # python3-pandas python3-venv: the Python package test (tests/test_python_package.c)
    # python3-yaml: the CI examples check (tests/test_ci_examples.c)
    packages+=(libcmocka-dev python3-h5py python3-numpy python3-torch python3-pandas python3-venv python3-yaml clang-19 lld-19 chromium
               clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 2; }
    sudo=(sudo)
fi
echo "setup: installing ${missing[*]}" >&2
"${sudo[@]}" apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
