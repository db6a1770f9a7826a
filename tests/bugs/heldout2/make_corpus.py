"""Writes the second held-out bug corpus: corpus.tsv, gen_kernels.py (the generated Python
kernels) and generated_plugins.cmake (the generated C plugins).  Drawn once, before the
diagnosis was tuned on it; its output is committed and frozen:

    /usr/bin/python3 tests/bugs/heldout2/make_corpus.py --kreplay build/kreplay

Generated bugs are random compositions of one or two grammar primitives (grammar_ref.py's
primitives(..., second_round=True) for the route and the case's shape), drawn with a fixed
seed over the first corpus's cases and route/language mix; a share of them starts from a
primitive of the second round's rows.  A drawn spec is redrawn when it repeats a spec of
the first corpus or of this one, or when its output on its case (grammar_ref.run_spec on
the operands kreplay gives the route's kernels there, captured by capture_operands.py) is
bit for bit the correct kernel's.  The hand-written bugs and their correct variants come
from hand_bugs.tsv (when present; `--hand` names another), the first corpus's correct
variants are listed again on every case.  Every bug is held out (half 1)."""
import argparse
import importlib.util
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIRST = os.path.join(os.path.dirname(HERE), "heldout")
sys.path.insert(0, FIRST)
import grammar_ref as g  # noqa: E402


def _first_maker():
    """The first corpus's make_corpus.py (its cases, mix, compatibility rule and correct
    variants), loaded by path: its module name is this file's."""
    spec = importlib.util.spec_from_file_location("heldout_make_corpus", os.path.join(FIRST, "make_corpus.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


first = _first_maker()

SEED = 20261206
# how many bugs of each (route, language) group of first.GENERATED start from a second-round row
SECOND_ROUND_SHARE = {("W4A8", "c"): 6, ("W4A8", "py"): 2, ("W4A4", "py"): 3, ("BF16", "py"): 3}
CAPTURE = {"W4A8": ("w4a8", "", "exact"), "W4A4": ("w4a4", "@w4a4.aiter", "exact"),
           "BF16": ("bf16", "@bf16.sequential", "source")}
HAND_HEADER = ["id", "language", "route", "case", "expect", "description"]


def _operand(slot):
    """The operand a 1-D slot, 2-D slot or value operand belongs to ("x-k" -> "x")."""
    return slot.split("-", 1)[0]


def _is_value(slot, name):
    return slot in g.VALUE_OPERANDS and name not in g.INDEX_BY_NAME and name not in g.MAPS_2D


def compatible(a, b, route):
    """first.compatible, and for the second round's rows: a carry or chunk row composes with
    a K-weight row or with each other only; a second-round value map with no other value
    map on its operand (their order would be a guess); a map of odd or even K alone with no
    map that moves its operand's K."""
    if a == b:
        return False
    if not (g.is_second_round(a) or g.is_second_round(b)):
        return first.compatible(a, b, route)
    (sa, na), (sb, nb_) = a.split(":", 1), b.split(":", 1)
    if sa == "acc" and sb == "acc":
        ka, kb = g.STRUCT_ROWS[na]["kind"], g.STRUCT_ROWS[nb_]["kind"]
        return ka != kb and not {ka, kb} & {"sum", "prod", "split"}
    if sa == "acc" or sb == "acc":
        return True
    if _is_value(sa, na) and _is_value(sb, nb_):
        return sa != sb
    for (s1, n1), (s2, n2) in (((sa, na), (sb, nb_)), ((sb, nb_), (sa, na))):
        if _is_value(s1, n1) and n1[:3] in ("hi-", "lo-") and _operand(s2) == s1 and \
                (s2.endswith("-k") or s2 == s1):
            return False
    return True


def draw(rng, route, case, second_round):
    _, M, N, K = first.CASES[case]
    prims = g.primitives(route, M, N, K, second_round=True)
    pool = [p for p in prims if g.is_second_round(p)] if second_round else prims
    one = rng.choice(pool)
    if rng.random() < 1 / 3:
        return [one]
    return [one, rng.choice([p for p in prims if compatible(one, p, route)])]


def capture_operands(kreplay, workdir):
    """{(case, route): operand arrays}: each case synthesised and replayed once a route
    with the capture kernel."""
    ops = {}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, FIRST]), KREPLAY_PYTHON=sys.executable)
    for case, (args, M, N, K) in first.CASES.items():
        subprocess.run("'%s' synth %s --weight-format both --out '%s' --name %s" % (kreplay, args, workdir, case),
                       shell=True, check=True, stdout=subprocess.DEVNULL)
        for route, (fn, at, refs) in CAPTURE.items():
            path = os.path.join(workdir, "%s_%s.npz" % (case, fn))
            env["HELDOUT2_CAPTURE"] = path
            subprocess.run([kreplay, "replay", "--py", "%s/capture_operands.py:%s%s" % (HERE, fn, at),
                            "--kernels", "py.*", "--refs", refs, "--no-recorded", "--reruns", "1",
                            os.path.join(workdir, case + ".h5")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not os.path.exists(path):
                sys.exit("make_corpus.py: no operands captured for %s on case %s (%s)" % (route, case, path))
            ops[case, route] = dict(np.load(path))
    return ops


def run_on(ops, route, spec):
    M, N, K = int(ops["M"]), int(ops["N"]), int(ops["K"])
    if route == "BF16":
        kw = dict(x_codes=ops["x_bf16"].reshape(M, K), w_codes=ops["weight_bf16"].reshape(N, K))
    else:
        kw = dict(w_codes=g.unpack_e2m1(ops["weight"], N, K), ws_kn=ops["weight_scale"].reshape(K // 32, N))
        if route == "W4A8":
            kw.update(x_codes=ops["x_fp8"].reshape(M, K), x_scale=ops["x_scale"].astype(np.float32))
        else:
            kw.update(x_codes=g.unpack_e2m1(ops["x_mxfp4"], M, K),
                      x_block_scale=ops["x_mxfp4_scale"].reshape(M, K // 32))
    return g.run_spec(route, spec, M, N, K, **kw)


def corpus_specs(folder):
    """The specs of the corpus in folder, each as a set (a pair in either order is one)."""
    specs = set()
    with open(os.path.join(folder, "corpus.tsv")) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if not line.startswith("#") and len(cols) > 5 and cols[5]:
                specs.add(frozenset(cols[5].split(",")))
    return specs


def hand_rows(path, correct_prefix="c2_"):
    """corpus rows of hand_bugs.tsv: hand-written bugs (held out) and, for ids starting with
    correct_prefix, correct variants on every case."""
    if not os.path.exists(path):
        return []
    rows, seen = [], set()
    with open(path) as f:
        lines = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#")]
    if not lines or lines[0].split("\t")[:len(HAND_HEADER)] != HAND_HEADER:
        sys.exit("make_corpus.py: %s: expected the header line %r" % (path, "\t".join(HAND_HEADER)))
    for n, line in enumerate(lines[1:], 2):
        cols = line.split("\t")
        if len(cols) < 5 or cols[2] not in CAPTURE or cols[1] not in ("c", "py"):
            sys.exit("make_corpus.py: %s: row %d: expected id, language (c or py), route (%s), case, "
                     "expect, description" % (path, n, " ".join(CAPTURE)))
        bug_id, lang, route, case, expect = cols[:5]
        if bug_id.startswith(correct_prefix):
            if bug_id not in seen:
                rows += [(bug_id, "correct", lang, route, c, "", -1, "") for c in first.CASES]
            seen.add(bug_id)
            continue
        if case not in first.CASES:
            sys.exit("make_corpus.py: %s: row %d: case %r is not one of %s" % (path, n, case, " ".join(first.CASES)))
        rows.append((bug_id, "hand", lang, route, case, "", 1, expect))
    return rows


def draw_generated(rng, ops, taken=None, prefix="g2_"):
    """The generated rows (ids prefix01, ...), each spec new (not in taken, the first
    corpus's specs unless given) and changing its case's output."""
    plan = [(route, lang) for route, lang, count in first.GENERATED for _ in range(count)]
    forced = set()
    for route, lang, count in first.GENERATED:
        at = [i for i, p in enumerate(plan) if p == (route, lang)]
        forced |= set(rng.sample(at, SECOND_ROUND_SHARE[route, lang]))
    cases = [list(first.CASES)[i % len(first.CASES)] for i in range(len(plan))]
    rng.shuffle(cases)
    taken, rows, correct = set(corpus_specs(FIRST) if taken is None else taken), [], {}
    for i, ((route, lang), case) in enumerate(zip(plan, cases)):
        if (case, route) not in correct:
            correct[case, route] = run_on(ops[case, route], route, [])
        while True:
            spec = draw(rng, route, case, i in forced)
            if frozenset(spec) in taken:
                continue
            if not np.array_equal(run_on(ops[case, route], route, spec), correct[case, route]):
                break
            print("redrawn (output unchanged): %s %s %s" % (route, case, ",".join(spec)), flush=True)
        taken.add(frozenset(spec))
        rows.append(("%s%02d" % (prefix, i + 1), "generated", lang, route, case, ",".join(spec), 1, ""))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kreplay", required=True, help="the kreplay binary (synthesises the cases)")
    ap.add_argument("--hand", default=os.path.join(HERE, "hand_bugs.tsv"), help="the hand-written bugs' table")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        ops = capture_operands(os.path.abspath(args.kreplay), work)
    rows = draw_generated(random.Random(SEED), ops)
    generated = list(rows)
    rows += hand_rows(args.hand)
    for bug_id, lang, route in first.CORRECT:
        rows += [(bug_id, "correct", lang, route, case, "", -1, "") for case in first.CASES]
    write(rows, generated)


def write(rows, generated, folder=HERE, seed=SEED, ordinal="second", cmake_list="KR_HELDOUT2_GENERATED"):
    """corpus.tsv, gen_kernels.py and generated_plugins.cmake of the corpus in folder (the
    ordinal-th held-out corpus, drawn with seed; its C bugs listed in cmake_list)."""
    with open(os.path.join(folder, "corpus.tsv"), "w") as f:
        f.write("# written by make_corpus.py (seed %d); frozen: do not edit by hand\n" % seed)
        f.write("# id\torigin\tlanguage\troute\tcase\tspec\thalf (0 tune, 1 held-out, -1 correct)\texpect\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
        for name, (args, M, N, K) in first.CASES.items():
            f.write("#case\t%s\t%s --weight-format both\n" % (name, args))
    makers = {"W4A8": "w4a8_kernel", "W4A4": "w4a4_kernel", "BF16": "bf16_kernel"}
    with open(os.path.join(folder, "gen_kernels.py"), "w") as f:
        f.write('"""The generated Python kernels of the %s held-out corpus (written by\n'
                'make_corpus.py; frozen).  Each computes through grammar_ref.run_spec with its spec."""\n' % ordinal)
        f.write("from heldout_operands import bf16_kernel, w4a4_kernel, w4a8_kernel\n")
        for bug_id, _, lang, route, _, spec, _, _ in generated:
            if lang == "py":
                f.write("\n%s = %s(%r)\n" % (bug_id, makers[route], spec.split(",")))
    with open(os.path.join(folder, "generated_plugins.cmake"), "w") as f:
        f.write("# written by make_corpus.py: the generated C bugs (id and spec); frozen\n")
        f.write("set(%s\n" % cmake_list)
        for bug_id, _, lang, _, _, spec, _, _ in generated:
            if lang == "c":
                f.write('    "%s=%s"\n' % (bug_id, spec))
        f.write(")\n")


if __name__ == "__main__":
    main()
