/*
 * bl.h -- the inside of libmmtune_blas (prefix bl_).  The exported BLAS entry points are in
 * bl_blas.c; they check their arguments (bl_check.c), turn every call into one column-major
 * bl_gemm, and route it (bl_route.c) to the GPU (bl_gpu.c) or the CPU (bl_cpu.c).
 *
 * bl_check.c, bl_route.c and bl_ref.c are pure (no CUDA, no dlopen, no globals): the unit
 * test links them directly (libmmt_blas_core.a).
 */
#ifndef MMT_BL_H
#define MMT_BL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mmtune_blas.h"

/* ---- the BLAS ABI this library exports (LP64: 32-bit integers) ---- */

/* CBLAS enum values, as every cblas.h defines them. */
enum { BL_ROW_MAJOR = 101, BL_COL_MAJOR = 102 };
enum { BL_NO_TRANS = 111, BL_TRANS = 112, BL_CONJ_TRANS = 113 };

/* Fortran: every argument by reference; gfortran appends the lengths of TRANSA and TRANSB. */
void sgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
            const float *beta, float *c, const int *ldc, size_t transa_len, size_t transb_len);
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* OpenBLAS's extensions: A and B in bf16 (sb) or IEEE binary16 (sh), given as their bits. */
void sbgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const float *alpha, const uint16_t *a, const int *lda, const uint16_t *b,
             const int *ldb, const float *beta, float *c, const int *ldc, size_t transa_len,
             size_t transb_len);
void cblas_sbgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                  const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta, float *c,
                  int ldc);
void shgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const float *alpha, const uint16_t *a, const int *lda, const uint16_t *b,
             const int *ldb, const float *beta, float *c, const int *ldc, size_t transa_len,
             size_t transb_len);
void cblas_shgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                  const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta, float *c,
                  int ldc);

/* ---- one call ---- */

/* The element type of A and B (C, alpha and beta are always fp32). */
typedef enum { BL_F32 = 0, BL_BF16 = 1, BL_F16 = 2 } bl_elem;

/* A validated GEMM in column-major (Fortran) form: C = alpha op(A) op(B) + beta C. */
typedef struct {
  bool trans_a, trans_b;
  int m, n, k;
  float alpha, beta;
  const void *a; /* elements of `elem`; NULL allowed when not read (bl_reads_ab false) */
  int lda;
  const void *b;
  int ldb;
  float *c;
  int ldc;
  bl_elem elem;
} bl_gemm;

/* ---- argument checks (bl_check.c) ---- */

/* INFO as netlib SGEMM computes it, 0 when valid: 1 TRANSA, 2 TRANSB (each one of NnTtCc),
 * 3 M < 0, 4 N < 0, 5 K < 0, 8 LDA < max(1, rows of A), 10 LDB, 13 LDC < max(1, M); the
 * first failing check wins. */
int bl_check_f77(char transa, char transb, int m, int n, int k, int lda, int ldb, int ldc);

/* An error of a CBLAS call as netlib's cblas_sgemm reports it: cblas_xerbla(info, name,
 * form, value) with the global RowMajorStrg set to row_major_strg during the call.  For
 * row-major calls netlib passes the numbers of its column-major Fortran call (M and N, LDA
 * and LDB swapped: M < 0 is 5, LDA is 11) and its cblas_xerbla maps them back because
 * RowMajorStrg is 1; an invalid TransB of a row-major call is reported as 2, as netlib does. */
typedef struct {
  int info;           /* 0: the arguments are valid */
  int row_major_strg; /* RowMajorStrg during the cblas_xerbla call */
  const char *form;   /* printf format of the detail ("" when there is none) */
  int value;          /* the offending enum value, for form */
} bl_cblas_error;

bl_cblas_error bl_check_cblas(int order, int transa, int transb, int m, int n, int k, int lda,
                              int ldb, int ldc);
/* The number netlib's cblas_xerbla prints for e (its RowMajorStrg mapping undone for GEMM:
 * 4 <-> 5, 9 <-> 11 when row_major_strg). */
int bl_cblas_user_info(bl_cblas_error e);

/* ---- configuration and routing (bl_route.c) ---- */

/* 2^25 flops (256^3): where the GPU path, copies over PCIe included, overtook OpenBLAS on the
 * 16 cores of an H100 host (docs/perf.md, mmtune-blas-bench). */
#define BL_DEFAULT_THRESHOLD 33554432.0
#define BL_DEFAULT_CPU_LIBRARY "libblas.so.3"

typedef struct {
  double threshold; /* MMTUNE_BLAS_THRESHOLD */
  int device;       /* MMTUNE_BLAS_DEVICE */
  int verbose;      /* MMTUNE_BLAS_VERBOSE: 0, 1 (lifecycle, summary at exit), 2 (+ mmtune's
                       kernel choices) */
  char cpu_library[1024]; /* MMTUNE_BLAS_CPU_LIBRARY */
} bl_config;

/* Fills cfg from the values of the four variables (each may be NULL: unset).  An invalid
 * value keeps the default and appends one line naming it to warn (NUL-terminated, may be
 * truncated).  Returns the number of invalid values. */
int bl_config_parse(bl_config *cfg, const char *threshold, const char *device,
                    const char *verbose, const char *cpu_library, char *warn, size_t warn_len);

/* True when the call computes nothing: M or N == 0, or (alpha or K == 0) and beta == 1. */
bool bl_is_noop(const bl_gemm *g);
/* True when the call reads A and B: alpha != 0 and K > 0 (and M, N > 0). */
bool bl_reads_ab(const bl_gemm *g);
/* 2*M*N*K, or 0 when A and B are not read. */
double bl_flops(const bl_gemm *g);
/* Whether a call goes to the GPU: bl_flops(g) >= threshold (so threshold 0 sends every call
 * that is not a no-op). */
bool bl_wants_gpu(const bl_gemm *g, double threshold);

/* Where the GPU path puts a call's matrices: one device buffer holding A, B (when read) and
 * C, each at a 256-byte-aligned offset, each packed to a leading dimension of its rows
 * rounded up to 4 elements (16-byte aligned columns).  C is uploaded only when beta != 0;
 * only its M x N elements travel each way, so elements between M and ldc are never written. */
typedef struct {
  bool used;            /* A, B: read by the call; C: always */
  size_t rows, cols;    /* the stored matrix (rows = the leading dimension's direction) */
  size_t host_ld;       /* elements */
  size_t dev_ld;        /* elements (not used: max(1, rows), what mmt_gemm accepts) */
  size_t dev_offset;    /* bytes from the buffer's start */
} bl_operand;

typedef struct {
  bl_operand a, b, c;
  bool upload_c;
  size_t bytes; /* the buffer size the call needs */
} bl_plan;

/* The largest pitch (bytes) the plan allows for a 2D copy (the driver's maximum pitch on
 * current GPUs is 2^31 - 1). */
#define BL_MAX_PITCH ((size_t)2147483647)

/* Plans g (an fp32 call: bl_elem BL_F32) for the GPU.  False when it cannot be done that way
 * (a pitch above BL_MAX_PITCH, or a size that overflows size_t): the call goes to the CPU. */
bool bl_plan_gpu(const bl_gemm *g, bl_plan *p);

/* ---- CPU path (bl_cpu.c) ---- */

/* Loads the CPU BLAS once (cfg->cpu_library).  Returns 1 when it is usable, -1 when the
 * built-in loop has to do (the library is missing, lacks sgemm_, or is this library). */
int bl_cpu_load(const bl_config *cfg);
/* Computes g on the CPU: the CPU BLAS's sgemm_ (or its sbgemm_ / shgemm_ when it has them),
 * else a 16-bit call converted to fp32 first, else the built-in loop. */
void bl_cpu_gemm(const bl_gemm *g);
/* A symbol of the CPU BLAS (NULL when it is not loaded or lacks it). */
void *bl_cpu_symbol(const char *name);

/* ---- conversions and the built-in loop (bl_ref.c) ---- */

/* The built-in loop: correct for every element type, not fast (double accumulation).  Reads
 * A and B only when bl_reads_ab, C only when beta != 0. */
void bl_ref_gemm(const bl_gemm *g);
/* Exact conversions of 16-bit inputs. */
float bl_bf16_to_float(uint16_t bits);
float bl_f16_to_float(uint16_t bits);
/* g with A and B converted to fp32 in fresh buffers (packed: ld = max(1, rows)), *bufs the
 * allocation to free.  A call that does not read A and B gets NULL pointers.  False when
 * out of memory. */
bool bl_to_f32(const bl_gemm *g, bl_gemm *out, float **bufs);

/* ---- GPU path (bl_gpu.c) ---- */

typedef enum {
  BL_GPU_DONE = 0,    /* C holds the result */
  BL_GPU_DECLINED = 1 /* nothing was written to C: compute it on the CPU */
} bl_gpu_result;

/* Runs a call on the GPU, opening mmtune at the first call; 16-bit inputs are converted to
 * fp32 on the host first.  BL_GPU_DECLINED leaves C untouched.  Thread-safe (one call at a
 * time). */
bl_gpu_result bl_gpu_gemm(const bl_config *cfg, const bl_gemm *g);
/* gpu_state, gpu_status and a line describing the GPU for the summary. */
void bl_gpu_state(int *state, int *status, char *desc, size_t desc_len);

/* A line on stderr, prefixed "mmtune_blas: ". */
void bl_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* MMT_BL_H */
