/*
 * bl.h -- the inside of libmmtune_blas (prefix bl_).  The exported BLAS entry points are in
 * bl_blas.c; they check their arguments (bl_check.c), turn every call into one column-major
 * bl_gemm, and route it (bl_route.c) to the GPU (bl_gpu.c) or the CPU (bl_cpu.c).
 *
 * bl_check.c, bl_route.c, bl_ref.c and bl_stage.c are pure (no CUDA, no dlopen, no
 * globals), and bl_pool.c keeps no globals either (its threads belong to a pool object): the
 * unit test links them directly (libmmt_blas_core.a).
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

/* An error of a CBLAS call, as netlib's cblas_sgemm (LAPACK 3.11) meets it.  For the whole
 * call it sets the globals CBLAS_CallFromC to 1 and RowMajorStrg to 0, RowMajorStrg to 1 once
 * it sees a row-major order, and both back to 0 before it returns; between, either
 *   - it finds the order or a transpose invalid itself: cblas_xerbla(info, "cblas_sgemm",
 *     form, value), with info 1 (order), 2 (TransA) or 3 (TransB; 2 for a row-major call, as
 *     netlib 3.11 does); or
 *   - it calls the Fortran SGEMM (row-major: M and N, A and B, LDA and LDB swapped), whose
 *     check calls XERBLA("SGEMM ", f77_info): the program's xerbla_ when it has one, else
 *     CBLAS's, which passes it on as cblas_xerbla(f77_info + 1, "cblas_sgemm ", "") (M < 0
 *     of a row-major call is 5 there, LDA 11; netlib's cblas_xerbla maps them back to the
 *     CBLAS argument numbers because RowMajorStrg is 1). */
typedef struct {
  int info;           /* the number cblas_xerbla gets (f77_info + 1 when f77_info); 0: valid */
  int f77_info;       /* INFO of the Fortran call's check, 0 when the C wrapper's own check
                         failed (the error goes to cblas_xerbla, not xerbla_) */
  int row_major_strg; /* RowMajorStrg while the error is reported */
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
 * 16 cores of an H100 host (docs/history/interfaces.md, mmtune-blas-bench). */
#define BL_DEFAULT_THRESHOLD 33554432.0
#define BL_DEFAULT_CPU_LIBRARY "libblas.so.3"

/* MMTUNE_BLAS_STAGING: how the GPU path moves matrices between host and device. */
typedef enum {
  BL_STAGE_DIRECT = 0, /* 2D copies straight from and to the caller's (pageable) memory */
  BL_STAGE_PINNED = 1, /* large parts through pinned slots, host copies on several threads */
  BL_STAGE_PANELS = 2  /* the default: and wide C in column panels, uploads beside kernels */
} bl_staging;

typedef struct {
  double threshold; /* MMTUNE_BLAS_THRESHOLD */
  int device;       /* MMTUNE_BLAS_DEVICE */
  bl_staging staging; /* MMTUNE_BLAS_STAGING */
  int verbose;      /* MMTUNE_BLAS_VERBOSE: 0, 1 (lifecycle, summary at exit), 2 (+ mmtune's
                       kernel choices) */
  char cpu_library[1024]; /* MMTUNE_BLAS_CPU_LIBRARY */
} bl_config;

/* Fills cfg from the values of the five variables (each may be NULL: unset).  An invalid
 * value keeps the default and appends one line naming it to warn (NUL-terminated, may be
 * truncated).  Returns the number of invalid values. */
int bl_config_parse(bl_config *cfg, const char *threshold, const char *device,
                    const char *verbose, const char *cpu_library, const char *staging,
                    char *warn, size_t warn_len);

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

/* ---- staging through pinned host memory (bl_stage.c) ---- */

/* A part of a stored matrix: rows x cols elements from (row0, col0), in elements. */
typedef struct {
  size_t row0, col0, rows, cols;
} bl_rect;

/* How a part of an operand travels through slots (pinned host buffers) of slot_elems
 * elements: in chunks, each packed in a slot with `pitch` elements from one column to the
 * next.  A part of whole columns is packed at the device's leading dimension (pitch =
 * dev_ld), so that a chunk is one contiguous range of the device buffer; a part of some rows
 * only (a row range of B, for a column panel of C with trans_b) is packed tightly (pitch =
 * its rows).  Chunks hold chunk_cols columns (the last may hold fewer), as many as a slot
 * takes, evened out so that the chunks are about the same size.  When one column does not
 * fit a slot, a chunk is one column's piece of chunk_rows rows (the last piece of a column
 * may have fewer), `pieces` a column. */
typedef struct {
  bl_rect part;
  size_t pitch;      /* elements between columns in a slot (pieces: chunk_rows) */
  size_t chunk_rows; /* rows of a chunk: part.rows, or a piece of a column */
  size_t chunk_cols; /* columns of a chunk: 1 when pieces > 1 */
  size_t pieces;     /* chunks per column group: 1 unless a column exceeds a slot */
  size_t count;      /* chunks in all (0 for an empty part) */
  bool contiguous;   /* whole columns at pitch dev_ld: a chunk's DMA moves pitch elements a
                        column, the padding too, one contiguous range on both sides */
} bl_stage;

/* Plans moving `part` of op through slots of slot_elems elements.  False when slot_elems is
 * 0 or the chunk count overflows. */
bool bl_stage_plan(const bl_operand *op, bl_rect part, size_t slot_elems, bl_stage *s);
/* Chunk i (< s->count) of a plan, in the operand's coordinates; chunk i + 1 follows chunk i
 * (down a column, then to the next columns). */
bl_rect bl_stage_chunk(const bl_stage *s, size_t i);
/* The elements of each of chunk c's columns that its DMA moves: s->pitch when contiguous,
 * else c.rows.  The slot holds them at s->pitch, the device at the operand's dev_ld. */
size_t bl_stage_width(const bl_stage *s, bl_rect c);

/* Column panels of C: `count` calls of mmt_gemm on `width` columns each (the last may be
 * narrower), so that the upload of panel j + 1's B and C runs while panel j computes. */
typedef struct {
  size_t count, width;
} bl_panels;

#define BL_PANEL_MIN ((size_t)1024) /* columns: each panel's kernel stays a large one */
#define BL_PANEL_ALIGN ((size_t)256) /* widths: a multiple (keeps B's row offsets aligned) */
#define BL_PANEL_MIN_B ((size_t)16 << 20) /* bytes of B below which there is little to hide */
#define BL_PANELS_MAX 4

/* The panels of a planned call: one panel unless B is read, holds at least BL_PANEL_MIN_B
 * bytes and C has 2 * BL_PANEL_MIN columns or more; then 2 to max_panels (at most
 * BL_PANELS_MAX) panels, each but the last at least BL_PANEL_MIN columns wide, the width a
 * multiple of BL_PANEL_ALIGN. */
bl_panels bl_plan_panels(const bl_plan *p, size_t max_panels);
/* Panel j's columns of C (*c) and the part of B it reads (*b): B's rows [col0, col0 + cols)
 * of C's columns when trans_b (B is stored N x K), else those columns of B. */
void bl_panel_parts(const bl_plan *p, bool trans_b, bl_panels ps, size_t j, bl_rect *b,
                    bl_rect *c);

/* Part i of `parts` of `total` bytes, evenly: [*begin, *end). */
void bl_split(size_t total, size_t parts, size_t i, size_t *begin, size_t *end);
/* Copies bytes [begin, end) of `lines` of `width` bytes laid end to end: line l is at
 * src + l * src_pitch and goes to dst + l * dst_pitch. */
void bl_copy_range(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                   size_t begin, size_t end);

/* ---- host copies on several threads (bl_pool.c) ---- */

typedef struct bl_pool bl_pool;

/* Copies smaller than this run on the calling thread alone; larger ones in parts of at least
 * this much (waking a thread costs about what copying this much does). */
#define BL_POOL_MIN_PART ((size_t)256 << 10)

/* A pool of threads - 1 helper threads (the calling thread is the last one); fewer when
 * pthread_create fails (with none it copies on the caller alone).  NULL when out of memory.
 * The helpers block every signal. */
bl_pool *bl_pool_create(int threads);
/* Stops and joins the helpers; NULL is a no-op. */
void bl_pool_destroy(bl_pool *pool);
/* Threads that copy: the helpers started, plus the caller. */
int bl_pool_threads(const bl_pool *pool);
/* A 2D copy of `lines` lines of `width` bytes (pitches in bytes; width * lines must fit a
 * size_t), split over the pool's threads.  One copy at a time per pool (the caller
 * serializes); pool may be NULL (the caller copies alone). */
void bl_pool_copy(bl_pool *pool, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                  size_t width, size_t lines);

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
