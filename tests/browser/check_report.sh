#!/usr/bin/env bash
# Renders a kreplay report page in headless Chromium and checks that it
# loaded without errors and that every plot rendered.
#
#   tests/browser/check_report.sh REPORT.html OUTDIR [EXPECTED_PLOTS]
#
# 1. --dump-dom: the page's own inline script has, on load, counted the
#    plots (svg.kr-plot), those without a non-empty data group, and the
#    errors window.onerror saw, into
#      <div id="kr-selftest" data-expected-plots="E">plots=N expected=E empty=0 errors=0 thresholds=T failing=F regressed=R</div>
#    which is read back here: N must equal E (and EXPECTED_PLOTS when given),
#    empty and errors must be 0.  T, F, R: the threshold lines, failing and
#    regressed markers that hold data (the caller checks those counts).
# 2. --screenshot of the top of the page (the summary), 1400x2000, kept as
#    OUTDIR/summary.png; it must be a PNG of that size.
# Chromium's own logs go to OUTDIR/chromium-*.log, the DOM to OUTDIR/dom.html.
# Exit: 0 every check passed, 1 a check failed (the reason on stderr),
# 2 usage, 77 no chromium (ctest: skipped).
set -uo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 REPORT.html OUTDIR [EXPECTED_PLOTS]" >&2
    exit 2
fi
html=$1
out=$2
want=${3:-}
chromium=""
for c in chromium chromium-browser google-chrome; do
    if command -v "$c" >/dev/null 2>&1; then
        chromium=$(command -v "$c")
        break
    fi
done
if [[ -z $chromium ]]; then
    echo "check_report: chromium not found on PATH (apt-get install chromium)" >&2
    exit 77
fi
if [[ ! -f $html ]]; then
    echo "check_report: $html: no such file" >&2
    exit 2
fi
mkdir -p "$out"
profiles=()
cleanup() { for p in "${profiles[@]}"; do rm -rf "$p"; done; }
trap cleanup EXIT

run_chromium() {   # LOG ARGS...: one headless run with a fresh profile
    local log=$1
    shift
    local profile
    profile=$(mktemp -d)
    profiles+=("$profile")
    timeout 180 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" "$@" 2>"$log"
}

abs=$(realpath "$html")
url="file://${abs// /%20}"

# 1. The DOM after load, with the self-test's line.
if ! run_chromium "$out/chromium-dom.log" --virtual-time-budget=10000 --dump-dom "$url" >"$out/dom.html"; then
    echo "check_report: chromium --dump-dom failed (see $out/chromium-dom.log)" >&2
    exit 1
fi
line=$(grep -o '<div id="kr-selftest"[^>]*>[^<]*</div>' "$out/dom.html" | head -1)
if [[ -z $line ]]; then
    echo "check_report: no kr-selftest element in the rendered page ($out/dom.html)" >&2
    exit 1
fi
text=$(sed -e 's/<[^>]*>//g' <<<"$line")
echo "selftest: $text"
field() { grep -o "$1=[^ ]*" <<<"$text" | head -1 | cut -d= -f2; }
plots=$(field plots)
expected=$(field expected)
empty=$(field empty)
errors=$(field errors)
fail=0
if [[ -z $plots || -z $expected || -z $empty || -z $errors ]]; then
    echo "check_report: the self-test did not run: '$text'" >&2
    exit 1
fi
if [[ $errors != 0 ]]; then
    echo "check_report: the page reported $errors errors: $text" >&2
    fail=1
fi
if [[ $empty != 0 ]]; then
    echo "check_report: $empty plots rendered nothing: $text" >&2
    fail=1
fi
if [[ $plots != "$expected" ]]; then
    echo "check_report: $plots plots in the page, the report drew $expected" >&2
    fail=1
fi
if [[ -n $want && $plots != "$want" ]]; then
    echo "check_report: $plots plots in the page, expected $want" >&2
    fail=1
fi

# 2. A screenshot of the summary.
rm -f "$out/summary.png"
if ! run_chromium "$out/chromium-shot.log" --hide-scrollbars --window-size=1400,2000 \
        --screenshot="$out/summary.png" "$url" >/dev/null; then
    echo "check_report: chromium --screenshot failed (see $out/chromium-shot.log)" >&2
    exit 1
fi
if [[ ! -s $out/summary.png ]]; then
    echo "check_report: no screenshot written" >&2
    exit 1
fi
# PNG signature, then IHDR width and height (big-endian at bytes 16-23).
sig=$(head -c 8 "$out/summary.png" | od -An -tx1 | tr -d ' \n')
dims=$(od -An -tu1 -j16 -N8 "$out/summary.png" | tr -s ' ' | sed 's/^ //')
read -r w0 w1 w2 w3 h0 h1 h2 h3 <<<"$dims"
width=$(( (w0 << 24) | (w1 << 16) | (w2 << 8) | w3 ))
height=$(( (h0 << 24) | (h1 << 16) | (h2 << 8) | h3 ))
if [[ $sig != 89504e470d0a1a0a ]]; then
    echo "check_report: $out/summary.png is not a PNG" >&2
    fail=1
elif [[ $width -ne 1400 || $height -ne 2000 ]]; then
    echo "check_report: screenshot is ${width}x${height}, expected 1400x2000" >&2
    fail=1
fi
echo "screenshot: $out/summary.png (${width}x${height}, $(stat -c %s "$out/summary.png") bytes)"
exit $fail
