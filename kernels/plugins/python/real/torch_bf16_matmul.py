"""torch's bf16 matmul on the GPU (cuBLAS) on bf16.sequential's operands.

    kreplay replay --py kernels/plugins/python/real/torch_bf16_matmul.py:bf16_matmul@bf16.sequential \
        --vs bf16.sequential CASES...

out = x_bf16 @ weight_bf16^T, bf16 in and out, fp32 accumulation: bf16_matmul with
allow_bf16_reduced_precision_reduction off (cuBLAS may not reduce split-K partials in bf16),
bf16_matmul_default with torch's default setting.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _device import check, cuda, to_cpu_bf16  # noqa: E402


def _run(x_bf16, weight_bf16, M, N, K, reduced):
    import torch
    dev = cuda()
    check(x_bf16.dtype == torch.bfloat16 and weight_bf16.dtype == torch.bfloat16,
          "bf16 operands", (x_bf16.dtype, weight_bf16.dtype))
    check(tuple(weight_bf16.shape) == (N, K), f"weight_bf16 [{N}, {K}]", list(weight_bf16.shape))
    flag = torch.backends.cuda.matmul
    before = flag.allow_bf16_reduced_precision_reduction
    try:
        if reduced is not None:
            flag.allow_bf16_reduced_precision_reduction = reduced
        out = torch.matmul(x_bf16.to(dev), weight_bf16.to(dev).t())
        torch.cuda.synchronize()
    finally:
        flag.allow_bf16_reduced_precision_reduction = before
    return to_cpu_bf16(out, M, N)


def bf16_matmul(x_bf16, weight_bf16, M, N, K):
    return _run(x_bf16, weight_bf16, M, N, K, False)


def bf16_matmul_default(x_bf16, weight_bf16, M, N, K):
    return _run(x_bf16, weight_bf16, M, N, K, None)
