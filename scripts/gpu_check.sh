#!/usr/bin/env bash
# One call on a GPU machine: build from source with the CUDA backend, run the
# gpu-labelled tests (SIMT kernels vs their CPU models, fault kernels, the
# matrix-unit measurement) and the benchmark, and print a short table last.
#
#   scripts/gpu_check.sh [BUILD_DIR]        (default build-gpu)
#   GPU_CHECK_BENCH=0      skip the GPU benchmark
#   GPU_CHECK_CPU_BENCH=1  also run scripts/bench.sh (the CPU benchmark) there
#   GPU_CHECK_E2E=0        skip the end-to-end table (CPU path vs --device gpu)
#   GPU_CHECK_E2E_M="1 64 512 4096"  the M values of its production sweep
#   GPU_CHECK_REAL=0       skip the real kernels vs the models (scripts/real_kernels.py)
#   GPU_CHECK_REAL_M="1 64 512 4096" / _BUDGET_S=300 / _JOBS=4   its sweep, time and parallelism
#   GPU_CHECK_GRAPH=0      skip the capture hook under CUDA graphs (scripts/capture/graph_demo.py)
#
# The machine needs gcc, cmake, nvcc, pkg-config, OpenBLAS and HDF5.  Missing
# jansson / cmocka / libyaml development files are taken from Debian .deb
# files in .debs/ (apt-get download libjansson-dev libjansson4 libcmocka-dev
# libcmocka0 libyaml-dev libyaml-0-2), unpacked with dpkg -x into a private
# prefix: nothing is installed system-wide.
# Logs go to $OUT when set (an output folder), else BUILD_DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build-gpu}
logs=${OUT:-$build_dir}
mkdir -p "$build_dir" "$logs"
export PATH="$PATH:/usr/local/cuda/bin"
t0=$(date +%s)

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1 || true
nvcc --version 2>&1 | tail -1
gcc --version | head -1
cmake --version | head -1
for m in openblas hdf5 jansson cmocka yaml-0.1 libzip; do
    printf '  pkg-config %-10s %s\n' "$m" "$(pkg-config --modversion "$m" 2>/dev/null || echo MISSING)"
done
ls /usr/include/cblas.h /usr/include/x86_64-linux-gnu/cblas.h /usr/include/hdf5.h \
   /usr/include/hdf5/serial/hdf5.h 2>/dev/null | sed 's/^/  /'

# ---- dependencies the machine lacks, from carried .deb files ----
missing=0
for m in jansson cmocka yaml-0.1 libzip; do pkg-config --exists "$m" || missing=1; done
if [[ $missing == 1 ]]; then
    if ! ls .debs/*.deb >/dev/null 2>&1; then
        echo "gpu_check: jansson/cmocka/libyaml missing and no .debs/ to unpack" >&2
        exit 2
    fi
    prefix=${TMPDIR:-/tmp}/kreplay-deps
    rm -rf "$prefix" && mkdir -p "$prefix"
    for f in .debs/*.deb; do dpkg -x "$f" "$prefix"; done
    # The .pc files name /usr; point them at the prefix.
    for pc in "$prefix"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
        sed -i "s|/usr|$prefix/usr|g" "$pc"
    done
    export PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "  unpacked $(ls .debs/*.deb | wc -l) .deb files into $prefix"
fi

# ---- build ----
echo "== build (KREPLAY_GPU=CUDA)"
if ! { cmake -S . -B "$build_dir" -DKREPLAY_GPU=CUDA -DCMAKE_BUILD_TYPE=Release \
           ${KREPLAY_CUDA_ARCH:+-DCMAKE_CUDA_ARCHITECTURES=$KREPLAY_CUDA_ARCH} &&
       cmake --build "$build_dir" -j"$(nproc)"; } >"$logs/build.log" 2>&1; then
    tail -60 "$logs/build.log"
    echo "gpu_check: build failed (log: $logs/build.log)" >&2
    exit 1
fi
echo "  built in $(( $(date +%s) - t0 )) s"
mma_obj=$(find "$build_dir" -name 'kr_gpu_mma.hip.o' | head -1)
if [[ -n "$mma_obj" ]] && command -v cuobjdump >/dev/null; then
    echo "  kr_gpu_mma SASS: $(cuobjdump --dump-sass "$mma_obj" | grep -oE '\b[A-Z]MMA[.A-Z0-9]*' | sort | uniq -c | tr '\n' ' ')"
fi

# ---- real kernels against the models, and the capture hook under CUDA graphs ----
# First after the build: what they print is kept even if a later section runs out of time.
real_rc=0 graph_rc=0
if [[ "${GPU_CHECK_REAL:-1}" == "1" || "${GPU_CHECK_GRAPH:-1}" == "1" ]]; then
    python3 -c 'import sys, torch, numpy; print("  python", sys.version.split()[0], "torch", torch.__version__,
        "cuda", torch.version.cuda, "numpy", numpy.__version__)' 2>&1 | tail -1
    python3 -c 'import triton; print("  triton", triton.__version__)' 2>&1 | tail -1
fi
if [[ "${GPU_CHECK_REAL:-1}" == "1" ]]; then
    echo "== real kernels vs the models (scripts/real_kernels.py)"
    real_cases=$(mktemp -d)
    python3 scripts/real_kernels.py --kreplay "$build_dir/kreplay" --out "$logs/real" \
        --cases-dir "$real_cases" --m "$(echo ${GPU_CHECK_REAL_M:-1 64 512 4096} | tr ' ' ',')" \
        --budget-s "${GPU_CHECK_REAL_BUDGET_S:-300}" --jobs "${GPU_CHECK_REAL_JOBS:-4}" \
        >"$logs/real_kernels.txt" 2>&1
    real_rc=$?
    grep -v '^  \[' "$logs/real_kernels.txt"
    rm -rf "$real_cases"
fi
if [[ "${GPU_CHECK_GRAPH:-1}" == "1" ]]; then
    echo "== capture under CUDA graphs (scripts/capture/graph_demo.py)"
    timeout 300 python3 scripts/capture/graph_demo.py --out "$logs/graph" \
        --kreplay "$build_dir/kreplay" >"$logs/graph_demo.txt" 2>&1
    graph_rc=$?
    grep -v '^\[kreplay.capture\] dumped' "$logs/graph_demo.txt"
    rm -rf "$logs/graph"
fi

# ---- tests ----
echo "== tests (ctest -L 'gpu|gfx1201')"
( cd "$build_dir" && ctest -L 'gpu|gfx1201' -LE gpu-part -V --timeout 900 ) >"$logs/test_gpu.log" 2>&1
test_rc=$?

# ---- ctest resource groups: the GPU test parts spread over every GPU ----
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
echo "== ctest -L gpu-part -j $ngpu with a resource spec ($ngpu GPU(s))"
scripts/gpu_resources.sh "$build_dir/gpu_resources.json"
rm -f "$logs/gpu_ledger.txt"
( cd "$build_dir" && KREPLAY_GPU_LEDGER="$logs/gpu_ledger.txt" \
      ctest -L gpu-part -j "$ngpu" --resource-spec-file gpu_resources.json --timeout 900 ) \
    >"$logs/test_gpu_parts.log" 2>&1
parts_rc=$?
grep -E "Test +#|tests passed" "$logs/test_gpu_parts.log"
cat "$logs/gpu_ledger.txt" 2>/dev/null
# Every part ran on the GPU it was given, and (with several GPUs) more than one GPU was used.
mismatched=$(awk '{split($2,a,"="); split($3,b,"="); if (a[2] != b[2]) n++} END {print n+0}' "$logs/gpu_ledger.txt" 2>/dev/null || echo 1)
used=$(awk '{print $3}' "$logs/gpu_ledger.txt" 2>/dev/null | sort -u | wc -l)
echo "  parts on a GPU they were not given: $mismatched; distinct GPUs used: $used of $ngpu"

# ---- kreplay replay --device gpu on the samples ----
echo "== kreplay replay --device gpu cases/samples"
"$build_dir/kreplay" replay --device gpu --refs exact cases/samples >"$logs/replay_gpu.txt" 2>&1
replay_rc=$?
grep -E "model:|rows:" "$logs/replay_gpu.txt" | awk '{print $5, $6, $7, $14}' | sort | uniq -c | tail -30
tail -1 "$logs/replay_gpu.txt"
sed 's/^[0-9]*: //' "$logs/test_gpu.log" |
    grep -E "test_gpu:|bit-identical|DIFFER|ERROR|FAIL|fault |MMA:|pairs|Passed|Skipped|Failed|\*\*\*" | tail -150

# ---- end to end: the CPU path against --device gpu (kernels and references on the GPU) ----
if [[ "${GPU_CHECK_E2E:-1}" == "1" ]]; then
    echo "== end to end: kreplay replay, CPU path vs --device gpu ($(nproc) CPU cores)"
    e2e=$(mktemp -d)
    kernels='w4a8.perblock,w4a8.folded,w4a4.aiter'
    "$build_dir/kreplay" synth --shape production --m "$(echo ${GPU_CHECK_E2E_M:-1 64 512 4096} | tr ' ' ',')" \
        --out "$e2e/sweep" >/dev/null 2>&1
    wall() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; local rc=$?; t1=$(date +%s.%N)
             echo "$(echo "$t1 $t0" | awk '{printf "%.2f", $1 - $2}') $rc"; }
    printf '%-44s %5s %9s %9s %7s\n' "case" "M" "cpu s" "gpu s" "cpu/gpu"
    for f in "$e2e"/sweep/*.h5; do
        read -r tc rcc <<<"$(wall "$build_dir/kreplay" replay --kernels "$kernels" --no-recorded "$f")"
        read -r tg rcg <<<"$(wall "$build_dir/kreplay" replay --device gpu --kernels "$kernels" --no-recorded "$f")"
        m=$(basename "$f" | grep -oE '_M[0-9]+' | tr -d _M)
        printf '%-44s %5s %9s %9s %7s  (exit %s/%s)\n' "$(basename "$f" .h5 | cut -c1-44)" "$m" "$tc" "$tg" \
            "$(awk -v a="$tc" -v b="$tg" 'BEGIN{printf "%.2f", a/b}')" "$rcc" "$rcg"
    done | tee "$logs/e2e.txt"
    n=$(ls cases/samples/*.h5 | wc -l)
    read -r tc rcc <<<"$(wall "$build_dir/kreplay" replay cases/samples)"
    read -r tg rcg <<<"$(wall "$build_dir/kreplay" replay --device gpu cases/samples)"
    echo "the $n samples, every kernel: cpu ${tc} s (exit $rcc), --device gpu ${tg} s (exit $rcg);" \
         "$(awk -v n="$n" -v a="$tc" -v b="$tg" 'BEGIN{printf "%.1f vs %.1f cases/s", n/a, n/b}')" |
        tee -a "$logs/e2e.txt"
    rm -rf "$e2e"
fi

# ---- benchmark ----
bench_rc=0
if [[ "${GPU_CHECK_BENCH:-1}" == "1" ]]; then
    echo "== benchmark"
    "$build_dir/kr_gpu_bench" >"$logs/bench.log" 2>&1
    bench_rc=$?
    cat "$logs/bench.log"
fi

# ---- the CPU benchmark on this host (scripts/bench.sh, same build) ----
if [[ "${GPU_CHECK_CPU_BENCH:-0}" == "1" ]]; then
    echo "== CPU benchmark (scripts/bench.sh)"
    KR_BENCH_BUILD="$build_dir" scripts/bench.sh >"$logs/cpu_bench.txt" 2>"$logs/cpu_bench.err"
    echo "  exit $?"
    tail -20 "$logs/cpu_bench.txt"
fi

if [[ "${KR_NCU:-0}" == "1" ]] && command -v ncu >/dev/null; then
    echo "== ncu (decode kernels)"
    for rt in 1 8 16; do
        ncu --clock-control none --kernel-name-base demangled -k "regex:kr_k_w4a8_decode<$rt>" \
            --launch-skip 6 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
            --section Occupancy --section LaunchStats "$build_dir/kr_gpu_bench" --quick \
            >"$logs/ncu_rt$rt.txt" 2>&1
        grep -E "decode<|Duration|DRAM Throughput|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Block Size|Grid Size" \
            "$logs/ncu_rt$rt.txt" | head -20
    done
fi

echo "== summary ($(( $(date +%s) - t0 )) s)"
pairs=$(grep -c "bit-identical (max" "$logs/test_gpu.log" || true)
quant=$(grep -c "codes bit-identical" "$logs/test_gpu.log" || true)
printf '%-40s %s\n' "SIMT GEMM kernel/case pairs bit-exact" "$pairs"
printf '%-40s %s\n' "quantizer/case pairs bit-exact" "$quant"
sed 's/^[0-9]*: //' "$logs/test_gpu.log" | grep -E "^ *fault (race|oob|unwritten)" |
    awk '{printf "%-40s %s\n", "fault " $2, $4}'
printf '%-40s %s\n' "ctest -L gpu|gfx1201 exit" "$test_rc"
printf '%-40s %s\n' "bench exit" "$bench_rc"
printf '%-40s %s\n' "ctest -L gpu-part (resource groups) exit" "$parts_rc"
printf '%-40s %s\n' "replay --device gpu exit" "$replay_rc"
printf '%-40s %s\n' "real kernels vs models exit" "$real_rc"
printf '%-40s %s\n' "capture under CUDA graphs exit" "$graph_rc"
sed 's/^[0-9]*: //' "$logs/test_gpu.log" | grep "MMA:" | tail -9
sed -n '/^kernel /,/^targets/p' "$logs/bench.log"
[[ $test_rc == 0 && $bench_rc == 0 && $parts_rc == 0 && $mismatched == 0 ]]
