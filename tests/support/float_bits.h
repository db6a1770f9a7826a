/* The bits of an fp32 value and back, without aliasing through pointers:
 * the tests spell inputs and expectations as bit patterns (ties, NaN
 * payloads, FLT_MAX) and compare results bit for bit. */
#ifndef KR_FLOAT_BITS_H
#define KR_FLOAT_BITS_H
#include <stdint.h>
#include <string.h>

static inline uint32_t test_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float test_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
