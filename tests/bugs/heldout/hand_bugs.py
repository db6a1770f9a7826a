"""Hand-written W4A4 and bf16 bugs of the held-out corpus, and correct Python kernels of both
routes, written as a kernel author writes them (numpy on the named operands of
kernels/plugins/python/README.md; each mistake marked "BUG:"), not from the diagnosis grammar."""
import numpy as np

E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def _np(t):
    try:
        import torch
        if isinstance(t, torch.Tensor):
            if t.dtype == torch.bfloat16:
                return t.contiguous().view(torch.int16).numpy().view(np.uint16)
            return t.contiguous().numpy()
    except ImportError:
        pass
    return np.asarray(t)


def _bf16_bits(v):
    u = np.asarray(v, dtype=np.float32).view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where((u & 0x7FFFFFFF) > 0x7F800000, ((u >> 16) & 0x8000 | 0x7FC0).astype(np.uint16), r)


def _bf16_values(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def _codes(packed, rows, K):
    p = _np(packed).astype(np.uint8).reshape(rows, K // 2)
    return np.stack([p & 15, p >> 4], axis=-1).reshape(rows, K)


def _w4a4(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K, act_scale, w_scale):
    """The per-block W4A4 sum with the given block-scale decoders: exact block sums (e2m1
    products), acc += s * (2^(Ea-127) * 2^(Ew-127)) over blocks in order."""
    nb = K // 32
    a = E2M1[_codes(x_mxfp4, M, K)]
    w = E2M1[_codes(weight, N, K)]
    sa = act_scale(_np(x_mxfp4_scale).astype(np.uint8).reshape(M, nb))
    sw = w_scale(_np(weight_scale).astype(np.uint8))
    acc = np.zeros((M, N), dtype=np.float32)
    for b in range(nb):
        s = (a[:, 32 * b:32 * b + 32] @ w[:, 32 * b:32 * b + 32].T).astype(np.float32)
        acc = acc + s * (sa[:, b][:, None] * sw[:, b][None, :]).astype(np.float32)
    return _bf16_bits(acc)


def _e8m0(b):
    return np.ldexp(np.float32(1.0), b.astype(np.int32) - 127).astype(np.float32)


def c_py_w4a4(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    """Correct."""
    return _w4a4(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K, _e8m0,
                 lambda s: _e8m0(s.reshape(K // 32, N).T))


def h_py_w4a4_uint8_wrap(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    # BUG: the exponent taken in the scale's own dtype: uint8 - 127 wraps below 127
    return _w4a4(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K,
                 lambda s: np.ldexp(np.float32(1.0), s - 127).astype(np.float32),
                 lambda s: _e8m0(s.reshape(K // 32, N).T))


def h_py_w4a4_scale_swap(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    # BUG: the [K/32, N] weight scales reshaped to [N, K/32] instead of transposed
    return _w4a4(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K, _e8m0,
                 lambda s: _e8m0(s.reshape(N, K // 32)))


def _bf16_matmul(x, w, M, N, K):
    """One sequential fp32 sum over k per output."""
    acc = np.zeros((M, N), dtype=np.float32)
    for k in range(K):
        acc = acc + x[:, k][:, None] * w[:, k][None, :]
    return _bf16_bits(acc)


def c_py_bf16(x_bf16, weight_bf16, M, N, K):
    """Correct: the products summed in float64, rounded once."""
    x = _bf16_values(_np(x_bf16)).reshape(M, K).astype(np.float64)
    w = _bf16_values(_np(weight_bf16)).reshape(N, K).astype(np.float64)
    return _bf16_bits((x @ w.T).astype(np.float32))


def h_py_bf16_half(x_bf16, weight_bf16, M, N, K):
    x = _bf16_values(_np(x_bf16)).reshape(M, K)
    w = _bf16_values(_np(weight_bf16)).reshape(N, K)
    x = x.astype(np.float16).astype(np.float32)     # BUG: the activations cast to half
    return _bf16_matmul(x, w, M, N, K)


def h_py_bf16_wt(x_bf16, weight_bf16, M, N, K):
    x = _bf16_values(_np(x_bf16)).reshape(M, K)
    w = _bf16_values(_np(weight_bf16)).reshape(K, N).T   # BUG: a [K, N] view of an [N, K] weight
    return _bf16_matmul(x, w, M, N, K)
