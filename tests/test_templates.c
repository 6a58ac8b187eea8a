/* test_templates.c -- templates/reg_tiled.lua: its space (counted again here from the rules),
 * default, launch description of every config, block-order swizzle, split-K slicing and
 * constraints, NVRTC compiles of a spread sample (CPU), and results on ragged shapes against
 * a CPU reference (GPU; skipped without). */
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

/* ---- the space, written out again ---------------------------------------------------------- */

/* The parameter lists in declaration order, so the rules below count the space independently
 * of the template code. */
enum { P_BM, P_BN, P_BK, P_TM, P_TN, P_VEC, P_STAGES, P_PAD, P_GROUP, P_SPLIT, P_COUNT };
static const char *const k_names[P_COUNT] = {"bm",  "bn",     "bk",  "tm",    "tn",
                                             "vec", "stages", "pad", "group", "split"};
static const int64_t v_bm[] = {32, 64, 128, 256};
static const int64_t v_bn[] = {32, 64, 128, 256};
static const int64_t v_bk[] = {8, 16, 32};
static const int64_t v_tm[] = {4, 8, 16};
static const int64_t v_tn[] = {4, 8};
static const int64_t v_vec[] = {1, 4};
static const int64_t v_stages[] = {1, 2, 3};
static const int64_t v_pad[] = {0, 4};
static const int64_t v_group[] = {1, 8};
static const int64_t v_split[] = {1, 2, 4, 8, 16};
static const int64_t *const k_lists[P_COUNT] = {v_bm,  v_bn,     v_bk,  v_tm,    v_tn,
                                                v_vec, v_stages, v_pad, v_group, v_split};
static const int k_counts[P_COUNT] = {
    COUNT(v_bm),  COUNT(v_bn),     COUNT(v_bk),  COUNT(v_tm),    COUNT(v_tn),
    COUNT(v_vec), COUNT(v_stages), COUNT(v_pad), COUNT(v_group), COUNT(v_split)};
/* Valid configs; pinned so that a change of the rules is a visible change of this number.
 * split = 1: 2616 (the space before split-K); each of split = 2, 4, 8, 16: 449. */
#define VALID_COUNT 4412
#define VALID_SPLIT1 2616

typedef struct {
  int64_t bm, bn, bk, tm, tn, vec, stages, pad, group, split;
} cfg;

static cfg cfg_of(const gen_config *c) {
  return (cfg){c->v[P_BM],  c->v[P_BN],     c->v[P_BK],  c->v[P_TM],    c->v[P_TN],
               c->v[P_VEC], c->v[P_STAGES], c->v[P_PAD], c->v[P_GROUP], c->v[P_SPLIT]};
}

static int64_t threads_of(const cfg *p) { return (p->bm / p->tm) * (p->bn / p->tn); }

static int64_t shared_bytes_of(const cfg *p) {
  return p->stages * p->bk * ((p->bm + p->pad) + (p->bn + p->pad)) * 4;
}

/* The template's constraints (problem-free part), restated. */
static bool rules_valid(const cfg *p) {
  if (p->tm > p->bm || p->tn > p->bn) return false;
  if (p->tm > 2 * p->tn || p->tn > 2 * p->tm) return false;
  if (p->bm > 4 * p->bn || p->bn > 4 * p->bm) return false;
  const int64_t t = threads_of(p);
  if (t < 64 || t > 512) return false;
  const int64_t alv = p->stages == 3 ? 1 : p->vec; /* cp.async copies A 4 bytes at a time */
  const int64_t a = p->bm * (p->bk / alv), b = p->bk * (p->bn / p->vec);
  if (a % t || a < t || b % t || b < t) return false; /* whole loads per thread */
  if (shared_bytes_of(p) > 227 * 1024) return false;
  /* registers: the tile in flight is the staged floats, or one per cp.async copy (<= 16) */
  const int64_t copies = a / t + b / t < 16 ? a / t + b / t : 16;
  const int64_t in_flight = p->stages <= 2 ? (p->bm * p->bk + p->bk * p->bn) / t : copies;
  const int64_t regs = p->tm * p->tn + p->tm + p->tn + 24 + in_flight;
  const int64_t limit = 65536 / t - 16 < 200 ? 65536 / t - 16 : 200;
  if (regs > limit) return false;
  /* split-K: one pipelined variant per block shape */
  return p->split == 1 || (p->stages >= 2 && p->pad == 4 && p->group == 1);
}

/* The K range [k0, k0 + depth) of slice z, as the kernel computes it. */
static void slice_range(int64_t k, int64_t split, int64_t bk, int64_t z, int64_t *k0,
                        int64_t *depth) {
  const int64_t per = k / split + (k % split != 0);
  const int64_t kc = (per + bk - 1) / bk * bk;
  *k0 = z * kc < k ? z * kc : k;
  *depth = kc < k - *k0 ? kc : k - *k0;
}

static gen_template *load_reg_tiled(void) { return tc_load(TEMPLATES "/reg_tiled.lua"); }

static void emit_layout_ok(gen_template *t, const gen_config *c, const char *layout,
                           gen_kernel *k) {
  tc_emit_ok(t, c, "f32", layout, k);
}

static void emit_ok(gen_template *t, const gen_config *c, gen_kernel *k) {
  emit_layout_ok(t, c, "nn", k);
}

/* ---- declaration, space, default ----------------------------------------------------------- */

static void test_declaration(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  assert_string_equal(gen_name(t), "reg_tiled");
  assert_true(strlen(gen_description(t)) > 0);
  assert_int_equal(gen_dtype_count(t), 1);
  assert_true(gen_supports_dtype(t, "f32"));
  tc_params_are(t, k_names, k_lists, k_counts, P_COUNT);
  gen_free(t);
}

static void test_space_count(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  int valid_count = 0, expect = 0, split1 = 0;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config c;
    char why[160];
    gen_config_at(t, idx, &c);
    const cfg p = cfg_of(&c);
    /* the rules are layout nn's (the layout decides what cp.async copies 4 bytes at a time) */
    const bool valid = tc_check_for(t, &c, "f32", "nn", why, sizeof why), want = rules_valid(&p);
    if (valid != want) {
      char text[256];
      gen_config_format(t, &c, text, sizeof text, NULL);
      fprintf(stderr, "%s: template says %d (%s), rules say %d\n", text, valid, why, want);
    }
    assert_int_equal(valid, want);
    if (!valid) assert_true(strlen(why) > 0); /* always says why */
    valid_count += valid;
    expect += want;
    split1 += valid && p.split == 1;
  }
  assert_int_equal(valid_count, expect);
  assert_int_equal(valid_count, VALID_COUNT);
  assert_int_equal(split1, VALID_SPLIT1);
  gen_free(t);
}

static void test_default(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  gen_config c;
  char text[256];
  gen_config_default(t, &c);
  assert_int_equal(gen_config_format(t, &c, text, sizeof text, NULL), MMT_OK);
  assert_string_equal(text, "bm=128,bn=128,bk=8,tm=8,tn=8,vec=4,stages=2,pad=4,group=8,split=1");
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  gen_kernel k, k2;
  emit_ok(t, &c, &k);
  assert_string_equal(k.kernel_name, "mmt_reg_tiled_nn_m128_n128_k8_tm8_tn8_v4_s2_p4_g8");
  assert_int_equal(k.block[0], 256);
  assert_int_equal(k.shared_bytes, 2 * 8 * (132 + 132) * 4);
  assert_int_equal(k.requires.k_multiple, 4);
  assert_int_equal(k.requires.n_multiple, 4);
  assert_int_equal(k.requires.align_bytes, 16);
  assert_non_null(strstr(k.source, "#define MIN_BLOCKS 2")); /* 2 x 256 threads, <= 128 regs */
  assert_non_null(strstr(k.source, "#define WX 8"));         /* 4 x 8 warps */
  assert_non_null(strstr(k.source, "#define SPLIT 1\n"));    /* no split-K */
  emit_ok(t, &c, &k2);
  assert_string_equal(k.source, k2.source); /* deterministic: the cubin cache is keyed by it */
  gen_kernel_clear(&k);
  gen_kernel_clear(&k2);
  gen_free(t);
}

/* Every valid config: the name encodes it, the launch description follows the formulas. */
static void test_emit_all(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  int emitted = 0;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config c;
    gen_config_at(t, idx, &c);
    if (!tc_check_for(t, &c, "f32", "nn", NULL, 0)) continue;
    const cfg p = cfg_of(&c);
    gen_kernel k;
    emit_ok(t, &c, &k);
    char name[128], line[192];
    int len = snprintf(name, sizeof name,
                       "mmt_reg_tiled_nn_m%lld_n%lld_k%lld_tm%lld_tn%lld_v%lld_s%lld_p%lld_g%lld",
                       (long long)p.bm, (long long)p.bn, (long long)p.bk, (long long)p.tm,
                       (long long)p.tn, (long long)p.vec, (long long)p.stages, (long long)p.pad,
                       (long long)p.group);
    if (p.split > 1) /* split = 1 keeps the name of the kernel without split-K */
      snprintf(name + len, sizeof name - (size_t)len, "_split%lld", (long long)p.split);
    assert_string_equal(k.kernel_name, name); /* every parameter, separated: names are unique */
    assert_non_null(strstr(k.source, name));
    assert_non_null(strstr(k.source, "extern \"C\" __global__"));
    assert_non_null(strstr(k.source, "Parameters:"));
    assert_null(strstr(k.source, "#include"));
    assert_null(strstr(k.source, "${"));
    for (int i = 0; i < P_COUNT; i++) { /* each parameter is defined (and documented) */
      static const char *const macro[P_COUNT] = {"BM",  "BN",     "BK",  "TM",    "TN",
                                                 "VEC", "STAGES", "PAD", "GROUP", "SPLIT"};
      snprintf(line, sizeof line, "#define %s %lld\n", macro[i], (long long)c.v[i]);
      assert_non_null(strstr(k.source, line));
      snprintf(line, sizeof line, " *   %-6s = %lld", macro[i], (long long)c.v[i]);
      assert_non_null(strstr(k.source, line));
    }
    assert_int_equal(k.block[0], threads_of(&p));
    assert_int_equal(k.block[1], 1);
    assert_int_equal(k.block[2], 1);
    assert_int_equal(k.grid[0].dim, 'N');
    assert_int_equal(k.grid[0].tile, p.bn);
    assert_int_equal(k.grid[1].dim, 'M');
    assert_int_equal(k.grid[1].tile, p.bm);
    assert_int_equal(k.grid[2].dim, 0); /* grid.z: SPLIT slices of K */
    assert_int_equal(k.grid[2].tile, p.split);
    assert_int_equal(k.exclusive, p.split > 1); /* counters, workspace: no overlap */
    assert_int_equal(k.shared_bytes, shared_bytes_of(&p));
    assert_int_equal(k.requires.m_multiple, 1);
    assert_int_equal(k.requires.n_multiple, p.vec == 4 ? 4 : 1);
    assert_int_equal(k.requires.k_multiple, p.vec == 4 ? 4 : 1);
    assert_int_equal(k.requires.align_bytes, p.vec == 4 ? 16 : 4);
    /* cp.async only in the ring pipeline (#if STAGES == 3); it copies A (nn: stored with K
     * contiguous) 4 bytes at a time, because the copy transposes it, and B 4 * VEC bytes at a
     * time */
    assert_non_null(strstr(k.source, "#if STAGES == 3\n/* cp.async (sm_80+)"));
    snprintf(line, sizeof line, "#define ALV %lld\n", (long long)(p.stages == 3 ? 1 : p.vec));
    assert_non_null(strstr(k.source, line));
    snprintf(line, sizeof line, "#define BLV %lld\n", (long long)p.vec);
    assert_non_null(strstr(k.source, line));
    /* split-K: the split_k snippet's arrival counters and the workspace argument, a block
     * tile of fp32 per block, all under #if SPLIT > 1: with split = 1 the preprocessor leaves
     * the kernel without split-K */
    const bool split = p.split > 1;
    assert_non_null(strstr(k.source, "\n#if SPLIT > 1\n/* snippet split_k"));
    assert_non_null(strstr(k.source, "int ldc\n#if SPLIT > 1\n        , float* __restrict__ WS\n"
                                     "#endif\n        )"));
    assert_int_equal(k.workspace_per_block, split ? (unsigned)(p.bm * p.bn * 4) : 0u);
    snprintf(line, sizeof line, "#define SPLITK_TILES %d\n", GEN_SPLITK_TILES); /* the limit's */
    assert_non_null(strstr(k.source, line));
    /* epilogue (the same with split-K: the last slice runs it once): float4 stores with
     * VEC = 4, scalar ones otherwise */
    assert_non_null(strstr(k.source, "#if VEC == 4\n      if (c < n_left) {"));
    assert_non_null(strstr(k.source, "*p = beta == 0.0f ? v[j] : v[j] + beta * *p;"));
    gen_kernel_clear(&k);
    emitted++;
  }
  assert_int_equal(emitted, VALID_COUNT);
  gen_free(t);
}

/* ---- problems: grid limit, layout, requires ------------------------------------------------ */

static void test_problem_checks(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  gen_config c;
  char why[160];
  gen_kernel k;
  tc_parse_ok(t, "", &c); /* the default: bm=128, vec=4 */
  gen_problem p = {"f32", "nn", 65535LL * 128, 64, 64, 64, 64, 64, 16, NULL, 1};
  assert_true(tc_check(t, &c, &p, why, sizeof why));
  p.m++; /* one block row too many for grid.y */
  assert_false(tc_check(t, &c, &p, why, sizeof why));
  assert_non_null(strstr(why, "65535"));
  p.m = 100;

  /* vec=4 requires K % 4, N % 4 and 16-byte alignment; vec=1 requires nothing */
  emit_ok(t, &c, &k);
  gen_problem ok4 = {"f32", "nn", 37, 52, 28, 32, 56, 60, 16, NULL, 1};
  assert_true(gen_requires_met(&k.requires, &ok4));
  gen_problem bad = ok4;
  bad.k = 27;
  assert_false(gen_requires_met(&k.requires, &bad));
  bad = ok4;
  bad.n = 51;
  assert_false(gen_requires_met(&k.requires, &bad));
  bad = ok4;
  bad.align_bytes = 8;
  assert_false(gen_requires_met(&k.requires, &bad));
  gen_kernel_clear(&k);
  tc_parse_ok(t, "vec=1", &c);
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  emit_ok(t, &c, &k);
  gen_problem odd = {"f32", "nn", 37, 51, 27, 29, 53, 51, 4, NULL, 1};
  assert_true(gen_requires_met(&k.requires, &odd));
  gen_kernel_clear(&k);

  /* vec=4 in each layout: float4 along each operand's contiguous dimension -- A's is K (n) or
   * M (t), B's is N (n) or K (t) -- and C's, N.  One ragged dimension at a time. */
  tc_parse_ok(t, "", &c);
  static const struct {
    const char *layout;
    bool m4, k4; /* M % 4, K % 4 required */
  } v4[] = {{"nn", false, true}, {"nt", false, true}, {"tn", true, false}, {"tt", true, true}};
  for (int i = 0; i < COUNT(v4); i++) {
    ut_err e;
    assert_int_equal(gen_emit(t, &c, "f32", v4[i].layout, &k, &e), MMT_OK);
    assert_int_equal(k.requires.m_multiple, v4[i].m4 ? 4 : 1);
    assert_int_equal(k.requires.n_multiple, 4);
    assert_int_equal(k.requires.k_multiple, v4[i].k4 ? 4 : 1);
    assert_int_equal(k.requires.align_bytes, 16);
    snprintf(why, sizeof why, "mmt_reg_tiled_%s_", v4[i].layout);
    assert_non_null(strstr(k.kernel_name, why));
    gen_kernel_clear(&k);
  }

  /* split-K: only the pipelined, padded, unswizzled variants */
  tc_parse_ok(t, "split=4", &c); /* group=8 */
  assert_false(tc_check(t, &c, NULL, why, sizeof why));
  assert_non_null(strstr(why, "split"));
  tc_parse_ok(t, "group=1,split=4,stages=1", &c);
  assert_false(tc_check(t, &c, NULL, why, sizeof why));
  tc_parse_ok(t, "group=1,split=4,pad=0", &c);
  assert_false(tc_check(t, &c, NULL, why, sizeof why));
  /* problem: at least two K steps per slice, K >= 2 * split * bk (here 2 * 4 * 8) */
  tc_parse_ok(t, "group=1,split=4", &c);
  gen_problem sp = {"f32", "nn", 16, 4096, 64, 64, 4096, 4096, 16, NULL, 1};
  assert_true(tc_check(t, &c, &sp, why, sizeof why));
  sp.k = 63;
  sp.lda = 63;
  assert_false(tc_check(t, &c, &sp, why, sizeof why));
  assert_non_null(strstr(why, "split-K slices of less than 2 steps of 8 (K < 64)"));
  sp.k = 0; /* K == 0: nothing to split */
  assert_false(tc_check(t, &c, &sp, why, sizeof why));
  tc_parse_ok(t, "group=1", &c); /* split = 1 takes any K */
  assert_true(tc_check(t, &c, &sp, why, sizeof why));
  /* problem: a workspace of at most 64 MiB, tiles * split * bm * bn * 4 bytes: 512 tiles of
   * 128 x 128 with split 2 */
  tc_parse_ok(t, "group=1,split=2", &c);
  gen_problem big = {"f32",      "nn",       16LL * 128, 32LL * 128, 64, 64,
                     32LL * 128, 32LL * 128, 16,         NULL,       1};
  assert_true(tc_check(t, &c, &big, why, sizeof why)); /* exactly 64 MiB */
  big.n++;
  big.ldb++;
  big.ldc++;
  assert_false(tc_check(t, &c, &big, why, sizeof why));
  assert_non_null(strstr(why, "workspace over 64 MiB"));
  tc_parse_ok(t, "group=1", &c);
  assert_true(tc_check(t, &c, &big, why, sizeof why));
  gen_free(t);
}

static void test_grid_rule(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  gen_config c;
  gen_kernel k;
  unsigned g[3];
  ut_err e;
  tc_parse_ok(t, "bm=64,bn=256,bk=32,tm=4,tn=8", &c);
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  emit_ok(t, &c, &k);
  assert_int_equal(gen_grid_eval(k.grid, 1000, 77, 5, 132, g, &e), MMT_OK);
  assert_int_equal(g[0], 1);  /* ceil(77 / 256) */
  assert_int_equal(g[1], 16); /* ceil(1000 / 64) */
  assert_int_equal(g[2], 1);
  assert_int_equal(gen_grid_eval(k.grid, 1, 1, 1, 132, g, &e), MMT_OK);
  assert_true(g[0] == 1 && g[1] == 1 && g[2] == 1);
  assert_int_equal(gen_grid_eval(k.grid, 65535LL * 64, 257, 0, 132, g, &e), MMT_OK);
  assert_int_equal(g[0], 2);
  assert_int_equal(g[1], 65535);
  assert_int_equal(gen_grid_eval(k.grid, 65535LL * 64 + 1, 1, 1, 132, g, &e),
                   MMT_ERR_INVALID_ARG);
  gen_kernel_clear(&k);
  /* split-K: grid.z is the number of slices, whatever the problem (K == 0 included) */
  for (int i = 1; i < COUNT(v_split); i++) {
    char text[96];
    snprintf(text, sizeof text, "bm=64,bn=256,bk=32,tm=4,tn=8,group=1,split=%lld",
             (long long)v_split[i]);
    tc_parse_ok(t, text, &c);
    assert_true(tc_check(t, &c, NULL, NULL, 0));
    emit_ok(t, &c, &k);
    assert_int_equal(gen_grid_eval(k.grid, 1000, 77, 5, 132, g, &e), MMT_OK);
    assert_true(g[0] == 1 && g[1] == 16 && g[2] == v_split[i]);
    assert_int_equal(gen_grid_eval(k.grid, 16, 4096, 0, 132, g, &e), MMT_OK);
    assert_true(g[0] == 16 && g[1] == 1 && g[2] == v_split[i]);
    gen_kernel_clear(&k);
  }
  gen_free(t);
}

/* ---- block-order swizzle ------------------------------------------------------------------- */

/* The kernel's mapping from launch order to block tile: the tile_order snippet itself, compiled
 * here as C (its text is plain C but for the two CUDA qualifiers). */
#define __device__
#define __forceinline__ inline
#include "../templates/snippets/tile_order.cu"
#undef __device__
#undef __forceinline__

static void block_tile(int64_t pid, int64_t grid_m, int64_t grid_n, int64_t group, int64_t *bm_i,
                       int64_t *bn_i) {
  long long row, col;
  mmt_tile_of(pid, grid_m, grid_n, group, &row, &col);
  *bm_i = row;
  *bn_i = col;
}

/* reg_tiled pastes the snippet and calls it on its launch index */
static const char *const k_swizzle_lines[] = {
    "static __device__ __forceinline__ void mmt_tile_of(long long pid, long long grid_m,",
    "const long long pid = (long long)blockIdx.y * grid_n + blockIdx.x;",
    "mmt_tile_of(pid, grid_m, grid_n, GROUP, &tile_row, &tile_col);",
    "const long long row0 = tile_row * BM, col0 = tile_col * BN;",
};

static void test_group_swizzle(void **state) {
  (void)state;
  /* tile rows, tile columns, and the order whatever the group: 'r' row by row (a grid at
   * most 8 columns wide, fewer columns than rows), 'c' column by column (at most 8 rows, no
   * more than columns), 'g' the group's (row by row for group 1) */
  static const struct {
    int64_t gm, gn;
    char order;
  } shapes[] = {{1, 1, 'c'},  {1, 7, 'c'},   {7, 1, 'r'},   {8, 8, 'c'},  {10, 3, 'r'},
                {17, 5, 'r'}, {9, 16, 'g'},  {64, 2, 'r'},  {3, 40, 'c'}, {2, 64, 'c'},
                {8, 9, 'c'},  {9, 8, 'r'},   {20, 9, 'g'},  {12, 30, 'g'}};
  static const int64_t groups[] = {1, 8, 16};
  for (int s = 0; s < COUNT(shapes); s++)
    for (int gi = 0; gi < COUNT(groups); gi++) {
      const int64_t gm = shapes[s].gm, gn = shapes[s].gn, group = groups[gi];
      const char order = shapes[s].order == 'g' && group == 1 ? 'r' : shapes[s].order;
      int *hits = calloc((size_t)(gm * gn), sizeof *hits);
      assert_non_null(hits);
      for (int64_t pid = 0; pid < gm * gn; pid++) {
        int64_t bm_i, bn_i;
        block_tile(pid, gm, gn, group, &bm_i, &bn_i);
        assert_true(bm_i >= 0 && bm_i < gm && bn_i >= 0 && bn_i < gn);
        hits[bm_i * gn + bn_i]++;
        if (order == 'r') { /* plain row-major launch order */
          assert_int_equal(bm_i, pid / gn);
          assert_int_equal(bn_i, pid % gn);
        } else if (order == 'c') { /* a column's tiles one after another */
          assert_int_equal(bm_i, pid % gm);
          assert_int_equal(bn_i, pid / gm);
        }
      }
      for (int64_t i = 0; i < gm * gn; i++) assert_int_equal(hits[i], 1); /* exactly once */
      free(hits);
    }
  /* group 8 walks 8 block rows down a column before moving right (a grid more than 8 tall and
   * wide); the last group, of 4 rows, the same way */
  for (int64_t pid = 0; pid < 16; pid++) {
    int64_t bm_i, bn_i;
    block_tile(pid, 20, 9, 8, &bm_i, &bn_i);
    assert_int_equal(bm_i, pid % 8);
    assert_int_equal(bn_i, pid / 8);
    block_tile(16 * 9 + pid, 20, 9, 8, &bm_i, &bn_i);
    assert_int_equal(bm_i, 16 + pid % 4);
    assert_int_equal(bn_i, pid / 4);
  }
  /* ... a grid 2 columns wide row by row (a row's two tiles, which read the same rows of A,
   * side by side), and one 2 rows tall column by column, group 8 or not */
  for (int64_t pid = 0; pid < 14; pid++) {
    int64_t bm_i, bn_i;
    block_tile(pid, 56, 2, 8, &bm_i, &bn_i);
    assert_int_equal(bm_i, pid / 2);
    assert_int_equal(bn_i, pid % 2);
    block_tile(pid, 2, 56, 1, &bm_i, &bn_i);
    assert_int_equal(bm_i, pid % 2);
    assert_int_equal(bn_i, pid / 2);
  }
  gen_template *t = load_reg_tiled();
  gen_config c;
  gen_kernel k;
  tc_parse_ok(t, "group=1", &c);
  emit_ok(t, &c, &k);
  tc_source_has(&k, k_swizzle_lines, COUNT(k_swizzle_lines));
  gen_kernel_clear(&k);
  gen_free(t);
}

/* gen_group_twin's rule is the snippet's: on a grid at most GEN_SHORT_GRID tiles tall or wide
 * every group walks the tiles as group 1 does, and on any larger grid groups 8 and 16 do not. */
static bool same_order_as_group_1(int64_t gm, int64_t gn, int64_t group) {
  for (int64_t pid = 0; pid < gm * gn; pid++) {
    int64_t r1, c1, r, c;
    block_tile(pid, gm, gn, 1, &r1, &c1);
    block_tile(pid, gm, gn, group, &r, &c);
    if (r != r1 || c != c1) return false;
  }
  return true;
}

/* Whether gen_group_twin calls text's config of t a twin on the packed problem m x n x k. */
static bool twin_on(gen_template *t, const char *text, const char *dtype, const char *layout,
                    int64_t m, int64_t n, int64_t k) {
  gen_config c;
  gen_kernel kern;
  tc_parse_ok(t, text, &c);
  gen_problem p = gen_packed_problem(dtype, layout, m, n, k);
  assert_true(tc_check(t, &c, &p, NULL, 0)); /* the config itself is valid there */
  tc_emit_ok(t, &c, dtype, layout, &kern);
  const bool twin = gen_group_twin(t, &c, &kern, &p);
  gen_kernel_clear(&kern);
  return twin;
}

static void test_group_twins(void **state) {
  (void)state;
  assert_int_equal(GEN_SHORT_GRID, MMT_SHORT_GRID);
  for (int64_t gm = 1; gm <= 20; gm++)
    for (int64_t gn = 1; gn <= 20; gn++)
      for (int64_t group = 8; group <= 16; group += 8)
        assert_int_equal(same_order_as_group_1(gm, gn, group),
                         gm <= GEN_SHORT_GRID || gn <= GEN_SHORT_GRID);

  /* reg_tiled 128 x 128: 1024^2 is 8 x 8 tiles (a twin), 1152 x 2048 9 x 16 (not); group 1
   * is never one */
  gen_template *t = load_reg_tiled();
  const char *rt8 = "bm=128,bn=128,bk=8,tm=8,tn=8,vec=4,stages=2,pad=4,group=8";
  assert_true(twin_on(t, rt8, "f32", "nn", 1024, 1024, 64));
  assert_true(twin_on(t, rt8, "f32", "nn", 4096, 100, 64)); /* 32 x 1: row by row */
  assert_false(twin_on(t, rt8, "f32", "nn", 1152, 2048, 64));
  assert_false(twin_on(t, "bm=128,bn=128,bk=8,tm=8,tn=8,vec=4,stages=2,pad=4,group=1", "f32",
                       "nn", 1024, 1024, 64));
  gen_free(t);

  /* wgmma: swap's grid is N's tiles tall; a cluster's rows count as one; persist has the
   * kernel's own tile grid */
  gen_template *w = NULL;
  ut_err e = {{0}};
  assert_int_equal(gen_load_named("wgmma", &w, &e), MMT_OK);
  const char *wg = "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=16";
  assert_true(twin_on(w, wg, "f16", "nt", 1024, 1024, 1024));
  assert_false(twin_on(w, wg, "f16", "nt", 2048, 2048, 1024));
  assert_true(twin_on(w, "bm=64,bn=32,stages=6,consumers=1,blocks=1,group=8,swap=1", "f16", "nt",
                      32, 14336, 4096)); /* 224 x 1 tiles of C^T */
  assert_false(twin_on(w, "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=8,persist=1", "f16",
                       "nt", 1024, 1024, 1024));
  /* 3000^3 in 128 x 128 tiles with clusters of two tile rows: 12 cluster rows by 24 tile
   * columns (not a twin); 2000 x 3000: 16 tile rows, 8 cluster rows (a twin) */
  assert_false(twin_on(w, "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=8,cluster=2", "f16",
                       "nn", 3000, 3000, 3000));
  assert_true(twin_on(w, "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=8,cluster=2", "f16",
                      "nn", 2000, 3000, 3000));
  gen_free(w);

  /* a template without the tile_order snippet has no twins, whatever its parameters */
  gen_template *s = NULL;
  assert_int_equal(gen_load_named("skinny", &s, &e), MMT_OK);
  gen_config c;
  gen_kernel kern;
  gen_config_default(s, &c);
  gen_problem p = gen_packed_problem("f32", "nn", 1, 4096, 4096);
  tc_emit_ok(s, &c, "f32", "nn", &kern);
  assert_false(gen_group_twin(s, &c, &kern, &p));
  gen_kernel_clear(&kern);
  gen_free(s);
}

/* ---- split-K --------------------------------------------------------------------------- */

/* The slicing (slice_range) and the semaphore protocol, as they must appear in the source. */
static const char *const k_split_lines[] = {
    "const long long per = K / split + (K % split != 0);",
    "const long long kc = (per + step - 1) / step * step;",
    "const long long k0 = min((long long)blockIdx.z * kc, (long long)K);",
    "K = (int)min(kc, K - k0);",
    "const long long k0 = splitk_slice<SPLIT, BK>(K);",
    "A += A_T ? k0 * lda : k0;",
    "B += B_T ? k0 : k0 * ldb;",
    "if (!splitk_reduce<sizeof acc / sizeof(float), THREADS>((float*)acc, WS, pid, tid)) return;",
    "const unsigned before = atomicAdd(&splitk_arrivals[tile], 1u);",
    "for (int i = 0; i < nacc; ++i) acc[i] += __ldcg(part + i * threads);",
};

/* Slices cover [0, K) in order, in whole K steps but for the last non-empty one; with K
 * allowed by the constraint (K >= 2 * split * bk) each slice but the tail ones has at least
 * two steps, and the tail ones can be empty. */
static void test_split_slices(void **state) {
  (void)state;
  static const int64_t bks[] = {8, 16, 32};
  static const int64_t big[] = {2147483647LL, 2147483644LL, 2147483616LL};
  for (int si = 1; si < COUNT(v_split); si++)
    for (int bi = 0; bi < COUNT(bks); bi++)
      for (int64_t k = 0; k < 700 + COUNT(big); k++) {
        const int64_t split = v_split[si], bk = bks[bi], kk = k < 700 ? k : big[k - 700];
        int64_t next = 0, kc = 0;
        for (int64_t z = 0; z < split; z++) {
          int64_t k0, depth;
          slice_range(kk, split, bk, z, &k0, &depth);
          assert_int_equal(k0, next); /* contiguous, in slice order */
          assert_true(depth >= 0 && depth <= kk);
          assert_true(k0 % bk == 0 || k0 == kk); /* float4-aligned A for VEC = 4 */
          if (z == 0) kc = depth;
          assert_true(depth == kc || k0 + depth == kk); /* only the tail is short */
          if (kk >= 2 * split * bk && z == 0) assert_true(depth >= 2 * bk);
          next = k0 + depth;
        }
        assert_int_equal(next, kk); /* all of K, nothing twice */
      }
  /* An allowed problem with empty slices: K = 260, split 16, bk 8: 24 columns a slice, so
   * slice 10 takes 240..259 and slices 11..15 are empty. */
  int64_t k0, depth;
  slice_range(260, 16, 8, 10, &k0, &depth);
  assert_true(k0 == 240 && depth == 20);
  for (int64_t z = 11; z < 16; z++) {
    slice_range(260, 16, 8, z, &k0, &depth);
    assert_true(k0 == 260 && depth == 0);
  }
  gen_template *t = load_reg_tiled();
  static const char *const configs[] = {"group=1,split=2", "vec=1,stages=3,group=1,split=16"};
  for (int i = 0; i < COUNT(configs); i++) {
    gen_config c;
    gen_kernel k;
    tc_parse_ok(t, configs[i], &c);
    emit_ok(t, &c, &k);
    tc_source_has(&k, k_split_lines, COUNT(k_split_lines));
    gen_kernel_clear(&k);
  }
  gen_free(t);
}

/* ---- NVRTC (no GPU needed) ----------------------------------------------------------------- */

/* A deterministic spread of valid configs: per (stages, vec), `per` configs picked by a fixed
 * LCG from that group's valid ones without split-K, then per (stages, vec) with split-K (none
 * with stages 1), then the default.  Returns the count written to out. */
static int sample_configs(gen_template *t, int per, gen_config *out, int cap) {
  int n = 0;
  uint64_t seed = 20240611u;
  gen_config *group = malloc(sizeof *group * gen_space_size(t));
  assert_non_null(group);
  for (int sk = 0; sk < 2; sk++) /* split = 1 first: the same picks as before split-K */
    for (int s = 0; s < COUNT(v_stages); s++)
      for (int v = 0; v < COUNT(v_vec); v++) {
        int count = 0;
        for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
          gen_config c;
          gen_config_at(t, idx, &c);
          if (c.v[P_STAGES] == v_stages[s] && c.v[P_VEC] == v_vec[v] && (c.v[P_SPLIT] > 1) == sk &&
              tc_check_for(t, &c, "f32", "nn", NULL, 0))
            group[count++] = c;
        }
        if (sk && v_stages[s] == 1) {
          assert_int_equal(count, 0);
          continue;
        }
        assert_true(count >= per);
        for (int i = 0; i < per && n < cap; i++) {
          seed = seed * 6364136223846793005ull + 1442695040888963407ull;
          out[n++] = group[(seed >> 33) % (uint64_t)count]; /* repeats are harmless */
        }
      }
  free(group);
  if (n < cap) gen_config_default(t, &out[n++]);
  return n;
}

static void test_nvrtc_sample(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  gen_config sample[48];
  const int per = tc_long_tests() ? 4 : 2; /* MMTUNE_LONG_TESTS=1: the larger sample */
  const int n = sample_configs(t, per, sample, COUNT(sample));
  assert_int_equal(n, 6 * per + 4 * per + 1);
  /* Every kernel is emitted first and all compile at once (tc_compile_all). */
  enum { SM80 = 5, OTHERS = 4, LAYOUTS = 4 };
  gen_kernel kernels[COUNT(sample) + (SM80 + OTHERS) * LAYOUTS];
  const char *archs[COUNT(kernels)];
  int nk = 0;
  /* Each sample config in one of the four layouts, in turn (where it is valid there). */
  static const char *const layouts[LAYOUTS] = {"nn", "nt", "tn", "tt"};
  int split = 0, per_layout[4] = {0};
  for (int i = 0; i < n; i++) {
    int l = i % 4;
    const gen_problem big = {"f32", layouts[l], 4096, 4096, 4096, 4096, 4096, 4096, 16, NULL, 1};
    if (!tc_check(t, &sample[i], &big, NULL, 0)) l = 0;
    emit_layout_ok(t, &sample[i], layouts[l], &kernels[nk]);
    archs[nk++] = "sm_90";
    split += sample[i].v[P_SPLIT] > 1;
    per_layout[l]++;
  }
  assert_int_equal(split, 4 * per);
  for (int l = 1; l < 4; l++) assert_true(per_layout[l] >= per + 1);
  /* cp.async needs sm_80: the ring pipeline and the default also build there, and split-K
   * (acquire and release need sm_70) */
  const char *const sm80[SM80] = {"", "stages=3", "stages=3,vec=1", "stages=3,group=1,split=4",
                                  "vec=1,group=1,split=16"};
  for (int i = 0; i < SM80; i++) {
    gen_config c;
    tc_parse_ok(t, sm80[i], &c);
    assert_true(tc_check(t, &c, NULL, NULL, 0));
    for (int l = 0; l < LAYOUTS; l++) {
      emit_layout_ok(t, &c, layouts[l], &kernels[nk]);
      archs[nk++] = "sm_80";
    }
  }
  gen_free(t);
  /* The other families (the dispatcher's defaults) in every layout: a few configs each. */
  static const char *const others[OTHERS][2] = {
      {"naive", ""}, {"naive", "bx=8,by=32"}, {"smem_tiled", ""}, {"smem_tiled", "tile=16,pad=1,unroll=4,rpt=4"}};
  for (int i = 0; i < OTHERS; i++) {
    gen_template *o = NULL;
    ut_err e;
    assert_int_equal(gen_load_named(others[i][0], &o, &e), MMT_OK);
    gen_config c;
    tc_parse_ok(o, others[i][1], &c);
    for (int l = 0; l < LAYOUTS; l++) {
      emit_layout_ok(o, &c, layouts[l], &kernels[nk]);
      archs[nk++] = "sm_90";
    }
    gen_free(o);
  }
  tc_compile_all(kernels, archs, nk, NULL);
  for (int i = 0; i < nk; i++) gen_kernel_clear(&kernels[i]);
}

/* ---- GPU: results on ragged shapes (skipped without a driver and device) ------------------- */

/* Configs that cover each pipeline, both vector widths, both paddings and orders, both warp
 * shapes (4 x 8 threads, and 8 x 4 when BN / TN is 4), 64 to 512 threads, and the smallest
 * and largest tiles; then split-K with each pipeline and vector width, 2 to 16 slices. */
static const char *const k_gpu_configs[] = {
    "",
    "vec=1",
    "stages=1",
    "stages=1,vec=1,pad=0,group=1",
    "stages=3",
    "stages=3,vec=1,group=1",
    "bm=32,bn=32,bk=32,tm=4,tn=4,vec=1,stages=3,pad=0",
    "bm=32,bn=128,bk=16,tm=4,tn=8,vec=4,stages=2",
    "bm=256,bn=64,bk=8,tm=16,tn=8,vec=4,stages=3",
    "bm=256,bn=128,bk=16,tm=16,tn=8,vec=1,stages=2",
    "bm=64,bn=256,bk=32,tm=4,tn=8,vec=4,stages=1,group=1",
    "bm=128,bn=32,bk=16,tm=4,tn=8,vec=4,stages=3,pad=0",
    "group=1,split=4",
    "vec=1,stages=3,group=1,split=2",
    "bm=32,bn=32,bk=8,tm=4,tn=4,vec=1,stages=3,group=1,split=16",
    "bm=64,bn=128,bk=16,tm=8,tn=8,vec=4,stages=3,group=1,split=8",
};

typedef struct {
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
} gemm_shape;

/* Ragged shapes with padded leading dimensions; `vec4` ones keep K, N and pitches % 4 == 0. */
static const gemm_shape k_shapes_any[] = {
    {1, 1, 1, 1, 1, 1, 1.0f, 0.0f},          {37, 53, 29, 31, 54, 58, 1.5f, 0.5f},
    {130, 67, 257, 260, 67, 70, 1.0f, 0.0f}, {300, 260, 40, 41, 263, 261, -0.5f, 2.0f},
    {5, 3, 0, 1, 3, 3, 1.0f, 0.5f},          {129, 1, 9, 9, 1, 1, 2.0f, 0.0f},
};
static const gemm_shape k_shapes_vec4[] = {
    {1, 4, 4, 4, 4, 4, 1.0f, 0.0f},          {37, 52, 28, 32, 56, 60, 1.5f, 0.5f},
    {130, 68, 256, 260, 68, 72, 1.0f, 0.0f}, {300, 260, 40, 44, 264, 260, -0.5f, 2.0f},
    {5, 4, 0, 4, 4, 4, 1.0f, 0.5f},
    /* M % 4 == 0 too: what vec=4 needs when A is stored transposed */
    {36, 52, 28, 32, 56, 60, 1.5f, 0.5f},    {132, 68, 260, 264, 68, 72, 1.0f, 0.0f},
};

static const char *const k_layouts[] = {"nn", "nt", "tn", "tt"};

/* Shape s (leading dimensions given for nn) in layout: each stored row keeps the padding s
 * has past its width (lda - K, ldb - N). */
static gemm_shape in_layout(const gemm_shape *s, const char *layout) {
  gemm_shape t = *s;
  if (layout[0] == 't') t.lda = s->m + (s->lda - s->k);
  if (layout[1] == 't') t.ldb = s->k + (s->ldb - s->n);
  return t;
}
/* Split-K configs also run these (besides the ones above, whose small K leave most slices
 * empty): skinny and deep, ragged in M and N, beta == 0 (C NaN) and != 0; all are vec4-safe. */
static const gemm_shape k_shapes_split[] = {
    {16, 300, 2052, 2056, 300, 304, 1.0f, 0.0f},
    {300, 12, 1540, 1540, 16, 12, -1.5f, 0.5f},
    {130, 132, 1028, 1032, 132, 136, 0.75f, 0.0f},
};
#define SPLIT_SHAPES (2 + COUNT(k_shapes_split))

/* The shapes a split-K config runs besides the common ones: the smallest K its constraint
 * allows (2 * split * bk: two steps a slice) and 4 more (three steps a slice, so the last
 * slices are empty from split = 4 on), then k_shapes_split.  Returns the count. */
static int split_shapes(int64_t split, int64_t bk, gemm_shape out[SPLIT_SHAPES]) {
  const int64_t kmin = 2 * split * bk;
  out[0] = (gemm_shape){37, 44, kmin, kmin, 44, 48, 1.0f, 0.0f};
  out[1] = (gemm_shape){37, 44, kmin + 4, kmin + 4, 48, 44, 0.5f, -1.0f};
  for (int i = 0; i < COUNT(k_shapes_split); i++) out[2 + i] = k_shapes_split[i];
  return SPLIT_SHAPES;
}

/* The GPU test's configs are valid, and its split-K shapes are problems the template (and so
 * the dispatcher) would give those configs: checked here without a GPU. */
static void test_gpu_configs(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  int split_configs = 0, layout_valid = 0;
  for (int i = 0; i < COUNT(k_gpu_configs); i++) {
    gen_config c;
    gen_kernel spec;
    tc_parse_ok(t, k_gpu_configs[i], &c);
    assert_true(tc_check(t, &c, NULL, NULL, 0));
    for (int l = 0; l < COUNT(k_layouts); l++) {
      int64_t ld[3];
      gen_min_ld(k_layouts[l], 512, 512, 16384, ld);
      const gen_problem deep = {"f32", k_layouts[l], 512, 512,  16384, ld[0],
                                ld[1], ld[2],        16,  NULL, 1};
      layout_valid += tc_check(t, &c, &deep, NULL, 0);
    }
    if (c.v[P_SPLIT] == 1) continue;
    split_configs++;
    emit_ok(t, &c, &spec);
    gemm_shape sh[SPLIT_SHAPES];
    const int n = split_shapes(c.v[P_SPLIT], c.v[P_BK], sh);
    for (int j = 0; j < n; j++) {
      const gen_problem prob = {"f32",     "nn",      sh[j].m, sh[j].n, sh[j].k, sh[j].lda,
                                sh[j].ldb, sh[j].ldc, 16,      NULL,    1};
      char why[160] = "";
      if (!tc_check(t, &c, &prob, why, sizeof why))
        fprintf(stderr, "%s, shape %d: %s\n", k_gpu_configs[i], j, why);
      assert_true(tc_check(t, &c, &prob, NULL, 0));
      assert_true(gen_requires_met(&spec.requires, &prob));
    }
    gen_kernel_clear(&spec);
  }
  assert_int_equal(split_configs, 4);
  /* The GPU test runs every one of its configs in every layout. */
  assert_int_equal(layout_valid, 4 * COUNT(k_gpu_configs));
  gen_free(t);
}

/* Whether config `text` runs in layout: some configs are valid for nn only (tile loads that
 * do not divide evenly in another layout); test_gpu_configs counts them, here they are passed
 * over. */
static bool config_runs_in(gen_template *t, const char *text, const char *layout, gen_config *c) {
  tc_parse_ok(t, text, c);
  assert_true(tc_check(t, c, NULL, NULL, 0));
  const gen_problem big = {"f32", layout, 4096, 4096, 4096, 4096, 4096, 4096, 16, NULL, 1};
  return tc_check(t, c, &big, NULL, 0);
}

/* Runs config c (emitted as spec for layout, compiled to cubin) on every common shape its
 * requirements and constraints allow in that layout (at least three), and split-K configs on
 * their own. */
static void run_config(const rt_device *d, const rt_cu *cu, const gen_config *c,
                       const char *layout, const gen_kernel *spec, const rt_cubin *cubin) {
  rt_kernel k;
  ut_err e;
  mmt_status rc = rt_kernel_load(d, cubin, spec, &k, &e);
  if (rc) fprintf(stderr, "%s: %s\n", spec->kernel_name, e.msg);
  assert_int_equal(rc, MMT_OK);
  /* A kernel that spills is still correct (and the tuner prunes it): say so, test it. */
  print_message("%s: %d registers, %d bytes local%s\n", spec->kernel_name, k.regs, k.local_bytes,
                k.local_bytes ? " (spills)" : "");
  const int64_t split = c->v[P_SPLIT], bk = c->v[P_BK];
  /* split-K: three runs from the same C; later launches find the arrival counters as the
   * first left them, and give the same bits (the slices are added in slice order, whichever
   * finishes first) */
  const int runs = split > 1 ? 3 : 1;
  gemm_shape all[COUNT(k_shapes_any) + COUNT(k_shapes_vec4) + SPLIT_SHAPES];
  int n = 0, ran = 0;
  for (int j = 0; j < COUNT(k_shapes_any); j++) all[n++] = in_layout(&k_shapes_any[j], layout);
  for (int j = 0; j < COUNT(k_shapes_vec4); j++) all[n++] = in_layout(&k_shapes_vec4[j], layout);
  gemm_shape more[SPLIT_SHAPES];
  const int n_more = split > 1 ? split_shapes(split, bk, more) : 0;
  for (int j = 0; j < n_more; j++) all[n++] = in_layout(&more[j], layout);
  for (int j = 0; j < n; j++) {
    const gemm_shape *s = &all[j];
    const bool pitch16 = s->lda % 4 == 0 && s->ldb % 4 == 0 && s->ldc % 4 == 0;
    const gen_problem p = {"f32",  layout,           s->m, s->n, s->k, s->lda, s->ldb,
                           s->ldc, pitch16 ? 16 : 4, NULL, 1};
    if (!gen_requires_met(&spec->requires, &p)) continue;
    const gc_case gc = {.label = spec->kernel_name,
                        .layout = layout,
                        .m = s->m,
                        .n = s->n,
                        .k = s->k,
                        .lda = s->lda,
                        .ldb = s->ldb,
                        .ldc = s->ldc,
                        .alpha = s->alpha,
                        .beta = s->beta,
                        .runs = runs,
                        .rtol = 1e-4,
                        .atol = 1e-4,
                        .values = GC_VALUES_1000THS};
    gc_run(cu, &k, &gc);
    ran++;
  }
  assert_true(ran >= 3);
  rt_kernel_unload(&k);
}

static void test_gpu_results(void **state) {
  (void)state;
  rt_device d;
  ut_err e;
  const rt_cu *cu = tc_open_gpu_or_skip(&d);
  gen_template *t = load_reg_tiled();
  enum { MAX = COUNT(k_gpu_configs) * COUNT(k_layouts) };
  gen_config configs[MAX];
  const char *layouts[MAX], *archs[MAX];
  gen_kernel specs[MAX];
  rt_cubin cubins[MAX];
  int n = 0;
  for (int i = 0; i < COUNT(k_gpu_configs); i++)
    for (int l = 0; l < COUNT(k_layouts); l++)
      if (config_runs_in(t, k_gpu_configs[i], k_layouts[l], &configs[n])) {
        assert_int_equal(gen_emit(t, &configs[n], "f32", k_layouts[l], &specs[n], &e), MMT_OK);
        layouts[n] = k_layouts[l];
        archs[n++] = d.arch;
      }
  tc_compile_all(specs, archs, n, cubins);
  for (int i = 0; i < n; i++) {
    run_config(&d, cu, &configs[i], layouts[i], &specs[i], &cubins[i]);
    rt_cubin_free(&cubins[i]);
    gen_kernel_clear(&specs[i]);
  }
  gen_free(t);
  rt_device_close(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_declaration),    cmocka_unit_test(test_space_count),
      cmocka_unit_test(test_default),        cmocka_unit_test(test_emit_all),
      cmocka_unit_test(test_problem_checks), cmocka_unit_test(test_grid_rule),
      cmocka_unit_test(test_group_swizzle),  cmocka_unit_test(test_group_twins),
      cmocka_unit_test(test_split_slices),
      cmocka_unit_test(test_nvrtc_sample),   cmocka_unit_test(test_gpu_configs),
      cmocka_unit_test(test_gpu_results),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
