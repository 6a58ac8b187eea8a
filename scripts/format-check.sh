#!/usr/bin/env bash
# Checks that the lines of C changed since BASE are formatted as .clang-format says (git
# clang-format: only changed lines, so older code is reformatted when it is next touched, not
# all at once).  BASE defaults to the commit that added .clang-format.  Exit 1 with the
# diff to apply when a line is off; `git clang-format BASE` applies it.
# Usage: scripts/format-check.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-$(git log --diff-filter=A --format=%H -- .clang-format | tail -n 1)}
[ -n "$base" ] || { echo "format-check: no .clang-format in the history" >&2; exit 2; }
command -v git-clang-format >/dev/null 2>&1 || { echo "format-check: git-clang-format is required (Debian: clang-format)" >&2; exit 2; }
out=$(git clang-format --quiet --diff --extensions c,h "$base" -- . 2>&1) || true
case "$out" in
  ""|*"no modified files to format"*|*"clang-format did not modify any files"*)
    echo "format-check: the C changed since ${base:0:12} is formatted"
    exit 0 ;;
esac
printf '%s\n' "$out"
echo "format-check: lines above are not formatted as .clang-format says (git clang-format ${base:0:12})" >&2
exit 1
