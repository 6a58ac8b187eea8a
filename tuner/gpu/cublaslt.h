/*
 * gpu/cublaslt.h -- cuBLASLt as the baseline of mmt_matmul: one GEMM with a fused epilogue
 * (bias, ReLU, GELU), an output D apart from C, an output type other than the inputs', strided
 * batches.  libcublasLt is loaded with dlopen at run time, never linked (like cuBLAS,
 * gpu/cublas.h), so mmtune starts and explains itself on a machine without it.  Prefix tn_.
 * Part of tn_gpu.
 *
 * The library is $MMTUNE_LIBCUBLASLT when set (read at the first load; for tests), else
 * "libcublasLt.so.13", else "libcublasLt.so".  It is loaded once per process and never
 * unloaded (it carries the CUDA runtime, which keeps threads and exit handlers).
 *
 * Context: as for cuBLAS, the runtime inside the library adopts the context current on the
 * calling thread, so a handle opened after rt_device_open (which makes the device's primary
 * context current) works on mmtune's context: same memory, same streams, same events.
 *
 * Use: open a handle; plan each problem once (descriptors, layouts and the heuristic's best
 * algorithm); run the plan as often as wanted, each run one asynchronous cublasLtMatmul.
 *
 * The row-major mapping.  cuBLASLt is column-major, and a row-major R x C matrix with row
 * pitch ld is, read column-major, its transpose: a C x R matrix with leading dimension ld.  So
 * mmtune's row-major D = op(A) op(B) (M x N) is cuBLASLt's column-major D^T = op(B)^T op(A)^T
 * (N x M): cuBLASLt's A is mmtune's B, its B is mmtune's A, its m, n are N, M, and every
 * leading dimension and batch stride stays as it is.  An operand stored as its layout's 'n'
 * (row-major op(X)) reads column-major as op(X)^T, which is what the swapped product needs:
 * CUBLAS_OP_N.  One stored 't' (row-major op(X)^T) reads as op(X): CUBLAS_OP_T.  So cuBLASLt
 * transposes exactly the operands the layout stores transposed:
 *   TRANSA = B's letter, A-layout (B as stored) N x K ('n') or K x N ('t'), ld ldb;
 *   TRANSB = A's letter, B-layout (A as stored) K x M ('n') or M x K ('t'), ld lda;
 *   C- and D-layouts N x M, ld ldc and ldd.
 *
 * The bias.  CUBLASLT_EPILOGUE_BIAS adds a vector whose length is the rows of cuBLASLt's D,
 * broadcast over its columns (cublasLt.h: "Bias vector length must match matrix D rows, it
 * must be packed (stride between vector elements is 1)").  The rows of the column-major D^T
 * are the COLUMNS of mmtune's D: the bias is N long, bias[j] added to every element of column
 * j -- mmt_matmul's MMT_BIAS_COL.  A bias over M (MMT_BIAS_ROW) has no cuBLASLt epilogue.
 * Its type is D's (cuBLASLt's rule, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE left at its default:
 * "same type as the elements of output matrix", with exceptions only for int8 and fp8 kernels):
 * f32 for an f32 D, f16 or bf16 for a 16-bit D.  One vector serves every problem of a batch.
 *
 * What each element gets, in fp32, then rounded once to D's type:
 *   D[i][j] = act(alpha * sum_p op(A)[i][p] op(B)[p][j] + beta * C[i][j] + bias[j])
 * act: ReLU max(x, 0), or cuBLASLt's GELU, the tanh approximation
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (mmt_matmul's MMT_ACT_GELU_TANH).
 *
 * Math: compute type CUBLAS_COMPUTE_32F and scale type CUDA_R_32F (alpha, beta fp32, from the
 * host) for f16 and bf16 inputs (tensor cores); CUBLAS_COMPUTE_32F_PEDANTIC for f32 inputs
 * (plain fp32 multiply-adds, no TF32, no BF16x9 emulation: gpu/cublas.h's pedantic math, so
 * like for like with mmtune's fp32 kernels); CUBLAS_COMPUTE_32F_FAST_TF32 for "tf32" (f32 data,
 * TF32 tensor cores); CUBLAS_COMPUTE_32F for FP8 ("e4m3", "e5m2": layout nt only, cuBLASLt's
 * "TN"; D f32, f16 or bf16; the scales of tn_lt_scale, CUBLASLT_MATMUL_DESC_FAST_ACCUM when
 * asked).  Whether cuBLASLt has an algorithm for a combination (an epilogue in
 * pedantic fp32, say) is its heuristic's answer: tn_cublaslt_plan says MMT_ERR_UNSUPPORTED.
 *
 * Thread-safety: loading is thread-safe.  A handle, and the plans made with it, are used by
 * one thread at a time, and their launches run on one stream at a time: they share the
 * handle's workspace.
 */
#ifndef MMT_TN_GPU_CUBLASLT_H
#define MMT_TN_GPU_CUBLASLT_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

typedef struct tn_cublaslt tn_cublaslt;
/* FP8's scales of A and B (device floats, tn_cublaslt_set_scales), in mmtune's terms: none
 * (1), one float each (per tensor), outer vectors (A's over M, B's over N: gen.h's scale_row
 * and scale_col), or blocks (A's 1 x 128 along K, B's 128 x 128: cuBLASLt's VEC128_32F and
 * BLK128x128_32F, in cuBLASLt's own scale layouts, which the cuBLAS documentation gives). */
typedef enum {
  TN_LT_SCALE_NONE = 0,
  TN_LT_SCALE_TENSOR,
  TN_LT_SCALE_OUTER,
  TN_LT_SCALE_BLOCK
} tn_lt_scale;
typedef struct tn_lt_plan tn_lt_plan;
/* A CUDA stream (the same type as CUstream and cudaStream_t); NULL: the default stream. */
struct CUstream_st;

/* The workspace a handle lends its algorithms: cuBLASLt's recommendation for Hopper. */
#define TN_LT_WORKSPACE_BYTES ((size_t)32 << 20)

/*
 * Loads the library (first call only), creates a handle, and allocates its workspace
 * (TN_LT_WORKSPACE_BYTES, cuMemAlloc) on the context current on this thread.  *out is NULL on
 * failure.  Errors: MMT_ERR_NOT_FOUND (no library: "libcublasLt.so.13 not found: <dlerror>",
 * or the path of $MMTUNE_LIBCUBLASLT; or a symbol missing: the message names it; remembered,
 * later calls fail the same way at once), MMT_ERR_NO_DRIVER / MMT_ERR_NO_DEVICE (rt_driver),
 * MMT_ERR_CUDA (the workspace, e.g. no current context: "cuMemAlloc: ..."; or cublasLtCreate:
 * "cublasLtCreate: CUBLAS_STATUS_NOT_INITIALIZED (...)"), MMT_ERR_NOMEM.
 */
mmt_status tn_cublaslt_open(tn_cublaslt **out, ut_err *err);
/* Frees the workspace and destroys the handle, while its context is current (before
 * tn_gpu_close or rt_device_close), after its plans' launches have finished.  Its plans
 * outlive it only to be freed.  NULL is a no-op. */
void tn_cublaslt_close(tn_cublaslt *lt);
/* "13.1.0" (cublasLtGetVersion).  Borrowed; lives as long as lt. */
const char *tn_cublaslt_version(const tn_cublaslt *lt);

/*
 * One problem, in mmtune's ROW-major terms (see the mapping above): for z = 0 .. batch - 1,
 *   D_z (M x N, row pitch ldd) = act(alpha * op(A_z) op(B_z) + beta * C_z + bias)
 * with A_z = a + z * stride_a elements, likewise B_z, C_z, D_z (the pointers given to
 * tn_cublaslt_run).  Zero-initialize, then set what you need.
 */
typedef struct {
  char layout[4];    /* how A and B are stored: "nn", "nt", "tn", "tt" (gen.h); "" means "nn" */
  char in_dtype[8];  /* A and B: "f32", "tf32" (f32 data), "f16", "bf16"; "e4m3", "e5m2"
                        (layout nt only, D f32, f16 or bf16) */
  char b_dtype[8];   /* FP8: B's where it differs from A's, the other FP8 type ("": in_dtype) */
  char out_dtype[8]; /* C, D and the bias: "" means the inputs' (f32 for tf32); "f32" also
                        with f16 or bf16 inputs.  No other pair (cuBLASLt has none) */
  int64_t m, n, k;   /* D is M x N; op(A) M x K, op(B) K x N; each 1 .. 2^31 - 1 */
  int64_t lda, ldb;  /* row pitches as stored: at least the row widths of gen_min_ld */
  int64_t ldc, ldd;  /* at least N; ldc read only when beta != 0 */
  int64_t batch;     /* problems, 1 .. 2^31 - 1 */
  /* Elements from one problem to the next, never negative; 0 gives every problem the same
   * matrix (a shared weight).  When batch > 1, D's must keep the problems apart (at least
   * (M - 1) * ldd + N); C's is used only when beta != 0; none is used when batch is 1. */
  int64_t stride_a, stride_b, stride_c, stride_d;
  float alpha, beta;  /* beta == 0: C is never read (tn_cublaslt_run's c may be 0) */
  mmt_bias bias_mode; /* MMT_BIAS_NONE, or MMT_BIAS_COL: a vector of N, D's type */
  mmt_activation act; /* MMT_ACT_NONE, MMT_ACT_RELU or MMT_ACT_GELU_TANH */
  tn_lt_scale scale;  /* FP8 only: how A and B are scaled (set them before running) */
  bool fast_accum;    /* FP8 only: CUBLASLT_MATMUL_DESC_FAST_ACCUM (no promotion) */
  /* An FP8 D (out_dtype e4m3 or e5m2, after FP8 inputs; beta 0, no bias): the device float
   * that scales it (0: 1) and the one its amax goes to (0: none), cuBLASLt's
   * D_SCALE_POINTER and AMAX_D_POINTER; its C is bf16 (not read) */
  uint64_t scale_d, amax;
  int align_bytes; /* what every pointer given to tn_cublaslt_run is aligned to: a
                         power of two from the element size to 256; 0 means 256 (what
                         cuMemAlloc gives).  The heuristic picks only algorithms that work at
                         it; tn_cublaslt_run checks it */
} tn_lt_problem;

/*
 * The argument checks tn_cublaslt_plan makes first, without the library (so bench can say a
 * problem has no cuBLASLt baseline before opening anything).  Errors, the message naming the
 * field: MMT_ERR_INVALID_ARG (an unknown layout or dtype, a value outside mmt_bias or
 * mmt_activation, a negative size or stride, a leading dimension below its minimum, batch < 1,
 * D's problems overlapping, align_bytes not one of the powers of two above),
 * MMT_ERR_UNSUPPORTED (a dtype mmtune knows but this does not (f64), an input/output pair
 * cuBLASLt has no GEMM for (f16 -> bf16, f32 -> f16), MMT_BIAS_ROW, MMT_ACT_GELU_ERF or
 * MMT_ACT_SILU (no cuBLASLt epilogue), a size of 0, a size or batch above 2^31 - 1).
 */
mmt_status tn_lt_problem_check(const tn_lt_problem *p, ut_err *err);

/*
 * Makes the plan of p: its matmul descriptor (compute and scale type, transposes, epilogue),
 * the four matrix layouts (batch count and strides when batch > 1; when beta == 0, D's layout
 * serves for C) and the best algorithm cublasLtMatmulAlgoGetHeuristic gives within the
 * handle's workspace, at p's alignment.  Host work only: nothing is launched.  *out is NULL on
 * failure; free the plan with tn_lt_plan_free.  Errors: those of tn_lt_problem_check;
 * MMT_ERR_UNSUPPORTED (the heuristic has no algorithm for the problem: the message names the
 * types, layout, sizes and epilogue), MMT_ERR_CUDA (a cuBLASLt call failed otherwise: its
 * name and status), MMT_ERR_NOMEM.
 */
mmt_status tn_cublaslt_plan(tn_cublaslt *lt, const tn_lt_problem *p, tn_lt_plan **out, ut_err *err);

/*
 * Launches the plan once on `stream`, asynchronously: one cublasLtMatmul with the handle's
 * workspace.  a, b, c, d, bias are device addresses: A_0, B_0, C_0, D_0 and the bias vector.
 * c may be 0 when the plan's beta is 0 (it is not read; D is passed in its place); bias is 0
 * exactly when the plan has none.  Each address is checked: non-zero where used, aligned to
 * the plan's align_bytes.  The bias address is written into the plan's descriptor (so a plan
 * is not shared between threads).  D must not overlap A, B or the bias; C may be D itself
 * (then p's ldc and stride_c must be ldd and stride_d).
 * Errors: MMT_ERR_INVALID_ARG (an address missing, misaligned or given for nothing: the
 * message names it), MMT_ERR_CUDA (cuBLASLt refused or failed: the call and its status).
 */
mmt_status tn_cublaslt_run(tn_cublaslt *lt, tn_lt_plan *plan, struct CUstream_st *stream,
                           uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t bias,
                           ut_err *err);

/* FP8: the device addresses of A's and B's scales (mmtune's; see tn_lt_scale), written into
 * the plan's descriptor; a plan with scales runs only once they are set.  Errors:
 * MMT_ERR_INVALID_ARG (a plan without scales, an address 0 or not 16-byte aligned: cuBLASLt
 * 13.1 refuses a 4-byte aligned per-tensor scale at the launch, CUBLAS_STATUS_NOT_SUPPORTED),
 * MMT_ERR_CUDA. */
mmt_status tn_cublaslt_set_scales(tn_lt_plan *plan, uint64_t scale_a, uint64_t scale_b,
                                  ut_err *err);

/* What the plan runs, for a report's config column: "cublasLtMatmul CUBLAS_COMPUTE_32F,
 * CUBLASLT_EPILOGUE_GELU_BIAS, workspace 0 B".  Borrowed; lives as long as the plan. */
const char *tn_lt_plan_config(const tn_lt_plan *plan);

/* Destroys the plan's descriptors.  NULL is a no-op. */
void tn_lt_plan_free(tn_lt_plan *plan);

#endif /* MMT_TN_GPU_CUBLASLT_H */
