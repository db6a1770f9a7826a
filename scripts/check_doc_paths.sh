#!/usr/bin/env bash
# Fails when a document names a repository path that does not exist.
#   scripts/check_doc_paths.sh [SOURCE_ROOT]
#
# Documents: README.md, docs/**/*.md and every folder's README.md (tracked or
# untracked-but-not-ignored files when SOURCE_ROOT is a git work tree, else
# every such file below it outside build*/ folders).
#
# What is checked, outside fenced code blocks (which hold commands, not
# references):
#   - every word inside backquotes that looks like a path: `dir/file.ext`
#     (a slash, and a last part with an extension) or `dir/` (a trailing
#     slash); `*` is a glob that must match something;
#   - every relative Markdown link target, `[text](dir/file.ext)`.
# A backquoted path may be relative to the repository root or to the
# document's own folder (a folder's README names its files by their short
# path); a link target, as Markdown resolves it, to the document's folder.
#
# A backquoted path may also be relative to a folder cited before it on the
# same line (a table row "`kernels/` ... the models (`cpu/`)").
#
# Not repository paths, so not checked: absolute paths and URLs; words with a
# placeholder part, all capitals (`RUNDIR/results.h5`, `plots/NAME.svg`; a
# capitalised `*.md` part such as `SCHEMA.md` is a real file name); paths
# into other trees and into what kreplay writes (NOT_IN_REPOSITORY below);
# and the example paths of EXAMPLES below.
#
# Each missing path is printed as FILE:LINE: missing path 'PATH'; exit 1 when
# any is missing, 2 when the root is unusable, 0 otherwise.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
if [ ! -d "$root" ]; then
    echo "check_doc_paths: $root: not a directory" >&2
    exit 2
fi
cd "$root"

# First parts of paths the documents cite that the repository does not hold:
# what kreplay and its scripts write (build trees, run, report and baseline
# directories), the user's own repository (.github), and the upstream sources
# the models follow (vLLM's csrc/, aiter/, microxcaling's mx/, ROCm's hip/).
# A path that starts with one of these is not looked up; any other first part
# is, so a moved folder is caught even when its old name is gone everywhere.
NOT_IN_REPOSITORY=('build' 'build-*' kreplay-out runs baselines plots partial calib out
                   .github csrc aiter mx hip)
# Whole paths that stand for an example, not a file (cases/suites/README.md:
# how a suite's case paths are cleaned).
EXAMPLES=(cases/suites/../samples/a.h5 cases/samples/a.h5)

list_docs() {
    # git's list only at the top of a work tree (a scratch tree inside an
    # ignored build folder is not the repository's).
    if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
        git ls-files --cached --others --exclude-standard -- 'README.md' '*/README.md' 'docs/*.md'
    else
        find . \( -name 'build*' -o -name .git \) -prune -o -type f \
            \( -name README.md -o -path './docs/*.md' \) -print | sed 's|^\./||'
    fi | sort -u
}

# FILE LINE KIND WORD, one per candidate (KIND: code or link).
extract() {
    awk '
    function emit(kind, text,    n, i, w, words) {
        n = split(text, words, /[ \t]+/)
        for (i = 1; i <= n; i++) {
            w = words[i]
            sub(/^[(\[{"\047]+/, "", w)
            sub(/[)\]},;:"\047]+$/, "", w)
            if (w != "")
                printf "%s\t%d\t%s\t%s\n", FILENAME, FNR, kind, w
        }
    }
    FNR == 1 { fence = 0; open = 0 }
    /^[ \t]*(```|~~~)/ { fence = !fence; open = 0; next }
    fence { next }
    /^[ \t]*$/ { open = 0; next }
    {
        line = $0
        # Link targets, outside code spans (checked per span below).
        seg = ""
        for (i = 1; i <= length(line); i++) {
            c = substr(line, i, 1)
            if (c == "`") {
                if (open) { emit("code", seg); seg = "" }
                else {
                    rest = seg
                    while (match(rest, /\]\([^) \t]+\)/)) {
                        emit("link", substr(rest, RSTART + 2, RLENGTH - 3))
                        rest = substr(rest, RSTART + RLENGTH)
                    }
                    seg = ""
                }
                open = !open
            } else {
                seg = seg c
            }
        }
        if (open) {
            emit("code", seg)
        } else {
            rest = seg
            while (match(rest, /\]\([^) \t]+\)/)) {
                emit("link", substr(rest, RSTART + 2, RLENGTH - 3))
                rest = substr(rest, RSTART + RLENGTH)
            }
        }
    }' "$@"
}

# Does WORD look like a repository path that should exist?
path_like() {
    local w=$1 part last
    [[ $w =~ ^[A-Za-z0-9_.*+-][A-Za-z0-9_./*+-]*$ ]] || return 1
    [[ $w == */* ]] || return 1
    last=${w##*/}
    if [[ $w != */ ]]; then
        [[ $last =~ \.[A-Za-z*][A-Za-z0-9*_-]*$ ]] || return 1
    fi
    local IFS=/
    for part in $w; do
        [[ -z $part ]] && continue
        if [[ ${part%%.*} =~ ^[A-Z][A-Z0-9_]+$ && $part != *.md ]]; then
            return 1    # a placeholder: RUNDIR, NAME.svg
        fi
    done
    local first=${w%%/*}
    for part in "${NOT_IN_REPOSITORY[@]}"; do
        # shellcheck disable=SC2053 # the list holds globs
        [[ $first == $part ]] && return 1
    done
    for part in "${EXAMPLES[@]}"; do
        [[ $w == "$part" ]] && return 1
    done
    return 0
}

# Does PATH exist relative to DIR (a glob when it has a '*')?
exists_in() {
    local dir=$1 w=$2 m
    if [[ $w == *'*'* ]]; then
        for m in "$dir"/$w; do
            [ -e "$m" ] && return 0
        done
        return 1
    fi
    if [[ $w == */ ]]; then
        [ -d "$dir/$w" ]
    else
        [ -e "$dir/$w" ]
    fi
}

mapfile -t docs < <(list_docs)
if [ ${#docs[@]} -eq 0 ]; then
    echo "check_doc_paths: $root: no README.md or docs/*.md to check" >&2
    exit 2
fi

missing=0
checked=0
where=""
bases=()
while IFS=$'\t' read -r file line kind word; do
    if [[ $file == */* ]]; then dir=${file%/*}; else dir=.; fi
    if [ "$file:$line" != "$where" ]; then
        where="$file:$line"
        bases=()
    fi
    if [ "$kind" = link ]; then
        case $word in
        *://* | mailto:* | '#'* | /*) continue ;;
        esac
        word=${word%%#*}
        [ -n "$word" ] || continue
        checked=$((checked + 1))
        exists_in "$dir" "$word" && continue
    else
        path_like "$word" || continue
        checked=$((checked + 1))
        found=""
        for base in . "$dir" "${bases[@]}"; do
            if exists_in "$base" "$word"; then
                found=$base
                break
            fi
        done
        if [ -n "$found" ]; then
            # A folder cited on this line is where later short paths on it live.
            [[ $word == */ ]] && bases=("$found/${word%/}" "${bases[@]}")
            continue
        fi
    fi
    echo "$file:$line: missing path '$word'"
    missing=$((missing + 1))
done < <(extract "${docs[@]}")

if [ "$missing" -gt 0 ]; then
    echo "check_doc_paths: $missing of $checked cited paths do not exist (${#docs[@]} documents)" >&2
    exit 1
fi
echo "check_doc_paths: $checked cited paths in ${#docs[@]} documents exist"
