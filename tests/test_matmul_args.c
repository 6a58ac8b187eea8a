/*
 * test_matmul_args.c -- rt_matmul: mmt_matmul's descriptor checks (every invalid case gets its
 * status and a message naming the field, before anything is launched) and the mapping of a
 * descriptor onto an op kernel's problem, op and arguments: a host emulation of the op ABI
 * (gen.h, "Epilogues") run on the plan computes, for random descriptors of both orders, every
 * transpose, bias, scales, gating, batches with broadcast and interleaved strides, exactly the
 * call's D (matmul_ref.c's definition) and writes nothing else.  No GPU.
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

#include <unistd.h>

#include "db.h"
#include "gen.h"
#include "matmul_ref.h"
#include "rt_choose.h"
#include "rt_matmul.h"
#include "rt_provenance.h"

#define ADDR(x) ((void *)(uintptr_t)(x))

/* A valid call: row-major 4 x 5 x 6, f16 in, f32 out, every operand in its own memory. */
static mmt_matmul_desc base(void) {
  return (mmt_matmul_desc){.order = MMT_ROW_MAJOR,
                           .m = 4,
                           .n = 5,
                           .k = 6,
                           .in_type = MMT_F16,
                           .out_type = MMT_F32,
                           .alpha = 1,
                           .beta = 1,
                           .a = ADDR(0x100000),
                           .lda = 6,
                           .b = ADDR(0x200000),
                           .ldb = 5,
                           .c = ADDR(0x300000),
                           .ldc = 5,
                           .d = ADDR(0x400000),
                           .ldd = 5,
                           .batch = 1};
}

static void expect(const mmt_matmul_desc *d, mmt_status rc, const char *msg) {
  ut_err e = {{0}};
  assert_int_equal(rt_matmul_check(d, &e), rc);
  if (msg && strcmp(e.msg, msg) != 0) fail_msg("message '%s', expected '%s'", e.msg, msg);
}

static void test_enums_and_sizes(void **state) {
  (void)state;
  mmt_matmul_desc d = base();
  expect(&d, MMT_OK, NULL);
  expect(NULL, MMT_ERR_INVALID_ARG, "desc is NULL");
  d.order = (mmt_order)3;
  expect(&d, MMT_ERR_INVALID_ARG, "order must be MMT_ROW_MAJOR or MMT_COL_MAJOR, got 3");
  d = base(), d.trans_b = (mmt_transpose)2;
  expect(&d, MMT_ERR_INVALID_ARG, "trans_b must be MMT_NO_TRANS or MMT_TRANS, got 2");
  d = base(), d.in_type = (mmt_dtype)9;
  expect(&d, MMT_ERR_INVALID_ARG, "in_type 9 is not an mmt_dtype");
  d = base(), d.out_type = MMT_TF32;
  expect(&d, MMT_ERR_INVALID_ARG,
         "out_type must be MMT_F32, MMT_F16, MMT_BF16, MMT_E4M3 or MMT_E5M2, got 1");
  d = base(), d.bias_mode = (mmt_bias)3;
  expect(&d, MMT_ERR_INVALID_ARG,
         "bias_mode must be MMT_BIAS_NONE, MMT_BIAS_COL or MMT_BIAS_ROW, got 3");
  d = base(), d.act = (mmt_activation)5;
  expect(&d, MMT_ERR_INVALID_ARG, "act 5 is not an mmt_activation");
  d = base(), d.k = -1;
  expect(&d, MMT_ERR_INVALID_ARG, "k must be >= 0, got -1");
  d = base(), d.stride_b = -6;
  expect(&d, MMT_ERR_INVALID_ARG, "stride_b must be >= 0, got -6");
  d = base(), d.batch = 0;
  expect(&d, MMT_ERR_INVALID_ARG, "batch must be >= 1, got 0");
  d = base(), d.batch = 3;
  expect(&d, MMT_ERR_INVALID_ARG,
         "stride_d is 0 with batch 3: every problem would write the same D");
  d.m = 0; /* writes nothing: no D to overlap */
  expect(&d, MMT_OK, NULL);
  d = base(), d.n = (int64_t)1 << 31, d.ldb = d.n, d.ldc = d.n, d.ldd = d.n;
  expect(&d, MMT_ERR_UNSUPPORTED,
         "n (the product's columns) = 2147483648 exceeds 2147483647: kernels take int sizes");
}

static void test_leading_dimensions(void **state) {
  (void)state;
  mmt_matmul_desc d = base();
  d.lda = 5;
  expect(&d, MMT_ERR_INVALID_ARG, "lda must be >= max(1, K) = 6, got 5");
  d = base(), d.ldd = 4;
  expect(&d, MMT_ERR_INVALID_ARG, "ldd must be >= max(1, N) = 5, got 4");
  d = base(), d.ldc = 4;
  expect(&d, MMT_ERR_INVALID_ARG, "ldc must be >= max(1, N) = 5, got 4");
  d.beta = 0, d.c = NULL; /* C is not read: its pitch does not matter */
  expect(&d, MMT_OK, NULL);
  d = base(), d.gated = 1;
  expect(&d, MMT_ERR_INVALID_ARG, "ldb must be >= max(1, 2N) = 10, got 5");
  d.ldb = 10;
  expect(&d, MMT_OK, NULL);
  d = base(), d.order = MMT_COL_MAJOR, d.lda = 4, d.ldb = 6, d.ldc = 4, d.ldd = 3;
  expect(&d, MMT_ERR_INVALID_ARG, "ldd must be >= max(1, M) = 4, got 3");
  d.ldd = 4, d.trans_a = MMT_TRANS;
  expect(&d, MMT_ERR_INVALID_ARG, "lda must be >= max(1, K) = 6, got 4");
}

static void test_epilogue_fields(void **state) {
  (void)state;
  mmt_matmul_desc d = base();
  d.bias = ADDR(0x500000);
  expect(&d, MMT_ERR_INVALID_ARG, "bias is set but bias_mode is MMT_BIAS_NONE");
  d = base(), d.bias_mode = MMT_BIAS_ROW;
  expect(&d, MMT_ERR_INVALID_ARG, "bias_mode is MMT_BIAS_ROW but bias is NULL");
  d.bias = ADDR(0x500000), d.bias_type = MMT_BF16;
  expect(&d, MMT_ERR_INVALID_ARG, "bias_type must be MMT_F32 or out_type (f32), got 3");
  d.out_type = MMT_BF16;
  expect(&d, MMT_OK, NULL);
  d.bias = ADDR(0x500001);
  expect(&d, MMT_ERR_INVALID_ARG, "bias (0x500001) is not 2-byte aligned");
  d = base(), d.gated = 1, d.ldb = 10, d.order = MMT_COL_MAJOR, d.lda = 4, d.ldc = 4, d.ldd = 4;
  d.ldb = 6;
  expect(&d, MMT_ERR_UNSUPPORTED,
         "gated needs MMT_ROW_MAJOR order (gate and up interleave along D's rows)");
  d = base(), d.scale_col = ADDR(0x600002);
  expect(&d, MMT_ERR_INVALID_ARG, "scale_col (0x600002) is not 4-byte aligned");
}

/* FP8 and the scale modes: FP8 has no plain GEMM, its operands are K-major, its block scales
 * row-major and single; a mode's scales are both there and as long as it reads; and the op
 * the kernel gets says the mode (column-major: A's and B's scales swapped). */
static void test_fp8_and_scale_modes(void **state) {
  (void)state;
  ut_err e;
  const mmt_problem plain = {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_TRANS, 4, 5, 6, 6, 6, 5, MMT_E4M3};
  assert_int_equal(rt_gemm_check(&plain, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "FP8 has no plain GEMM"));
  assert_string_equal(mmt_dtype_name(MMT_E5M2), "e5m2");
  /* row-major A M x K, B stored N x K, 16-byte aligned for TMA */
  mmt_matmul_desc d = base();
  d.in_type = MMT_E4M3, d.out_type = MMT_BF16, d.trans_b = MMT_TRANS, d.lda = 16, d.ldb = 6;
  expect(&d, MMT_ERR_UNSUPPORTED,
         "FP8: ldb = 0x6 is not a multiple of 16 (bytes, elements): the FP8 kernels load A and B "
         "with TMA");
  d.ldb = 16, d.a = ADDR(0x100008);
  expect(&d, MMT_ERR_UNSUPPORTED,
         "FP8: a = 0x100008 is not a multiple of 16 (bytes, elements): the FP8 kernels load A and "
         "B with TMA");
  d.a = ADDR(0x100000);
  expect(&d, MMT_OK, NULL);
  d.trans_b = MMT_NO_TRANS, d.ldb = 5;
  expect(&d, MMT_ERR_UNSUPPORTED,
         "FP8 needs both operands K-major: row-major trans_a MMT_NO_TRANS and trans_b MMT_TRANS "
         "(column-major: MMT_TRANS and MMT_NO_TRANS)");
  /* an FP8 D: after FP8 inputs, beta 0, an f32 bias; scale_d and amax with it only */
  d.trans_b = MMT_TRANS, d.ldb = 16, d.out_type = MMT_E5M2, d.ldd = 16, d.beta = 0, d.c = NULL;
  d.scale_d = ADDR(0x800000), d.amax = (float *)ADDR(0x800010);
  expect(&d, MMT_OK, NULL);
  d.beta = 0.5f, d.c = ADDR(0x900000), d.ldc = 16;
  expect(&d, MMT_ERR_UNSUPPORTED,
         "an FP8 D (out_type e5m2) is written without C: beta must be 0, got 0.5");
  d.beta = 0, d.c = NULL, d.bias_mode = MMT_BIAS_COL, d.bias = ADDR(0x900000);
  d.bias_type = MMT_E5M2;
  expect(&d, MMT_ERR_INVALID_ARG, "an FP8 D's bias is MMT_F32 (bias_type 5)");
  d.bias_type = MMT_F32;
  expect(&d, MMT_OK, NULL);
  d.amax = (float *)ADDR(0x900004); /* inside the bias (5 floats) */
  expect(&d, MMT_ERR_INVALID_ARG, "amax overlaps bias");
  d.amax = (float *)ADDR(0x400000 + 20); /* in D (4 x 5 bytes at pitch 16) */
  expect(&d, MMT_ERR_INVALID_ARG, "d overlaps amax");
  d.amax = (float *)ADDR(0x800012);
  expect(&d, MMT_ERR_INVALID_ARG, "amax (0x800012) is not 4-byte aligned");
  d.amax = (float *)ADDR(0x800010), d.bias_mode = MMT_BIAS_NONE, d.bias = NULL;
  rt_matmul_plan pl8;
  rt_matmul_map(&d, &pl8);
  assert_false(pl8.plain);
  assert_string_equal(pl8.op.out, "e5m2");
  assert_int_equal(pl8.scale_d, 0x800000);
  assert_int_equal(pl8.amax, 0x800010);
  d.out_type = MMT_E4M3, d.scale_d = NULL, d.amax = NULL; /* e4m3 in and out, a bare GEMM */
  rt_matmul_map(&d, &pl8);
  assert_false(pl8.plain);
  d.out_type = MMT_F32, d.ldd = 5, d.amax = (float *)ADDR(0x800010);
  expect(&d, MMT_ERR_INVALID_ARG, "amax is for an FP8 D (out_type f32)");
  d.amax = NULL, d.fast_accum = 1;
  expect(&d, MMT_OK, NULL);
  mmt_matmul_desc h = base();
  h.fast_accum = 1;
  expect(&h, MMT_ERR_INVALID_ARG, "fast_accum is for FP8 inputs (in_type f16)");
  h = base(), h.scale_mode = MMT_SCALE_BLOCK, h.scale_row = ADDR(0x600000);
  h.scale_col = ADDR(0x700000);
  expect(&h, MMT_ERR_INVALID_ARG, "scale_mode MMT_SCALE_BLOCK is for FP8 inputs (in_type f16)");
  h.scale_mode = MMT_SCALE_TENSOR; /* per-tensor scales for any input */
  expect(&h, MMT_OK, NULL);
  h.scale_col = NULL;
  expect(&h, MMT_ERR_INVALID_ARG,
         "scale_mode MMT_SCALE_TENSOR needs both scale_row (A's) and scale_col (B's)");
  h.scale_mode = (mmt_scale_mode)3;
  expect(&h, MMT_ERR_INVALID_ARG, "scale_mode 3 is not an mmt_scale_mode");
  /* block scales: row-major, batch 1; their arrays' lengths count against D */
  d.scale_mode = MMT_SCALE_BLOCK, d.scale_row = ADDR(0x600000), d.scale_col = ADDR(0x700000);
  expect(&d, MMT_OK, NULL);
  d.scale_row = ADDR(0x400000 + 4 * 4 * 5); /* D is 4 x 5 floats from 0x400000: just after */
  expect(&d, MMT_OK, NULL);
  d.scale_row = ADDR(0x400000 + 4 * 4 * 5 - 4);
  expect(&d, MMT_ERR_INVALID_ARG, "d overlaps scale_row");
  d.scale_row = ADDR(0x600000), d.batch = 2, d.stride_d = 20, d.stride_a = 64, d.stride_b = 80;
  expect(&d, MMT_ERR_UNSUPPORTED,
         "MMT_SCALE_BLOCK: row-major order and batch 1 only (got row-major, batch 2)");
  /* the kernel's op */
  d.batch = 1, d.stride_d = d.stride_a = d.stride_b = 0;
  rt_matmul_plan pl;
  rt_matmul_map(&d, &pl);
  assert_false(pl.plain);
  assert_true(pl.op.scale_block && pl.op.fast_accum && !pl.op.scale_row && !pl.op.scale_tensor);
  assert_string_equal(pl.kp.layout, "nt");
  /* column-major: the kernel's A is the call's B, and its scale the call's scale_col */
  mmt_matmul_desc c = base();
  c.order = MMT_COL_MAJOR, c.in_type = MMT_E5M2, c.out_type = MMT_F16, c.trans_a = MMT_TRANS;
  c.lda = 16, c.ldb = 16, c.ldc = 4, c.ldd = 4;
  c.scale_mode = MMT_SCALE_TENSOR, c.scale_row = ADDR(0x600000), c.scale_col = ADDR(0x700000);
  expect(&c, MMT_OK, NULL);
  rt_matmul_map(&c, &pl);
  assert_string_equal(pl.kp.layout, "nt");
  assert_true(pl.op.scale_tensor && !pl.op.scale_row && !pl.op.scale_col);
  assert_int_equal(pl.scale_row, 0x700000);
  assert_int_equal(pl.scale_col, 0x600000);
  c.scale_mode = MMT_SCALE_BLOCK;
  expect(&c, MMT_ERR_UNSUPPORTED,
         "MMT_SCALE_BLOCK: row-major order and batch 1 only (got column-major, batch 1)");
  /* mixed FP8: B of the other type; swapped, the kernel's A is the call's B and its dtype B's */
  c.scale_mode = MMT_SCALE_TENSOR, c.b_type = MMT_E4M3;
  expect(&c, MMT_OK, NULL);
  rt_matmul_map(&c, &pl);
  assert_true(pl.op.mixed_fp8);
  assert_int_equal(pl.dtype, MMT_E4M3);
  c.order = MMT_ROW_MAJOR, c.trans_a = MMT_NO_TRANS, c.trans_b = MMT_TRANS, c.ldc = c.ldd = 5;
  expect(&c, MMT_OK, NULL);
  rt_matmul_map(&c, &pl);
  assert_true(pl.op.mixed_fp8);
  assert_int_equal(pl.dtype, MMT_E5M2);
  c.b_type = MMT_E5M2; /* B's type named, the same as A's: not mixed */
  rt_matmul_map(&c, &pl);
  assert_false(pl.op.mixed_fp8);
  c.b_type = MMT_BF16;
  expect(&c, MMT_ERR_INVALID_ARG,
         "b_type 3: B may differ from A (in_type e5m2) only as the other FP8 type");
  h = base(), h.b_type = MMT_BF16;
  expect(&h, MMT_ERR_INVALID_ARG,
         "b_type 3: B may differ from A (in_type f16) only as the other FP8 type");
  h.b_type = MMT_F16;
  expect(&h, MMT_OK, NULL);
}

static void test_pointers_and_overlaps(void **state) {
  (void)state;
  mmt_matmul_desc d = base();
  d.d = NULL;
  expect(&d, MMT_ERR_INVALID_ARG, "d is NULL but the call uses it");
  d = base(), d.a = NULL;
  expect(&d, MMT_ERR_INVALID_ARG, "a is NULL but the call uses it");
  d.alpha = 0; /* A and B are not read */
  expect(&d, MMT_OK, NULL);
  d = base(), d.c = NULL;
  expect(&d, MMT_ERR_INVALID_ARG, "c is NULL but the call uses it");
  d = base(), d.d = ADDR(0x400002);
  expect(&d, MMT_ERR_INVALID_ARG, "d (0x400002) is not 4-byte aligned");
  /* D over the last element of A (f16: 24 elements, 48 bytes) */
  d = base(), d.d = ADDR(0x100000 + 44);
  expect(&d, MMT_ERR_INVALID_ARG, "d overlaps a");
  d.d = ADDR(0x100000 + 48); /* right after it */
  expect(&d, MMT_OK, NULL);
  d = base(), d.b = ADDR(0x400000 + 76);
  expect(&d, MMT_ERR_INVALID_ARG, "d overlaps b");
  d = base(), d.c = ADDR(0x400000 + 4);
  expect(&d, MMT_ERR_INVALID_ARG,
         "d overlaps c without being it (in place needs c == d, ldc == ldd and stride_c == "
         "stride_d)");
  d.c = d.d; /* in place */
  expect(&d, MMT_OK, NULL);
  d.ldc = 6, d.ldd = 6;
  expect(&d, MMT_OK, NULL);
  d.ldc = 7;
  expect(&d, MMT_ERR_INVALID_ARG, NULL);
  d = base(), d.bias_mode = MMT_BIAS_COL, d.bias = ADDR(0x400000 + 16);
  expect(&d, MMT_ERR_INVALID_ARG, "d overlaps bias");
  d = base(), d.scale_row = ADDR(0x400000 + 76);
  expect(&d, MMT_ERR_INVALID_ARG, "d overlaps scale_row");
}

static void test_batch_strides(void **state) {
  (void)state;
  mmt_matmul_desc d = base();
  d.batch = 8, d.stride_a = 24, d.stride_b = 0, d.stride_c = 20, d.stride_d = 20;
  d.a = ADDR(0x100000), d.c = ADDR(0x300000), d.d = ADDR(0x400000);
  expect(&d, MMT_OK, NULL); /* one after another, a shared B */
  d.stride_d = 19;
  expect(&d, MMT_ERR_INVALID_ARG,
         "stride_d 19 with ldd 5 makes the batch's problems overlap in D (each is 4 x 5)");
  /* side by side in rows of 40: heads packed as [M][batch][N] */
  d.stride_d = 5, d.ldd = 40, d.c = NULL, d.beta = 0;
  expect(&d, MMT_OK, NULL);
  d.ldd = 39;
  expect(&d, MMT_ERR_INVALID_ARG, NULL);
  d.ldd = 40, d.stride_d = 4;
  expect(&d, MMT_ERR_INVALID_ARG, NULL);
  /* D of batch 8 runs into A's memory only through its later problems */
  d = base(), d.batch = 8, d.stride_a = 24, d.stride_c = 20, d.stride_d = 20;
  d.d = ADDR(0x100000 - 8 * 20 * 4 + 4);
  expect(&d, MMT_ERR_INVALID_ARG, "d overlaps a");
  d.d = ADDR(0x100000 - 8 * 20 * 4);
  expect(&d, MMT_OK, NULL);
}

/* Grouped calls: their fields, layout, strides and the vectors' lengths (G copies by column). */
/* The routing regimes grouped calls are keyed and tuned by: 2^i and 3 * 2^i, rounded up. */
static void test_group_rows_bucket(void **state) {
  (void)state;
  static const int64_t in[] = {-5, 0,  1,  2,  3,  4,    5,    6,    7,    8,    9,     12,
                               13, 16, 17, 24, 25, 1000, 1024, 1025, 1536, 1537, 16384, 16385};
  static const int64_t want[] = {1,  1,  1,  2,  3,  4,    6,    6,    8,    8,    12,    12,
                                 16, 16, 24, 24, 32, 1024, 1024, 1536, 1536, 2048, 16384, 24576};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
    assert_int_equal(rt_group_rows_bucket(in[i]), want[i]);
  /* every bucket is its own, and the next value up starts the next one */
  for (int64_t b = 1; b < ((int64_t)1 << 40); b = rt_group_rows_bucket(b + 1)) {
    assert_int_equal(rt_group_rows_bucket(b), b);
    assert_true(rt_group_rows_bucket(b + 1) <= b + b);
  }
  assert_int_equal(rt_group_rows_bucket(INT64_MAX), INT64_MAX);
}

static void test_grouped(void **state) {
  (void)state;
  mmt_matmul_desc d = base();
  d.group_rows = ADDR(0x900000);
  expect(&d, MMT_ERR_INVALID_ARG, "group_rows is set but group_mode is MMT_GROUP_NONE");
  d.group_mode = (mmt_group_mode)3;
  expect(&d, MMT_ERR_INVALID_ARG, "group_mode 3 is not an mmt_group_mode");
  /* 8 experts over one A (4 x 6) and D (4 x 5), their weights 30 apart */
  d.group_mode = MMT_GROUP_CONTIGUOUS, d.batch = 8, d.stride_b = 30;
  expect(&d, MMT_OK, NULL);
  rt_matmul_plan pl;
  rt_matmul_map(&d, &pl);
  assert_false(pl.plain);
  assert_int_equal(pl.op.group, 'c');
  assert_int_equal(pl.batch, 8);
  assert_int_equal(pl.stride_b, 30);
  assert_int_equal(pl.stride_a, 0);
  assert_int_equal(pl.group_rows, 0x900000);
  d.group_tokens = -1;
  expect(&d, MMT_ERR_INVALID_ARG, "group_tokens must be >= 0, got -1");
  d.group_tokens = 3, d.stride_d = 20;
  expect(&d, MMT_ERR_INVALID_ARG,
         "stride_d must be 0 with MMT_GROUP_CONTIGUOUS (group_rows place the experts' rows), "
         "got 20");
  d.stride_d = 0, d.trans_a = MMT_TRANS, d.lda = 4;
  expect(&d, MMT_ERR_UNSUPPORTED,
         "MMT_GROUP_CONTIGUOUS needs row-major order and trans_a MMT_NO_TRANS (the experts' "
         "rows are A's rows)");
  /* gated: B of 2N columns an expert, its ldb checked against them */
  d.trans_a = MMT_NO_TRANS, d.lda = 6, d.gated = 1, d.ldb = 9;
  expect(&d, MMT_ERR_INVALID_ARG, "ldb must be >= max(1, 2N) = 10, got 9");
  d.ldb = 10;
  expect(&d, MMT_OK, NULL);
  /* FP8: per-tensor and vector scales, not block scales nor an FP8 D */
  d.gated = 0, d.ldb = 5, d.in_type = MMT_E4M3, d.out_type = MMT_BF16, d.trans_b = MMT_TRANS;
  d.lda = d.ldb = 16, d.beta = 0, d.c = NULL, d.stride_b = 96;
  d.scale_mode = MMT_SCALE_TENSOR, d.scale_row = ADDR(0x800000), d.scale_col = ADDR(0x810000);
  expect(&d, MMT_OK, NULL);
  d.scale_mode = MMT_SCALE_BLOCK;
  expect(&d, MMT_ERR_UNSUPPORTED,
         "MMT_SCALE_BLOCK: row-major order and batch 1 only (got row-major, batch 8)");
  d.batch = 1;
  expect(&d, MMT_ERR_UNSUPPORTED,
         "MMT_GROUP_CONTIGUOUS: block scales are not grouped (per-tensor and vector scales are)");
  d.batch = 8, d.scale_mode = MMT_SCALE_TENSOR, d.out_type = MMT_E4M3;
  expect(&d, MMT_ERR_UNSUPPORTED,
         "MMT_GROUP_CONTIGUOUS: an FP8 out_type is not grouped (f32, f16 and bf16 are)");
  d = base(), d.group_mode = MMT_GROUP_CONTIGUOUS, d.batch = 8, d.stride_b = 30;
  d.group_rows = NULL;
  expect(&d, MMT_ERR_INVALID_ARG, "group_rows is NULL but the call uses it");
  d.group_rows = ADDR(0x900002);
  expect(&d, MMT_ERR_INVALID_ARG, "group_rows (0x900002) is not 4-byte aligned");
  /* G + 1 offsets: 36 bytes; D (80 bytes) just after them, then on them */
  d.group_rows = ADDR(0x400000 - 36);
  expect(&d, MMT_OK, NULL);
  d.group_rows = ADDR(0x400000 - 32);
  expect(&d, MMT_ERR_INVALID_ARG, "d overlaps group_rows");
  /* a bias by column: one of N for each expert (8 x 5 floats), by row: M */
  d = base(), d.group_mode = MMT_GROUP_CONTIGUOUS, d.batch = 8, d.group_rows = ADDR(0x900000);
  d.bias_mode = MMT_BIAS_COL, d.bias = ADDR(0x400000 - 8 * 5 * 4);
  expect(&d, MMT_OK, NULL);
  d.bias = ADDR(0x400000 - 8 * 5 * 4 + 4);
  expect(&d, MMT_ERR_INVALID_ARG, "d overlaps bias");
  d.bias_mode = MMT_BIAS_ROW;
  expect(&d, MMT_OK, NULL);
  /* masked: 8 blocks of 4 rows at a batch's strides; per-row vectors cover all 32 rows */
  d = base(), d.group_mode = MMT_GROUP_MASKED, d.batch = 8, d.group_rows = ADDR(0x900000);
  d.stride_a = 24, d.stride_c = 20, d.stride_d = 20;
  d.scale_row = ADDR(0x400000 - 32 * 4);
  expect(&d, MMT_OK, NULL);
  d.scale_row = ADDR(0x400000 - 31 * 4);
  expect(&d, MMT_ERR_INVALID_ARG, "d overlaps scale_row");
  d.scale_row = NULL;
  rt_matmul_map(&d, &pl);
  assert_int_equal(pl.op.group, 'm');
  assert_int_equal(pl.stride_a, 24);
  d.stride_d = 0;
  expect(&d, MMT_ERR_INVALID_ARG,
         "stride_d is 0 with batch 8: every problem would write the same D");
  d.stride_d = 20, d.batch = 70000, d.stride_a = 0, d.stride_c = 0;
  expect(&d, MMT_ERR_UNSUPPORTED, "MMT_GROUP_MASKED: batch (the experts) 70000 is above 65535");
}

static void test_plain(void **state) {
  (void)state;
  mmt_matmul_desc d = base();
  rt_matmul_plan pl;
  d.out_type = MMT_F16, d.c = d.d;
  rt_matmul_map(&d, &pl);
  assert_true(pl.plain);
  assert_int_equal(pl.gemm.dtype, MMT_F16);
  assert_int_equal(pl.gemm.ldc, 5);
  d.beta = 0, d.c = NULL; /* C not read: C = D */
  rt_matmul_map(&d, &pl);
  assert_true(pl.plain);
  assert_false(pl.op.residual);
  d.beta = 1, d.c = ADDR(0x300000); /* D apart from a C that is read: a residual op */
  rt_matmul_map(&d, &pl);
  assert_false(pl.plain);
  assert_string_equal(pl.op.out, "f16");
  assert_true(pl.op.residual);
  d.beta = 0; /* C not read: the same op but its key's */
  rt_matmul_map(&d, &pl);
  assert_false(pl.op.residual);
  d = base(), d.in_type = MMT_TF32, d.c = d.d;
  rt_matmul_map(&d, &pl);
  assert_true(pl.plain);
  d.act = MMT_ACT_RELU;
  rt_matmul_map(&d, &pl);
  assert_false(pl.plain);
  d.act = MMT_ACT_NONE, d.batch = 2, d.stride_d = d.stride_c = 20;
  rt_matmul_map(&d, &pl);
  assert_false(pl.plain);
}

/* op goes to its code and back, and to its text (into text) and back, unchanged. */
static void round_trip(const gen_op *op, const char *in_dtype, char text[GEN_OP_TEXT_MAX]) {
  gen_op back, parsed;
  ut_err e;
  assert_true(rt_op_of_code(rt_op_code(op), &back));
  assert_memory_equal(&back, op, sizeof *op);
  assert_int_equal(gen_op_format(op, text, GEN_OP_TEXT_MAX, &e), MMT_OK);
  assert_int_equal(gen_op_parse(text, in_dtype, &parsed, &e), MMT_OK);
  assert_memory_equal(&parsed, op, sizeof *op);
}

static void test_op_codes(void **state) {
  (void)state;
  assert_int_equal(rt_op_code(NULL), 0);
  gen_op back;
  assert_false(rt_op_of_code(0, &back));
  int seen = 0;
  static const char *const outs[3] = {"f32", "f16", "bf16"};
  int64_t codes[3 * 3 * 2 * 4 * GEN_ACTS * 2];
  for (int o = 0; o < 3; o++)
    for (int b = 0; b < 3; b++)
      for (int f = 0; f < 2; f++)
        for (int s = 0; s < 4; s++)
          for (int a = 0; a < GEN_ACTS; a++)
            for (int g = 0; g < 2; g++) {
              gen_op op = {.bias = b == 1   ? 'c'
                                   : b == 2 ? 'r'
                                            : 0,
                           .bias_f32 = b && f,
                           .scale_row = s & 1,
                           .scale_col = s >> 1,
                           .act = (gen_act)a,
                           .gated = g};
              snprintf(op.out, sizeof op.out, "%s", outs[o]);
              const int64_t code = rt_op_code(&op);
              assert_true(rt_op_of_code(code, &back));
              assert_memory_equal(&back, &op, sizeof op);
              for (int i = 0; i < seen; i++) assert_true(codes[i] != code || (!b && f));
              codes[seen++] = code;
              /* and the op's text goes back and forth too */
              char text[GEN_OP_TEXT_MAX];
              ut_err e;
              assert_int_equal(gen_op_format(&op, text, sizeof text, &e), MMT_OK);
              gen_op parsed;
              assert_int_equal(gen_op_parse(text, "f16", &parsed, &e), MMT_OK);
              char again[GEN_OP_TEXT_MAX];
              assert_int_equal(gen_op_format(&parsed, again, sizeof again, &e), MMT_OK);
              assert_string_equal(text, again);
            }
  assert_false(rt_op_of_code(1 | 3 << 1, &back)); /* no fourth output type */
  /* FP8's fields: per-tensor or block scales, fast accumulation, B of the other type */
  for (int v = 0; v < 16; v++) {
    gen_op op = {.scale_tensor = v & 1,
                 .scale_block = (v & 3) == 2,
                 .fast_accum = v >> 2 & 1,
                 .mixed_fp8 = v >> 3 & 1};
    snprintf(op.out, sizeof op.out, "bf16");
    char text[GEN_OP_TEXT_MAX];
    round_trip(&op, "e4m3", text);
    assert_true(gen_op_valid(&op, "e5m2"));
    assert_true(gen_op_valid(&op, "f16") == !(op.scale_block || op.fast_accum || op.mixed_fp8));
  }
  /* an FP8 D: bit 17, then bits 1-2 say which */
  for (int o = 0; o < 2; o++) {
    gen_op op = {.scale_tensor = true, .bias = 'c', .bias_f32 = true};
    snprintf(op.out, sizeof op.out, "%s", o ? "e5m2" : "e4m3");
    assert_true(rt_op_of_code(rt_op_code(&op), &back));
    assert_memory_equal(&back, &op, sizeof op);
    assert_true(gen_op_valid(&op, "e4m3") && !gen_op_valid(&op, "bf16"));
    op.bias_f32 = false; /* no FP8 bias */
    assert_false(gen_op_valid(&op, "e4m3"));
  }
  assert_false(rt_op_of_code(1 | 2 << 1 | (int64_t)1 << 17, &back)); /* two FP8 types only */
  /* grouped: bits 18-19, contiguous or masked, gated or not, not block-scaled nor an FP8 D */
  for (int g = 0; g < 2; g++) {
    gen_op op = {.group = g ? 'm' : 'c', .bias = 'c', .scale_tensor = true};
    snprintf(op.out, sizeof op.out, "f16");
    char text[GEN_OP_TEXT_MAX];
    round_trip(&op, "f16", text);
    assert_string_equal(text, g ? "out=f16,bias=col,scale=tensor,group=masked"
                                : "out=f16,bias=col,scale=tensor,group=contiguous");
    assert_true(gen_op_valid(&op, "f16"));
    op.gated = true;
    round_trip(&op, "f16", text);
    assert_true(gen_op_valid(&op, "f16"));
    snprintf(op.out, sizeof op.out, "e4m3");
    op.bias_f32 = true;
    assert_false(gen_op_valid(&op, "e4m3"));
    assert_false(rt_op_of_code(rt_op_code(&op), &back));
  }
  ut_err e;
  gen_op parsed;
  assert_int_equal(gen_op_parse("out=f16,act=silu,gated,group=masked", "f16", &parsed, &e), MMT_OK);
  assert_true(parsed.gated && parsed.group == 'm');
  static const char *const refused[2] = {"scale=block,group=masked", "out=e5m2,group=masked"};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(gen_op_parse(refused[i], "e4m3", &parsed, &e), MMT_ERR_INVALID_ARG);
    assert_non_null(strstr(e.msg, "group= takes no block scales nor an FP8 out="));
  }
  assert_int_equal(gen_op_parse("out=f16,group=ragged", "f16", &parsed, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "bad epilogue field 'group=ragged'"));
  assert_false(rt_op_of_code(1 | (int64_t)3 << 18, &back)); /* two group modes only */
  /* residual: bit 20, with any op of a 16-bit or f32 D, gated or grouped too; not an FP8 D */
  for (int v = 0; v < 3; v++) {
    gen_op op = {.residual = true, .gated = v == 1, .group = v == 2 ? 'c' : 0, .act = GEN_ACT_SILU};
    snprintf(op.out, sizeof op.out, "%s", v & 1 ? "bf16" : "f32");
    char text[GEN_OP_TEXT_MAX];
    round_trip(&op, "bf16", text);
    assert_non_null(strstr(text, ",residual"));
    assert_true(rt_op_code(&op) >> 20 == 1 && gen_op_valid(&op, "bf16"));
  }
  gen_op res8 = {.residual = true, .scale_tensor = true};
  snprintf(res8.out, sizeof res8.out, "e4m3");
  assert_false(gen_op_valid(&res8, "e4m3"));
  assert_false(rt_op_of_code(rt_op_code(&res8), &back));
  assert_int_equal(gen_op_parse("out=e5m2,residual", "e4m3", &parsed, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "residual with an FP8 D"));
  /* the longest text of a valid op fits GEN_OP_TEXT_MAX (mmt_choice.epilogue) */
  assert_int_equal(gen_op_parse("out=bf16,bias=col,bias_type=f32,scale=row+col,act=gelu_tanh,"
                                "fast_accum,mixed,group=contiguous,residual",
                                "e4m3", &parsed, &e),
                   MMT_OK);
  char longest[GEN_OP_TEXT_MAX];
  round_trip(&parsed, "e4m3", longest);
  assert_false(rt_op_of_code(1 | (int64_t)1 << 21, &back)); /* no bit past them */
}

/* ---- the mapping, run ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static int64_t pick(int64_t lo, int64_t hi) {
  return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1));
}
static float value(void) { return (float)pick(-8, 8) / 4; } /* exact in every type */

/* The op ABI on the host: what an op kernel computes from pl's arguments (gen.h), in float64,
 * D stored as f32 (the descriptors here are f32 in and out). */
static void emulate(const rt_matmul_plan *pl, const mmt_matmul_desc *d) {
  const rt_gemm_kernel_problem *kp = &pl->kp;
  const bool at = kp->layout[0] == 't', bt = kp->layout[1] == 't';
  for (int64_t z = 0; z < pl->batch; z++) {
    const float *A = (const float *)pl->a + z * pl->stride_a;
    const float *B = (const float *)pl->b + z * pl->stride_b;
    const float *C = pl->c ? (const float *)(uintptr_t)pl->c + z * pl->stride_c : NULL;
    float *D = (float *)(uintptr_t)pl->d + z * pl->stride_d;
    for (int64_t i = 0; i < kp->m; i++) {
      double x[2] = {0, 0};
      for (int64_t j = 0; j < kp->n; j++) {
        double p = 0;
        for (int64_t l = 0; l < kp->k; l++)
          p += (double)A[at ? l * kp->lda + i : i * kp->lda + l] *
               B[bt ? j * kp->ldb + l : l * kp->ldb + j];
        double v = d->alpha * p;
        if (pl->op.scale_row) v *= ((const float *)(uintptr_t)pl->scale_row)[i];
        if (pl->op.scale_col) v *= ((const float *)(uintptr_t)pl->scale_col)[j];
        if (pl->op.bias) v += ((const float *)(uintptr_t)pl->bias)[pl->op.bias == 'c' ? j : i];
        const int64_t jd = pl->op.gated ? j / 2 : j;
        const double c = d->beta != 0.0f ? d->beta * (double)C[i * kp->ldc + jd] : 0;
        if (!pl->op.gated) {
          D[i * pl->ldd + j] = (float)mr_act(d->act, v + c);
        } else if ((x[j % 2] = v), j % 2) {
          D[i * pl->ldd + jd] = (float)(mr_act(d->act, x[0]) * x[1] + c);
        }
      }
    }
  }
}

/* A random descriptor of f32 in and out over fresh host memory. */
static mmt_matmul_desc random_desc(float **mem, size_t *sizes) {
  mmt_matmul_desc d = {.in_type = MMT_F32, .out_type = MMT_F32, .alpha = 1.5f};
  d.order = next() % 2 ? MMT_COL_MAJOR : MMT_ROW_MAJOR;
  d.gated = d.order == MMT_ROW_MAJOR && next() % 3 == 0;
  d.trans_a = next() % 2 ? MMT_TRANS : MMT_NO_TRANS;
  d.trans_b = next() % 2 ? MMT_TRANS : MMT_NO_TRANS;
  d.m = pick(1, 6), d.n = pick(1, 6), d.k = pick(0, 5);
  d.beta = next() % 2 ? 0.5f : 0.0f;
  d.act = (mmt_activation)pick(0, 4);
  d.bias_mode = (mmt_bias)pick(0, 2);
  d.batch = pick(1, 3);
  const int64_t np = d.gated ? 2 * d.n : d.n;
  const bool row = d.order == MMT_ROW_MAJOR;
  /* stored widths and runs of A, B and C/D */
  const bool a_rows = row != (d.trans_a == MMT_TRANS), b_rows = row != (d.trans_b == MMT_TRANS);
  const int64_t aw = a_rows ? d.k : d.m, ar = a_rows ? d.m : d.k;
  const int64_t bw = b_rows ? np : d.k, br = b_rows ? d.k : np;
  const int64_t cw = row ? d.n : d.m, cr = row ? d.m : d.n;
  d.lda = (aw > 0 ? aw : 1) + pick(0, 2);
  d.ldb = (bw > 0 ? bw : 1) + pick(0, 2);
  d.ldc = cw + pick(0, 2);
  /* D: problems one after another, or side by side in rows (interleaved heads) */
  const bool side = d.batch > 1 && next() % 2;
  d.ldd = side ? d.batch * cw + pick(0, 1) : cw + pick(0, 2);
  d.stride_d = side ? cw : cr * d.ldd + pick(0, 3);
  d.stride_a = next() % 3 == 0 ? 0 : ar * d.lda + pick(0, 3);
  d.stride_b = next() % 3 == 0 ? 0 : br * d.ldb + pick(0, 3);
  d.stride_c = cr * d.ldc;
  const size_t n[7] = {(size_t)(d.batch * d.stride_a + ar * d.lda),
                       (size_t)(d.batch * d.stride_b + br * d.ldb),
                       (size_t)(d.batch * d.stride_c + cr * d.ldc),
                       (size_t)(d.batch * d.stride_d + cr * d.ldd),
                       (size_t)(np > d.m ? np : d.m),
                       (size_t)d.m,
                       (size_t)np};
  for (int i = 0; i < 7; i++) {
    sizes[i] = n[i];
    mem[i] = malloc(n[i] * sizeof(float));
    assert_non_null(mem[i]);
    for (size_t j = 0; j < n[i]; j++) mem[i][j] = value();
  }
  d.a = mem[0], d.b = mem[1], d.c = mem[2], d.d = mem[3];
  if (d.bias_mode != MMT_BIAS_NONE) d.bias = mem[4];
  if (next() % 2) d.scale_row = mem[5];
  if (next() % 2) d.scale_col = mem[6];
  return d;
}

static void test_mapping_computes_the_call(void **state) {
  (void)state;
  int plain = 0, ops = 0;
  for (int trial = 0; trial < 3000; trial++) {
    float *mem[7];
    size_t sizes[7];
    mmt_matmul_desc d = random_desc(mem, sizes);
    ut_err e = {{0}};
    if (rt_matmul_check(&d, &e) != MMT_OK) fail_msg("trial %d: %s", trial, e.msg);
    rt_matmul_plan pl;
    rt_matmul_map(&d, &pl);
    float *before = malloc(sizes[3] * sizeof(float));
    assert_non_null(before);
    memcpy(before, mem[3], sizes[3] * sizeof(float));
    if (pl.plain) { /* mmt_gemm's problem: its own tests map it; D = C then */
      plain++;
    } else {
      ops++;
      emulate(&pl, &d);
      const mr_host h = {d.a, d.b, d.c, d.bias, d.scale_row, d.scale_col};
      char *written = calloc(sizes[3], 1);
      assert_non_null(written);
      for (int64_t z = 0; z < d.batch; z++)
        for (int64_t i = 0; i < d.m; i++)
          for (int64_t j = 0; j < d.n; j++) {
            const int64_t at = z * d.stride_d + mr_offset(d.order, 0, i, j, d.ldd);
            const double want = mr_element(&d, &h, z, i, j, NULL);
            if (fabs(mem[3][at] - want) > 1e-4 * (1 + fabs(want)))
              fail_msg("trial %d: D[%lld][%lld][%lld] = %g, want %g", trial, (long long)z,
                       (long long)i, (long long)j, mem[3][at], want);
            written[at] = 1;
          }
      for (size_t j = 0; j < sizes[3]; j++)
        if (!written[j] && memcmp(&mem[3][j], &before[j], sizeof(float)) != 0)
          fail_msg("trial %d: element %zu of D's memory written outside D", trial, j);
      free(written);
    }
    free(before);
    for (int i = 0; i < 7; i++) free(mem[i]);
  }
  assert_true(plain > 0 && ops > 2000);
}

/* What the dispatcher's choice is for descriptors, without a GPU or a database: an op kernel
 * of a template with epilogues, named by its epilogue as the kernel computes it. */
static void test_explain(void **state) {
  (void)state;
  rt_chooser *ch = NULL;
  ut_err e = {{0}};
  assert_int_equal(rt_chooser_new("sm_90", 132, &ch, &e), MMT_OK);
  mmt_matmul_desc d = {.order = MMT_ROW_MAJOR,
                       .trans_b = MMT_TRANS,
                       .m = 512,
                       .n = 1024,
                       .k = 768,
                       .in_type = MMT_F16,
                       .out_type = MMT_F16,
                       .alpha = 1,
                       .lda = 768,
                       .ldb = 768,
                       .ldd = 1024,
                       .batch = 1,
                       .bias_mode = MMT_BIAS_COL,
                       .bias = ADDR(0x1000),
                       .act = MMT_ACT_GELU_TANH};
  mmt_choice c;
  assert_int_equal(rt_explain_matmul(ch, NULL, "NVIDIA H200", &d, &c, &e), MMT_OK);
  assert_string_equal(c.epilogue, "out=f16,bias=col,bias_type=f32,act=gelu_tanh"); /* fp32: 0 */
  assert_int_equal(c.batch, 1);
  assert_string_equal(c.layout, "nt");
  assert_true(!strcmp(c.template_name, "wgmma") || !strcmp(c.template_name, "mma_sync"));
  /* column-major: D^T, the bias over the kernel's rows */
  d.order = MMT_COL_MAJOR, d.trans_b = MMT_NO_TRANS, d.lda = 512, d.ldb = 768, d.ldd = 512;
  assert_int_equal(rt_explain_matmul(ch, NULL, "NVIDIA H200", &d, &c, &e), MMT_OK);
  assert_string_equal(c.epilogue, "out=f16,bias=row,bias_type=f32,act=gelu_tanh");
  assert_int_equal(c.kernel_m, 1024);
  /* f32 inputs: the CUDA-core families; a batch: a config whose grid.z is free */
  mmt_matmul_desc f = {.order = MMT_ROW_MAJOR,
                       .m = 300,
                       .n = 200,
                       .k = 100,
                       .in_type = MMT_F32,
                       .out_type = MMT_BF16,
                       .alpha = 1,
                       .lda = 100,
                       .ldb = 200,
                       .ldd = 200,
                       .batch = 40,
                       .stride_a = 30000,
                       .stride_b = 20000,
                       .stride_d = 60000,
                       .act = MMT_ACT_SILU};
  assert_int_equal(rt_explain_matmul(ch, NULL, "NVIDIA H200", &f, &c, &e), MMT_OK);
  assert_string_equal(c.epilogue, "out=bf16,act=silu");
  assert_int_equal(c.batch, 40);
  assert_string_equal(c.template_name, "reg_tiled");
  assert_null(strstr(c.params, "split=2")); /* split-K configs take batches of one */
  /* a plain descriptor is mmt_gemm's problem */
  mmt_matmul_desc p = {.order = MMT_ROW_MAJOR,
                       .m = 64,
                       .n = 64,
                       .k = 64,
                       .in_type = MMT_F32,
                       .out_type = MMT_F32,
                       .alpha = 1,
                       .lda = 64,
                       .ldb = 64,
                       .ldd = 64,
                       .batch = 1};
  assert_int_equal(rt_explain_matmul(ch, NULL, "NVIDIA H200", &p, &c, &e), MMT_OK);
  assert_string_equal(c.epilogue, "");
  assert_int_equal(c.batch, 1);
  p.gated = 1, p.order = MMT_COL_MAJOR;
  assert_int_equal(rt_explain_matmul(ch, NULL, "NVIDIA H200", &p, &c, &e), MMT_ERR_UNSUPPORTED);
  rt_chooser_free(ch);
}

/* A row of an op problem, as the tuner stores it: its op kernel's hash and the op's text. */
static void insert_op_row(db_handle *db, const char *tname, const char *params, const gen_op *op,
                          const db_problem *p, double ms) {
  gen_template *t = NULL;
  gen_config cfg;
  gen_kernel k = {0};
  ut_err e = {{0}};
  assert_int_equal(gen_load_named(tname, &t, &e), MMT_OK);
  assert_int_equal(gen_config_parse(t, params, &cfg, &e), MMT_OK);
  assert_int_equal(gen_emit_op(t, &cfg, p->dtype, p->layout, op, &k, &e), MMT_OK);
  db_result r;
  memset(&r, 0, sizeof r);
  snprintf(r.device.name, sizeof r.device.name, "NVIDIA H200");
  snprintf(r.device.uuid, sizeof r.device.uuid, "GPU-test");
  r.device.cc_major = 9;
  snprintf(r.nvrtc_version, sizeof r.nvrtc_version, "13.0");
  snprintf(r.template_name, sizeof r.template_name, "%s", tname);
  snprintf(r.template_hash, sizeof r.template_hash, "%s", gen_source_hash(t));
  assert_int_equal(gen_config_format(t, &cfg, r.params, sizeof r.params, &e), MMT_OK);
  rt_kernel_hash(&k, r.kernel_hash);
  r.problem = *p;
  r.status = DB_OK;
  r.ms_min = r.ms_median = r.ms_max = ms;
  r.runs = 10;
  r.tflops = 1;
  r.regs = r.shared_bytes = r.local_bytes = -1;
  assert_int_equal(db_insert(db, &r, &e), MMT_OK);
  gen_kernel_clear(&k);
  gen_free(t);
}

/* A tuned op problem is served its own row (EXACT), and only for its op and batch: the plain
 * GEMM of the same shape, and the op at another batch, are not. */
static void test_op_rows(void **state) {
  (void)state;
  char dir[] = "/tmp/mmt_matmul_db_XXXXXX", path[128];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/mmtune.db", dir);
  db_handle *db = NULL;
  ut_err e = {{0}};
  assert_int_equal(db_open(path, false, &db, &e), MMT_OK);
  const char *params = "bm=64,bn=64,bk=64,wm=32,wn=32,stages=3,vec=8,swz=1,group=1,split=1";
  gen_op op;
  assert_int_equal(gen_op_parse("out=f16,bias=col,act=relu", "f16", &op, &e), MMT_OK);
  db_problem p = {.dtype = "f16", .layout = "nt", .m = 512, .n = 1024, .k = 768, .batch = 1};
  gen_op_format(&op, p.op, sizeof p.op, NULL);
  insert_op_row(db, "mma_sync", params, &op, &p, 0.02);
  rt_chooser *ch = NULL;
  assert_int_equal(rt_chooser_new("sm_90", 132, &ch, &e), MMT_OK);
  mmt_matmul_desc d = {.order = MMT_ROW_MAJOR,
                       .trans_b = MMT_TRANS,
                       .m = 512,
                       .n = 1024,
                       .k = 768,
                       .in_type = MMT_F16,
                       .out_type = MMT_F16,
                       .alpha = 1,
                       .lda = 768,
                       .ldb = 768,
                       .ldd = 1024,
                       .batch = 1,
                       .bias_mode = MMT_BIAS_COL,
                       .bias = ADDR(0x1000),
                       .bias_type = MMT_F16,
                       .act = MMT_ACT_RELU};
  mmt_choice c;
  assert_int_equal(rt_explain_matmul(ch, db, "NVIDIA H200", &d, &c, &e), MMT_OK);
  assert_int_equal(c.kind, MMT_CHOICE_EXACT);
  assert_string_equal(c.template_name, "mma_sync");
  assert_string_equal(c.params, params);
  assert_true(fabs(c.expected_ms - 0.02) < 1e-12);
  /* the plain GEMM of the shape: no exact row (the op's is not its) */
  const mmt_problem plain = {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_TRANS, 512,  1024,
                             768,           768,          768,       1024, MMT_F16};
  assert_int_equal(rt_explain(ch, db, "NVIDIA H200", &plain, &c, &e), MMT_OK);
  assert_int_not_equal(c.kind, MMT_CHOICE_EXACT);
  /* the op at a batch of 4: not the batch-1 row */
  d.batch = 4, d.stride_a = 512 * 768, d.stride_b = 0, d.stride_d = 512 * 1024;
  assert_int_equal(rt_explain_matmul(ch, db, "NVIDIA H200", &d, &c, &e), MMT_OK);
  assert_int_not_equal(c.kind, MMT_CHOICE_EXACT);
  rt_chooser_free(ch);
  db_close(db);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_enums_and_sizes),
      cmocka_unit_test(test_leading_dimensions),
      cmocka_unit_test(test_epilogue_fields),
      cmocka_unit_test(test_fp8_and_scale_modes),
      cmocka_unit_test(test_pointers_and_overlaps),
      cmocka_unit_test(test_batch_strides),
      cmocka_unit_test(test_grouped),
      cmocka_unit_test(test_group_rows_bucket),
      cmocka_unit_test(test_plain),
      cmocka_unit_test(test_op_codes),
      cmocka_unit_test(test_mapping_computes_the_call),
      cmocka_unit_test(test_explain),
      cmocka_unit_test(test_op_rows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
