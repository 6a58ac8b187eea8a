"""Tests of the mmtune package that need no GPU: finding the library, the ctypes mirror of
mmtune.h, argument errors, how strides and transposes become mmt_gemm's arguments (checked by
carrying out the recorded call in Python), DLPack capsules, and what a call that reaches the
library says on a machine without a driver.

Run: MMTUNE_LIBRARY=build/runtime/libmmtune.so PYTHONPATH=python \
     python3 -m unittest discover -s python/tests -p test_cpu.py -v
"""

import ctypes
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import mmtune
from mmtune import _core, _lib

from fakes import CAI, DLPackArray, Memory, RecordingContext, llama_mlp, matmul, transpose

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(HERE)
INCLUDE_DIR = os.path.join(os.path.dirname(PACKAGE_DIR), "include")


def _have_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


HAVE_DRIVER = _have_driver()
NO_DRIVER_ONLY = unittest.skipIf(HAVE_DRIVER, "a CUDA driver is present: these tests would "
                                 "open a real context on fake pointers")

_tmp = tempfile.TemporaryDirectory(prefix="mmtune-py-")


def setUpModule():
    # The C library opens the database first: keep it and the cubin cache out of $HOME.
    os.environ["MMTUNE_DB"] = os.path.join(_tmp.name, "mmtune.db")
    os.environ["MMTUNE_CACHE_DIR"] = os.path.join(_tmp.name, "cubin")


def tearDownModule():
    _tmp.cleanup()


def _run_python(code, env_changes, python=sys.executable):
    env = dict(os.environ)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([python, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


class TestLibrary(unittest.TestCase):
    def test_found_through_env(self):
        self.assertEqual(mmtune.library_path(), os.environ["MMTUNE_LIBRARY"])

    def test_import_works_without_library_and_first_use_says_why(self):
        code = ("import mmtune\n"
                "try:\n"
                "    mmtune.library_path()\n"
                "except mmtune.LibraryNotFoundError as e:\n"
                "    print('NOTFOUND', isinstance(e, OSError), e)\n")
        r = _run_python(code, {"MMTUNE_LIBRARY": "/nonexistent/libmmtune.so",
                               "PYTHONPATH": PACKAGE_DIR})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("NOTFOUND True", r.stdout)
        self.assertIn("/nonexistent/libmmtune.so", r.stdout)
        self.assertIn("MMTUNE_LIBRARY", r.stdout)

    def test_found_in_python_prefix(self):
        # A venv (no pip needed) whose lib/ holds libmmtune.so, as `cmake --install --prefix`
        # into the environment's prefix would leave it.
        with tempfile.TemporaryDirectory() as d:
            venv = os.path.join(d, "venv")
            r = subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv],
                               capture_output=True, text=True)
            if r.returncode != 0:
                self.skipTest(f"python -m venv failed: {r.stderr.strip()}")
            lib = os.path.join(venv, "lib", "libmmtune.so")
            shutil.copy(os.path.realpath(os.environ["MMTUNE_LIBRARY"]), lib)
            r = _run_python("import mmtune; print(mmtune.library_path())",
                            {"MMTUNE_LIBRARY": None, "PYTHONPATH": PACKAGE_DIR},
                            python=os.path.join(venv, "bin", "python"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), lib)

    def test_pip_install(self):
        # The in-tree build backend: pip needs nothing else, and no network.
        if subprocess.run([sys.executable, "-m", "pip", "--version"],
                          capture_output=True).returncode != 0:
            self.skipTest("pip is not installed for this Python")
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
                                "--no-cache-dir", "--quiet", "--target", d, PACKAGE_DIR],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(sorted(f for f in os.listdir(os.path.join(d, "mmtune"))
                                    if f.endswith(".py")),
                             ["__init__.py", "_arrays.py", "_core.py", "_grouped.py", "_lib.py", "_matmul.py",
                              "_quantize.py", "nn.py", "torch.py"])
            r = _run_python("import mmtune; print(mmtune.__file__, mmtune.library_path())",
                            {"PYTHONPATH": d})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith(os.path.join(d, "mmtune")), r.stdout)

    def test_enums_match_the_library(self):
        lib = _lib.load()
        for value, name in _lib.DTYPE_NAMES.items():
            self.assertEqual(lib.mmt_dtype_name(value).decode(), name)
        for value, name in _lib.CHOICE_KINDS.items():
            self.assertEqual(lib.mmt_choice_kind_name(value).decode(), name)
        self.assertEqual(lib.mmt_status_name(5).decode(), "MMT_ERR_NO_DRIVER")

    def test_structs_match_the_header(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc or not os.path.exists(os.path.join(INCLUDE_DIR, "mmtune.h")):
            self.skipTest("needs a C compiler and include/mmtune.h")
        structs = {"mmt_options": _lib.Options, "mmt_problem": _lib.Problem,
                   "mmt_choice": _lib.ChoiceStruct, "mmt_matmul_desc": _lib.MatmulDesc,
                   "mmt_quantize_desc": _lib.QuantizeDesc}
        lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "mmtune.h"',
                 "int main(void) {"]
        expected = []
        for cname, cls in structs.items():
            lines.append(f'  printf("{cname} %zu\\n", sizeof({cname}));')
            expected.append(f"{cname} {ctypes.sizeof(cls)}")
            for field, _ in cls._fields_:
                lines.append(f'  printf("{cname}.{field} %zu\\n", offsetof({cname}, {field}));')
                expected.append(f"{cname}.{field} {getattr(cls, field).offset}")
        lines += ["  return 0;", "}"]
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            subprocess.run([cc, "-std=c11", "-I", INCLUDE_DIR, src, "-o", exe], check=True)
            out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        self.assertEqual(out.split("\n")[:-1], expected)


class TestArgumentErrors(unittest.TestCase):
    """Errors raised before any library call."""

    def setUp(self):
        self.a, self.b, self.c = CAI((4, 5)), CAI((5, 6)), CAI((4, 6))

    def check(self, exc, fragment, *args, **kw):
        with self.assertRaises(exc) as cm:
            mmtune.gemm(*args, **kw)
        self.assertIn(fragment, str(cm.exception))

    def test_ndim(self):
        self.check(ValueError, "a must be a 2-D matrix, got 1", CAI((4,)), self.b, self.c)
        self.check(ValueError, "b must be a 2-D matrix, got 3", self.a, CAI((5, 6, 1)), self.c)
        self.check(ValueError, "c must be a 2-D matrix", self.a, self.b, CAI((24,)))

    def test_shapes(self):
        self.check(ValueError, "inner dimensions differ: a is 4x5 but b is 4x6",
                   self.a, CAI((4, 6)), self.c)
        self.check(ValueError, "a.T is 5x4 but b is 5x6", self.a, self.b, self.c, trans_a=True)
        self.check(ValueError, "c is 6x4 but op(a) op(b) is 4x6", self.a, self.b, CAI((6, 4)))
        with self.assertRaises(ValueError):
            mmtune.explain(self.a, CAI((4, 6)))

    def test_dtypes(self):
        self.check(TypeError, "typestr '<f8'", CAI((4, 5), "<f8"), self.b, self.c)
        self.check(TypeError, "typestr '<i4'", self.a, CAI((5, 6), "<i4"), self.c)
        self.check(TypeError, "one dtype, got f32, f16, f32", self.a, CAI((5, 6), "<f2"), self.c)

    def test_not_cuda(self):
        self.check(TypeError, "a (int) is not a CUDA array", 3, self.b, self.c)
        self.check(TypeError, "b (list) is not a CUDA array", self.a, [[1.0] * 6] * 5, self.c)
        self.check(TypeError, "not a CUDA device", self.a, DLPackArray((5, 6), device_type=1),
                   self.c)

    def test_beta_without_c(self):
        self.check(ValueError, "beta must be 0 when c is None", self.a, self.b, beta=1.0)

    def test_c_none_needs_torch_or_cupy(self):
        self.check(TypeError, "c=None", self.a, self.b)

    def test_matmul_takes_torch_tensors(self):
        with self.assertRaises(TypeError) as cm:
            mmtune.matmul(self.a, self.b)
        self.assertIn("torch tensor", str(cm.exception))

    def test_activation_names_match_the_header(self):
        import re
        with open(os.path.join(INCLUDE_DIR, "mmtune.h")) as f:
            header = f.read()
        values = dict((n, int(v)) for n, v in re.findall(r"MMT_ACT_(\w+) = (\d+)", header))
        self.assertEqual(values, {"NONE": 0, "RELU": 1, "GELU_TANH": 2, "GELU_ERF": 3, "SILU": 4})
        for name, value in _lib.ACTIVATIONS.items():
            want = {None: "NONE", "none": "NONE", "relu": "RELU", "gelu_tanh": "GELU_TANH",
                    "gelu": "GELU_ERF", "gelu_erf": "GELU_ERF", "silu": "SILU", "swish": "SILU"}
            self.assertEqual(value, values[want[name]], name)

    def test_strides(self):
        self.check(ValueError, "neither row-major", CAI((4, 5), strides=(8, 8)), self.b, self.c)
        self.check(ValueError, "neither row-major", self.a, CAI((5, 6), strides=(0, 4)), self.c)
        self.check(ValueError, "neither row-major", self.a, self.b, CAI((4, 6), strides=(-24, 4)))
        self.check(ValueError, "whole elements", CAI((4, 5), strides=(20, 2)), self.b, self.c)

    def test_read_only_masked(self):
        self.check(ValueError, "c is read-only", self.a, self.b, CAI((4, 6), readonly=True))
        self.check(ValueError, "masked", CAI((4, 5), mask=object()), self.b, self.c)

    def test_devices(self):
        self.check(ValueError, "different devices", self.a, CAI((5, 6), device=1), self.c)
        ctx = RecordingContext()
        ctx.device = 1
        self.check(ValueError, "context is on cuda:1", self.a, self.b, self.c, context=ctx)

    def test_streams(self):
        self.check(TypeError, "stream must be", self.a, self.b, self.c, stream="default")
        self.check(ValueError, "ready on stream 0x99", self.a, CAI((5, 6), stream=0x99), self.c,
                   context=RecordingContext())

    def test_explain_shape_arguments(self):
        with self.assertRaises(TypeError):
            mmtune.explain_shape(4, 4, 4, "f64")
        with self.assertRaises(ValueError):
            mmtune.explain_shape(4, 4, 4, order="diagonal")


class TestMapping(unittest.TestCase):
    """Every storage of A, B and C with every transpose: the recorded mmt_gemm call, carried
    out on the fake memory, must give alpha op(A) op(B) + beta C."""

    def run_case(self, la, lb, lc, ta, tb, m=3, n=4, k=2, pad=(0, 0, 0), alpha=2.0, beta=0.5):
        mem = Memory()
        a_val = [[i * 10 + j + 1 for j in range(m if ta else k)] for i in range(k if ta else m)]
        b_val = [[-(i * 7) + j - 2 for j in range(k if tb else n)] for i in range(n if tb else k)]
        c_val = [[i + 100 * j for j in range(n)] for i in range(m)]
        a = mem.matrix(a_val, la, pad[0])
        b = mem.matrix(b_val, lb, pad[1])
        c = mem.matrix(c_val, lc, pad[2])
        ctx = RecordingContext()
        self.assertIs(mmtune.gemm(a, b, c, alpha, beta, ta, tb, context=ctx, stream=7), c)
        (call,) = ctx.calls
        self.assertEqual(call[0], 1)                    # the context handle
        if m > 1 and n > 1:
            self.assertEqual(call[1], 0 if lc == "row" else 1)  # the order is C's
        self.assertEqual(call[15:], (_lib.F32, 7))      # dtype, stream
        mem.reference_gemm(*call[1:15])
        op_a = transpose(a_val) if ta else a_val
        op_b = transpose(b_val) if tb else b_val
        want = [[alpha * x + beta * y for x, y in zip(r, s)]
                for r, s in zip(matmul(op_a, op_b), c_val)]
        self.assertEqual(c.read(), want, f"a {la} b {lb} c {lc} ta {ta} tb {tb} call {call}")

    def test_every_layout_and_transpose(self):
        for la, lb, lc in itertools.product(("row", "col"), repeat=3):
            for ta, tb in itertools.product((False, True), repeat=2):
                for pad in ((0, 0, 0), (3, 1, 2)):
                    self.run_case(la, lb, lc, ta, tb, pad=pad)

    def test_vectors_and_ones(self):
        # Size-1 dimensions: their strides are never looked at.
        for m, n, k in ((1, 4, 3), (3, 1, 2), (2, 3, 1), (1, 1, 5), (1, 1, 1)):
            for la, lb, lc in itertools.product(("row", "col"), repeat=3):
                self.run_case(la, lb, lc, False, True, m=m, n=n, k=k, pad=(1, 0, 2))

    def test_leading_dimensions(self):
        self.assertEqual(_core._storage("a", 3, 5, 7, 1, True), (True, 7))
        self.assertEqual(_core._storage("a", 3, 5, 1, 4, True), (False, 4))
        self.assertEqual(_core._storage("a", 1, 5, 99, 1, True), (True, 5))   # one row
        self.assertEqual(_core._storage("a", 1, 5, 1, 9, True), (False, 9))   # strided row
        self.assertEqual(_core._storage("a", 4, 1, 1, 1, False), (False, 4))  # column vector
        # A and B 3x5 row-major with ld 7, C 3x3 column-major: A flips, B^T flips back.
        self.assertEqual(_core._plan(False, True, 3, 5, 7, 1, 3, 5, 7, 1, 3, 3, 1, 3),
                         (_lib.COL_MAJOR, 1, 0, 7, 7, 3))

    def test_tf32_and_dtypes(self):
        ctx = RecordingContext()
        for typestr, tf32, want in (("<f4", True, _lib.TF32), ("<f2", True, _lib.F16),
                                    ("<V2", False, _lib.BF16), ("<f4", False, _lib.F32)):
            mmtune.gemm(CAI((2, 2), typestr), CAI((2, 2), typestr), CAI((2, 2), typestr),
                        allow_tf32=tf32, context=ctx)
            self.assertEqual(ctx.calls[-1][15], want)

    def test_streams(self):
        ctx = RecordingContext()
        a, b, c = CAI((2, 3)), CAI((3, 4)), CAI((2, 4))
        mmtune.gemm(a, b, c, context=ctx)
        self.assertEqual(ctx.calls[-1][16], 0)  # no stream anywhere: the legacy default
        mmtune.gemm(CAI((2, 3), stream=0x55), b, c, context=ctx)
        self.assertEqual(ctx.calls[-1][16], 0x55)  # the one a's CAI names
        mmtune.gemm(CAI((2, 3), stream=1), b, c, context=ctx)
        self.assertEqual(ctx.calls[-1][16], 0)  # CAI's 1 is the legacy default stream

        class CudaStream:
            def __cuda_stream__(self):
                return (0, 0x77)

        class TorchLike:
            cuda_stream = 0x88

        for s, want in ((0x66, 0x66), (CudaStream(), 0x77), (TorchLike(), 0x88)):
            mmtune.gemm(a, b, c, context=ctx, stream=s)
            self.assertEqual(ctx.calls[-1][16], want)


class TestDLPack(unittest.TestCase):
    def test_capsule_is_read(self):
        ctx = RecordingContext()
        a = DLPackArray((3, 5), strides=(1, 4), code=4, bits=16, ptr=0x1000, byte_offset=8)
        b = DLPackArray((5, 2), code=4, bits=16, ptr=0x2000)  # strides NULL: C-contiguous
        c = CAI((3, 2), "<V2")
        mmtune.gemm(a, b, c, context=ctx)
        call = ctx.calls[-1]
        # a is column-major (ld 4) under a row-major C: used transposed.
        self.assertEqual(call[1:7], (_lib.ROW_MAJOR, 1, 0, 3, 2, 5))
        self.assertEqual((call[8], call[9], call[10], call[11]), (0x1008, 4, 0x2000, 2))
        self.assertEqual(call[15], _lib.BF16)
        self.assertEqual(a.streams, [1])  # the legacy default stream, as DLPack numbers it
        mmtune.gemm(a, b, c, context=ctx, stream=0x40)
        self.assertEqual((a.streams[-1], b.streams[-1]), (0x40, 0x40))

    def test_capsule_errors(self):
        c = CAI((3, 2))
        with self.assertRaisesRegex(TypeError, "DLPack dtype"):
            mmtune.gemm(DLPackArray((3, 5), bits=64), CAI((5, 2)), c)
        with self.assertRaisesRegex(ValueError, "2-D"):
            mmtune.gemm(DLPackArray((3, 5, 1)), CAI((5, 2)), c)


@NO_DRIVER_ONLY
def _torch_or_none():
    try:
        import torch
        return torch
    except Exception:  # not installed, or its CUDA libraries missing: the tests skip
        return None


class _WithTorch(unittest.TestCase):
    """torch as cls.th and mmtune.torch as cls.mt; the tests skip where torch is not
    importable."""

    @classmethod
    def setUpClass(cls):
        cls.th = _torch_or_none()
        if cls.th is None:
            raise unittest.SkipTest("torch is not importable")
        import mmtune.torch as mt
        cls.mt = mt


class TestTorchOps(_WithTorch):
    """mmtune.torch without a GPU: the operators' schemas and fake implementations on meta
    tensors (what torch.compile traces with), a traced graph, the modules' parameters."""

    def meta(self, *shape, dtype=None):
        return self.th.empty(*shape, device="meta", dtype=dtype or self.th.float16)

    def op(self, a, b, bias=None, act=None, gated=False, out_dtype=None, trans_a=False,
           trans_b=True):
        return self.th.ops.mmtune.matmul(a, b, bias, "col", act, gated, 1.0, 0.0, None, out_dtype,
                                         trans_a, trans_b)

    def test_matmul_first_reads_tensors(self):
        # matmul as a process's first mmtune call on tensors (no gemm before it) reads them
        code = ("import torch, mmtune\n"
                "try:\n"
                "    mmtune.matmul(torch.ones(2, 3), torch.ones(3, 2))\n"
                "except TypeError as e:\n"
                "    print(e)\n")
        r = _run_python(code, {})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("a is a torch tensor on cpu, not on a CUDA device", r.stdout)

    def test_native_and_python_operators_agree(self):
        # the native operators (where their library is built beside libmmtune.so) and the
        # Python ones have one schema and refuse a CPU tensor alike
        code = ("import torch, mmtune.torch as mt\n"
                "print('native', mt.NATIVE_OPS is not None)\n"
                "print(torch.ops.mmtune.matmul.default._schema)\n"
                "print(torch.ops.mmtune.matmul_out.default._schema)\n"
                "print(torch.ops.mmtune.grouped_matmul.default._schema)\n"
                "print(torch.ops.mmtune.scaled_matmul.default._schema)\n"
                "print(torch.ops.mmtune.quantize.default._schema)\n"
                "try:\n"
                "    mt.matmul(torch.ones(2, 3), torch.ones(3, 2), None, 'col', None, False, 1.0,"
                " 0.0, None, None, False, False)\n"
                "except Exception as e:\n"
                "    print('error', e)\n")
        runs = {mode: _run_python(code, {"MMTUNE_TORCH_OPS": value})
                for mode, value in (("python", "0"), ("default", None))}
        for mode, r in runs.items():
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("a is a torch tensor on cpu, not on a CUDA device"
                          if "native False" in r.stdout else "a is a tensor on cpu, not on a "
                          "CUDA device", r.stdout)
        self.assertIn("native False", runs["python"].stdout)
        schemas = [r.stdout.splitlines()[1:6] for r in runs.values()]
        self.assertEqual(schemas[0], schemas[1])
        native = os.path.join(os.path.dirname(mmtune.library_path()), "libmmtune_torch.so")
        if not os.path.exists(native):
            self.skipTest("no native operators built (scripts/build-torch-ops.sh)")
        self.assertIn("native True", runs["default"].stdout)

    def both_operators(self, code):
        """code's output run with the Python operators (MMTUNE_TORCH_OPS=0), then with the
        default ones (native where built), each run having exited 0."""
        for value in ("0", None):
            r = _run_python(code, {"MMTUNE_TORCH_OPS": value})
            self.assertEqual(r.returncode, 0, r.stderr)
            yield r.stdout

    def test_autograd_dispatch(self):
        # meta tensors through both operators' autograd: a backward where an argument needs a
        # gradient (native: the C++ autograd kernel's node), none under no_grad or with no
        # argument requiring one (native: straight below autograd); opcheck passes either way
        code = ("import torch, mmtune.torch as mt\n"
                "print('native', mt.NATIVE_OPS is not None)\n"
                "def t(*s):\n"
                "    return torch.empty(*s, device='meta', dtype=torch.float16,"
                " requires_grad=True)\n"
                "a, w, bias = t(4, 8), t(6, 8), t(6)\n"
                "args = (bias, 'col', 'silu', False, 1.0, 0.0, None, None, False, True)\n"
                "y = torch.ops.mmtune.matmul(a, w, *args)\n"
                "print('grad_fn', type(y.grad_fn).__name__, y.grad_fn.name())\n"
                "y.sum().backward()\n"
                "print('grads', tuple(a.grad.shape), tuple(w.grad.shape), tuple(bias.grad.shape))\n"
                "c, c2, b2 = t(4, 6), t(4, 6), t(6)\n"
                "x = torch.empty(4, 8, device='meta', dtype=torch.float16)\n"
                "torch.ops.mmtune.matmul(a, w, None, 'col', 'silu', False, 1.0, 0.5, c, None,"
                " False, True).sum().backward()\n"
                "torch.ops.mmtune.matmul(x, w, b2, 'col', None, False, 1.0, 0.5, c2, None,"
                " False, True).sum().backward()\n"
                "print('c grads', tuple(c.grad.shape), tuple(b2.grad.shape),"
                " tuple(c2.grad.shape))\n"
                "with torch.no_grad():\n"
                "    print('no_grad', torch.ops.mmtune.matmul(a, w, *args).grad_fn)\n"
                "print('frozen', torch.ops.mmtune.matmul(x, w.detach(), bias.detach(),"
                " *args[1:]).grad_fn)\n"
                "print('opcheck', sorted(set(torch.library.opcheck(torch.ops.mmtune.matmul.default,"
                " (a, w) + args).values())))\n")
        for out in self.both_operators(code):
            native = "native True" in out
            self.assertRegex(out, r"grad_fn CppFunction .*MatmulNode" if native else
                             "grad_fn GeneratedBackwardFor_mmtune_matmul_defaultBackward")
            self.assertIn("grads (4, 8) (6, 8) (6,)", out)
            self.assertIn("c grads (4, 6) (6,) (4, 6)", out)  # a node's inputs in order
            self.assertIn("no_grad None", out)
            self.assertIn("frozen None", out)
            self.assertIn("opcheck ['SUCCESS']", out)

    def test_compile_traces_backward(self):
        # torch.compile(fullgraph=True) traces matmul's forward and backward (native: the C++
        # node's, whose backward AOTAutograd traces through) on meta tensors
        code = ("import torch, mmtune.torch as mt\n"
                "def t(*s):\n"
                "    return torch.empty(*s, device='meta', dtype=torch.float16,"
                " requires_grad=True)\n"
                "a, w, bias, c = t(4, 8), t(12, 8), t(12), t(4, 6)\n"
                "def f(a, w, bias, c):\n"
                "    return torch.ops.mmtune.matmul(a, w, bias, 'col', 'silu', True, 1.0, 0.5, c,"
                " None, False, True).sum()\n"
                "torch.compile(f, backend='aot_eager', fullgraph=True)(a, w, bias, c).backward()\n"
                "print('grads', tuple(a.grad.shape), tuple(w.grad.shape), tuple(bias.grad.shape),"
                " tuple(c.grad.shape))\n")
        for out in self.both_operators(code):
            self.assertIn("grads (4, 8) (12, 8) (12,) (4, 6)", out)

    def test_backward_against_autograd(self):
        # mmtune::matmul's backward formula (run here on CPU float64, called as autograd
        # calls it) against torch's autograd of the same expression, for each activation,
        # gated or not, bias by column and by row, c, transposes and a shared 2-D weight
        th, mt = self.th, self.mt
        from fakes import matmul_reference

        class Ctx:
            def save_for_backward(self, *t):
                self.saved_tensors = t

        cases = [(act, gated, bias_mode, ta, tb, batch)
                 for act in (None, "relu", "gelu", "gelu_tanh", "silu")
                 for gated, bias_mode in ((False, "col"), (False, "row"), (True, "col"))
                 for ta, tb, batch in ((False, True, 0), (True, False, 3))]
        gen = th.Generator().manual_seed(5)
        for act, gated, bias_mode, ta, tb, batch in cases:
            m, n, k = 7, 6, 5
            nb = 2 * n if gated else n
            lead = (batch,) if batch else ()
            def leaf(*shape):  # noqa: E306
                return th.randn(*shape, generator=gen, dtype=th.float64).requires_grad_()
            a = leaf(*lead, *((k, m) if ta else (m, k)))
            b = leaf(*((nb, k) if tb else (k, nb)))  # 2-D: one weight for the whole batch
            bias = leaf(nb if bias_mode == "col" else m)
            c = leaf(*lead, m, n)
            args = (a, b, bias, bias_mode, act, gated, 0.75, 0.5, c, None, ta, tb)
            ref = matmul_reference(th, a, b, bias, bias_mode, act, gated, 0.75, 0.5, c, ta, tb)
            grad = th.randn(ref.shape, generator=gen, dtype=th.float64)
            want = th.autograd.grad(ref, (a, b, bias, c), grad)
            ctx = Ctx()
            ctx.needs_input_grad = (True, True, True) + (False,) * 5 + (True, False, False,
                                                                           False)
            mt._setup_backward(ctx, args, ref)
            got = mt._backward(ctx, grad)
            self.assertTrue(all(got[i] is None for i in (3, 4, 5, 6, 7, 9, 10, 11)))
            formulas = {"python": [got[i] for i in (0, 1, 2, 8)]}
            if mt.NATIVE_OPS:  # the C++ node's backward, the same formula
                formulas["native"] = th.ops.mmtune._matmul_backward(
                    grad, a.detach(), b.detach(), bias.detach(), c.detach(), bias_mode, act,
                    gated, 0.75, 0.5, ta, tb, [True] * 4)
            for which, grads in formulas.items():
                for name, g, w in zip("a b bias c".split(), grads, want):
                    self.assertEqual(g.shape, w.shape, name)
                    self.assertLess((g - w).abs().max().item(), 1e-9,
                                    f"{which} d{name}: act {act}, gated {gated}, bias "
                                    f"{bias_mode}, trans {ta}{tb}, batch {batch}")

    def test_grouped_fake_and_layout(self):
        th, mt = self.th, self.mt
        a, b = self.meta(100, 64, dtype=th.bfloat16), self.meta(8, 32, 64, dtype=th.bfloat16)
        rows = self.meta(9, dtype=th.int32)
        y = mt.grouped_matmul(a, b, rows, "contiguous", 0, None, "silu", th.float32, True)
        self.assertEqual((tuple(y.shape), y.dtype), ((100, 32), th.float32))
        y = mt.grouped_matmul(self.meta(8, 20, 64), self.meta(8, 64, 48), self.meta(8, dtype=th.int32),
                              "masked", 0, None, None, None, False)
        self.assertEqual(tuple(y.shape), (8, 20, 48))
        y = mt.grouped_matmul(a, b, rows, "contiguous", 0, None, "silu", None, True, True)
        self.assertEqual(tuple(y.shape), (100, 16))  # gated: half b's 32 product columns
        with self.assertRaisesRegex(ValueError, "layout must be 'contiguous' or 'masked'"):
            mmtune.grouped_matmul(a, b, rows, layout="sorted")

    def test_native_library_that_fails_warns(self):
        # $MMTUNE_TORCH_OPS naming no file, or a file that is not such a library: a warning
        # naming it, and the Python operators serve
        with tempfile.TemporaryDirectory() as d:
            junk = os.path.join(d, "libjunk.so")
            with open(junk, "w") as f:
                f.write("not a shared library")
            for path, says in ((os.path.join(d, "none.so"), "no such file"),
                               (junk, "not loaded")):
                r = _run_python("import mmtune.torch as mt; print('native', mt.NATIVE_OPS)",
                                {"MMTUNE_TORCH_OPS": path})
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("native None", r.stdout)
                self.assertIn(path, r.stderr)
                self.assertIn(says, r.stderr)
                self.assertIn("the Python operators serve", r.stderr)

    def test_grouped_fake_refuses_bad_dims(self):
        th, mt = self.th, self.mt
        rows = self.meta(9, dtype=th.int32)
        for a, b, layout in ((self.meta(8, 4, 64), self.meta(8, 32, 64), "contiguous"),
                             (self.meta(100, 64), self.meta(8, 32, 64), "masked"),
                             (self.meta(100, 64), self.meta(32, 64), "contiguous")):
            with self.assertRaisesRegex(ValueError, f"are not a {layout} grouped problem"):
                mt.grouped_matmul(a, b, rows, layout, 0, None, None, None, True)

    def test_backward_refuses_unknown_activation(self):
        with self.assertRaisesRegex(ValueError, "act 'tanh' has no derivative here"):
            self.mt._act_and_grad("tanh", self.th.zeros(2))

    def test_schemas(self):
        th = self.th
        s = str(th.ops.mmtune.matmul.default._schema)
        self.assertIn("mmtune::matmul(Tensor a, Tensor b, Tensor? bias, str bias_mode, str? act, "
                      "bool gated, float alpha, float beta, Tensor? c, ScalarType? out_dtype, "
                      "bool trans_a, bool trans_b) -> Tensor", s)
        s = str(th.ops.mmtune.matmul_out.default._schema)
        self.assertIn("Tensor(a0!) out", s)
        self.assertTrue(s.endswith("-> ()"), s)

    def test_fake_shapes(self):
        th = self.th
        x, w = self.meta(8, 64), self.meta(32, 64)
        y = self.op(x, w, act="gelu_tanh")
        self.assertEqual((tuple(y.shape), y.dtype, y.device.type), ((8, 32), th.float16, "meta"))
        y = self.op(x, w, act="silu", gated=True, out_dtype=th.float32)
        self.assertEqual((tuple(y.shape), y.dtype), ((8, 16), th.float32))
        y = self.op(self.meta(5, 64, 8), self.meta(64, 24), trans_a=True, trans_b=False)
        self.assertEqual(tuple(y.shape), (5, 8, 24))
        y = self.op(self.meta(6, 50, 64), self.meta(6, 50, 64))
        self.assertEqual(tuple(y.shape), (6, 50, 50))
        y = self.op(self.meta(6, 50, 64), self.meta(1, 40, 64))
        self.assertEqual(tuple(y.shape), (6, 50, 40))
        for bad, msg in (((x, self.meta(32, 65)), "inner dimensions"),
                         ((x, self.meta(31, 64)), "even number"),
                         ((self.meta(64), w), "2-D or 3-D"),
                         ((self.meta(2, 8, 64), self.meta(3, 32, 64)), "batches of 2 and 3")):
            with self.assertRaises(ValueError) as cm:
                self.op(*bad, gated=msg == "even number")
            self.assertIn(msg, str(cm.exception))
        out = self.meta(8, 32)
        self.assertIsNone(self.th.ops.mmtune.matmul_out(out, x, w, None, "col", None, False, 1.0,
                                                        0.0, None, False, True))
        with self.assertRaises(ValueError) as cm:
            self.th.ops.mmtune.matmul_out(self.meta(8, 31), x, w, None, "col", None, False, 1.0,
                                          0.0, None, False, True)
        self.assertIn("out has shape (8, 31), D is (8, 32)", str(cm.exception))

    def test_traced_graph(self):
        from torch.fx.experimental.proxy_tensor import make_fx

        def f(x, w, b):
            return self.op(x, w, bias=b, act="relu") * 2

        g = make_fx(f, tracing_mode="fake")(self.meta(8, 64), self.meta(32, 64), self.meta(32))
        calls = [str(n.target) for n in g.graph.nodes if n.op == "call_function"]
        self.assertEqual(calls[0], "mmtune.matmul.default")

    def test_linear_module(self):
        th, mt = self.th, self.mt
        lin = mt.Linear(64, 32, act="relu", device="meta", dtype=th.float16)
        self.assertIsInstance(lin, th.nn.Linear)
        self.assertEqual(list(lin.state_dict()), ["weight", "bias"])
        self.assertEqual(tuple(lin(self.meta(2, 4, 64)).shape), (2, 4, 32))
        self.assertIn("act='relu'", repr(lin))

    def test_swap_linear(self):
        th, mt = self.th, self.mt
        m = th.nn.Sequential(th.nn.Linear(64, 32), th.nn.ReLU(),
                             th.nn.Sequential(th.nn.Linear(32, 8, bias=False)))
        m.eval()
        before = {k: v.clone() for k, v in m.state_dict().items()}
        params = [id(p) for p in m.parameters()]
        self.assertIs(mt.swap_linear(m), m)
        self.assertIs(type(m[0]), mt.Linear)
        self.assertEqual(m[0].act, "relu")  # the ReLU after it: fused, its place an Identity
        self.assertIs(type(m[1]), th.nn.Identity)
        self.assertIs(type(m[2][0]), mt.Linear)
        self.assertIsNone(m[2][0].act)
        self.assertIsNone(m[2][0].bias)
        self.assertFalse(m[0].training)
        self.assertEqual([id(p) for p in m.parameters()], params)  # the same parameters
        self.assertEqual(list(m.state_dict()), list(before))
        # a GELU (tanh) and a SiLU after Linears; an activation after a non-Linear stays
        g = mt.swap_linear(th.nn.Sequential(th.nn.Linear(8, 8), th.nn.GELU(approximate="tanh"),
                                            th.nn.LayerNorm(8), th.nn.SiLU(), th.nn.Linear(8, 4),
                                            th.nn.SiLU()))
        self.assertEqual([type(x).__name__ for x in g],
                         ["Linear", "Identity", "LayerNorm", "SiLU", "Linear", "Identity"])
        self.assertEqual((g[0].act, g[4].act), ("gelu_tanh", "silu"))
        fresh = th.nn.Sequential(th.nn.Linear(64, 32), th.nn.ReLU(),
                                 th.nn.Sequential(th.nn.Linear(32, 8, bias=False)))
        mt.swap_linear(fresh).load_state_dict(before)  # a plain model's state dict loads
        for k, v in fresh.state_dict().items():
            self.assertTrue(th.equal(v, before[k]), k)


class TestTorchGatedMLP(_WithTorch):
    """swap_linear on a Llama-style MLP: one GatedMLP with the same state dict, whose gate and
    up weights are views of the interleaved weight the gated kernel reads."""

    def test_swap_and_state_dict(self):
        th, mt = self.th, self.mt
        model = th.nn.Sequential(llama_mlp(th), llama_mlp(th, act=th.nn.GELU("tanh")),
                                 llama_mlp(th, act=th.nn.ReLU()))
        before = {k: v.clone() for k, v in model.state_dict().items()}
        mt.swap_linear(model)
        self.assertIs(type(model[0]), mt.GatedMLP)
        self.assertEqual((model[0].act, model[1].act), ("silu", "gelu_tanh"))
        self.assertIsNot(type(model[2]), mt.GatedMLP)  # ReLU: its Linear layers swapped alone
        self.assertIs(type(model[2].gate_proj), mt.Linear)
        self.assertEqual(list(model.state_dict()), list(before))
        for k, v in model.state_dict().items():
            self.assertTrue(th.equal(v, before[k]), k)
        g = model[0]
        self.assertTrue(th.equal(g.gate_up[0::2], before["0.gate_proj.weight"]))
        self.assertTrue(th.equal(g.gate_up[1::2], before["0.up_proj.weight"]))
        new = {k: th.randn_like(v) for k, v in before.items()}
        model.load_state_dict(new)  # writes through the views
        self.assertTrue(th.equal(g.gate_up[0::2], new["0.gate_proj.weight"]))
        self.assertTrue(th.equal(g.gate_up[1::2], new["0.up_proj.weight"]))

    def test_forward_shape(self):
        th, mt = self.th, self.mt
        mlp = mt.swap_linear(th.nn.Sequential(llama_mlp(th).to("meta", th.float16)))[0]
        self.assertIs(type(mlp), mt.GatedMLP)
        y = mlp(th.empty(2, 5, 64, device="meta", dtype=th.float16))
        self.assertEqual((tuple(y.shape), y.dtype), ((2, 5, 64), th.float16))


class TestTorchFp8(_WithTorch):
    """mmtune.torch's FP8 operators and modules without a GPU: schemas, fake implementations,
    the modules' buffers, swap_linear's fp8 recipes, a traced graph."""

    def meta(self, *shape, dtype=None):
        return self.th.empty(*shape, device="meta", dtype=dtype or self.th.bfloat16)

    def test_schemas(self):
        ops = self.th.ops.mmtune
        self.assertIn("mmtune::scaled_matmul(Tensor a, Tensor b, str scale_mode, Tensor scale_a, "
                      "Tensor scale_b, Tensor? bias, str? act, bool gated, ScalarType out_dtype, "
                      "bool fast_accum) -> Tensor", str(ops.scaled_matmul.default._schema))
        self.assertIn("mmtune::quantize(Tensor x, ScalarType dtype, str mode) -> (Tensor, Tensor)",
                      str(ops.quantize.default._schema))

    def test_fake_shapes(self):
        th = self.th
        e4m3, x = th.float8_e4m3fn, self.meta(300, 1000)
        for mode, shape in (("tensor", ()), ("row", (300,)), ("1x128", (8, 300)),
                            ("128x128", (3, 8))):
            q, s = th.ops.mmtune.quantize(x, e4m3, mode)
            self.assertEqual((tuple(q.shape), q.dtype), ((300, 1000), e4m3), mode)
            self.assertEqual((tuple(s.shape), s.dtype), (shape, th.float32), mode)
        with self.assertRaisesRegex(ValueError, "mode one of tensor, row, 1x128, 128x128, got "
                                                "'64x64'"):
            th.ops.mmtune.quantize(x, e4m3, "64x64")
        a, b = self.meta(8, 256, dtype=e4m3), self.meta(96, 256, dtype=th.float8_e5m2)
        sa, sb = self.meta(8, dtype=th.float32), self.meta(96, dtype=th.float32)
        y = th.ops.mmtune.scaled_matmul(a, b, "vectors", sa, sb, None, "silu", False, th.float16,
                                        False)
        self.assertEqual((tuple(y.shape), y.dtype), ((8, 96), th.float16))
        y = th.ops.mmtune.scaled_matmul(a, b, "vectors", sa, sb, None, "silu", True, th.bfloat16,
                                        True)
        self.assertEqual((tuple(y.shape), y.dtype), ((8, 48), th.bfloat16))
        for bad, gated, msg in (((a, self.meta(96, 128, dtype=e4m3)), False, "M x K and N x K"),
                                ((a, self.meta(95, 256, dtype=e4m3)), True, "even number")):
            with self.assertRaises(ValueError) as cm:
                th.ops.mmtune.scaled_matmul(*bad, "vectors", sa, sb, None, None, gated,
                                            th.bfloat16, False)
            self.assertIn(msg, str(cm.exception))

    def test_linear_module(self):
        th, mt = self.th, self.mt
        for recipe, scale in (("row", (32,)), ("block", (1, 2)), ("tensor", ())):
            lin = mt.Fp8Linear(200, 32, act="gelu_tanh", recipe=recipe, device="meta")
            self.assertEqual(list(lin.state_dict()), ["bias", "weight", "weight_scale"])
            self.assertEqual((lin.weight.dtype, tuple(lin.weight.shape)),
                             (th.float8_e4m3fn, (32, 200)))
            self.assertEqual(tuple(lin.weight_scale.shape), scale, recipe)
            y = lin(self.meta(2, 3, 200))
            self.assertEqual((tuple(y.shape), y.dtype), ((2, 3, 32), th.bfloat16))
        with self.assertRaisesRegex(ValueError, "recipe must be one of row, block, tensor, got "
                                                "'channel'"):
            mt.Fp8Linear(64, 32, recipe="channel", device="meta")
        with self.assertRaisesRegex(TypeError, "dtype must be torch.float8_e4m3fn or "
                                               "torch.float8_e5m2, got torch.float16"):
            mt.Fp8Linear(64, 32, dtype=th.float16, device="meta")
        plain = th.nn.Linear(64, 48, bias=False, device="meta", dtype=th.float16)
        lin = mt.Fp8Linear.from_linear(plain, "block", th.float8_e5m2, act="relu")
        self.assertEqual((lin.weight.dtype, tuple(lin.weight_scale.shape), lin.bias, lin.act),
                         (th.float8_e5m2, (1, 1), None, "relu"))
        self.assertIn("recipe='block'", repr(lin))

    def test_traced_graph(self):
        from torch.fx.experimental.proxy_tensor import make_fx
        th, mt = self.th, self.mt
        lin = mt.Fp8Linear(64, 32, recipe="block", device="meta")

        def f(x, w, scale, bias):
            return th.func.functional_call(lin, {"weight": w, "weight_scale": scale,
                                                 "bias": bias}, (x,))

        g = make_fx(f, tracing_mode="fake")(self.meta(8, 64), lin.weight, lin.weight_scale,
                                            lin.bias)
        calls = [str(n.target) for n in g.graph.nodes if n.op == "call_function"]
        self.assertIn("mmtune.quantize.default", calls)
        self.assertIn("mmtune.scaled_matmul.default", calls)

    def test_swap_linear(self):
        th, mt = self.th, self.mt
        model = th.nn.Sequential(th.nn.Linear(64, 64), th.nn.SiLU(), llama_mlp(th)).to(
            "meta", th.bfloat16)
        self.assertIs(mt.swap_linear(model, fp8="row"), model)
        self.assertEqual([type(x).__name__ for x in model],
                         ["Fp8Linear", "Identity", "Fp8GatedMLP"])
        self.assertEqual((model[0].act, model[2].act), ("silu", "silu"))
        g = model[2]
        self.assertEqual(tuple(g.gate_up_weight.shape), (2 * g.down_proj.in_features, 64))
        self.assertEqual(tuple(g.gate_up_scale.shape), (2 * g.down_proj.in_features,))
        self.assertEqual(list(g.state_dict()), ["gate_up_weight", "gate_up_scale",
                                                "down_proj.weight", "down_proj.weight_scale"])
        y = model(self.meta(3, 64))
        self.assertEqual((tuple(y.shape), y.dtype), ((3, 64), th.bfloat16))
        with self.assertRaisesRegex(ValueError, "recipe must be one of row, block, tensor, got "
                                                "'rows'"):
            mt.swap_linear(th.nn.Sequential(th.nn.Linear(8, 8)), fp8="rows")

    def test_cpu_tensors_refused(self):
        # both operators, native and Python, name the tensor that is not on a CUDA device
        code = ("import torch, mmtune.torch\n"
                "x = torch.ones(4, 256)\n"
                "q = torch.ones(4, 256).to(torch.float8_e4m3fn)\n"
                "for call in (lambda: torch.ops.mmtune.quantize(x, torch.float8_e4m3fn, 'row'),\n"
                "             lambda: torch.ops.mmtune.scaled_matmul(q, q, 'vectors',\n"
                "                 torch.ones(4), torch.ones(4), None, None, False,\n"
                "                 torch.bfloat16, False)):\n"
                "    try:\n"
                "        call()\n"
                "    except Exception as e:\n"
                "        print(str(e).splitlines()[0])\n")
        for mode in ("0", None):
            r = _run_python(code, {"MMTUNE_TORCH_OPS": mode})
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            self.assertEqual(len(lines), 2, r.stdout)
            self.assertRegex(lines[0], r"x is a (torch )?tensor on cpu, not on a CUDA device")
            self.assertRegex(lines[1], r"a is a (torch )?tensor on cpu, not on a CUDA device")

    def test_loads_the_plain_state_dict(self):
        # a checkpoint of the model before the swap loads into the FP8 one (quantized as it
        # loads: on meta tensors the operator's fake); a key missing or extra still fails
        th, mt = self.th, self.mt
        plain = th.nn.Sequential(th.nn.Linear(64, 96), llama_mlp(th)).to("meta", th.bfloat16)
        sd = plain.state_dict()
        model = mt.swap_linear(th.nn.Sequential(th.nn.Linear(64, 96), llama_mlp(th)).to(
            "meta", th.bfloat16), fp8="block")
        result = model.load_state_dict(sd)
        self.assertEqual((result.missing_keys, result.unexpected_keys), ([], []))
        self.assertEqual(model[0].weight.dtype, th.float8_e4m3fn)
        self.assertEqual(tuple(model[1].gate_up_scale.shape), (2, 1))  # 192 x 64, 128 x 128
        model.load_state_dict(model.state_dict())  # its own, FP8
        bad = dict(sd)
        del bad["1.up_proj.weight"]
        with self.assertRaisesRegex(ValueError, "1.: a gated MLP's state dict has both "
                                                "gate_proj.weight and up_proj.weight, or neither"):
            model.load_state_dict(bad)
        bad = dict(sd)
        bad["0.extra"] = sd["0.bias"]
        with self.assertRaises(RuntimeError):
            model.load_state_dict(bad)

    def test_nn_names(self):
        import mmtune.nn
        for name in mmtune.nn.__all__:
            self.assertIs(getattr(mmtune.nn, name), getattr(self.mt, name), name)


class TestWithoutDriver(unittest.TestCase):
    """What reaches the library on a machine without a GPU."""

    def test_gemm_raises_no_driver(self):
        with self.assertRaises(mmtune.Error) as cm:
            mmtune.gemm(CAI((4, 5)), CAI((5, 6)), CAI((4, 6)))
        e = cm.exception
        self.assertIsInstance(e, RuntimeError)
        self.assertEqual((e.status, e.status_name), (5, "MMT_ERR_NO_DRIVER"))
        self.assertIn("libcuda.so.1", e.message)
        self.assertTrue(str(e).startswith("MMT_ERR_NO_DRIVER: "))

    def test_explain_raises_no_driver(self):
        for call in (lambda: mmtune.explain(CAI((4, 5)), CAI((5, 6))),
                     lambda: mmtune.explain_shape(64, 64, 64, "bf16"),
                     lambda: mmtune.open(1)):
            with self.assertRaisesRegex(mmtune.Error, "MMT_ERR_NO_DRIVER"):
                call()

    def test_corrupt_database(self):
        with tempfile.NamedTemporaryFile(suffix=".db") as f:
            f.write(b"not a database" * 100)
            f.flush()
            with self.assertRaises(mmtune.Error) as cm:
                mmtune.open(0, db_path=f.name)
        self.assertEqual(cm.exception.status_name, "MMT_ERR_DB_CORRUPT")

    def test_record_from_the_environment(self):
        # The module-level calls (and so mmtune.torch) open their contexts without options:
        # $MMTUNE_RECORD is how they record.  A bad value is refused by name; "1" opens the
        # database for writing (made before the device is looked for, so without a GPU too).
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "rec.db")
            old = os.environ.get("MMTUNE_RECORD")
            try:
                os.environ["MMTUNE_RECORD"] = "yes"
                with self.assertRaisesRegex(mmtune.Error, r'\$MMTUNE_RECORD must be 0 or 1, '
                                            r'got "yes"'):
                    mmtune.open(0, db_path=db)
                self.assertFalse(os.path.exists(db))
                os.environ["MMTUNE_RECORD"] = "1"
                with self.assertRaisesRegex(mmtune.Error, "MMT_ERR_NO_DRIVER"):
                    mmtune.open(0, db_path=db)
                self.assertTrue(os.path.exists(db))
            finally:
                if old is None:
                    os.environ.pop("MMTUNE_RECORD", None)
                else:
                    os.environ["MMTUNE_RECORD"] = old

    def test_library_checks_through_a_context_that_did_not_open(self):
        # mmt_gemm checks its arguments before it says the context did not open: through a
        # context whose open failed, the checks show that each argument arrives in its place.
        lib = _lib.load()
        handle = ctypes.c_void_p()
        self.assertEqual(lib.mmt_open(handle, 0, None), 5)
        with mmtune.Context(handle.value, 0) as ctx:
            a, b, c = CAI((4, 5), ptr=0x1000), CAI((5, 6), ptr=0x2000), CAI((4, 6), ptr=0x3000)
            for args, fragment in (((CAI((4, 5), ptr=0x1002), b, c), "A (0x1002) is not 4-byte"),
                                   ((a, CAI((5, 6), ptr=0x2002), c), "B (0x2002) is not 4-byte"),
                                   ((a, b, CAI((4, 6), ptr=0x3002)), "C (0x3002) is not 4-byte"),
                                   ((a, b, c), "the context did not open")):
                with self.assertRaises(mmtune.Error) as cm:
                    ctx.gemm(*args)
                self.assertIn(fragment, cm.exception.message)
            with self.assertRaisesRegex(mmtune.Error, r"MMT_ERR_INVALID_ARG: lda must be >= "
                                        r"max\(1, K\) = 7, got 6"):
                ctx.explain_shape(5, 6, 7, lda=6)
            with self.assertRaisesRegex(mmtune.Error, r"ldc must be >= max\(1, M\) = 5, got 4"):
                ctx.explain_shape(5, 6, 7, order="col", ldc=4)
        self.assertIn("closed", repr(ctx))
        with self.assertRaisesRegex(mmtune.Error, "closed"):
            ctx.gemm(a, b, c)


if __name__ == "__main__":
    unittest.main()
