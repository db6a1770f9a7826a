#!/usr/bin/env python3
"""No two source files of the project's libraries call each other.

Reads the object files of every kr_* library in a build directory (not the
tests' support, benchmarks or fault shims): file A depends on file B when A
references a symbol (a function or a global) that B defines (nm).  A pair of
files that depend on each other is a circle the layers forbid: the lower file
must not call back up (pass a callback or a table instead, or move the
function to where it belongs).  Prints each pair, exit 1 when there is one,
2 when the build directory holds no objects.

Usage: check_call_cycles.py BUILD_DIR
"""
import collections
import os
import re
import subprocess
import sys

LIBRARY_DIR = re.compile(r"CMakeFiles/(kr_[a-z0-9_]+)\.dir")
NOT_PROJECT = {"kr_test_support", "kr_bench", "kr_fault_fs"}


def objects(build):
    found = []
    for dirpath, _, filenames in os.walk(build):
        if os.path.relpath(dirpath, build).startswith(os.path.join("tests", "tmp")):
            continue        # the tests' scratch trees, planted objects among them
        m = LIBRARY_DIR.search(dirpath)
        if not m or m.group(1) in NOT_PROJECT:
            continue
        found += [os.path.join(dirpath, f) for f in filenames if f.endswith(".o")]
    return sorted(found)


def symbols(objs, *flags):
    """(object, symbol) of every line nm prints for all objects at once (-A)."""
    out = subprocess.run(["nm", "-A", *flags, *objs], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        where, _, rest = line.partition(": ")
        if not rest:
            where, _, rest = line.rpartition(":")
        yield where, rest.split()


def source_name(build, obj):
    """harness/judge/judge.c for .../CMakeFiles/kr_judge.dir/judge/judge.c.o"""
    rel = os.path.relpath(obj, build)
    return rel.split(".dir/", 1)[-1][:-2] if ".dir/" in rel else rel


def main(argv):
    if len(argv) != 1:
        print(__doc__.split("\n\n")[-1].strip(), file=sys.stderr)
        return 2
    build = os.path.abspath(argv[0])
    objs = objects(build)
    if not objs:
        print("check_call_cycles: %s: no object files of kr_* libraries; build first" % build,
              file=sys.stderr)
        return 2
    defined_in = collections.defaultdict(set)
    for obj, parts in symbols(objs, "--defined-only", "-g"):
        if len(parts) == 3 and parts[1] in "TDBRVW":
            defined_in[parts[2]].add(obj)
    uses = collections.defaultdict(set)
    for obj, parts in symbols(objs, "-u"):
        for other in defined_in.get(parts[-1], ()) if parts else ():
            if other != obj:
                uses[obj].add(other)
    pairs = sorted({tuple(sorted((a, b))) for a in uses for b in uses[a] if a in uses.get(b, ())})
    for a, b in pairs:
        print("call cycle: %s <-> %s" % (source_name(build, a), source_name(build, b)))
    print("check_call_cycles: %d object files, %d pairs that call each other" % (len(objs), len(pairs)))
    return 1 if pairs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
