"""Finding and loading libmmtune.so; the ctypes mirror of include/mmtune.h.

Nothing here runs at import: the library is looked for at the first call that needs it
(load()), so `import mmtune` works on a machine without it.  Where it is looked for, first
found wins:

  1. $MMTUNE_LIBRARY, a path to libmmtune.so (nothing else is tried when it is set);
  2. the lib folders of the Python prefix (sys.prefix, then sys.base_prefix): where
     `cmake --install build --prefix P` put it when P is the environment's prefix;
  3. the dynamic loader's search: ctypes.util.find_library("mmtune") (ldconfig's cache,
     LD_LIBRARY_PATH), then the SONAME itself.

The structs below must match mmtune.h field for field; tests/test_cpu.py compiles the header
and compares their sizes and offsets.
"""

import ctypes
import ctypes.util
import os
import sys
import sysconfig
import threading

SONAME = "libmmtune.so.0.1"  # the ABI may change with any minor version before 1.0

# mmt_order, mmt_transpose, mmt_dtype, mmt_choice_kind (mmtune.h).
ROW_MAJOR, COL_MAJOR = 0, 1
F32, TF32, F16, BF16, E4M3, E5M2 = 0, 1, 2, 3, 4, 5
DTYPE_NAMES = {F32: "f32", TF32: "tf32", F16: "f16", BF16: "bf16", E4M3: "e4m3", E5M2: "e5m2"}
CHOICE_KINDS = {0: "exact", 1: "predicted", 2: "default"}
# mmt_bias, mmt_activation (mmtune.h).
BIAS_NONE, BIAS_COL, BIAS_ROW = 0, 1, 2
ACTIVATIONS = {None: 0, "none": 0, "relu": 1, "gelu_tanh": 2, "gelu": 3, "gelu_erf": 3,
               "silu": 4, "swish": 4}
LOG_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}
# mmt_scale_mode, mmt_quant_mode (mmtune.h).
SCALE_MODES = {"vectors": 0, "tensor": 1, "block": 2}
QUANT_MODES = {"tensor": 0, "row": 1, "1x128": 2, "128x128": 3}


class Error(RuntimeError):
    """A failed mmtune call: `status` (the mmt_status value), `status_name`
    ("MMT_ERR_NO_DRIVER", ...) and `message` (mmt_errmsg, or mmt_strerror when empty)."""

    def __init__(self, status, status_name, message):
        super().__init__(f"{status_name}: {message}")
        self.status = status
        self.status_name = status_name
        self.message = message


class LibraryNotFoundError(OSError):
    """libmmtune.so was not found or could not be loaded; the message lists what was tried."""


LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


class Options(ctypes.Structure):
    _fields_ = [
        ("db_path", ctypes.c_char_p),
        ("cache_dir", ctypes.c_char_p),
        ("log", LOG_FN),
        ("log_user", ctypes.c_void_p),
        ("log_level", ctypes.c_int),
        ("record", ctypes.c_int),
        ("online", ctypes.c_int),
        ("tuner", ctypes.c_char_p),
        ("online_budget", ctypes.c_double),
    ]


class Problem(ctypes.Structure):
    _fields_ = [
        ("order", ctypes.c_int),
        ("trans_a", ctypes.c_int),
        ("trans_b", ctypes.c_int),
        ("m", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("lda", ctypes.c_int64),
        ("ldb", ctypes.c_int64),
        ("ldc", ctypes.c_int64),
        ("dtype", ctypes.c_int),
    ]


class ChoiceStruct(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int),
        ("template_name", ctypes.c_char * 64),
        ("params", ctypes.c_char * 256),
        ("layout", ctypes.c_char * 4),
        ("kernel_m", ctypes.c_int64),
        ("kernel_n", ctypes.c_int64),
        ("kernel_k", ctypes.c_int64),
        ("expected_ms", ctypes.c_double),
        ("model_rows", ctypes.c_int),
        ("record_id", ctypes.c_int64),
        ("tuned_m", ctypes.c_int64),
        ("tuned_n", ctypes.c_int64),
        ("tuned_k", ctypes.c_int64),
        ("tuned_ms", ctypes.c_double),
        ("tuned_tflops", ctypes.c_double),
        ("rel_err", ctypes.c_double),
        ("max_err", ctypes.c_double),
        ("measured_at", ctypes.c_int64),
        ("device_name", ctypes.c_char * 128),
        ("nvrtc_version", ctypes.c_char * 16),
        ("template_hash", ctypes.c_char * 17),
        ("kernel_hash", ctypes.c_char * 17),
        ("epilogue", ctypes.c_char * 128),
        ("batch", ctypes.c_int64),
    ]


class MatmulDesc(ctypes.Structure):
    _fields_ = [
        ("order", ctypes.c_int),
        ("trans_a", ctypes.c_int),
        ("trans_b", ctypes.c_int),
        ("m", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("in_type", ctypes.c_int),
        ("out_type", ctypes.c_int),
        ("alpha", ctypes.c_float),
        ("beta", ctypes.c_float),
        ("a", ctypes.c_void_p),
        ("lda", ctypes.c_int64),
        ("b", ctypes.c_void_p),
        ("ldb", ctypes.c_int64),
        ("c", ctypes.c_void_p),
        ("ldc", ctypes.c_int64),
        ("d", ctypes.c_void_p),
        ("ldd", ctypes.c_int64),
        ("batch", ctypes.c_int64),
        ("stride_a", ctypes.c_int64),
        ("stride_b", ctypes.c_int64),
        ("stride_c", ctypes.c_int64),
        ("stride_d", ctypes.c_int64),
        ("bias_mode", ctypes.c_int),
        ("bias", ctypes.c_void_p),
        ("bias_type", ctypes.c_int),
        ("scale_row", ctypes.c_void_p),
        ("scale_col", ctypes.c_void_p),
        ("act", ctypes.c_int),
        ("gated", ctypes.c_int),
        ("scale_mode", ctypes.c_int),
        ("fast_accum", ctypes.c_int),
        ("b_type", ctypes.c_int),
        ("scale_d", ctypes.c_void_p),
        ("amax", ctypes.c_void_p),
        ("group_mode", ctypes.c_int),
        ("group_rows", ctypes.c_void_p),
        ("group_tokens", ctypes.c_int64),
    ]


class QuantizeDesc(ctypes.Structure):
    _fields_ = [
        ("rows", ctypes.c_int64),
        ("cols", ctypes.c_int64),
        ("in_type", ctypes.c_int),
        ("out_type", ctypes.c_int),
        ("x", ctypes.c_void_p),
        ("ldx", ctypes.c_int64),
        ("q", ctypes.c_void_p),
        ("ldq", ctypes.c_int64),
        ("scale", ctypes.c_void_p),
        ("mode", ctypes.c_int),
        ("pow2_scales", ctypes.c_int),
        ("given_scale", ctypes.c_void_p),
        ("amax", ctypes.c_void_p),
    ]


_c_int, _c_i64, _c_float, _vp = ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
_PROTOTYPES = {
    # name: (restype, argtypes)
    "mmt_status_name": (ctypes.c_char_p, [_c_int]),
    "mmt_strerror": (ctypes.c_char_p, [_c_int]),
    "mmt_open": (_c_int, [ctypes.POINTER(_vp), _c_int, ctypes.POINTER(Options)]),
    "mmt_close": (None, [_vp]),
    "mmt_errmsg": (ctypes.c_char_p, [_vp]),
    "mmt_gemm": (_c_int, [_vp, _c_int, _c_int, _c_int, _c_i64, _c_i64, _c_i64, _c_float, _vp,
                          _c_i64, _vp, _c_i64, _c_float, _vp, _c_i64, _c_int, _vp]),
    "mmt_explain": (_c_int, [_vp, ctypes.POINTER(Problem), ctypes.POINTER(ChoiceStruct)]),
    "mmt_matmul": (_c_int, [_vp, ctypes.POINTER(MatmulDesc), _vp]),
    "mmt_quantize": (_c_int, [_vp, ctypes.POINTER(QuantizeDesc), _vp]),
    "mmt_quantize_scales": (_c_i64, [_c_int, _c_i64, _c_i64]),
    "mmt_choice_kind_name": (ctypes.c_char_p, [_c_int]),
    "mmt_dtype_name": (ctypes.c_char_p, [_c_int]),
}

_lib = None
_lib_path = None
_lock = threading.Lock()


def _candidates():
    """(what, path-or-name) pairs to try, in order."""
    env = os.environ.get("MMTUNE_LIBRARY")
    if env:
        return [("$MMTUNE_LIBRARY", env)]
    out = []
    multiarch = sysconfig.get_config_var("MULTIARCH")
    prefixes = [sys.prefix] + ([sys.base_prefix] if sys.base_prefix != sys.prefix else [])
    for prefix in prefixes:
        for libdir in ["lib", "lib64"] + ([f"lib/{multiarch}"] if multiarch else []):
            path = os.path.join(prefix, libdir, "libmmtune.so")
            if os.path.exists(path):
                out.append(("the Python prefix", path))
    found = ctypes.util.find_library("mmtune")
    if found:
        out.append(("ctypes.util.find_library", found))
    out.append(("the loader's search path", SONAME))
    return out


def load():
    """The loaded library (a ctypes.CDLL with every prototype set), loading it at the first
    call.  Raises LibraryNotFoundError."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for what, path in _candidates():
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path} ({what}): {e}")
                continue
            for name, (restype, argtypes) in _PROTOTYPES.items():
                try:
                    fn = getattr(lib, name)
                except AttributeError:
                    raise LibraryNotFoundError(
                        f"{path} ({what}) is not a compatible libmmtune: it lacks {name}") from None
                fn.restype, fn.argtypes = restype, argtypes
            _lib_path = path
            _lib = lib
            return lib
        raise LibraryNotFoundError(
            "libmmtune.so not found; set MMTUNE_LIBRARY to its path (e.g. "
            "build/runtime/libmmtune.so, or <prefix>/lib/libmmtune.so after cmake --install). "
            "Tried: " + "; ".join(tried))


def library_path():
    """The path (or loader name) libmmtune was loaded from; loads it if needed."""
    load()
    return _lib_path


def status_error(lib, status, handle):
    """The Error for a failed call on context handle (may be None)."""
    name = lib.mmt_status_name(status).decode()
    msg = lib.mmt_errmsg(handle).decode(errors="replace") if handle else ""
    if not msg:
        msg = lib.mmt_strerror(status).decode()
    return Error(status, name, msg)
