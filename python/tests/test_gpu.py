"""GPU tests of the mmtune package: mmtune.gemm against a float64 torch.matmul of the same
inputs, for float32 (and TF32), float16 and bfloat16, A, B and C each row- or column-major with
tight or padded leading dimensions, every transpose; the output allocation, streams and CUDA
graph capture, edge sizes, the generic CAI and DLPack paths (torch tensors behind wrappers),
CuPy when installed, several threads, explain().

Skips cleanly (one line "mmtune-gpu-tests: skipped: WHY", which CTest reads) without torch, a
GPU, or a context.  The database is $MMTUNE_DB when set, else an empty one in a temporary
folder (every problem then gets a template default or a built-in config).

Run: MMTUNE_LIBRARY=build/runtime/libmmtune.so PYTHONPATH=python \
     python3 -m unittest discover -s python/tests -p test_gpu.py -v
"""

import importlib
import itertools
import re
import os
import tempfile
import threading
import unittest

import mmtune
from fakes import llama_mlp

_tmp = tempfile.TemporaryDirectory(prefix="mmtune-py-gpu-")
os.environ.setdefault("MMTUNE_DB", os.path.join(_tmp.name, "mmtune.db"))
os.environ.setdefault("MMTUNE_CACHE_DIR", os.path.join(_tmp.name, "cubin"))


def _skip_reason():
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    try:
        mmtune.default_context(torch.cuda.current_device())
    except (mmtune.Error, mmtune.LibraryNotFoundError) as e:
        return f"no mmtune context: {e}"
    return None


SKIP = _skip_reason()
FP8_SKIP = SKIP
if SKIP:
    print(f"mmtune-gpu-tests: skipped: {SKIP}", flush=True)
else:
    import torch
    if not hasattr(torch, "float8_e4m3fn"):
        FP8_SKIP = "torch without float8 dtypes"

# Relative to the largest |reference| element: the output's rounding and fp32 accumulation.
TOL = {"float32": 1e-4, "tf32": 1e-2, "float16": 5e-3, "bfloat16": 3e-2}


def make(rows, cols, layout, dtype, pad=0):
    """(matrix, the buffer it is a view of): rows x cols, row- or column-major, its leading
    dimension padded by pad elements."""
    if layout == "row":
        base = torch.randn(rows, cols + pad, device="cuda").to(dtype)
        return base[:, :cols], base
    base = torch.randn(cols, rows + pad, device="cuda").to(dtype)
    return base[:, :rows].t(), base


def rel_err(out, ref):
    scale = ref.abs().max().item() or 1.0
    return (out.double() - ref).abs().max().item() / scale


@unittest.skipIf(SKIP, SKIP)
class TestAgainstTorch(unittest.TestCase):
    def check(self, m, n, k, dtype, la, lb, lc, ta, tb, pads, alpha=1.5, beta=0.5,
              tf32=False, tol_key=None):
        a, _ = make(k if ta else m, m if ta else k, la, dtype, pads[0])
        b, _ = make(n if tb else k, k if tb else n, lb, dtype, pads[1])
        c, c_base = make(m, n, lc, dtype, pads[2])
        c0, base0 = c.double().clone(), c_base.clone()
        op_a = a.t() if ta else a
        op_b = b.t() if tb else b
        ref = alpha * (op_a.double() @ op_b.double()) + beta * c0
        self.assertIs(mmtune.gemm(a, b, c, alpha, beta, ta, tb, allow_tf32=tf32), c)
        torch.cuda.synchronize()
        what = (f"{m}x{n}x{k} {dtype} a {la} b {lb} c {lc} trans {int(ta)}{int(tb)} pads {pads}"
                f"{' tf32' if tf32 else ''}")
        err = rel_err(c, ref)
        self.assertLess(err, TOL[tol_key or str(dtype).split(".")[1]], what)
        # Nothing written outside C: with C's elements zeroed, its buffer is what it was.
        c.zero_()
        (base0[:, :n] if lc == "row" else base0[:, :m]).zero_()
        self.assertTrue(torch.equal(c_base, base0), f"{what}: wrote outside C")

    def sweep(self, dtype, m=77, n=45, k=39, tf32=False, tol_key=None):
        layouts = ("row", "col")
        for la, lb, lc in itertools.product(layouts, repeat=3):
            for ta, tb in itertools.product((False, True), repeat=2):
                for pads in ((0, 0, 0), (3, 5, 2), (8, 8, 8)):
                    with self.subTest(la=la, lb=lb, lc=lc, ta=ta, tb=tb, pads=pads):
                        self.check(m, n, k, dtype, la, lb, lc, ta, tb, pads, tf32=tf32,
                                   tol_key=tol_key)

    def test_float32(self):
        self.sweep(torch.float32)

    def test_float16(self):
        self.sweep(torch.float16)

    def test_bfloat16(self):
        self.sweep(torch.bfloat16)

    def test_tf32(self):
        self.sweep(torch.float32, m=64, n=128, k=64, tf32=True, tol_key="tf32")

    def test_aligned_sizes(self):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for ta, tb in itertools.product((False, True), repeat=2):
                self.check(256, 128, 192, dtype, "row", "col", "row", ta, tb, (0, 0, 0))
                self.check(256, 128, 192, dtype, "col", "row", "col", ta, tb, (8, 0, 8))

    def test_vectors(self):
        for m, n, k in ((1, 300, 200), (300, 1, 200), (64, 64, 1), (1, 1, 100)):
            for dtype in (torch.float32, torch.float16):
                self.check(m, n, k, dtype, "row", "row", "row", False, False, (0, 0, 0))
                self.check(m, n, k, dtype, "col", "row", "col", True, False, (0, 0, 0))


@unittest.skipIf(SKIP, SKIP)
class TestCalls(unittest.TestCase):
    def test_output_allocated(self):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            a = torch.randn(70, 30, device="cuda").to(dtype)
            b = torch.randn(50, 30, device="cuda").to(dtype)
            c = mmtune.gemm(a, b, trans_b=True)
            self.assertEqual((c.shape, c.dtype, c.device, c.is_contiguous()),
                             (torch.Size([70, 50]), dtype, a.device, True))
            self.assertLess(rel_err(c, a.double() @ b.double().t()), 3e-2)

    def test_current_stream(self):
        a = torch.randn(500, 400, device="cuda")
        b = torch.randn(400, 300, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            c = mmtune.gemm(a, b)
            d = c * 2  # ordered after the gemm only if it ran on s
        s.synchronize()
        self.assertLess(rel_err(d, 2 * (a.double() @ b.double())), 1e-4)
        e = torch.zeros_like(c)
        mmtune.gemm(a, b, e, stream=s)  # an explicit stream
        s.synchronize()
        self.assertLess(rel_err(e, a.double() @ b.double()), 1e-4)

    def test_cuda_graph_capture(self):
        # Under capture only the capturing stream may be used: this fails if mmtune launched
        # anywhere but torch's current stream.
        a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
        b = torch.randn(128, 64, device="cuda", dtype=torch.float16)
        c = torch.empty(256, 64, device="cuda", dtype=torch.float16)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            mmtune.gemm(a, b, c)  # the first call of a problem is made before capturing
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            mmtune.gemm(a, b, c)
        a.copy_(torch.randn_like(a))
        c.zero_()
        g.replay()
        torch.cuda.synchronize()
        self.assertLess(rel_err(c, a.double() @ b.double()), 5e-3)

    def test_edge_sizes(self):
        a = torch.randn(5, 0, device="cuda")
        b = torch.randn(0, 7, device="cuda")
        c = torch.full((5, 7), 3.0, device="cuda")
        mmtune.gemm(a, b, c, beta=0.5)  # K = 0: C = beta C
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(c, torch.full((5, 7), 1.5, device="cuda")))
        e = mmtune.gemm(torch.randn(0, 4, device="cuda"), torch.randn(4, 6, device="cuda"))
        self.assertEqual(e.shape, torch.Size([0, 6]))
        a = torch.randn(8, 4, device="cuda")
        c = torch.full((8, 8), 2.0, device="cuda")
        mmtune.gemm(a, a, c, alpha=0.0, beta=1.0, trans_b=True)  # C = C
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(c, torch.full((8, 8), 2.0, device="cuda")))

    def test_errors(self):
        a = torch.randn(6, 8, device="cuda")
        with self.assertRaisesRegex(ValueError, "neither row-major"):
            mmtune.gemm(a[:, ::2], torch.randn(4, 3, device="cuda"))
        with self.assertRaisesRegex(TypeError, "not on a CUDA device"):
            mmtune.gemm(a, torch.randn(8, 3))
        with self.assertRaisesRegex(TypeError, "dtype torch.float64"):
            mmtune.gemm(a.double(), a.double().t())
        with self.assertRaisesRegex(TypeError, "one dtype"):
            mmtune.gemm(a, a.half().t())
        with self.assertRaisesRegex(ValueError, "2-D"):
            mmtune.gemm(torch.randn(2, 6, 8, device="cuda"), a.t())

    def test_requires_grad_inputs(self):
        a = torch.randn(30, 20, device="cuda", requires_grad=True)
        b = torch.randn(20, 10, device="cuda")
        c = mmtune.gemm(a, b)
        self.assertLess(rel_err(c, a.detach().double() @ b.double()), 1e-4)

    def test_threads(self):
        errors, results = [], {}

        def work(i):
            try:
                s = torch.cuda.Stream()
                with torch.cuda.stream(s):
                    a = torch.randn(100 + i, 64, device="cuda")
                    b = torch.randn(64, 80, device="cuda")
                    for _ in range(20):
                        c = mmtune.gemm(a, b)
                s.synchronize()
                results[i] = rel_err(c, a.double() @ b.double())
            except Exception as e:  # noqa: BLE001 -- reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 8)
        self.assertLess(max(results.values()), 1e-4)

    def test_explain(self):
        a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
        b = torch.randn(256, 384, device="cuda", dtype=torch.float16)
        ch = mmtune.explain(a, b)
        self.assertIn(ch.kind, ("exact", "predicted", "default"))
        self.assertTrue(ch.template_name)
        self.assertIn(ch.layout, ("nn", "nt", "tn", "tt"))
        self.assertEqual(ch.as_dict()["kind"], ch.kind)
        self.assertIn(ch.template_name, str(ch))
        same = mmtune.explain_shape(512, 384, 256, "f16")
        self.assertEqual((same.template_name, same.params), (ch.template_name, ch.params))
        nothing = mmtune.explain_shape(0, 10, 10)
        self.assertEqual((nothing.kind, nothing.template_name), ("default", ""))

    def test_open_context(self):
        with tempfile.TemporaryDirectory() as d:
            lines = []
            with mmtune.open(torch.cuda.current_device(), db_path=os.path.join(d, "x.db"),
                             log=lambda level, msg: lines.append((level, msg)),
                             log_level="debug") as ctx:
                a = torch.randn(64, 32, device="cuda")
                c = ctx.gemm(a, a, trans_b=True)
                torch.cuda.synchronize()
                self.assertLess(rel_err(c, a.double() @ a.double().t()), 1e-4)
                self.assertTrue(ctx.explain(a, a, trans_b=True).template_name)
            self.assertTrue(any(level == "info" for level, _ in lines), lines)
            with self.assertRaisesRegex(mmtune.Error, "closed"):
                ctx.gemm(a, a, trans_b=True)


class _CAIOnly:
    """A torch tensor seen only through __cuda_array_interface__ (no __dlpack_device__, so
    the device comes from the driver)."""

    def __init__(self, t):
        self.t = t
        self.__cuda_array_interface__ = t.__cuda_array_interface__


class _DLPackOnly:
    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


@unittest.skipIf(SKIP, SKIP)
class TestProtocols(unittest.TestCase):
    def test_cai_and_dlpack(self):
        for wrap in (_CAIOnly, _DLPackOnly):
            for dtype in (torch.float32, torch.float16, torch.bfloat16):
                with self.subTest(wrap=wrap.__name__, dtype=dtype):
                    a, _ = make(40, 24, "col", dtype, 3)
                    b, _ = make(24, 56, "row", dtype, 0)
                    c = torch.zeros(40, 56, device="cuda", dtype=dtype)
                    mmtune.gemm(wrap(a), wrap(b), wrap(c))
                    torch.cuda.synchronize()
                    self.assertLess(rel_err(c, a.double() @ b.double()), 3e-2)

    def test_torch_fast_path_matches_general_path(self):
        # Plain tensors take gemm's torch fast path; the same tensors behind CAI take the
        # general one.  Both must make the same mmt_gemm call.
        from fakes import RecordingContext
        from mmtune import _arrays
        mmtune.gemm(*(torch.zeros(2, 2, device="cuda"),) * 3)  # torch now seen
        self.assertIsNotNone(_arrays.TORCH)
        fast, general = RecordingContext(), RecordingContext()
        fast.device = general.device = torch.cuda.current_device()
        for la, lb, lc in itertools.product(("row", "col"), repeat=3):
            for ta, tb in itertools.product((False, True), repeat=2):
                for m, n, k, pad in ((9, 7, 5, 0), (9, 7, 5, 3), (1, 7, 5, 1), (9, 1, 1, 0)):
                    a, _ = make(k if ta else m, m if ta else k, la, torch.float16, pad)
                    b, _ = make(n if tb else k, k if tb else n, lb, torch.float16, pad)
                    c, _ = make(m, n, lc, torch.float16, pad)
                    mmtune.gemm(a, b, c, 2.0, 0.5, ta, tb, context=fast)
                    mmtune.gemm(_CAIOnly(a), _CAIOnly(b), _CAIOnly(c), 2.0, 0.5, ta, tb,
                                context=general)
                    self.assertEqual(fast.calls[-1], general.calls[-1],
                                     f"{la} {lb} {lc} {ta} {tb} {m}x{n}x{k} pad {pad}")
        self.assertEqual(len(fast.calls), 8 * 4 * 4)

    def test_cupy(self):
        try:
            import cupy
        except ImportError:
            self.skipTest("CuPy is not installed")
        for dtype in (cupy.float32, cupy.float16):
            a = cupy.random.standard_normal((90, 33)).astype(dtype)
            b = cupy.asfortranarray(cupy.random.standard_normal((33, 70)).astype(dtype))
            s = cupy.cuda.Stream(non_blocking=True)
            with s:
                c = mmtune.gemm(a, b)  # CuPy's current stream, a CuPy output
                d = c * 1
            s.synchronize()
            self.assertIsInstance(c, cupy.ndarray)
            ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
            err = float(abs(d.astype(cupy.float64) - ref).max() / abs(ref).max())
            self.assertLess(err, 5e-3, str(dtype))


def _act(x, act):
    f = torch.nn.functional
    return {None: x, "relu": f.relu(x), "gelu": f.gelu(x), "gelu_tanh": f.gelu(x, approximate="tanh"),
            "silu": f.silu(x)}[act]


@unittest.skipIf(SKIP, SKIP)
class TestMatmul(unittest.TestCase):
    """mmtune.matmul against the same expression in float64 torch."""

    def close(self, out, ref, what):
        self.assertLess(rel_err(out, ref), TOL[str(out.dtype).split(".")[1]], what)

    def test_linear_layers(self):
        for dtype, out_dtype, act, m in itertools.product(
                (torch.float16, torch.bfloat16), (None, torch.float32), (None, "relu", "gelu",
                                                                        "gelu_tanh", "silu"),
                (1, 16, 130)):
            x = torch.randn(m, 96, device="cuda").to(dtype)
            w = torch.randn(72, 96, device="cuda").to(dtype)
            b = torch.randn(72, device="cuda")
            y = mmtune.matmul(x, w, trans_b=True, bias=b, act=act, out_dtype=out_dtype)
            torch.cuda.synchronize()
            self.assertEqual(y.dtype, out_dtype or dtype)
            ref = _act(x.double() @ w.double().T + b.double(), act)
            self.close(y, ref, f"{dtype} -> {y.dtype} {act} m={m}")

    def test_gated(self):
        for dtype, act in itertools.product((torch.float16, torch.bfloat16), ("silu", "gelu")):
            x = torch.randn(33, 64, device="cuda").to(dtype)
            wg, wu = (torch.randn(40, 64, device="cuda").to(dtype) for _ in range(2))
            w = torch.stack([wg, wu], 1).reshape(80, 64)
            h = mmtune.matmul(x, w, trans_b=True, act=act, gated=True)
            torch.cuda.synchronize()
            ref = _act(x.double() @ wg.double().T, act) * (x.double() @ wu.double().T)
            self.close(h, ref, f"{dtype} {act}")

    def test_attention_batches(self):
        q = torch.randn(6, 50, 64, device="cuda").half()
        k = torch.randn(6, 50, 64, device="cuda").half()
        s = mmtune.matmul(q, k, trans_b=True, alpha=0.125, out_dtype=torch.float32)
        torch.cuda.synchronize()
        self.close(s, 0.125 * q.double() @ k.double().mT, "q k^T")
        p = torch.softmax(s, -1).half()
        v = torch.randn(6, 50, 64, device="cuda").half()
        o = mmtune.matmul(p, v)
        torch.cuda.synchronize()
        self.close(o, p.double() @ v.double(), "p v")

    def test_shared_weight_residual_in_place(self):
        x = torch.randn(4, 20, 48, device="cuda").bfloat16()
        w = torch.randn(48, 24, device="cuda").bfloat16()
        r = torch.randn(4, 20, 24, device="cuda").bfloat16()
        ref = x.double() @ w.double() + r.double()
        out = mmtune.matmul(x, w, c=r, out=r, beta=1.0)
        torch.cuda.synchronize()
        self.assertIs(out, r)
        self.close(r, ref, "residual in place")

    def test_errors(self):
        x = torch.randn(4, 8, device="cuda").half()
        with self.assertRaises(ValueError):
            mmtune.matmul(x, torch.randn(7, 3, device="cuda").half())
        with self.assertRaises(ValueError):
            mmtune.matmul(x, torch.randn(8, 5, device="cuda").half(), gated=True)
        with self.assertRaises(ValueError):
            mmtune.matmul(x, torch.randn(8, 6, device="cuda").half(), bias=torch.randn(5, device="cuda"))
        with self.assertRaises(mmtune.Error) as cm:  # D over A: the library refuses
            buf = torch.randn(64, device="cuda").half()
            mmtune.matmul(buf[:32].view(4, 8), torch.randn(8, 8, device="cuda").half(),
                          out=buf[16:48].view(4, 8))
        self.assertEqual(cm.exception.status_name, "MMT_ERR_INVALID_ARG")


def _groups(x, mode):
    """Each group's largest |x| (x float32, finite), in mmtune.quantize's scale shape."""
    r, c = x.shape
    a = x.abs()
    if mode == "tensor":
        return a.max()
    if mode == "row":
        return a.amax(1)
    cb, rb = -(-c // 128), -(-r // 128)
    if mode == "1x128":
        a = torch.nn.functional.pad(a, (0, cb * 128 - c))
        return a.reshape(r, cb, 128).amax(2).T.contiguous()
    a = torch.nn.functional.pad(a, (0, cb * 128 - c, 0, rb * 128 - r))
    return a.reshape(rb, 128, cb, 128).amax((1, 3))


def _expand(s, mode, r, c):
    """A scale tensor spread over the r x c elements it scales."""
    if mode == "tensor":
        return s.expand(r, c)
    if mode == "row":
        return s[:, None].expand(r, c)
    if mode == "1x128":
        return s.T.repeat_interleave(128, 1)[:, :c]
    return s.repeat_interleave(128, 0).repeat_interleave(128, 1)[:r, :c]


@unittest.skipIf(FP8_SKIP, FP8_SKIP)
class TestFP8(unittest.TestCase):
    """mmtune.quantize against its definition in torch; FP8 matmul of what it makes."""

    def test_quantize_matches_definition(self):
        for dtype, fp8, mode in itertools.product(
                (torch.float32, torch.float16, torch.bfloat16),
                (torch.float8_e4m3fn, torch.float8_e5m2), ("tensor", "row", "1x128", "128x128")):
            x = (torch.randn(130, 300, device="cuda") * 4).to(dtype)
            q, s = mmtune.quantize(x, fp8, mode)
            torch.cuda.synchronize()
            top = torch.finfo(fp8).max
            g = _groups(x.float(), mode)  # a tensor divisor: torch multiplies by a scalar's inverse
            want_s = (g / torch.full_like(g, top)).clamp(min=torch.finfo(torch.float32).tiny)
            self.assertTrue(torch.equal(s, want_s), f"{dtype} {fp8} {mode} scales")
            v = x.float() * (1 / _expand(want_s, mode, *x.shape))
            want_q = v.clamp(-top, top).to(fp8)
            self.assertTrue(torch.equal(q.view(torch.uint8), want_q.view(torch.uint8)),
                            f"{dtype} {fp8} {mode} codes")

    def test_quantize_given_scale(self):
        for dtype, fp8 in itertools.product((torch.float32, torch.bfloat16),
                                            (torch.float8_e4m3fn, torch.float8_e5m2)):
            x = (torch.randn(257, 1000, device="cuda") * 4).to(dtype)
            top = torch.finfo(fp8).max
            given = torch.tensor([x.float().abs().max().item() / top / 2], device="cuda")
            amax = torch.full((1,), -1.0, device="cuda")
            q, s = mmtune.quantize(x, fp8, given_scale=given, amax=amax)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(s, given[0]), f"{dtype} {fp8} scale")
            self.assertEqual(amax.item(), x.float().abs().max().item())
            want_q = (x.float() * (1 / given[0])).clamp(-top, top).to(fp8)  # half saturate
            self.assertTrue(torch.equal(q.view(torch.uint8), want_q.view(torch.uint8)),
                            f"{dtype} {fp8} codes")
        with self.assertRaisesRegex(mmtune.Error, "given_scale is for mode MMT_QUANT_TENSOR"):
            mmtune.quantize(x, mode="row", given_scale=given)
        with self.assertRaisesRegex(ValueError, "given_scale must be a float32 tensor of one "
                                                "element"):
            mmtune.quantize(x, given_scale=torch.ones(2, device="cuda"))
        with self.assertRaisesRegex(ValueError, "amax must be a float32 tensor of one element"):
            mmtune.quantize(x, given_scale=given, amax=torch.ones(1, device="cuda",
                                                                  dtype=torch.float16))

    def test_fp8_linear(self):
        for m, scale_mode in itertools.product((1, 64, 300), ("tensor", "block")):
            x = torch.randn(m, 512, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(384, 512, device="cuda", dtype=torch.bfloat16)
            xm, wm = ("tensor", "tensor") if scale_mode == "tensor" else ("1x128", "128x128")
            qx, sx = mmtune.quantize(x, mode=xm)
            qw, sw = mmtune.quantize(w, mode=wm)
            y = mmtune.matmul(qx, qw, trans_b=True, scale_mode=scale_mode, scale_row=sx,
                              scale_col=sw, out_dtype=torch.bfloat16)
            torch.cuda.synchronize()
            dx = qx.double() * _expand(sx, xm, m, 512).double()
            dw = qw.double() * _expand(sw, wm, 384, 512).double()
            self.assertLess(rel_err(y, dx @ dw.T), TOL["bfloat16"], f"m={m} {scale_mode}")

    def test_mixed_fp8_types(self):
        x = torch.randn(64, 256, device="cuda")
        w = torch.randn(96, 256, device="cuda")
        for ta, tb in itertools.product((torch.float8_e4m3fn, torch.float8_e5m2), repeat=2):
            qx, sx = mmtune.quantize(x, ta)
            qw, sw = mmtune.quantize(w, tb)
            y = mmtune.matmul(qx, qw, trans_b=True, scale_mode="tensor", scale_row=sx,
                              scale_col=sw, out_dtype=torch.float32)
            torch.cuda.synchronize()
            ref = (qx.double() * sx.double()) @ (qw.double() * sw.double()).T
            self.assertLess(rel_err(y, ref), TOL["tf32"], f"{ta} x {tb}")

    def test_fp8_output(self):
        x = torch.randn(100, 256, device="cuda")
        w = torch.randn(80, 256, device="cuda")
        qx, sx = mmtune.quantize(x)
        qw, sw = mmtune.quantize(w)
        sd = torch.tensor([0.25], device="cuda")
        amax = torch.full((1,), -1.0, device="cuda")
        y = mmtune.matmul(qx, qw, trans_b=True, scale_mode="tensor", scale_row=sx, scale_col=sw,
                          out_dtype=torch.float8_e4m3fn, scale_d=sd, amax=amax)
        torch.cuda.synchronize()
        ref = (qx.double() * sx.double()) @ (qw.double() * sw.double()).T
        self.assertLess(rel_err(y.double() / 0.25, ref), 7e-2)
        self.assertLess(abs(amax.item() - ref.abs().max().item()) / ref.abs().max().item(), 1e-2)

    def test_errors(self):
        x = torch.randn(8, 8, device="cuda")
        with self.assertRaises(TypeError):
            mmtune.quantize(x, torch.float16)
        with self.assertRaises(ValueError):
            mmtune.quantize(x, mode="2x2")
        with self.assertRaises(ValueError):
            mmtune.quantize(x.T.contiguous().T)
        q, s = mmtune.quantize(x)
        with self.assertRaises(ValueError):  # block scales of the wrong size
            mmtune.matmul(q, q, trans_b=True, scale_mode="block", scale_row=s, scale_col=s)


def _grouped_reference(a, b, offsets, bias, act, trans_b):
    """Each expert's rows of a times its weight, in float64 (contiguous layout)."""
    ref = torch.zeros(a.shape[0], b.shape[1] if trans_b else b.shape[2], dtype=torch.float64,
                      device=a.device)
    for z in range(b.shape[0]):
        lo, hi = int(offsets[z]), int(offsets[z + 1])
        w = b[z].double()
        y = a[lo:hi].double() @ (w.T if trans_b else w)
        if bias is not None:
            y = y + bias[z].double()
        ref[lo:hi] = _act(y, act)
    return ref


@unittest.skipIf(SKIP, SKIP)
class TestGrouped(unittest.TestCase):
    """mmtune.grouped_matmul (and its operator) against each expert's float64 product: empty
    experts, a one-row expert, offsets that misalign rows for 16-byte loads, masked blocks
    whose rows past the counts stay as they were, a CUDA graph replayed over new routings."""

    def test_contiguous(self):
        torch.manual_seed(3)
        for dtype, trans_b, act in ((torch.bfloat16, True, "silu"), (torch.float16, False, None),
                                    (torch.float32, True, "gelu")):
            counts = [5, 0, 1, 13, 0, 18]  # 37 rows: offsets 5, 6, 19 misalign 16-byte rows
            g, n, k = len(counts), 24, 40
            offsets = torch.tensor([0] + list(itertools.accumulate(counts)), dtype=torch.int32,
                                   device="cuda")
            a = torch.randn(37, k, device="cuda").to(dtype)
            b = torch.randn(g, n, k, device="cuda").to(dtype) if trans_b else \
                torch.randn(g, k, n, device="cuda").to(dtype)
            bias = torch.randn(g, n, device="cuda")
            y = mmtune.grouped_matmul(a, b, offsets, bias=bias, act=act, trans_b=trans_b,
                                      tokens=37)
            torch.cuda.synchronize()
            ref = _grouped_reference(a, b, offsets.tolist(), bias, act, trans_b)
            self.assertLess(rel_err(y, ref), TOL[str(dtype).split(".")[1]], f"{dtype}")

    def test_masked_leaves_rows_past_counts(self):
        torch.manual_seed(4)
        g, m, n, k = 3, 20, 32, 48
        a = torch.randn(g, m, k, device="cuda").half()
        b = torch.randn(g, n, k, device="cuda").half()
        counts = torch.tensor([0, 1, 20], dtype=torch.int32, device="cuda")
        out = torch.full((g, m, n), 7.0, device="cuda").half()
        mmtune.grouped_matmul(a, b, counts, layout="masked", out=out, trans_b=True)
        torch.cuda.synchronize()
        for z, c in enumerate(counts.tolist()):
            ref = a[z, :c].double() @ b[z].double().T
            if c:
                self.assertLess(rel_err(out[z, :c], ref), TOL["float16"])
            self.assertTrue(bool((out[z, c:] == 7.0).all()), f"expert {z}: rows past {c}")

    def test_gated_fp8_experts(self):
        # a mixture of experts' SwiGLU up projection: each expert's weight 2N x K, gate and up
        # interleaved by row; 16-bit with a bias, and FP8 (e4m3 tokens, e5m2 weights) with each
        # expert's own per-tensor scale or its columns' scales
        torch.manual_seed(5)
        counts = [3, 0, 17, 1, 9]
        g, n, k = len(counts), 40, 64
        offsets = torch.tensor([0] + list(itertools.accumulate(counts)), dtype=torch.int32,
                               device="cuda")
        t = sum(counts)
        for fp8, mode in ((False, "vectors"), (True, "tensor"), (True, "vectors")):
            a = torch.randn(t, k, device="cuda")
            b = torch.randn(g, 2 * n, k, device="cuda")
            if fp8:
                a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e5m2)
            else:
                a, b = a.bfloat16(), b.bfloat16()
            bias = None if fp8 else torch.randn(g, 2 * n, device="cuda")
            srow = torch.rand(1 if mode == "tensor" else t, device="cuda") + 0.5
            scol = torch.rand(g if mode == "tensor" else g * 2 * n, device="cuda") + 0.5
            y = mmtune.grouped_matmul(a, b, offsets, bias=bias, act="silu", gated=True,
                                      scale_mode=mode, scale_row=srow, scale_col=scol,
                                      trans_b=True, tokens=t, out_dtype=torch.bfloat16)
            torch.cuda.synchronize()
            self.assertEqual(tuple(y.shape), (t, n))
            ref = torch.empty(t, n, dtype=torch.float64, device="cuda")
            for z in range(g):
                lo, hi = int(offsets[z]), int(offsets[z + 1])
                p = a[lo:hi].double() @ b[z].double().T
                sc = scol[z] if mode == "tensor" else scol[z * 2 * n:(z + 1) * 2 * n]
                sr = srow[0] if mode == "tensor" else srow[lo:hi, None]
                p = p * sr.double() * sc.double()
                if bias is not None:
                    p = p + bias[z].double()
                ref[lo:hi] = torch.nn.functional.silu(p[:, 0::2]) * p[:, 1::2]
            self.assertLess(rel_err(y, ref), TOL["bfloat16"], f"fp8 {fp8}, scales {mode}")
            # the operator: the same kernel, the same D
            importlib.import_module("mmtune.torch")
            y2 = torch.ops.mmtune.grouped_matmul(a, b, offsets, "contiguous", t, bias, "silu",
                                                 torch.bfloat16, True, True, mode, srow, scol)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(y, y2), f"operator: fp8 {fp8}, scales {mode}")

    def test_bad_arguments(self):
        # each refusal names what is wrong; nothing is launched
        a = torch.randn(37, 40, device="cuda").half()
        b = torch.randn(4, 24, 40, device="cuda").half()
        rows = torch.tensor([0, 5, 5, 20, 37], dtype=torch.int32, device="cuda")
        cases = [
            (dict(rows=rows.long()), ValueError, "rows must be a contiguous int32 vector of 5"),
            (dict(rows=rows[:4]), ValueError, "rows must be a contiguous int32 vector of 5"),
            (dict(b=b.float()), TypeError, "a and b must have one dtype"),
            (dict(b=b[:, :, :32]), ValueError, "inner dimensions differ"),
            (dict(a=a.T.contiguous().T), ValueError, "a must be row-major"),
            (dict(b=b[0]), ValueError, "b must be G x K x N"),
            (dict(layout="masked"), ValueError, "a must be G x M x K (masked)"),
            (dict(bias=torch.randn(4, 23, device="cuda")), ValueError,
             "bias must be a contiguous G x N' tensor (4 x 24)"),
            (dict(gated=True, b=b[:, :23]), ValueError, "gated needs an even number of columns"),
            (dict(scale_mode="block"), ValueError, "scale_mode must be 'vectors' or 'tensor'"),
            (dict(scale_mode="tensor", scale_row=torch.ones(1, device="cuda")), ValueError,
             "scale_mode 'tensor' needs scale_row (a's one scale) and scale_col"),
            (dict(scale_mode="tensor", scale_row=torch.ones(1, device="cuda"),
                  scale_col=torch.ones(3, device="cuda")), ValueError,
             "scale_col must be a contiguous float32 tensor of 4 elements"),
            (dict(bias=torch.randn(4, 24, device="cuda").double()), TypeError,
             "bias has dtype torch.float64"),
            (dict(out=torch.empty(37, 24, device="cuda").half().T.contiguous().T), ValueError,
             "out must be row-major"),
        ]
        for change, error, says in cases:
            args = dict(a=a, b=b, rows=rows, trans_b=True)
            args.update(change)
            with self.assertRaisesRegex(error, re.escape(says)):
                mmtune.grouped_matmul(args.pop("a"), args.pop("b"), args.pop("rows"), **args)
        # the operators refuse alike, native (RuntimeError) or Python
        importlib.import_module("mmtune.torch")  # registers torch.ops.mmtune
        with self.assertRaisesRegex((RuntimeError, ValueError),
                                    "rows must be a contiguous int32 vector of 5"):
            torch.ops.mmtune.grouped_matmul(a, b, rows.long(), "contiguous", 37, None, None, None,
                                            True)
        with self.assertRaisesRegex((RuntimeError, ValueError),
                                    "scale_col must be a contiguous float32 tensor of 4"):
            torch.ops.mmtune.grouped_matmul(a, b, rows, "contiguous", 37, None, None, None, True,
                                            False, "tensor", torch.ones(1, device="cuda"),
                                            torch.ones(3, device="cuda"))
        with self.assertRaisesRegex((RuntimeError, ValueError),
                                    "gated needs an even number of columns"):
            torch.ops.mmtune.grouped_matmul(a, b[:, :23], rows, "contiguous", 37, None, None,
                                            None, True, True)
        with self.assertRaisesRegex((RuntimeError, TypeError), "bias has dtype"):
            torch.ops.mmtune.matmul(a, b[0], torch.zeros(24, device="cuda").double(), "col",
                                    None, False, 1.0, 0.0, None, None, False, True)

    def test_operator_and_graph(self):
        import mmtune.torch  # noqa: F401 (registers torch.ops.mmtune)
        torch.manual_seed(5)
        g, t, n, k = 4, 64, 32, 64
        a = torch.randn(t, k, device="cuda").bfloat16()
        b = torch.randn(g, n, k, device="cuda").bfloat16()
        offsets = torch.tensor([0, 10, 10, 40, 64], dtype=torch.int32, device="cuda")
        torch.library.opcheck(torch.ops.mmtune.grouped_matmul.default,
                              (a, b, offsets, "contiguous", t, None, None, None, True))
        out = torch.ops.mmtune.grouped_matmul(a, b, offsets, "contiguous", t, None, None, None,
                                              True)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = torch.ops.mmtune.grouped_matmul(a, b, offsets, "contiguous", t, None, None,
                                                  None, True)
        for routing in ([0, 64, 64, 64, 64], [0, 1, 2, 3, 64], [0, 16, 32, 48, 64]):
            offsets.copy_(torch.tensor(routing, dtype=torch.int32))
            graph.replay()
            torch.cuda.synchronize()
            ref = _grouped_reference(a, b, routing, None, None, True)
            self.assertLess(rel_err(out, ref), TOL["bfloat16"], f"routing {routing}")


@unittest.skipIf(SKIP, SKIP)
class TestTorchOps(unittest.TestCase):
    """mmtune.torch on the GPU: torch.library.opcheck of both operators, their results against
    float64 torch, torch.compile(fullgraph=True) of a model of mmtune Linear layers, and a CUDA
    graph of one replayed with new inputs."""

    @classmethod
    def setUpClass(cls):
        import mmtune.torch as mt
        cls.mt = mt

    def test_opcheck(self):
        x = torch.randn(33, 64, device="cuda").half()
        w = torch.randn(40, 64, device="cuda").half()
        b = torch.randn(40, device="cuda")
        for act, gated in ((None, False), ("gelu_tanh", False), ("silu", True)):
            args = (x, w, None if gated else b, "col", act, gated, 1.0, 0.0, None, None, False,
                    True)
            torch.library.opcheck(torch.ops.mmtune.matmul.default, args)
            out = torch.empty(33, 20 if gated else 40, device="cuda").half()
            torch.library.opcheck(torch.ops.mmtune.matmul_out.default,
                                  (out,) + args[:9] + args[10:])

    def test_results(self):
        x = torch.randn(130, 96, device="cuda").bfloat16()
        w = torch.randn(72, 96, device="cuda").bfloat16()
        b = torch.randn(72, device="cuda").bfloat16()
        # an f32 D takes an f32 bias (the header: D's type or f32)
        y = torch.ops.mmtune.matmul(x, w, b.float(), "col", "silu", False, 1.0, 0.0, None,
                                    torch.float32, False, True)
        torch.cuda.synchronize()
        ref = _act(x.double() @ w.double().T + b.double(), "silu")
        self.assertEqual(y.dtype, torch.float32)
        self.assertLess(rel_err(y, ref), TOL["float32"])
        out = torch.empty(130, 72, device="cuda").bfloat16()
        torch.ops.mmtune.matmul_out(out, x, w, b, "col", "silu", False, 1.0, 0.0, None, False,
                                    True)
        torch.cuda.synchronize()
        self.assertLess(rel_err(out, ref), TOL["bfloat16"])

    def test_backward(self):
        # gradients through mmtune::matmul (and a Linear) against float64 autograd of the
        # same expression; opcheck with inputs that need them checks the registration
        from fakes import matmul_reference
        for dtype, act, gated in ((torch.float32, "gelu_tanh", False),
                                  (torch.bfloat16, "silu", True), (torch.float16, None, False)):
            x = torch.randn(37, 48, device="cuda", dtype=dtype, requires_grad=True)
            nb = 2 * 24 if gated else 24
            w = torch.randn(nb, 48, device="cuda", dtype=dtype, requires_grad=True)
            b = torch.randn(nb, device="cuda", dtype=dtype, requires_grad=True)
            c = torch.randn(37, 24, device="cuda", dtype=dtype, requires_grad=True)
            args = (x, w, b, "col", act, gated, 0.5, 0.25, c, None, False, True)
            y = torch.ops.mmtune.matmul(*args)
            r = torch.randn_like(y)
            got = torch.autograd.grad(y, (x, w, b, c), r)
            leaves = [t.detach().double().requires_grad_() for t in (x, w, b, c)]
            ref = matmul_reference(torch, leaves[0], leaves[1], leaves[2], "col", act, gated,
                                   0.5, 0.25, leaves[3], False, True)
            want = torch.autograd.grad(ref, leaves, r.double())
            for name, gt, wt in zip("x w bias c".split(), got, want):
                self.assertEqual(gt.dtype, dtype, name)
                self.assertLess(rel_err(gt, wt), 4 * TOL[str(dtype).split(".")[1]],
                                f"d{name} {dtype} {act} gated={gated}")
            torch.library.opcheck(torch.ops.mmtune.matmul.default, args)
        layer = self.mt.Linear(48, 24, act="relu", device="cuda", dtype=torch.float32)
        ref = torch.nn.Linear(48, 24, device="cuda", dtype=torch.float64)
        ref.load_state_dict(layer.state_dict())
        x = torch.randn(5, 7, 48, device="cuda")
        layer(x).square().sum().backward()
        torch.relu(ref(x.double())).square().sum().backward()
        self.assertLess(rel_err(layer.weight.grad, ref.weight.grad), TOL["float32"])
        self.assertLess(rel_err(layer.bias.grad, ref.bias.grad), TOL["float32"])
        # a gated MLP trains too: its gate and up weights get their gradients
        plain = llama_mlp(torch).cuda()
        m = llama_mlp(torch).cuda()
        m.load_state_dict(plain.state_dict())
        self.mt.swap_linear(m)
        x = torch.randn(9, 64, device="cuda")
        m(x).square().sum().backward()
        plain(x).square().sum().backward()
        for name in ("gate_proj", "up_proj", "down_proj"):
            got, want = getattr(m, name).weight.grad, getattr(plain, name).weight.grad
            self.assertIsNotNone(got, name)
            self.assertLess(rel_err(got, want.double()), 4 * TOL["float32"], name)

    def model(self):
        """A small MLP twice, the same weights: with mmtune's layers swapped in, and PyTorch's."""
        torch.manual_seed(0)

        def mlp():
            return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.SiLU(),
                                       torch.nn.Linear(128, 32)).cuda().half().eval()

        plain, m = mlp(), mlp()
        m.load_state_dict(plain.state_dict())
        return self.mt.swap_linear(m), plain

    def test_compile_fullgraph(self):
        m, plain = self.model()
        x = torch.randn(4, 9, 64, device="cuda").half()
        with torch.no_grad():
            eager = m(x)
            compiled = torch.compile(m, fullgraph=True)(x)
            want = plain(x)
        torch.cuda.synchronize()
        # inductor may fuse the SiLU in between: the same up to f16 rounding
        self.assertLess(rel_err(compiled, eager.double()), 2e-2)
        self.assertLess(rel_err(eager, want.double()), 2e-2)

    def test_gated_mlp(self):
        torch.manual_seed(0)
        plain = llama_mlp(torch, 64, 96).cuda().half().eval()
        m = llama_mlp(torch, 64, 96).cuda().half().eval()
        m.load_state_dict(plain.state_dict())
        mlp = self.mt.swap_linear(torch.nn.Sequential(m))[0]
        self.assertIs(type(mlp), self.mt.GatedMLP)
        x = torch.randn(3, 7, 64, device="cuda").half()
        with torch.no_grad():
            got, want = mlp(x), plain(x)
        torch.cuda.synchronize()
        self.assertLess(rel_err(got, want.double()), 2e-2)

    def test_cuda_graph(self):
        m, _ = self.model()
        x = torch.randn(16, 64, device="cuda").half()
        with torch.no_grad():
            m(x)  # the first call compiles: outside the capture
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = m(x)
            x.copy_(torch.randn(16, 64, device="cuda").half())
            g.replay()
            want = m(x)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(y, want))



@unittest.skipIf(FP8_SKIP, FP8_SKIP)
class TestTorchFp8(unittest.TestCase):
    """mmtune.torch's FP8 operators and modules: opcheck, an Fp8Linear of each recipe against
    float64 torch on the same FP8 operands and scales (and against the layer it came from), a
    gated MLP, torch.compile(fullgraph=True) and a CUDA graph."""

    @classmethod
    def setUpClass(cls):
        import mmtune.torch as mt
        cls.mt = mt

    def test_opcheck(self):
        x = torch.randn(33, 256, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(96, 256, device="cuda", dtype=torch.bfloat16)
        for mode in ("tensor", "row", "1x128", "128x128"):
            torch.library.opcheck(torch.ops.mmtune.quantize.default,
                                  (x, torch.float8_e4m3fn, mode))
        qx, sx = mmtune.quantize(x, mode="row")
        qw, sw = mmtune.quantize(w, mode="row")
        for gated in (False, True):
            torch.library.opcheck(torch.ops.mmtune.scaled_matmul.default,
                                  (qx, qw, "vectors", sx, sw, None, "silu", gated, torch.bfloat16,
                                   False))

    def test_linear_recipes(self):
        mt = self.mt
        torch.manual_seed(1)
        for recipe, m in itertools.product(mt.FP8_RECIPES, (1, 37, 300)):
            wmode, xmode, _ = mt.FP8_RECIPES[recipe]
            plain = torch.nn.Linear(520, 384, device="cuda", dtype=torch.bfloat16)
            lin = mt.Fp8Linear.from_linear(plain, recipe, act="gelu_tanh")
            x = torch.randn(m, 520, device="cuda", dtype=torch.bfloat16)
            with torch.no_grad():
                y = lin(x)
                qx, sx = mmtune.quantize(x, mode=xmode)
                want = plain(x)
            torch.cuda.synchronize()
            dx = qx.double() * _expand(sx, xmode, m, 520).double()
            dw = lin.weight.double() * _expand(lin.weight_scale, wmode, 384, 520).double()
            ref = _act(dx @ dw.T + plain.bias.double(), "gelu_tanh")
            self.assertEqual((y.dtype, tuple(y.shape)), (torch.bfloat16, (m, 384)))
            self.assertLess(rel_err(y, ref), TOL["bfloat16"], f"{recipe} m={m}")
            # and the layer it came from, within FP8's rounding of x and W
            self.assertLess(rel_err(y, _act(want.double(), "gelu_tanh")), 0.1,
                            f"{recipe} m={m} against bf16")

    def test_gated_mlp(self):
        mt = self.mt
        torch.manual_seed(2)
        plain = llama_mlp(torch, 256, 384).cuda().bfloat16().eval()
        for recipe in mt.FP8_RECIPES:
            m = llama_mlp(torch, 256, 384).cuda().bfloat16().eval()
            m.load_state_dict(plain.state_dict())
            mlp = mt.swap_linear(torch.nn.Sequential(m), fp8=recipe)[0]
            self.assertIs(type(mlp), mt.Fp8GatedMLP)
            x = torch.randn(5, 3, 256, device="cuda", dtype=torch.bfloat16)
            with torch.no_grad():
                got, want = mlp(x), plain(x)
            torch.cuda.synchronize()
            self.assertEqual(tuple(got.shape), (5, 3, 256))
            self.assertLess(rel_err(got, want.double()), 0.1, recipe)

    def test_bad_arguments(self):
        # each refused with a message naming it, by the native or the Python operators
        x = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16)
        q, s = mmtune.quantize(x, mode="row")
        quant, smm = torch.ops.mmtune.quantize, torch.ops.mmtune.scaled_matmul
        for call, msg in (
                (lambda: quant(x, torch.float16, "row"), "dtype must be"),
                (lambda: quant(x, torch.float8_e4m3fn, "64x64"), "mode must be"),
                (lambda: quant(x.T, torch.float8_e4m3fn, "row"), "row-major"),
                (lambda: smm(q, q, "vectors", s[:4].contiguous(), s, None, None, False,
                             torch.bfloat16, False), "scale_(a|row) must be"),
                (lambda: smm(q, q, "rows", s, s, None, None, False, torch.bfloat16, False),
                 "scale_mode must be"),
                (lambda: smm(q, q[:, :128], "vectors", s, s, None, None, False, torch.bfloat16,
                             False), "(inner dimensions differ|M x K and N x K)")):
            with self.assertRaisesRegex((RuntimeError, ValueError, TypeError), msg):
                call()

    def test_loads_the_plain_state_dict(self):
        # a swapped model loading the plain model's checkpoint computes what swapping that
        # model gives (the same quantization, as it loads)
        mt = self.mt

        def plain_model():
            return torch.nn.Sequential(torch.nn.Linear(256, 384), llama_mlp(torch, 384, 512)).cuda(
                ).bfloat16().eval()

        torch.manual_seed(3)
        plain = plain_model()
        swapped = mt.swap_linear(plain_model(), fp8="row")
        swapped.load_state_dict(plain.state_dict())
        direct = mt.swap_linear(plain, fp8="row")
        x = torch.randn(7, 256, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            got, want = swapped(x), direct(x)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(got, want))

    def test_compile_and_graph(self):
        mt = self.mt
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.SiLU(),
                                    torch.nn.Linear(512, 256)).cuda().bfloat16().eval()
        mt.swap_linear(model, fp8="block")
        x = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            eager = model(x)
            compiled = torch.compile(model, fullgraph=True)(x)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(compiled, eager))  # the same kernels, nothing between
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = model(x)
            x.copy_(torch.randn(8, 256, device="cuda", dtype=torch.bfloat16))
            g.replay()
            want = model(x)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(y, want))

if __name__ == "__main__":
    unittest.main()
