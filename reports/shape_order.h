/* The one order plots and the report list shapes and bands in: N, then K,
 * then the band's place in the sweep, then its name. */
#ifndef KR_SHAPE_ORDER_H
#define KR_SHAPE_ORDER_H

#include <stdint.h>
#include <string.h>

static inline int shape_order_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

/* (N, K) of one shape against another's. */
static inline int shape_order_nk(int64_t n1, int64_t k1, int64_t n2, int64_t k2)
{
    int c = shape_order_i64(n1, n2);
    return c ? c : shape_order_i64(k1, k2);
}

/* (N, K, band) of one group against another's. */
static inline int shape_order_band(int64_t n1, int64_t k1, int64_t order1, const char *band1,
                                   int64_t n2, int64_t k2, int64_t order2, const char *band2)
{
    int c = shape_order_nk(n1, k1, n2, k2);
    if (!c)
        c = shape_order_i64(order1, order2);
    return c ? c : strcmp(band1, band2);
}

#endif
