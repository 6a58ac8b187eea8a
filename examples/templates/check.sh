#!/usr/bin/env bash
# The worked example of docs/templates.md stays a working template: mmtune finds it on
# MMTUNE_TEMPLATE_PATH, counts its space, emits it, and NVRTC compiles every valid config for
# sm_90 in the dtypes and layouts it declares (no GPU needed).  Usage: check.sh MMTUNE
set -euo pipefail
mmtune=$1
here=$(cd "$(dirname "$0")" && pwd)
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
# Only this folder's templates and the built-in ones; no file of the user's is read or written.
export MMTUNE_TEMPLATE_PATH=$here HOME=$home XDG_CACHE_HOME=$home/cache
unset MMTUNE_DB MMTUNE_CACHE_DIR

fail() { echo "check.sh: $*" >&2; exit 1; }

listing=$("$mmtune" templates)
grep -q "^axpy_gemm: " <<<"$listing" || fail "mmtune templates does not list axpy_gemm"
count=$("$mmtune" space axpy_gemm --count)
[ "$count" = 30 ] || fail "axpy_gemm has $count valid configs, the guide says 30"
source=$("$mmtune" emit axpy_gemm cols=4 --dtype f16 --layout nt)
grep -q "axpy_gemm_f16_nt_bx128_c4_u1" <<<"$source" ||
  fail "mmtune emit does not name the kernel as the guide says"

for dl in "f32 nn" "f16 nt" "bf16 nn"; do
  set -- $dl
  out=$("$mmtune" compile --arch sm_90 --no-cache --dtype "$1" --layout "$2" axpy_gemm)
  tail -n 1 <<<"$out"
  grep -q "^30 configs: 30 ok, 0 failed" <<<"$out" || fail "compile $1 $2 failed:
$out"
done
