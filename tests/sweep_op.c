/* sweep_op.c -- see sweep_op.h. */
#include "sweep_op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/ref.h"
#include "matmul_ref.h"
#include "rt_gemm.h"

/* The buffers of a case: A, B, D and the three vectors. */
enum { OP_A, OP_B, OP_D, OP_BIAS, OP_SROW, OP_SCOL, OP_BUFS };

typedef struct {
  mmt_dtype type[OP_BUFS];
  size_t count[OP_BUFS]; /* elements of each allocation (0: none) */
  void *host[OP_BUFS];   /* what is uploaded */
  CUdeviceptr dev[OP_BUFS];
  float *val[2]; /* A and B as floats, from their allocations' starts */
  void *got;     /* D's allocation downloaded */
  int64_t rows[3], width[3], extent[3];
  int64_t stride[3]; /* of the batch (sw_batch_strides): A, B and D */
} op_data;

/* A kernel's type name ("f16", "e5m2", ...) as the public type (rt_dtype's table), and its
 * size; A and B of tf32 are f32 in memory. */
static mmt_dtype type_of(const char *name) {
  for (int t = MMT_F32; t <= MMT_E5M2; t++)
    if (t != MMT_TF32 && !strcmp(rt_dtype((mmt_dtype)t)->name, name)) return (mmt_dtype)t;
  return MMT_F32;
}

static size_t size_of(mmt_dtype t) { return (size_t)rt_dtype(t)->elem_bytes; }

/* Blocks of 128 covering n (block scales' KB and NB). */
static int64_t block_count(int64_t n) { return (n + 127) / 128; }

/* The sentinel of D's allocation outside D: bytes 0xa5 (a pattern no kernel computes). */
static bool is_sentinel(const void *p, size_t i, size_t elem) {
  const unsigned char *b = (const unsigned char *)p + i * elem;
  for (size_t j = 0; j < elem; j++)
    if (b[j] != 0xa5) return false;
  return true;
}

/* Whether element e of D's allocation lies outside the batch's D: before the base, or in a
 * row's padding (columns width..ld-1), of any problem (one extent after another). */
static bool d_outside(const sw_case *c, const op_data *d, size_t e) {
  const int64_t at = (int64_t)e - c->offset[2];
  if (at < 0) return true;
  const int64_t within = d->extent[2] > 0 ? at % d->extent[2] : 0;
  return within % c->ld[2] >= d->width[2];
}

static void op_data_free(const rt_cu *cu, op_data *d, bool dead) {
  for (int i = 0; i < OP_BUFS; i++) {
    free(d->host[i]);
    if (d->dev[i] && !dead) cu->cuMemFree(d->dev[i]);
  }
  free(d->val[0]);
  free(d->val[1]);
  free(d->got);
}

/* Host data: A and B random non-zero, D NaN (beta == 0) or random with the sentinel outside
 * it, the vectors random. */
static bool fill(const sw_plan *plan, const sw_case *c, op_data *d, char *why, size_t whylen) {
  const sw_kernel *k = &plan->kernels[c->kernel];
  const int64_t nb = c->batch > 1 ? c->batch : 1;
  uint64_t seed = 0x0b5eedull * (uint64_t)(c - plan->cases + 1);
  sw_operand_shape(plan, c, d->rows, d->width, d->extent);
  sw_batch_strides(plan, c, d->stride);
  const mmt_dtype in = type_of(k->dtype), out = type_of(k->op.out);
  /* a mixed op's B is of the other FP8 type */
  const char *b_dtype = k->op.mixed_fp8 ? gen_dtype_fp8_other(k->dtype) : k->dtype;
  d->type[OP_A] = in;
  d->type[OP_B] = type_of(b_dtype);
  d->type[OP_D] = out;
  d->type[OP_BIAS] = k->op.bias_f32 ? MMT_F32 : out;
  d->type[OP_SROW] = d->type[OP_SCOL] = MMT_F32;
  for (int i = 0; i < 3; i++)
    d->count[i] = (size_t)(c->offset[i] + (nb - 1) * d->stride[i] + d->extent[i]);
  d->count[OP_BIAS] = k->op.bias ? (size_t)(k->op.bias == 'r' ? c->m : c->n) : 0;
  d->count[OP_SROW] = k->op.scale_tensor ? 1 : k->op.scale_row ? (size_t)c->m : 0;
  d->count[OP_SCOL] = k->op.scale_tensor ? 1 : k->op.scale_col ? (size_t)c->n : 0;
  if (k->op.scale_block) { /* gen.h: float[KB][M] and float[ceil(N / 128)][KB] */
    d->count[OP_SROW] = (size_t)(block_count(c->k) * c->m);
    d->count[OP_SCOL] = (size_t)(block_count(c->n) * block_count(c->k));
  }
  for (int i = 0; i < OP_BUFS; i++) {
    const size_t bytes = d->count[i] * size_of(d->type[i]);
    if (!bytes) continue;
    float *v = malloc(d->count[i] * sizeof *v);
    if (!(d->host[i] = malloc(bytes)) || !v) {
      free(v);
      snprintf(why, whylen, "host: out of memory");
      return false;
    }
    tn_fill_random(v, d->count[i], &seed);
    for (size_t e = 0; e < d->count[i]; e++) {
      if (i == OP_D && d_outside(c, d, e)) {
        memset((char *)d->host[i] + e * size_of(out), 0xa5, size_of(out));
        continue;
      }
      mr_store(d->type[i], d->host[i], (int64_t)e, i == OP_D && c->beta == 0.0f ? NAN : v[e]);
    }
    free(v);
  }
  for (int i = 0; i < 2; i++) { /* A and B as the kernel reads them */
    if (!(d->val[i] = malloc(d->count[i] * sizeof(float)))) {
      snprintf(why, whylen, "host: out of memory");
      return false;
    }
    for (size_t e = 0; e < d->count[i]; e++)
      d->val[i][e] = (float)mr_load(d->type[i], d->host[i], (int64_t)e);
  }
  if (!(d->got = malloc(d->count[OP_D] * size_of(out)))) {
    snprintf(why, whylen, "host: out of memory");
    return false;
  }
  return true;
}

/* A and B of an nt problem (A M x K, B N x K, as stored at a and b) times their block scales
 * (gen.h, scale_block) into a2 and b2: the product of those is P. */
static void apply_block_scales(const sw_case *c, const op_data *d, const float *a, const float *b,
                               float *a2, float *b2) {
  const int64_t kb = block_count(c->k);
  const float *sa = d->host[OP_SROW], *sb = d->host[OP_SCOL];
  for (int64_t i = 0; i < c->m; i++)
    for (int64_t k = 0; k < c->k; k++)
      a2[i * c->ld[0] + k] = a[i * c->ld[0] + k] * sa[k / 128 * c->m + i];
  for (int64_t j = 0; j < c->n; j++)
    for (int64_t k = 0; k < c->k; k++)
      b2[j * c->ld[1] + k] = b[j * c->ld[1] + k] * sb[j / 128 * kb + k / 128];
}

/* x of gen.h's formula for product element (i, j) of problem z, P its product. */
static double x_of(const sw_kernel *k, const sw_case *c, const op_data *d, double p, int64_t i,
                   int64_t j) {
  double v = (double)c->alpha * p;
  if (k->op.scale_row || k->op.scale_tensor)
    v *= mr_load(MMT_F32, d->host[OP_SROW], k->op.scale_tensor ? 0 : i);
  if (k->op.scale_col || k->op.scale_tensor)
    v *= mr_load(MMT_F32, d->host[OP_SCOL], k->op.scale_tensor ? 0 : j);
  if (k->op.bias) v += mr_load(d->type[OP_BIAS], d->host[OP_BIAS], k->op.bias == 'r' ? i : j);
  return v;
}

/* D of problem z against the float64 expression, and the sentinels. */
static bool check(const sw_plan *plan, const sw_case *c, op_data *d, char *why, size_t whylen) {
  const sw_kernel *k = &plan->kernels[c->kernel];
  const mmt_dtype out = d->type[OP_D];
  for (size_t e = 0; e < d->count[OP_D]; e++)
    if (d_outside(c, d, e) && !is_sentinel(d->got, e, size_of(out))) {
      snprintf(why, whylen, "D's allocation written outside D at element %zu", e);
      return false;
    }
  const int64_t nb = c->batch > 1 ? c->batch : 1, n_out = d->width[2];
  double *prod = malloc((size_t)(c->m * c->n) * sizeof *prod);
  /* block scales (one problem, layout nt): A and B scaled first */
  float *a2 = k->op.scale_block ? malloc((size_t)d->extent[0] * sizeof *a2) : NULL;
  float *b2 = k->op.scale_block ? malloc((size_t)d->extent[1] * sizeof *b2) : NULL;
  double *want = malloc((size_t)(c->m * n_out) * sizeof *want);
  float *have = malloc((size_t)(c->m * n_out) * sizeof *have);
  bool ok = prod && want && have && (!k->op.scale_block || (a2 && b2));
  if (!ok) snprintf(why, whylen, "host: out of memory");
  /* the looser tolerance of the inputs' and D's types (products of 16-bit and FP8 inputs are
   * exact; an f32 D of tf32 math, or of FP8 sums, wgmma's own accumulation between
   * promotions, is held to tf32's) */
  const bool loose = !strcmp(k->dtype, "tf32") || gen_dtype_fp8(k->dtype);
  const char *tol = !strcmp(k->op.out, "f32") && loose ? "tf32"
                    : !strcmp(k->op.out, "e4m3")       ? "e4m3_d" /* an FP8 D's rounding */
                    : !strcmp(k->op.out, "e5m2")       ? "e5m2_d"
                                                       : k->op.out;
  double act_tol = 0.0, max_tol;
  tn_tolerance(tol, &act_tol, &max_tol);
  for (int64_t z = 0; z < nb && ok; z++) {
    ut_err err;
    const float *a = d->val[0] + c->offset[0] + z * d->stride[0];
    const float *b = d->val[1] + c->offset[1] + z * d->stride[1];
    if (k->op.scale_block) {
      apply_block_scales(c, d, a, b, a2, b2);
      a = a2, b = b2;
    }
    if (tn_ref_gemm_layout(k->layout, c->m, c->n, c->k, a, c->ld[0], b, c->ld[1], prod, c->n, 1,
                           &err)) {
      snprintf(why, whylen, "host: %s", err.msg);
      ok = false;
      break;
    }
    const int64_t base = c->offset[2] + z * d->extent[2];
    for (int64_t i = 0; i < c->m; i++)
      for (int64_t j = 0; j < n_out; j++) {
        const int64_t at = base + i * c->ld[2] + j;
        const double c0 = c->beta != 0.0f ? c->beta * mr_load(out, d->host[OP_D], at) : 0.0;
        double y, arg; /* arg: the magnitude the activation's error scales with */
        if (k->op.gated) {
          const double gate = x_of(k, c, d, prod[i * c->n + 2 * j], i, 2 * j);
          const double up = x_of(k, c, d, prod[i * c->n + 2 * j + 1], i, 2 * j + 1);
          y = mr_act((mmt_activation)k->op.act, gate) * up + c0;
          arg = fabs(gate * up);
        } else {
          const double x = x_of(k, c, d, prod[i * c->n + j], i, j) + c0;
          y = mr_act((mmt_activation)k->op.act, x);
          arg = fabs(x);
        }
        want[i * n_out + j] = y;
        have[i * n_out + j] = (float)mr_load(out, d->got, at);
        /* GELU and SiLU squash a large negative argument to nearly 0 (GELU(-6.16) is
         * -1.9e-11), where fp32's formula keeps the argument's precision, not the result's
         * (7e-13 off, 3.7% of it: H100, tf32 1 x 1 x 257): an element within the relative
         * tolerance of its argument is the reference's.  Else a lone such element, as a 1 x 1
         * D is, would be judged against its own tiny magnitude. */
        if (k->op.act && fabs(have[i * n_out + j] - y) <= act_tol * arg)
          have[i * n_out + j] = (float)y;
      }
    tn_check chk;
    tn_compare(c->m, n_out, have, n_out, want, n_out, tol, &chk);
    if (!chk.pass) {
      snprintf(why, whylen,
               "wrong D of problem %lld: rel_err %.3g, max_err %.3g, %lld NaN/Inf (first at row "
               "%lld, column %lld)",
               (long long)z, chk.rel_err, chk.max_err, (long long)chk.bad_count,
               (long long)chk.bad_row, (long long)chk.bad_col);
      ok = false;
    }
  }
  free(prod);
  free(want);
  free(have);
  free(a2);
  free(b2);
  return ok;
}

mmt_status sw_run_op_case(const rt_cu *cu, const rt_kernel *k, const sw_plan *plan, int i,
                          bool *pass, bool *dead, char *why, size_t whylen) {
  const sw_case *c = &plan->cases[i];
  op_data d;
  mmt_status rc = MMT_OK;
  ut_err e = {{0}}, *err = &e;
  memset(&d, 0, sizeof d);
  *pass = *dead = false;
  if (!fill(plan, c, &d, why, whylen)) {
    op_data_free(cu, &d, false);
    return MMT_OK;
  }
  for (int b = 0; b < OP_BUFS; b++) {
    const size_t bytes = d.count[b] * size_of(d.type[b]);
    if (!bytes) continue;
    RT_CU_CHECK(cu, cuMemAlloc(&d.dev[b], bytes));
    RT_CU_CHECK(cu, cuMemcpyHtoD(d.dev[b], d.host[b], bytes));
  }
  const bool many = c->batch > 1;
  const CUdeviceptr dptr =
      d.dev[OP_D] + (CUdeviceptr)(c->offset[2] * (int64_t)size_of(d.type[OP_D]));
  const rt_epilogue epi = {.d = dptr,
                           .ldd = c->ld[2],
                           .bias = d.dev[OP_BIAS],
                           .scale_row = d.dev[OP_SROW],
                           .scale_col = d.dev[OP_SCOL],
                           .batch_a = many ? d.stride[0] : 0,
                           .batch_b = many ? d.stride[1] : 0,
                           .batch_c = many ? d.extent[2] : 0,
                           .batch_d = many ? d.extent[2] : 0};
  const int64_t ie = gen_dtype_size(plan->kernels[c->kernel].dtype);
  const rt_gemm_args args = {.m = c->m,
                             .n = c->n,
                             .k = c->k,
                             .alpha = c->alpha,
                             .beta = c->beta,
                             .a = d.dev[OP_A] + (CUdeviceptr)(c->offset[0] * ie),
                             .b = d.dev[OP_B] + (CUdeviceptr)(c->offset[1] * ie),
                             .c = dptr,
                             .lda = c->ld[0],
                             .ldb = c->ld[1],
                             .ldc = c->ld[2],
                             .epi = &epi,
                             .batch = c->batch > 1 ? c->batch : 1};
  if ((rc = rt_kernel_launch(k, &args, NULL, err))) goto cleanup;
  RT_CU_CHECK(cu, cuCtxSynchronize());
  RT_CU_CHECK(cu, cuMemcpyDtoH(d.got, d.dev[OP_D], d.count[OP_D] * size_of(d.type[OP_D])));
  *pass = check(plan, c, &d, why, whylen);
cleanup:
  if (rc) {
    snprintf(why, whylen, "%s", e.msg);
    *dead = cu->cuCtxSynchronize() != CUDA_SUCCESS;
    rc = MMT_OK; /* the case's failure, reported as such */
  }
  op_data_free(cu, &d, *dead);
  return rc;
}
