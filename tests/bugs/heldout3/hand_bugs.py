"""A third corpus of hand-written W4A4 and bf16 bugs, written as a kernel author writes them
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


def _codes(packed, rows, K, low_mask=15):
    p = _np(packed).astype(np.uint8).reshape(rows, K // 2)
    return np.stack([p & low_mask, p >> 4], axis=-1).reshape(rows, K)


def _e8m0(b):
    return np.ldexp(np.float32(1.0), b.astype(np.int32) - 127).astype(np.float32)


def _w4a4(a, sa, w, sw):
    """Per-block W4A4 on decoded operands: a [M, K], sa [M, K/32], w [N, K], sw [N, K/32];
    exact block sums, acc += s * (sa * sw) over blocks in order; bf16 bits out."""
    M, N, nb = a.shape[0], w.shape[0], sa.shape[1]
    acc = np.zeros((M, N), dtype=np.float32)
    for b in range(nb):
        s = (a[:, 32 * b:32 * b + 32] @ w[:, 32 * b:32 * b + 32].T).astype(np.float32)
        acc = acc + s * (sa[:, b][:, None] * sw[:, b][None, :]).astype(np.float32)
    return _bf16_bits(acc)


def _w4a4_operands(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K, act_low_mask=15):
    nb = K // 32
    a = E2M1[_codes(x_mxfp4, M, K, act_low_mask)]
    w = E2M1[_codes(weight, N, K)]
    sa = _e8m0(_np(x_mxfp4_scale).astype(np.uint8).reshape(M, nb))
    sw = _e8m0(_np(weight_scale).astype(np.uint8).reshape(nb, N).T)
    return a, sa, w, sw


def h3_py_w4a4_rows_half_batch(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    a, sa, w, sw = _w4a4_operands(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K)
    h = M // 2
    rows = np.arange(M)
    # BUG: the batch split in two; the second half's activation offset taken as h rows back
    # from the row instead of from the half's start, so row m reads row m - h
    rows = np.where(rows >= h, rows - h, rows)
    return _w4a4(a[rows], sa[rows], w, sw)


def h3_py_w4a4_tail_store_shift(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    res = _w4a4(*_w4a4_operands(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K))
    out = np.zeros((M, N), dtype=np.uint16)
    tile = 32
    for n0 in range(0, N, tile):
        width = min(tile, N - n0)
        if width == tile:
            out[:, n0:n0 + tile] = res[:, n0:n0 + tile]
        else:
            # BUG: the masked tail store indexes from n0 + 1 (a 1-based lane id), so column n
            # gets column n - 1's result and the tail's first column is never written
            out[:, n0 + 1:N] = res[:, n0:N - 1]
    return out


def h3_py_w4a4_lonib_sign(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    # BUG: the activation's low nibble masked with 7 (a magnitude mask) instead of 15:
    # every even-k element loses its sign
    return _w4a4(*_w4a4_operands(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K,
                                 act_low_mask=7))


def _bf16_operands(x_bf16, weight_bf16, M, N, K):
    return (_bf16_values(_np(x_bf16)).reshape(M, K).astype(np.float64),
            _bf16_values(_np(weight_bf16)).reshape(N, K).astype(np.float64))


def h3_py_bf16_prod_bf16(x_bf16, weight_bf16, M, N, K):
    x, w = _bf16_operands(x_bf16, weight_bf16, M, N, K)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    out = np.zeros((M, N), dtype=np.float32)
    for m in range(M):
        # BUG: the multiply done in bf16 (the operands' type) and only the sum in fp32
        prod = _bf16_round(x32[m][None, :] * w32)
        out[m] = prod.astype(np.float64).sum(axis=1).astype(np.float32)
    return _bf16_bits(out)


def h3_py_bf16_splitk_double(x_bf16, weight_bf16, M, N, K):
    x, w = _bf16_operands(x_bf16, weight_bf16, M, N, K)
    splits = 4
    step = K // splits
    parts = [(x[:, s * step:(s + 1) * step] @ w[:, s * step:(s + 1) * step].T).astype(np.float32)
             for s in range(splits)]
    # BUG: the output is initialised with split 0's partial (to skip a memset) and then every
    # split, split 0 included, adds its partial into it
    out = parts[0].copy()
    for p in parts:
        out = out + p
    return _bf16_bits(out)


def h3_py_bf16_last_kchunk_wrap(x_bf16, weight_bf16, M, N, K):
    x, w = _bf16_operands(x_bf16, weight_bf16, M, N, K)
    chunk = 256
    chunks = K // chunk
    acc = np.zeros((M, N), dtype=np.float32)
    for c in range(chunks):
        # BUG: the weight chunk's slot taken modulo chunks - 1 (an off-by-one ring size):
        # the last chunk reads chunk 0's weights
        wc = c % (chunks - 1)
        part = x[:, c * chunk:(c + 1) * chunk] @ w[:, wc * chunk:(wc + 1) * chunk].T
        acc = acc + part.astype(np.float32)
    return _bf16_bits(acc)
