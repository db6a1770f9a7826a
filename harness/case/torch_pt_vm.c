/* torch_pt_vm: the pickle machine's state and primitives -- the value stack
 * fenced by marks, the memo, new values registered with the file, the
 * bounded reads of opcode arguments, and the messages every opcode's refusal
 * shares.  The opcodes are torch_pt_pickle.c's and torch_pt_rebuild.c's. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "array_grow.h"
#include "torch_pt_internal.h"

/* ---- opcode names, for messages ---- */

const char *pt_opcode_name(int op)
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

/* "<path>: data.pkl: <problem>" */
__attribute__((format(printf, 2, 3)))
int pt_vm_fail(vm_t *vm, const char *fmt, ...)
{
    char buf[KR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return kr_fail(vm->err, "%s: data.pkl: %s", vm->f->path, buf);
}

int pt_vm_corrupt(vm_t *vm, const char *what)
{
    return pt_vm_fail(vm, "%s at byte %zu (opcode %s; truncated or corrupt pickle?); expected a "
                     "well-formed pickle", what, vm->op_pos, pt_opcode_name(vm->p[vm->op_pos]));
}

pt_value_t *pt_vm_new_value(vm_t *vm, pt_kind_t kind)
{
    pt_file_t *f = vm->f;
    if (f->nobjs >= PT_MAX_OBJECTS) {
        pt_vm_fail(vm, "more than %d objects at byte %zu; expected a dict of tensors and ints",
              PT_MAX_OBJECTS, vm->op_pos);
        return NULL;
    }
    if (f->nobjs == f->capobjs) {
        int64_t cap = f->capobjs ? f->capobjs * 2 : 256;
        pt_value_t **o = realloc(f->objs, (size_t)cap * sizeof *o);
        if (!o) {
            pt_vm_fail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
            return NULL;
        }
        f->objs = o;
        f->capobjs = cap;
    }
    pt_value_t *v = calloc(1, sizeof *v);
    if (!v) {
        pt_vm_fail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
        return NULL;
    }
    v->kind = kind;
    v->global_id = -1;
    f->objs[f->nobjs++] = v;
    return v;
}

/* Bytes left after pos. */
int pt_vm_need(vm_t *vm, size_t k)
{
    if (vm->n - vm->pos < k)
        return pt_vm_corrupt(vm, "the pickle ends inside an opcode's argument");
    return 0;
}

uint64_t pt_read_le(const uint8_t *p, int k)
{
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* A k-byte little-endian opcode argument, consumed. */
int pt_vm_take_le(vm_t *vm, int k, uint64_t *v)
{
    if (pt_vm_need(vm, (size_t)k))
        return -1;
    *v = pt_read_le(vm->p + vm->pos, k);
    vm->pos += (size_t)k;
    return 0;
}

int pt_vm_push(vm_t *vm, pt_value_t *v)
{
    if (!v)
        return -1;
    if (vm->sp >= PT_MAX_STACK)
        return pt_vm_fail(vm, "the stack exceeds %d entries at byte %zu; expected a dict of tensors "
                         "and ints", PT_MAX_STACK, vm->op_pos);
    pt_value_t **s = array_reserve_one(vm->stack, vm->sp, &vm->scap, sizeof *s, 64);
    if (!s)
        return pt_vm_fail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
    vm->stack = s;
    vm->stack[vm->sp++] = v;
    return 0;
}

/* Entries above the innermost mark. */
int64_t pt_vm_avail(const vm_t *vm)
{
    return vm->sp - (vm->nmarks ? vm->marks[vm->nmarks - 1] : 0);
}

pt_value_t *pt_vm_pop(vm_t *vm)
{
    if (pt_vm_avail(vm) < 1) {
        pt_vm_corrupt(vm, "stack underflow");
        return NULL;
    }
    return vm->stack[--vm->sp];
}

pt_value_t *pt_vm_top(vm_t *vm)
{
    if (pt_vm_avail(vm) < 1) {
        pt_vm_corrupt(vm, "stack underflow");
        return NULL;
    }
    return vm->stack[vm->sp - 1];
}

/* Pops the innermost mark; *base = where its items start. */
int pt_vm_pop_mark(vm_t *vm, int64_t *base)
{
    if (vm->nmarks == 0)
        return pt_vm_corrupt(vm, "no MARK to pop");
    *base = vm->marks[--vm->nmarks];
    return 0;
}

int pt_vm_items_reserve(vm_t *vm, pt_value_t *v, int64_t want)
{
    if (want <= v->cap)
        return 0;
    int64_t cap = v->cap ? v->cap : 4;
    while (cap < want)
        cap *= 2;
    pt_value_t **it = realloc(v->items, (size_t)cap * sizeof *it);
    if (!it)
        return pt_vm_fail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
    v->items = it;
    v->cap = cap;
    return 0;
}

/* A tuple of the k values on top of the stack (above the fence). */
int pt_vm_make_tuple(vm_t *vm, int64_t k)
{
    if (pt_vm_avail(vm) < k)
        return pt_vm_corrupt(vm, "stack underflow");
    pt_value_t *t = pt_vm_new_value(vm, PT_TUPLE);
    if (!t || pt_vm_items_reserve(vm, t, k ? k : 1))
        return -1;
    if (k)
        memcpy(t->items, vm->stack + vm->sp - k, (size_t)k * sizeof *t->items);
    t->n = k;
    vm->sp -= k;
    return pt_vm_push(vm, t);
}

int pt_vm_memo_put(vm_t *vm, uint64_t idx)
{
    pt_value_t *v = pt_vm_top(vm);
    if (!v)
        return -1;
    if (idx >= PT_MAX_MEMO)
        return pt_vm_fail(vm, "memo index %llu at byte %zu exceeds %d; expected a dict of tensors and "
                         "ints", (unsigned long long)idx, vm->op_pos, PT_MAX_MEMO);
    if ((int64_t)idx >= vm->memo_cap) {
        int64_t cap = vm->memo_cap ? vm->memo_cap : 64;
        while (cap <= (int64_t)idx)
            cap *= 2;
        pt_value_t **m = realloc(vm->memo, (size_t)cap * sizeof *m);
        if (!m)
            return pt_vm_fail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
        memset(m + vm->memo_cap, 0, (size_t)(cap - vm->memo_cap) * sizeof *m);
        vm->memo = m;
        vm->memo_cap = cap;
    }
    if (!vm->memo[idx])
        vm->memo_count++;
    vm->memo[idx] = v;
    return 0;
}

int pt_vm_memo_get(vm_t *vm, uint64_t idx)
{
    if ((int64_t)idx >= vm->memo_cap || idx >= PT_MAX_MEMO || !vm->memo[idx])
        return pt_vm_fail(vm, "memo entry %llu read at byte %zu was never stored (corrupt "
                         "pickle?); expected a BINPUT before its BINGET",
                     (unsigned long long)idx, vm->op_pos);
    return pt_vm_push(vm, vm->memo[idx]);
}

pt_value_t *pt_vm_new_str(vm_t *vm, const uint8_t *s, size_t len)
{
    pt_value_t *v = pt_vm_new_value(vm, PT_STR);
    if (!v)
        return NULL;
    char *c = malloc(len + 1);
    if (!c) {
        pt_vm_fail(vm, "out of memory at byte %zu; expected to fit in memory", vm->op_pos);
        return NULL;
    }
    memcpy(c, s, len);
    c[len] = 0;
    v->s = c;
    v->slen = len;
    return v;
}

pt_value_t *pt_vm_new_int(vm_t *vm, pt_kind_t kind, int64_t i)
{
    pt_value_t *v = pt_vm_new_value(vm, kind);
    if (v)
        v->i = i;
    return v;
}

/* A printable copy of a (possibly binary) name, for messages. */
void pt_printable(const char *s, size_t len, char *out, size_t cap)
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
