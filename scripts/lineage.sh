#!/usr/bin/env bash
# Writes templates/lineage.txt's section for an earlier commit: which rows measured with that
# commit's templates measured the kernels this tree's templates emit (gen_emits_as, gen/gen.h).
#
# It builds the gen library of the earlier commit and of this working tree in a temporary
# folder, builds scripts/lineage/emit_all.c against each, emits every valid config of every
# template, dtype and layout with both, and has scripts/lineage/compare.py compare the two
# (source and launch description, byte for byte), check that the NVRTC fixed options of both
# trees are the same (else no lineage at all), and replace the commit's section of
# templates/lineage.txt.  Rerun it after every template change: lines whose current hash is no
# longer the template's do nothing.  It reads the working tree's templates as they are,
# committed or not.  On 2 cores: about 1 minute to build, 1 minute to emit each tree.
#
# Usage: scripts/lineage.sh [--every N] [--max-exceptions N] EARLIER_COMMIT
#   --every N           a trial: emit a sample (configs whose params hash to 0 mod N) and
#                       report; templates/lineage.txt is left as it was
#   --max-exceptions N  a template with more kernels that differ is left out (default 200)
# Keeps its temporary folder when MMT_LINEAGE_KEEP=1 (it prints where).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

every=1
max_exceptions=200
while [ $# -gt 1 ]; do
  case "$1" in
  --every) every=$2; shift 2 ;;
  --max-exceptions) max_exceptions=$2; shift 2 ;;
  *) break ;;
  esac
done
[ $# -eq 1 ] || { sed -n '14,19p' "$0" >&2; exit 2; }
commit=$(git rev-parse --verify --quiet "$1^{commit}") || {
  echo "lineage: '$1' is not a commit" >&2
  exit 2
}
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH" # CMake's CUDA Toolkit check
fi
if [ -n "$(git status --porcelain -- templates ':!templates/lineage.txt')" ]; then
  echo "lineage: note: templates/ has uncommitted changes; the lines are for the files as they are"
fi

work=$(mktemp -d /tmp/mmt-lineage.XXXXXX)
if [ "${MMT_LINEAGE_KEEP:-0}" = 1 ]; then
  echo "lineage: keeping $work"
else
  trap 'rm -rf "$work"' EXIT
fi
git archive "$commit" | tar -x -C "$work" --one-top-level=old
ln -s "$repo" "$work/new"

# gen and util of one tree, as its own CMake builds them; then emit_all against them.
# $1: tree, $2: build folder, $3: the program.
build_emit_all() {
  local tree=$1 build=$2 prog=$3 flags=() extra=()
  cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMMT_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" -j 2 --target mmt_gen mmt_util >"$build/gen.log" 2>&1 ||
    { tail -n 20 "$build/gen.log" >&2; echo "lineage: building $tree's gen failed" >&2; exit 1; }
  local lua
  lua=$(sed -n 's/^LUA_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")
  # emit_all.c says why these two differ between trees
  grep -q 'gen_check_for' "$tree/gen/gen.h" && flags+=(-DEMIT_ALL_CHECK_FOR=1)
  grep -q 'gen_kernel_launch_text' "$tree/gen/gen.h" || extra+=("$repo/gen/gen_launch.c")
  cc -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra ${flags[@]+"${flags[@]}"} -I"$tree/gen" \
    -I"$tree/util" -I"$tree/include" "$repo/scripts/lineage/emit_all.c" \
    ${extra[@]+"${extra[@]}"} "$build/gen/libmmt_gen.a" "$build/util/libmmt_util.a" "$lua" -lm -ldl \
    -o "$prog"
}

# $1: tree, $2: program, $3: output.  Only the tree's own templates folder is searched first.
emit() {
  local args=() start=$SECONDS
  [ "$every" -gt 1 ] && args=(--every "$every")
  MMTUNE_TEMPLATE_PATH="$1/templates" "$2" ${args[@]+"${args[@]}"} >"$3"
  echo "lineage: emitted $(grep -vc '^#' "$3") kernels of $1 in $((SECONDS - start)) s"
}

start=$SECONDS
build_emit_all "$work/old" "$work/old-build" "$work/emit_old"
build_emit_all "$work/new" "$work/new-build" "$work/emit_new"
echo "lineage: built in $((SECONDS - start)) s"
emit "$work/old" "$work/emit_old" "$work/old.txt"
emit "$work/new" "$work/emit_new" "$work/new.txt"

sampled=()
[ "$every" -gt 1 ] && sampled=(--sampled)
python3 "$repo/scripts/lineage/compare.py" --old-tree "$work/old" --new-tree "$work/new" \
  --old "$work/old.txt" --new "$work/new.txt" --commit "$commit" \
  --lineage "$repo/templates/lineage.txt" --max-exceptions "$max_exceptions" \
  ${sampled[@]+"${sampled[@]}"}
