/* test_skinny.c -- the families for problems with a small M or N (GEMV, decode batches):
 * templates/skinny.lua (CUDA cores, every dtype and layout) and templates/skinny_mma.lua
 * (tensor cores, f16/bf16, layout nt).  Their declarations and constraints, which body (dot
 * or axpy) each side and layout of skinny gets, the grids and requires, NVRTC compiles of a
 * sample in every dtype and layout (CPU), and results against a float64 reference on small
 * sides 1, 2, 3, 7, 16, 33 and 64, odd K, padded pitches, misaligned bases (skinny's element
 * loads), beta == 0 over NaN and beta != 0, split-K run twice for the same bits, in every
 * dtype, layout and side (GPU; skipped without). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_check.h"
#include "gen.h"
#include "rt_compile.h"
#include "rt_device.h"
#include "rt_driver.h"
#include "tmpl_check.h"

#define TEMPLATES MMT_SOURCE_TEMPLATE_DIR
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *const k_dtypes[] = {"f32", "tf32", "f16", "bf16"};
static const char *const k_layouts[] = {"nn", "nt", "tn", "tt"};

static gen_template *load_skinny(void) { return tc_load(TEMPLATES "/skinny.lua"); }
static gen_template *load_skinny_mma(void) { return tc_load(TEMPLATES "/skinny_mma.lua"); }

/* The value of parameter `name` in c, or `absent` when the template has no such parameter. */
static int param_of(const gen_template *t, const gen_config *c, const char *name, int absent) {
  int i = gen_param_index(t, name);
  return i >= 0 && i < c->n ? (int)c->v[i] : absent;
}

/* A problem of the given sizes with packed, 16-byte aligned rows. */
static gen_problem packed(const char *dtype, const char *layout, int64_t m, int64_t n, int64_t k) {
  return gen_packed_problem(dtype, layout, m, n, k);
}

/* ---- declaration, constraints, emit (CPU) ----------------------------------------------- */

static void test_declaration(void **state) {
  (void)state;
  gen_template *t = load_skinny();
  assert_string_equal(gen_name(t), "skinny");
  assert_int_equal(gen_dtype_count(t), 4);
  for (int l = 0; l < COUNT(k_layouts); l++) assert_true(gen_supports_layout(t, k_layouts[l]));
  assert_int_equal(gen_space_size(t), 2 * 5 * 3 * 3 * 3 * 5 * 4 * 2 * 5);
  gen_config c;
  gen_config_default(t, &c);
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  gen_free(t);
}

static void test_constraints(void **state) {
  (void)state;
  gen_template *t = load_skinny();
  tc_rejects(t, "warps=4,kw=8", NULL, "kw > warps");
  tc_rejects(t, "bs=16,rl=4", NULL, "bs * rl > 32");
  tc_rejects(t, "rl=4,unroll=4", NULL, "rl * unroll > 8");
  gen_problem square = packed("f16", "nt", 65, 4096, 4096);
  tc_rejects(t, "side=0", &square, "small side (M) is over 64");
  square = packed("f16", "nt", 4096, 65, 4096);
  tc_rejects(t, "side=1", &square, "small side (N) is over 64");
  gen_problem gemv = packed("f16", "nt", 1, 4096, 4096);
  tc_rejects(t, "side=0,bs=4", &gemv, "bs is over twice the small side");
  /* axpy (W = B stored K rows of N: layout nn, side 0) keeps bs * rl * V sums a lane */
  gen_problem nn = packed("f16", "nn", 16, 4096, 4096);
  tc_rejects(t, "side=0,bs=16,rl=1", &nn, "bs * rl * V > 64");
  gen_problem nt = packed("f16", "nt", 16, 4096, 4096);
  gen_config c;
  tc_parse_ok(t, "side=0,bs=16,rl=1", &c);
  assert_true(tc_check(t, &c, &nt, NULL, 0)); /* dot keeps bs * rl */
  gen_problem f32nn = packed("f32", "nn", 16, 4096, 4096);
  tc_parse_ok(t, "side=0,bs=16,rl=1", &c);
  assert_true(tc_check(t, &c, &f32nn, NULL, 0)); /* V = 4: 64 sums */
  tc_rejects(t, "side=0,bs=4,rl=4,warps=8,kw=8", &f32nn, "more than 48 KiB");
  /* 16 warps: the axpy body alone, with at most 16 sums a lane (128 registers a thread) */
  gen_problem gemv4k = packed("f32", "nn", 1, 4096, 4096);
  tc_parse_ok(t, "side=0,rl=1,lanes=8,warps=16,kw=16,unroll=8", &c);
  assert_true(tc_check(t, &c, &gemv4k, NULL, 0)); /* 4 sums a lane */
  tc_rejects(t, "side=0,bs=8,rl=1,warps=16", &f32nn, "warps = 16: bs * rl * V > 16");
  gen_problem gemv_dot = packed("f32", "nt", 1, 4096, 4096);
  tc_rejects(t, "side=0,rl=1,warps=16", &gemv_dot, "warps = 16 is for the axpy body");
  /* dot with X S-contiguous (side 1, nn) stages bs rows of unroll x kw x 32 x V of K a
   * step, the next step's held in registers: at most 16 elements a thread */
  gen_problem n16 = packed("f16", "nn", 4096, 16, 4096);
  tc_parse_ok(t, "side=1,bs=16,rl=2,warps=8,unroll=1", &c);
  assert_true(tc_check(t, &c, &n16, NULL, 0)); /* 16 x 256 over 256 threads */
  tc_rejects(t, "side=1,bs=16,rl=2,warps=4,unroll=1", &n16, "over 16 elements a thread");
  n16.layout = "nt"; /* X = B stored N rows of K: not staged */
  tc_parse_ok(t, "side=1,bs=16,rl=2,warps=4,unroll=1", &c);
  assert_true(tc_check(t, &c, &n16, NULL, 0));
  /* split-K across blocks: not with a K split inside them, and a step a slice at least: dot,
   * a chunk of 32 x V; axpy, 8 rows */
  tc_rejects(t, "kw=2,split=4", NULL, "split > 1 only with kw = 1");
  gen_problem gemv_nt = packed("f32", "nt", 1, 4096, 2048);
  tc_parse_ok(t, "side=0,split=16", &c);
  assert_true(tc_check(t, &c, &gemv_nt, NULL, 0)); /* 16 slices of 128 */
  gemv_nt.k--;
  tc_rejects(t, "side=0,split=16", &gemv_nt, "split-K slices of less than one step");
  gen_problem gemv_nn = packed("f32", "nn", 1, 4096, 512);
  tc_parse_ok(t, "side=0,split=64", &c);
  assert_true(tc_check(t, &c, &gemv_nn, NULL, 0)); /* 64 slices of 8 rows */
  gemv_nn.k--;
  tc_rejects(t, "side=0,split=64", &gemv_nn, "split-K slices of less than one step");
  /* lanes < 32 (rows of W shared out in a warp) is the axpy body's: W L-contiguous */
  gen_problem nt1 = packed("f32", "nt", 1, 4096, 4096);
  tc_rejects(t, "side=0,lanes=8", &nt1, "lanes < 32 is for the axpy body");
  gen_problem nn1 = packed("f32", "nn", 4096, 1, 4096); /* side 1: W = A, K-contiguous */
  tc_rejects(t, "side=1,lanes=8", &nn1, "lanes < 32 is for the axpy body");
  nn1 = packed("f32", "nn", 1, 4096, 4096);
  tc_parse_ok(t, "side=0,lanes=8", &c);
  assert_true(tc_check(t, &c, &nn1, NULL, 0));
  /* the grid's limit counts the narrower blocks: 8 lanes x 4 floats x 1 vector a group */
  gen_problem tall = packed("f32", "nn", 1, 32LL * 65535 + 1, 64);
  tc_rejects(t, "side=0,rl=1,lanes=8,warps=4,kw=4", &tall,
             "L needs more than 65535 blocks along grid y");
  tall.n--;
  tc_parse_ok(t, "side=0,rl=1,lanes=8,warps=4,kw=4", &c);
  assert_true(tc_check(t, &c, &tall, NULL, 0));
  /* K near 2^31: the kernels' int index along K steps past K and would wrap */
  gen_problem deep = packed("f16", "nn", 1, 64, (1LL << 31) - 1 - 16384);
  tc_parse_ok(t, "side=0", &c);
  assert_true(tc_check(t, &c, &deep, NULL, 0));
  deep.k++;
  tc_rejects(t, "side=0", &deep, "int index along K would wrap");
  gen_free(t);
}

/* Which body (dot: W K-contiguous) each side and layout gets, the grid and requires. */
static void test_emit(void **state) {
  (void)state;
  gen_template *t = load_skinny();
  /* side 0: W = B, K-contiguous when B is 't'; side 1: W = A, K-contiguous when A is 'n' */
  static const struct {
    int side;
    const char *layout;
    bool dot, staged; /* staged: dot with X (the small operand) S-contiguous */
  } k_bodies[] = {{0, "nn", false, false}, {0, "nt", true, false}, {0, "tn", false, false},
                  {0, "tt", true, true},   {1, "nn", true, true},  {1, "nt", true, false},
                  {1, "tn", false, false}, {1, "tt", false, false}};
  for (int i = 0; i < COUNT(k_bodies); i++) {
    char text[64];
    gen_config c;
    gen_kernel k;
    snprintf(text, sizeof text, "side=%d,bs=2,rl=2,warps=8,kw=2,vec=1", k_bodies[i].side);
    tc_parse_ok(t, text, &c);
    tc_emit_ok(t, &c, "f16", k_bodies[i].layout, &k);
    assert_non_null(strstr(k.source, k_bodies[i].dot ? "the dot body" : "the axpy body"));
    /* a block: 4 warp groups of 2 rows (dot) or of 32 lanes x 8 halves x 2 vectors (axpy) */
    const int64_t lb = k_bodies[i].dot ? 4 * 2 : 4 * 32 * 8 * 2;
    if (k_bodies[i].side == 0) /* the small side fastest: blocks sharing W run together */
      tc_grid_is(&k, 'M', 2, 'N', lb, 0, 1);
    else
      tc_grid_is(&k, 'N', 2, 'M', lb, 0, 1);
    assert_int_equal(k.block[0], 256);
    assert_int_equal(k.requires.align_bytes, 16);
    /* the K split's partial sums: (kw - 1) x 4 groups x (bs x rl (dot) or bs x rl x V x 32)
     * floats; staged, then bs rows of unroll (2) x kw x 32 x V elements of K and 4 of pad */
    const int64_t red = k_bodies[i].dot ? 4 * 4 : 4 * 4 * 32 * 8;
    const int64_t staged = k_bodies[i].staged ? 2 * (2 * 2 * 32 * 8 + 4) : 0;
    assert_int_equal(k.shared_bytes, 4 * (red + staged));
    const char *doc = "staged through shared memory, K-contiguous";
    assert_int_equal(strstr(k.source, doc) != NULL, k_bodies[i].staged);
    assert_true(k.dependent_launch);
    assert_false(k.exclusive);
    gen_kernel_clear(&k);
  }
  gen_config c;
  gen_kernel k;
  tc_parse_ok(t, "vec=0", &c);
  tc_emit_ok(t, &c, "f32", "nt", &k);
  assert_int_equal(k.requires.align_bytes, 4); /* element loads: any alignment */
  gen_kernel_clear(&k);
  /* split-K: grid.z slices meeting in the workspace (a thread's sums per thread per block),
   * exclusive, so not launched early */
  tc_parse_ok(t, "side=0,bs=2,rl=2,warps=4,split=16", &c);
  tc_emit_ok(t, &c, "f32", "nn", &k); /* axpy: bs x rl x V = 16 sums a thread */
  tc_grid_is(&k, 'M', 2, 'N', 4 * 32 * 4 * 2, 0, 16);
  assert_true(k.exclusive);
  assert_false(k.dependent_launch);
  assert_int_equal(k.workspace_per_block, 16 * 128 * 4);
  assert_non_null(strstr(k.source, "float* __restrict__ WS\n#endif"));
  assert_non_null(strstr(k.source, "splitk_reduce<sizeof acc / sizeof(float), SPLITK_THREADS>("));
  assert_non_null(strstr(k.source, "#define SPLITK_THREADS (WARPS * 32)"));
  assert_non_null(strstr(k.kernel_name, "_z16"));
  gen_kernel_clear(&k);
  tc_emit_ok(t, &c, "f32", "nt", &k); /* dot: bs x rl = 4 sums a thread */
  assert_int_equal(k.workspace_per_block, 4 * 128 * 4);
  assert_non_null(strstr(k.source, "splitk_reduce<sizeof acc / sizeof(float), SPLITK_THREADS>("));
  gen_kernel_clear(&k);
  /* lanes: an axpy warp takes 32 / lanes rows of W at a time, lanes x V x rl columns wide */
  tc_parse_ok(t, "side=0,bs=1,rl=2,lanes=8,warps=8,kw=4", &c);
  tc_emit_ok(t, &c, "f32", "nn", &k);
  tc_grid_is(&k, 'M', 1, 'N', 2 * 8 * 4 * 2, 0, 1);
  assert_int_equal(k.block[0], 256);
  assert_non_null(strstr(k.source, "#define LANES 8\n"));
  assert_non_null(strstr(k.kernel_name, "_l8"));
  assert_int_equal(k.shared_bytes, 4 * (3 * 2 * 1 * 2 * 4 * 32)); /* (kw - 1) x 2 groups */
  gen_kernel_clear(&k);
  tc_parse_ok(t, "side=1,lanes=16", &c);
  char why[256];
  assert_false(tc_check_for(t, &c, "f16", "nn", why, sizeof why)); /* side 1, A n: dot */
  assert_non_null(strstr(why, "lanes < 32 is for the axpy body (W L-contiguous)"));
  tc_emit_ok(t, &c, "f16", "tn", &k); /* side 1, A stored K rows of M: axpy */
  assert_null(strstr(k.kernel_name, "_l32"));
  assert_non_null(strstr(k.kernel_name, "_l16"));
  gen_kernel_clear(&k);
  gen_free(t);
}

/* The default and a sample with both bodies, every K split, unroll and access width, in every
 * dtype and layout, compile for sm_80 and sm_90 without a warning. */
static const char *const k_sample[] = {
    "",
    "side=1,bs=4,rl=1,warps=8,kw=4,unroll=4,vec=1",
    "side=0,bs=16,rl=2,warps=4,kw=2,unroll=1,vec=0",
    "side=1,bs=2,rl=4,warps=8,kw=8,unroll=2,vec=0",
    "side=0,bs=8,rl=1,warps=4,kw=1,unroll=1,vec=1",
    "side=1,bs=1,rl=1,warps=8,kw=2,unroll=4,vec=1",
    "side=0,bs=4,rl=2,warps=4,kw=1,unroll=2,vec=1,split=16",
    "side=1,bs=1,rl=1,warps=8,kw=1,unroll=1,vec=0,split=4",
    "side=0,bs=1,rl=1,warps=4,kw=1,unroll=8,vec=1,split=32",
};

/* Axpy configs with lanes < 32 (and 16 warps), in the layouts whose W is L-contiguous: side 0
 * nn and tn, side 1 tn and tt. */
static const char *const k_lanes_sample[] = {
    "side=0,bs=1,rl=1,lanes=8,warps=8,kw=8,unroll=8,vec=1",
    "side=1,bs=2,rl=2,lanes=8,warps=8,kw=4,unroll=2,vec=0",
    "side=0,bs=2,rl=1,lanes=16,warps=4,kw=1,unroll=4,vec=1,split=16",
    "side=1,bs=1,rl=2,lanes=16,warps=8,kw=2,unroll=4,vec=1",
    "side=0,bs=1,rl=1,lanes=8,warps=16,kw=16,unroll=4,vec=1",
    "side=1,bs=2,rl=1,lanes=8,warps=16,kw=8,unroll=2,vec=0",
};

static void test_nvrtc(void **state) {
  (void)state;
  gen_template *t = load_skinny();
  enum { MAX = COUNT(k_sample) * COUNT(k_dtypes) * COUNT(k_layouts) };
  gen_kernel kernels[MAX];
  const char *archs[MAX];
  int n = 0;
  for (int i = 0; i < COUNT(k_sample); i++)
    for (int d = 0; d < COUNT(k_dtypes); d++)
      for (int l = 0; l < COUNT(k_layouts); l++) {
        /* the default everywhere; the others in one layout a dtype, in turn */
        if (i > 0 && l != (i + d) % COUNT(k_layouts)) continue;
        gen_config c;
        tc_parse_ok(t, k_sample[i], &c);
        tc_emit_ok(t, &c, k_dtypes[d], k_layouts[l], &kernels[n]);
        archs[n++] = (i + d + l) % 2 ? "sm_80" : "sm_90";
      }
  static const char *const k_axpy_layouts[2][2] = {{"nn", "tn"}, {"tn", "tt"}};
  gen_kernel lanes[COUNT(k_lanes_sample) * COUNT(k_dtypes)];
  const char *lane_archs[COUNT(lanes)];
  int nl = 0;
  for (int i = 0; i < COUNT(k_lanes_sample); i++)
    for (int d = 0; d < COUNT(k_dtypes); d++) {
      gen_config c;
      tc_parse_ok(t, k_lanes_sample[i], &c);
      const int side = param_of(t, &c, "side", 0);
      tc_emit_ok(t, &c, k_dtypes[d], k_axpy_layouts[side][(i + d) % 2], &lanes[nl]);
      lane_archs[nl++] = (i + d) % 2 ? "sm_80" : "sm_90";
    }
  tc_compile_all(lanes, lane_archs, nl, NULL);
  for (int i = 0; i < nl; i++) gen_kernel_clear(&lanes[i]);
  tc_compile_all(kernels, archs, n, NULL);
  for (int i = 0; i < n; i++) gen_kernel_clear(&kernels[i]);
  gen_free(t);
}

/* ---- skinny_mma: declaration, constraints, emit (CPU) ------------------------------------ */

static const char *const k_mma_dtypes[] = {"f16", "bf16"};
static const char *const k_mma_layouts[] = {"nt"};

static void test_mma_declaration(void **state) {
  (void)state;
  gen_template *t = load_skinny_mma();
  assert_string_equal(gen_name(t), "skinny_mma");
  assert_int_equal(gen_dtype_count(t), 4); /* f16, bf16, e4m3, e5m2 */
  assert_string_equal(gen_dtype(t, 2), "e4m3");
  assert_true(gen_supports_layout(t, "nt"));
  assert_false(gen_supports_layout(t, "nn"));
  assert_false(gen_supports_layout(t, "tt"));
  assert_int_equal(gen_space_size(t), 2 * 3 * 3 * 2 * 4 * 4 * 5);
  gen_config c;
  gen_config_default(t, &c);
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  gen_free(t);
}

static void test_mma_constraints(void **state) {
  (void)state;
  gen_template *t = load_skinny_mma();
  tc_rejects(t, "warps=4,kw=8", NULL, "kw > warps");
  /* 16-byte vectors in flight a lane: unroll x (2 rl of W + bs / 8 of X) <= 24 */
  tc_rejects(t, "bs=32,rl=2,unroll=4", NULL, "vectors in flight");
  gen_config c;
  tc_parse_ok(t, "bs=32,rl=2,unroll=2", &c);
  assert_true(tc_check(t, &c, NULL, NULL, 0)); /* 2 x (4 + 4) */
  tc_parse_ok(t, "warps=8,kw=4,split=4", &c); /* K split in the block and across blocks */
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  gen_problem wide = packed("f16", "nt", 65, 4096, 4096);
  tc_rejects(t, "side=0", &wide, "small side (M) is over 64");
  wide = packed("f16", "nt", 4096, 65, 4096);
  tc_rejects(t, "side=1", &wide, "small side (N) is over 64");
  gen_problem b4 = packed("bf16", "nt", 4, 4096, 4096);
  tc_parse_ok(t, "side=0,bs=8", &c);
  assert_true(tc_check(t, &c, &b4, NULL, 0)); /* one tile of 8 serves any batch */
  tc_rejects(t, "side=0,bs=16", &b4, "bs is over twice the small side");
  gen_problem k = packed("f16", "nt", 8, 4096, 512);
  tc_parse_ok(t, "side=0,split=16", &c);
  assert_true(tc_check(t, &c, &k, NULL, 0)); /* 16 slices of a chunk of 32 */
  k.k--;
  tc_rejects(t, "side=0,split=16", &k, "split-K slices of less than one step of 32");
  /* 16 rows of W a block at the least (one warp group of one tile): grid.y's limit */
  gen_problem tall = packed("f16", "nt", 1, 16 * 65535 + 1, 64);
  tc_rejects(t, "side=0,rl=1,warps=4,kw=4", &tall, "L needs more than 65535 blocks along grid y");
  tall.n--;
  tc_parse_ok(t, "side=0,rl=1,warps=4,kw=4", &c);
  assert_true(tc_check(t, &c, &tall, NULL, 0));
  gen_free(t);
}

static void test_mma_emit(void **state) {
  (void)state;
  gen_template *t = load_skinny_mma();
  gen_config c;
  gen_kernel k;
  /* a block: warps / kw groups of rl tiles of 16 rows of W; the small side fastest */
  tc_parse_ok(t, "side=0,bs=16,rl=2,warps=8,kw=2,unroll=2", &c);
  tc_emit_ok(t, &c, "f16", "nt", &k);
  tc_grid_is(&k, 'M', 16, 'N', 4 * 2 * 16, 0, 1);
  assert_int_equal(k.block[0], 256);
  assert_int_equal(k.requires.align_bytes, 16);
  /* the K parts' sums: (kw - 1) x 4 groups x rl x bs / 8 x 4 floats x 32 lanes */
  assert_int_equal(k.shared_bytes, 1 * 4 * 2 * 2 * 4 * 32 * 4);
  assert_true(k.dependent_launch);
  assert_false(k.exclusive);
  assert_int_equal(k.workspace_per_block, 0);
  const char *const f16_lines[] = {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 ",
                                   "ld.global.nc.L1::no_allocate.v4.u32"};
  tc_source_has(&k, f16_lines, COUNT(f16_lines));
  gen_kernel_clear(&k);
  tc_parse_ok(t, "side=1,bs=8,rl=1,warps=4,kw=1,split=8", &c);
  tc_emit_ok(t, &c, "bf16", "nt", &k);
  tc_grid_is(&k, 'N', 8, 'M', 4 * 16, 0, 8);
  assert_true(k.exclusive);
  assert_false(k.dependent_launch);
  assert_int_equal(k.workspace_per_block, 1 * 1 * 4 * 128 * 4); /* a lane's 4 sums */
  const char *const bf16_lines[] = {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 ",
                                    "splitk_reduce<sizeof acc / sizeof(float), SPLITK_THREADS>(",
                                    "#define SPLITK_THREADS (RG * 32)",
                                    "float* __restrict__ WS\n#endif"};
  tc_source_has(&k, bf16_lines, COUNT(bf16_lines));
  assert_non_null(strstr(k.kernel_name, "_z8"));
  gen_kernel_clear(&k);
  /* with kw > 1, part 0's warps (warps / kw of them) carry the sums into the workspace */
  tc_parse_ok(t, "side=0,bs=32,rl=4,warps=8,kw=4,unroll=2,split=2", &c);
  tc_emit_ok(t, &c, "f16", "nt", &k);
  assert_int_equal(k.workspace_per_block, 4 * 4 * 4 * 64 * 4);
  const char *const part0_lines[] = {
      "#define SPLITK_SYNC() asm volatile(\"bar.sync 1, %0;\\n\" ::\"n\"(RG * 32) : \"memory\")",
      "#define SPLITK_THREADS (RG * 32)", "#define SPLITK_TID (group * 32 + lane)"};
  tc_source_has(&k, part0_lines, COUNT(part0_lines));
  gen_kernel_clear(&k);
  gen_free(t);
}

/* A sample covering every parameter's values, both dtypes, for sm_80 and sm_90, no warning. */
static const char *const k_mma_sample[] = {
    "",
    "side=1,bs=32,rl=1,warps=8,kw=8,unroll=4",
    "side=0,bs=16,rl=4,warps=4,kw=2,unroll=2",
    "side=1,bs=8,rl=2,warps=8,kw=4,unroll=8",
    "side=0,bs=32,rl=2,warps=4,kw=1,unroll=1,split=2",
    "side=1,bs=16,rl=1,warps=8,kw=1,unroll=4,split=16",
    "side=0,bs=8,rl=4,warps=4,kw=1,unroll=2,split=4",
    "side=1,bs=32,rl=4,warps=8,kw=4,unroll=2,split=8",
};

static void test_mma_nvrtc(void **state) {
  (void)state;
  gen_template *t = load_skinny_mma();
  enum { MAX = COUNT(k_mma_sample) * COUNT(k_mma_dtypes) };
  gen_kernel kernels[MAX];
  const char *archs[MAX];
  int n = 0;
  for (int i = 0; i < COUNT(k_mma_sample); i++)
    for (int d = 0; d < COUNT(k_mma_dtypes); d++) {
      gen_config c;
      tc_parse_ok(t, k_mma_sample[i], &c);
      tc_emit_ok(t, &c, k_mma_dtypes[d], "nt", &kernels[n]);
      archs[n++] = (i + d) % 2 ? "sm_80" : "sm_90";
    }
  tc_compile_all(kernels, archs, n, NULL);
  for (int i = 0; i < n; i++) gen_kernel_clear(&kernels[i]);
  gen_free(t);
}

/* FP8: op kernels only, m16n8k32 with each MMA's products promoted, chunks of 64 elements of K
 * (split-K's step), the MMA's types W's then X's for a mixed op (W is B on side 0), an FP8 D's
 * amax; block scales are wgmma's.  Every form compiles for sm_90 without a warning. */
static void test_mma_fp8(void **state) {
  (void)state;
  gen_template *t = load_skinny_mma();
  ut_err e;
  gen_config c;
  tc_parse_ok(t, "side=0", &c);
  gen_problem plain = packed("e4m3", "nt", 4, 4096, 4096);
  char why[256];
  assert_false(tc_check(t, &c, &plain, why, sizeof why));
  assert_non_null(strstr(why, "an op kernel only"));
  static const struct {
    const char *dtype, *op, *config, *mma, *refusal;
  } cases[] = {
      {"e4m3", "out=bf16,scale=tensor", "side=0", "f32.e4m3.e4m3.f32", NULL},
      {"e5m2", "out=f16,scale=row+col,fast_accum", "side=1,bs=16,rl=2,warps=8,kw=4,split=4",
       "f32.e5m2.e5m2.f32", NULL},
      {"e4m3", "out=f32,bias=col,act=silu,gated,mixed", "side=0,bs=16,kw=2", "f32.e5m2.e4m3.f32",
       NULL},
      {"e4m3", "out=bf16,mixed", "side=1,warps=8,kw=8,unroll=8", "f32.e4m3.e5m2.f32", NULL},
      {"e5m2", "out=e4m3,scale=tensor", "side=0,rl=4,unroll=2,split=2", "f32.e5m2.e5m2.f32", NULL},
      {"e4m3", "out=bf16,scale=block", "side=0", NULL, "block scales"},
  };
  gen_kernel kernels[COUNT(cases)];
  int n = 0;
  for (int i = 0; i < COUNT(cases); i++) {
    gen_op op;
    assert_int_equal(gen_op_parse(cases[i].op, cases[i].dtype, &op, &e), MMT_OK);
    tc_parse_ok(t, cases[i].config, &c);
    gen_problem p = gen_packed_op_problem(cases[i].dtype, "nt", 12, 4096, 4096, &op, 1);
    if (c.v[0] == 1) p = gen_packed_op_problem(cases[i].dtype, "nt", 4096, 12, 4096, &op, 1);
    if (cases[i].refusal) {
      assert_false(tc_check(t, &c, &p, why, sizeof why));
      assert_non_null(strstr(why, cases[i].refusal));
      continue;
    }
    if (!tc_check(t, &c, &p, why, sizeof why))
      fail_msg("%s %s: %s", cases[i].op, cases[i].config, why);
    assert_int_equal(gen_emit_op(t, &c, cases[i].dtype, "nt", &op, &kernels[n], &e), MMT_OK);
    char mma[96];
    snprintf(mma, sizeof mma, "mma.sync.aligned.m16n8k32.row.col.%s ", cases[i].mma);
    const bool out8 = strstr(cases[i].op, "out=e4m3") != NULL;
    const char *const lines[] = {mma,
                                 "mma_16832(part, {a0, a1, a2, a3}, {b0, b1});",
                                 "for (int i = 0; i < 4; i++) d[i] += part[i];",
                                 "#define SLICE_STEP 64 /* split-K's slices: whole chunks of 64 "
                                 "elements of K */",
                                 "  const int chunks = K / 64;",
                                 out8 ? "  EPI_AMAX_FLUSH(E);" : "mma_16832"};
    tc_source_has(&kernels[n], lines, COUNT(lines));
    if (!out8) assert_null(strstr(kernels[n].source, "EPI_AMAX_FLUSH(E);"));
    n++;
  }
  /* split-K's slices are whole chunks of 64 */
  gen_op op;
  assert_int_equal(gen_op_parse("out=bf16", "e4m3", &op, &e), MMT_OK);
  gen_problem k = gen_packed_op_problem("e4m3", "nt", 8, 4096, 1024, &op, 1);
  tc_parse_ok(t, "side=0,split=16", &c);
  assert_true(tc_check(t, &c, &k, NULL, 0));
  k.k--;
  assert_false(tc_check(t, &c, &k, why, sizeof why));
  assert_non_null(strstr(why, "one step of 64"));
  tc_compile_all(kernels, NULL, n, NULL);
  for (int i = 0; i < n; i++) gen_kernel_clear(&kernels[i]);
  gen_free(t);
}

/* A grouped op (mixture-of-experts, contiguous or masked): both families serve it on side 0
 * (the experts' rows are M, each expert's tile rows its own: no limit on their sum) without
 * split-K (grid.z is the batch's), and their kernels find the block's expert and compile; a
 * masked kernel walks the experts (its entry point calls the expert's tile for each), so the
 * runtime may launch fewer slices than experts. */
static void test_grouped_ops(void **state) {
  (void)state;
  gen_template *ts[2] = {load_skinny(), load_skinny_mma()};
  const char *ops[2] = {"out=bf16,bias=col,act=silu,group=contiguous", "group=masked"};
  gen_kernel kernels[4];
  const char *archs[4] = {"sm_90", "sm_80", "sm_90", "sm_80"};
  int n = 0;
  for (int i = 0; i < 2; i++)
    for (int o = 0; o < 2; o++) {
      gen_op op;
      ut_err e;
      assert_int_equal(gen_op_parse(ops[o], "bf16", &op, &e), MMT_OK);
      /* 300 rows over 8 experts: past a plain call's limit of 64, not a grouped one's */
      gen_problem p = gen_packed_op_problem("bf16", "nt", o ? 40 : 300, 4096, 1024, &op, 8);
      gen_config c;
      tc_parse_ok(ts[i], "side=0,bs=8,split=1", &c);
      if (!tc_check(ts[i], &c, &p, NULL, 0)) fail_msg("%s: %s refused", gen_name(ts[i]), ops[o]);
      tc_rejects(ts[i], "side=1,bs=8,split=1", &p, "grouped: not by this config");
      tc_rejects(ts[i], "side=0,bs=8,split=4", &p, "grouped: not by this config");
      assert_int_equal(gen_emit_op(ts[i], &c, "bf16", "nt", &op, &kernels[n], &e), MMT_OK);
      assert_non_null(strstr(kernels[n].source, "EPI_GROUP(A, B, C, E, M, tile_row, BS);"));
      char expert[300], launch[512];
      snprintf(expert, sizeof expert, "__device__ __forceinline__ void\n%s_expert(",
               kernels[n].kernel_name);
      assert_int_equal(gen_kernel_launch_text(&kernels[n], launch, sizeof launch, &e), MMT_OK);
      if (o) { /* masked */
        assert_true(kernels[n].walks_experts);
        assert_non_null(strstr(kernels[n].source, "#define EPI_WALK 1"));
        assert_non_null(strstr(kernels[n].source, expert));
        assert_non_null(strstr(kernels[n].source, "epi_walk_experts(E, blockIdx.x, BS,"));
        assert_non_null(strstr(launch, " walk=1"));
      } else {
        assert_false(kernels[n].walks_experts);
        assert_null(strstr(kernels[n].source, "_expert("));
        assert_null(strstr(launch, "walk="));
      }
      n++;
    }
  tc_compile_all(kernels, archs, n, NULL);
  for (int i = 0; i < n; i++) gen_kernel_clear(&kernels[i]);
  gen_free(ts[0]);
  gen_free(ts[1]);
}

/* ---- GPU: results against a float64 reference ----------------------------------------- */

/* Shapes by side: S the small side, L the large one, K; pad: elements past each row. */
typedef struct {
  int64_t s, l, k;
  float alpha, beta;
} skinny_shape;

static const skinny_shape k_shapes[] = {
    {1, 1000, 1027, 1.0f, 0.0f}, {2, 257, 4097, -1.5f, 0.5f}, {3, 1500, 255, 1.0f, 0.0f},
    {7, 600, 1001, 0.5f, 1.0f},  {16, 333, 2049, 1.0f, 0.0f}, {33, 129, 777, 1.0f, -1.0f},
    {64, 200, 513, 2.0f, 0.0f},  {5, 3, 64, 1.0f, 0.5f},      {1, 1, 1, 1.0f, 0.0f},
    {4, 100, 0, 1.0f, 0.5f},     {1, 4099, 300, 1.0f, 0.0f},  {2, 70, 33, -1.0f, 0.0f},
    {1, 2000, 8200, 1.0f, 0.0f}, {9, 513, 4500, 1.0f, 0.5f},  {20, 300, 96, 1.0f, 0.5f},
    {48, 77, 1000, -1.0f, 0.0f},
};

/* One GPU run: a config in a dtype and layout, on shapes of its side. */
typedef struct {
  const char *text, *dtype, *layout;
  gen_config c;
  int side, vec;
} gpu_run;

/* Runs kernel k of run r on shape sh (in r's side) with padded pitches and, for vec=0,
 * misaligned bases (gemm_check.h); returns false when the config does not take the problem.
 * Split-K runs twice from the same C: the second launch finds the arrival counters as the
 * first left them and must give the same bits (slices added in slice order).  Element bound:
 * one rounding of the output, and fp32 sums (2^-22 of the terms' magnitude). */
static bool check_shape(const rt_cu *cu, gen_template *t, const rt_kernel *k,
                        const gen_kernel *spec, const gpu_run *r, const skinny_shape *sh,
                        int turn) {
  const int bytes = gen_dtype_size(r->dtype);
  const int64_t m = r->side == 0 ? sh->s : sh->l, n = r->side == 0 ? sh->l : sh->s, kk = sh->k;
  /* pitches: aligned rows plus 16 bytes for vec=1; 1 to 3 elements more for vec=0 */
  const int64_t per16 = 16 / bytes, extra = r->vec ? per16 : 1 + turn % 3;
  int64_t min_ld[3];
  gen_min_ld(r->layout, m, n, kk, min_ld);
  int64_t ld[3];
  for (int i = 0; i < 3; i++)
    ld[i] = (r->vec ? (min_ld[i] + per16 - 1) / per16 * per16 : min_ld[i]) + extra;
  const int64_t offset = r->vec ? 0 : 1 + turn % 7;
  const int align = r->vec ? 16 : offset % 2 ? bytes : 2 * bytes;
  const gen_problem p = {r->dtype, r->layout, m, n, kk, ld[0], ld[1], ld[2], align, NULL, 1};
  if (!gen_requires_met(&spec->requires, &p) || !tc_check(t, &r->c, &p, NULL, 0)) return false;
  char label[256];
  snprintf(label, sizeof label, "%s (%s)", spec->kernel_name, r->text);
  const gc_case gc = {.label = label,
                      .dtype = r->dtype,
                      .layout = r->layout,
                      .m = m,
                      .n = n,
                      .k = kk,
                      .lda = ld[0],
                      .ldb = ld[1],
                      .ldc = ld[2],
                      .alpha = sh->alpha,
                      .beta = sh->beta,
                      .offset = {offset, offset, offset},
                      .runs = spec->workspace_per_block ? 2 : 1,
                      .rtol = gc_roundoff(r->dtype),
                      .atol = 1e-30,
                      .unit = 0x1p-22,
                      .seed = (uint64_t)turn};
  gc_run(cu, k, &gc);
  return true;
}

/* Configs for the GPU: both sides, each with a K split, bs from 1 to 16, every rl, lanes,
 * unroll and access width. */
static const char *const k_gpu_configs[] = {
    "side=0",
    "side=1",
    "side=0,bs=4,rl=1,warps=8,kw=4,unroll=4,vec=1",
    "side=1,bs=4,rl=1,warps=8,kw=4,unroll=4,vec=0",
    "side=0,bs=16,rl=1,warps=4,kw=2,unroll=1,vec=0",
    "side=1,bs=16,rl=2,warps=4,kw=1,unroll=1,vec=1",
    "side=0,bs=2,rl=4,warps=8,kw=8,unroll=2,vec=0",
    "side=1,bs=1,rl=4,warps=8,kw=2,unroll=2,vec=1",
    "side=0,bs=8,rl=1,warps=4,kw=1,unroll=1,vec=1",
    "side=1,bs=2,rl=2,warps=4,kw=2,unroll=4,vec=0",
    "side=0,bs=2,rl=2,warps=4,kw=1,unroll=2,vec=1,split=64",
    "side=1,bs=1,rl=1,warps=8,kw=1,unroll=1,vec=0,split=4",
    "side=0,bs=1,rl=1,warps=4,kw=1,unroll=8,vec=1,split=32",
    "side=1,bs=4,rl=1,warps=4,kw=2,unroll=8,vec=1",
    /* axpy warps over several rows of W (lanes < 32): the layouts with W L-contiguous */
    "side=0,bs=1,rl=1,lanes=8,warps=8,kw=8,unroll=8,vec=1",
    "side=1,bs=2,rl=2,lanes=8,warps=8,kw=4,unroll=2,vec=0",
    "side=0,bs=2,rl=1,lanes=16,warps=4,kw=1,unroll=4,vec=1,split=16",
    "side=1,bs=1,rl=2,lanes=16,warps=8,kw=2,unroll=4,vec=1",
    "side=0,bs=8,rl=1,lanes=8,warps=8,kw=1,unroll=2,vec=0,split=4",
    /* 16 warps (the axpy body alone): K split over all of them, or over half */
    "side=0,bs=1,rl=1,lanes=8,warps=16,kw=16,unroll=4,vec=1",
    "side=1,bs=2,rl=1,lanes=8,warps=16,kw=8,unroll=2,vec=0",
};

/* A family's GPU sweep: its configs, dtypes and layouts. */
typedef struct {
  gen_template *(*load)(void);
  const char *const *configs, *const *dtypes, *const *layouts;
  int n_configs, n_dtypes, n_layouts;
} family;

static void gpu_results(const family *f) {
  rt_device d;
  ut_err e;
  const rt_cu *cu = tc_open_gpu_or_skip(&d);
  gen_template *t = f->load();
  /* every config in every dtype, each in one layout, rotating (every layout per side and
   * dtype); two layouts each with MMTUNE_LONG_TESTS=1 */
  const int per_dtype = tc_long_tests() ? 2 : 1;
  const int max = f->n_configs * f->n_dtypes * 2;
  gpu_run *runs = calloc((size_t)max, sizeof *runs);
  gen_kernel *specs = calloc((size_t)max, sizeof *specs);
  rt_cubin *cubins = calloc((size_t)max, sizeof *cubins);
  const char **archs = calloc((size_t)max, sizeof *archs);
  assert_true(runs && specs && cubins && archs);
  int n = 0;
  for (int i = 0; i < f->n_configs; i++)
    for (int dt = 0; dt < f->n_dtypes; dt++) {
      /* two layouts where the config is valid (axpy keeps bs * rl * V sums), rotating */
      int chosen = 0;
      for (int h = 0; h < f->n_layouts && chosen < per_dtype; h++) {
        gpu_run *r = &runs[n];
        r->text = f->configs[i];
        r->dtype = f->dtypes[dt];
        r->layout = f->layouts[(i / 2 + dt + h) % f->n_layouts];
        tc_parse_ok(t, r->text, &r->c);
        assert_true(tc_check(t, &r->c, NULL, NULL, 0));
        r->side = param_of(t, &r->c, "side", 0);
        r->vec = param_of(t, &r->c, "vec", 1);
        const gen_problem typical =
            packed(r->dtype, r->layout, r->side ? 1000 : 20, r->side ? 20 : 1000, 1100);
        if (!tc_check(t, &r->c, &typical, NULL, 0)) continue;
        tc_emit_ok(t, &r->c, r->dtype, r->layout, &specs[n]);
        archs[n++] = d.arch;
        chosen++;
      }
      assert_true(chosen >= 1);
    }
  tc_compile_all(specs, archs, n, cubins);
  int ran = 0;
  for (int i = 0; i < n; i++) {
    rt_kernel k;
    mmt_status rc = rt_kernel_load(&d, &cubins[i], &specs[i], &k, &e);
    if (rc) fprintf(stderr, "%s: %s\n", specs[i].kernel_name, e.msg);
    assert_int_equal(rc, MMT_OK);
    /* no spills beyond a word or two: ptxas at times spills one to stay under a register
     * count of its choosing (72 for one 128-thread config); more would mean a config that
     * keeps too much in registers */
    if (k.local_bytes > 16)
      fprintf(stderr, "%s: %d bytes of local memory\n", specs[i].kernel_name, k.local_bytes);
    assert_true(k.local_bytes <= 16);
    int shapes = 0;
    for (int j = 0; j < COUNT(k_shapes); j++)
      shapes += check_shape(cu, t, &k, &specs[i], &runs[i], &k_shapes[j], i + j);
    assert_true(shapes >= 3);
    ran += shapes;
    rt_kernel_unload(&k);
    rt_cubin_free(&cubins[i]);
    gen_kernel_clear(&specs[i]);
  }
  print_message("%d kernels, %d problems\n", n, ran);
  free(runs);
  free(specs);
  free(cubins);
  free(archs);
  gen_free(t);
  rt_device_close(&d);
}

static void test_gpu_results(void **state) {
  (void)state;
  const family f = {load_skinny,          k_gpu_configs,       k_dtypes, k_layouts,
                    COUNT(k_gpu_configs), COUNT(k_dtypes), COUNT(k_layouts)};
  gpu_results(&f);
}

/* skinny_mma: both sides, every bs, rl, warps, K split (in the block and across blocks) and
 * unroll. */
static const char *const k_mma_gpu_configs[] = {
    "side=0",
    "side=1",
    "side=0,bs=16,rl=1,warps=8,kw=8,unroll=4",
    "side=1,bs=16,rl=2,warps=4,kw=4,unroll=2",
    "side=0,bs=32,rl=1,warps=8,kw=2,unroll=2",
    "side=1,bs=32,rl=2,warps=4,kw=1,unroll=2,split=4",
    "side=0,bs=8,rl=4,warps=8,kw=1,unroll=1,split=16",
    "side=1,bs=8,rl=1,warps=8,kw=8,unroll=8",
    "side=0,bs=8,rl=2,warps=4,kw=1,unroll=4,split=2",
    "side=1,bs=16,rl=1,warps=8,kw=1,unroll=4,split=8",
    "side=0,bs=32,rl=4,warps=8,kw=8,unroll=2,split=2",
    "side=1,bs=16,rl=2,warps=8,kw=4,unroll=2,split=4",
};

static void test_mma_gpu_results(void **state) {
  (void)state;
  const family f = {load_skinny_mma,          k_mma_gpu_configs,   k_mma_dtypes, k_mma_layouts,
                    COUNT(k_mma_gpu_configs), COUNT(k_mma_dtypes), COUNT(k_mma_layouts)};
  gpu_results(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_declaration),
      cmocka_unit_test(test_constraints),
      cmocka_unit_test(test_emit),
      cmocka_unit_test(test_nvrtc),
      cmocka_unit_test(test_gpu_results),
      cmocka_unit_test(test_mma_declaration),
      cmocka_unit_test(test_mma_constraints),
      cmocka_unit_test(test_mma_emit),
      cmocka_unit_test(test_mma_nvrtc),
      cmocka_unit_test(test_mma_fp8),
      cmocka_unit_test(test_grouped_ops),
      cmocka_unit_test(test_mma_gpu_results),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
