/*
 * rt_gemm.h -- what a BLAS GEMM call (mmt_gemm) asks for, in kernel terms: its argument
 * checks, in cuBLAS's spirit, and the mapping of both storage orders onto the row-major
 * kernels of gen.h.  Prefix rt_.  Needs no GPU and no driver (CI tests it).
 *
 * The mapping: a row-major call is the kernel problem as is, layout (transA, transB).  A
 * column-major matrix read row-major is its transpose, so the column-major
 *   C = op(A) op(B)   is the row-major   C^T = op(B)^T op(A)^T,
 * the kernel problem with A and B swapped, M and N swapped, and layout (transB, transA):
 * each operand keeps its own transpose flag.
 */
#ifndef MMT_RT_GEMM_H
#define MMT_RT_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "mmtune.h"
#include "util.h"

/* A dtype's database / template name ("f32", "tf32", "f16", "bf16") and element size. */
typedef struct {
  const char *name;
  int elem_bytes;
} rt_dtype_info;
/* NULL for a value outside mmt_dtype. */
const rt_dtype_info *rt_dtype(mmt_dtype dtype);

/* The smallest leading dimensions mmt_gemm accepts for p's order and transposes (mmtune.h),
 * and, in what[], the size each one is the width of ("M", "N" or "K"); max(1, ...) is not
 * applied.  p's enums must be valid. */
void rt_gemm_min_ld(const mmt_problem *p, int64_t ld[3], const char *what[3]);

/*
 * mmt_gemm's checks of everything but the pointers, in this order: order, transposes and
 * dtype are values of their enums; M, N, K >= 0; lda, ldb, ldc at least the minimums of
 * mmtune.h for the order and transposes (MMT_ERR_INVALID_ARG, the message naming the
 * argument, its value and the bound); every size and leading dimension <= 2^31 - 1, since
 * kernels take int (MMT_ERR_UNSUPPORTED).
 */
mmt_status rt_gemm_check(const mmt_problem *p, ut_err *err);

/* rt_gemm_check, then the pointers: C must be non-NULL and element-aligned when M, N > 0;
 * A and B too when they are read (also K > 0 and alpha != 0).  MMT_ERR_INVALID_ARG. */
mmt_status rt_gemm_check_call(const mmt_problem *p, float alpha, const void *A, const void *B,
                              const void *C, ut_err *err);

/* The kernel problem of a checked call (see the top of this file). */
typedef struct {
  int64_t m, n, k, lda, ldb, ldc;
  char layout[3]; /* "nn", "nt", "tn" or "tt" */
  bool swapped;   /* the kernel's A is the caller's B (column-major) */
} rt_gemm_kernel_problem;
void rt_gemm_map(const mmt_problem *p, rt_gemm_kernel_problem *out);

#endif /* MMT_RT_GEMM_H */
