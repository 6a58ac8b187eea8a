"""grouped_matmul: include/mmtune.h's grouped mmt_matmul (a mixture-of-experts layer's GEMMs in
one launch) on torch tensors.  Routing stays on the device: the rows of each expert are read
by the kernel from `rows`, so the host never syncs and a CUDA graph replays with new routings.
"""

from . import _lib
from ._core import _storage
from ._lib import BIAS_COL, BIAS_NONE, F32, ROW_MAJOR
from ._matmul import _input_types, _launch, _matrix, _mmt_dtype, _scales, _torch

_LAYOUTS = {"contiguous": 1, "masked": 2}  # mmt_group_mode


def grouped_matmul(a, b, rows, *, layout="contiguous", tokens=None, bias=None, act=None,
                   gated=False, scale_mode="vectors", scale_row=None, scale_col=None,
                   fast_accum=False, alpha=1.0, out=None, out_dtype=None, trans_b=False,
                   stream=None, context=None):
    """D = act(alpha * A_z B_z + bias_z) for each expert z of G, in one kernel; returns D.

    layout "contiguous": a is T x K, the rows of all experts, expert z's rows
        [rows[z], rows[z + 1]) (rows: G + 1 int32 offsets on a's device, non-decreasing, from
        0 to at most T); D is T x N, its rows outside every expert's range left as they were.
    layout "masked": a is G x M x K, expert z's first rows[z] rows of block z used (rows: G
        int32 counts); D is G x M x N, the rows past each count left as they were.
    b:      G x K x N, or G x N x K with trans_b=True (G Linear weights, as nn.Linear keeps
            them); each matrix row- or column-major.
    tokens: the rows of all experts (an int, known on the host: tokens times top-k), or None
            (T, or G * M): the kernel is chosen for it (its bucket of 1, 2, 3, 4, 6, 8, ...,
            with G, N, K: what `mmtune tune --epilogue ...,group=contiguous` tunes), and a
            masked call's decode-size kernels launch min(G, tokens) slices of the experts;
            never read as a bound (a count below the truth is served right, slower).
    bias:   G x N', each expert's own (float32 or D's dtype), or None; N' is N, or 2N gated.
    act:    None, "relu", "gelu", "gelu_tanh", "silu".
    gated:  a mixture of experts' SwiGLU / GeGLU up projection: each b_z has 2N columns, gate
            and up interleaved by column (as for matmul's gated), D = act(gate) * up.
    scale_row, scale_col: float32 scales of A's rows as stored (T, or G * M masked) and of
            each expert's product columns (G x N'), scale_mode "vectors" (each may be None);
            or "tensor": a's one float and each expert's one (G floats).
    FP8:    a and b of torch.float8_e4m3fn or float8_e5m2 (any pair), b G x N' x K with
            trans_b=True, a's and b's rows 16-byte aligned, scales as above; fast_accum=True
            lets kernels skip the promotion of FP8 sums into fp32.  D is float32, float16 or
            bfloat16.
    out:    D (row-major), or None: a new tensor of out_dtype (None: a's dtype), torch.empty's
            (uninitialized where no expert's rows fall).
    a, b float32, float16 or bfloat16, the same (or FP8).  Rows that break the layout's rules are not an
    out-of-bounds access: their experts are skipped and the next mmtune call on the context
    raises Error saying so.  Raises ValueError, TypeError, Error as matmul does."""
    th = _torch()
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be 'contiguous' or 'masked', got {layout!r}")
    masked = layout == "masked"
    ba, ra, ca, sba, sa0, sa1 = _matrix(th, a, "a")
    if masked != (a.dim() == 3):
        raise ValueError(f"a must be {'G x M x K (masked)' if masked else 'T x K (contiguous)'}"
                         f", got shape {tuple(a.shape)}")
    if b.dim() != 3:
        raise ValueError(f"b must be G x K x N (or G x N x K with trans_b), got shape "
                         f"{tuple(b.shape)}")
    g = b.shape[0]
    bb, rb, cb, sbb, sb0, sb1 = _matrix(th, b, "b")
    dev = a.get_device()
    for name, t in (("b", b), ("rows", rows)):
        if t.get_device() != dev:
            raise ValueError(f"{name} is on {t.device}, a on {a.device}")
    if masked and ba != g:
        raise ValueError(f"a has {ba} blocks, b {g} experts")
    in_type, b_type = _input_types(th, a, b)
    if rows.dtype is not th.torch.int32 or rows.dim() != 1 or \
            rows.shape[0] != (g if masked else g + 1) or (rows.shape[0] > 1 and rows.stride(0) != 1):
        raise ValueError(f"rows must be a contiguous int32 vector of {g if masked else g + 1} "
                         f"({'counts' if masked else 'offsets'}), got {rows.dtype} of shape "
                         f"{tuple(rows.shape)}")
    if sa1 != 1:
        raise ValueError("a must be row-major (unit stride along K): the experts' rows are "
                         "its rows")
    m, k = ra, ca
    kb, nb = (cb, rb) if trans_b else (rb, cb)
    if k != kb:
        raise ValueError(f"inner dimensions differ: a's rows have {k} elements but b's "
                         f"matrices {kb}")
    if gated and nb % 2:
        raise ValueError(f"gated needs an even number of columns of b's matrices (gate, up), "
                         f"got {nb}")
    n = nb // 2 if gated else nb
    if out is None:
        dtype = a.dtype if out_dtype is None else out_dtype
        out = th.torch.empty((g, m, n) if masked else (m, n), dtype=dtype, device=a.device)
    bd, rd, cd, sbd, sd0, sd1 = _matrix(th, out, "out")
    if (rd, cd) != (m, n) or (masked and bd != g) or (not masked and out.dim() != 2) or \
            out.get_device() != dev:
        raise ValueError(f"out is {tuple(out.shape)} on {out.device}; D is "
                         f"{(g, m, n) if masked else (m, n)} on cuda:{dev}")
    if sd1 != 1:
        raise ValueError("out must be row-major (unit stride along N)")
    out_type = _mmt_dtype(th, out.dtype, "out")
    row_b, ldb = _storage("b", rb, cb, sb0, sb1, True)
    d = _lib.MatmulDesc(order=ROW_MAJOR, trans_a=0, trans_b=int(trans_b) ^ (not row_b), m=m, n=n,
                        k=k, in_type=in_type, out_type=out_type, alpha=alpha, beta=0.0,
                        a=a.data_ptr(), lda=sa0 if m > 1 else max(1, k), b=b.data_ptr(),
                        ldb=ldb, d=out.data_ptr(), ldd=sd0 if m > 1 else max(1, n), batch=g,
                        stride_a=sba if masked else 0, stride_b=sbb,
                        stride_d=sbd if masked else 0, group_mode=_LAYOUTS[layout],
                        group_rows=rows.data_ptr(), group_tokens=int(tokens or 0),
                        b_type=b_type, gated=1 if gated else 0,
                        fast_accum=1 if fast_accum else 0)
    if bias is not None:
        if bias.dim() != 2 or tuple(bias.shape) != (g, nb) or not bias.is_contiguous():
            raise ValueError(f"bias must be a contiguous G x N' tensor ({g} x {nb}), got shape "
                             f"{tuple(bias.shape)}")
        if bias.dtype not in (th.torch.float32, out.dtype):
            raise TypeError(f"bias has dtype {bias.dtype}; it must be float32 or D's "
                            f"{out.dtype}")
        if bias.get_device() != dev:
            raise ValueError(f"bias is on {bias.device}, a on {a.device}")
        d.bias_mode, d.bias = BIAS_COL, bias.data_ptr()
        d.bias_type = F32 if bias.dtype == th.torch.float32 else out_type
    else:
        d.bias_mode = BIAS_NONE
    if scale_mode not in ("vectors", "tensor"):
        raise ValueError(f"scale_mode must be 'vectors' or 'tensor' for a grouped call, got "
                         f"{scale_mode!r}")
    d.scale_mode = _lib.SCALE_MODES[scale_mode]
    if scale_mode == "vectors":
        if scale_row is not None:
            d.scale_row = _scales(th, scale_row, "scale_row", g * m if masked else m, dev)
        if scale_col is not None:
            d.scale_col = _scales(th, scale_col, "scale_col", g * nb, dev)
    else:
        if scale_row is None or scale_col is None:
            raise ValueError("scale_mode 'tensor' needs scale_row (a's one scale) and scale_col "
                             "(each expert's)")
        d.scale_row = _scales(th, scale_row, "scale_row", 1, dev)
        d.scale_col = _scales(th, scale_col, "scale_col", g, dev)
    _launch(th, d, act, dev, stream, context)
    return out
