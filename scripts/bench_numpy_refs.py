#!/usr/bin/python3
"""Plain numpy references for the end-to-end benchmark (see tests/bench/README.md).

For every case file given, computes the references kreplay computes, the way
the MXFP4 dispatch's _exact_ref does: E2M1 table fancy-indexed by the weight
codes, times pow(2, scale - 127) repeated 32 times along K, chunks of 2048
rows of W, then an fp32 matmul:

  R_source          = x @ W^T                      (once per case, when x exists)
  R_exact[kernel]   = A_kernel @ W^T               (A: the operands the kernel consumed,
                                                    read from kreplay's --save-outputs file)

Only that (reading the case and the kernel operands, dequant, matmul) is
timed.  Then, untimed, rel_fro(out_kernel, R) over finite pairs in fp64 is
compared with the rel_fro kreplay reported in its --json results, to 3
significant digits.

usage: bench_numpy_refs.py SAVED_OUTPUTS.h5 RESULTS.json CASE.h5...
prints: "NUMPY_SECONDS <t>", "AGREE <n_agree> <n_compared>", and any disagreement.

usage: bench_numpy_refs.py --dispatch CASE.h5
  the whole of what the dispatch's _exact_ref does for one W4A8 case, nothing
  read from kreplay: vLLM per-token fp8 quant of x (amax / 448 with the
  1/(448*512) floor, x / s rounded to e4m3fn, RNE, saturating), then R_exact
  on the dequantized operands and R_source on x (fancy-index dequant, 2048-row
  chunks, fp32 matmul).  prints "NUMPY_SECONDS <t>" (all of it, the read
  included)."""
import json
import os
import sys
import time

import h5py
import numpy as np

E2M1 = np.array([0., .5, 1., 1.5, 2., 3., 4., 6., -0., -.5, -1., -1.5, -2., -3., -4., -6.],
                dtype=np.float32)


def fp8_table(fmt):
    t = np.empty(256, dtype=np.float32)
    bias = 7 if fmt == "e4m3fn" else 8
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        if fmt == "e4m3fn" and e == 15 and m == 7:
            v = np.nan
        elif fmt != "e4m3fn" and b == 0x80:
            v = np.nan
        elif e == 0:
            v = m / 8.0 * 2.0 ** (1 - bias)
        else:
            v = (1 + m / 8.0) * 2.0 ** (e - bias)
        t[b] = -v if s else v
    return t


def attr(obj, key, default):
    v = obj.attrs.get(key, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def unpermute_w(packed, N, K):
    nt, ks = N // 16, K // 16
    return (packed.reshape(nt, ks, 2, 16, 4).transpose(0, 3, 1, 2, 4)
            .reshape(N, K // 2))


def load_weight(f):
    """Packed [N, K/2] checkpoint order and scales [N, K/32]."""
    w = f["weight"][()]
    if attr(f["weight"], "order", "checkpoint") == "fragment":
        N, K = w.shape[0], w.shape[1] * 2
        w = unpermute_w(w, N, K)
    s = f["weight_scale"][()]
    if attr(f["weight_scale"], "layout", "N,K/32") == "K/32,N":
        s = s.T
    return w, s


def ref_matmul(A, w, s, chunk=2048):
    """_exact_ref: fancy-index dequant per chunk of rows, then A @ w.T in fp32."""
    N, K = w.shape[0], w.shape[1] * 2
    C = np.empty((A.shape[0], N), dtype=np.float32)
    for n0 in range(0, N, chunk):
        wc, sc = w[n0:n0 + chunk], s[n0:n0 + chunk]
        codes = np.stack([wc & 0x0F, (wc >> 4) & 0x0F], -1).reshape(wc.shape[0], K)
        W = E2M1[codes] * np.repeat(np.power(np.float32(2.0), sc.astype(np.float32) - 127.0),
                                    32, axis=1)
        C[:, n0:n0 + chunk] = A @ W.T
    return C


def load_x(f):
    if "x" not in f:
        return None
    x = f["x"][()]
    if x.dtype == np.uint16:
        x = (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32)


def act_values(g):
    codes = g["act_codes"][()] if "act_codes" in g else None
    kind = attr(g, "act_kind", "")
    if kind == "values" or codes is None:
        return g["act_values"][()].astype(np.float32)
    if kind == "fp8_per_token":
        t = fp8_table(attr(g, "act_format", "e4m3fn"))
        return t[codes] * g["act_scale"][()].reshape(-1, 1).astype(np.float32)
    # mxfp4_per_block: one e2m1 code per byte, e8m0 per 32-block [M, K/32]
    sc = np.power(np.float32(2.0), g["act_scale"][()].astype(np.float32) - 127.0)
    return E2M1[codes & 0x0F] * np.repeat(sc, 32, axis=1)


def rel_fro(out_bits, ref):
    out = (out_bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    ref = ref.astype(np.float64)
    ok = np.isfinite(out) & np.isfinite(ref)
    d = out[ok] - ref[ok]
    nr = np.sqrt(np.sum(ref[ok] ** 2))
    return float(np.sqrt(np.sum(d * d)) / nr) if nr > 0 else float("nan")


def same3(a, b):
    if np.isnan(a) and np.isnan(b):
        return True
    return float("%.3g" % a) == float("%.3g" % b)


def e4m3fn_rne(v):
    """v (fp32, |v| <= 448 or NaN) rounded to the nearest e4m3fn value, ties to even."""
    a = np.abs(v)
    e = np.floor(np.log2(np.maximum(a, np.float32(2.0 ** -6))))
    quantum = np.power(np.float32(2.0), e - 3).astype(np.float32)   # subnormals: 2^-9
    return np.copysign(np.minimum(np.round(a / quantum) * quantum, np.float32(448.0)),
                       v).astype(np.float32)


def dispatch(path):
    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        w, s = load_weight(f)
        x = load_x(f)
    amax = np.max(np.abs(x), axis=1, keepdims=True)
    scale = np.maximum(amax / np.float32(448.0), np.float32(1.0 / (448.0 * 512.0)))
    q = e4m3fn_rne(np.clip(x / scale, -448.0, 448.0).astype(np.float32))
    a = (q * scale).astype(np.float32)
    r_exact = ref_matmul(a, w, s)
    r_source = ref_matmul(x, w, s)
    t = time.perf_counter() - t0
    assert np.isfinite(r_exact).any() and np.isfinite(r_source).any()
    print(f"NUMPY_SECONDS {t:.4f}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--dispatch":
        dispatch(sys.argv[2])
        return
    saved, results, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(results) as fp:
        rows = json.load(fp)["results"]
    reported = {(r["case_name"], r["kernel"], r["reference"]): r["metrics"]["rel_fro"]
                for r in rows if r.get("metrics") and r["metrics"].get("rel_fro") is not None}
    t_total, agree, compared, bad = 0.0, 0, 0, []
    outs = h5py.File(saved, "r")
    for path in cases:
        name = os.path.basename(path)[:-3]
        t0 = time.perf_counter()
        with h5py.File(path, "r") as f:
            w, s = load_weight(f)
            x = load_x(f)
        refs = {}
        if x is not None:
            refs["R_source"] = ref_matmul(x, w, s)
        kernels = list(outs[name].keys()) if name in outs else []
        acts = {k: act_values(outs[name][k]) for k in kernels}
        for k in kernels:
            refs[("R_exact", k)] = ref_matmul(acts[k], w, s)
        t_total += time.perf_counter() - t0
        for k in kernels:                       # untimed: the comparison
            out = outs[name][k]["out"][()]
            for key in ("R_exact", "R_source"):
                ref = refs.get(("R_exact", k)) if key == "R_exact" else refs.get("R_source")
                if ref is None or (name, k, key) not in reported:
                    continue
                mine, theirs = rel_fro(out, ref), reported[(name, k, key)]
                compared += 1
                if same3(mine, theirs):
                    agree += 1
                else:
                    bad.append(f"DIFF {name} {k} {key}: numpy {mine:.6g} kreplay {theirs:.6g}")
    for b in bad:
        print(b)
    print(f"NUMPY_SECONDS {t_total:.4f}")
    print(f"AGREE {agree} {compared}")


if __name__ == "__main__":
    main()
