/*
 * sweep_plan.h -- the plan of mmtune-sweep (tests/sweep.c), the out-of-bounds sweep run under
 * compute-sanitizer: which kernels run on which problems.  Prefix sw_.  Pure planning (Lua
 * templates and arithmetic, no CUDA), so CI tests it without a GPU (test_sweep_plan.c).
 *
 * For each template: every dtype it offers, every layout it declares; in each, the default
 * config, a few seeded random valid configs, and for each of the parameters that change how a
 * kernel addresses memory (vec, split, repack, persist) each of their values; each config on a
 * few small ragged problems (tails of 1, 7, 17, ... elements past the tiles), with padded
 * leading dimensions, misaligned base pointers and both beta == 0 and beta != 0.  Every
 * problem is one the config accepts (its constraints and its emitted kernel's requires): a
 * draw it rejects is adapted (sizes rounded up to the multiples, offsets and pads to the
 * alignment, K grown for split-K) rather than dropped.
 *
 * A template with epilogues (gen.h, "Epilogues") gets, for each config planned, its op twin:
 * the config emitted for the next op of SW_OPS it takes (a rotation: every output type,
 * activation, bias form, scales and the gate turn up), with cases of its own, every second one
 * a batch of 2 where the config's grid.z is free; D replaces C (its type, its columns).
 * FP8 dtypes, whose kernels are op kernels only, get the bf16 nt configs planned before them,
 * each with a promotion interval in turn, emitted for the ops of SW_OPS_FP8.
 *
 * Deterministic: the same templates, options and seed give the same plan on every machine;
 * each template draws from its own stream (seed and name), so a template's cases do not
 * depend on which other templates are planned (--templates X reproduces X's part).
 */
#ifndef MMT_TESTS_SWEEP_PLAN_H
#define MMT_TESTS_SWEEP_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gen.h"
#include "util.h"

/* The parameters every value of which is planned (where the template has them). */
#define SW_SWEPT_PARAMS {"vec", "split", "repack", "persist", "swap"}
/* Sizes M, N and K are drawn from: tails past tiles of 8..256, then a few larger ones. */
#define SW_SIZES {1, 7, 17, 33, 65, 127, 129, 200, 257, 300}
#define SW_PAD_MAX 9    /* ld = the row width + 0..SW_PAD_MAX, then rounded to the alignment */
#define SW_OFFSET_MAX 7 /* base pointers are base + 0..SW_OFFSET_MAX elements */
#define SW_K_MAX 4096   /* how far K is grown for a config that needs deep K (split-K) */

typedef enum { SW_DEFAULT, SW_RANDOM, SW_PARAM, SW_OP } sw_origin;

/* The ops op twins rotate through (gen_op_parse's text; out= absent: the inputs' type).  Only
 * a residual op's kernel reads C (gen.h): its cases alternate beta == 0 and beta != 0, in
 * place (C is D); every other op kernel's have beta == 0, as the library launches them. */
#define SW_OPS                                                                                     \
  {                                                                                                \
    "out=f32,bias=col,act=gelu_tanh", "act=silu,gated", "out=bf16,bias=row,scale=row+col",         \
        "bias=col,residual", "out=f16,act=relu,bias=col,bias_type=f32", "act=gelu_erf,scale=col",  \
        "out=f32,act=silu,gated,bias=col", "out=f32,scale=row,act=gelu_tanh,residual"              \
  }
/* The ops FP8 kernels rotate through (out= absent: bf16): per-tensor and per-channel scales,
 * fast accumulation allowed or not, B of the other FP8 type (mixed), an FP8 D. */
#define SW_OPS_FP8                                                                                 \
  {                                                                                                \
    "scale=tensor", "out=f16,bias=col,act=gelu_tanh,scale=tensor,fast_accum",                      \
        "out=f32,scale=row+col,fast_accum", "act=silu,gated,scale=tensor",                         \
        "out=bf16,bias=row,bias_type=f32,scale=col,fast_accum",                                    \
        "out=f32,act=relu,scale=tensor,mixed", "out=e4m3,bias=col,bias_type=f32,scale=tensor",     \
        "out=e5m2,act=silu,gated,scale=tensor,mixed"                                               \
  }
/* And block scales, which fewer configs apply (promote 1, bn <= 128 or 256, no swap): each FP8
 * config planned gets a block-scaled twin where its tile (bn halved to 128 at most, 256 kept)
 * takes one. */
#define SW_OPS_FP8_BLOCK                                                                           \
  { "scale=block", "out=f16,bias=col,act=silu,scale=block,mixed" }

/* One distinct kernel: a template's config emitted for a dtype and layout. */
typedef struct {
  int tmpl; /* index into the templates given to sw_plan_build */
  char dtype[8], layout[4];
  gen_config cfg;
  sw_origin origin;
  int param;       /* SW_PARAM: the index of the parameter this config varies; else -1 */
  gen_kernel spec; /* the emitted kernel (owned by the plan): source, launch, requires */
  bool has_op;     /* SW_OP: an op kernel, of `op` */
  gen_op op;
} sw_kernel;

/* One launch: a kernel on a problem.  Operands are row-major as stored (gen.h Layouts). */
typedef struct {
  int kernel; /* index into sw_plan.kernels */
  int64_t m, n, k;
  int64_t ld[3];     /* lda, ldb, ldc in elements */
  int64_t offset[3]; /* A, B, C base pointers: this many elements past a 256-aligned allocation */
  float alpha, beta; /* beta == 0: C starts as NaN and must not be read */
  int64_t batch;     /* an op kernel's problems (each operand's one after another); else 1 */
} sw_case;

/* A (template, dtype, layout) or config the plan leaves out, and why (the template's reason). */
typedef struct {
  int tmpl;
  char dtype[8], layout[4];
  char what[256]; /* "all configs" or the config's text */
  char why[256];
} sw_skip;

typedef struct {
  sw_kernel *kernels;
  int nkernels;
  sw_case *cases; /* grouped by kernel, in kernel order */
  int ncases;
  sw_skip *skips;
  int nskips;
} sw_plan;

typedef struct {
  int configs;   /* random valid configs per template, dtype and layout (mmtune-sweep: 3) */
  int problems;  /* problems per config (mmtune-sweep: 2) */
  uint64_t seed;
} sw_opts;

/* Plans templates[0..count).  *out is owned by the caller (sw_plan_free), zeroed on failure.
 * Errors: template failures (MMT_ERR_TEMPLATE...), MMT_ERR_NOMEM, MMT_ERR_INVALID_ARG (a
 * default config that does not emit). */
mmt_status sw_plan_build(gen_template *const *templates, int count, const sw_opts *opts,
                         sw_plan *out, ut_err *err);
/* Frees everything; a zeroed plan is fine. */
void sw_plan_free(sw_plan *plan);

/* The case as gen sees it: dtype and layout from its kernel (borrowed), align_bytes from the
 * offsets (the allocation is 256-byte aligned, so a base's address is offset * elem) and the
 * pitches. */
gen_problem sw_gen_problem(const sw_plan *plan, const sw_case *c);
/* Per operand (A, B, C): the rows as stored, the row width, and the extent: the elements the
 * problem addresses from the base, (rows - 1) * ld + width (0 for an empty operand); for an
 * op kernel, one problem of its batch, and C's width D's (N / 2 gated). */
void sw_operand_shape(const sw_plan *plan, const sw_case *c, int64_t rows[3], int64_t width[3],
                      int64_t extent[3]);
/* An op case's batch strides (elements from one problem to the next) of A, B and D: each
 * extent, A's and B's rounded up to the kernel's alignment (a TMA kernel's batch of 16-byte
 * aligned problems; a kernel of any alignment keeps them packed). */
void sw_batch_strides(const sw_plan *plan, const sw_case *c, int64_t stride[3]);
/* One line naming case i: "#12 mma_sync f16 tn bm=...,split=1 [default] 33x65x17 lda=..
 * ldb=.. ldc=.. off=1,5,3 alpha=1 beta=0".  Truncated to fit. */
void sw_case_format(const sw_plan *plan, gen_template *const *templates, int i, char *out,
                    size_t outlen);
/* "default", "random" or "vec=2" (the varied parameter and its value). */
void sw_origin_format(gen_template *const *templates, const sw_kernel *k, char *out,
                      size_t outlen);

#endif /* MMT_TESTS_SWEEP_PLAN_H */
