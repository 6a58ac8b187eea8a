/*
 * test_epilogue.c -- op kernels (gen.h, "Epilogues") without a GPU: ops as text, the template
 * contract (a template without epilogues refuses every op; constraints and emit get the op),
 * and for every template that declares epilogues, a covering set of ops -- each output type
 * with each activation, each bias form, scales, gating, and the variants of each family
 * (split-K, whose grid.z is not the batch; wgmma's persistent grids, clusters and swap; its
 * FP8 kernels, op kernels only) --
 * emitted and compiled by NVRTC for sm_90 (sm_90a), with the plain kernel unchanged by the op
 * machinery (gen_emit_op with no op is gen_emit, byte for byte).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gen.h"
#include "rt_compile.h"
#include "sass.h"

static gen_op parse(const char *text, const char *dtype) {
  gen_op op;
  ut_err e = {{0}};
  if (gen_op_parse(text, dtype, &op, &e) != MMT_OK) fail_msg("'%s': %s", text, e.msg);
  return op;
}

static void test_op_text(void **state) {
  (void)state;
  char text[GEN_OP_TEXT_MAX];
  ut_err e;
  gen_op op = parse("act=silu,gated,bias=col", "bf16");
  assert_string_equal(op.out, "bf16");
  assert_int_equal(gen_op_format(&op, text, sizeof text, &e), MMT_OK);
  assert_string_equal(text, "out=bf16,bias=col,act=silu,gated");
  op = parse("scale=row+col,out=f32,bias=row,bias_type=f32", "f16");
  assert_int_equal(gen_op_format(&op, text, sizeof text, &e), MMT_OK);
  assert_string_equal(text, "out=f32,bias=row,scale=row+col"); /* f32 out: an f32 bias anyway */
  op = parse("bias=col,bias_type=f32", "tf32");
  assert_string_equal(op.out, "f32");
  assert_int_equal(gen_op_format(NULL, text, sizeof text, &e), MMT_OK);
  assert_string_equal(text, "");
  assert_int_equal(gen_op_format(&op, text, 8, &e), MMT_ERR_INVALID_ARG);
  const char *bad[] = {"out=f8",     "act=tanh",      "bias=both", "gated=1",
                       "scale=rows", "bias_type=f32", "nonsense"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(gen_op_parse(bad[i], "f16", &op, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_op_parse("act=relu", "f16", &op, &e), MMT_OK);
  assert_int_equal(gen_op_parse("", "f64", &op, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "no out="));
  /* FP8 inputs: D bf16 unless said; per-tensor scales; fast accumulation theirs alone */
  op = parse("fast_accum,scale=tensor", "e4m3");
  assert_string_equal(op.out, "bf16");
  assert_true(op.scale_tensor && op.fast_accum && gen_op_valid(&op, "e4m3"));
  assert_false(gen_op_valid(&op, "f16"));
  assert_int_equal(gen_op_format(&op, text, sizeof text, &e), MMT_OK);
  assert_string_equal(text, "out=bf16,scale=tensor,fast_accum");
  op = parse("out=f16,scale=tensor,act=silu", "f16"); /* a per-tensor scale for any input */
  assert_true(gen_op_valid(&op, "f16"));
  assert_int_equal(gen_op_parse("scale=tensor,scale=row", "e5m2", &op, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "one scale= only"));
  op = parse("scale=block,out=f32", "e5m2");
  assert_true(op.scale_block && gen_op_valid(&op, "e5m2") && !gen_op_valid(&op, "bf16"));
  assert_int_equal(gen_op_format(&op, text, sizeof text, &e), MMT_OK);
  assert_string_equal(text, "out=f32,scale=block");
  assert_int_equal(gen_op_parse("scale=block,scale=tensor", "e4m3", &op, &e), MMT_ERR_INVALID_ARG);
  /* an FP8 D: after FP8 inputs, its bias f32 */
  op = parse("out=e4m3,bias=col", "e5m2");
  assert_true(op.bias_f32 && gen_op_valid(&op, "e5m2") && !gen_op_valid(&op, "f16"));
  assert_int_equal(gen_op_format(&op, text, sizeof text, &e), MMT_OK);
  assert_string_equal(text, "out=e4m3,bias=col,bias_type=f32");
  assert_int_equal(gen_op_parse("out=e3m4", "e4m3", &op, &e), MMT_ERR_INVALID_ARG);
  /* a residual: C read (beta != 0), last in the text */
  op = parse("residual,out=f16,bias=col", "f16");
  assert_true(op.residual && gen_op_valid(&op, "f16"));
  assert_int_equal(gen_op_format(&op, text, sizeof text, &e), MMT_OK);
  assert_string_equal(text, "out=f16,bias=col,residual");
  assert_true(gen_dtype_fp8("e5m2") && !gen_dtype_fp8("bf16") && !gen_dtype_fp8(NULL));
  assert_string_equal(gen_dtype_fp8_other("e4m3"), "e5m2");
  assert_string_equal(gen_dtype_fp8_other("e5m2"), "e4m3");
  assert_null(gen_dtype_fp8_other("bf16"));
  assert_int_equal(gen_dtype_size("e4m3"), 1);
  assert_string_equal(gen_act_name(GEN_ACT_GELU_ERF), "gelu_erf");
  assert_int_equal(gen_act_index("gelu_tanh"), GEN_ACT_GELU_TANH);
  assert_null(gen_act_name(GEN_ACTS));
}

static gen_template *load(const char *name) {
  gen_template *t = NULL;
  ut_err e = {{0}};
  if (gen_load_named(name, &t, &e) != MMT_OK) fail_msg("%s: %s", name, e.msg);
  return t;
}

static void test_templates_without_epilogues(void **state) {
  (void)state;
  gen_template *t = load("naive");
  assert_false(gen_has_epilogues(t));
  gen_config cfg;
  gen_config_default(t, &cfg);
  gen_op op = parse("act=relu", "f32");
  bool valid = true;
  char why[128];
  ut_err e;
  assert_int_equal(gen_check_op_for(t, &cfg, "f32", "nn", &op, &valid, why, sizeof why, &e),
                   MMT_OK);
  assert_false(valid);
  assert_string_equal(why, "template naive has no epilogues");
  const gen_problem p = {"f32", "nn", 64, 64, 64, 64, 64, 64, 16, &op, 1};
  valid = true;
  assert_int_equal(gen_check(t, &cfg, &p, &valid, why, sizeof why, &e), MMT_OK);
  assert_false(valid);
  gen_kernel k = {0};
  assert_int_equal(gen_emit_op(t, &cfg, "f32", "nn", &op, &k, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "no epilogues"));
  gen_free(t);
}

/* The ops every template with epilogues is compiled for: each output type with each
 * activation, and the bias forms, scales and gating spread over them. */
static const char *const k_ops[] = {
    "out=f32",
    "out=f16,act=relu,bias=col",
    "out=bf16,act=gelu_tanh,bias=row,bias_type=f32",
    "out=f32,act=gelu_erf,scale=row+col",
    "out=f16,act=silu,gated",
    "out=bf16,act=silu,gated,bias=col,scale=col",
    "out=f32,act=gelu_tanh,gated,bias=row",
    "out=f16,act=gelu_erf,scale=row,bias=col,bias_type=f32",
    "out=bf16,act=relu",
    "out=f32,act=silu,bias=col",
};

/* Emits and compiles cfg (params text over the default) for the ops of k_ops whose index is
 * `phase` modulo `every` (1, 0: all of them) that the config takes, in dtype and layout; returns
 * how many compiled. */
static int compile_some(gen_template *t, const char *params, const char *dtype, const char *layout,
                        int every, int phase) {
  gen_config cfg;
  ut_err e = {{0}};
  gen_config_default(t, &cfg);
  if (params && gen_config_parse(t, params, &cfg, &e) != MMT_OK)
    fail_msg("%s %s: %s", gen_name(t), params, e.msg);
  int compiled = 0;
  char names[sizeof k_ops / sizeof k_ops[0]][256];
  for (size_t i = 0; i < sizeof k_ops / sizeof k_ops[0]; i++) {
    if ((int)i % every != phase) continue;
    const gen_op op = parse(k_ops[i], dtype);
    bool valid = false;
    char why[256] = "";
    assert_int_equal(gen_check_op_for(t, &cfg, dtype, layout, &op, &valid, why, sizeof why, &e),
                     MMT_OK);
    if (!valid) {
      if (!op.gated)
        fail_msg("%s %s %s: refuses %s: %s", gen_name(t), params, dtype, k_ops[i], why);
      continue; /* a config may not store column pairs */
    }
    gen_kernel k = {0};
    if (gen_emit_op(t, &cfg, dtype, layout, &op, &k, &e) != MMT_OK)
      fail_msg("%s %s %s %s: %s", gen_name(t), params, dtype, k_ops[i], e.msg);
    assert_non_null(strstr(k.source, "mmt_epilogue E"));
    char text[GEN_OP_TEXT_MAX];
    assert_int_equal(gen_op_format(&op, text, sizeof text, &e), MMT_OK);
    assert_string_equal(k.op, text);
    snprintf(names[compiled], sizeof names[compiled], "%s", k.kernel_name);
    for (int j = 0; j < compiled; j++) assert_string_not_equal(names[j], k.kernel_name);
    rt_cubin cubin = {0};
    char *log = NULL;
    if (rt_compile(k.source, k.kernel_name, k.arch[0] ? k.arch : "sm_90", &cubin, &log, &e) !=
        MMT_OK)
      fail_msg("%s %s %s %s: %s\n%s", gen_name(t), params, dtype, k_ops[i], e.msg, log ? log : "");
    free(log);
    rt_cubin_free(&cubin);
    gen_kernel_clear(&k);
    compiled++;
  }
  return compiled;
}

static int compile_ops(gen_template *t, const char *params, const char *dtype, const char *layout) {
  return compile_some(t, params, dtype, layout, 1, 0);
}

/* The plain kernel is the same with the op machinery as without. */
static void plain_unchanged(gen_template *t, const char *dtype, const char *layout) {
  gen_config cfg;
  gen_config_default(t, &cfg);
  gen_kernel a = {0}, b = {0};
  ut_err e;
  assert_int_equal(gen_emit(t, &cfg, dtype, layout, &a, &e), MMT_OK);
  assert_int_equal(gen_emit_op(t, &cfg, dtype, layout, NULL, &b, &e), MMT_OK);
  assert_string_equal(a.source, b.source);
  assert_string_equal(a.op, "");
  assert_null(strstr(a.source, "mmt_epilogue"));
  gen_kernel_clear(&a);
  gen_kernel_clear(&b);
}

static void test_mma_sync(void **state) {
  (void)state;
  gen_template *t = load("mma_sync");
  assert_true(gen_has_epilogues(t));
  plain_unchanged(t, "f16", "nt");
  assert_int_equal(compile_ops(t, NULL, "f16", "nt"), 10);
  /* each variant half the ops (k_ops 0, 2, ...; 1, 3, ...) */
  assert_int_equal(
      compile_some(t, "vec=0,stages=3,bm=64,bn=64,wm=32,wn=32,group=1", "bf16", "tn", 2, 0), 5);
  assert_int_equal(
      compile_some(t, "bm=64,bn=64,bk=64,wm=32,wn=32,stages=3,group=1,split=4", "f16", "nn", 2, 1),
      5);
  /* a split-K config takes batches of one only; a gated op, an even N only */
  gen_config cfg;
  ut_err e;
  gen_config_default(t, &cfg);
  assert_int_equal(
      gen_config_parse(t, "bm=64,bn=64,bk=64,wm=32,wn=32,stages=3,group=1,split=4", &cfg, &e),
      MMT_OK);
  gen_op op = parse("out=f32,act=silu,gated", "f16");
  gen_problem p = {"f16", "nn", 256, 256, 4096, 4096, 256, 256, 16, &op, 2};
  bool valid = true;
  char why[128];
  assert_int_equal(gen_check(t, &cfg, &p, &valid, why, sizeof why, &e), MMT_OK);
  assert_false(valid);
  assert_string_equal(why, "a batch needs grid.z, which this config's split-K takes");
  p.batch = 1;
  assert_int_equal(gen_check(t, &cfg, &p, &valid, why, sizeof why, &e), MMT_OK);
  assert_true(valid);
  p.n = 255;
  assert_int_equal(gen_check(t, &cfg, &p, &valid, why, sizeof why, &e), MMT_OK);
  assert_false(valid);
  assert_string_equal(why, "a gated epilogue needs an even N (gate and up columns)");
  gen_free(t);
}

static void test_wgmma(void **state) {
  (void)state;
  gen_template *t = load("wgmma");
  assert_true(gen_has_epilogues(t));
  plain_unchanged(t, "bf16", "nt");
  assert_int_equal(compile_ops(t, NULL, "f16", "nt"), 10);
  /* persistent, clusters, split-K (z its own), swap (no gated op), tf32 */
  /* each variant a third of the ops (k_ops 0, 3, 6, 9; 1, 4, 7; 2, 5, 8) */
  assert_int_equal(compile_some(t, "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=8,persist=1",
                                "bf16", "tn", 3, 0),
                   4);
  assert_int_equal(compile_some(t, "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=8,cluster=2",
                                "f16", "nn", 3, 1),
                   3);
  assert_int_equal(compile_some(t, "bm=128,bn=64,stages=8,consumers=2,blocks=1,group=1,split=4",
                                "f16", "tt", 3, 2),
                   3);
  /* swap: no gated op (4, 5 and 6 are) */
  assert_int_equal(compile_some(t, "bm=64,bn=32,stages=6,consumers=1,blocks=2,group=1,swap=1",
                                "bf16", "nt", 3, 1),
                   2);
  assert_int_equal(
      compile_some(t, "bm=128,bn=128,stages=4,consumers=2,blocks=1,group=8", "tf32", "nt", 3, 0),
      4);
  /* an op kernel takes no repack */
  gen_config cfg;
  ut_err e;
  gen_config_default(t, &cfg);
  assert_int_equal(gen_config_parse(t, "repack=1", &cfg, &e), MMT_OK);
  const gen_op op = parse("out=f16", "f16");
  bool valid = true;
  char why[128];
  assert_int_equal(gen_check_op_for(t, &cfg, "f16", "nt", &op, &valid, why, sizeof why, &e),
                   MMT_OK);
  assert_false(valid);
  assert_string_equal(why, "repack: not with an epilogue (the copies know C only)");
  gen_free(t);
}

/* FP8 wgmma: op kernels only, both operands K-major (nt, with or without swap), promotion
 * at each interval of PROMOTE K tiles (0 only for an op that allows fast accumulation); each
 * variant compiled by NVRTC for sm_90a, the FP8 wgmma in its PTX. */
static void test_wgmma_fp8(void **state) {
  (void)state;
  gen_template *t = load("wgmma");
  static const struct {
    const char *dtype, *params, *op;
  } ok[] = {
      {"e4m3", "bn=128", "scale=tensor"},
      {"e5m2", "bn=128,promote=2", "out=f16,bias=col,act=gelu_tanh,scale=tensor"},
      {"e4m3", "bn=256,promote=0", "out=f32,scale=row+col,fast_accum"},
      {"e4m3", "bn=128,promote=1", "out=bf16,act=silu,gated,scale=tensor,fast_accum"},
      {"e4m3", "bm=128,bn=128,persist=1,promote=4", "out=bf16,bias=row,scale=row"},
      /* 96 accumulators and 96 partial sums a consumer thread: setmaxnreg's 240, not the
       * launch's 168 (no spill: 0 bytes of local memory on an H100) */
      {"e4m3", "bm=128,bn=192,stages=5,group=16", "out=bf16,scale=tensor"},
      {"e5m2", "bm=128,bn=128,cluster=2,stages=5", "out=f32,scale=col"},
      {"e4m3", "bm=128,bn=64,stages=8,group=1,split=4,promote=2", "scale=tensor"},
      /* bn = 256: 128 accumulators, the partial sums of half the columns at a time (no spill
       * at 168 launch registers, nvcc -Xptxas -v, sm_90a) */
      {"e4m3", "bn=256", "out=bf16,scale=tensor"},
      {"e5m2", "bm=64,bn=256,persist=2", "out=f16,bias=col,scale=tensor"},
      {"e4m3", "bn=256,split=2", "scale=row+col,mixed"},
      {"e4m3", "bn=256,persist=1", "out=bf16,scale=block"}, /* a half: one block of B */
      {"e4m3", "bm=64,bn=32,stages=8,consumers=1,blocks=2,group=1,swap=1", "scale=tensor"},
      {"e4m3", "bn=128", "scale=block"},
      {"e5m2", "bm=128,bn=64,stages=8,group=1,split=4", "out=f32,bias=col,act=silu,scale=block"},
      /* B of the other type: wgmma reads the pair, in its operands' order (swap: B first) */
      {"e4m3", "bn=128", "scale=tensor,mixed"},
      {"e5m2", "bn=128", "out=f16,scale=block,mixed"},
      {"e4m3", "bm=64,bn=32,stages=8,consumers=1,blocks=2,group=1,swap=1", "scale=tensor,mixed"},
      /* an FP8 D: saturating pairs (swap: one at a time), the amax by an atomic max */
      {"e4m3", "bn=128", "out=e4m3,bias=col,scale=tensor"},
      {"e5m2", "bm=64,bn=32,stages=8,consumers=1,blocks=2,group=1,swap=1", "out=e5m2,scale=row"},
      {"e4m3", "bm=128,bn=128,persist=1", "out=e5m2,act=silu,gated,scale=tensor,mixed"},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    gen_config cfg;
    ut_err e = {{0}};
    gen_config_default(t, &cfg);
    assert_int_equal(gen_config_parse(t, ok[i].params, &cfg, &e), MMT_OK);
    const gen_op op = parse(ok[i].op, ok[i].dtype);
    gen_kernel k = {0};
    if (gen_emit_op(t, &cfg, ok[i].dtype, "nt", &op, &k, &e) != MMT_OK)
      fail_msg("%s %s %s: %s", ok[i].dtype, ok[i].params, ok[i].op, e.msg);
    char want[64];
    const char *other = gen_dtype_fp8_other(ok[i].dtype);
    const bool swap = cfg.v[gen_param_index(t, "swap")] == 1;
    snprintf(want, sizeof want, "k32.f32.%s.%s", op.mixed_fp8 && swap ? other : ok[i].dtype,
             !op.mixed_fp8 ? ok[i].dtype
             : swap        ? ok[i].dtype
                           : other);
    if (!strstr(k.source, want))
      fail_msg("%s %s %s: no %s", ok[i].dtype, ok[i].params, ok[i].op, want);
    const bool promote = cfg.v[gen_param_index(t, "promote")] > 0;
    const bool halves = promote && cfg.v[gen_param_index(t, "bn")] == 256;
    assert_int_equal(strstr(k.source, "acc[i][r] += part[i][r];") != NULL,
                     promote && !op.scale_block && !halves);
    /* by halves: an n = 128 wgmma into part, added into acc's half h */
    assert_int_equal(strstr(k.source, "acc[i][h * (ACC / 2) + r] += part[i][r];") != NULL,
                     halves && !op.scale_block);
    /* block scales, loaded two K tiles ahead: by halves each half's own B block */
    assert_int_equal(strstr(k.source, "block_scales(E, kt + 2,") != NULL, op.scale_block);
    assert_int_equal(strstr(k.source, "s = s_ab[i][hr][h];") != NULL, halves && op.scale_block);
    assert_int_equal(strstr(k.source, "s = s_ab[i][h][0];") != NULL, !halves && op.scale_block);
    assert_int_equal(strstr(k.source, "m64n128k32.f32.") != NULL,
                     halves || cfg.v[gen_param_index(t, "bn")] == 128);
    assert_int_equal(strstr(k.source, "Block scales of K block kt") != NULL, op.scale_block);
    assert_int_equal(k.tensor_maps[0].box[0], 128); /* K: 128 one-byte elements a stage */
    /* blockIdx.z is the batch's problem in an op kernel: the K slice only with split-K (a
     * batch read as slices loaded K tiles past the end for every problem but the first) */
    assert_non_null(strstr(k.source, "k_tiles * (SPLIT > 1 ? (int)blockIdx.z : 0) / SPLIT"));
    assert_int_equal(strstr(k.source, "#define EPI_OUT 3") || strstr(k.source, "#define EPI_OUT 4"),
                     gen_dtype_fp8(op.out));
    rt_cubin cubin = {0};
    char *log = NULL;
    if (rt_compile(k.source, k.kernel_name, k.arch, &cubin, &log, &e) != MMT_OK)
      fail_msg("%s %s %s: %s\n%s", ok[i].dtype, ok[i].params, ok[i].op, e.msg, log ? log : "");
    free(log);
    rt_cubin_free(&cubin);
    gen_kernel_clear(&k);
  }
  /* the refusals, each with its reason */
  static const struct {
    const char *dtype, *layout, *params, *op, *why;
  } bad[] = {
      {"e4m3", "nt", "bn=128", NULL, "e4m3: an op kernel only"},
      {"e5m2", "nn", "bn=128", "scale=tensor", "layout nt only"},
      {"e4m3", "tn", "bn=64,swap=1", "scale=tensor", "layout nt only"},
      {"e4m3", "nt", "bn=128,promote=0", "scale=tensor", "only for an op that allows it"},
      {"e4m3", "nt", "bn=256,promote=2", "scale=tensor", "promote = 1 at bn = 256"},
      {"e4m3", "nt", "bm=128,bn=128,blocks=2,stages=2", "scale=tensor",
       "with the partial sums of promotion"},
      {"f16", "nt", "promote=2", "out=f32", "promote: FP8 only"},
      {"e4m3", "nt", "bn=128,repack=1", "scale=tensor", "repack: not with an epilogue"},
      {"e4m3", "nt", "bn=128,promote=2", "scale=block", "block scales: promote = 1"},
      {"e4m3", "nt", "bn=256,promote=0", "scale=block,fast_accum", "block scales: promote = 1"},
      {"e5m2", "nt", "bm=64,bn=32,stages=8,consumers=1,blocks=2,group=1,swap=1", "scale=block",
       "block scales: not applied by this config"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gen_config cfg;
    ut_err e = {{0}};
    gen_config_default(t, &cfg);
    assert_int_equal(gen_config_parse(t, bad[i].params, &cfg, &e), MMT_OK);
    gen_op op;
    if (bad[i].op) op = parse(bad[i].op, bad[i].dtype);
    bool valid = true;
    char why[256] = "";
    assert_int_equal(gen_check_op_for(t, &cfg, bad[i].dtype, bad[i].layout, bad[i].op ? &op : NULL,
                                      &valid, why, sizeof why, &e),
                     MMT_OK);
    assert_false(valid);
    if (!strstr(why, bad[i].why))
      fail_msg("%s %s: '%s' lacks '%s'", bad[i].dtype, bad[i].params, why, bad[i].why);
  }
  gen_free(t);
}

/* Block scales: no wait on a scale load inside the tile that issued it.  ptxas twice put one
 * there (docs/templates/wgmma.md): a uniform B scale moved to a uniform register right after
 * its load, and a loop-carried copy of a load issued at the top of the same tile, both before
 * the tile's first wgmma wait -- a memory latency every K tile (128 x 128 ran 14% longer at
 * 8192^3 on an H100).  In the SASS of the K loop (the innermost loop with a QGMMA), each LDG's
 * register is read by nothing before the next WARPGROUP.DEPBAR.  Needs cuobjdump (the CUDA
 * toolkit's), not a GPU; skips without it. */
static void test_block_scales_sass(void **state) {
  (void)state;
  gen_template *t = load("wgmma");
  static const char *const configs[] = {
      "bm=128,bn=256,stages=4,consumers=2,blocks=1,group=16,persist=1,promote=1", /* halves */
      "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=8,persist=1,promote=1",
  };
  for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
    gen_config cfg;
    ut_err e = {{0}};
    gen_config_default(t, &cfg);
    assert_int_equal(gen_config_parse(t, configs[c], &cfg, &e), MMT_OK);
    const gen_op op = parse("out=bf16,scale=block", "e4m3");
    gen_kernel k = {0};
    if (gen_emit_op(t, &cfg, "e4m3", "nt", &op, &k, &e) != MMT_OK) fail_msg("%s", e.msg);
    rt_cubin cubin = {0};
    char *log = NULL;
    if (rt_compile(k.source, k.kernel_name, k.arch, &cubin, &log, &e) != MMT_OK)
      fail_msg("%s: %s\n%s", configs[c], e.msg, log ? log : "");
    free(log);
    sass_insn *in = NULL;
    int n = 0, first = 0, last = 0, loads = 0;
    char why[256] = "";
    const int rc = sass_read(&cubin, MMT_CUOBJDUMP, &in, &n, why, sizeof why);
    rt_cubin_free(&cubin);
    gen_kernel_clear(&k);
    if (rc == 1) {
      gen_free(t);
      skip(); /* no cuobjdump */
    }
    if (rc) fail_msg("%s: %s", configs[c], why);
    if (!sass_loop_with(in, n, "QGMMA", &first, &last)) fail_msg("%s: no K loop", configs[c]);
    for (int i = first; i <= last; i++) {
      if (strncmp(in[i].op, "LDG", 3) != 0) continue;
      loads++;
      char reg[16] = "";
      sscanf(in[i].args, "%15[^, ]", reg);
      for (int j = i + 1; j <= last && strncmp(in[j].op, "WARPGROUP.DEPBAR", 16) != 0; j++) {
        if (sass_reads(&in[j], reg))
          fail_msg("%s: %s %s at 0x%x waits for %s %s at 0x%x in the same K tile", configs[c],
                   in[j].op, in[j].args, in[j].addr, in[i].op, in[i].args, in[i].addr);
        if (sass_writes(&in[j], reg) && !in[j].predicated) break;
      }
    }
    print_message("%s: K loop of %d instructions, %d scale loads\n", configs[c], last - first + 1,
                  loads);
    assert_true(loads > 0); /* the scales load in the loop: what this test is about */
    free(in);
  }
  gen_free(t);
}

static void test_reg_tiled(void **state) {
  (void)state;
  gen_template *t = load("reg_tiled");
  plain_unchanged(t, "f32", "nn");
  assert_int_equal(compile_some(t, NULL, "f32", "tn", 2, 0), 5);
  assert_int_equal(compile_some(t,
                                "bm=64,bn=128,bk=8,tm=8,tn=8,vec=4,stages=2,pad=4,group=1,split=2",
                                "f32", "nt", 3, 1),
                   3);
  assert_int_equal(compile_some(t, "vec=1,stages=3", "f32", "tt", 3, 2), 3);
  gen_free(t);
}

/* The skinny families: skinny stores one element at a time (no gated op); skinny_mma's side 0
 * gathers a gate's pair across lanes, side 1 holds it. */
static void test_skinny(void **state) {
  (void)state;
  gen_template *t = load("skinny");
  plain_unchanged(t, "f16", "nt");
  assert_int_equal(compile_some(t, NULL, "f16", "nt", 3, 0), 3);           /* dot; no 6 */
  assert_int_equal(compile_some(t, NULL, "bf16", "nn", 3, 1), 2);          /* axpy; no 4, 7 */
  assert_int_equal(compile_some(t, "side=1,vec=0", "f32", "tn", 3, 2), 2); /* no 5 */
  assert_int_equal(
      compile_some(t, "bs=1,rl=1,warps=4,kw=1,unroll=4,vec=1,split=16", "tf32", "nt", 3, 0), 3);
  gen_free(t);
  t = load("skinny_mma");
  plain_unchanged(t, "f16", "nt");
  assert_int_equal(compile_some(t, NULL, "f16", "nt", 2, 0), 5);
  assert_int_equal(compile_some(t, "side=1,bs=16,rl=2,warps=8,kw=2", "bf16", "nt", 2, 1), 5);
  gen_free(t);
}

/* Emits and compiles t's default config for op; returns the cubin's size and copies the kernel
 * name out. */
static size_t compiled_size(gen_template *t, const char *dtype, const char *text, char name[256]) {
  gen_config cfg;
  ut_err e = {{0}};
  gen_config_default(t, &cfg);
  const gen_op op = parse(text, dtype);
  gen_kernel k = {0};
  if (gen_emit_op(t, &cfg, dtype, "nt", &op, &k, &e) != MMT_OK)
    fail_msg("%s %s: %s", gen_name(t), text, e.msg);
  assert_non_null(strstr(k.source, op.residual ? "#define EPI_C 1" : "#define EPI_C 0"));
  snprintf(name, 256, "%s", k.kernel_name);
  rt_cubin cubin = {0};
  char *log = NULL;
  if (rt_compile(k.source, k.kernel_name, k.arch[0] ? k.arch : "sm_90", &cubin, &log, &e) != MMT_OK)
    fail_msg("%s %s: %s\n%s", gen_name(t), text, e.msg, log ? log : "");
  const size_t size = cubin.size;
  free(log);
  rt_cubin_free(&cubin);
  gen_kernel_clear(&k);
  return size;
}

/* Only a residual op's kernel has code that reads C (EPI_C; the others run with beta 0): each
 * family compiles both, under names of their own, and the tile families' whole-tile loops,
 * whose C path was half their epilogue's code, are a quarter smaller without it. */
static void test_residual(void **state) {
  (void)state;
  static const struct {
    const char *tmpl, *dtype;
    double smaller; /* the plain op's cubin at most this share of the residual's */
  } fam[] = {{"mma_sync", "f16", 0.75},
             {"wgmma", "bf16", 0.75},
             {"reg_tiled", "f32", 1.0},
             {"skinny", "f16", 1.0},
             {"skinny_mma", "bf16", 1.0}};
  for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
    gen_template *t = load(fam[i].tmpl);
    const char *out = !strcmp(fam[i].dtype, "f32") ? "out=f32" : "out=f16";
    char with[320], name_c[256], name[256];
    snprintf(with, sizeof with, "%s,bias=col,act=gelu_tanh,residual", out);
    const size_t size_c = compiled_size(t, fam[i].dtype, with, name_c);
    snprintf(with, sizeof with, "%s,bias=col,act=gelu_tanh", out);
    const size_t size = compiled_size(t, fam[i].dtype, with, name);
    assert_string_not_equal(name, name_c);
    if ((double)size > fam[i].smaller * (double)size_c)
      fail_msg("%s: %zu bytes without C's read, %zu with it", fam[i].tmpl, size, size_c);
    gen_free(t);
  }
}

/* Grouped ops (mixture of experts): mma_sync and reg_tiled emit and compile them, the move to
 * the block's expert (EPI_GROUP) in their tile, and wgmma, its tiles finding their experts in
 * a table (contiguous) or their problem's count (masked), persistent or not; a name of their
 * own; wgmma refuses them with swap or a cluster, the skinny templates on side 1 (the
 * experts' rows are M) or with split-K (test_skinny compiles theirs). */
static void test_grouped(void **state) {
  (void)state;
  static const struct {
    const char *tmpl, *dtype, *layout, *arch;
    const char *params;
  } ok[] = {{"mma_sync", "f16", "nt", "sm_90", ""},
            {"mma_sync", "bf16", "nn", "sm_80", ""},
            {"reg_tiled", "f32", "nt", "sm_80", ""},
            {"wgmma", "bf16", "nt", "sm_90a", ""},
            {"wgmma", "f16", "nn", "sm_90a", "persist=1"},
            {"wgmma", "tf32", "nt", "sm_90a", "persist=1"}};
  static const char *const ops[] = {
      "out=f16,bias=col,act=silu,group=contiguous", "out=f32,scale=row+col,group=contiguous",
      "out=bf16,bias=row,bias_type=f32,scale=tensor,group=masked", "out=f32,group=masked"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    gen_template *t = load(ok[i].tmpl);
    gen_config cfg;
    gen_config_default(t, &cfg);
    ut_err e = {{0}};
    if (*ok[i].params) assert_int_equal(gen_config_parse(t, ok[i].params, &cfg, &e), MMT_OK);
    const bool wgmma = !strcmp(ok[i].tmpl, "wgmma");
    for (size_t j = 0; j < sizeof ops / sizeof ops[0]; j++) {
      gen_op op = parse(ops[j], ok[i].dtype);
      if (!strcmp(ok[i].dtype, "f32") || !strcmp(ok[i].dtype, "tf32"))
        snprintf(op.out, sizeof op.out, "f32");
      bool valid = false;
      char why[256] = "";
      assert_int_equal(
          gen_check_op_for(t, &cfg, ok[i].dtype, ok[i].layout, &op, &valid, why, sizeof why, &e),
          MMT_OK);
      if (!valid) fail_msg("%s refuses %s: %s", ok[i].tmpl, ops[j], why);
      gen_kernel k = {0};
      if (gen_emit_op(t, &cfg, ok[i].dtype, ok[i].layout, &op, &k, &e) != MMT_OK)
        fail_msg("%s %s: %s", ok[i].tmpl, ops[j], e.msg);
      assert_non_null(strstr(k.source, !wgmma            ? "  EPI_GROUP("
                                       : op.group == 'c' ? "epi_group_lookup(E, group_table"
                                                         : "__ldg(E.group_rows + blockIdx.z)"));
      assert_non_null(
          strstr(k.source, op.group == 'c' ? "#define EPI_GROUPED 1" : "#define EPI_GROUPED 2"));
      assert_non_null(strstr(k.kernel_name, op.group == 'c' ? "_gc" : "_gm"));
      rt_cubin cubin = {0};
      char *log = NULL;
      if (rt_compile(k.source, k.kernel_name, ok[i].arch, &cubin, &log, &e) != MMT_OK)
        fail_msg("%s %s: %s\n%s", ok[i].tmpl, ops[j], e.msg, log ? log : "");
      if (log && *log) fail_msg("%s %s: not even a warning:\n%s", ok[i].tmpl, ops[j], log);
      free(log);
      rt_cubin_free(&cubin);
      gen_kernel_clear(&k);
      /* split-K's slices take grid.z: no grouped op there */
      gen_config split = cfg;
      if (gen_config_parse(t, "split=2", &split, &e) == MMT_OK) {
        assert_int_equal(gen_check_op_for(t, &split, ok[i].dtype, ok[i].layout, &op, &valid, why,
                                          sizeof why, &e),
                         MMT_OK);
        assert_false(valid);
      }
    }
    gen_free(t);
  }
  static const struct {
    const char *tmpl, *params;
  } refuse[] = {{"wgmma", "swap=1,bm=64,bn=64,consumers=1"},
                {"wgmma", "cluster=2"},
                {"skinny", "side=1"},
                {"skinny", "split=4"},
                {"skinny_mma", "side=1"},
                {"skinny_mma", "split=2"}};
  for (size_t i = 0; i < sizeof refuse / sizeof refuse[0]; i++) {
    gen_template *t = load(refuse[i].tmpl);
    gen_config cfg;
    gen_config_default(t, &cfg);
    const gen_op op = parse("out=f16,group=contiguous", "f16");
    ut_err e = {{0}};
    if (*refuse[i].params)
      assert_int_equal(gen_config_parse(t, refuse[i].params, &cfg, &e), MMT_OK);
    bool valid = true;
    char why[256] = "";
    assert_int_equal(gen_check_op_for(t, &cfg, "f16", "nt", &op, &valid, why, sizeof why, &e),
                     MMT_OK);
    assert_false(valid);
    if (!strstr(why, "grouped")) fail_msg("%s %s: %s", refuse[i].tmpl, refuse[i].params, why);
    gen_free(t);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_op_text),   cmocka_unit_test(test_templates_without_epilogues),
      cmocka_unit_test(test_mma_sync),  cmocka_unit_test(test_wgmma),
      cmocka_unit_test(test_wgmma_fp8), cmocka_unit_test(test_reg_tiled),
      cmocka_unit_test(test_skinny),    cmocka_unit_test(test_grouped),
      cmocka_unit_test(test_residual),  cmocka_unit_test(test_block_scales_sass),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
