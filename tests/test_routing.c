/*
 * test_routing.c -- the routings grouped problems are timed over (tuner/gpu/routing.h): every
 * row routed once, the kinds' shapes (balanced, a few hot experts, half the experts empty),
 * deterministic for a seed, and the contiguous layout's offsets; a masked problem's blocks
 * sized by its routings (tn_gpu_masked_blocks, no GPU needed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/measure_int.h"
#include "gpu/routing.h"

#define G 64
#define ROWS 16384

static int64_t sum(const int *c, int64_t g) {
  int64_t s = 0;
  for (int64_t z = 0; z < g; z++) s += c[z];
  return s;
}

static int most(const int *c, int64_t g) {
  int m = 0;
  for (int64_t z = 0; z < g; z++) m = c[z] > m ? c[z] : m;
  return m;
}

static int empty(const int *c, int64_t g) {
  int e = 0;
  for (int64_t z = 0; z < g; z++) e += c[z] == 0;
  return e;
}

static void test_kinds(void **state) {
  (void)state;
  double cdf[G];
  int c[G], again[G];
  for (int kind = 0; kind < TN_ROUTE_KINDS; kind++) {
    for (uint64_t seed = 1; seed < 6; seed++) {
      tn_route((tn_route_kind)kind, G, ROWS, seed, cdf, c);
      assert_int_equal(sum(c, G), ROWS);
      tn_route((tn_route_kind)kind, G, ROWS, seed, cdf, again);
      assert_memory_equal(c, again, sizeof c);
      if (kind == TN_ROUTE_UNIFORM) { /* balanced: every expert near ROWS / G = 256 */
        assert_int_equal(empty(c, G), 0);
        assert_true(most(c, G) < 2 * ROWS / G);
      } else if (kind == TN_ROUTE_ZIPF) { /* the hottest expert: 1 / H(64, 1.2) of the rows */
        assert_true(most(c, G) > 4 * ROWS / G);
        assert_true(c[0] == most(c, G));
      } else { /* sparse: about half empty, the rest balanced among themselves */
        assert_true(empty(c, G) >= G / 4 && empty(c, G) <= 3 * G / 4);
        assert_true(most(c, G) < 4 * ROWS / G);
      }
    }
  }
  assert_string_equal(tn_route_name(TN_ROUTE_SPARSE), "sparse");
}

static void test_edges(void **state) {
  (void)state;
  double cdf[G];
  int c[G];
  int32_t off[G + 1];
  /* one expert takes everything; no rows leaves every expert empty */
  tn_route(TN_ROUTE_SPARSE, 1, 7, 3, cdf, c);
  assert_int_equal(c[0], 7);
  tn_route(TN_ROUTE_ZIPF, G, 0, 3, cdf, c);
  assert_int_equal(empty(c, G), G);
  /* fewer rows than experts: decode, most experts empty */
  tn_route(TN_ROUTE_UNIFORM, G, 5, 9, cdf, c);
  assert_int_equal(sum(c, G), 5);
  assert_true(empty(c, G) >= G - 5);
  /* a sparse routing of any seed keeps at least one expert */
  for (uint64_t seed = 0; seed < 200; seed++) {
    tn_route(TN_ROUTE_SPARSE, 2, 10, seed, cdf, c);
    assert_int_equal(c[0] + c[1], 10);
  }
  tn_route(TN_ROUTE_UNIFORM, G, ROWS, 11, cdf, c);
  tn_route_offsets(G, c, off);
  assert_int_equal(off[0], 0);
  assert_int_equal(off[G], ROWS);
  for (int z = 0; z < G; z++) assert_int_equal(off[z + 1] - off[z], c[z]);
}

/* A masked op's problem: M (the mean an expert) becomes the fullest expert's rows over the
 * problem's routings, G x M rows in all; any other problem is left as it is; more than 2^31
 * rows in all is refused by name. */
static void test_masked_blocks(void **state) {
  (void)state;
  tn_gpu g = {0};
  ut_err err;
  tn_measure_opts o = {.m = 13, .n = 256, .k = 192, .dtype = "f16", .batch = 8};
  snprintf(o.op, sizeof o.op, "out=f16,group=contiguous");
  assert_int_equal(tn_gpu_masked_blocks(&g, &o, &err), MMT_OK);
  assert_int_equal(o.m, 13);
  assert_int_equal(g.routed_rows, 0);
  snprintf(o.op, sizeof o.op, "out=f16,bias=col,group=masked");
  assert_int_equal(tn_gpu_masked_blocks(&g, &o, &err), MMT_OK);
  assert_int_equal(g.routed_rows, 8 * 13);
  /* the sparse routing alone puts the 104 rows on about half the experts */
  assert_true(o.m > 13 && o.m <= 104);
  tn_measure_opts again = {.m = 13, .n = 256, .k = 192, .dtype = "f16", .batch = 8};
  snprintf(again.op, sizeof again.op, "%s", o.op);
  assert_int_equal(tn_gpu_masked_blocks(&g, &again, &err), MMT_OK);
  assert_int_equal(again.m, o.m); /* the same draws for every candidate */
  o.m = (int64_t)1 << 30;
  assert_int_equal(tn_gpu_masked_blocks(&g, &o, &err), MMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "a masked problem of 8 experts of 1073741824 rows"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kinds),
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_masked_blocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
