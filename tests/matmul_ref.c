/* matmul_ref.c -- see matmul_ref.h. */
#include "matmul_ref.h"

#include <math.h>
#include <stdbool.h>

#include "fp8.h"
#include "half16.h"

double mr_load(mmt_dtype t, const void *base, int64_t idx) {
  switch (t) {
  case MMT_F16: return th_f16_to_f32(((const uint16_t *)base)[idx]);
  case MMT_BF16: return th_bf16_to_f32(((const uint16_t *)base)[idx]);
  case MMT_E4M3: return fp8_e4m3_to_f32(((const uint8_t *)base)[idx]);
  case MMT_E5M2: return fp8_e5m2_to_f32(((const uint8_t *)base)[idx]);
  default: return ((const float *)base)[idx];
  }
}

void mr_store(mmt_dtype t, void *base, int64_t idx, double x) {
  switch (t) {
  case MMT_F16: ((uint16_t *)base)[idx] = th_f32_to_f16((float)x); break;
  case MMT_BF16: ((uint16_t *)base)[idx] = th_f32_to_bf16((float)x); break;
  case MMT_E4M3: ((uint8_t *)base)[idx] = fp8_e4m3_from_f32((float)x); break;
  case MMT_E5M2: ((uint8_t *)base)[idx] = fp8_e5m2_from_f32((float)x); break;
  default: ((float *)base)[idx] = (float)x; break;
  }
}

int64_t mr_offset(mmt_order order, int trans, int64_t i, int64_t j, int64_t ld) {
  if (trans) { /* stored as the cols x rows transpose */
    int64_t t = i;
    i = j;
    j = t;
  }
  return order == MMT_ROW_MAJOR ? i * ld + j : i + j * ld;
}

double mr_act(mmt_activation act, double x) {
  switch (act) {
  case MMT_ACT_RELU: return x < 0 ? 0 : x;
  case MMT_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case MMT_ACT_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2)));
  case MMT_ACT_SILU: return x / (1 + exp(-x));
  default: return x;
  }
}

/* x of the definition for product column jp of row i, problem z; *mag its magnitude. */
static double x_of(const mmt_matmul_desc *d, const mr_host *h, int64_t z, int64_t i, int64_t jp,
                   double *mag) {
  double p = 0, pa = 0;
  const bool block = d->scale_mode == MMT_SCALE_BLOCK;
  const int64_t kb = (d->k + 127) / 128;
  if (d->alpha != 0.0f)
    for (int64_t l = 0; l < d->k; l++) {
      double a = mr_load(d->in_type, h->a,
                         z * d->stride_a + mr_offset(d->order, d->trans_a, i, l, d->lda));
      double b = mr_load(d->b_type != MMT_F32 ? d->b_type : d->in_type, h->b,
                         z * d->stride_b + mr_offset(d->order, d->trans_b, l, jp, d->ldb));
      /* block scales: each K block's products times A's scale of (block, i), B's of
       * (jp / 128, block) */
      const double s =
          block ? (double)h->scale_row[l / 128 * d->m + i] * h->scale_col[jp / 128 * kb + l / 128]
                : 1.0;
      p += s * a * b;
      pa += fabs(s * a * b);
    }
  /* grouped: by column, expert z's vectors (the z-th of G); by row, the rows as stored (a
   * masked call's z-th block of M) */
  const int64_t cz = d->group_mode != MMT_GROUP_NONE ? z : 0;
  const int64_t rz = d->group_mode == MMT_GROUP_MASKED ? z * d->m : 0;
  const int64_t np = d->gated ? 2 * d->n : d->n;
  double f = d->alpha;
  if (d->scale_mode == MMT_SCALE_TENSOR) {
    f *= (double)h->scale_row[0] * h->scale_col[cz];
  } else if (!block) {
    if (h->scale_row) f *= h->scale_row[rz + i];
    if (h->scale_col) f *= h->scale_col[cz * np + jp];
  }
  double x = f * p, m = fabs(f) * pa;
  if (d->bias_mode != MMT_BIAS_NONE) {
    double b = mr_load(d->bias_type, h->bias, d->bias_mode == MMT_BIAS_COL ? cz * np + jp : rz + i);
    x += b;
    m += fabs(b);
  }
  *mag = m;
  return x;
}

double mr_element(const mmt_matmul_desc *d, const mr_host *h, int64_t z, int64_t i, int64_t j,
                  double *scale) {
  double c = 0;
  if (d->beta != 0.0f)
    c = d->beta *
        mr_load(d->out_type, h->c, z * d->stride_c + mr_offset(d->order, 0, i, j, d->ldc));
  double mag, y;
  if (d->gated) {
    double mg, mu;
    const double g = x_of(d, h, z, i, 2 * j, &mg), u = x_of(d, h, z, i, 2 * j + 1, &mu);
    y = mr_act(d->act, g) * u + c;
    mag = (fabs(g) + mg) * (fabs(u) + mu) + fabs(c); /* a product of two rounded terms */
  } else {
    const double x = x_of(d, h, z, i, j, &mag);
    y = mr_act(d->act, x + c);
    mag += fabs(c);
  }
  if (scale) *scale = mag;
  return y;
}
