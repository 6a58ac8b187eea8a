/* test_ref.c -- tuner/gpu/ref: random inputs, CPU GEMMs, verification, GPU reference source. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/ref.h"

static const int thread_counts[] = {1, 2, 3, 8, 100};
#define N_THREAD_COUNTS (int)(sizeof thread_counts / sizeof thread_counts[0])

/* Runs both GEMMs, serial and threaded, on a small exact example and checks every element. */
static void check_exact_example(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                                const double *want) {
  double ref[16];
  float c[16];
  ut_err e;
  for (int t = 0; t < N_THREAD_COUNTS; t++) {
    memset(ref, 0xff, sizeof ref); /* NaN: every element must be written */
    memset(c, 0xff, sizeof c);
    assert_int_equal(tn_ref_gemm(m, n, k, a, k, b, n, ref, n, thread_counts[t], &e), MMT_OK);
    assert_int_equal(tn_cpu_sgemm(m, n, k, a, k, b, n, c, n, thread_counts[t], &e), MMT_OK);
    for (int64_t i = 0; i < m * n; i++) {
      assert_true(ref[i] == want[i]);
      assert_true(c[i] == (float)want[i]);
    }
  }
}

/* The C++ AMP walkthrough's first example: (3x2) * (2x3).
 *   row 0: [1 4] -> 1*7+4*10 = 47, 1*8+4*11 = 52, 1*9+4*12 = 57
 *   row 1: [2 5] -> 2*7+5*10 = 64, 2*8+5*11 = 71, 2*9+5*12 = 78
 *   row 2: [3 6] -> 3*7+6*10 = 81, 3*8+6*11 = 90, 3*9+6*12 = 99 */
static void test_amp_3x2_2x3(void **state) {
  (void)state;
  const float a[] = {1, 4, 2, 5, 3, 6};
  const float b[] = {7, 8, 9, 10, 11, 12};
  const double want[] = {47, 52, 57, 64, 71, 78, 81, 90, 99};
  check_exact_example(3, 3, 2, a, b, want);
}

/* The walkthrough's 4x4 example: A = B = [1..16] row-major, C = A * A.
 *   row 0 [1 2 3 4]:     col 0: 1+10+27+52 = 90,     col 1: 2+12+30+56 = 100,
 *                        col 2: 3+14+33+60 = 110,    col 3: 4+16+36+64 = 120
 *   row 1 [5 6 7 8]:     col 0: 5+30+63+104 = 202,   col 1: 10+36+70+112 = 228,
 *                        col 2: 15+42+77+120 = 254,  col 3: 20+48+84+128 = 280
 *   row 2 [9 10 11 12]:  col 0: 9+50+99+156 = 314,   col 1: 18+60+110+168 = 356,
 *                        col 2: 27+70+121+180 = 398, col 3: 36+80+132+192 = 440
 *   row 3 [13 14 15 16]: col 0: 13+70+135+208 = 426, col 1: 26+84+150+224 = 484,
 *                        col 2: 39+98+165+240 = 542, col 3: 52+112+180+256 = 600 */
static void test_amp_4x4(void **state) {
  (void)state;
  float a[16];
  for (int i = 0; i < 16; i++) a[i] = (float)(i + 1);
  const double want[] = {90,  100, 110, 120, 202, 228, 254, 280,
                         314, 356, 398, 440, 426, 484, 542, 600};
  check_exact_example(4, 4, 4, a, a, want);
}

/* A random problem with leading dimensions wider than the matrices.  The padding of the
 * inputs is NaN (reading it would poison the result) and the padding of the outputs holds a
 * sentinel that must survive. */
typedef struct {
  int64_t m, n, k, lda, ldb, ldr, ldc;
  float *a, *b, *c;
  double *ref;
} problem;

static void problem_init(problem *p, int64_t m, int64_t n, int64_t k, uint64_t seed) {
  *p = (problem){.m = m, .n = n, .k = k, .lda = k + 3, .ldb = n + 5, .ldr = n + 7, .ldc = n + 2};
  p->a = malloc((size_t)(m * p->lda) * sizeof *p->a);
  p->b = malloc((size_t)(k * p->ldb) * sizeof *p->b);
  p->c = malloc((size_t)(m * p->ldc) * sizeof *p->c);
  p->ref = malloc((size_t)(m * p->ldr) * sizeof *p->ref);
  assert_true(p->a && p->b && p->c && p->ref);
  tn_fill_nan(p->a, (size_t)(m * p->lda));
  tn_fill_nan(p->b, (size_t)(k * p->ldb));
  for (int64_t i = 0; i < m; i++) tn_fill_random(p->a + i * p->lda, (size_t)k, &seed);
  for (int64_t i = 0; i < k; i++) tn_fill_random(p->b + i * p->ldb, (size_t)n, &seed);
  for (int64_t i = 0; i < m * p->ldc; i++) p->c[i] = -7.0f;
  for (int64_t i = 0; i < m * p->ldr; i++) p->ref[i] = -7.0;
}

static void problem_free(problem *p) {
  free(p->a);
  free(p->b);
  free(p->c);
  free(p->ref);
}

static void assert_padding_kept(const problem *p) {
  for (int64_t i = 0; i < p->m; i++) {
    for (int64_t j = p->n; j < p->ldr; j++) assert_true(p->ref[i * p->ldr + j] == -7.0);
    for (int64_t j = p->n; j < p->ldc; j++) assert_true(p->c[i * p->ldc + j] == -7.0f);
  }
}

static void test_random_strided(void **state) {
  (void)state;
  ut_err e;
  problem p, q;
  problem_init(&p, 67, 45, 129, 11);
  problem_init(&q, 67, 45, 129, 11);
  assert_int_equal(tn_ref_gemm(p.m, p.n, p.k, p.a, p.lda, p.b, p.ldb, p.ref, p.ldr, 1, &e), MMT_OK);
  assert_int_equal(tn_cpu_sgemm(p.m, p.n, p.k, p.a, p.lda, p.b, p.ldb, p.c, p.ldc, 1, &e), MMT_OK);
  assert_padding_kept(&p);
  /* The textbook triple loop sums in the same order, and a float product is exact in
   * double: the reference must match it bit for bit. */
  for (int64_t i = 0; i < p.m; i++) {
    for (int64_t j = 0; j < p.n; j++) {
      double acc = 0.0;
      for (int64_t kk = 0; kk < p.k; kk++)
        acc += (double)p.a[i * p.lda + kk] * (double)p.b[kk * p.ldb + j];
      assert_true(acc == p.ref[i * p.ldr + j]);
    }
  }
  tn_check ck;
  tn_compare(p.m, p.n, p.c, p.ldc, p.ref, p.ldr, "f32", &ck);
  assert_true(ck.pass);
  assert_true(ck.rel_err > 0.0 && ck.rel_err < 1e-6);
  /* Threaded runs give the serial results bit for bit. */
  for (int t = 1; t < N_THREAD_COUNTS; t++) {
    int th = thread_counts[t];
    assert_int_equal(tn_ref_gemm(q.m, q.n, q.k, q.a, q.lda, q.b, q.ldb, q.ref, q.ldr, th, &e),
                     MMT_OK);
    assert_int_equal(tn_cpu_sgemm(q.m, q.n, q.k, q.a, q.lda, q.b, q.ldb, q.c, q.ldc, th, &e),
                     MMT_OK);
    assert_memory_equal(q.ref, p.ref, (size_t)(p.m * p.ldr) * sizeof *p.ref);
    assert_memory_equal(q.c, p.c, (size_t)(p.m * p.ldc) * sizeof *p.c);
  }
  problem_free(&p);
  problem_free(&q);
}

/* When threads cannot be created the calling thread computes their rows: same result. */
static void test_thread_failure_fallback(void **state) {
  (void)state;
  ut_err e;
  problem p, q;
  problem_init(&p, 40, 33, 70, 5);
  problem_init(&q, 40, 33, 70, 5);
  assert_int_equal(tn_ref_gemm(p.m, p.n, p.k, p.a, p.lda, p.b, p.ldb, p.ref, p.ldr, 1, &e), MMT_OK);
  assert_int_equal(tn_cpu_sgemm(p.m, p.n, p.k, p.a, p.lda, p.b, p.ldb, p.c, p.ldc, 1, &e), MMT_OK);
  for (int after = 0; after < 3; after++) {
    tn_ref_test_fail_threads(after);
    assert_int_equal(tn_ref_gemm(q.m, q.n, q.k, q.a, q.lda, q.b, q.ldb, q.ref, q.ldr, 4, &e),
                     MMT_OK);
    tn_ref_test_fail_threads(after);
    assert_int_equal(tn_cpu_sgemm(q.m, q.n, q.k, q.a, q.lda, q.b, q.ldb, q.c, q.ldc, 4, &e),
                     MMT_OK);
    assert_memory_equal(q.ref, p.ref, (size_t)(p.m * p.ldr) * sizeof *p.ref);
    assert_memory_equal(q.c, p.c, (size_t)(p.m * p.ldc) * sizeof *p.c);
  }
  tn_ref_test_fail_threads(-1);
  problem_free(&p);
  problem_free(&q);
}

static void test_gemm_args(void **state) {
  (void)state;
  ut_err e;
  float a[6] = {1, 2, 3, 4, 5, 6}, c[6];
  double r[6];
  assert_int_equal(tn_ref_gemm(-1, 2, 3, a, 3, a, 2, r, 2, 1, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "negative size"));
  assert_int_equal(tn_cpu_sgemm(2, 2, 3, a, 2, a, 2, c, 2, 1, &e),
                   MMT_ERR_INVALID_ARG); /* lda < K */
  assert_non_null(strstr(e.msg, "leading dimension"));
  assert_int_equal(tn_ref_gemm(2, 3, 1, a, 1, a, 2, r, 3, 1, &e),
                   MMT_ERR_INVALID_ARG); /* ldb < N */
  assert_int_equal(tn_ref_gemm(2, 3, 1, a, 1, a, 3, r, 2, 1, &e),
                   MMT_ERR_INVALID_ARG); /* ldr < N */
  assert_int_equal(tn_ref_gemm(2, 2, 2, NULL, 2, a, 2, r, 2, 1, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_cpu_sgemm(2, 2, 2, a, 2, a, 2, NULL, 2, 2, &e), MMT_ERR_INVALID_ARG);
  /* empty problems: nothing to do, NULL allowed where nothing is read or written */
  assert_int_equal(tn_ref_gemm(0, 2, 2, NULL, 2, a, 2, NULL, 2, 4, &e), MMT_OK);
  assert_int_equal(tn_cpu_sgemm(2, 0, 2, a, 2, NULL, 0, NULL, 0, 4, &e), MMT_OK);
  /* K == 0 writes zeros */
  tn_fill_nan(c, 6);
  memset(r, 0xff, sizeof r);
  assert_int_equal(tn_ref_gemm(2, 3, 0, NULL, 0, NULL, 3, r, 3, 2, &e), MMT_OK);
  assert_int_equal(tn_cpu_sgemm(2, 3, 0, NULL, 0, NULL, 3, c, 3, 2, &e), MMT_OK);
  for (int i = 0; i < 6; i++) assert_true(r[i] == 0.0 && c[i] == 0.0f);
}

/* tn_ref_gemm_layout: each layout of one random problem equals the nn reference of the same
 * op(A), op(B) bit for bit (strided, threaded); bad layouts and leading dimensions refused. */
static void test_layouts(void **state) {
  (void)state;
  const int64_t m = 23, n = 17, k = 31;
  float a[23 * 31], b[31 * 17], at[31 * 40], bt[17 * 35];
  double want[23 * 17], got[23 * 20];
  uint64_t seed = 3;
  tn_fill_random(a, (size_t)(m * k), &seed);
  tn_fill_random(b, (size_t)(k * n), &seed);
  ut_err e;
  assert_int_equal(tn_ref_gemm(m, n, k, a, k, b, n, want, n, 1, &e), MMT_OK);
  /* The transposed copies, with padding: A as K rows of M (lda 40), B as N rows of K (35). */
  for (int64_t i = 0; i < m; i++)
    for (int64_t p = 0; p < k; p++) at[p * 40 + i] = a[i * k + p];
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < n; j++) bt[j * 35 + p] = b[p * n + j];
  static const char *const layouts[] = {"nn", "nt", "tn", "tt"};
  for (int l = 0; l < 4; l++) {
    bool ta = layouts[l][0] == 't', tb = layouts[l][1] == 't';
    memset(got, 0xff, sizeof got);
    assert_int_equal(tn_ref_gemm_layout(layouts[l], m, n, k, ta ? at : a, ta ? 40 : k, tb ? bt : b,
                                        tb ? 35 : n, got, 20, 3, &e),
                     MMT_OK);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) assert_true(got[i * 20 + j] == want[i * n + j]);
  }
  assert_int_equal(tn_ref_gemm_layout("nx", m, n, k, a, k, b, n, got, n, 1, &e),
                   MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "unknown layout 'nx'"));
  assert_int_equal(tn_ref_gemm_layout("tn", m, n, k, at, m - 1, b, n, got, n, 1, &e),
                   MMT_ERR_INVALID_ARG); /* A's rows hold M */
  assert_int_equal(tn_ref_gemm_layout("nt", m, n, k, a, k, bt, k - 1, got, n, 1, &e),
                   MMT_ERR_INVALID_ARG); /* B's rows hold K */
  assert_int_equal(tn_ref_gemm_layout("tt", m, n, k, NULL, m, bt, k, got, n, 1, &e),
                   MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_ref_gemm_layout("tt", 0, n, k, NULL, 1, bt, k, got, n, 1, &e), MMT_OK);
}

static void test_tolerance(void **state) {
  (void)state;
  double rel = -1, mx = -1;
  assert_true(tn_tolerance("f32", &rel, &mx));
  assert_true(rel == 1e-5 && mx == 1e-4);
  assert_true(tn_tolerance("tf32", &rel, &mx));
  assert_true(rel == 2e-3 && mx == 2e-2);
  assert_true(tn_tolerance("f16", &rel, &mx));
  assert_true(rel == 1e-2 && mx == 5e-2);
  assert_true(tn_tolerance("bf16", &rel, &mx));
  assert_true(rel == 1e-2 && mx == 5e-2);
  rel = mx = -1;
  assert_false(tn_tolerance("f64", &rel, &mx));
  assert_false(tn_tolerance("F32", &rel, &mx));
  assert_false(tn_tolerance("", &rel, &mx));
  assert_false(tn_tolerance(NULL, &rel, &mx));
  assert_true(rel == -1 && mx == -1);
}

/* Checks the f32 tolerance against the worst plausible kernel: float sums in sequence over
 * K = 16384 (the longest K of the benchmark suite).  It must pass with a 2x margin. */
static void test_f32_tolerance_margin(void **state) {
  (void)state;
  ut_err e;
  problem p;
  problem_init(&p, 48, 48, 16384, 2024);
  assert_int_equal(tn_ref_gemm(p.m, p.n, p.k, p.a, p.lda, p.b, p.ldb, p.ref, p.ldr, 2, &e), MMT_OK);
  assert_int_equal(tn_cpu_sgemm(p.m, p.n, p.k, p.a, p.lda, p.b, p.ldb, p.c, p.ldc, 2, &e), MMT_OK);
  double rel_tol, max_tol;
  assert_true(tn_tolerance("f32", &rel_tol, &max_tol));
  tn_check ck;
  tn_compare(p.m, p.n, p.c, p.ldc, p.ref, p.ldr, "f32", &ck);
  print_message("f32 sums over K=16384: rel_err %.3g (tol %g), max_err %.3g (tol %g)\n", ck.rel_err,
                rel_tol, ck.max_err, max_tol);
  assert_true(ck.pass);
  assert_true(ck.rel_err < rel_tol / 2);
  assert_true(ck.max_err < max_tol / 2);
  problem_free(&p);
}

/* A 256 x 256 result with values in [-1, 1) as both C and ref (ref = C exactly). */
typedef struct {
  float c[256 * 256];
  double ref[256 * 256];
} compare_fixture;

static compare_fixture *fixture_new(void) {
  compare_fixture *f = malloc(sizeof *f);
  assert_non_null(f);
  uint64_t seed = 99;
  tn_fill_random(f->c, 256 * 256, &seed);
  for (int i = 0; i < 256 * 256; i++) f->ref[i] = f->c[i];
  return f;
}

static void test_compare(void **state) {
  (void)state;
  compare_fixture *f = fixture_new();
  tn_check ck;
  tn_compare(256, 256, f->c, 256, f->ref, 256, "f32", &ck);
  assert_true(ck.pass);
  assert_true(ck.rel_err == 0.0 && ck.max_err == 0.0);
  assert_true(ck.bad_count == 0 && ck.bad_row == -1 && ck.bad_col == -1);
  tn_compare(256, 256, f->c, 256, f->ref, 256, "no-such-dtype", &ck);
  assert_false(ck.pass);

  /* One element off by 5e-4 of the largest value: rel_err ~ 3e-6 passes, max_err fails. */
  float keep = f->c[1000];
  f->c[1000] = (float)(f->ref[1000] + 5e-4);
  tn_compare(256, 256, f->c, 256, f->ref, 256, "f32", &ck);
  assert_false(ck.pass);
  assert_true(ck.rel_err < 1e-5);
  assert_true(ck.max_err > 1e-4);
  assert_true(ck.bad_count == 0);
  f->c[1000] = keep;

  /* Every element 2e-5 too large: max_err 2e-5 passes, rel_err fails. */
  for (int i = 0; i < 256 * 256; i++) f->c[i] = (float)(f->ref[i] * (1 + 2e-5));
  tn_compare(256, 256, f->c, 256, f->ref, 256, "f32", &ck);
  assert_false(ck.pass);
  assert_true(ck.rel_err > 1e-5 && ck.rel_err < 3e-5);
  assert_true(ck.max_err < 1e-4);
  /* ... which the looser tf32 tolerance accepts */
  tn_compare(256, 256, f->c, 256, f->ref, 256, "tf32", &ck);
  assert_true(ck.pass);
  for (int i = 0; i < 256 * 256; i++) f->c[i] = (float)f->ref[i];

  /* NaN and Inf: counted, the first one located in row-major order. */
  f->c[5 * 256 + 7] = NAN;
  f->c[9 * 256 + 1] = INFINITY;
  f->c[9 * 256 + 2] = -INFINITY;
  tn_compare(256, 256, f->c, 256, f->ref, 256, "f32", &ck);
  assert_false(ck.pass);
  assert_int_equal(ck.bad_count, 3);
  assert_int_equal(ck.bad_row, 5);
  assert_int_equal(ck.bad_col, 7);
  assert_true(ck.rel_err == 0.0); /* the finite elements are right */
  free(f);
}

static void test_compare_strided_and_zero(void **state) {
  (void)state;
  /* 2 x 3 inside leading dimensions 4 (C) and 5 (ref); the padding is NaN and ignored. */
  float c[8] = {1, 2, 3, NAN, 4, 5, 6, NAN};
  double ref[10] = {1, 2, 3, NAN, NAN, 4, 5, 6, NAN, NAN};
  tn_check ck;
  tn_compare(2, 3, c, 4, ref, 5, "f32", &ck);
  assert_true(ck.pass);
  assert_int_equal(ck.bad_count, 0);
  /* an all-zero reference: the errors are absolute */
  float z[4] = {0, 0, 0, 0};
  double zr[4] = {0, 0, 0, 0};
  tn_compare(2, 2, z, 2, zr, 2, "f32", &ck);
  assert_true(ck.pass && ck.rel_err == 0.0 && ck.max_err == 0.0);
  z[3] = 1e-6f;
  tn_compare(2, 2, z, 2, zr, 2, "f32", &ck);
  assert_true(ck.pass);
  assert_true(fabs(ck.max_err - 1e-6) < 1e-12 && fabs(ck.rel_err - 1e-6) < 1e-12);
  z[3] = 1e-3f;
  tn_compare(2, 2, z, 2, zr, 2, "f32", &ck);
  assert_false(ck.pass);
  /* a NaN in the reference is bad too */
  zr[2] = NAN;
  z[3] = 0;
  tn_compare(2, 2, z, 2, zr, 2, "f32", &ck);
  assert_false(ck.pass);
  assert_int_equal(ck.bad_row, 1);
  assert_int_equal(ck.bad_col, 0);
  /* nothing to compare */
  tn_compare(0, 5, z, 5, zr, 5, "f32", &ck);
  assert_true(ck.pass);
  /* values near FLT_MAX: the norms do not overflow */
  float big[2] = {3e38f, -3e38f};
  double bigr[2] = {3e38, -3e38};
  tn_compare(1, 2, big, 2, bigr, 2, "f32", &ck);
  assert_true(ck.pass);
  assert_true(isfinite(ck.rel_err));
}

static void test_fill_random(void **state) {
  (void)state;
  enum { N = 10000 };
  static float x[N], y[N];
  uint64_t s1 = 42, s2 = 42, s3 = 43;
  tn_fill_random(x, N, &s1);
  tn_fill_random(y, N, &s2);
  assert_memory_equal(x, y, sizeof x);
  assert_true(s1 == s2 && s1 != 42);
  tn_fill_random(y, N, &s3);
  assert_memory_not_equal(x, y, sizeof x);
  tn_fill_random(y, N, &s1); /* the advanced seed continues the sequence */
  assert_memory_not_equal(x, y, sizeof x);
  double sum = 0, lo = 1, hi = -1;
  for (int i = 0; i < N; i++) {
    assert_true(x[i] >= -1.0f && x[i] < 1.0f);
    assert_true(x[i] != 0.0f);
    sum += x[i];
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  assert_true(fabs(sum / N) < 0.05);
  assert_true(lo < -0.99 && hi > 0.99);
  /* seed 0 is fine, and a single value is never zero */
  uint64_t s0 = 0;
  float one = 0;
  tn_fill_random(&one, 1, &s0);
  assert_true(one != 0.0f && one >= -1.0f && one < 1.0f);
  /* Fixed values, so every machine makes the same inputs (splitmix64 of seed 7, checked
   * against an independent Python implementation: (2*(z >> 40) + 1 - 2^24) / 2^24). */
  uint64_t s7 = 7;
  float golden[3];
  tn_fill_random(golden, 3, &s7);
  assert_true(golden[0] == -0.2203405499458313f);
  assert_true(golden[1] == -0.9664234519004822f);
  assert_true(golden[2] == 0.801521360874176f);
}

static void test_fill_nan(void **state) {
  (void)state;
  float x[5] = {0, 1, 2, 3, 4};
  tn_fill_nan(x, 4);
  for (int i = 0; i < 4; i++) assert_true(isnan(x[i]));
  assert_true(x[4] == 4.0f);
}

static void test_gpu_source(void **state) {
  (void)state;
  const char *src = tn_ref_gpu_source();
  assert_non_null(src);
  assert_ptr_equal(src, tn_ref_gpu_source());
  assert_string_equal(TN_REF_GPU_KERNEL, "mmt_ref_gemm_f64");
  assert_non_null(
      strstr(src, "extern \"C\" __global__ void mmt_ref_gemm_f64(int M, int N, int K,"));
  assert_non_null(strstr(src, "double *__restrict__ R, int ldr)"));
  assert_null(strstr(src, "#include"));
  /* That it compiles and matches tn_ref_gemm is checked in test_tuner (NVRTC, then GPU). */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_amp_3x2_2x3),
      cmocka_unit_test(test_amp_4x4),
      cmocka_unit_test(test_random_strided),
      cmocka_unit_test(test_thread_failure_fallback),
      cmocka_unit_test(test_gemm_args),
      cmocka_unit_test(test_layouts),
      cmocka_unit_test(test_tolerance),
      cmocka_unit_test(test_f32_tolerance_margin),
      cmocka_unit_test(test_compare),
      cmocka_unit_test(test_compare_strided_and_zero),
      cmocka_unit_test(test_fill_random),
      cmocka_unit_test(test_fill_nan),
      cmocka_unit_test(test_gpu_source),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
