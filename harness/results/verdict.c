#include "verdict.h"

int64_t nonfinite_total(const nonfinite_t *nf)
{
    return nf->nan + nf->pos_inf + nf->neg_inf;
}
