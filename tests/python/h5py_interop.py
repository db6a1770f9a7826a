"""Schema-v1 files are plain HDF5: h5py reads kreplay's files, and kreplay
replays a case written by h5py alone (no kreplay code involved).

usage: h5py_interop.py KREPLAY_BINARY SAMPLE_CASE TMP_DIR
"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np

kreplay, sample, tmp = sys.argv[1:4]

with h5py.File(sample, "r") as f:
    M, N, K = (int(f.attrs[k]) for k in ("M", "N", "K"))
    schema = f.attrs["schema"]
    schema = schema.decode() if isinstance(schema, bytes) else schema
    assert schema == "kreplay.case/1", schema
    assert f["weight"].shape == (N, K // 2) and f["weight"].dtype == np.uint8
    layout = f["weight_scale"].attrs["layout"]
    layout = layout.decode() if isinstance(layout, bytes) else layout
    assert f["weight_scale"].shape == ((N, K // 32) if layout == "N,K/32" else (K // 32, N))
    assert f["x"].dtype == np.uint16 and f["x"].shape == (M, K)
    dt = f["x"].attrs["dtype"]
    assert (dt.decode() if isinstance(dt, bytes) else dt) == "bfloat16"
    assert f["x_fp8"].shape == (M, K) and f["x_scale"].shape[0] == M

rng = np.random.default_rng(5)
M, N, K = 5, 64, 256
x = rng.standard_normal((M, K)).astype(np.float32)
x_bf16 = (x.view(np.uint32) >> 16).astype(np.uint16)       # truncation is fine for a test input
weight = rng.integers(1, 256, size=(N, K // 2), dtype=np.uint8)
scales = rng.integers(118, 126, size=(N, K // 32), dtype=np.uint8)
path = os.path.join(tmp, "written_by_h5py.h5")
with h5py.File(path, "w") as f:
    f.attrs["schema"] = "kreplay.case/1"
    f.attrs["M"], f.attrs["N"], f.attrs["K"] = M, N, K
    f.attrs["layer"] = "h5py.interop"
    d = f.create_dataset("x", data=x_bf16)
    d.attrs["dtype"] = "bfloat16"
    f.create_dataset("weight", data=weight)
    s = f.create_dataset("weight_scale", data=scales)
    s.attrs["layout"] = "N,K/32"

out = subprocess.run([kreplay, "replay", "--json", path], capture_output=True, text=True)
assert out.returncode == 0, (out.returncode, out.stderr)
rows = json.loads(out.stdout)["results"]
kernels = sorted({(r["kernel"], r["reference"]) for r in rows})
assert ("w4a8.perblock", "R_exact") in kernels and ("w4a4.aiter", "R_source") in kernels, kernels
for r in rows:
    # Kernels that cannot take this case (no bf16 weight, M outside a band) say so.
    assert r["verdict"] in ("PASS", "UNSUPPORTED"), r
assert sum(r["verdict"] == "PASS" for r in rows) >= 4, rows
print("h5py interop: ok (%d rows)" % len(rows))
