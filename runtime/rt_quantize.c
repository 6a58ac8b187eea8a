/* rt_quantize.c -- see rt_quantize.h. */
#include "rt_quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_gemm.h"

/* runtime/kernels/quantize.cu, embedded by the build (cmake/embed.cmake). */
extern const char rt_quantize_cu[];

#define INT_MAX_ 2147483647LL
#define THREADS 256
#define GROUPS_PER_BLOCK 8 /* 1x128: a warp per segment of a row, eight a block */
#define LOADS 4            /* quantize.cu's: vectors a thread loads at once */
/* 128 x 128 groups of 16-bit x in 16-byte loads: a grid of this many blocks an SM walks them
 * (quantize.cu's walk_128x128, whose __launch_bounds__ keep two blocks an SM) */
#define WALK_BLOCKS_PER_SM 2
#define TENSOR_BLOCKS 2048 /* per tensor: about as many blocks as 132 SMs keep resident */

const char *rt_quantize_source(void) { return rt_quantize_cu; }

int64_t mmt_quantize_scales(mmt_quant_mode mode, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) return -1;
  const int64_t rb = rows / 128 + (rows % 128 != 0), cb = cols / 128 + (cols % 128 != 0);
  switch (mode) {
  case MMT_QUANT_TENSOR: return 1;
  case MMT_QUANT_ROW: return rows;
  case MMT_QUANT_1X128: return cb * rows;
  case MMT_QUANT_128X128: return rb * cb;
  }
  return -1;
}

/* Bytes [lo, hi) a row-major matrix covers. */
static void matrix_bytes(const void *p, int64_t rows, int64_t cols, int64_t ld, int64_t elem,
                         uintptr_t *lo, uintptr_t *hi) {
  *lo = (uintptr_t)p;
  *hi = *lo + (uintptr_t)(((rows - 1) * ld + cols) * elem);
}

static bool disjoint(uintptr_t alo, uintptr_t ahi, uintptr_t blo, uintptr_t bhi) {
  return ahi <= blo || bhi <= alo;
}

static mmt_status check_pointers(const mmt_quantize_desc *d, int64_t elem, ut_err *err) {
  if (!d->x) return ut_fail(err, MMT_ERR_INVALID_ARG, "x is NULL");
  if (!d->q) return ut_fail(err, MMT_ERR_INVALID_ARG, "q is NULL");
  if (!d->scale) return ut_fail(err, MMT_ERR_INVALID_ARG, "scale is NULL");
  if ((uintptr_t)d->x % (uintptr_t)elem)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "x %p is not aligned to its %lld-byte element", d->x,
                   (long long)elem);
  if ((uintptr_t)d->scale % 4)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "scale %p is not aligned to 4 bytes",
                   (void *)d->scale);
  if ((uintptr_t)d->given_scale % 4)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "given_scale %p is not aligned to 4 bytes",
                   (const void *)d->given_scale);
  if ((uintptr_t)d->amax % 4)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "amax %p is not aligned to 4 bytes", (void *)d->amax);
  uintptr_t x0, x1, q0, q1;
  matrix_bytes(d->x, d->rows, d->cols, d->ldx, elem, &x0, &x1);
  matrix_bytes(d->q, d->rows, d->cols, d->ldq, 1, &q0, &q1);
  const uintptr_t s0 = (uintptr_t)d->scale,
                  s1 = s0 + 4 * (uintptr_t)mmt_quantize_scales(d->mode, d->rows, d->cols);
  if (!disjoint(x0, x1, q0, q1)) return ut_fail(err, MMT_ERR_INVALID_ARG, "q overlaps x");
  if (!disjoint(s0, s1, x0, x1)) return ut_fail(err, MMT_ERR_INVALID_ARG, "scale overlaps x");
  if (!disjoint(s0, s1, q0, q1)) return ut_fail(err, MMT_ERR_INVALID_ARG, "scale overlaps q");
  const uintptr_t g0 = (uintptr_t)d->given_scale, g1 = g0 + 4, a0 = (uintptr_t)d->amax, a1 = a0 + 4;
  if (d->given_scale && !disjoint(g0, g1, q0, q1))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "given_scale overlaps q");
  if (d->amax) { /* given_scale too (rt_quantize_check) */
    static const char *const what[4] = {"x", "q", "scale", "given_scale"};
    const uintptr_t lo[4] = {x0, q0, s0, g0}, hi[4] = {x1, q1, s1, g1};
    for (int i = 0; i < 4; i++)
      if (!disjoint(a0, a1, lo[i], hi[i]))
        return ut_fail(err, MMT_ERR_INVALID_ARG, "amax overlaps %s", what[i]);
  }
  return MMT_OK;
}

mmt_status rt_quantize_check(const mmt_quantize_desc *d, ut_err *err) {
  if (!d) return ut_fail(err, MMT_ERR_INVALID_ARG, "desc is NULL");
  if (d->in_type != MMT_F32 && d->in_type != MMT_F16 && d->in_type != MMT_BF16)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "in_type must be MMT_F32, MMT_F16 or MMT_BF16, got %d",
                   (int)d->in_type);
  if (!rt_dtype_fp8(d->out_type))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "out_type must be MMT_E4M3 or MMT_E5M2, got %d",
                   (int)d->out_type);
  if (mmt_quantize_scales(d->mode, 0, 0) < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "mode %d is not an mmt_quant_mode", (int)d->mode);
  if (d->given_scale && d->mode != MMT_QUANT_TENSOR)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "given_scale is for mode MMT_QUANT_TENSOR (one scale), got mode %d",
                   (int)d->mode);
  if (d->amax && !d->given_scale)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "amax is written with given_scale only (else the scale is amax / FP8_MAX)");
  if (d->rows < 0) return ut_fail(err, MMT_ERR_INVALID_ARG, "rows %lld < 0", (long long)d->rows);
  if (d->cols < 0) return ut_fail(err, MMT_ERR_INVALID_ARG, "cols %lld < 0", (long long)d->cols);
  const int64_t min_ld = d->cols < 1 ? 1 : d->cols;
  if (d->ldx < min_ld)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "ldx %lld < %lld (cols)", (long long)d->ldx,
                   (long long)min_ld);
  if (d->ldq < min_ld)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "ldq %lld < %lld (cols)", (long long)d->ldq,
                   (long long)min_ld);
  if (d->rows > INT_MAX_ || d->cols > INT_MAX_)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "rows %lld x cols %lld: each must be <= 2^31 - 1",
                   (long long)d->rows, (long long)d->cols);
  /* ld * rows in bytes must not wrap, and the grid must fit grid.x. */
  if (d->rows > 0 && (d->ldx > INT64_MAX / 4 / d->rows || d->ldq > INT64_MAX / d->rows))
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "rows %lld x ldx %lld overflows the address space",
                   (long long)d->rows, (long long)(d->ldx > d->ldq ? d->ldx : d->ldq));
  const int64_t groups = mmt_quantize_scales(d->mode, d->rows, d->cols);
  const int64_t per_block = d->mode == MMT_QUANT_128X128 ? 1 : GROUPS_PER_BLOCK;
  if (d->mode != MMT_QUANT_TENSOR && groups / per_block >= INT_MAX_)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "%lld scale groups: too many for one launch",
                   (long long)groups);
  if (d->rows == 0 || d->cols == 0) return MMT_OK;
  return check_pointers(d, rt_dtype(d->in_type)->elem_bytes, err);
}

/* The kernels' numbering (rt_quantize.h): the name parts of each index. */
#define N_CASTS (6 * 3 * 2 * 2)
#define KIND_SMALL 4 /* the casts' kind after the four modes: a small matrix, one block */
#define KIND_GIVEN 5 /* and a given scale: one pass */
#define N_AMAX (3 * 2)
static const char *const k_kinds[6] = {
    [MMT_QUANT_TENSOR] = "cast",     [MMT_QUANT_ROW] = "row", [MMT_QUANT_1X128] = "1x128",
    [MMT_QUANT_128X128] = "128x128", [KIND_SMALL] = "small",  [KIND_GIVEN] = "given"};
static const char *const k_ins[3] = {"f32", "f16", "bf16"}, *const k_outs[2] = {"e4m3", "e5m2"};
static int in_index(mmt_dtype t) { return t == MMT_F32 ? 0 : t == MMT_F16 ? 1 : 2; }
static int out_index(mmt_dtype t) { return t == MMT_E5M2; }

/* The wide vector of each input type: 16 bytes. */
static int wide_of(int in) { return in == 0 ? 4 : 8; }

void rt_quantize_kernel_name(int index, char out[48]) {
  if (index >= 0 && index < N_CASTS) {
    const int in = index / 4 % 3;
    snprintf(out, 48, "mmt_quant_%s_%s_%s_v%d", k_kinds[index / 12], k_ins[in],
             k_outs[index / 2 % 2], index % 2 ? wide_of(in) : 1);
  } else if (index >= N_CASTS && index < N_CASTS + N_AMAX) {
    const int in = (index - N_CASTS) / 2;
    snprintf(out, 48, "mmt_quant_amax_%s_v%d", k_ins[in], index % 2 ? wide_of(in) : 1);
  } else {
    out[0] = '\0';
  }
}

static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

void rt_quantize_plan_of(const mmt_quantize_desc *d, int sm_count, rt_quantize_plan *out) {
  memset(out, 0, sizeof *out);
  const int in = in_index(d->in_type), o = out_index(d->out_type), w = wide_of(in);
  const int64_t elem = rt_dtype(d->in_type)->elem_bytes;
  /* 16-byte loads of x, w-byte stores of q, from every row's start */
  const bool wide = d->cols % w == 0 && d->ldx % w == 0 && d->ldq % w == 0 &&
                    (uintptr_t)d->x % (uintptr_t)(w * elem) == 0 && (uintptr_t)d->q % w == 0;
  out->vec = wide ? w : 1;
  /* the cast's kind: the mode's, one pass for a given scale, or one block for a small matrix
   * with one scale */
  const int kind = d->given_scale ? KIND_GIVEN
                   : d->mode == MMT_QUANT_TENSOR && d->rows * d->cols <= RT_QUANT_SMALL
                       ? KIND_SMALL
                       : (int)d->mode;
  out->kernel = (kind * 3 + in) * 4 + o * 2 + wide;
  out->given = kind == KIND_GIVEN;
  /* per tensor, the scale computed: the amax pass before the cast */
  out->amax = kind == MMT_QUANT_TENSOR ? N_CASTS + in * 2 + wide : -1;
  out->rows = d->rows, out->cols = d->cols, out->grid_y = 1;
  int64_t grid;
  switch (kind) {
  case KIND_SMALL: grid = 1; break;
  case KIND_GIVEN:
  case MMT_QUANT_TENSOR: {
    /* a contiguous matrix as one row: no row loop, every block busy */
    if (d->ldx == d->cols && d->ldq == d->cols && d->rows * d->cols <= INT_MAX_ - 1)
      out->rows = 1, out->cols = d->rows * d->cols;
    grid = ceil_div(out->cols / out->vec, THREADS * LOADS);
    if (grid > TENSOR_BLOCKS) grid = TENSOR_BLOCKS;
    const int64_t y = TENSOR_BLOCKS / grid;
    out->grid_y = (unsigned)(y < out->rows ? y : out->rows);
    if (out->grid_y > 65535) out->grid_y = 65535;
    break;
  }
  case MMT_QUANT_ROW: grid = d->rows; break;
  case MMT_QUANT_1X128:
    grid = ceil_div(d->rows * ceil_div(d->cols, LOADS * 32 * out->vec), GROUPS_PER_BLOCK);
    break;
  default: {
    grid = mmt_quantize_scales(d->mode, d->rows, d->cols);
    /* 16-bit x in 16-byte loads: the blocks the device keeps resident walk the groups */
    const int64_t resident = (int64_t)WALK_BLOCKS_PER_SM * (sm_count > 0 ? sm_count : 1);
    if (out->vec == 8 && grid > resident) grid = resident;
    break;
  }
  }
  out->grid = (unsigned)grid;
}

mmt_status rt_quantizer_load(const rt_device *d, const char *cache_dir, rt_quantizer *out,
                             ut_err *err) {
  memset(out, 0, sizeof *out);
  const rt_cu *cu;
  mmt_status rc = rt_driver(&cu, err);
  if (rc) return rc;
  char arch[16]; /* the device's own, from sm_89 on (cvt to FP8) */
  if ((rc = rt_kernel_arch(d->arch, "sm_89", arch, err))) {
    ut_err_prefix(err, "FP8 conversions");
    return rc;
  }
  rt_cubin cubin = {0};
  if ((rc = rt_compile_cached(cache_dir, rt_quantize_cu, "mmt_quantize", arch, &cubin, NULL, NULL,
                              err)))
    return rc;
  if ((rc = rt_device_bind(d, err))) goto cleanup;
  RT_CU_CHECK(cu, cuModuleLoadData(&out->module, cubin.data));
  out->ctx = d->ctx;
  out->sm_count = d->limits.sm_count;
  for (int i = 0; i < RT_QUANT_KERNELS; i++) {
    char name[48];
    rt_quantize_kernel_name(i, name);
    CUresult r = cu->cuModuleGetFunction(&out->fn[i], out->module, name);
    if (r != CUDA_SUCCESS) {
      rc = rt_cu_fail(err, name, r);
      cu->cuModuleUnload(out->module);
      out->module = NULL;
      goto cleanup;
    }
  }
cleanup:
  rt_cubin_free(&cubin);
  return rc;
}

void rt_quantizer_unload(rt_quantizer *q) {
  const rt_cu *cu;
  ut_err err;
  if (q->module && !rt_driver(&cu, &err)) {
    cu->cuCtxSetCurrent(q->ctx);
    cu->cuModuleUnload(q->module);
  }
  memset(q, 0, sizeof *q);
}

static mmt_status launch(const rt_cu *cu, const rt_quantizer *q, int kernel, unsigned grid,
                         unsigned grid_y, unsigned threads, void **args, CUstream stream,
                         ut_err *err) {
  mmt_status rc = MMT_OK;
  RT_CU_CHECK(cu,
              cuLaunchKernel(q->fn[kernel], grid, grid_y, 1, threads, 1, 1, 0, stream, args, NULL));
cleanup:
  return rc;
}

mmt_status rt_quantize_launch(const rt_quantizer *q, const mmt_quantize_desc *d, CUstream stream,
                              ut_err *err) {
  if (d->rows == 0 || d->cols == 0) return MMT_OK;
  const rt_cu *cu;
  mmt_status rc = rt_driver(&cu, err);
  if (rc) return rc;
  RT_CU_CHECK(cu, cuCtxSetCurrent(q->ctx));
  rt_quantize_plan plan;
  rt_quantize_plan_of(d, q->sm_count, &plan);
  CUdeviceptr x = (CUdeviceptr)(uintptr_t)d->x, qq = (CUdeviceptr)(uintptr_t)d->q,
              scale = (CUdeviceptr)(uintptr_t)d->scale;
  long long ldx = d->ldx, ldq = d->ldq;
  int rows = (int)plan.rows, cols = (int)plan.cols, pow2 = d->pow2_scales != 0;
  void *cast_args[] = {&x, &ldx, &qq, &ldq, &rows, &cols, &scale, &pow2};
  if (plan.given) { /* one pass: *amax = 0 first (the kernel's atomic max) */
    CUdeviceptr given = (CUdeviceptr)(uintptr_t)d->given_scale,
                amax = (CUdeviceptr)(uintptr_t)d->amax;
    if (amax) RT_CU_CHECK(cu, cuMemsetD32Async(amax, 0, 1, stream));
    void *given_args[] = {&x, &ldx, &qq, &ldq, &rows, &cols, &given, &scale, &amax};
    return launch(cu, q, plan.kernel, plan.grid, plan.grid_y, THREADS, given_args, stream, err);
  }
  if (plan.amax >= 0) {
    /* scale[0] holds amax / FP8_MAX until the cast finishes it into the scale (quantize.cu) */
    RT_CU_CHECK(cu, cuMemsetD32Async(scale, 0, 1, stream));
    int e5m2 = d->out_type == MMT_E5M2;
    void *amax_args[] = {&x, &ldx, &rows, &cols, &e5m2, &scale};
    if ((rc = launch(cu, q, plan.amax, plan.grid, plan.grid_y, THREADS, amax_args, stream, err)))
      goto cleanup;
  }
  rc = launch(cu, q, plan.kernel, plan.grid, plan.grid_y, THREADS, cast_args, stream, err);
cleanup:
  return rc;
}
