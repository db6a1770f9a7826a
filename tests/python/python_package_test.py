"""The kreplay Python package (python/) as a user gets it: installed with pip
into a fresh venv (--system-site-packages: Debian's numpy, h5py, pandas),
reading a real run's results.h5 and writing a case kreplay replays.

Oracles: results.csv parsed with the csv module (no pandas) and results.json
with json; the DataFrame must agree with both, cell for cell.

usage: python_package_test.py KREPLAY_BINARY SOURCE_DIR TMP_DIR
"""
import csv
import json
import math
import os
import shutil
import subprocess
import sys

kreplay, src, tmp = sys.argv[1:4]
samples = os.path.join(src, "cases", "samples")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, (cmd, r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


# 1. pip install into a venv, from the checkout (the package's own backend
#    builds nothing there: readme_python_test.py checks that).
venv = os.path.join(tmp, "venv")
pkg = os.path.join(src, "python")
run([sys.executable, "-m", "venv", "--system-site-packages", venv])
py = os.path.join(venv, "bin", "python3")
run([py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", pkg])
where = run([py, "-c", "import kreplay; print(kreplay.__file__)"], cwd=tmp).strip()
assert where.startswith(venv), where          # the installed copy, not the checkout's

# 2. A real run: the samples replayed into RUN/.
rundir = os.path.join(tmp, "RUN")
shutil.rmtree(rundir, ignore_errors=True)
subprocess.run([kreplay, "replay", "-o", rundir, samples], capture_output=True)
h5 = os.path.join(rundir, "results.h5")
assert os.path.isfile(h5), h5

# 3. The one-liner, as written.
out = run([py, "-c", "import pandas, kreplay; print(kreplay.read_results('RUN/results.h5')"
                     ".groupby('kernel').rel_fro.max())"], cwd=tmp)
print(out)

# 4. The frame against results.csv (csv module) and results.json.
with open(os.path.join(rundir, "results.csv"), newline="") as fp:
    reader = csv.reader(fp)
    header = next(reader)
    crow = list(reader)
with open(os.path.join(rundir, "results.json")) as fp:
    jrows = json.load(fp)["results"]
check = r'''
import json, sys, math
import h5py, pandas, kreplay
df = kreplay.read_results(sys.argv[1])
raw = pandas.DataFrame(h5py.File(sys.argv[1], "r")["rows"][:])   # h5py + pandas, one line
assert list(raw.columns) == [c for c in df.columns if c not in kreplay.results.ALIASES], \
    (list(raw.columns), list(df.columns))
json_cols = sorted(pandas.json_normalize(json.load(open(sys.argv[2]))["results"]).columns)
assert json_cols == sorted(raw.columns), set(json_cols) ^ set(raw.columns)
print(json.dumps({"columns": list(raw.columns), "n": len(df),
                  "kernel": list(df["kernel"]), "reference": list(df["reference"]),
                  "verdict": list(df["verdict"]),
                  "rel_fro": [None if math.isnan(v) else v for v in df["metrics.rel_fro"]],
                  "count": [None if math.isnan(v) else v for v in df["metrics.count"]],
                  "max": {k: (None if math.isnan(v) else v) for k, v in
                          df.groupby("kernel").rel_fro.max().items()}}))
'''
got = json.loads(run([py, "-c", check, h5, os.path.join(rundir, "results.json")], cwd=tmp))
assert got["columns"] == header, (got["columns"], header)
assert got["n"] == len(crow) == len(jrows), (got["n"], len(crow), len(jrows))
col = {name: i for i, name in enumerate(header)}
unsupported = 0
expect_max = {}
for i, row in enumerate(crow):
    assert got["kernel"][i] == row[col["kernel"]] == jrows[i]["kernel"]
    assert got["verdict"][i] == row[col["verdict"]] == jrows[i]["verdict"]
    cell = row[col["metrics.rel_fro"]]
    js = jrows[i]["metrics"]["rel_fro"]
    if row[col["reference"]] == "-":
        unsupported += 1
        # Missing, never 0: empty in CSV, null in JSON, NaN in the frame.
        assert cell == "" and row[col["metrics.count"]] == "", row
        assert js is None and jrows[i]["metrics"]["count"] is None
        assert got["rel_fro"][i] is None and got["count"][i] is None
        continue
    v = float(cell)
    assert got["rel_fro"][i] == v or (math.isnan(v) and got["rel_fro"][i] is None), (i, v)
    assert got["count"][i] == float(row[col["metrics.count"]])
    if not math.isnan(v):
        expect_max[row[col["kernel"]]] = max(v, expect_max.get(row[col["kernel"]], -1.0))
assert unsupported > 0, "the samples give UNSUPPORTED rows (bf16.skinny without weight_bf16)"
for k, v in expect_max.items():
    assert got["max"][k] == v, (k, got["max"][k], v)
print(f"read_results: {got['n']} rows, {len(header)} columns, {unsupported} without a "
      f"measurement, agrees with results.csv and results.json")

# 5. write_case from the installed package; kreplay replays it.
case = os.path.join(tmp, "written_by_package.h5")
write = r'''
import sys
import numpy as np
import kreplay
rng = np.random.default_rng(3)
M, N, K = 4, 64, 256
x = rng.standard_normal((M, K)).astype(np.float32)
w = rng.integers(1, 256, size=(N, K // 2), dtype=np.uint8)
ws = rng.integers(118, 126, size=(N, K // 32), dtype=np.uint8)
kreplay.write_case(sys.argv[1], M, N, K, x=kreplay.capture.bf16_bits_from_f32(x), weight=w,
                   weight_scale=ws, scale_layout="N,K/32", layer="python.package")
'''
run([py, "-c", write, case], cwd=tmp)
rows = json.loads(run([kreplay, "replay", "--json", case]))["results"]
assert any(r["verdict"] == "PASS" for r in rows), rows
assert all(r["verdict"] in ("PASS", "UNSUPPORTED") for r in rows), rows
print(f"write_case: {case} replays, {len(rows)} rows")
