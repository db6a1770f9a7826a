#!/usr/bin/env python3
"""Per-call cost of the capture hook on a decorated entry point (CPU, torch tensors):

    /usr/bin/python3 scripts/capture/bench_overhead.py [--calls N] [--dump-shape M,N,K]

  bare        the undecorated function
  off         decorated, KREPLAY_CAPTURE_DIR unset
  on, skip    decorated, on, the call not selected (another N:K)
  on, warm-up decorated, on, inside warmup()
  dump        one selected call that writes a .pt (median of a few, each a fresh key)

The function itself returns a preallocated tensor, so the numbers are the hook's own."""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kreplay_capture as kc  # noqa: E402


def per_call(fn, args, n):
    t = time.perf_counter()
    for _ in range(n):
        fn(*args)
    return (time.perf_counter() - t) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--dump-shape", default="64,2048,2048")
    a = ap.parse_args()
    M, N, K = (int(v) for v in a.dump_shape.split(","))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(M, K, generator=g).to(torch.bfloat16)
    w = torch.randint(0, 256, (N, K // 2), generator=g, dtype=torch.uint8)
    ws = torch.randint(118, 131, (K // 32, N), generator=g, dtype=torch.uint8)
    wr = ws.max(dim=0).values
    y = torch.zeros(M, N, dtype=torch.bfloat16)

    def bare(x, w, ws, wr):
        return y
    deco = kc.capture_linear(kind="mxfp4_linear")(bare)
    args = (x, w, ws, wr)
    with tempfile.TemporaryDirectory() as d:
        kc.configure(environ={})
        res = {"bare": per_call(bare, args, a.calls), "off": per_call(deco, args, a.calls)}
        kc.configure(directory=d, environ={}, nk={(1, 32)}, stderr=open(os.devnull, "w"))
        res["on, skip"] = per_call(deco, args, a.calls // 4)
        c = kc.configure(directory=d, environ={}, max_files=1000, stderr=open(os.devnull, "w"))
        with c.warmup():
            res["on, warm-up"] = per_call(deco, args, a.calls // 4)
        times = []
        for i in range(7):
            t = time.perf_counter()
            p = c.maybe_capture(f"bench.{i}", x=x, weight=w, weight_scale=ws, weight_ref=wr,
                                out=y, kernel_path="radiance::mxfp4_linear")
            times.append(time.perf_counter() - t)
            assert p
        res[f"dump M={M} N={N} K={K} ({os.path.getsize(p)} bytes)"] = statistics.median(times)
        kc.configure(environ={})
    print(f"torch {torch.__version__}, {a.calls} calls")
    for k, v in res.items():
        print(f"  {k:<44} {v * 1e6:10.2f} us/call")


if __name__ == "__main__":
    main()
