"""Python kernels of the held-out corpus made from a grammar spec: each takes the named
operands of its route (kernels/plugins/python/README.md) and computes through
grammar_ref.run_spec."""
import numpy as np

import grammar_ref as g


def _np(t, dtype=None):
    """A torch CPU tensor (or numpy array) as numpy; bf16 tensors as their uint16 bits."""
    try:
        import torch
        if isinstance(t, torch.Tensor):
            if t.dtype == torch.bfloat16:
                return t.contiguous().view(torch.int16).numpy().view(np.uint16)
            t = t.contiguous().numpy()
    except ImportError:
        pass
    a = np.asarray(t)
    return a.astype(dtype) if dtype else a


def w4a8_kernel(spec):
    def kernel(x_fp8, weight, weight_scale, x_scale, M, N, K):
        return g.run_spec("W4A8", spec, M, N, K, x_codes=_np(x_fp8, np.uint8),
                          x_scale=_np(x_scale, np.float32),
                          w_codes=g.unpack_e2m1(_np(weight, np.uint8), N, K),
                          ws_kn=_np(weight_scale, np.uint8).reshape(K // 32, N))
    return kernel


def w4a4_kernel(spec):
    def kernel(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
        return g.run_spec("W4A4", spec, M, N, K, x_codes=g.unpack_e2m1(_np(x_mxfp4, np.uint8), M, K),
                          x_block_scale=_np(x_mxfp4_scale, np.uint8).reshape(M, K // 32),
                          w_codes=g.unpack_e2m1(_np(weight, np.uint8), N, K),
                          ws_kn=_np(weight_scale, np.uint8).reshape(K // 32, N))
    return kernel


def bf16_kernel(spec):
    def kernel(x_bf16, weight_bf16, M, N, K):
        return g.run_spec("BF16", spec, M, N, K, x_codes=_np(x_bf16).reshape(M, K),
                          w_codes=_np(weight_bf16).reshape(N, K))
    return kernel
