/* rt_gemm.c -- see rt_gemm.h. */
#include "rt_gemm.h"

#include <stdint.h>

#include "gen.h"

const rt_dtype_info *rt_dtype(mmt_dtype dtype) {
  static const rt_dtype_info table[] = {
      [MMT_F32] = {"f32", 4},   [MMT_TF32] = {"tf32", 4}, [MMT_F16] = {"f16", 2},
      [MMT_BF16] = {"bf16", 2}, [MMT_E4M3] = {"e4m3", 1}, [MMT_E5M2] = {"e5m2", 1}};
  if ((int)dtype < 0 || (size_t)dtype >= sizeof table / sizeof table[0]) return NULL;
  return &table[dtype];
}

bool rt_dtype_fp8(mmt_dtype dtype) { return dtype == MMT_E4M3 || dtype == MMT_E5M2; }

static int64_t at_least_1(int64_t x) { return x < 1 ? 1 : x; }

void rt_gemm_min_ld(const mmt_problem *p, int64_t ld[3], const char *what[3]) {
  /* Row-major rows are op's columns unless transposed; column-major the other way round. */
  bool row = p->order == MMT_ROW_MAJOR;
  bool a_k = row != (p->trans_a == MMT_TRANS), b_n = row != (p->trans_b == MMT_TRANS);
  ld[0] = a_k ? p->k : p->m;
  ld[1] = b_n ? p->n : p->k;
  ld[2] = row ? p->n : p->m;
  what[0] = a_k ? "K" : "M";
  what[1] = b_n ? "N" : "K";
  what[2] = row ? "N" : "M";
}

/* One leading dimension against its minimum max(1, rows-as-stored width). */
static mmt_status check_ld(const char *name, int64_t ld, const char *what, int64_t width,
                           ut_err *err) {
  if (ld >= at_least_1(width)) return MMT_OK;
  return ut_fail(err, MMT_ERR_INVALID_ARG, "%s must be >= max(1, %s) = %lld, got %lld", name, what,
                 (long long)at_least_1(width), (long long)ld);
}

mmt_status rt_gemm_check(const mmt_problem *p, ut_err *err) {
  if (!p) return ut_fail(err, MMT_ERR_INVALID_ARG, "problem is NULL");
  if (p->order != MMT_ROW_MAJOR && p->order != MMT_COL_MAJOR)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "order must be MMT_ROW_MAJOR or MMT_COL_MAJOR, got %d",
                   (int)p->order);
  if (p->trans_a != MMT_NO_TRANS && p->trans_a != MMT_TRANS)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "transA must be MMT_NO_TRANS or MMT_TRANS, got %d",
                   (int)p->trans_a);
  if (p->trans_b != MMT_NO_TRANS && p->trans_b != MMT_TRANS)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "transB must be MMT_NO_TRANS or MMT_TRANS, got %d",
                   (int)p->trans_b);
  if (!rt_dtype(p->dtype))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "dtype %d is not an mmt_dtype", (int)p->dtype);
  if (rt_dtype_fp8(p->dtype))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "dtype %s: FP8 has no plain GEMM (C would be FP8); use mmt_matmul with "
                   "out_type MMT_BF16, MMT_F16 or MMT_F32",
                   rt_dtype(p->dtype)->name);
  static const char *const names[6] = {"M", "N", "K", "lda", "ldb", "ldc"};
  const int64_t v[6] = {p->m, p->n, p->k, p->lda, p->ldb, p->ldc};
  for (int i = 0; i < 3; i++)
    if (v[i] < 0)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s must be >= 0, got %lld", names[i],
                     (long long)v[i]);
  int64_t min[3];
  const char *what[3];
  rt_gemm_min_ld(p, min, what);
  mmt_status rc = check_ld("lda", p->lda, what[0], min[0], err);
  if (!rc) rc = check_ld("ldb", p->ldb, what[1], min[1], err);
  if (!rc) rc = check_ld("ldc", p->ldc, what[2], min[2], err);
  if (rc) return rc;
  for (int i = 0; i < 6; i++)
    if (v[i] > INT32_MAX)
      return ut_fail(err, MMT_ERR_UNSUPPORTED, "%s = %lld exceeds %d: kernels take int sizes",
                     names[i], (long long)v[i], INT32_MAX);
  return MMT_OK;
}

/* A matrix the call uses must be a non-NULL, element-aligned device address. */
static mmt_status check_matrix(const char *name, const void *ptr, bool used, int elem,
                               ut_err *err) {
  if (!used) return MMT_OK;
  if (!ptr) return ut_fail(err, MMT_ERR_INVALID_ARG, "%s is NULL but the call uses it", name);
  if ((uintptr_t)ptr % (uintptr_t)elem)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s (%p) is not %d-byte aligned", name, ptr, elem);
  return MMT_OK;
}

mmt_status rt_gemm_check_call(const mmt_problem *p, float alpha, const void *A, const void *B,
                              const void *C, ut_err *err) {
  mmt_status rc = rt_gemm_check(p, err);
  if (rc) return rc;
  int elem = rt_dtype(p->dtype)->elem_bytes;
  bool writes = p->m > 0 && p->n > 0, reads = writes && p->k > 0 && alpha != 0.0f;
  if (!rc) rc = check_matrix("A", A, reads, elem, err);
  if (!rc) rc = check_matrix("B", B, reads, elem, err);
  if (!rc) rc = check_matrix("C", C, writes, elem, err);
  return rc;
}

void rt_gemm_map(const mmt_problem *p, rt_gemm_kernel_problem *out) {
  bool col = p->order == MMT_COL_MAJOR;
  char ta = p->trans_a == MMT_TRANS ? 't' : 'n', tb = p->trans_b == MMT_TRANS ? 't' : 'n';
  *out = (rt_gemm_kernel_problem){
      .m = col ? p->n : p->m,
      .n = col ? p->m : p->n,
      .k = p->k,
      .lda = col ? p->ldb : p->lda,
      .ldb = col ? p->lda : p->ldb,
      .ldc = p->ldc,
      .layout = {col ? tb : ta, col ? ta : tb, '\0'},
      .swapped = col,
  };
  rt_gemm_canonical(out);
}

static char flip(char t) { return t == 't' ? 'n' : 't'; }

void rt_gemm_canonical(rt_gemm_kernel_problem *kp) {
  char ta = kp->layout[0], tb = kp->layout[1];
  if (kp->n == 1 && kp->m > 1 && kp->ldc == 1 && (tb == 't' || kp->ldb == 1)) {
    /* C^T (1 x M) = op(B)^T (1 x K) op(A)^T (K x M), each operand in its own memory. */
    int64_t lda = kp->lda;
    kp->n = kp->m;
    kp->m = 1;
    kp->lda = kp->ldb;
    kp->ldb = lda;
    kp->ldc = kp->n;
    kp->layout[0] = flip(tb);
    kp->layout[1] = flip(ta);
    kp->swapped = !kp->swapped;
    kp->transposed = true;
  }
  int64_t row = kp->k > 0 ? kp->k : 1; /* a vector's length as a row's pitch */
  if (kp->m == 1 && kp->layout[0] == 't' && kp->lda == 1) {
    kp->layout[0] = 'n';
    kp->lda = row;
  }
  if (kp->n == 1 && kp->layout[1] == 'n' && kp->ldb == 1) {
    kp->layout[1] = 't';
    kp->ldb = row;
  }
  int64_t ld[3] = {kp->lda, kp->ldb, kp->ldc};
  gen_one_row_pitches(kp->layout, kp->m, kp->n, kp->k, ld);
  kp->lda = ld[0], kp->ldb = ld[1], kp->ldc = ld[2];
}

void rt_gemm_canonical_packed(const char *layout, int64_t m, int64_t n, int64_t k,
                              rt_gemm_kernel_problem *out) {
  int64_t ld[3];
  gen_min_ld(layout, m, n, k, ld);
  *out = (rt_gemm_kernel_problem){.m = m, .n = n, .k = k, .lda = at_least_1(ld[0]),
                                  .ldb = at_least_1(ld[1]), .ldc = at_least_1(ld[2]),
                                  .layout = {layout[0], layout[1], '\0'}};
  rt_gemm_canonical(out);
}
