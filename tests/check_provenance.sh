#!/usr/bin/env bash
# Rows survive template edits that keep their kernels, and only those (issue: rows that survive
# refactors).  Usage: check_provenance.sh MMTUNE SOURCE_DIR.  No GPU: explain answers from the
# database (--device-name).
#  1. tests/data/fixture_7934a61.db, as the release before the template refactor wrote it
#     (schema 4): the rows whose templates still emit their kernels (templates/lineage.txt:
#     naive, smem_tiled) are served exactly; the others are stale, and kept.
#  2. tests/data/fixture_5089791.db, as the release before kernel hashes wrote it (schema 5):
#     every row is served exactly; `db rekey` records their kernels; then, under an edited copy
#     of the templates (a comment added to wgmma.lua, one line added to every kernel reg_tiled
#     emits), wgmma's rows still serve exactly and reg_tiled's are stale.
set -euo pipefail
mmtune=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export MMTUNE_TEMPLATE_PATH=
fail() { echo "check_provenance: $*" >&2; exit 1; }

# expect DB "M N K --dtype D" KIND [TEMPLATE]: explain's choice (KIND "stale": not exact) and
# kernel for that problem.
expect() {
  local out
  out=$("$mmtune" explain $2 --device-name "NVIDIA H200" --db "$1") || fail "explain $2: $out"
  if [ "$3" = stale ]; then
    grep -q "choice:    exact" <<<"$out" && fail "$2 on $(basename "$1"): a stale row served: $out"
  else
    grep -q "choice:    $3\$" <<<"$out" || fail "$2 on $(basename "$1"): want $3, got: $out"
  fi
  [ -z "${4:-}" ] || grep -q "kernel:    $4 " <<<"$out" || fail "$2: want kernel $4, got: $out"
}

# 1. Before the refactor.
cp "$src/tests/data/fixture_7934a61.db" "$tmp/old.db"
expect "$tmp/old.db" "256 256 256 --dtype f32" exact smem_tiled
expect "$tmp/old.db" "4096 4096 4096 --dtype f32" exact smem_tiled # reg_tiled's row is stale
expect "$tmp/old.db" "2048 2048 2048 --dtype f32" stale
expect "$tmp/old.db" "4096 4096 4096 --dtype f16" stale
"$mmtune" db check "$tmp/old.db" | grep -q ", 20 rows," || fail "rows of the old database lost"

# 2. Before kernel hashes.
cp "$src/tests/data/fixture_5089791.db" "$tmp/f.db"
shapes=("4096 4096 4096 --dtype f16" "4096 4096 4096 --dtype f16 --trans-b"
        "1000 1000 1000 --dtype bf16" "2048 2048 2048 --dtype f32" "1000 1000 1000 --dtype f32"
        "1 4096 4096 --dtype f32" "16 4096 4096 --dtype f16")
for s in "${shapes[@]}"; do expect "$tmp/f.db" "$s" exact; done
out=$("$mmtune" db rekey --db "$tmp/f.db")
grep -q "20 rows given the hash of their kernel, 0 left" <<<"$out" || fail "rekey: $out"
for s in "${shapes[@]}"; do expect "$tmp/f.db" "$s" exact; done

cp -r "$src/templates" "$tmp/templates"
echo "-- an edit that emits the same kernels" >> "$tmp/templates/wgmma.lua"
sed -i 's|mmt.subst(source, vars), d.threads|mmt.subst(source, vars) .. "// edited\\n", d.threads|' \
  "$tmp/templates/reg_tiled.lua"
cmp -s "$src/templates/reg_tiled.lua" "$tmp/templates/reg_tiled.lua" && fail "reg_tiled not edited"
export MMTUNE_TEMPLATE_PATH=$tmp/templates
expect "$tmp/f.db" "4096 4096 4096 --dtype f16" exact wgmma
expect "$tmp/f.db" "1000 1000 1000 --dtype bf16" exact
expect "$tmp/f.db" "4096 4096 4096 --dtype f32" exact smem_tiled # reg_tiled's kernels changed
expect "$tmp/f.db" "2048 2048 2048 --dtype f32" stale
echo "check_provenance: ok"
