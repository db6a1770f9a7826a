"""Triton's tl.dot_scaled on w4a4.aiter's operands (MXFP4 x MXFP4): the W4A4 route's lowering.

    kreplay replay --py kernels/plugins/python/real/triton_dot_scaled.py:dot_scaled@w4a4.aiter \
        --vs w4a4.aiter CASES...

Operands as tl.dot_scaled takes them (triton.language.dot_scaled, k-packed both sides):
lhs x_mxfp4 [M, K/2] e2m1 packed along K (element 2j in the low nibble, kreplay's layout),
lhs_scale x_mxfp4_scale [M, K/32] e8m0; rhs the weight read as [K/2, N] (a transposed view of
kreplay's [N, K/2], same packing), rhs_scale [N, K/32] (kreplay's weight_scale [K/32, N]
transposed).  On Hopper (no native MX MMA) Triton upcasts both to bf16 and runs bf16 MMAs with
fp32 accumulators, tile by tile along K: the order the model is checked against.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _device import check, cuda, to_cpu_bf16  # noqa: E402

_KERNEL = None


def _kernel():
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    import triton
    import triton.language as tl

    @triton.jit
    def mxfp4_gemm(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K,
                   stride_am, stride_bk, stride_bn, stride_asm, stride_bsn, stride_cm,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_kp = tl.arange(0, BLOCK_K // 2)           # packed bytes
        offs_ks = tl.arange(0, BLOCK_K // 32)          # scale blocks
        m_ok = offs_m < M
        n_ok = offs_n < N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k0 // 2 + offs_kp)[None, :],
                        mask=m_ok[:, None], other=0)
            b = tl.load(b_ptr + (k0 // 2 + offs_kp)[:, None] * stride_bk
                        + offs_n[None, :] * stride_bn, mask=n_ok[None, :], other=0)
            sa = tl.load(as_ptr + offs_m[:, None] * stride_asm + (k0 // 32 + offs_ks)[None, :],
                         mask=m_ok[:, None], other=127)
            sb = tl.load(bs_ptr + offs_n[:, None] * stride_bsn + (k0 // 32 + offs_ks)[None, :],
                         mask=n_ok[:, None], other=127)
            acc = tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", acc)
        c = acc.to(tl.bfloat16)
        tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], c,
                 mask=m_ok[:, None] & n_ok[None, :])

    _KERNEL = mxfp4_gemm
    return _KERNEL


def _blocks(M, K):
    """Tile sizes that compile for sm90's bf16 MMA: M >= 16, K a multiple of 64 per step."""
    bm = 16 if M <= 16 else 64 if M <= 64 else 128
    bk = next((b for b in (128, 64) if K % b == 0), None)
    check(bk is not None, "K a multiple of 64 (BLOCK_K of the dot_scaled loop)", K)
    return bm, 64, bk


def dot_scaled(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    import torch
    import triton
    dev = cuda()
    check(tuple(x_mxfp4.shape) == (M, K // 2) and x_mxfp4.dtype == torch.uint8,
          f"x_mxfp4 uint8 [{M}, {K // 2}]", (list(x_mxfp4.shape), x_mxfp4.dtype))
    check(tuple(x_mxfp4_scale.shape) == (M, K // 32), f"x_mxfp4_scale [{M}, {K // 32}]",
          list(x_mxfp4_scale.shape))
    check(tuple(weight.shape) == (N, K // 2), f"weight [{N}, {K // 2}]", list(weight.shape))
    check(tuple(weight_scale.shape) == (K // 32, N), f"weight_scale [{K // 32}, {N}] (K/32, N)",
          list(weight_scale.shape))
    a = x_mxfp4.to(dev).contiguous()
    sa = x_mxfp4_scale.to(dev).contiguous()
    w = weight.to(dev).contiguous()
    b = w.t()                                          # [K/2, N] view, packed along K
    sb = weight_scale.to(dev).t().contiguous()         # [N, K/32]
    out = torch.empty((M, N), dtype=torch.bfloat16, device=dev)
    bm, bn, bk = _blocks(M, K)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    _kernel()[grid](a, sa, b, sb, out, M, N, K,
                    a.stride(0), b.stride(0), b.stride(1), sa.stride(0), sb.stride(0),
                    out.stride(0), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4)
    torch.cuda.synchronize()
    return to_cpu_bf16(out, M, N)
