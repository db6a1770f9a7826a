/* torch_pt_rebuild: the globals torch.save uses, its storages (persistent ids)
 * and the tensors rebuilt from them, each checked to lie inside its storage. */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "array_grow.h"
#include "torch_pt_internal.h"

/* ---- the globals torch.save uses ---- */

typedef enum { G_REBUILD_V2, G_REBUILD_V3, G_ORDERED_DICT, G_TYPED_STORAGE, G_UNTYPED_STORAGE,
               G_DTYPE } gkind_t;

static const struct {
    const char *module, *name;
    gkind_t kind;
    pt_dtype_t dtype;
} GLOBALS[] = {
    {"torch._utils", "_rebuild_tensor_v2", G_REBUILD_V2, 0},
    {"torch._utils", "_rebuild_tensor_v3", G_REBUILD_V3, 0},
    {"collections", "OrderedDict", G_ORDERED_DICT, 0},
    {"torch", "FloatStorage", G_TYPED_STORAGE, PT_DT_FLOAT32},
    {"torch", "BFloat16Storage", G_TYPED_STORAGE, PT_DT_BFLOAT16},
    {"torch", "HalfStorage", G_TYPED_STORAGE, PT_DT_FLOAT16},
    {"torch", "ByteStorage", G_TYPED_STORAGE, PT_DT_UINT8},
    {"torch", "IntStorage", G_TYPED_STORAGE, PT_DT_INT32},
    {"torch", "LongStorage", G_TYPED_STORAGE, PT_DT_INT64},
    {"torch", "CharStorage", G_TYPED_STORAGE, PT_DT_INT8},
    {"torch", "BoolStorage", G_TYPED_STORAGE, PT_DT_BOOL},
    {"torch", "DoubleStorage", G_TYPED_STORAGE, PT_DT_FLOAT64},
    {"torch", "UntypedStorage", G_UNTYPED_STORAGE, 0},
    {"torch.storage", "UntypedStorage", G_UNTYPED_STORAGE, 0},
    {"torch", "float8_e4m3fn", G_DTYPE, PT_DT_FLOAT8_E4M3FN},
    {"torch", "bfloat16", G_DTYPE, PT_DT_BFLOAT16},
    {"torch", "float16", G_DTYPE, PT_DT_FLOAT16},
    {"torch", "float32", G_DTYPE, PT_DT_FLOAT32},
    {"torch", "uint8", G_DTYPE, PT_DT_UINT8},
    {"torch", "int32", G_DTYPE, PT_DT_INT32},
    {"torch", "int64", G_DTYPE, PT_DT_INT64},
    {"torch", "float8_e4m3fnuz", G_DTYPE, PT_DT_FLOAT8_E4M3FNUZ},
    {"torch", "float8_e5m2", G_DTYPE, PT_DT_FLOAT8_E5M2},
    {"torch", "float8_e8m0fnu", G_DTYPE, PT_DT_FLOAT8_E8M0FNU},
    {"torch", "float4_e2m1fn_x2", G_DTYPE, PT_DT_FLOAT4_E2M1FN_X2},
    {"torch", "int8", G_DTYPE, PT_DT_INT8},
    {"torch", "bool", G_DTYPE, PT_DT_BOOL},
    {"torch", "float64", G_DTYPE, PT_DT_FLOAT64},
};
#define N_GLOBALS ((int)(sizeof GLOBALS / sizeof GLOBALS[0]))

/* torch's other typed storages, for a message that names the dtype. */
static const struct {
    const char *name, *dtype;
} OTHER_STORAGES[] = {
    {"ComplexFloatStorage", "complex64"}, {"ComplexDoubleStorage", "complex128"},
    {"ShortStorage", "int16"},
    {"QInt8Storage", "qint8"},          {"QUInt8Storage", "quint8"},
    {"QInt32Storage", "qint32"},        {"ComplexHalfStorage", "complex32"},
};

static int find_global(vm_t *vm, const char *mod, size_t ml, const char *name, size_t nl)
{
    char pm[160], pn[160];
    for (int g = 0; g < N_GLOBALS; g++)
        if (strlen(GLOBALS[g].module) == ml && strlen(GLOBALS[g].name) == nl &&
            memcmp(GLOBALS[g].module, mod, ml) == 0 && memcmp(GLOBALS[g].name, name, nl) == 0)
            return g;
    pt_printable(mod, ml, pm, sizeof pm);
    pt_printable(name, nl, pn, sizeof pn);
    if (ml == 5 && memcmp(mod, "torch", 5) == 0) {
        for (size_t i = 0; i < sizeof OTHER_STORAGES / sizeof OTHER_STORAGES[0]; i++)
            if (strlen(OTHER_STORAGES[i].name) == nl && memcmp(OTHER_STORAGES[i].name, name, nl) == 0)
                return pt_vm_fail(vm, "global %s.%s at byte %zu (%s tensors) is " SUBSET "; expected "
                                 "tensors of dtype " SUPPORTED_DTYPES, pm, pn, vm->op_pos,
                             OTHER_STORAGES[i].dtype);
        if (nl > 7 && memcmp(name + nl - 7, "Storage", 7) == 0)
            return pt_vm_fail(vm, "global %s.%s at byte %zu (a storage type) is " SUBSET "; expected "
                             "tensors of dtype " SUPPORTED_DTYPES, pm, pn, vm->op_pos);
        return pt_vm_fail(vm, "global %s.%s at byte %zu (an unsupported dtype or torch object) is "
                         SUBSET "; expected tensors of dtype " SUPPORTED_DTYPES, pm, pn,
                     vm->op_pos);
    }
    return pt_vm_fail(vm, "global %s.%s at byte %zu is " SUBSET "; expected only the tensor rebuild "
                     "functions, storage types, dtypes and collections.OrderedDict torch.save "
                     "writes for a dict of tensors and ints", pm, pn, vm->op_pos);
}

static int push_global(vm_t *vm, const char *mod, size_t ml, const char *name, size_t nl)
{
    int g = find_global(vm, mod, ml, name, nl);
    if (g < 0)
        return -1;
    pt_value_t *v = pt_vm_new_value(vm, PT_GLOBAL);
    if (!v)
        return -1;
    size_t len = strlen(GLOBALS[g].module) + 1 + strlen(GLOBALS[g].name) + 1;
    char *s = malloc(len);
    if (!s)
        return pt_vm_fail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
    snprintf(s, len, "%s.%s", GLOBALS[g].module, GLOBALS[g].name);
    v->s = s;
    v->slen = len - 1;
    v->global_id = g;
    return pt_vm_push(vm, v);
}

/* GLOBAL: "module\nname\n" */
int pt_op_global(vm_t *vm)
{
    const uint8_t *a = vm->p + vm->pos;
    size_t left = vm->n - vm->pos;
    size_t lim = left < 512 ? left : 512;
    const uint8_t *nl1 = memchr(a, '\n', lim);
    if (!nl1)
        return pt_vm_corrupt(vm, "GLOBAL's module name has no end (or is over 512 bytes)");
    size_t ml = (size_t)(nl1 - a);
    const uint8_t *b = nl1 + 1;
    size_t left2 = left - ml - 1, lim2 = left2 < 512 ? left2 : 512;
    const uint8_t *nl2 = memchr(b, '\n', lim2);
    if (!nl2)
        return pt_vm_corrupt(vm, "GLOBAL's name has no end (or is over 512 bytes)");
    size_t nlen = (size_t)(nl2 - b);
    vm->pos += ml + 1 + nlen + 1;
    return push_global(vm, (const char *)a, ml, (const char *)b, nlen);
}

int pt_op_stack_global(vm_t *vm)
{
    pt_value_t *name = pt_vm_pop(vm), *mod = name ? pt_vm_pop(vm) : NULL;
    if (!mod)
        return -1;
    if (mod->kind != PT_STR || name->kind != PT_STR)
        return pt_vm_fail(vm, "STACK_GLOBAL at byte %zu takes a %s and a %s; expected two str",
                     vm->op_pos, pt_kind_name(mod->kind), pt_kind_name(name->kind));
    return push_global(vm, mod->s, mod->slen, name->s, name->slen);
}

static int key_ok(const pt_value_t *k)
{
    if (k->kind != PT_STR || k->slen == 0 || k->slen >= sizeof(((pt_tensor_t *)0)->key))
        return 0;
    for (size_t i = 0; i < k->slen; i++) {
        char c = k->s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '_'))
            return 0;
    }
    return 1;
}

/* BINPERSID: ('storage', storage_type, key, location, numel) -> a storage. */
int pt_op_persid(vm_t *vm)
{
    pt_value_t *pid = pt_vm_pop(vm);
    if (!pid)
        return -1;
    size_t at = vm->op_pos;
    if (pid->kind != PT_TUPLE || pid->n != 5)
        return pt_vm_fail(vm, "persistent id at byte %zu is a %s%s; expected the tuple ('storage', "
                         "storage type, key, location, numel) torch.save writes",
                     at, pt_kind_name(pid->kind), pid->kind == PT_TUPLE ? " of another length" : "");
    pt_value_t *tag = pid->items[0], *type = pid->items[1], *key = pid->items[2],
               *loc = pid->items[3], *numel = pid->items[4];
    if (tag->kind != PT_STR || strcmp(tag->s, "storage") != 0 || tag->slen != 7)
        return pt_vm_fail(vm, "persistent id at byte %zu is not a 'storage' reference; " SUBSET
                         "; expected ('storage', storage type, key, location, numel)", at);
    if (type->kind != PT_GLOBAL || (GLOBALS[type->global_id].kind != G_TYPED_STORAGE &&
                                    GLOBALS[type->global_id].kind != G_UNTYPED_STORAGE))
        return pt_vm_fail(vm, "persistent id at byte %zu has storage type %s %s; expected a storage "
                         "type (torch.FloatStorage, ..., torch.UntypedStorage)", at,
                     pt_kind_name(type->kind), type->kind == PT_GLOBAL ? type->s : "");
    if (!key_ok(key)) {
        char pk[80] = "";
        if (key->kind == PT_STR)
            pt_printable(key->s, key->slen, pk, sizeof pk);
        return pt_vm_fail(vm, "storage key %s'%s' at byte %zu is not a record name; expected a short "
                         "key of letters, digits and '_' (torch writes 0, 1, ...)",
                     key->kind == PT_STR ? "" : pt_kind_name(key->kind), pk, at);
    }
    if (loc->kind != PT_STR || loc->slen > 64)
        return pt_vm_fail(vm, "storage '%s' at byte %zu has a location that is %s; expected a device "
                         "string such as 'cpu'", key->s, at,
                     loc->kind == PT_STR ? "over 64 bytes" : pt_kind_name(loc->kind));
    if (numel->kind != PT_INT || numel->i < 0 || numel->i > INT64_MAX / 8)
        return pt_vm_fail(vm, "storage '%s' at byte %zu has numel %s %lld; expected a non-negative "
                         "int", key->s, at, pt_kind_name(numel->kind), (long long)numel->i);
    int typed = GLOBALS[type->global_id].kind == G_TYPED_STORAGE;
    size_t es = typed ? pt_dtype_size(GLOBALS[type->global_id].dtype) : 1;
    uint64_t nbytes = (uint64_t)numel->i * es;

    char rel[64];
    snprintf(rel, sizeof rel, "data/%s", key->s);
    zip_int64_t idx = pt_record_locate(vm->f, rel);
    if (idx < 0)
        return pt_vm_fail(vm, "storage key '%s' at byte %zu has no record %s/%s in the zip; expected a "
                         "data/<key> record for every storage data.pkl references",
                     key->s, at, vm->f->prefix, rel);
    uint64_t size;
    if (pt_record_size(vm->f, idx, rel, &size, vm->err))
        return -1;
    if (size != nbytes)
        return pt_vm_fail(vm, "storage '%s' at byte %zu declares %lld %s elements (%llu bytes) but its "
                         "record %s/%s holds %llu bytes; expected the record to hold the storage "
                         "exactly", key->s, at, (long long)numel->i,
                     typed ? pt_dtype_name(GLOBALS[type->global_id].dtype) : "byte",
                     (unsigned long long)nbytes, vm->f->prefix, rel, (unsigned long long)size);

    pt_value_t *st = pt_vm_new_value(vm, PT_STORAGE);
    if (!st)
        return -1;
    char *s = malloc(key->slen + 1);
    if (!s)
        return pt_vm_fail(vm, "out of memory at byte %zu; expected to fit in memory", at);
    memcpy(s, key->s, key->slen + 1);
    st->s = s;
    st->slen = key->slen;
    st->global_id = type->global_id;
    st->storage_typed = typed;
    st->storage_numel = numel->i;
    return pt_vm_push(vm, st);
}


static int int_tuple(const pt_value_t *t, int64_t *out, int *rank)
{
    if (t->kind != PT_TUPLE || t->n > PT_MAX_RANK)
        return -1;
    for (int64_t i = 0; i < t->n; i++) {
        if (t->items[i]->kind != PT_INT)
            return -1;
        out[i] = t->items[i]->i;
    }
    *rank = (int)t->n;
    return 0;
}

void pt_shape_str(const int64_t *v, int rank, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* An empty dict (OrderedDict of backward hooks, tensor metadata) or None. */
static int empty_dict_or_none(const pt_value_t *v)
{
    return v->kind == PT_NONE || (v->kind == PT_DICT && v->n == 0);
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])
 * _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype[, metadata]) */
static int rebuild_tensor(vm_t *vm, int v3, const pt_value_t *args)
{
    size_t at = vm->op_pos;
    const char *fn = v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2";
    int64_t lo = v3 ? 7 : 6;
    if (args->kind != PT_TUPLE || args->n < lo || args->n > lo + 1)
        return pt_vm_fail(vm, "%s at byte %zu called with %s of %lld; expected (storage, offset, size, "
                         "stride, requires_grad, backward_hooks%s[, metadata])", fn, at,
                     pt_kind_name(args->kind), (long long)args->n, v3 ? ", dtype" : "");
    pt_value_t *const *a = args->items;
    const pt_value_t *st = a[0];
    if (st->kind != PT_STORAGE || st->storage_typed == v3)
        return pt_vm_fail(vm, "%s at byte %zu takes a %s; expected a %s storage from a persistent id",
                     fn, at, st->kind == PT_STORAGE ? (st->storage_typed ? "typed storage"
                                                                          : "torch.UntypedStorage")
                                                    : pt_kind_name(st->kind),
                     v3 ? "torch.UntypedStorage" : "typed (torch.FloatStorage, ...)");
    pt_dtype_t dt;
    if (v3) {
        const pt_value_t *d = a[6];
        if (d->kind != PT_GLOBAL || GLOBALS[d->global_id].kind != G_DTYPE)
            return pt_vm_fail(vm, "%s at byte %zu has dtype argument %s %s; expected a torch dtype",
                         fn, at, pt_kind_name(d->kind), d->kind == PT_GLOBAL ? d->s : "");
        dt = GLOBALS[d->global_id].dtype;
    } else {
        dt = GLOBALS[st->global_id].dtype;
    }
    if (a[1]->kind != PT_INT || a[1]->i < 0)
        return pt_vm_fail(vm, "%s at byte %zu has storage offset %s %lld; expected a non-negative int",
                     fn, at, pt_kind_name(a[1]->kind), (long long)a[1]->i);
    pt_tensor_t t;
    memset(&t, 0, sizeof t);
    int rs = 0;
    if (int_tuple(a[2], t.sizes, &t.rank) || int_tuple(a[3], t.strides, &rs) || rs != t.rank)
        return pt_vm_fail(vm, "%s at byte %zu has sizes %s and strides %s that are not two int tuples "
                         "of one length up to %d; expected tensor sizes and strides", fn, at,
                     pt_kind_name(a[2]->kind), pt_kind_name(a[3]->kind), PT_MAX_RANK);
    if (a[4]->kind != PT_BOOL)
        return pt_vm_fail(vm, "%s at byte %zu has requires_grad %s; expected a bool", fn, at,
                     pt_kind_name(a[4]->kind));
    if (!empty_dict_or_none(a[5]))
        return pt_vm_fail(vm, "%s at byte %zu has backward hooks (%s of %lld); " SUBSET "; expected "
                         "an empty OrderedDict", fn, at, pt_kind_name(a[5]->kind),
                     (long long)a[5]->n);
    if (args->n == lo + 1 && !empty_dict_or_none(a[lo]))
        return pt_vm_fail(vm, "%s at byte %zu has tensor metadata (%s of %lld); " SUBSET "; expected "
                         "none", fn, at, pt_kind_name(a[lo]->kind), (long long)a[lo]->n);
    t.dtype = dt;
    t.offset = a[1]->i;
    size_t es = pt_dtype_size(dt);
    int64_t elems = st->storage_typed ? st->storage_numel : st->storage_numel / (int64_t)es;

    char sz[160], sd[160];
    pt_shape_str(t.sizes, t.rank, sz, sizeof sz);
    pt_shape_str(t.strides, t.rank, sd, sizeof sd);
    int64_t numel = 1, maxidx = t.offset;
    int overflow = 0;
    for (int d = 0; d < t.rank; d++) {
        if (t.sizes[d] < 0 || t.strides[d] < 0)
            return pt_vm_fail(vm, "%s at byte %zu: tensor sizes %s strides %s hold a negative value; "
                             "expected non-negative sizes and strides", fn, at, sz, sd);
        if (t.sizes[d] != 0 && numel > INT64_MAX / t.sizes[d])
            overflow = 1;
        else
            numel *= t.sizes[d];
    }
    if (overflow)
        return pt_vm_fail(vm, "%s at byte %zu: tensor sizes %s overflow 64 bits; expected a tensor "
                         "that fits in memory", fn, at, sz);
    if (numel > 0) {
        for (int d = 0; d < t.rank && !overflow; d++) {
            int64_t span = t.sizes[d] - 1;
            if (t.strides[d] != 0 && span > (INT64_MAX - maxidx) / t.strides[d])
                overflow = 1;
            else
                maxidx += span * t.strides[d];
        }
        if (overflow || maxidx >= elems)
            return pt_vm_fail(vm, "%s at byte %zu: a %s tensor of sizes %s, strides %s and offset %lld "
                             "reads past its storage '%s' of %lld elements; expected a view "
                             "inside its storage", fn, at, pt_dtype_name(dt), sz, sd,
                         (long long)t.offset, st->s, (long long)elems);
        if (numel > elems && numel > PT_MAX_BROADCAST_NUMEL)
            return pt_vm_fail(vm, "%s at byte %zu: a tensor of sizes %s has %lld elements over a "
                             "storage of %lld; expected at most the storage's elements, or %lld "
                             "for a broadcast view", fn, at, sz, (long long)numel,
                         (long long)elems, (long long)PT_MAX_BROADCAST_NUMEL);
    } else if (t.offset > elems) {
        return pt_vm_fail(vm, "%s at byte %zu: storage offset %lld is past the end of storage '%s' "
                         "(%lld elements); expected an offset inside the storage", fn, at,
                     (long long)t.offset, st->s, (long long)elems);
    }
    if ((uint64_t)numel > vm->f->max_bytes / es)
        return pt_vm_fail(vm, "%s at byte %zu: a %s tensor of sizes %s (%lld elements of %zu bytes) is "
                         "over the limit of %llu MiB; expected at most that (" PT_MAX_MB_ENV
                         " raises it)", fn, at, pt_dtype_name(dt), sz, (long long)numel, es,
                     (unsigned long long)(vm->f->max_bytes >> 20));
    t.numel = numel;
    t.contiguous = 1;
    int64_t expect = 1;
    for (int d = t.rank - 1; d >= 0; d--) {
        if (t.sizes[d] != 1 && t.strides[d] != expect)
            t.contiguous = 0;
        expect *= t.sizes[d] ? t.sizes[d] : 1;
    }
    snprintf(t.key, sizeof t.key, "%s", st->s);
    t.storage_bytes = st->storage_numel * (st->storage_typed ? (int64_t)es : 1);

    pt_value_t *v = pt_vm_new_value(vm, PT_TENSOR);
    if (!v)
        return -1;
    v->tensor = malloc(sizeof *v->tensor);
    if (!v->tensor)
        return pt_vm_fail(vm, "out of memory at byte %zu; expected to fit in memory", at);
    *v->tensor = t;
    return pt_vm_push(vm, v);
}

int pt_op_reduce(vm_t *vm)
{
    pt_value_t *args = pt_vm_pop(vm), *fn = args ? pt_vm_pop(vm) : NULL;
    if (!fn)
        return -1;
    if (fn->kind != PT_GLOBAL)
        return pt_vm_fail(vm, "REDUCE at byte %zu calls a %s; expected a supported global", vm->op_pos,
                     pt_kind_name(fn->kind));
    switch (GLOBALS[fn->global_id].kind) {
    case G_REBUILD_V2:
        return rebuild_tensor(vm, 0, args);
    case G_REBUILD_V3:
        return rebuild_tensor(vm, 1, args);
    case G_ORDERED_DICT:
        if (args->kind != PT_TUPLE || args->n != 0)
            return pt_vm_fail(vm, "collections.OrderedDict at byte %zu is called with arguments; " SUBSET
                             "; expected OrderedDict() (the empty backward hooks)", vm->op_pos);
        return pt_vm_push(vm, pt_vm_new_value(vm, PT_DICT));
    default:
        return pt_vm_fail(vm, "REDUCE at byte %zu calls %s, which is " SUBSET "; expected "
                         "torch._utils._rebuild_tensor_v2/_v3 or collections.OrderedDict",
                     vm->op_pos, fn->s);
    }
}

int pt_op_build(vm_t *vm)
{
    pt_value_t *state = pt_vm_pop(vm), *obj = state ? pt_vm_top(vm) : NULL;
    if (!obj)
        return -1;
    if (empty_dict_or_none(state))
        return 0;
    return pt_vm_fail(vm, "BUILD at byte %zu sets a %s state on a %s, which is " SUBSET "; expected no "
                     "object state", vm->op_pos, pt_kind_name(state->kind),
                 pt_kind_name(obj->kind));
}
