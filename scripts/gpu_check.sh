#!/usr/bin/env bash
# One call on a GPU machine, within GPU_CHECK_DEADLINE_S (default 570 s): build with
# the CUDA backend, run the GPU tests, and print the GPU worker's benchmark table.
# Every section runs under its own time limit (what is left of the deadline, capped);
# one that fails or runs out prints what it has and the next goes on; the table and a
# summary come last, whatever happened.
#
#   scripts/gpu_check.sh [BUILD_DIR]        (default build-gpu)
#
# Sections, in order (GPU_CHECK_<NAME>=0 skips one):
#   BUILD    configure and build what the rest needs (-j$(nproc))
#   TESTS    the GPU tests: SIMT kernels vs their models (the tiled w4a8.perblock
#            included), faults, the GPU references, GPU plugins (correct, segfault,
#            hang, out-of-bounds), the GPU run's verdicts against the CPU path's
#   SWEEP    the eight-case sweep (synth --shape 17408x5120 and 5120x8704, --m
#            1,64,512,4096; replay --kernels w4a8.perblock --no-recorded, both
#            references, one process): the CPU path, --device gpu, and the torch peer
#            (kernels/gpu/bench/torch_peer.py), per case and whole process
#   LAUNCH   the overhead of one launch of an empty GPU plugin
#   GATE     gate cases/suites/default.yaml on the CPU path and with --device gpu:
#            times, UNSUPPORTED rows, verdicts compared row by row; then, time
#            permitting, --device gpu with two workers on each GPU
#   REAL     scripts/real_kernels.py over every case and real kernel (GPU_CHECK_REAL_M)
#   extras, off unless asked: GPU_CHECK_PARTS=1 (test_gpu's parts over every GPU through
#   ctest resource groups), GPU_CHECK_MATRIX=1 (test_gpu's matrix-unit table),
#   GPU_CHECK_BENCH=1 (kr_gpu_bench), GPU_CHECK_GRAPH=1 (the capture hook under CUDA graphs)
# Also: GPU_CHECK_SWEEP_M=1,64,512,4096 (the sweep's M), GPU_CHECK_REAL_M="1 64 512 4096",
# GPU_CHECK_GPUS=LIST (the GPU gate's --gpus).
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
deadline=$(( t0 + ${GPU_CHECK_DEADLINE_S:-570} ))
declare -A result   # section -> one line for the summary
kreplay="$build_dir/kreplay"

# Seconds a section may take: what is left of the deadline, at most $1.
budget() {
    local left=$(( deadline - $(date +%s) ))
    (( left > $1 )) && left=$1
    echo $(( left > 5 ? left : 5 ))
}
enabled() { local v="GPU_CHECK_$1"; [[ "${!v:-${2:-1}}" == "1" ]]; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b - a}'; }

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
nvcc --version 2>&1 | tail -1
echo "  $(nproc) CPU cores; $(gcc --version | head -1); $(cmake --version | head -1)"

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
targets=(kreplay kr_plugin_python kr_plugin_gpu_w4a8 kr_plugin_gpu_segv kr_plugin_gpu_hang
         kr_plugin_gpu_oob kr_plugin_gpu_empty test_gpu test_gpu_ref test_gpu_plugin)
enabled BENCH 0 && targets+=(kr_gpu_bench)
if enabled BUILD; then
    echo "== build (KREPLAY_GPU=CUDA)"
    tb=$(now)
    if timeout "$(budget 330)" bash -c "cmake -S . -B '$build_dir' -DKREPLAY_GPU=CUDA -DCMAKE_BUILD_TYPE=Release \
            ${KREPLAY_CUDA_ARCH:+-DCMAKE_CUDA_ARCHITECTURES=$KREPLAY_CUDA_ARCH} &&
            cmake --build '$build_dir' -j$(nproc) --target ${targets[*]}" >"$logs/build.log" 2>&1; then
        result[build]="built in $(elapsed "$tb") s"
    else
        tail -40 "$logs/build.log"
        echo "gpu_check: build failed or ran out of time (log: $logs/build.log)" >&2
        result[build]="FAILED after $(elapsed "$tb") s (log: $logs/build.log)"
    fi
    echo "  ${result[build]}"
fi
if [[ ! -x "$kreplay" ]]; then
    echo "gpu_check: no $kreplay: nothing more to run" >&2
    exit 1
fi
"$kreplay" --version | sed 's/^/  /'

# ---- the GPU tests ----
if enabled TESTS; then
    echo "== GPU tests"
    tt=$(now)
    ( cd "$build_dir" && timeout "$(budget 200)" ctest -R 'test_gpu_(simt|samples|faults)$|test_gpu_ref|test_gpu_plugin' \
          -j 5 --timeout 190 --output-on-failure ) >"$logs/test_gpu.log" 2>&1
    rc=$?
    grep -E "Test +#|tests passed|tests failed" "$logs/test_gpu.log" | sed 's/^/  /'
    sed 's/^[0-9]*: //' "$logs/test_gpu.log" | grep -E "DIFFER|MISMATCH|FAIL|ERROR" | head -20 | sed 's/^/  /'
    pairs=$(grep -c "bit-identical (max" "$logs/test_gpu.log" || true)
    result[tests]="exit $rc in $(elapsed "$tt") s; SIMT GEMM kernel/case pairs bit-exact: $pairs (log: $logs/test_gpu.log)"
fi

sweep_dir=$(mktemp -d)
trap 'rm -rf "$sweep_dir"' EXIT

# ---- the eight-case sweep: CPU path, --device gpu, torch peer ----
if enabled SWEEP; then
    echo "== sweep: replay --kernels w4a8.perblock --no-recorded (both references), one process"
    cap=$(budget 200)
    ts=$(now)
    "$kreplay" synth --shape 17408x5120,5120x8704 --m "${GPU_CHECK_SWEEP_M:-1,64,512,4096}" \
        --out "$sweep_dir/cases" >/dev/null 2>&1
    ls "$sweep_dir"/cases/*.h5 | awk -F_M '{split($NF, a, "_"); print a[1], $0}' | sort -k1,1n -s |
        awk '{print $2}' > "$sweep_dir/cases.txt"
    mapfile -t cases < "$sweep_dir/cases.txt"
    run_timed() {   # LABEL LOG CMD...: the wall time of CMD, its progress in LOG
        local label=$1 log=$2; shift 2
        rm -f "$log"
        local a; a=$(now)
        KREPLAY_PROGRESS_LOG="$log" timeout "$(( cap / 3 ))" "$@" >"$sweep_dir/$label.out" 2>"$sweep_dir/$label.err"
        echo "$? $(elapsed "$a")"
    }
    read -r rc_cpu wall_cpu <<<"$(run_timed cpu "$sweep_dir/cpu.log" "$kreplay" replay --kernels w4a8.perblock --no-recorded "${cases[@]}")"
    read -r rc_gpu wall_gpu <<<"$(run_timed gpu "$sweep_dir/gpu.log" "$kreplay" replay --device gpu --kernels w4a8.perblock --no-recorded "${cases[@]}")"
    KR_PEER_T0=$(date +%s.%N) timeout "$(( cap / 3 ))" python3 kernels/gpu/bench/torch_peer.py "${cases[@]}" \
        >"$sweep_dir/peer.out" 2>"$sweep_dir/peer.err"
    rc_peer=$?
    python3 scripts/gpu_check_report.py sweep "$sweep_dir/cases.txt" "$sweep_dir/cpu.log" "$sweep_dir/gpu.log" \
        "$sweep_dir/peer.out" "$wall_cpu" "$wall_gpu" | tee "$logs/sweep.txt"
    tail -1 "$sweep_dir/cpu.out" | sed 's/^/  cpu: /'
    tail -1 "$sweep_dir/gpu.out" | sed 's/^/  gpu: /'
    grep -E "MODEL_MISMATCH|ERROR|CRASHED|TIMEOUT" "$sweep_dir/gpu.out" | head -5 | cut -c1-220 | sed 's/^/  gpu: /'
    tail -3 "$sweep_dir/gpu.err" "$sweep_dir/peer.err" 2>/dev/null | sed 's/^/  /'
    result[sweep]="exit cpu $rc_cpu gpu $rc_gpu peer $rc_peer; $(grep '^SWEEP' "$logs/sweep.txt" | cut -c7-)"
fi

# ---- one launch of an empty GPU plugin ----
if enabled LAUNCH; then
    echo "== launch overhead: an empty GPU plugin (kernels/plugins/gpu, gpu.empty)"
    lib="$build_dir/plugins/libkr_plugin_gpu_empty.so"
    "$kreplay" synth --shape 64x256 --m 1 --out "$sweep_dir/tiny" >/dev/null 2>&1
    tiny=$(ls "$sweep_dir"/tiny/*.h5 | head -1)
    launches() {   # N: the wall seconds of a run of N launches in one request
        local a; a=$(now)
        timeout 60 "$kreplay" replay --device gpu --plugin "$lib" --kernels gpu.empty --refs exact --reruns "$1" \
            "$tiny" >/dev/null 2>>"$logs/launch.err"
        elapsed "$a"
    }
    w1=$(launches 1); w1b=$(launches 1); w201=$(launches 201)
    per=$(awk -v a="$w201" -v b="$w1b" 'BEGIN{printf "%.3f", (a - b) / 200 * 1000}')
    echo "  1 launch: ${w1} s and ${w1b} s (the whole process); 201 launches: ${w201} s"
    echo "  per launch: ${per} ms (target <= 5 ms)"
    result[launch]="empty GPU plugin: ${per} ms per launch; a 1-launch process ${w1b} s"
fi

# ---- the default suite's gate, CPU path and --device gpu ----
if enabled GATE; then
    echo "== gate cases/suites/default.yaml: CPU path, then --device gpu"
    cap=$(budget 150)
    gate_run() {   # DIR ARGS...: wall seconds and exit code
        local dir=$1; shift
        local a; a=$(now)
        timeout "$(( cap / 2 ))" "$kreplay" gate cases/suites/default.yaml -o "$dir" -q "$@" >"$dir.out" 2>&1
        echo "$? $(elapsed "$a")"
    }
    read -r rc_gc t_gc <<<"$(gate_run "$sweep_dir/gate_cpu")"
    read -r rc_gg t_gg <<<"$(gate_run "$sweep_dir/gate_gpu" --device gpu ${GPU_CHECK_GPUS:+--gpus $GPU_CHECK_GPUS})"
    head -2 "$sweep_dir/gate_cpu.out" | sed 's/^/  cpu: /'
    head -2 "$sweep_dir/gate_gpu.out" | sed 's/^/  gpu: /'
    echo "  wall: cpu ${t_gc} s (exit $rc_gc), --device gpu ${t_gg} s (exit $rc_gg)"
    if [[ -f "$sweep_dir/gate_cpu/results.json" && -f "$sweep_dir/gate_gpu/results.json" ]]; then
        python3 scripts/gpu_check_report.py gate "$sweep_dir/gate_cpu/results.json" \
            "$sweep_dir/gate_gpu/results.json" | tee "$logs/gate.txt" | sed 's/^/  /'
    fi
    result[gate]="cpu ${t_gc} s, gpu ${t_gg} s; $(grep '^GATE' "$logs/gate.txt" 2>/dev/null | cut -c6-)"
    # Two lanes on each GPU: the CPU models of the kernels without a twin run in both.
    twice=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | awk '{printf "%s%s,%s", (NR > 1 ? "," : ""), $1, $1}')
    if [[ -n "$twice" && -z "${GPU_CHECK_GPUS:-}" ]] && (( $(budget 150) > 60 )); then
        read -r rc_g2 t_g2 <<<"$(gate_run "$sweep_dir/gate_gpu2" --device gpu --gpus "$twice")"
        echo "  wall: --device gpu --gpus $twice ${t_g2} s (exit $rc_g2)"
        result[gate]+="; --gpus $twice ${t_g2} s"
    fi
fi

# ---- the real kernels against the models ----
if enabled REAL; then
    echo "== real kernels vs the models (scripts/real_kernels.py)"
    python3 -c 'import sys, torch, numpy; print("  python", sys.version.split()[0], "torch", torch.__version__,
        "cuda", torch.version.cuda, "numpy", numpy.__version__)' 2>&1 | tail -1
    python3 -c 'import triton; print("  triton", triton.__version__)' 2>&1 | tail -1
    cap=$(budget 200)
    tr=$(now)
    timeout "$cap" python3 scripts/real_kernels.py --kreplay "$kreplay" --out "$logs/real" \
        --cases-dir "$sweep_dir/real" --m "$(echo ${GPU_CHECK_REAL_M:-1 64 512 4096} | tr ' ' ',')" \
        --budget-s "$(( cap - 15 ))" --jobs 3 >"$logs/real_kernels.txt" 2>&1
    rc=$?
    grep -v '^  \[' "$logs/real_kernels.txt" | tail -45
    grep '^  \[' "$logs/real_kernels.txt" | sed 's/^/ /'
    result[real]="exit $rc in $(elapsed "$tr") s; $(grep '^real_kernels: [0-9]* rows' "$logs/real_kernels.txt" | tail -1)"
fi

# ---- extras ----
if enabled PARTS 0; then
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    echo "== ctest -L gpu-part -j $ngpu with a resource spec ($ngpu GPU(s))"
    scripts/gpu_resources.sh "$build_dir/gpu_resources.json"
    ( cd "$build_dir" && KREPLAY_GPU_LEDGER="$logs/gpu_ledger.txt" timeout "$(budget 300)" \
          ctest -L gpu-part -j "$ngpu" --resource-spec-file gpu_resources.json --timeout 600 ) \
        >"$logs/test_gpu_parts.log" 2>&1
    result[parts]="exit $?"
    grep -E "Test +#|tests passed" "$logs/test_gpu_parts.log"
fi
if enabled MATRIX 0; then
    echo "== test_gpu --part matrix (the matrix units, measured)"
    timeout "$(budget 300)" "$build_dir/tests/test_gpu" --part matrix >"$logs/test_gpu_matrix.log" 2>&1
    result[matrix]="exit $?"
    grep "MMA:" "$logs/test_gpu_matrix.log" | tail -9
fi
if enabled BENCH 0; then
    echo "== kr_gpu_bench"
    timeout "$(budget 300)" "$build_dir/kr_gpu_bench" >"$logs/bench.log" 2>&1
    result[bench]="exit $?"
    sed -n '/^kernel /,/^targets/p' "$logs/bench.log"
fi
if enabled GRAPH 0; then
    echo "== capture under CUDA graphs (scripts/capture/graph_demo.py)"
    timeout "$(budget 300)" python3 scripts/capture/graph_demo.py --out "$logs/graph" \
        --kreplay "$kreplay" >"$logs/graph_demo.txt" 2>&1
    result[graph]="exit $?"
    grep -v '^\[kreplay.capture\] dumped' "$logs/graph_demo.txt" | tail -20
    rm -rf "$logs/graph"
fi

echo "== summary ($(( $(date +%s) - t0 )) s, deadline ${GPU_CHECK_DEADLINE_S:-570} s)"
for s in build tests sweep launch gate real parts matrix bench graph; do
    [[ -n "${result[$s]:-}" ]] && printf '%-8s %s\n' "$s" "${result[$s]}"
done
[[ "${result[build]:-}" != FAILED* ]]
