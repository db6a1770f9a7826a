/* libFuzzer target: the torch.save (.pt) reader (harness/case/torch_pt.h).
 * pt_open is path-based, so each input is written to a temporary file; every
 * tensor the file declares is then read, so the storage paths run too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_tmp.h"
#include "torch_pt.h"

static void read_tensors(pt_file_t *f, const pt_value_t *v, int depth)
{
    if (!v || depth > 16)
        return;
    if (v->kind == PT_TENSOR && v->tensor) {
        kr_error_t err;
        void *data = NULL;
        if (v->tensor->numel <= (INT64_C(1) << 22) && pt_tensor_read(f, v->tensor, "t", &data, &err) == 0)
            free(data);
        return;
    }
    if (v->kind == PT_TUPLE || v->kind == PT_LIST || v->kind == PT_DICT) {
        int64_t n = v->kind == PT_DICT ? 2 * v->n : v->n;
        for (int64_t i = 0; i < n && i < 4096; i++)
            read_tensors(f, v->items[i], depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    if (fuzz_write_tmp(path, sizeof path, "pt", data, size) != 0)
        return 0;
    pt_file_t *f = NULL;
    kr_error_t err;
    if (pt_open(path, &f, &err) == 0) {
        read_tensors(f, pt_root(f), 0);
        (void)pt_dict_get(pt_root(f), "x_fp8");
        pt_close(f);
    }
    unlink(path);
    return 0;
}
