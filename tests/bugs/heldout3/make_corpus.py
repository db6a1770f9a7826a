"""Writes the third held-out bug corpus: corpus.tsv, gen_kernels.py (the generated Python
kernels) and generated_plugins.cmake (the generated C plugins).  Drawn once, before the
diagnosis was tuned on the second corpus; its output is committed and frozen:

    /usr/bin/python3 tests/bugs/heldout3/make_corpus.py --kreplay build/kreplay

The second corpus's maker draws it (its functions, loaded by path), with this corpus's own
seed: random compositions of one or two grammar primitives (grammar_ref.py's
primitives(..., second_round=True)) over the first corpus's cases and route/language mix,
the second corpus's share of them starting from a second-round row.  A drawn spec is
redrawn when it repeats a spec of the first or second corpus or of this one (a pair in
either order is one spec), or when its output on its case (grammar_ref.run_spec on the
operands kreplay gives the route's kernels there) is bit for bit the correct kernel's.
The hand-written bugs and their correct variants (ids c3_*) come from hand_bugs.tsv (when
present; `--hand` names another): they take no draw from the seed, so the generated rows
are the same whatever that table holds.  The earlier corpora's correct variants (c_*, c2_*)
are listed again on every case.  Every bug is held out (half 1)."""
import argparse
import importlib.util
import os
import random
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SECOND = os.path.join(os.path.dirname(HERE), "heldout2")


def _second_maker():
    """The second corpus's make_corpus.py (which loads the first's), loaded by path: its
    module name is this file's."""
    spec = importlib.util.spec_from_file_location("heldout2_make_corpus", os.path.join(SECOND, "make_corpus.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


second = _second_maker()
first = second.first

SEED = 20261207


def earlier_correct_rows():
    """The first and second corpora's correct variants, each on every case."""
    rows = [(bug_id, "correct", lang, route, case, "", -1, "")
            for bug_id, lang, route in first.CORRECT for case in first.CASES]
    return rows + [r for r in second.hand_rows(os.path.join(SECOND, "hand_bugs.tsv")) if r[1] == "correct"]


def generated_rows(ops):
    """This corpus's generated rows: the seed's draw, no spec of an earlier corpus again."""
    taken = second.corpus_specs(second.FIRST) | second.corpus_specs(SECOND)
    return second.draw_generated(random.Random(SEED), ops, taken=taken, prefix="g3_")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kreplay", required=True, help="the kreplay binary (synthesises the cases)")
    ap.add_argument("--hand", default=os.path.join(HERE, "hand_bugs.tsv"), help="the hand-written bugs' table")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        ops = second.capture_operands(os.path.abspath(args.kreplay), work)
    generated = generated_rows(ops)
    rows = generated + second.hand_rows(args.hand, correct_prefix="c3_") + earlier_correct_rows()
    second.write(rows, generated, folder=HERE, seed=SEED, ordinal="third", cmake_list="KR_HELDOUT3_GENERATED")


if __name__ == "__main__":
    sys.exit(main())
