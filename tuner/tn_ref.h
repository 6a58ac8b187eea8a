/*
 * tn_ref.h -- reference results and verification.  Prefix tn_.
 *
 * The reference is computed in float64 from the same float32 inputs, independently of any
 * template: on the CPU (serial or pthreads) for small shapes, or on the GPU with the plain
 * float64 kernel whose source tn_ref_gpu_source() returns, for large ones.
 * All matrices are row-major with leading dimensions in elements.
 */
#ifndef MMT_TN_REF_H
#define MMT_TN_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Deterministic uniform values in [-1, 1) from *seed (advanced).  Never all zeros. */
void tn_fill_random(float *x, size_t count, uint64_t *seed);
/* Fills with quiet NaN (output poison: every element must be written by the kernel). */
void tn_fill_nan(float *x, size_t count);

/* ref[i*ldr + j] = sum_k A[i*lda + k] * B[k*ldb + j], accumulated in double.
 * threads <= 1: serial; else that many pthreads over rows. */
mmt_status tn_ref_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, double *ref, int64_t ldr, int threads, ut_err *err);

/* The float32 CPU GEMM the bench table times (C = A*B, float accumulate, i-k-j loop order so
 * it is not a straw man).  threads <= 1: serial. */
mmt_status tn_cpu_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                        int64_t ldb, float *c, int64_t ldc, int threads, ut_err *err);

typedef struct {
  double rel_err;    /* ||C - ref||_F / ||ref||_F */
  double max_err;    /* max |C - ref| / max |ref| */
  int64_t bad_count; /* NaN/Inf elements (unwritten poison included) */
  int64_t bad_row, bad_col; /* first bad element, -1 if none */
  bool pass;
} tn_check;

/* Tolerances per dtype: relative Frobenius error and max-element error.  f32: 1e-5 and 1e-4
 * (float accumulation of K terms stays far under; a wrong index or missed tail does not).
 * Returns false for an unknown dtype. */
bool tn_tolerance(const char *dtype, double *rel_tol, double *max_tol);

/* Compares C (float, ldc) with ref (double, ldr) over m x n with dtype's tolerance. */
void tn_compare(int64_t m, int64_t n, const float *c, int64_t ldc, const double *ref, int64_t ldr,
                const char *dtype, tn_check *out);

/* CUDA C source of the float64 reference kernel, entry point "mmt_ref_gemm_f64":
 *   (int M, int N, int K, const float *A, int lda, const float *B, int ldb, double *R, int ldr)
 * launched with 16x16 blocks and grid (ceil(N/16), ceil(M/16)).  Static string. */
const char *tn_ref_gpu_source(void);
#define TN_REF_GPU_KERNEL "mmt_ref_gemm_f64"

#endif /* MMT_TN_REF_H */
