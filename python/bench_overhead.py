"""Per-call host time of mmtune.gemm against a direct ctypes call of mmt_gemm on the same torch
tensors: what the Python layer adds (reading three tensors, the current stream, the layout
mapping, the context lookup).  Needs torch and a GPU.

    MMTUNE_LIBRARY=build/runtime/libmmtune.so PYTHONPATH=python \
        python3 python/bench_overhead.py [--shape 32x32x32] [--dtype f16] [--calls 200] [--reps 21]
        [--fp8]

Each way is timed over batches of --calls calls launched back to back (host time only: the
GPU is synchronized between batches, untimed), --reps batches interleaved with the other ways;
the median and the minimum per call are printed, then each way's excess over the direct call.
--fp8 adds the FP8 operators (torch.ops.mmtune.scaled_matmul, e4m3 a and b with per-row
scales, and torch.ops.mmtune.quantize by rows of a) against mmt_matmul and mmt_quantize through
ctypes with their outputs allocated by torch.empty.
Keep the shape small: a kernel longer than a call's host time fills the launch queue, and the
host then waits for the GPU.
"""

import argparse
import contextlib
import ctypes
import importlib
import statistics
import sys
import time

import torch

import mmtune
from mmtune import _lib

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def fp8_ways(ctx, lib, a, b, m, n, k, dt, stream):
    """The FP8 operators and their direct calls: e4m3 a (m x k) and b^T (n x k) with per-row
    scales into bf16; a (of mmtune's dtype dt) quantized by rows."""
    e4m3 = torch.float8_e4m3fn
    qa, qb = a.float().to(e4m3), b.T.contiguous().float().to(e4m3)
    sa, sb = torch.ones(m, device="cuda"), torch.ones(n, device="cuda")
    h = ctx._h

    def matmul_direct():
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        d = _lib.MatmulDesc(order=0, trans_a=0, trans_b=1, m=m, n=n, k=k, in_type=_lib.E4M3,
                            out_type=_lib.BF16, alpha=1.0, a=qa.data_ptr(), lda=k,
                            b=qb.data_ptr(), ldb=k, d=out.data_ptr(), ldd=n, batch=1,
                            scale_mode=_lib.SCALE_MODES["vectors"], scale_row=sa.data_ptr(),
                            scale_col=sb.data_ptr())
        rc = lib.mmt_matmul(h, ctypes.byref(d), stream)
        if rc:
            raise ctx.error(rc)

    def quantize_direct():
        q = torch.empty(m, k, device="cuda", dtype=e4m3)
        s = torch.empty(m, device="cuda")
        d = _lib.QuantizeDesc(rows=m, cols=k, in_type=dt, out_type=_lib.E4M3, x=a.data_ptr(), ldx=k, q=q.data_ptr(), ldq=k,
                              scale=s.data_ptr(), mode=_lib.QUANT_MODES["row"])
        rc = lib.mmt_quantize(h, ctypes.byref(d), stream)
        if rc:
            raise ctx.error(rc)

    smm, quant = torch.ops.mmtune.scaled_matmul, torch.ops.mmtune.quantize
    return {"torch.empty + FP8 mmt_matmul": matmul_direct,
            "torch.ops.mmtune.scaled_matmul": lambda: smm(qa, qb, "vectors", sa, sb, None, None,
                                                          False, torch.bfloat16, False),
            "torch.empty x2 + mmt_quantize": quantize_direct,
            "torch.ops.mmtune.quantize": lambda: quant(a, e4m3, "row")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="32x32x32", help="MxNxK")
    ap.add_argument("--dtype", default="f16", choices=DTYPES)
    ap.add_argument("--calls", type=int, default=200, help="calls a timed batch")
    ap.add_argument("--reps", type=int, default=21, help="batches of each way")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--fp8", action="store_true", help="the FP8 operators too")
    args = ap.parse_args()
    m, n, k = (int(x) for x in args.shape.lower().split("x"))
    dtype = DTYPES[args.dtype]
    torch.cuda.set_device(args.device)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c = torch.empty(m, n, device="cuda", dtype=dtype)

    ctx = mmtune.default_context(args.device)
    lib = _lib.load()
    fn, h = lib.mmt_gemm, ctx._h
    dt = {torch.float32: _lib.F32, torch.float16: _lib.F16, torch.bfloat16: _lib.BF16}[dtype]
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    stream = torch.cuda.current_stream().cuda_stream
    gemm = mmtune.gemm

    def direct():
        rc = fn(h, 0, 0, 0, m, n, k, 1.0, pa, k, pb, n, 0.0, pc, n, dt, stream)
        if rc:
            raise ctx.error(rc)

    def direct_alloc():  # what gemm(a, b) does beyond the direct call: torch.empty
        out = torch.empty(m, n, device="cuda", dtype=dtype)
        rc = fn(h, 0, 0, 0, m, n, k, 1.0, pa, k, pb, n, 0.0, out.data_ptr(), n, dt, stream)
        if rc:
            raise ctx.error(rc)

    ways = {
        "mmt_gemm through ctypes": direct,
        "mmtune.gemm(a, b, c)": lambda: gemm(a, b, c),
        "ctx.gemm(a, b, c)": lambda: ctx.gemm(a, b, c),
        "torch.empty + mmt_gemm": direct_alloc,
        "mmtune.gemm(a, b)": lambda: gemm(a, b),
        "torch.matmul(a, b, out=c)": lambda: torch.matmul(a, b, out=c),
    }
    modes = {}  # a way's batches run inside this context (none: as they are)
    try:  # the PyTorch operators (torch.library.custom_op), where this torch has them
        importlib.import_module("mmtune.torch")  # registers torch.ops.mmtune
        mm, mm_out = torch.ops.mmtune.matmul, torch.ops.mmtune.matmul_out
        ways["torch.ops.mmtune.matmul_out"] = lambda: mm_out(c, a, b, None, "col", None, False,
                                                             1.0, 0.0, None, False, False)
        ways["torch.ops.mmtune.matmul"] = lambda: mm(a, b, None, "col", None, False, 1.0, 0.0,
                                                     None, None, False, False)
        # grad mode on, no argument requiring a gradient: the native autograd kernel's fast
        # path (C++), the Python operators' autograd kernel (Python); inference mode leaves
        # the autograd keys out; a weight requiring a gradient records a backward node
        ways["... under torch.inference_mode"] = ways["torch.ops.mmtune.matmul"]
        modes["... under torch.inference_mode"] = torch.inference_mode
        bg = b.detach().requires_grad_()
        ways["... b requiring a gradient"] = lambda: mm(a, bg, None, "col", None, False, 1.0,
                                                        0.0, None, None, False, False)
        if args.fp8:
            ways.update(fp8_ways(ctx, lib, a, b, m, n, k, dt, stream))
    except (ImportError, AttributeError) as e:
        print(f"no PyTorch operators: {e}")
    for name, f in ways.items():  # warm: compile, load, fill every cache
        with modes.get(name, contextlib.nullcontext)():
            for _ in range(50):
                f()
    torch.cuda.synchronize()

    times = {name: [] for name in ways}
    for _ in range(args.reps):
        for name, f in ways.items():
            with modes.get(name, contextlib.nullcontext)():
                t0 = time.perf_counter_ns()
                for _ in range(args.calls):
                    f()
                times[name].append((time.perf_counter_ns() - t0) / args.calls / 1000)
            torch.cuda.synchronize()

    print(f"{torch.cuda.get_device_name()}  {m}x{n}x{k} {args.dtype}  torch {torch.__version__}  "
          f"Python {sys.version.split()[0]}  {args.calls} calls x {args.reps} batches")
    print(f"kernel: {mmtune.explain(a, b, c)}")
    refs = {"mmt_gemm through ctypes": None, "torch.empty + mmt_gemm": None,
            "torch.matmul(a, b, out=c)": None, "mmtune.gemm(a, b)": "torch.empty + mmt_gemm",
            "torch.ops.mmtune.matmul": "torch.empty + mmt_gemm",
            "... under torch.inference_mode": "torch.empty + mmt_gemm",
            "... b requiring a gradient": "torch.empty + mmt_gemm",
            "torch.empty + FP8 mmt_matmul": None, "torch.ops.mmtune.scaled_matmul":
            "torch.empty + FP8 mmt_matmul", "torch.empty x2 + mmt_quantize": None,
            "torch.ops.mmtune.quantize": "torch.empty x2 + mmt_quantize"}
    print(f"{'per call, host':34s} {'median us':>10s} {'min us':>8s} {'excess: median':>15s} "
          f"{'min':>6s}")
    for name, ts in times.items():
        ref = refs.get(name, "mmt_gemm through ctypes")
        excess = "" if ref is None else (
            f"{statistics.median(ts) - statistics.median(times[ref]):+15.2f} "
            f"{min(ts) - min(times[ref]):+6.2f}")
        print(f"{name:34s} {statistics.median(ts):10.2f} {min(ts):8.2f} {excess}")
    print("excess: over the direct call (mmtune.gemm(a, b) and torch.ops.mmtune.matmul: over "
          "torch.empty + the direct call; the FP8 operators: over theirs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
