#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR: installs the build into a temporary prefix, then builds
# examples/sgemm_app.c against it both ways (find_package and pkg-config) and runs both.
# With a GPU the app must print its result and exit 0; without one it must exit 1 with
# mmt_open's one-line reason.  Prints "N passed, N failed".
set -u
build=$1 src=$2
tmp=$(mktemp -d /tmp/mmt_install_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() { # name, then the command
  local name=$1; shift
  if "$@" >"$tmp/$name.log" 2>&1; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAILED: $name"; cat "$tmp/$name.log"; fi
}
runs_right() { # the app's exit and output must match whether a GPU is present
  local out rc
  out=$("$1" 2>&1); rc=$?
  echo "$out"
  if [ $rc -eq 0 ]; then echo "$out" | grep -q "max abs error"; return; fi
  [ $rc -eq 1 ] && echo "$out" | grep -qE "^sgemm_app: mmt_open: MMT_ERR_(NO_DRIVER|NO_DEVICE|CUDA): "
}
cuda_lib=$(dirname "$(find /usr/local/cuda/ -name 'libcudart.so' -print -quit 2>/dev/null)")

check install cmake --install "$build" --prefix "$tmp/prefix"
check installed_files test -f "$tmp/prefix/include/mmtune.h" -a -x "$tmp/prefix/bin/mmtune" \
  -a -f "$tmp/prefix/share/mmtune/templates/reg_tiled.lua" \
  -a -f "$tmp/prefix/lib/cmake/mmtune/mmtuneConfig.cmake"
check cmake_configure cmake -S "$src/examples" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$tmp/prefix"
check cmake_build cmake --build "$tmp/ex"
check cmake_app_runs runs_right "$tmp/ex/sgemm_app"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
check pkgconfig_build sh -c "cc -o '$tmp/app_pc' '$src/examples/sgemm_app.c' \
  -I/usr/local/cuda/include \$(pkg-config --cflags --libs mmtune) -L'$cuda_lib' -lcudart -lm"
check pkgconfig_app_runs runs_right "$tmp/app_pc"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
