#!/usr/bin/env python3
"""Checks that two kreplay results.h5 files hold the same rows.

    compare_rows.py A.h5 B.h5

Every column of the rows dataset is compared exactly (NaN equals NaN), the
output digests included, except those that time a run (seconds, time_ms,
tflops, gbps); provenance lives in the file's attributes and is not compared.
Rows are matched by case (path and name), kernel and reference in whatever order each file
holds them.  Exit 0 when equal, 1 with the first differences listed.
"""
import math
import sys

import h5py

TIMING = {"seconds", "time_ms", "tflops", "gbps"}
# A row is one case x kernel x reference (the case by path and name).
KEY = ("case_path", "case_name", "case", "path", "kernel", "reference")


def load(path):
    with h5py.File(path, "r") as f:
        rows = f["rows"][()]
    names = [n for n in rows.dtype.names if n not in TIMING]
    table = {}
    for r in rows:
        rec = {n: r[n] for n in names}
        rec = {n: (v.decode() if isinstance(v, bytes) else v) for n, v in rec.items()}
        key = tuple(rec[n] for n in KEY if n in rec)
        if key in table:
            sys.exit(f"{path}: row {key} appears twice")
        table[key] = rec
    return names, table


def same(a, b):
    if hasattr(a, "tolist"):
        a, b = a.tolist(), b.tolist()
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    names_a, a = load(sys.argv[1])
    names_b, b = load(sys.argv[2])
    if names_a != names_b:
        print(f"columns differ: {names_a} vs {names_b}")
        return 1
    problems = [f"only in {sys.argv[1]}: {k}" for k in sorted(a.keys() - b.keys())]
    problems += [f"only in {sys.argv[2]}: {k}" for k in sorted(b.keys() - a.keys())]
    for key in sorted(a.keys() & b.keys()):
        for n in names_a:
            if not same(a[key][n], b[key][n]):
                problems.append(f"{key} {n}: {a[key][n]!r} vs {b[key][n]!r}")
    if problems:
        print("\n".join(problems[:20]))
        print(f"{len(problems)} differences")
        return 1
    print(f"same rows: {len(a)} rows x {len(names_a)} columns (timing columns excluded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
