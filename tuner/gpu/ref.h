/*
 * gpu/ref.h -- reference results and verification.  Prefix tn_.
 *
 * The reference is computed in float64 from the same float32 inputs, independently of any
 * template: on the CPU (serial or pthreads) for small shapes, or on the GPU with the plain
 * float64 kernel whose source tn_ref_gpu_source() returns, for large ones.
 * All matrices are row-major with leading dimensions in elements.
 */
#ifndef MMT_TN_GPU_REF_H
#define MMT_TN_GPU_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Deterministic uniform values in [-1, 1) from *seed (advanced; any value, 0 included):
 * odd multiples of 2^-24 in [-1 + 2^-24, 1 - 2^-24] (splitmix64), so never 0 and never all
 * zeros.  The same seed gives the same values on every machine. */
void tn_fill_random(float *x, size_t count, uint64_t *seed);
/* Fills with quiet NaN (output poison: every element must be written by the kernel). */
void tn_fill_nan(float *x, size_t count);

/* ref[i*ldr + j] = sum_k A[i*lda + k] * B[k*ldb + j], accumulated in double in increasing k.
 * threads <= 1: serial; else up to that many threads (this one included) over contiguous row
 * ranges.  Every element is summed in the same order whatever `threads` is, so serial and
 * threaded results are identical bit for bit.  If a thread cannot be created, the calling
 * thread computes its rows (same result, slower).  K == 0 gives zeros; M or N == 0 does
 * nothing.  Errors: MMT_ERR_INVALID_ARG (negative size, lda < K, ldb < N, ldr < N, NULL
 * pointer for a non-empty matrix).  Thread-safe (no shared state). */
mmt_status tn_ref_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, double *ref, int64_t ldr, int threads, ut_err *err);

/* tn_ref_gemm for any layout of gen.h ("nn", "nt", "tn", "tt"): ref = op(A) * op(B), lda and
 * ldb the pitches of A and B as stored.  A transposed operand is first copied into its nn
 * form, so the sums are the same as tn_ref_gemm's on that copy.  Errors as tn_ref_gemm's,
 * with the layout's minimum leading dimensions, and MMT_ERR_INVALID_ARG for an unknown
 * layout, MMT_ERR_NOMEM when the copy cannot be allocated. */
mmt_status tn_ref_gemm_layout(const char *layout, int64_t m, int64_t n, int64_t k, const float *a,
                              int64_t lda, const float *b, int64_t ldb, double *ref, int64_t ldr,
                              int threads, ut_err *err);

/* The float32 CPU GEMM the bench table times (C = A*B, float accumulate, i-k-j loop order so
 * it is not a straw man).  threads <= 1: serial.  Threads, errors and sizes as tn_ref_gemm;
 * serial and threaded results are identical. */
mmt_status tn_cpu_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                        int64_t ldb, float *c, int64_t ldc, int threads, ut_err *err);

/* The errors are taken over the elements where both C and ref are finite.  When ref is all
 * zeros (or M or N is 0) there is no scale: rel_err and max_err are then the absolute
 * ||C||_F and max |C| (over finite elements). */
typedef struct {
  double rel_err;    /* ||C - ref||_F / ||ref||_F */
  double max_err;    /* max |C - ref| / max |ref| */
  int64_t bad_count; /* elements where C or ref is NaN/Inf (unwritten poison included) */
  int64_t bad_row, bad_col; /* first bad element in row-major order, -1 if none */
  bool pass;         /* bad_count == 0, rel_err <= rel_tol and max_err <= max_tol */
} tn_check;

/* Tolerances per dtype: relative Frobenius error and max-element error.  f32: 1e-5 and 1e-4
 * (float accumulation of K terms stays far under; a wrong index or missed tail does not;
 * gpu/ref.c gives the numbers).  "tf32": 2e-3 and 2e-2; "f16", "bf16": 1e-2 and 5e-2.
 * Returns false (outputs untouched) for an unknown or NULL dtype. */
bool tn_tolerance(const char *dtype, double *rel_tol, double *max_tol);

/* Compares C (float, ldc) with ref (double, ldr) over m x n with dtype's tolerance.
 * out: OUT.  An unknown dtype fills the errors and sets pass = false.  O(m*n), two passes. */
void tn_compare(int64_t m, int64_t n, const float *c, int64_t ldc, const double *ref, int64_t ldr,
                const char *dtype, tn_check *out);

/* CUDA C source of the float64 reference kernel, entry point "mmt_ref_gemm_f64":
 *   (int M, int N, int K, int ta, int tb, const float *A, int lda, const float *B, int ldb,
 *    double *R, int ldr)
 * computing R = op(A) * op(B), ta / tb non-zero when A / B is stored transposed (layouts of
 * gen.h), launched with 16x16 blocks and grid (ceil(N/64), min(ceil(M/64), 65535)): each block makes
 * a 64x64 tile (shared-memory double tiles, 4x4 per thread) and rows stride by the grid.
 * Includes no header (NVRTC), uses 64-bit offsets, checks bounds.  Every element sums
 * k = 0..K-1 in order, as tn_ref_gemm does, and a float product is exact in double, so the
 * results equal tn_ref_gemm's bit for bit (the padding adds exact zeros).  Static string. */
const char *tn_ref_gpu_source(void);
#define TN_REF_GPU_KERNEL "mmt_ref_gemm_f64"

/* Tests only: makes thread creation in tn_ref_gemm / tn_cpu_sgemm fail after `after` more
 * successes (0: every one fails); -1 turns it off.  Not thread-safe. */
void tn_ref_test_fail_threads(int after);

#endif /* MMT_TN_GPU_REF_H */
