#include "content_hash.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t read64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t round64(uint64_t acc, uint64_t lane)
{
    return rotl64(acc + lane * P2, 31) * P1;
}

static inline uint64_t merge64(uint64_t acc, uint64_t v)
{
    return (acc ^ round64(0, v)) * P1 + P4;
}

uint64_t content_hash64(const void *data, size_t bytes, uint64_t seed)
{
    const unsigned char *p = data;
    const unsigned char *end = p + bytes;
    uint64_t h;
    if (bytes >= 32) {
        uint64_t a = seed + P1 + P2, b = seed + P2, c = seed, d = seed - P1;
        const unsigned char *limit = end - 32;
        do {
            a = round64(a, read64(p));
            b = round64(b, read64(p + 8));
            c = round64(c, read64(p + 16));
            d = round64(d, read64(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl64(a, 1) + rotl64(b, 7) + rotl64(c, 12) + rotl64(d, 18);
        h = merge64(merge64(merge64(merge64(h, a), b), c), d);
    } else {
        h = seed + P5;
    }
    h += (uint64_t)bytes;
    for (; p + 8 <= end; p += 8)
        h = rotl64(h ^ round64(0, read64(p)), 27) * P1 + P4;
    for (; p < end; p++)
        h = rotl64(h ^ (*p * P5), 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}
