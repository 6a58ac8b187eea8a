#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR: installs the build into a temporary prefix, checks what
# libmmtune.so exports (exactly the functions mmtune.h declares), then builds
# examples/sgemm_app.c against the install four ways -- find_package and pkg-config, each
# with the shared and the static library -- and runs each.  With a GPU the app must print its
# result and exit 0; without one it must exit 1 with mmt_open's one-line reason.  A
# shared-linked app must load the installed libmmtune.so, a static one none; neither links
# the CUDA driver.  Prints "N passed, N failed".
set -u
build=$1 src=$2
tmp=$(mktemp -d /tmp/mmt_install_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix lib=$tmp/prefix/lib
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
links_right() { # app shared|static: the libraries the loader resolves for it
  local deps
  deps=$(ldd "$1") || return 1
  echo "$deps"
  if echo "$deps" | grep -qE "not found|libcuda\.so"; then return 1; fi
  if [ "$2" = shared ]; then echo "$deps" | grep -q "libmmtune\.so\.[0-9.]* => $lib/"
  else ! echo "$deps" | grep -q "libmmtune"; fi
}
exports_right() { # the dynamic symbols libmmtune.so defines == the functions mmtune.h declares
  nm -D --defined-only "$lib/libmmtune.so" | awk '{print $3}' | sort >"$tmp/exported"
  sed -nE 's/^[a-z][^(]*[ *](mmt_[a-z0-9_]+)\(.*/\1/p' "$prefix/include/mmtune.h" |
    sort -u >"$tmp/declared"
  echo "exported:"; cat "$tmp/exported"
  [ -s "$tmp/declared" ] && diff "$tmp/declared" "$tmp/exported"
}
cuda_lib=$(dirname "$(find /usr/local/cuda/ -name 'libcudart.so' -print -quit 2>/dev/null)")

check install cmake --install "$build" --prefix "$prefix"
check installed_files test -f "$prefix/include/mmtune.h" -a -x "$prefix/bin/mmtune" \
  -a -f "$prefix/share/mmtune/templates/reg_tiled.lua" \
  -a -f "$lib/cmake/mmtune/mmtuneConfig.cmake" -a -f "$lib/libmmtune.a" \
  -a -L "$lib/libmmtune.so" -a -f "$lib/pkgconfig/mmtune.pc" -a -f "$lib/pkgconfig/mmtune-static.pc"
check soname sh -c "objdump -p '$lib/libmmtune.so' | grep -E 'SONAME +libmmtune\.so\.[0-9]+\.[0-9]+$'"
check exports exports_right

check cmake_configure cmake -S "$src/examples" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$prefix"
check cmake_build cmake --build "$tmp/ex"
check cmake_shared_links links_right "$tmp/ex/sgemm_app" shared
check cmake_shared_runs runs_right "$tmp/ex/sgemm_app"
check cmake_static_links links_right "$tmp/ex/sgemm_app_static" static
check cmake_static_runs runs_right "$tmp/ex/sgemm_app_static"

export PKG_CONFIG_PATH="$lib/pkgconfig"
app_cc() { # output, pkg-config package, extra flags...
  local out=$1 pkg=$2; shift 2
  cc -o "$out" "$src/examples/sgemm_app.c" -I/usr/local/cuda/include \
    $(pkg-config --cflags --libs "$pkg") "$@" -L"$cuda_lib" -lcudart -lm
}
check pkgconfig_shared_build app_cc "$tmp/app_pc" mmtune -Wl,-rpath,"$lib"
check pkgconfig_shared_links links_right "$tmp/app_pc" shared
check pkgconfig_shared_runs runs_right "$tmp/app_pc"
check pkgconfig_static_build app_cc "$tmp/app_pc_static" mmtune-static
check pkgconfig_static_links links_right "$tmp/app_pc_static" static
check pkgconfig_static_runs runs_right "$tmp/app_pc_static"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
