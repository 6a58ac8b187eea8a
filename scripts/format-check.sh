#!/usr/bin/env bash
# Checks that the lines of C changed since BASE are formatted as .clang-format says (git
# clang-format: only changed lines, so older code is reformatted when it is next touched, not
# all at once; a file moved since BASE is checked where its lines changed).  BASE defaults to
# the commit that added .clang-format.  Exit 1 with the diff to apply when a line is off; the
# `git clang-format COMMIT` in the last line applies it.
# Usage: scripts/format-check.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-$(git log --diff-filter=A --format=%H -- .clang-format | tail -n 1)}
[ -n "$base" ] || { echo "format-check: no .clang-format in the history" >&2; exit 2; }
command -v git-clang-format >/dev/null 2>&1 || { echo "format-check: git-clang-format is required (Debian: clang-format)" >&2; exit 2; }
# A file moved since BASE counts as changed only where its lines changed: the diff is taken
# against BASE with each C file git sees as renamed since (git diff -M) at its new path too,
# so moving a file does not make each of its lines a changed one.
diff_base=$base
renames=$(git diff -M --diff-filter=R --name-status "$base" -- '*.c' '*.h' | cut -f2,3)
if [ -n "$renames" ]; then
  index=$(mktemp)
  trap 'rm -f "$index"' EXIT
  GIT_INDEX_FILE=$index git read-tree "$base"
  while IFS=$'\t' read -r old new; do
    blob=$(git rev-parse "$base:$old")
    GIT_INDEX_FILE=$index git update-index --add --cacheinfo "100644,$blob,$new"
  done <<<"$renames"
  tree=$(GIT_INDEX_FILE=$index git write-tree)
  diff_base=$(GIT_AUTHOR_NAME=format-check GIT_AUTHOR_EMAIL=format-check \
              GIT_COMMITTER_NAME=format-check GIT_COMMITTER_EMAIL=format-check \
              git commit-tree "$tree" -p "$base" -m "format-check: $base, moves applied")
fi
out=$(git clang-format --quiet --diff --extensions c,h "$diff_base" -- . 2>&1) || true
case "$out" in
  ""|*"no modified files to format"*|*"clang-format did not modify any files"*)
    echo "format-check: the C changed since ${base:0:12} is formatted"
    exit 0 ;;
esac
printf '%s\n' "$out"
echo "format-check: lines above are not formatted as .clang-format says (git clang-format ${diff_base:0:12})" >&2
exit 1
