/*
 * test_gemm_gpu.c -- mmt_gemm end to end on the GPU (skipped without one), checked against
 * a float64 CPU reference computed from the caller's view of the call (not from the kernel
 * problem mmt_gemm maps it to):
 *   - both storage orders x all four transpose combinations, on ragged shapes with leading
 *     dimensions above the minimum, alpha and beta not 1 and 0, beta == 0 over a NaN C;
 *   - BLAS's special cases: alpha == 0 (A and B full of NaN, never read), K == 0, beta == 1
 *     with nothing to add (C untouched);
 *   - tuned and untuned problems: rows inserted for the kernel problem of a call (so a
 *     column-major call finds the row of its swapped row-major problem, and a GEMV Mx1xK the
 *     row of its canonical 1xMxK) make the choice EXACT;
 *   - GEMVs at their minimum leading dimensions (vectors of unit stride), either side;
 *   - many host threads calling mmt_gemm on one context at once, each on its own stream;
 *   - f16, bf16 and tf32 (untuned: the dispatcher's defaults) in every order and transpose,
 *     matrices of one row among them (their pitch never steps: the kernel gets another).
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "db.h"
#include "half16.h"
#include "gen.h"
#include "mmtune.h"
#include "rt_choose.h"
#include "rt_device.h"
#include "rt_driver.h"
#include "rt_gemm.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct {
  char dir[64];
  char db_path[128];
  char device[128];
  const rt_cu *cu;
} fixture;

/* ---- host-side matrices in the caller's view ---- */

typedef struct {
  mmt_order order;
  mmt_transpose ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  mmt_dtype dtype;
} call;

/* Bytes of one element of the call's matrices. */
static size_t elem_bytes(const call *c) { return c->dtype == MMT_F16 || c->dtype == MMT_BF16 ? 2 : 4; }

/* v as the call's dtype holds it (the host keeps floats; 16-bit values are rounded once). */
static float as_dtype(const call *c, float v) {
  if (c->dtype == MMT_F16) return th_f16_to_f32(th_f32_to_f16(v));
  if (c->dtype == MMT_BF16) return th_bf16_to_f32(th_f32_to_bf16(v));
  return v;
}

/* Host floats to device memory in the call's dtype. */
static void upload(const rt_cu *cu, const call *c, CUdeviceptr dst, const float *src, int64_t n) {
  if (n == 0) return;
  if (elem_bytes(c) == 4) {
    assert_int_equal(cu->cuMemcpyHtoD(dst, src, (size_t)n * 4), CUDA_SUCCESS);
    return;
  }
  uint16_t *h = malloc((size_t)n * 2);
  assert_non_null(h);
  for (int64_t i = 0; i < n; i++)
    h[i] = c->dtype == MMT_F16 ? th_f32_to_f16(src[i]) : th_f32_to_bf16(src[i]);
  assert_int_equal(cu->cuMemcpyHtoD(dst, h, (size_t)n * 2), CUDA_SUCCESS);
  free(h);
}

static void download(const rt_cu *cu, const call *c, float *dst, CUdeviceptr src, int64_t n) {
  if (n == 0) return;
  if (elem_bytes(c) == 4) {
    assert_int_equal(cu->cuMemcpyDtoH(dst, src, (size_t)n * 4), CUDA_SUCCESS);
    return;
  }
  uint16_t *h = malloc((size_t)n * 2);
  assert_non_null(h);
  assert_int_equal(cu->cuMemcpyDtoH(h, src, (size_t)n * 2), CUDA_SUCCESS);
  for (int64_t i = 0; i < n; i++)
    dst[i] = c->dtype == MMT_F16 ? th_f16_to_f32(h[i]) : th_bf16_to_f32(h[i]);
  free(h);
}

/* Relative Frobenius error allowed: fp32 accumulation of exact products (f32), or of
 * products of 10-bit mantissas (tf32, whose inputs may be truncated), and the result rounded
 * to 11 or 8 bits (f16, bf16). */
static double tolerance(const call *c) {
  switch (c->dtype) {
    case MMT_TF32: return 2e-3;
    case MMT_F16: return 2e-3;
    case MMT_BF16: return 1e-2;
    default: return 1e-5;
  }
}

/* Rows and columns of the stored A, B, C (op(A) is m x k: A is k x m when transposed). */
static int64_t stored_elems(mmt_order o, int64_t rows, int64_t cols, int64_t ld) {
  return o == MMT_ROW_MAJOR ? rows * ld : cols * ld;
}
static int64_t at(mmt_order o, int64_t i, int64_t j, int64_t ld) {
  return o == MMT_ROW_MAJOR ? i * ld + j : i + j * ld;
}

/* The smallest legal leading dimensions of c, plus pad. */
static void set_lds(call *c, int64_t pad) {
  bool row = c->order == MMT_ROW_MAJOR;
  int64_t a_rows = c->ta ? c->k : c->m, a_cols = c->ta ? c->m : c->k;
  int64_t b_rows = c->tb ? c->n : c->k, b_cols = c->tb ? c->k : c->n;
  c->lda = (row ? a_cols : a_rows) + pad;
  c->ldb = (row ? b_cols : b_rows) + pad;
  c->ldc = (row ? c->n : c->m) + pad;
  if (c->lda < 1) c->lda = 1;
  if (c->ldb < 1) c->ldb = 1;
  if (c->ldc < 1) c->ldc = 1;
}

static float rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Device buffers of one call, and its host inputs. */
typedef struct {
  call c;
  int64_t na, nb, nc;
  float *a, *b, *c0, *out;
  CUdeviceptr da, db, dc;
} job;

static void job_init(const rt_cu *cu, job *j, const call *c, uint64_t seed, bool nan_ab) {
  memset(j, 0, sizeof *j);
  j->c = *c;
  j->na = stored_elems(c->order, c->ta ? c->k : c->m, c->ta ? c->m : c->k, c->lda);
  j->nb = stored_elems(c->order, c->tb ? c->n : c->k, c->tb ? c->k : c->n, c->ldb);
  j->nc = stored_elems(c->order, c->m, c->n, c->ldc);
  const size_t eb = elem_bytes(c);
  j->a = malloc((size_t)(j->na + 1) * 4);
  j->b = malloc((size_t)(j->nb + 1) * 4);
  j->c0 = malloc((size_t)(j->nc + 1) * 4);
  j->out = malloc((size_t)(j->nc + 1) * 4);
  assert_true(j->a && j->b && j->c0 && j->out);
  for (int64_t i = 0; i < j->na; i++) j->a[i] = nan_ab ? NAN : as_dtype(c, rnd(&seed));
  for (int64_t i = 0; i < j->nb; i++) j->b[i] = nan_ab ? NAN : as_dtype(c, rnd(&seed));
  /* beta == 0: C starts as NaN, which must not propagate (nor stay, unless it is padding). */
  for (int64_t i = 0; i < j->nc; i++) j->c0[i] = c->beta == 0.0f ? NAN : as_dtype(c, rnd(&seed));
  assert_int_equal(cu->cuMemAlloc(&j->da, (size_t)(j->na + 1) * eb), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&j->db, (size_t)(j->nb + 1) * eb), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&j->dc, (size_t)(j->nc + 1) * eb), CUDA_SUCCESS);
  upload(cu, c, j->da, j->a, j->na);
  upload(cu, c, j->db, j->b, j->nb);
}

/* C back to its initial contents (before each run). */
static void job_reset_c(const rt_cu *cu, job *j) { upload(cu, &j->c, j->dc, j->c0, j->nc); }

static void job_free(const rt_cu *cu, job *j) {
  cu->cuMemFree(j->da);
  cu->cuMemFree(j->db);
  cu->cuMemFree(j->dc);
  free(j->a);
  free(j->b);
  free(j->c0);
  free(j->out);
}

static mmt_status job_run(mmt_context *ctx, job *j, CUstream stream) {
  const call *c = &j->c;
  return mmt_gemm(ctx, c->order, c->ta, c->tb, c->m, c->n, c->k, c->alpha,
                  (const void *)(uintptr_t)j->da, c->lda, (const void *)(uintptr_t)j->db, c->ldb,
                  c->beta, (void *)(uintptr_t)j->dc, c->ldc, c->dtype, stream);
}

/* Checks j->out (C after the call) against alpha * op(A) op(B) + beta * C0 in float64:
 * relative Frobenius error within the dtype's tolerance over C, and every element outside C
 * (padding) untouched.
 * Returns a message, or NULL when it matches. */
static const char *job_check(job *j, char *msg, size_t len) {
  const call *c = &j->c;
  double num = 0, den = 0;
  bool *inside = calloc((size_t)j->nc + 1, 1);
  assert_non_null(inside);
  for (int64_t i = 0; i < c->m; i++)
    for (int64_t jj = 0; jj < c->n; jj++) {
      double acc = 0;
      if (c->alpha != 0.0f)
        for (int64_t p = 0; p < c->k; p++) {
          float av = c->ta ? j->a[at(c->order, p, i, c->lda)] : j->a[at(c->order, i, p, c->lda)];
          float bv = c->tb ? j->b[at(c->order, jj, p, c->ldb)] : j->b[at(c->order, p, jj, c->ldb)];
          acc += (double)av * bv;
        }
      int64_t ci = at(c->order, i, jj, c->ldc);
      inside[ci] = true;
      double ref = (double)c->alpha * acc + (c->beta == 0.0f ? 0.0 : (double)c->beta * j->c0[ci]);
      double d = (double)j->out[ci] - ref;
      if (isnan(d)) {
        snprintf(msg, len, "C(%lld, %lld) = %g, want %g", (long long)i, (long long)jj,
                 j->out[ci], ref);
        free(inside);
        return msg;
      }
      num += d * d;
      den += ref * ref;
    }
  for (int64_t i = 0; i < j->nc; i++)
    if (!inside[i] && memcmp(&j->out[i], &j->c0[i], 4) != 0) {
      snprintf(msg, len, "wrote outside C: element %lld", (long long)i);
      free(inside);
      return msg;
    }
  free(inside);
  double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  if (rel <= tolerance(c)) return NULL;
  snprintf(msg, len, "relative error %g", rel);
  return msg;
}

static void describe(const call *c, char *out, size_t len) {
  snprintf(out, len, "%s %s %c%c %lldx%lldx%lld ld %lld/%lld/%lld alpha %g beta %g",
           mmt_dtype_name(c->dtype), c->order == MMT_ROW_MAJOR ? "row" : "col",
           c->ta ? 't' : 'n', c->tb ? 't' : 'n',
           (long long)c->m, (long long)c->n, (long long)c->k, (long long)c->lda,
           (long long)c->ldb, (long long)c->ldc, c->alpha, c->beta);
}

/* Runs c through mmt_gemm twice (the second call is warm) and checks each result. */
static void run_call(const fixture *f, mmt_context *ctx, const call *c, uint64_t seed,
                     bool nan_ab) {
  job j;
  char what[160], msg[160];
  describe(c, what, sizeof what);
  job_init(f->cu, &j, c, seed, nan_ab);
  for (int rep = 0; rep < 2; rep++) {
    job_reset_c(f->cu, &j);
    mmt_status rc = job_run(ctx, &j, NULL);
    if (rc) fail_msg("%s: %s: %s", what, mmt_status_name(rc), mmt_errmsg(ctx));
    assert_int_equal(f->cu->cuCtxSynchronize(), CUDA_SUCCESS);
    download(f->cu, c, j.out, j.dc, j.nc);
    const char *bad = job_check(&j, msg, sizeof msg);
    if (bad) fail_msg("%s (run %d): %s", what, rep + 1, bad);
  }
  job_free(f->cu, &j);
}

/* ---- fixture ---- */

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  snprintf(f->dir, sizeof f->dir, "/tmp/mmt_gemm_gpu_XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->db_path, sizeof f->db_path, "%s/t.db", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", f->dir);
  free(f);
  return 0;
}

/* Device name and driver, or skip. */
static void gpu_or_skip(fixture *f) {
  rt_device dev;
  ut_err e;
  mmt_status rc = rt_device_open(0, &dev, &e);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE) skip();
  assert_int_equal(rc, MMT_OK);
  snprintf(f->device, sizeof f->device, "%s", dev.info.name);
  rt_device_close(&dev);
  assert_int_equal(rt_driver(&f->cu, &e), MMT_OK);
}

static mmt_context *open_ctx(const fixture *f) {
  mmt_options o = {.db_path = f->db_path, .cache_dir = f->dir};
  mmt_context *ctx = NULL;
  mmt_status rc = mmt_open(&ctx, 0, &o);
  if (rc) fail_msg("mmt_open: %s: %s", mmt_status_name(rc), mmt_errmsg(ctx));
  return ctx;
}

/* A verified-looking row for (template, params) on the kernel problem of c. */
static void insert_row(const fixture *f, const char *tname, const char *params, const call *c) {
  db_handle *db = NULL;
  gen_template *t = NULL;
  ut_err e;
  assert_int_equal(db_open(f->db_path, false, &db, &e), MMT_OK);
  assert_int_equal(gen_load_named(tname, &t, &e), MMT_OK);
  mmt_problem p = {c->order, c->ta, c->tb, c->m, c->n, c->k, c->lda, c->ldb, c->ldc, MMT_F32};
  rt_gemm_kernel_problem kp;
  rt_gemm_map(&p, &kp);
  db_result r;
  memset(&r, 0, sizeof r);
  snprintf(r.device.name, sizeof r.device.name, "%s", f->device);
  snprintf(r.device.uuid, sizeof r.device.uuid, "GPU-test");
  snprintf(r.nvrtc_version, sizeof r.nvrtc_version, "13.0");
  snprintf(r.template_name, sizeof r.template_name, "%s", tname);
  snprintf(r.template_hash, sizeof r.template_hash, "%s", gen_source_hash(t));
  snprintf(r.params, sizeof r.params, "%s", params);
  r.problem = (db_problem){.dtype = "f32", .m = kp.m, .n = kp.n, .k = kp.k};
  snprintf(r.problem.layout, sizeof r.problem.layout, "%.2s", kp.layout);
  r.status = DB_OK;
  r.ms_min = r.ms_median = r.ms_max = 0.01;
  r.runs = 10;
  r.tflops = 1;
  r.regs = r.shared_bytes = r.local_bytes = -1;
  assert_int_equal(db_insert(db, &r, &e), MMT_OK);
  gen_free(t);
  db_close(db);
}

/* ---- tests ---- */

/* Every order and transpose combination on ragged shapes, untuned (template defaults). */
static void test_orders_and_transposes(void **state) {
  fixture *f = *state;
  gpu_or_skip(f);
  mmt_context *ctx = open_ctx(f);
  static const struct {
    int64_t m, n, k, pad;
    float alpha, beta;
  } shapes[] = {{1, 1, 1, 0, 1.0f, 0.0f},     {37, 53, 29, 3, 1.5f, -0.5f},
                {130, 67, 257, 1, -1.0f, 0.0f}, {64, 64, 64, 0, 0.5f, 2.0f},
                {300, 260, 40, 4, 1.0f, 1.0f}, {33, 1, 100, 5, 2.0f, 0.0f},
                {33, 1, 100, 0, 2.0f, 0.5f},   {1, 45, 77, 0, 1.0f, -1.0f},
                {1, 1, 50, 0, 1.0f, 0.0f},     {260, 1, 512, 0, 1.0f, 0.0f},
                {1, 260, 512, 0, 1.0f, 1.0f}};
  uint64_t seed = 1;
  for (int o = 0; o < 2; o++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (int s = 0; s < COUNT(shapes); s++) {
          call c = {(mmt_order)o, (mmt_transpose)ta, (mmt_transpose)tb, shapes[s].m, shapes[s].n,
                    shapes[s].k, 0, 0, 0, shapes[s].alpha, shapes[s].beta, MMT_F32};
          set_lds(&c, shapes[s].pad);
          run_call(f, ctx, &c, seed++, false);
        }
  mmt_close(ctx);
}

/* The tensor-core dtypes through mmt_gemm, untuned: both orders, all transposes, ragged and
 * aligned shapes (16-byte rows get the aligned kernels, others the element-wise paths),
 * alpha/beta, beta == 0 over NaN. */
static void test_dtypes(void **state) {
  fixture *f = *state;
  gpu_or_skip(f);
  mmt_context *ctx = open_ctx(f);
  static const mmt_dtype dtypes[] = {MMT_F16, MMT_BF16, MMT_TF32};
  static const struct {
    int64_t m, n, k, pad;
    float alpha, beta;
  } shapes[] = {{1, 1, 1, 0, 1.0f, 0.0f},        {37, 53, 29, 3, 1.5f, -0.5f},
                {130, 67, 257, 1, -1.0f, 0.0f},  {256, 128, 64, 0, 1.0f, 0.0f},
                {300, 264, 136, 8, 0.5f, 2.0f},  {264, 1, 136, 0, 1.0f, 0.5f},
                {1, 264, 136, 0, 1.0f, 0.0f},
                /* one-row matrices whose pitch the kernel gets rounded up (gen_one_row_pitches):
                 * an odd C row at batch 1, an odd A row, K = 1 (A and B one row each) */
                {1, 263, 136, 0, 1.0f, 0.5f},    {1, 264, 135, 0, 1.0f, 0.0f},
                {40, 72, 1, 0, 1.0f, 0.5f}};
  uint64_t seed = 100;
  for (int d = 0; d < COUNT(dtypes); d++)
    for (int o = 0; o < 2; o++)
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
          for (int s = 0; s < COUNT(shapes); s++) {
            call c = {(mmt_order)o,  (mmt_transpose)ta, (mmt_transpose)tb, shapes[s].m,
                      shapes[s].n,   shapes[s].k,       0,                 0,
                      0,             shapes[s].alpha,   shapes[s].beta,    dtypes[d]};
            set_lds(&c, shapes[s].pad);
            run_call(f, ctx, &c, seed++, false);
          }
  mmt_close(ctx);
}

/* alpha == 0 and K == 0: C = beta * C without reading A or B; beta == 1 too: nothing. */
static void test_blas_special_cases(void **state) {
  fixture *f = *state;
  gpu_or_skip(f);
  mmt_context *ctx = open_ctx(f);
  for (int o = 0; o < 2; o++) {
    call c = {(mmt_order)o, MMT_TRANS, MMT_NO_TRANS, 45, 38, 70, 0, 0, 0, 0.0f, 2.5f, MMT_F32};
    set_lds(&c, 2);
    run_call(f, ctx, &c, 11, true); /* A, B all NaN: must not be read */
    c.beta = 0.0f;
    run_call(f, ctx, &c, 12, true);
    c.beta = 1.0f;
    run_call(f, ctx, &c, 13, true);
    c.alpha = 1.0f;
    c.k = 0;
    set_lds(&c, 1);
    run_call(f, ctx, &c, 14, false);
    c.beta = -1.0f;
    run_call(f, ctx, &c, 15, false);
  }
  /* alpha == 0 with beta == 1 launches nothing: A, B and C may be anything. */
  assert_int_equal(mmt_gemm(ctx, MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, 4, 4, 4, 0.0f, NULL, 4,
                            NULL, 4, 1.0f, (void *)(uintptr_t)4096, 4, MMT_F32, NULL),
                   MMT_OK);
  rt_dispatch_stats st;
  rt_dispatch_get_stats(ctx, &st);
  /* Per order, three calls launch (beta != 1), twice each; the two with beta == 1 do not. */
  assert_int_equal(st.launches, 2 * 3 * 2);
  mmt_close(ctx);
}

/* Tuned rows for the kernel problem of a call are found EXACT, including for column-major
 * calls (stored under the swapped row-major problem), and give the right result. */
static void test_tuned_layouts(void **state) {
  fixture *f = *state;
  gpu_or_skip(f);
  static const struct {
    mmt_order o;
    mmt_transpose ta, tb;
    int64_t m, n, k;
    const char *params;
    const char *layout; /* the kernel problem's */
  } tuned[] = {
      {MMT_ROW_MAJOR, MMT_TRANS, MMT_NO_TRANS, 132, 68, 260, "vec=4,stages=3", "tn"},
      {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_TRANS, 130, 67, 257, "vec=1,stages=2", "nt"},
      {MMT_COL_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, 300, 260, 40, "vec=4", "nn"},
      {MMT_COL_MAJOR, MMT_TRANS, MMT_NO_TRANS, 96, 200, 512, "vec=4,stages=3", "nt"},
      {MMT_COL_MAJOR, MMT_TRANS, MMT_TRANS, 64, 48, 2048,
       "bm=64,bn=64,bk=16,tm=4,tn=4,vec=4,stages=3,group=1,split=8", "tt"},
      /* GEMVs in their canonical form (rt_gemm.h): Mx1xK with A stored transposed is the
       * row of 1xMxK nn, with A as is the row of 1xMxK nt. */
      {MMT_ROW_MAJOR, MMT_TRANS, MMT_NO_TRANS, 264, 1, 520, "vec=4,stages=3", "nn"},
      {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, 264, 1, 520, "vec=4,stages=2", "nt"},
  };
  for (int i = 0; i < COUNT(tuned); i++) {
    call c = {tuned[i].o, tuned[i].ta, tuned[i].tb, tuned[i].m, tuned[i].n, tuned[i].k,
              0, 0, 0, 1.25f, 0.0f, MMT_F32};
    set_lds(&c, 0);
    insert_row(f, "reg_tiled", tuned[i].params, &c);
  }
  mmt_context *ctx = open_ctx(f);
  for (int i = 0; i < COUNT(tuned); i++) {
    call c = {tuned[i].o, tuned[i].ta, tuned[i].tb, tuned[i].m, tuned[i].n, tuned[i].k,
              0, 0, 0, 1.25f, 0.0f, MMT_F32};
    set_lds(&c, 0);
    mmt_problem p = {c.order, c.ta, c.tb, c.m, c.n, c.k, c.lda, c.ldb, c.ldc, MMT_F32};
    mmt_choice d;
    assert_int_equal(mmt_explain(ctx, &p, &d), MMT_OK);
    if (d.kind != MMT_CHOICE_EXACT)
      fail_msg("tuned case %d: %s %s %s", i, mmt_choice_kind_name(d.kind), d.template_name, d.params);
    assert_string_equal(d.template_name, "reg_tiled");
    assert_string_equal(d.layout, tuned[i].layout);
    assert_true(d.expected_ms == 0.01);
    run_call(f, ctx, &c, 100 + (uint64_t)i, false);
    c.beta = -0.75f; /* same kernel, beta != 0 */
    run_call(f, ctx, &c, 200 + (uint64_t)i, false);
    /* An untuned neighbour (NEAREST or DEFAULT) with padded leading dimensions: still right. */
    c.m += 3;
    set_lds(&c, 5);
    run_call(f, ctx, &c, 300 + (uint64_t)i, false);
  }
  mmt_close(ctx);
}

/* ---- threads ---- */

#define THREADS 8
#define CALLS_PER_THREAD 24

typedef struct {
  const fixture *f;
  mmt_context *ctx;
  pthread_barrier_t *start;
  job jobs[CALLS_PER_THREAD];
  CUstream stream;
  mmt_status rc[CALLS_PER_THREAD];
  char err[CALLS_PER_THREAD][256];
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  pthread_barrier_wait(w->start);
  for (int i = 0; i < CALLS_PER_THREAD; i++) {
    w->rc[i] = job_run(w->ctx, &w->jobs[i], w->stream);
    if (w->rc[i]) snprintf(w->err[i], sizeof w->err[i], "%s", mmt_errmsg(w->ctx));
  }
  return NULL;
}

/* THREADS threads call mmt_gemm on one context at the same time, each on its own stream: the
 * same few problems (first calls race to build them) in all orders and layouts, mixed with
 * each thread's own shapes.  Every result must be right and the cache consistent. */
static void test_threads(void **state) {
  fixture *f = *state;
  gpu_or_skip(f);
  mmt_context *ctx = open_ctx(f);
  static worker w[THREADS];
  pthread_barrier_t start;
  assert_int_equal(pthread_barrier_init(&start, NULL, THREADS), 0);
  int64_t distinct = 0;
  for (int t = 0; t < THREADS; t++) {
    w[t].f = f;
    w[t].ctx = ctx;
    w[t].start = &start;
    assert_int_equal(f->cu->cuStreamCreate(&w[t].stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    for (int i = 0; i < CALLS_PER_THREAD; i++) {
      bool shared = i % 2 == 0; /* even calls: problems every thread makes */
      int v = shared ? i / 2 % 8 : t * CALLS_PER_THREAD + i;
      call c = {(mmt_order)(v % 2), (mmt_transpose)(v / 2 % 2), (mmt_transpose)(v / 4 % 2),
                40 + v % 7 * 13, 24 + v % 5 * 11, 16 + v % 3 * 29, 0, 0, 0, 1.0f, 0.5f, MMT_F32};
      set_lds(&c, v % 3);
      job_init(f->cu, &w[t].jobs[i], &c, (uint64_t)(t * 1000 + i + 1), false);
      job_reset_c(f->cu, &w[t].jobs[i]);
      distinct += !shared;
    }
  }
  /* the uploads from pageable memory landed: the workers' streams are not ordered after them */
  assert_int_equal(f->cu->cuCtxSynchronize(), CUDA_SUCCESS);
  pthread_t tid[THREADS];
  for (int t = 0; t < THREADS; t++)
    assert_int_equal(pthread_create(&tid[t], NULL, worker_main, &w[t]), 0);
  for (int t = 0; t < THREADS; t++) assert_int_equal(pthread_join(tid[t], NULL), 0);
  pthread_barrier_destroy(&start);
  char msg[160], what[160];
  for (int t = 0; t < THREADS; t++) {
    assert_int_equal(f->cu->cuStreamSynchronize(w[t].stream), CUDA_SUCCESS);
    for (int i = 0; i < CALLS_PER_THREAD; i++) {
      job *j = &w[t].jobs[i];
      describe(&j->c, what, sizeof what);
      if (w[t].rc[i]) fail_msg("thread %d, %s: %s", t, what, w[t].err[i]);
      assert_int_equal(f->cu->cuMemcpyDtoH(j->out, j->dc, (size_t)j->nc * 4), CUDA_SUCCESS);
      const char *bad = job_check(j, msg, sizeof msg);
      if (bad) fail_msg("thread %d, %s: %s", t, what, bad);
      job_free(f->cu, j);
    }
    f->cu->cuStreamDestroy(w[t].stream);
  }
  rt_dispatch_stats st;
  rt_dispatch_get_stats(ctx, &st);
  assert_int_equal(st.launches, THREADS * CALLS_PER_THREAD);
  assert_int_equal(st.hits + st.misses, THREADS * CALLS_PER_THREAD);
  /* Each distinct problem was built once, however many threads asked at the same time. */
  assert_true(st.problems <= 8 + distinct);
  assert_int_equal(st.misses, (uint64_t)st.problems);
  mmt_close(ctx);
}

/* The log callback gets the choice of a new problem; errors go there too. */
typedef struct {
  int lines, errors;
  char last[512];
} log_sink;

static void sink(void *user, mmt_log_level level, const char *message) {
  log_sink *s = user;
  s->lines++;
  s->errors += level == MMT_LOG_ERROR;
  snprintf(s->last, sizeof s->last, "%s", message);
}

static void test_log_callback(void **state) {
  fixture *f = *state;
  log_sink s = {0};
  mmt_options o = {.db_path = f->db_path, .cache_dir = f->dir, .log = sink, .log_user = &s,
                   .log_level = MMT_LOG_INFO};
  mmt_context *ctx = NULL;
  mmt_status rc = mmt_open(&ctx, 0, &o);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE) {
    /* Without a GPU the failure itself is logged, once, as an error. */
    assert_int_equal(s.errors, 1);
    assert_non_null(strstr(s.last, "mmt_open"));
    mmt_close(ctx);
    skip();
  }
  assert_int_equal(rc, MMT_OK);
  mmt_close(ctx); /* gpu_or_skip opens and closes the device; the context comes after */
  gpu_or_skip(f);
  assert_int_equal(mmt_open(&ctx, 0, &o), MMT_OK);
  call c = {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, 33, 17, 9, 0, 0, 0, 1.0f, 0.0f, MMT_F32};
  set_lds(&c, 0);
  int before = s.lines;
  run_call(f, ctx, &c, 5, false);
  assert_true(s.lines > before);
  assert_non_null(strstr(s.last, "33x17x9"));
  assert_int_equal(mmt_gemm(ctx, MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, -1, 1, 1, 1, NULL, 1,
                            NULL, 1, 0, NULL, 1, MMT_F32, NULL),
                   MMT_ERR_INVALID_ARG);
  assert_int_equal(s.errors, 1);
  assert_non_null(strstr(s.last, "M must be >= 0"));
  mmt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_orders_and_transposes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dtypes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_blas_special_cases, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tuned_layouts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_log_callback, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
