#!/usr/bin/env python3
"""The short torch script a kernel author would write instead of kreplay: the comparison
kreplay's GPU path is measured against (scripts/gpu_check.sh, "sweep"), not a test.

For each W4A8 case (kreplay's HDF5 schema), on the GPU, what the MXFP4 dispatch's
_exact_ref does around one kernel:
  - h5py read of x, the packed MXFP4 weight and its e8m0 scales;
  - per-token fp8 quant of x (vLLM's: amax / 448 with the 1 / (448 * 512) floor, x / s
    clamped to +-448, rounded to e4m3fn);
  - LUT dequant of the weight (E2M1 table indexed by the codes, times 2^(E - 127));
  - a W4A8 stand-in kernel: the dequantized activations and weight in bf16, one matmul,
    bf16 out;
  - R_exact (fp32 on the quantized activations) and R_source (fp32 on x), TF32 off;
  - rel_fro, non-finite counts and the bf16 ULP histogram of the output against both.

    torch_peer.py CASE.h5...      one pass over the cases, then a second, warm, pass: prints
                                  "PEER_PROCESS_SECONDS <t>" (the first pass and everything
                                  before it: the interpreter's start, torch's import, CUDA's
                                  start; from KR_PEER_T0 when the caller sets it), then per
                                  case of the warm pass "PEER_CASE <name> <M> <seconds> ..."
                                  and "PEER_WARM_SECONDS <sum>".
"""
import os
import sys
import time

T_START = float(os.environ.get("KR_PEER_T0", time.time()))

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

E2M1 = [0., .5, 1., 1.5, 2., 3., 4., 6., -0., -.5, -1., -1.5, -2., -3., -4., -6.]
BINS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]


def read_case(path):
    with h5py.File(path, "r") as f:
        x = f["x"][()]
        if x.dtype == np.uint16:       # bf16 bits
            x = (x.astype(np.uint32) << 16).view(np.float32)
        w = f["weight"][()]
        s = f["weight_scale"][()]
        layout = f["weight_scale"].attrs.get("layout", b"N,K/32")
        layout = layout.decode() if isinstance(layout, bytes) else str(layout)
        order = f["weight"].attrs.get("order", b"checkpoint")
        order = order.decode() if isinstance(order, bytes) else str(order)
    if order != "checkpoint":
        raise SystemExit(f"{path}: the peer reads checkpoint-order weights only")
    if layout == "K/32,N":
        s = np.ascontiguousarray(s.T)
    return x, w, s


def quant_fp8(x):
    amax = x.abs().amax(dim=1, keepdim=True)
    scale = torch.clamp(amax / 448.0, min=1.0 / (448.0 * 512.0))
    q = torch.clamp(x / scale, -448.0, 448.0).to(torch.float8_e4m3fn)
    return q, scale


def dequant_weight(w, s, lut):
    lo = (w & 0x0F).long()
    hi = (w >> 4).long()
    codes = torch.stack([lo, hi], dim=-1).reshape(w.shape[0], -1)          # [N, K]
    scale = torch.exp2(s.float() - 127.0).repeat_interleave(32, dim=1)     # [N, K]
    return lut[codes] * scale


def ulp_histogram(out, ref):
    """bf16 ULP distances of out against ref rounded to bf16, and the non-finite pairs."""
    a = out.view(torch.int16).int()
    b = ref.to(torch.bfloat16).view(torch.int16).int()
    oa = torch.where(a < 0, -(a & 0x7FFF), a)
    ob = torch.where(b < 0, -(b & 0x7FFF), b)
    finite = torch.isfinite(out.float()) & torch.isfinite(ref)
    d = (oa - ob).abs()[finite]
    hist = torch.bucketize(d, torch.tensor(BINS, device=d.device, dtype=d.dtype))
    return torch.bincount(hist, minlength=len(BINS) + 1), int((~finite).sum())


def rel_fro(out, ref):
    o, r = out.double(), ref.double()
    m = torch.isfinite(o) & torch.isfinite(r)
    return float(torch.linalg.norm((o - r)[m]) / torch.linalg.norm(r[m]))


def one_case(path, dev, lut):
    x_np, w_np, s_np = read_case(path)
    x = torch.from_numpy(x_np).to(dev)
    w = torch.from_numpy(w_np).to(dev)
    s = torch.from_numpy(s_np).to(dev)
    q, scale = quant_fp8(x)
    a = q.float() * scale                                       # the kernel's operands
    W = dequant_weight(w, s, lut)
    out = (a.to(torch.bfloat16) @ W.to(torch.bfloat16).T)       # the stand-in kernel
    r_exact = a @ W.T
    r_source = x @ W.T
    stats = []
    for ref in (r_exact, r_source):
        hist, nonfinite = ulp_histogram(out, ref)
        stats.append((rel_fro(out.float(), ref), nonfinite, hist.cpu()))
    torch.cuda.synchronize()
    return x.shape[0], stats


def main():
    paths = sys.argv[1:]
    if not paths:
        raise SystemExit(__doc__)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    lut = torch.tensor(E2M1, device=dev)
    for p in paths:                   # the first pass: CUDA's start, cuBLAS, the page cache
        one_case(p, dev, lut)
    print(f"PEER_PROCESS_SECONDS {time.time() - T_START:.4f}", flush=True)
    total = 0.0
    for p in paths:
        t0 = time.time()
        M, stats = one_case(p, dev, lut)
        dt = time.time() - t0
        total += dt
        print(f"PEER_CASE {os.path.basename(p)} {M} {dt:.4f} rel_fro {stats[0][0]:.4g} {stats[1][0]:.4g}",
              flush=True)
    print(f"PEER_WARM_SECONDS {total:.4f}")


if __name__ == "__main__":
    main()
