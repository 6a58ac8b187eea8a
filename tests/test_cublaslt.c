/*
 * test_cublaslt.c -- the baselines of mmt_matmul: gpu/cublaslt.h (cuBLASLt with its
 * epilogues), tn_cublas_gemm_strided_batched (gpu/cublas.h) and the SwiGLU helper kernel
 * (gpu/helper_kernels.h).
 *   CPU: a missing library (MMT_ERR_NOT_FOUND naming it, twice), opening on a machine without
 *   a GPU, the problem checks of tn_lt_problem_check.
 *   GPU (skipped without one): every epilogue, type pair and layout of cuBLASLt on an aligned
 *   and a ragged shape (padded pitches, alpha, beta), batches (shared weights, one plan run
 *   twice with another bias), the run-time address checks; the strided batched GEMM in every
 *   layout and type pair; the SwiGLU kernel at each vector width.  All against float64 host
 *   references computed from the row-major view of the call, with every padding element
 *   (NaN) left as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gen.h"
#include "gpu/cublas.h"
#include "gpu/cublaslt.h"
#include "gpu/helper_kernels.h"
#include "half16.h"
#include "rt_device.h"
#include "rt_driver.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- in a child process (each library loads once per process) ---- */

/* Runs fn in a child; its exit status is fn's result (0: passed). */
static int in_child(int (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int rc = fn();
    fflush(NULL);
    _exit(rc);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* A missing library: MMT_ERR_NOT_FOUND naming it, the same the second time. */
static int missing_child(void) {
  setenv("MMTUNE_LIBCUBLASLT", "/nonexistent/libcublasLt.so.13", 1);
  for (int i = 0; i < 2; i++) {
    tn_cublaslt *lt = (tn_cublaslt *)1;
    ut_err e = {{0}};
    if (tn_cublaslt_open(&lt, &e) != MMT_ERR_NOT_FOUND || lt) return 20;
    if (!strstr(e.msg, "/nonexistent/libcublasLt.so.13 not found: ")) return 21;
  }
  return 0;
}

static void test_missing_library(void **state) {
  (void)state;
  assert_int_equal(in_child(missing_child), 0);
}

/* With a GPU (device 0's primary context current): a handle and a version.  Without one: the
 * driver's error (the toolkit's library loads), or the library's absence, twice. */
static int open_child(void) {
  rt_device dev;
  ut_err e = {{0}};
  mmt_status dev_rc = rt_device_open(0, &dev, &e);
  for (int i = 0; i < 2; i++) {
    tn_cublaslt *lt = (tn_cublaslt *)1;
    mmt_status rc = tn_cublaslt_open(&lt, &e);
    if (rc == MMT_OK) {
      bool good = dev_rc == MMT_OK && lt && tn_cublaslt_version(lt)[0] >= '1' &&
                  tn_cublaslt_version(lt)[0] <= '9';
      printf("cuBLASLt %s\n", tn_cublaslt_version(lt));
      tn_cublaslt_close(lt);
      if (!good) return 10;
      continue;
    }
    printf("tn_cublaslt_open: %s: %s\n", mmt_status_name(rc), e.msg);
    if (lt != NULL) return 11;
    if (rc == MMT_ERR_NOT_FOUND && strstr(e.msg, "libcublasLt.so.13 not found: ")) continue;
    if (dev_rc == MMT_OK || rc != dev_rc) return 12; /* no GPU: rt_driver's error */
  }
  tn_cublaslt_close(NULL);
  if (dev_rc == MMT_OK) rt_device_close(&dev);
  return 0;
}

static void test_open(void **state) {
  (void)state;
  assert_int_equal(in_child(open_child), 0);
}

/* ---- the problem checks (no library) ---- */

/* A valid problem: f16 in, f32 out, "nt", 64 x 48 x 32, packed. */
static tn_lt_problem good_problem(void) {
  tn_lt_problem p = {.layout = "nt",
                     .in_dtype = "f16",
                     .out_dtype = "f32",
                     .m = 64,
                     .n = 48,
                     .k = 32,
                     .lda = 32,
                     .ldb = 32,
                     .ldc = 48,
                     .ldd = 48,
                     .batch = 1,
                     .alpha = 1.0f};
  return p;
}

static void test_problem_checks(void **state) {
  (void)state;
  ut_err e;
  tn_lt_problem p = good_problem();
  assert_int_equal(tn_lt_problem_check(&p, &e), MMT_OK);
  /* Every layout, type pair and epilogue that cuBLASLt has. */
  static const char *const pairs[][2] = {
      {"f32", ""},    {"f32", "f32"}, {"tf32", ""}, {"tf32", "f32"},  {"f16", ""},
      {"f16", "f16"}, {"f16", "f32"}, {"bf16", ""}, {"bf16", "bf16"}, {"bf16", "f32"}};
  static const mmt_activation acts[] = {MMT_ACT_NONE, MMT_ACT_RELU, MMT_ACT_GELU_TANH};
  for (int l = 0; l < GEN_LAYOUTS; l++)
    for (int t = 0; t < COUNT(pairs); t++)
      for (int a = 0; a < COUNT(acts); a++)
        for (int bias = 0; bias < 2; bias++) {
          tn_lt_problem q = {.m = 5,
                             .n = 7,
                             .k = 3,
                             .batch = 2,
                             .beta = 1.0f,
                             .act = acts[a],
                             .bias_mode = bias ? MMT_BIAS_COL : MMT_BIAS_NONE};
          snprintf(q.layout, sizeof q.layout, "%s", gen_layout_name(l));
          snprintf(q.in_dtype, sizeof q.in_dtype, "%s", pairs[t][0]);
          snprintf(q.out_dtype, sizeof q.out_dtype, "%s", pairs[t][1]);
          int64_t width[3];
          gen_min_ld(q.layout, q.m, q.n, q.k, width);
          q.lda = width[0], q.ldb = width[1], q.ldc = q.ldd = 7;
          q.stride_d = 5 * 7;
          if (tn_lt_problem_check(&q, &e) != MMT_OK)
            fail_msg("%s %s -> %s act %d bias %d: %s", q.layout, q.in_dtype, q.out_dtype,
                     (int)q.act, bias, e.msg);
        }
  /* "" layout: "nn"; beta == 0: ldc is not looked at; batch 1: strides neither. */
  p = good_problem();
  p.layout[0] = '\0';
  p.lda = 32, p.ldb = 48, p.ldc = 0, p.stride_d = 0;
  assert_int_equal(tn_lt_problem_check(&p, &e), MMT_OK);
}

/* A bad problem and what its check must say: the status and a piece of the message. */
typedef struct {
  tn_lt_problem p;
  mmt_status want;
  const char *in_msg;
} bad_case;

static void check_bad(const bad_case *c) {
  ut_err e = {{0}};
  mmt_status rc = tn_lt_problem_check(&c->p, &e);
  if (rc != c->want || !strstr(e.msg, c->in_msg))
    fail_msg("want %s with '%s', got %s: %s", mmt_status_name(c->want), c->in_msg,
             mmt_status_name(rc), e.msg);
}

static void test_problem_errors(void **state) {
  (void)state;
  bad_case c;
#define BAD(stmt, status, text)                                                                    \
  do {                                                                                             \
    c = (bad_case){good_problem(), status, text};                                                  \
    stmt;                                                                                          \
    check_bad(&c);                                                                                 \
  } while (0)
  BAD(snprintf(c.p.layout, 4, "nx"), MMT_ERR_INVALID_ARG, "layout 'nx'");
  BAD(snprintf(c.p.in_dtype, 8, "f8"), MMT_ERR_INVALID_ARG, "in_dtype 'f8' is not a dtype");
  BAD(snprintf(c.p.in_dtype, 8, "f64"), MMT_ERR_UNSUPPORTED, "in_dtype f64");
  BAD(snprintf(c.p.out_dtype, 8, "bf16"), MMT_ERR_UNSUPPORTED, "no f16 x f16 -> bf16 GEMM");
  BAD(snprintf(c.p.out_dtype, 8, "tf32"), MMT_ERR_INVALID_ARG, "out_dtype tf32");
  BAD(snprintf(c.p.out_dtype, 8, "half"), MMT_ERR_INVALID_ARG, "out_dtype 'half'");
  BAD((snprintf(c.p.in_dtype, 8, "f32"), snprintf(c.p.out_dtype, 8, "f16")), MMT_ERR_UNSUPPORTED,
      "no f32 x f32 -> f16 GEMM");
  BAD((snprintf(c.p.in_dtype, 8, "tf32"), snprintf(c.p.out_dtype, 8, "bf16")), MMT_ERR_UNSUPPORTED,
      "no tf32 x tf32 -> bf16 GEMM");
  BAD(c.p.bias_mode = MMT_BIAS_ROW, MMT_ERR_UNSUPPORTED, "MMT_BIAS_ROW");
  BAD(c.p.bias_mode = (mmt_bias)7, MMT_ERR_INVALID_ARG, "bias_mode 7");
  BAD(c.p.act = MMT_ACT_GELU_ERF, MMT_ERR_UNSUPPORTED, "tanh form");
  BAD(c.p.act = MMT_ACT_SILU, MMT_ERR_UNSUPPORTED, "MMT_ACT_SILU");
  BAD(c.p.act = (mmt_activation)-1, MMT_ERR_INVALID_ARG, "act -1");
  BAD(c.p.m = -1, MMT_ERR_INVALID_ARG, "m = -1 is negative");
  BAD(c.p.k = 0, MMT_ERR_UNSUPPORTED, "k = 0");
  BAD(c.p.n = (int64_t)1 << 31, MMT_ERR_UNSUPPORTED, "n = 2147483648");
  BAD(c.p.lda = 31, MMT_ERR_INVALID_ARG, "lda = 31 is below 32");
  BAD(c.p.ldb = 31, MMT_ERR_INVALID_ARG, "ldb = 31 is below 32"); /* 't' B: N rows of K */
  BAD((snprintf(c.p.layout, 4, "tn"), c.p.lda = 63, c.p.ldb = 48), MMT_ERR_INVALID_ARG,
      "lda = 63 is below 64");
  BAD((c.p.beta = 0.5f, c.p.ldc = 47), MMT_ERR_INVALID_ARG, "ldc = 47 is below 48");
  BAD(c.p.ldd = 47, MMT_ERR_INVALID_ARG, "ldd = 47 is below 48");
  BAD(c.p.batch = 0, MMT_ERR_INVALID_ARG, "batch = 0");
  BAD(c.p.batch = (int64_t)1 << 31, MMT_ERR_UNSUPPORTED, "batch = 2147483648");
  BAD((c.p.batch = 2, c.p.stride_d = 0), MMT_ERR_INVALID_ARG, "D's problems overlap");
  BAD((c.p.batch = 2, c.p.stride_d = 63 * 48 + 47), MMT_ERR_INVALID_ARG, "at least");
  BAD((c.p.batch = 2, c.p.stride_d = 64 * 48, c.p.stride_a = -1), MMT_ERR_INVALID_ARG,
      "stride_a = -1 is negative");
  BAD(c.p.align_bytes = 3, MMT_ERR_INVALID_ARG, "align_bytes = 3");
  BAD(c.p.align_bytes = 512, MMT_ERR_INVALID_ARG, "align_bytes = 512");
  BAD(c.p.align_bytes = 2, MMT_ERR_INVALID_ARG, "from 4"); /* D is f32 */
  /* FP8: layout nt, a wider D, scales and fast accumulation theirs alone */
  BAD((snprintf(c.p.in_dtype, 8, "e4m3"), snprintf(c.p.layout, 4, "nn")), MMT_ERR_UNSUPPORTED,
      "FP8 GEMM takes layout nt only");
  /* an FP8 D: after FP8 inputs, without C or bias */
  BAD((snprintf(c.p.in_dtype, 8, "f16"), snprintf(c.p.out_dtype, 8, "e5m2")), MMT_ERR_INVALID_ARG,
      "out_dtype e5m2: an output is f32, f16 or bf16 (FP8 after FP8 inputs)");
  BAD((snprintf(c.p.in_dtype, 8, "e4m3"), snprintf(c.p.out_dtype, 8, "e5m2"),
       c.p.bias_mode = MMT_BIAS_COL),
      MMT_ERR_UNSUPPORTED, "an FP8 D (e5m2): no C and no bias");
  BAD(c.p.scale = TN_LT_SCALE_TENSOR, MMT_ERR_UNSUPPORTED, "in FP8 GEMMs only");
  BAD(c.p.fast_accum = true, MMT_ERR_UNSUPPORTED, "in FP8 GEMMs only");
  BAD((snprintf(c.p.in_dtype, 8, "e4m3"), snprintf(c.p.layout, 4, "nt"), c.p.ldb = 32,
       c.p.scale = (tn_lt_scale)9),
      MMT_ERR_INVALID_ARG, "scale 9");
  BAD((snprintf(c.p.in_dtype, 8, "e4m3"), snprintf(c.p.layout, 4, "nt"), c.p.ldb = 32,
       c.p.scale = TN_LT_SCALE_BLOCK, c.p.batch = 2, c.p.stride_d = 64 * 48),
      MMT_ERR_UNSUPPORTED, "block scales: one problem");
#undef BAD
  /* FP8 in layout nt, each scale mode, fast or not, D of each wider type */
  static const char *const outs[] = {"f32", "f16", "bf16"};
  for (int s = TN_LT_SCALE_NONE; s <= TN_LT_SCALE_BLOCK; s++)
    for (int o = 0; o < 3; o++) {
      tn_lt_problem q = good_problem();
      snprintf(q.in_dtype, sizeof q.in_dtype, "%s", o % 2 ? "e5m2" : "e4m3");
      snprintf(q.out_dtype, sizeof q.out_dtype, "%s", outs[o]);
      snprintf(q.layout, sizeof q.layout, "nt");
      q.ldb = 32, q.scale = (tn_lt_scale)s, q.fast_accum = o == 1;
      ut_err e = {{0}};
      if (tn_lt_problem_check(&q, &e) != MMT_OK) fail_msg("FP8 scale %d %s: %s", s, outs[o], e.msg);
    }
  /* Batch 1 uses no stride (stride_d 1 overlaps nothing); 4 bytes suit an f32 D. */
  tn_lt_problem p = good_problem();
  p.stride_d = 1;
  p.align_bytes = 4;
  assert_int_equal(tn_lt_problem_check(&p, NULL), MMT_OK);
}

/* ---- GPU: problems on the device and their float64 host reference ---- */

/* Device 0 with its primary context current, and the driver; or skip. */
static const rt_cu *gpu_or_skip(rt_device *dev) {
  ut_err e;
  mmt_status rc = rt_device_open(0, dev, &e);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE) skip();
  if (rc) fail_msg("rt_device_open: %s", e.msg);
  const rt_cu *cu = NULL;
  assert_int_equal(rt_driver(&cu, &e), MMT_OK);
  return cu;
}

static bool is16(const char *dtype) { return !strcmp(dtype, "f16") || !strcmp(dtype, "bf16"); }

/* v as dtype stores it (tf32 is f32 data). */
static float as_type(const char *dtype, float v) {
  if (!strcmp(dtype, "f16")) return th_f16_to_f32(th_f32_to_f16(v));
  if (!strcmp(dtype, "bf16")) return th_bf16_to_f32(th_f32_to_bf16(v));
  return v;
}

/* n floats to device memory as dtype, and back (16-bit types converted exactly). */
static void upload(const rt_cu *cu, const char *dtype, CUdeviceptr dst, const float *src,
                   int64_t n) {
  if (!is16(dtype)) {
    assert_int_equal(cu->cuMemcpyHtoD(dst, src, (size_t)n * 4), CUDA_SUCCESS);
    return;
  }
  uint16_t *h = malloc((size_t)n * 2 + 2);
  assert_non_null(h);
  for (int64_t i = 0; i < n; i++)
    h[i] = !strcmp(dtype, "f16") ? th_f32_to_f16(src[i]) : th_f32_to_bf16(src[i]);
  assert_int_equal(cu->cuMemcpyHtoD(dst, h, (size_t)n * 2), CUDA_SUCCESS);
  free(h);
}

static void download(const rt_cu *cu, const char *dtype, float *dst, CUdeviceptr src, int64_t n) {
  if (!is16(dtype)) {
    assert_int_equal(cu->cuMemcpyDtoH(dst, src, (size_t)n * 4), CUDA_SUCCESS);
    return;
  }
  uint16_t *h = malloc((size_t)n * 2 + 2);
  assert_non_null(h);
  assert_int_equal(cu->cuMemcpyDtoH(h, src, (size_t)n * 2), CUDA_SUCCESS);
  for (int64_t i = 0; i < n; i++)
    dst[i] = !strcmp(dtype, "f16") ? th_f16_to_f32(h[i]) : th_bf16_to_f32(h[i]);
  free(h);
}

/* Uniform in (-1, 1) (xorshift64). */
static float rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* One GEMM problem of a test, in mmtune's row-major terms. */
typedef struct {
  const char *layout, *in, *out; /* out "": the inputs' type (f32 for tf32) */
  int64_t m, n, k, pad, batch;   /* pad: added to every minimal pitch */
  float alpha, beta;
  mmt_bias bias;
  mmt_activation act;
  bool shared_b; /* stride_b 0: one B for every problem */
} gemm_case;

/* A case's buffers: host copies (NaN wherever no matrix element is) and device ones. */
typedef struct {
  gemm_case g;
  const char *out;
  int64_t lda, ldb, ldc, ldd;
  int64_t sa, sb, sc, sd; /* batch strides */
  int64_t na, nb, nc, nd; /* elements of each buffer */
  float *a, *b, *c, *bias;
  CUdeviceptr da, db, dc, dd, dbias;
} job;

static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/* Elements a batch of matrices spans: `batch` extents `stride` apart (0: one shared). */
static int64_t span(int64_t batch, int64_t stride, int64_t extent) {
  return stride ? (batch - 1) * stride + extent : extent;
}

/* A buffer of n floats: NaN, with random values of dtype at the elements of `batch` matrices
 * of rows x cols, pitch ld, `stride` apart. */
static float *host_matrices(const char *dtype, int64_t n, int64_t batch, int64_t stride,
                            int64_t rows, int64_t cols, int64_t ld, uint64_t *seed) {
  float *x = malloc((size_t)n * 4 + 4);
  assert_non_null(x);
  for (int64_t i = 0; i < n; i++) x[i] = NAN;
  for (int64_t z = 0; z < (stride ? batch : 1); z++)
    for (int64_t r = 0; r < rows; r++)
      for (int64_t q = 0; q < cols; q++) x[z * stride + r * ld + q] = as_type(dtype, rnd(seed));
  return x;
}

static CUdeviceptr device_copy(const rt_cu *cu, const char *dtype, const float *x, int64_t n) {
  CUdeviceptr d = 0;
  assert_int_equal(cu->cuMemAlloc(&d, (size_t)(n + 1) * (is16(dtype) ? 2 : 4)), CUDA_SUCCESS);
  upload(cu, dtype, d, x, n);
  return d;
}

/* Sets up a case: pitches `pad` above the minimum, batch strides leaving a gap (multiples of
 * 128 elements), C apart from D with its own pitch (in_place: C is D, as cuBLAS has it). */
static void job_init(const rt_cu *cu, job *j, const gemm_case *g, uint64_t seed, bool in_place) {
  memset(j, 0, sizeof *j);
  j->g = *g;
  j->out = g->out[0] ? g->out : !strcmp(g->in, "tf32") ? "f32" : g->in;
  int64_t width[3], rows[3];
  gen_min_ld(g->layout, g->m, g->n, g->k, width);
  gen_stored_rows(g->layout, g->m, g->n, g->k, rows);
  j->lda = width[0] + g->pad, j->ldb = width[1] + g->pad, j->ldd = g->n + g->pad;
  j->ldc = in_place ? j->ldd : j->ldd + 1;
  const int64_t ext_a = (rows[0] - 1) * j->lda + width[0],
                ext_b = (rows[1] - 1) * j->ldb + width[1];
  const int64_t ext_c = (g->m - 1) * j->ldc + g->n, ext_d = (g->m - 1) * j->ldd + g->n;
  const bool batched = g->batch > 1;
  j->sa = batched ? round_up(ext_a + 1, 128) : 0;
  j->sb = batched && !g->shared_b ? round_up(ext_b + 1, 128) : 0;
  j->sc = batched ? round_up(ext_c + 1, 128) : 0;
  j->sd = batched ? round_up(ext_d + 1, 128) : 0;
  j->na = span(g->batch, j->sa, ext_a), j->nb = span(g->batch, j->sb, ext_b);
  j->nc = span(g->batch, j->sc, ext_c), j->nd = span(g->batch, j->sd, ext_d);
  j->a = host_matrices(g->in, j->na, g->batch, j->sa, rows[0], width[0], j->lda, &seed);
  j->b = host_matrices(g->in, j->nb, g->batch, j->sb, rows[1], width[1], j->ldb, &seed);
  j->c = host_matrices(j->out, j->nc, g->batch, j->sc, g->m, g->n, j->ldc, &seed);
  j->bias = host_matrices(j->out, g->n, 1, 0, 1, g->n, g->n, &seed);
  j->da = device_copy(cu, g->in, j->a, j->na);
  j->db = device_copy(cu, g->in, j->b, j->nb);
  j->dbias = device_copy(cu, j->out, j->bias, g->n);
  if (in_place) {
    j->dd = device_copy(cu, j->out, j->c, j->nd); /* D starts as C */
  } else {
    j->dc = device_copy(cu, j->out, j->c, j->nc);
    float *nan = host_matrices(j->out, j->nd, 1, 0, 0, 0, 0, &seed);
    j->dd = device_copy(cu, j->out, nan, j->nd);
    free(nan);
  }
}

static void job_free(const rt_cu *cu, job *j) {
  const CUdeviceptr d[] = {j->da, j->db, j->dc, j->dd, j->dbias};
  for (int i = 0; i < 5; i++)
    if (d[i]) cu->cuMemFree(d[i]);
  free(j->a);
  free(j->b);
  free(j->c);
  free(j->bias);
}

static void describe(const job *j, char *out, size_t len) {
  const gemm_case *g = &j->g;
  snprintf(out, len,
           "%s -> %s %s M=%lld N=%lld K=%lld pad %lld batch %lld%s alpha %g beta %g bias %d "
           "act %d",
           g->in, j->out, g->layout, (long long)g->m, (long long)g->n, (long long)g->k,
           (long long)g->pad, (long long)g->batch, g->shared_b ? " (shared B)" : "",
           (double)g->alpha, (double)g->beta, (int)g->bias, (int)g->act);
}

/* The relative Frobenius error allowed: fp32 sums of exact products (f16, bf16 inputs; f32
 * pedantic), of 10-bit mantissas (tf32), the result rounded to 11 or 8 bits (f16, bf16), a
 * GELU whose tanh may be an approximation (cuBLASLt's). */
static double tolerance(const job *j) {
  double tol = !strcmp(j->out, "bf16")                              ? 1e-2
               : !strcmp(j->out, "f16") || !strcmp(j->g.in, "tf32") ? 3e-3
                                                                    : 1e-5;
  return j->g.act == MMT_ACT_GELU_TANH && tol < 2e-3 ? 2e-3 : tol;
}

static double act_of(mmt_activation act, double x) {
  if (act == MMT_ACT_RELU) return x > 0 ? x : 0;
  if (act == MMT_ACT_GELU_TANH)
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  return x;
}

/* Downloads D and checks it against act(alpha * op(A) op(B) + beta * C + bias) in float64
 * (bias_host: the vector the run added, NULL for none): the relative Frobenius error within
 * tolerance, and every element outside the problems' D still NaN. */
static void job_check(const rt_cu *cu, job *j, const float *bias_host) {
  const gemm_case *g = &j->g;
  const bool ta = g->layout[0] == 't', tb = g->layout[1] == 't';
  float *d = malloc((size_t)j->nd * 4 + 4);
  bool *inside = calloc((size_t)j->nd + 1, 1);
  assert_true(d && inside);
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  download(cu, j->out, d, j->dd, j->nd);
  char what[256];
  describe(j, what, sizeof what);
  double num = 0, den = 0;
  for (int64_t z = 0; z < g->batch; z++)
    for (int64_t i = 0; i < g->m; i++)
      for (int64_t jj = 0; jj < g->n; jj++) {
        double acc = 0;
        for (int64_t p = 0; p < g->k; p++) {
          const double av = j->a[z * j->sa + (ta ? p * j->lda + i : i * j->lda + p)];
          const double bv = j->b[z * j->sb + (tb ? jj * j->ldb + p : p * j->ldb + jj)];
          acc += av * bv;
        }
        double x = (double)g->alpha * acc;
        if (g->beta != 0.0f) x += (double)g->beta * j->c[z * j->sc + i * j->ldc + jj];
        if (bias_host) x += bias_host[jj];
        const double want = act_of(g->act, x);
        const int64_t at = z * j->sd + i * j->ldd + jj;
        inside[at] = true;
        if (isnan(d[at]))
          fail_msg("%s: D[%lld][%lld][%lld] is NaN", what, (long long)z, (long long)i,
                   (long long)jj);
        num += (d[at] - want) * (d[at] - want);
        den += want * want;
      }
  for (int64_t i = 0; i < j->nd; i++)
    if (!inside[i] && !isnan(d[i]))
      fail_msg("%s: D's element %lld, outside every problem, was written", what, (long long)i);
  const double err = den > 0 ? sqrt(num / den) : sqrt(num);
  if (err > tolerance(j)) fail_msg("%s: relative error %.3g > %.3g", what, err, tolerance(j));
  free(d);
  free(inside);
}

/* D back to NaN everywhere. */
static void job_poison_d(const rt_cu *cu, job *j) {
  uint64_t seed = 1;
  float *nan = host_matrices(j->out, j->nd, 1, 0, 0, 0, 0, &seed);
  upload(cu, j->out, j->dd, nan, j->nd);
  free(nan);
}

static tn_lt_problem lt_problem(const job *j) {
  const gemm_case *g = &j->g;
  tn_lt_problem p = {.m = g->m,
                     .n = g->n,
                     .k = g->k,
                     .lda = j->lda,
                     .ldb = j->ldb,
                     .ldc = j->ldc,
                     .ldd = j->ldd,
                     .batch = g->batch,
                     .stride_a = j->sa,
                     .stride_b = j->sb,
                     .stride_c = j->sc,
                     .stride_d = j->sd,
                     .alpha = g->alpha,
                     .beta = g->beta,
                     .bias_mode = g->bias,
                     .act = g->act};
  snprintf(p.layout, sizeof p.layout, "%s", g->layout);
  snprintf(p.in_dtype, sizeof p.in_dtype, "%s", g->in);
  snprintf(p.out_dtype, sizeof p.out_dtype, "%s", g->out);
  return p;
}

/* Plans, runs and checks one case on cuBLASLt.  MMT_ERR_UNSUPPORTED when the plan says so and
 * `may_be_unsupported` (nothing run then); any other failure fails the test. */
static mmt_status lt_case(const rt_cu *cu, tn_cublaslt *lt, const gemm_case *g, uint64_t seed,
                          bool may_be_unsupported) {
  job j;
  job_init(cu, &j, g, seed, false);
  char what[256];
  describe(&j, what, sizeof what);
  tn_lt_problem p = lt_problem(&j);
  tn_lt_plan *plan = NULL;
  ut_err e;
  mmt_status rc = tn_cublaslt_plan(lt, &p, &plan, &e);
  if (rc == MMT_ERR_UNSUPPORTED && may_be_unsupported) {
    printf("%s: %s\n", what, e.msg);
    job_free(cu, &j);
    return rc;
  }
  if (rc) fail_msg("%s: tn_cublaslt_plan: %s: %s", what, mmt_status_name(rc), e.msg);
  const bool bias = g->bias == MMT_BIAS_COL;
  rc = tn_cublaslt_run(lt, plan, NULL, j.da, j.db, g->beta != 0.0f ? j.dc : 0, j.dd,
                       bias ? j.dbias : 0, &e);
  if (rc) fail_msg("%s: tn_cublaslt_run: %s: %s", what, mmt_status_name(rc), e.msg);
  job_check(cu, &j, bias ? j.bias : NULL);
  if (bias) {
    /* The same plan with another bias vector (its address written into the descriptor). */
    uint64_t s2 = seed ^ 0x5bd1e995u;
    float *bias2 = host_matrices(j.out, g->n, 1, 0, 1, g->n, g->n, &s2);
    CUdeviceptr dbias2 = device_copy(cu, j.out, bias2, g->n);
    job_poison_d(cu, &j);
    rc = tn_cublaslt_run(lt, plan, NULL, j.da, j.db, g->beta != 0.0f ? j.dc : 0, j.dd, dbias2, &e);
    if (rc) fail_msg("%s: second bias: %s", what, e.msg);
    job_check(cu, &j, bias2);
    cu->cuMemFree(dbias2);
    free(bias2);
  }
  tn_lt_plan_free(plan);
  job_free(cu, &j);
  return MMT_OK;
}

/* A cuBLASLt handle on device 0, or skip (no GPU, or no library). */
static tn_cublaslt *lt_or_skip(rt_device *dev, const rt_cu **cu) {
  *cu = gpu_or_skip(dev);
  tn_cublaslt *lt = NULL;
  ut_err e;
  mmt_status rc = tn_cublaslt_open(&lt, &e);
  if (rc == MMT_ERR_NOT_FOUND) {
    printf("no cuBLASLt: %s\n", e.msg);
    rt_device_close(dev);
    skip();
  }
  if (rc) fail_msg("tn_cublaslt_open: %s: %s", mmt_status_name(rc), e.msg);
  return lt;
}

/* The input/output type pairs of cuBLASLt and of the strided batched GEMM. */
static const char *const type_pairs[][2] = {{"f16", "f16"},  {"f16", "f32"}, {"bf16", "bf16"},
                                            {"bf16", "f32"}, {"f32", "f32"}, {"tf32", "f32"}};

/* Every epilogue, type pair and layout, on an aligned shape (alpha 1, beta 0, C never read)
 * and a ragged one (odd pitches, alpha and beta, C apart from D).  cuBLASLt may have no
 * pedantic-fp32 or TF32 algorithm with an epilogue: such a plan may say MMT_ERR_UNSUPPORTED
 * (printed); everything else must run and match. */
static void test_lt_epilogues(void **state) {
  (void)state;
  rt_device dev;
  const rt_cu *cu;
  tn_cublaslt *lt = lt_or_skip(&dev, &cu);
  static const struct {
    mmt_bias bias;
    mmt_activation act;
  } epilogues[] = {{MMT_BIAS_NONE, MMT_ACT_NONE},      {MMT_BIAS_NONE, MMT_ACT_RELU},
                   {MMT_BIAS_NONE, MMT_ACT_GELU_TANH}, {MMT_BIAS_COL, MMT_ACT_NONE},
                   {MMT_BIAS_COL, MMT_ACT_RELU},       {MMT_BIAS_COL, MMT_ACT_GELU_TANH}};
  static const struct {
    int64_t m, n, k, pad;
    float alpha, beta;
  } shapes[] = {{48, 40, 64, 8, 1.0f, 0.0f}, {37, 53, 29, 3, 0.5f, -1.5f}};
  uint64_t seed = 1;
  int unsupported = 0;
  for (int t = 0; t < COUNT(type_pairs); t++)
    for (int l = 0; l < GEN_LAYOUTS; l++)
      for (int ep = 0; ep < COUNT(epilogues); ep++)
        for (int s = 0; s < COUNT(shapes); s++) {
          const gemm_case g = {.layout = gen_layout_name(l),
                               .in = type_pairs[t][0],
                               .out = type_pairs[t][1],
                               .m = shapes[s].m,
                               .n = shapes[s].n,
                               .k = shapes[s].k,
                               .pad = shapes[s].pad,
                               .batch = 1,
                               .alpha = shapes[s].alpha,
                               .beta = shapes[s].beta,
                               .bias = epilogues[ep].bias,
                               .act = epilogues[ep].act};
          const bool fp32_epilogue = !is16(g.in) && ep > 0;
          if (lt_case(cu, lt, &g, seed++, fp32_epilogue) == MMT_ERR_UNSUPPORTED) unsupported++;
        }
  printf("%d fp32/tf32 epilogue plans unsupported by this cuBLASLt\n", unsupported);
  tn_cublaslt_close(lt);
  rt_device_close(&dev);
}

/* Batches: strided problems with gaps between them, a weight shared by every problem (stride
 * 0), epilogues and C on each. */
static void test_lt_batches(void **state) {
  (void)state;
  rt_device dev;
  const rt_cu *cu;
  tn_cublaslt *lt = lt_or_skip(&dev, &cu);
  const gemm_case cases[] = {{.layout = "nt",
                              .in = "f16",
                              .out = "f32",
                              .m = 24,
                              .n = 40,
                              .k = 32,
                              .batch = 3,
                              .alpha = 1.0f,
                              .beta = 0.5f,
                              .bias = MMT_BIAS_COL,
                              .act = MMT_ACT_GELU_TANH},
                             {.layout = "tn",
                              .in = "bf16",
                              .out = "bf16",
                              .m = 33,
                              .n = 17,
                              .k = 45,
                              .pad = 1,
                              .batch = 4,
                              .alpha = -1.0f},
                             {.layout = "nn",
                              .in = "f16",
                              .out = "f16",
                              .m = 40,
                              .n = 64,
                              .k = 48,
                              .batch = 2,
                              .alpha = 1.0f,
                              .bias = MMT_BIAS_COL,
                              .act = MMT_ACT_RELU,
                              .shared_b = true},
                             {.layout = "tt",
                              .in = "f32",
                              .out = "",
                              .m = 19,
                              .n = 23,
                              .k = 31,
                              .pad = 2,
                              .batch = 3,
                              .alpha = 2.0f,
                              .beta = 1.0f},
                             {.layout = "nt",
                              .in = "bf16",
                              .out = "f32",
                              .m = 64,
                              .n = 32,
                              .k = 16,
                              .batch = 5,
                              .alpha = 1.0f,
                              .act = MMT_ACT_RELU,
                              .shared_b = true}};
  for (int i = 0; i < COUNT(cases); i++) lt_case(cu, lt, &cases[i], 100 + (uint64_t)i, false);
  tn_cublaslt_close(lt);
  rt_device_close(&dev);
}

/* tn_cublaslt_run's address checks: nothing launched, the address named. */
static void test_lt_run_checks(void **state) {
  (void)state;
  rt_device dev;
  const rt_cu *cu;
  tn_cublaslt *lt = lt_or_skip(&dev, &cu);
  const gemm_case g = {.layout = "nn",
                       .in = "f16",
                       .out = "f16",
                       .m = 32,
                       .n = 32,
                       .k = 32,
                       .batch = 1,
                       .alpha = 1.0f,
                       .beta = 1.0f,
                       .bias = MMT_BIAS_COL};
  job j;
  job_init(cu, &j, &g, 7, false);
  tn_lt_problem p = lt_problem(&j);
  tn_lt_plan *plan = NULL, *plain = NULL;
  ut_err e;
  assert_int_equal(tn_cublaslt_plan(lt, &p, &plan, &e), MMT_OK);
  assert_non_null(strstr(tn_lt_plan_config(plan), "CUBLASLT_EPILOGUE_BIAS"));
  p.bias_mode = MMT_BIAS_NONE;
  p.beta = 0.0f;
  assert_int_equal(tn_cublaslt_plan(lt, &p, &plain, &e), MMT_OK);
  static const struct {
    int which; /* 0: a misaligned, 1: c 0, 2: bias 0, 3: bias to a plan without, 4: c = d */
    const char *in_msg;
  } cases[] = {{0, "is not 256-byte aligned"},
               {1, "c is 0"},
               {2, "bias is 0"},
               {3, "no bias epilogue"},
               {4, "in place"}};
  for (int i = 0; i < COUNT(cases); i++) {
    const int w = cases[i].which;
    mmt_status rc = tn_cublaslt_run(lt, w == 3 ? plain : plan, NULL, w == 0 ? j.da + 2 : j.da, j.db,
                                    w == 1   ? 0
                                    : w == 4 ? j.dd
                                             : j.dc,
                                    j.dd, w == 2 ? 0 : j.dbias, &e);
    assert_int_equal(rc, MMT_ERR_INVALID_ARG);
    if (!strstr(e.msg, cases[i].in_msg)) fail_msg("want '%s', got: %s", cases[i].in_msg, e.msg);
  }
  tn_lt_plan_free(plain);
  tn_lt_plan_free(plan);
  job_free(cu, &j);
  tn_cublaslt_close(lt);
  rt_device_close(&dev);
}

/* tn_cublas_gemm_strided_batched: every type pair and layout, batch 3 with gaps between the
 * problems, C updated in place; shapes aligned (beta 0) and ragged (alpha, beta), with its own
 * B for each problem or one shared. */
static void test_strided_batched(void **state) {
  (void)state;
  rt_device dev;
  const rt_cu *cu = gpu_or_skip(&dev);
  tn_cublas *cb = NULL;
  ut_err e;
  mmt_status rc = tn_cublas_open(&cb, &e);
  if (rc == MMT_ERR_NOT_FOUND) {
    printf("no cuBLAS: %s\n", e.msg);
    rt_device_close(&dev);
    skip();
  }
  if (rc) fail_msg("tn_cublas_open: %s", e.msg);
  static const struct {
    int64_t m, n, k, pad;
    float alpha, beta;
  } shapes[] = {{48, 40, 64, 8, 1.0f, 0.0f}, {37, 53, 29, 3, 1.5f, -0.5f}};
  uint64_t seed = 500;
  for (int t = 0; t < COUNT(type_pairs); t++)
    for (int l = 0; l < GEN_LAYOUTS; l++)
      for (int s = 0; s < COUNT(shapes); s++)
        for (int shared = 0; shared < 2; shared++) {
          /* shared: one B for every problem (stride_b 0) */
          const gemm_case g = {.layout = gen_layout_name(l),
                               .in = type_pairs[t][0],
                               .out = type_pairs[t][1],
                               .m = shapes[s].m,
                               .n = shapes[s].n,
                               .k = shapes[s].k,
                               .pad = shapes[s].pad,
                               .batch = 3,
                               .alpha = shapes[s].alpha,
                               .beta = shapes[s].beta,
                               .shared_b = shared};
          job j;
          job_init(cu, &j, &g, seed++, true);
          char what[256];
          describe(&j, what, sizeof what);
          rc = tn_cublas_gemm_strided_batched(cb, NULL, g.in, g.out, g.layout, g.m, g.n, g.k,
                                              g.alpha, j.da, j.lda, j.sa, j.db, j.ldb, j.sb, g.beta,
                                              j.dd, j.ldd, j.sd, g.batch, &e);
          if (rc) fail_msg("%s: %s: %s", what, mmt_status_name(rc), e.msg);
          job_check(cu, &j, NULL);
          job_free(cu, &j);
        }
  /* Refusals: a pair cuBLAS has no GEMM for, stride_c 0 with batch > 1. */
  rc = tn_cublas_gemm_strided_batched(cb, NULL, "f16", "bf16", "nn", 8, 8, 8, 1.0f, 256, 8, 64, 256,
                                      8, 64, 0.0f, 256, 8, 64, 2, &e);
  assert_int_equal(rc, MMT_ERR_UNSUPPORTED);
  rc = tn_cublas_gemm_strided_batched(cb, NULL, "f16", NULL, "nn", 8, 8, 8, 1.0f, 256, 8, 64, 256,
                                      8, 64, 0.0f, 256, 8, 0, 2, &e);
  assert_int_equal(rc, MMT_ERR_INVALID_ARG);
  tn_cublas_close(cb);
  rt_device_close(&dev);
}

/* Refusals that launch nothing: FP8 scales cuBLASLt would refuse at the launch (not 16-byte
 * aligned, 0) or a plan without scales; cublasGemmGroupedBatchedEx's arguments out of range
 * (no problems, an empty one, no pointer array, a type it has no grouped GEMM for). */
static void test_scale_and_grouped_refusals(void **state) {
  (void)state;
  rt_device dev;
  const rt_cu *cu;
  tn_cublaslt *lt = lt_or_skip(&dev, &cu);
  ut_err e;
  tn_lt_problem p = good_problem();
  tn_lt_plan *plain = NULL, *fp8 = NULL;
  assert_int_equal(tn_cublaslt_plan(lt, &p, &plain, &e), MMT_OK);
  assert_int_equal(tn_cublaslt_set_scales(plain, 0x2000, 0x2000, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "the plan has no scales"));
  snprintf(p.in_dtype, sizeof p.in_dtype, "e4m3");
  snprintf(p.out_dtype, sizeof p.out_dtype, "bf16");
  p.scale = TN_LT_SCALE_TENSOR;
  mmt_status rc = tn_cublaslt_plan(lt, &p, &fp8, &e);
  if (rc == MMT_ERR_UNSUPPORTED) {
    printf("no FP8 cuBLASLt plan on this GPU: %s\n", e.msg);
  } else {
    assert_int_equal(rc, MMT_OK);
    static const uint64_t bad[][2] = {{0x1004, 0x2000}, {0x2000, 0x2008}, {0, 0x2000}};
    for (int i = 0; i < COUNT(bad); i++) {
      assert_int_equal(tn_cublaslt_set_scales(fp8, bad[i][0], bad[i][1], &e), MMT_ERR_INVALID_ARG);
      assert_non_null(strstr(e.msg, "both needed, 16-byte aligned"));
    }
    assert_int_equal(tn_cublaslt_set_scales(fp8, 0x2000, 0x2010, &e), MMT_OK);
  }
  tn_lt_plan_free(fp8);
  tn_lt_plan_free(plain);
  tn_cublaslt_close(lt);

  tn_cublas *cb = NULL;
  if ((rc = tn_cublas_open(&cb, &e))) fail_msg("tn_cublas_open: %s", e.msg);
  const int rows[2] = {4, 0}, one[1] = {4};
  rc = tn_cublas_gemm_grouped(cb, NULL, "f16", "nt", 0, one, 8, 8, 1.0f, 8, 8, 0.0f, 8, 256, &e);
  if (rc == MMT_ERR_NOT_FOUND) {
    printf("no grouped cuBLAS GEMM: %s\n", e.msg);
  } else {
    /* each refused before anything reaches cuBLAS (256 is no device array) */
    static const struct {
      const char *dtype;
      int64_t count;
      uint64_t ptrs;
      mmt_status rc;
      const char *msg;
    } cases[] = {{"f16", 0, 256, MMT_ERR_INVALID_ARG, "each 1 to 2^31 - 1"},
                 {"f16", 2, 256, MMT_ERR_INVALID_ARG, "m[1] = 0: each problem at least one row"},
                 {"f16", 1, 0, MMT_ERR_INVALID_ARG, "m and ptrs are needed"},
                 {"f32", 1, 256, MMT_ERR_UNSUPPORTED, "(f16, bf16)"}};
    for (int i = 0; i < COUNT(cases); i++) {
      rc = tn_cublas_gemm_grouped(cb, NULL, cases[i].dtype, "nt", cases[i].count,
                                  cases[i].count == 2 ? rows : one, 8, 8, 1.0f, 8, 8, 0.0f, 8,
                                  cases[i].ptrs, &e);
      assert_int_equal(rc, cases[i].rc);
      if (!strstr(e.msg, cases[i].msg)) fail_msg("case %d: %s", i, e.msg);
    }
  }
  tn_cublas_close(cb);
  rt_device_close(&dev);
}

/* ---- GPU: the SwiGLU kernel ---- */

static double silu_times(double g, double u) { return g / (1.0 + exp(-g)) * u; }

/* One SwiGLU launch against the host: x holds gate | up (random, some gates far out where
 * e^-g overflows fp32), h starts as a sentinel that must survive outside the M x N result. */
static void swiglu_case(tn_gpu *g, const rt_cu *cu, const char *dtype, int64_t m, int64_t n,
                        int64_t ldx, int64_t ldh, int64_t x_off, uint64_t seed) {
  const bool bf16 = !strcmp(dtype, "bf16");
  const int64_t nx = x_off + (m - 1) * ldx + 2 * n, nh = (m - 1) * ldh + n;
  float *x = malloc((size_t)nx * 4);
  uint16_t *h = malloc((size_t)nh * 2);
  assert_true(x && h);
  for (int64_t i = 0; i < nx; i++) x[i] = NAN; /* read nowhere */
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float gate = 8.0f * rnd(&seed), up = 2.0f * rnd(&seed);
      if ((i * n + j) % 17 == 5) gate = (i + j) % 2 ? 100.0f : -100.0f;
      x[x_off + i * ldx + j] = as_type(dtype, gate);
      x[x_off + i * ldx + n + j] = as_type(dtype, up);
    }
  CUdeviceptr dx = device_copy(cu, dtype, x, nx), dh = 0;
  for (int64_t i = 0; i < nh; i++) h[i] = 0xABCD;
  assert_int_equal(cu->cuMemAlloc(&dh, (size_t)nh * 2), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(dh, h, (size_t)nh * 2), CUDA_SUCCESS);
  ut_err e;
  mmt_status rc = tn_gpu_swiglu(g, NULL, dtype, m, n, dx + 2 * (uint64_t)x_off, ldx, dh, ldh, &e);
  if (rc) fail_msg("%s %lldx%lld: %s", dtype, (long long)m, (long long)n, e.msg);
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(h, dh, (size_t)nh * 2), CUDA_SUCCESS);
  /* One rounding of a correct fp32 value: within a unit in the last place of the result. */
  const double rel = bf16 ? 0x1p-7 : 0x1p-10, floor_abs = bf16 ? 1e-37 : 0x1p-24;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < ldh && i * ldh + j < nh; j++) {
      const uint16_t got = h[i * ldh + j];
      if (j >= n) {
        if (got != 0xABCD)
          fail_msg("%s: H[%lld][%lld] past N was written", dtype, (long long)i, (long long)j);
        continue;
      }
      const double want = silu_times(x[x_off + i * ldx + j], x[x_off + i * ldx + n + j]);
      const double v = bf16 ? th_bf16_to_f32(got) : th_f16_to_f32(got);
      if (!(fabs(v - want) <= rel * fabs(want) + floor_abs))
        fail_msg("%s M=%lld N=%lld ldx=%lld ldh=%lld: H[%lld][%lld] = %.9g, want %.9g", dtype,
                 (long long)m, (long long)n, (long long)ldx, (long long)ldh, (long long)i,
                 (long long)j, v, want);
    }
  cu->cuMemFree(dx);
  cu->cuMemFree(dh);
  free(x);
  free(h);
}

/* The kernel at each vector width (8, 4, 2, 1 elements: chosen from N, the pitches and the
 * addresses), a row wider than a block, and its refusals. */
static void test_swiglu(void **state) {
  (void)state;
  rt_device dev;
  const rt_cu *cu = gpu_or_skip(&dev);
  tn_gpu *g = NULL;
  ut_err e;
  mmt_status rc = tn_gpu_open(0, NULL, &g, &e);
  if (rc) fail_msg("tn_gpu_open: %s", e.msg);
  static const struct {
    int64_t m, n, ldx, ldh, x_off;
  } shapes[] = {{5, 64, 128, 64, 0},        /* 8 lanes */
                {300, 1024, 2056, 1032, 0}, /* 8, four blocks a row */
                {9, 12, 24, 12, 0},         /* 4 */
                {3, 6, 14, 10, 0},          /* 2 */
                {7, 13, 26, 13, 0},         /* 1: N odd */
                {4, 16, 32, 16, 1},         /* 1: x 2 bytes off */
                {1, 1, 2, 1, 0}};
  for (int d = 0; d < 2; d++)
    for (int s = 0; s < COUNT(shapes); s++)
      swiglu_case(g, cu, d ? "bf16" : "f16", shapes[s].m, shapes[s].n, shapes[s].ldx, shapes[s].ldh,
                  shapes[s].x_off, 900 + (uint64_t)(10 * d + s));
  CUdeviceptr buf = 0;
  assert_int_equal(cu->cuMemAlloc(&buf, 4096), CUDA_SUCCESS);
  assert_int_equal(tn_gpu_swiglu(g, NULL, "f32", 4, 4, buf, 8, buf + 2048, 4, &e),
                   MMT_ERR_UNSUPPORTED);
  assert_int_equal(tn_gpu_swiglu(g, NULL, "f16", 4, 4, buf, 7, buf + 2048, 4, &e),
                   MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_gpu_swiglu(g, NULL, "f16", 4, 4, buf + 1, 8, buf + 2048, 4, &e),
                   MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_gpu_swiglu(g, NULL, "bf16", 0, 4, 0, 8, 0, 4, &e), MMT_OK);
  cu->cuMemFree(buf);
  tn_gpu_close(g);
  rt_device_close(&dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_library), cmocka_unit_test(test_open),
      cmocka_unit_test(test_problem_checks),  cmocka_unit_test(test_problem_errors),
      cmocka_unit_test(test_lt_epilogues),    cmocka_unit_test(test_lt_batches),
      cmocka_unit_test(test_lt_run_checks),   cmocka_unit_test(test_strided_batched),
      cmocka_unit_test(test_swiglu),          cmocka_unit_test(test_scale_and_grouped_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
