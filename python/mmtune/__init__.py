"""mmtune: tuned GPU matrix multiplication (libmmtune) on CUDA arrays from Python.

    import torch, mmtune
    a = torch.randn(1000, 500, device="cuda"); b = torch.randn(500, 300, device="cuda")
    c = mmtune.gemm(a, b)                     # C = A B, a new tensor, torch's current stream
    mmtune.gemm(a, b, c, alpha=2, beta=1)     # C = 2 A B + C, in place
    print(mmtune.explain(a, b))               # which kernel, and on which measurement
    y = mmtune.matmul(x, w, trans_b=True, bias=b, act="gelu")   # a Linear layer, one kernel
    q, s = mmtune.quantize(w, torch.float8_e4m3fn, "128x128")   # FP8 operands and scales
    y = mmtune.grouped_matmul(x, w_experts, offsets, trans_b=True)  # mixture of experts

Pure Python over ctypes: libmmtune.so is found through $MMTUNE_LIBRARY, the Python prefix's
lib folder, or the loader (see mmtune._lib).  python/README.md has the details.
"""

from ._core import Choice, Context, default_context, explain, explain_shape, gemm, open
from ._lib import Error, LibraryNotFoundError, library_path
from ._grouped import grouped_matmul
from ._matmul import matmul
from ._quantize import quantize

__version__ = "0.1.0"
__all__ = ["gemm", "matmul", "grouped_matmul", "quantize", "explain", "explain_shape", "open", "default_context", "Context",
           "Choice", "Error", "LibraryNotFoundError", "library_path"]
