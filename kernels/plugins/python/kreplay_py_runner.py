"""kreplay's Python-kernel runner: one launch of a Python callable as a kreplay kernel.

Started by libkr_plugin_python.so (py_kernel_plugin.c) for every launch, as

    python3 -I kreplay_py_runner.py MODULE:FUNCTION

in isolated mode: neither the working directory nor the user's site-packages is on sys.path
and no PYTHON* variable steers the interpreter, so a numpy.py lying where kreplay runs is
never imported for numpy (_seal_path says what is put back, and where).  Descriptor 3 is
a socket that carries the request and the answer; stdout is the plugin's stderr, so a
kernel's prints never mix with kreplay's tables or JSON.

Protocol (little-endian).  The plugin sends b"KRPY", u32 version (2), i64 M, N, K.  The
runner loads the callable, reads its signature and sends frames of i32 status, u64 length,
payload: status 2 asks for operands by name (the payload: names separated by "\n"; the
plugin answers each with i64 length and the bytes, or -(length) and why it has none);
status 0 is out's bf16 bits, status 1 the error's text (the traceback's last line, with
the kernel's file and line).

The callable.  When every parameter is a known operand name (OPERANDS, or M, N, K), each
is passed by keyword: only those are fetched, so a kernel that takes x_mxfp4 never pays
for w_folded.  A parameter whose operand is not available gets its default when it has
one (weight_ref: None), else the call is an error saying why.  Any other signature is
the ABI's launch, positionally: FUNCTION(x_fp8, weight, weight_scale, weight_ref, x_scale,
M, N, K) with weight_ref None.  Byte operands are uint8 torch CPU tensors (numpy arrays
without torch); bf16 ones torch.bfloat16 (numpy uint16 bits).  It returns out [M, N]: a
torch.bfloat16 tensor, or int16/uint16 bf16 bits (torch or numpy).  Anything else is an
error: rounding to bf16 is the kernel's own.
"""
import importlib
import importlib.util
import os
import struct
import sys
import traceback

FD = 3
MAGIC = b"KRPY"
VERSION = 2


def _operand_shapes(M, N, K):
    """name -> (numpy dtype, shape) of every operand (kernels/plugin.h's table)."""
    return {
        "x": ("<f4", (M, K)), "x_bf16": ("bf16", (M, K)), "weight_bf16": ("bf16", (N, K)),
        "x_fp8": ("u1", (M, K)), "x_scale": ("<f4", (M,)),
        "x_mxfp4": ("u1", (M, K // 2)), "x_mxfp4_scale": ("u1", (M, K // 32)),
        "weight": ("u1", (N, K // 2)), "weight_scale": ("u1", None), "weight_ref": ("u1", (N,)),
        "w_folded": ("u1", (N, K)), "w_folded_scale": ("<f4", (N,)),
    }


OPERANDS = tuple(_operand_shapes(1, 1, 32))


def _read_exact(n):
    chunks, got = [], 0
    while got < n:
        b = os.read(FD, min(n - got, 1 << 20))
        if not b:
            raise EOFError(f"request ended after {got} of {n} bytes")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _frame(status, payload):
    data = struct.pack("<iQ", status, len(payload)) + payload
    view = memoryview(data)
    while view:
        n = os.write(FD, view)
        view = view[n:]


def _load(spec):
    """MODULE:FUNCTION, MODULE a dotted name on sys.path or a path to a .py file."""
    mod_name, sep, fn_name = spec.rpartition(":")
    if not sep or not mod_name or not fn_name:
        raise ValueError(f"{spec!r} is not MODULE:FUNCTION")
    if mod_name.endswith(".py") or os.sep in mod_name:
        name = os.path.splitext(os.path.basename(mod_name))[0]
        s = importlib.util.spec_from_file_location(name, mod_name)
        if s is None:
            raise ImportError(f"cannot load {mod_name}")
        mod = importlib.util.module_from_spec(s)
        sys.modules[name] = mod
        s.loader.exec_module(mod)
    else:
        mod = importlib.import_module(mod_name)
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise AttributeError(f"{mod_name} has no callable {fn_name}")
    return fn


def _plan(fn):
    """(names to fetch, keyword call?, {name: default}) from the callable's signature."""
    import inspect
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = None
    plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if params and all(p.kind in plain and (p.name in OPERANDS or p.name in ("M", "N", "K"))
                      for p in params):
        names = [p.name for p in params if p.name in OPERANDS]
        defaults = {p.name: p.default for p in params if p.default is not p.empty}
        defaults.setdefault("weight_ref", None)
        return names, [p.name for p in params], defaults
    return ["x_fp8", "weight", "weight_scale", "x_scale"], None, {"weight_ref": None}


def _fetch(names):
    """Asks the plugin for the operands; name -> bytes, or name -> str (why it has none)."""
    payload = "\n".join(names).encode()
    _frame(2, payload)
    got = {}
    for name in names:
        n = struct.unpack("<q", _read_exact(8))[0]
        got[name] = _read_exact(n) if n >= 0 else _read_exact(-n).decode("utf-8", "replace")
    return got


def _tensor(name, raw, M, N, K, scale_shape):
    import numpy as np
    dt, shape = _operand_shapes(M, N, K)[name]
    shape = shape or scale_shape
    bf16 = dt == "bf16"
    arr = np.frombuffer(raw, dtype="<u2" if bf16 else dt).copy()
    want = int(np.prod(shape))
    if arr.size != want:
        raise ValueError(f"operand {name}: {len(raw)} bytes; expected {list(shape)} of {dt}")
    arr = arr.reshape(shape)
    try:
        import torch
    except ImportError:
        return arr, None
    t = torch.from_numpy(arr.view(np.int16) if bf16 else arr)
    return (t.view(torch.bfloat16) if bf16 else t), torch


def _call(fn, M, N, K):
    """Fetches what fn takes, calls it; (out, torch or None)."""
    names, keywords, defaults = _plan(fn)
    raw = _fetch(names)
    # weight_scale's layout is the kernel's declared one: [K/32, N] for Python kernels.
    scale_shape = (K // 32, N)
    args, torch = {}, None
    for name in names:
        if isinstance(raw[name], str):
            if name in defaults:
                args[name] = defaults[name]
                continue
            raise LookupError(f"operand {name!r} is not available: {raw[name]}")
        args[name], t = _tensor(name, raw[name], M, N, K, scale_shape)
        torch = torch or t
    if torch is None:
        try:
            import torch
        except ImportError:
            torch = None
    dims = {"M": M, "N": N, "K": K}
    if keywords is None:
        out = fn(args["x_fp8"], args["weight"], args["weight_scale"], None, args["x_scale"],
                 M, N, K)
    else:
        out = fn(**{p: dims[p] if p in dims else args[p] for p in keywords if p in dims or p in args})
    return out, torch


def _bits(out, M, N, torch):
    """The callable's result -> bf16 bits, or an exception saying what was wrong."""
    import numpy as np
    if torch is not None and isinstance(out, torch.Tensor):
        if out.dtype == torch.bfloat16:
            out = out.detach().cpu().contiguous().view(torch.int16)
        elif out.dtype != torch.int16:
            raise TypeError(f"the kernel returned a {out.dtype} tensor; expected torch.bfloat16 "
                            "(or int16 bf16 bits)")
        out = out.detach().cpu().contiguous().numpy()
    out = np.asarray(out)
    if out.dtype not in (np.uint16, np.int16):
        raise TypeError(f"the kernel returned {out.dtype} values; expected bf16 (bits as uint16)")
    if tuple(out.shape) != (M, N):
        raise ValueError(f"the kernel returned shape {list(out.shape)}; expected [{M}, {N}]")
    return np.ascontiguousarray(out).astype("<u2", copy=False).tobytes()


def _last_line(exc):
    """"TypeError: ... (kernel.py:12)": the traceback's last line, where it was raised."""
    line = traceback.format_exception_only(type(exc), exc)[-1].strip()
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        line += f" ({os.path.basename(tb[-1].filename)}:{tb[-1].lineno})"
    return line


def _seal_path(spec):
    """sys.path of an isolated interpreter, plus what a kernel's spec needs to be found.

    PYTHONPATH is the user's explicit choice: its entries go where Python puts them, before
    the standard library.  The directory a kernel is looked up in -- the working directory
    for a dotted MODULE, the file's own directory for a path -- goes last, so a module there
    never shadows an installed one (a numpy.py beside the kernel is not numpy)."""
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = [os.path.abspath(p) for p in extra if os.path.abspath(p) not in sys.path]
    mod_name = spec.rpartition(":")[0]
    if mod_name.endswith(".py") or os.sep in mod_name:
        home = os.path.dirname(os.path.abspath(mod_name))
    else:
        home = os.getcwd()
    if home not in sys.path:
        sys.path.append(home)


def main():
    sys.stdout = sys.stderr
    spec = sys.argv[1] if len(sys.argv) > 1 else ""
    _seal_path(spec)
    try:
        head = _read_exact(8 + 24)
        if head[:4] != MAGIC or struct.unpack("<I", head[4:8])[0] != VERSION:
            raise ValueError(f"not a kreplay Python-kernel request (version {VERSION})")
        M, N, K = struct.unpack("<qqq", head[8:])
        fn = _load(spec)
        out, torch = _call(fn, M, N, K)
        payload = _bits(out, M, N, torch)
    except BaseException as e:   # SystemExit and KeyboardInterrupt are the kernel's failures too
        if os.environ.get("KREPLAY_PY_TRACEBACK") == "1":     # the whole story, on stderr
            traceback.print_exc()
        _frame(1, _last_line(e).encode("utf-8", "replace")[:900])
        return 0
    _frame(0, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
