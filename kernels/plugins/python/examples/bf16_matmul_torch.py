"""What the skinny bf16 dispatch falls back to: torch's own bf16 matmul,
out = torch.matmul(x_bf16, W_bf16.T), on the operands the plugin ABI hands over
(fp8 activations times their per-token scale, and the MXFP4 weight, each dequantized and
rounded to bf16: e2m1 times a power of two is exact in bf16).  Not bit-faithful to any
model: it is judged against the fp32 references (PASS against R_source).

    kreplay replay --py kernels/plugins/python/examples/bf16_matmul_torch.py:bf16_matmul CASE
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _formats import E2M1, E4M3FN, E8M0, e2m1_codes  # noqa: E402


def bf16_matmul(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):
    x = (E4M3FN[x_fp8.long()] * x_scale.reshape(M, 1)).to(torch.bfloat16)
    codes = e2m1_codes(weight, N, K)
    scale = E8M0[weight_scale.long()].t().repeat_interleave(32, dim=1)  # [N, K]
    wb = (E2M1[codes] * scale).to(torch.bfloat16)
    return torch.matmul(x, wb.t())
