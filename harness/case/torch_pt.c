/* torch_pt: torch.save files (zip + the pickle subset torch.save emits for a
 * dict of tensors and ints), read without Python.  See torch_pt.h for what is
 * supported and what is refused.
 *
 * The pickle VM mirrors CPython's _pickle.c for the opcodes it accepts: a
 * value stack with a mark stack beside it (a mark fences the stack: nothing
 * below the innermost mark can be popped before the mark is), a memo indexed
 * by BINPUT/MEMOIZE.  Values are never freed individually: every one is
 * registered with the file and freed by pt_close, so memo aliases, shared
 * storages and even cycles (a list appended to itself) need no bookkeeping,
 * and nothing in this file recurses. */
#include "torch_pt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "array_grow.h"

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

#define SUPPORTED_DTYPES                                                                   \
    "float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e8m0fnu, float4_e2m1fn_x2, bfloat16, " \
    "float16, float32, float64, uint8, int8, bool, int32 or int64"
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

/* ---- opcode names, for messages ---- */

static const char *opcode_name(int op)
{
    switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return "an unknown opcode";
    }
}

/* ---- the file ---- */

struct pt_file {
    char *path;
    zip_t *za;
    char *prefix;               /* the archive's top directory: records are PREFIX/... */
    pt_value_t *root;
    pt_value_t **objs;          /* every value, freed by pt_close */
    int64_t nobjs, capobjs;
    uint64_t max_bytes;         /* bound on every inflated record and every tensor */
};

const char *pt_path(const pt_file_t *f)
{
    return f ? f->path : NULL;
}

const pt_value_t *pt_root(const pt_file_t *f)
{
    return f ? f->root : NULL;
}

const pt_value_t *pt_dict_get(const pt_value_t *dict, const char *key)
{
    if (!dict || dict->kind != PT_DICT || !key)
        return NULL;
    size_t kl = strlen(key);
    for (int64_t j = dict->n - 1; j >= 0; j--) {
        const pt_value_t *k = dict->items[2 * j];
        if (k && k->kind == PT_STR && k->slen == kl && memcmp(k->s, key, kl) == 0)
            return dict->items[2 * j + 1];
    }
    return NULL;
}

static void value_free(pt_value_t *v)
{
    if (!v)
        return;
    free((void *)v->s);
    free(v->items);
    free(v->tensor);
    free(v);
}

void pt_close(pt_file_t *f)
{
    if (!f)
        return;
    for (int64_t i = 0; i < f->nobjs; i++)
        value_free(f->objs[i]);
    free(f->objs);
    if (f->za)
        zip_discard(f->za);   /* read-only: nothing to write back */
    free(f->prefix);
    free(f->path);
    free(f);
}

/* ---- zip records ---- */

/* "<path>: <obj>: <problem>" */
#define ffail(f, err, obj, ...) kr_fail_at(err, (f)->path, obj, __VA_ARGS__)

/* Index of record PREFIX/<rel>, or -1. */
static zip_int64_t record_locate(const pt_file_t *f, const char *rel)
{
    size_t len = strlen(f->prefix) + 1 + strlen(rel) + 1;
    char *name = malloc(len);
    if (!name)
        return -1;
    snprintf(name, len, "%s/%s", f->prefix, rel);
    zip_int64_t idx = zip_name_locate(f->za, name, ZIP_FL_ENC_RAW);
    free(name);
    return idx;
}

/* Size of record idx, refusing one whose claimed size is implausible for its
 * compressed size (a deflate stream expands at most ~1032:1). */
static int record_size(const pt_file_t *f, zip_int64_t idx, const char *rel, uint64_t *size,
                       kr_error_t *err)
{
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(f->za, (zip_uint64_t)idx, ZIP_FL_ENC_RAW, &st) != 0 ||
        !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE) ||
        !(st.valid & ZIP_STAT_COMP_METHOD))
        return ffail(f, err, rel, "cannot read the record's zip entry (corrupt zip?); expected a "
                                  "readable central directory entry");
    if (st.comp_method == ZIP_CM_STORE ? st.size != st.comp_size
                                       : st.size / 1100 > st.comp_size + 4096)
        return ffail(f, err, rel, "the record claims %llu bytes from %llu compressed bytes "
                                  "(corrupt zip?); expected a plausible compression ratio",
                     (unsigned long long)st.size, (unsigned long long)st.comp_size);
    if (st.size > f->max_bytes)
        return ffail(f, err, rel, "the record inflates to %llu bytes (%llu compressed), over the "
                                  "limit of %llu MiB; expected at most that (" PT_MAX_MB_ENV
                                  " raises it)", (unsigned long long)st.size,
                     (unsigned long long)st.comp_size, (unsigned long long)(f->max_bytes >> 20));
    *size = st.size;
    return 0;
}

/* The byte limit from PT_MAX_MB_ENV, or the default. */
static int read_max_bytes(pt_file_t *f, kr_error_t *err)
{
    const char *env = getenv(PT_MAX_MB_ENV);
    f->max_bytes = (uint64_t)PT_DEFAULT_MAX_MB << 20;
    if (!env)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long mb = strtoull(env, &end, 10);
    if (errno || end == env || *end || env[0] == '-' || mb < 1 || mb > PT_MAX_MB_CEILING)
        return kr_fail(err, "%s: " PT_MAX_MB_ENV "=\"%.40s\" is not a limit; expected a whole "
                            "number of MiB from 1 to %d", f->path, env, PT_MAX_MB_CEILING);
    f->max_bytes = (uint64_t)mb << 20;
    return 0;
}

/* Reads record idx (exactly `size` bytes) into a malloc'd buffer with one
 * spare NUL byte. */
static int record_read(const pt_file_t *f, zip_int64_t idx, const char *rel, uint64_t size,
                       uint8_t **out, kr_error_t *err)
{
    if (size >= SIZE_MAX)
        return ffail(f, err, rel, "the record's %llu bytes do not fit in memory; expected a "
                                  "smaller record", (unsigned long long)size);
    uint8_t *buf = malloc((size_t)size + 1);
    if (!buf)
        return ffail(f, err, rel, "out of memory reading %llu bytes; expected to fit in memory",
                     (unsigned long long)size);
    zip_file_t *zf = zip_fopen_index(f->za, (zip_uint64_t)idx, 0);
    if (!zf) {
        free(buf);
        return ffail(f, err, rel, "cannot open the record (%s; corrupt or encrypted zip?); "
                                  "expected a readable stored or deflated record",
                     zip_strerror(f->za));
    }
    uint64_t got = 0;
    while (got < size) {
        zip_int64_t r = zip_fread(zf, buf + got, size - got);
        if (r < 0) {
            char why[256];
            snprintf(why, sizeof why, "%s", zip_file_strerror(zf));
            zip_fclose(zf);
            free(buf);
            return ffail(f, err, rel, "reading the record failed after %llu of %llu bytes (%s; "
                                      "truncated or corrupt zip?); expected the whole record",
                         (unsigned long long)got, (unsigned long long)size, why);
        }
        if (r == 0)
            break;
        got += (uint64_t)r;
    }
    /* One more read to the end lets libzip verify the CRC of the record. */
    uint8_t extra;
    zip_int64_t r = got == size ? zip_fread(zf, &extra, 1) : 0;
    int cl = zip_fclose(zf);
    if (got != size || r != 0 || cl != 0) {
        free(buf);
        return ffail(f, err, rel, "the record holds %s than its %llu bytes, or fails its CRC "
                                  "(truncated or corrupt zip?); expected an intact record",
                     got < size ? "fewer" : "more", (unsigned long long)size);
    }
    buf[size] = 0;
    *out = buf;
    return 0;
}

/* ---- the pickle VM ---- */

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

/* "<path>: data.pkl: <problem>" */
__attribute__((format(printf, 2, 3)))
static int vfail(vm_t *vm, const char *fmt, ...)
{
    char buf[KR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return kr_fail(vm->err, "%s: data.pkl: %s", vm->f->path, buf);
}

static int corrupt(vm_t *vm, const char *what)
{
    return vfail(vm, "%s at byte %zu (opcode %s; truncated or corrupt pickle?); expected a "
                     "well-formed pickle", what, vm->op_pos, opcode_name(vm->p[vm->op_pos]));
}

static pt_value_t *new_value(vm_t *vm, pt_kind_t kind)
{
    pt_file_t *f = vm->f;
    if (f->nobjs >= PT_MAX_OBJECTS) {
        vfail(vm, "more than %d objects at byte %zu; expected a dict of tensors and ints",
              PT_MAX_OBJECTS, vm->op_pos);
        return NULL;
    }
    if (f->nobjs == f->capobjs) {
        int64_t cap = f->capobjs ? f->capobjs * 2 : 256;
        pt_value_t **o = realloc(f->objs, (size_t)cap * sizeof *o);
        if (!o) {
            vfail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
            return NULL;
        }
        f->objs = o;
        f->capobjs = cap;
    }
    pt_value_t *v = calloc(1, sizeof *v);
    if (!v) {
        vfail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
        return NULL;
    }
    v->kind = kind;
    v->global_id = -1;
    f->objs[f->nobjs++] = v;
    return v;
}

/* Bytes left after pos. */
static int need(vm_t *vm, size_t k)
{
    if (vm->n - vm->pos < k)
        return corrupt(vm, "the pickle ends inside an opcode's argument");
    return 0;
}

static uint64_t rd_le(const uint8_t *p, int k)
{
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* A k-byte little-endian opcode argument, consumed. */
static int take_le(vm_t *vm, int k, uint64_t *v)
{
    if (need(vm, (size_t)k))
        return -1;
    *v = rd_le(vm->p + vm->pos, k);
    vm->pos += (size_t)k;
    return 0;
}

static int push(vm_t *vm, pt_value_t *v)
{
    if (!v)
        return -1;
    if (vm->sp >= PT_MAX_STACK)
        return vfail(vm, "the stack exceeds %d entries at byte %zu; expected a dict of tensors "
                         "and ints", PT_MAX_STACK, vm->op_pos);
    pt_value_t **s = array_reserve_one(vm->stack, vm->sp, &vm->scap, sizeof *s, 64);
    if (!s)
        return vfail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
    vm->stack = s;
    vm->stack[vm->sp++] = v;
    return 0;
}

/* Entries above the innermost mark. */
static int64_t avail(const vm_t *vm)
{
    return vm->sp - (vm->nmarks ? vm->marks[vm->nmarks - 1] : 0);
}

static pt_value_t *pop(vm_t *vm)
{
    if (avail(vm) < 1) {
        corrupt(vm, "stack underflow");
        return NULL;
    }
    return vm->stack[--vm->sp];
}

static pt_value_t *top(vm_t *vm)
{
    if (avail(vm) < 1) {
        corrupt(vm, "stack underflow");
        return NULL;
    }
    return vm->stack[vm->sp - 1];
}

/* Pops the innermost mark; *base = where its items start. */
static int pop_mark(vm_t *vm, int64_t *base)
{
    if (vm->nmarks == 0)
        return corrupt(vm, "no MARK to pop");
    *base = vm->marks[--vm->nmarks];
    return 0;
}

static int items_reserve(vm_t *vm, pt_value_t *v, int64_t want)
{
    if (want <= v->cap)
        return 0;
    int64_t cap = v->cap ? v->cap : 4;
    while (cap < want)
        cap *= 2;
    pt_value_t **it = realloc(v->items, (size_t)cap * sizeof *it);
    if (!it)
        return vfail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
    v->items = it;
    v->cap = cap;
    return 0;
}

/* A tuple of the k values on top of the stack (above the fence). */
static int make_tuple(vm_t *vm, int64_t k)
{
    if (avail(vm) < k)
        return corrupt(vm, "stack underflow");
    pt_value_t *t = new_value(vm, PT_TUPLE);
    if (!t || items_reserve(vm, t, k ? k : 1))
        return -1;
    if (k)
        memcpy(t->items, vm->stack + vm->sp - k, (size_t)k * sizeof *t->items);
    t->n = k;
    vm->sp -= k;
    return push(vm, t);
}

static int memo_put(vm_t *vm, uint64_t idx)
{
    pt_value_t *v = top(vm);
    if (!v)
        return -1;
    if (idx >= PT_MAX_MEMO)
        return vfail(vm, "memo index %llu at byte %zu exceeds %d; expected a dict of tensors and "
                         "ints", (unsigned long long)idx, vm->op_pos, PT_MAX_MEMO);
    if ((int64_t)idx >= vm->memo_cap) {
        int64_t cap = vm->memo_cap ? vm->memo_cap : 64;
        while (cap <= (int64_t)idx)
            cap *= 2;
        pt_value_t **m = realloc(vm->memo, (size_t)cap * sizeof *m);
        if (!m)
            return vfail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
        memset(m + vm->memo_cap, 0, (size_t)(cap - vm->memo_cap) * sizeof *m);
        vm->memo = m;
        vm->memo_cap = cap;
    }
    if (!vm->memo[idx])
        vm->memo_count++;
    vm->memo[idx] = v;
    return 0;
}

static int memo_get(vm_t *vm, uint64_t idx)
{
    if ((int64_t)idx >= vm->memo_cap || idx >= PT_MAX_MEMO || !vm->memo[idx])
        return vfail(vm, "memo entry %llu read at byte %zu was never stored (corrupt "
                         "pickle?); expected a BINPUT before its BINGET",
                     (unsigned long long)idx, vm->op_pos);
    return push(vm, vm->memo[idx]);
}

static pt_value_t *new_str(vm_t *vm, const uint8_t *s, size_t len)
{
    pt_value_t *v = new_value(vm, PT_STR);
    if (!v)
        return NULL;
    char *c = malloc(len + 1);
    if (!c) {
        vfail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
        return NULL;
    }
    memcpy(c, s, len);
    c[len] = 0;
    v->s = c;
    v->slen = len;
    return v;
}

static pt_value_t *new_int(vm_t *vm, pt_kind_t kind, int64_t i)
{
    pt_value_t *v = new_value(vm, kind);
    if (v)
        v->i = i;
    return v;
}

/* A printable copy of a (possibly binary) name, for messages. */
static void printable(const char *s, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\'')
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
    }
    if (len > 0 && o + 5 >= cap && cap > 4) {
        o = cap - 4;
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o < cap ? o : cap - 1] = 0;
}

static int find_global(vm_t *vm, const char *mod, size_t ml, const char *name, size_t nl)
{
    char pm[160], pn[160];
    for (int g = 0; g < N_GLOBALS; g++)
        if (strlen(GLOBALS[g].module) == ml && strlen(GLOBALS[g].name) == nl &&
            memcmp(GLOBALS[g].module, mod, ml) == 0 && memcmp(GLOBALS[g].name, name, nl) == 0)
            return g;
    printable(mod, ml, pm, sizeof pm);
    printable(name, nl, pn, sizeof pn);
    if (ml == 5 && memcmp(mod, "torch", 5) == 0) {
        for (size_t i = 0; i < sizeof OTHER_STORAGES / sizeof OTHER_STORAGES[0]; i++)
            if (strlen(OTHER_STORAGES[i].name) == nl && memcmp(OTHER_STORAGES[i].name, name, nl) == 0)
                return vfail(vm, "global %s.%s at byte %zu (%s tensors) is " SUBSET "; expected "
                                 "tensors of dtype " SUPPORTED_DTYPES, pm, pn, vm->op_pos,
                             OTHER_STORAGES[i].dtype);
        if (nl > 7 && memcmp(name + nl - 7, "Storage", 7) == 0)
            return vfail(vm, "global %s.%s at byte %zu (a storage type) is " SUBSET "; expected "
                             "tensors of dtype " SUPPORTED_DTYPES, pm, pn, vm->op_pos);
        return vfail(vm, "global %s.%s at byte %zu (an unsupported dtype or torch object) is "
                         SUBSET "; expected tensors of dtype " SUPPORTED_DTYPES, pm, pn,
                     vm->op_pos);
    }
    return vfail(vm, "global %s.%s at byte %zu is " SUBSET "; expected only the tensor rebuild "
                     "functions, storage types, dtypes and collections.OrderedDict torch.save "
                     "writes for a dict of tensors and ints", pm, pn, vm->op_pos);
}

static int push_global(vm_t *vm, const char *mod, size_t ml, const char *name, size_t nl)
{
    int g = find_global(vm, mod, ml, name, nl);
    if (g < 0)
        return -1;
    pt_value_t *v = new_value(vm, PT_GLOBAL);
    if (!v)
        return -1;
    size_t len = strlen(GLOBALS[g].module) + 1 + strlen(GLOBALS[g].name) + 1;
    char *s = malloc(len);
    if (!s)
        return vfail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
    snprintf(s, len, "%s.%s", GLOBALS[g].module, GLOBALS[g].name);
    v->s = s;
    v->slen = len - 1;
    v->global_id = g;
    return push(vm, v);
}

/* GLOBAL: "module\nname\n" */
static int op_global(vm_t *vm)
{
    const uint8_t *a = vm->p + vm->pos;
    size_t left = vm->n - vm->pos;
    size_t lim = left < 512 ? left : 512;
    const uint8_t *nl1 = memchr(a, '\n', lim);
    if (!nl1)
        return corrupt(vm, "GLOBAL's module name has no end (or is over 512 bytes)");
    size_t ml = (size_t)(nl1 - a);
    const uint8_t *b = nl1 + 1;
    size_t left2 = left - ml - 1, lim2 = left2 < 512 ? left2 : 512;
    const uint8_t *nl2 = memchr(b, '\n', lim2);
    if (!nl2)
        return corrupt(vm, "GLOBAL's name has no end (or is over 512 bytes)");
    size_t nlen = (size_t)(nl2 - b);
    vm->pos += ml + 1 + nlen + 1;
    return push_global(vm, (const char *)a, ml, (const char *)b, nlen);
}

static int op_stack_global(vm_t *vm)
{
    pt_value_t *name = pop(vm), *mod = name ? pop(vm) : NULL;
    if (!mod)
        return -1;
    if (mod->kind != PT_STR || name->kind != PT_STR)
        return vfail(vm, "STACK_GLOBAL at byte %zu takes a %s and a %s; expected two str",
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
static int op_persid(vm_t *vm)
{
    pt_value_t *pid = pop(vm);
    if (!pid)
        return -1;
    size_t at = vm->op_pos;
    if (pid->kind != PT_TUPLE || pid->n != 5)
        return vfail(vm, "persistent id at byte %zu is a %s%s; expected the tuple ('storage', "
                         "storage type, key, location, numel) torch.save writes",
                     at, pt_kind_name(pid->kind), pid->kind == PT_TUPLE ? " of another length" : "");
    pt_value_t *tag = pid->items[0], *type = pid->items[1], *key = pid->items[2],
               *loc = pid->items[3], *numel = pid->items[4];
    if (tag->kind != PT_STR || strcmp(tag->s, "storage") != 0 || tag->slen != 7)
        return vfail(vm, "persistent id at byte %zu is not a 'storage' reference; " SUBSET
                         "; expected ('storage', storage type, key, location, numel)", at);
    if (type->kind != PT_GLOBAL || (GLOBALS[type->global_id].kind != G_TYPED_STORAGE &&
                                    GLOBALS[type->global_id].kind != G_UNTYPED_STORAGE))
        return vfail(vm, "persistent id at byte %zu has storage type %s %s; expected a storage "
                         "type (torch.FloatStorage, ..., torch.UntypedStorage)", at,
                     pt_kind_name(type->kind), type->kind == PT_GLOBAL ? type->s : "");
    if (!key_ok(key)) {
        char pk[80] = "";
        if (key->kind == PT_STR)
            printable(key->s, key->slen, pk, sizeof pk);
        return vfail(vm, "storage key %s'%s' at byte %zu is not a record name; expected a short "
                         "key of letters, digits and '_' (torch writes 0, 1, ...)",
                     key->kind == PT_STR ? "" : pt_kind_name(key->kind), pk, at);
    }
    if (loc->kind != PT_STR || loc->slen > 64)
        return vfail(vm, "storage '%s' at byte %zu has a location that is %s; expected a device "
                         "string such as 'cpu'", key->s, at,
                     loc->kind == PT_STR ? "over 64 bytes" : pt_kind_name(loc->kind));
    if (numel->kind != PT_INT || numel->i < 0 || numel->i > INT64_MAX / 8)
        return vfail(vm, "storage '%s' at byte %zu has numel %s %lld; expected a non-negative "
                         "int", key->s, at, pt_kind_name(numel->kind), (long long)numel->i);
    int typed = GLOBALS[type->global_id].kind == G_TYPED_STORAGE;
    size_t es = typed ? pt_dtype_size(GLOBALS[type->global_id].dtype) : 1;
    uint64_t nbytes = (uint64_t)numel->i * es;

    char rel[64];
    snprintf(rel, sizeof rel, "data/%s", key->s);
    zip_int64_t idx = record_locate(vm->f, rel);
    if (idx < 0)
        return vfail(vm, "storage key '%s' at byte %zu has no record %s/%s in the zip; expected a "
                         "data/<key> record for every storage data.pkl references",
                     key->s, at, vm->f->prefix, rel);
    uint64_t size;
    if (record_size(vm->f, idx, rel, &size, vm->err))
        return -1;
    if (size != nbytes)
        return vfail(vm, "storage '%s' at byte %zu declares %lld %s elements (%llu bytes) but its "
                         "record %s/%s holds %llu bytes; expected the record to hold the storage "
                         "exactly", key->s, at, (long long)numel->i,
                     typed ? pt_dtype_name(GLOBALS[type->global_id].dtype) : "byte",
                     (unsigned long long)nbytes, vm->f->prefix, rel, (unsigned long long)size);

    pt_value_t *st = new_value(vm, PT_STORAGE);
    if (!st)
        return -1;
    char *s = malloc(key->slen + 1);
    if (!s)
        return vfail(vm, "out of memory at byte %zu; expected to fit in memory", at);
    memcpy(s, key->s, key->slen + 1);
    st->s = s;
    st->slen = key->slen;
    st->global_id = type->global_id;
    st->storage_typed = typed;
    st->storage_numel = numel->i;
    return push(vm, st);
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
        return vfail(vm, "%s at byte %zu called with %s of %lld; expected (storage, offset, size, "
                         "stride, requires_grad, backward_hooks%s[, metadata])", fn, at,
                     pt_kind_name(args->kind), (long long)args->n, v3 ? ", dtype" : "");
    pt_value_t *const *a = args->items;
    const pt_value_t *st = a[0];
    if (st->kind != PT_STORAGE || st->storage_typed == v3)
        return vfail(vm, "%s at byte %zu takes a %s; expected a %s storage from a persistent id",
                     fn, at, st->kind == PT_STORAGE ? (st->storage_typed ? "typed storage"
                                                                          : "torch.UntypedStorage")
                                                    : pt_kind_name(st->kind),
                     v3 ? "torch.UntypedStorage" : "typed (torch.FloatStorage, ...)");
    pt_dtype_t dt;
    if (v3) {
        const pt_value_t *d = a[6];
        if (d->kind != PT_GLOBAL || GLOBALS[d->global_id].kind != G_DTYPE)
            return vfail(vm, "%s at byte %zu has dtype argument %s %s; expected a torch dtype",
                         fn, at, pt_kind_name(d->kind), d->kind == PT_GLOBAL ? d->s : "");
        dt = GLOBALS[d->global_id].dtype;
    } else {
        dt = GLOBALS[st->global_id].dtype;
    }
    if (a[1]->kind != PT_INT || a[1]->i < 0)
        return vfail(vm, "%s at byte %zu has storage offset %s %lld; expected a non-negative int",
                     fn, at, pt_kind_name(a[1]->kind), (long long)a[1]->i);
    pt_tensor_t t;
    memset(&t, 0, sizeof t);
    int rs = 0;
    if (int_tuple(a[2], t.sizes, &t.rank) || int_tuple(a[3], t.strides, &rs) || rs != t.rank)
        return vfail(vm, "%s at byte %zu has sizes %s and strides %s that are not two int tuples "
                         "of one length up to %d; expected tensor sizes and strides", fn, at,
                     pt_kind_name(a[2]->kind), pt_kind_name(a[3]->kind), PT_MAX_RANK);
    if (a[4]->kind != PT_BOOL)
        return vfail(vm, "%s at byte %zu has requires_grad %s; expected a bool", fn, at,
                     pt_kind_name(a[4]->kind));
    if (!empty_dict_or_none(a[5]))
        return vfail(vm, "%s at byte %zu has backward hooks (%s of %lld); " SUBSET "; expected "
                         "an empty OrderedDict", fn, at, pt_kind_name(a[5]->kind),
                     (long long)a[5]->n);
    if (args->n == lo + 1 && !empty_dict_or_none(a[lo]))
        return vfail(vm, "%s at byte %zu has tensor metadata (%s of %lld); " SUBSET "; expected "
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
            return vfail(vm, "%s at byte %zu: tensor sizes %s strides %s hold a negative value; "
                             "expected non-negative sizes and strides", fn, at, sz, sd);
        if (t.sizes[d] != 0 && numel > INT64_MAX / t.sizes[d])
            overflow = 1;
        else
            numel *= t.sizes[d];
    }
    if (overflow)
        return vfail(vm, "%s at byte %zu: tensor sizes %s overflow 64 bits; expected a tensor "
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
            return vfail(vm, "%s at byte %zu: a %s tensor of sizes %s, strides %s and offset %lld "
                             "reads past its storage '%s' of %lld elements; expected a view "
                             "inside its storage", fn, at, pt_dtype_name(dt), sz, sd,
                         (long long)t.offset, st->s, (long long)elems);
        if (numel > elems && numel > PT_MAX_BROADCAST_NUMEL)
            return vfail(vm, "%s at byte %zu: a tensor of sizes %s has %lld elements over a "
                             "storage of %lld; expected at most the storage's elements, or %lld "
                             "for a broadcast view", fn, at, sz, (long long)numel,
                         (long long)elems, (long long)PT_MAX_BROADCAST_NUMEL);
    } else if (t.offset > elems) {
        return vfail(vm, "%s at byte %zu: storage offset %lld is past the end of storage '%s' "
                         "(%lld elements); expected an offset inside the storage", fn, at,
                     (long long)t.offset, st->s, (long long)elems);
    }
    if ((uint64_t)numel > vm->f->max_bytes / es)
        return vfail(vm, "%s at byte %zu: a %s tensor of sizes %s (%lld elements of %zu bytes) is "
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

    pt_value_t *v = new_value(vm, PT_TENSOR);
    if (!v)
        return -1;
    v->tensor = malloc(sizeof *v->tensor);
    if (!v->tensor)
        return vfail(vm, "out of memory at byte %zu; expected to fit in memory", at);
    *v->tensor = t;
    return push(vm, v);
}

static int op_reduce(vm_t *vm)
{
    pt_value_t *args = pop(vm), *fn = args ? pop(vm) : NULL;
    if (!fn)
        return -1;
    if (fn->kind != PT_GLOBAL)
        return vfail(vm, "REDUCE at byte %zu calls a %s; expected a supported global", vm->op_pos,
                     pt_kind_name(fn->kind));
    switch (GLOBALS[fn->global_id].kind) {
    case G_REBUILD_V2:
        return rebuild_tensor(vm, 0, args);
    case G_REBUILD_V3:
        return rebuild_tensor(vm, 1, args);
    case G_ORDERED_DICT:
        if (args->kind != PT_TUPLE || args->n != 0)
            return vfail(vm, "collections.OrderedDict at byte %zu is called with arguments; " SUBSET
                             "; expected OrderedDict() (the empty backward hooks)", vm->op_pos);
        return push(vm, new_value(vm, PT_DICT));
    default:
        return vfail(vm, "REDUCE at byte %zu calls %s, which is " SUBSET "; expected "
                         "torch._utils._rebuild_tensor_v2/_v3 or collections.OrderedDict",
                     vm->op_pos, fn->s);
    }
}

static int op_build(vm_t *vm)
{
    pt_value_t *state = pop(vm), *obj = state ? top(vm) : NULL;
    if (!obj)
        return -1;
    if (empty_dict_or_none(state))
        return 0;
    return vfail(vm, "BUILD at byte %zu sets a %s state on a %s, which is " SUBSET "; expected no "
                     "object state", vm->op_pos, pt_kind_name(state->kind),
                 pt_kind_name(obj->kind));
}

/* SETITEM / SETITEMS: pairs from stack[base..sp) into the dict at base-1. */
static int set_items(vm_t *vm, int64_t base)
{
    int64_t k = vm->sp - base;
    if (base < 1 || (vm->nmarks && base - 1 < vm->marks[vm->nmarks - 1]))
        return corrupt(vm, "SETITEMS without a dict below its items");
    if (k % 2)
        return corrupt(vm, "SETITEMS with an odd number of items");
    pt_value_t *d = vm->stack[base - 1];
    if (d->kind != PT_DICT)
        return vfail(vm, "%s at byte %zu sets items on a %s; expected a dict",
                     opcode_name(vm->p[vm->op_pos]), vm->op_pos, pt_kind_name(d->kind));
    if (items_reserve(vm, d, 2 * d->n + k))
        return -1;
    memcpy(d->items + 2 * d->n, vm->stack + base, (size_t)k * sizeof *d->items);
    d->n += k / 2;
    vm->sp = base;
    return 0;
}

static int append_items(vm_t *vm, int64_t base)
{
    int64_t k = vm->sp - base;
    if (base < 1 || (vm->nmarks && base - 1 < vm->marks[vm->nmarks - 1]))
        return corrupt(vm, "APPENDS without a list below its items");
    pt_value_t *l = vm->stack[base - 1];
    if (l->kind != PT_LIST)
        return vfail(vm, "%s at byte %zu appends to a %s; " SUBSET "; expected a list",
                     opcode_name(vm->p[vm->op_pos]), vm->op_pos, pt_kind_name(l->kind));
    if (items_reserve(vm, l, l->n + k))
        return -1;
    memcpy(l->items + l->n, vm->stack + base, (size_t)k * sizeof *l->items);
    l->n += k;
    vm->sp = base;
    return 0;
}

static int op_string(vm_t *vm, int lenbytes)
{
    if (need(vm, (size_t)lenbytes))
        return -1;
    uint64_t len = rd_le(vm->p + vm->pos, lenbytes);
    vm->pos += (size_t)lenbytes;
    if (len > vm->n - vm->pos)
        return corrupt(vm, "a string runs past the end of the pickle");
    pt_value_t *s = new_str(vm, vm->p + vm->pos, (size_t)len);
    vm->pos += (size_t)len;
    return push(vm, s);
}

static int op_long1(vm_t *vm)
{
    if (need(vm, 1))
        return -1;
    int k = vm->p[vm->pos++];
    if (need(vm, (size_t)k))
        return -1;
    if (k > 8)
        return vfail(vm, "LONG1 at byte %zu holds a %d-byte integer; " SUBSET "; expected an "
                         "integer that fits in 64 bits", vm->op_pos, k);
    uint64_t u = k ? rd_le(vm->p + vm->pos, k) : 0;
    if (k > 0 && k < 8 && (vm->p[vm->pos + (size_t)k - 1] & 0x80))
        u |= ~UINT64_C(0) << (8 * k);            /* sign-extend */
    vm->pos += (size_t)k;
    int64_t i;
    memcpy(&i, &u, sizeof i);
    return push(vm, new_int(vm, PT_INT, i));
}

static int op_binfloat(vm_t *vm)
{
    if (need(vm, 8))
        return -1;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = (u << 8) | vm->p[vm->pos + (size_t)i];   /* big-endian */
    vm->pos += 8;
    double d;
    memcpy(&d, &u, sizeof d);
    pt_value_t *v = new_value(vm, PT_FLOAT);
    if (v)
        v->f = d;
    return push(vm, v);
}

static int unsupported_opcode(vm_t *vm, int op)
{
    return vfail(vm, "opcode 0x%02x %s at byte %zu is " SUBSET "; expected the opcodes "
                     "torch.save writes for a dict of tensors and ints (pickle protocol 2)", op,
                 opcode_name(op), vm->op_pos);
}

/* PROTO (2 to 5) and FRAME (a length prefix only). */
static int op_protocol(vm_t *vm, int op)
{
    uint64_t v;
    if (op == 0x80) { /* PROTO */
        if (take_le(vm, 1, &v))
            return -1;
        if (v < 2 || v > 5)
            return vfail(vm, "pickle protocol %d at byte %zu is " SUBSET "; expected protocol "
                             "2 (torch.save's default) to 5", (int)v, vm->op_pos);
        return 0;
    }
    /* FRAME: a length prefix only */
    if (take_le(vm, 8, &v))
        return -1;
    if (v > vm->n - vm->pos)
        return corrupt(vm, "a FRAME runs past the end of the pickle");
    return 0;
}

/* BININT (int32), BININT1 (uint8), BININT2 (uint16). */
static int op_fixed_int(vm_t *vm, int op)
{
    int k = op == 'J' ? 4 : op == 'K' ? 1 : 2;
    uint64_t u;
    if (take_le(vm, k, &u))
        return -1;
    int64_t v = k == 4 ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
    return push(vm, new_int(vm, PT_INT, v));
}

/* SETITEM(S), APPEND(S) onto the dict or list below: the singular forms
 * take the top one (value) or two (key, value) entries, the plural ones
 * everything above the last MARK. */
static int op_items(vm_t *vm, int op)
{
    int64_t base = 0;
    if (op == 's' || op == 'a') {
        int64_t k = op == 's' ? 2 : 1;
        if (avail(vm) < k)
            return corrupt(vm, "stack underflow");
        base = vm->sp - k;
    } else if (pop_mark(vm, &base)) {
        return -1;
    }
    return op == 's' || op == 'u' ? set_items(vm, base) : append_items(vm, base);
}

/* The memo: PUT (1-byte index), LONG_BINPUT (4), MEMOIZE (the next free
 * index), GET (1), LONG_BINGET (4). */
static int op_memo(vm_t *vm, int op)
{
    if (op == 0x94)
        return memo_put(vm, (uint64_t)vm->memo_count);
    uint64_t idx;
    if (take_le(vm, op == 'q' || op == 'h' ? 1 : 4, &idx))
        return -1;
    return op == 'q' || op == 'r' ? memo_put(vm, idx) : memo_get(vm, idx);
}

static int run_vm(vm_t *vm, pt_value_t **result)
{
    while (vm->pos < vm->n) {
        vm->op_pos = vm->pos;
        int op = vm->p[vm->pos++];
        int rc = 0;
        int64_t base = 0;
        switch (op) {
        case 0x80: /* PROTO */
        case 0x95: /* FRAME */
            rc = op_protocol(vm, op);
            break;
        case '.': /* STOP */
            if (!(*result = pop(vm)))
                return -1;
            return 0;
        case '(':
            if (vm->nmarks >= PT_MAX_MARKS)
                return vfail(vm, "more than %d nested MARKs at byte %zu; expected a dict of "
                                 "tensors and ints", PT_MAX_MARKS, vm->op_pos);
            vm->marks[vm->nmarks++] = vm->sp;
            break;
        case '}':
            rc = push(vm, new_value(vm, PT_DICT));
            break;
        case ']':
            rc = push(vm, new_value(vm, PT_LIST));
            break;
        case ')':
            rc = make_tuple(vm, 0);
            break;
        case 't':
            rc = pop_mark(vm, &base);
            if (!rc)
                rc = make_tuple(vm, vm->sp - base);
            break;
        case 0x85:
        case 0x86:
        case 0x87:
            rc = make_tuple(vm, op - 0x84);
            break;
        case 'X':
            rc = op_string(vm, 4);
            break;
        case 0x8c:
            rc = op_string(vm, 1);
            break;
        case 0x8d:
            rc = op_string(vm, 8);
            break;
        case 'J':
        case 'K':
        case 'M':
            rc = op_fixed_int(vm, op);
            break;
        case 0x8a:
            rc = op_long1(vm);
            break;
        case 'G':
            rc = op_binfloat(vm);
            break;
        case 'N':
            rc = push(vm, new_value(vm, PT_NONE));
            break;
        case 0x88:
        case 0x89:
            rc = push(vm, new_int(vm, PT_BOOL, op == 0x88));
            break;
        case 'c':
            rc = op_global(vm);
            break;
        case 0x93:
            rc = op_stack_global(vm);
            break;
        case 'Q':
            rc = op_persid(vm);
            break;
        case 'R':
            rc = op_reduce(vm);
            break;
        case 'b':
            rc = op_build(vm);
            break;
        case 's':
        case 'u':
        case 'a':
        case 'e':
            rc = op_items(vm, op);
            break;
        case 'q':
        case 'r':
        case 0x94:
        case 'h':
        case 'j':
            rc = op_memo(vm, op);
            break;
        default:
            return unsupported_opcode(vm, op);
        }
        if (rc)
            return -1;
    }
    return vfail(vm, "the pickle ends at byte %zu without STOP (truncated?); expected a complete "
                     "pickle", vm->n);
}

/* ---- opening ---- */

static int open_zip(pt_file_t *f, kr_error_t *err)
{
    int code = 0;
    f->za = zip_open(f->path, ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (f->za)
        return 0;
    zip_error_t ze;
    zip_error_init_with_code(&ze, code);
    const char *why = zip_error_strerror(&ze);
    char whybuf[256];
    snprintf(whybuf, sizeof whybuf, "%s", why ? why : "unknown error");
    zip_error_fini(&ze);
    if (code == ZIP_ER_NOZIP)
        return ffail(f, err, "file", "not a zip archive (no end-of-central-directory record: "
                                     "truncated, or the legacy non-zip torch.save format?); "
                                     "expected a torch.save zip file");
    if (code == ZIP_ER_INCONS)
        return ffail(f, err, "file", "the zip archive is inconsistent (%s: truncated or corrupt "
                                     "file?); expected a complete torch.save zip file", whybuf);
    return ffail(f, err, "file", "cannot open as a zip archive (%s); expected a readable "
                                 "torch.save zip file", whybuf);
}

/* PREFIX/data.pkl: exactly one, PREFIX one path component. */
static int find_pickle(pt_file_t *f, zip_int64_t *idx, kr_error_t *err)
{
    zip_int64_t n = zip_get_num_entries(f->za, 0), found = -1;
    if (n < 0)
        return ffail(f, err, "file", "cannot list the zip archive; expected a readable central "
                                     "directory");
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(f->za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
        if (!name)
            continue;
        size_t len = strlen(name);
        if (len <= 9 || strcmp(name + len - 9, "/data.pkl") != 0)
            continue;
        size_t pl = len - 9;
        if (pl > 1024 || memchr(name, '/', pl))
            continue;
        if (found >= 0)
            return ffail(f, err, "data.pkl", "the zip holds more than one PREFIX/data.pkl record; "
                                             "expected exactly one (one torch.save object)");
        found = i;
        free(f->prefix);
        f->prefix = malloc(pl + 1);
        if (!f->prefix)
            return ffail(f, err, "file", "out of memory; expected to fit in memory");
        memcpy(f->prefix, name, pl);
        f->prefix[pl] = 0;
    }
    if (found < 0)
        return ffail(f, err, "data.pkl", "the zip has no PREFIX/data.pkl record (a zip, but not a "
                                         "torch.save file?); expected the record torch.save "
                                         "writes the pickled object to");
    *idx = found;
    return 0;
}

static int check_byteorder(pt_file_t *f, kr_error_t *err)
{
    zip_int64_t idx = record_locate(f, "byteorder");
    if (idx < 0)
        return 0;   /* older torch: little-endian without saying so */
    uint64_t size;
    uint8_t *buf = NULL;
    if (record_size(f, idx, "byteorder", &size, err))
        return -1;
    if (size > 16)
        return ffail(f, err, "byteorder", "the record holds %llu bytes; expected \"little\"",
                     (unsigned long long)size);
    if (record_read(f, idx, "byteorder", size, &buf, err))
        return -1;
    int ok = size == 6 && memcmp(buf, "little", 6) == 0;
    char pb[64];
    printable((const char *)buf, (size_t)size, pb, sizeof pb);
    free(buf);
    if (!ok)
        return ffail(f, err, "byteorder", "\"%s\" is " SUBSET " (big-endian data); expected "
                                          "\"little\"", pb);
    return 0;
}

int pt_open(const char *path, pt_file_t **out, kr_error_t *err)
{
    if (!out)
        return kr_fail(err, "%s: file: NULL output; expected a pt_file_t ** to fill",
                       path ? path : "(null)");
    *out = NULL;
    if (!path)
        return kr_fail(err, "(null): file: no path given; expected a torch.save file path");
    pt_file_t *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return kr_fail(err, "%s: file: out of memory; expected to fit in memory", path);
    }
    vm_t vm;
    memset(&vm, 0, sizeof vm);
    uint8_t *pkl = NULL;
    zip_int64_t idx = -1;
    uint64_t size;
    int rc = -1;
    if (read_max_bytes(f, err) || open_zip(f, err) || find_pickle(f, &idx, err) || check_byteorder(f, err) ||
        record_size(f, idx, "data.pkl", &size, err))
        goto done;
    if (size > PT_MAX_PICKLE_BYTES) {
        ffail(f, err, "data.pkl", "the pickle is %llu bytes; expected at most %zu (a dict of "
                                  "tensors and ints)", (unsigned long long)size,
              PT_MAX_PICKLE_BYTES);
        goto done;
    }
    if (record_read(f, idx, "data.pkl", size, &pkl, err))
        goto done;
    vm.f = f;
    vm.p = pkl;
    vm.n = (size_t)size;
    vm.err = err;
    if (run_vm(&vm, &f->root))
        goto done;
    *out = f;
    f = NULL;
    rc = 0;
done:
    free(vm.stack);
    free(vm.memo);
    free(pkl);
    pt_close(f);
    return rc;
}

/* ---- tensor data ---- */

static int host_is_little(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

int pt_tensor_read(pt_file_t *f, const pt_tensor_t *t, const char *what, void **data,
                   kr_error_t *err)
{
    *data = NULL;
    if (!what)
        what = "tensor";
    size_t es = pt_dtype_size(t->dtype);
    if (es == 0 || t->numel < 0 || (uint64_t)t->numel > SIZE_MAX / es / 2 ||
        (uint64_t)t->numel > f->max_bytes / es)
        return ffail(f, err, what, "a tensor of %lld elements is over the limit of %llu MiB; "
                                   "expected a smaller tensor (" PT_MAX_MB_ENV " raises it)",
                     (long long)t->numel, (unsigned long long)(f->max_bytes >> 20));
    char rel[64];
    snprintf(rel, sizeof rel, "data/%s", t->key);
    zip_int64_t idx = record_locate(f, rel);
    uint64_t size;
    if (idx < 0)
        return ffail(f, err, what, "record %s/%s is missing; expected the tensor's storage",
                     f->prefix, rel);
    if (record_size(f, idx, rel, &size, err))
        return -1;
    if (size != (uint64_t)t->storage_bytes)
        return ffail(f, err, what, "record %s/%s holds %llu bytes; expected %lld", f->prefix, rel,
                     (unsigned long long)size, (long long)t->storage_bytes);
    uint8_t *st = NULL;
    if (record_read(f, idx, rel, size, &st, err))
        return -1;
    size_t bytes = (size_t)t->numel * es;
    uint8_t *o = malloc(bytes ? bytes : 1);
    if (!o) {
        free(st);
        return ffail(f, err, what, "out of memory for %lld elements; expected to fit in memory",
                     (long long)t->numel);
    }
    /* pt_open checked offset + sum((size-1)*stride) < the storage's elements. */
    if (t->numel > 0 && t->contiguous) {
        memcpy(o, st + (size_t)t->offset * es, bytes);
    } else if (t->numel > 0) {
        int64_t idxs[PT_MAX_RANK] = {0};
        int64_t src = t->offset;
        for (int64_t i = 0; i < t->numel; i++) {
            memcpy(o + (size_t)i * es, st + (size_t)src * es, es);
            for (int d = t->rank - 1; d >= 0; d--) {
                if (++idxs[d] < t->sizes[d]) {
                    src += t->strides[d];
                    break;
                }
                src -= (idxs[d] - 1) * t->strides[d];
                idxs[d] = 0;
            }
        }
    }
    free(st);
    if (es > 1 && !host_is_little()) {
        for (size_t i = 0; i < bytes; i += es)
            for (size_t a = 0, b = es - 1; a < b; a++, b--) {
                uint8_t tmp = o[i + a];
                o[i + a] = o[i + b];
                o[i + b] = tmp;
            }
    }
    *data = o;
    return 0;
}
