#include "mx_oracle.h"

#include <math.h>

const double test_e2m1_grid[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

uint8_t test_e2m1_nearest_code(double y)
{
    const uint8_t sign = signbit(y) ? 8 : 0;
    if (isnan(y))
        return sign;
    const double a = fabs(y);
    if (a >= 6.0)
        return (uint8_t)(7 | sign);
    int best = 0;
    for (int c = 1; c < 8; c++) {
        const double d = fabs(a - test_e2m1_grid[c]), bd = fabs(a - test_e2m1_grid[best]);
        if (d < bd || (d == bd && (c & 1) == 0))
            best = c;
    }
    return (uint8_t)(best | sign);
}

double test_mx_value(uint8_t code, uint8_t scale_byte, e8m0_mode_t mode)
{
    double scale;
    if (scale_byte == 0xFF)
        scale = NAN;
    else if (scale_byte == 0 && mode == E8M0_ZERO_IS_ZERO)
        scale = 0.0;
    else
        scale = ldexp(1.0, (int)scale_byte - 127);
    const double mag = test_e2m1_grid[code & 7] * scale;
    return (code & 8) ? -mag : mag;
}
