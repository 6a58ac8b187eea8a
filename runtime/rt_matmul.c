/* rt_matmul.c -- see rt_matmul.h. */
#include "rt_matmul.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

_Static_assert(MMT_ACT_NONE == (int)GEN_ACT_NONE && MMT_ACT_RELU == (int)GEN_ACT_RELU &&
                   MMT_ACT_GELU_TANH == (int)GEN_ACT_GELU_TANH &&
                   MMT_ACT_GELU_ERF == (int)GEN_ACT_GELU_ERF && MMT_ACT_SILU == (int)GEN_ACT_SILU,
               "mmt_activation and gen_act agree");

_Static_assert(sizeof(((mmt_choice *)0)->epilogue) == GEN_OP_TEXT_MAX,
               "mmt_choice.epilogue holds an op's text");

/* Whether t is a type D (and C) may have (FP8: after FP8 inputs only, check_fp8_out). */
static bool out_type(mmt_dtype t) {
  return t == MMT_F32 || t == MMT_F16 || t == MMT_BF16 || rt_dtype_fp8(t);
}

/* The inputs' own output type: f32 for tf32. */
static mmt_dtype natural_out(mmt_dtype in) { return in == MMT_TF32 ? MMT_F32 : in; }

static int64_t at_least_1(int64_t x) { return x < 1 ? 1 : x; }

/* Columns of op(B): the product's. */
static int64_t product_n(const mmt_matmul_desc *d) { return d->gated ? 2 * d->n : d->n; }

static mmt_status check_enums(const mmt_matmul_desc *d, ut_err *err) {
  if (d->order != MMT_ROW_MAJOR && d->order != MMT_COL_MAJOR)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "order must be MMT_ROW_MAJOR or MMT_COL_MAJOR, got %d",
                   (int)d->order);
  if (d->trans_a != MMT_NO_TRANS && d->trans_a != MMT_TRANS)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "trans_a must be MMT_NO_TRANS or MMT_TRANS, got %d",
                   (int)d->trans_a);
  if (d->trans_b != MMT_NO_TRANS && d->trans_b != MMT_TRANS)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "trans_b must be MMT_NO_TRANS or MMT_TRANS, got %d",
                   (int)d->trans_b);
  if (!rt_dtype(d->in_type))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "in_type %d is not an mmt_dtype", (int)d->in_type);
  if (!out_type(d->out_type))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "out_type must be MMT_F32, MMT_F16, MMT_BF16, MMT_E4M3 or MMT_E5M2, got %d",
                   (int)d->out_type);
  if (d->bias_mode != MMT_BIAS_NONE && d->bias_mode != MMT_BIAS_COL && d->bias_mode != MMT_BIAS_ROW)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "bias_mode must be MMT_BIAS_NONE, MMT_BIAS_COL or MMT_BIAS_ROW, got %d",
                   (int)d->bias_mode);
  if (d->act < MMT_ACT_NONE || d->act > MMT_ACT_SILU)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "act %d is not an mmt_activation", (int)d->act);
  if (d->scale_mode < MMT_SCALE_VECTORS || d->scale_mode > MMT_SCALE_BLOCK)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "scale_mode %d is not an mmt_scale_mode",
                   (int)d->scale_mode);
  if (d->group_mode < MMT_GROUP_NONE || d->group_mode > MMT_GROUP_MASKED)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "group_mode %d is not an mmt_group_mode",
                   (int)d->group_mode);
  return MMT_OK;
}

/* Grouped calls: their fields together, the layout they need, the strides their rows take
 * over (mmtune.h, "Grouped"). */
static mmt_status check_group(const mmt_matmul_desc *d, ut_err *err) {
  if (d->group_mode == MMT_GROUP_NONE) {
    if (d->group_rows || d->group_tokens)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s is set but group_mode is MMT_GROUP_NONE",
                     d->group_rows ? "group_rows" : "group_tokens");
    return MMT_OK;
  }
  const char *mode =
      d->group_mode == MMT_GROUP_CONTIGUOUS ? "MMT_GROUP_CONTIGUOUS" : "MMT_GROUP_MASKED";
  if (d->group_tokens < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "group_tokens must be >= 0, got %lld",
                   (long long)d->group_tokens);
  if (d->order != MMT_ROW_MAJOR || d->trans_a != MMT_NO_TRANS)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "%s needs row-major order and trans_a MMT_NO_TRANS (the experts' rows are "
                   "A's rows)",
                   mode);
  if (d->scale_mode == MMT_SCALE_BLOCK)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "%s: block scales are not grouped (per-tensor and vector scales are)", mode);
  if (rt_dtype_fp8(d->out_type))
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "%s: an FP8 out_type is not grouped (f32, f16 and bf16 are)", mode);
  if (d->batch > 65535)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "%s: batch (the experts) %lld is above 65535", mode,
                   (long long)d->batch);
  if (d->group_mode == MMT_GROUP_CONTIGUOUS) {
    static const char *const names[3] = {"stride_a", "stride_c", "stride_d"};
    const int64_t v[3] = {d->stride_a, d->beta != 0.0f ? d->stride_c : 0, d->stride_d};
    for (int i = 0; i < 3; i++)
      if (v[i] != 0)
        return ut_fail(err, MMT_ERR_INVALID_ARG,
                       "%s must be 0 with MMT_GROUP_CONTIGUOUS (group_rows place the experts' "
                       "rows), got %lld",
                       names[i], (long long)v[i]);
  }
  return MMT_OK;
}

/* FP8: its layout (both operands K-major), block scales' limits, fast_accum's inputs; and
 * the scales a mode needs. */
static mmt_status check_scales(const mmt_matmul_desc *d, ut_err *err) {
  if (d->b_type != MMT_F32 && d->b_type != d->in_type &&
      !(rt_dtype_fp8(d->in_type) && rt_dtype_fp8(d->b_type)))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "b_type %d: B may differ from A (in_type %s) only as the other FP8 type",
                   (int)d->b_type, rt_dtype(d->in_type)->name);
  if (d->fast_accum && !rt_dtype_fp8(d->in_type))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "fast_accum is for FP8 inputs (in_type %s)",
                   rt_dtype(d->in_type)->name);
  if (d->scale_mode == MMT_SCALE_BLOCK && !rt_dtype_fp8(d->in_type))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "scale_mode MMT_SCALE_BLOCK is for FP8 inputs "
                   "(in_type %s)",
                   rt_dtype(d->in_type)->name);
  if (d->scale_mode != MMT_SCALE_VECTORS && (!d->scale_row || !d->scale_col))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "scale_mode %s needs both scale_row (A's) and "
                   "scale_col (B's)",
                   d->scale_mode == MMT_SCALE_TENSOR ? "MMT_SCALE_TENSOR" : "MMT_SCALE_BLOCK");
  if (!rt_dtype_fp8(d->in_type)) return MMT_OK;
  const bool row = d->order == MMT_ROW_MAJOR;
  if (d->trans_a != (row ? MMT_NO_TRANS : MMT_TRANS) ||
      d->trans_b != (row ? MMT_TRANS : MMT_NO_TRANS))
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "FP8 needs both operands K-major: row-major trans_a MMT_NO_TRANS and trans_b "
                   "MMT_TRANS (column-major: MMT_TRANS and MMT_NO_TRANS)");
  if (d->scale_mode == MMT_SCALE_BLOCK && (!row || d->batch > 1))
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "MMT_SCALE_BLOCK: row-major order and batch 1 only (got %s, batch %lld)",
                   row ? "row-major" : "column-major", (long long)d->batch);
  return MMT_OK;
}

static mmt_status check_sizes(const mmt_matmul_desc *d, ut_err *err) {
  static const char *const names[7] = {"m",        "n",        "k",       "stride_a",
                                       "stride_b", "stride_c", "stride_d"};
  const int64_t v[7] = {d->m, d->n, d->k, d->stride_a, d->stride_b, d->stride_c, d->stride_d};
  for (int i = 0; i < 7; i++)
    if (v[i] < 0)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s must be >= 0, got %lld", names[i],
                     (long long)v[i]);
  if (d->batch < 1)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "batch must be >= 1, got %lld", (long long)d->batch);
  if (d->batch > 1 && d->stride_d == 0 && d->m > 0 && d->n > 0 &&
      d->group_mode != MMT_GROUP_CONTIGUOUS)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "stride_d is 0 with batch %lld: every problem would write the same D",
                   (long long)d->batch);
  return MMT_OK;
}

/* The smallest leading dimensions of A, B, C (and D) as mmt_gemm's, B with the product's
 * columns, and the width each is of. */
static void min_ld(const mmt_matmul_desc *d, int64_t ld[3], const char *what[3]) {
  const mmt_problem p = {d->order, d->trans_a, d->trans_b, d->m, product_n(d),
                         d->k,     0,          0,          0,    d->in_type};
  rt_gemm_min_ld(&p, ld, what);
  /* C and D have N columns even when gated (the product has 2N) */
  ld[2] = d->order == MMT_ROW_MAJOR ? d->n : d->m;
}

static mmt_status check_ld(const char *name, int64_t ld, const char *what, int64_t width,
                           ut_err *err) {
  if (ld >= at_least_1(width)) return MMT_OK;
  return ut_fail(err, MMT_ERR_INVALID_ARG, "%s must be >= max(1, %s) = %lld, got %lld", name, what,
                 (long long)at_least_1(width), (long long)ld);
}

static mmt_status check_lds(const mmt_matmul_desc *d, ut_err *err) {
  int64_t min[3];
  const char *what[3];
  min_ld(d, min, what);
  const char *bwhat = d->gated && !strcmp(what[1], "N") ? "2N" : what[1];
  mmt_status rc = check_ld("lda", d->lda, what[0], min[0], err);
  if (!rc) rc = check_ld("ldb", d->ldb, bwhat, min[1], err);
  /* C's leading dimension matters only where C is read */
  if (!rc && d->beta != 0.0f) rc = check_ld("ldc", d->ldc, what[2], min[2], err);
  if (!rc) rc = check_ld("ldd", d->ldd, what[2], min[2], err);
  return rc;
}

/* An FP8 D: after FP8 inputs, no C (its scale would be one more), an f32 bias; scale_d and
 * amax only with it. */
static mmt_status check_fp8_out(const mmt_matmul_desc *d, ut_err *err) {
  if (!rt_dtype_fp8(d->out_type)) {
    if (d->scale_d || d->amax)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s is for an FP8 D (out_type %s)",
                     d->scale_d ? "scale_d" : "amax", rt_dtype(d->out_type)->name);
    return MMT_OK;
  }
  if (!rt_dtype_fp8(d->in_type))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "out_type %s needs FP8 inputs (in_type %s)",
                   rt_dtype(d->out_type)->name, rt_dtype(d->in_type)->name);
  if (d->beta != 0.0f)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "an FP8 D (out_type %s) is written without C: beta must be 0, got %g",
                   rt_dtype(d->out_type)->name, (double)d->beta);
  if (d->bias_mode != MMT_BIAS_NONE && d->bias_type != MMT_F32)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "an FP8 D's bias is MMT_F32 (bias_type %d)",
                   (int)d->bias_type);
  return MMT_OK;
}

static mmt_status check_epilogue(const mmt_matmul_desc *d, ut_err *err) {
  if (d->bias_mode == MMT_BIAS_NONE && d->bias)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "bias is set but bias_mode is MMT_BIAS_NONE");
  if (d->bias_mode != MMT_BIAS_NONE && !d->bias)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "bias_mode is %s but bias is NULL",
                   d->bias_mode == MMT_BIAS_COL ? "MMT_BIAS_COL" : "MMT_BIAS_ROW");
  if (d->bias_mode != MMT_BIAS_NONE && d->bias_type != MMT_F32 && d->bias_type != d->out_type)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "bias_type must be MMT_F32 or out_type (%s), got %d",
                   rt_dtype(d->out_type)->name, (int)d->bias_type);
  if (d->gated && d->order != MMT_ROW_MAJOR)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "gated needs MMT_ROW_MAJOR order (gate and up interleave along D's rows)");
  return MMT_OK;
}

static mmt_status check_int_sizes(const mmt_matmul_desc *d, ut_err *err) {
  static const char *const names[6] = {"m", "n (the product's columns)", "k", "lda", "ldb", "ldd"};
  const int64_t v[6] = {d->m, product_n(d), d->k, d->lda, d->ldb, d->ldd};
  for (int i = 0; i < 6; i++)
    if (v[i] > INT32_MAX)
      return ut_fail(err, MMT_ERR_UNSUPPORTED, "%s = %lld exceeds %d: kernels take int sizes",
                     names[i], (long long)v[i], INT32_MAX);
  if (d->beta != 0.0f && d->ldc > INT32_MAX)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "ldc = %lld exceeds %d: kernels take int sizes",
                   (long long)d->ldc, INT32_MAX);
  return MMT_OK;
}

/* ---- memory ---- */

/* A matrix as memory: `runs` rows of `width` contiguous elements, `ld` apart, repeated `batch`
 * times `stride` apart, of `elem` bytes. */
typedef struct {
  const char *name;
  uintptr_t base;
  int64_t width, runs, ld, stride, batch;
  int elem;
} span;

/* A matrix of op(X) rows x cols in the call's order (transposed: stored the other way). */
static span matrix(const char *name, const mmt_matmul_desc *d, const void *p, bool trans,
                   int64_t rows, int64_t cols, int64_t ld, int64_t stride, mmt_dtype t) {
  /* row-major stores rows of cols, column-major columns of rows; a transpose flips it */
  bool rows_contiguous = (d->order == MMT_ROW_MAJOR) != trans;
  return (span){
      name,   (uintptr_t)p, rows_contiguous ? cols : rows, rows_contiguous ? rows : cols, ld,
      stride, d->batch,     rt_dtype(t)->elem_bytes};
}

/* [lo, hi): the bytes s covers, its elements all being >= 0 apart. */
static void bytes_of(const span *s, uintptr_t *lo, uintptr_t *hi) {
  int64_t last = (s->batch - 1) * s->stride + (s->runs - 1) * s->ld + s->width;
  *lo = s->base;
  *hi = s->base + (uintptr_t)last * (uintptr_t)s->elem;
}

static bool overlap(const span *a, const span *b) {
  uintptr_t alo, ahi, blo, bhi;
  bytes_of(a, &alo, &ahi);
  bytes_of(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

/* Whether no two elements of s (over its batch) share an address: its steps, taken from the
 * smallest (1, the width's) up, each at least the extent of those below it.  Sufficient; it
 * accepts problems after one another (stride >= a matrix) and side by side along the rows
 * (width <= stride, batch * stride <= ld, as heads packed in one row are). */
static bool one_to_one(const span *s) {
  int64_t step[2] = {s->ld, s->stride}, count[2] = {s->runs, s->batch};
  if (step[0] > step[1] || (step[0] == step[1] && count[0] == 1)) {
    int64_t t = step[0];
    step[0] = step[1], step[1] = t;
    t = count[0];
    count[0] = count[1], count[1] = t;
  }
  int64_t extent = s->width;
  for (int i = 0; i < 2; i++) {
    if (count[i] == 1) continue;
    if (step[i] < extent) return false;
    extent += (count[i] - 1) * step[i];
  }
  return true;
}

static mmt_status check_pointer(const char *name, const void *p, int elem, ut_err *err) {
  if (!p) return ut_fail(err, MMT_ERR_INVALID_ARG, "%s is NULL but the call uses it", name);
  if ((uintptr_t)p % (uintptr_t)elem)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s (%p) is not %d-byte aligned", name, p, elem);
  return MMT_OK;
}

/* FP8's kernels read A and B with TMA: 16-byte aligned bases, row pitches and batch strides
 * (a byte an element), or there is no kernel for the call. */
static mmt_status check_fp8_alignment(const mmt_matmul_desc *d, ut_err *err) {
  const struct {
    const char *name;
    uint64_t v;
  } need[] = {{"a", (uint64_t)(uintptr_t)d->a},
              {"b", (uint64_t)(uintptr_t)d->b},
              {"lda", (uint64_t)d->lda},
              {"ldb", (uint64_t)d->ldb},
              {"stride_a", d->batch > 1 ? (uint64_t)d->stride_a : 0},
              {"stride_b", d->batch > 1 ? (uint64_t)d->stride_b : 0}};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (need[i].v % 16)
      return ut_fail(err, MMT_ERR_UNSUPPORTED,
                     "FP8: %s = 0x%llx is not a multiple of 16 (bytes, elements): the FP8 "
                     "kernels load A and B with TMA",
                     need[i].name, (unsigned long long)need[i].v);
  return MMT_OK;
}

/* The rows a per-row vector covers: A's rows as stored (a masked call's G blocks of M). */
static int64_t vector_rows(const mmt_matmul_desc *d) {
  return d->group_mode == MMT_GROUP_MASKED ? d->batch * d->m : d->m;
}

/* How many copies of a per-column vector (bias by column, scale_col) there are: a grouped
 * call's experts have one each. */
static int64_t column_copies(const mmt_matmul_desc *d) {
  return d->group_mode != MMT_GROUP_NONE ? d->batch : 1;
}

/* The floats of scale_row (side 0) or scale_col (1) as scale_mode says (mmtune.h). */
static int64_t scale_len(const mmt_matmul_desc *d, int side) {
  const int64_t kb = (d->k + 127) / 128, np = product_n(d);
  switch (d->scale_mode) {
  case MMT_SCALE_TENSOR: return side ? column_copies(d) : 1;
  case MMT_SCALE_BLOCK: return side ? (np + 127) / 128 * kb : kb * d->m;
  default: return side ? np * column_copies(d) : vector_rows(d);
  }
}

static mmt_status check_memory(const mmt_matmul_desc *d, ut_err *err) {
  const int in = rt_dtype(d->in_type)->elem_bytes;
  const bool reads_ab = d->k > 0 && d->alpha != 0.0f, reads_c = d->beta != 0.0f;
  const int64_t np = product_n(d);
  span A = matrix("A", d, d->a, d->trans_a, d->m, d->k, d->lda, d->stride_a, d->in_type);
  const span B = matrix("B", d, d->b, d->trans_b, d->k, np, d->ldb, d->stride_b, d->in_type);
  span C = matrix("C", d, d->c, false, d->m, d->n, d->ldc, d->stride_c, d->out_type);
  span D = matrix("D", d, d->d, false, d->m, d->n, d->ldd, d->stride_d, d->out_type);
  if (d->group_mode == MMT_GROUP_CONTIGUOUS) /* one A, C and D: the experts' rows */
    A.batch = C.batch = D.batch = 1;
  mmt_status rc = check_pointer("d", d->d, D.elem, err);
  if (!rc && d->group_mode != MMT_GROUP_NONE)
    rc = check_pointer("group_rows", d->group_rows, 4, err);
  if (!rc && reads_ab) rc = check_pointer("a", d->a, in, err);
  if (!rc && reads_ab) rc = check_pointer("b", d->b, in, err);
  if (!rc && reads_c) rc = check_pointer("c", d->c, C.elem, err);
  if (!rc && d->bias) rc = check_pointer("bias", d->bias, rt_dtype(d->bias_type)->elem_bytes, err);
  if (!rc && d->scale_row) rc = check_pointer("scale_row", d->scale_row, 4, err);
  if (!rc && d->scale_col) rc = check_pointer("scale_col", d->scale_col, 4, err);
  if (!rc && d->scale_d) rc = check_pointer("scale_d", d->scale_d, 4, err);
  if (!rc && d->amax) rc = check_pointer("amax", d->amax, 4, err);
  if (rc) return rc;
  if (rt_dtype_fp8(d->in_type) && reads_ab && (rc = check_fp8_alignment(d, err))) return rc;
  if (!one_to_one(&D))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "stride_d %lld with ldd %lld makes the batch's problems overlap in D (each is "
                   "%lld x %lld)",
                   (long long)d->stride_d, (long long)d->ldd, (long long)d->m, (long long)d->n);
  if (reads_ab && overlap(&D, &A)) return ut_fail(err, MMT_ERR_INVALID_ARG, "d overlaps a");
  if (reads_ab && overlap(&D, &B)) return ut_fail(err, MMT_ERR_INVALID_ARG, "d overlaps b");
  const bool in_place = d->c == d->d && d->ldc == d->ldd && d->stride_c == d->stride_d;
  if (reads_c && !in_place && overlap(&D, &C))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "d overlaps c without being it (in place needs c == d, ldc == ldd and "
                   "stride_c == stride_d)");
  const struct {
    const char *name;
    const void *p;
    int64_t len;
    int elem;
  } vecs[6] = {
      {"bias", d->bias, d->bias_mode == MMT_BIAS_ROW ? vector_rows(d) : np * column_copies(d),
       d->bias ? rt_dtype(d->bias_type)->elem_bytes : 4},
      {"scale_row", d->scale_row, scale_len(d, 0), 4},
      {"scale_col", d->scale_col, scale_len(d, 1), 4},
      {"scale_d", d->scale_d, 1, 4},
      {"group_rows", d->group_rows, d->group_mode == MMT_GROUP_CONTIGUOUS ? d->batch + 1 : d->batch,
       4},
      {"amax", d->amax, 1, 4},
  };
  for (int i = 0; i < 6; i++) {
    if (!vecs[i].p) continue;
    const span v = {vecs[i].name, (uintptr_t)vecs[i].p, vecs[i].len, 1, 0, 0, 1, vecs[i].elem};
    if (overlap(&D, &v)) return ut_fail(err, MMT_ERR_INVALID_ARG, "d overlaps %s", vecs[i].name);
  }
  /* amax is written too: apart from everything the kernel reads */
  const span amax = {"amax", (uintptr_t)d->amax, 1, 1, 0, 0, 1, 4};
  for (int i = 0; d->amax && i < 5; i++) {
    if (!vecs[i].p) continue;
    const span v = {vecs[i].name, (uintptr_t)vecs[i].p, vecs[i].len, 1, 0, 0, 1, vecs[i].elem};
    if (overlap(&amax, &v))
      return ut_fail(err, MMT_ERR_INVALID_ARG, "amax overlaps %s", vecs[i].name);
  }
  if (d->amax && reads_ab && (overlap(&amax, &A) || overlap(&amax, &B)))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "amax overlaps %s", overlap(&amax, &A) ? "a" : "b");
  return MMT_OK;
}

mmt_status rt_matmul_check_fields(const mmt_matmul_desc *d, ut_err *err) {
  if (!d) return ut_fail(err, MMT_ERR_INVALID_ARG, "desc is NULL");
  mmt_status rc = check_enums(d, err);
  if (!rc) rc = check_sizes(d, err);
  if (!rc) rc = check_lds(d, err);
  if (!rc) rc = check_epilogue(d, err);
  if (!rc) rc = check_fp8_out(d, err);
  if (!rc) rc = check_scales(d, err);
  if (!rc) rc = check_group(d, err);
  if (!rc) rc = check_int_sizes(d, err);
  return rc;
}

mmt_status rt_matmul_check(const mmt_matmul_desc *d, ut_err *err) {
  mmt_status rc = rt_matmul_check_fields(d, err);
  if (!rc && d->m > 0 && d->n > 0) rc = check_memory(d, err);
  return rc;
}

/* ---- mapping ---- */

static bool is_plain(const mmt_matmul_desc *d) {
  return !rt_dtype_fp8(d->in_type) && d->group_mode == MMT_GROUP_NONE &&
         d->out_type == natural_out(d->in_type) && d->batch == 1 &&
         (d->beta == 0.0f || (d->c == d->d && d->ldc == d->ldd)) && d->bias_mode == MMT_BIAS_NONE &&
         !d->scale_row && !d->scale_col && d->act == MMT_ACT_NONE && !d->gated;
}

void rt_matmul_map(const mmt_matmul_desc *d, rt_matmul_plan *out) {
  memset(out, 0, sizeof *out);
  out->plain = is_plain(d);
  out->gemm = (mmt_problem){d->order, d->trans_a, d->trans_b, d->m,   d->n,
                            d->k,     d->lda,     d->ldb,     d->ldd, d->in_type};
  if (out->plain) return;
  const bool col = d->order == MMT_COL_MAJOR;
  const char ta = d->trans_a == MMT_TRANS ? 't' : 'n', tb = d->trans_b == MMT_TRANS ? 't' : 'n';
  const int64_t np = product_n(d);
  out->kp = (rt_gemm_kernel_problem){
      .m = col ? np : d->m,
      .n = col ? d->m : np,
      .k = d->k,
      .lda = col ? d->ldb : d->lda,
      .ldb = col ? d->lda : d->ldb,
      .ldc = d->beta != 0.0f ? d->ldc : d->ldd, /* C is not read: any valid pitch */
      .layout = {col ? tb : ta, col ? ta : tb, '\0'},
      .swapped = col,
  };
  gen_op *op = &out->op;
  snprintf(op->out, sizeof op->out, "%s", rt_dtype(d->out_type)->name);
  if (d->bias_mode != MMT_BIAS_NONE) op->bias = (d->bias_mode == MMT_BIAS_COL) != col ? 'c' : 'r';
  op->bias_f32 =
      d->bias_mode != MMT_BIAS_NONE && (d->bias_type == MMT_F32 || d->out_type == MMT_F32);
  const float *s_row = col ? d->scale_col : d->scale_row,
              *s_col = col ? d->scale_row : d->scale_col;
  /* the scale vectors, or per tensor (one float each) or block scales */
  op->scale_tensor = d->scale_mode == MMT_SCALE_TENSOR;
  op->scale_block = d->scale_mode == MMT_SCALE_BLOCK;
  op->scale_row = d->scale_mode == MMT_SCALE_VECTORS && s_row != NULL;
  op->scale_col = d->scale_mode == MMT_SCALE_VECTORS && s_col != NULL;
  op->fast_accum = d->fast_accum != 0;
  /* B of the other FP8 type: the kernel's A is the caller's B when swapped */
  op->mixed_fp8 = rt_dtype_fp8(d->in_type) && rt_dtype_fp8(d->b_type) && d->b_type != d->in_type;
  out->dtype = op->mixed_fp8 && col ? d->b_type : d->in_type;
  op->act = (gen_act)d->act; /* the enums agree: mmtune.h's order is gen.h's */
  op->gated = d->gated != 0;
  op->group = d->group_mode == MMT_GROUP_CONTIGUOUS ? 'c'
              : d->group_mode == MMT_GROUP_MASKED   ? 'm'
                                                    : 0;
  op->residual = d->beta != 0.0f;
  out->group_rows = (uint64_t)(uintptr_t)d->group_rows;
  out->group_tokens = d->group_tokens;
  out->batch = d->batch;
  out->a = col ? d->b : d->a;
  out->b = col ? d->a : d->b;
  out->stride_a = col ? d->stride_b : d->stride_a;
  out->stride_b = col ? d->stride_a : d->stride_b;
  out->c = d->beta != 0.0f ? (uint64_t)(uintptr_t)d->c : 0;
  out->stride_c = d->beta != 0.0f ? d->stride_c : 0;
  out->d = (uint64_t)(uintptr_t)d->d;
  out->ldd = d->ldd;
  out->stride_d = d->stride_d;
  out->bias = (uint64_t)(uintptr_t)d->bias;
  out->scale_row = (uint64_t)(uintptr_t)s_row;
  out->scale_col = (uint64_t)(uintptr_t)s_col;
  out->scale_d = (uint64_t)(uintptr_t)d->scale_d;
  out->amax = (uint64_t)(uintptr_t)d->amax;
  if (d->batch == 1) out->stride_a = out->stride_b = out->stride_c = out->stride_d = 0;
}

int64_t rt_group_rows_bucket(int64_t rows) {
  if (rows <= 1) return 1;
  int64_t step = 1; /* the largest power of two <= rows */
  while (step <= rows / 2) step *= 2;
  if (rows == step) return rows;
  /* between step and 2 step: 1.5 step, else 2 step (past INT64_MAX: rows) */
  if (step % 2 == 0 && rows <= step + step / 2) return step + step / 2;
  return step > INT64_MAX / 2 ? rows : 2 * step;
}

/* ---- op codes ---- */

/* D's type: bits 1-2, and bit 17 for the FP8 ones (then bits 1-2 say which); bits 18-19 the
 * group mode (1 contiguous, 2 masked); bit 20 residual. */
static const char *const code_out[3] = {"f32", "f16", "bf16"};
static const char *const code_out_fp8[2] = {"e4m3", "e5m2"};

int64_t rt_op_code(const gen_op *op) {
  if (!op) return 0;
  int64_t out = 0;
  const bool out8 = gen_dtype_fp8(op->out);
  if (out8)
    out = strcmp(op->out, "e4m3") != 0;
  else
    while (out < 2 && strcmp(op->out, code_out[out]) != 0) out++;
  const int64_t bias = op->bias == 'c' ? 1 : op->bias == 'r' ? 2 : 0;
  return 1 | out << 1 | bias << 3 | (int64_t)op->bias_f32 << 5 | (int64_t)op->scale_row << 6 |
         (int64_t)op->scale_col << 7 | (int64_t)op->act << 8 | (int64_t)op->gated << 12 |
         (int64_t)op->scale_tensor << 13 | (int64_t)op->fast_accum << 14 |
         (int64_t)op->scale_block << 15 | (int64_t)op->mixed_fp8 << 16 | (int64_t)out8 << 17 |
         (int64_t)(op->group == 'c'   ? 1
                   : op->group == 'm' ? 2
                                      : 0)
             << 18 |
         (int64_t)op->residual << 20;
}

bool rt_op_of_code(int64_t code, gen_op *op) {
  memset(op, 0, sizeof *op);
  const int64_t out = code >> 1 & 3, bias = code >> 3 & 3, act = code >> 8 & 15;
  const bool out8 = code >> 17 & 1;
  const int64_t group = code >> 18 & 3;
  if (!(code & 1) || out > (out8 ? 1 : 2) || bias > 2 || act >= GEN_ACTS || group > 2 || code >> 21)
    return false;
  snprintf(op->out, sizeof op->out, "%s", out8 ? code_out_fp8[out] : code_out[out]);
  op->bias = bias == 1 ? 'c' : bias == 2 ? 'r' : 0;
  op->bias_f32 = code >> 5 & 1;
  op->scale_row = code >> 6 & 1;
  op->scale_col = code >> 7 & 1;
  op->act = (gen_act)act;
  op->gated = code >> 12 & 1;
  op->scale_tensor = code >> 13 & 1;
  op->fast_accum = code >> 14 & 1;
  op->scale_block = code >> 15 & 1;
  op->mixed_fp8 = code >> 16 & 1;
  op->group = group == 1 ? 'c' : group == 2 ? 'm' : 0;
  op->residual = code >> 20 & 1;
  return gen_op_consistent(op);
}
