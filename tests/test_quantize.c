/*
 * test_quantize.c -- mmt_quantize without a GPU: the scale counts of every mode, each argument
 * check (its status and the field its message names), the plan of launches (kernel, vector
 * width, grid), the kernels' source compiled by NVRTC for sm_89 and sm_90 with every kernel a
 * plan can name in the cubin, and the checks coming before the context's own failure.  The
 * kernels' results are test_quantize_gpu's.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "matmul_ref.h"
#include "mmtune.h"
#include "quant_ref.h"
#include "rt_compile.h"
#include "rt_quantize.h"

static void test_scale_counts(void **state) {
  (void)state;
  assert_int_equal(mmt_quantize_scales(MMT_QUANT_TENSOR, 300, 700), 1);
  assert_int_equal(mmt_quantize_scales(MMT_QUANT_ROW, 300, 700), 300);
  assert_int_equal(mmt_quantize_scales(MMT_QUANT_1X128, 300, 700), 6 * 300);
  assert_int_equal(mmt_quantize_scales(MMT_QUANT_128X128, 300, 700), 3 * 6);
  assert_int_equal(mmt_quantize_scales(MMT_QUANT_1X128, 5, 128), 5);
  assert_int_equal(mmt_quantize_scales(MMT_QUANT_128X128, 128, 129), 2);
  assert_int_equal(mmt_quantize_scales(MMT_QUANT_ROW, 0, 7), 0);
  assert_int_equal(mmt_quantize_scales((mmt_quant_mode)4, 1, 1), -1);
  assert_int_equal(mmt_quantize_scales(MMT_QUANT_ROW, -1, 1), -1);
}

/* A valid call on fake, disjoint, aligned addresses. */
static mmt_quantize_desc valid(void) {
  return (mmt_quantize_desc){.rows = 100,
                             .cols = 256,
                             .in_type = MMT_BF16,
                             .out_type = MMT_E4M3,
                             .x = (const void *)(uintptr_t)0x100000,
                             .ldx = 256,
                             .q = (void *)(uintptr_t)0x200000,
                             .ldq = 256,
                             .scale = (float *)(uintptr_t)0x300000,
                             .mode = MMT_QUANT_1X128};
}

static void expect(const mmt_quantize_desc *d, mmt_status want, const char *text) {
  ut_err err = {0};
  mmt_status rc = rt_quantize_check(d, &err);
  if (rc != want)
    fail_msg("want %s, got %s (%s) for \"%s\"", mmt_status_name(want), mmt_status_name(rc), err.msg,
             text);
  if (text && !strstr(err.msg, text)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, text);
}

static void test_checks(void **state) {
  (void)state;
  mmt_quantize_desc d = valid();
  expect(&d, MMT_OK, NULL);
  expect(NULL, MMT_ERR_INVALID_ARG, "desc is NULL");
  d = valid(), d.in_type = MMT_TF32;
  expect(&d, MMT_ERR_INVALID_ARG, "in_type");
  d = valid(), d.in_type = MMT_E4M3;
  expect(&d, MMT_ERR_INVALID_ARG, "in_type");
  d = valid(), d.out_type = MMT_BF16;
  expect(&d, MMT_ERR_INVALID_ARG, "out_type");
  d = valid(), d.mode = (mmt_quant_mode)9;
  expect(&d, MMT_ERR_INVALID_ARG, "mode 9");
  d = valid(), d.rows = -1;
  expect(&d, MMT_ERR_INVALID_ARG, "rows -1");
  d = valid(), d.cols = -2;
  expect(&d, MMT_ERR_INVALID_ARG, "cols -2");
  d = valid(), d.ldx = 255;
  expect(&d, MMT_ERR_INVALID_ARG, "ldx 255 < 256");
  d = valid(), d.ldq = 10;
  expect(&d, MMT_ERR_INVALID_ARG, "ldq 10 < 256");
  d = valid(), d.cols = 0, d.ldx = 0;
  expect(&d, MMT_ERR_INVALID_ARG, "ldx 0 < 1");
  d = valid(), d.rows = (int64_t)1 << 31;
  expect(&d, MMT_ERR_UNSUPPORTED, "2^31 - 1");
  d = valid(), d.x = NULL;
  expect(&d, MMT_ERR_INVALID_ARG, "x is NULL");
  d = valid(), d.q = NULL;
  expect(&d, MMT_ERR_INVALID_ARG, "q is NULL");
  d = valid(), d.scale = NULL;
  expect(&d, MMT_ERR_INVALID_ARG, "scale is NULL");
  d = valid(), d.x = (const void *)(uintptr_t)0x100001;
  expect(&d, MMT_ERR_INVALID_ARG, "not aligned to its 2-byte element");
  d = valid(), d.scale = (float *)(uintptr_t)0x300002;
  expect(&d, MMT_ERR_INVALID_ARG, "scale");
  /* x covers 100 rows of 512 bytes from 0x100000: q inside it, or one byte past its end. */
  d = valid(), d.q = (void *)(uintptr_t)(0x100000 + 99 * 512 + 511);
  expect(&d, MMT_ERR_INVALID_ARG, "q overlaps x");
  d = valid(), d.q = (void *)(uintptr_t)(0x100000 + 100 * 512);
  expect(&d, MMT_OK, NULL);
  /* 1x128: 2 * 100 scales (800 bytes) from 0x300000. */
  d = valid(), d.q = (void *)(uintptr_t)(0x300000 + 796);
  expect(&d, MMT_ERR_INVALID_ARG, "scale overlaps q");
  d = valid(), d.q = (void *)(uintptr_t)(0x300000 + 800);
  expect(&d, MMT_OK, NULL);
  d = valid(), d.scale = (float *)(uintptr_t)(0x100000 + 4096);
  expect(&d, MMT_ERR_INVALID_ARG, "scale overlaps x");
  /* Nothing written: the pointers are not needed. */
  d = valid(), d.rows = 0, d.x = NULL, d.q = NULL, d.scale = NULL;
  expect(&d, MMT_OK, NULL);
  /* A given scale (per tensor only) and its amax (with a given scale only); given_scale may
   * be scale itself, amax may overlap nothing. */
  float *const given = (float *)(uintptr_t)0x500000, *const amax = (float *)(uintptr_t)0x600000;
  d = valid(), d.given_scale = given;
  expect(&d, MMT_ERR_INVALID_ARG, "given_scale is for mode MMT_QUANT_TENSOR");
  d = valid(), d.mode = MMT_QUANT_TENSOR, d.amax = amax;
  expect(&d, MMT_ERR_INVALID_ARG, "amax is written with given_scale only");
  d = valid(), d.mode = MMT_QUANT_TENSOR, d.given_scale = given, d.amax = amax;
  expect(&d, MMT_OK, NULL);
  d.given_scale = d.scale;
  expect(&d, MMT_OK, NULL);
  d.given_scale = (const float *)(uintptr_t)0x500002;
  expect(&d, MMT_ERR_INVALID_ARG, "given_scale 0x500002 is not aligned to 4 bytes");
  d.given_scale = given, d.amax = (float *)(uintptr_t)0x600001;
  expect(&d, MMT_ERR_INVALID_ARG, "amax 0x600001 is not aligned to 4 bytes");
  d.amax = amax, d.given_scale = (const float *)(uintptr_t)(0x200000 + 64);
  expect(&d, MMT_ERR_INVALID_ARG, "given_scale overlaps q");
  static const struct {
    uintptr_t at;
    const char *what;
  } over[] = {{0x100000 + 512, "amax overlaps x"},
              {0x200000, "amax overlaps q"},
              {0x300000, "amax overlaps scale"},
              {0x500000, "amax overlaps given_scale"}};
  for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
    d = valid(), d.mode = MMT_QUANT_TENSOR, d.given_scale = given;
    d.amax = (float *)over[i].at;
    expect(&d, MMT_ERR_INVALID_ARG, over[i].what);
  }
  d = valid(), d.rows = 0, d.mode = MMT_QUANT_TENSOR, d.given_scale = given, d.amax = amax;
  expect(&d, MMT_OK, NULL);
}

/* A planned kernel's name ("" for -1, none). */
static const char *name_of(int index) {
  static char name[48];
  rt_quantize_kernel_name(index, name);
  return name;
}

static void test_plan(void **state) {
  (void)state;
  rt_quantize_plan p;
  mmt_quantize_desc d = valid();
  rt_quantize_plan_of(&d, 132, &p);
  /* 16-byte loads; a warp per 1024 columns of a row: 100 warps */
  assert_string_equal(name_of(p.kernel), "mmt_quant_1x128_bf16_e4m3_v8");
  assert_string_equal(name_of(p.amax), "");
  assert_int_equal(p.vec, 8);
  assert_int_equal(p.grid, (100 + 7) / 8);
  assert_int_equal(p.grid_y, 1);
  d.x = (const void *)(uintptr_t)0x100008; /* 8-byte aligned only: no 16-byte loads */
  rt_quantize_plan_of(&d, 132, &p);
  assert_int_equal(p.vec, 1);
  assert_string_equal(name_of(p.kernel), "mmt_quant_1x128_bf16_e4m3_v1");
  /* single elements: a warp per 128 columns */
  assert_int_equal(p.grid, (2 * 100 + 7) / 8);
  d = valid(), d.ldq = 260;
  rt_quantize_plan_of(&d, 132, &p);
  assert_int_equal(p.vec, 1);
  d = valid(), d.q = (void *)(uintptr_t)0x200004; /* q: 8-byte stores */
  rt_quantize_plan_of(&d, 132, &p);
  assert_int_equal(p.vec, 1);
  d = valid(), d.mode = MMT_QUANT_128X128, d.out_type = MMT_E5M2, d.in_type = MMT_F32;
  rt_quantize_plan_of(&d, 132, &p);
  assert_string_equal(name_of(p.kernel), "mmt_quant_128x128_f32_e5m2_v4");
  assert_int_equal(p.vec, 4);
  assert_int_equal(p.grid, 1 * 2);
  /* 16-bit in 16-byte loads: two blocks an SM walk the 32 x 32 groups (fewer groups: one each) */
  d = valid(), d.mode = MMT_QUANT_128X128, d.rows = 4096, d.cols = d.ldx = d.ldq = 4096;
  rt_quantize_plan_of(&d, 132, &p);
  assert_string_equal(name_of(p.kernel), "mmt_quant_128x128_bf16_e4m3_v8");
  assert_int_equal(p.grid, 2 * 132);
  rt_quantize_plan_of(&d, 8, &p);
  assert_int_equal(p.grid, 2 * 8);
  d.rows = 1000; /* 8 x 32 groups */
  rt_quantize_plan_of(&d, 132, &p);
  assert_int_equal(p.grid, 8 * 32);
  d = valid(), d.mode = MMT_QUANT_ROW, d.in_type = MMT_F16;
  rt_quantize_plan_of(&d, 132, &p);
  assert_string_equal(name_of(p.kernel), "mmt_quant_row_f16_e4m3_v8");
  assert_int_equal(p.grid, 100); /* a block per row */
  /* per tensor, contiguous: one row of 5000 * 4096 elements, 2048 blocks of 1024 vectors */
  d = valid(), d.mode = MMT_QUANT_TENSOR, d.rows = 5000, d.ldx = d.ldq = 4096, d.cols = 4096;
  rt_quantize_plan_of(&d, 132, &p);
  assert_string_equal(name_of(p.kernel), "mmt_quant_cast_bf16_e4m3_v8");
  assert_string_equal(name_of(p.amax), "mmt_quant_amax_bf16_v8"); /* then the cast alone */
  assert_int_equal(p.rows, 1);
  assert_int_equal(p.cols, 5000 * 4096);
  assert_int_equal(p.grid, 2048);
  assert_int_equal(p.grid_y, 1);
  /* padded rows stay rows: 1 block along each of 2048 rows' 512 vectors */
  d.ldx = 4104;
  rt_quantize_plan_of(&d, 132, &p);
  assert_int_equal(p.rows, 5000);
  assert_int_equal(p.cols, 4096);
  assert_int_equal(p.grid, 1);
  assert_int_equal(p.grid_y, 2048);
  /* a decode step's activations: one block, one launch (no amax pass) */
  d.rows = 8, d.cols = d.ldx = d.ldq = RT_QUANT_SMALL / 8;
  rt_quantize_plan_of(&d, 132, &p);
  assert_string_equal(name_of(p.kernel), "mmt_quant_small_bf16_e4m3_v8");
  assert_int_equal(p.amax, -1);
  assert_int_equal(p.grid, 1);
  d.cols = d.ldx = d.ldq = RT_QUANT_SMALL / 8 + 8; /* past it: the two passes */
  rt_quantize_plan_of(&d, 132, &p);
  assert_string_equal(name_of(p.kernel), "mmt_quant_cast_bf16_e4m3_v8");
  assert_string_equal(name_of(p.amax), "mmt_quant_amax_bf16_v8");
  d.rows = 3, d.cols = 5, d.ldx = d.ldq = 5; /* 15 elements, one at a time: one block */
  rt_quantize_plan_of(&d, 132, &p);
  assert_int_equal(p.vec, 1);
  assert_int_equal(p.grid, 1);
  assert_int_equal(p.grid_y, 1);
  assert_false(p.given);
  /* a given scale: one pass, the per-tensor grid, whatever the size */
  d = valid(), d.mode = MMT_QUANT_TENSOR, d.rows = 5000, d.ldx = d.ldq = 4096, d.cols = 4096;
  d.in_type = MMT_F16, d.out_type = MMT_E5M2, d.given_scale = (const float *)(uintptr_t)0x500000;
  rt_quantize_plan_of(&d, 132, &p);
  assert_true(p.given);
  assert_string_equal(name_of(p.kernel), "mmt_quant_given_f16_e5m2_v8");
  assert_int_equal(p.amax, -1);
  assert_int_equal(p.rows, 1);
  assert_int_equal(p.grid, 2048);
  d.rows = 3, d.cols = 5, d.ldx = d.ldq = 5;
  rt_quantize_plan_of(&d, 132, &p);
  assert_string_equal(name_of(p.kernel), "mmt_quant_given_f16_e5m2_v1");
  assert_int_equal(p.grid, 1);
}

/* Whether the cubin names a kernel (its symbol table holds the name). */
static bool has_symbol(const rt_cubin *c, const char *name) {
  const size_t n = strlen(name) + 1; /* with the NUL: not a prefix of a longer name */
  for (size_t i = 0; i + n <= c->size; i++)
    if (!memcmp((const char *)c->data + i, name, n)) return true;
  return false;
}

static void test_source_compiles(void **state) {
  (void)state;
  const char *archs[] = {"sm_89", "sm_90"};
  const mmt_dtype ins[] = {MMT_F32, MMT_F16, MMT_BF16}, outs[] = {MMT_E4M3, MMT_E5M2};
  for (int a = 0; a < 2; a++) {
    rt_cubin c = {0};
    char *log = NULL;
    ut_err err = {0};
    mmt_status rc = rt_compile(rt_quantize_source(), "quantize", archs[a], &c, &log, &err);
    if (rc) fail_msg("%s: %s\n%s", archs[a], err.msg, log ? log : "");
    free(log);
    int n = 0;
    for (int i = 0; i < 3; i++)
      for (int o = 0; o < 2; o++)
        for (int mode = MMT_QUANT_TENSOR; mode <= MMT_QUANT_128X128; mode++)
          for (int64_t cols = 127; cols <= 128; cols++) {
            mmt_quantize_desc d = valid();
            d.in_type = ins[i], d.out_type = outs[o], d.mode = (mmt_quant_mode)mode;
            d.cols = d.ldx = d.ldq = cols;
            rt_quantize_plan p;
            rt_quantize_plan_of(&d, 132, &p);
            const int kernels[] = {p.kernel, p.amax};
            for (int k = 0; k < 2; k++)
              if (kernels[k] >= 0) {
                const char *name = name_of(kernels[k]);
                if (!has_symbol(&c, name)) fail_msg("%s lacks %s", archs[a], name);
                n++;
              }
          }
    assert_true(n >= 3 * 2 * 4 * 2);
    /* every numbered kernel (what rt_quantizer_load looks up) is in the module, no more */
    for (int i = 0; i < RT_QUANT_KERNELS; i++)
      if (!has_symbol(&c, name_of(i))) fail_msg("%s lacks kernel %d, %s", archs[a], i, name_of(i));
    assert_string_equal(name_of(RT_QUANT_KERNELS), "");
    assert_string_equal(name_of(-1), "");
    rt_cubin_free(&c);
  }
}

/* The scale layouts of mmt_quantize are those mmt_matmul reads: x (M x K) by 1 x 128 groups
 * and w (N x K) by 128 x 128 tiles, quantized on the host (quant_ref.c: the GPU's bits), then
 * mmt_matmul's block-scaled product of the codes (matmul_ref.c) is x w^T within the
 * quantization's error; the per-tensor and per-row (per-channel) pairings likewise. */
static void test_layouts_feed_matmul(void **state) {
  (void)state;
  enum { M = 70, N = 200, K = 300 };
  static float x[M * K], w[N * K];
  static uint8_t qx[M * K], qw[N * K];
  static float sx[3 * M], sw[N]; /* the most of each mode: 1x128 and row */
  uint64_t r = 0x1234567;
  for (int i = 0; i < M * K + N * K; i++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    const float v = (float)((double)(r >> 11) / 9007199254740992.0 * 2 - 1);
    if (i < M * K)
      x[i] = v * (float)(1 + i / K % 7); /* rows of different magnitudes */
    else
      w[i - M * K] = v;
  }
  const struct {
    mmt_quant_mode mx, mw;
    mmt_scale_mode mode;
  } pairs[] = {{MMT_QUANT_1X128, MMT_QUANT_128X128, MMT_SCALE_BLOCK},
               {MMT_QUANT_TENSOR, MMT_QUANT_TENSOR, MMT_SCALE_TENSOR},
               {MMT_QUANT_ROW, MMT_QUANT_ROW, MMT_SCALE_VECTORS}};
  for (int p = 0; p < 3; p++) {
    mmt_quantize_desc dx = {.rows = M,
                            .cols = K,
                            .in_type = MMT_F32,
                            .out_type = MMT_E4M3,
                            .ldx = K,
                            .ldq = K,
                            .mode = pairs[p].mx};
    mmt_quantize_desc dw = dx;
    dw.rows = N, dw.mode = pairs[p].mw;
    qr_quantize(&dx, x, qx, sx);
    qr_quantize(&dw, w, qw, sw);
    const mmt_matmul_desc d = {.order = MMT_ROW_MAJOR,
                               .trans_b = MMT_TRANS,
                               .m = M,
                               .n = N,
                               .k = K,
                               .in_type = MMT_E4M3,
                               .out_type = MMT_F32,
                               .alpha = 1,
                               .lda = K,
                               .ldb = K,
                               .ldd = N,
                               .batch = 1,
                               .scale_mode = pairs[p].mode,
                               .scale_row = sx,
                               .scale_col = sw};
    const mr_host h = {qx, qw, NULL, NULL, sx, sw};
    double err2 = 0, ref2 = 0;
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double want = 0;
        for (int l = 0; l < K; l++) want += (double)x[i * K + l] * w[j * K + l];
        const double got = mr_element(&d, &h, 0, i, j, NULL);
        err2 += (got - want) * (got - want), ref2 += want * want;
      }
    /* e4m3 keeps 3 mantissa bits: about 2^-5 relative error an operand; a wrong layout
     * (scales of other rows or blocks) is off by the rows' magnitudes, 2 and more */
    const double rel = sqrt(err2 / ref2);
    if (!(rel < 0.05)) fail_msg("pairing %d: relative error %.3g", p, rel);
  }
}

/* Without a GPU the context did not open: argument errors still come first, then its status. */
static void test_checks_before_context(void **state) {
  (void)state;
  mmt_context *ctx = NULL;
  mmt_options o = {.db_path = "", .cache_dir = ""};
  mmt_status open_rc = mmt_open(&ctx, 0, &o);
  assert_non_null(ctx);
  mmt_quantize_desc d = valid();
  d.ldx = 1;
  assert_int_equal(mmt_quantize(ctx, &d, NULL), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(mmt_errmsg(ctx), "ldx 1 < 256"));
  assert_int_equal(mmt_quantize(ctx, NULL, NULL), MMT_ERR_INVALID_ARG);
  assert_int_equal(mmt_quantize(NULL, &d, NULL), MMT_ERR_INVALID_ARG);
  if (open_rc != MMT_OK) {
    d = valid();
    assert_int_equal(mmt_quantize(ctx, &d, NULL), open_rc);
  }
  mmt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scale_counts),
      cmocka_unit_test(test_checks),
      cmocka_unit_test(test_plan),
      cmocka_unit_test(test_source_compiles),
      cmocka_unit_test(test_checks_before_context),
      cmocka_unit_test(test_layouts_feed_matmul),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
