"""kreplay capture hook: dump chosen MXFP4 linear calls of a running serve as
schema-v1 case files (cases/SCHEMA.md, `kreplay.case/1`), which `kreplay replay`
reads as they are.

Import it from the dispatch (the radiance MXFP4 op bodies) and call
`maybe_capture(...)` AFTER the kernel ran, or wrap an op with
`capture_linear(name)`.  See scripts/capture/README.md.  Importable as
`kreplay.capture` (pip install ./python) or, from a checkout, as
`kreplay_capture` with scripts/capture on PYTHONPATH.

Rules this module keeps, because the serve dies otherwise:
  * Selection uses shapes and ints only (`.shape`, env config), never tensor
    values: a non-selected call costs a few int compares and touches no device.
  * Nothing is dumped while the current stream is capturing a CUDA graph
    (torch.cuda.is_current_stream_capturing()): .cpu()/.item() is a device sync,
    illegal under capture, and capture runs on dummy activations anyway.
  * The device is synchronised (by the .cpu() copies) only when a dump is taken.
  * Bounded: at most KREPLAY_CAPTURE_MAX_FILES files and KREPLAY_CAPTURE_MAX_BYTES
    bytes per process; when either is spent, dumping stops and stderr says so once.
  * Atomic: written to `<path>.tmp.<pid>` and renamed into place with os.replace.
  * Never raises into the serve: a failed dump is reported on stderr and skipped.

The writer needs numpy + h5py only; torch is imported lazily, and only if the
caller hands torch tensors (it is then already imported).
"""
import datetime
import functools
import os
import re
import sys

import numpy as np

SCHEMA = "kreplay.case/1"
DEFAULT_KERNEL_PATH = "radiance::mxfp4_linear"
DEFAULT_MAX_FILES = 16
DEFAULT_MAX_BYTES = 1 << 30
_PREFIX = "[kreplay.capture]"

__all__ = ["Capture", "CaseError", "capture_linear", "configure", "default",
           "maybe_capture", "parse_m_band", "parse_nk", "set_capture_probe", "write_case"]


class CaseError(ValueError):
    """An operand does not fit schema v1 (shape, dtype); the case is not written."""


# --------------------------------------------------------------------------------------------
# configuration parsing
# --------------------------------------------------------------------------------------------

def parse_nk(text):
    """"17408:5120,5120:3072" -> {(17408, 5120), (5120, 3072)}; empty/None -> None (all)."""
    if text is None or not str(text).strip():
        return None
    out = set()
    for pair in str(text).split(","):
        pair = pair.strip()
        if not pair:
            continue
        m = re.fullmatch(r"(\d+)\s*:\s*(\d+)", pair)
        if not m:
            raise ValueError(f"KREPLAY_CAPTURE_NK: {pair!r} is not N:K; expected e.g. 17408:5120")
        out.add((int(m.group(1)), int(m.group(2))))
    return out


def parse_m_band(text):
    """"1-64" -> (1, 64); "256-" -> (256, None); "8" -> (8, 8); empty/None -> (1, None)."""
    if text is None or not str(text).strip():
        return (1, None)
    t = str(text).strip()
    m = re.fullmatch(r"(\d*)\s*-\s*(\d*)", t)
    if m:
        lo = int(m.group(1)) if m.group(1) else 1
        hi = int(m.group(2)) if m.group(2) else None
    elif re.fullmatch(r"\d+", t):
        lo = hi = int(t)
    else:
        raise ValueError(f"KREPLAY_CAPTURE_M: {t!r} is not a band; expected LO-HI, LO- or M")
    if hi is not None and hi < lo:
        raise ValueError(f"KREPLAY_CAPTURE_M: {t!r} is empty (HI < LO)")
    return (lo, hi)


def _parse_bytes(text, default):
    if text is None or not str(text).strip():
        return default
    m = re.fullmatch(r"(\d+)\s*([kKmMgG]?)i?[bB]?", str(text).strip())
    if not m:
        raise ValueError(f"KREPLAY_CAPTURE_MAX_BYTES: {text!r}; expected bytes, e.g. 500M or 2G")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def _env_flags(environ):
    return "\n".join(f"{k}={environ[k]}" for k in sorted(environ) if k.startswith("RADIANCE_"))


def _now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------------------------
# graph-capture probe
# --------------------------------------------------------------------------------------------

def _torch_capturing():
    """True while torch is tracing or the current CUDA stream is capturing a graph.
    Host-side queries only: no sync.  Without torch loaded there is no capture."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        comp = getattr(torch, "compiler", None)
        if comp is not None and hasattr(comp, "is_compiling") and comp.is_compiling():
            return True
    except Exception:
        pass
    try:
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            return True
    except Exception:
        pass
    return False


_capture_probe = _torch_capturing


def set_capture_probe(fn):
    """Replace the graph-capture probe (tests; other runtimes).  None restores torch's."""
    global _capture_probe
    _capture_probe = fn if fn is not None else _torch_capturing


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


def write_case(path, M, N, K, x=None, x_fp8=None, x_scale=None, weight=None, weight_scale=None,
               weight_ref=None, out=None, out_rerun=None, aiter=None, ref_recorded=None,
               weight_bf16=None, weight_order="checkpoint", scale_layout=None,
               x_fp8_format=None, **provenance):
    """Write one schema-v1 case atomically (<path>.tmp.<pid>, then os.replace).

    Operands are numpy arrays or torch tensors.  Conventions for numpy: bf16 data as uint16
    bits; fp8 codes, packed e2m1 and e8m0 bytes as uint8; float arrays as fp32.  torch dtypes
    float8_e4m3fn(uz), bfloat16, float16/32, uint8, float8_e8m0fnu, float4_e2m1fn_x2 map on
    their own.  Float outputs (out, out_rerun, aiter) are rounded to bf16 (nearest even);
    ref_recorded stays fp32.  scale_layout: "K/32,N" (the dispatch's, after load) or
    "N,K/32"; None infers it from the shape ("K/32,N" when N == K/32).  provenance: model,
    layer, kernel_path, capture_time, env_flags (strings).  Raises CaseError when an operand
    does not fit the schema; returns the bytes written."""
    import h5py

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
        fmt = x_fp8_format or ("e4m3fnuz" if kind == "fp8uz" else "e4m3fn")
        ds["x_fp8"] = (a, {"format": fmt})
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

    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with h5py.File(tmp, "w", libver=("earliest", "v108"), track_order=False) as f:
            f.attrs["schema"] = SCHEMA
            for k, v in (("M", M), ("N", N), ("K", K)):
                f.attrs[k] = np.int64(v)
            for k in ("kernel_path", "layer", "model", "capture_time", "env_flags"):
                v = provenance.get(k)
                if v is not None:
                    _set_str(f, k, v)
            for name, (arr, attrs) in ds.items():
                arr = np.ascontiguousarray(arr)
                if arr.dtype.byteorder == ">":
                    arr = arr.astype(arr.dtype.newbyteorder("<"))
                dset = f.create_dataset(name, data=arr, track_times=False)
                for k, v in attrs.items():
                    _set_str(dset, k, v)
        n = os.path.getsize(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return n


# --------------------------------------------------------------------------------------------
# the hook
# --------------------------------------------------------------------------------------------

class Capture:
    """Selection, budgets and dumping.  One per process (module default), built from the
    environment, or built explicitly (tests, several directories)."""

    def __init__(self, directory=None, nk=None, m_band=None, max_files=None, max_bytes=None,
                 per_key=None, model=None, environ=None, stderr=None):
        env = os.environ if environ is None else environ
        self.environ = env
        self.directory = directory if directory is not None else env.get("KREPLAY_CAPTURE_DIR")
        self.nk = nk if nk is not None else parse_nk(env.get("KREPLAY_CAPTURE_NK"))
        if isinstance(self.nk, str):
            self.nk = parse_nk(self.nk)
        mb = m_band if m_band is not None else env.get("KREPLAY_CAPTURE_M")
        self.m_lo, self.m_hi = mb if isinstance(mb, tuple) else parse_m_band(mb)
        self.max_files = int(max_files if max_files is not None
                             else env.get("KREPLAY_CAPTURE_MAX_FILES") or DEFAULT_MAX_FILES)
        self.max_bytes = (int(max_bytes) if max_bytes is not None else
                          _parse_bytes(env.get("KREPLAY_CAPTURE_MAX_BYTES"), DEFAULT_MAX_BYTES))
        self.per_key = int(per_key if per_key is not None
                           else env.get("KREPLAY_CAPTURE_PER_KEY") or 1)
        self.model = model if model is not None else env.get("KREPLAY_CAPTURE_MODEL")
        self.wperm = env.get("RADIANCE_MXFP4_WPERM", "0") == "1"
        try:
            self.a_tiled_min_m = int(env.get("RADIANCE_MXFP4_A_TILED_MIN_M", "0") or 0)
        except ValueError:
            self.a_tiled_min_m = 0
        self._stderr = stderr
        self.files = 0
        self.bytes = 0
        self.spent = False
        self.seen = {}
        self.skipped_capturing = 0
        self.errors = 0
        self._said = set()
        self.enabled = bool(self.directory)
        if self.enabled:
            os.makedirs(self.directory, exist_ok=True)

    # -- messages --
    def _say(self, msg, once_key=None):
        if once_key is not None:
            if once_key in self._said:
                return
            self._said.add(once_key)
        err = self._stderr or sys.stderr
        try:
            err.write(f"{_PREFIX} {msg}\n")
            err.flush()
        except Exception:
            pass

    def _stop(self, why):
        self.spent = True
        self._say(f"budget spent ({why}): no more dumps in this process "
                  f"({self.files} files, {self.bytes} bytes in {self.directory})", "spent")

    # -- selection: shapes and ints only --
    def wanted(self, layer, M, N, K):
        """Would a call of this shape be dumped?  Ints only; no tensor, no device."""
        if not self.enabled or self.spent:
            return False
        if self.nk is not None and (N, K) not in self.nk:
            return False
        if M < self.m_lo or (self.m_hi is not None and M > self.m_hi):
            return False
        if self.seen.get((layer, N, K, M), 0) >= self.per_key:
            return False
        return True

    def maybe_capture(self, layer=None, x=None, x_fp8=None, x_scale=None, weight=None,
                      weight_scale=None, weight_ref=None, out=None, out_rerun=None, aiter=None,
                      ref_recorded=None, weight_bf16=None, kernel_path=DEFAULT_KERNEL_PATH,
                      M=None, N=None, K=None, weight_order=None, scale_layout=None,
                      x_fp8_format=None, model=None):
        """Dump this call if selected; returns the file's path, or None.  Call it after the
        kernel ran, with the operands exactly as the kernel received them."""
        if not self.enabled or self.spent:
            return None
        try:
            a = x if x is not None else x_fp8
            if M is None:
                M = _shape_of(a)[0] if a is not None else None
            if N is None:
                N = _shape_of(weight if weight is not None else weight_bf16)[0]
            if K is None:
                if weight_scale is not None and weight is not None:
                    K = _shape_of(weight)[1] * 2
                elif a is not None:
                    K = _shape_of(a)[1]
                else:
                    K = _shape_of(weight_bf16)[1]
            M, N, K = int(M), int(N), int(K)
        except Exception as e:  # symbolic shapes (tracing) or unexpected operands
            self._say(f"cannot read the shapes ({e!r}); not dumping", ("shape", layer))
            return None
        if layer is None:
            layer = f"{kernel_path}[N={N},K={K}]"
        if not self.wanted(layer, M, N, K):
            return None
        try:
            capturing = _capture_probe()
        except Exception:
            capturing = True
        if capturing:
            self.skipped_capturing += 1
            return None
        if x is None and x_fp8 is not None and self.a_tiled_min_m and M >= self.a_tiled_min_m:
            # RADIANCE_MXFP4_A_TILED_MIN_M: x_fp8 may be the fragment-tiled view, whose bytes
            # are not the row-major [M, K] the schema holds.  Refuse rather than dump garbage.
            self._say(f"{layer}: M={M} >= RADIANCE_MXFP4_A_TILED_MIN_M={self.a_tiled_min_m} "
                      "with only x_fp8: the activation may be tiled; not dumping",
                      ("tiled", layer))
            return None
        if self.files >= self.max_files:
            self._stop(f"KREPLAY_CAPTURE_MAX_FILES={self.max_files}")
            return None
        ops = {"x": x, "x_fp8": x_fp8, "x_scale": x_scale, "weight": weight,
               "weight_scale": weight_scale, "weight_bf16": weight_bf16,
               "weight_ref": weight_ref, "out": out, "out_rerun": out_rerun, "aiter": aiter,
               "ref_recorded": ref_recorded}
        est = _nbytes_estimate(M, N, K, ops)
        if self.bytes + est > self.max_bytes:
            self._stop(f"KREPLAY_CAPTURE_MAX_BYTES={self.max_bytes}; the next case needs "
                       f"~{est} bytes")
            return None
        if weight_order is None:
            # The dispatch permutes a layer's weight under WPERM only when its kernel serves
            # it, i.e. weight_ref is not the 1-element aiter route.
            nref = None
            if weight_ref is not None:
                try:
                    nref = 1
                    for d in _shape_of(weight_ref):
                        nref *= d
                except Exception:
                    nref = None
            weight_order = "fragment" if (self.wperm and weight is not None and nref != 1) \
                else "checkpoint"
        self.seen[(layer, N, K, M)] = self.seen.get((layer, N, K, M), 0) + 1
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(layer)).strip("_")[:120] or "layer"
        path = os.path.join(self.directory,
                            f"case_{safe}_N{N}_K{K}_M{M}_{os.getpid()}_{self.files:04d}.h5")
        try:
            n = write_case(path, M, N, K, weight_order=weight_order, scale_layout=scale_layout,
                           x_fp8_format=x_fp8_format, kernel_path=kernel_path, layer=layer,
                           model=model if model is not None else self.model,
                           capture_time=_now_iso(), env_flags=_env_flags(self.environ), **ops)
        except Exception as e:
            self.errors += 1
            self._say(f"{layer} N={N} K={K} M={M}: dump failed: {e}", ("err", layer, N, K))
            return None
        self.files += 1
        self.bytes += n
        self._say(f"dumped {layer} N={N} K={K} M={M} -> {path} ({n} bytes; "
                  f"{self.files}/{self.max_files} files, {self.bytes}/{self.max_bytes} bytes)")
        if self.files >= self.max_files:
            self._stop(f"KREPLAY_CAPTURE_MAX_FILES={self.max_files}")
        return path


_default = None


def default():
    """The process's Capture, built from the environment on first use."""
    global _default
    if _default is None:
        _default = Capture()
    return _default


def configure(**kwargs):
    """Replace the process's Capture (arguments as Capture's; the rest from the env)."""
    global _default
    _default = Capture(**kwargs)
    return _default


def maybe_capture(layer=None, x=None, x_fp8=None, x_scale=None, weight=None, weight_scale=None,
                  weight_ref=None, out=None, **kwargs):
    """Module-level maybe_capture on the default Capture; a no-op (one dict lookup and an int
    compare) when KREPLAY_CAPTURE_DIR is unset."""
    c = _default if _default is not None else default()
    if not c.enabled or c.spent:
        return None
    return c.maybe_capture(layer, x=x, x_fp8=x_fp8, x_scale=x_scale, weight=weight,
                           weight_scale=weight_scale, weight_ref=weight_ref, out=out, **kwargs)


def capture_linear(name=None, kind="mxfp4_linear", kernel_path=None):
    """Decorator for an op with the dispatch's signature; dumps (operands, result) after it ran.

      kind="mxfp4_linear":    fn(x, weight, weight_scale, weight_ref) -> out
      kind="mxfp4_linear_pq": fn(x_fp8, x_scale, weight, weight_scale, weight_ref) -> out

    name: the layer name written to the case (default: the op and its N, K).  Apply it to
    the Python function BEFORE torch.library.custom_op registers it, so the hook runs in the
    op's eager body, never in a traced region."""
    if kind not in ("mxfp4_linear", "mxfp4_linear_pq"):
        raise ValueError(f"capture_linear: kind {kind!r}; expected mxfp4_linear or mxfp4_linear_pq")
    kp = kernel_path or f"radiance::{kind}"

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kw):
            out = fn(*args, **kw)
            c = _default if _default is not None else default()
            if c.enabled and not c.spent:
                if kind == "mxfp4_linear":
                    x, weight, weight_scale, weight_ref = args[:4]
                    c.maybe_capture(name, x=x, weight=weight, weight_scale=weight_scale,
                                    weight_ref=weight_ref, out=out, kernel_path=kp)
                else:
                    x_fp8, x_scale, weight, weight_scale, weight_ref = args[:5]
                    c.maybe_capture(name, x_fp8=x_fp8, x_scale=x_scale, weight=weight,
                                    weight_scale=weight_scale, weight_ref=weight_ref, out=out,
                                    kernel_path=kp)
            return out
        return wrapper
    return deco
