#!/usr/bin/env bash
# test_sweep_cli.sh SWEEP: mmtune-sweep's command line.  Bad arguments exit 2 with one line
# naming the program and the problem; --list plans without a GPU and ends with the plan's
# size; a run without a GPU exits 77 with one "no GPU" line (with one it is the GPU's sweep,
# run by scripts/gpu-check.sh memcheck, not here).  Prints "N passed, N failed".
set -u
sweep=$1
passed=0 failed=0
expect() { # name, wanted exit code, grep pattern of the whole output, then the command
  local name=$1 want=$2 pattern=$3 out rc
  shift 3
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq "$want" ] && echo "$out" | grep -qE "$pattern"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "FAILED: $name (exit $rc, wanted $want)"; echo "$out" | tail -5
  fi
}
one_line() { [ "$("$@" 2>&1 | wc -l)" -eq 1 ]; }
expect bad_number 2 "^mmtune-sweep: --configs must be an integer in \[0, 1000\], got 'x'$" \
  "$sweep" --configs x
expect unknown_option 2 "^mmtune-sweep: unknown option '--bogus'$" "$sweep" --bogus
expect unknown_template 2 "^mmtune-sweep: --templates: nosuch: template 'nosuch' not found" \
  "$sweep" --templates nosuch --list
if one_line "$sweep" --bogus; then passed=$((passed + 1)); else
  failed=$((failed + 1)); echo "FAILED: a bad argument is more than one line"; fi
expect list 0 "^[0-9]+ cases, [0-9]+ kernels, .* multiply-adds, seed 1$" "$sweep" --list
if [ ! -e /dev/nvidiactl ]; then
  expect no_gpu 77 "^mmtune-sweep: no GPU: " "$sweep" --templates naive
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
