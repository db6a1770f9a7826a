#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang under ASan + UBSan in
# build-fuzz/ and runs each for a bounded time on its committed seed corpus.
#   FUZZ_SECONDS=60 scripts/fuzz.sh          60 s per target (the default)
#   FUZZ_TARGETS="pt suite" scripts/fuzz.sh  a subset
# Fails (exit 1) on any crash, leak, sanitizer report or timeout; the
# reproducer is left in build-fuzz/findings/<target>/.  New corpus entries go
# to build-fuzz/corpus/<target>/ (the committed seeds are not modified).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
seconds=${FUZZ_SECONDS:-60}
targets=(${FUZZ_TARGETS:-pt case suite results})
build_dir=${FUZZ_BUILD_DIR:-build-fuzz}

cc=${FUZZ_CC:-}
if [[ -z "$cc" ]]; then
    for c in clang-19 clang clang-14; do
        if command -v "$c" >/dev/null &&
           echo 'int LLVMFuzzerTestOneInput(const char*d,unsigned long n){(void)d;(void)n;return 0;}' |
           "$c" -x c -fsanitize=fuzzer,address,undefined - -o /tmp/kr-fuzz-probe.$$ 2>/dev/null; then
            cc=$c; break
        fi
    done
    rm -f /tmp/kr-fuzz-probe.$$
fi
[[ -n "$cc" ]] || { echo "fuzz: no clang with libFuzzer (scripts/setup.sh --tests installs it)" >&2; exit 2; }

flags="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -g"
cmake -S . -B "$build_dir" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DKREPLAY_FUZZ=ON -DKREPLAY_GPU=OFF -DCMAKE_C_FLAGS="$flags" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
    corpus="$build_dir/corpus/$t"
    findings="$build_dir/findings/$t"
    log="$build_dir/fuzz_$t.log"
    mkdir -p "$corpus" "$findings"
    echo "== fuzz_$t: ${seconds}s ($cc)"
    if "$build_dir/fuzz_$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
           -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" \
           "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        echo "fuzz_$t: ok, ${runs:-?} executions in ${seconds}s, corpus $(ls "$corpus" | wc -l) entries"
    else
        status=1
        echo "fuzz_$t: FAILED (log $log, reproducers in $findings/):" >&2
        grep -E "ERROR|SUMMARY|runtime error|#[0-9]+ 0x" "$log" | head -30 >&2 || tail -30 "$log" >&2
    fi
done
exit $status
