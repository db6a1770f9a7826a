"""The capture hook as a serve runs it: real torch.save dumps (torch on the CPU), vLLM's
warm-ups, the W4A4 route, every dispatch entry point, provenance, graph mode.

usage: capture_serve_test.py --kreplay KREPLAY_BINARY --tmp DIR      (exit 77 without torch)

vLLM is not installed here: a stub of the few names the hook reads (vllm.forward_context's
ForwardContext with attn_metadata and cudagraph_runtime_mode, get/set_forward_context,
vllm.config.get_current_vllm_config, the TP rank) stands in, registered in sys.modules as a
serve would have them.  The stand-in dispatch computes its outputs independently of kreplay
(numpy fp8 / MXFP4 quantizers written from docs/NUMERICS.md, fp32 matmul), so the replay judges
the hook's files, not the hook's arithmetic.
"""
import argparse
import enum
import io
import json
import os
import subprocess
import sys
import types

from capture_test_env import HERE, capture_hook, require

np, torch = require("capture_serve_test", "numpy", "torch")
kc = capture_hook()
# The demo's vllm.forward_context stand-in (capture_hook put scripts/capture on the path).
import graph_demo  # noqa: E402

E2M1 = np.array([0., .5, 1., 1.5, 2., 3., 4., 6.], dtype=np.float64)


# ---- a stub of the vLLM names the hook reads -------------------------------------------------

class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2


class ForwardContext:
    def __init__(self, attn_metadata, mode=CUDAGraphMode.PIECEWISE):
        self.attn_metadata = attn_metadata
        self.cudagraph_runtime_mode = mode
        self.batch_descriptor = ("bd",)


def install_vllm_stub():
    vllm = types.ModuleType("vllm")
    vllm.__version__ = "0.0.0+stub"
    fc = graph_demo.forward_context_stub(ForwardContext, CUDAGraphMode.PIECEWISE)
    runner = types.ModuleType("vllm.v1.worker.gpu_model_runner")   # imported the name
    runner.set_forward_context = fc.set_forward_context
    cfg = types.ModuleType("vllm.config")
    conf = types.SimpleNamespace(
        model_config=types.SimpleNamespace(enforce_eager=False),
        compilation_config=types.SimpleNamespace(cudagraph_mode=CUDAGraphMode.PIECEWISE,
                                                 cudagraph_capture_sizes=[1, 2, 4, 8, 16],
                                                 max_cudagraph_capture_size=16))
    cfg.get_current_vllm_config = lambda: conf
    ps = types.ModuleType("vllm.distributed.parallel_state")
    ps.get_tensor_model_parallel_rank = lambda: 1
    ext = types.ModuleType("radiance_mxfp4_fp8")
    ext.__file__ = "/opt/radiance/radiance_mxfp4_fp8.cpython-312-x86_64-linux-gnu.so"
    for m in (vllm, fc, runner, cfg, ps, ext):
        sys.modules[m.__name__] = m
    return fc, runner


# ---- the stand-in dispatch's arithmetic (numpy, from docs/NUMERICS.md) ------------------

def e4m3fn_values():
    v = np.zeros(128)
    for b in range(127):
        e, m = b >> 3, b & 7
        v[b] = m * 2.0 ** -9 if e == 0 else (8 + m) * 2.0 ** (e - 10)
    return v[:127]


POS_E4M3 = e4m3fn_values()


def vllm_fp8_quant(x):
    """Per-token e4m3fn: s = max(amax/448, 1/(448*512)), q = RNE(clamp(x/s)); codes, scale."""
    x = x.astype(np.float32)
    s = np.maximum(np.abs(x).max(1) / np.float32(448), np.float32(1 / (448 * 512)))
    s = s.astype(np.float32)
    r = np.clip(x / s[:, None], -448, 448).astype(np.float32)
    a = np.abs(r).astype(np.float64)
    e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1))), -6)
    step = 2.0 ** (e - 3)
    q = np.rint(a / step) * step
    codes = np.searchsorted(POS_E4M3, q).astype(np.uint8)
    assert np.all(POS_E4M3[codes] == q)
    codes |= np.where(np.signbit(r), 0x80, 0).astype(np.uint8)
    return codes, s


def fp8_decode(codes):
    v = POS_E4M3[codes & 0x7F]
    return np.where(codes & 0x80, -v, v)


def mxfp4_quant_aiter(x):
    """aiter-even MXFP4 of activations (docs/NUMERICS.md), per 32-block: dequantized values."""
    M, K = x.shape
    xb = x.astype(np.float32).reshape(M, K // 32, 32)
    amax = np.abs(xb).max(2).astype(np.float32)
    a = ((amax.view(np.uint32).astype(np.uint64) + 0x200000) & 0xFF800000).astype(np.uint32)
    a = a.view(np.float32).astype(np.float64)
    e = np.clip(np.floor(np.log2(np.where(a > 0, a, 2.0 ** -127))) - 2, -127, 127)
    y = xb / 2.0 ** e[..., None]
    ay = np.minimum(np.abs(y), 6)
    d = np.abs(ay[..., None] - E2M1)
    best = d.min(-1, keepdims=True)
    cand = d == best
    even = cand & (np.arange(8) % 2 == 0)
    idx = np.where(even.any(-1), even.argmax(-1), cand.argmax(-1))
    return (np.where(y < 0, -1, 1) * E2M1[idx] * 2.0 ** e[..., None]).reshape(M, K)


def dequant_w(weight, ws_kn, N, K):
    codes = np.stack([weight & 0xF, weight >> 4], -1).reshape(N, K)
    v = E2M1[codes & 7] * np.where(codes & 8, -1, 1)
    return v * 2.0 ** (ws_kn.T.astype(np.float64) - 127).repeat(32, 1)


def bf16(a):
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(torch.bfloat16)


def f32(t):
    return t.float().numpy()


# ---- the stand-in entry points, decorated as the dispatch would be ---------------------------

MIN_M = 8


@kc.capture_linear(kind="mxfp4_linear")
def mxfp4_linear(x, weight, weight_scale, weight_ref):
    N, K = weight.shape[0], x.shape[1]
    w = dequant_w(weight.numpy(), weight_scale.numpy(), N, K)
    if weight_ref.numel() == 1 or x.shape[0] <= MIN_M:            # aiter's W4A4 route
        return bf16(mxfp4_quant_aiter(f32(x)) @ w.T)
    q, s = vllm_fp8_quant(f32(x))
    return bf16((fp8_decode(q) * s[:, None].astype(np.float64)) @ w.T)


@kc.capture_linear(kind="mxfp4_linear_ar")
def mxfp4_linear_ar(x, weight, weight_scale, weight_ref):
    return mxfp4_linear.__wrapped__(x, weight, weight_scale, weight_ref)


@kc.capture_linear(kind="mxfp4_linear_pq")
def mxfp4_linear_pq(x_fp8, x_scale, weight, weight_scale, weight_ref):
    N, K = weight.shape[0], x_fp8.shape[1]
    w = dequant_w(weight.numpy(), weight_scale.numpy(), N, K)
    return bf16((fp8_decode(x_fp8.numpy()) * x_scale.numpy()[:, None].astype(np.float64)) @ w.T)


@kc.capture_linear(kind="mxfp4_linear_pqp")
def mxfp4_linear_pqp(a, x_scale, weight, weight_scale, weight_ref, M, pb1, pb2):
    N, K = weight.shape[0], a.shape[2]
    w = dequant_w(weight.numpy(), weight_scale.numpy(), N, K)
    out = np.zeros((M, N))
    for p, (lo, hi) in enumerate(((0, pb1), (pb1, pb2), (pb2, N))):
        xp = fp8_decode(a[p].numpy()) * x_scale[p].numpy()[:, None].astype(np.float64)
        out[:, lo:hi] = xp @ w[lo:hi].T
    return bf16(out)


@kc.capture_linear(kind="skinny_gemm")
def skinny_gemm(x, weight):
    if not 6 <= x.shape[0] <= 64:
        return None                                          # declined: not the skinny path
    return bf16(f32(x).astype(np.float64) @ f32(weight).astype(np.float64).T)


def operands(rng, M, N, K, ref_len=None):
    x = bf16(rng.standard_normal((M, K)) * 2 + 0.01)
    weight = torch.from_numpy(rng.integers(1, 256, (N, K // 2), dtype=np.uint8))
    ws = torch.from_numpy(rng.integers(118, 131, (K // 32, N), dtype=np.uint8))    # [K/32, N]
    wref = (torch.from_numpy(ws.numpy().max(0)) if ref_len is None
            else torch.zeros(ref_len, dtype=torch.uint8))
    return x, weight, ws, wref


# ---- the test ---------------------------------------------------------------------------------

def run(kreplay, *args):
    r = subprocess.run([kreplay, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kreplay", required=True)
    ap.add_argument("--tmp", required=True)
    a = ap.parse_args()
    fc, runner = install_vllm_stub()
    d = os.path.join(a.tmp, "serve")
    os.makedirs(d, exist_ok=True)
    err = io.StringIO()
    env = {"RADIANCE_MXFP4_W4A8": "1", "RADIANCE_MXFP4_W4A8_MIN_M": str(MIN_M),
           "KREPLAY_CAPTURE_ARM_AFTER": "1", "KREPLAY_CAPTURE_MODEL": "stand-in"}
    c = kc.configure(directory=d, environ=env, stderr=err, max_files=16)
    assert c.fmt == "pt" and c.arm_after == 1
    rng = np.random.default_rng(2026)
    N, K = 64, 256

    # 1. vLLM's profile run and dummy warm-ups: a forward context without attention metadata,
    #    on all-equal activations that no dump may contain.
    ones = torch.ones(12, K, dtype=torch.bfloat16)
    _, w0, ws0, r0 = operands(rng, 12, N, K)
    with fc.set_forward_context(None):
        for m in (12, 4):
            mxfp4_linear(ones[:m], w0, ws0, r0)
    with kc.warmup():                                     # and an explicit warm-up
        mxfp4_linear(ones, w0, ws0, r0)
    assert os.listdir(d) == [] and c.skipped_warmup == 3, (os.listdir(d), c.skipped_warmup)
    # 2. the first real step: before the arm point
    with fc.set_forward_context({"layer": "meta"}):
        mxfp4_linear(*operands(rng, 12, N, K))
    assert os.listdir(d) == [] and c.skipped_unarmed == 1 and c.steps == 1
    # 3. the second real step: every entry point, the W4A4 route among them
    calls = {}
    with fc.set_forward_context({"layer": "meta"}):
        calls["w4a4"] = operands(rng, 4, N, K)
        mxfp4_linear(*calls["w4a4"])                      # M <= MIN_M: aiter's W4A4
        calls["w4a8"] = operands(rng, 12, N, K)
        mxfp4_linear(*calls["w4a8"])                      # W4A8
        x, w, ws, wr = operands(rng, 16, N, K, ref_len=2)
        mxfp4_linear_ar(x, w, ws, wr)                     # fused all-reduce, per-block route
        q, s = vllm_fp8_quant(f32(x))
        mxfp4_linear_pq(torch.from_numpy(q), torch.from_numpy(s), w, ws, wr)
        parts = [vllm_fp8_quant(f32(x) * (1 + p)) for p in range(3)]
        a3 = torch.from_numpy(np.stack([p[0] for p in parts]))
        s3 = torch.from_numpy(np.stack([p[1] for p in parts]))
        mxfp4_linear_pqp(a3, s3, w, ws, wr, 16, 16, 48)
        wb = bf16(rng.standard_normal((96, K)) * 0.05)
        skinny_gemm(x[:2], wb)                            # declined (M < 6): nothing
        skinny_gemm(x[:8], wb)
    files = sorted(os.listdir(d))
    log = err.getvalue()
    assert len(files) == 6, (files, log)
    assert all(f.endswith(".pt") for f in files), files
    assert "CUDA graphs are on" in log and "M <= 16" in log, log
    for f in files:                                       # one mention of N and K
        assert f.count(f"N{N}_") + f.count("N96_") == 1 and f.count(f"K{K}_") == 1, f
        assert "N_" not in f, f
    by_kind = {k: [f for f in files if f.startswith(f"case_{k}_N")]
               for k in ("mxfp4_linear", "mxfp4_linear_ar", "mxfp4_linear_pq",
                         "mxfp4_linear_pqp", "skinny_gemm")}
    assert [len(v) for v in by_kind.values()] == [2, 1, 1, 1, 1], by_kind

    # 4. what torch.save wrote: load it back with torch itself
    routes = {}
    for f in files:
        dd = torch.load(os.path.join(d, f))
        routes[f] = dd["route"]
        for k in ("kernel_path", "layer", "model", "capture_time", "capture_time_source",
                  "env_flags", "versions", "gpu_arch", "extension_path"):
            assert isinstance(dd.get(k), str) and dd[k], (f, k, dd.get(k))
        assert dd["tp_rank"] == 1 and dd["gpu_arch"] == "cpu", f
        assert f"torch={torch.__version__}" in dd["versions"] and "vllm=0.0.0+stub" in \
            dd["versions"], dd["versions"]
        assert "RADIANCE_MXFP4_W4A8_MIN_M=8" in dd["env_flags"]
        assert dd["capture_time_source"] == "recorded"
        if not f.startswith("case_skinny"):
            assert dd["extension_path"] == sys.modules["radiance_mxfp4_fp8"].__file__
            assert dd["scale_layout"] == "K/32,N" and dd["weight_order"] == "checkpoint"
        assert not torch.equal(dd["x"] if "x" in dd else dd["x_fp8"],
                               ones[:dd["M"]]), "a warm-up was dumped"
    m_of = {f: int(f.split("_M")[1].split("_")[0]) for f in files}
    w4a4 = [f for f in by_kind["mxfp4_linear"] if m_of[f] == 4][0]
    w4a8 = [f for f in by_kind["mxfp4_linear"] if m_of[f] == 12][0]
    assert routes[w4a4] == "w4a4" and routes[w4a8] == "w4a8", routes
    assert routes[by_kind["mxfp4_linear_ar"][0]] == "w4a8"
    assert routes[by_kind["mxfp4_linear_pq"][0]] == "w4a8"
    assert routes[by_kind["mxfp4_linear_pqp"][0]] == "partitioned"
    assert routes[by_kind["skinny_gemm"][0]] == "bf16_skinny"
    pqp = torch.load(os.path.join(d, by_kind["mxfp4_linear_pqp"][0]))
    assert tuple(pqp["x_fp8_parts"].shape) == (3, 16, K) and pqp["partition_bounds"] == "16,48"
    assert torch.equal(pqp["x_fp8_parts"][0], pqp["x_fp8"])

    # 5. kreplay reads every field: import to HDF5 and compare with what torch.load saw
    import h5py
    for f in files:
        src = os.path.join(d, f)
        h5 = os.path.join(a.tmp, f + ".h5")
        rc, out, e = run(a.kreplay, "import", src, "-o", h5)
        assert rc == 0, (f, out, e)
        dd = torch.load(src)
        with h5py.File(h5, "r") as hf:
            at = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in hf.attrs.items()}
            for k in ("route", "kernel_path", "layer", "model", "capture_time",
                      "capture_time_source", "env_flags", "versions", "gpu_arch",
                      "extension_path"):
                assert at.get(k) == dd[k], (f, k, at.get(k), dd[k])
            assert at["tp_rank"] == "1"
            if "x" in dd:
                assert np.array_equal(hf["x"][()], dd["x"].view(torch.int16).numpy().view(
                    np.uint16))
            assert np.array_equal(hf["out"][()], dd["out"].view(torch.int16).numpy().view(
                np.uint16))
    # 6. replay: the W4A8 and skinny dumps pass; the W4A4 one carries its route
    for f in files:
        if f == w4a4 or f.startswith("case_mxfp4_linear_pqp"):
            continue
        rc, out, e = run(a.kreplay, "replay", "--json", os.path.join(d, f))
        assert rc == 0, (f, out[-3000:], e)
        rows = json.loads(out)["results"]
        rec = [r for r in rows if str(r.get("kernel", "")).startswith("recorded.out")]
        assert rec and all(r["verdict"] == "PASS" for r in rec), (f, rec)
    # The W4A4 dump's out is aiter's kind of output: as far from R_source as kreplay's own
    # w4a4.aiter model (judging it as W4A4 is the route attribute's job, for the reader).
    rc, out, e = run(a.kreplay, "replay", "--json", "--refs", "source", os.path.join(d, w4a4))
    rows = json.loads(out)["results"]
    rel = {r["kernel"]: r["metrics"]["rel_fro"] for r in rows
           if r["kernel"] in ("recorded.out", "w4a4.aiter", "w4a8.perblock")}
    assert abs(rel["recorded.out"] - rel["w4a4.aiter"]) < 0.02 * rel["w4a4.aiter"], rel
    assert rel["recorded.out"] > 3 * rel["w4a8.perblock"], rel
    # Judged by the route it came from, it passes against every reference.
    rc, out, e = run(a.kreplay, "replay", "--json", os.path.join(d, w4a4))
    rows = json.loads(out)["results"]
    rec = [r for r in rows if str(r.get("kernel", "")).startswith("recorded.out")
           and str(r.get("reference", "")).startswith("R_")]
    assert rec and all(r["verdict"] == "PASS" and "W4A4 route" in r["note"] for r in rec), (rec, e)
    rc, out, e = run(a.kreplay, "inspect", os.path.join(d, w4a4))
    assert rc == 0 and "route=w4a4 tp_rank=1 gpu_arch=cpu time=recorded" in out, (out, e)

    # 7. the eager window: the next real step's forward context loses its graph mode, in the
    #    module that imported set_forward_context too; warm-ups do not use it up.
    c2 = kc.Capture(directory=os.path.join(a.tmp, "eager"), environ={}, stderr=io.StringIO())
    assert c2.eager_window(1)
    with runner.set_forward_context(None):
        assert fc.get_forward_context().cudagraph_runtime_mode == CUDAGraphMode.PIECEWISE
    with runner.set_forward_context({}):
        assert fc.get_forward_context().cudagraph_runtime_mode == CUDAGraphMode.NONE
        assert fc.get_forward_context().batch_descriptor is None
    with fc.set_forward_context({}):
        assert fc.get_forward_context().cudagraph_runtime_mode == CUDAGraphMode.PIECEWISE

    # 8. HDF5 when asked for
    c3 = kc.Capture(directory=os.path.join(a.tmp, "h5"), environ=env, fmt="h5", arm_after=0,
                    stderr=io.StringIO())
    p = c3.maybe_capture(None, *calls["w4a8"][:1], weight=calls["w4a8"][1],
                         weight_scale=calls["w4a8"][2], weight_ref=calls["w4a8"][3],
                         kernel_path="radiance::mxfp4_linear")
    assert p and p.endswith(".h5"), p
    with h5py.File(p, "r") as hf:
        assert hf.attrs["route"] == "w4a8" and hf.attrs["capture_time_source"] == "recorded"
    rc, out, e = run(a.kreplay, "replay", "--json", p)
    assert rc == 0, (out[-2000:], e)
    # 9. MI300's fp8 (e4m3fnuz codes, as uint8: torch 1.13 has no float8) survives the .pt
    c4 = kc.Capture(directory=os.path.join(a.tmp, "fnuz"), environ=env, arm_after=0,
                    stderr=io.StringIO())
    x, w, ws, wr = calls["w4a8"]
    q, s = vllm_fp8_quant(f32(x))
    p = c4.maybe_capture(None, x_fp8=torch.from_numpy(q), x_scale=torch.from_numpy(s),
                         weight=w, weight_scale=ws, weight_ref=wr, x_fp8_format="e4m3fnuz",
                         kernel_path="radiance::mxfp4_linear_pq")
    h5 = p + ".h5"
    rc, out, e = run(a.kreplay, "import", p, "-o", h5)
    assert rc == 0, (out, e)
    with h5py.File(h5, "r") as hf:
        assert hf["x_fp8"].attrs["format"] == "e4m3fnuz"
        assert np.array_equal(hf["x_fp8"][()], q)
    kc.configure(environ={})
    sizes = ", ".join(f"{f} ({os.path.getsize(os.path.join(d, f))} B, {routes[f]})" for f in files)
    print(f"capture serve test: ok: {c.skipped_warmup} warm-up calls and {c.skipped_unarmed} "
          f"unarmed skipped; {len(files)} dumps: {sizes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
