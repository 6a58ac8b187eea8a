/* test_templates.c -- templates/reg_tiled.lua: its space (counted again here from the rules),
 * default, launch description of every config, block-order swizzle, NVRTC compiles of a spread
 * sample (CPU), and results on ragged shapes against a CPU reference (GPU; skipped without). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "rt_compile.h"
#include "rt_device.h"
#include "rt_driver.h"

#define TEMPLATES MMT_SOURCE_TEMPLATE_DIR
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- the space, written out again ---------------------------------------------------------- */

/* The parameter lists in declaration order, so the rules below count the space independently
 * of the template code. */
enum { P_BM, P_BN, P_BK, P_TM, P_TN, P_VEC, P_STAGES, P_PAD, P_GROUP, P_COUNT };
static const char *const k_names[P_COUNT] = {"bm",  "bn",     "bk",  "tm",   "tn",
                                             "vec", "stages", "pad", "group"};
static const int64_t v_bm[] = {32, 64, 128, 256};
static const int64_t v_bn[] = {32, 64, 128, 256};
static const int64_t v_bk[] = {8, 16, 32};
static const int64_t v_tm[] = {4, 8, 16};
static const int64_t v_tn[] = {4, 8};
static const int64_t v_vec[] = {1, 4};
static const int64_t v_stages[] = {1, 2, 3};
static const int64_t v_pad[] = {0, 4};
static const int64_t v_group[] = {1, 8};
static const int64_t *const k_lists[P_COUNT] = {v_bm,  v_bn,     v_bk,  v_tm,   v_tn,
                                                v_vec, v_stages, v_pad, v_group};
static const int k_counts[P_COUNT] = {COUNT(v_bm),     COUNT(v_bn),  COUNT(v_bk),
                                      COUNT(v_tm),     COUNT(v_tn),  COUNT(v_vec),
                                      COUNT(v_stages), COUNT(v_pad), COUNT(v_group)};
/* Valid configs; pinned so that a change of the rules is a visible change of this number. */
#define VALID_COUNT 2616

typedef struct {
  int64_t bm, bn, bk, tm, tn, vec, stages, pad, group;
} cfg;

static cfg cfg_of(const gen_config *c) {
  return (cfg){c->v[P_BM],  c->v[P_BN],     c->v[P_BK],  c->v[P_TM],   c->v[P_TN],
               c->v[P_VEC], c->v[P_STAGES], c->v[P_PAD], c->v[P_GROUP]};
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
  return regs <= limit;
}

static gen_template *load_reg_tiled(void) {
  gen_template *t = NULL;
  ut_err e = {{0}};
  mmt_status rc = gen_load(TEMPLATES "/reg_tiled.lua", &t, &e);
  if (rc) fprintf(stderr, "load reg_tiled: %s\n", e.msg);
  assert_int_equal(rc, MMT_OK);
  return t;
}

static void parse_ok(gen_template *t, const char *text, gen_config *c) {
  ut_err e;
  mmt_status rc = gen_config_parse(t, text, c, &e);
  if (rc) fprintf(stderr, "%s: %s\n", text, e.msg);
  assert_int_equal(rc, MMT_OK);
}

static bool check(gen_template *t, const gen_config *c, const gen_problem *p, char *why,
                  size_t whylen) {
  bool valid = false;
  ut_err e;
  assert_int_equal(gen_check(t, c, p, &valid, why, whylen, &e), MMT_OK);
  return valid;
}

static void emit_ok(gen_template *t, const gen_config *c, gen_kernel *k) {
  ut_err e;
  mmt_status rc = gen_emit(t, c, "f32", k, &e);
  if (rc) fprintf(stderr, "emit: %s\n", e.msg);
  assert_int_equal(rc, MMT_OK);
}

/* ---- declaration, space, default ----------------------------------------------------------- */

static void test_declaration(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  assert_string_equal(gen_name(t), "reg_tiled");
  assert_true(strlen(gen_description(t)) > 0);
  assert_int_equal(gen_dtype_count(t), 1);
  assert_true(gen_supports_dtype(t, "f32"));
  assert_int_equal(gen_param_count(t), P_COUNT);
  uint64_t size = 1;
  for (int i = 0; i < P_COUNT; i++) {
    assert_string_equal(gen_param_name(t, i), k_names[i]);
    assert_int_equal(gen_param_value_count(t, i), k_counts[i]);
    for (int j = 0; j < k_counts[i]; j++) assert_int_equal(gen_param_value(t, i, j), k_lists[i][j]);
    size *= (uint64_t)k_counts[i];
  }
  assert_int_equal(gen_space_size(t), size);
  gen_free(t);
}

static void test_space_count(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  int valid_count = 0, expect = 0;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config c;
    char why[160];
    gen_config_at(t, idx, &c);
    const cfg p = cfg_of(&c);
    const bool valid = check(t, &c, NULL, why, sizeof why), want = rules_valid(&p);
    if (valid != want) {
      char text[256];
      gen_config_format(t, &c, text, sizeof text, NULL);
      fprintf(stderr, "%s: template says %d (%s), rules say %d\n", text, valid, why, want);
    }
    assert_int_equal(valid, want);
    if (!valid) assert_true(strlen(why) > 0); /* always says why */
    valid_count += valid;
    expect += want;
  }
  assert_int_equal(valid_count, expect);
  assert_int_equal(valid_count, VALID_COUNT);
  gen_free(t);
}

static void test_default(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  gen_config c;
  char text[256];
  gen_config_default(t, &c);
  assert_int_equal(gen_config_format(t, &c, text, sizeof text, NULL), MMT_OK);
  assert_string_equal(text, "bm=128,bn=128,bk=8,tm=8,tn=8,vec=4,stages=2,pad=4,group=8");
  assert_true(check(t, &c, NULL, NULL, 0));
  gen_kernel k, k2;
  emit_ok(t, &c, &k);
  assert_string_equal(k.kernel_name, "mmt_reg_tiled_m128_n128_k8_tm8_tn8_v4_s2_p4_g8");
  assert_int_equal(k.block[0], 256);
  assert_int_equal(k.shared_bytes, 2 * 8 * (132 + 132) * 4);
  assert_int_equal(k.requires.k_multiple, 4);
  assert_int_equal(k.requires.n_multiple, 4);
  assert_int_equal(k.requires.align_bytes, 16);
  assert_non_null(strstr(k.source, "#define MIN_BLOCKS 2")); /* 2 x 256 threads, <= 128 regs */
  assert_non_null(strstr(k.source, "#define WX 8"));         /* 4 x 8 warps */
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
    if (!check(t, &c, NULL, NULL, 0)) continue;
    const cfg p = cfg_of(&c);
    gen_kernel k;
    emit_ok(t, &c, &k);
    char name[128], line[64];
    snprintf(name, sizeof name,
             "mmt_reg_tiled_m%lld_n%lld_k%lld_tm%lld_tn%lld_v%lld_s%lld_p%lld_g%lld",
             (long long)p.bm, (long long)p.bn, (long long)p.bk, (long long)p.tm, (long long)p.tn,
             (long long)p.vec, (long long)p.stages, (long long)p.pad, (long long)p.group);
    assert_string_equal(k.kernel_name, name); /* every parameter, separated: names are unique */
    assert_non_null(strstr(k.source, name));
    assert_non_null(strstr(k.source, "extern \"C\" __global__"));
    assert_non_null(strstr(k.source, "Parameters:"));
    assert_null(strstr(k.source, "#include"));
    assert_null(strstr(k.source, "${"));
    for (int i = 0; i < P_COUNT; i++) { /* each parameter is defined (and documented) */
      static const char *const macro[P_COUNT] = {"BM",  "BN",     "BK",  "TM",   "TN",
                                                 "VEC", "STAGES", "PAD", "GROUP"};
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
    assert_int_equal(k.grid[2].dim, 0);
    assert_int_equal(k.grid[2].tile, 1);
    assert_int_equal(k.shared_bytes, shared_bytes_of(&p));
    assert_int_equal(k.requires.m_multiple, 1);
    assert_int_equal(k.requires.n_multiple, p.vec == 4 ? 4 : 1);
    assert_int_equal(k.requires.k_multiple, p.vec == 4 ? 4 : 1);
    assert_int_equal(k.requires.align_bytes, p.vec == 4 ? 16 : 4);
    /* cp.async only in the ring pipeline; 16-byte copies of B only with float4 */
    assert_int_equal(strstr(k.source, "cp.async.commit_group") != NULL, p.stages == 3);
    assert_int_equal(strstr(k.source, "cp_async<16>(bs") != NULL, p.stages == 3 && p.vec == 4);
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
  parse_ok(t, "", &c); /* the default: bm=128, vec=4 */
  gen_problem p = {"f32", "nn", 65535LL * 128, 64, 64, 64, 64, 64, 16};
  assert_true(check(t, &c, &p, why, sizeof why));
  p.m++; /* one block row too many for grid.y */
  assert_false(check(t, &c, &p, why, sizeof why));
  assert_non_null(strstr(why, "65535"));
  p.m = 100;
  p.layout = "tn";
  assert_false(check(t, &c, &p, why, sizeof why));
  assert_non_null(strstr(why, "nn layout"));
  p.layout = "nn";

  /* vec=4 requires K % 4, N % 4 and 16-byte alignment; vec=1 requires nothing */
  emit_ok(t, &c, &k);
  gen_problem ok4 = {"f32", "nn", 37, 52, 28, 32, 56, 60, 16};
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
  parse_ok(t, "vec=1", &c);
  assert_true(check(t, &c, NULL, NULL, 0));
  emit_ok(t, &c, &k);
  gen_problem odd = {"f32", "nn", 37, 51, 27, 29, 53, 51, 4};
  assert_true(gen_requires_met(&k.requires, &odd));
  gen_kernel_clear(&k);
  gen_free(t);
}

static void test_grid_rule(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  gen_config c;
  gen_kernel k;
  unsigned g[3];
  ut_err e;
  parse_ok(t, "bm=64,bn=256,bk=32,tm=4,tn=8", &c);
  assert_true(check(t, &c, NULL, NULL, 0));
  emit_ok(t, &c, &k);
  assert_int_equal(gen_grid_eval(k.grid, 1000, 77, 5, g, &e), MMT_OK);
  assert_int_equal(g[0], 1);  /* ceil(77 / 256) */
  assert_int_equal(g[1], 16); /* ceil(1000 / 64) */
  assert_int_equal(g[2], 1);
  assert_int_equal(gen_grid_eval(k.grid, 1, 1, 1, g, &e), MMT_OK);
  assert_true(g[0] == 1 && g[1] == 1 && g[2] == 1);
  assert_int_equal(gen_grid_eval(k.grid, 65535LL * 64, 257, 0, g, &e), MMT_OK);
  assert_int_equal(g[0], 2);
  assert_int_equal(g[1], 65535);
  assert_int_equal(gen_grid_eval(k.grid, 65535LL * 64 + 1, 1, 1, g, &e), MMT_ERR_INVALID_ARG);
  gen_kernel_clear(&k);
  gen_free(t);
}

/* ---- block-order swizzle ------------------------------------------------------------------- */

/* The kernel's mapping from launch order to block tile, restated (the lines below are checked
 * to be in the emitted source verbatim, so the two cannot drift apart). */
static void block_tile(int64_t pid, int64_t grid_m, int64_t grid_n, int64_t group, int64_t *bm_i,
                       int64_t *bn_i) {
  const int64_t group_blocks = group * grid_n;
  const int64_t first_m = pid / group_blocks * group;
  const int64_t group_rows = grid_m - first_m < group ? grid_m - first_m : group;
  const int64_t in_group = pid % group_blocks;
  *bm_i = first_m + in_group % group_rows;
  *bn_i = in_group / group_rows;
}

static const char *const k_swizzle_lines[] = {
    "const long long pid = (long long)blockIdx.y * grid_n + blockIdx.x;",
    "const long long group_blocks = GROUP * grid_n;",
    "const long long first_m = pid / group_blocks * GROUP;",
    "const long long group_rows = grid_m - first_m < GROUP ? grid_m - first_m : GROUP;",
    "const long long in_group = pid % group_blocks;",
    "const long long row0 = (first_m + in_group % group_rows) * BM;",
    "const long long col0 = in_group / group_rows * BN;",
};

static void test_group_swizzle(void **state) {
  (void)state;
  static const int64_t shapes[][2] = {{1, 1},  {1, 7},  {7, 1},  {8, 8}, {10, 3},
                                      {17, 5}, {9, 16}, {64, 2}, {3, 40}};
  static const int64_t groups[] = {1, 8};
  for (int s = 0; s < COUNT(shapes); s++)
    for (int gi = 0; gi < COUNT(groups); gi++) {
      const int64_t gm = shapes[s][0], gn = shapes[s][1], group = groups[gi];
      int *hits = calloc((size_t)(gm * gn), sizeof *hits);
      assert_non_null(hits);
      for (int64_t pid = 0; pid < gm * gn; pid++) {
        int64_t bm_i, bn_i;
        block_tile(pid, gm, gn, group, &bm_i, &bn_i);
        assert_true(bm_i >= 0 && bm_i < gm && bn_i >= 0 && bn_i < gn);
        hits[bm_i * gn + bn_i]++;
        if (group == 1) { /* plain row-major launch order */
          assert_int_equal(bm_i, pid / gn);
          assert_int_equal(bn_i, pid % gn);
        }
      }
      for (int64_t i = 0; i < gm * gn; i++) assert_int_equal(hits[i], 1); /* exactly once */
      free(hits);
    }
  /* group 8 walks 8 block rows down a column before moving right */
  for (int64_t pid = 0; pid < 16; pid++) {
    int64_t bm_i, bn_i;
    block_tile(pid, 20, 5, 8, &bm_i, &bn_i);
    assert_int_equal(bm_i, pid % 8);
    assert_int_equal(bn_i, pid / 8);
  }
  gen_template *t = load_reg_tiled();
  gen_config c;
  gen_kernel k;
  parse_ok(t, "group=1", &c);
  emit_ok(t, &c, &k);
  for (int i = 0; i < COUNT(k_swizzle_lines); i++) {
    if (!strstr(k.source, k_swizzle_lines[i])) fprintf(stderr, "missing: %s\n", k_swizzle_lines[i]);
    assert_non_null(strstr(k.source, k_swizzle_lines[i]));
  }
  gen_kernel_clear(&k);
  gen_free(t);
}

/* ---- NVRTC (no GPU needed) ----------------------------------------------------------------- */

/* A deterministic spread of valid configs: per (stages, vec), `per` configs picked by a fixed
 * LCG from that group's valid ones, then the default.  Returns the count written to out. */
static int sample_configs(gen_template *t, int per, gen_config *out, int cap) {
  int n = 0;
  uint64_t seed = 20240611u;
  gen_config *group = malloc(sizeof *group * gen_space_size(t));
  assert_non_null(group);
  for (int s = 0; s < COUNT(v_stages); s++)
    for (int v = 0; v < COUNT(v_vec); v++) {
      int count = 0;
      for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
        gen_config c;
        gen_config_at(t, idx, &c);
        if (c.v[P_STAGES] == v_stages[s] && c.v[P_VEC] == v_vec[v] && check(t, &c, NULL, NULL, 0))
          group[count++] = c;
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

static void compile_ok(const gen_kernel *k, const char *arch) {
  rt_cubin cubin;
  char *log = NULL;
  ut_err e;
  mmt_status rc = rt_compile(k->source, k->kernel_name, arch, &cubin, &log, &e);
  if (rc) fprintf(stderr, "%s (%s): %s\n%s\n", k->kernel_name, arch, e.msg, log ? log : "");
  assert_int_equal(rc, MMT_OK);
  assert_true(cubin.size > 4 && memcmp(cubin.data, "\177ELF", 4) == 0);
  if (log && *log) fprintf(stderr, "%s (%s): %s\n", k->kernel_name, arch, log);
  assert_true(!log || !*log); /* not even a warning */
  free(log);
  rt_cubin_free(&cubin);
}

static void test_nvrtc_sample(void **state) {
  (void)state;
  gen_template *t = load_reg_tiled();
  gen_config sample[32];
  const int n = sample_configs(t, 4, sample, COUNT(sample));
  assert_int_equal(n, 25);
  for (int i = 0; i < n; i++) {
    gen_kernel k;
    emit_ok(t, &sample[i], &k);
    compile_ok(&k, "sm_90");
    gen_kernel_clear(&k);
  }
  /* cp.async needs sm_80: the ring pipeline and the default also build there */
  const char *const sm80[] = {"", "stages=3", "stages=3,vec=1"};
  for (int i = 0; i < COUNT(sm80); i++) {
    gen_config c;
    gen_kernel k;
    parse_ok(t, sm80[i], &c);
    assert_true(check(t, &c, NULL, NULL, 0));
    emit_ok(t, &c, &k);
    compile_ok(&k, "sm_80");
    gen_kernel_clear(&k);
  }
  gen_free(t);
}

/* ---- GPU: results on ragged shapes (skipped without a driver and device) ------------------- */

/* Configs that cover each pipeline, both vector widths, both paddings and orders, both warp
 * shapes (4 x 8 threads, and 8 x 4 when BN / TN is 4), 64 to 512 threads, and the smallest
 * and largest tiles. */
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
};

static float frand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) % 2001) / 1000.0f - 1.0f;
}

static CUdeviceptr to_device(const rt_cu *cu, const float *h, size_t count) {
  CUdeviceptr p = 0;
  assert_int_equal(cu->cuMemAlloc(&p, count * sizeof(float)), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(p, h, count * sizeof(float)), CUDA_SUCCESS);
  return p;
}

/* Runs k on shape s against a float64 CPU reference; C starts as NaN when beta == 0 (it must
 * not be read) and the padding past column N must be left alone. */
static void run_shape(const rt_cu *cu, const rt_kernel *k, const char *label, const gemm_shape *s) {
  const size_t na = (size_t)(s->m * s->lda) + 1, nb = (size_t)(s->k * s->ldb) + 1;
  const size_t nc = (size_t)(s->m * s->ldc);
  float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
  float *c = malloc(nc * sizeof *c), *want = malloc(nc * sizeof *want);
  assert_true(a && b && c && want);
  uint64_t seed = (uint64_t)(s->m * 131 + s->n * 17 + s->k);
  for (size_t i = 0; i < na; i++) a[i] = frand(&seed);
  for (size_t i = 0; i < nb; i++) b[i] = frand(&seed);
  for (size_t i = 0; i < nc; i++) c[i] = s->beta == 0.0f ? NAN : frand(&seed);
  memcpy(want, c, nc * sizeof *c);
  for (int64_t i = 0; i < s->m; i++)
    for (int64_t j = 0; j < s->n; j++) {
      double acc = 0;
      for (int64_t p = 0; p < s->k; p++) acc += (double)a[i * s->lda + p] * b[p * s->ldb + j];
      float *w = &want[i * s->ldc + j];
      *w = (float)(s->alpha * acc + (s->beta == 0.0f ? 0.0 : (double)s->beta * *w));
    }
  rt_gemm_args args = {.m = s->m,
                       .n = s->n,
                       .k = s->k,
                       .alpha = s->alpha,
                       .beta = s->beta,
                       .lda = s->lda,
                       .ldb = s->ldb,
                       .ldc = s->ldc};
  args.a = to_device(cu, a, na);
  args.b = to_device(cu, b, nb);
  args.c = to_device(cu, c, nc);
  ut_err e;
  mmt_status rc = rt_kernel_launch(k, &args, NULL, &e);
  if (rc) fprintf(stderr, "%s: %s\n", label, e.msg);
  assert_int_equal(rc, MMT_OK);
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(c, args.c, nc * sizeof *c), CUDA_SUCCESS);
  for (size_t i = 0; i < nc; i++) {
    const bool same =
        isnan(want[i]) ? isnan(c[i]) : fabsf(c[i] - want[i]) <= 1e-4f * (1.0f + fabsf(want[i]));
    if (!same) {
      fprintf(stderr, "%s, %lldx%lldx%lld: C[%zu] = %g, want %g\n", label, (long long)s->m,
              (long long)s->n, (long long)s->k, i, c[i], want[i]);
      fail();
    }
  }
  assert_int_equal(cu->cuMemFree(args.a), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemFree(args.b), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemFree(args.c), CUDA_SUCCESS);
  free(a);
  free(b);
  free(c);
  free(want);
}

static void test_gpu_results(void **state) {
  (void)state;
  rt_device d;
  ut_err e;
  mmt_status rc = rt_device_open(0, &d, &e);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE || rc == MMT_ERR_CUDA) {
    print_message("no GPU: %s: %s\n", mmt_status_name(rc), e.msg);
    skip();
  }
  assert_int_equal(rc, MMT_OK);
  const rt_cu *cu;
  assert_int_equal(rt_driver(&cu, &e), MMT_OK);
  gen_template *t = load_reg_tiled();
  for (int i = 0; i < COUNT(k_gpu_configs); i++) {
    gen_config c;
    gen_kernel spec;
    rt_cubin cubin;
    rt_kernel k;
    parse_ok(t, k_gpu_configs[i], &c);
    assert_true(check(t, &c, NULL, NULL, 0));
    emit_ok(t, &c, &spec);
    assert_int_equal(rt_compile(spec.source, spec.kernel_name, d.arch, &cubin, NULL, &e), MMT_OK);
    rc = rt_kernel_load(&d, &cubin, &spec, &k, &e);
    if (rc) fprintf(stderr, "%s: %s\n", spec.kernel_name, e.msg);
    assert_int_equal(rc, MMT_OK);
    print_message("%s: %d registers, %d bytes local\n", spec.kernel_name, k.regs, k.local_bytes);
    assert_int_equal(k.local_bytes, 0); /* no spills */
    const bool vec4 = c.v[P_VEC] == 4;
    const gemm_shape *shapes = vec4 ? k_shapes_vec4 : k_shapes_any;
    const int count = vec4 ? COUNT(k_shapes_vec4) : COUNT(k_shapes_any);
    for (int j = 0; j < count; j++) run_shape(cu, &k, spec.kernel_name, &shapes[j]);
    rt_kernel_unload(&k);
    rt_cubin_free(&cubin);
    gen_kernel_clear(&spec);
  }
  gen_free(t);
  rt_device_close(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_declaration),    cmocka_unit_test(test_space_count),
      cmocka_unit_test(test_default),        cmocka_unit_test(test_emit_all),
      cmocka_unit_test(test_problem_checks), cmocka_unit_test(test_grid_rule),
      cmocka_unit_test(test_group_swizzle),  cmocka_unit_test(test_nvrtc_sample),
      cmocka_unit_test(test_gpu_results),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
