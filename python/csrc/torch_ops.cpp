/*
 * python/csrc/torch_ops.cpp -- mmtune::matmul, matmul_out, grouped_matmul, scaled_matmul and
 * quantize as native PyTorch operators: the schemas of mmtune/torch.py, their CUDA kernels in
 * C++ calling mmt_matmul (mmt_quantize) directly, so that an eager call costs the dispatcher
 * and the library, not a Python function
 * (mmtune/torch.py's operators, the fallback where this library is not built, run
 * mmtune.matmul: tens of microseconds a call).
 *
 * Built apart from the package (scripts/build-torch-ops.sh) against the installed torch;
 * mmtune/torch.py loads it (torch.ops.load_library), then hands it, through
 * mmt_torch_ops_bind, the library's mmt_matmul and mmt_errmsg, a callback that returns the
 * package's default context of a device (made on a device's first call, then kept here) and
 * mmt_quantize.  The fake (meta) implementations stay in Python.  Errors are RuntimeErrors
 * naming the argument; the library's own checks (overlap, alignment, unsupported problems)
 * come with its message.
 */
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

extern "C" {
#include "mmtune.h"
}

namespace {

using matmul_fn = mmt_status (*)(mmt_context *, const mmt_matmul_desc *, void *);
using quantize_fn = mmt_status (*)(mmt_context *, const mmt_quantize_desc *, void *);
using errmsg_fn = const char *(*)(const mmt_context *);
using context_fn = void *(*)(int);

constexpr int kMaxDevices = 64;

std::atomic<matmul_fn> g_matmul{nullptr};
std::atomic<quantize_fn> g_quantize{nullptr};
std::atomic<errmsg_fn> g_errmsg{nullptr};
std::atomic<context_fn> g_context{nullptr};
std::atomic<mmt_context *> g_ctx[kMaxDevices];
std::mutex g_ctx_lock;

/* The package's default context of `device`: asked of the bound callback once, then kept. */
mmt_context *context_of(int device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "mmtune: CUDA device ", device,
              " is past the ", kMaxDevices, " the native operators serve");
  mmt_context *ctx = g_ctx[device].load(std::memory_order_acquire);
  if (ctx) return ctx;
  std::lock_guard<std::mutex> hold(g_ctx_lock);
  ctx = g_ctx[device].load(std::memory_order_acquire);
  if (ctx) return ctx;
  context_fn make = g_context.load();
  TORCH_CHECK(make, "mmtune: the native operators are not bound (import mmtune.torch)");
  ctx = static_cast<mmt_context *>(make(device));
  TORCH_CHECK(ctx, "mmtune: no context on cuda:", device,
              " (mmtune.default_context(", device, ") says why)");
  g_ctx[device].store(ctx, std::memory_order_release);
  return ctx;
}

mmt_dtype dtype_of(at::ScalarType t, const char *name) {
  switch (t) {
    case at::kFloat: return MMT_F32;
    case at::kHalf: return MMT_F16;
    case at::kBFloat16: return MMT_BF16;
    case at::kFloat8_e4m3fn: return MMT_E4M3;
    case at::kFloat8_e5m2: return MMT_E5M2;
    default: TORCH_CHECK(false, "mmtune: ", name, " has dtype ", t, "; mmtune takes float32, "
                         "float16, bfloat16 and (inputs, D) float8_e4m3fn, float8_e5m2");
  }
}

/* One matrix of a 2-D or 3-D tensor: batch, rows, cols, batch stride (0 for a batch of 1),
 * row stride, column stride (elements). */
struct matrix {
  int64_t batch, rows, cols, sb, s0, s1;
};

matrix matrix_of(const at::Tensor &t, const char *name) {
  TORCH_CHECK(t.is_cuda(), "mmtune: ", name, " is a tensor on ", t.device(),
              ", not on a CUDA device");
  if (t.dim() == 2) return {1, t.size(0), t.size(1), 0, t.stride(0), t.stride(1)};
  TORCH_CHECK(t.dim() == 3, "mmtune: ", name, " must be 2-D or 3-D (a batch of matrices), got ",
              t.sizes());
  return {t.size(0), t.size(1), t.size(2), t.size(0) > 1 ? t.stride(0) : 0, t.stride(1),
          t.stride(2)};
}

/* Row-major (true) or column-major and the leading dimension of an r x c matrix with element
 * strides s0, s1; prefer_row breaks the tie of a vector (mmtune/_core.py's _storage). */
std::pair<bool, int64_t> storage(const char *name, const matrix &x, bool prefer_row) {
  const int64_t r = x.rows, c = x.cols, s0 = x.s0, s1 = x.s1;
  const bool row = (c <= 1 || s1 == 1) && (r <= 1 || s0 >= std::max<int64_t>(1, c));
  const bool col = (r <= 1 || s0 == 1) && (c <= 1 || s1 >= std::max<int64_t>(1, r));
  if (row && (prefer_row || !col)) return {true, r > 1 ? s0 : std::max<int64_t>(1, c)};
  if (col) return {false, c > 1 ? s1 : std::max<int64_t>(1, r)};
  TORCH_CHECK(false, "mmtune: ", name, " (", r, "x", c, ", strides ", s0, ", ", s1,
              " elements) is neither row- nor column-major; make it contiguous first");
}

mmt_activation activation_of(const std::optional<c10::string_view> &act) {
  if (!act) return MMT_ACT_NONE;
  const c10::string_view a = *act;
  if (a == "none") return MMT_ACT_NONE;
  if (a == "relu") return MMT_ACT_RELU;
  if (a == "gelu_tanh") return MMT_ACT_GELU_TANH;
  if (a == "gelu" || a == "gelu_erf") return MMT_ACT_GELU_ERF;
  if (a == "silu" || a == "swish") return MMT_ACT_SILU;
  TORCH_CHECK(false, "mmtune: act must be None, 'relu', 'gelu', 'gelu_tanh' or 'silu', got '",
              std::string(a), "'");
}

/* d's in_type and b_type: a's and b's dtype, one, or two FP8 ones. */
void input_types(const at::Tensor &a, const at::Tensor &b, mmt_matmul_desc &d) {
  d.in_type = dtype_of(a.scalar_type(), "a");
  if (b.scalar_type() == a.scalar_type()) return;
  const mmt_dtype bt = dtype_of(b.scalar_type(), "b");
  const bool fp8 =
      (d.in_type == MMT_E4M3 || d.in_type == MMT_E5M2) && (bt == MMT_E4M3 || bt == MMT_E5M2);
  TORCH_CHECK(fp8, "mmtune: a and b must have one dtype (or two FP8 dtypes), got ",
              a.scalar_type(), " and ", b.scalar_type());
  d.b_type = bt;
}

/* The device pointer of a contiguous float32 tensor of `count` elements on cuda:dev. */
const float *scales_of(const at::Tensor &v, const char *name, int64_t count, int dev) {
  TORCH_CHECK(v.numel() == count && v.scalar_type() == at::kFloat && v.is_contiguous(),
              "mmtune: ", name, " must be a contiguous float32 tensor of ", count,
              " elements, got ", v.scalar_type(), " of shape ", v.sizes());
  TORCH_CHECK(v.is_cuda() && v.get_device() == dev, "mmtune: ", name, " is on ", v.device(),
              ", the operands on cuda:", dev);
  return static_cast<const float *>(v.data_ptr());
}

/* mmt_matmul of d on the current stream of cuda:dev, through the package's context. */
void launch(const mmt_matmul_desc &d, int dev) {
  mmt_context *ctx = context_of(dev);
  void *stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev)).stream();
  const mmt_status rc = g_matmul.load()(ctx, &d, stream);
  TORCH_CHECK(rc == MMT_OK, "mmtune: mmt_matmul: ", g_errmsg.load()(ctx));
}

/* D = out (allocated when undefined) of mmtune.matmul's arguments, described in *d (the
 * scales left to the caller), not launched. */
at::Tensor describe(mmt_matmul_desc &d, at::Tensor out, const at::Tensor &a, const at::Tensor &b,
                    const std::optional<at::Tensor> &bias, c10::string_view bias_mode,
                    const std::optional<c10::string_view> &act, bool gated, double alpha,
                    double beta, const std::optional<at::Tensor> &c,
                    std::optional<at::ScalarType> out_dtype, bool trans_a, bool trans_b) {
  const matrix ma = matrix_of(a, "a"), mb = matrix_of(b, "b");
  const int dev = a.get_device();
  TORCH_CHECK(b.get_device() == dev, "mmtune: a is on ", a.device(), " but b on ", b.device());
  d = mmt_matmul_desc{};
  input_types(a, b, d);
  const int64_t m = trans_a ? ma.cols : ma.rows, k = trans_a ? ma.rows : ma.cols;
  const int64_t kb = trans_b ? mb.cols : mb.rows, nb = trans_b ? mb.rows : mb.cols;
  TORCH_CHECK(k == kb, "mmtune: inner dimensions differ: op(a) is ", m, "x", k, " but op(b) is ",
              kb, "x", nb);
  TORCH_CHECK(!gated || nb % 2 == 0,
              "mmtune: gated needs an even number of columns of op(b) (gate, up), got ", nb);
  const int64_t n = gated ? nb / 2 : nb, batch = std::max(ma.batch, mb.batch);
  TORCH_CHECK(ma.batch == 1 || ma.batch == batch, "mmtune: a has a batch of ", ma.batch,
              ", b of ", mb.batch);
  TORCH_CHECK(mb.batch == 1 || mb.batch == batch, "mmtune: b has a batch of ", mb.batch,
              ", a of ", ma.batch);
  const bool batched = a.dim() == 3 || b.dim() == 3;
  if (!out.defined()) {
    const auto opts = a.options().dtype(out_dtype ? *out_dtype : a.scalar_type());
    out = batched ? at::empty({batch, m, n}, opts) : at::empty({m, n}, opts);
  }
  const matrix md = matrix_of(out, "out");
  TORCH_CHECK(md.rows == m && md.cols == n && md.batch == batch && out.get_device() == dev,
              "mmtune: out is ", out.sizes(), " on ", out.device(), "; D is ", batch, " x ", m,
              " x ", n, " on cuda:", dev);
  d.out_type = dtype_of(out.scalar_type(), "out");
  const auto [row_d, ldd] = storage("out", md, true);
  const auto [row_a, lda] = storage("a", ma, row_d);
  const auto [row_b, ldb] = storage("b", mb, row_d);
  d.order = row_d ? MMT_ROW_MAJOR : MMT_COL_MAJOR;
  d.trans_a = (trans_a != (row_a != row_d)) ? MMT_TRANS : MMT_NO_TRANS;
  d.trans_b = (trans_b != (row_b != row_d)) ? MMT_TRANS : MMT_NO_TRANS;
  d.m = m, d.n = n, d.k = k;
  d.alpha = static_cast<float>(alpha), d.beta = static_cast<float>(beta);
  d.a = a.data_ptr(), d.lda = lda, d.b = b.data_ptr(), d.ldb = ldb;
  d.d = out.data_ptr(), d.ldd = ldd;
  d.batch = batch;
  d.stride_a = ma.batch > 1 ? ma.sb : 0;
  d.stride_b = mb.batch > 1 ? mb.sb : 0;
  d.stride_d = batch > 1 ? md.sb : 0;
  if (c) {
    const matrix mc = matrix_of(*c, "c");
    TORCH_CHECK(mc.rows == m && mc.cols == n && (mc.batch == 1 || mc.batch == batch) &&
                    c->scalar_type() == out.scalar_type(),
                "mmtune: c is ", c->sizes(), " ", c->scalar_type(), "; D is ", out.sizes(), " ",
                out.scalar_type());
    const auto [row_c, ldc] = storage("c", mc, row_d);
    TORCH_CHECK(row_c == row_d, "mmtune: c must be stored in out's order (both row- or "
                "column-major)");
    d.c = c->data_ptr(), d.ldc = ldc, d.stride_c = mc.batch > 1 ? mc.sb : 0;
  } else {
    TORCH_CHECK(beta == 0.0, "mmtune: beta must be 0 without c");
  }
  if (bias) {
    TORCH_CHECK(bias_mode == "col" || bias_mode == "row", "mmtune: bias_mode must be 'col' or "
                "'row', got '", std::string(bias_mode), "'");
    const bool by_col = bias_mode == "col";
    const int64_t len = by_col ? nb : m;
    TORCH_CHECK(bias->is_cuda() && bias->get_device() == dev, "mmtune: bias is on ",
                bias->device(), ", the operands on cuda:", dev);
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == len && (len <= 1 || bias->stride(0) == 1),
                "mmtune: bias must be a contiguous vector of ", len, " elements, got ",
                bias->sizes());
    TORCH_CHECK(bias->scalar_type() == at::kFloat || bias->scalar_type() == out.scalar_type(),
                "mmtune: bias has dtype ", bias->scalar_type(), "; it must be float32 or D's ",
                out.scalar_type());
    d.bias_mode = by_col ? MMT_BIAS_COL : MMT_BIAS_ROW;
    d.bias = bias->data_ptr();
    d.bias_type = bias->scalar_type() == at::kFloat ? MMT_F32 : d.out_type;
  }
  d.act = activation_of(act);
  d.gated = gated ? 1 : 0;
  return out;
}

/* D = out (allocated when undefined) of mmtune.matmul's arguments, computed. */
at::Tensor run(at::Tensor out, const at::Tensor &a, const at::Tensor &b,
               const std::optional<at::Tensor> &bias, c10::string_view bias_mode,
               const std::optional<c10::string_view> &act, bool gated, double alpha, double beta,
               const std::optional<at::Tensor> &c, std::optional<at::ScalarType> out_dtype,
               bool trans_a, bool trans_b) {
  mmt_matmul_desc d;
  out = describe(d, out, a, b, bias, bias_mode, act, gated, alpha, beta, c, out_dtype, trans_a,
                 trans_b);
  launch(d, a.get_device());
  return out;
}

at::Tensor matmul(const at::Tensor &a, const at::Tensor &b, const std::optional<at::Tensor> &bias,
                  c10::string_view bias_mode, std::optional<c10::string_view> act, bool gated,
                  double alpha, double beta, const std::optional<at::Tensor> &c,
                  std::optional<at::ScalarType> out_dtype, bool trans_a, bool trans_b) {
  return run(at::Tensor(), a, b, bias, bias_mode, act, gated, alpha, beta, c, out_dtype, trans_a,
             trans_b);
}

void matmul_out(const at::Tensor &out, const at::Tensor &a, const at::Tensor &b,
                const std::optional<at::Tensor> &bias, c10::string_view bias_mode,
                std::optional<c10::string_view> act, bool gated, double alpha, double beta,
                const std::optional<at::Tensor> &c, bool trans_a, bool trans_b) {
  run(out, a, b, bias, bias_mode, act, gated, alpha, beta, c, std::nullopt, trans_a, trans_b);
}

/* mmtune.grouped_matmul (mmtune/_grouped.py): a mixture of experts' GEMMs in one call, the
 * routing read on the device from `rows`. */
at::Tensor grouped_matmul(const at::Tensor &a, const at::Tensor &b, const at::Tensor &rows,
                          c10::string_view layout, c10::SymInt tokens,
                          const std::optional<at::Tensor> &bias,
                          std::optional<c10::string_view> act,
                          std::optional<at::ScalarType> out_dtype, bool trans_b, bool gated,
                          c10::string_view scale_mode, const std::optional<at::Tensor> &scale_row,
                          const std::optional<at::Tensor> &scale_col, bool fast_accum) {
  TORCH_CHECK(layout == "contiguous" || layout == "masked",
              "mmtune: layout must be 'contiguous' or 'masked', got '", std::string(layout), "'");
  const bool masked = layout == "masked";
  TORCH_CHECK(a.dim() == (masked ? 3 : 2), "mmtune: a must be ",
              masked ? "G x M x K (masked)" : "T x K (contiguous)", ", got ", a.sizes());
  TORCH_CHECK(b.dim() == 3, "mmtune: b must be G x K x N (or G x N x K with trans_b), got ",
              b.sizes());
  const matrix ma = matrix_of(a, "a"), mb = matrix_of(b, "b");
  const int dev = a.get_device();
  const int64_t g = b.size(0);
  TORCH_CHECK(b.get_device() == dev && rows.is_cuda() && rows.get_device() == dev,
              "mmtune: a, b and rows must be on one CUDA device");
  TORCH_CHECK(!masked || ma.batch == g, "mmtune: a has ", ma.batch, " blocks, b ", g,
              " experts");
  const int64_t want = masked ? g : g + 1;
  TORCH_CHECK(rows.scalar_type() == at::kInt && rows.dim() == 1 && rows.size(0) == want &&
                  (want <= 1 || rows.stride(0) == 1),
              "mmtune: rows must be a contiguous int32 vector of ", want, " (",
              masked ? "counts" : "offsets", "), got ", rows.scalar_type(), " of shape ",
              rows.sizes());
  TORCH_CHECK(ma.s1 == 1, "mmtune: a must be row-major (unit stride along K)");
  const int64_t m = ma.rows, k = ma.cols;
  const int64_t kb = trans_b ? mb.cols : mb.rows, nb = trans_b ? mb.rows : mb.cols;
  TORCH_CHECK(k == kb, "mmtune: inner dimensions differ: a's rows have ", k,
              " elements but b's matrices ", kb);
  TORCH_CHECK(!gated || nb % 2 == 0,
              "mmtune: gated needs an even number of columns of b's matrices (gate, up), got ",
              nb);
  const int64_t n = gated ? nb / 2 : nb;
  mmt_matmul_desc d{};
  input_types(a, b, d);
  const auto opts = a.options().dtype(out_dtype ? *out_dtype : a.scalar_type());
  at::Tensor out = masked ? at::empty({g, m, n}, opts) : at::empty({m, n}, opts);
  d.order = MMT_ROW_MAJOR;
  d.out_type = dtype_of(out.scalar_type(), "out");
  const auto [row_b, ldb] = storage("b", mb, true);
  d.trans_a = MMT_NO_TRANS;
  d.trans_b = (trans_b != !row_b) ? MMT_TRANS : MMT_NO_TRANS;
  d.m = m, d.n = n, d.k = k;
  d.alpha = 1.0f;
  d.a = a.data_ptr(), d.lda = m > 1 ? ma.s0 : std::max<int64_t>(1, k);
  d.b = b.data_ptr(), d.ldb = ldb;
  d.d = out.data_ptr(), d.ldd = std::max<int64_t>(1, n);
  d.batch = g;
  d.stride_a = masked ? ma.sb : 0;
  d.stride_b = mb.sb;
  d.stride_d = masked && g > 1 ? m * std::max<int64_t>(1, n) : 0;
  d.group_mode = masked ? MMT_GROUP_MASKED : MMT_GROUP_CONTIGUOUS;
  d.group_rows = static_cast<const int32_t *>(rows.data_ptr());
  d.group_tokens = tokens.expect_int();
  if (bias) {
    TORCH_CHECK(bias->is_cuda() && bias->get_device() == dev && bias->dim() == 2 &&
                    bias->size(0) == g && bias->size(1) == nb && bias->is_contiguous(),
                "mmtune: bias must be a contiguous G x N' tensor (", g, " x ", nb,
                ") on the operands' device, got ", bias->sizes());
    TORCH_CHECK(bias->scalar_type() == at::kFloat || bias->scalar_type() == out.scalar_type(),
                "mmtune: bias has dtype ", bias->scalar_type(), "; it must be float32 or D's ",
                out.scalar_type());
    d.bias_mode = MMT_BIAS_COL;
    d.bias = bias->data_ptr();
    d.bias_type = bias->scalar_type() == at::kFloat ? MMT_F32 : d.out_type;
  }
  TORCH_CHECK(scale_mode == "vectors" || scale_mode == "tensor",
              "mmtune: scale_mode must be 'vectors' or 'tensor' for a grouped call, got '",
              std::string(scale_mode), "'");
  if (scale_mode == "tensor") {
    TORCH_CHECK(scale_row && scale_col, "mmtune: scale_mode 'tensor' needs scale_row (a's one "
                "scale) and scale_col (each expert's)");
    d.scale_mode = MMT_SCALE_TENSOR;
    d.scale_row = scales_of(*scale_row, "scale_row", 1, dev);
    d.scale_col = scales_of(*scale_col, "scale_col", g, dev);
  } else {
    if (scale_row) d.scale_row = scales_of(*scale_row, "scale_row", masked ? g * m : m, dev);
    if (scale_col) d.scale_col = scales_of(*scale_col, "scale_col", g * nb, dev);
  }
  d.act = activation_of(act);
  d.gated = gated ? 1 : 0;
  d.fast_accum = fast_accum ? 1 : 0;
  launch(d, dev);
  return out;
}

/* mmtune::scaled_matmul (mmtune/torch.py's _py_scaled_matmul): FP8 a (M x K) times FP8 b
 * (N x K) with their dequantization scales, bias and act in one kernel, D of out_dtype. */
at::Tensor scaled_matmul(const at::Tensor &a, const at::Tensor &b, c10::string_view scale_mode,
                         const at::Tensor &scale_a, const at::Tensor &scale_b,
                         const std::optional<at::Tensor> &bias,
                         std::optional<c10::string_view> act, bool gated,
                         at::ScalarType out_dtype, bool fast_accum) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "mmtune: a and b must be M x K and N x K, got ",
              a.sizes(), " and ", b.sizes());
  mmt_matmul_desc d;
  at::Tensor out = describe(d, at::Tensor(), a, b, bias, "col", act, gated, 1.0, 0.0,
                            std::nullopt, out_dtype, false, true);
  const int dev = a.get_device();
  const int64_t m = a.size(0), nb = b.size(0), kb = (a.size(1) + 127) / 128;
  if (scale_mode == "vectors") {
    d.scale_mode = MMT_SCALE_VECTORS;
    d.scale_row = scales_of(scale_a, "scale_a", m, dev);
    d.scale_col = scales_of(scale_b, "scale_b", nb, dev);
  } else if (scale_mode == "tensor") {
    d.scale_mode = MMT_SCALE_TENSOR;
    d.scale_row = scales_of(scale_a, "scale_a", 1, dev);
    d.scale_col = scales_of(scale_b, "scale_b", 1, dev);
  } else {
    TORCH_CHECK(scale_mode == "block", "mmtune: scale_mode must be 'vectors', 'tensor' or "
                "'block', got '", std::string(scale_mode), "'");
    d.scale_mode = MMT_SCALE_BLOCK;
    d.scale_row = scales_of(scale_a, "scale_a", kb * m, dev);
    d.scale_col = scales_of(scale_b, "scale_b", (nb + 127) / 128 * kb, dev);
  }
  d.fast_accum = fast_accum ? 1 : 0;
  launch(d, dev);
  return out;
}

/* mmtune::quantize (mmtune.quantize): x cast to FP8 with the scales of its groups, new
 * tensors q (x's shape) and scale (the mode's shape: mmtune/_quantize.py's _SHAPES). */
std::tuple<at::Tensor, at::Tensor> quantize(const at::Tensor &x, at::ScalarType dtype,
                                            c10::string_view mode) {
  TORCH_CHECK(x.is_cuda(), "mmtune: x is a tensor on ", x.device(), ", not on a CUDA device");
  TORCH_CHECK(x.dim() == 2, "mmtune: x must be 2-D, got ", x.sizes());
  const int64_t rows = x.size(0), cols = x.size(1);
  TORCH_CHECK(cols <= 1 || x.stride(1) == 1, "mmtune: x must be row-major (unit column stride), "
              "got strides ", x.strides());
  TORCH_CHECK(dtype == at::kFloat8_e4m3fn || dtype == at::kFloat8_e5m2, "mmtune: dtype must be "
              "float8_e4m3fn or float8_e5m2, got ", dtype);
  const int64_t rb = (rows + 127) / 128, cb = (cols + 127) / 128;
  mmt_quantize_desc d{};
  std::vector<int64_t> shape;
  if (mode == "tensor") {
    d.mode = MMT_QUANT_TENSOR;
  } else if (mode == "row") {
    d.mode = MMT_QUANT_ROW, shape = {rows};
  } else if (mode == "1x128") {
    d.mode = MMT_QUANT_1X128, shape = {cb, rows};
  } else {
    TORCH_CHECK(mode == "128x128", "mmtune: mode must be 'tensor', 'row', '1x128' or "
                "'128x128', got '", std::string(mode), "'");
    d.mode = MMT_QUANT_128X128, shape = {rb, cb};
  }
  at::Tensor q = at::empty({rows, cols}, x.options().dtype(dtype));
  at::Tensor scale = at::empty(shape, x.options().dtype(at::kFloat));
  d.rows = rows, d.cols = cols;
  d.in_type = dtype_of(x.scalar_type(), "x");
  d.out_type = dtype_of(dtype, "dtype");
  d.x = x.data_ptr(), d.ldx = rows > 1 ? x.stride(0) : std::max<int64_t>(1, cols);
  d.q = q.data_ptr(), d.ldq = std::max<int64_t>(1, cols);
  d.scale = static_cast<float *>(scale.data_ptr());
  const int dev = x.get_device();
  mmt_context *ctx = context_of(dev);
  quantize_fn fn = g_quantize.load();
  TORCH_CHECK(fn, "mmtune: the native operators are not bound to mmt_quantize (import "
              "mmtune.torch)");
  void *stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev)).stream();
  const mmt_status rc = fn(ctx, &d, stream);
  TORCH_CHECK(rc == MMT_OK, "mmtune: mmt_quantize: ", g_errmsg.load()(ctx));
  return {q, scale};
}

/* act(z) and act'(z), elementwise (z floating), as mmtune/torch.py's _act_and_grad. */
std::pair<at::Tensor, at::Tensor> act_and_grad(mmt_activation act, const at::Tensor &z) {
  switch (act) {
  case MMT_ACT_NONE: return {z, at::ones_like(z)};
  case MMT_ACT_RELU: return {z.clamp_min(0), (z > 0).to(z.scalar_type())};
  case MMT_ACT_GELU_ERF: {
    const at::Tensor cdf = 0.5 * (1 + at::erf(z * 0.7071067811865476));
    return {z * cdf, cdf + z * at::exp(-0.5 * z * z) * 0.3989422804014327};
  }
  case MMT_ACT_GELU_TANH: {
    const double k = 0.7978845608028654;
    const at::Tensor t = at::tanh(k * (z + 0.044715 * z.pow(3)));
    return {0.5 * z * (1 + t), 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * k * (1 + 0.134145 * z * z)};
  }
  case MMT_ACT_SILU: {
    const at::Tensor sg = at::sigmoid(z);
    return {z * sg, sg * (1 + z * (1 - sg))};
  }
  }
  TORCH_CHECK(false, "mmtune: an activation without a derivative here");
}

/* mmtune::_matmul_backward: the gradients of matmul's a, b, bias and c (those output_mask
 * asks for; the others undefined, as are bias's and c's where they are), as PyTorch's eager
 * autograd of the same expression computes them: the product recomputed (in the inputs' dtype,
 * as eager saves a Linear's output) where the activation or the gate needs it, every GEMM
 * torch's.  mmtune/torch.py's _backward is the same formula for its Python operators. */
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
matmul_backward(const at::Tensor &grad, const at::Tensor &a, const at::Tensor &b,
                const std::optional<at::Tensor> &bias, const std::optional<at::Tensor> &c,
                c10::string_view bias_mode, std::optional<c10::string_view> act, bool gated,
                double alpha, double beta, bool trans_a, bool trans_b,
                std::array<bool, 4> output_mask) {
  const mmt_activation f = activation_of(act);
  const bool col = bias_mode == "col";
  const at::ScalarType wide = at::promote_types(grad.scalar_type(), at::kFloat);
  const at::Tensor g = grad.to(wide);
  const at::Tensor op_a = trans_a ? a.mT() : a, op_b = trans_b ? b.mT() : b;
  const bool has_bias = bias && bias->defined(), has_c = c && c->defined() && beta != 0;
  at::Tensor gx = g;
  if (gated || f != MMT_ACT_NONE) {
    at::Tensor x = alpha * at::matmul(op_a, op_b).to(wide);
    if (has_bias) x = x + (col ? bias->to(wide) : bias->to(wide).unsqueeze(-1));
    if (gated) { /* D = act(gate) * up + beta c, gate and up interleaved by column */
      const at::Tensor gate = x.slice(-1, 0, c10::nullopt, 2), up = x.slice(-1, 1, c10::nullopt, 2);
      const auto [y, dy] = act_and_grad(f, gate);
      gx = at::stack({g * up * dy, g * y}, -1).flatten(-2);
    } else {
      if (has_c) x = x + beta * c->to(wide);
      gx = g * act_and_grad(f, x).second;
    }
  }
  at::Tensor ga, gb, gbias, gc;
  const at::Tensor gp = (alpha * gx).to(a.scalar_type());
  if (output_mask[0]) {
    ga = at::matmul(gp, op_b.mT());
    ga = (trans_a ? ga.mT() : ga).sum_to_size(a.sizes());
  }
  if (output_mask[1]) {
    gb = at::matmul(op_a.mT(), gp);
    gb = (trans_b ? gb.mT() : gb).sum_to_size(b.sizes());
  }
  if (output_mask[2] && has_bias)
    gbias = (col ? gx : gx.mT()).sum_to_size(bias->sizes()).to(bias->scalar_type());
  if (output_mask[3] && has_c)
    gc = (beta * (gated ? g : gx)).sum_to_size(c->sizes()).to(c->scalar_type());
  return {ga, gb, gbias, gc};
}

/* matmul's autograd node: its forward the kernels below autograd, its backward
 * matmul_backward.  The tensors are its inputs; the rest rides along in `rest` (the node
 * counts its inputs' gradients in that order, a missing bias or c taking none). */
struct matmul_rest {
  std::string bias_mode;
  std::optional<std::string> act;
  bool gated;
  double alpha, beta;
  std::optional<at::ScalarType> out_dtype;
  bool trans_a, trans_b;
};

struct MatmulNode : public torch::autograd::Function<MatmulNode> {
  static at::Tensor forward(torch::autograd::AutogradContext *ctx, const at::Tensor &a,
                            const at::Tensor &b, const std::optional<at::Tensor> &bias,
                            const std::optional<at::Tensor> &c, const matmul_rest &r) {
    static const auto below = c10::Dispatcher::singleton()
                                  .findSchemaOrThrow("mmtune::matmul", "")
                                  .typed<decltype(matmul)>();
    at::AutoDispatchBelowADInplaceOrView guard;
    std::optional<c10::string_view> act;
    if (r.act) act = *r.act;
    at::Tensor out = below.call(a, b, bias, r.bias_mode, act, r.gated, r.alpha, r.beta, c,
                                r.out_dtype, r.trans_a, r.trans_b);
    ctx->save_for_backward(
        {a, b, bias ? *bias : at::Tensor(), c && r.beta != 0 ? *c : at::Tensor()});
    ctx->saved_data["bias_mode"] = r.bias_mode;
    ctx->saved_data["act"] = r.act ? *r.act : std::string("none");
    ctx->saved_data["gated"] = r.gated;
    ctx->saved_data["alpha"] = r.alpha;
    ctx->saved_data["beta"] = r.beta;
    ctx->saved_data["trans_a"] = r.trans_a;
    ctx->saved_data["trans_b"] = r.trans_b;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1], &bias = saved[2], &c = saved[3];
    /* the node's inputs: a, b, then bias and c where they were given (c saved where
     * beta != 0: else its gradient is none) */
    const size_t i_bias = 2, i_c = 2 + bias.defined();
    const std::string bias_mode = ctx->saved_data["bias_mode"].toStringRef();
    const std::string act = ctx->saved_data["act"].toStringRef();
    auto [ga, gb, gbias, gc] = matmul_backward(
        grads[0], a, b, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
        c.defined() ? std::optional<at::Tensor>(c) : std::nullopt, bias_mode, act,
        ctx->saved_data["gated"].toBool(), ctx->saved_data["alpha"].toDouble(),
        ctx->saved_data["beta"].toDouble(), ctx->saved_data["trans_a"].toBool(),
        ctx->saved_data["trans_b"].toBool(),
        {ctx->needs_input_grad(0), ctx->needs_input_grad(1),
         bias.defined() && ctx->needs_input_grad(i_bias),
         c.defined() && ctx->needs_input_grad(i_c)});
    return {ga, gb, gbias, gc, at::Tensor()};
  }
};

/* mmtune::matmul at the Autograd key.  No gradient asked for (grad mode off, or no tensor
 * argument requiring one: a no_grad region, a frozen model): straight below autograd, so that
 * the call costs what matmul_out's does.  Else MatmulNode: the same kernels and a C++
 * backward node (its Python autograd kernel had cost about 74 us a call on an H100). */
at::Tensor matmul_autograd(const at::Tensor &a, const at::Tensor &b,
                           const std::optional<at::Tensor> &bias, c10::string_view bias_mode,
                           std::optional<c10::string_view> act, bool gated, double alpha,
                           double beta, const std::optional<at::Tensor> &c,
                           std::optional<at::ScalarType> out_dtype, bool trans_a, bool trans_b) {
  using schema = decltype(matmul);
  const bool grad =
      at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad() ||
                                     (bias && bias->requires_grad()) || (c && c->requires_grad()));
  if (!grad) {
    static const auto below =
        c10::Dispatcher::singleton().findSchemaOrThrow("mmtune::matmul", "").typed<schema>();
    at::AutoDispatchBelowADInplaceOrView guard;
    return below.call(a, b, bias, bias_mode, act, gated, alpha, beta, c, out_dtype, trans_a,
                      trans_b);
  }
  matmul_rest r{
      std::string(bias_mode), std::nullopt, gated, alpha, beta, out_dtype, trans_a, trans_b};
  if (act) r.act = std::string(*act);
  return MatmulNode::apply(a, b, bias, c, r);
}

}  // namespace

/* mmtune/torch.py, once loaded: the library's entry points and the default-context callback. */
extern "C" __attribute__((visibility("default"))) void mmt_torch_ops_bind(void *matmul,
                                                                          void *errmsg,
                                                                          void *context,
                                                                          void *quantize) {
  g_matmul.store(reinterpret_cast<matmul_fn>(matmul));
  g_quantize.store(reinterpret_cast<quantize_fn>(quantize));
  g_errmsg.store(reinterpret_cast<errmsg_fn>(errmsg));
  g_context.store(reinterpret_cast<context_fn>(context));
}

TORCH_LIBRARY(mmtune, m) {
  m.def("matmul(Tensor a, Tensor b, Tensor? bias, str bias_mode, str? act, bool gated, "
        "float alpha, float beta, Tensor? c, ScalarType? out_dtype, bool trans_a, "
        "bool trans_b) -> Tensor");
  m.def("matmul_out(Tensor(a0!) out, Tensor a, Tensor b, Tensor? bias, str bias_mode, str? act, "
        "bool gated, float alpha, float beta, Tensor? c, bool trans_a, bool trans_b) -> ()");
  m.def("grouped_matmul(Tensor a, Tensor b, Tensor rows, str layout, SymInt tokens, Tensor? bias, "
        "str? act, ScalarType? out_dtype, bool trans_b, bool gated=False, "
        "str scale_mode=\"vectors\", Tensor? scale_row=None, Tensor? scale_col=None, "
        "bool fast_accum=False) -> Tensor");
  m.def("scaled_matmul(Tensor a, Tensor b, str scale_mode, Tensor scale_a, Tensor scale_b, "
        "Tensor? bias, str? act, bool gated, ScalarType out_dtype, bool fast_accum) -> Tensor");
  m.def("quantize(Tensor x, ScalarType dtype, str mode) -> (Tensor, Tensor)");
  /* matmul's backward (its autograd node's, and a test's): PyTorch's own ops, any device */
  m.def("_matmul_backward(Tensor grad, Tensor a, Tensor b, Tensor? bias, Tensor? c, "
        "str bias_mode, str? act, bool gated, float alpha, float beta, bool trans_a, "
        "bool trans_b, bool[4] output_mask) -> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mmtune, CompositeImplicitAutograd, m) {
  m.impl("_matmul_backward", &matmul_backward);
}

TORCH_LIBRARY_IMPL(mmtune, CUDA, m) {
  m.impl("matmul", &matmul);
  m.impl("matmul_out", &matmul_out);
  m.impl("grouped_matmul", &grouped_matmul);
  m.impl("scaled_matmul", &scaled_matmul);
  m.impl("quantize", &quantize);
}

TORCH_LIBRARY_IMPL(mmtune, Autograd, m) { m.impl("matmul", &matmul_autograd); }

/* CPU tensors: the same kernels, whose first check says they are not on a CUDA device (rather
 * than the dispatcher's list of backends). */
TORCH_LIBRARY_IMPL(mmtune, CPU, m) {
  m.impl("matmul", &matmul);
  m.impl("matmul_out", &matmul_out);
  m.impl("grouped_matmul", &grouped_matmul);
  m.impl("scaled_matmul", &scaled_matmul);
  m.impl("quantize", &quantize);
}
