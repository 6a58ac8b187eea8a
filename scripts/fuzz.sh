#!/usr/bin/env bash
# Fuzzes what mmtune reads from other people -- an export (db import), a database file (db
# merge), a bench CSV (report --bench) -- with libFuzzer under ASan and UBSan, each target for
# SECONDS (default 60) on its corpus in tests/fuzz/corpus.  A crash, a hang (over 10 s), a
# sanitizer report or a broken check (a refused input that changed its destination, a merged
# one that db check refuses) fails the run; libFuzzer leaves the input as crash-* in
# build-fuzz/artifacts.  Prints the inputs each target ran.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: import merge bench_csv)
# Needs clang and its libFuzzer runtime (Debian: clang, libclang-rt-14-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(import merge bench_csv)
command -v clang >/dev/null 2>&1 || { echo "fuzz: clang is required" >&2; exit 2; }
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMMT_FUZZ=ON -DMMT_BUILD_TESTS=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}" >build-fuzz/build.log 2>&1 ||
  { tail -n 30 build-fuzz/build.log; exit 1; }
mkdir -p build-fuzz/artifacts
# the targets' scratch databases (tests/fuzz/fuzz_common.c puts them under $TMPDIR), removed after
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
passed=0
failed=0
for t in "${targets[@]}"; do
  # a working copy of the corpus: what the run finds stays out of the tree
  work=build-fuzz/corpus-$t
  mkdir -p "$work"
  cp -n tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  log=build-fuzz/fuzz-$t.log
  mask=1 # stdout; the CSV reader also reports each refusal on stderr, which would flood the log
  [ "$t" = bench_csv ] && mask=3
  if build-fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
       -max_len=262144 -close_fd_mask="$mask" -artifact_prefix=build-fuzz/artifacts/"$t"- \
       "$work" >"$log" 2>&1; then
    runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -n 1 | grep -o '[0-9]*' || echo "?")
    echo "fuzz $t: ok, $runs inputs in ${seconds} s"
    passed=$((passed + 1))
  else
    echo "fuzz $t: FAILED (see $log and build-fuzz/artifacts)"
    tail -n 30 "$log"
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
