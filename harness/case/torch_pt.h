/* torch_pt: reads torch.save files in C, without Python.
 *
 * A torch.save file (torch >= 1.6, the default "new zipfile serialization") is
 * a zip archive: PREFIX/data.pkl holds a pickle of the saved object in which
 * every tensor's bytes are a persistent reference ('storage', storage type,
 * key, location, numel) to the record PREFIX/data/KEY, little-endian (the
 * PREFIX/byteorder record says so).  This reader takes the zip container
 * through libzip and runs the pickle subset torch.save emits for a dict of
 * tensors and ints:
 *
 *   opcodes  PROTO (2..5), FRAME, STOP, MARK, EMPTY_DICT, EMPTY_LIST,
 *            EMPTY_TUPLE, TUPLE, TUPLE1/2/3, BINUNICODE, SHORT_BINUNICODE,
 *            BINUNICODE8, BININT, BININT1, BININT2, LONG1 (up to 8 bytes),
 *            BINFLOAT, NONE, NEWTRUE, NEWFALSE, GLOBAL, STACK_GLOBAL,
 *            BINPERSID, REDUCE, BUILD (with an empty state only), SETITEM,
 *            SETITEMS, APPEND, APPENDS, BINPUT, LONG_BINPUT, MEMOIZE, BINGET,
 *            LONG_BINGET
 *   globals  torch._utils._rebuild_tensor_v2 (typed storages) and
 *            _rebuild_tensor_v3 (torch.UntypedStorage + an explicit dtype,
 *            which current torch writes for float8_e4m3fn), the empty
 *            collections.OrderedDict of backward hooks, torch.FloatStorage,
 *            BFloat16Storage, HalfStorage, ByteStorage, IntStorage,
 *            LongStorage, torch[.storage].UntypedStorage, and the dtypes
 *            torch.float8_e4m3fn, bfloat16, float16, float32, uint8, int32,
 *            int64, and (through _rebuild_tensor_v3: the typed storages torch
 *            >= 2.1 has no class for) float8_e4m3fnuz, float8_e5m2,
 *            float8_e8m0fnu, float4_e2m1fn_x2; the typed storages
 *            CharStorage (int8), BoolStorage (bool), DoubleStorage (float64)
 *
 * Anything else (another opcode, another global -- a complex64 or int16
 * storage, a uint16 or float8_e5m2fnuz dtype, a python set, a custom class --, a big-endian file, the legacy
 * non-zip format) is refused with a message naming the file, the opcode or
 * global and its byte offset in data.pkl, and "not in the supported
 * torch.save subset"; nothing is guessed.
 *
 * The files come from crashed serves and from users, and this parser is
 * fuzzed: every length is checked against what remains, every count and
 * product is overflow-checked, the VM is a loop (no recursion), the stack,
 * the mark stack, the memo and the object count are capped, data.pkl is at
 * most 64 MiB, and a storage record must have exactly the size its pickle
 * declares (and, for a compressed record, a plausible compression ratio), and
 * no record or tensor may exceed the byte limit below, so memory stays
 * proportional to the file and bounded.  A tensor must lie inside its
 * storage (offset + sum((size-1)*stride) < storage elements) and may not
 * have more elements than its storage unless it has at most 2^26 (a
 * broadcast view). */
#ifndef KR_TORCH_PT_H
#define KR_TORCH_PT_H

#include <stddef.h>
#include <stdint.h>

#include "kr_error.h"

#define PT_MAX_RANK 8

typedef enum {
    PT_DT_FLOAT8_E4M3FN = 0,
    PT_DT_BFLOAT16,
    PT_DT_FLOAT16,
    PT_DT_FLOAT32,
    PT_DT_UINT8,
    PT_DT_INT32,
    PT_DT_INT64,
    PT_DT_FLOAT8_E4M3FNUZ,          /* MI300's fp8: bias 8, NaN = 0x80 only (bytes here) */
    PT_DT_FLOAT8_E5M2,
    PT_DT_FLOAT8_E8M0FNU,           /* MX block exponents, 2^(b-127) */
    PT_DT_FLOAT4_E2M1FN_X2,         /* two e2m1 codes per byte, element 2j low nibble */
    PT_DT_INT8,
    PT_DT_BOOL,                     /* one byte, 0 or 1 */
    PT_DT_FLOAT64,
    PT_DT_COUNT
} pt_dtype_t;

/* "float8_e4m3fn", "bfloat16", ... (torch's names without "torch.") */
const char *pt_dtype_name(pt_dtype_t d);
/* Bytes per element (1 for every 8-bit type and for float4_e2m1fn_x2's byte pair). */
size_t pt_dtype_size(pt_dtype_t d);

typedef enum {
    PT_NONE = 0,
    PT_BOOL,
    PT_INT,
    PT_FLOAT,
    PT_STR,
    PT_TUPLE,
    PT_LIST,
    PT_DICT,        /* dict or collections.OrderedDict */
    PT_TENSOR,
    PT_STORAGE,     /* a storage not wrapped in a tensor */
    PT_GLOBAL,      /* a supported global used as a value (e.g. a dtype) */
} pt_kind_t;

/* "None", "bool", "int", "float", "str", "tuple", "list", "dict", "tensor", ... */
const char *pt_kind_name(pt_kind_t k);

typedef struct {
    pt_dtype_t dtype;
    int rank;                         /* 0 .. PT_MAX_RANK */
    int64_t sizes[PT_MAX_RANK];
    int64_t strides[PT_MAX_RANK];     /* in elements */
    int64_t offset;                   /* storage offset, in elements */
    int64_t numel;                    /* product of sizes (1 for rank 0) */
    int contiguous;                   /* row-major strides, whatever the offset */
    char key[40];                     /* the storage's record: PREFIX/data/<key> */
    int64_t storage_bytes;            /* that record's size */
} pt_tensor_t;

typedef struct pt_value pt_value_t;
struct pt_value {
    pt_kind_t kind;
    int64_t i;                        /* PT_INT, PT_BOOL (0/1) */
    double f;                         /* PT_FLOAT */
    const char *s;                    /* PT_STR (NUL-terminated; may hold NULs: see slen),
                                         PT_GLOBAL ("module.name") */
    size_t slen;
    pt_value_t **items;               /* PT_TUPLE, PT_LIST: n items; PT_DICT: n (key, value)
                                         pairs as items[2j], items[2j+1] */
    int64_t n;
    pt_tensor_t *tensor;              /* PT_TENSOR */
    /* internal */
    int64_t cap;
    int global_id;
    int64_t storage_numel;
    int storage_typed;
};

typedef struct pt_file pt_file_t;

/* Opens and parses a torch.save file: the zip directory, data.pkl through the
 * supported pickle subset, and every storage reference (its record must exist
 * with the declared size).  Tensor bytes are not read until pt_tensor_read.
 * Returns 0, or -1 with one line in err ("<path>: <what>: <problem>; expected
 * <what>"). */
int pt_open(const char *path, pt_file_t **out, kr_error_t *err);
void pt_close(pt_file_t *f);

const char *pt_path(const pt_file_t *f);
/* The unpickled object (torch.save's argument). */
const pt_value_t *pt_root(const pt_file_t *f);
/* The value of string key `key` in a PT_DICT (the last one if repeated), or NULL. */
const pt_value_t *pt_dict_get(const pt_value_t *dict, const char *key);

/* Reads the tensor's elements into a malloc'd, contiguous, row-major array of
 * numel elements of pt_dtype_size(t->dtype) bytes each, in host byte order
 * (strides and the storage offset applied).  A tensor with no elements gives
 * a 1-byte allocation.  `what` names the tensor in messages (a dict key). */
int pt_tensor_read(pt_file_t *f, const pt_tensor_t *t, const char *what, void **data,
                   kr_error_t *err);

/* Limits, exposed for the tests. */
#define PT_MAX_PICKLE_BYTES ((size_t)64 << 20)
#define PT_MAX_STACK (1 << 20)
#define PT_MAX_MARKS 4096
#define PT_MAX_MEMO (1 << 20)
#define PT_MAX_OBJECTS (1 << 20)
#define PT_MAX_BROADCAST_NUMEL (INT64_C(1) << 26)

/* Every record's inflated size (the zip entry's declared size, checked before
 * a byte is inflated or allocated) and every tensor's numel * itemsize are at
 * most PT_DEFAULT_MAX_MB MiB: 1 GiB holds the largest tensor of any
 * production case (an fp32 reference of 8192 x 17408 is 544 MiB) and refuses
 * a zip bomb, whose deflated zeros inflate ~1000:1 (a 1.1 MB dump holding a
 * 1.06 GiB storage).  The environment variable PT_MAX_MB_ENV, a whole number
 * of MiB from 1 to PT_MAX_MB_CEILING, sets another limit; a value that is not
 * is refused by name. */
#define PT_DEFAULT_MAX_MB 1024
#define PT_MAX_MB_CEILING (1 << 20)
#define PT_MAX_MB_ENV "KREPLAY_PT_MAX_MB"

/* v[0..rank-1] as "[a, b, ...]" for messages, cut at cap. */
void pt_shape_str(const int64_t *v, int rank, char *buf, size_t cap);

#endif
