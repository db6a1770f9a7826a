#!/usr/bin/env bash
# The sharded nightly gate on a real Slurm, one node (this machine):
#   scripts/slurm/ci_test.sh [KREPLAY]      (default: build-test/kreplay)
# Installs slurm-wlm and munge (apt-get), starts munged, slurmctld and slurmd
# with a slurm.conf written into a temporary directory (localhost, 2 CPUs, no
# cgroups), then
#   1. submits the default suite as an array of 3 shards plus the dependent
#      merge (scripts/slurm/submit.sh) and checks that the merged rows equal
#      those of one unsharded run (compare_rows.py: every metric and digest);
#   2. cancels a shard while it runs (scancel), resubmits it with --resume,
#      merges against a baseline made from the unsharded run, and checks the
#      same rows again and that the merge gated (exit 0, JUnit written);
#   3. stops every daemon it started and checks that none is left.
# Skips (exit 0, with a message) when not root or when apt-get fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
t0=$(date +%s)
suite=$repo/cases/suites/default.yaml
shards=3
wait_s=${KREPLAY_SLURM_TIMEOUT:-600}

skip() {
    echo "slurm test: SKIPPED: $*"
    exit 0
}
[[ "$(id -u)" == 0 ]] || skip "needs root (apt-get, and slurmd runs jobs as any user)"
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge python3-h5py >/dev/null 2>&1; then
    skip "apt-get install slurm-wlm munge failed"
fi
py=""
for cand in /usr/bin/python3 python3; do
    "$cand" -c 'import h5py' 2>/dev/null && { py=$cand; break; }
done
[[ -n "$py" ]] || skip "no python3 that imports h5py (apt-get install python3-h5py)"
kreplay=$(realpath "${1:-build-test/kreplay}")
[[ -x "$kreplay" ]] || { echo "slurm test: $kreplay is not an executable (build first)" >&2; exit 2; }

tmp=$(mktemp -d /tmp/kreplay-slurm.XXXXXX)
pids=()
jobs_submitted=()
fail() {
    echo "slurm test: FAILED: $*" >&2
    for log in "$tmp"/*.log "$tmp"/runs/*/slurm-*.out; do
        [[ -f "$log" ]] && { echo "--- $log (last lines)"; tail -n 15 "$log"; } >&2
    done
    exit 1
}
stop_all() {
    local rc=$? left
    set +e
    ((${#jobs_submitted[@]})) && scancel "${jobs_submitted[@]}" 2>/dev/null
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for _ in $(seq 50); do
        left=""
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left+=" $pid"; done
        [[ -z "$left" ]] && ! pgrep -x slurmstepd >/dev/null && break
        sleep 0.2
    done
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
    left=$(pgrep -f "$tmp"; pgrep -x slurmstepd)
    if [[ -n "$left" ]]; then
        echo "slurm test: FAILED: processes left running: $left" >&2
        rc=1
    else
        echo "slurm test: all daemons stopped (pgrep finds none)"
    fi
    ((rc == 0)) && rm -rf "$tmp" || echo "slurm test: logs kept in $tmp"
    echo "slurm test: $( ((rc == 0)) && echo PASS || echo FAIL) in $(($(date +%s) - t0)) s"
    exit "$rc"
}
trap stop_all EXIT

# --- munge, with its own key and socket
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 status=none
chmod 0400 "$tmp/munge.key"
munged -F --force --key-file="$tmp/munge.key" --socket="$tmp/munge.sock" \
    --pid-file="$tmp/munged.pid" --seed-file="$tmp/munged.seed" --log-file="$tmp/munged.log" >"$tmp/munged.out.log" 2>&1 &
pids+=($!)

# --- slurm.conf for one node; ports away from a system slurm's 6817/6818
port=$((20000 + RANDOM % 20000))
mkdir -p "$tmp/state" "$tmp/spool"
export SLURM_CONF=$tmp/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=kreplayci
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
for _ in $(seq 50); do [[ -S "$tmp/munge.sock" ]] && break; sleep 0.2; done
[[ -S "$tmp/munge.sock" ]] || fail "munged did not start"
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out.log" 2>&1 &
pids+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" >"$tmp/slurmd.out.log" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 150); do
    state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
    [[ "$state" == idle ]] && break
    sleep 0.2
done
[[ "$state" == idle ]] || fail "the node is '${state:-unreachable}', not idle"
echo "slurm test: slurmctld and slurmd up ($(sinfo -h -o '%P %D %c %T'))"

# Waits until the jobs have left the queue; then each must have exit code 0.
wait_jobs() {
    local deadline=$(($(date +%s) + wait_s)) j info
    local list
    list=$(IFS=,; echo "$*")
    while [[ -n "$(squeue -h -j "$list" 2>/dev/null)" ]]; do
        (($(date +%s) < deadline)) || fail "jobs $* still queued after ${wait_s} s"
        # A dependent job whose dependency failed waits forever: say so now.
        squeue -h -j "$list" -o '%i %r' 2>/dev/null | grep -q DependencyNeverSatisfied &&
            fail "jobs $*: a job failed, so its dependent can never run ($(squeue -h -j "$list" -o '%i %T %r' | tr '\n' ';'))"
        sleep 1
    done
    for j in "$@"; do
        info=$(scontrol -o show job "$j")
        for rec in $info; do
            case $rec in JobState=* | ExitCode=*) ;; *) continue ;; esac
            case $rec in JobState=COMPLETED | ExitCode=0:0) ;; *) fail "job $j: $rec" ;; esac
        done
    done
}

# --- 1. the array and its dependent merge, as a user submits them
runs=$tmp/runs
read -r array merge < <(KREPLAY=$kreplay scripts/slurm/submit.sh "$suite" "$runs/nightly" "$shards")
[[ -n "${merge:-}" ]] || fail "submit.sh did not submit the array and the merge"
jobs_submitted+=("$array" "$merge")
echo "slurm test: submitted array $array (tasks 1-$shards) and merge $merge (afterok:$array)"
# The unsharded run to compare with, meanwhile, outside Slurm.
"$kreplay" gate "$suite" -o "$runs/whole" -t 1 >"$tmp/whole.log" 2>&1 &
whole=$!
wait_jobs "$array" "$merge"
wait "$whole" || fail "the unsharded gate failed (see $tmp/whole.log)"
for f in results.h5 results.csv results.json report.md; do
    [[ -s "$runs/nightly/all/$f" ]] || fail "the merge did not write all/$f"
done
[[ -s "$runs/nightly/all.xml" ]] || fail "the merge did not write the JUnit file"
"$py" scripts/slurm/compare_rows.py "$runs/whole/results.h5" "$runs/nightly/all/results.h5" ||
    fail "merged rows differ from the unsharded run"

# --- 2. a shard cancelled mid-run, resubmitted with --resume
"$kreplay" baseline update "$runs/whole" --baseline "$runs/baseline.h5" >/dev/null
re=$runs/resumed
mkdir -p "$re"
cp -r "$runs/nightly/shard1" "$runs/nightly/shard3" "$re/"
export KREPLAY=$kreplay KREPLAY_SHARDS=$shards
job=$(sbatch --parsable --array=2 --output="$re/slurm-%A_%a.out" scripts/slurm/nightly.sbatch "$suite" "$re")
job=${job%%;*}
jobs_submitted+=("$job")
deadline=$(($(date +%s) + wait_s))
until compgen -G "$re/shard2/partial/*.h5" >/dev/null; do
    (($(date +%s) < deadline)) || fail "shard 2 wrote no partial case in ${wait_s} s"
    [[ -n "$(squeue -h -j "$job")" ]] || fail "shard 2 ended before it could be cancelled"
    sleep 0.1
done
scancel "$job"
while [[ -n "$(squeue -h -j "$job")" ]]; do sleep 0.2; done
[[ ! -e "$re/shard2/results.h5" ]] || fail "shard 2 finished before scancel took effect"
kept=$(compgen -G "$re/shard2/partial/*.h5" | wc -l)
echo "slurm test: shard 2 cancelled with $kept finished case(s) in partial/"
job=$(sbatch --parsable --array=2 --output="$re/slurm-%A_%a-resume.out" scripts/slurm/nightly.sbatch "$suite" "$re" --resume)
job=${job%%;*}
jobs_submitted+=("$job")
mjob=$(sbatch --parsable --dependency="afterok:$job" --output="$re/slurm-%j-merge.out" \
    scripts/slurm/merge.sbatch "$re" "$shards" "$runs/baseline.h5")
mjob=${mjob%%;*}
jobs_submitted+=("$mjob")
wait_jobs "$job" "$mjob"
grep -h "([0-9]* resumed)" "$re"/slurm-*-resume.out | tail -n 1
resumed=$(grep -ho '([0-9]* resumed)' "$re"/slurm-*-resume.out | tr -dc 0-9)
((resumed >= 1)) || fail "the resubmitted shard resumed no case"
[[ -s "$re/all.xml" ]] || fail "the merge against the baseline wrote no JUnit file"
"$py" scripts/slurm/compare_rows.py "$runs/whole/results.h5" "$re/all/results.h5" ||
    fail "rows after scancel + --resume differ from the unsharded run"
echo "slurm test: the merge job's last lines:"
tail -n 3 "$re"/slurm-*-merge.out
