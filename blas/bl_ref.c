/* bl_ref.c -- see bl.h: the exact conversions of 16-bit inputs to fp32 and the built-in
 * GEMM loop, for calls no CPU BLAS can take.  Pure: no dlopen, no globals. */
#include <stdlib.h>
#include <string.h>

#include "bl.h"

float bl_bf16_to_float(uint16_t bits) {
  uint32_t u = (uint32_t)bits << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float bl_f16_to_float(uint16_t bits) {
  uint32_t sign = (uint32_t)(bits >> 15) << 31, exp = (bits >> 10) & 0x1fu, man = bits & 0x3ffu;
  uint32_t u;
  if (exp == 0) { /* zero or subnormal: man * 2^-24, exact in fp32 */
    float f = (float)man * 0x1p-24f;
    return sign ? -f : f;
  }
  if (exp == 31)
    u = sign | 0x7f800000u | (man << 13); /* inf, NaN (payload kept) */
  else
    u = sign | ((exp + 112u) << 23) | (man << 13);
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static float load(const void *p, bl_elem e, size_t i) {
  switch (e) {
    case BL_BF16: return bl_bf16_to_float(((const uint16_t *)p)[i]);
    case BL_F16: return bl_f16_to_float(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
  }
}

/* A rows x cols matrix of elements e at ld into packed fp32 at out (ld = max(1, rows)). */
static void convert(const void *src, bl_elem e, size_t rows, size_t cols, size_t ld, float *out) {
  size_t out_ld = rows > 0 ? rows : 1;
  for (size_t j = 0; j < cols; j++)
    for (size_t i = 0; i < rows; i++) out[i + j * out_ld] = load(src, e, i + j * ld);
}

bool bl_to_f32(const bl_gemm *g, bl_gemm *out, float **bufs) {
  *out = *g;
  out->elem = BL_F32;
  *bufs = NULL;
  size_t m = (size_t)g->m, n = (size_t)g->n, k = (size_t)g->k;
  size_t ra = g->trans_a ? k : m, ca = g->trans_a ? m : k;
  size_t rb = g->trans_b ? n : k, cb = g->trans_b ? k : n;
  if (!bl_reads_ab(g)) {
    out->a = out->b = NULL;
    out->lda = (int)(ra > 0 ? ra : 1);
    out->ldb = (int)(rb > 0 ? rb : 1);
    return true;
  }
  size_t na, nb, total, bytes;
  if (__builtin_mul_overflow(ra, ca, &na) || __builtin_mul_overflow(rb, cb, &nb) ||
      __builtin_add_overflow(na, nb, &total) ||
      __builtin_mul_overflow(total, sizeof(float), &bytes))
    return false;
  float *buf = malloc(bytes);
  if (!buf) return false;
  convert(g->a, g->elem, ra, ca, (size_t)g->lda, buf);
  convert(g->b, g->elem, rb, cb, (size_t)g->ldb, buf + na);
  out->a = buf;
  out->lda = (int)ra; /* ra, rb >= 1 here: M, N, K > 0 */
  out->b = buf + na;
  out->ldb = (int)rb;
  *bufs = buf;
  return true;
}

void bl_ref_gemm(const bl_gemm *g) {
  bool ab = bl_reads_ab(g);
  size_t lda = (size_t)g->lda, ldb = (size_t)g->ldb, ldc = (size_t)g->ldc;
  for (size_t j = 0; j < (size_t)g->n; j++) {
    for (size_t i = 0; i < (size_t)g->m; i++) {
      double s = 0;
      for (size_t l = 0; ab && l < (size_t)g->k; l++) {
        double a = load(g->a, g->elem, g->trans_a ? l + i * lda : i + l * lda);
        double b = load(g->b, g->elem, g->trans_b ? j + l * ldb : l + j * ldb);
        s += a * b;
      }
      float *c = &g->c[i + j * ldc];
      double r = ab ? (double)g->alpha * s : 0.0;
      if (g->beta != 0.0f) r += (double)g->beta * (double)*c; /* beta == 0: C is not read */
      *c = (float)r;
    }
  }
}
