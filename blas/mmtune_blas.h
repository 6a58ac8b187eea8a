/*
 * mmtune_blas.h -- the one function of libmmtune_blas that is not BLAS: its call counters.
 *
 * libmmtune_blas is a BLAS drop-in (LD_PRELOAD it, or link it before the system BLAS).  It
 * exports the reference sgemm_ and cblas_sgemm, and OpenBLAS's 16-bit-input GEMMs sbgemm_,
 * cblas_sbgemm, shgemm_ and cblas_shgemm (bf16 or IEEE fp16 A and B, fp32 alpha, beta and C),
 * on host pointers.  A call whose 2*M*N*K reaches $MMTUNE_BLAS_THRESHOLD runs on the GPU
 * through mmt_gemm (fp32); every other call, and every call when the GPU cannot serve it,
 * runs on the CPU BLAS it loads at run time ($MMTUNE_BLAS_CPU_LIBRARY, else libblas.so.3).
 * Argument errors reach the program as under netlib's BLAS and CBLAS (Debian's libblas3): a
 * CBLAS call's bad order or transpose goes to cblas_xerbla, its other bad arguments to
 * xerbla_ as the Fortran routine reports them (xerbla_("SGEMM ", INFO)); the program's own
 * handler first (linking with this library exports it, as linking with libblas does), else
 * the CPU BLAS's, else netlib's default: a message on stderr, and for a CBLAS call exit
 * status 255.  The environment variables are read once, at the first call.
 */
#ifndef MMTUNE_BLAS_H
#define MMTUNE_BLAS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the GEMM entry points did since the process started.  Each call counts once. */
typedef struct {
  uint64_t gpu_calls;     /* computed by mmt_gemm on the GPU */
  uint64_t cpu_calls;     /* computed on the CPU: the CPU BLAS, or the built-in loop */
  uint64_t noop_calls;    /* valid calls with nothing to compute (M or N == 0; alpha or K
                             == 0 with beta == 1) */
  uint64_t error_calls;   /* refused with an argument error (xerbla_ / cblas_xerbla called) */
  uint64_t gpu_fallbacks; /* of cpu_calls: calls at or above the threshold that ran on the CPU
                             (no GPU, a GPU failure, a matrix the GPU path cannot copy) */
  double threshold;       /* flops (2*M*N*K) from which a call goes to the GPU */
  int device;             /* the CUDA device ordinal used */
  int gpu_state;          /* 0: not opened yet (no call has reached the threshold), 1: open,
                             -1: unavailable for the rest of the process */
  int gpu_status;         /* gpu_state -1: the mmt_status (mmtune.h) that made it so */
  int cpu_blas;           /* 1: the CPU BLAS is loaded; 0: not yet; -1: none (the built-in
                             loop computes CPU calls) */
} mmtune_blas_stats_t;

/* Fills *out (out must not be NULL).  Thread-safe; counters are read one at a time, so a
 * call running meanwhile may be counted or not. */
void mmtune_blas_stats(mmtune_blas_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* MMTUNE_BLAS_H */
