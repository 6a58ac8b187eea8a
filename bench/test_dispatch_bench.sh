#!/usr/bin/env bash
# test_dispatch_bench.sh BENCH: runs mmtune-dispatch-bench with a fresh cache folder (no
# database: template defaults).  Without a GPU it must exit 1 with exactly one line
# "mmtune-dispatch-bench: mmt_open: MMT_ERR_...: <reason>"; with one, exit 0 having printed
# the warm-dispatch and cold-start figures.  Bad arguments must exit 2 with one line.
# Prints "N passed, N failed".
set -u
bench=$1
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
runs_right() {
  local out rc
  out=$("$bench" --calls 100000 --runs 3 128 128 128 2>&1); rc=$?
  echo "$out"
  if [ $rc -eq 0 ]; then
    echo "$out" | grep -q "^  mmt_sgemm overhead *median .* ns" &&
      echo "$out" | grep -q "^  first call *median .* ms"
    return
  fi
  [ $rc -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] &&
    echo "$out" | grep -qE "^mmtune-dispatch-bench: mmt_open: MMT_ERR_(NO_DRIVER|NO_DEVICE|CUDA): "
}
usage_error() { # arguments...: exit 2 and one line naming the problem
  local out rc
  out=$("$bench" "$@" 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "^mmtune-dispatch-bench: "
}
check runs runs_right
check zero_m usage_error 0 1 1
check two_sizes usage_error 4 4
check bad_calls usage_error --calls 0
check unknown_option usage_error --frobnicate
check help "$bench" --help
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
