/*
 * gpu/cublas.h -- cuBLAS as a baseline for `mmtune bench`: libcublas loaded with dlopen at run
 * time, never linked (like the driver, rt_driver.h), so mmtune starts and explains itself on
 * a machine without it.  Prefix tn_.  Part of tn_gpu (bench and bench/calls.c use it).
 *
 * The library is $MMTUNE_LIBCUBLAS when set (read at the first load; for tests), else
 * "libcublas.so.13", else "libcublas.so".  It is loaded once per process and never unloaded
 * (cuBLAS carries the CUDA runtime, which keeps threads and exit handlers).
 *
 * Context: cuBLAS runs on the CUDA runtime inside libcublas, and the runtime adopts the
 * context current on the calling thread.  rt_device_open retains the device's PRIMARY
 * context and makes it current, so a handle created after it (and used while it is current:
 * tn_gpu_measure_launch binds it) works on the same context as mmtune's kernels: same
 * memory, same streams, same events.  This holds when the runtime's own dlopen of
 * "libcuda.so.1" finds the driver mmtune loaded (the default; not when $MMTUNE_LIBCUDA
 * names another library).
 *
 * Math: every handle is set to CUBLAS_PEDANTIC_MATH: plain fp32 multiply-adds, no TF32, no
 * BF16x9 emulation, no reduced-precision reductions -- the same arithmetic as mmtune's fp32
 * kernels, so the comparison is like for like and passes the same f32 verification.
 *
 * Thread-safety: loading is thread-safe; a handle is used by one thread at a time.
 */
#ifndef MMT_TN_GPU_CUBLAS_H
#define MMT_TN_GPU_CUBLAS_H

#include <stdint.h>

#include "util.h"

typedef struct tn_cublas tn_cublas;
/* A CUDA stream (the same type as CUstream and cudaStream_t); NULL: the default stream. */
struct CUstream_st;

/*
 * Loads the library (first call only) and creates a handle on the context current on this
 * thread, in pedantic fp32 math.  *out is NULL on failure.  Errors: MMT_ERR_NOT_FOUND (no
 * library: "libcublas.so.13 not found: <dlerror>"; or a symbol missing: the message names it;
 * remembered, later calls fail the same way at once), MMT_ERR_CUDA (cublasCreate failed, e.g.
 * no driver or device: "cublasCreate_v2: CUBLAS_STATUS_NOT_INITIALIZED (...)"; or the math
 * mode was refused), MMT_ERR_NOMEM.
 */
mmt_status tn_cublas_open(tn_cublas **out, ut_err *err);
/* Destroys the handle (before the context goes: before tn_gpu_close).  NULL is a no-op. */
void tn_cublas_close(tn_cublas *cb);
/* "13.1.0" (cublasGetVersion).  Borrowed; lives as long as cb. */
const char *tn_cublas_version(const tn_cublas *cb);

/*
 * C = alpha * op(A) * op(B) + beta * C, ROW-major, A and B stored as `layout` says
 * (gen.h: "nn", "nt", "tn", "tt"; NULL means "nn"), C M x N with row pitch ldc, on `stream`,
 * asynchronously.  a, b, c are device addresses.  cuBLAS is column-major, so this computes
 * C^T = op(B)^T * op(A)^T: cublasSgemm(opB, opA, n, m, k, alpha, B, ldb, A, lda, beta, C, ldc)
 * with op T for a transposed operand.  dtype "f32" (or NULL): cublasSgemm in pedantic math
 * (no TF32); "f16", "bf16": cublasGemmEx with that type for A, B and C and fp32 compute, in the
 * default math mode (tensor cores).  Another dtype: MMT_ERR_UNSUPPORTED.
 * Errors: MMT_ERR_UNSUPPORTED (a size or leading dimension above 2^31 - 1: cuBLAS takes
 * int), MMT_ERR_CUDA (cuBLAS refused or failed: the message has its status name and text).
 */
mmt_status tn_cublas_gemm(tn_cublas *cb, struct CUstream_st *stream, const char *dtype,
                          const char *layout, int64_t m, int64_t n, int64_t k, float alpha,
                          uint64_t a, int64_t lda, uint64_t b, int64_t ldb, float beta, uint64_t c,
                          int64_t ldc, ut_err *err);

/*
 * `batch` GEMMs C_z = alpha * op(A_z) * op(B_z) + beta * C_z, z = 0 .. batch - 1, each as
 * tn_cublas_gemm computes it (ROW-major, A and B stored as `layout`; NULL means "nn"), with
 * A_z = a + z * stride_a elements, likewise B_z and C_z, in one asynchronous call on `stream`:
 * cublasGemmStridedBatchedEx(opB, opA, n, m, k, alpha, B, ldb, stride_b, A, lda, stride_a,
 * beta, C, ldc, stride_c, batch) -- the operands swapped as in tn_cublas_gemm, the strides
 * staying with their matrices.  A stride of 0 gives every problem the same A or B (a shared
 * weight); C's must keep the problems apart (not checked beyond 0).  Types, fp32 compute:
 * dtype of A and B "f16" or "bf16" (default math, tensor cores) with out_dtype (C) the same or
 * "f32"; "f32" (or NULL: CUBLAS_COMPUTE_32F_PEDANTIC, pedantic math) and "tf32"
 * (CUBLAS_COMPUTE_32F_FAST_TF32) with an f32 C.  out_dtype NULL or "": the inputs' type (f32
 * for tf32).  Attention's batched GEMMs (Q K^T: layout "nt"; P V: "nn") are its use.
 * Errors: MMT_ERR_UNSUPPORTED (another type pair; a size, leading dimension or batch above
 * 2^31 - 1), MMT_ERR_INVALID_ARG (batch < 1, a negative stride, stride_c 0 with batch > 1),
 * MMT_ERR_CUDA (cuBLAS refused or failed: its status name and text).
 */
mmt_status tn_cublas_gemm_strided_batched(tn_cublas *cb, struct CUstream_st *stream,
                                          const char *dtype, const char *out_dtype,
                                          const char *layout, int64_t m, int64_t n, int64_t k,
                                          float alpha, uint64_t a, int64_t lda, int64_t stride_a,
                                          uint64_t b, int64_t ldb, int64_t stride_b, float beta,
                                          uint64_t c, int64_t ldc, int64_t stride_c, int64_t batch,
                                          ut_err *err);

/*
 * `count` problems C_g = alpha * op(A_g) * op(B_g) + beta * C_g, each as tn_cublas_gemm
 * computes it (ROW-major, layout as there), problem g with m[g] rows (a host array, each at
 * least 1: leave empty ones out) and N, K, lda, ldb, ldc shared, in one asynchronous
 * cublasGemmGroupedBatchedEx call of `count` groups of one problem each: a mixture of experts'
 * layer as cuBLAS runs it.  ptrs is a DEVICE array of 3 * count addresses, A_g at [g], B_g at
 * [count + g], C_g at [2 * count + g], which the caller uploads.  dtype "f16" or "bf16" for A,
 * B and C, fp32 compute.  Errors: MMT_ERR_NOT_FOUND (a cuBLAS before 12.5), MMT_ERR_UNSUPPORTED
 * (another type), MMT_ERR_INVALID_ARG (a size below 1 or above 2^31 - 1), MMT_ERR_NOMEM,
 * MMT_ERR_CUDA (cuBLAS refused or failed: its status name and text).
 */
mmt_status tn_cublas_gemm_grouped(tn_cublas *cb, struct CUstream_st *stream, const char *dtype,
                                  const char *layout, int64_t count, const int *m, int64_t n,
                                  int64_t k, float alpha, int64_t lda, int64_t ldb, float beta,
                                  int64_t ldc, uint64_t ptrs, ut_err *err);

#endif /* MMT_TN_GPU_CUBLAS_H */
