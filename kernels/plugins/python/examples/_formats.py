"""The operand formats for the torch examples here (bf16_matmul_torch.py, w4a8_perblock_torch.py),
decoded from their definitions (docs/NUMERICS.md), not from kreplay: OCP e4m3fn (bias 7,
0x7F/0xFF NaN), e2m1 (low nibble first), e8m0 (2^(b-127), 0xFF NaN)."""
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


def e2m1_codes(weight, N, K):
    """The packed [N, K/2] weight's e2m1 codes as [N, K]: element 2j is the low nibble of byte j."""
    w = weight.long()
    return torch.stack([w & 0xF, w >> 4], dim=-1).reshape(N, K)
