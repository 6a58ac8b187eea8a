"""Contexts, gemm and explain: include/mmtune.h's calls on Python objects.

How an operand's memory becomes mmt_gemm's arguments: each of A, B, C must be row-major (unit
column stride) or column-major (unit row stride), with any leading dimension at least its
minor extent (padding allowed).  C's order is the call's mmt_order; an operand stored in the
other order is the transpose of a matrix stored in C's order with the same leading dimension,
so its transpose flag is flipped.  A size-1 dimension's stride is never looked at.
"""

import dataclasses
import sys
import threading

from . import _arrays, _lib
from ._arrays import _HANDLERS, handler, stream_handle
from ._lib import BF16, COL_MAJOR, F16, F32, ROW_MAJOR, TF32

_DTYPE_ALIASES = {"f32": F32, "float32": F32, "tf32": TF32, "f16": F16, "float16": F16,
                  "half": F16, "bf16": BF16, "bfloat16": BF16}


@dataclasses.dataclass(frozen=True)
class Choice:
    """What mmt_explain says (mmt_choice in mmtune.h; the same field names).  kind is "exact",
    "predicted" or "default"; the record fields are 0 / "" for "default"."""

    kind: str
    template_name: str
    params: str
    layout: str
    kernel_m: int
    kernel_n: int
    kernel_k: int
    expected_ms: float
    model_rows: int
    record_id: int
    tuned_m: int
    tuned_n: int
    tuned_k: int
    tuned_ms: float
    tuned_tflops: float
    rel_err: float
    max_err: float
    measured_at: int
    device_name: str
    nvrtc_version: str
    template_hash: str
    kernel_hash: str
    epilogue: str  # mmt_matmul's op kernel ("" for gemm)
    batch: int

    def as_dict(self):
        return dataclasses.asdict(self)

    def __str__(self):
        s = (f"{self.kind}: {self.template_name or '(nothing launched)'} {self.params} "
             f"layout {self.layout} ({self.kernel_m}x{self.kernel_n}x{self.kernel_k}), "
             f"expected {self.expected_ms:.4g} ms")
        if self.record_id:
            s += (f"; record {self.record_id}: {self.tuned_m}x{self.tuned_n}x{self.tuned_k} on "
                  f"{self.device_name}, {self.tuned_ms:.4g} ms, rel_err {self.rel_err:.3g}")
        return s

    @classmethod
    def _from_struct(cls, st):
        values = {}
        for f in dataclasses.fields(cls):
            v = getattr(st, f.name)
            values[f.name] = v.decode(errors="replace") if isinstance(v, bytes) else v
        values["kind"] = _lib.CHOICE_KINDS.get(st.kind, str(st.kind))
        return cls(**values)


class Context:
    """An mmtune context on one CUDA device (mmt_context).  Made by open(); the module-level
    gemm/explain use one per device, made at first use (default_context).  Any number of
    threads may call gemm/explain on it at once; close() must not race with them."""

    def __init__(self, handle, device, log_fn=None):
        lib = _lib.load()
        self._h = handle
        self.device = device
        self._gemm = lib.mmt_gemm
        self._lib = lib
        self._log_fn = log_fn  # the ctypes callback must outlive the context

    def close(self):
        """Frees the context (mmt_close).  Calls on it afterwards raise Error."""
        h, self._h = self._h, None
        if h:
            self._lib.mmt_close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not sys.is_finalizing():
                self.close()
        except Exception:
            pass

    def __repr__(self):
        return f"<mmtune.Context device {self.device}{'' if self._h else ', closed'}>"

    def error(self, status):
        """The Error for a status a call on this context returned."""
        if not self._h:
            return _lib.Error(status, self._lib.mmt_status_name(status).decode(),
                              "the context is closed")
        return _lib.status_error(self._lib, status, self._h)

    def gemm(self, a, b, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, *,
             allow_tf32=False, stream=None):
        """gemm() on this context."""
        return gemm(a, b, c, alpha, beta, trans_a, trans_b, allow_tf32=allow_tf32,
                    stream=stream, context=self)

    def explain(self, a, b, c=None, trans_a=False, trans_b=False, *, allow_tf32=False):
        """explain() on this context."""
        return explain(a, b, c, trans_a, trans_b, allow_tf32=allow_tf32, context=self)

    def explain_shape(self, m, n, k, dtype="f32", **kw):
        """explain_shape() on this context."""
        return explain_shape(m, n, k, dtype, context=self, **kw)

    def _explain(self, p):
        st = _lib.ChoiceStruct()
        rc = self._lib.mmt_explain(self._h, p, st)
        if rc:
            raise self.error(rc)
        return Choice._from_struct(st)


def open(device=0, db_path=None, cache_dir=None, log=None, log_level="info",  # noqa: A001
         record=False, online=False, tuner=None, online_budget=0):
    """Opens a context on CUDA device `device` (mmt_open), owned by the caller (close() it, or
    use it in a with-block).
    db_path:   the database; None: $MMTUNE_DB, else $XDG_CACHE_HOME/mmtune/mmtune.db, as the C
               library does.  A missing database is not an error (template defaults).
    cache_dir: the cubin cache; None: $MMTUNE_CACHE_DIR, else $XDG_CACHE_HOME/mmtune/cubin.
    log:       None, or a callable(level, message) with level "error", "warn", "info" or
               "debug"; it may be called from any thread that uses the context.
    log_level: the most detailed level passed to log.
    record:    add each problem served without a row of its own to the database's queue
               (`mmtune tune --recorded` tunes them); the database is made if missing.
    online:    record, and tune the recorded problems in the background: a `mmtune tune
               --recorded` process (tuner: its path; None: $MMTUNE_TUNER, else mmtune in PATH),
               online_budget seconds a problem (0: 5); later calls use the new results
               (mmtune.h, mmt_options.online).
    Raises Error (MMT_ERR_NO_DRIVER, MMT_ERR_NO_DEVICE, MMT_ERR_DB_CORRUPT, ...)."""
    lib = _lib.load()
    opt = _lib.Options()
    opt.db_path = None if db_path is None else str(db_path).encode()
    opt.cache_dir = None if cache_dir is None else str(cache_dir).encode()
    opt.record = 1 if record else 0
    opt.online = 1 if online else 0
    opt.tuner = None if tuner is None else str(tuner).encode()
    opt.online_budget = float(online_budget)
    log_fn = None
    if log is not None:
        names = {v: k for k, v in _lib.LOG_LEVELS.items()}

        def _log(_user, level, message):
            log(names.get(level, str(level)), message.decode(errors="replace"))

        log_fn = _lib.LOG_FN(_log)
        opt.log = log_fn
        if log_level not in _lib.LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(_lib.LOG_LEVELS)}")
        opt.log_level = _lib.LOG_LEVELS[log_level]
    handle = _lib.ctypes.c_void_p()
    rc = lib.mmt_open(handle, int(device), opt)
    if rc:
        err = _lib.status_error(lib, rc, handle.value)
        lib.mmt_close(handle.value)
        raise err
    return Context(handle.value, int(device), log_fn)


_defaults = {}
_defaults_lock = threading.Lock()


def default_context(device=0):
    """The context the module-level calls use on `device`: opened at first use with the
    environment's options ($MMTUNE_DB, $MMTUNE_CACHE_DIR), then kept for the process.  A failed
    open raises Error and is tried again at the next call."""
    ctx = _defaults.get(device)
    if ctx is None:
        with _defaults_lock:
            ctx = _defaults.get(device)
            if ctx is None:
                ctx = open(device)
                _defaults[device] = ctx
    return ctx


def _storage(name, r, c, s0, s1, prefer_row):
    """(row-major?, leading dimension) of an r x c matrix with element strides (s0, s1);
    prefer_row breaks the tie of a matrix that is both (a vector)."""
    row = (c <= 1 or s1 == 1) and (r <= 1 or s0 >= max(1, c))
    col = (r <= 1 or s0 == 1) and (c <= 1 or s1 >= max(1, r))
    if row and (prefer_row or not col):
        return True, (s0 if r > 1 else max(1, c))
    if col:
        return False, (s1 if c > 1 else max(1, r))
    raise ValueError(
        f"{name} ({r}x{c}, strides {s0}, {s1} elements) is neither row-major (unit column "
        f"stride, row stride >= {c}) nor column-major (unit row stride, column stride >= {r}); "
        "make it contiguous first")


def _dims(pa, pb, trans_a, trans_b):
    """(M, N, K) of op(A) op(B), checking that K agrees."""
    m, k = (pa[2], pa[1]) if trans_a else (pa[1], pa[2])
    kb, n = (pb[2], pb[1]) if trans_b else (pb[1], pb[2])
    if k != kb:
        op_a = f"a.T is {m}x{k}" if trans_a else f"a is {m}x{k}"
        op_b = f"b.T is {kb}x{n}" if trans_b else f"b is {kb}x{n}"
        raise ValueError(f"inner dimensions differ: {op_a} but {op_b}")
    return m, n, k


def _plan(trans_a, trans_b, ra, ca, sa0, sa1, rb, cb, sb0, sb1, rc, cc, sc0, sc1):
    """mmt_gemm's (order, transA, transB, lda, ldb, ldc) for A (ra x ca, element strides sa0,
    sa1), B and C: the order is C's; an operand stored in the other order is used transposed.
    The first tests of each operand are _storage's answer for a matrix with both sizes above 1,
    written out: this runs on every call."""
    if sc1 == 1 and sc0 >= cc > 1 and rc > 1:
        row_c, ldc = True, sc0
    elif sc0 == 1 and sc1 >= rc > 1 and cc > 1:
        row_c, ldc = False, sc1
    else:
        row_c, ldc = _storage("c", rc, cc, sc0, sc1, True)
    if sa1 == 1 and sa0 >= ca > 1 and ra > 1:
        row_a, lda = True, sa0
    elif sa0 == 1 and sa1 >= ra > 1 and ca > 1:
        row_a, lda = False, sa1
    else:
        row_a, lda = _storage("a", ra, ca, sa0, sa1, row_c)
    if sb1 == 1 and sb0 >= cb > 1 and rb > 1:
        row_b, ldb = True, sb0
    elif sb0 == 1 and sb1 >= rb > 1 and cb > 1:
        row_b, ldb = False, sb1
    else:
        row_b, ldb = _storage("b", rb, cb, sb0, sb1, row_c)
    ta = (1 if trans_a else 0) ^ (row_a != row_c)
    tb = (1 if trans_b else 0) ^ (row_b != row_c)
    return ROW_MAJOR if row_c else COL_MAJOR, ta, tb, lda, ldb, ldc


def _dtype_and_device(pa, pb, pc, allow_tf32):
    dt = pa[5]
    if pb[5] != dt or pc[5] != dt:
        names = [_lib.DTYPE_NAMES[p[5]] for p in (pa, pb, pc)]
        raise TypeError(f"a, b and c must have one dtype, got {', '.join(names)}")
    if allow_tf32 and dt == F32:
        dt = TF32
    dev = pa[6]
    if pb[6] != dev or pc[6] != dev:
        devs = {p[6] for p in (pa, pb, pc)} - {-1}
        if len(devs) > 1:
            raise ValueError(f"a, b and c are on different devices "
                             f"(cuda:{pa[6]}, cuda:{pb[6]}, cuda:{pc[6]})")
        dev = devs.pop() if devs else -1
    return dt, dev


def _context_for(context, dev):
    if context is None:
        dev = 0 if dev < 0 else dev
        return _defaults.get(dev) or default_context(dev)
    if dev >= 0 and dev != context.device:
        raise ValueError(f"the operands are on cuda:{dev} but the context is on "
                         f"cuda:{context.device}")
    return context


def gemm(a, b, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, *,
         allow_tf32=False, stream=None, context=None):
    """C = alpha * op(A) op(B) + beta * C on the GPU, asynchronously, like cuBLAS; returns C.

    a, b, c:    2-D CUDA matrices: torch tensors, CuPy arrays, or any object with
                __cuda_array_interface__ or DLPack; float32, float16 or bfloat16, all three
                the same; each row- or column-major, leading dimension padded or not.
    c:          None: a new row-major matrix from a's library (torch or CuPy), beta must be 0.
    trans_a/b:  op(X) = X.T when true (X as the array's shape reads), else X.
    allow_tf32: float32 multiplied on tensor cores in TF32 (MMT_TF32): faster, less precise.
    stream:     None: the current stream of a's library (torch, CuPy), the stream a's
                __cuda_array_interface__ names, else the legacy default stream; or an int
                (CUstream), a torch/CuPy stream, an object with __cuda_stream__.
    context:    None: default_context(the operands' device).
    Raises ValueError (shapes, strides, devices, beta with c=None), TypeError (not a CUDA
    matrix, dtype), Error (the library's status and message)."""
    if c is None and beta != 0:
        raise ValueError("beta must be 0 when c is None (the new output is uninitialized)")
    th = _arrays.TORCH
    if (th is not None and type(a) is th.tensor and type(b) is th.tensor
            and (c is None or type(c) is th.tensor)):
        out = _gemm_torch(th, a, b, c, alpha, beta, trans_a, trans_b, allow_tf32, stream, context)
        if out is not None:
            return out
    ha = _HANDLERS.get(type(a)) or handler(type(a))
    if stream is None:
        pa = ha.parse(a, "a", None)
        s = ha.stream(a, pa[6])
    else:
        s = stream_handle(stream)
        pa = ha.parse(a, "a", s)
    pb = (_HANDLERS.get(type(b)) or handler(type(b))).parse(b, "b", s)
    m, n, k = _dims(pa, pb, trans_a, trans_b)
    if c is None:
        c = ha.empty(a, m, n)
    pc = (_HANDLERS.get(type(c)) or handler(type(c))).parse(c, "c", s)
    if pc[1] != m or pc[2] != n:
        raise ValueError(f"c is {pc[1]}x{pc[2]} but op(a) op(b) is {m}x{n}")
    dt, dev = _dtype_and_device(pa, pb, pc, allow_tf32)
    order, ta, tb, lda, ldb, ldc = _plan(trans_a, trans_b, *pa[1:5], *pb[1:5], *pc[1:5])
    ctx = _context_for(context, dev)
    rc = ctx._gemm(ctx._h, order, ta, tb, m, n, k, alpha, pa[0], lda, pb[0], ldb, beta, pc[0],
                   ldc, dt, s)
    if rc:
        raise ctx.error(rc)
    return c


def _gemm_torch(th, a, b, c, alpha, beta, trans_a, trans_b, allow_tf32, stream, context):
    """gemm() on plain torch tensors, read directly: the common case, kept short (per-call host
    time matters, bench_overhead.py).  None for anything it does not expect (not 2-D, not on
    one CUDA device, dtypes that differ or are not supported, shapes that do not fit): the
    general path then says what is wrong."""
    dev, dtype = a.get_device(), a.dtype
    dt = th.dtypes.get(dtype)
    if dev < 0 or dt is None or b.dtype is not dtype or b.get_device() != dev:
        return None
    try:
        ra, ca = a.shape
        rb, cb = b.shape
    except ValueError:
        return None
    m, k = (ca, ra) if trans_a else (ra, ca)
    kb, n = (cb, rb) if trans_b else (rb, cb)
    if kb != k:
        return None
    if c is None:
        c = th.torch.empty((m, n), dtype=dtype, device=a.device)
    elif c.dtype is not dtype or c.get_device() != dev or c.shape != (m, n):
        return None
    (sa0, sa1), (sb0, sb1), (sc0, sc1) = a.stride(), b.stride(), c.stride()
    order, ta, tb, lda, ldb, ldc = _plan(trans_a, trans_b, ra, ca, sa0, sa1, rb, cb, sb0, sb1,
                                         m, n, sc0, sc1)
    if allow_tf32 and dt == F32:
        dt = TF32
    ctx = (_defaults.get(dev) or default_context(dev)) if context is None else \
        _context_for(context, dev)
    s = th.raw_stream(dev) if stream is None else stream_handle(stream)
    rc = ctx._gemm(ctx._h, order, ta, tb, m, n, k, alpha, a.data_ptr(), lda, b.data_ptr(), ldb,
                   beta, c.data_ptr(), ldc, dt, s)
    if rc:
        raise ctx.error(rc)
    return c


def explain(a, b, c=None, trans_a=False, trans_b=False, *, allow_tf32=False, context=None):
    """Which kernel gemm(a, b, c, ...) would launch, as a Choice (mmt_explain); launches and
    compiles nothing.  The matrices are only looked at (shape, strides, dtype, device); with
    c=None, the row-major output gemm would allocate."""
    pa = handler(type(a)).parse(a, "a", None)
    pb = handler(type(b)).parse(b, "b", None)
    m, n, k = _dims(pa, pb, trans_a, trans_b)
    if c is None:
        pc = (0, m, n, max(1, n), 1, pa[5], pa[6])
    else:
        pc = handler(type(c)).parse(c, "c", None)
        if pc[1] != m or pc[2] != n:
            raise ValueError(f"c is {pc[1]}x{pc[2]} but op(a) op(b) is {m}x{n}")
    dt, dev = _dtype_and_device(pa, pb, pc, allow_tf32)
    order, ta, tb, lda, ldb, ldc = _plan(trans_a, trans_b, *pa[1:5], *pb[1:5], *pc[1:5])
    p = _lib.Problem(order, ta, tb, m, n, k, lda, ldb, ldc, dt)
    return _context_for(context, dev)._explain(p)


def explain_shape(m, n, k, dtype="f32", *, order="row", trans_a=False, trans_b=False,
                  lda=None, ldb=None, ldc=None, device=0, context=None):
    """explain() for a problem given by its sizes: dtype "f32", "tf32", "f16" or "bf16"
    (or "float32", "float16", "bfloat16"); order "row" or "col"; leading dimensions default
    to the tight ones."""
    if dtype not in _DTYPE_ALIASES:
        raise TypeError(f"dtype must be one of {', '.join(_DTYPE_ALIASES)}, got {dtype!r}")
    if order not in ("row", "col"):
        raise ValueError(f"order must be 'row' or 'col', got {order!r}")
    row = order == "row"
    # The stored shapes: op(A) is m x k, op(B) is k x n, C is m x n.
    a_rows, a_cols = (k, m) if trans_a else (m, k)
    b_rows, b_cols = (n, k) if trans_b else (k, n)
    tight = (lambda r, c: max(1, c)) if row else (lambda r, c: max(1, r))
    p = _lib.Problem(ROW_MAJOR if row else COL_MAJOR, int(bool(trans_a)), int(bool(trans_b)),
                     m, n, k, tight(a_rows, a_cols) if lda is None else lda,
                     tight(b_rows, b_cols) if ldb is None else ldb,
                     tight(m, n) if ldc is None else ldc, _DTYPE_ALIASES[dtype])
    return (default_context(device) if context is None else context)._explain(p)
