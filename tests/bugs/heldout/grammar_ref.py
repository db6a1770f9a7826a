"""The hypothesis grammar's semantics, written again in numpy from harness/judge/diagnosis/
grammar.h's definitions (not from kreplay's code): the generator of the held-out corpus draws
its bugs from PRIMITIVES, and the corpus's Python kernels compute through run_spec().

A spec is a list of primitive names ("w-k:swap2", "ws:twice", "acc:bf16-k32"), applied as
grammar.h says: on an operand, the 1-D index maps of each axis (two on one axis in the
spec's order), then its 2-D map; value maps in table order; then the computation with its
structure row; then the output's value maps and index maps.

The second round's rows (drawn by ../heldout2/ only): `modJ` reads index i mod J on a 1-D
axis longer than J; `neg-zero` reads negative values as +0 (e2m1, fp8, bf16 elements),
`hi-`/`lo-` + `neg-zero`/`abs`/`neg` do that, drop or flip the sign only at odd / even K
(the element's K after the operand's index maps); `exp-wrap8` decodes an e8m0 byte E < 127
as 2^(E + 129) = +inf; `w:nk-as-kn` / `x:mk-as-km` read bf16 element (n, k) / (m, k) at
flat index k*N + n / k*M + m; `carry-*` starts each output's fp32 accumulator (before x_scale
and the bf16 rounding) from the previous output's along N or M, from 0 at each tile of 16 or
64 (never without one); `fp16-chunkC` / `bf16-chunkC` sum each aligned chunk of C products
in the narrow format, every addition rounded, and add the chunks in fp32 where the kernel
adds elements (inside the 32-block sums, or into the bf16 route's running sum)."""
import numpy as np

# ---- index maps: name -> (fn(i, L, a, b), a, b, min_len, axes, operands, routes) ----
AX_M, AX_N, AX_K, AX_B = "M", "N", "K", "B"
AX_1D = (AX_M, AX_N, AX_K, AX_B)
AX_MN = (AX_M, AX_N)


def _keep(j, i, L):
    return np.where((j >= 0) & (j < L), j, i)


def _shift(i, L, d, unit):
    return _keep(i + d * unit, i, L)


def _first(i, L, a, b):
    return np.zeros_like(i)


def _group_first(i, L, j, b):
    return i & ~((1 << j) - 1)


def _reverse(i, L, a, b):
    return L - 1 - i


def _full(i, L, g):
    base = i & ~(g - 1)
    return base, base + g <= L


def _group_reverse(i, L, j, b):
    g = 1 << j
    base, ok = _full(i, L, g)
    return np.where(ok, base + (g - 1 - (i - base)), i)


def _group_swap(i, L, j, b):
    g = 1 << j
    base, ok = _full(i, L, g)
    return np.where(ok, i ^ (g >> 1), i)


def _group_rotate(i, L, j, d):
    g = 1 << j
    base, ok = _full(i, L, g)
    return np.where(ok, base + ((i - base + d + g) % g), i)


def _group_transpose(i, L, j, a):
    g = 1 << j
    base, ok = _full(i, L, g)
    cols = 1 << (j - a)
    r = i - base
    return np.where(ok, base + (r % cols) * (1 << a) + r // cols, i)


def _stride_mul(i, L, j, b):
    return (i << j) % L


def _stride_div(i, L, j, b):
    return i >> j


def _half(i, L, a, b):
    return (i + L // 2) % L


def _nbr(i, L, t, b):
    return _keep(i ^ t, i, L)


def _clamp(i, L, t, b):
    c = L // t * t - 1
    return np.where((c >= 0) & (i > c), c, i) if c >= 0 else i


INDEX_ROWS = [
    ("next", _shift, 1, 1, 2, AX_1D), ("prev", _shift, -1, 1, 2, AX_1D),
    ("next32", _shift, 1, 32, 64, (AX_K,)), ("prev32", _shift, -1, 32, 64, (AX_K,)),
    ("next16", _shift, 1, 16, 32, AX_MN), ("prev16", _shift, -1, 16, 32, AX_MN),
    ("bcast0", _first, 0, 0, 2, AX_1D), ("reverse", _reverse, 0, 0, 2, AX_1D)]
INDEX_ROWS += [("swap%d" % (1 << j), _group_swap, j, 0, 1 << j, AX_1D) for j in range(1, 7)]
INDEX_ROWS += [("first%d" % (1 << j), _group_first, j, 0, 1 << j, AX_1D) for j in range(1, 7)]
INDEX_ROWS += [("rev%d" % (1 << j), _group_reverse, j, 0, 1 << j, AX_1D) for j in range(2, 7)]
for j in range(2, 7):
    INDEX_ROWS += [("rot%d+1" % (1 << j), _group_rotate, j, 1, 1 << j, AX_1D),
                   ("rot%d-1" % (1 << j), _group_rotate, j, -1, 1 << j, AX_1D)]
for j in range(2, 7):
    for a in range(1, j):
        INDEX_ROWS.append(("tr%dx%d" % (1 << a, 1 << (j - a)), _group_transpose, j, a, 1 << j, AX_1D))
INDEX_ROWS += [("stride*%d" % (1 << j), _stride_mul, j, 0, 1 << (j + 1), AX_1D) for j in (1, 2, 3)]
INDEX_ROWS += [("stride/%d" % (1 << j), _stride_div, j, 0, 1 << (j + 1), AX_1D) for j in (1, 2, 3)]
INDEX_ROWS += [("half", _half, 0, 0, 2, AX_1D), ("nbr16", _nbr, 16, 0, 32, AX_MN),
               ("nbr64", _nbr, 64, 0, 128, AX_MN), ("nbr32", _nbr, 32, 0, 64, (AX_K,)),
               ("nbr128", _nbr, 128, 0, 256, (AX_K,)), ("clamp16", _clamp, 16, 0, 17, AX_MN),
               ("clamp64", _clamp, 64, 0, 65, AX_MN)]


def _mod(i, L, j, b):
    return i & ((1 << j) - 1)


# The second round's rows (listed by primitives() only when asked for, so the first
# corpus's draw stays what it was): a tile-relative index whose tile base was forgotten.
INDEX_ROWS_R2 = [("mod%d" % (1 << j), _mod, j, 0, (1 << j) + 1, AX_1D) for j in range(2, 7)]
INDEX_BY_NAME = {r[0]: r for r in INDEX_ROWS + INDEX_ROWS_R2}
# 2-D maps: (slot, name, routes, second round); one name may sit on two slots
MAPS_2D_ROWS = [("ws", "kn-as-nk", "MX", 0), ("ws", "nk-as-kn", "MX", 0), ("w", "wperm-undone", "MX", 0),
                ("w", "wperm-applied", "MX", 0), ("out", "tile-transpose16", "ALL", 0),
                ("out", "tile-transpose64", "ALL", 0), ("xs", "by-column", "W4A8", 0),
                ("w", "nk-as-kn", "BF16", 1), ("x", "mk-as-km", "BF16", 1)]
MAPS_2D = {r[1] for r in MAPS_2D_ROWS}

# slots: name -> (operand, axis, routes)
SLOTS = {"x-rows": ("XC", AX_M, "ALL"), "x-k": ("XC", AX_K, "ALL"), "xs-rows": ("XS", AX_M, "MX"),
         "xs-blocks": ("XS", AX_B, "W4A4"), "xs": ("XS", "2D", "W4A8"),
         "w-rows": ("WC", AX_N, "ALL"), "w-k": ("WC", AX_K, "ALL"), "w": ("WC", "2D", "ALL"),
         "ws-rows": ("WS", AX_N, "MX"), "ws-blocks": ("WS", AX_B, "MX"), "ws": ("WS", "2D", "MX"),
         "out-rows": ("OUT", AX_M, "ALL"), "out-cols": ("OUT", AX_N, "ALL"),
         "out": ("OUT", "2D", "ALL"), "x": ("XC", "2D", "BF16")}
SLOT_ORDER = list(SLOTS)


def route_ok(routes, route):
    return routes == "ALL" or (routes == "MX" and route in ("W4A8", "W4A4")) or routes == route


# ---- value maps: (name, kind, param, elems, fine) in table order ----
VALUE_ROWS = [
    ("e5m2", "dec_e5m2", 0, "fp8", 0), ("e4m3fnuz", "dec_fnuz", 0, "fp8", 0),
    ("e4m3fn", "dec_fn", 0, "fp8", 0), ("int8", "dec_int8", 0, "fp8", 0),
    ("int4", "dec_int4", 0, "e2m1", 0), ("fp16", "dec_fp16", 0, "bf16", 0),
    ("flush", "flush", 0, "e2m1", 0), ("flush", "flush", 0, "fp8 bf16 out", 1),
    ("abs", "abs", 0, "fp8 e2m1 bf16 out", 0), ("neg", "neg", 0, "fp8 e2m1 bf16 out", 0),
    ("round-e5m2", "round", "e5m2", "fp8 bf16", 0), ("round-e4m3", "round", "e4m3", "bf16", 0),
    ("round-fp16", "round", "fp16", "bf16 fp32", 1), ("round-bf16", "round", "bf16", "fp32", 1),
    ("inverted", "invert", 0, "fp32", 0), ("missing", "one", 0, "fp32 e8m0", 0),
    ("twice", "twice", 0, "fp32 e8m0", 0), ("bias128", "bias", 1, "e8m0", 0),
    ("bias126", "bias", -1, "e8m0", 0), ("zero-byte", "e8m0zero", 0, "e8m0", 1),
    ("trunc", "trunc", 0, "out", 1), ("double-round", "double", 0, "out", 1),
    ("fp16-bits", "fp16bits", 0, "out", 0)]
# second round: param = which K elements ("all", odd K "hi", even K "lo")
VALUE_ROWS_R2 = [
    ("neg-zero", "negzero", "all", "e2m1 fp8 bf16", 0), ("hi-neg-zero", "negzero", "hi", "e2m1", 0),
    ("hi-abs", "abs", "hi", "e2m1", 0), ("hi-neg", "neg", "hi", "e2m1", 0),
    ("lo-neg-zero", "negzero", "lo", "e2m1", 0), ("lo-abs", "abs", "lo", "e2m1", 0),
    ("lo-neg", "neg", "lo", "e2m1", 0), ("exp-wrap8", "expwrap", 0, "e8m0", 0)]
VALUE_ROWS += VALUE_ROWS_R2
ELEM = {"W4A8": {"x": "fp8", "xs": "fp32", "w": "e2m1", "ws": "e8m0", "out": "out"},
        "W4A4": {"x": "e2m1", "xs": "e8m0", "w": "e2m1", "ws": "e8m0", "out": "out"},
        "BF16": {"x": "bf16", "w": "bf16", "out": "out"}}
VALUE_OPERANDS = ("x", "xs", "w", "ws", "out")

# ---- structure rows: name -> dict ----
STRUCT_ROWS = {}
for f in ("bf16", "fp16"):
    for e in (1, 16, 32, 64, 128, 256):
        STRUCT_ROWS["%s-%s" % (f, "elem" if e == 1 else "k%d" % e)] = dict(kind="sum", fmt=f, every=e, xs=0)
    for e in (1, 32, 128):
        STRUCT_ROWS["%s-%s-xs" % (f, "elem" if e == 1 else "k%d" % e)] = dict(kind="sum", fmt=f, every=e, xs=1)
STRUCT_ROWS["prod-bf16"] = dict(kind="prod", fmt="bf16", xs=0)
STRUCT_ROWS["prod-fp16"] = dict(kind="prod", fmt="fp16", xs=0)
STRUCT_ROWS["prod-bf16-xs"] = dict(kind="prod", fmt="bf16", xs=1)
for f in ("bf16", "fp16"):
    for p in (2, 4, 8):
        STRUCT_ROWS["%s-split%d" % (f, p)] = dict(kind="split", fmt=f, parts=p)
for unit, u in ((1, "elem"), (32, "block"), (128, "tile")):
    for last in (1, 0):
        for w in (0, 2):
            STRUCT_ROWS["k-%s-%s-%s" % ("last" if last else "first", u, "dropped" if w == 0 else "twice")] = \
                dict(kind="kw", unit=unit, parts=0, last=last, weight=w)
for p in (2, 4, 8):
    for last in (1, 0):
        for w in (0, 2):
            STRUCT_ROWS["split%d-%s-%s" % (p, "last" if last else "first", "dropped" if w == 0 else "twice")] = \
                dict(kind="kw", unit=0, parts=p, last=last, weight=w)
# second round: the accumulator carried along N or M (reset every `tile` outputs, 0: never);
# K in aligned chunks of `size` summed in the narrow format
for axis, tiles in (("n", (0, 16, 64)), ("m", (0, 16))):
    for tile in tiles:
        STRUCT_ROWS["carry-%s%s" % (axis, tile or "")] = dict(kind="carry", axis=axis, tile=tile)
for f, sizes in (("fp16", (4, 8, 16)), ("bf16", (8, 16))):
    for c in sizes:
        STRUCT_ROWS["%s-chunk%d" % (f, c)] = dict(kind="chunk", fmt=f, size=c)


def is_second_round(prim):
    """A primitive of the second round's rows."""
    slot, name = prim.split(":", 1)
    if slot == "acc":
        return STRUCT_ROWS[name]["kind"] in ("carry", "chunk")
    if name in INDEX_BY_NAME:
        return any(r[0] == name for r in INDEX_ROWS_R2)
    if name in MAPS_2D:
        return any(r[0] == slot and r[1] == name and r[3] for r in MAPS_2D_ROWS)
    return any(r[0] == name for r in VALUE_ROWS_R2)


def struct_routes(name):
    r = STRUCT_ROWS[name]
    if r.get("xs"):
        return ("W4A8",)
    if r["kind"] == "prod":
        return ("BF16",)
    return ("W4A8", "W4A4", "BF16")


def struct_applies(name, K, M=0, N=0):
    r, nb = STRUCT_ROWS[name], K // 32
    if r["kind"] == "carry":
        L = N if r["axis"] == "n" else M
        return L > r["tile"] and L >= 2
    if r["kind"] == "chunk":
        return r["size"] < K
    if r["kind"] == "sum":
        return r["every"] < K
    if r["kind"] == "prod":
        return True
    if r["kind"] == "split":
        return nb % r["parts"] == 0 and r["parts"] < nb
    return K >= 2 * r["unit"] if r["unit"] else nb % r["parts"] == 0 and r["parts"] < nb


def axis_len(axis, M, N, K):
    return {AX_M: M, AX_N: N, AX_K: K, AX_B: K // 32}[axis]


def index_map(name, L):
    fn, a, b = INDEX_BY_NAME[name][1:4]
    return fn(np.arange(L, dtype=np.int64), L, a, b).astype(np.int64)


def primitives(route, M, N, K, second_round=False):
    """The primitive names grammar.c's enumeration gives this route and shape (index maps
    that are the identity or repeat an earlier row on their slot left out); the second
    round's rows only with second_round (without, the first corpus's list)."""
    return [p for p in _primitives(route, M, N, K) if second_round or not is_second_round(p)]


def _primitives(route, M, N, K):
    out = []
    for slot in SLOT_ORDER:
        op, axis, routes = SLOTS[slot]
        if not route_ok(routes, route):
            continue
        if axis == "2D":
            for s2, name, r2, _ in MAPS_2D_ROWS:
                if s2 != slot or not route_ok(r2, route):
                    continue
                if name.startswith("wperm") and (N % 16 or K % 16):
                    continue
                if slot == "out" and (M < int(name[14:]) or N < int(name[14:])):
                    continue
                out.append("%s:%s" % (slot, name))
            continue
        L = axis_len(axis, M, N, K)
        seen = []
        for name, fn, a, b, min_len, axes in INDEX_ROWS + INDEX_ROWS_R2:
            if axis not in axes or L < 2 or L < min_len:
                continue
            mp = index_map(name, L)
            if np.array_equal(mp, np.arange(L)) or any(np.array_equal(mp, s) for s in seen):
                continue
            seen.append(mp)
            out.append("%s:%s" % (slot, name))
    for op in VALUE_OPERANDS:
        e = ELEM[route].get(op)
        for name, kind, param, elems, fine in VALUE_ROWS:
            if e and e in elems.split() and not (kind == "dec_fn"):
                out.append("%s:%s" % (op, name))
    for name in STRUCT_ROWS:
        if route in struct_routes(name) and struct_applies(name, K, M, N):
            out.append("acc:%s" % name)
    return out


def is_fine(prim):
    slot, name = prim.split(":", 1)
    if slot == "acc":
        return STRUCT_ROWS[name]["kind"] != "kw"
    if slot in VALUE_OPERANDS and name not in INDEX_BY_NAME and name not in MAPS_2D:
        return False
    return False


def value_row(op, name, route):
    e = ELEM[route].get(op)
    for i, (n, kind, param, elems, fine) in enumerate(VALUE_ROWS):
        if n == name and e in elems.split():
            return i, kind, param, fine
    raise KeyError("%s:%s" % (op, name))


def is_fine(prim, route):
    slot, name = prim.split(":", 1)
    if slot == "acc":
        return STRUCT_ROWS[name]["kind"] != "kw"
    if name in INDEX_BY_NAME or name in MAPS_2D:
        return False
    return bool(value_row(slot, name, route)[3])


# ---- formats ----
F32 = np.float32


def _e4m3_table(bias, fnuz):
    t = np.zeros(256, dtype=np.float64)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 15, c & 7
        v = m * 2.0 ** (1 - bias - 3) if e == 0 else (8 + m) * 2.0 ** (e - bias - 3)
        t[c] = -v if s else v
        if fnuz and c == 0x80:
            t[c] = np.nan
        if not fnuz and (c & 0x7F) == 0x7F:
            t[c] = np.nan
    return t.astype(F32)


E4M3FN = _e4m3_table(7, False)
E4M3FNUZ = _e4m3_table(8, True)


def _e5m2_table():
    t = np.zeros(256, dtype=np.float64)
    for c in range(256):
        s, e, m = c >> 7, (c >> 2) & 31, c & 3
        v = (np.inf if m == 0 else np.nan) if e == 31 else (m * 2.0 ** -16 if e == 0 else (4 + m) * 2.0 ** (e - 17))
        t[c] = -v if s else v
    return t.astype(F32)


E5M2 = _e5m2_table()
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=F32)
INT4 = np.array([0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1], dtype=F32)


def e8m0(b):
    b = np.asarray(b).astype(np.int64)
    v = np.ldexp(np.ones(b.shape, dtype=np.float64), b - 127)
    return np.where(b == 255, np.nan, v).astype(F32)


def bf16_value(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(F32)


def bf16_rne(v):
    """fp32 -> bf16 bits, nearest even; NaN -> 0x7FC0 with its sign."""
    u = np.asarray(v, dtype=F32).view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((u >> 16) & 0x8000 | 0x7FC0).astype(np.uint16), r)


def bf16_trunc(v):
    u = np.asarray(v, dtype=F32).view(np.uint32)
    r = (u >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((u >> 16) & 0x8000 | 0x7FC0).astype(np.uint16), r)


FORMATS = {"bf16": (7, -126, None), "fp16": (10, -14, 65520.0), "e4m3": (3, -6, "sat448"),
           "e5m2": (2, -14, 61440.0)}


def round_to(v, fmt):
    """v rounded to nearest even in fmt (bf16 overflow as bf16_rne, fp16/e5m2 to Inf beyond
    their halfway point, e4m3 saturating at 448); NaN stays NaN."""
    v = np.asarray(v, dtype=F32)
    if fmt == "bf16":
        return bf16_value(bf16_rne(v))
    if fmt == "fp16":
        return v.astype(np.float16).astype(F32)
    mant, emin, top = FORMATS[fmt]
    d = v.astype(np.float64)
    a = np.abs(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, emin)
    q = np.ldexp(1.0, (e - mant).astype(np.int64))
    r = np.rint(d / q) * q
    if top == "sat448":
        r = np.clip(r, -448.0, 448.0)
    else:
        r = np.where(np.abs(r) >= top, np.sign(r) * np.inf, r)
    return np.where(np.isnan(d), np.nan, r).astype(F32)


MIN_NORMAL = {"fp8": 2.0 ** -6, "e2m1": 1.0, "bf16": 2.0 ** -126, "out": 2.0 ** -126}


def apply_values(vals, op, route, names):
    """Value maps of one operand, table order; decode maps return None (handled by decode)."""
    rows = sorted(value_row(op, n, route) for n in names)
    e = ELEM[route][op]
    for idx, kind, param, fine in rows:
        if kind.startswith("dec_"):
            continue
        if param in ("all", "hi", "lo"):
            vals = _on_elements(vals, kind, param)
        elif kind == "flush":
            vals = np.where((np.abs(vals) < MIN_NORMAL[e]) & (vals != 0), F32(0) * np.sign(vals), vals).astype(F32)
        elif kind == "abs":
            vals = np.abs(vals)
        elif kind == "neg":
            vals = -vals
        elif kind == "round":
            vals = round_to(vals, param)
        elif kind == "invert":
            vals = (F32(1) / vals).astype(F32)
        elif kind == "one":
            vals = np.ones_like(vals)
        elif kind == "twice":
            vals = (vals * vals).astype(F32)
        elif kind == "bias":
            vals = (vals * F32(2.0 ** -param)).astype(F32)
    return vals


def _on_elements(vals, kind, which):
    """A second-round value map on all elements, or only those at odd K (hi) or even K (lo):
    negative values read as +0, the sign dropped or the sign flipped."""
    if kind == "negzero":
        new = np.where(vals < 0, F32(0), vals)
    else:
        new = np.abs(vals) if kind == "abs" else -vals
    if which != "all":
        odd = (np.arange(vals.shape[-1]) & 1) == 1
        new = np.where(odd if which == "hi" else ~odd, new, vals)
    return new.astype(F32)


def decode_x(codes, route, names):
    kinds = [value_row("x", n, route)[1] for n in names]
    if route == "W4A8":
        t = E5M2 if "dec_e5m2" in kinds else E4M3FNUZ if "dec_fnuz" in kinds else E4M3FN
        if "dec_int8" in kinds:
            return codes.astype(np.int8).astype(F32)
        return t[codes]
    if route == "W4A4":
        return (INT4 if "dec_int4" in kinds else E2M1)[codes & 15]
    if "dec_fp16" in kinds:
        return codes.astype(np.uint16).view(np.float16).astype(F32)
    return bf16_value(codes)


def decode_w(codes, route, names):
    kinds = [value_row("w", n, route)[1] for n in names]
    if route == "BF16":
        if "dec_fp16" in kinds:
            return codes.astype(np.uint16).view(np.float16).astype(F32)
        return bf16_value(codes)
    return (INT4 if "dec_int4" in kinds else E2M1)[codes & 15]


def decode_e8m0(b, names, op, route):
    kinds = [value_row(op, n, route)[1] for n in names]
    v = e8m0(b)
    if "e8m0zero" in kinds:
        v = np.where(np.asarray(b) == 0, F32(0), v)
    if "expwrap" in kinds:
        v = np.where(np.asarray(b) < 127, F32(np.inf), v)   # 2^(E + 129) overflows fp32
    return v


# ---- the computation ----

def _split(spec):
    """spec -> {slot or operand: [row names in spec order]}."""
    out = {}
    for p in spec:
        slot, name = p.split(":", 1)
        out.setdefault(slot, []).append(name)
    return out


def _idx(parts, slot, L):
    i = np.arange(L, dtype=np.int64)
    for name in parts.get(slot, []):
        if name in INDEX_BY_NAME:
            i = index_map(name, L)[i]
    return i


def _map2(parts, slot):
    names = [n for n in parts.get(slot, []) if n in MAPS_2D]
    return names[0] if names else None


def _wperm(n, k, K, inverse):
    half, j, nib = K // 2, k // 2, k & 1
    if not inverse:
        p = ((((n // 16) * (K // 16) + j // 8) * 2 + (j // 4) % 2) * 16 + n % 16) * 4 + j % 4
        n2, j2 = p // half, p % half
    else:
        q = n * half + j
        j3 = q % 4
        q = q // 4
        nn2 = q % 16
        q = q // 16
        jj2 = q % 2
        q = q // 2
        j1, n1 = q % (K // 16), q // (K // 16)
        n2, j2 = n1 * 16 + nn2, j1 * 8 + jj2 * 4 + j3
    return n2, 2 * j2 + nib


def _tile_t(m, n, M, N, t):
    m0, n0 = m // t * t, n // t * t
    ok = (m0 + t <= M) & (n0 + t <= N)
    return np.where(ok, m0 + (n - n0), m), np.where(ok, n0 + (m - m0), n)


def _kweights(struct, K):
    c = np.ones(K, dtype=F32)
    for name in struct:
        r = STRUCT_ROWS[name]
        if r["kind"] != "kw":
            continue
        length = r["unit"] if r["unit"] else K // r["parts"]
        sl = slice(K - length, K) if r["last"] else slice(0, length)
        c[sl] *= F32(r["weight"])
    return c


def _rounding_row(struct):
    rows = [STRUCT_ROWS[n] for n in struct if STRUCT_ROWS[n]["kind"] in ("sum", "prod", "split")]
    return rows[0] if rows else None


def _acc_round(x, fmt):
    return round_to(x, fmt)


def compute(route, a, w, ws, xs, xb, struct, M, N, K):
    """v[M, N] (fp32) of the canonical order with the structure rows: per 32-block sums for the
    MXFP4 routes (block sum times the scale, W4A4 times (xb * ws)), one sequential sum for bf16."""
    c = _kweights(struct, K)
    row = _rounding_row(struct)
    nb = K // 32
    xs2 = None if xs is None else (xs if xs.ndim == 2 else xs[:, None])

    def prod(k):
        return (a[:, k][:, None] * w[:, k][None, :]) * c[k]

    def bscale(b):
        if route == "W4A8":
            return ws[:, b][None, :]
        return (xb[:, b][:, None] * ws[:, b][None, :]).astype(F32)

    def block_sum(b, k0=0, k1=32):
        s = np.zeros((M, N), dtype=F32)
        for k in range(32 * b + k0, 32 * b + k1):
            s = s + prod(k)
        return s

    inside = row is not None and row.get("xs") == 1
    xin = xs2 if inside else F32(1)
    r2 = [STRUCT_ROWS[n] for n in struct if STRUCT_ROWS[n]["kind"] in ("carry", "chunk")]
    if r2:
        chunk = ([r for r in r2 if r["kind"] == "chunk"] or [None])[0]
        carry = ([r for r in r2 if r["kind"] == "carry"] or [None])[0]
        acc = _chunked_acc(route, prod, bscale, chunk, M, N, K)
        acc = _carry(acc, carry) if carry else acc
        return acc * xs2 if route == "W4A8" else acc
    if route == "BF16":
        acc = np.zeros((M, N), dtype=F32)
        if row is None:
            for k in range(K):
                acc = acc + prod(k)
        elif row["kind"] == "prod":
            for k in range(K):
                acc = acc + _acc_round(prod(k), row["fmt"])
        elif row["kind"] == "split":
            per = K // row["parts"]
            for s in range(row["parts"]):
                p = np.zeros((M, N), dtype=F32)
                for k in range(s * per, (s + 1) * per):
                    p = p + prod(k)
                acc = acc + _acc_round(p, row["fmt"])
        else:
            e = row["every"]
            for k0 in range(0, K, e):
                t = np.zeros((M, N), dtype=F32)
                for k in range(k0, min(k0 + e, K)):
                    t = t + prod(k)
                acc = _acc_round(acc + t, row["fmt"]) if e > 1 else _acc_round(acc + prod(k0), row["fmt"])
        return acc
    parts = [block_sum(b) * bscale(b) for b in range(nb)] if row is None or row["kind"] != "sum" or \
        row["every"] >= 32 or True else None
    acc = np.zeros((M, N), dtype=F32)
    if row is None:
        for b in range(nb):
            acc = acc + parts[b]
        return acc * xs2 if route == "W4A8" else acc
    if row["kind"] == "split":
        per = nb // row["parts"]
        for s in range(row["parts"]):
            p = np.zeros((M, N), dtype=F32)
            for b in range(s * per, (s + 1) * per):
                p = p + parts[b]
            stored = p * xs2 if route == "W4A8" else p
            acc = acc + _acc_round(stored, row["fmt"])
        return acc
    if row["kind"] == "prod":
        for b in range(nb):
            for k in range(32 * b, 32 * b + 32):
                acc = acc + _acc_round((prod(k) * bscale(b)) * xin, row["fmt"])
        return acc
    e = row["every"]
    if e == 1:
        for b in range(nb):
            for k in range(32 * b, 32 * b + 32):
                acc = _acc_round(acc + (prod(k) * bscale(b)) * xin, row["fmt"])
    elif e == 16:
        for b in range(nb):
            for h in (0, 16):
                acc = _acc_round(acc + (block_sum(b, h, h + 16) * bscale(b)) * xin, row["fmt"])
    else:
        per = e // 32
        for b0 in range(0, nb, per):
            t = np.zeros((M, N), dtype=F32)
            for j in range(b0, min(b0 + per, nb)):
                t = t + parts[j] * xin
            acc = _acc_round(acc + t, row["fmt"])
    if route == "W4A8" and not inside:
        acc = acc * xs2
    return acc


def _chunked_acc(route, prod, bscale, chunk, M, N, K):
    """The fp32 accumulator before the epilogue, each aligned chunk of K summed in the
    chunk's narrow format (every addition rounded), the chunks added in fp32 where the
    kernel adds elements: inside the 32-block sums (MXFP4) or into the running sum (bf16)."""
    size = chunk["size"] if chunk else 1
    acc = np.zeros((M, N), dtype=F32)
    block = np.zeros((M, N), dtype=F32)
    for k0 in range(0, K, size):
        if chunk:
            h = np.zeros((M, N), dtype=F32)
            for k in range(k0, k0 + size):
                h = round_to(h + prod(k), chunk["fmt"])
        else:
            h = prod(k0)
        if route == "BF16":
            acc = acc + h
            continue
        block = block + h
        if (k0 + size) % 32 == 0:
            acc = acc + block * bscale(k0 // 32)
            block = np.zeros((M, N), dtype=F32)
    return acc


def _carry(acc, carry):
    """acc'(m, n) = acc'(m, n - 1) + acc(m, n) along the carry's axis, from 0 at each tile."""
    a = acc if carry["axis"] == "n" else acc.T
    out = np.empty_like(a)
    run = np.zeros(a.shape[0], dtype=F32)
    for j in range(a.shape[1]):
        if j == 0 or (carry["tile"] and j % carry["tile"] == 0):
            run = np.zeros(a.shape[0], dtype=F32)
        run = (run + a[:, j]).astype(F32)
        out[:, j] = run
    return out if carry["axis"] == "n" else out.T


def output_bits(v, names):
    kinds = [value_row("out", n, "W4A8")[1] for n in names]
    v = apply_values(v.astype(F32), "out", "W4A8", [n for n in names if value_row("out", n, "W4A8")[1] in ("abs", "neg")])
    if "trunc" in kinds:
        bits = bf16_trunc(v)
    elif "double" in kinds:
        bits = bf16_rne(v.astype(np.float16).astype(F32))
    elif "fp16bits" in kinds:
        bits = v.astype(np.float16).view(np.uint16)
    else:
        bits = bf16_rne(v)
    if "flush" in kinds:
        val = bf16_value(bits)
        bits = np.where((np.abs(val) < 2.0 ** -126) & (val != 0), bits & 0x8000, bits).astype(np.uint16)
    return bits


def run_spec(route, spec, M, N, K, x_codes=None, x_scale=None, x_block_scale=None,
             w_codes=None, ws_kn=None):
    """The output bits [M, N] of the kernel `spec` describes.  x_codes [M, K] (fp8 codes,
    e2m1 codes one per element, or bf16 bits), x_scale [M] (W4A8), x_block_scale [M, K/32]
    bytes (W4A4), w_codes [N, K] (e2m1 codes or bf16 bits), ws_kn [K/32, N] bytes."""
    P = _split(spec)
    nb = K // 32
    vals = lambda op: [n for n in P.get(op, []) if n not in INDEX_BY_NAME and n not in MAPS_2D]
    # activations
    rm, km = _idx(P, "x-rows", M), _idx(P, "x-k", K)
    xc = x_codes[rm][:, km]
    if _map2(P, "x") == "mk-as-km":
        flat = km[None, :] * M + rm[:, None]
        xc = x_codes[flat // K, flat % K]
    a = decode_x(xc, route, [n for n in vals("x") if value_row("x", n, route)[1].startswith("dec_")])
    a = apply_values(a, "x", route, vals("x")).astype(F32)
    # weight codes
    nmap, kmap = _idx(P, "w-rows", N), _idx(P, "w-k", K)
    ni, ki = np.broadcast_to(nmap[:, None], (N, K)), np.broadcast_to(kmap[None, :], (N, K))
    m2 = _map2(P, "w")
    if m2 == "nk-as-kn" and route == "BF16":
        flat = ki * N + ni
        ni, ki = flat // K, flat % K
    elif m2:
        ni, ki = _wperm(ni, ki, K, 1 if m2 == "wperm-applied" else 0)
    w = decode_w(w_codes[ni, ki], route, [n for n in vals("w") if value_row("w", n, route)[1].startswith("dec_")])
    w = apply_values(w, "w", route, vals("w")).astype(F32)
    ws = xs = xb = None
    if route != "BF16":
        S = ws_kn.T                                        # logical [N, nb]
        sn, sb = _idx(P, "ws-rows", N), _idx(P, "ws-blocks", nb)
        si, bi = np.broadcast_to(sn[:, None], (N, nb)), np.broadcast_to(sb[None, :], (N, nb))
        m2 = _map2(P, "ws")
        if m2 == "kn-as-nk":
            i = si * nb + bi
            si, bi = i % N, i // N
        elif m2 == "nk-as-kn":
            i = bi * N + si
            si, bi = i // nb, i % nb
        ws = apply_values(decode_e8m0(S[si, bi], vals("ws"), "ws", route), "ws", route, vals("ws")).astype(F32)
    if route == "W4A8":
        xm = _idx(P, "xs-rows", M)
        if _map2(P, "xs") == "by-column":
            xs = x_scale[np.broadcast_to(np.arange(N)[None, :] % M, (M, N))]
        else:
            xs = x_scale[xm]
        xs = apply_values(xs.astype(F32), "xs", route, vals("xs")).astype(F32)
    elif route == "W4A4":
        xm, xbm = _idx(P, "xs-rows", M), _idx(P, "xs-blocks", nb)
        xb = decode_e8m0(x_block_scale[xm][:, xbm], vals("xs"), "xs", route)
        xb = apply_values(xb, "xs", route, vals("xs")).astype(F32)
    v = compute(route, a, w, ws, xs, xb, P.get("acc", []), M, N, K)
    bits = output_bits(v, vals("out"))
    om, on = _idx(P, "out-rows", M), _idx(P, "out-cols", N)
    mi, ni = np.broadcast_to(om[:, None], (M, N)), np.broadcast_to(on[None, :], (M, N))
    m2 = _map2(P, "out")
    if m2:
        mi, ni = _tile_t(mi, ni, M, N, int(m2[14:]))
    return np.ascontiguousarray(bits[mi, ni]).astype(np.uint16)


def unpack_e2m1(packed, rows, K):
    p = np.asarray(packed).astype(np.uint8).reshape(rows, K // 2)
    return np.stack([p & 15, p >> 4], axis=-1).reshape(rows, K)
