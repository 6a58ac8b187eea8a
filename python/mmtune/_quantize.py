"""quantize: include/mmtune.h's mmt_quantize on torch tensors -- FP8 operands for matmul, with
one scale per tensor, row, 1 x 128 or 128 x 128 group, in the layouts matmul's scale modes
read."""

import ctypes

from . import _arrays, _lib
from ._core import _context_for
from ._matmul import _fp8_types, _mmt_dtype, _torch

# The scale tensor's shape for each mode (rows r, cols c; RB, CB the 128-blocks): the
# library's layout, so that .flatten() is what matmul reads.
_SHAPES = {
    "tensor": lambda r, c: (),
    "row": lambda r, c: (r,),
    "1x128": lambda r, c: (-(-c // 128), r),
    "128x128": lambda r, c: (-(-r // 128), -(-c // 128)),
}


def quantize(x, dtype=None, mode="tensor", *, pow2_scales=False, out=None, scale=None,
             given_scale=None, amax=None, stream=None, context=None):
    """(q, scale): x cast to FP8 with the dequantization scales of its groups, x ~ q * scale,
    in one pass over x (two for mode "tensor" unless its scale is given), asynchronously on the
    stream.

    x:      a 2-D torch CUDA tensor, float32, float16 or bfloat16, row-major (unit column
            stride; any row pitch).
    dtype:  torch.float8_e4m3fn (the default) or torch.float8_e5m2.
    mode:   "tensor" (scale: a 0-d tensor), "row" (one a row: (rows,)), "1x128" (one a row and
            128 columns: (ceil(cols/128), rows), matmul's block scales of a), "128x128" (one a
            tile: (ceil(rows/128), ceil(cols/128)), matmul's block scales of a weight stored
            N x K).
    pow2_scales: round each scale up to a power of two.
    out, scale: where to write (q: rows x cols of dtype, row-major; scale: contiguous float32
            of the mode's shape), or None for new tensors.
    given_scale: mode "tensor" only, a float32 CUDA tensor of one element: the scale to cast
            with (static or delayed scaling), read on the device, so x is read once; scale
            receives it (given_scale may be scale).
    amax:   with given_scale, a float32 CUDA tensor of one element that receives x's largest
            finite |x| (the next step's delayed scale is amax / FP8_MAX).
    For a group, scale = max(amax / FP8_MAX, FLT_MIN) and q = round(x / scale), saturating;
    infinities saturate and NaN stays NaN (mmtune.h, mmt_quantize).
    Raises ValueError, TypeError and Error (the library's checks)."""
    th = _torch()
    torch = th.torch
    fp8 = _fp8_types(th)
    if dtype is None:
        dtype = getattr(torch, "float8_e4m3fn", None)
    if dtype not in fp8:
        raise TypeError(f"dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype}")
    if mode not in _SHAPES:
        raise ValueError(f"mode must be one of {', '.join(_SHAPES)}, got {mode!r}")
    if type(x) is not th.tensor and not isinstance(x, th.tensor):
        raise TypeError(f"x must be a torch tensor, got {type(x).__name__}")
    dev = x.get_device()
    if dev < 0:
        raise TypeError(f"x is a torch tensor on {x.device}, not on a CUDA device")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D, got shape {tuple(x.shape)}")
    in_type = _mmt_dtype(th, x.dtype, "x")
    rows, cols = x.shape
    if cols > 1 and x.stride(1) != 1:
        raise ValueError(f"x must be row-major (unit column stride), got strides {x.stride()}")
    if out is None:
        out = torch.empty((rows, cols), dtype=dtype, device=x.device)
    if out.dtype != dtype or tuple(out.shape) != (rows, cols) or out.get_device() != dev or \
            (cols > 1 and out.stride(1) != 1):
        raise ValueError(f"out must be a row-major {rows}x{cols} {dtype} tensor on {x.device}, "
                         f"got {out.dtype} {tuple(out.shape)} strides {out.stride()} on "
                         f"{out.device}")
    shape = _SHAPES[mode](rows, cols)
    if scale is None:
        scale = torch.empty(shape, dtype=torch.float32, device=x.device)
    if scale.dtype != torch.float32 or tuple(scale.shape) != shape or \
            not scale.is_contiguous() or scale.get_device() != dev:
        raise ValueError(f"scale must be a contiguous float32 tensor of shape {shape} on "
                         f"{x.device}, got {scale.dtype} {tuple(scale.shape)}")
    one = {}
    for name, t in (("given_scale", given_scale), ("amax", amax)):
        if t is None:
            continue
        if not isinstance(t, th.tensor) or t.dtype != torch.float32 or t.numel() != 1 or \
                t.get_device() != dev:
            raise ValueError(f"{name} must be a float32 tensor of one element on {x.device}, "
                             f"got {type(t).__name__} {getattr(t, 'dtype', '')}")
        one[name] = t.data_ptr()
    d = _lib.QuantizeDesc(rows=rows, cols=cols, in_type=in_type, out_type=fp8[dtype],
                          x=x.data_ptr(), ldx=x.stride(0) if rows > 1 else max(1, cols),
                          q=out.data_ptr(), ldq=out.stride(0) if rows > 1 else max(1, cols),
                          scale=scale.data_ptr(), mode=_lib.QUANT_MODES[mode],
                          pow2_scales=1 if pow2_scales else 0, **one)
    ctx = _context_for(context, dev)
    s = th.raw_stream(dev) if stream is None else _arrays.stream_handle(stream)
    rc = ctx._lib.mmt_quantize(ctx._h, ctypes.byref(d), s)
    if rc:
        raise ctx.error(rc)
    return out, scale
