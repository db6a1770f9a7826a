"""torch._scaled_mm (cuBLASLt fp8 GEMM) on w4a8.folded's operands: the real twin of that model.

    kreplay replay --py kernels/plugins/python/real/torch_scaled_mm.py:scaled_mm@w4a8.folded \
        --vs w4a8.folded CASES...

out = (x_fp8 * x_scale[m]) @ (w_folded * w_folded_scale[n])^T in bf16: e4m3fn x e4m3fn with
row-wise fp32 scales (scale_a [M, 1], scale_b [1, N]), fp32 accumulation in cuBLASLt's own
order.  cuBLASLt wants M, N, K multiples of 16 and B column-major: M and N are padded with
zero rows (they add nothing to the kept outputs) and sliced off.  scaled_mm_fast is the same
with use_fast_accum=True (Hopper's fp8 MMA accumulating without periodic promotion).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _device import bytes_as, check, cuda, to_cpu_bf16  # noqa: E402


def _pad_rows(t, rows):
    import torch
    if t.shape[0] == rows:
        return t
    pad = torch.zeros((rows - t.shape[0],) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
    return torch.cat([t, pad], 0)


def _run(x_fp8, x_scale, w_folded, w_folded_scale, M, N, K, fast):
    import torch
    dev = cuda()
    check(hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn"),
          "torch._scaled_mm and torch.float8_e4m3fn (torch >= 2.1)", torch.__version__)
    check(K % 16 == 0, "K % 16 == 0 (cuBLASLt fp8)", K)
    Mp, Np = -(-M // 16) * 16, -(-N // 16) * 16
    a = _pad_rows(bytes_as(x_fp8, torch.float8_e4m3fn).to(dev), Mp)
    w = _pad_rows(bytes_as(w_folded, torch.float8_e4m3fn).to(dev), Np)
    sa = _pad_rows(x_scale.to(torch.float32).reshape(M, 1).to(dev), Mp)
    sb = _pad_rows(w_folded_scale.to(torch.float32).reshape(N, 1).to(dev), Np).reshape(1, Np)
    b = w.t()                                  # [K, Np], column-major as cuBLASLt wants
    check(b.stride() == (1, K), "B column-major [K, N] (stride (1, K))", b.stride())
    out = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                           use_fast_accum=fast)
    if isinstance(out, tuple):                 # torch 2.1-2.3 return (out, amax)
        out = out[0]
    check(tuple(out.shape) == (Mp, Np), f"_scaled_mm output [{Mp}, {Np}]", list(out.shape))
    torch.cuda.synchronize()
    return to_cpu_bf16(out[:M, :N], M, N)


def scaled_mm(x_fp8, x_scale, w_folded, w_folded_scale, M, N, K):
    return _run(x_fp8, x_scale, w_folded, w_folded_scale, M, N, K, False)


def scaled_mm_fast(x_fp8, x_scale, w_folded, w_folded_scale, M, N, K):
    return _run(x_fp8, x_scale, w_folded, w_folded_scale, M, N, K, True)
