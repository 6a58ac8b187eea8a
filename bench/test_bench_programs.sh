#!/usr/bin/env bash
# test_bench_programs.sh DISPATCH_BENCH CALLS_BENCH MATMUL_BENCH: runs mmtune-dispatch-bench,
# mmtune-calls-bench and mmtune-matmul-bench with a fresh cache folder (no database: template defaults).  Without a
# GPU each must exit 1 with exactly one line "<program>: mmt_open: MMT_ERR_...: <reason>";
# with one, exit 0 having printed its figures.  Bad arguments must exit 2 with one line
# naming the program.  Prints "N passed, N failed".
set -u
bench=$1
calls=$2
matmul=$3
tmp=$(mktemp -d /tmp/mmt_bench_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp
unset MMTUNE_DB MMTUNE_CACHE_DIR
passed=0 failed=0
check() { # name, then the command
  local name=$1; shift
  if "$@" >"$tmp/$name.log" 2>&1; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAILED: $name"; cat "$tmp/$name.log"; fi
}
no_gpu_line() { # program output rc: exit 1 and the one line of a failed mmt_open
  [ "$3" -eq 1 ] && [ "$(echo "$2" | wc -l)" -eq 1 ] &&
    echo "$2" | grep -qE "^$1: mmt_open: MMT_ERR_(NO_DRIVER|NO_DEVICE|CUDA): "
}
dispatch_runs() {
  local out rc
  out=$("$bench" --calls 100000 --runs 3 128 128 128 2>&1); rc=$?
  echo "$out"
  if [ $rc -eq 0 ]; then
    echo "$out" | grep -q "^  mmt_sgemm overhead *median .* ns" &&
      echo "$out" | grep -q "^  first call *median .* ms"
    return
  fi
  no_gpu_line mmtune-dispatch-bench "$out" $rc
}
calls_runs() {
  local out rc
  out=$("$calls" --dtype f32 256 256 256 2>&1); rc=$?
  echo "$out"
  if [ $rc -eq 0 ]; then
    echo "$out" | grep -qE "^mmtune +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" &&
      echo "$out" | grep -qE "^cuBLAS +[0-9.]+" && echo "$out" | grep -q "^ratio "
    return
  fi
  no_gpu_line mmtune-calls-bench "$out" $rc
}
matmul_runs() { # the host family alone: quick, and what a machine without a GPU refuses
  local out rc
  out=$("$matmul" --family host 2>&1); rc=$?
  echo "$out"
  if [ $rc -eq 0 ]; then
    echo "$out" | grep -qE "^host +256x256x256 f16: mmt_gemm [0-9]+ ns a call"
    return
  fi
  no_gpu_line mmtune-matmul-bench "$out" $rc
}
usage_error() { # program, arguments...: exit 2 and one line naming the program
  local prog=$1 out rc
  shift
  out=$("$prog" "$@" 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] &&
    echo "$out" | grep -q "^$(basename "$prog"): "
}
check dispatch_runs dispatch_runs
check dispatch_zero_m usage_error "$bench" 0 1 1
check dispatch_two_sizes usage_error "$bench" 4 4
check dispatch_bad_calls usage_error "$bench" --calls 0
check dispatch_unknown_option usage_error "$bench" --frobnicate
check dispatch_help "$bench" --help
check calls_runs calls_runs
check calls_zero_k usage_error "$calls" 1 1 0
check calls_two_sizes usage_error "$calls" 4 4
check calls_bad_dtype usage_error "$calls" --dtype f8
check calls_bad_layout usage_error "$calls" --layout nx
check calls_too_many usage_error "$calls" --calls 5000
check calls_help "$calls" --help
check matmul_runs matmul_runs
check matmul_bad_family usage_error "$matmul" --family linear,gemv
family_list() { # the bad family's line names every family, grouped the last
  usage_error "$matmul" --family moe | grep -q "quantize, grouped, coldstart, online (try --help)"
}
check matmul_family_list family_list
check matmul_bad_dtype usage_error "$matmul" --dtype f32
check matmul_bad_batches usage_error "$matmul" --batches 16,0
check matmul_bad_runs usage_error "$matmul" --runs 1
check matmul_no_weights usage_error "$matmul" --weights /nonexistent.txt
check matmul_no_online_shapes usage_error "$matmul" --family online --online-shapes 0
check matmul_bad_online_budget usage_error "$matmul" --online-budget 1.5
check matmul_bad_online_limit usage_error "$matmul" --online-limit -3
check matmul_help "$matmul" --help
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
