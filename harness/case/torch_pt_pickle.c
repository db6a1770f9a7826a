/* torch_pt_pickle: the pickle machine's loop.  It mirrors CPython's _pickle.c
 * for the opcodes it accepts: a value stack with a mark stack beside it (a
 * mark fences the stack: nothing below the innermost mark can be popped
 * before the mark is), a memo indexed by BINPUT/MEMOIZE (torch_pt_vm.c).  The
 * VM is a loop: nothing here recurses.  The globals, storages and tensors it
 * builds are torch_pt_rebuild.c's. */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "array_grow.h"
#include "torch_pt_internal.h"

/* SETITEM / SETITEMS: pairs from stack[base..sp) into the dict at base-1. */
static int set_items(vm_t *vm, int64_t base)
{
    int64_t k = vm->sp - base;
    if (base < 1 || (vm->nmarks && base - 1 < vm->marks[vm->nmarks - 1]))
        return pt_vm_corrupt(vm, "SETITEMS without a dict below its items");
    if (k % 2)
        return pt_vm_corrupt(vm, "SETITEMS with an odd number of items");
    pt_value_t *d = vm->stack[base - 1];
    if (d->kind != PT_DICT)
        return pt_vm_fail(vm, "%s at byte %zu sets items on a %s; expected a dict",
                     pt_opcode_name(vm->p[vm->op_pos]), vm->op_pos, pt_kind_name(d->kind));
    if (pt_vm_items_reserve(vm, d, 2 * d->n + k))
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
        return pt_vm_corrupt(vm, "APPENDS without a list below its items");
    pt_value_t *l = vm->stack[base - 1];
    if (l->kind != PT_LIST)
        return pt_vm_fail(vm, "%s at byte %zu appends to a %s; " SUBSET "; expected a list",
                     pt_opcode_name(vm->p[vm->op_pos]), vm->op_pos, pt_kind_name(l->kind));
    if (pt_vm_items_reserve(vm, l, l->n + k))
        return -1;
    memcpy(l->items + l->n, vm->stack + base, (size_t)k * sizeof *l->items);
    l->n += k;
    vm->sp = base;
    return 0;
}

static int op_string(vm_t *vm, int lenbytes)
{
    uint64_t len;
    if (pt_vm_take_le(vm, lenbytes, &len))
        return -1;
    if (len > vm->n - vm->pos)
        return pt_vm_corrupt(vm, "a string runs past the end of the pickle");
    pt_value_t *s = pt_vm_new_str(vm, vm->p + vm->pos, (size_t)len);
    vm->pos += (size_t)len;
    return pt_vm_push(vm, s);
}

static int op_long1(vm_t *vm)
{
    if (pt_vm_need(vm, 1))
        return -1;
    int k = vm->p[vm->pos++];
    if (pt_vm_need(vm, (size_t)k))
        return -1;
    if (k > 8)
        return pt_vm_fail(vm, "LONG1 at byte %zu holds a %d-byte integer; " SUBSET "; expected an "
                         "integer that fits in 64 bits", vm->op_pos, k);
    uint64_t u = k ? pt_read_le(vm->p + vm->pos, k) : 0;
    if (k > 0 && k < 8 && (vm->p[vm->pos + (size_t)k - 1] & 0x80))
        u |= ~UINT64_C(0) << (8 * k);            /* sign-extend */
    vm->pos += (size_t)k;
    int64_t i;
    memcpy(&i, &u, sizeof i);
    return pt_vm_push(vm, pt_vm_new_int(vm, PT_INT, i));
}

static int op_binfloat(vm_t *vm)
{
    if (pt_vm_need(vm, 8))
        return -1;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = (u << 8) | vm->p[vm->pos + (size_t)i];   /* big-endian */
    vm->pos += 8;
    double d;
    memcpy(&d, &u, sizeof d);
    pt_value_t *v = pt_vm_new_value(vm, PT_FLOAT);
    if (v)
        v->f = d;
    return pt_vm_push(vm, v);
}

static int unsupported_opcode(vm_t *vm, int op)
{
    return pt_vm_fail(vm, "opcode 0x%02x %s at byte %zu is " SUBSET "; expected the opcodes "
                     "torch.save writes for a dict of tensors and ints (pickle protocol 2)", op,
                 pt_opcode_name(op), vm->op_pos);
}

/* PROTO (2 to 5) and FRAME (a length prefix only). */
static int op_protocol(vm_t *vm, int op)
{
    uint64_t v;
    if (op == 0x80) { /* PROTO */
        if (pt_vm_take_le(vm, 1, &v))
            return -1;
        if (v < 2 || v > 5)
            return pt_vm_fail(vm, "pickle protocol %d at byte %zu is " SUBSET "; expected protocol "
                             "2 (torch.save's default) to 5", (int)v, vm->op_pos);
        return 0;
    }
    /* FRAME: a length prefix only */
    if (pt_vm_take_le(vm, 8, &v))
        return -1;
    if (v > vm->n - vm->pos)
        return pt_vm_corrupt(vm, "a FRAME runs past the end of the pickle");
    return 0;
}

/* BININT (int32), BININT1 (uint8), BININT2 (uint16). */
static int op_fixed_int(vm_t *vm, int op)
{
    int k = op == 'J' ? 4 : op == 'K' ? 1 : 2;
    uint64_t u;
    if (pt_vm_take_le(vm, k, &u))
        return -1;
    int64_t v = k == 4 ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
    return pt_vm_push(vm, pt_vm_new_int(vm, PT_INT, v));
}

/* SETITEM(S), APPEND(S) onto the dict or list below: the singular forms
 * take the top one (value) or two (key, value) entries, the plural ones
 * everything above the last MARK. */
static int op_items(vm_t *vm, int op)
{
    int64_t base = 0;
    if (op == 's' || op == 'a') {
        int64_t k = op == 's' ? 2 : 1;
        if (pt_vm_avail(vm) < k)
            return pt_vm_corrupt(vm, "stack underflow");
        base = vm->sp - k;
    } else if (pt_vm_pop_mark(vm, &base)) {
        return -1;
    }
    return op == 's' || op == 'u' ? set_items(vm, base) : append_items(vm, base);
}

/* The memo: PUT (1-byte index), LONG_BINPUT (4), MEMOIZE (the next free
 * index), GET (1), LONG_BINGET (4). */
static int op_memo(vm_t *vm, int op)
{
    if (op == 0x94)
        return pt_vm_memo_put(vm, (uint64_t)vm->memo_count);
    uint64_t idx;
    if (pt_vm_take_le(vm, op == 'q' || op == 'h' ? 1 : 4, &idx))
        return -1;
    return op == 'q' || op == 'r' ? pt_vm_memo_put(vm, idx) : pt_vm_memo_get(vm, idx);
}

int pt_run_vm(vm_t *vm, pt_value_t **result)
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
            if (!(*result = pt_vm_pop(vm)))
                return -1;
            return 0;
        case '(':
            if (vm->nmarks >= PT_MAX_MARKS)
                return pt_vm_fail(vm, "more than %d nested MARKs at byte %zu; expected a dict of "
                                 "tensors and ints", PT_MAX_MARKS, vm->op_pos);
            vm->marks[vm->nmarks++] = vm->sp;
            break;
        case '}':
            rc = pt_vm_push(vm, pt_vm_new_value(vm, PT_DICT));
            break;
        case ']':
            rc = pt_vm_push(vm, pt_vm_new_value(vm, PT_LIST));
            break;
        case ')':
            rc = pt_vm_make_tuple(vm, 0);
            break;
        case 't':
            rc = pt_vm_pop_mark(vm, &base);
            if (!rc)
                rc = pt_vm_make_tuple(vm, vm->sp - base);
            break;
        case 0x85:
        case 0x86:
        case 0x87:
            rc = pt_vm_make_tuple(vm, op - 0x84);
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
            rc = pt_vm_push(vm, pt_vm_new_value(vm, PT_NONE));
            break;
        case 0x88:
        case 0x89:
            rc = pt_vm_push(vm, pt_vm_new_int(vm, PT_BOOL, op == 0x88));
            break;
        case 'c':
            rc = pt_op_global(vm);
            break;
        case 0x93:
            rc = pt_op_stack_global(vm);
            break;
        case 'Q':
            rc = pt_op_persid(vm);
            break;
        case 'R':
            rc = pt_op_reduce(vm);
            break;
        case 'b':
            rc = pt_op_build(vm);
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
    return pt_vm_fail(vm, "the pickle ends at byte %zu without STOP (truncated?); expected a complete "
                     "pickle", vm->n);
}
