"""A second corpus of hand-written W4A4 and bf16 bugs, written as a kernel author writes them
(numpy on the named operands of kernels/plugins/python/README.md; each mistake marked "BUG:")."""
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


def _bf16_round(v):
    return _bf16_values(_bf16_bits(v))


def _codes(packed, rows, K):
    p = _np(packed).astype(np.uint8).reshape(rows, K // 2)
    return np.stack([p & 15, p >> 4], axis=-1).reshape(rows, K)


def _e8m0(b):
    return np.ldexp(np.float32(1.0), b.astype(np.int32) - 127).astype(np.float32)


def _w4a4(a, sa, w, sw, spill=lambda acc: acc):
    """Per-block W4A4 on decoded operands: a [M, K], sa [M, K/32], w [N, K], sw [N, K/32];
    exact block sums, acc += s * (sa * sw) over blocks in order, `spill` applied after each."""
    M, N, nb = a.shape[0], w.shape[0], sa.shape[1]
    acc = np.zeros((M, N), dtype=np.float32)
    for b in range(nb):
        s = (a[:, 32 * b:32 * b + 32] @ w[:, 32 * b:32 * b + 32].T).astype(np.float32)
        acc = spill(acc + s * (sa[:, b][:, None] * sw[:, b][None, :]).astype(np.float32))
    return _bf16_bits(acc)


def _w4a4_operands(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K, act_table=E2M1):
    nb = K // 32
    a = act_table[_codes(x_mxfp4, M, K)]
    w = E2M1[_codes(weight, N, K)]
    sa = _e8m0(_np(x_mxfp4_scale).astype(np.uint8).reshape(M, nb))
    sw = _e8m0(_np(weight_scale).astype(np.uint8).reshape(nb, N).T)
    return a, sa, w, sw


def h2_py_w4a4_xscale_row0(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    a, sa, w, sw = _w4a4_operands(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K)
    sa = np.broadcast_to(sa[0:1, :], sa.shape)   # BUG: row 0's block scales for every row
    return _w4a4(a, sa, w, sw)


def h2_py_w4a4_neg_table(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    # BUG: the activation decoder's negative half written largest magnitude first
    table = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -6, -4, -3, -2, -1.5, -1, -.5, -0.],
                     dtype=np.float32)
    return _w4a4(*_w4a4_operands(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K, table))


def h2_py_w4a4_acc_bf16(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    # BUG: the running sum kept in bf16 between blocks
    return _w4a4(*_w4a4_operands(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K),
                 spill=_bf16_round)


def _bf16_operands(x_bf16, weight_bf16, M, N, K):
    return (_bf16_values(_np(x_bf16)).reshape(M, K).astype(np.float64),
            _bf16_values(_np(weight_bf16)).reshape(N, K).astype(np.float64))


def h2_py_bf16_upper_byte(x_bf16, weight_bf16, M, N, K):
    x, _ = _bf16_operands(x_bf16, weight_bf16, M, N, K)
    # BUG: the weight staged one byte per element, the high byte of each bf16 word
    wbits = _np(weight_bf16).reshape(N, K).astype(np.uint16) & np.uint16(0xFF00)
    w = _bf16_values(wbits).astype(np.float64)
    return _bf16_bits((x @ w.T).astype(np.float32))


def h2_py_bf16_tile_bf16(x_bf16, weight_bf16, M, N, K):
    x, w = _bf16_operands(x_bf16, weight_bf16, M, N, K)
    acc = np.zeros((M, N), dtype=np.float32)
    for k0 in range(0, K, 64):
        part = (x[:, k0:k0 + 64] @ w[:, k0:k0 + 64].T).astype(np.float32)
        acc = _bf16_round(acc + part)    # BUG: the accumulator written back as bf16 per 64-K tile
    return _bf16_bits(acc)


def h2_py_bf16_khalf_bytes(x_bf16, weight_bf16, M, N, K):
    x, w = _bf16_operands(x_bf16, weight_bf16, M, N, K)
    h = K // 2
    first = (x[:, :h] @ w[:, :h].T).astype(np.float32)
    # BUG: the second split's weight offset counted in bytes (K/2 bytes = K/4 bf16 elements)
    off = h // 2
    second = (x[:, h:] @ w[:, off:off + h].T).astype(np.float32)
    return _bf16_bits(first + second)
