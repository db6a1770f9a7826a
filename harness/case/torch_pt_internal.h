/* torch_pt_internal: what the torch.save reader's files share and nothing
 * outside harness/case/torch_pt*.c may use: the open file, the pickle VM's
 * state, the records of the zip and the VM's primitives. */
#ifndef KR_TORCH_PT_INTERNAL_H
#define KR_TORCH_PT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <zip.h>

#include "torch_pt.h"

#define SUPPORTED_DTYPES                                                                   \
    "float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e8m0fnu, float4_e2m1fn_x2, bfloat16, " \
    "float16, float32, float64, uint8, int8, bool, int32 or int64"
#define SUBSET "not in the supported torch.save subset"

struct pt_file {
    char *path;
    zip_t *za;
    char *prefix;               /* the archive's top directory: records are PREFIX/... */
    pt_value_t *root;
    pt_value_t **objs;          /* every value, freed by pt_close */
    int64_t nobjs, capobjs;
    uint64_t max_bytes;         /* bound on every inflated record and every tensor */
};

/* "<path>: <obj>: <problem>" */
#define ffail(f, err, obj, ...) kr_fail_at(err, (f)->path, obj, __VA_ARGS__)

/* ---- zip records (torch_pt_zip.c) ---- */

/* Index of record PREFIX/<rel>, or -1. */
zip_int64_t pt_record_locate(const pt_file_t *f, const char *rel);
/* Size of record idx, refused when implausible for its compressed size. */
int pt_record_size(const pt_file_t *f, zip_int64_t idx, const char *rel, uint64_t *size,
                   kr_error_t *err);
/* Record idx (exactly `size` bytes) into a malloc'd buffer (NUL-terminated). */
int pt_record_read(const pt_file_t *f, zip_int64_t idx, const char *rel, uint64_t size,
                   uint8_t **out, kr_error_t *err);
/* f->max_bytes from PT_MAX_MB_ENV, or the default. */
int pt_read_max_bytes(pt_file_t *f, kr_error_t *err);

/* ---- the pickle machine's state and primitives (torch_pt_vm.c) ---- */

typedef struct {
    pt_file_t *f;
    const uint8_t *p;
    size_t n, pos, op_pos;
    pt_value_t **stack;
    int64_t sp, scap;
    int64_t marks[PT_MAX_MARKS];
    int nmarks;
    pt_value_t **memo;
    int64_t memo_cap, memo_count;
    kr_error_t *err;
} vm_t;

/* "<path>: data.pkl: <problem>"; returns -1. */
__attribute__((format(printf, 2, 3)))
int pt_vm_fail(vm_t *vm, const char *fmt, ...);
int pt_vm_corrupt(vm_t *vm, const char *what);
/* "MARK", "STOP", ...: an opcode's name, for messages. */
const char *pt_opcode_name(int op);
/* A value registered with the file (freed by pt_close), or NULL after pt_vm_fail. */
pt_value_t *pt_vm_new_value(vm_t *vm, pt_kind_t kind);
int pt_vm_push(vm_t *vm, pt_value_t *v);
/* The top of the stack above the innermost mark, or NULL after pt_vm_fail. */
pt_value_t *pt_vm_pop(vm_t *vm);
pt_value_t *pt_vm_top(vm_t *vm);
/* Entries above the innermost mark. */
int64_t pt_vm_avail(const vm_t *vm);
/* Pops the innermost mark; *base = where its items start. */
int pt_vm_pop_mark(vm_t *vm, int64_t *base);
int pt_vm_items_reserve(vm_t *vm, pt_value_t *v, int64_t want);
/* A tuple of the k values on top of the stack (above the fence). */
int pt_vm_make_tuple(vm_t *vm, int64_t k);
int pt_vm_memo_put(vm_t *vm, uint64_t idx);
int pt_vm_memo_get(vm_t *vm, uint64_t idx);
/* Bytes left after pos; a k-byte little-endian opcode argument, consumed. */
int pt_vm_need(vm_t *vm, size_t k);
int pt_vm_take_le(vm_t *vm, int k, uint64_t *v);
/* The k-byte little-endian integer at p (no bounds: the caller checked them). */
uint64_t pt_read_le(const uint8_t *p, int k);
pt_value_t *pt_vm_new_str(vm_t *vm, const uint8_t *s, size_t len);
pt_value_t *pt_vm_new_int(vm_t *vm, pt_kind_t kind, int64_t i);
/* A printable copy of a (possibly binary) name, for messages. */
void pt_printable(const char *s, size_t len, char *out, size_t cap);
/* ---- globals, storages and tensors (torch_pt_rebuild.c) ---- */

int pt_op_global(vm_t *vm);
int pt_op_stack_global(vm_t *vm);
int pt_op_persid(vm_t *vm);
int pt_op_reduce(vm_t *vm);
int pt_op_build(vm_t *vm);

/* ---- the opcode loop (torch_pt_pickle.c) ---- */

/* Runs data.pkl to STOP; *result = the pickled object. */
int pt_run_vm(vm_t *vm, pt_value_t **result);

#endif
