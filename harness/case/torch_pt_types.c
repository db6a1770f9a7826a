/* torch_pt_types: the dtypes and value kinds of torch_pt.h, by name and size. */
#include <stddef.h>

#include "torch_pt.h"

/* ---- dtypes and kinds ---- */

static const struct {
    const char *name;
    size_t size;
} DTYPES[PT_DT_COUNT] = {
    [PT_DT_FLOAT8_E4M3FN] = {"float8_e4m3fn", 1}, [PT_DT_BFLOAT16] = {"bfloat16", 2},
    [PT_DT_FLOAT16] = {"float16", 2},             [PT_DT_FLOAT32] = {"float32", 4},
    [PT_DT_UINT8] = {"uint8", 1},                 [PT_DT_INT32] = {"int32", 4},
    [PT_DT_INT64] = {"int64", 8},
    [PT_DT_FLOAT8_E4M3FNUZ] = {"float8_e4m3fnuz", 1}, [PT_DT_FLOAT8_E5M2] = {"float8_e5m2", 1},
    [PT_DT_FLOAT8_E8M0FNU] = {"float8_e8m0fnu", 1},
    [PT_DT_FLOAT4_E2M1FN_X2] = {"float4_e2m1fn_x2", 1},
    [PT_DT_INT8] = {"int8", 1},                   [PT_DT_BOOL] = {"bool", 1},
    [PT_DT_FLOAT64] = {"float64", 8},
};
#define SUBSET "not in the supported torch.save subset"

const char *pt_dtype_name(pt_dtype_t d)
{
    return (unsigned)d < PT_DT_COUNT ? DTYPES[d].name : "?";
}

size_t pt_dtype_size(pt_dtype_t d)
{
    return (unsigned)d < PT_DT_COUNT ? DTYPES[d].size : 0;
}

const char *pt_kind_name(pt_kind_t k)
{
    static const char *names[] = {"None", "bool", "int", "float", "str", "tuple", "list",
                                  "dict", "tensor", "storage", "global"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}
