#!/usr/bin/env bash
# One call on a GPU machine, within GPU_CHECK_DEADLINE_S (default 570 s): build with
# the CUDA backend, run the GPU tests, and print the GPU worker's benchmark table.
# Every section runs under its own time limit (what is left of the deadline, capped);
# one that fails or runs out prints what it has and the next goes on.  Last, whatever
# happened: the benchmark table (each measurement beside its target, "met" / "MISSED")
# and a one-line summary per section.
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
#   LAUNCH   the overhead of one launch of an empty GPU plugin (1001 launches in one
#            request vs 1), and of one case of one launch (101 cases vs 1)
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
# Everything printed goes to stdout as it comes and, when $OUT is set (an output
# folder), to $OUT/gpu_check.txt as well; the logs of the sections are kept in
# BUILD_DIR/gpu_check_logs and, at the end, packed into $OUT/gpu_check_logs.tar.gz
# (two files in $OUT, whatever ran).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build_dir=${1:-build-gpu}
logs=$build_dir/gpu_check_logs
rm -rf "$logs"
mkdir -p "$build_dir" "$logs"
tee_pid=
if [[ -n "${OUT:-}" ]]; then
    mkdir -p "$OUT"
    exec > >(tee "$OUT/gpu_check.txt") 2>&1
    tee_pid=$!
fi
export PATH="$PATH:/usr/local/cuda/bin"
t0=$(date +%s)
deadline=$(( t0 + ${GPU_CHECK_DEADLINE_S:-570} ))
declare -A result   # section -> one line for the summary
table=()            # the benchmark table's rows, printed last
kreplay="$build_dir/kreplay"
sweep_dir=$(mktemp -d)

# Seconds a section may take: what is left of the deadline, at most $1.
budget() {
    local left=$(( deadline - $(date +%s) ))
    (( left > $1 )) && left=$1
    echo $(( left > 5 ? left : 5 ))
}
enabled() { local v="GPU_CHECK_$1"; [[ "${!v:-${2:-1}}" == "1" ]]; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b - a}'; }
# A row of the benchmark table: WHAT MEASURED [TARGET].
row() { table+=("$(printf '%-44s %-34s %s' "$1" "$2" "${3:-}")"); }
# The value of KEY in a "NAME key=value ..." line.
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
# "met" / "MISSED" for A <= B (numbers), "-" when either is missing.
# at_most unless the run it measures did not complete (OK: 1 when it did): a run that
# failed fast must not meet a time target.
met() { if [[ "$1" == 1 ]]; then at_most "$2" "$3"; else echo "- (the run did not complete)"; fi; }
at_most() { awk -v a="$1" -v b="$2" 'BEGIN{if (a == "" || b == "" || a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/) print "-"; else print (a + 0 <= b + 0 ? "met" : "MISSED")}'; }

# The table and the summary, whatever happened (also after an early exit).
finish() {
    echo "== benchmark table (${gpu_name:-no GPU seen}; $(nproc) CPU cores)"
    printf '%-44s %-34s %s\n' "what" "measured" "target"
    (( ${#table[@]} )) && printf '%s\n' "${table[@]}"
    echo "== summary ($(( $(date +%s) - t0 )) s, deadline ${GPU_CHECK_DEADLINE_S:-570} s)"
    for s in build tests sweep launch gate real parts matrix bench graph; do
        [[ -n "${result[$s]:-}" ]] && printf '%-8s %s\n' "$s" "${result[$s]}"
    done
    rm -rf "$sweep_dir"
    if [[ -n "${OUT:-}" ]]; then
        # At most 16 MiB comes back from $OUT: the real-kernel reports go first if too big.
        tar -czf "$OUT/gpu_check_logs.tar.gz" -C "$build_dir" gpu_check_logs 2>/dev/null
        if (( $(stat -c %s "$OUT/gpu_check_logs.tar.gz" 2>/dev/null || echo 0) > 15000000 )); then
            tar -czf "$OUT/gpu_check_logs.tar.gz" -C "$build_dir" --exclude gpu_check_logs/real gpu_check_logs
        fi
        exec >&- 2>&-
        [[ -n "$tee_pid" ]] && wait "$tee_pid" 2>/dev/null
    fi
    return 0
}
trap finish EXIT

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c |
           awk '{n = $1; $1 = ""; printf "%s%d x%s", (NR > 1 ? ", " : ""), n, $0}')
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
    for m in jansson cmocka yaml-0.1 libzip; do
        pkg-config --exists "$m" || echo "gpu_check: $m still missing after unpacking .debs/ (the build will fail)" >&2
    done
fi

# ---- build ----
targets=(kreplay kr_plugin_python kr_plugin_gpu_w4a8 kr_plugin_gpu_segv kr_plugin_gpu_hang
         kr_plugin_gpu_oob kr_plugin_gpu_empty test_gpu test_gpu_ref test_gpu_plugin)
enabled BENCH 0 && targets+=(kr_gpu_bench)
if enabled BUILD; then
    echo "== build (KREPLAY_GPU=CUDA)"
    tb=$(now)
    if timeout "$(budget 330)" bash -c "cmake -S . -B '$build_dir' -DKREPLAY_GPU=CUDA -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_CUDA_ARCHITECTURES=${KREPLAY_CUDA_ARCH:-90} &&
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
    # At most 200 s, and never so long that the benchmark below gets less than 270 s.
    tcap=$(budget 200); left=$(( deadline - $(date +%s) - 270 ))
    (( left < tcap )) && tcap=$(( left > 60 ? left : 60 ))
    ( cd "$build_dir" && timeout "$tcap" ctest -R 'test_gpu_(simt|samples|faults)$|test_gpu_ref|test_gpu_plugin' \
          -j 5 --timeout "$(( tcap - 10 ))" -V ) >"$logs/test_gpu.log" 2>&1
    rc=$?
    grep -E "Test +#|tests passed|tests failed" "$logs/test_gpu.log" | sed 's/^/  /'
    sed 's/^[0-9]*: //' "$logs/test_gpu.log" | grep -E "DIFFER|MISMATCH|FAIL|ERROR|skipped" | head -20 | sed 's/^/  /'
    pairs=$(grep -c "bit-identical (max" "$logs/test_gpu.log" || true)
    result[tests]="exit $rc in $(elapsed "$tt") s; SIMT GEMM kernel/case pairs bit-exact: $pairs (log: test_gpu.log)"
    # cmocka's line for one test of test_gpu_plugin: OK, FAILED, or not run.
    cmocka_result() {
        if grep -qE "\[ +OK \] $1\$" "$logs/test_gpu.log"; then echo OK
        elif grep -qE "\[ +FAILED +\] $1\$" "$logs/test_gpu.log"; then echo FAILED
        elif grep -q "test_gpu_plugin: skipped" "$logs/test_gpu.log"; then echo "skipped (no GPU?)"
        else echo "not run (log: test_gpu.log)"; fi
    }
    row "GPU plugin segv / hang / oob" "$(cmocka_result test_gpu_plugins_misbehaving)" \
        "CRASHED, TIMEOUT, OOB_WRITE; later rows unchanged"
    row "GPU plugin W4A8 bit-identical to its model" "$(cmocka_result test_gpu_plugin_bit_identical)"
    row "GPU run verdicts = CPU run (test_gpu_plugin)" "$(cmocka_result test_gpu_run_verdicts_equal_cpu)" \
        "every row's verdict equal"
fi

# ---- the eight-case sweep: CPU path, --device gpu, torch peer ----
if enabled SWEEP; then
    echo "== sweep: replay --kernels w4a8.perblock --no-recorded (both references), one process"
    cap=$(budget 200)
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
    for f in cpu gpu peer; do   # the last lines each wrote to stderr, if any
        [[ -s "$sweep_dir/$f.err" ]] && tail -n 3 "$sweep_dir/$f.err" | sed "s/^/  $f stderr: /"
    done
    sw=$(grep '^SWEEP' "$logs/sweep.txt")
    result[sweep]="exit cpu $rc_cpu gpu $rc_gpu peer $rc_peer; ${sw#SWEEP }"
    peer_warm=$(kv peer_warm "$sw")
    row "sweep: CPU path, process" "$(kv cpu_wall "$sw") s (exit $rc_cpu)"
    # Complete: exit 0 or 1 (failing rows) and the progress log past every case.
    ncases=$(grep -c . "$sweep_dir/cases.txt")
    nsteps=$(grep -c '^kreplay replay ' "$sweep_dir/gpu.log" 2>/dev/null)
    gpu_ok=$(( (rc_gpu == 0 || rc_gpu == 1) && ncases > 0 && ${nsteps:-0} > ncases ))
    row "sweep: --device gpu, process" "$(kv gpu_wall "$sw") s (exit $rc_gpu)" \
        "<= 3 s: $(met "$gpu_ok" "$(kv gpu_wall "$sw")" 3)"
    row "sweep: --device gpu, cases after start-up" "$(kv gpu_after_startup "$sw") s" \
        "<= 2 x peer warm: $(met "$gpu_ok" "$(kv gpu_after_startup "$sw")" "$(awk -v w="$peer_warm" 'BEGIN{if (w ~ /^[0-9.]+$/) print 2 * w}')")"
    row "sweep: torch peer, process / warm pass" "$(kv peer_process "$sw") s / $peer_warm s (exit $rc_peer)"
    row "sweep: per case and M" "the table under == sweep"
fi

# ---- one launch of an empty GPU plugin ----
if enabled LAUNCH; then
    echo "== launch overhead: an empty GPU plugin (kernels/plugins/gpu, gpu.empty)"
    lib="$build_dir/plugins/libkr_plugin_gpu_empty.so"
    "$kreplay" synth --shape 64x256 --m 1 --out "$sweep_dir/tiny" >/dev/null 2>&1
    tiny=$(ls "$sweep_dir"/tiny/*.h5 | head -1)
    launches() {   # N COPIES: the wall seconds of a run of N launches on each of COPIES cases
        local a; a=$(now)
        local files=(); for (( i = 0; i < $2; i++ )); do files+=("$tiny"); done
        timeout "$(budget 60)" "$kreplay" replay --json --device gpu --plugin "$lib" --kernels gpu.empty \
            --refs exact --reruns "$1" "${files[@]}" >"$sweep_dir/launch_$1_$2.json" 2>>"$logs/launch.err"
        elapsed "$a"
    }
    w1=$(launches 1 1); w1b=$(launches 1 1); w1001=$(launches 1001 1); w101c=$(launches 1 101)
    # The launches happened: gpu.empty's rows say so.
    rows_say() {   # FILE ROWS RERUNS: 1 when FILE has ROWS rows of gpu.empty, each of RERUNS launches
        python3 -c 'import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["results"] if r["kernel"] == "gpu.empty"]
print(int(len(rows) == int(sys.argv[2]) and all(r.get("reruns") == int(sys.argv[3]) for r in rows)))' \
            "$@" 2>/dev/null || echo 0
    }
    launch_ok=$(rows_say "$sweep_dir/launch_1001_1.json" 1 1001)
    case_ok=$(rows_say "$sweep_dir/launch_1_101.json" 101 "$(python3 -c 'import json, sys
print([r for r in json.load(open(sys.argv[1]))["results"] if r["kernel"] == "gpu.empty"][0].get("reruns"))' \
        "$sweep_dir/launch_1_1.json" 2>/dev/null)")
    # Differences of whole-process walls: the faster 1-launch process is the base
    # (an outlier start-up then makes the overhead look larger, never smaller).
    base=$(awk -v a="$w1" -v b="$w1b" 'BEGIN{print (a < b ? a : b)}')
    per=$(awk -v a="$w1001" -v b="$base" 'BEGIN{printf "%.3f", (a - b) / 1000 * 1000}')
    per_case=$(awk -v a="$w101c" -v b="$base" 'BEGIN{printf "%.3f", (a - b) / 100 * 1000}')
    echo "  the runs' rows show their launches: 1001 in one request $( ((launch_ok)) && echo yes || echo NO)," \
         "101 cases $( ((case_ok)) && echo yes || echo NO)"
    echo "  1 launch: ${w1} s and ${w1b} s (the whole process); 1001 launches: ${w1001} s; 101 cases: ${w101c} s"
    echo "  per launch: ${per} ms (target <= 5 ms); per case of one launch (read, launch, R_exact, metrics): ${per_case} ms"
    grep -v '^$' "$logs/launch.err" 2>/dev/null | tail -3 | sed 's/^/  stderr: /'
    result[launch]="empty GPU plugin: ${per} ms per launch, ${per_case} ms per case; a 1-launch process ${w1b} s"
    row "empty GPU plugin, one launch" "${per} ms (1001 vs 1 launch)" "<= 5 ms: $(met "$launch_ok" "$per" 5)"
    row "empty GPU plugin, one case of one launch" "${per_case} ms (101 vs 1 case)" \
        "(read, request, launch, R_exact, metrics)"
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
    ga=$(grep '^GATE' "$logs/gate.txt" 2>/dev/null)
    # Both gates complete (exit 0 or 1) and every CPU row in the GPU run.
    cpu_rows=$(kv cpu_rows "$ga"); missing_rows=$(kv missing "$ga")
    gate_ok=$(( (rc_gc == 0 || rc_gc == 1) && (rc_gg == 0 || rc_gg == 1) && ${cpu_rows:-0} > 0 &&
                ${missing_rows:-1} == 0 ))
    result[gate]="cpu ${t_gc} s, gpu ${t_gg} s; ${ga#GATE }"
    row "gate default.yaml: CPU path" "${t_gc} s (exit $rc_gc), $(kv cpu_unsupported "$ga") UNSUPPORTED"
    row "gate default.yaml: --device gpu" "${t_gg} s (exit $rc_gg), $(kv gpu_unsupported "$ga") UNSUPPORTED" \
        "faster than CPU: $(met "$gate_ok" "$t_gg" "$t_gc"); UNSUPPORTED <= CPU's: $(met "$gate_ok" "$(kv gpu_unsupported "$ga")" "$(kv cpu_unsupported "$ga")")"
    row "gate verdicts, GPU refs vs CPU path" "$(kv verdicts_differ "$ga") of $(kv cpu_rows "$ga") rows differ" \
        "0: $(met "$gate_ok" "$(kv verdicts_differ "$ga")" 0); rel_fro change $(kv rel_fro_change "$ga")"
    # Two lanes on each GPU: the CPU models of the kernels without a twin run in both.
    twice=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | awk '{printf "%s%s,%s", (NR > 1 ? "," : ""), $1, $1}')
    if [[ -n "$twice" && -z "${GPU_CHECK_GPUS:-}" ]] && (( deadline - $(date +%s) > 220 )); then
        read -r rc_g2 t_g2 <<<"$(gate_run "$sweep_dir/gate_gpu2" --device gpu --gpus "$twice")"
        echo "  wall: --device gpu --gpus $twice ${t_g2} s (exit $rc_g2)"
        result[gate]+="; --gpus $twice ${t_g2} s"
        g2=""
        if [[ -f "$sweep_dir/gate_gpu/results.json" && -f "$sweep_dir/gate_gpu2/results.json" ]]; then
            g2=$(python3 scripts/gpu_check_report.py gate "$sweep_dir/gate_gpu/results.json" \
                 "$sweep_dir/gate_gpu2/results.json" | grep '^GATE')
        fi
        row "gate default.yaml: --device gpu --gpus $twice" "${t_g2} s (exit $rc_g2)" \
            "rows as one worker's: $(kv verdicts_differ "$g2") verdicts differ, $(kv missing "$g2") missing"
    fi
fi

# ---- the real kernels against the models ----
if enabled REAL; then
    echo "== real kernels vs the models (scripts/real_kernels.py)"
    timeout 60 python3 -c 'import sys, torch, numpy, triton; print("  python", sys.version.split()[0], "torch",
        torch.__version__, "cuda", torch.version.cuda, "numpy", numpy.__version__, "triton", triton.__version__)' 2>&1 | tail -1
    cap=$(budget 200)
    tr=$(now)
    timeout "$cap" python3 scripts/real_kernels.py --kreplay "$kreplay" --out "$logs/real" \
        --cases-dir "$sweep_dir/real" --m "$(echo ${GPU_CHECK_REAL_M:-1 64 512 4096} | tr ' ' ',')" \
        --budget-s "$(( cap - 15 ))" --jobs 3 >"$logs/real_kernels.txt" 2>&1
    rc=$?
    grep -v '^  \[' "$logs/real_kernels.txt" | tail -45
    grep '^  \[' "$logs/real_kernels.txt" | sed 's/^/ /'
    t_real=$(elapsed "$tr")
    result[real]="exit $rc in $t_real s; $(grep '^real_kernels: [0-9]* rows' "$logs/real_kernels.txt" | tail -1)"
    # Complete: every launch ran, none with an error.
    real_ok=$(grep -cE '^real_kernels: [1-9][0-9]* rows, 0 with errors, 0 not run' "$logs/real_kernels.txt")
    row "real_kernels.py, all cases x real kernels" "$t_real s (exit $rc)" "< 120 s: $(met "$real_ok" "$t_real" 120)"
    row "  its rows" "$(grep '^real_kernels: [0-9]* rows' "$logs/real_kernels.txt" | tail -1 | cut -c15-)"
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

[[ "${result[build]:-}" != FAILED* ]]
