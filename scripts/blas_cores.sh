#!/usr/bin/env bash
# Prints the OpenBLAS cores (OPENBLAS_CORETYPE values) whose instructions this
# CPU has, one per line, oldest first: Prescott (SSE3), Haswell (AVX2 + FMA),
# SkylakeX (AVX-512 F, CD, BW, DQ and VL).  Nothing on a CPU that is not x86-64.
set -euo pipefail
[[ "$(uname -m)" == "x86_64" ]] || exit 0
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
if has pni; then echo Prescott; fi
if has avx2 fma; then echo Haswell; fi
if has avx512f avx512cd avx512bw avx512dq avx512vl; then echo SkylakeX; fi
