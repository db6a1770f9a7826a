"""Tests of the capture hook (scripts/capture/kreplay_capture.py).

usage:
  capture_hook_test.py --kreplay KREPLAY_BINARY --tmp DIR    numpy+h5py tests, then replay the
                                                             written cases with kreplay; the
                                                             torch tests too when torch imports
  capture_hook_test.py --torch-only --out DIR                torch tests only (CPU, and CUDA with
                                                             a real graph capture when there is a
                                                             GPU); cases validated with h5py and
                                                             left in DIR for replay elsewhere
Exit 77 when numpy/h5py (or, with --torch-only, torch) is missing.
"""
import argparse
import io
import json
import os
import subprocess
import sys

from capture_test_env import HERE, capture_hook, require

h5py, np = require("capture_hook_test", "h5py", "numpy")
kc = capture_hook()

E2M1 = np.array([0., .5, 1., 1.5, 2., 3., 4., 6., -0., -.5, -1., -1.5, -2., -3., -4., -6.])


# ---------------------------------------------------------------------------------------------
# independent helpers: data, reference, schema check
# ---------------------------------------------------------------------------------------------

def fp8_decode(codes):
    c = codes.astype(np.int64)
    s = np.where(c & 0x80, -1.0, 1.0)
    e = (c >> 3) & 15
    m = c & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))
    return s * v


def make_operands(rng, M, N, K):
    """Random valid MXFP4 weight (packed bytes + e8m0 scales [K/32, N]), fp8 codes + scales,
    bf16 x; out/ref the exact fp32 result of the fp8 operands."""
    codes = rng.integers(0, 256, size=(M, K), dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x38                     # no NaN codes
    codes[:, 0] = 0x7E                                       # 448: each row's amax
    # Power-of-two scales with a 448 in every row: re-quantizing x per token (what kreplay does
    # for an x-only case) gives back exactly these codes, and x is exact in bf16.
    x_scale = (2.0 ** rng.integers(-12, -6, size=M)).astype(np.float32)
    weight = rng.integers(0, 256, size=(N, K // 2), dtype=np.uint8)
    ws_kn = rng.integers(118, 127, size=(K // 32, N), dtype=np.uint8)
    wref = ws_kn.max(axis=0).astype(np.uint8)
    xr = fp8_decode(codes) * x_scale[:, None]
    x = xr.astype(np.float32)
    x_bf16 = kc.bf16_bits_from_f32(x)
    nib = np.stack([weight & 0x0F, weight >> 4], -1).reshape(N, K)
    w = E2M1[nib] * np.repeat(2.0 ** (ws_kn.T.astype(np.float64) - 127.0), 32, axis=1)
    ref = (xr @ w.T).astype(np.float32)
    return dict(x=x_bf16, x_fp8=codes, x_scale=x_scale, weight=weight, weight_scale=ws_kn,
                weight_ref=wref, out=kc.bf16_bits_from_f32(ref), ref=ref)


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def validate_case(path):
    """Schema v1 (cases/SCHEMA.md) checked with h5py, independently of the writer."""
    with h5py.File(path, "r") as f:
        assert s(f.attrs["schema"]) == "kreplay.case/1", path
        M, N, K = (int(f.attrs[k]) for k in ("M", "N", "K"))
        for k in ("M", "N", "K"):
            assert f.attrs[k].dtype == np.int64, (k, f.attrs[k].dtype)
        assert M > 0 and N > 0 and K > 0 and K % 32 == 0
        for k in ("kernel_path", "layer", "model", "capture_time", "env_flags"):
            if k in f.attrs:
                assert isinstance(f.attrs[k], str), (k, type(f.attrs[k]))
        ct = s(f.attrs["capture_time"])
        assert len(ct) == 20 and ct[4] == "-" and ct[10] == "T" and ct.endswith("Z"), ct
        assert "x" in f or "x_fp8" in f
        if "x" in f:
            assert f["x"].shape == (M, K)
            if f["x"].dtype == np.uint16:
                assert s(f["x"].attrs["dtype"]) == "bfloat16"
            else:
                assert f["x"].dtype == np.float32
        assert ("x_fp8" in f) == ("x_scale" in f)
        if "x_fp8" in f:
            assert f["x_fp8"].dtype == np.uint8 and f["x_fp8"].shape == (M, K)
            assert s(f["x_fp8"].attrs.get("format", "e4m3fn")) in ("e4m3fn", "e4m3fnuz")
            assert f["x_scale"].dtype == np.float32 and f["x_scale"].shape == (M,)
        assert ("weight" in f) == ("weight_scale" in f)
        assert "weight" in f or "weight_bf16" in f
        if "weight" in f:
            assert f["weight"].dtype == np.uint8 and f["weight"].shape == (N, K // 2)
            order = s(f["weight"].attrs["order"])
            assert order in ("checkpoint", "fragment")
            lay = s(f["weight_scale"].attrs["layout"])
            assert f["weight_scale"].dtype == np.uint8
            assert f["weight_scale"].shape == ((N, K // 32) if lay == "N,K/32" else (K // 32, N))
        if "weight_ref" in f:
            assert f["weight_ref"].dtype == np.uint8 and f["weight_ref"].shape[0] in (N, 2, 1)
            assert f["weight_ref"].ndim == 1
        for k in ("out", "out_rerun", "aiter"):
            if k in f:
                assert f[k].dtype == np.uint16 and f[k].shape == (M, N)
                assert s(f[k].attrs["dtype"]) == "bfloat16"
        if "ref_recorded" in f:
            assert f["ref_recorded"].dtype == np.float32 and f["ref_recorded"].shape == (M, N)
        return dict(M=M, N=N, K=K, attrs={k: s(v) for k, v in f.attrs.items()},
                    order=s(f["weight"].attrs["order"]) if "weight" in f else None,
                    datasets=sorted(f.keys()))


class Poison:
    """Has a shape and nothing else: any value access (the selection must not do one)
    raises."""
    def __init__(self, *shape):
        self.shape = shape

    def __getattr__(self, name):
        raise AssertionError(f"selection touched a tensor value ({name})")

    def __array__(self, *a, **k):
        raise AssertionError("selection touched a tensor value (__array__)")


def no_files(d):
    return sorted(p for p in os.listdir(d) if p.endswith(".h5"))


# ---------------------------------------------------------------------------------------------
# numpy + h5py tests
# ---------------------------------------------------------------------------------------------

def numpy_tests(tmp):
    rng = np.random.default_rng(7)
    env = {"RADIANCE_MXFP4_W4A8": "1", "RADIANCE_MXFP4_WPERM": "0", "PATH": "/bin"}
    err = io.StringIO()
    d = os.path.join(tmp, "np")
    c = kc.Capture(fmt="h5", directory=d, nk="64:256,32:256", m_band="1-8", max_files=3,
                   max_bytes=1 << 20, model="unit-test-model", environ=env, stderr=err)
    kc.set_capture_probe(lambda: False)

    # Not selected: wrong (N,K), M outside the band.  Operands are poison: only shapes read.
    assert c.maybe_capture("l.nk", x=Poison(4, 512), weight=Poison(64, 256),
                           weight_scale=Poison(16, 64), weight_ref=Poison(64),
                           out=Poison(4, 64)) is None
    assert c.maybe_capture("l.m", x_fp8=Poison(9, 256), x_scale=Poison(9),
                           weight=Poison(64, 128), weight_scale=Poison(8, 64),
                           weight_ref=Poison(64), out=Poison(9, 64)) is None
    # Graph capture: selected by shape, but nothing is dumped, nothing touched.
    kc.set_capture_probe(lambda: True)
    assert c.maybe_capture("l.graph", x_fp8=Poison(4, 256), x_scale=Poison(4),
                           weight=Poison(64, 128), weight_scale=Poison(8, 64),
                           weight_ref=Poison(64), out=Poison(4, 64)) is None
    assert c.skipped_capturing == 1
    kc.set_capture_probe(lambda: False)
    assert no_files(d) == [], no_files(d)

    written = []
    # Case 1: the full mxfp4_linear_pq dump (x, x_fp8, scales, outputs, ref_recorded).
    o = make_operands(rng, 5, 64, 256)
    p = c.maybe_capture("model.layers.3.mlp.down_proj", x=o["x"], x_fp8=o["x_fp8"],
                        x_scale=o["x_scale"], weight=o["weight"], weight_scale=o["weight_scale"],
                        weight_ref=o["weight_ref"], out=o["out"], out_rerun=o["out"],
                        ref_recorded=o["ref"], kind="mxfp4_linear_pq")
    assert p and os.path.exists(p), p
    written.append(p)
    v = validate_case(p)
    assert (v["M"], v["N"], v["K"]) == (5, 64, 256)
    assert v["attrs"]["layer"] == "model.layers.3.mlp.down_proj"
    assert v["attrs"]["model"] == "unit-test-model"
    assert v["attrs"]["kernel_path"] == "radiance::mxfp4_linear"
    assert v["attrs"]["env_flags"] == "RADIANCE_MXFP4_W4A8=1\nRADIANCE_MXFP4_WPERM=0"
    assert v["order"] == "checkpoint"
    assert set(v["datasets"]) == {"x", "x_fp8", "x_scale", "weight", "weight_scale",
                                  "weight_ref", "out", "out_rerun", "ref_recorded"}, v
    with h5py.File(p, "r") as f:
        assert s(f["weight_scale"].attrs["layout"]) == "K/32,N"
        assert np.array_equal(f["x_fp8"][()], o["x_fp8"])
        assert np.array_equal(f["ref_recorded"][()], o["ref"])
        assert np.array_equal(f["weight_scale"][()], o["weight_scale"])
    # Same (layer, N, K, M) again: per-key limit 1.
    assert c.maybe_capture("model.layers.3.mlp.down_proj", x=o["x"], weight=o["weight"],
                           weight_scale=o["weight_scale"], out=o["out"]) is None
    # Case 2: the mxfp4_linear form (x only), scales given as [N, K/32], float32 out rounded.
    o2 = make_operands(rng, 3, 32, 256)
    p = c.maybe_capture("model.layers.4.self_attn.o_proj", x=o2["x"], weight=o2["weight"],
                        weight_scale=np.ascontiguousarray(o2["weight_scale"].T),
                        scale_layout="N,K/32", weight_ref=np.zeros(2, np.uint8), out=o2["ref"],
                        kind="mxfp4_linear_pq")
    assert p, err.getvalue()
    written.append(p)
    validate_case(p)
    with h5py.File(p, "r") as f:
        assert s(f["weight_scale"].attrs["layout"]) == "N,K/32"
        assert np.array_equal(f["out"][()], o2["out"])       # fp32 out rounded RNE to bf16
    assert not [n for n in os.listdir(d) if ".tmp." in n]

    # A bad operand is reported, not raised, and leaves no file behind.
    before = set(os.listdir(d))
    assert c.maybe_capture("bad", x=o["x"][:, :128], weight=o2["weight"],
                           weight_scale=o2["weight_scale"], N=32, K=256, M=5) is None
    assert set(os.listdir(d)) == before and c.errors == 1 and "dump failed" in err.getvalue()

    # Case 3 reaches MAX_FILES=3: the budget is spent, said once.
    o3 = make_operands(rng, 8, 64, 256)
    p = c.maybe_capture("model.layers.5.mlp.down_proj", x_fp8=o3["x_fp8"], x_scale=o3["x_scale"],
                        weight=o3["weight"], weight_scale=o3["weight_scale"],
                        weight_ref=o3["weight_ref"], out=o3["out"], kind="mxfp4_linear_pq")
    assert p
    written.append(p)
    validate_case(p)
    assert c.spent
    assert c.maybe_capture("model.layers.6.mlp.down_proj", x=Poison(2, 256),
                           weight=Poison(64, 128), weight_scale=Poison(8, 64)) is None
    assert c.maybe_capture("model.layers.7.mlp.down_proj", x=Poison(2, 256),
                           weight=Poison(64, 128), weight_scale=Poison(8, 64)) is None
    assert err.getvalue().count("budget spent") == 1, err.getvalue()
    assert "KREPLAY_CAPTURE_MAX_FILES=3" in err.getvalue()
    assert len(no_files(d)) == 3

    # Byte budget: the second case does not fit; said once; nothing more written.
    err2 = io.StringIO()
    d2 = os.path.join(tmp, "bytes")
    c2 = kc.Capture(fmt="h5", directory=d2, max_bytes=30000, environ={"KREPLAY_CAPTURE_M": "1-"},
                    stderr=err2)
    assert (c2.m_lo, c2.m_hi) == (1, None) and c2.nk is None
    oa = make_operands(rng, 4, 64, 256)
    assert c2.maybe_capture("a", x=oa["x"], weight=oa["weight"], weight_scale=oa["weight_scale"])
    assert c2.bytes <= 30000, c2.bytes
    assert c2.maybe_capture("b", x=oa["x"], weight=oa["weight"], weight_scale=oa["weight_scale"],
                            x_fp8=oa["x_fp8"], x_scale=oa["x_scale"], out=oa["out"],
                            ref_recorded=oa["ref"]) is None
    assert c2.maybe_capture("c", x=Poison(4, 256), weight=Poison(64, 128),
                            weight_scale=Poison(8, 64)) is None
    assert c2.spent and err2.getvalue().count("budget spent") == 1, err2.getvalue()
    assert "KREPLAY_CAPTURE_MAX_BYTES" in err2.getvalue() and len(no_files(d2)) == 1

    # WPERM: the weight of a layer the kernel serves is in fragment order; an aiter-routed
    # one (weight_ref of 1) is not.  A-tiled activations (x_fp8 only) are refused.
    d3 = os.path.join(tmp, "wperm")
    c3 = kc.Capture(fmt="h5", directory=d3, environ={"RADIANCE_MXFP4_WPERM": "1",
                                           "RADIANCE_MXFP4_A_TILED_MIN_M": "4"},
                    stderr=io.StringIO())
    p = c3.maybe_capture("w.folded", x=o["x"], weight=o["weight"], weight_scale=o["weight_scale"],
                         weight_ref=o["weight_ref"])
    assert validate_case(p)["order"] == "fragment"
    assert "RADIANCE_MXFP4_WPERM=1" in validate_case(p)["attrs"]["env_flags"]
    p = c3.maybe_capture("w.aiter", x=o["x"], weight=o["weight"], weight_scale=o["weight_scale"],
                         weight_ref=np.zeros(1, np.uint8))
    assert validate_case(p)["order"] == "checkpoint"
    assert c3.maybe_capture("w.tiled", x_fp8=o["x_fp8"], x_scale=o["x_scale"],
                            weight=o["weight"], weight_scale=o["weight_scale"],
                            weight_ref=o["weight_ref"]) is None

    # Disabled (no KREPLAY_CAPTURE_DIR): a no-op on poison; the decorator passes through.
    kc.configure(environ={})
    assert kc.maybe_capture("x", x=Poison(1, 32), weight=Poison(1, 16)) is None

    # The decorator on an mxfp4_linear_pq-shaped function.
    d4 = os.path.join(tmp, "deco")
    kc.configure(fmt="h5", directory=d4, nk={(32, 256)}, environ={}, stderr=io.StringIO())

    @kc.capture_linear("model.layers.9.linear_attn.out_proj", kind="mxfp4_linear_pq")
    def fake_pq(x_fp8, x_scale, weight, weight_scale, weight_ref):
        return o2["out"][:x_fp8.shape[0]]
    r = fake_pq(o2["x_fp8"], o2["x_scale"], o2["weight"], o2["weight_scale"], o2["weight_ref"])
    assert r is not None and len(no_files(d4)) == 1
    pdeco = os.path.join(d4, no_files(d4)[0])
    v = validate_case(pdeco)
    assert v["attrs"]["kernel_path"] == "radiance::mxfp4_linear_pq"
    written.append(pdeco)
    kc.configure(environ={})
    kc.set_capture_probe(None)

    # Env parsing.
    assert kc.parse_nk("17408:5120, 5120:3072") == {(17408, 5120), (5120, 3072)}
    assert kc.parse_m_band("1-64") == (1, 64) and kc.parse_m_band("8") == (8, 8)
    assert kc.parse_m_band("256-") == (256, None) and kc.parse_m_band("") == (1, None)
    assert kc._parse_bytes("2G", 0) == 2 << 30 and kc._parse_bytes("500M", 0) == 500 << 20
    for bad in ("17408x5120",):
        try:
            kc.parse_nk(bad)
            raise AssertionError("parse_nk accepted " + bad)
        except ValueError:
            pass
    print(f"capture hook (numpy): ok ({len(written)} cases)")
    return written


def replay(kreplay, paths):
    for p in paths:
        r = subprocess.run([kreplay, "replay", "--json", p], capture_output=True, text=True)
        assert r.returncode == 0, (p, r.returncode, r.stderr[-2000:], r.stdout[-3000:])
        rows = json.loads(r.stdout)["results"]
        assert rows, p
        assert any(x["verdict"] == "PASS" for x in rows), (p, rows)
        assert all(x["verdict"] in ("PASS", "UNSUPPORTED") for x in rows), (p, rows)
        print(f"replay {os.path.basename(p)}: exit 0, {len(rows)} rows")


# ---------------------------------------------------------------------------------------------
# torch tests
# ---------------------------------------------------------------------------------------------

def torch_tests(out_dir):
    import torch
    rng = np.random.default_rng(11)
    kc.set_capture_probe(None)                    # the real probe
    written = []
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    err = io.StringIO()
    c = kc.Capture(fmt="h5", directory=out_dir, max_files=16, m_band="1-64",
                   environ={"RADIANCE_MXFP4_W4A8": "1", "RADIANCE_MXFP4_WPERM": "0"},
                   model="torch-test", stderr=err)
    for dev in devices:
        M, N, K = (6, 64, 256) if dev == "cpu" else (16, 128, 512)
        o = make_operands(rng, M, N, K)
        x = torch.from_numpy(o["x"].view(np.int16)).view(torch.bfloat16).to(dev)
        # torch before 2.1 has no float8 dtype: the codes go as their uint8 byte view
        f8 = getattr(torch, "float8_e4m3fn", None)
        if f8 is None and dev == "cpu":
            print(f"torch {torch.__version__} has no float8_e4m3fn: x_fp8 as its uint8 codes")
        x_fp8 = torch.from_numpy(o["x_fp8"])
        x_fp8 = (x_fp8.view(f8) if f8 is not None else x_fp8).to(dev)
        x_scale = torch.from_numpy(o["x_scale"]).view(M, 1).to(dev)          # [M, 1]
        weight = torch.from_numpy(o["weight"]).to(dev)
        # the dispatch's weight_scale: [N, K/32] at create, .T.contiguous() after load
        ws = torch.from_numpy(np.ascontiguousarray(o["weight_scale"].T)).to(dev).T.contiguous()
        wref = ws.max(dim=0).values.contiguous()                              # make_row_ref
        out = torch.from_numpy(o["ref"]).to(dev).to(torch.bfloat16)
        ref = torch.from_numpy(o["ref"]).to(dev)
        p = c.maybe_capture(f"torch.{dev}.pq", x=x, x_fp8=x_fp8, x_scale=x_scale, weight=weight,
                            weight_scale=ws, weight_ref=wref, out=out, out_rerun=out.clone(),
                            ref_recorded=ref, kernel_path="radiance::mxfp4_linear_pq",
                            kind="mxfp4_linear_pq")
        assert p, err.getvalue()
        v = validate_case(p)
        with h5py.File(p, "r") as f:
            assert np.array_equal(f["x_fp8"][()], o["x_fp8"])
            assert np.array_equal(f["x"][()], o["x"])
            assert np.array_equal(f["out"][()], o["out"])
            assert np.array_equal(f["weight_scale"][()], o["weight_scale"])
            assert np.array_equal(f["weight_ref"][()], o["weight_ref"])
            assert s(f["x_fp8"].attrs["format"]) == "e4m3fn"
        written.append(p)
        # float32 x and float32 out (rounded to bf16); e8m0 scale dtype when torch has it.
        ws2 = ws.view(torch.float8_e8m0fnu) if hasattr(torch, "float8_e8m0fnu") else ws
        xf = x.float()
        p = c.maybe_capture(f"torch.{dev}.f32", x=xf, weight=weight, weight_scale=ws2,
                            weight_ref=wref, out=ref, kind="mxfp4_linear_pq")
        assert p, err.getvalue()
        validate_case(p)
        with h5py.File(p, "r") as f:
            assert f["x"].dtype == np.float32
            assert np.array_equal(f["out"][()], o["out"])
        written.append(p)
        # A non-contiguous x (a column slice): the dump holds its values, row-major.
        big = torch.cat([x, x], dim=1)[:, K // 2: K // 2 + K]
        assert not big.is_contiguous()
        p = c.maybe_capture(f"torch.{dev}.noncontig", x=big, weight=weight, weight_scale=ws,
                            weight_ref=wref, out=out)
        with h5py.File(p, "r") as f:
            assert np.array_equal(f["x"][()], np.concatenate([o["x"], o["x"]], 1)[:, K // 2:
                                                                                   K // 2 + K])
        os.unlink(p)

        if dev == "cuda":
            # A real CUDA-graph capture: the hook must decline (no .cpu(), no sync) and the
            # capture must succeed; replaying the graph afterwards works.
            n_before = len(no_files(out_dir))
            skipped = c.skipped_capturing
            g = torch.cuda.CUDAGraph()
            s_ = torch.cuda.Stream()
            s_.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s_):
                y = (out.float() * 2).to(torch.bfloat16)
            torch.cuda.current_stream().wait_stream(s_)
            with torch.cuda.graph(g):
                y = (out.float() * 2).to(torch.bfloat16)             # [M, N]
                r = c.maybe_capture("torch.cuda.graph", x=x, weight=weight, weight_scale=ws,
                                    weight_ref=wref, out=y)
                assert r is None
            g.replay()
            torch.cuda.synchronize()
            assert c.skipped_capturing == skipped + 1
            assert len(no_files(out_dir)) == n_before
            # After capture, the same call dumps.
            p = c.maybe_capture("torch.cuda.graph", x=x, weight=weight, weight_scale=ws,
                                weight_ref=wref, out=y)
            assert p, err.getvalue()
            validate_case(p)
            written.append(p)
            # Selection costs no sync: with a pending kernel, a non-selected call returns
            # without waiting (the event has not completed when it returns).
            c_ns = kc.Capture(fmt="h5", directory=out_dir, nk={(1, 32)}, environ={},
                              stderr=io.StringIO())
            a = torch.randn(8192, 8192, device="cuda")
            torch.cuda.synchronize()
            b = a @ a
            b = b @ a
            ev = torch.cuda.Event()
            ev.record()
            assert c_ns.maybe_capture("ns", x=x, weight=weight, weight_scale=ws) is None
            print(f"selection returned while the device was busy: {not ev.query()}")
            torch.cuda.synchronize()
    kc.set_capture_probe(None)
    print(f"capture hook (torch {torch.__version__}, {devices}): ok ({len(written)} cases)")
    return written


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kreplay")
    ap.add_argument("--tmp")
    ap.add_argument("--torch-only", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.torch_only:
        try:
            import torch  # noqa: F401
        except ImportError:
            sys.stderr.write("capture_hook_test: torch missing: skipped\n")
            return 77
        out = a.out or a.tmp
        os.makedirs(out, exist_ok=True)
        for p in torch_tests(out):
            print("wrote", p)
        return 0
    tmp = a.tmp
    os.makedirs(tmp, exist_ok=True)
    written = numpy_tests(tmp)
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
        print("torch not importable: torch tests skipped")
    if have_torch:
        tdir = os.path.join(tmp, "torch")
        os.makedirs(tdir, exist_ok=True)
        written += torch_tests(tdir)
    if a.kreplay:
        replay(a.kreplay, written)
    print("capture hook test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
