/*
 * test_quantize_gpu.c -- mmt_quantize end to end on the GPU (skipped without one): every input
 * and output type, mode and power-of-two choice, on ragged sizes with padded pitches and
 * pointers off their vector alignment, random data with whole groups of zeros, infinities,
 * NaN, huge and subnormal values mixed in; each scale and code compared bit for bit with
 * quant_ref.c, and every byte of q's and scale's allocations outside what the call writes
 * untouched.  Then a per-tensor call far larger than one block's share (the atomic amax across
 * blocks), a CUDA graph of a call replayed over new data (scales read back anew), and calls
 * with a given scale (one pass, amax out).
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fp8.h"
#include "matmul_ref.h"
#include "mmtune.h"
#include "quant_ref.h"
#include "gpu_context.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static int64_t pick(int64_t lo, int64_t hi) {
  return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1));
}
static double uniform(void) { return (double)(next() >> 11) / 9007199254740992.0 * 2 - 1; }

static int size_of(mmt_dtype t) { return t == MMT_F32 ? 4 : 2; }

/* A value of x: mostly uniform at a random magnitude per call, some specials. */
static double draw(double magnitude) {
  const uint64_t r = next() % 1000;
  if (r == 0) return INFINITY;
  if (r == 1) return -INFINITY;
  if (r == 2) return NAN;
  if (r == 3) return 0.0;
  if (r == 4) return 1e-40; /* an f32 subnormal (zero in f16 and bf16) */
  return uniform() * magnitude;
}

/* Device buffers with the host copies of everything they hold. */
typedef struct {
  CUdeviceptr x, q, s;
  size_t x_bytes, q_bytes, s_bytes;
  unsigned char *hx, *hq, *hs; /* what was copied in */
} buffers;

static void buffers_make(const rt_cu *cu, buffers *b, size_t x_bytes, size_t q_bytes,
                         size_t s_bytes) {
  b->x_bytes = x_bytes, b->q_bytes = q_bytes, b->s_bytes = s_bytes;
  b->hx = malloc(x_bytes), b->hq = malloc(q_bytes), b->hs = malloc(s_bytes);
  assert_true(b->hx && b->hq && b->hs);
  assert_int_equal(cu->cuMemAlloc(&b->x, x_bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&b->q, q_bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&b->s, s_bytes), CUDA_SUCCESS);
  memset(b->hq, 0xA5, q_bytes), memset(b->hs, 0x5A, s_bytes);
  assert_int_equal(cu->cuMemcpyHtoD(b->q, b->hq, q_bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(b->s, b->hs, s_bytes), CUDA_SUCCESS);
}

static void buffers_free(const rt_cu *cu, buffers *b) {
  cu->cuMemFree(b->x), cu->cuMemFree(b->q), cu->cuMemFree(b->s);
  free(b->hx), free(b->hq), free(b->hs);
}

/* Whether two codes agree: the same bits, or both NaN. */
static bool same_code(mmt_dtype t, uint8_t a, uint8_t b) {
  if (a == b) return true;
  const float fa = t == MMT_E5M2 ? fp8_e5m2_to_f32(a) : fp8_e4m3_to_f32(a);
  const float fb = t == MMT_E5M2 ? fp8_e5m2_to_f32(b) : fp8_e4m3_to_f32(b);
  return isnan(fa) && isnan(fb);
}

/* q's allocation as the GPU left it (gq) against the host's (want_q): the codes of d's rows x
 * cols at q_skew alike (NaN as NaN), every other byte as it was. */
static void check_codes(const mmt_quantize_desc *d, const buffers *b, const uint8_t *gq,
                        const uint8_t *want_q, int64_t x_skew, int64_t q_skew, const char *what) {
  const int es = size_of(d->in_type);
  for (size_t i = 0; i < b->q_bytes; i++) {
    const int64_t e = (int64_t)i - q_skew, r = e / d->ldq, c = e % d->ldq;
    const bool inside = e >= 0 && r < d->rows && c < d->cols;
    if (inside ? !same_code(d->out_type, gq[i], want_q[i]) : gq[i] != want_q[i])
      fail_msg("%s: q byte %zu (%s row %lld col %lld) = 0x%02x, want 0x%02x (x = %g)", what, i,
               inside ? "at" : "outside, near", (long long)r, (long long)c, gq[i], want_q[i],
               inside ? mr_load(d->in_type, b->hx + x_skew * es, r * d->ldx + c) : 0.0);
  }
}

/* Runs d (pointers set from b at the offsets given) and compares everything with the host. */
static void run_and_check(gc_fixture *f, mmt_quantize_desc *d, buffers *b, int64_t x_skew,
                          int64_t q_skew, int64_t s_skew, const char *what) {
  const rt_cu *cu = f->cu;
  const int es = size_of(d->in_type);
  d->x = (const void *)(uintptr_t)(b->x + (CUdeviceptr)(x_skew * es));
  d->q = (void *)(uintptr_t)(b->q + (CUdeviceptr)q_skew);
  d->scale = (float *)(uintptr_t)(b->s + (CUdeviceptr)(s_skew * 4));
  mmt_status rc = mmt_quantize(f->ctx, d, NULL);
  if (rc) fail_msg("%s: %s: %s", what, mmt_status_name(rc), mmt_errmsg(f->ctx));
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  unsigned char *gq = malloc(b->q_bytes), *gs = malloc(b->s_bytes);
  assert_true(gq && gs);
  assert_int_equal(cu->cuMemcpyDtoH(gq, b->q, b->q_bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(gs, b->s, b->s_bytes), CUDA_SUCCESS);
  unsigned char *want_q = malloc(b->q_bytes), *want_s = malloc(b->s_bytes);
  assert_true(want_q && want_s);
  memcpy(want_q, b->hq, b->q_bytes), memcpy(want_s, b->hs, b->s_bytes);
  qr_quantize(d, b->hx + x_skew * es, want_q + q_skew, (float *)(void *)(want_s + s_skew * 4));
  const int64_t n_scales = mmt_quantize_scales(d->mode, d->rows, d->cols);
  for (int64_t g = 0; g < n_scales; g++) {
    float got, want;
    memcpy(&got, gs + (s_skew + g) * 4, 4), memcpy(&want, want_s + (s_skew + g) * 4, 4);
    if (memcmp(&got, &want, 4))
      fail_msg("%s: scale[%lld] = %a, want %a", what, (long long)g, (double)got, (double)want);
  }
  for (size_t i = 0; i < b->s_bytes; i++)
    if (gs[i] != want_s[i]) fail_msg("%s: scale byte %zu changed", what, i);
  check_codes(d, b, gq, want_q, x_skew, q_skew, what);
  free(gq), free(gs), free(want_q), free(want_s);
}

static void one_case(gc_fixture *f, mmt_dtype in, mmt_dtype out, mmt_quant_mode mode, int pow2,
                     bool aligned) {
  const rt_cu *cu = f->cu;
  mmt_quantize_desc d = {.in_type = in, .out_type = out, .mode = mode, .pow2_scales = pow2};
  /* Aligned: rows that start on 16 bytes of x and q (the kernels' vector loads).  Up to 9600
   * columns: past a row's 8192-element chunk, and a 1024-element one of single loads. */
  d.cols = aligned ? 8 * pick(1, 1200) : pick(1, 2500);
  d.rows = pick(1, 200000 / d.cols + 1);
  d.ldx = d.cols + (aligned ? 8 * pick(0, 3) : pick(0, 9));
  d.ldq = d.cols + (aligned ? 16 * pick(0, 3) : pick(0, 9));
  const int64_t x_skew = aligned ? 8 * pick(0, 2) : pick(0, 3), q_skew = aligned ? 0 : pick(0, 3);
  const int64_t s_skew = pick(0, 3), n_scales = mmt_quantize_scales(mode, d.rows, d.cols);
  const int es = size_of(in);
  const size_t x_elems = (size_t)(x_skew + (d.rows - 1) * d.ldx + d.cols + 16);
  buffers b = {0};
  buffers_make(cu, &b, x_elems * (size_t)es, (size_t)(q_skew + d.rows * d.ldq + 32),
               (size_t)(s_skew + n_scales + 8) * 4);
  /* Magnitudes from 2^-20 to 2^20, one per row; every 7th row all zeros. */
  for (int64_t i = 0; i < (int64_t)x_elems; i++) {
    const int64_t row = (i - x_skew) / d.ldx;
    const double mag = ldexp(1.0, (int)(row * 37 % 41) - 20);
    mr_store(in, b.hx, i, row % 7 == 3 ? 0.0 : draw(mag));
  }
  assert_int_equal(cu->cuMemcpyHtoD(b.x, b.hx, b.x_bytes), CUDA_SUCCESS);
  char what[160];
  snprintf(what, sizeof what, "%s->%s mode %d pow2 %d %lldx%lld ldx %lld ldq %lld skews %lld/%lld",
           mmt_dtype_name(in), mmt_dtype_name(out), (int)mode, pow2, (long long)d.rows,
           (long long)d.cols, (long long)d.ldx, (long long)d.ldq, (long long)x_skew,
           (long long)q_skew);
  run_and_check(f, &d, &b, x_skew, q_skew, s_skew, what);
  buffers_free(cu, &b);
}

static void test_every_kind(void **state) {
  gc_fixture *f = *state;
  gc_open_or_skip(f, 89);
  const mmt_dtype ins[] = {MMT_F32, MMT_F16, MMT_BF16}, outs[] = {MMT_E4M3, MMT_E5M2};
  int n = 0;
  for (int i = 0; i < 3; i++)
    for (int o = 0; o < 2; o++)
      for (int mode = MMT_QUANT_TENSOR; mode <= MMT_QUANT_128X128; mode++)
        for (int pow2 = 0; pow2 < 2; pow2++)
          for (int aligned = 0; aligned < 2; aligned++, n++)
            one_case(f, ins[i], outs[o], (mmt_quant_mode)mode, pow2, aligned);
  printf("%d calls checked bit for bit\n", n);
}

/* Per-tensor over 2048 x 4096 bf16: 1024 blocks of grid-stride loops meet in one amax. */
static void test_large_tensor(void **state) {
  gc_fixture *f = *state;
  gc_open_or_skip(f, 89);
  mmt_quantize_desc d = {.rows = 2048,
                         .cols = 4096,
                         .ldx = 4096,
                         .ldq = 4096,
                         .in_type = MMT_BF16,
                         .out_type = MMT_E4M3,
                         .mode = MMT_QUANT_TENSOR};
  buffers b = {0};
  buffers_make(f->cu, &b, (size_t)(d.rows * d.ldx * 2), (size_t)(d.rows * d.ldq), 16);
  for (int64_t i = 0; i < d.rows * d.ldx; i++) mr_store(d.in_type, b.hx, i, uniform() * 3.0);
  /* The largest magnitude in one element far from the start. */
  mr_store(d.in_type, b.hx, d.rows * d.ldx - 12345, -1000.0);
  assert_int_equal(f->cu->cuMemcpyHtoD(b.x, b.hx, b.x_bytes), CUDA_SUCCESS);
  run_and_check(f, &d, &b, 0, 0, 1, "2048x4096 bf16 per tensor");
  buffers_free(f->cu, &b);
}

/* 128 x 128 groups of 16-bit x, more of them than two blocks an SM: each block walks several
 * (quantize.cu's walk_128x128), its next group's loads in flight; ragged edges and padded
 * rows, every group's magnitude its own. */
static void test_large_blocks(void **state) {
  gc_fixture *f = *state;
  gc_open_or_skip(f, 89);
  const mmt_dtype ins[] = {MMT_F16, MMT_BF16};
  for (int i = 0; i < 2; i++) {
    mmt_quantize_desc d = {.rows = 2100,
                           .cols = 4000,
                           .ldx = 4008,
                           .ldq = 4016,
                           .in_type = ins[i],
                           .out_type = i ? MMT_E4M3 : MMT_E5M2,
                           .mode = MMT_QUANT_128X128};
    buffers b = {0};
    buffers_make(f->cu, &b, (size_t)(d.rows * d.ldx * 2), (size_t)(d.rows * d.ldq),
                 (size_t)mmt_quantize_scales(d.mode, d.rows, d.cols) * 4 + 16);
    for (int64_t e = 0; e < d.rows * d.ldx; e++) {
      const int64_t group = e / d.ldx / 128 * 37 + e % d.ldx / 128;
      mr_store(d.in_type, b.hx, e, draw(ldexp(1.0, (int)(group % 29) - 14)));
    }
    assert_int_equal(f->cu->cuMemcpyHtoD(b.x, b.hx, b.x_bytes), CUDA_SUCCESS);
    run_and_check(f, &d, &b, 0, 0, 1, i ? "2100x4000 bf16 128x128" : "2100x4000 f16 128x128");
    buffers_free(f->cu, &b);
  }
}

/* A graph of one per-tensor call, replayed after x changed: the scale follows the new data.
 * Both ways a per-tensor call runs: one block (64 x 512, RT_QUANT_SMALL's elements), and a
 * memset and three kernels (72 x 512). */
static void graph_replay(gc_fixture *f, int64_t rows) {
  const rt_cu *cu = f->cu;
  mmt_quantize_desc d = {.rows = rows,
                         .cols = 512,
                         .ldx = 512,
                         .ldq = 512,
                         .in_type = MMT_F32,
                         .out_type = MMT_E4M3,
                         .mode = MMT_QUANT_TENSOR};
  buffers b = {0};
  buffers_make(cu, &b, (size_t)(d.rows * d.ldx * 4), (size_t)(d.rows * d.ldq), 4);
  d.x = (const void *)(uintptr_t)b.x, d.q = (void *)(uintptr_t)b.q;
  d.scale = (float *)(uintptr_t)b.s;
  CUstream s;
  CUgraph g;
  CUgraphExec ge;
  assert_int_equal(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  /* The first call outside the capture: it compiles and loads the kernels. */
  for (int64_t i = 0; i < d.rows * d.ldx; i++) mr_store(MMT_F32, b.hx, i, uniform());
  assert_int_equal(cu->cuMemcpyHtoD(b.x, b.hx, b.x_bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS); /* as in the rounds below */
  assert_int_equal(mmt_quantize(f->ctx, &d, s), MMT_OK);
  assert_int_equal(cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(mmt_quantize(f->ctx, &d, s), MMT_OK);
  assert_int_equal(cu->cuStreamEndCapture(s, &g), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphInstantiate(&ge, g, 0), CUDA_SUCCESS);
  for (int round = 0; round < 3; round++) {
    const double mag = round == 0 ? 1.0 : round == 1 ? 1e-3 : 200.0;
    for (int64_t i = 0; i < d.rows * d.ldx; i++) mr_store(MMT_F32, b.hx, i, uniform() * mag);
    assert_int_equal(cu->cuMemcpyHtoD(b.x, b.hx, b.x_bytes), CUDA_SUCCESS);
    /* a copy from pageable memory may return before its DMA lands; s is not ordered after it */
    assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(cu->cuGraphLaunch(ge, s), CUDA_SUCCESS);
    assert_int_equal(cu->cuStreamSynchronize(s), CUDA_SUCCESS);
    float got, want;
    uint8_t *q = malloc((size_t)(d.rows * d.ldq)), *want_q = malloc((size_t)(d.rows * d.ldq));
    assert_true(q && want_q);
    assert_int_equal(cu->cuMemcpyDtoH(&got, b.s, 4), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyDtoH(q, b.q, (size_t)(d.rows * d.ldq)), CUDA_SUCCESS);
    qr_quantize(&d, b.hx, want_q, &want);
    assert_memory_equal(&got, &want, 4);
    assert_memory_equal(q, want_q, (size_t)(d.rows * d.ldq));
    free(q), free(want_q);
  }
  cu->cuGraphExecDestroy(ge);
  cu->cuGraphDestroy(g);
  cu->cuStreamDestroy(s);
  buffers_free(cu, &b);
}

static void test_graph_replay(void **state) {
  gc_fixture *f = *state;
  gc_open_or_skip(f, 89);
  graph_replay(f, 64);
  graph_replay(f, 72);
}

/* A given scale (static or delayed scaling), one pass: every input and output type, aligned
 * and not, ragged and large (2048 x 4096, many blocks meeting in the amax); the given scale a
 * random share of x's amax / FP8_MAX (below 1: codes that saturate), in an allocation of its
 * own or the scale array itself (in place), amax asked for or not.  q, scale[0] and amax bit
 * for bit against quant_ref.c, and every byte around them untouched. */
static void given_case(gc_fixture *f, mmt_dtype in, mmt_dtype out, bool aligned, bool large) {
  const rt_cu *cu = f->cu;
  mmt_quantize_desc d = {.in_type = in, .out_type = out, .mode = MMT_QUANT_TENSOR};
  d.cols = large ? 4096 : aligned ? 8 * pick(1, 1200) : pick(1, 2500);
  d.rows = large ? 2048 : pick(1, 200000 / d.cols + 1);
  d.ldx = d.cols + (large ? 0 : aligned ? 8 * pick(0, 3) : pick(0, 9));
  d.ldq = d.cols + (large ? 0 : aligned ? 16 * pick(0, 3) : pick(0, 9));
  const int64_t x_skew = aligned ? 0 : pick(0, 3), q_skew = aligned ? 0 : pick(0, 3);
  const int es = size_of(in);
  buffers b = {0};
  /* scale array: [0] the scale, [2] the given one (when apart), [4] amax; the rest sentinel */
  buffers_make(cu, &b, (size_t)(x_skew + (d.rows - 1) * d.ldx + d.cols + 16) * (size_t)es,
               (size_t)(q_skew + d.rows * d.ldq + 32), 8 * 4);
  const double mag = ldexp(1.0, (int)pick(-12, 12));
  for (int64_t i = 0; i < (int64_t)(b.x_bytes / (size_t)es); i++) mr_store(in, b.hx, i, draw(mag));
  assert_int_equal(cu->cuMemcpyHtoD(b.x, b.hx, b.x_bytes), CUDA_SUCCESS);
  d.x = (const void *)(uintptr_t)(b.x + (CUdeviceptr)(x_skew * es));
  d.q = (void *)(uintptr_t)(b.q + (CUdeviceptr)q_skew);
  d.scale = (float *)(uintptr_t)b.s;
  const bool in_place = next() % 3 == 0, want_amax = next() % 4 != 0;
  const float fp8_max = out == MMT_E5M2 ? 57344.0f : 448.0f;
  const float given = (float)(mag / fp8_max * (0.5 + (double)(next() % 1000) / 1000.0));
  float *const hs = (float *)(void *)b.hs;
  hs[in_place ? 0 : 2] = given;
  assert_int_equal(cu->cuMemcpyHtoD(b.s, b.hs, b.s_bytes), CUDA_SUCCESS);
  d.given_scale = (const float *)(uintptr_t)(b.s + (in_place ? 0 : 8));
  d.amax = want_amax ? (float *)(uintptr_t)(b.s + 16) : NULL;
  char what[160];
  snprintf(what, sizeof what, "given %a %s->%s %lldx%lld ldx %lld ldq %lld%s%s", (double)given,
           mmt_dtype_name(in), mmt_dtype_name(out), (long long)d.rows, (long long)d.cols,
           (long long)d.ldx, (long long)d.ldq, in_place ? ", in place" : "",
           want_amax ? ", amax" : "");
  mmt_status rc = mmt_quantize(f->ctx, &d, NULL);
  if (rc) fail_msg("%s: %s: %s", what, mmt_status_name(rc), mmt_errmsg(f->ctx));
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  unsigned char *gq = malloc(b.q_bytes), *want_q = malloc(b.q_bytes);
  float gs[8], ws[8];
  assert_true(gq && want_q);
  assert_int_equal(cu->cuMemcpyDtoH(gq, b.q, b.q_bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(gs, b.s, sizeof gs), CUDA_SUCCESS);
  memcpy(want_q, b.hq, b.q_bytes), memcpy(ws, b.hs, sizeof ws);
  float amax;
  qr_quantize_given(&d, b.hx + x_skew * es, given, want_q + q_skew, &ws[0], &amax);
  if (want_amax) ws[4] = amax;
  for (int i = 0; i < 8; i++)
    if (memcmp(&gs[i], &ws[i], 4))
      fail_msg("%s: scale array [%d] = %a, want %a", what, i, (double)gs[i], (double)ws[i]);
  check_codes(&d, &b, gq, want_q, x_skew, q_skew, what);
  free(gq), free(want_q);
  buffers_free(cu, &b);
}

static void test_given_scale(void **state) {
  gc_fixture *f = *state;
  gc_open_or_skip(f, 89);
  const mmt_dtype ins[] = {MMT_F32, MMT_F16, MMT_BF16}, outs[] = {MMT_E4M3, MMT_E5M2};
  int n = 0;
  for (int i = 0; i < 3; i++)
    for (int o = 0; o < 2; o++)
      for (int kind = 0; kind < 3; kind++, n++) given_case(f, ins[i], outs[o], kind > 0, kind == 2);
  printf("%d calls with a given scale checked bit for bit\n", n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_every_kind, gc_setup, gc_teardown),
      cmocka_unit_test_setup_teardown(test_large_tensor, gc_setup, gc_teardown),
      cmocka_unit_test_setup_teardown(test_large_blocks, gc_setup, gc_teardown),
      cmocka_unit_test_setup_teardown(test_graph_replay, gc_setup, gc_teardown),
      cmocka_unit_test_setup_teardown(test_given_scale, gc_setup, gc_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
