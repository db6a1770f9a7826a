"""kreplay capture hook: dump chosen linear calls of a running serve (every entry point of
the MXFP4 dispatch, and the skinny bf16 one) as torch.save dumps (default) or schema-v1
HDF5 cases (cases/SCHEMA.md, `kreplay.case/1`), which `kreplay replay` reads as they are.

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

  * Warm-ups are not real data: vLLM's profile and dummy runs (a forward context
    without attention metadata) and calls inside `warmup()` are skipped, and
    KREPLAY_CAPTURE_ARM_AFTER=N skips the first N real steps too.
  * CUDA-graph replay never runs the op body: said once at start-up (from vLLM's
    config), and KREPLAY_CAPTURE_EAGER_STEPS / eager_window() opens an eager window.
  * vLLM is never imported by this module: it is looked at only when the serve has
    imported it already, and every look is guarded.

The writer needs numpy, and torch (for .pt) or h5py (for .h5); neither is imported
unless a dump is written in that format.
"""
import contextlib
import datetime
import functools
import os
import re
import sys

from .case_writer import (CaseError, ROUTES, SCHEMA, _nbytes_estimate, _shape_of,
                          bf16_bits_from_f32, write_case)
from .serve_context import (_EagerWindow, _extension_path, _gpu_arch, _is_dummy_context,
                            _tp_rank, _versions, _vllm_forward_context, _vllm_graph_note)

DEFAULT_KERNEL_PATH = "radiance::mxfp4_linear"
DEFAULT_MAX_FILES = 16
DEFAULT_MAX_BYTES = 1 << 30
_PREFIX = "[kreplay.capture]"

# The dispatch entry points capture_linear knows: parameter names -> the case's roles, and
# the route each takes (None: decided per call, as mxfp4_linear decides it).
KINDS = {
    "mxfp4_linear": (("x", "weight", "weight_scale", "weight_ref"), None),
    "mxfp4_linear_ar": (("x", "weight", "weight_scale", "weight_ref"), None),
    "mxfp4_linear_pq": (("x_fp8", "x_scale", "weight", "weight_scale", "weight_ref"), "w4a8"),
    "mxfp4_linear_pqp": (("a", "x_scale", "weight", "weight_scale", "weight_ref", "M", "pb1",
                          "pb2"), "partitioned"),
    "skinny_gemm": (("x", "weight_bf16"), "bf16_skinny"),
}
# The extension module each kind's kernel lives in (its __file__ is recorded).
DEFAULT_EXTENSION = {"skinny_gemm": "r4d"}
DEFAULT_EXTENSION_MXFP4 = "radiance_mxfp4_fp8"

__all__ = ["Capture", "CaseError", "KINDS", "ROUTES", "SCHEMA", "bf16_bits_from_f32",
           "capture_linear", "configure", "default", "eager_window", "maybe_capture",
           "parse_m_band", "parse_nk", "set_capture_probe", "step", "warmup", "write_case"]


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


def _route(kind, M, weight_ref, environ):
    """The route a call took, as the dispatch decides it: mxfp4_linear(_ar) hands M at or
    below RADIANCE_MXFP4_W4A8_MIN_M (default 256), and a layer whose weight_ref has one
    element, to aiter's W4A4 GEMM; the other entry points have one route each."""
    fixed = KINDS.get(kind, (None, None))[1]
    if fixed is not None:
        return fixed
    try:
        min_m = int(environ.get("RADIANCE_MXFP4_W4A8_MIN_M", "256"))
    except ValueError:
        min_m = 256
    nref = None
    if weight_ref is not None:
        nref = 1
        for d in _shape_of(weight_ref):
            nref *= d
    return "w4a4" if nref == 1 or M <= min_m else "w4a8"


# --------------------------------------------------------------------------------------------
# the hook
# --------------------------------------------------------------------------------------------

class Capture:
    """Selection, budgets, warm-up skipping and dumping.  One per process (module default),
    built from the environment, or built explicitly (tests, several directories)."""

    def __init__(self, directory=None, nk=None, m_band=None, max_files=None, max_bytes=None,
                 per_key=None, model=None, environ=None, stderr=None, fmt=None, arm_after=None,
                 eager_steps=None):
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
        self.fmt = (fmt or env.get("KREPLAY_CAPTURE_FORMAT") or "pt").lower()
        if self.fmt not in ("pt", "h5"):
            raise ValueError(f"KREPLAY_CAPTURE_FORMAT: {self.fmt!r}; expected pt or h5")
        self.arm_after = int(arm_after if arm_after is not None
                             else env.get("KREPLAY_CAPTURE_ARM_AFTER") or 0)
        self.eager_steps = int(eager_steps if eager_steps is not None
                               else env.get("KREPLAY_CAPTURE_EAGER_STEPS") or 0)
        self.extension = env.get("KREPLAY_CAPTURE_EXTENSION")
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
        self.skipped_warmup = 0
        self.skipped_unarmed = 0
        self.steps = 0              # real steps seen (forward contexts, or step() calls)
        self.real_calls = 0
        self._explicit_steps = False
        self._last_ctx = None
        self._warmup_depth = 0
        self._started = False
        self.errors = 0
        self._said = set()
        self._eager = _EagerWindow()
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

    def _start(self):
        """Once, at the first call the hook sees: what it will and will not see."""
        self._started = True
        fmt = self.fmt
        if fmt == "h5" and not _importable("h5py"):
            self._say("KREPLAY_CAPTURE_FORMAT=h5 but h5py is not importable: writing .pt")
            fmt = self.fmt = "pt"
        self._say(f"on: {fmt} dumps to {self.directory} (at most {self.max_files} files, "
                  f"{self.max_bytes} bytes, {self.per_key} per layer x shape); warm-ups skipped"
                  + (f"; armed after {self.arm_after} real steps" if self.arm_after else ""))
        note = _vllm_graph_note()
        if note:
            self._say(note)
        if self.eager_steps:
            self._eager.open(self.eager_steps, self._say)

    # -- steps and warm-ups --
    def step(self):
        """Marks the start of a real forward step (for serves without vLLM's forward context)."""
        self._explicit_steps = True
        self.steps += 1

    @contextlib.contextmanager
    def warmup(self):
        """Calls inside are warm-ups (never dumped, never counted as steps)."""
        self._warmup_depth += 1
        try:
            yield self
        finally:
            self._warmup_depth -= 1

    def eager_window(self, steps):
        """The next `steps` real steps run without CUDA-graph replay (vLLM V1)."""
        return self._eager.open(steps, self._say)

    def _warm_or_unarmed(self):
        """True (and counted) when this call is a warm-up or comes before the arm point."""
        if self._warmup_depth:
            self.skipped_warmup += 1
            return True
        ctx = _vllm_forward_context()
        if _is_dummy_context(ctx):
            self.skipped_warmup += 1
            self._say("skipping vLLM's profile/dummy runs (no attention metadata)", "dummy")
            return True
        if ctx is not None and not self._explicit_steps and ctx is not self._last_ctx:
            self._last_ctx = ctx
            self.steps += 1
        self.real_calls += 1
        if self.arm_after:
            counted = self.steps if (ctx is not None or self._explicit_steps) else self.real_calls
            if counted <= self.arm_after:
                self.skipped_unarmed += 1
                return True
            self._say(f"armed after {self.arm_after} real steps", "armed")
        return False

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
                      x_fp8_format=None, model=None, route=None, kind=None, extension=None,
                      x_fp8_parts=None, x_scale_parts=None, partition_bounds=None):
        """Dump this call if selected; returns the file's path, or None.  Call it after the
        kernel ran, with the operands exactly as the kernel received them.  route: the
        dispatch's route ("w4a8", "w4a4", "bf16_skinny", "partitioned"); None decides it as
        the dispatch does for `kind` (default: the kernel path's op name)."""
        if not self.enabled or self.spent:
            return None
        if not self._started:       # the first call: say what the hook will and will not see
            self._start()
        try:
            # .shape[i] only: this runs on every call of a decorated op
            a = x if x is not None else x_fp8
            w = weight if weight is not None else weight_bf16
            if M is None:
                M = a.shape[0] if a is not None else None
            if N is None:
                N = w.shape[0]
            if K is None:
                K = weight.shape[1] * 2 if weight is not None else \
                    (a.shape[1] if a is not None else w.shape[1])
            M, N, K = int(M), int(N), int(K)
        except Exception as e:  # symbolic shapes (tracing) or unexpected operands
            self._say(f"cannot read the shapes ({e!r}); not dumping", ("shape", layer))
            return None
        op = str(kernel_path).rpartition("::")[2] or "linear"
        if layer is None:
            layer = f"{kernel_path}[N={N},K={K}]"
        if not self.wanted(layer, M, N, K):
            return None
        # Selected by shape: now the costlier questions (vLLM's context, the arm point).
        if self._warm_or_unarmed():
            return None
        try:
            capturing = _capture_probe()
        except Exception:
            capturing = True
        if capturing:
            self.skipped_capturing += 1
            self._say("a CUDA graph is being captured: calls recorded into it replay without "
                      "this hook (see KREPLAY_CAPTURE_EAGER_STEPS)", "capturing")
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
        if x_fp8_parts is not None:
            est += 2 * M * K * (_shape_of(x_fp8_parts)[0])
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
        if route is None:
            route = _route(kind or op, M, weight_ref, self.environ)
        ext = extension or self.extension or DEFAULT_EXTENSION.get(kind or op,
                                                                   DEFAULT_EXTENSION_MXFP4)
        self.seen[(layer, N, K, M)] = self.seen.get((layer, N, K, M), 0) + 1
        # One mention of N and K: the default layer name already says them.
        stem = op if layer == f"{kernel_path}[N={N},K={K}]" else layer
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(stem)).strip("_")[:120] or "layer"
        path = os.path.join(self.directory, f"case_{safe}_N{N}_K{K}_M{M}_{os.getpid()}_"
                                            f"{self.files:04d}.{self.fmt}")
        try:
            n = write_case(path, M, N, K, weight_order=weight_order, scale_layout=scale_layout,
                           x_fp8_format=x_fp8_format, kernel_path=kernel_path, layer=layer,
                           model=model if model is not None else self.model,
                           capture_time=_now_iso(), capture_time_source="recorded",
                           env_flags=_env_flags(self.environ), route=route,
                           tp_rank=_tp_rank(), versions=_versions(),
                           gpu_arch=_gpu_arch(x if x is not None else x_fp8),
                           extension_path=_extension_path(ext) or f"{ext} (not loaded)",
                           x_fp8_parts=x_fp8_parts, x_scale_parts=x_scale_parts,
                           partition_bounds=partition_bounds, fmt=self.fmt, **ops)
        except Exception as e:
            self.errors += 1
            self._say(f"{layer} N={N} K={K} M={M}: dump failed: {e}", ("err", layer, N, K))
            return None
        self.files += 1
        self.bytes += n
        self._say(f"dumped {layer} N={N} K={K} M={M} route={route} -> {path} ({n} bytes; "
                  f"{self.files}/{self.max_files} files, {self.bytes}/{self.max_bytes} bytes)")
        if self.files >= self.max_files:
            self._stop(f"KREPLAY_CAPTURE_MAX_FILES={self.max_files}")
        return path


def _importable(name):
    if name in sys.modules:
        return True
    import importlib.util
    return importlib.util.find_spec(name) is not None


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


def step():
    """The default Capture's step(): a real forward step starts (serves without vLLM)."""
    default().step()


def warmup():
    """Context manager: calls inside are warm-ups on the default Capture."""
    return default().warmup()


def eager_window(steps):
    """The default Capture's eager window: the next `steps` real steps without graph replay."""
    return default().eager_window(steps)


_NOT_OPERANDS = frozenset(("a", "M", "pb1", "pb2"))


def _bind(names, args, kw):
    vals = dict(zip(names, args))
    for k in names:
        if k in kw:
            vals[k] = kw[k]
    return vals


def capture_linear(name=None, kind="mxfp4_linear", kernel_path=None, operands=None,
                   extension=None):
    """Decorator for a dispatch entry point; dumps (operands, result) after it ran.

      kind="mxfp4_linear":     fn(x, weight, weight_scale, weight_ref) -> out (W4A8, or W4A4
                               on aiter for M <= RADIANCE_MXFP4_W4A8_MIN_M / a 1-element ref)
      kind="mxfp4_linear_ar":  the same signature, with the fused all-reduce
      kind="mxfp4_linear_pq":  fn(x_fp8, x_scale, weight, weight_scale, weight_ref) -> out
      kind="mxfp4_linear_pqp": fn(a [P, M, K], x_scale [P, M], weight, weight_scale,
                               weight_ref, M, pb1, pb2) -> out (partitioned)
      kind="skinny_gemm":      fn(x, weight [N, K] bf16) -> out, or None when it declines

    Any other entry point: operands=f(args, kwargs, out) returning maybe_capture's keywords
    (x, weight, ..., route).  name: the layer name written to the case (default: the op and
    its N, K).  Apply it to the Python function BEFORE torch.library.custom_op registers it,
    so the hook runs in the op's eager body, never in a traced region."""
    if operands is None and kind not in KINDS:
        raise ValueError(f"capture_linear: kind {kind!r}; expected one of {', '.join(KINDS)} "
                         "or an operands function")
    kp = kernel_path or f"radiance::{kind}"
    names = KINDS.get(kind, ((), None))[0]

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kw):
            out = fn(*args, **kw)
            c = _default if _default is not None else default()
            if not c.enabled or c.spent or out is None:
                return out
            if operands is not None:
                ops = dict(operands(args, kw, out))
            else:
                v = _bind(names, args, kw) if kw else dict(zip(names, args))
                ops = {k: v.get(k) for k in names if k not in _NOT_OPERANDS}
                if kind == "mxfp4_linear_pqp":
                    a, xs = v["a"], v["x_scale"]
                    ops.update(x_fp8=a[0], x_scale=xs[0], x_fp8_parts=a, x_scale_parts=xs,
                               M=v.get("M"), partition_bounds=(v.get("pb1"), v.get("pb2")))
            c.maybe_capture(name, out=out, kernel_path=kp, kind=kind, extension=extension,
                            **ops)
            return out
        return wrapper
    return deco
