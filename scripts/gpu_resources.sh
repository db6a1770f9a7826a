#!/usr/bin/env bash
# Writes a ctest resource specification with one "gpus" slot per GPU that
# nvidia-smi (or rocm-smi) sees, so `ctest -j N --resource-spec-file FILE -L gpu`
# gives each GPU test its own GPU.
#   scripts/gpu_resources.sh [FILE]      (default build/gpu_resources.json)
set -euo pipefail
out=${1:-build/gpu_resources.json}
n=0
if command -v nvidia-smi >/dev/null; then
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
elif command -v rocm-smi >/dev/null; then
    n=$(rocm-smi --showid 2>/dev/null | grep -c 'GPU\[' || true)
fi
ids=""
for ((i = 0; i < n; i++)); do
    ids+="${ids:+,}{\"id\": \"$i\", \"slots\": 1}"
done
mkdir -p "$(dirname "$out")"
printf '{"version": {"major": 1, "minor": 0}, "local": [{"gpus": [%s]}]}\n' "$ids" > "$out"
echo "$out: $n GPU(s)"
