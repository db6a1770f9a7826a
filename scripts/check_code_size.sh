#!/usr/bin/env bash
# CI: no function over 150 lines, duplicated places within the budget
# (scripts/check_code_size.py; its defaults are the project's limits).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/check_code_size.py "$@"
