"""kreplay's Python-kernel runner: one launch of a Python callable as a kreplay kernel.

Started by libkr_plugin_python.so (py_kernel_plugin.c) for every launch, as

    python3 kreplay_py_runner.py MODULE:FUNCTION

with descriptor 3 a socket that carries the request and the answer; stdout is the
plugin's stderr, so a kernel's prints never mix with kreplay's tables or JSON.

Request (little-endian): b"KRPY", u32 version (1), i64 M, N, K, then the operands in the
plugin ABI's layout (kernels/plugin.h): x_fp8 [M, K] e4m3fn codes, weight [N, K/2] packed
e2m1 (checkpoint order), weight_scale [K/32, N] e8m0 bytes, x_scale [M] float32.

The callable is called as FUNCTION(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K)
(the launch signature without out and stream), with torch CPU tensors (uint8 for every byte
operand, float32 x_scale; weight_ref None: the per-block route), or numpy arrays when torch
cannot be imported.  It returns out [M, N]: a torch.bfloat16 tensor, or int16/uint16 bf16
bits (torch or numpy).  Anything else is an error: rounding to bf16 is the kernel's own.

Answer: i32 status (0 ok, 1 error), u64 length, then out's bf16 bits or the error's text:
the last line of the traceback ("ValueError: ...", with the kernel's file and line).
"""
import importlib
import importlib.util
import os
import struct
import sys
import traceback

FD = 3
MAGIC = b"KRPY"
VERSION = 1


def _read_exact(n):
    chunks, got = [], 0
    while got < n:
        b = os.read(FD, min(n - got, 1 << 20))
        if not b:
            raise EOFError(f"request ended after {got} of {n} bytes")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _answer(status, payload):
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


def _operands(raw, M, N, K):
    import numpy as np
    sizes = (("x_fp8", M * K, np.uint8, (M, K)), ("weight", N * K // 2, np.uint8, (N, K // 2)),
             ("weight_scale", K // 32 * N, np.uint8, (K // 32, N)),
             ("x_scale", 4 * M, "<f4", (M,)))
    arrays, at = {}, 0
    for name, n, dt, shape in sizes:
        arrays[name] = np.frombuffer(raw, dtype=dt, count=n // np.dtype(dt).itemsize,
                                     offset=at).reshape(shape).copy()
        at += n
    try:
        import torch
    except ImportError:
        return arrays, None
    return {k: torch.from_numpy(v) for k, v in arrays.items()}, torch


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


def main():
    sys.stdout = sys.stderr
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    spec = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        head = _read_exact(8 + 24)
        if head[:4] != MAGIC or struct.unpack("<I", head[4:8])[0] != VERSION:
            raise ValueError("not a kreplay Python-kernel request (version 1)")
        M, N, K = struct.unpack("<qqq", head[8:])
        raw = _read_exact(M * K + N * K // 2 + K // 32 * N + 4 * M)
        fn = _load(spec)
        ops, torch = _operands(raw, M, N, K)
        out = fn(ops["x_fp8"], ops["weight"], ops["weight_scale"], None, ops["x_scale"], M, N, K)
        payload = _bits(out, M, N, torch)
    except BaseException as e:   # SystemExit and KeyboardInterrupt are the kernel's failures too
        _answer(1, _last_line(e).encode("utf-8", "replace")[:900])
        return 0
    _answer(0, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
