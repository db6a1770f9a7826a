"""The W4A8 per-block-rescale kernel in pure torch, bit for bit the order kreplay's
w4a8.perblock model states (kernels/cpu/w4a8_perblock.c):

    for each 32-block b in increasing k:
        s = 0; for k in the block, increasing: s += fp8(x[m][k]) * e2m1(w[n][k])
        acc += s * 2^(E[b][n] - 127)
    out[m][n] = bf16_rne(acc * x_scale[m])

every add a separate fp32 torch op (no fused multiply-add), vectorised over (m, n).

    kreplay replay --py kernels/plugins/python/examples/w4a8_perblock_torch.py:w4a8_perblock CASE

Decoding comes from the formats' definitions (docs/NUMERICS.md), not from kreplay: OCP e4m3fn
(bias 7, 0x7F/0xFF NaN), e2m1 (low nibble first), e8m0 (2^(b-127), 0xFF NaN).
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
E2M1 = torch.tensor([0., .5, 1., 1.5, 2., 3., 4., 6., -0., -.5, -1., -1.5, -2., -3., -4., -6.],
                    dtype=torch.float32)
E8M0 = torch.from_numpy(np.array([np.ldexp(np.float32(1), b - 127) if b != 255 else np.nan
                                  for b in range(256)], dtype=np.float32))


def w4a8_perblock(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):
    x = E4M3FN[x_fp8.long()]                                            # [M, K]
    w = weight.long()
    codes = torch.stack([w & 0xF, w >> 4], dim=-1).reshape(N, K)
    wv = E2M1[codes]                                                    # [N, K]
    scale = E8M0[weight_scale.long()]                                   # [K/32, N]
    acc = torch.zeros(M, N, dtype=torch.float32)
    for b in range(K // 32):
        s = torch.zeros(M, N, dtype=torch.float32)
        for k in range(32 * b, 32 * b + 32):
            s = s + x[:, k:k + 1] * wv[:, k].reshape(1, N)              # exact product, fp32 add
        acc = acc + s * scale[b].reshape(1, N)
    return (acc * x_scale.reshape(M, 1)).to(torch.bfloat16)
