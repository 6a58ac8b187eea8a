/*
 * test_matmul_gpu.c -- mmt_matmul end to end on the GPU (skipped without one): random
 * descriptors -- input and output types, both orders, every transpose, padded leading
 * dimensions, pointers off their allocations' alignment, alpha and beta, bias by row and
 * column in fp32 or the output type, scales, every activation, gated, batches with strides of
 * 0 (broadcast) and D's problems side by side in its rows, in place (C is D), beta == 0 over a
 * C of NaN; every fourth FP8 (e4m3, e5m2: K-major, per-tensor, vector or block scales, fast
 * accumulation or not) -- each checked element by element against matmul_ref.c's float64 definition,
 * within a bound of the output type, and every byte of D's allocation outside D untouched.
 * Fresh inputs for every descriptor; no database (the dispatcher's model picks each kernel).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "half16.h"
#include "matmul_ref.h"
#include "mmtune.h"
#include "gpu_context.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static int64_t pick(int64_t lo, int64_t hi) {
  return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1));
}
static double uniform(void) { return (double)(next() >> 11) / 9007199254740992.0 * 2 - 1; }

static int size_of(mmt_dtype t) {
  return t == MMT_E4M3 || t == MMT_E5M2 ? 1 : t == MMT_F16 || t == MMT_BF16 ? 2 : 4;
}
static bool is_fp8(mmt_dtype t) { return t == MMT_E4M3 || t == MMT_E5M2; }
static int64_t round16(int64_t x) { return (x + 15) / 16 * 16; }

/* One operand: a host copy (its type's bytes) and the device allocation it sits in, `skew`
 * elements past the allocation's start, with `guard` elements of sentinel after it. */
typedef struct {
  mmt_dtype type;
  int64_t elems, skew;
  void *host;
  CUdeviceptr dev_base;
  size_t bytes; /* of the allocation */
} operand;

static void operand_make(const rt_cu *cu, operand *o, mmt_dtype t, int64_t elems, int64_t skew,
                         double lo, double hi) {
  o->type = t;
  o->elems = elems;
  o->skew = skew;
  o->bytes = (size_t)(elems + skew + 64) * (size_t)size_of(t);
  o->host = malloc(o->bytes);
  assert_non_null(o->host);
  for (int64_t i = 0; i < elems + skew + 64; i++)
    mr_store(t, o->host, i, lo + (hi - lo) * (uniform() + 1) / 2);
  assert_int_equal(cu->cuMemAlloc(&o->dev_base, o->bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(o->dev_base, o->host, o->bytes), CUDA_SUCCESS);
}

/* The operand's device pointer and its host copy at the same element. */
static void *dev_ptr(const operand *o) {
  return (void *)(uintptr_t)(o->dev_base + (CUdeviceptr)(o->skew * size_of(o->type)));
}
static const void *host_ptr(const operand *o) {
  return (const char *)o->host + o->skew * size_of(o->type);
}

static void operand_free(const rt_cu *cu, operand *o) {
  if (o->dev_base) cu->cuMemFree(o->dev_base);
  free(o->host);
  memset(o, 0, sizeof *o);
}

/* The rounding unit of an output type (half an ulp, relative), and half its smallest
 * subnormal (FP8's: what the unit misses near zero). */
static double unit_of(mmt_dtype t) {
  return t == MMT_F16    ? 0x1p-11
         : t == MMT_BF16 ? 0x1p-8
         : t == MMT_E4M3 ? 0x1p-4
         : t == MMT_E5M2 ? 0x1p-3
                         : 0x1p-24;
}
/* The spacing of the output type's subnormals: a result that small is rounded to it, whatever
 * its relative error (f16's 2^-24 is 5e-8, large enough to matter). */
static double tiny_of(mmt_dtype t) {
  return t == MMT_F16    ? 0x1p-24
         : t == MMT_BF16 ? 0x1p-133
         : t == MMT_E4M3 ? 0x1p-9
         : t == MMT_E5M2 ? 0x1p-16
                         : 0x1p-149;
}

typedef struct {
  mmt_matmul_desc d;
  bool nan_c; /* C is NaN and beta is 0 */
  bool in_place;
} case_t;

/* A random descriptor's shape and epilogue (pointers set by run_case). */
static case_t random_case(int trial) {
  case_t c = {0};
  mmt_matmul_desc *d = &c.d;
  d->in_type = next() % 2 ? MMT_BF16 : MMT_F16;
  static const mmt_dtype outs[3] = {MMT_F32, MMT_F16, MMT_BF16};
  d->out_type = outs[next() % 3];
  d->order = next() % 4 == 0 ? MMT_COL_MAJOR : MMT_ROW_MAJOR;
  d->trans_a = next() % 2 ? MMT_TRANS : MMT_NO_TRANS;
  d->trans_b = next() % 2 ? MMT_TRANS : MMT_NO_TRANS;
  d->gated = d->order == MMT_ROW_MAJOR && next() % 3 == 0;
  d->m = next() % 4 == 0 ? pick(1, 8) : pick(1, 160);
  d->n = pick(1, 150);
  d->k = trial % 17 == 0 ? 0 : pick(1, 300);
  d->alpha = trial % 23 == 0 ? 0.0f : (float)(uniform() * 2);
  d->beta = next() % 3 == 0 ? 0.0f : (float)(uniform() * 2);
  c.nan_c = d->beta == 0.0f && next() % 2;
  c.in_place = d->beta != 0.0f && next() % 4 == 0;
  d->act = (mmt_activation)pick(0, 4);
  d->bias_mode = (mmt_bias)pick(0, 2);
  d->bias_type = next() % 2 ? MMT_F32 : d->out_type;
  d->batch = next() % 3 == 0 ? pick(2, 5) : 1;
  if (trial % 4 == 3) { /* FP8: K-major operands, a scale mode, fast accumulation or not */
    d->in_type = next() % 2 ? MMT_E4M3 : MMT_E5M2;
    d->b_type = next() % 2 ? MMT_E4M3 : MMT_E5M2; /* all four pairs */
    d->trans_a = d->order == MMT_ROW_MAJOR ? MMT_NO_TRANS : MMT_TRANS;
    d->trans_b = d->order == MMT_ROW_MAJOR ? MMT_TRANS : MMT_NO_TRANS;
    d->scale_mode = (mmt_scale_mode)pick(0, 2);
    if (d->scale_mode == MMT_SCALE_BLOCK && d->order == MMT_ROW_MAJOR)
      d->batch = 1, d->k = pick(100, 700); /* several K blocks */
    else if (d->scale_mode == MMT_SCALE_BLOCK)
      d->scale_mode = MMT_SCALE_TENSOR;
    d->fast_accum = (int)(next() % 2);
    if (next() % 3 == 0) { /* an FP8 D: no C, an f32 bias, its scale and amax (run_case) */
      d->out_type = next() % 2 ? MMT_E4M3 : MMT_E5M2;
      d->beta = 0.0f, c.nan_c = false, c.in_place = false;
      d->bias_type = MMT_F32;
    }
  }
  return c;
}

/* A case's operands (device buffers and host copies), from case_make to case_check. */
typedef struct {
  operand A, B, C, D, bias, srow, scol, sd, am;
  mr_host h;
  int64_t nd; /* D's elements */
  double s_d; /* an FP8 D's scale (1 without one) */
} case_bufs;

/* Stored widths and runs of op(X) rows x cols in d's order (transposed: the other way). */
static void stored(const mmt_matmul_desc *d, bool trans, int64_t rows, int64_t cols, int64_t *w,
                   int64_t *r) {
  const bool rc = (d->order == MMT_ROW_MAJOR) != trans;
  *w = rc ? cols : rows;
  *r = rc ? rows : cols;
}

/* Draws a case's leading dimensions, strides and skews, makes its operands with fresh random
 * values and points c->d at them. */
static void case_make(gc_fixture *f, case_t *c, case_bufs *cb) {
  mmt_matmul_desc *d = &c->d;
  const int64_t np = d->gated ? 2 * d->n : d->n;
  int64_t aw, ar, bw, br, cw, cr;
  stored(d, d->trans_a == MMT_TRANS, d->m, d->k, &aw, &ar);
  stored(d, d->trans_b == MMT_TRANS, d->k, np, &bw, &br);
  stored(d, false, d->m, d->n, &cw, &cr);
  d->lda = (aw > 0 ? aw : 1) + (next() % 2 ? pick(0, 9) : 0);
  d->ldb = (bw > 0 ? bw : 1) + (next() % 2 ? pick(0, 9) : 0);
  const bool fp8 = is_fp8(d->in_type); /* TMA: 16-byte pitches, strides and bases */
  if (fp8) d->lda = round16(d->lda), d->ldb = round16(d->ldb);
  d->ldc = cw + (next() % 2 ? pick(0, 5) : 0);
  const bool side = d->batch > 1 && !c->in_place && next() % 2;
  d->ldd = c->in_place ? d->ldc : side ? d->batch * cw + pick(0, 3) : cw + pick(0, 5);
  d->stride_d = side ? cw : cr * d->ldd + pick(0, 3);
  d->stride_c = c->in_place ? d->stride_d : cr * d->ldc;
  d->stride_a = d->batch > 1 && next() % 3 == 0 ? 0 : ar * d->lda + pick(0, 3);
  d->stride_b = d->batch > 1 && next() % 3 == 0 ? 0 : br * d->ldb + pick(0, 3);
  if (fp8) d->stride_a = round16(d->stride_a), d->stride_b = round16(d->stride_b);
  const int64_t na = (d->batch - 1) * d->stride_a + ar * d->lda;
  const int64_t nb = (d->batch - 1) * d->stride_b + br * d->ldb;
  const int64_t nc = (d->batch - 1) * d->stride_c + cr * d->ldc;
  const int64_t nd = (d->batch - 1) * d->stride_d + cr * d->ldd;
  /* skews: most calls aligned, some off by an element or a few */
  const int64_t skew_ab = next() % 3 == 0 && !fp8 ? pick(1, 7) : 0;
  operand A, B, C = {0}, D, bias = {0}, srow = {0}, scol = {0};
  const rt_cu *cu = f->cu;
  operand_make(cu, &A, d->in_type, na, skew_ab, -1, 1);
  operand_make(cu, &B, d->b_type != MMT_F32 ? d->b_type : d->in_type, nb,
               next() % 3 == 0 && !fp8 ? pick(1, 7) : 0, -1, 1);
  operand_make(cu, &D, d->out_type, nd, next() % 3 == 0 ? pick(1, 3) : 0, -4, 4);
  d->a = dev_ptr(&A), d->b = dev_ptr(&B), d->d = dev_ptr(&D);
  mr_host h = {host_ptr(&A), host_ptr(&B), NULL, NULL, NULL, NULL};
  if (c->in_place) {
    d->c = d->d;
    h.c = NULL; /* set below from a copy of D before the call */
  } else if (d->beta != 0.0f || c->nan_c) {
    operand_make(cu, &C, d->out_type, nc, pick(0, 2), -2, 2);
    if (c->nan_c)
      for (int64_t i = 0; i < nc + C.skew + 64; i++) mr_store(d->out_type, C.host, i, NAN);
    assert_int_equal(cu->cuMemcpyHtoD(C.dev_base, C.host, C.bytes), CUDA_SUCCESS);
    d->c = dev_ptr(&C);
    h.c = host_ptr(&C);
  }
  if (d->bias_mode != MMT_BIAS_NONE) {
    operand_make(cu, &bias, d->bias_type, d->bias_mode == MMT_BIAS_ROW ? d->m : np, pick(0, 1), -1,
                 1);
    d->bias = dev_ptr(&bias);
    h.bias = host_ptr(&bias);
  }
  /* the scales: vectors (each now and then), one float each, or the block scales' arrays */
  const int64_t kb = (d->k + 127) / 128;
  const bool modes = d->scale_mode != MMT_SCALE_VECTORS;
  const int64_t len[2] = {d->scale_mode == MMT_SCALE_TENSOR  ? 1
                          : d->scale_mode == MMT_SCALE_BLOCK ? kb * d->m
                                                             : d->m,
                          d->scale_mode == MMT_SCALE_TENSOR  ? 1
                          : d->scale_mode == MMT_SCALE_BLOCK ? (np + 127) / 128 * kb
                                                             : np};
  if (modes || next() % 4 == 0) {
    operand_make(cu, &srow, MMT_F32, len[0] > 0 ? len[0] : 1, 0, 0.5, 1.5);
    d->scale_row = dev_ptr(&srow);
    h.scale_row = host_ptr(&srow);
  }
  if (modes || next() % 4 == 0) {
    operand_make(cu, &scol, MMT_F32, len[1] > 0 ? len[1] : 1, 0, 0.5, 1.5);
    d->scale_col = dev_ptr(&scol);
    h.scale_col = host_ptr(&scol);
  }
  /* an FP8 D's scale (a power of two or three quarters of one; NULL now and then: 1) and its
   * amax (the call zeroes it first: it starts as garbage) */
  operand sd = {0}, am = {0};
  const bool out8 = is_fp8(d->out_type);
  double s_d = 1;
  if (out8) {
    s_d = ldexp(next() % 2 ? 1.0 : 0.75, (int)pick(-3, 3));
    operand_make(cu, &sd, MMT_F32, 1, 0, s_d, s_d);
    operand_make(cu, &am, MMT_F32, 1, 0, -7, -7);
    if (next() % 4 == 0)
      s_d = 1;
    else
      d->scale_d = dev_ptr(&sd);
    d->amax = next() % 4 ? dev_ptr(&am) : NULL;
  }
  *cb = (case_bufs){A, B, C, D, bias, srow, scol, sd, am, h, nd, s_d};
}

/* Calls mmt_matmul on a made case, checks D and the memory around it, frees the operands.
 * NULL when it passed, else what failed (static). */
static const char *case_check(gc_fixture *f, case_t *c, case_bufs *cb) {
  static char why[512];
  const mmt_matmul_desc *d = &c->d;
  const rt_cu *cu = f->cu;
  const operand D = cb->D, am = cb->am;
  mr_host h = cb->h;
  const int64_t nd = cb->nd;
  const double s_d = cb->s_d;
  const bool fp8 = is_fp8(d->in_type), out8 = is_fp8(d->out_type);
  void *before = malloc(D.bytes);
  assert_non_null(before);
  memcpy(before, D.host, D.bytes);
  if (c->in_place) h.c = (const char *)before + D.skew * size_of(D.type);
  mmt_status rc = mmt_matmul(f->ctx, d, NULL);
  const char *result = NULL;
  if (rc) {
    snprintf(why, sizeof why, "mmt_matmul: %s: %s", mmt_status_name(rc), mmt_errmsg(f->ctx));
    result = why;
  }
  void *after = malloc(D.bytes);
  assert_non_null(after);
  if (!rc) {
    assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyDtoH(after, D.dev_base, D.bytes), CUDA_SUCCESS);
  }
  char *in_d = calloc((size_t)(nd + D.skew + 64), 1);
  assert_non_null(in_d);
  const double unit = unit_of(d->out_type), tiny = tiny_of(d->out_type);
  const double top = d->out_type == MMT_E4M3 ? 448 : 57344; /* an FP8 D saturates */
  double amax_want = 0;
  const void *got = (const char *)after + D.skew * size_of(D.type);
  for (int64_t z = 0; z < d->batch && !result; z++)
    for (int64_t i = 0; i < d->m && !result; i++)
      for (int64_t j = 0; j < d->n && !result; j++) {
        const int64_t at = z * d->stride_d + mr_offset(d->order, 0, i, j, d->ldd);
        in_d[at + D.skew] = 1;
        double mag;
        double want = mr_element(d, &h, z, i, j, &mag);
        const double have = mr_load(d->out_type, got, at);
        if (out8) {
          amax_want = fmax(amax_want, fabs(want));
          want = fmax(-top, fmin(top, want * s_d));
          mag *= s_d;
        }
        /* FP8: wgmma's own sums keep fewer bits than fp32 between promotions (all of K with
         * fast accumulation): provisional bounds, to be set from the GPU's errors */
        const double acc = !fp8 ? (double)(d->k + 16) * 0x1p-22 : d->fast_accum ? 0x1p-7 : 0x1p-10;
        const double bound = 1.01 * unit * fabs(want) + acc * mag + tiny;
        if (!(fabs(have - want) <= bound)) {
          snprintf(why, sizeof why, "D[%lld][%lld][%lld] = %.9g, want %.9g (bound %.3g)",
                   (long long)z, (long long)i, (long long)j, have, want, bound);
          result = why;
        }
      }
  if (!result && !rc && d->amax) { /* of the values before the scale, fp32's own */
    float amax_got;
    assert_int_equal(cu->cuMemcpyDtoH(&amax_got, am.dev_base, 4), CUDA_SUCCESS);
    if (!(fabs(amax_got - amax_want) <= 1e-2 * amax_want + 1e-30)) {
      snprintf(why, sizeof why, "amax %.9g, want %.9g", (double)amax_got, amax_want);
      result = why;
    }
  }
  for (int64_t i = 0; i < nd + D.skew + 64 && !result; i++)
    if (!in_d[i] && memcmp((char *)after + i * size_of(D.type),
                           (char *)before + i * size_of(D.type), (size_t)size_of(D.type)) != 0) {
      snprintf(why, sizeof why, "element %lld of D's allocation (outside D) was written",
               (long long)i);
      result = why;
    }
  free(in_d);
  free(before);
  free(after);
  operand *all[9] = {&cb->A,    &cb->B,    &cb->C,  &cb->D, &cb->bias,
                     &cb->srow, &cb->scol, &cb->sd, &cb->am};
  for (int i = 0; i < 9; i++) operand_free(cu, all[i]);
  return result;
}

static const char *act_name(mmt_activation a) {
  static const char *const n[5] = {"none", "relu", "gelu_tanh", "gelu_erf", "silu"};
  return n[a];
}

/* Which kernel d gets (mmt_explain_matmul), for a failure's message (static). */
static const char *kernel_of(gc_fixture *f, const mmt_matmul_desc *d) {
  static char text[MMT_PARAMS_MAX + 384];
  mmt_choice ch;
  if (mmt_explain_matmul(f->ctx, d, &ch))
    snprintf(text, sizeof text, "explain: %s", mmt_errmsg(f->ctx));
  else
    snprintf(text, sizeof text, "%s %s %s (%s, computes %lldx%lldx%lld, batch %lld)",
             mmt_choice_kind_name(ch.kind), ch.template_name, ch.params, ch.epilogue,
             (long long)ch.kernel_m, (long long)ch.kernel_n, (long long)ch.kernel_k,
             (long long)ch.batch);
  return text;
}

static void describe(gc_fixture *f, const char *what_case, int trial, const mmt_matmul_desc *d,
                     const char *what) {
  fail_msg("%s %d (%s %s%s %lldx%lldx%lld, %s -> %s, alpha %g beta %g, bias %d (%s), "
           "scales %d%d (mode %d, fast %d), act %s, gated %d, batch %lld, group %d "
           "(tokens %lld), lda %lld ldb %lld ldc %lld ldd %lld, "
           "strides %lld %lld %lld %lld; kernel %s): %s",
           what_case, trial, d->order == MMT_ROW_MAJOR ? "row" : "col", d->trans_a ? "t" : "n",
           d->trans_b ? "t" : "n", (long long)d->m, (long long)d->n, (long long)d->k,
           mmt_dtype_name(d->in_type), mmt_dtype_name(d->out_type), d->alpha, d->beta,
           (int)d->bias_mode, mmt_dtype_name(d->bias_type), d->scale_row != NULL,
           d->scale_col != NULL, (int)d->scale_mode, d->fast_accum, act_name(d->act), d->gated,
           (long long)d->batch, (int)d->group_mode, (long long)d->group_tokens, (long long)d->lda,
           (long long)d->ldb, (long long)d->ldc, (long long)d->ldd, (long long)d->stride_a,
           (long long)d->stride_b, (long long)d->stride_c, (long long)d->stride_d, kernel_of(f, d),
           what);
}

/* Descriptors a run checks: 300, or $MMT_MATMUL_CASES (scripts/gpu-check.sh memcheck runs
 * fewer under compute-sanitizer). */
static int case_count(void) {
  const char *v = getenv("MMT_MATMUL_CASES");
  const int n = v ? atoi(v) : 0;
  return n > 0 ? n : 300;
}

/* Cases in chunks: each chunk's operands made, its descriptors readied at once
 * (mmt_matmul_prepare compiles their kernels on every core), then each called and checked. */
static void test_random_descriptors(void **state) {
  enum { chunk = 48 };
  gc_fixture *f = *state;
  gc_open_or_skip(f, 0);
  const int n = case_count();
  for (int first = 0; first < n; first += chunk) {
    const int count = n - first < chunk ? n - first : chunk;
    case_t c[chunk];
    case_bufs cb[chunk];
    mmt_matmul_desc descs[chunk];
    for (int i = 0; i < count; i++) {
      c[i] = random_case(first + i);
      case_make(f, &c[i], &cb[i]);
      descs[i] = c[i].d;
    }
    if (mmt_matmul_prepare(f->ctx, descs, count, 0))
      fail_msg("mmt_matmul_prepare of cases %d..%d: %s", first, first + count - 1,
               mmt_errmsg(f->ctx));
    for (int i = 0; i < count; i++) {
      const char *why = case_check(f, &c[i], &cb[i]);
      if (why) describe(f, "descriptor", first + i, &c[i].d, why);
    }
  }
}

/* A batch past grid.z's limit (65535 problems a launch) and a shared weight. */
static void test_large_batch(void **state) {
  gc_fixture *f = *state;
  gc_open_or_skip(f, 0);
  case_t c = {.d = {.order = MMT_ROW_MAJOR,
                    .trans_b = MMT_TRANS,
                    .m = 2,
                    .n = 3,
                    .k = 8,
                    .in_type = MMT_F16,
                    .out_type = MMT_F32,
                    .alpha = 1,
                    .bias_mode = MMT_BIAS_COL,
                    .act = MMT_ACT_SILU,
                    .batch = 70001}};
  case_bufs cb;
  case_make(f, &c, &cb);
  const char *why = case_check(f, &c, &cb);
  if (why) describe(f, "descriptor", 0, &c.d, why);
}

/* Routing of `total` rows to g experts: uniform, skewed (most to the first), or with empty
 * experts, as G + 1 offsets (contiguous) from `first`. */
static void routing(int64_t g, int64_t total, int64_t first, int kind, int32_t *off) {
  int64_t left = total;
  off[0] = (int32_t)first;
  for (int64_t e = 0; e < g; e++) {
    int64_t rows = e == g - 1        ? left
                   : kind == 0       ? pick(0, 2 * total / g + 1)
                   : kind == 1       ? (e == 0 ? left * 3 / 4 : pick(0, 2))
                   : next() % 3 == 0 ? 0
                                     : pick(0, total / g + 1);
    if (rows > left) rows = left;
    left -= rows;
    off[e + 1] = (int32_t)(off[e] + rows);
  }
}

/* One grouped call, from grouped_make to grouped_check. */
typedef struct {
  mmt_matmul_desc d;
  operand A, B, D, bias, scol, rows;
  mr_host h;
  int32_t *r; /* the host's copy of group_rows */
  int64_t m, n, k, g, blocks, bad_at;
  bool masked;
} grouped_t;

/* One grouped call: G experts, f16 or bf16, B stored N x K (nt) or K x N (nn), an epilogue with
 * each expert's own bias or B scales, gated now and then (B of 2N columns an expert); every
 * fourth FP8 (all four pairs, K-major, per-tensor or vector scales, fast accumulation or not);
 * its operands made with fresh random values.  bad: the offsets go down once (the call after
 * says so). */
static void grouped_make(gc_fixture *f, mmt_group_mode mode, bool bad, grouped_t *gt) {
  const rt_cu *cu = f->cu;
  const int64_t g = pick(1, 12), n = pick(1, 140), k = pick(1, 200);
  /* a quarter of the calls a decode step's few rows, fewer than the experts (contiguous: the
   * launch counts min(G, M) experts' partial tiles; masked: the small-M kernels walk them) */
  const int64_t m = next() % 4 == 0                ? pick(1, 8)
                    : mode == MMT_GROUP_CONTIGUOUS ? pick(1, 400)
                                                   : pick(1, 90);
  const bool fp8 = next() % 4 == 0;
  mmt_matmul_desc d = {.order = MMT_ROW_MAJOR,
                       .trans_b = fp8 || next() % 2 ? MMT_TRANS : MMT_NO_TRANS,
                       .m = m,
                       .n = n,
                       .k = k,
                       .in_type = next() % 2 ? MMT_F16 : MMT_BF16,
                       .alpha = (float)(uniform() + 1.5),
                       .beta = next() % 2 ? 0.0f : 0.5f,
                       .batch = g,
                       .group_mode = mode,
                       .gated = next() % 3 == 0,
                       .act = (mmt_activation)pick(0, 4),
                       .bias_mode = (mmt_bias)pick(0, 2)};
  if (fp8) {
    d.in_type = next() % 2 ? MMT_E4M3 : MMT_E5M2;
    d.b_type = next() % 2 ? MMT_E4M3 : MMT_E5M2;
    d.fast_accum = (int)(next() % 2);
  }
  const int64_t np = d.gated ? 2 * n : n; /* the product's columns */
  static const mmt_dtype outs[3] = {MMT_F32, MMT_F16, MMT_BF16};
  d.out_type = outs[next() % 3];
  d.bias_type = MMT_F32;
  d.lda = k + pick(0, 5);
  d.ldb = (d.trans_b ? k : np) + pick(0, 5);
  if (fp8) d.lda = round16(d.lda), d.ldb = round16(d.ldb); /* TMA: 16-byte pitches */
  d.ldd = d.ldc = n + pick(0, 5);
  const int64_t brows = d.trans_b ? np : k;
  d.stride_b = next() % 4 == 0 ? 0 : brows * d.ldb + pick(0, 3);
  if (fp8) d.stride_b = round16(d.stride_b);
  const bool masked = mode == MMT_GROUP_MASKED;
  if (masked) d.stride_a = m * d.lda, d.stride_d = d.stride_c = m * d.ldd;
  const int64_t blocks = masked ? g : 1; /* A, C and D: G blocks of M rows, or one */
  operand A, B, D, bias = {0}, scol = {0}, rows;
  operand_make(cu, &A, d.in_type, blocks * m * d.lda, fp8 ? 0 : pick(0, 3), -1, 1);
  operand_make(cu, &B, fp8 ? d.b_type : d.in_type, (g - 1) * d.stride_b + brows * d.ldb,
               fp8 ? 0 : pick(0, 3), -1, 1);
  operand_make(cu, &D, d.out_type, blocks * m * d.ldd, pick(0, 3), -4, 4);
  d.a = dev_ptr(&A), d.b = dev_ptr(&B), d.d = dev_ptr(&D), d.c = d.beta != 0.0f ? d.d : NULL;
  mr_host h = {host_ptr(&A), host_ptr(&B), host_ptr(&D), NULL, NULL, NULL};
  if (d.bias_mode != MMT_BIAS_NONE) {
    operand_make(cu, &bias, MMT_F32, d.bias_mode == MMT_BIAS_COL ? g * np : blocks * m, 0, -1, 1);
    d.bias = dev_ptr(&bias), h.bias = host_ptr(&bias);
  }
  if (fp8 || next() % 2) { /* B's scales: per tensor (one an expert) or by column (an expert's
                             product columns each) */
    d.scale_mode = next() % 2 ? MMT_SCALE_TENSOR : MMT_SCALE_VECTORS;
    operand_make(cu, &scol, MMT_F32, d.scale_mode == MMT_SCALE_TENSOR ? g : g * np, 0, 0.5, 1.5);
    d.scale_col = dev_ptr(&scol), h.scale_col = host_ptr(&scol);
    if (d.scale_mode == MMT_SCALE_TENSOR) d.scale_row = d.scale_col; /* A's: one float */
    h.scale_row = d.scale_mode == MMT_SCALE_TENSOR ? host_ptr(&scol) : NULL;
  }
  /* the rows: offsets from anywhere in A (rows misaligned for 16-byte loads), or counts */
  int32_t *r = calloc((size_t)g + 1, sizeof *r);
  assert_non_null(r);
  if (masked) {
    for (int64_t e = 0; e < g; e++)
      r[e] = (int32_t)(next() % 4 == 0 ? (e % 2 ? m : 0) : pick(0, m));
  } else {
    const int64_t first = pick(0, m / 4);
    routing(g, pick(0, m - first), first, (int)(next() % 3), r);
  }
  int64_t bad_at = -1;
  if (bad) { /* a count past M, or the last offset past it (the last expert's rows) */
    bad_at = masked ? pick(0, g - 1) : g - 1;
    r[masked ? bad_at : g] = (int32_t)(m + 1);
  }
  operand_make(cu, &rows, MMT_F32, g + 1, 0, 0, 0); /* 4-byte elements, overwritten */
  assert_int_equal(cu->cuMemcpyHtoD(rows.dev_base, r, (size_t)(g + 1) * 4), CUDA_SUCCESS);
  d.group_rows = (const int32_t *)dev_ptr(&rows);
  /* the rows in all, as a caller says them; a masked call's now and then unsaid (0) or wrong
   * (a hint, never a bound: a walk of the experts by fewer slices still covers them all) */
  int64_t routed = 0;
  for (int64_t e = 0; masked && e < g; e++) routed += r[e] > 0 ? r[e] : 0;
  d.group_tokens = !masked           ? r[g] - r[0]
                   : next() % 3 == 0 ? 0
                   : next() % 2 == 0 ? pick(1, g)
                                     : routed;
  *gt = (grouped_t){d, A, B, D, bias, scol, rows, h, r, m, n, k, g, blocks, bad_at, masked};
}

/* A grouped call's D (after; before: D and C before it) for the routing gt->r: each expert's
 * rows against the reference, every other row untouched.  NULL when right, else what failed
 * (static). */
static const char *grouped_verify(const grouped_t *gt, const void *before, const void *after) {
  static char why[256];
  const mmt_matmul_desc d = gt->d;
  const operand D = gt->D;
  mr_host h = gt->h;
  h.c = (const char *)before + D.skew * size_of(D.type);
  const int32_t *r = gt->r;
  const int64_t m = gt->m, n = gt->n, k = gt->k, g = gt->g;
  const bool masked = gt->masked;
  const void *got = (const char *)after + D.skew * size_of(D.type);
  const double unit = unit_of(d.out_type), tiny = tiny_of(d.out_type);
  /* the accumulation's share: FP8's as case_check's */
  const double acc = !is_fp8(d.in_type) ? (double)(k + 16) * 0x1p-22
                     : d.fast_accum     ? 0x1p-7
                                        : 0x1p-10;
  /* each row: its expert's (or none: untouched) */
  for (int64_t b = 0; b < gt->blocks; b++)
    for (int64_t i = 0; i < m; i++) {
      int64_t z = -1;
      for (int64_t e = 0; e < g && z < 0; e++) {
        const bool valid =
            masked ? r[e] >= 0 && r[e] <= m : 0 <= r[e] && r[e] <= r[e + 1] && r[e + 1] <= m;
        if (valid && (masked ? e == b && i < r[e] : i >= r[e] && i < r[e + 1])) z = e;
      }
      for (int64_t j = 0; j < n; j++) {
        const int64_t at = b * d.stride_d + i * d.ldd + j;
        const double have = mr_load(d.out_type, got, at);
        if (z < 0) {
          if (have == mr_load(d.out_type, h.c, at)) continue;
          snprintf(why, sizeof why, "row %lld of block %lld (no expert's) was written",
                   (long long)i, (long long)b);
          return why;
        }
        double mag;
        const double want = mr_element(&d, &h, z, i, j, &mag);
        const double bound = 1.01 * unit * fabs(want) + acc * mag + tiny;
        if (!(fabs(have - want) <= bound)) {
          snprintf(why, sizeof why, "expert %lld D[%lld][%lld] = %.9g, want %.9g (%s%s)",
                   (long long)z, (long long)i, (long long)j, have, want,
                   is_fp8(d.in_type) ? "FP8" : "16-bit", d.gated ? ", gated" : "");
          return why;
        }
      }
    }
  return NULL;
}

static void grouped_free(const rt_cu *cu, grouped_t *gt) {
  free(gt->r);
  operand *all[6] = {&gt->A, &gt->B, &gt->D, &gt->bias, &gt->scol, &gt->rows};
  for (int i = 0; i < 6; i++) operand_free(cu, all[i]);
}

/* Calls a made grouped case and verifies it, and (bad rows) that the next call says so;
 * frees the operands.  NULL when it passed, else what failed (static). */
static const char *grouped_check(gc_fixture *f, grouped_t *gt) {
  static char why[256];
  const rt_cu *cu = f->cu;
  const mmt_matmul_desc d = gt->d;
  const operand D = gt->D;
  void *before = malloc(D.bytes), *after = malloc(D.bytes);
  assert_non_null(before), assert_non_null(after);
  memcpy(before, D.host, D.bytes);
  mmt_status rc = mmt_matmul(f->ctx, &d, NULL);
  const char *result = NULL;
  if (rc) snprintf(why, sizeof why, "mmt_matmul: %s", mmt_errmsg(f->ctx)), result = why;
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(after, D.dev_base, D.bytes), CUDA_SUCCESS);
  if (!result) result = grouped_verify(gt, before, after);
  /* bad rows: the next call on the context says so, once */
  if (!result && gt->bad_at >= 0) {
    mmt_matmul_desc again = d;
    again.group_rows = NULL, again.group_mode = MMT_GROUP_NONE, again.group_tokens = 0;
    again.batch = 1;
    again.stride_a = again.stride_b = again.stride_c = again.stride_d = 0;
    again.scale_mode = MMT_SCALE_VECTORS, again.scale_row = again.scale_col = NULL;
    again.bias_mode = MMT_BIAS_NONE, again.bias = NULL;
    if (mmt_matmul(f->ctx, &again, NULL) != MMT_ERR_INVALID_ARG ||
        !strstr(mmt_errmsg(f->ctx), "group_rows")) {
      snprintf(why, sizeof why, "bad group_rows not reported: %s", mmt_errmsg(f->ctx));
      result = why;
    } else if (mmt_matmul(f->ctx, &again, NULL) != MMT_OK) {
      snprintf(why, sizeof why, "reported twice: %s", mmt_errmsg(f->ctx));
      result = why;
    }
    assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  }
  free(before), free(after);
  grouped_free(cu, gt);
  return result;
}

/* A grouped call captured once in a CUDA graph (prepared first: the capture compiles and
 * allocates nothing) and replayed with a new routing written to group_rows each time: the
 * host never reads the rows, and every replay computes its own routing's experts. */
static void test_grouped_graph(void **state) {
  gc_fixture *f = *state;
  gc_open_or_skip(f, 0);
  const rt_cu *cu = f->cu;
  for (int layout = 0; layout < 2; layout++) {
    const bool masked = layout == 1;
    grouped_t gt;
    grouped_make(f, masked ? MMT_GROUP_MASKED : MMT_GROUP_CONTIGUOUS, false, &gt);
    if (mmt_matmul_prepare(f->ctx, &gt.d, 1, 0)) fail_msg("prepare: %s", mmt_errmsg(f->ctx));
    CUstream st;
    CUgraph graph;
    CUgraphExec exec;
    assert_int_equal(cu->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    /* A copy from pageable memory may return before its DMA lands, and st (non-blocking) is
     * not ordered after it: without this, D's copy raced the kernel (an H200 showed D's old
     * values in a tile the kernel had written). */
    assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
    const size_t bytes = gt.D.bytes;
    void *before = malloc(bytes), *after = malloc(bytes);
    assert_non_null(before), assert_non_null(after);
    memcpy(before, gt.D.host, bytes);
    /* the same call uncaptured first: a failure below is then the capture's alone */
    if (mmt_matmul(f->ctx, &gt.d, st)) fail_msg("mmt_matmul: %s", mmt_errmsg(f->ctx));
    assert_int_equal(cu->cuStreamSynchronize(st), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyDtoH(after, gt.D.dev_base, bytes), CUDA_SUCCESS);
    const char *direct = grouped_verify(&gt, before, after);
    if (direct)
      describe(f, masked ? "masked, uncaptured" : "contiguous, uncaptured", 0, &gt.d, direct);
    assert_int_equal(cu->cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    const mmt_status rc = mmt_matmul(f->ctx, &gt.d, st);
    assert_int_equal(cu->cuStreamEndCapture(st, &graph), CUDA_SUCCESS);
    if (rc) fail_msg("mmt_matmul in the capture: %s", mmt_errmsg(f->ctx));
    assert_int_equal(cu->cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
    for (int replay = 0; replay < 4; replay++) {
      if (replay > 0) { /* a new routing, from the host to group_rows only */
        if (masked)
          for (int64_t e = 0; e < gt.g; e++) gt.r[e] = (int32_t)pick(0, gt.m);
        else
          routing(gt.g, pick(0, gt.m - gt.r[0]), gt.r[0], replay % 3, gt.r);
        assert_int_equal(cu->cuMemcpyHtoD(gt.rows.dev_base, gt.r, (size_t)(gt.g + 1) * 4),
                         CUDA_SUCCESS);
      }
      assert_int_equal(cu->cuMemcpyHtoD(gt.D.dev_base, before, bytes), CUDA_SUCCESS);
      assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS); /* the copies landed: above */
      assert_int_equal(cu->cuGraphLaunch(exec, st), CUDA_SUCCESS);
      assert_int_equal(cu->cuStreamSynchronize(st), CUDA_SUCCESS);
      assert_int_equal(cu->cuMemcpyDtoH(after, gt.D.dev_base, bytes), CUDA_SUCCESS);
      const char *why = grouped_verify(&gt, before, after);
      if (why) describe(f, masked ? "masked, replay" : "contiguous, replay", replay, &gt.d, why);
    }
    free(before), free(after);
    assert_int_equal(cu->cuGraphExecDestroy(exec), CUDA_SUCCESS);
    assert_int_equal(cu->cuGraphDestroy(graph), CUDA_SUCCESS);
    assert_int_equal(cu->cuStreamDestroy(st), CUDA_SUCCESS);
    grouped_free(cu, &gt);
  }
}

/* Grouped calls (mixture of experts), both layouts, random routings, some with bad rows; in
 * chunks readied at once, as test_random_descriptors. */
static void test_grouped(void **state) {
  enum { chunk = 40 };
  gc_fixture *f = *state;
  gc_open_or_skip(f, 0);
  const char *v = getenv("MMT_GROUPED_CASES"); /* 120, or fewer under compute-sanitizer */
  const int cases = v && atoi(v) > 0 ? atoi(v) : 120;
  for (int first = 0; first < cases; first += chunk) {
    const int count = cases - first < chunk ? cases - first : chunk;
    grouped_t gt[chunk];
    mmt_matmul_desc descs[chunk];
    for (int i = 0; i < count; i++) {
      const int trial = first + i;
      grouped_make(f, trial % 2 ? MMT_GROUP_MASKED : MMT_GROUP_CONTIGUOUS, trial % 5 == 4, &gt[i]);
      descs[i] = gt[i].d;
    }
    if (mmt_matmul_prepare(f->ctx, descs, count, 0))
      fail_msg("mmt_matmul_prepare of grouped cases %d..%d: %s", first, first + count - 1,
               mmt_errmsg(f->ctx));
    for (int i = 0; i < count; i++) {
      const char *why = grouped_check(f, &gt[i]);
      if (why)
        describe(f, gt[i].masked ? "masked case" : "contiguous case", first + i, &descs[i], why);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_grouped, gc_setup, gc_teardown),
      cmocka_unit_test_setup_teardown(test_grouped_graph, gc_setup, gc_teardown),
      cmocka_unit_test_setup_teardown(test_random_descriptors, gc_setup, gc_teardown),
      cmocka_unit_test_setup_teardown(test_large_batch, gc_setup, gc_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
