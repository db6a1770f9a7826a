"""What the skinny bf16 dispatch falls back to: torch's own bf16 matmul,
out = torch.matmul(x_bf16, W_bf16.T), on the operands the plugin ABI hands over
(fp8 activations times their per-token scale, and the MXFP4 weight, each dequantized and
rounded to bf16: e2m1 times a power of two is exact in bf16).  Not bit-faithful to any
model: it is judged against the fp32 references (PASS against R_source).

    kreplay replay --py kernels/plugins/python/examples/bf16_matmul_torch.py:bf16_matmul CASE
"""
import numpy as np
import torch


def _e4m3fn_table():
    t = np.zeros(256, dtype=np.float32)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 0xF, b & 7
        v = np.ldexp(np.float32(m), -9) if e == 0 else np.ldexp(np.float32(8 + m), e - 10)
        t[b] = np.float32(np.nan) if (b & 0x7F) == 0x7F else (-v if s else v)
    return torch.from_numpy(t)


E4M3FN = _e4m3fn_table()
E2M1 = torch.tensor([0., .5, 1., 1.5, 2., 3., 4., 6., -0., -.5, -1., -1.5, -2., -3., -4., -6.])
E8M0 = torch.from_numpy(np.array([np.ldexp(np.float32(1), b - 127) if b != 255 else np.nan
                                  for b in range(256)], dtype=np.float32))


def bf16_matmul(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):
    x = (E4M3FN[x_fp8.long()] * x_scale.reshape(M, 1)).to(torch.bfloat16)
    w = weight.long()
    codes = torch.stack([w & 0xF, w >> 4], dim=-1).reshape(N, K)
    scale = E8M0[weight_scale.long()].t().repeat_interleave(32, dim=1)  # [N, K]
    wb = (E2M1[codes] * scale).to(torch.bfloat16)
    return torch.matmul(x, wb.t())
