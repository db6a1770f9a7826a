#include "spec_formats.h"

#include <math.h>
#include <string.h>

double spec_e2m1(uint8_t code)
{
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (code & 8) ? -mag[code & 7] : mag[code & 7];
}

uint8_t spec_e2m1_nearest(double y)
{
    uint8_t sign = signbit(y) ? 8 : 0;
    double a = fabs(y);
    if (a >= 6.0)
        return 7 | sign;
    int best = 0;
    for (int c = 1; c < 8; c++) {
        double d = fabs(a - spec_e2m1((uint8_t)c)), bd = fabs(a - spec_e2m1((uint8_t)best));
        if (d < bd || (d == bd && (c & 1) == 0))
            best = c;
    }
    return (uint8_t)(best | sign);
}

double spec_e4m3fn(uint8_t code)
{
    int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
    if (e == 15 && m == 7)
        return NAN;
    double v = e == 0 ? m * pow(2.0, -9) : (1.0 + m / 8.0) * pow(2.0, e - 7);
    return s ? -v : v;
}

double spec_e8m0(uint8_t b, e8m0_mode_t mode)
{
    if (b == 0xFF)
        return NAN;
    if (b == 0 && mode == E8M0_ZERO_IS_ZERO)
        return 0.0;
    return ldexp(1.0, (int)b - 127);
}

float spec_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t spec_bf16_rne(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

int64_t spec_bf16_ulps(uint16_t a, uint16_t b)
{
    int64_t oa = (a & 0x8000) ? -(int64_t)(a & 0x7FFF) : (int64_t)(a & 0x7FFF);
    int64_t ob = (b & 0x8000) ? -(int64_t)(b & 0x7FFF) : (int64_t)(b & 0x7FFF);
    return oa > ob ? oa - ob : ob - oa;
}
