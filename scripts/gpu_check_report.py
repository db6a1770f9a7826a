#!/usr/bin/env python3
"""The numbers of scripts/gpu_check.sh's benchmark, from what its runs left behind.

  gpu_check_report.py sweep CASES.txt CPU.log GPU.log PEER.out CPU_WALL GPU_WALL
      CASES.txt: the case files in the order replayed; *.log: KREPLAY_PROGRESS_LOG files
      ("kreplay replay I/N SECONDS" before case I+1, "gpu-worker-ready SECONDS");
      PEER.out: kernels/gpu/bench/torch_peer.py's output.  Prints the per-case table
      and the totals, and "SWEEP key=value ..." for the summary.
  gpu_check_report.py gate CPU_RESULTS.json GPU_RESULTS.json
      The rows of both runs: counts, UNSUPPORTED, and the rows whose verdicts differ
      (rows of both runs only: a GPU run adds model rows); the largest relative change
      of rel_fro among them.  Prints "GATE key=value ...".
"""
import json
import math
import os
import sys


def progress_times(path):
    """[t0, t1, ...]: the clock before each case and after the last; the worker's ready time."""
    steps, ready = {}, None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts[:2] == ["kreplay", "replay"] and len(parts) == 4:
                steps[int(parts[2].split("/")[0])] = float(parts[3])
            elif parts and parts[0] == "gpu-worker-ready":
                ready = float(parts[1])
    return [steps[i] for i in sorted(steps)], ready


def peer_times(path):
    per, warm, process = {}, None, None
    with open(path) as f:
        for line in f:
            p = line.split()
            if p and p[0] == "PEER_CASE":
                per[p[1]] = float(p[3])
            elif p and p[0] == "PEER_WARM_SECONDS":
                warm = float(p[1])
            elif p and p[0] == "PEER_PROCESS_SECONDS":
                process = float(p[1])
    return per, warm, process


def fmt(v, w=8, d=3):
    return f"{v:{w}.{d}f}" if isinstance(v, float) and math.isfinite(v) else f"{'-':>{w}}"


def sweep(cases_txt, cpu_log, gpu_log, peer_out, cpu_wall, gpu_wall):
    cases = [ln.strip() for ln in open(cases_txt) if ln.strip()]
    cpu, _ = progress_times(cpu_log) if os.path.exists(cpu_log) else ([], None)
    gpu, ready = progress_times(gpu_log) if os.path.exists(gpu_log) else ([], None)
    per, warm, peer_process = peer_times(peer_out) if os.path.exists(peer_out) else ({}, None, None)
    print(f"{'case':<44} {'M':>5} {'cpu s':>8} {'gpu s':>8} {'peer s':>8}")
    tot = [0.0, 0.0, 0.0]
    for i, c in enumerate(cases):
        name = os.path.basename(c)
        m = name.split("_M")[-1].split("_")[0] if "_M" in name else "?"
        tc = cpu[i + 1] - cpu[i] if len(cpu) > i + 1 else float("nan")
        tg = gpu[i + 1] - gpu[i] if len(gpu) > i + 1 else float("nan")
        tp = per.get(name, float("nan"))
        for j, v in enumerate((tc, tg, tp)):
            tot[j] += v
        print(f"{name[:44]:<44} {m:>5} {fmt(tc)} {fmt(tg)} {fmt(tp)}")
    print(f"{'all cases':<44} {'':>5} {fmt(tot[0])} {fmt(tot[1])} {fmt(tot[2])}")
    after = float("nan")
    if len(gpu) == len(cases) + 1 and ready is not None:
        # The cases' time once the worker was ready: the first case's reading
        # overlaps the worker's start, whatever remains of it is counted.
        after = gpu[-1] - max(gpu[0], ready)
    print(f"process wall: cpu {fmt(float(cpu_wall), 0, 2)} s, gpu {fmt(float(gpu_wall), 0, 2)} s, "
          f"peer {fmt(peer_process if peer_process is not None else float('nan'), 0, 2)} s "
          "(the peer's: its first pass and start-up)")
    if ready is not None and gpu:
        print(f"gpu: worker ready {ready - gpu[0]:+.2f} s from the first case's start; "
              f"the cases after start-up {after:.3f} s (target <= 2 x peer warm "
              f"{fmt(warm if warm is not None else float('nan'), 0, 3)} s)")
    print(f"SWEEP cpu_wall={float(cpu_wall):.2f} gpu_wall={float(gpu_wall):.2f} "
          f"gpu_cases={tot[1]:.3f} gpu_after_startup={after:.3f} peer_warm={warm} "
          f"peer_process={peer_process}")


def load_rows(path):
    with open(path) as f:
        rows = json.load(f)["results"]
    return {(r["case_name"], r["kernel"], r["reference"]): r for r in rows}


def gate(cpu_json, gpu_json):
    a, b = load_rows(cpu_json), load_rows(gpu_json)
    shared = [k for k in a if k in b]
    differ = [k for k in shared if a[k]["verdict"] != b[k]["verdict"]]
    worst = 0.0
    for k in shared:
        x = a[k].get("metrics", {}).get("rel_fro")
        y = b[k].get("metrics", {}).get("rel_fro")
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x:
            worst = max(worst, abs(y - x) / abs(x))
    unsup = [sum(1 for r in rows.values() if r["verdict"] == "UNSUPPORTED") for rows in (a, b)]
    missing = [k for k in a if k not in b]
    print(f"rows: cpu {len(a)}, gpu {len(b)} ({len(b) - len(shared)} model rows and others only "
          f"in the GPU run; {len(missing)} CPU rows missing from it)")
    print(f"UNSUPPORTED: cpu {unsup[0]}, gpu {unsup[1]}")
    print(f"verdicts differing on {len(differ)} of {len(shared)} shared rows; largest relative "
          f"change of rel_fro {worst:.3g}")
    for k in differ[:10]:
        print(f"  {k}: cpu {a[k]['verdict']} ({a[k]['note'][:90]}), gpu {b[k]['verdict']} "
              f"({b[k]['note'][:90]})")
    print(f"GATE cpu_rows={len(a)} gpu_rows={len(b)} cpu_unsupported={unsup[0]} "
          f"gpu_unsupported={unsup[1]} verdicts_differ={len(differ)} missing={len(missing)} "
          f"rel_fro_change={worst:.3g}")


def main():
    if len(sys.argv) >= 8 and sys.argv[1] == "sweep":
        sweep(*sys.argv[2:8])
    elif len(sys.argv) == 4 and sys.argv[1] == "gate":
        gate(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
