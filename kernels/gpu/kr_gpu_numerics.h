/* Device ports of reference/formats.c and the quantizer rules, operation for
 * operation, so the GPU kernels round exactly as the CPU models do.  Include
 * after vendor.h. */
#ifndef KR_GPU_NUMERICS_H
#define KR_GPU_NUMERICS_H

#define KR_BF16_POISON 0x7FC1u

/* Helpers: not every source uses every one. */
#define KR_DFN static __device__ __forceinline__ __attribute__((unused))

/* fp8 e4m3 magnitude (7 bits) with the given bias. */
KR_DFN float kr_e4m3_magnitude(uint32_t mag, int bias)
{
    const uint32_t e = mag >> 3, m = mag & 7u;
    if (e == 0)  /* m * 2^(1 - bias - 3): exact */
        return kr_fmul((float)m, kr_ldexpf(1.0f, 1 - bias - 3));
    return kr_u2f(((e + 127u - (uint32_t)bias) << 23) | (m << 20));
}

/* fmt 0: e4m3fn (NaN = s.1111.111), 1: e4m3fnuz (NaN = 0x80). */
KR_DFN float kr_fp8_decode(uint32_t code, int fmt)
{
    code &= 0xFFu;
    if (fmt == 0) {
        if ((code & 0x7Fu) == 0x7Fu)
            return kr_u2f(0x7FC00000u | ((code & 0x80u) << 24));
        const float v = kr_e4m3_magnitude(code & 0x7Fu, 7);
        return (code & 0x80u) ? -v : v;
    }
    if (code == 0x80u)
        return kr_u2f(0x7FC00000u);
    const float v = kr_e4m3_magnitude(code & 0x7Fu, 8);
    return (code & 0x80u) ? -v : v;
}

/* e4m3fn_encode(x, FP8_SATURATE) of reference/formats.c. */
KR_DFN uint32_t kr_e4m3fn_encode_sat(float x)
{
    const uint32_t bits = kr_f2u(x);
    const uint32_t sign = (bits >> 24) & 0x80u;
    const uint32_t mag = bits & 0x7FFFFFFFu;
    if (mag > 0x7F800000u)
        return 0x7Fu | sign;
    if (kr_u2f(mag) > 448.0f)
        return 0x7Eu | sign;
    const uint32_t min_normal_bits = (uint32_t)(127 - 7 + 1) << 23;
    uint32_t code;
    if (mag < min_normal_bits) {
        const uint32_t denorm_bits = (uint32_t)(127 + 21 - 7) << 23;
        const float sum = kr_fadd(kr_u2f(mag), kr_u2f(denorm_bits));
        code = (kr_f2u(sum) - denorm_bits) & 0xFFu;
    } else {
        const uint32_t mantissa_odd = (mag >> 20) & 1u;
        const uint32_t v = mag + ((uint32_t)(7 - 127) << 23) + 0x7FFFFu + mantissa_odd;
        code = (v >> 20) & 0xFFu;
    }
    return code | sign;
}

KR_DFN float kr_e2m1_value(uint32_t code)
{
    const uint32_t c = code & 7u;
    /* 0 .5 1 1.5 2 3 4 6: bits (c & 7) << 22 are 2^(ee-127)(1 + m/2), or m*2^-127 for ee = 0. */
    const float v = kr_fmul(kr_u2f(c << 22), 8.507059173023462e37f /* 2^126 */);
    return (code & 8u) ? -v : v;
}

/* e8m0_decode: 2^(b-127); 0xFF NaN; byte 0 -> 0 when zero_is_zero. */
KR_DFN float kr_e8m0_decode(uint32_t b, int zero_is_zero)
{
    if (b == 0xFFu)
        return kr_u2f(0x7FC00000u);
    if (b == 0u)
        return zero_is_zero ? 0.0f : kr_u2f(0x00400000u);
    return kr_u2f(b << 23);
}

/* bf16_encode: RNE, NaN -> 0x7FC0 with the input's sign. */
KR_DFN uint16_t kr_bf16_encode(float x)
{
    const uint32_t u = kr_f2u(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)(0x7FC0u | ((u >> 16) & 0x8000u));
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

KR_DFN float kr_bf16_decode(uint32_t h) { return kr_u2f(h << 16); }

/* The folded weight's value: e4m3fn(e2m1(code) * 2^-s), saturating (s = ref - E).
 * The general form, as folded_plan_init builds its table. */
KR_DFN float kr_w8_value(uint32_t code, int s)
{
    const float shifted = kr_ldexpf(kr_e2m1_value(code), -s);
    return kr_fp8_decode(kr_e4m3fn_encode_sat(shifted), 0);
}

/* The folded weight's value at (n, k) (kernels/cpu/folded_weight.c): zero in a
 * zero-scale block under E8M0_ZERO_IS_ZERO, else e4m3fn(e2m1 * 2^(E-ref)). */
KR_DFN float kr_folded_w(uint32_t code, uint32_t e, uint32_t ref, int zmode)
{
    if (zmode && e == 0)
        return 0.0f;
    return kr_w8_value(code, (int)ref - (int)e);
}

/* Scale byte of row n, block b. */
KR_DFN uint32_t kr_scale_at(const uint8_t *scales, int layout, int64_t N,
                                                       int64_t K, int64_t n, int64_t b)
{
    return layout == 0 ? scales[n * (K / 32) + b] : scales[b * N + n];
}

KR_DFN uint32_t kr_code_at(const uint8_t *packed, int64_t K, int64_t n,
                                                      int64_t k)
{
    const uint32_t byte = packed[n * (K / 2) + k / 2];
    return (k & 1) ? (byte >> 4) : (byte & 0x0Fu);
}

/* fmaxf as the CPU models get it from glibc on x86-64: a NaN operand yields
 * the other one; two NaNs yield the first (its payload).  CUDA's fmaxf
 * returns a canonical NaN (0x7FFFFFFF) for two NaNs, whose bits differ, and
 * aiter's scale rule reads amax's bits (an all-NaN block). */
KR_DFN float kr_fmaxf_c(float a, float b)
{
    if (a != a)
        return b != b ? a : b;
    if (b != b)
        return a;
    return fmaxf(a, b);
}

/* NaN bits as x86-64 keeps them, where the models read a NaN's bits: |x| by
 * clearing the sign bit (the GPU's abs modifier may canonicalize a NaN), and
 * x * s for a finite s returning x's own NaN, quieted (CUDA returns the
 * canonical 0x7FFFFFFF). */
KR_DFN float kr_fabs_bits(float x) { return kr_u2f(kr_f2u(x) & 0x7FFFFFFFu); }
KR_DFN float kr_fmul_nan_x86(float x, float s)
{
    return x != x ? kr_u2f(kr_f2u(x) | 0x00400000u) : kr_fmul(x, s);
}

/* fp8 decode without branches on the value path (staging): magnitude bits
 * << 20 are e4m3 * 2^-120 (fn) or * 2^-119 (fnuz), subnormals included. */
KR_DFN float kr_fp8_decode_fast(uint32_t b, int fmt)
{
    const uint32_t mag = b & 0x7Fu;
    const float v = kr_fmul(kr_u2f(mag << 20), fmt == 0 ? 1.329227995784916e36f /* 2^120 */
                                                         : 6.64613997892458e35f /* 2^119 */);
    const float sv = kr_u2f(kr_f2u(v) | ((b & 0x80u) << 24));
    if (fmt == 0)
        return mag == 0x7Fu ? kr_u2f(0x7FC00000u | ((b & 0x80u) << 24)) : sv;
    return b == 0x80u ? kr_u2f(0x7FC00000u) : sv;
}

/* ---- aiter _mxfp4_quant_op (reference/quant_mxfp4.c, aiter-even) ---- */
KR_DFN int kr_aiter_scale_exponent(float amax)
{
    const uint32_t a = (kr_f2u(amax) + 0x200000u) & 0xFF800000u;
    const uint32_t ef = (a >> 23) & 0xFFu;
    if (ef == 0)
        return -127;
    if (ef == 0xFF)
        return 127;
    int e = (int)ef - 127 - 2;
    return e < -127 ? -127 : (e > 127 ? 127 : e);
}

KR_DFN uint32_t kr_aiter_e2m1_from_scaled(float qx)
{
    const uint32_t bits = kr_f2u(qx);
    const uint32_t sign = bits & 0x80000000u;
    const uint32_t mag = bits ^ sign;
    const float f = kr_u2f(mag);
    const bool saturate = f >= 6.0f;
    const bool denormal = !saturate && f < 1.0f;
    const bool normal = !(saturate || denormal);
    const uint32_t denorm_bits = 149u << 23;
    const uint32_t denormal_code = (kr_f2u(kr_fadd(f, kr_u2f(denorm_bits))) - denorm_bits) & 0xFFu;
    const uint32_t mantissa_odd = (mag >> 22) & 1u;
    const uint32_t v = mag + ((uint32_t)(1 - 127) << 23) + (1u << 21) - 1u + mantissa_odd;
    const uint32_t normal_code = (v >> 22) & 0xFFu;
    const uint32_t code = saturate ? 0x7u : (normal ? normal_code : denormal_code);
    return (code | (sign >> 28)) & 0xFFu;
}

#endif
