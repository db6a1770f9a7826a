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
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _formats import E2M1, E4M3FN, E8M0, e2m1_codes  # noqa: E402


def w4a8_perblock(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):
    x = E4M3FN[x_fp8.long()]                                            # [M, K]
    codes = e2m1_codes(weight, N, K)
    wv = E2M1[codes]                                                    # [N, K]
    scale = E8M0[weight_scale.long()]                                   # [K/32, N]
    acc = torch.zeros(M, N, dtype=torch.float32)
    for b in range(K // 32):
        s = torch.zeros(M, N, dtype=torch.float32)
        for k in range(32 * b, 32 * b + 32):
            s = s + x[:, k:k + 1] * wv[:, k].reshape(1, N)              # exact product, fp32 add
        acc = acc + s * scale[b].reshape(1, N)
    return (acc * x_scale.reshape(M, 1)).to(torch.bfloat16)
