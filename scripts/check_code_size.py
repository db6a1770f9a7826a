#!/usr/bin/env python3
"""Checks three size rules over the C/C++/CUDA/HIP (and Python) sources of a tree.

1. No function is longer than --max-function-lines (default 150) lines,
   counted from the line holding its name to its closing brace.
2. The number of duplicated place pairs is at most --max-pairs (default 40).
3. No source file (C family or Python) is longer than --max-file-lines
   (default 800) lines: a file that long holds more than one responsibility.

Duplicates are found on normalised lines: comments, blank lines, lines of
lone punctuation and #include lines are dropped, whitespace is folded,
identifiers become ID, numbers N, strings S (so copies that differ only in
names are found: "shape" duplicates).  A run of at least --min-run (default
6) consecutive normalised lines that appears in two places is a duplicate;
all runs between the same two places (a place is a function, or the file
scope of a file) are merged into one pair.  Initialiser blocks (`= { ... }`:
data tables of struct initialisers) are exempt.

Usage: check_code_size.py [--root DIR] [--exclude GLOB ...] [--max-pairs N]
                          [--max-file-lines N] [--allow-long FILE:FUNCTION ...] [--list N]
Exit 0 when every rule holds, 1 when one is broken, 2 on bad usage.
"""
import argparse
import bisect
import fnmatch
import hashlib
import os
import re
import sys

SOURCE_SUFFIXES = (".c", ".h", ".cc", ".cpp", ".hpp", ".cu", ".cuh", ".hip")
LENGTH_ONLY_SUFFIXES = (".py",)
SKIPPED_TOP_DIRS = ("out", "kreplay-out", "__pycache__")

KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float
for goto if inline int long register restrict return short signed sizeof static
struct switch typedef union unsigned void volatile while _Alignas _Alignof
_Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert
_Thread_local bool class namespace template typename public private protected
virtual operator new delete this using constexpr noexcept override nullptr
__global__ __device__ __host__ __shared__ __restrict__ __launch_bounds__
""".split())

TOKEN_RE = re.compile(r"""
    (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.])*)
  | (?P<str>"S")
  | (?P<chr>'c')
  | (?P<punct>->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!~<>=]=?|[^\sA-Za-z0-9_])
""", re.X)
LONE_PUNCTUATION = frozenset("{}();,")
INITIALISER_RE = re.compile(r"=\s*(?:\([^();{}]*\)\s*)?$")
TYPE_BODY_RE = re.compile(r"\b(?:struct|union|enum|class)\b[^();=]*$")
QUALIFIERS_RE = re.compile(r"\)\s*(?:(?:const|noexcept|override|final|mutable)\s*)*$")


def strip_comments_and_literals(text):
    """The text with comments removed and every string literal replaced by
    "S", every character literal by 'c'; newlines are kept so line numbers
    stay those of the file."""
    out = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            while j != -1 and text[j - 1] == "\\":
                out.append("\n")
                j = text.find("\n", j + 1)
            i = n if j == -1 else j
        elif ch == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j == -1 else j + 2
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append('"S"' if ch == '"' else "'c'")
            out.append("\n" * text.count("\n", i, min(j, n)))
            i = j + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def blank_preprocessor(code):
    """Preprocessor lines (with their continuations) as empty lines: the
    brace scanner must not see them.  Returns the new text and the set of
    1-based line numbers that were #include lines."""
    lines = code.split("\n")
    includes = set()
    in_directive = False
    for idx, line in enumerate(lines):
        stripped = line.lstrip()
        if in_directive or stripped.startswith("#"):
            if not in_directive and re.match(r"#\s*include\b", stripped):
                includes.add(idx + 1)
            in_directive = line.rstrip().endswith("\\")
            lines[idx] = ""
    return "\n".join(lines), includes


class Function:
    def __init__(self, path, name, first_line, last_line):
        self.path, self.name = path, name
        self.first_line, self.last_line = first_line, last_line

    @property
    def length(self):
        return self.last_line - self.first_line + 1


def function_name(header):
    """The name of the function whose header (the text before its `{`) is
    given, or None when the header does not end in a parameter list."""
    match = QUALIFIERS_RE.search(header)
    if not match:
        return None, None
    depth, pos = 0, match.start()
    while pos >= 0:
        if header[pos] == ")":
            depth += 1
        elif header[pos] == "(":
            depth -= 1
            if depth == 0:
                break
        pos -= 1
    if pos < 0:
        return None, None
    name_match = re.search(r"([A-Za-z_~][A-Za-z0-9_:~]*)\s*$", header[:pos])
    if not name_match or name_match.group(1) in KEYWORDS:
        return None, None
    return name_match.group(1), name_match.start(1)


def scan_blocks(path, code):
    """Functions and exempt blocks of one file.  `code` has comments,
    literals and preprocessor lines blanked.  Returns (functions, list of
    (first_line, last_line) of initialisers and struct/union/enum bodies:
    data, whose like-shaped lines are not duplicated logic)."""
    newlines = [i for i, ch in enumerate(code) if ch == "\n"]

    def line_of(offset):
        return bisect.bisect_left(newlines, offset) + 1

    functions, exempt_blocks = [], []
    # Each open brace: (kind, start offset, extra).  Kinds: "scope" (file,
    # namespace, extern "C", struct/class bodies: functions may open inside),
    # "function", "init", "inner".
    stack = []
    header_start = 0
    for offset, ch in enumerate(code):
        if ch not in "{};":
            continue
        at_scope = all(kind == "scope" for kind, _, _ in stack)
        if ch == ";":
            if at_scope:
                header_start = offset + 1
            continue
        if ch == "{":
            if not at_scope:
                before = code[max(0, offset - 200):offset]
                initialiser = stack[-1][0] == "init" or INITIALISER_RE.search(before)
                stack.append(("init" if initialiser else "inner", offset, None))
                continue
            header = code[header_start:offset]
            if INITIALISER_RE.search(header):
                stack.append(("init", offset, None))
            elif TYPE_BODY_RE.search(header):
                stack.append(("scope", offset, "type"))
            else:
                name, name_pos = function_name(header)
                if name:
                    stack.append(("function", offset, (name, line_of(header_start + name_pos))))
                else:
                    stack.append(("scope", offset, None))
            header_start = offset + 1
            continue
        # ch == "}"
        if not stack:
            header_start = offset + 1
            continue
        kind, start, extra = stack.pop()
        if kind == "function":
            functions.append(Function(path, extra[0], extra[1], line_of(offset)))
        elif (kind == "init" and (not stack or stack[-1][0] != "init")) or extra == "type":
            exempt_blocks.append((line_of(start), line_of(offset)))
        if all(k == "scope" for k, _, _ in stack):
            header_start = offset + 1
    return functions, exempt_blocks


def normalise(line):
    """The shape of one line: identifiers ID, numbers N, strings S, folded
    whitespace; None for a line that carries nothing (blank, punctuation)."""
    tokens = []
    for match in TOKEN_RE.finditer(line):
        kind = match.lastgroup
        text = match.group(kind)
        if kind == "id":
            tokens.append(text if text in KEYWORDS else "ID")
        elif kind == "num" or kind == "chr":
            tokens.append("N")
        elif kind == "str":
            tokens.append("S")
        else:
            tokens.append(text)
    if all(tok in LONE_PUNCTUATION for tok in tokens):
        return None
    return " ".join(tokens)


class SourceFile:
    """One file's functions and normalised lines (line number, shape,
    place) with initialisers, #include lines and empty lines dropped."""

    def __init__(self, root, rel):
        self.rel = rel
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        stripped = strip_comments_and_literals(text)
        code, includes = blank_preprocessor(stripped)
        self.functions, initialisers = scan_blocks(rel, code)
        exempt = set(includes)
        for first, last in initialisers:
            exempt.update(range(first, last + 1))
        places = {}
        for fn in self.functions:
            for line in range(fn.first_line, fn.last_line + 1):
                places[line] = "%s:%s" % (rel, fn.name)
        self.lines = []
        for number, line in enumerate(stripped.split("\n"), start=1):
            if number in exempt:
                continue
            shape = normalise(line)
            if shape is not None:
                self.lines.append((number, shape, places.get(number, rel)))


def source_files(root, excludes, suffixes=SOURCE_SUFFIXES):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        top = rel_dir == "."
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and not (top and (d.startswith("build") or d in SKIPPED_TOP_DIRS)))
        for name in sorted(filenames):
            if not name.endswith(suffixes):
                continue
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if any(fnmatch.fnmatch(rel, pattern) for pattern in excludes):
                continue
            found.append(rel)
    return found


class Pair:
    """All duplicated runs between two places."""

    def __init__(self, place_a, place_b):
        self.places = (place_a, place_b)
        self.runs = []      # ((file, first, last), (file, first, last), normalised lines)

    @property
    def longest(self):
        return max(run[2] for run in self.runs)


def find_runs(files, min_run, min_distinct):
    """Maximal runs of >= min_run equal normalised lines in two places
    (across files or within one, not overlapping itself)."""
    windows = {}
    for file_index, source in enumerate(files):
        shapes = [shape for _, shape, _ in source.lines]
        for start in range(len(shapes) - min_run + 1):
            key = hashlib.blake2b("\n".join(shapes[start:start + min_run]).encode(),
                                  digest_size=12).digest()
            windows.setdefault(key, []).append((file_index, start))
    matches = set()
    for occurrences in windows.values():
        if len(occurrences) < 2:
            continue
        for a in range(len(occurrences)):
            for b in range(a + 1, len(occurrences)):
                fa, sa = occurrences[a]
                fb, sb = occurrences[b]
                if fa == fb and sb - sa < min_run:
                    continue
                matches.add((fa, fb, sb - sa, sa))
    runs = []
    # A match is (file a, file b, start in b - start in a, start in a):
    # consecutive starts on one diagonal are one run.
    for key in sorted(matches):
        fa, fb, diagonal, sa = key
        if (fa, fb, diagonal, sa - 1) in matches:
            continue
        end = sa
        while (fa, fb, diagonal, end + 1) in matches:
            end += 1
        length = end - sa + min_run
        if fa == fb and diagonal < length:
            continue        # periodic code matching itself shifted
        shapes = set(shape for _, shape, _ in files[fa].lines[sa:sa + length])
        if len(shapes) < min_distinct:
            continue        # a list of like lines (cases, fields), not logic
        runs.append((fa, sa, fb, sa + diagonal, length))
    return runs


def place_segments(lines_a, lines_b, min_run):
    """A run cut where either side crosses into another place (function or
    file scope): each piece of at least min_run lines, as (start, length)."""
    start = 0
    for index in range(1, len(lines_a) + 1):
        if (index == len(lines_a) or lines_a[index][2] != lines_a[start][2]
                or lines_b[index][2] != lines_b[start][2]):
            if index - start >= min_run:
                yield start, index - start
            start = index


def pair_runs(files, runs, min_run):
    pairs = {}
    for fa, sa, fb, sb, length in runs:
        run_a = files[fa].lines[sa:sa + length]
        run_b = files[fb].lines[sb:sb + length]
        for start, count in place_segments(run_a, run_b, min_run):
            lines_a, lines_b = run_a[start:start + count], run_b[start:start + count]
            key = tuple(sorted((lines_a[0][2], lines_b[0][2])))
            pair = pairs.setdefault(key, Pair(*key))
            pair.runs.append(((files[fa].rel, lines_a[0][0], lines_a[-1][0]),
                              (files[fb].rel, lines_b[0][0], lines_b[-1][0]), count))
    return sorted(pairs.values(), key=lambda p: (-p.longest, p.places))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--max-function-lines", type=int, default=150)
    parser.add_argument("--max-pairs", type=int, default=40)
    parser.add_argument("--max-file-lines", type=int, default=800)
    parser.add_argument("--min-run", type=int, default=6)
    parser.add_argument("--min-distinct", type=int, default=4,
                        help="a run needs this many different line shapes (default 4)")
    parser.add_argument("--exclude", action="append", default=[],
                        help="a path glob (relative to the root) left out of both checks")
    parser.add_argument("--allow-long", action="append", default=[], metavar="FILE:FUNCTION",
                        help="a long function reported but not failing (one being split elsewhere)")
    parser.add_argument("--list", type=int, default=20, metavar="N",
                        help="print the N longest duplicate pairs (default 20; 0: all)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    if not os.path.isdir(root):
        print("check_code_size: --root %s: not a directory" % root, file=sys.stderr)
        return 2
    files = [SourceFile(root, rel) for rel in source_files(root, args.exclude)]

    failed = False
    long_functions = sorted((fn for source in files for fn in source.functions
                             if fn.length > args.max_function_lines),
                            key=lambda fn: -fn.length)
    allowed = set(args.allow_long)
    for fn in long_functions:
        excused = "%s:%s" % (fn.path, fn.name) in allowed
        print("%s:%d:%s: function of %d lines (limit %d)%s"
              % (fn.path, fn.first_line, fn.name, fn.length, args.max_function_lines,
                 " (allowed for now: --allow-long)" if excused else ""))
        failed |= not excused

    long_files = []
    for rel in source_files(root, args.exclude, SOURCE_SUFFIXES + LENGTH_ONLY_SUFFIXES):
        with open(os.path.join(root, rel), "rb") as handle:
            n_lines = handle.read().count(b"\n")
        if n_lines > args.max_file_lines:
            long_files.append((n_lines, rel))
    for n_lines, rel in sorted(long_files, reverse=True):
        print("%s: file of %d lines (limit %d)" % (rel, n_lines, args.max_file_lines))
    failed |= bool(long_files)

    pairs = pair_runs(files, find_runs(files, args.min_run, args.min_distinct), args.min_run)
    shown = pairs if args.list == 0 else pairs[:args.list]
    for pair in shown:
        (pa, fa, la), (pb, fb, lb), length = max(pair.runs, key=lambda run: run[2])
        print("duplicate: %s:%d-%d and %s:%d-%d (%d lines; %d run%s between %s and %s)"
              % (pa, fa, la, pb, fb, lb, length, len(pair.runs),
                 "" if len(pair.runs) == 1 else "s", pair.places[0], pair.places[1]))
    if len(pairs) > len(shown):
        print("... and %d more pairs (--list 0 prints all)" % (len(pairs) - len(shown)))
    print("%d files; %d functions over %d lines; %d files over %d lines; %d duplicate pairs (budget %d)"
          % (len(files), len(long_functions), args.max_function_lines, len(long_files),
             args.max_file_lines, len(pairs), args.max_pairs))
    if len(pairs) > args.max_pairs:
        print("check_code_size: %d duplicate pairs exceed the budget of %d"
              % (len(pairs), args.max_pairs))
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
