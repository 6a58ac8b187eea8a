/* quant_ref.c -- see quant_ref.h. */
#include "quant_ref.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "fp8.h"
#include "matmul_ref.h"

static float scale_of(float amax, float fp8_max, int pow2) {
  float s = amax / fp8_max;
  if (!(s >= FLT_MIN)) s = FLT_MIN;
  if (pow2) {
    uint32_t bits;
    memcpy(&bits, &s, 4);
    if (bits & 0x7fffffu) bits = (bits & 0x7f800000u) + 0x800000u;
    memcpy(&s, &bits, 4);
  }
  return s;
}

/* The group of element (i, j) and the number of groups in a row of groups. */
static int64_t group_of(const mmt_quantize_desc *d, int64_t i, int64_t j) {
  const int64_t cb = (d->cols + 127) / 128;
  switch (d->mode) {
  case MMT_QUANT_TENSOR: return 0;
  case MMT_QUANT_ROW: return i;
  case MMT_QUANT_1X128: return j / 128 * d->rows + i;
  case MMT_QUANT_128X128: return i / 128 * cb + j / 128;
  }
  return 0;
}

/* Each group's largest finite |x| into amax[group]. */
static void amax_of(const mmt_quantize_desc *d, const void *x, float *amax) {
  const int64_t groups = mmt_quantize_scales(d->mode, d->rows, d->cols);
  for (int64_t g = 0; g < groups; g++) amax[g] = 0.0f;
  for (int64_t i = 0; i < d->rows; i++)
    for (int64_t j = 0; j < d->cols; j++) {
      const float a = fabsf((float)mr_load(d->in_type, x, i * d->ldx + j));
      float *m = &amax[group_of(d, i, j)];
      if (a <= FLT_MAX && a > *m) *m = a;
    }
}

/* q from x with the groups' scales. */
static void cast(const mmt_quantize_desc *d, const void *x, uint8_t *q, const float *scale) {
  for (int64_t i = 0; i < d->rows; i++)
    for (int64_t j = 0; j < d->cols; j++) {
      const float inv = 1.0f / scale[group_of(d, i, j)];
      const float v = (float)mr_load(d->in_type, x, i * d->ldx + j) * inv;
      q[i * d->ldq + j] = d->out_type == MMT_E5M2 ? fp8_e5m2_from_f32(v) : fp8_e4m3_from_f32(v);
    }
}

void qr_quantize(const mmt_quantize_desc *d, const void *x, uint8_t *q, float *scale) {
  const int64_t groups = mmt_quantize_scales(d->mode, d->rows, d->cols);
  const float fp8_max = d->out_type == MMT_E5M2 ? FP8_E5M2_MAX : FP8_E4M3_MAX;
  amax_of(d, x, scale);
  for (int64_t g = 0; g < groups; g++) scale[g] = scale_of(scale[g], fp8_max, d->pow2_scales);
  cast(d, x, q, scale);
}

void qr_quantize_given(const mmt_quantize_desc *d, const void *x, float given, uint8_t *q,
                       float *scale, float *amax) {
  amax_of(d, x, amax);
  *scale = given;
  cast(d, x, q, scale);
}
