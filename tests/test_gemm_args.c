/*
 * test_gemm_args.c -- rt_gemm: mmt_gemm's argument checks (every invalid case gets its status
 * and a message naming the argument) and the mapping of both storage orders and all four
 * transpose combinations onto the row-major kernel problem.  No GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

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
  p.dtype = (mmt_dtype)4;
  expect(p, 1, P, P, P, MMT_ERR_INVALID_ARG, "dtype 4 is not an mmt_dtype");
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_enums),        cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_leading_dimensions), cmocka_unit_test(test_pointers),
      cmocka_unit_test(test_mapping),      cmocka_unit_test(test_mapping_keeps_minimums),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
