"""Schema-v1 cases from numpy or torch operands: the dtypes and shapes the schema asks for,
checked before anything is written, then an HDF5 case (h5py) or a torch.save dump written to
a temporary name and renamed into place.  The capture hook writes through write_case, and so
can a user's script (`kreplay.write_case`)."""
import os

import numpy as np

SCHEMA = "kreplay.case/1"
ROUTES = ("w4a8", "w4a4", "bf16_skinny", "partitioned")


class CaseError(ValueError):
    """An operand does not fit schema v1 (shape, dtype); the case is not written."""


# --------------------------------------------------------------------------------------------
# operand conversion (torch or numpy -> numpy in the schema's dtypes)
# --------------------------------------------------------------------------------------------

def _is_torch(t):
    return type(t).__module__.startswith("torch") and hasattr(t, "detach")


def _torch_to_numpy(t):
    """A torch tensor -> (numpy array, kind) with kind one of 'bf16', 'f32', 'u8', 'fp8',
    'fp8uz', 'other'.  Copies to the host (the only sync point, called only for a dump)."""
    import torch  # already imported by the caller, since it handed us a tensor
    t = t.detach()
    dt = t.dtype
    if dt == torch.bfloat16:
        return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16), "bf16"
    if dt == torch.uint8:
        return t.contiguous().cpu().numpy(), "u8"
    if dt == torch.int8:
        return t.contiguous().view(torch.uint8).cpu().numpy(), "u8"
    for name, kind in (("float8_e4m3fn", "fp8"), ("float8_e4m3fnuz", "fp8uz"),
                       ("float8_e8m0fnu", "u8"), ("float4_e2m1fn_x2", "u8")):
        if getattr(torch, name, None) is not None and dt == getattr(torch, name):
            return t.contiguous().view(torch.uint8).cpu().numpy(), kind
    if dt in (torch.float32, torch.float16, torch.float64):
        return t.to(torch.float32).contiguous().cpu().numpy(), "f32"
    return t.contiguous().cpu().numpy(), "other"


def _as_np(a, role):
    """Operand -> (numpy array, kind).  numpy: uint16 is taken as bf16 bits, uint8 as bytes
    (fp8 codes / packed e2m1 / e8m0), floating as fp32."""
    if a is None:
        return None, None
    if _is_torch(a):
        return _torch_to_numpy(a)
    arr = np.asarray(a)
    if arr.dtype == np.uint16:
        return np.ascontiguousarray(arr), "bf16"
    if arr.dtype == np.uint8:
        return np.ascontiguousarray(arr), "u8"
    if arr.dtype == np.int8:
        return np.ascontiguousarray(arr).view(np.uint8), "u8"
    if arr.dtype.kind == "f":
        return np.ascontiguousarray(arr, dtype=np.float32), "f32"
    if arr.dtype.kind in "iu":
        return np.ascontiguousarray(arr), "int"
    raise CaseError(f"{role}: unsupported numpy dtype {arr.dtype}")


def bf16_bits_from_f32(a):
    """fp32 -> bf16 bits, round to nearest even (SCHEMA.md's rule); NaN stays NaN."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def _shape_of(a):
    if a is None:
        return None
    return tuple(int(d) for d in a.shape)


def _nbytes_estimate(M, N, K, ops):
    """Bytes a case will take, from shapes only (no tensor access)."""
    sizes = {"x": M * K * 2, "x_fp8": M * K, "x_scale": M * 4, "weight": N * K // 2,
             "weight_scale": N * K // 32, "weight_bf16": N * K * 2, "weight_ref": N,
             "out": M * N * 2, "out_rerun": M * N * 2, "aiter": M * N * 2,
             "ref_recorded": M * N * 4}
    return 4096 + sum(sizes[k] for k, v in ops.items() if v is not None and k in sizes)


# --------------------------------------------------------------------------------------------
# the writer (numpy + h5py)
# --------------------------------------------------------------------------------------------

def _set_str(obj, key, value):
    obj.attrs[key] = str(value)          # h5py: variable-length UTF-8, read back as str


PROVENANCE = ("kernel_path", "layer", "model", "capture_time", "capture_time_source",
              "env_flags", "route", "tp_rank", "versions", "gpu_arch", "extension_path")


def write_case(path, M, N, K, x=None, x_fp8=None, x_scale=None, weight=None, weight_scale=None,
               weight_ref=None, out=None, out_rerun=None, aiter=None, ref_recorded=None,
               weight_bf16=None, weight_order="checkpoint", scale_layout=None,
               x_fp8_format=None, x_fp8_parts=None, x_scale_parts=None, partition_bounds=None,
               fmt="h5", **provenance):
    """Write one schema-v1 case atomically (<path>.tmp.<pid>, then os.replace).

    Operands are numpy arrays or torch tensors.  Conventions for numpy: bf16 data as uint16
    bits; fp8 codes, packed e2m1 and e8m0 bytes as uint8; float arrays as fp32.  torch dtypes
    float8_e4m3fn(uz), bfloat16, float16/32, uint8, float8_e8m0fnu, float4_e2m1fn_x2 map on
    their own.  Float outputs (out, out_rerun, aiter) are rounded to bf16 (nearest even);
    ref_recorded stays fp32.  scale_layout: "K/32,N" (the dispatch's, after load) or
    "N,K/32"; None infers it from the shape ("K/32,N" when N == K/32).  provenance: model,
    layer, kernel_path, capture_time, capture_time_source, env_flags, route, versions,
    gpu_arch, extension_path (strings), tp_rank (int).  The partitioned route adds
    x_fp8_parts [P, M, K] and x_scale_parts [P, M] (the copies each column partition read;
    x_fp8 is copy 0) and partition_bounds (pb1, pb2).  fmt: "h5" (schema v1, h5py) or "pt"
    (torch.save of a dict that `kreplay replay`/`import` read: the same names, bf16 as
    torch.bfloat16, strings and ints as such).  Raises CaseError when an operand does not fit
    the schema; returns the bytes written."""

    M, N, K = int(M), int(N), int(K)
    if M <= 0 or N <= 0 or K <= 0:
        raise CaseError(f"M, N, K: M={M} N={N} K={K}; expected all > 0")
    if K % 32:
        raise CaseError(f"K: K={K} is not a multiple of 32; expected K % 32 == 0")
    if x is None and x_fp8 is None:
        raise CaseError("x: neither x nor x_fp8 given; expected at least one")
    if (x_fp8 is None) != (x_scale is None):
        raise CaseError("x_fp8/x_scale: one without the other; expected both or neither")
    if weight is None and weight_bf16 is None:
        raise CaseError("weight: no MXFP4 weight and no weight_bf16; expected at least one")
    if fmt not in ("h5", "pt"):
        raise CaseError(f"format: {fmt!r}; expected h5 or pt")
    route = provenance.get("route")
    if route is not None and route not in ROUTES:
        raise CaseError(f"route: {route!r}; expected one of {', '.join(ROUTES)}")
    if (weight is None) != (weight_scale is None):
        raise CaseError("weight/weight_scale: one without the other; expected both")
    if weight_order not in ("checkpoint", "fragment"):
        raise CaseError(f"weight: order {weight_order!r}; expected checkpoint or fragment")
    if weight is not None and weight_order == "fragment" and (N % 16 or K % 16):
        raise CaseError(f"weight: fragment order needs N, K % 16 == 0; got N={N} K={K}")

    ds = {}     # name -> (array, attrs)

    def need(name, arr, shape, what):
        if tuple(arr.shape) != tuple(shape):
            raise CaseError(f"{name}: wrong shape {list(arr.shape)}; expected {list(shape)} {what}")

    if x is not None:
        a, kind = _as_np(x, "x")
        need("x", a, (M, K), "(M, K)")
        if kind == "bf16":
            ds["x"] = (a, {"dtype": "bfloat16"})
        elif kind == "f32":
            ds["x"] = (a, {})
        else:
            raise CaseError(f"x: dtype {a.dtype}; expected bf16 (uint16 bits) or float")
    if x_fp8 is not None:
        a, kind = _as_np(x_fp8, "x_fp8")
        if kind not in ("u8", "fp8", "fp8uz"):
            raise CaseError(f"x_fp8: dtype {a.dtype}; expected fp8 codes (uint8/float8_e4m3fn)")
        need("x_fp8", a, (M, K), "(M, K) uint8")
        code_fmt = x_fp8_format or ("e4m3fnuz" if kind == "fp8uz" else "e4m3fn")
        ds["x_fp8"] = (a, {"format": code_fmt})
        s, kind = _as_np(x_scale, "x_scale")
        if kind != "f32":
            raise CaseError(f"x_scale: dtype {s.dtype}; expected float")
        if s.size != M or (s.ndim == 2 and s.shape[0] != M) or s.ndim > 2:
            raise CaseError(f"x_scale: shape {list(s.shape)}; expected [{M}] or [{M}, 1]")
        ds["x_scale"] = (s.reshape(M), {})
    if weight is not None:
        w, kind = _as_np(weight, "weight")
        if kind != "u8":
            raise CaseError(f"weight: dtype {w.dtype}; expected packed e2m1 bytes (uint8)")
        need("weight", w, (N, K // 2), "(N, K/2) uint8")
        ds["weight"] = (w, {"order": weight_order})
        s, kind = _as_np(weight_scale, "weight_scale")
        if kind != "u8":
            raise CaseError(f"weight_scale: dtype {s.dtype}; expected e8m0 bytes (uint8)")
        shp = tuple(s.shape)
        if scale_layout is None:
            scale_layout = "K/32,N" if shp == (K // 32, N) else "N,K/32"
        if scale_layout not in ("K/32,N", "N,K/32"):
            raise CaseError(f"weight_scale: layout {scale_layout!r}; expected K/32,N or N,K/32")
        need("weight_scale", s, (K // 32, N) if scale_layout == "K/32,N" else (N, K // 32),
             f"({scale_layout}) uint8")
        ds["weight_scale"] = (s, {"layout": scale_layout})
    if weight_bf16 is not None:
        a, kind = _as_np(weight_bf16, "weight_bf16")
        if kind == "f32":
            a = bf16_bits_from_f32(a)
        elif kind != "bf16":
            raise CaseError(f"weight_bf16: dtype {a.dtype}; expected bf16")
        need("weight_bf16", a, (N, K), "(N, K) bf16")
        ds["weight_bf16"] = (a, {"dtype": "bfloat16"})
    if weight_ref is not None:
        r, kind = _as_np(weight_ref, "weight_ref")
        if kind not in ("u8", "int"):
            raise CaseError(f"weight_ref: dtype {r.dtype}; expected uint8")
        r = r.reshape(-1).astype(np.uint8)
        if r.size not in (N, 2, 1):
            raise CaseError(f"weight_ref: length {r.size}; expected {N} (folded), 2 or 1")
        ds["weight_ref"] = (r, {})
    for name, val in (("out", out), ("out_rerun", out_rerun), ("aiter", aiter)):
        if val is None:
            continue
        a, kind = _as_np(val, name)
        if kind == "f32":
            a = bf16_bits_from_f32(a)
        elif kind != "bf16":
            raise CaseError(f"{name}: dtype {a.dtype}; expected bf16 or float")
        need(name, a, (M, N), "(M, N) bf16")
        ds[name] = (a, {"dtype": "bfloat16"})
    if ref_recorded is not None:
        a, kind = _as_np(ref_recorded, "ref_recorded")
        if kind == "bf16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        elif kind != "f32":
            raise CaseError(f"ref_recorded: dtype {a.dtype}; expected float")
        need("ref_recorded", a, (M, N), "(M, N) float32")
        ds["ref_recorded"] = (a, {})

    if x_fp8_parts is not None:
        a, kind = _as_np(x_fp8_parts, "x_fp8_parts")
        if kind not in ("u8", "fp8", "fp8uz") or a.ndim != 3 or a.shape[1:] != (M, K):
            raise CaseError(f"x_fp8_parts: {a.dtype} {list(a.shape)}; expected [P, {M}, {K}] "
                            "fp8 codes")
        s, kind = _as_np(x_scale_parts, "x_scale_parts")
        if kind != "f32" or s.shape != (a.shape[0], M):
            raise CaseError(f"x_scale_parts: {s.dtype} {list(s.shape)}; expected "
                            f"[{a.shape[0]}, {M}] float")
        ds["x_fp8_parts"] = (a, {"format": ds.get("x_fp8", (None, {}))[1].get("format",
                                                                              "e4m3fn")})
        ds["x_scale_parts"] = (s, {})
    prov = {k: provenance[k] for k in PROVENANCE if provenance.get(k) is not None}
    if partition_bounds is not None:
        prov["partition_bounds"] = ",".join(str(int(b)) for b in partition_bounds)
    layout = {"weight_order": weight_order if weight is not None else None,
              "scale_layout": scale_layout if weight is not None else None,
              "x_fp8_format": ds["x_fp8"][1]["format"] if "x_fp8" in ds else None}
    writer = _write_pt if fmt == "pt" else _write_h5
    return _atomic(path, lambda tmp: writer(tmp, M, N, K, ds, prov, layout))


def _atomic(path, write):
    """write(tmp) then os.replace(tmp, path); no temporary left behind on failure."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        write(tmp)
        n = os.path.getsize(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return n


def _write_h5(tmp, M, N, K, ds, prov, layout):
    import h5py
    with h5py.File(tmp, "w", libver=("earliest", "v108"), track_order=False) as f:
        f.attrs["schema"] = SCHEMA
        for k, v in (("M", M), ("N", N), ("K", K)):
            f.attrs[k] = np.int64(v)
        for k, v in prov.items():
            _set_str(f, k, v)
        for name, (arr, attrs) in ds.items():
            arr = np.ascontiguousarray(arr)
            if arr.dtype.byteorder == ">":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            dset = f.create_dataset(name, data=arr, track_times=False)
            for k, v in attrs.items():
                _set_str(dset, k, v)


def _write_pt(tmp, M, N, K, ds, prov, layout):
    """torch.save of {name: tensor, "M": M, ..., provenance strings}: bf16 bits as
    torch.bfloat16, bytes as uint8, fp32 as float32 -- the dtypes the dispatch's own
    bad-case dump uses, which harness/case/pt_import.c reads."""
    import torch
    d = {"schema": SCHEMA, "M": M, "N": N, "K": K}
    for name, (arr, attrs) in ds.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype == np.uint16:
            t = torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
        else:
            t = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="), copy=True))
        d[name] = t
    for k, v in prov.items():
        d[k] = int(v) if k == "tp_rank" else str(v)
    for k, v in layout.items():
        if v is not None:
            d[k] = v
    torch.save(d, tmp)
