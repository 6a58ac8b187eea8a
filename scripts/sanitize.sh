#!/usr/bin/env bash
# Builds mmtune with AddressSanitizer and UBSan in ./build-san (MMT_SANITIZE=ON, warnings as
# errors) and runs the whole CTest suite there: any failure, leak or sanitizer report (UBSan
# stops the program at its first) fails the run.  Without a GPU the GPU tests skip, as in the
# plain build; cmake/sanitize.cmake says how the tests whose program is not ours (python3,
# netlib's BLAS test programs) load the sanitized libraries.  Each test runs 1-3x as long as
# in the plain build: on 2 busy cores the suite took 10-18 minutes, test_sweep_plan (7 minutes
# alone), test_cli and the template tests the longest.
# Usage: scripts/sanitize.sh [CTEST ARGS...]   (e.g. -R test_model)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
jobs=$(nproc)
cmake -S . -B build-san -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMMT_SANITIZE=ON -DMMT_WERROR=ON \
  >/dev/null
cmake --build build-san -j "$jobs" >build-san/build.log 2>&1 ||
  { tail -n 30 build-san/build.log; echo "sanitize: the build failed (build-san/build.log)" >&2;
    exit 1; }
# As each folder's mmt_sanitize_tests() sets for its tests, for any test it does not reach.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
start=$SECONDS
status=0
(cd build-san && ctest -j "$jobs" --output-on-failure "$@") || status=$?
echo "sanitize: ctest exit $status after $((SECONDS - start)) s"
exit "$status"
