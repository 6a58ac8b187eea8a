"""mmtune.torch: mmtune's calls as PyTorch operators, and modules that use them.

    import torch, mmtune.torch
    y = torch.ops.mmtune.matmul(x, w, bias, "col", "gelu_tanh", False, 1.0, 0.0, None, None,
                                False, True)          # act(x w^T + bias), one kernel
    layer = mmtune.torch.Linear(4096, 14336, act="silu", device="cuda", dtype=torch.bfloat16)
    mmtune.torch.swap_linear(model)                   # every nn.Linear of model, in place,
                                                      # and Llama-style gated MLPs
    mmtune.torch.swap_linear(model, fp8="row")        # the same on FP8 weights (inference)

The operators have fixed schemas, fake (meta) implementations and declared mutation, so
torch.compile(fullgraph=True) traces through them without a graph break and CUDA graphs
capture them (they launch on torch's current stream):

    mmtune::matmul(Tensor a, Tensor b, Tensor? bias, str bias_mode, str? act, bool gated,
                   float alpha, float beta, Tensor? c, ScalarType? out_dtype, bool trans_a,
                   bool trans_b) -> Tensor
    mmtune::matmul_out(Tensor(a!) out, <the same>) -> ()
    mmtune::grouped_matmul(Tensor a, Tensor b, Tensor rows, str layout, int tokens, Tensor? bias,
                           str? act, ScalarType? out_dtype, bool trans_b, bool gated=False,
                           str scale_mode="vectors", Tensor? scale_row=None,
                           Tensor? scale_col=None, bool fast_accum=False) -> Tensor

    mmtune::scaled_matmul(Tensor a, Tensor b, str scale_mode, Tensor scale_a, Tensor scale_b,
                          Tensor? bias, str? act, bool gated, ScalarType out_dtype,
                          bool fast_accum) -> Tensor
    mmtune::quantize(Tensor x, ScalarType dtype, str mode) -> (Tensor, Tensor)

Their arguments are mmtune.matmul's and mmtune.quantize's (their docstrings say what each
means): a and b 2-D or 3-D CUDA tensors, D a new row-major tensor of out_dtype (None: a's
dtype), or `out`; scaled_matmul's a M x K and b N x K FP8, as a Linear layer's x and W.
Importing this module registers them; it needs torch, which mmtune itself does not.

Their CUDA kernels are C++ (python/csrc/torch_ops.cpp, a few microseconds a call) where that
library is built for the installed torch (scripts/build-torch-ops.sh; found through
$MMTUNE_TORCH_OPS, else beside libmmtune.so; MMTUNE_TORCH_OPS=0 turns it off): NATIVE_OPS is
its path, or None where the Python operators serve (mmtune.matmul under
torch.library.custom_op, some tens of microseconds a call).  Both raise on bad arguments, the
native ones RuntimeError, the Python ones ValueError or TypeError.
"""

import ctypes
import os
import warnings
from typing import Optional, Tuple

import torch

from . import _core, _grouped, _lib, _matmul, _quantize

__all__ = ["matmul", "matmul_out", "grouped_matmul", "scaled_matmul", "quantize", "Linear",
           "GatedMLP", "Fp8Linear", "Fp8GatedMLP", "swap_linear", "NATIVE_OPS"]


def _py_matmul(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor], bias_mode: str,
               act: Optional[str], gated: bool, alpha: float, beta: float,
               c: Optional[torch.Tensor], out_dtype: Optional[torch.dtype], trans_a: bool,
               trans_b: bool) -> torch.Tensor:
    """mmtune.matmul as an operator: D, a new tensor."""
    return _matmul.matmul(a, b, bias=bias, bias_mode=bias_mode, act=act, gated=gated,
                          alpha=alpha, beta=beta, c=c, out_dtype=out_dtype, trans_a=trans_a,
                          trans_b=trans_b)


def _py_matmul_out(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                   bias: Optional[torch.Tensor], bias_mode: str, act: Optional[str], gated: bool,
                   alpha: float, beta: float, c: Optional[torch.Tensor], trans_a: bool,
                   trans_b: bool) -> None:
    """mmtune.matmul into `out` (D; c may be out itself)."""
    _matmul.matmul(a, b, bias=bias, bias_mode=bias_mode, act=act, gated=gated, alpha=alpha,
                   beta=beta, c=c, out=out, trans_a=trans_a, trans_b=trans_b)


def _d_shape(a, b, gated, trans_a, trans_b):
    """D's shape as mmtune.matmul makes it: (batch,) M x N, N halved when gated."""
    for name, t in (("a", a), ("b", b)):
        if t.dim() not in (2, 3):
            raise ValueError(f"{name} must be 2-D or 3-D (a batch of matrices), got shape "
                             f"{tuple(t.shape)}")
    m, k = (a.shape[-1], a.shape[-2]) if trans_a else (a.shape[-2], a.shape[-1])
    kb, nb = (b.shape[-1], b.shape[-2]) if trans_b else (b.shape[-2], b.shape[-1])
    if k != kb:
        raise ValueError(f"inner dimensions differ: op(a) is {m}x{k} but op(b) is {kb}x{nb}")
    if gated and nb % 2:
        raise ValueError(f"gated needs an even number of columns of op(b) (gate, up), got {nb}")
    n = nb // 2 if gated else nb
    batches = [t.shape[0] for t in (a, b) if t.dim() == 3]
    if len(batches) == 2 and batches[0] != batches[1] and 1 not in batches:
        raise ValueError(f"a and b have batches of {batches[0]} and {batches[1]}")
    return (max(batches), m, n) if batches else (m, n)


def _matmul_fake(a, b, bias, bias_mode, act, gated, alpha, beta, c, out_dtype, trans_a, trans_b):
    return a.new_empty(_d_shape(a, b, gated, trans_a, trans_b),
                       dtype=out_dtype if out_dtype is not None else a.dtype)


def _matmul_out_fake(out, a, b, bias, bias_mode, act, gated, alpha, beta, c, trans_a, trans_b):
    shape = _d_shape(a, b, gated, trans_a, trans_b)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)}, D is {tuple(shape)}")


def _py_grouped_matmul(a: torch.Tensor, b: torch.Tensor, rows: torch.Tensor, layout: str,
                       tokens: int, bias: Optional[torch.Tensor], act: Optional[str],
                       out_dtype: Optional[torch.dtype], trans_b: bool, gated: bool = False,
                       scale_mode: str = "vectors", scale_row: Optional[torch.Tensor] = None,
                       scale_col: Optional[torch.Tensor] = None,
                       fast_accum: bool = False) -> torch.Tensor:
    """mmtune.grouped_matmul as an operator (tokens 0: not known): D, a new tensor."""
    return _grouped.grouped_matmul(a, b, rows, layout=layout, tokens=tokens or None, bias=bias,
                                   act=act, out_dtype=out_dtype, trans_b=trans_b, gated=gated,
                                   scale_mode=scale_mode, scale_row=scale_row,
                                   scale_col=scale_col, fast_accum=fast_accum)


def _grouped_matmul_fake(a, b, rows, layout, tokens, bias, act, out_dtype, trans_b, gated=False,
                         scale_mode="vectors", scale_row=None, scale_col=None, fast_accum=False):
    if b.dim() != 3 or a.dim() != (3 if layout == "masked" else 2):
        raise ValueError(f"a {tuple(a.shape)} and b {tuple(b.shape)} are not a {layout} "
                         "grouped problem (mmtune.grouped_matmul)")
    n = b.shape[1] if trans_b else b.shape[2]
    if gated:
        n //= 2
    shape = (b.shape[0], a.shape[1], n) if layout == "masked" else (a.shape[0], n)
    return a.new_empty(shape, dtype=out_dtype if out_dtype is not None else a.dtype)


def _native_candidates():
    """Where the native operators' library may be: $MMTUNE_TORCH_OPS, else beside
    libmmtune.so (scripts/build-torch-ops.sh's default)."""
    path = os.environ.get("MMTUNE_TORCH_OPS")
    if path is not None:
        return [path] if path not in ("", "0") else []
    try:
        lib_dir = os.path.dirname(_lib.library_path())
    except _lib.LibraryNotFoundError:
        return []
    return [os.path.join(lib_dir, "libmmtune_torch.so")] if lib_dir else []


_CONTEXT_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int)


@_CONTEXT_FN
def _context_of(device):
    """The native operators' callback: the default context's handle on device (0: none, the
    Python call mmtune.default_context(device) says why)."""
    try:
        h = _core.default_context(device)._h
    except Exception:  # noqa: BLE001 (a C caller gets 0 and says so)
        return 0
    return h if isinstance(h, int) else (h.value or 0)


def _load_native():
    """The path of the native operators' library once loaded and bound, else None (then the
    Python operators serve).  A library named by $MMTUNE_TORCH_OPS that fails to load warns."""
    for path in _native_candidates():
        if not os.path.exists(path):
            if "MMTUNE_TORCH_OPS" in os.environ:
                warnings.warn(f"MMTUNE_TORCH_OPS={path}: no such file; the Python operators "
                              "serve", stacklevel=3)
            continue
        try:
            torch.ops.load_library(path)
            bind = ctypes.CDLL(path).mmt_torch_ops_bind
        except (OSError, RuntimeError, AttributeError) as e:
            warnings.warn(f"{path}: not loaded ({e}); the Python operators serve (rebuild it "
                          "for this torch: scripts/build-torch-ops.sh)", stacklevel=3)
            continue
        lib = _lib.load()
        bind.restype, bind.argtypes = None, [ctypes.c_void_p] * 4
        bind(ctypes.cast(lib.mmt_matmul, ctypes.c_void_p),
             ctypes.cast(lib.mmt_errmsg, ctypes.c_void_p),
             ctypes.cast(_context_of, ctypes.c_void_p),
             ctypes.cast(lib.mmt_quantize, ctypes.c_void_p))
        return path
    return None


# The operators: native (C++ kernels calling mmt_matmul, a few microseconds a call) where
# their library loads, else torch.library.custom_op over mmtune.matmul (tens of microseconds);
# one schema, one fake implementation either way.
NATIVE_OPS = _load_native()
if NATIVE_OPS:
    torch.library.register_fake("mmtune::matmul")(_matmul_fake)
    torch.library.register_fake("mmtune::matmul_out")(_matmul_out_fake)
    torch.library.register_fake("mmtune::grouped_matmul")(_grouped_matmul_fake)
    matmul = torch.ops.mmtune.matmul.default
    matmul_out = torch.ops.mmtune.matmul_out.default
    grouped_matmul = torch.ops.mmtune.grouped_matmul.default
else:
    matmul = torch.library.custom_op("mmtune::matmul", mutates_args=())(_py_matmul)
    matmul_out = torch.library.custom_op("mmtune::matmul_out", mutates_args=("out",))(
        _py_matmul_out)
    grouped_matmul = torch.library.custom_op("mmtune::grouped_matmul", mutates_args=())(
        _py_grouped_matmul)
    matmul.register_fake(_matmul_fake)
    matmul_out.register_fake(_matmul_out_fake)
    grouped_matmul.register_fake(_grouped_matmul_fake)


def _py_scaled_matmul(a: torch.Tensor, b: torch.Tensor, scale_mode: str, scale_a: torch.Tensor,
                      scale_b: torch.Tensor, bias: Optional[torch.Tensor], act: Optional[str],
                      gated: bool, out_dtype: torch.dtype, fast_accum: bool) -> torch.Tensor:
    """FP8 a (M x K) times FP8 b (N x K, a Linear weight's layout) with their dequantization
    scales (scale_mode "vectors": a's per row, b's per row of b, the columns of D; "tensor":
    one each; "block": a's 1 x 128 and b's 128 x 128, as mmtune::quantize gives them with
    "1x128" and "128x128"), bias and act in one kernel, D a new M x N tensor of out_dtype
    (gated: b's 2N rows the gate and up projections interleaved, D M x N)."""
    return _matmul.matmul(a, b, bias=bias, act=act, gated=gated, scale_mode=scale_mode,
                          scale_row=scale_a, scale_col=scale_b, out_dtype=out_dtype,
                          trans_b=True, fast_accum=fast_accum)


def _scaled_matmul_fake(a, b, scale_mode, scale_a, scale_b, bias, act, gated, out_dtype,
                        fast_accum):
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"a {tuple(a.shape)} and b {tuple(b.shape)} must be M x K and N x K")
    if gated and b.shape[0] % 2:
        raise ValueError(f"gated needs an even number of rows of b (gate, up), got {b.shape[0]}")
    return a.new_empty((a.shape[0], b.shape[0] // 2 if gated else b.shape[0]), dtype=out_dtype)


def _py_quantize(x: torch.Tensor, dtype: torch.dtype, mode: str) -> Tuple[torch.Tensor,
                                                                          torch.Tensor]:
    """mmtune.quantize as an operator: (q, scale), new tensors."""
    return _quantize.quantize(x, dtype, mode)


def _quantize_fake(x, dtype, mode):
    if mode not in _quantize._SHAPES or x.dim() != 2:
        raise ValueError(f"x {tuple(x.shape)} must be 2-D and mode one of "
                         f"{', '.join(_quantize._SHAPES)}, got {mode!r}")
    return (x.new_empty(x.shape, dtype=dtype),
            x.new_empty(_quantize._SHAPES[mode](*x.shape), dtype=torch.float32))


# The FP8 operators: native where the library has them, else Python's (a library built before
# them serves the others natively).
if NATIVE_OPS and hasattr(torch.ops.mmtune, "scaled_matmul"):
    torch.library.register_fake("mmtune::scaled_matmul")(_scaled_matmul_fake)
    torch.library.register_fake("mmtune::quantize")(_quantize_fake)
    scaled_matmul = torch.ops.mmtune.scaled_matmul.default
    quantize = torch.ops.mmtune.quantize.default
else:
    scaled_matmul = torch.library.custom_op("mmtune::scaled_matmul", mutates_args=())(
        _py_scaled_matmul)
    scaled_matmul.register_fake(_scaled_matmul_fake)
    quantize = torch.library.custom_op("mmtune::quantize", mutates_args=())(_py_quantize)
    quantize.register_fake(_quantize_fake)


def _act_and_grad(act, z):
    """act(z) and act'(z), elementwise (z float)."""
    if act in (None, "none"):
        return z, torch.ones_like(z)
    if act == "relu":
        return z.clamp_min(0), (z > 0).to(z.dtype)
    if act in ("gelu", "gelu_erf"):
        cdf = 0.5 * (1 + torch.erf(z * 0.7071067811865476))
        return z * cdf, cdf + z * torch.exp(-0.5 * z * z) * 0.3989422804014327
    if act == "gelu_tanh":
        k = 0.7978845608028654
        t = torch.tanh(k * (z + 0.044715 * z ** 3))
        return 0.5 * z * (1 + t), 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * k * (1 + 0.134145 * z * z)
    if act in ("silu", "swish"):
        s = torch.sigmoid(z)
        return z * s, s * (1 + z * (1 - s))
    raise ValueError(f"act {act!r} has no derivative here")


def _setup_backward(ctx, inputs, output):
    a, b, bias, bias_mode, act, gated, alpha, beta, c, _out_dtype, trans_a, trans_b = inputs
    ctx.save_for_backward(a, b, bias, c if beta != 0 else None)
    ctx.meta = (bias_mode, act, gated, alpha, beta, trans_a, trans_b)


def _backward(ctx, grad):
    """The gradients of mmtune::matmul's tensors (a, b, bias, c), as PyTorch's eager autograd
    of the same expression computes them: the product is recomputed (in the inputs' dtype, as
    eager saves a Linear's output) where the activation or the gate needs it, every GEMM is
    torch's."""
    a, b, bias, c = ctx.saved_tensors
    bias_mode, act, gated, alpha, beta, trans_a, trans_b = ctx.meta
    wide = torch.promote_types(grad.dtype, torch.float32)  # the epilogue's arithmetic
    g = grad.to(wide)
    op_a, op_b = (a.mT if trans_a else a), (b.mT if trans_b else b)
    if gated or act not in (None, "none"):
        x = alpha * torch.matmul(op_a, op_b).to(wide)
        if bias is not None:
            x = x + (bias.to(wide) if bias_mode == "col" else bias.to(wide)[:, None])
        if gated:  # D = act(gate) * up + beta c, gate and up interleaved by column
            y, dy = _act_and_grad(act, x[..., 0::2])
            gx = torch.stack((g * x[..., 1::2] * dy, g * y), -1).flatten(-2)
        else:
            if c is not None:
                x = x + beta * c.to(wide)
            gx = g * _act_and_grad(act, x)[1]
    else:
        gx = g
    need = ctx.needs_input_grad
    ga = gb = gbias = gc = None
    gp = (alpha * gx).to(a.dtype)
    if need[0]:
        ga = torch.matmul(gp, op_b.mT)
        ga = (ga.mT if trans_a else ga).sum_to_size(a.shape)
    if need[1]:
        gb = torch.matmul(op_a.mT, gp)
        gb = (gb.mT if trans_b else gb).sum_to_size(b.shape)
    if need[2] and bias is not None:
        gbias = (gx if bias_mode == "col" else gx.mT).sum_to_size(bias.shape).to(bias.dtype)
    if need[8] and c is not None:
        gc = (beta * (g if gated else gx)).sum_to_size(c.shape).to(c.dtype)
    return ga, gb, gbias, None, None, None, None, None, gc, None, None, None


# matmul's backward (matmul_out, which writes its out argument, has none: as torch's out=).
# The native matmul has its autograd in C++ (python/csrc/torch_ops.cpp): below autograd at
# once when no gradient is asked for, else a C++ node whose backward, mmtune::_matmul_backward,
# is _backward's formula.  The Python operator takes _backward itself, and so does a native
# library built before it had an Autograd kernel (no gradient would be silently wrong), or
# with the Python-kernel _matmul_autograd that came between.
if not NATIVE_OPS or not torch._C._dispatch_has_kernel_for_dispatch_key("mmtune::matmul",
                                                                       "Autograd"):
    torch.library.register_autograd("mmtune::matmul", _backward, setup_context=_setup_backward)
elif hasattr(torch.ops.mmtune, "_matmul_autograd"):
    torch.library.register_fake("mmtune::_matmul_autograd")(_matmul_fake)
    torch.library.register_autograd("mmtune::_matmul_autograd", _backward,
                                    setup_context=_setup_backward)


class Linear(torch.nn.Linear):
    """torch.nn.Linear computed by mmtune: act(x W^T + bias) in one kernel.  The same
    parameters (weight out_features x in_features, bias), so state dicts load unchanged; act:
    None, "relu", "gelu" (erf), "gelu_tanh" or "silu".  Inputs of any leading shape, on a CUDA
    device, of the weight's dtype."""

    def __init__(self, in_features, out_features, bias=True, act=None, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.act = act

    def forward(self, x):
        y = torch.ops.mmtune.matmul(x.reshape(-1, self.in_features), self.weight, self.bias,
                                    "col", self.act, False, 1.0, 0.0, None, None, False, True)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self):
        return super().extra_repr() + (f", act={self.act!r}" if self.act else "")


def _act_name(m):
    """mmtune's name of an activation module (SiLU, GELU of either form, ReLU), else None."""
    if type(m) is torch.nn.SiLU:
        return "silu"
    if type(m) is torch.nn.GELU:
        return "gelu_tanh" if m.approximate == "tanh" else "gelu"
    if type(m) is torch.nn.ReLU:
        return "relu"
    return None


def _gated_act(act_fn):
    """mmtune's name of a gated MLP's activation module (SiLU or GELU), or None."""
    act = _act_name(act_fn)
    return act if act != "relu" else None


def _interleave(gate, up):
    """The gated kernel's weight of gate and up projections (N x K each): 2N x K, its rows
    gate 0, up 0, gate 1, up 1, ..."""
    return torch.stack((gate, up), 1).flatten(0, 1)


class GatedMLP(torch.nn.Module):
    """A Llama-style gated MLP, down(act(gate(x)) * up(x)), as two mmtune calls: the gate and
    up projections in one gated kernel, then down.  Its parameters are gate_proj.weight,
    up_proj.weight and down_proj.weight (and down_proj.bias) as in the module it replaces, so
    state dicts load unchanged: gate_proj.weight and up_proj.weight are the even and odd rows
    of one interleaved weight (gate_up), which the gated kernel reads, and loading either
    writes it.  Make it (swap_linear) once the model is on its device and dtype: .to() copies
    the views apart from gate_up."""

    def __init__(self, gate_proj, up_proj, down_proj, act):
        super().__init__()
        n, k = gate_proj.weight.shape
        w = torch.empty(2 * n, k, device=gate_proj.weight.device, dtype=gate_proj.weight.dtype)
        with torch.no_grad():
            w[0::2].copy_(gate_proj.weight)
            w[1::2].copy_(up_proj.weight)
        self.register_buffer("gate_up", w, persistent=False)
        self.gate_proj, self.up_proj = (torch.nn.Module(), torch.nn.Module())
        self.gate_proj.weight = torch.nn.Parameter(w[0::2], gate_proj.weight.requires_grad)
        self.up_proj.weight = torch.nn.Parameter(w[1::2], up_proj.weight.requires_grad)
        self.down_proj = _as_linear(down_proj)
        self.act = act

    def forward(self, x):
        w = self.gate_up
        if torch.is_grad_enabled() and (self.gate_proj.weight.requires_grad or
                                        self.up_proj.weight.requires_grad):
            # training: the interleaved weight made from the parameters, so gradients reach
            # them (gate_up's own storage has no autograd history)
            w = _interleave(self.gate_proj.weight, self.up_proj.weight)
        h = torch.ops.mmtune.matmul(x.reshape(-1, w.shape[1]), w, None, "col", self.act, True,
                                    1.0, 0.0, None, None, False, True)
        return self.down_proj(h).reshape(*x.shape[:-1], -1)

    def extra_repr(self):
        return f"act={self.act!r}"


# FP8 recipes: the weight's quantize mode, the activations' (at each call), and the scale mode
# of scaled_matmul that reads the two.  "row": per output channel and per token (rowwise
# scaling, as FBGEMM's and torchao's); "block": DeepSeek-V3's 128 x 128 weight blocks and
# 1 x 128 activation groups; "tensor": one scale each, the activations' computed at each call.
FP8_RECIPES = {"row": ("row", "row", "vectors"), "block": ("128x128", "1x128", "block"),
               "tensor": ("tensor", "tensor", "tensor")}


def _fp8_dtype(dtype):
    dtype = dtype if dtype is not None else getattr(torch, "float8_e4m3fn", None)
    if dtype not in _matmul._fp8_types(_matmul._torch()):
        raise TypeError(f"dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype}")
    return dtype


def _recipe(recipe):
    if recipe not in FP8_RECIPES:
        raise ValueError(f"recipe must be one of {', '.join(FP8_RECIPES)}, got {recipe!r}")
    return FP8_RECIPES[recipe]


def _quantized_weight(w, recipe, dtype):
    """(q, scale) of weight w (N x K) under recipe, on w's device (a CUDA one; meta tensors
    get the operator's fake ones)."""
    with torch.no_grad():
        return torch.ops.mmtune.quantize(w.detach().contiguous(), dtype, _recipe(recipe)[0])


def _fp8_matmul(x, weight, weight_scale, recipe, bias, act, gated):
    """act(x W^T + bias) (gated: act(gate) * up) with W FP8 under recipe: x's rows quantized by
    mmtune::quantize, the product by mmtune::scaled_matmul, D of x's dtype."""
    _, act_mode, scale_mode = FP8_RECIPES[recipe]
    x2 = x.reshape(-1, x.shape[-1])
    if x2.shape[-1] > 1 and x2.stride(-1) != 1:
        x2 = x2.contiguous()
    qx, sx = torch.ops.mmtune.quantize(x2, weight.dtype, act_mode)
    y = torch.ops.mmtune.scaled_matmul(qx, weight, scale_mode, sx, weight_scale, bias, act, gated,
                                       x.dtype, False)
    return y.reshape(*x.shape[:-1], y.shape[-1])


class Fp8Linear(torch.nn.Module):
    """An inference Linear layer on FP8 weights: act(x W^T + bias) with W held as FP8 (the
    buffer `weight`, out_features x in_features) and its dequantization scales
    (`weight_scale`) under `recipe` (FP8_RECIPES: "row", "block" or "tensor").  At each call x
    (any leading shape, float32, float16 or bfloat16, on a CUDA device) is quantized by
    mmtune::quantize and multiplied by mmtune::scaled_matmul, bias and act in its kernel, D of
    x's dtype.  No gradient.  Its state dict holds the FP8 weight and scales (and bias); it
    loads an Fp8Linear's, or a torch.nn.Linear's, whose weight it quantizes on its device."""

    def __init__(self, in_features, out_features, bias=True, act=None, recipe="row", dtype=None,
                 device=None, bias_dtype=torch.bfloat16):
        super().__init__()
        shape = _quantize._SHAPES[_recipe(recipe)[0]](out_features, in_features)
        self._hold(act, recipe,
                   torch.empty(out_features, in_features, dtype=_fp8_dtype(dtype), device=device),
                   torch.ones(shape, dtype=torch.float32, device=device),
                   torch.zeros(out_features, dtype=bias_dtype, device=device) if bias else None)

    def _hold(self, act, recipe, weight, scale, bias):
        """The layer's state: its weight (out x in, FP8), scales and bias (a tensor or None)."""
        self.out_features, self.in_features = weight.shape
        self.act, self.recipe = act, recipe
        self.register_buffer("weight", weight)
        self.register_buffer("weight_scale", scale)
        self.bias = None if bias is None else torch.nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_linear(cls, linear, recipe="row", dtype=None, act=None):
        """An Fp8Linear computing linear (a torch.nn.Linear or mmtune Linear on a CUDA device,
        whose act it keeps unless act is given) with its weight quantized under recipe."""
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        q, scale = _quantized_weight(linear.weight, recipe, _fp8_dtype(dtype))
        new._hold(act if act is not None else getattr(linear, "act", None), recipe, q, scale,
                  None if linear.bias is None else linear.bias.detach().clone())
        new.train(linear.training)
        return new

    def forward(self, x):
        return _fp8_matmul(x, self.weight, self.weight_scale, self.recipe, self.bias, self.act,
                           False)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # a torch.nn.Linear's state dict (a weight in a wider dtype, no scales): quantized
        # under this layer's recipe on its device, so a checkpoint loads into a swapped model
        w = state_dict.get(prefix + "weight")
        if w is not None and w.dtype not in _matmul._fp8_types(_matmul._torch()):
            q, scale = _quantized_weight(w.to(self.weight.device), self.recipe, self.weight.dtype)
            state_dict[prefix + "weight"], state_dict[prefix + "weight_scale"] = q, scale
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, recipe={self.recipe!r}, dtype={self.weight.dtype}"
                + (f", act={self.act!r}" if self.act else ""))


class Fp8GatedMLP(torch.nn.Module):
    """GatedMLP on FP8 weights (inference): down(act(gate(x)) * up(x)) with the gate and up
    projections one interleaved FP8 weight (`gate_up_weight`, its rows gate 0, up 0, gate 1,
    ...; scales `gate_up_scale`) read by one gated kernel, and down an Fp8Linear, all under
    one recipe (FP8_RECIPES).  It loads its own state dict or the Llama MLP's it replaced
    (gate_proj.weight, up_proj.weight, down_proj.weight), quantizing those."""

    def __init__(self, gate_proj, up_proj, down_proj, act, recipe="row", dtype=None):
        super().__init__()
        dtype = _fp8_dtype(dtype)
        q, scale = _quantized_weight(_interleave(gate_proj.weight, up_proj.weight), recipe, dtype)
        self.register_buffer("gate_up_weight", q)
        self.register_buffer("gate_up_scale", scale)
        self.down_proj = Fp8Linear.from_linear(down_proj, recipe, dtype)
        self.act, self.recipe = act, recipe

    def forward(self, x):
        h = _fp8_matmul(x, self.gate_up_weight, self.gate_up_scale, self.recipe, None, self.act,
                        True)
        return self.down_proj(h)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # the gated MLP's own state dict (gate_proj.weight, up_proj.weight): interleaved and
        # quantized as the constructor does; down_proj's loads through Fp8Linear's
        gate, up = (state_dict.pop(prefix + k + "_proj.weight", None) for k in ("gate", "up"))
        if gate is not None and up is not None:
            dev = self.gate_up_weight.device
            q, scale = _quantized_weight(_interleave(gate.to(dev), up.to(dev)), self.recipe,
                                         self.gate_up_weight.dtype)
            state_dict[prefix + "gate_up_weight"], state_dict[prefix + "gate_up_scale"] = q, scale
        elif gate is not None or up is not None:
            raise ValueError(f"{prefix}: a gated MLP's state dict has both gate_proj.weight and "
                             "up_proj.weight, or neither")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self):
        return f"act={self.act!r}, recipe={self.recipe!r}, dtype={self.gate_up_weight.dtype}"


def _as_linear(child):
    """An mmtune Linear holding child's parameters (child: a torch.nn.Linear)."""
    new = Linear.__new__(Linear)
    torch.nn.Module.__init__(new)
    new.in_features, new.out_features, new.act = child.in_features, child.out_features, None
    new.weight, new.bias = child.weight, child.bias
    new.train(child.training)
    return new


def _gated_parts(m):
    """(gate_proj, up_proj, down_proj, act) of a Llama-style MLP module mmtune can run (its
    projections torch.nn.Linear, gate and up of one shape and without bias, its act_fn SiLU or
    GELU), else None."""
    parts = [getattr(m, a, None) for a in ("gate_proj", "up_proj", "down_proj")]
    if not all(type(p) is torch.nn.Linear for p in parts):
        return None
    gate, up, _ = parts
    act = _gated_act(getattr(m, "act_fn", None))
    if act is None or gate.bias is not None or up.bias is not None or \
            gate.weight.shape != up.weight.shape or gate.weight.dtype != up.weight.dtype:
        return None
    return parts + [act]


def swap_linear(module, fp8=None, fp8_dtype=None):
    """Replaces, inside module (not module itself), every Llama-style gated MLP (a module with
    gate_proj, up_proj and down_proj torch.nn.Linear layers and an act_fn of SiLU or GELU) by a
    GatedMLP and every other torch.nn.Linear (subclasses are left alone) by an mmtune Linear,
    in place; returns module.  In a torch.nn.Sequential, a Linear followed by a ReLU, GELU or
    SiLU module takes the activation into its kernel (the activation's place becomes a
    torch.nn.Identity: no parameters, so state dict keys do not move).  Parameters keep their
    values, dtypes and devices (a gated MLP's gate and up weights move into its interleaved
    weight); training state stays.
    fp8: a recipe of FP8_RECIPES ("row", "block", "tensor") to run those layers on FP8 weights
    instead (Fp8Linear, Fp8GatedMLP: inference; the weights quantized now, in fp8_dtype,
    default torch.float8_e4m3fn; the state dict then holds them, and the original model's
    state dict still loads, quantized as it loads), or None."""
    if fp8 is not None:
        _recipe(fp8)
        fp8_dtype = _fp8_dtype(fp8_dtype)
    linear = Linear if fp8 is None else Fp8Linear
    for name, child in list(module.named_children()):
        parts = _gated_parts(child)
        if parts:
            new = GatedMLP(*parts) if fp8 is None else Fp8GatedMLP(*parts, fp8, fp8_dtype)
            new.train(child.training)
            setattr(module, name, new)
        elif type(child) is torch.nn.Linear:
            setattr(module, name, _as_linear(child) if fp8 is None else
                    Fp8Linear.from_linear(child, fp8, fp8_dtype))
        else:
            swap_linear(child, fp8, fp8_dtype)
    if type(module) is torch.nn.Sequential:  # a Linear then its activation: one kernel
        for i in range(len(module) - 1):
            act = _act_name(module[i + 1])
            if type(module[i]) is linear and module[i].act is None and act:
                module[i].act = act
                module[i + 1] = torch.nn.Identity()
    return module
