/*
 * rt_matmul.h -- what an mmt_matmul call asks for, in kernel terms: the descriptor's checks
 * (mmtune.h lists them) and its mapping onto an op kernel's problem, op and arguments (gen.h,
 * "Epilogues").  Prefix rt_.  Needs no GPU and no driver (CI tests it).
 *
 * The mapping is rt_gemm.h's: a row-major call is the kernel problem as is; a column-major one
 * is the row-major transpose, A and B swapped, M and N swapped, and with them what lies along
 * them: a bias by column of D becomes one by row of the kernel's product, scale_row and
 * scale_col trade places, and so do the batch strides of A and B.  A gated call is row-major
 * (its gate pairs lie along the kernel's columns); the product then has 2N columns.  The GEMV
 * canonical form of rt_gemm_canonical is not applied to an op (it would move a bias from the
 * columns to the rows); a plain descriptor (rt_matmul_plan.plain) is mmt_gemm's problem and
 * goes through mmt_gemm's path, canonical form included.
 */
#ifndef MMT_RT_MATMUL_H
#define MMT_RT_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

#include "gen.h"
#include "mmtune.h"
#include "rt_gemm.h"
#include "util.h"

/*
 * Every check of mmtune.h's mmt_matmul, in this order: the enums; sizes, batch and strides;
 * leading dimensions; bias, its type and the gate's order; sizes within the kernels' int ABI
 * (MMT_ERR_UNSUPPORTED); then, for a call that writes anything (M, N > 0), the pointers it uses
 * (non-NULL, aligned to their element) and the memory they cover: D's problems apart from each
 * other, D apart from A and B (when read), from the bias and scales, and from C unless C is D.
 * MMT_ERR_INVALID_ARG, the message naming the field.
 */
mmt_status rt_matmul_check(const mmt_matmul_desc *d, ut_err *err);
/* rt_matmul_check but the pointers and the memory they cover (mmt_explain_matmul). */
mmt_status rt_matmul_check_fields(const mmt_matmul_desc *d, ut_err *err);

/* A checked descriptor in kernel terms. */
typedef struct {
  bool plain;       /* mmt_gemm's problem: no op (as the gemm field says; the rest unused) */
  mmt_problem gemm; /* plain: the problem, C = D */
  rt_gemm_kernel_problem kp; /* the kernel's problem (n: the product's columns) and layout */
  gen_op op;
  mmt_dtype dtype; /* the kernel's A's, the problem's dtype (the caller's B's when swapped) */
  int64_t batch;
  const void *a, *b; /* the kernel's A and B (swapped for column-major) */
  /* The op ABI's argument (gen.h): device addresses; C for the kernel's C argument. */
  uint64_t c, d, bias, scale_row, scale_col, scale_d, amax;
  uint64_t group_rows;  /* grouped (op.group): the offsets or counts */
  int64_t group_tokens; /* grouped: the caller's hint of the rows of all experts (0: none) */
  int64_t ldd;
  int64_t stride_a, stride_b, stride_c, stride_d; /* the kernel's A's and B's */
} rt_matmul_plan;

/* The plan of a descriptor that rt_matmul_check accepted. */
void rt_matmul_map(const mmt_matmul_desc *d, rt_matmul_plan *out);

/* The rows a grouped call is keyed and tuned by: `rows` (the caller's hint of its experts'
 * rows in all, or a masked call's mean) rounded up to the next of 1, 2, 3, 4, 6, 8, 12, 16, 24,
 * ... (2^i and 3 * 2^i), so that every call of a routing regime -- its token count within
 * 1.5x -- finds the rows `mmtune tune` measured for that regime, however its tokens fall on
 * the experts from one step to the next.  rows <= 1: 1. */
int64_t rt_group_rows_bucket(int64_t rows);

/* An op as one integer, for the dispatcher's keys: 0 for NULL (the plain GEMM), else a code
 * with bit 0 set that rt_op_of_code turns back into the op (false for a code that is none). */
int64_t rt_op_code(const gen_op *op);
bool rt_op_of_code(int64_t code, gen_op *op);

#endif /* MMT_RT_MATMUL_H */
