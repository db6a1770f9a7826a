#!/usr/bin/env bash
# Fails when a file includes a header of a component it may not depend on.
#   scripts/check_layers.sh [SOURCE_ROOT]
#
# The components and their allowed arrows live in ONE place: the fenced
# block after the line "<!-- layers -->" in harness/README.md, one line per
# component:
#   COMPONENT FOLDER -> ALLOWED_COMPONENT ...
# A header belongs to the component whose folder holds it (the deepest
# folder that matches); `#include "x.h"` is resolved by its file name, since
# every component exports its folder as an include directory.  A file may
# always include headers of its own component and headers that no component
# holds (the system's, the tests' support).  Each violation is printed as
# FILE:LINE: COMPONENT may not include HEADER (COMPONENT)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
readme=harness/README.md

table=$(awk '/^<!-- layers -->/ { armed = 1; next }
             armed && /^```/ { if (inside) exit; inside = 1; next }
             inside && NF { print }' "$readme")
if [ -z "$table" ]; then
    echo "check_layers: $readme: no component table (a fenced block after <!-- layers -->)" >&2
    exit 2
fi

declare -A folder_of allowed
components=()
while read -r comp folder arrow rest; do
    if [ "$arrow" != "->" ] || [ -z "$folder" ]; then
        echo "check_layers: $readme: expected 'COMPONENT FOLDER -> ALLOWED...', got: $comp $folder $arrow $rest" >&2
        exit 2
    fi
    if [ ! -d "$folder" ]; then
        echo "check_layers: $readme: component $comp: folder $folder does not exist" >&2
        exit 2
    fi
    components+=("$comp")
    folder_of[$comp]=$folder
    allowed[$comp]=" $comp $rest "
done <<<"$table"

# Which component a path belongs to: the one with the longest folder prefix.
component_of() {
    local path=$1 best="" best_len=0 c f
    for c in "${components[@]}"; do
        f=${folder_of[$c]}
        case "$path" in
        "$f"/*)
            if [ ${#f} -gt "$best_len" ]; then
                best=$c
                best_len=${#f}
            fi
            ;;
        esac
    done
    printf '%s' "$best"
}

declare -A header_comp
sources=()
for c in "${components[@]}"; do
    while IFS= read -r -d '' file; do
        owner=$(component_of "$file")
        [ "$owner" = "$c" ] || continue
        sources+=("$file")
        case "$file" in
        *.h)
            name=${file##*/}
            if [ -n "${header_comp[$name]:-}" ] && [ "${header_comp[$name]}" != "$c" ]; then
                echo "check_layers: header $name is in two components (${header_comp[$name]}, $c): includes by name are ambiguous" >&2
                exit 2
            fi
            header_comp[$name]=$c
            ;;
        esac
    done < <(find "${folder_of[$c]}" -type f \( -name '*.c' -o -name '*.h' -o -name '*.hip' -o -name '*.cu' \) -print0)
done

bad=0
for file in "${sources[@]}"; do
    owner=$(component_of "$file")
    while IFS=: read -r line header; do
        name=${header##*/}
        target=${header_comp[$name]:-}
        [ -n "$target" ] || continue
        case "${allowed[$owner]}" in
        *" $target "*) ;;
        *)
            echo "$file:$line: $owner may not include $header ($target)"
            bad=1
            ;;
        esac
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
             sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/' || true)
done
if [ "$bad" -ne 0 ]; then
    echo "check_layers: upward includes found (allowed arrows: $readme)" >&2
    exit 1
fi
echo "check_layers: ${#sources[@]} files in ${#components[@]} components, no upward include"
