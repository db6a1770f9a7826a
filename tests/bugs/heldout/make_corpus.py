"""Writes the held-out bug corpus: corpus.tsv, gen_kernels.py (the generated Python kernels)
and generated_plugins.cmake (the generated C plugins).  Run once; its output is committed and
frozen, so the corpus stays what it was when it was drawn:

    /usr/bin/python3 tests/bugs/heldout/make_corpus.py

Generated bugs are random compositions of one or two grammar primitives (grammar_ref.py's
PRIMITIVES for the route and the case's shape), drawn with a fixed seed; the hand-written
bugs and the correct variants are listed below with what a diagnosis must say to name them.
Each entry's half (tune or held-out) is one bit of a seeded hash of its id."""
import hashlib
import os
import random

import grammar_ref as g

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20240535
# name -> (synth arguments, M, N, K); every case carries both weights (mxfp4 and bf16)
CASES = {
    "main": ("--shape 256x1024 --m 37 --zero-rows 3 --seed 13", 37, 256, 1024),
    "n48": ("--shape 48x5120 --m 5 --seed 14", 5, 48, 5120),
    "nan": ("--shape 512x1024 --m 24 --nan-block 17x128@128 --seed 15", 24, 512, 1024),
    "large": ("--shape mlp_gate_up --m 4 --seed 16", 4, 17408, 5120),
}
# route, language, how many
GENERATED = [("W4A8", "c", 16), ("W4A8", "py", 4), ("W4A4", "py", 8), ("BF16", "py", 8)]

# id, language, route, case, what a diagnosis must match (a Python regex, case-insensitive)
HAND = [
    ("h_k_bound_n", "c", "W4A8", "main", r"(blocks? 8-31|k 256).*missing|stops .*256"),
    ("h_x_pitch", "c", "W4A8", "main", r"pitch"),
    ("h_acc_not_reset", "c", "W4A8", "n48", r"not reset|cumulative"),
    ("h_signed_nibble", "c", "W4A8", "large", r"(odd|high nibble).*(negative|sign)"),
    ("h_lost_update_cols", "c", "W4A8", "main", r"split.*(last|second).*(lost|dropped)"),
    ("h_swizzle", "c", "W4A8", "nan", r"swizzle|xor"),
    ("h_tile_base", "c", "W4A8", "n48", r"n % 16|mod 16|low 4 bits"),
    ("h_fp16_partial8", "c", "W4A8", "large", r"lost precision|fp16"),
    ("h_xscale_tile_first", "c", "W4A8", "main", r"xs-rows:first16"),
    ("h_k_step2", "c", "W4A8", "n48", r"odd|every other"),
    ("h_py_w4a4_uint8_wrap", "py", "W4A4", "main", r"xs.*(wrap|unsigned|signed)"),
    ("h_py_bf16_half", "py", "BF16", "n48", r"x:round-fp16|rounded through fp16"),
    ("h_py_bf16_wt", "py", "BF16", "n48", r"weight.*(transposed|layout|reshape)"),
    ("h_py_w4a4_scale_swap", "py", "W4A4", "nan", r"kn-as-nk|scale layout"),
]
# correct variants: they must pass on every case
CORRECT = [("c_fp64", "c", "W4A8"), ("c_kahan", "c", "W4A8"), ("c_pairwise", "c", "W4A8"),
           ("c_splitk_rev", "c", "W4A8"), ("c_py_w4a4", "py", "W4A4"), ("c_py_bf16", "py", "BF16")]


def half_of(bug_id):
    """0 = tune, 1 = held-out: one bit of a seeded hash, fixed before any tuning."""
    return hashlib.sha256((bug_id + ":kreplay-heldout-split").encode()).digest()[0] & 1


def compatible(a, b, route):
    sa, na = a.split(":", 1)
    sb, nb_ = b.split(":", 1)
    if a == b:
        return False
    ia, ib = na in g.INDEX_BY_NAME or na in g.MAPS_2D, nb_ in g.INDEX_BY_NAME or nb_ in g.MAPS_2D
    if sa == "acc" and sb == "acc":
        ka, kb = g.STRUCT_ROWS[na]["kind"], g.STRUCT_ROWS[nb_]["kind"]
        return ka != kb or ka == "kw"
    if ia or ib or sa != sb or sa == "acc" or sb == "acc":
        return True
    ka, kb = g.value_row(sa, na, route)[1], g.value_row(sb, nb_, route)[1]
    return not (ka.startswith("dec_") and kb.startswith("dec_")) and ka != kb


def draw(rng, route, case):
    _, M, N, K = CASES[case]
    prims = g.primitives(route, M, N, K)
    first = rng.choice(prims)
    if rng.random() < 1 / 3:
        return [first]
    second = rng.choice([p for p in prims if compatible(first, p, route)])
    return [first, second]


def main():
    rng = random.Random(SEED)
    rows, py_funcs, c_plugins = [], [], []
    plan = [(route, lang) for route, lang, count in GENERATED for _ in range(count)]
    cases = [list(CASES)[i % len(CASES)] for i in range(len(plan))]
    rng.shuffle(cases)
    for i, ((route, lang), case) in enumerate(zip(plan, cases)):
        bug_id = "g%02d" % (i + 1)
        spec = draw(rng, route, case)
        rows.append((bug_id, "generated", lang, route, case, ",".join(spec), half_of(bug_id), ""))
        if lang == "py":
            py_funcs.append((bug_id, route, spec))
        else:
            c_plugins.append((bug_id, ",".join(spec)))
    for bug_id, lang, route, case, expect in HAND:
        rows.append((bug_id, "hand", lang, route, case, "", half_of(bug_id), expect))
    for bug_id, lang, route in CORRECT:
        for case in CASES:
            rows.append((bug_id, "correct", lang, route, case, "", -1, ""))
    with open(os.path.join(HERE, "corpus.tsv"), "w") as f:
        f.write("# written by make_corpus.py (seed %d); frozen: do not edit by hand\n" % SEED)
        f.write("# id\torigin\tlanguage\troute\tcase\tspec\thalf (0 tune, 1 held-out, -1 correct)\texpect\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
        for name, (args, M, N, K) in CASES.items():
            f.write("#case\t%s\t%s --weight-format both\n" % (name, args))
    with open(os.path.join(HERE, "gen_kernels.py"), "w") as f:
        f.write('"""The generated Python kernels of the held-out corpus (written by make_corpus.py;\n'
                'frozen).  Each computes through grammar_ref.run_spec with its spec."""\n')
        f.write("from heldout_operands import bf16_kernel, w4a4_kernel, w4a8_kernel\n")
        for bug_id, route, spec in py_funcs:
            maker = {"W4A8": "w4a8_kernel", "W4A4": "w4a4_kernel", "BF16": "bf16_kernel"}[route]
            f.write("\n%s = %s(%r)\n" % (bug_id, maker, spec))
    with open(os.path.join(HERE, "generated_plugins.cmake"), "w") as f:
        f.write("# written by make_corpus.py: the generated C bugs (id and spec); frozen\n")
        f.write("set(KR_HELDOUT_GENERATED\n")
        for bug_id, spec in c_plugins:
            f.write('    "%s=%s"\n' % (bug_id, spec))
        f.write(")\n")


if __name__ == "__main__":
    main()
