/* fp8.c -- see fp8.h.  One encoder and one decoder for both formats, by their fields. */
#include "fp8.h"

#include <math.h>
#include <stdbool.h>

typedef struct {
  int mbits, bias;
  bool has_inf; /* e5m2: exponent all ones is infinity (mantissa 0) or NaN; e4m3: only S.1111.111
                   is NaN, the rest of that exponent is finite */
  float max;
  uint8_t max_code, nan_code;
} fp8_format;

static const fp8_format k_e4m3 = {3, 7, false, FP8_E4M3_MAX, 0x7e, 0x7f};
static const fp8_format k_e5m2 = {2, 15, true, FP8_E5M2_MAX, 0x7b, 0x7f};

static uint8_t encode(const fp8_format *f, float x) {
  const uint8_t sign = signbit(x) ? 0x80 : 0;
  if (isnan(x)) return f->nan_code | sign;
  double a = fabs((double)x);
  if (a >= (double)f->max) return f->max_code | sign; /* satfinite, infinity included */
  const int emin = 1 - f->bias;                       /* of the normal numbers */
  int e;
  frexp(a, &e); /* a = m * 2^e, m in [0.5, 1): its exponent as a normal number is e - 1 */
  const int exp = e - 1 < emin ? emin : e - 1;
  const double quantum = ldexp(1.0, exp - f->mbits);
  a = rint(a / quantum) * quantum; /* to nearest even: the default rounding mode */
  if (a > (double)f->max) a = (double)f->max;
  if (a == 0.0) return sign;
  frexp(a, &e);
  if (e - 1 < emin) /* subnormal: exponent field 0 */
    return sign | (uint8_t)(a / ldexp(1.0, emin - f->mbits));
  const int mant = (int)((ldexp(a, -(e - 1)) - 1.0) * (1 << f->mbits));
  return sign | (uint8_t)((e - 1 + f->bias) << f->mbits | mant);
}

static float decode(const fp8_format *f, uint8_t v) {
  const int exp_bits = 7 - f->mbits, mant = v & ((1 << f->mbits) - 1);
  const int field = v >> f->mbits & ((1 << exp_bits) - 1);
  const float sign = v & 0x80 ? -1.0f : 1.0f;
  if (field == (1 << exp_bits) - 1) {
    if (f->has_inf) return mant ? NAN : sign * INFINITY;
    if (mant == (1 << f->mbits) - 1) return NAN;
  }
  if (field == 0) return sign * (float)ldexp(mant, 1 - f->bias - f->mbits);
  return sign * (float)ldexp(1.0 + mant / (double)(1 << f->mbits), field - f->bias);
}

uint8_t fp8_e4m3_from_f32(float f) { return encode(&k_e4m3, f); }
float fp8_e4m3_to_f32(uint8_t v) { return decode(&k_e4m3, v); }
uint8_t fp8_e5m2_from_f32(float f) { return encode(&k_e5m2, f); }
float fp8_e5m2_to_f32(uint8_t v) { return decode(&k_e5m2, v); }
