#!/usr/bin/env bash
# xerbla_parity.sh SHIM NETLIB PROBES: every argument error of every GEMM entry point of SHIM
# (libmmtune_blas.so) must reach the program as it does under netlib's BLAS and CBLAS NETLIB
# (Debian's libblas.so.3, which holds both): the same handler called with the same name and
# number and the same CBLAS globals, the same messages, the same exit status.
#
# PROBES is the folder of xerbla_probe built eight ways: xerbla_probe_V_netlib (linked with
# NETLIB) and xerbla_probe_V_shim (linked with SHIM alone), where V says which handlers the
# program defines: xerbla (only xerbla_), cblas (only cblas_xerbla), both, neither.  Each case
# runs once under netlib (the reference) and three times under the shim:
#   preload  the netlib program with SHIM LD_PRELOADed
#   linked   the shim program, NETLIB as the CPU BLAS (its handlers found by the shim)
#   builtin  the shim program with no CPU BLAS (MMTUNE_BLAS_CPU_LIBRARY naming SHIM itself):
#            the shim's own stand-ins for netlib's handlers
# netlib has no 16-bit GEMMs: the reference of sbgemm_ / cblas_sbgemm (and sh) is netlib's
# run of sgemm_ / cblas_sgemm with the names changed, as netlib's CBLAS xerbla_ would name
# them (it keeps 6 characters of "SBGEMM ": "cblas_sbgemm", where "SGEMM " gives
# "cblas_sgemm ").  The shim's own "mmtune_blas: " lines on stderr are left out.
set -u
shim=$1 netlib=$2 probes=$3
for v in xerbla cblas both neither; do
  for link in netlib shim; do
    prog="$probes/xerbla_probe_${v}_$link"
    [ -x "$prog" ] || { echo "missing $prog"; exit 1; }
  done
done
tmp=$(mktemp -d /tmp/mmt_xerbla_XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
export MMTUNE_TEMPLATE_PATH='' MMTUNE_BLAS_VERBOSE='' MMTUNE_BLAS_THRESHOLD=''
unset LD_PRELOAD

# run OUT PROGRAM ARGS...: OUT holds the program's stdout, its stderr without the shim's
# lines, and its exit status.
run() {
  local out=$1 rc
  shift
  "$@" >"$out" 2>"$out.stderr"
  rc=$?
  {
    echo "--- stderr"
    grep -v '^mmtune_blas: ' "$out.stderr"
    echo "--- exit status $rc"
  } >>"$out"
}

# The netlib names of sgemm_ / cblas_sgemm turned into those of routine $1's GEMM;
# "cblas_sgemm " (quoted, or before " was") is CBLAS's xerbla_ naming the C wrapper.
names_of() {
  local g
  case $1 in
    *sbgemm*) g=sbgemm ;;
    *shgemm*) g=shgemm ;;
    *) cat; return ;;
  esac
  sed -e "s/cblas_sgemm \([ ']\)/cblas_$g\1/g" -e "s/sgemm/$g/g" -e "s/SGEMM/${g^^}/g"
}

f77_cases="transa transb m n k lda ldb ldc"
cblas_cases="col:order"
for order in col row; do
  for c in $f77_cases; do cblas_cases="$cblas_cases $order:$c"; done
done

n_cases=0 n_failed=0 n_continued=0
for v in xerbla cblas both neither; do
  for routine in sgemm_ sbgemm_ shgemm_ cblas_sgemm cblas_sbgemm cblas_shgemm; do
    case $routine in cblas_*) cases=$cblas_cases ;; *) cases=$f77_cases ;; esac
    s_routine=${routine/sbgemm/sgemm}
    s_routine=${s_routine/shgemm/sgemm}
    for c in $cases; do
      n_cases=$((n_cases + 1))
      ref="$tmp/ref"
      run "$ref.netlib" "$probes/xerbla_probe_${v}_netlib" "$s_routine" "$c"
      names_of "$routine" <"$ref.netlib" >"$ref"
      grep -q '^continued' "$ref" && n_continued=$((n_continued + 1))
      for mode in preload linked builtin; do
        got="$tmp/$mode"
        case $mode in
          preload) run "$got" env LD_PRELOAD="$shim" MMTUNE_BLAS_CPU_LIBRARY="$netlib" \
                     "$probes/xerbla_probe_${v}_netlib" "$routine" "$c" ;;
          linked) run "$got" env MMTUNE_BLAS_CPU_LIBRARY="$netlib" \
                    "$probes/xerbla_probe_${v}_shim" "$routine" "$c" ;;
          builtin) run "$got" env MMTUNE_BLAS_CPU_LIBRARY="$shim" \
                     "$probes/xerbla_probe_${v}_shim" "$routine" "$c" ;;
        esac
        if ! cmp -s "$ref" "$got"; then
          n_failed=$((n_failed + 1))
          echo "FAILED: handlers $v, $routine $c, $mode: netlib's (<) and the shim's (>) output"
          diff "$ref" "$got"
        fi
      done
    done
  done
done
echo "$n_cases cases ($n_continued of them continue under netlib), 3 runs each under the shim:" \
  "$n_failed differ from netlib"

# Issue 44 as reported, in so many words: a program with only xerbla_ calling cblas_sgemm
# row-major with LDA < K gets xerbla_("SGEMM ", 10) and carries on.
want=$'xerbla_(\'SGEMM \', 10)\ncontinued'
got=$(MMTUNE_BLAS_CPU_LIBRARY="$netlib" "$probes/xerbla_probe_xerbla_shim" cblas_sgemm row:lda)
rc=$?
if [ "$got" != "$want" ] || [ $rc -ne 0 ]; then
  echo "FAILED: row-major LDA < K with only xerbla_: exit status $rc, output:"
  echo "$got"
  n_failed=$((n_failed + 1))
fi
[ "$n_failed" -eq 0 ]
