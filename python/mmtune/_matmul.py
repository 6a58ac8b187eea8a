"""matmul: include/mmtune.h's mmt_matmul on torch tensors -- a Linear layer's bias and
activation, a gated MLP, a batch of problems (3-D tensors), an output type of its own, all in
the GEMM's kernel.

Each matrix (the last two dimensions of a tensor) is row- or column-major with any padding,
as for gemm(); D's order is the call's, and C must be stored in it too.  A 3-D tensor is a
batch: its first stride is the batch stride; a 2-D operand (or a batch of 1) is shared by
every problem (stride 0).
"""

import ctypes
import sys

from . import _arrays, _lib
from ._core import _context_for, _plan, _storage
from ._lib import BIAS_COL, BIAS_NONE, BIAS_ROW, F32, ROW_MAJOR, TF32


def _torch():
    """The torch handler: made here when matmul is the process's first mmtune call on a
    tensor (gemm's fast path makes it otherwise)."""
    th = _arrays.TORCH
    if th is None:
        torch = sys.modules.get("torch")
        if torch is None:
            raise TypeError("mmtune.matmul takes torch tensors (torch is not imported)")
        th = _arrays.handler(torch.Tensor)
    return th


def _matrix(th, t, name):
    """(batch, rows, cols, batch stride, row stride, col stride) of a 2-D or 3-D CUDA tensor."""
    if type(t) is not th.tensor and not isinstance(t, th.tensor):
        raise TypeError(f"{name} must be a torch tensor, got {type(t).__name__}")
    if t.get_device() < 0:
        raise TypeError(f"{name} is a torch tensor on {t.device}, not on a CUDA device")
    if t.dim() == 2:
        return (1, t.shape[0], t.shape[1], 0) + tuple(t.stride())
    if t.dim() == 3:
        return (t.shape[0], t.shape[1], t.shape[2], t.stride(0) if t.shape[0] > 1 else 0) + \
            tuple(t.stride()[1:])
    raise ValueError(f"{name} must be 2-D or 3-D (a batch of matrices), got shape "
                     f"{tuple(t.shape)}")


def _mmt_dtype(th, dtype, name, fp8=False):
    dt = th.dtypes.get(dtype)
    if dt is None and fp8:
        dt = _fp8_types(th).get(dtype)
    if dt is None:
        raise TypeError(f"{name} has dtype {dtype}; mmtune takes float32, float16 or bfloat16"
                        + (" (or float8_e4m3fn, float8_e5m2)" if fp8 else ""))
    return dt


def _input_types(th, a, b):
    """mmt_matmul_desc's in_type and b_type of operands a and b: one dtype, or two FP8 ones."""
    in_type = _mmt_dtype(th, a.dtype, "a", fp8=True)
    if b.dtype is a.dtype:
        return in_type, 0
    fp8 = _fp8_types(th)
    if a.dtype not in fp8 or b.dtype not in fp8:
        raise TypeError(f"a and b must have one dtype (or two FP8 dtypes), got {a.dtype} "
                        f"and {b.dtype}")
    return in_type, fp8[b.dtype]


def _fp8_types(th):
    """torch's FP8 dtypes that mmtune reads (those the installed torch has)."""
    t = th.torch
    return {getattr(t, n): v for n, v in (("float8_e4m3fn", _lib.E4M3), ("float8_e5m2", _lib.E5M2))
            if hasattr(t, n)}


def _scales(th, v, name, count, device):
    """The device pointer of a contiguous float32 tensor of `count` elements (any shape)."""
    if type(v) is not th.tensor and not isinstance(v, th.tensor):
        raise TypeError(f"{name} must be a torch tensor, got {type(v).__name__}")
    if v.numel() != count or v.dtype != th.torch.float32 or not v.is_contiguous():
        raise ValueError(f"{name} must be a contiguous float32 tensor of {count} elements, got "
                         f"{v.dtype} of shape {tuple(v.shape)}")
    if v.get_device() != device:
        raise ValueError(f"{name} is on {v.device}, the operands on cuda:{device}")
    return v.data_ptr()


def _vector(th, v, name, length, dtypes, device):
    """The device pointer of a contiguous 1-D tensor of `length` elements of one of dtypes."""
    if type(v) is not th.tensor and not isinstance(v, th.tensor):
        raise TypeError(f"{name} must be a torch tensor, got {type(v).__name__}")
    if v.dim() != 1 or v.shape[0] != length:
        raise ValueError(f"{name} must be a vector of {length} elements, got shape "
                         f"{tuple(v.shape)}")
    if v.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {v.dtype}; it must be "
                        f"{' or '.join(dict.fromkeys(str(d) for d in dtypes))}")
    if v.get_device() != device:
        raise ValueError(f"{name} is on {v.device}, the operands on cuda:{device}")
    if v.shape[0] > 1 and v.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous (stride 1), got stride {v.stride(0)}")
    return v.data_ptr()


def matmul(a, b, *, bias=None, bias_mode="col", act=None, gated=False, scale_row=None,
           scale_col=None, alpha=1.0, beta=0.0, c=None, out=None, out_dtype=None,
           trans_a=False, trans_b=False, allow_tf32=False, scale_mode="vectors", fast_accum=False,
           scale_d=None, amax=None, stream=None, context=None):
    """D = act(alpha * scale_row[i] * scale_col[j] * (op(a) op(b))[i, j] + bias + beta * c),
    computed in fp32 in one kernel and rounded once to D's dtype; returns D.

    a, b:      torch CUDA tensors, 2-D (M x K, K x N) or 3-D (a batch of them; a 2-D one is
               shared by every problem); float32, float16 or bfloat16, the same for both.
    trans_a/b: op(X) = X.mT when true.  A Linear layer's x W^T is matmul(x, W, trans_b=True).
    bias:      a vector of N (bias_mode "col", the default) or of M ("row"), float32 or D's
               dtype.
    act:       None, "relu", "gelu" (erf, PyTorch's default), "gelu_tanh", "silu".
    gated:     SwiGLU / GeGLU: op(b) has 2N columns, gate and up projection interleaved by
               column (2j the gate of output j, 2j + 1 its up); D = act(gate) * up + beta * c.
               For a Linear weight [W_gate; W_up] (2N x K) that is
               torch.stack([W_gate, W_up], 1).reshape(2 * N, K) with trans_b=True.
    scale_row, scale_col: float32 vectors of M and of op(b)'s columns (scale_mode "vectors").
    FP8:       a and b of torch.float8_e4m3fn or float8_e5m2 (any pair), a M x K row-major and b N x K with trans_b=True (Hopper's FP8
               layout), with scale_mode "tensor" (scale_row, scale_col: one float each, a's and
               b's) or "block" (a's 1 x 128 scales, float[ceil(K/128)][M], and b's 128 x 128,
               float[ceil(N'/128)][ceil(K/128)]: what mmtune.quantize gives with "1x128" and
               "128x128"), or "vectors" (per row of a, per column of op(b));
               fast_accum=True lets kernels skip the promotion of FP8 sums into fp32.
               D may be FP8 too (out_dtype float8_*): D = value * scale_d (a float32 tensor
               of one element, None: 1), saturated, and amax (one float32, or None) receives
               the largest |value| before the scale; then beta is 0 and a bias float32.
    c:         read when beta != 0; may be out itself (in place).
    out:       D, or None: a new row-major tensor ((batch,) M x N) of out_dtype (None: a's).
    allow_tf32, stream, context: as for gemm().
    Raises ValueError, TypeError (shapes, dtypes, devices, strides) and Error (the library's
    checks: overlapping operands, unsupported problems)."""
    th = _torch()
    ba, ra, ca, sba, sa0, sa1 = _matrix(th, a, "a")
    bb, rb, cb, sbb, sb0, sb1 = _matrix(th, b, "b")
    dev = a.get_device()
    if b.get_device() != dev:
        raise ValueError(f"a is on {a.device} but b on {b.device}")
    in_type, b_type = _input_types(th, a, b)
    if allow_tf32 and in_type == F32:
        in_type = TF32
    m, k = (ca, ra) if trans_a else (ra, ca)
    kb, nb = (cb, rb) if trans_b else (rb, cb)
    if k != kb:
        raise ValueError(f"inner dimensions differ: op(a) is {m}x{k} but op(b) is {kb}x{nb}")
    if gated and nb % 2:
        raise ValueError(f"gated needs an even number of columns of op(b) (gate, up), got {nb}")
    n = nb // 2 if gated else nb
    batch = max(ba, bb)
    for name, count in (("a", ba), ("b", bb)):
        if count not in (1, batch):
            raise ValueError(f"{name} has a batch of {count}, the other operand {batch}")
    batched = a.dim() == 3 or b.dim() == 3
    if out is None:
        dtype = a.dtype if out_dtype is None else out_dtype
        out = th.torch.empty((batch, m, n) if batched else (m, n), dtype=dtype, device=a.device)
    bd, rd, cd, sbd, sd0, sd1 = _matrix(th, out, "out")
    if (rd, cd) != (m, n) or bd != batch or out.get_device() != dev:
        raise ValueError(f"out is {tuple(out.shape)} on {out.device}; the result is "
                         f"{(batch, m, n) if batched else (m, n)} on cuda:{dev}")
    out_type = _mmt_dtype(th, out.dtype, "out", fp8=in_type in (_lib.E4M3, _lib.E5M2))
    order, ta, tb, lda, ldb, ldd = _plan(trans_a, trans_b, ra, ca, sa0, sa1, rb, cb, sb0, sb1,
                                         m, n, sd0, sd1)
    d = _lib.MatmulDesc(order=order, trans_a=ta, trans_b=tb, m=m, n=n, k=k, in_type=in_type,
                        out_type=out_type, alpha=alpha, beta=beta, a=a.data_ptr(), lda=lda,
                        b=b.data_ptr(), ldb=ldb, d=out.data_ptr(), ldd=ldd, batch=batch,
                        stride_a=sba if ba > 1 else 0, stride_b=sbb if bb > 1 else 0,
                        stride_d=sbd if batch > 1 else 0, b_type=b_type)
    if c is not None:
        bc, rc_, cc, sbc, sc0, sc1 = _matrix(th, c, "c")
        if (rc_, cc) != (m, n) or bc not in (1, batch) or c.dtype is not out.dtype:
            raise ValueError(f"c is {tuple(c.shape)} {c.dtype}; D is "
                             f"{tuple(out.shape)} {out.dtype}")
        row, ldc = _storage("c", m, n, sc0, sc1, order == ROW_MAJOR)
        if row != (order == ROW_MAJOR):
            raise ValueError("c must be stored in out's order (both row- or column-major)")
        d.c, d.ldc, d.stride_c = c.data_ptr(), ldc, sbc if bc > 1 else 0
    elif beta != 0:
        raise ValueError("beta must be 0 without c")
    if bias is not None:
        if bias_mode not in ("col", "row"):
            raise ValueError(f"bias_mode must be 'col' or 'row', got {bias_mode!r}")
        d.bias_mode = BIAS_COL if bias_mode == "col" else BIAS_ROW
        d.bias = _vector(th, bias, "bias", nb if bias_mode == "col" else m,
                         (th.torch.float32, out.dtype), dev)
        d.bias_type = F32 if bias.dtype == th.torch.float32 else out_type
    else:
        d.bias_mode = BIAS_NONE
    if scale_mode not in _lib.SCALE_MODES:
        raise ValueError(f"scale_mode must be one of {', '.join(_lib.SCALE_MODES)}, got "
                         f"{scale_mode!r}")
    d.scale_mode = _lib.SCALE_MODES[scale_mode]
    d.fast_accum = 1 if fast_accum else 0
    if scale_mode == "vectors":
        if scale_row is not None:
            d.scale_row = _vector(th, scale_row, "scale_row", m, (th.torch.float32,), dev)
        if scale_col is not None:
            d.scale_col = _vector(th, scale_col, "scale_col", nb, (th.torch.float32,), dev)
    else:
        if scale_row is None or scale_col is None:
            raise ValueError(f"scale_mode {scale_mode!r} needs scale_row (a's scales) and "
                             "scale_col (b's)")
        kb = -(-k // 128)
        rows, cols = (1, 1) if scale_mode == "tensor" else (kb * m, -(-nb // 128) * kb)
        d.scale_row = _scales(th, scale_row, "scale_row", rows, dev)
        d.scale_col = _scales(th, scale_col, "scale_col", cols, dev)
    if scale_d is not None:
        d.scale_d = _scales(th, scale_d, "scale_d", 1, dev)
    if amax is not None:
        d.amax = _scales(th, amax, "amax", 1, dev)
    d.gated = 1 if gated else 0
    _launch(th, d, act, dev, stream, context)
    return out


def _launch(th, d, act, dev, stream, context):
    """Sets d's activation and runs mmt_matmul on d, on the stream and context given (None: the
    device's current stream, its default context)."""
    if act not in _lib.ACTIVATIONS:
        raise ValueError(f"act must be one of {', '.join(str(x) for x in _lib.ACTIVATIONS)}, "
                         f"got {act!r}")
    d.act = _lib.ACTIVATIONS[act]
    ctx = _context_for(context, dev)
    s = th.raw_stream(dev) if stream is None else _arrays.stream_handle(stream)
    rc = ctx._lib.mmt_matmul(ctx._h, ctypes.byref(d), s)
    if rc:
        raise ctx.error(rc)
