#!/usr/bin/env bash
# Submits the sharded nightly gate to Slurm: an array of N shards, then the
# merge as a job that starts only once every shard succeeded.
#   scripts/slurm/submit.sh SUITE OUTDIR N [--baseline FILE] [-- SBATCH OPTIONS...]
# e.g. scripts/slurm/submit.sh cases/suites/default.yaml /shared/runs/$(date +%F) 8 \
#          --baseline /shared/baselines/main.h5 -- --partition=cpu
# Prints "ARRAY_JOBID MERGE_JOBID".  OUTDIR must be on a file system every
# node sees; the jobs' logs go to OUTDIR/slurm-*.out.  KREPLAY (the binary,
# default build/kreplay here) is passed to the jobs as an absolute path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ $# -lt 3 ]]; then
    sed -n '2,9p' "$0" >&2
    exit 2
fi
suite=$(realpath "$1") outdir=$2 shards=$3
shift 3
baseline=""
if [[ "${1:-}" == "--baseline" ]]; then
    baseline=$(realpath "$2")
    shift 2
fi
[[ "${1:-}" == "--" ]] && shift
if ! [[ "$shards" =~ ^[1-9][0-9]*$ ]]; then
    echo "submit.sh: N must be a positive integer, got '$shards'" >&2
    exit 2
fi
mkdir -p "$outdir"
outdir=$(realpath "$outdir")
kreplay=$(realpath "${KREPLAY:-build/kreplay}")
export KREPLAY=$kreplay
array=$(sbatch --parsable "$@" --array="1-$shards" --output="$outdir/slurm-%A_%a.out" \
    "$here/nightly.sbatch" "$suite" "$outdir")
array=${array%%;*}
merge=$(sbatch --parsable "$@" --dependency="afterok:$array" --output="$outdir/slurm-%j-merge.out" \
    "$here/merge.sbatch" "$outdir" "$shards" ${baseline:+"$baseline"})
echo "${array} ${merge%%;*}"
