#!/usr/bin/env python3
"""Real GPU kernels against kreplay's models: one table.

    python3 scripts/real_kernels.py --kreplay build-gpu/kreplay --out DIR
        [--m 1,64,512,4096] [--sets default,production] [--jobs 3] [--budget-s 480]
        [--no-variants] [--real SPEC=MODEL ...]

Each real kernel (kernels/plugins/python/real/, run by `kreplay replay --py SPEC@MODEL`: it
takes exactly the operands MODEL's model takes) is replayed with `--vs MODEL` on
  default      the default suite's cases (cases/suites/default.yaml: the bundled samples and
               its synthetic sweep, regenerated here with `kreplay synth`);
  production   the production shapes (`kreplay synth --shape production`) at --m;
and one table gives, per real kernel and case: the fraction of outputs bit-identical to the
model, the ULP histogram against the model (0, 1, 2, >2 ULP, non-finite on one side only),
and the verdicts against R_exact and R_source.  A kernel that fails to import, compile or run
gets ERROR rows whose note says why (the traceback's last line); the others go on.  Each group
runs as one kreplay process per batch of cases (--batch, default all of them, smallest first):
one Python interpreter serves every launch of the process, so torch, the CUDA context and
Triton's compiled kernels are set up once per group, not once per case; --jobs groups run at a
time.  kreplay's references run on the GPU (--device gpu, where the real kernels get CUDA
tensors; --device cpu for the CPU's).  A batch that has not started when --budget-s is spent
is listed as not run, and a batch still running then is stopped (its cases listed as not
run).  DIR keeps the cases,
every replay's JSON and stderr, and real_kernels.csv.
"""
import argparse
import concurrent.futures
import csv
import glob
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
REAL = "kernels/plugins/python/real"
# (the --py specs of one replay, the model they are held against); the first spec of each
# group is the main kernel, the others variants (--no-variants drops them).
GROUPS = (
    ([f"{REAL}/triton_dot_scaled.py:dot_scaled"], "w4a4.aiter"),
    ([f"{REAL}/torch_scaled_mm.py:scaled_mm", f"{REAL}/torch_scaled_mm.py:scaled_mm_fast"],
     "w4a8.folded"),
    ([f"{REAL}/torch_bf16_matmul.py:bf16_matmul",
      f"{REAL}/torch_bf16_matmul.py:bf16_matmul_default"], "bf16.sequential"),
)
# cases/suites/default.yaml's synthetic sweep.
DEFAULT_SYNTH = ("gdn_in_proj_ba_tp2,gdn_in_proj_ba_tp1,moe_gate,512x3072", "1,17,64,300", "1")
ABOVE_2 = ("3-4", "5-8", "9-16", "17-32", "33-64", "65-128", "129-256", "257-512", "513-1024",
           "1025-2048", "2049-4096", "4097-8192", "8193-16384", "16385-32768", ">32768")


def sh(args, **kw):
    # A failing Python kernel prints its whole traceback on kreplay's stderr (runs/*.err).
    env = dict(os.environ, KREPLAY_PY_TRACEBACK="1")
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env, **kw)


def make_cases(kreplay, out, sets, ms):
    cases = []
    if "default" in sets:
        d = os.path.join(out, "default")
        shapes, m, seed = DEFAULT_SYNTH
        r = sh([kreplay, "synth", "--shape", shapes, "--m", m, "--seed", seed, "--out", d])
        if r.returncode:
            print(f"real_kernels: synth of the default suite failed: {r.stderr.strip()}")
        cases += [("default", p) for p in sorted(glob.glob(os.path.join(ROOT, "cases/samples/*.h5")))]
        cases += [("default", p) for p in sorted(glob.glob(os.path.join(d, "*.h5")))]
    if "production" in sets:
        d = os.path.join(out, "production")
        r = sh([kreplay, "synth", "--shape", "production", "--m", ms, "--out", d])
        if r.returncode:
            print(f"real_kernels: synth --shape production failed: {r.stderr.strip()}")
        cases += [("production", p) for p in sorted(glob.glob(os.path.join(d, "*.h5")))]
    return cases


def case_size(kreplay, path):
    """M*N*K from `kreplay inspect` (for the order: small first); 0 when unreadable."""
    r = sh([kreplay, "inspect", path])
    for line in r.stdout.splitlines():
        if "shape:" in line:
            try:
                d = dict(t.split("=") for t in line.split("shape:")[1].split())
                return int(d["M"]) * int(d["N"]) * int(d["K"])
            except (KeyError, ValueError):
                return 0
    return 0


def replay(kreplay, out, specs, model, cases, timeout, deadline, device):
    """One kreplay process over a batch of cases: {"rows": ...} or {"error": ...}."""
    tag = f"{model}__{os.path.splitext(os.path.basename(cases[0]))[0]}__{len(cases)}"
    args = [kreplay, "replay", "--json", "--kernels", "py.*", "--vs", model, "--reruns", "1",
            "--timeout", str(timeout), "--device", device]
    for s in specs:
        args += ["--py", f"{s}@{model}"]
    t0 = time.time()
    try:
        r = sh(args + list(cases), timeout=max(1.0, deadline - t0))
        stdout, stderr, rc = r.stdout, r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        stdout, stderr, rc = "", (e.stderr or b"").decode("utf-8", "replace") if isinstance(
            e.stderr, bytes) else (e.stderr or ""), -9
        stderr += "\nreal_kernels: stopped: the budget was spent"
    wall = time.time() - t0
    err_file = os.path.join(out, "runs", tag + ".err")
    with open(os.path.join(out, "runs", tag + ".json"), "w") as f:
        f.write(stdout)
    with open(err_file, "w") as f:
        f.write(stderr)
    try:
        rows = json.loads(stdout)["results"]
    except (ValueError, KeyError):
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"kreplay exit {rc}: {last[:300]}", "wall": wall, "err_file": err_file,
                "stopped": rc == -9}
    return {"rows": rows, "wall": wall, "rc": rc, "err_file": err_file}


def by_case(rows, cases):
    """The batch's rows split by case file (a row names its case by path)."""
    split = {c: [] for c in cases}
    for r in rows:
        path = r.get("case_path", "")
        for c in cases:
            if os.path.abspath(path) == os.path.abspath(c):
                split[c].append(r)
                break
    return split


def summarize(rows, model):
    """kernel -> {model row, R_exact verdict, R_source verdict, note} from one replay."""
    by = {}
    for r in rows:
        k = r.get("kernel", "")
        if not k.startswith("py."):
            continue
        e = by.setdefault(k, {"M": r.get("M"), "N": r.get("N"), "K": r.get("K"),
                              "exact": "-", "source": "-", "vs": None, "note": ""})
        ref, v = r.get("reference", ""), r.get("verdict", "")
        if ref == "R_exact":
            e["exact"] = v
        elif ref == "R_source":
            e["source"] = v
        elif ref == f"model:{model}":
            e["vs"] = r.get("ulp", {})
        if v in ("ERROR", "CRASHED", "TIMEOUT", "UNSUPPORTED", "OOB_WRITE", "NONDETERMINISTIC") \
                and not e["note"]:
            e["note"] = f"{v}: {r.get('note', '')}"
            e["status"] = v
    return by


def row_of(kernel, model, case_set, case, e):
    u = e["vs"] or {}
    bins = u.get("bins") or {}
    n = u.get("count")
    def b(key):
        v = bins.get(key)
        return v if isinstance(v, int) else 0
    return {
        "real_kernel": kernel, "model": model, "set": case_set,
        "case": os.path.splitext(os.path.basename(case))[0],
        "NxK": f"{e['N']}x{e['K']}", "M": e["M"],
        "identical_frac": u.get("identical_frac") if n else None,
        "ulp0": b("0"), "ulp1": b("1"), "ulp2": b("2"),
        "ulp_gt2": sum(b(k) for k in ABOVE_2), "nonfinite": b("nonfinite"),
        "max_ulp": u.get("max_ulp"), "vs_R_exact": e["exact"], "vs_R_source": e["source"],
        "note": e["note"],
        "err_file": "",
    }


def print_table(rows, skipped, not_run):
    hdr = (f"{'real kernel':<30} {'model':<16} {'N x K':>11} {'M':>5} {'identical':>9} "
           f"{'0 ULP':>9} {'1':>8} {'2':>7} {'>2':>7} {'nonfin':>6} {'maxULP':>6} "
           f"{'R_exact':<10} {'R_source':<10} {'case':<28} note")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        idf = "-" if r["identical_frac"] is None else f"{r['identical_frac']:.4f}"
        mu = "-" if r["max_ulp"] is None else str(r["max_ulp"])
        print(f"{r['real_kernel'][:30]:<30} {r['model']:<16} {r['NxK']:>11} {r['M']!s:>5} "
              f"{idf:>9} {r['ulp0']:>9} {r['ulp1']:>8} {r['ulp2']:>7} {r['ulp_gt2']:>7} "
              f"{r['nonfinite']:>6} {mu:>6} {r['vs_R_exact']:<10} {r['vs_R_source']:<10} "
              f"{r['case'][:28]:<28} {r['note'][:120]}")
    if skipped:
        print(f"({skipped} kernel/case pairs UNSUPPORTED (the case lacks the model's weight or "
              "shape) left out)")
    for what in not_run:
        print(f"not run: {what}")
    first = {}
    for r in rows:
        if r["note"]:
            first.setdefault(r["real_kernel"], f"{r['case']}: {r['note']}")
    for k, note in first.items():
        print(f"first note of {k}: {note}")
        err = next((r["err_file"] for r in rows if r["real_kernel"] == k and r["note"]), "")
        try:
            with open(err) as f:
                tail = [ln.rstrip() for ln in f.readlines()[-25:]]
        except OSError:
            tail = []
        for ln in tail:
            print(f"    | {ln}")


def print_summary(rows):
    """Per real kernel, over every case it ran on: elements, identical, ULP bins, verdicts."""
    print()
    print(f"{'real kernel':<30} {'model':<16} {'cases':>5} {'elements':>11} {'identical':>9} "
          f"{'1 ULP':>8} {'2 ULP':>7} {'>2 ULP':>7} {'nonfin':>6}  R_exact PASS  R_source PASS")
    agg = {}
    for r in rows:
        a = agg.setdefault((r["real_kernel"], r["model"]), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        n = r["ulp0"] + r["ulp1"] + r["ulp2"] + r["ulp_gt2"] + r["nonfinite"]
        if r["identical_frac"] is None:
            continue
        a[0] += 1
        a[1] += n
        a[2] += r["ulp0"]
        a[3] += r["ulp1"]
        a[4] += r["ulp2"]
        a[5] += r["ulp_gt2"]
        a[6] += r["nonfinite"]
        a[7] += r["vs_R_exact"] == "PASS"
        a[8] += r["vs_R_source"] == "PASS"
        a[9] += r["vs_R_exact"] != "-"      # the model has no such reference: not a failure
        a[10] += r["vs_R_source"] != "-"
    for (k, m), a in agg.items():
        idf = f"{a[2] / a[1]:.4f}" if a[1] else "-"
        ex = f"{a[7]:>5}/{a[9]:<6}" if a[9] else f"{'-':>5} {'':<6}"
        so = f"{a[8]:>5}/{a[10]}" if a[10] else f"{'-':>5}"
        print(f"{k[:30]:<30} {m:<16} {a[0]:>5} {a[1]:>11} {idf:>9} {a[3]:>8} {a[4]:>7} "
              f"{a[5]:>7} {a[6]:>6}  {ex} {so}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kreplay", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases-dir", help="where the synthetic cases go (default OUT/cases; they "
                    "are large at M=4096)")
    ap.add_argument("--m", default="1,64,512,4096")
    ap.add_argument("--sets", default="default,production")
    ap.add_argument("--jobs", type=int, default=3, help="groups replayed at a time")
    ap.add_argument("--batch", type=int, default=0,
                    help="cases per kreplay process (0: every case in one)")
    ap.add_argument("--budget-s", type=float, default=480)
    ap.add_argument("--timeout", type=int, default=300, help="per launch of a real kernel")
    ap.add_argument("--no-variants", action="store_true", help="only each group's main kernel")
    ap.add_argument("--device", default="gpu", choices=("gpu", "cpu"),
                    help="kreplay's references on the GPU (default; the real kernels then get CUDA "
                         "tensors) or the CPU")
    ap.add_argument("--real", action="append", default=[],
                    help="SPEC[,SPEC...]=MODEL instead of the built-in groups (repeatable)")
    a = ap.parse_args()
    kreplay = os.path.abspath(a.kreplay)
    out = os.path.abspath(a.out)
    os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    groups = [(s.split("=")[0].split(","), s.split("=")[1]) for s in a.real] or \
        [(specs[:1] if a.no_variants else specs, model) for specs, model in GROUPS]
    t0 = time.time()
    cases = make_cases(kreplay, os.path.abspath(a.cases_dir or os.path.join(out, "cases")),
                       a.sets.split(","), a.m)
    cases.sort(key=lambda c: case_size(kreplay, c[1]))
    print(f"real_kernels: {len(cases)} cases x {len(groups)} groups "
          f"({sum(len(g[0]) for g in groups)} real kernels), {a.jobs} at a time, "
          f"budget {a.budget_s:.0f} s; python {os.environ.get('KREPLAY_PYTHON', 'python3')}",
          flush=True)
    deadline = t0 + a.budget_s
    results, not_run, lock = [], [], threading.Lock()
    paths = [c for _, c in cases]
    size = a.batch if a.batch > 0 else max(1, len(paths))
    batches = [paths[i:i + size] for i in range(0, len(paths), size)]
    set_of = {c: cs for cs, c in cases}

    def group(specs, model):
        for batch in batches:
            if time.time() > deadline:
                with lock:
                    not_run.extend(f"{model} on {os.path.basename(c)} (budget spent)" for c in batch)
                continue
            res = replay(kreplay, out, specs, model, batch, a.timeout, deadline, a.device)
            with lock:
                if res.get("stopped"):
                    not_run.extend(f"{model} on {os.path.basename(c)} (stopped at the budget)"
                                   for c in batch)
                elif "error" in res:
                    results.extend((set_of[c], c, specs, model, res) for c in batch)
                else:
                    split = by_case(res["rows"], batch)
                    results.extend((set_of[c], c, specs, model, dict(res, rows=split[c]))
                                   for c in batch)
            print(f"  [{model:<16}] {len(batch)} case(s) in {res['wall']:6.1f} s"
                  + (f"  {res['error']}" if "error" in res else ""), flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for f in [pool.submit(group, specs, model) for specs, model in groups]:
            f.result()
    rows, skipped = [], 0
    order = {c: i for i, (_, c) in enumerate(cases)}
    for case_set, case, specs, model, res in sorted(results, key=lambda r: (r[3], order[r[1]])):
        if "error" in res:
            for s in specs:
                rows.append({"real_kernel": s.rsplit(":", 1)[1], "model": model, "set": case_set,
                             "case": os.path.basename(case), "NxK": "?", "M": "?",
                             "identical_frac": None, "ulp0": 0, "ulp1": 0, "ulp2": 0,
                             "ulp_gt2": 0, "nonfinite": 0, "max_ulp": None, "vs_R_exact": "-",
                             "vs_R_source": "-", "note": res["error"],
                             "err_file": res["err_file"]})
            continue
        for k, e in summarize(res["rows"], model).items():
            if e.get("status") == "UNSUPPORTED":
                skipped += 1
                continue
            rows.append(row_of(k.split(".")[-1], model, case_set, case, e))
            rows[-1]["err_file"] = res.get("err_file", "")
    print()
    print_table(rows, skipped, not_run)
    print_summary(rows)
    with open(os.path.join(out, "real_kernels.csv"), "w", newline="") as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    errors = sum(1 for r in rows if r["note"] and not r["note"].startswith("NONDETERMINISTIC"))
    print(f"\nreal_kernels: {len(rows)} rows, {errors} with errors, {len(not_run)} not run, "
          f"{time.time() - t0:.0f} s; details in {out}")
    return 0 if rows and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
