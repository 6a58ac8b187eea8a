"""Reading operands: the memory a 2-D CUDA array occupies, whichever library made it.

A handler reads one operand as the tuple (pointer, rows, cols, row stride, col stride, mmt
dtype, device ordinal), strides in elements, device -1 when unknown.  Handlers by the type of
the object, first match wins:

  torch.Tensor   read directly (data_ptr, shape, stride, dtype, get_device): much cheaper than
                 building torch's __cuda_array_interface__ dict; current stream from torch.
  cupy.ndarray   read directly likewise; current stream from CuPy.
  anything else  its __cuda_array_interface__ when it has one (CAI is used when both exist),
                 else DLPack (__dlpack__ / __dlpack_device__, the capsule read with ctypes).

A handler also answers what stream the producer's work is on (stream()) and allocates an
output like an operand (empty()).  Nothing here imports torch or CuPy: an object of theirs
means the module is already in sys.modules.
"""

import ctypes
import sys
import threading

from ._lib import BF16, F16, F32

# CAI typestrs.  bfloat16 has no numpy letter: torch and ml_dtypes report it as "<V2".
_TYPESTR = {"<f4": F32, "<f2": F16, "<V2": BF16}
_ITEMSIZE = {F32: 4, F16: 2, BF16: 2}
_SUPPORTED = "float32, float16 or bfloat16"


def _not_2d(name, shape):
    raise ValueError(f"{name} must be a 2-D matrix, got {len(shape)} dimension(s) "
                     f"(shape {tuple(shape)})")


class _Torch:
    """torch.Tensor (and subclasses)."""

    def __init__(self, torch):
        self.torch = torch
        self.tensor = torch.Tensor
        self.dtypes = {torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16}
        # How torch's own compilers read the current stream: much cheaper than
        # torch.cuda.current_stream(d).cuda_stream, which is the fallback.
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self.raw_stream = raw or (lambda d: torch.cuda.current_stream(d).cuda_stream)

    def parse(self, t, name, _stream):
        dev = t.get_device()
        if dev < 0:
            raise TypeError(f"{name} is a torch tensor on {t.device}, not on a CUDA device")
        if t.dim() != 2:
            _not_2d(name, t.shape)
        dt = self.dtypes.get(t.dtype)
        if dt is None:
            raise TypeError(f"{name} has dtype {t.dtype}; mmtune multiplies {_SUPPORTED}")
        r, c = t.shape
        s0, s1 = t.stride()
        return t.data_ptr(), r, c, s0, s1, dt, dev

    def stream(self, _t, dev):
        return self.raw_stream(dev)

    def empty(self, like, m, n):
        return self.torch.empty((m, n), dtype=like.dtype, device=like.device)


class _CuPy:
    """cupy.ndarray."""

    def __init__(self, cupy):
        self.cupy = cupy
        self.get_stream = cupy.cuda.get_current_stream

    def parse(self, x, name, _stream):
        shape = x.shape
        if len(shape) != 2:
            _not_2d(name, shape)
        dtype = x.dtype
        dt = BF16 if dtype.name == "bfloat16" else _TYPESTR.get(dtype.str)
        if dt is None:
            raise TypeError(f"{name} has dtype {dtype}; mmtune multiplies {_SUPPORTED}")
        s0, s1 = _element_strides(name, x.strides, _ITEMSIZE[dt])
        return x.data.ptr, shape[0], shape[1], s0, s1, dt, x.device.id

    def stream(self, _x, dev):
        return self.get_stream(dev).ptr

    def empty(self, like, m, n):
        with like.device:
            return self.cupy.empty((m, n), dtype=like.dtype)


def _element_strides(name, strides, itemsize):
    s0, s1 = strides
    if s0 % itemsize or s1 % itemsize:
        raise ValueError(f"{name} has strides {tuple(strides)} bytes, not whole elements of "
                         f"{itemsize} bytes")
    return s0 // itemsize, s1 // itemsize


def _legacy(s):
    """A CAI or DLPack stream number as mmt_gemm's stream: 1 (legacy default) is NULL."""
    return 0 if s == 1 else s


class _Generic:
    """Any other object: __cuda_array_interface__ (v2 or v3), else DLPack."""

    def parse(self, x, name, stream):
        cai = getattr(x, "__cuda_array_interface__", None)
        if cai is None:
            if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
                return _dlpack(x, name, stream)
            raise TypeError(f"{name} ({type(x).__name__}) is not a CUDA array: it has neither "
                            "__cuda_array_interface__ nor __dlpack__")
        shape = cai["shape"]
        if len(shape) != 2:
            _not_2d(name, shape)
        dt = _TYPESTR.get(cai["typestr"])
        if dt is None:
            raise TypeError(f"{name} has typestr {cai['typestr']!r}; mmtune multiplies {_SUPPORTED} "
                            "('<f4', '<f2', '<V2')")
        if cai.get("mask") is not None:
            raise ValueError(f"{name} is a masked array; mmtune takes plain matrices")
        ptr, readonly = cai["data"]
        if readonly and name == "c":
            raise ValueError("c is read-only (its __cuda_array_interface__ says so)")
        strides = cai.get("strides")
        if strides is None:
            s0, s1 = shape[1], 1  # C-contiguous
        else:
            s0, s1 = _element_strides(name, strides, _ITEMSIZE[dt])
        sync = cai.get("stream")
        if sync is not None and stream is not None and _legacy(sync) != stream:
            raise ValueError(
                f"{name}'s __cuda_array_interface__ says its data is ready on stream {sync:#x}, "
                f"but the call runs on stream {stream:#x}: synchronize them first, or pass "
                f"stream={sync:#x}")
        return ptr, shape[0], shape[1], s0, s1, dt, _cai_device(x, name, ptr)

    def stream(self, x, _dev):
        cai = getattr(x, "__cuda_array_interface__", None)
        sync = cai.get("stream") if cai is not None else None
        return 0 if sync is None else _legacy(sync)

    def empty(self, like, m, n):
        raise TypeError(f"c=None: mmtune allocates the output for torch tensors and CuPy arrays "
                        f"only, and a is a {type(like).__name__}; pass c")


_GENERIC = _Generic()
_HANDLERS = {}  # type -> handler, filled by handler()
TORCH = None  # the _Torch handler once a tensor was seen: gemm's fast path reads torch.Tensor


def handler(t):
    """The handler for objects of type t (cached)."""
    h = _HANDLERS.get(t)
    if h is None:
        torch, cupy = sys.modules.get("torch"), sys.modules.get("cupy")
        if torch is not None and issubclass(t, torch.Tensor):
            h = _Torch(torch)
            global TORCH
            TORCH = h
        elif cupy is not None and issubclass(t, cupy.ndarray):
            h = _CuPy(cupy)
        else:
            h = _GENERIC
        _HANDLERS[t] = h
    return h


def stream_handle(stream):
    """An explicit stream argument as a CUstream value: an int, or an object with
    __cuda_stream__ (CUDA Python's protocol), .cuda_stream (torch) or .ptr (CuPy)."""
    if isinstance(stream, int):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return proto()[1]
    for attr in ("cuda_stream", "ptr"):
        handle = getattr(stream, attr, None)
        if isinstance(handle, int):
            return handle
    raise TypeError(f"stream must be an int (a CUstream), or a torch/CuPy stream or an object "
                    f"with __cuda_stream__, got {type(stream).__name__}")


# DLPack (dlpack.h, the unversioned DLManagedTensor: it begins with its DLTensor).
_KDL_CUDA, _KDL_CUDA_MANAGED = 2, 13
_KDL_FLOAT, _KDL_BFLOAT = 2, 4


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_DL_DTYPES = {(_KDL_FLOAT, 32): F32, (_KDL_FLOAT, 16): F16, (_KDL_BFLOAT, 16): BF16}


def _dlpack(x, name, stream):
    dev_type, dev_id = x.__dlpack_device__()
    if dev_type not in (_KDL_CUDA, _KDL_CUDA_MANAGED):
        raise TypeError(f"{name} is on DLPack device type {dev_type}, not a CUDA device")
    # The producer makes our stream wait for its work; 1 is the legacy default stream.
    try:
        capsule = x.__dlpack__(stream=stream or 1)
    except TypeError:
        capsule = x.__dlpack__()
    # Not consumed: the capsule keeps its name, so its destructor frees the DLManagedTensor.
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    if t.ndim != 2:
        _not_2d(name, [t.shape[i] for i in range(t.ndim)])
    dt = _DL_DTYPES.get((t.dtype.code, t.dtype.bits)) if t.dtype.lanes == 1 else None
    if dt is None:
        raise TypeError(f"{name} has DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits, "
                        f"{t.dtype.lanes} lanes); mmtune multiplies {_SUPPORTED}")
    r, c = t.shape[0], t.shape[1]
    s0, s1 = (t.strides[0], t.strides[1]) if t.strides else (c, 1)
    return (t.data or 0) + t.byte_offset, r, c, s0, s1, dt, dev_id


# The device of a bare CAI pointer: __dlpack_device__ when the object has it, else the driver.
_cu_lock = threading.Lock()
_cu = None  # libcuda's cuPointerGetAttribute once loaded, False when unavailable


def _cai_device(x, name, ptr):
    dl = getattr(x, "__dlpack_device__", None)
    if dl is not None:
        dev_type, dev_id = dl()
        return dev_id if dev_type in (_KDL_CUDA, _KDL_CUDA_MANAGED) else -1
    return _pointer_device(name, ptr)


def _pointer_device(name, ptr):
    """The ordinal of the device ptr was allocated on; -1 when the driver is absent or ptr is
    NULL.  Raises ValueError for a pointer the driver does not know."""
    global _cu
    if _cu is None:
        with _cu_lock:
            if _cu is None:
                try:
                    cuda = ctypes.CDLL("libcuda.so.1")
                    fn = cuda.cuPointerGetAttribute
                    fn.restype = ctypes.c_int
                    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
                    _cu = fn if cuda.cuInit(0) == 0 else False
                except (OSError, AttributeError):
                    _cu = False
    if not _cu or not ptr:
        return -1
    ordinal = ctypes.c_int(-1)
    rc = _cu(ctypes.byref(ordinal), 9, ptr)  # CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    if rc != 0:
        raise ValueError(f"{name}'s pointer {ptr:#x} is not CUDA device memory (cuPointerGetAttribute "
                         f"error {rc})")
    return ordinal.value
