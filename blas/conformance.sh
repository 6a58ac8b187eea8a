#!/usr/bin/env bash
# conformance.sh MODE SHIM PROGRAM INPUT REPORT: runs one of netlib's BLAS test programs
# (Debian's libblas-test: xblat3s reads sblat3.in and writes its report to the file that names,
# sblat3.out; xscblat3 reads sin3 and reports on stdout, REPORT "-") with SHIM
# (libmmtune_blas.so) LD_PRELOADed, in a fresh folder, and checks:
#   - the program exits 0 and reaches "END OF TESTS", and no line says FAIL, SUSPECT, FATAL
#     or "*****" (netlib's marks of a wrong result or a wrong error exit);
#   - its SGEMM lines say PASSED (the error exits and every computational test);
#   - the shim's summary line (MMTUNE_BLAS_VERBOSE=1, at exit) counted exactly the SGEMM calls
#     the report counts, plus at least one argument error: every call went through the shim.
# MODE cpu: the default threshold, so the program's small calls run on the CPU BLAS (at least
# one must).  MODE gpu: MMTUNE_BLAS_THRESHOLD=0, every call must have run on the GPU through
# mmt_gemm (no CPU call, no fallback); without a GPU or driver it exits 77 (skipped).
set -u
mode=$1 shim=$2 prog=$3 input=$4 report=$5
if [ ! -x "$prog" ] || [ ! -f "$input" ]; then
  echo "skip: $prog or $input missing (install Debian's libblas-test)"
  exit 77
fi
tmp=$(mktemp -d /tmp/mmt_blas_XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
cp "$input" "$tmp/input" || exit 1
cd "$tmp" || exit 1

# The programs are built against netlib's BLAS and CBLAS (xscblat3 needs its RowMajorStrg),
# which Debian keeps beside them; libblas.so.3 elsewhere may be OpenBLAS, which lacks it.
refdir=$(dirname "$prog")
[ -f "$refdir/libblas.so.3" ] && export LD_LIBRARY_PATH="$refdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset MMTUNE_BLAS_CPU_LIBRARY MMTUNE_BLAS_THRESHOLD
export MMTUNE_BLAS_VERBOSE=1
[ "$mode" = gpu ] && export MMTUNE_BLAS_THRESHOLD=0
LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}" "$prog" <input >stdout.txt 2>stderr.txt
rc=$?
cat stdout.txt >report.txt
[ "$report" != - ] && [ -f "$report" ] && cat "$report" >>report.txt
echo "--- $(basename "$prog") report (exit $rc)"
cat report.txt
echo "--- stderr"
cat stderr.txt

failed=0
fail() { echo "FAILED: $*"; failed=1; }
[ $rc -eq 0 ] || fail "exit status $rc"
grep -q "END OF TESTS" report.txt || fail "the report does not reach END OF TESTS"
if grep -nE "FAIL|SUSPECT|FATAL|\*\*\*\*\*" report.txt; then fail "the report lists failures"; fi
gemm_lines=$(grep -iE "^ *(cblas_)?sgemm +PASSED" report.txt)
grep -qi "PASSED THE TESTS OF ERROR-EXITS" <<<"$gemm_lines" || fail "no SGEMM error-exit pass"
grep -qi "COMPUTATIONAL TESTS" <<<"$gemm_lines" || fail "no SGEMM computational pass"
# "( 17496 CALLS)" on each computational line: the calls the shim must have seen.
expected=$(sed -nE 's/.*COMPUTATIONAL TESTS *\( *([0-9]+) CALLS\).*/\1/p' <<<"$gemm_lines" |
  awk '{s += $1} END {print s + 0}')

summary=$(grep "^mmtune_blas: summary:" stderr.txt | tail -n 1)
field() { sed -nE "s/.* $1=([^ ]+).*/\1/p" <<<"$summary"; }
if [ -z "$summary" ]; then
  fail "no summary line from the shim on stderr: was it preloaded?"
  exit 1
fi
gpu=$(field gpu) cpu=$(field cpu) noop=$(field noop) errors=$(field errors)
fallbacks=$(field fallbacks) state=$(field gpu_state)
echo "--- SGEMM calls: report $expected; shim gpu=$gpu cpu=$cpu noop=$noop errors=$errors" \
  "fallbacks=$fallbacks gpu_state=$state"
[ "$expected" -gt 0 ] || fail "the report counts no SGEMM calls"
[ $((gpu + cpu + noop)) -eq "$expected" ] ||
  fail "the shim computed $((gpu + cpu + noop)) calls, the report counts $expected"
[ "$errors" -gt 0 ] || fail "no argument error reached the shim"
if [ "$mode" = cpu ]; then
  [ "$cpu" -gt 0 ] || fail "no call ran on the CPU path"
elif [ "$state" = -1 ] &&
  grep -qE "gpu: unavailable \(MMT_ERR_NO_(DRIVER|DEVICE):" <<<"$summary"; then
  [ $failed -eq 0 ] || exit 1
  echo "skip: no GPU (the program passed on the CPU path)"
  exit 77
else
  [ "$state" = 1 ] || fail "the GPU was not used (gpu_state=$state)"
  [ "$cpu" -eq 0 ] && [ "$fallbacks" -eq 0 ] ||
    fail "$cpu calls ran on the CPU ($fallbacks fallbacks)"
  [ "$gpu" -gt 0 ] || fail "no call ran on the GPU"
fi
[ $failed -eq 0 ] && echo "conformance ($mode): passed"
exit $failed
