"""Stand-ins for CUDA arrays, for tests that need no GPU.

CAI: an object with a __cuda_array_interface__ dict (and __dlpack_device__, so its device is
known without asking a driver).  DLPackArray: an object with only __dlpack__ /
__dlpack_device__, whose capsule holds a real DLTensor.  Memory: a flat list of numbers that
fake pointers index into (pointer = BASE + 4 * index), so a recorded mmt_gemm call can be
carried out in Python (reference_gemm) and its result compared with the maths.
llama_mlp: a module shaped as a Llama MLP, for mmtune.torch's tests (CPU and GPU).
"""

import ctypes

from mmtune import _arrays

ITEM = 4  # bytes an element in Memory (float32)


class CAI:
    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x100000, readonly=False,
                 device=0, **extra):
        self.__cuda_array_interface__ = dict(shape=tuple(shape), typestr=typestr,
                                             strides=strides, data=(ptr, readonly), version=3,
                                             **extra)
        self.device = device

    def __dlpack_device__(self):
        return (2, self.device)  # kDLCUDA


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DLTENSOR_NAME = ctypes.create_string_buffer(b"dltensor")


class DLPackArray:
    """DLPack only.  streams: the stream argument of each __dlpack__ call."""

    def __init__(self, shape, strides=None, code=2, bits=32, lanes=1, device_type=2, device=0,
                 ptr=0x200000, byte_offset=0):
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(strides))(*strides) if strides else None
        i64p = ctypes.POINTER(ctypes.c_int64)
        self._t = _arrays._DLTensor(
            data=ptr, device=_arrays._DLDevice(device_type, device), ndim=len(shape),
            dtype=_arrays._DLDataType(code, bits, lanes), shape=ctypes.cast(self._shape, i64p),
            strides=ctypes.cast(self._strides, i64p) if strides else None,
            byte_offset=byte_offset)
        self._device = (device_type, device)
        self.streams = []

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        # No destructor: the DLTensor belongs to this object.
        return _capsule_new(ctypes.addressof(self._t), ctypes.cast(_DLTENSOR_NAME, ctypes.c_char_p),
                            None)


class Memory:
    BASE = 1 << 20

    def __init__(self):
        self.cells = []

    def matrix(self, values, layout="row", pad=0):
        """A CAI over a copy of values (a list of rows) stored row- or column-major with its
        leading dimension padded by pad elements (the padding holds NaN)."""
        rows, cols = len(values), len(values[0])
        start = len(self.cells)
        if layout == "row":
            ld = cols + pad
            self.cells += [float("nan")] * (ld * rows)
            strides = (ld * ITEM, ITEM)
            index = lambda i, j: start + i * ld + j  # noqa: E731
        else:
            ld = rows + pad
            self.cells += [float("nan")] * (ld * cols)
            strides = (ITEM, ld * ITEM)
            index = lambda i, j: start + i + j * ld  # noqa: E731
        for i in range(rows):
            for j in range(cols):
                self.cells[index(i, j)] = values[i][j]
        m = CAI((rows, cols), strides=strides, ptr=self.BASE + start * ITEM)
        m.read = lambda: [[self.cells[index(i, j)] for j in range(cols)] for i in range(rows)]
        return m

    def reference_gemm(self, order, ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc):
        """mmt_gemm as mmtune.h defines it, on this memory."""
        if order == 0:
            need = (m if ta else k, k if tb else n, n)
        else:
            need = (k if ta else m, n if tb else k, m)
        for name, ld, least in zip(("lda", "ldb", "ldc"), (lda, ldb, ldc), need):
            if ld < max(1, least):
                raise AssertionError(f"{name} {ld} < max(1, {least}), as mmt_gemm would refuse")

        def at(p, ld, i, j):  # (i, j) of a matrix stored at p in `order`
            return (p - self.BASE) // ITEM + (i * ld + j if order == 0 else i + j * ld)

        for i in range(m):
            for j in range(n):
                acc = 0.0
                for x in range(k):
                    av = self.cells[at(pa, lda, x, i) if ta else at(pa, lda, i, x)]
                    bv = self.cells[at(pb, ldb, j, x) if tb else at(pb, ldb, x, j)]
                    acc += av * bv
                c = at(pc, ldc, i, j)
                self.cells[c] = alpha * acc + (beta * self.cells[c] if beta else 0.0)


class RecordingContext:
    """Takes the place of a Context: records mmt_gemm's arguments, launches nothing."""

    device = 0
    _h = 1

    def __init__(self):
        self.calls = []

    def _gemm(self, *args):
        self.calls.append(args)
        return 0

    def error(self, status):
        raise AssertionError(f"status {status}")


def matmul(x, y):
    return [[sum(x[i][t] * y[t][j] for t in range(len(y))) for j in range(len(y[0]))]
            for i in range(len(x))]


def transpose(x):
    return [list(r) for r in zip(*x)]


def llama_mlp(th, hidden=64, inter=96, act=None):
    """A module shaped as transformers' LlamaMLP, down(act(gate(x)) * up(x)); th: torch."""
    class MLP(th.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = th.nn.Linear(hidden, inter, bias=False)
            self.up_proj = th.nn.Linear(hidden, inter, bias=False)
            self.down_proj = th.nn.Linear(inter, hidden, bias=False)
            self.act_fn = act or th.nn.SiLU()

        def forward(self, x):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    return MLP()


def matmul_reference(th, a, b, bias=None, bias_mode="col", act=None, gated=False, alpha=1.0,
                     beta=0.0, c=None, trans_a=False, trans_b=False):
    """mmtune.matmul's expression (mmtune.h) in torch, in the inputs' dtype: what its results
    and gradients are checked against (th: torch)."""
    f = th.nn.functional
    acts = {None: lambda z: z, "relu": f.relu, "gelu": f.gelu, "silu": f.silu,
            "gelu_tanh": lambda z: f.gelu(z, approximate="tanh")}
    x = alpha * th.matmul(a.mT if trans_a else a, b.mT if trans_b else b)
    if bias is not None:
        x = x + (bias if bias_mode == "col" else bias[:, None])
    if gated:
        d = acts[act](x[..., 0::2]) * x[..., 1::2]
        return d + beta * c if c is not None else d
    return acts[act](x + beta * c if c is not None else x)
