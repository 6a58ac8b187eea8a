#!/usr/bin/env bash
# Builds mmtune's native PyTorch operators (python/csrc/torch_ops.cpp) against one torch:
# mmtune.torch loads the library from $MMTUNE_TORCH_OPS, else from beside libmmtune.so, and
# falls back to its Python operators without it.  The library fits that torch only (its C++
# ABI): rebuild it when torch changes.
# Usage: scripts/build-torch-ops.sh [OUT.so] [TORCH_DIR]
#   OUT.so     default build/runtime/libmmtune_torch.so (beside the build's libmmtune.so)
#   TORCH_DIR  the torch package's folder (default: python3's `import torch`)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/runtime/libmmtune_torch.so}
torch_dir=${2:-$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')}
[ -f "$torch_dir/include/torch/library.h" ] || {
  echo "build-torch-ops: no torch headers under $torch_dir/include" >&2
  exit 1
}
cuda=${CUDA_HOME:-/usr/local/cuda}
# torch's wheels since 2.7 use the C++11 ABI; an older or a source build says so itself
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null || echo 1)
mkdir -p "$(dirname "$out")"
"${CXX:-g++}" -std=c++20 -O2 -fPIC -shared -fvisibility=hidden -D_GLIBCXX_USE_CXX11_ABI="$abi" \
  -Iinclude -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include" \
  -I"$cuda/include" python/csrc/torch_ops.cpp -o "$out" \
  -L"$torch_dir/lib" -Wl,--no-as-needed -lc10 -lc10_cuda -ltorch_cpu -Wl,--as-needed
echo "build-torch-ops: $out (torch at $torch_dir)"
