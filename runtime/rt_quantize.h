/*
 * rt_quantize.h -- mmt_quantize (mmtune.h): its checks, its plan of launches, and the module
 * of its kernels (runtime/kernels/quantize.cu, compiled into the library as text and by NVRTC
 * at the first call).  Prefix rt_.  The checks, the plan and the source need no GPU (CI tests
 * them); rt_quantizer_* need the driver.
 */
#ifndef MMT_RT_QUANTIZE_H
#define MMT_RT_QUANTIZE_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

#include "mmtune.h"
#include "rt_device.h"
#include "util.h"

/* mmtune.h's mmt_quantize checks, in its order; MMT_ERR_INVALID_ARG naming the field, or
 * MMT_ERR_UNSUPPORTED for sizes beyond the kernels' int. */
mmt_status rt_quantize_check(const mmt_quantize_desc *d, ut_err *err);

/* The kernels' CUDA C (NUL-terminated, static). */
const char *rt_quantize_source(void);

/* The module's kernels, numbered: the casts (mode, then the one-block kind for a small matrix
 * with one scale, then the one-pass kind for a given scale; input type, output type, vector
 * width), then the amax passes (input type, width). */
#define RT_QUANT_KERNELS (6 * 3 * 2 * 2 + 3 * 2)
/* Per tensor, a matrix of at most this many elements is one launch of one block (a decode
 * step's activations: the memset and two launches would cost more than its bytes). */
#define RT_QUANT_SMALL 32768

/* Kernel `index`'s name in the module, e.g. "mmt_quant_1x128_bf16_e4m3_v8",
 * "mmt_quant_given_f16_e5m2_v1",
 * "mmt_quant_amax_f32_v4"; "" out of range. */
void rt_quantize_kernel_name(int index, char out[48]);

/* The launches of a checked call that writes something (rows, cols > 0): kernel numbers. */
typedef struct {
  int kernel;      /* the cast (per tensor: after the amax) */
  bool given;      /* per tensor with a given scale: the one pass (mmt_quantize_desc) */
  int amax;        /* per tensor, unless small: the amax pass, else -1 (the cast then
                      finishes the scale: two launches after a memset) */
  unsigned grid;   /* blocks of 256 threads, the cast's (and the amax's); 128 x 128 groups of
                    * a 16-bit x in 16-byte loads: at most two an SM (sm_count), walking them */
  unsigned grid_y; /* per tensor: the grid's rows; else 1 */
  /* Elements a load: 16 bytes (4 f32, 8 16-bit) when every row starts 16-byte aligned in x
   * and vec-byte aligned in q, else 1. */
  int vec;
  /* The matrix as the kernels see it: per tensor, a contiguous one is one row of rows * cols
   * elements (below 2^31); else the call's. */
  int64_t rows, cols;
} rt_quantize_plan;
void rt_quantize_plan_of(const mmt_quantize_desc *d, int sm_count, rt_quantize_plan *out);

/* The compiled module on a device, its kernels looked up once (a call looks up nothing). */
typedef struct {
  CUcontext ctx; /* the device's (borrowed) */
  int sm_count;  /* the device's multiprocessors: the 128 x 128 walk's grid */
  CUmodule module;
  CUfunction fn[RT_QUANT_KERNELS];
} rt_quantizer;

/* Compiles (through the cubin cache in cache_dir; NULL: none) and loads the kernels for d.
 * Errors: MMT_ERR_UNSUPPORTED (before sm_89: rt_kernel_arch's message after "FP8
 * conversions"), rt_compile_cached's, MMT_ERR_CUDA. */
mmt_status rt_quantizer_load(const rt_device *d, const char *cache_dir, rt_quantizer *out,
                             ut_err *err);
/* Safe on a zeroed struct. */
void rt_quantizer_unload(rt_quantizer *q);

/* Enqueues a checked call's launches on stream (nothing when rows or cols is 0). */
mmt_status rt_quantize_launch(const rt_quantizer *q, const mmt_quantize_desc *d, CUstream stream,
                              ut_err *err);

#endif /* MMT_RT_QUANTIZE_H */
