"""Python kernels on kreplay's named operands (kernels/plugins/python/README.md), for
test_py_operands.

Each emulates one registry model in numpy fp32 from the operands it declares, decoding
the byte formats from their definitions here (not through kreplay): an emulation that
is bit-identical to its model (--vs) shows that the operands carry exactly the values
the model and its R_exact use.  numpy float32 arithmetic is IEEE single with no
contraction, so the sums below are the models' sums when the orders are.
"""
import numpy as np

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float64)


def _np(t):
    return t.numpy() if hasattr(t, "numpy") else np.asarray(t)


def e2m1(codes):
    codes = codes.astype(np.int64)
    mag = E2M1[codes & 7]
    return np.where(codes & 8, -mag, mag)


def unpack_e2m1(packed, rows, k):
    """[rows, k/2] bytes, element 2j in the low nibble -> [rows, k] codes."""
    p = packed.astype(np.uint8)
    out = np.empty((rows, k), dtype=np.uint8)
    out[:, 0::2] = p & 0x0F
    out[:, 1::2] = p >> 4
    return out


def e8m0(b):
    b = b.astype(np.int64)
    return np.where(b == 255, np.nan, np.ldexp(1.0, b - 127))


def e4m3fn(codes):
    """OCP e4m3fn: bias 7, subnormals m/8 * 2^-6, 0x7F/0xFF NaN."""
    c = codes.astype(np.int64)
    e, m = (c >> 3) & 15, c & 7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * np.ldexp(1.0, e - 7))
    mag = np.where((c & 0x7F) == 0x7F, np.nan, mag)
    return np.where(c & 0x80, -mag, mag)


def bf16_bits(f32):
    """fp32 -> bf16 round to nearest even; NaN -> 0x7FC0 with its sign."""
    u = np.ascontiguousarray(f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = ((u & 0x7FFFFFFF) > 0x7F800000)
    return np.where(nan, (0x7FC0 | ((u >> 16) & 0x8000)).astype(np.uint16), r)


def bf16_values(bits):
    return (np.ascontiguousarray(bits).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def w4a4_blocks(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    """w4a4.aiter's order: exact per-block sums, acc += s * (2^(Ea-127) * 2^(Ew-127)) by block."""
    a = e2m1(unpack_e2m1(_np(x_mxfp4), M, K))
    w = e2m1(unpack_e2m1(_np(weight), N, K))
    sa = e8m0(_np(x_mxfp4_scale)).astype(np.float32)          # [M, K/32]
    sw = e8m0(_np(weight_scale)).astype(np.float32)           # [K/32, N]
    acc = np.zeros((M, N), dtype=np.float32)
    for b in range(K // 32):
        ks = slice(32 * b, 32 * b + 32)
        s = (a[:, ks] @ w[:, ks].T).astype(np.float32)        # exact: multiples of 1/4 below 2^11
        f = sa[:, b:b + 1] * sw[b][None, :]
        acc = acc + s * f
    return bf16_bits(acc)


def w4a8_folded_seq(x_fp8, x_scale, w_folded, w_folded_scale, M, N, K):
    """w4a8.folded's order: acc += x*w8 over k ascending; bf16(acc * (x_scale * scale_n))."""
    x = e4m3fn(_np(x_fp8)).astype(np.float32)
    w = e4m3fn(_np(w_folded)).astype(np.float32)
    acc = np.zeros((M, N), dtype=np.float32)
    for k in range(K):
        acc = acc + x[:, k:k + 1] * w[:, k][None, :]
    f = _np(x_scale).astype(np.float32)[:, None] * _np(w_folded_scale).astype(np.float32)[None, :]
    return bf16_bits(acc * f)


def _bits16(t):
    """A torch.bfloat16 tensor (or uint16 bits) -> numpy uint16 bits."""
    if str(getattr(t, "dtype", "")) == "torch.bfloat16":
        import torch
        t = t.view(torch.int16)
    return _np(t).view(np.uint16)


def bf16_seq(x_bf16, weight_bf16, M, N, K):
    """bf16.sequential's order: acc += x*w over k ascending (exact products), bf16(acc)."""
    x, w = bf16_values(_bits16(x_bf16)), bf16_values(_bits16(weight_bf16))
    acc = np.zeros((M, N), dtype=np.float32)
    for k in range(K):
        acc = acc + x[:, k:k + 1] * w[:, k][None, :]
    return bf16_bits(acc)


def folded_decode_check(x_fp8, x_scale, w_folded, w_folded_scale, weight, weight_scale, M, N, K):
    """Raises unless e4m3fn(w_folded) * scale is the MXFP4 weight wherever folding is exact
    (block exponent within 8 binades below the row's reference); returns the fp64 GEMM of
    the fp8 activations with the decoded folded weight, rounded to bf16."""
    w = e2m1(unpack_e2m1(_np(weight), N, K)) * np.repeat(e8m0(_np(weight_scale)).T, 32, axis=1)
    folded = e4m3fn(_np(w_folded)) * _np(w_folded_scale).astype(np.float64)[:, None]
    e = np.repeat(_np(weight_scale).T.astype(np.int64), 32, axis=1)
    ref = np.log2(_np(w_folded_scale).astype(np.float64)).astype(np.int64) + 127
    shift = ref[:, None] - e
    exact = (shift >= 0) & (shift <= 8)     # e2m1 * 2^-8 still lands on e4m3fn's 2^-9 grid
    bad = exact & (folded != w)
    if bad.any() or not exact.any():
        i = np.argwhere(bad)[:1].tolist()
        raise AssertionError(f"w_folded: {int(bad.sum())} of {int(exact.sum())} exactly foldable "
                             f"elements differ, first at {i}")
    x = e4m3fn(_np(x_fp8)) * _np(x_scale).astype(np.float64)[:, None]
    return bf16_bits((x @ folded.T).astype(np.float32))


def x_fp32_check(x, x_bf16, weight_bf16, M, N, K):
    """Raises unless x is fp32 [M, K] and x_bf16 is x rounded to bf16 (by this file's
    rounding); returns the fp64 GEMM of x_bf16 with the bf16 weight, rounded to bf16."""
    xs = _np(x)
    got = _bits16(x_bf16)
    want = bf16_bits(xs)
    if xs.dtype != np.float32 or xs.shape != (M, K) or not np.array_equal(got, want):
        raise AssertionError(f"x_bf16 differs from bf16(x) in {int((got != want).sum())} elements")
    prod = bf16_values(got).astype(np.float64) @ bf16_values(_bits16(weight_bf16)).astype(np.float64).T
    return bf16_bits(prod.astype(np.float32))


def wants_missing(x_mxfp4, M, N, K):
    """Asks for x_mxfp4 without declaring a W4A4 kernel's operands: an ERROR row."""
    return np.zeros((M, N), dtype=np.uint16)
