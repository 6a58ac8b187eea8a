/*
 * test_gemm_args.c -- rt_gemm: mmt_gemm's argument checks (every invalid case gets its status
 * and a message naming the argument) and the mapping of both storage orders and all four
 * transpose combinations onto the row-major kernel problem, and the canonical form of GEMVs
 * (the kernel problem reads the caller's memory only, and computes the caller's product).
 * No GPU.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gen.h"
#include "rt_gemm.h"

static const void *const P = (const void *)(uintptr_t)0x1000;   /* aligned for every dtype */
static const void *const ODD2 = (const void *)(uintptr_t)0x1002; /* 2-byte aligned only */

static mmt_problem prob(mmt_order o, mmt_transpose ta, mmt_transpose tb, int64_t m, int64_t n,
                        int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  return (mmt_problem){o, ta, tb, m, n, k, lda, ldb, ldc, MMT_F32};
}

static void expect(mmt_problem p, float alpha, const void *a, const void *b, const void *c,
                   mmt_status rc, const char *msg) {
  ut_err e = {{0}};
  assert_int_equal(rt_gemm_check_call(&p, alpha, a, b, c, &e), rc);
  if (msg) assert_string_equal(e.msg, msg);
}

#define R MMT_ROW_MAJOR
#define C MMT_COL_MAJOR
#define N MMT_NO_TRANS
#define T MMT_TRANS

static void test_enums(void **state) {
  (void)state;
  mmt_problem p = prob(R, N, N, 4, 5, 6, 6, 5, 5);
  expect(p, 1, P, P, P, MMT_OK, NULL);
  p.order = (mmt_order)7;
  expect(p, 1, P, P, P, MMT_ERR_INVALID_ARG, "order must be MMT_ROW_MAJOR or MMT_COL_MAJOR, got 7");
  p = prob(R, (mmt_transpose)-1, N, 4, 5, 6, 6, 5, 5);
  expect(p, 1, P, P, P, MMT_ERR_INVALID_ARG, "transA must be MMT_NO_TRANS or MMT_TRANS, got -1");
  p = prob(R, N, (mmt_transpose)2, 4, 5, 6, 6, 5, 5);
  expect(p, 1, P, P, P, MMT_ERR_INVALID_ARG, "transB must be MMT_NO_TRANS or MMT_TRANS, got 2");
  p = prob(R, N, N, 4, 5, 6, 6, 5, 5);
  p.dtype = (mmt_dtype)6;
  expect(p, 1, P, P, P, MMT_ERR_INVALID_ARG, "dtype 6 is not an mmt_dtype");
  p.dtype = MMT_E4M3; /* FP8 is mmt_matmul's alone */
  expect(p, 1, P, P, P, MMT_ERR_INVALID_ARG,
         "dtype e4m3: FP8 has no plain GEMM (C would be FP8); use mmt_matmul with out_type "
         "MMT_BF16, MMT_F16 or MMT_F32");
  assert_null(rt_dtype((mmt_dtype)-1));
  assert_string_equal(rt_dtype(MMT_TF32)->name, "tf32");
  assert_int_equal(rt_dtype(MMT_TF32)->elem_bytes, 4);
  assert_int_equal(rt_dtype(MMT_F16)->elem_bytes, 2);
  ut_err e;
  assert_int_equal(rt_gemm_check(NULL, &e), MMT_ERR_INVALID_ARG);
}

static void test_sizes(void **state) {
  (void)state;
  expect(prob(R, N, N, -1, 5, 6, 6, 5, 5), 1, P, P, P, MMT_ERR_INVALID_ARG, "M must be >= 0, got -1");
  expect(prob(R, N, N, 4, -2, 6, 6, 5, 5), 1, P, P, P, MMT_ERR_INVALID_ARG, "N must be >= 0, got -2");
  expect(prob(R, N, N, 4, 5, -3, 6, 5, 5), 1, P, P, P, MMT_ERR_INVALID_ARG, "K must be >= 0, got -3");
  int64_t big = (int64_t)INT32_MAX + 1;
  expect(prob(R, N, N, big, 5, 6, 6, 5, 5), 1, P, P, P, MMT_ERR_UNSUPPORTED,
         "M = 2147483648 exceeds 2147483647: kernels take int sizes");
  expect(prob(R, N, N, 4, big, 6, 6, big, big), 1, P, P, P, MMT_ERR_UNSUPPORTED, NULL);
  expect(prob(R, N, N, 4, 5, big, big, 5, 5), 1, P, P, P, MMT_ERR_UNSUPPORTED, NULL);
  expect(prob(R, N, N, 4, 5, 6, big, 5, 5), 1, P, P, P, MMT_ERR_UNSUPPORTED,
         "lda = 2147483648 exceeds 2147483647: kernels take int sizes");
  expect(prob(R, N, N, 4, 5, 6, 6, big, 5), 1, P, P, P, MMT_ERR_UNSUPPORTED, NULL);
  expect(prob(R, N, N, 4, 5, 6, 6, 5, big), 1, P, P, P, MMT_ERR_UNSUPPORTED, NULL);
}

/* The minimum leading dimensions of mmtune.h, for every order and transpose: one below is
 * refused with a message naming the bound, the minimum itself passes.  M=3, N=5, K=7. */
static void test_leading_dimensions(void **state) {
  (void)state;
  static const struct {
    mmt_order o;
    mmt_transpose ta, tb;
    int64_t lda, ldb, ldc;
    const char *a_what, *b_what, *c_what;
  } cases[] = {
      {R, N, N, 7, 5, 5, "K", "N", "N"}, {R, T, N, 3, 5, 5, "M", "N", "N"},
      {R, N, T, 7, 7, 5, "K", "K", "N"}, {R, T, T, 3, 7, 5, "M", "K", "N"},
      {C, N, N, 3, 7, 3, "M", "K", "M"}, {C, T, N, 7, 7, 3, "K", "K", "M"},
      {C, N, T, 3, 5, 3, "M", "N", "M"}, {C, T, T, 7, 5, 3, "K", "N", "M"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int64_t ld[3] = {cases[i].lda, cases[i].ldb, cases[i].ldc};
    const char *what[3] = {cases[i].a_what, cases[i].b_what, cases[i].c_what};
    const char *name[3] = {"lda", "ldb", "ldc"};
    mmt_problem p = prob(cases[i].o, cases[i].ta, cases[i].tb, 3, 5, 7, ld[0], ld[1], ld[2]);
    expect(p, 1, P, P, P, MMT_OK, NULL);
    for (int j = 0; j < 3; j++) {
      mmt_problem q = p;
      int64_t *f = j == 0 ? &q.lda : j == 1 ? &q.ldb : &q.ldc;
      *f = ld[j] - 1;
      char msg[128];
      snprintf(msg, sizeof msg, "%s must be >= max(1, %s) = %lld, got %lld", name[j], what[j],
               (long long)ld[j], (long long)(ld[j] - 1));
      expect(q, 1, P, P, P, MMT_ERR_INVALID_ARG, msg);
    }
  }
  /* Zero sizes still need leading dimensions >= 1, as in BLAS. */
  expect(prob(R, N, N, 0, 0, 0, 0, 1, 1), 1, NULL, NULL, NULL, MMT_ERR_INVALID_ARG,
         "lda must be >= max(1, K) = 1, got 0");
  expect(prob(R, N, N, 0, 0, 0, 1, 1, 1), 1, NULL, NULL, NULL, MMT_OK, NULL);
}

static void test_pointers(void **state) {
  (void)state;
  mmt_problem p = prob(R, N, N, 4, 5, 6, 6, 5, 5);
  expect(p, 1, NULL, P, P, MMT_ERR_INVALID_ARG, "A is NULL but the call uses it");
  expect(p, 1, P, NULL, P, MMT_ERR_INVALID_ARG, "B is NULL but the call uses it");
  expect(p, 1, P, P, NULL, MMT_ERR_INVALID_ARG, "C is NULL but the call uses it");
  expect(p, 1, ODD2, P, P, MMT_ERR_INVALID_ARG, NULL);
  expect(p, 1, P, P, ODD2, MMT_ERR_INVALID_ARG, NULL);
  /* Element alignment is per dtype: 2 bytes is enough for f16. */
  p.dtype = MMT_F16;
  expect(p, 1, ODD2, ODD2, ODD2, MMT_OK, NULL);
  p.dtype = MMT_F32;
  /* What the call does not read may be NULL (or anything): K == 0, alpha == 0, M or N == 0. */
  expect(prob(R, N, N, 4, 5, 0, 1, 5, 5), 1, NULL, NULL, P, MMT_OK, NULL);
  expect(p, 0.0f, NULL, ODD2, P, MMT_OK, NULL);
  expect(prob(R, N, N, 0, 5, 6, 6, 5, 5), 1, NULL, NULL, NULL, MMT_OK, NULL);
  expect(prob(R, N, N, 4, 0, 6, 6, 1, 1), 1, NULL, NULL, NULL, MMT_OK, NULL);
}

/* Row-major maps as is; column-major swaps A and B, M and N, and keeps each operand's flag. */
static void test_mapping(void **state) {
  (void)state;
  static const struct {
    mmt_order o;
    mmt_transpose ta, tb;
    const char *layout;
  } cases[] = {
      {R, N, N, "nn"}, {R, N, T, "nt"}, {R, T, N, "tn"}, {R, T, T, "tt"},
      {C, N, N, "nn"}, {C, N, T, "tn"}, {C, T, N, "nt"}, {C, T, T, "tt"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mmt_problem p = prob(cases[i].o, cases[i].ta, cases[i].tb, 3, 5, 7, 11, 13, 17);
    rt_gemm_kernel_problem kp;
    rt_gemm_map(&p, &kp);
    assert_string_equal(kp.layout, cases[i].layout);
    bool col = cases[i].o == C;
    assert_int_equal(kp.swapped, col);
    assert_int_equal(kp.m, col ? 5 : 3);
    assert_int_equal(kp.n, col ? 3 : 5);
    assert_int_equal(kp.k, 7);
    assert_int_equal(kp.lda, col ? 13 : 11);
    assert_int_equal(kp.ldb, col ? 11 : 13);
    assert_int_equal(kp.ldc, 17);
  }
}

/* A column-major call's kernel problem passes the kernel-side minimums whenever the call
 * passes mmt_gemm's: the mapping never hands a kernel a leading dimension it cannot use. */
static void test_mapping_keeps_minimums(void **state) {
  (void)state;
  for (int o = 0; o < 2; o++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        mmt_problem p = prob((mmt_order)o, (mmt_transpose)ta, (mmt_transpose)tb, 3, 5, 7, 1, 1, 1);
        ut_err e;
        /* Raise each ld to the smallest the checks accept. */
        while (rt_gemm_check(&p, &e) != MMT_OK) {
          if (strstr(e.msg, "lda")) p.lda++;
          else if (strstr(e.msg, "ldb")) p.ldb++;
          else p.ldc++;
        }
        rt_gemm_kernel_problem kp;
        rt_gemm_map(&p, &kp);
        int64_t a_row = kp.layout[0] == 't' ? kp.m : kp.k, b_row = kp.layout[1] == 't' ? kp.k : kp.n;
        assert_int_equal(kp.lda, a_row);
        assert_int_equal(kp.ldb, b_row);
        assert_int_equal(kp.ldc, kp.n);
      }
}

/* ---- the canonical form of vectors ---- */

#define BUF 4096

/* The elements a row-major rows x cols matrix at pitch ld spans (0 when empty). */
static int64_t span(int64_t rows, int64_t cols, int64_t ld) {
  return rows > 0 && cols > 0 ? (rows - 1) * ld + cols : 0;
}

/* Index of op(X)[i][j] in a stored matrix: the caller's view (either order). */
static int64_t caller_index(mmt_order o, mmt_transpose t, int64_t i, int64_t j, int64_t ld) {
  if (t == T) {
    int64_t s = i;
    i = j;
    j = s;
  }
  return o == R ? i * ld + j : i + j * ld;
}

/* The caller's stored footprint of op(X) (rows x cols), in elements. */
static int64_t caller_span(mmt_order o, mmt_transpose t, int64_t rows, int64_t cols, int64_t ld) {
  int64_t r = t == T ? cols : rows, c = t == T ? rows : cols; /* as stored, in the caller's order */
  return o == R ? span(r, c, ld) : span(c, r, ld);
}

/* C of the caller's call into c (untouched elements stay NaN). */
static void caller_product(const mmt_problem *p, const double *a, const double *b, double *c) {
  for (int64_t i = 0; i < p->m; i++)
    for (int64_t j = 0; j < p->n; j++) {
      double sum = 0;
      for (int64_t l = 0; l < p->k; l++)
        sum += a[caller_index(p->order, p->trans_a, i, l, p->lda)] *
               b[caller_index(p->order, p->trans_b, l, j, p->ldb)];
      c[p->order == R ? i * p->ldc + j : i + j * p->ldc] = sum;
    }
}

/* C of the kernel problem kp on the caller's buffers (its A is B when swapped), row-major;
 * every index it reads or writes must lie in the caller's own footprints. */
static void kernel_product(const mmt_problem *p, const rt_gemm_kernel_problem *kp,
                           const double *a, const double *b, double *c) {
  const double *ka = kp->swapped ? b : a, *kb = kp->swapped ? a : b;
  int64_t a_span = caller_span(p->order, p->trans_a, p->m, p->k, p->lda);
  int64_t b_span = caller_span(p->order, p->trans_b, p->k, p->n, p->ldb);
  int64_t c_span = p->order == R ? span(p->m, p->n, p->ldc) : span(p->n, p->m, p->ldc);
  int64_t ka_span = kp->swapped ? b_span : a_span, kb_span = kp->swapped ? a_span : b_span;
  mmt_transpose ta = kp->layout[0] == 't' ? T : N, tb = kp->layout[1] == 't' ? T : N;
  for (int64_t i = 0; i < kp->m; i++)
    for (int64_t j = 0; j < kp->n; j++) {
      double sum = 0;
      for (int64_t l = 0; l < kp->k; l++) {
        int64_t ia = caller_index(R, ta, i, l, kp->lda), ib = caller_index(R, tb, l, j, kp->ldb);
        assert_in_range(ia, 0, ka_span - 1);
        assert_in_range(ib, 0, kb_span - 1);
        sum += ka[ia] * kb[ib];
      }
      int64_t ic = i * kp->ldc + j;
      assert_in_range(ic, 0, c_span - 1);
      c[ic] = sum;
    }
}

/* Every order and transpose, vectors on either side (and neither), leading dimensions at
 * their minimum and padded: the kernel problem is the caller's product on the caller's
 * memory, bit for bit (the same sums in the same order), and meets the kernel-side minimums. */
static void test_canonical_computes_the_call(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {{1, 1, 1}, {1, 4, 3}, {4, 1, 3}, {1, 1, 5}, {5, 1, 1},
                                      {3, 2, 4}, {1, 7, 1}, {6, 1, 6}};
  static double a[BUF], b[BUF], c1[BUF], c2[BUF];
  for (int i = 0; i < BUF; i++) {
    a[i] = (double)((i * 7919) % 1009) / 17.0 - 29.0;
    b[i] = (double)((i * 104729) % 997) / 13.0 - 37.0;
  }
  int transposed = 0;
  for (int o = 0; o < 2; o++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
          for (int pad = 0; pad <= 2; pad += 2) {
            mmt_problem p = prob((mmt_order)o, (mmt_transpose)ta, (mmt_transpose)tb, shapes[s][0],
                                 shapes[s][1], shapes[s][2], 0, 0, 0);
            int64_t min[3];
            const char *what[3];
            rt_gemm_min_ld(&p, min, what);
            p.lda = (min[0] > 1 ? min[0] : 1) + pad;
            p.ldb = (min[1] > 1 ? min[1] : 1) + pad;
            p.ldc = (min[2] > 1 ? min[2] : 1) + pad;
            ut_err e;
            assert_int_equal(rt_gemm_check(&p, &e), MMT_OK);
            rt_gemm_kernel_problem kp;
            rt_gemm_map(&p, &kp);
            int64_t kmin[3];
            gen_min_ld(kp.layout, kp.m, kp.n, kp.k, kmin);
            assert_true(kp.lda >= kmin[0] && kp.ldb >= kmin[1] && kp.ldc >= kmin[2]);
            for (int i = 0; i < BUF; i++) c1[i] = c2[i] = NAN;
            caller_product(&p, a, b, c1);
            kernel_product(&p, &kp, a, b, c2);
            for (int i = 0; i < BUF; i++)
              if (!(isnan(c1[i]) && isnan(c2[i])) && c1[i] != c2[i])
                fail_msg("order %d, layout %c%c, %lldx%lldx%lld, pad %d: C[%d] %g, kernel %g", o,
                         "nt"[ta], "nt"[tb], (long long)p.m, (long long)p.n, (long long)p.k, pad,
                         i, c1[i], c2[i]);
            transposed += kp.transposed;
          }
  assert_true(transposed > 0); /* the transpose was among the cases */
}

/* Which forms GEMVs take: packed Mx1xK in every layout is packed 1xMxK (nn when A is stored
 * transposed, nt otherwise); A stored transposed with one row is A as is; a padded C column
 * (ldc > 1) or a strided B column stays N = 1; other problems do not change. */
static void test_canonical_forms(void **state) {
  (void)state;
  static const struct {
    const char *layout;
    int64_t m, n, k;
    const char *out;
    int64_t om, on;
    bool transposed;
  } packed[] = {
      {"nn", 4096, 1, 4096, "nt", 1, 4096, true}, {"nt", 4096, 1, 4096, "nt", 1, 4096, true},
      {"tn", 4096, 1, 4096, "nn", 1, 4096, true}, {"tt", 4096, 1, 4096, "nn", 1, 4096, true},
      {"nn", 1, 4096, 4096, "nn", 1, 4096, false}, {"nt", 1, 4096, 4096, "nt", 1, 4096, false},
      {"tn", 1, 4096, 4096, "nn", 1, 4096, false}, {"tt", 1, 4096, 4096, "nt", 1, 4096, false},
      {"nn", 1, 1, 64, "nt", 1, 1, false},         {"tn", 16, 16, 64, "tn", 16, 16, false},
      {"nn", 4096, 2, 4096, "nn", 4096, 2, false},
  };
  for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++) {
    rt_gemm_kernel_problem kp;
    rt_gemm_canonical_packed(packed[i].layout, packed[i].m, packed[i].n, packed[i].k, &kp);
    assert_string_equal(kp.layout, packed[i].out);
    assert_int_equal(kp.m, packed[i].om);
    assert_int_equal(kp.n, packed[i].on);
    assert_int_equal(kp.transposed, packed[i].transposed);
    assert_int_equal(kp.swapped, packed[i].transposed);
    /* still packed: the problem the tuner measures for this form */
    gen_problem tuned = gen_packed_problem("f16", kp.layout, kp.m, kp.n, kp.k);
    assert_int_equal(kp.lda, tuned.lda);
    assert_int_equal(kp.ldb, tuned.ldb);
    assert_int_equal(kp.ldc, tuned.ldc);
  }
  rt_gemm_kernel_problem kp;
  /* C a strided column: no transpose; B's unit-stride column is stored as a row. */
  mmt_problem p = prob(R, N, N, 64, 1, 32, 32, 1, 3);
  rt_gemm_map(&p, &kp);
  assert_false(kp.transposed);
  assert_string_equal(kp.layout, "nt");
  assert_int_equal(kp.ldb, 32);
  /* B a strided column: no transpose, B as it is. */
  p = prob(R, N, N, 64, 1, 32, 32, 2, 1);
  rt_gemm_map(&p, &kp);
  assert_false(kp.transposed);
  assert_string_equal(kp.layout, "nn");
  assert_int_equal(kp.ldb, 2);
  /* Column-major and N = 1: already M = 1 after the swap; swapped once. */
  p = prob(C, T, N, 64, 1, 32, 32, 32, 64);
  rt_gemm_map(&p, &kp);
  assert_true(kp.swapped);
  assert_false(kp.transposed);
  assert_int_equal(kp.m, 1);
  assert_string_equal(kp.layout, "nt");
}

/* The pitch of a matrix stored as one row never steps: it becomes the row's width rounded up
 * to 16 elements, so that a batch-1 call with an odd N is as aligned as its pointers; a pitch
 * that steps keeps the caller's value. */
static void test_one_row_pitches(void **state) {
  (void)state;
  /* 1x50257x768, x W^T: C is one row of 50257 (GPT-2's vocabulary); W's rows step. */
  mmt_problem p = prob(R, N, T, 1, 50257, 768, 768, 768, 50257);
  rt_gemm_kernel_problem kp;
  rt_gemm_map(&p, &kp);
  assert_string_equal(kp.layout, "nt");
  assert_int_equal(kp.lda, 768);
  assert_int_equal(kp.ldb, 768);
  assert_int_equal(kp.ldc, 50272);
  assert_int_equal(gen_packed_problem("f16", "nt", 1, 50257, 768).align_bytes, 16);
  assert_int_equal(gen_packed_problem("f16", "nt", 2, 50257, 768).align_bytes, 2); /* C steps */
  /* A padded caller pitch of a one-row A is replaced too; B's steps and stays. */
  p = prob(R, N, N, 1, 40, 21, 99, 45, 77);
  rt_gemm_map(&p, &kp);
  assert_int_equal(kp.lda, 32);
  assert_int_equal(kp.ldb, 45);
  assert_int_equal(kp.ldc, 48);
  /* K = 1 (a rank-1 update), layout tn: A stored 1 x M and B stored 1 x N are rows; C steps. */
  int64_t ld[3] = {5, 7, 7};
  gen_one_row_pitches("tn", 5, 7, 1, ld);
  assert_int_equal(ld[0], 16);
  assert_int_equal(ld[1], 16);
  assert_int_equal(ld[2], 7);
  /* N = 1 with a strided C column (no transpose): B stored transposed is one row of K. */
  p = prob(R, N, T, 64, 1, 33, 33, 33, 3);
  rt_gemm_map(&p, &kp);
  assert_false(kp.transposed);
  assert_int_equal(kp.ldb, 48);
  assert_int_equal(kp.ldc, 3);
  /* Rounding that would pass the int ABI keeps the width. */
  int64_t wide[3] = {1, INT32_MAX, INT32_MAX};
  gen_one_row_pitches("nn", 1, INT32_MAX, 1, wide);
  assert_int_equal(wide[2], INT32_MAX);
  assert_int_equal(wide[0], 16);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_enums),        cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_leading_dimensions), cmocka_unit_test(test_pointers),
      cmocka_unit_test(test_mapping),      cmocka_unit_test(test_mapping_keeps_minimums),
      cmocka_unit_test(test_canonical_computes_the_call), cmocka_unit_test(test_canonical_forms),
      cmocka_unit_test(test_one_row_pitches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
