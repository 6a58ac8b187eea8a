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
 *
 * Then the canonical form of a vector (rt_gemm_map's second step), so that a GEMV is one
 * kernel problem however the call stores it:
 *   - N = 1 with C a contiguous column (ldc = 1) and B's column contiguous (B stored
 *     transposed, or ldb = 1), M > 1: the transpose C^T = op(B)^T op(A)^T, a problem with
 *     M = 1.  Its A is B's vector, its B is A in the other storage (layout (flip tB, flip
 *     tA)), ldc = the new N.
 *   - A unit-stride column is a row: op(A) with one row stored transposed at lda = 1 is A
 *     stored as is at lda = K; op(B) with one column stored as is at ldb = 1 is B stored
 *     transposed at ldb = K.
 *   - The pitch of a matrix stored as one row, which never steps, is gen_one_row_pitches's:
 *     its width rounded up to 16 elements (a batch-1 call's ldc = 50257 is 50272).
 * Why: a pitch of one element makes the problem 4-byte aligned (every kernel on element
 * loads), and the tuner measures each GEMV in one form.  Packed Mx1xK in any layout becomes
 * packed 1xMxK in nn (A stored transposed) or nt (A as is); packed 1xNxK with A stored
 * transposed becomes nn or nt.  Only pitches that never step or are of one element change,
 * so no call becomes less aligned, and the kernel reads and writes the caller's elements
 * only.  The tuner (rt_gemm_canonical_packed, gen_packed_problem) tunes the same forms.
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
/* Whether dtype is one of the FP8 types (MMT_E4M3, MMT_E5M2). */
bool rt_dtype_fp8(mmt_dtype dtype);

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
  char layout[3];  /* "nn", "nt", "tn" or "tt" */
  bool swapped;    /* the kernel's A is the caller's B (column-major, or transposed) */
  bool transposed; /* the canonical form computes C^T (a GEMV with N = 1) */
} rt_gemm_kernel_problem;
void rt_gemm_map(const mmt_problem *p, rt_gemm_kernel_problem *out);

/* The canonical form of a kernel problem, in place (the top of this file); rt_gemm_map
 * applies it. */
void rt_gemm_canonical(rt_gemm_kernel_problem *kp);

/* The canonical kernel problem of a packed row-major problem (gen_min_ld's leading
 * dimensions), as the tuner tunes and `mmtune bench` times it; its leading dimensions are
 * packed too.  layout: "nn", "nt", "tn" or "tt". */
void rt_gemm_canonical_packed(const char *layout, int64_t m, int64_t n, int64_t k,
                              rt_gemm_kernel_problem *out);

#endif /* MMT_RT_GEMM_H */
