/* test_fp8.c -- the host FP8 conversions (fp8.h) over every code: the values the OCP formats
 * define, every finite code back to itself, every midpoint between neighbours to the even one,
 * saturation and NaN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fp8.h"

typedef struct {
  uint8_t (*from)(float);
  float (*to)(uint8_t);
  float max;
} format;

static const format k_formats[] = {{fp8_e4m3_from_f32, fp8_e4m3_to_f32, FP8_E4M3_MAX},
                                   {fp8_e5m2_from_f32, fp8_e5m2_to_f32, FP8_E5M2_MAX}};

static void test_known_values(void **state) {
  (void)state;
  assert_true(fp8_e4m3_to_f32(0x7e) == 448.0f);  /* S.1111.110 */
  assert_true(isnan(fp8_e4m3_to_f32(0x7f)));     /* S.1111.111 */
  assert_true(fp8_e4m3_to_f32(0x78) == 256.0f);  /* exponent all ones is finite */
  assert_true(fp8_e4m3_to_f32(0x08) == 0x1p-6f); /* smallest normal */
  assert_true(fp8_e4m3_to_f32(0x01) == 0x1p-9f); /* smallest subnormal */
  assert_true(fp8_e4m3_to_f32(0x38) == 1.0f);
  assert_true(fp8_e4m3_to_f32(0xb8) == -1.0f);
  assert_true(fp8_e5m2_to_f32(0x7b) == 57344.0f);
  assert_true(isinf(fp8_e5m2_to_f32(0x7c)) && fp8_e5m2_to_f32(0xfc) < 0);
  assert_true(isnan(fp8_e5m2_to_f32(0x7d)));
  assert_true(fp8_e5m2_to_f32(0x04) == 0x1p-14f);
  assert_true(fp8_e5m2_to_f32(0x01) == 0x1p-16f);
  assert_true(fp8_e5m2_to_f32(0x3c) == 1.0f);
  /* saturation, NaN, signed zero */
  assert_int_equal(fp8_e4m3_from_f32(1e9f), 0x7e);
  assert_int_equal(fp8_e4m3_from_f32(-INFINITY), 0xfe);
  assert_int_equal(fp8_e5m2_from_f32(INFINITY), 0x7b);
  assert_int_equal(fp8_e4m3_from_f32(NAN) & 0x7f, 0x7f);
  assert_true(isnan(fp8_e5m2_to_f32(fp8_e5m2_from_f32(NAN))));
  assert_int_equal(fp8_e4m3_from_f32(-0.0f), 0x80);
  assert_int_equal(fp8_e4m3_from_f32(0x1p-11f), 0x00);   /* below half the smallest: zero */
  assert_int_equal(fp8_e4m3_from_f32(0x1.8p-10f), 0x01); /* 0.75 of it: up */
}

/* Every finite code decodes and encodes back; between neighbours a and b (a < b, both
 * finite, same sign), the midpoint goes to the one with the even code, and a little either
 * side of it to the nearer. */
static void test_every_code(void **state) {
  (void)state;
  for (int f = 0; f < 2; f++) {
    const format *fm = &k_formats[f];
    int finite = 0;
    for (int c = 0; c < 256; c++) {
      const float v = fm->to((uint8_t)c);
      if (!isfinite(v)) continue;
      finite++;
      if (v == 0.0f) continue; /* +0 and -0 checked above */
      assert_int_equal(fm->from(v), c);
      assert_true(fabsf(v) <= fm->max);
      const int next = c + 1; /* the neighbour away from zero, same sign */
      if ((next & 0x7f) == 0) continue;
      const float w = fm->to((uint8_t)next);
      if (!isfinite(w)) continue;
      const double mid = ((double)v + (double)w) / 2;
      const float m = (float)mid; /* exact: 8-bit values' midpoints fit a float */
      assert_true((double)m == mid);
      assert_int_equal(fm->from(m), (c % 2 == 0) ? c : next);
      assert_int_equal(fm->from(nextafterf(m, 0.0f)), c);
      assert_int_equal(fm->from(nextafterf(m, m > 0 ? INFINITY : -INFINITY)), next);
    }
    assert_int_equal(finite, f == 0 ? 254 : 248); /* e4m3: 2 NaN; e5m2: 2 inf, 6 NaN */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_known_values),
                                     cmocka_unit_test(test_every_code)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
