"""kreplay's Python-kernel runner: one interpreter serving every launch of the run's Python kernels.

Started once by libkr_plugin_python.so (py_kernel_plugin.c), in the worker process that
launches the kernels, as

    python3 -I kreplay_py_runner.py

with descriptor 3 a socket carrying the requests and answers and descriptor 4 a shared
memory file carrying the operands and the output; stdout is the plugin's stderr, so a
kernel's prints never mix with kreplay's tables or JSON.  The interpreter stays for the
run: modules, torch and Triton stay imported, compiled kernels stay cached.

Isolated mode (-I): neither the working directory nor the user's site directory is on
sys.path and no PYTHON* variable steers the interpreter, so a numpy.py lying where kreplay
runs can never stand in for numpy (_seal_path says what is put back, and where).  PYTHONPATH
is the user's explicit choice: its entries go first, where Python puts them.  A kernel
module is still found where the user named it: the kernel file's own directory and the
working directory are searched after the interpreter's own packages.

Protocol (little-endian).  A launch: b"KRPY", u32 version (3), i64 M, N, K, u32 n, then the
n bytes of MODULE:FUNCTION.  The runner loads the callable (once per spec), reads its
signature and sends frames of i32 status, u64 length, payload: status 2 asks for operands
by name (payload: names separated by "\\n"); the plugin answers with u64 the shared file's
size, then per name i64 length and u64 offset and u64 digest of its bytes in the shared
file (or -(length) and the reason it has none), then u64 the offset of room for the
output.  Status 0 says the output's M*N bf16 values are at that offset; status 1 carries
the error's text (the traceback's last line, with the kernel's file and line).

The callable.  When every parameter is a known operand name (OPERANDS, or M, N, K), each
is passed by keyword: only those are fetched, so a kernel that takes x_mxfp4 never pays
for w_folded.  A parameter whose operand is not available gets its default when it has
one (weight_ref: None), else the call is an error saying why.  Any other signature is
the ABI's launch, positionally: FUNCTION(x_fp8, weight, weight_scale, weight_ref, x_scale,
M, N, K) with weight_ref None.  Byte operands are uint8 torch tensors (numpy arrays
without torch); bf16 ones torch.bfloat16 (numpy uint16 bits).  The tensors are on the CPU,
views of the shared file valid during the call; when KREPLAY_PY_DEVICE names a device
(kreplay's GPU worker sets it under --device gpu) they are on that device, each operand
uploaded once and kept while the next launches name the same bytes.  It returns out
[M, N]: a torch.bfloat16 tensor (on any device), or int16/uint16 bf16 bits (torch or
numpy).  Anything else is an error: rounding to bf16 is the kernel's own.
"""
import importlib
import importlib.util
import mmap
import os
import struct
import sys
import traceback

CONTROL = 3
SHARED = 4
MAGIC = b"KRPY"
VERSION = 3


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
        b = os.read(CONTROL, min(n - got, 1 << 20))
        if not b:
            raise EOFError(f"request ended after {got} of {n} bytes")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _frame(status, payload=b"", length=None):
    data = struct.pack("<iQ", status, len(payload) if length is None else length) + payload
    view = memoryview(data)
    while view:
        n = os.write(CONTROL, view)
        view = view[n:]


class Shared:
    """The shared file, mapped again whenever the plugin has grown it."""

    def __init__(self):
        self.map, self.size = None, 0

    def resize(self, size):
        if size != self.size:
            # The old mapping goes when nothing views it any more (a kernel may hold one).
            self.map = mmap.mmap(SHARED, size) if size else None
            self.size = size


class DeviceCache:
    """Operands uploaded to the device, by name, length and digest; kept while named."""

    def __init__(self, device):
        self.device = device
        self.held, self.launch = {}, 0

    def get(self, key, make):
        entry = self.held.get(key)
        if entry is None:
            entry = [make(), self.launch]
            self.held[key] = entry
        entry[1] = self.launch
        return entry[0]

    def next_launch(self):
        # What the last launch did not name goes: a case's operands stay for its kernels.
        self.launch += 1
        self.held = {k: v for k, v in self.held.items() if v[1] >= self.launch - 1}


def _search_path(extra):
    for p in extra:
        if p and p not in sys.path:
            sys.path.append(p)


def _seal_path():
    """sys.path of an isolated interpreter, plus what a kernel spec may need to be found.

    PYTHONPATH's entries go where Python puts them, before the standard library; the
    working directory (where a dotted MODULE is looked up) goes last, so a module there
    never shadows an installed one.  A kernel file's own directory is added, last, when
    the file is loaded (_load)."""
    extra = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = [p for p in extra if p not in sys.path]
    _search_path([os.getcwd()])


def _load(spec):
    """MODULE:FUNCTION, MODULE a dotted name or a path to a .py file."""
    mod_name, sep, fn_name = spec.rpartition(":")
    if not sep or not mod_name or not fn_name:
        raise ValueError(f"{spec!r} is not MODULE:FUNCTION")
    if mod_name.endswith(".py") or os.sep in mod_name:
        path = os.path.abspath(mod_name)
        _search_path([os.path.dirname(path)])
        name = os.path.splitext(os.path.basename(path))[0]
        s = importlib.util.spec_from_file_location(name, path)
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


def _fetch(names, shared):
    """Asks the plugin for the operands: name -> (offset, length, digest) or str (why none),
    and the output's offset."""
    _frame(2, "\n".join(names).encode())
    shared.resize(struct.unpack("<Q", _read_exact(8))[0])
    got = {}
    for name in names:
        n = struct.unpack("<q", _read_exact(8))[0]
        if n < 0:
            got[name] = _read_exact(-n).decode("utf-8", "replace")
        else:
            offset, digest = struct.unpack("<QQ", _read_exact(16))
            got[name] = (offset, n, digest)
    return got, struct.unpack("<Q", _read_exact(8))[0]


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _tensor(name, where, shared, M, N, K, torch, cache):
    import numpy as np
    dt, shape = _operand_shapes(M, N, K)[name]
    shape = shape or (K // 32, N)   # weight_scale: the declared [K/32, N]
    bf16 = dt == "bf16"
    offset, length, digest = where
    want = int(np.prod(shape))
    itemsize = 2 if bf16 else np.dtype(dt).itemsize
    if length != want * itemsize:
        raise ValueError(f"operand {name}: {length} bytes; expected {list(shape)} of {dt}")

    def host():
        arr = np.frombuffer(shared.map, dtype="<i2" if bf16 else dt, count=want, offset=offset)
        arr = arr.reshape(shape)
        if torch is None:
            return arr.view(np.uint16) if bf16 else arr
        t = torch.from_numpy(arr)
        return t.view(torch.bfloat16) if bf16 else t

    if cache.device is None or torch is None:
        return host()
    return cache.get((name, length, digest), lambda: host().to(cache.device).contiguous())


def _call(fn, M, N, K, shared, cache):
    """Fetches what fn takes, calls it; (out, torch or None, the output's offset)."""
    names, keywords, defaults = _plan(fn)
    raw, out_offset = _fetch(names, shared)
    torch = _torch()
    args = {}
    for name in names:
        if isinstance(raw[name], str):
            if name in defaults:
                args[name] = defaults[name]
                continue
            raise LookupError(f"operand {name!r} is not available: {raw[name]}")
        args[name] = _tensor(name, raw[name], shared, M, N, K, torch, cache)
    dims = {"M": M, "N": N, "K": K}
    if keywords is None:
        out = fn(args["x_fp8"], args["weight"], args["weight_scale"], None, args["x_scale"],
                 M, N, K)
    else:
        out = fn(**{p: dims[p] if p in dims else args[p] for p in keywords if p in dims or p in args})
    return out, torch, out_offset


def _put_bits(out, M, N, torch, shared, offset):
    """The callable's result as bf16 bits into the shared file, or an exception saying what
    was wrong."""
    import numpy as np
    if torch is not None and isinstance(out, torch.Tensor):
        if out.dtype == torch.bfloat16:
            out = out.detach().contiguous().view(torch.int16)
        elif out.dtype != torch.int16:
            raise TypeError(f"the kernel returned a {out.dtype} tensor; expected torch.bfloat16 "
                            "(or int16 bf16 bits)")
        out = out.cpu().numpy()
    out = np.asarray(out)
    if out.dtype not in (np.uint16, np.int16):
        raise TypeError(f"the kernel returned {out.dtype} values; expected bf16 (bits as uint16)")
    if tuple(out.shape) != (M, N):
        raise ValueError(f"the kernel returned shape {list(out.shape)}; expected [{M}, {N}]")
    dst = np.frombuffer(shared.map, dtype="<u2", count=M * N, offset=offset).reshape(M, N)
    dst[...] = out.view(np.uint16) if out.dtype == np.int16 else out


def _last_line(exc):
    """"TypeError: ... (kernel.py:12)": the traceback's last line, where it was raised."""
    line = traceback.format_exception_only(type(exc), exc)[-1].strip()
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        line += f" ({os.path.basename(tb[-1].filename)}:{tb[-1].lineno})"
    return line


def _serve_one(head, fns, shared, cache):
    if head[:4] != MAGIC or struct.unpack("<I", head[4:8])[0] != VERSION:
        raise ValueError(f"not a kreplay Python-kernel request (version {VERSION})")
    M, N, K, n = struct.unpack("<qqqI", head[8:])
    spec = _read_exact(n).decode("utf-8", "replace")
    cache.next_launch()
    try:
        fn = fns.get(spec)
        if fn is None:
            fn = fns[spec] = _load(spec)
        out, torch, offset = _call(fn, M, N, K, shared, cache)
        _put_bits(out, M, N, torch, shared, offset)
    except BaseException as e:   # SystemExit and KeyboardInterrupt are the kernel's failures too
        if os.environ.get("KREPLAY_PY_TRACEBACK") == "1":     # the whole story, on stderr
            traceback.print_exc()
        _frame(1, _last_line(e).encode("utf-8", "replace")[:900])
        return
    _frame(0, length=M * N * 2)


def main():
    sys.stdout = sys.stderr
    _seal_path()
    fns, shared = {}, Shared()
    cache = DeviceCache(os.environ.get("KREPLAY_PY_DEVICE") or None)
    while True:
        head = os.read(CONTROL, 8 + 28)
        if not head:
            return 0            # the plugin is done with us
        if len(head) < 36:
            head += _read_exact(36 - len(head))
        _serve_one(head, fns, shared, cache)


if __name__ == "__main__":
    sys.exit(main())
