#!/bin/sh
# The CPU benchmark: builds Release (build-bench/) and measures, in this one
# run, every ratio; prints ONE table last.  See tests/bench/README.md.
#   scripts/bench.sh            all items (about 2-3 minutes on 2 cores)
# Needs: cmake, OpenBLAS/HDF5 dev (scripts/setup.sh), python3 with numpy and
# h5py (KR_BENCH_PYTHON names another).  OpenBLAS threads: default.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${KR_BENCH_BUILD:-$ROOT/build-bench}
# The interpreter with numpy and h5py: KR_BENCH_PYTHON, else the first of
# the system's and PATH's python3 that imports both.
PY=${KR_BENCH_PYTHON:-}
if [ -z "$PY" ]; then
    for cand in /usr/bin/python3 python3; do
        if "$cand" -c 'import numpy, h5py' 2>/dev/null; then PY=$cand; break; fi
    done
fi
[ -n "$PY" ] || { echo "bench.sh: no python3 with numpy and h5py (set KR_BENCH_PYTHON)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ROWS=$TMP/rows

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target kreplay kr_bench >/dev/null
KR=$BUILD/kreplay

# Arithmetic and tests in Python: no bc needed.  calc EXPR prints a value,
# pf EXPR prints PASS when EXPR is true, else MISS.
calc() { "$PY" -c "print($1)"; }
pf() { "$PY" -c "print('PASS' if ($1) else 'MISS')"; }
# wall OUT CMD...: runs CMD with its stdout in OUT (stderr dropped) and
# prints its wall seconds.
wall() { "$PY" -c '
import subprocess, sys, time
with open(sys.argv[1], "w") as out:
    t = time.perf_counter()
    subprocess.call(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL)
    print("%.6f" % (time.perf_counter() - t))' "$@"; }
# Peak RSS (KiB) of a command and its children, without /usr/bin/time.
peak_rss_kb() { "$PY" -c '
import resource, subprocess, sys
subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"; }

# Items 1 and 2 (kr_bench prints ROW| and INFO| lines).
echo "== kr_bench (items 1, 2)" >&2
"$BUILD/tests/bench/kr_bench" | tee "$TMP/kr_bench.out" >&2
grep '^ROW|' "$TMP/kr_bench.out" >"$ROWS" || true

# End to end: the default suite's cases (bundled samples + its synth sweep), R_exact
# and R_source of w4a8.perblock and w4a4.aiter, kreplay vs plain numpy.
echo "== end to end: kreplay replay vs numpy" >&2
mkdir -p "$TMP/cases"
cp cases/samples/*.h5 "$TMP/cases/"
"$KR" synth --shape gdn_in_proj_ba_tp2,gdn_in_proj_ba_tp1,moe_gate,512x3072 --m 1,17,64,300 \
      --seed 1 --out "$TMP/cases" >/dev/null
KOPTS="--kernels w4a8.perblock,w4a4.aiter --no-recorded --no-diagnose"
run_kr() { "$KR" replay $KOPTS "$@" "$TMP/cases" >"$TMP/kr.stdout" 2>"$TMP/kr.stderr" || \
           [ $? -eq 1 ] || { cat "$TMP/kr.stderr" >&2; exit 2; }; }
run_kr --json >/dev/null                      # warm the page cache for both sides
best_kr=
for i in 1 2 3 4 5; do
    t=$(wall "$TMP/kr.json" "$KR" replay $KOPTS --json "$TMP/cases")
    if [ -z "$best_kr" ] || [ "$(pf "$t < $best_kr")" = PASS ]; then best_kr=$t; fi
done
run_kr --json --save-outputs "$TMP/outs.h5"
cp "$TMP/kr.stdout" "$TMP/results.json"
best_np= best_np_refs=
for i in 1 2 3 4 5; do
    t=$(wall "$TMP/np.out" "$PY" scripts/bench_numpy_refs.py "$TMP/outs.h5" "$TMP/results.json" \
             "$TMP"/cases/*.h5)
    tr=$(awk '/^NUMPY_SECONDS/{print $2}' "$TMP/np.out")
    if [ -z "$best_np" ] || [ "$(pf "$t < $best_np")" = PASS ]; then best_np=$t; fi
    if [ -z "$best_np_refs" ] || [ "$(pf "$tr < $best_np_refs")" = PASS ]; then best_np_refs=$tr; fi
done
cat "$TMP/np.out" >&2
set -- $(awk '/^AGREE/{print $2, $3}' "$TMP/np.out")
agree=$1 compared=$2
ncases=$(ls "$TMP"/cases/*.h5 | wc -l)
r_wall=$(calc "$best_np / $best_kr")
r_refs=$(calc "$best_np_refs / $best_kr")
printf 'ROW|3 numpy/kreplay|%s cases, numpy process wall %.3f s / kreplay wall %.3f s|%.2fx|>= 3x|%s\n' \
    "$ncases" "$best_np" "$best_kr" "$r_wall" "$(pf "$r_wall >= 3")" >>"$ROWS"
printf 'ROW|3 numpy/kreplay|numpy refs only %.3f s (no interpreter start) / kreplay wall|%.2fx|>= 3x|%s\n' \
    "$best_np_refs" "$r_refs" "$(pf "$r_refs >= 3")" >>"$ROWS"
printf 'ROW|3 agreement|rel_fro numpy vs kreplay, 3 significant digits|%s/%s|all|%s\n' \
    "$agree" "$compared" "$( [ "$agree" = "$compared" ] && [ "$compared" -gt 0 ] && echo PASS || echo MISS)" >>"$ROWS"

# Peak RSS of the largest production case, 17408x5120.  M=1024, not
# 4096: 4096 takes minutes on 2 cores (the bound scales with M the same way).
echo "== peak RSS" >&2
M4=${KR_BENCH_RSS_M:-1024}
"$KR" synth --shape 17408x5120 --m "$M4" --seed 1 --out "$TMP/big" >/dev/null
BIG=$(ls "$TMP"/big/*.h5)
rss_kb=$(peak_rss_kb "$KR" replay $KOPTS "$BIG")
opbytes=$("$PY" -c '
import h5py, sys
f = h5py.File(sys.argv[1], "r")
print(sum(f[k].size * f[k].dtype.itemsize for k in f if isinstance(f[k], h5py.Dataset)))
' "$BIG")
bound=$(calc "1.5 * $opbytes + 2048 * 5120 * 4")
r4=$(calc "$rss_kb * 1024 / $bound")
printf 'ROW|4 peak RSS|17408x5120 M=%s: %.0f MiB vs 1.5 x %.0f MiB operands + %.0f MiB chunk = %.0f MiB|%.2fx of bound|<= 1.00x|%s\n' \
    "$M4" "$(calc "$rss_kb / 1024")" "$(calc "$opbytes / 1048576")" \
    "$(calc "2048 * 5120 * 4 / 1048576")" "$(calc "$bound / 1048576")" "$r4" "$(pf "$r4 <= 1")" >>"$ROWS"

echo
echo "== kreplay CPU benchmark ($(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
awk -F'|' 'BEGIN { printf "%-22s %-62s %-14s %-9s %s\n", "item", "what", "measured", "target", "result" }
           { printf "%-22s %-62s %-14s %-9s %s\n", $2, $3, $4, $5, $6 }' "$ROWS"
