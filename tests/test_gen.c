/* test_gen.c -- gen/: the template sandbox, the built-in templates, configs, emit, search path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gen.h"

#define TEMPLATES MMT_SOURCE_TEMPLATE_DIR
#define BAD MMT_TEST_DIR "/templates/"

/* The built-in lists, written out again here so the counts below are computed from the rules
 * independently of the template code. */
static const int64_t naive_bx[] = {8, 16, 32, 64, 128, 256};
static const int64_t naive_by[] = {1, 2, 4, 8, 16, 32};
static const int64_t smem_tile[] = {8, 16, 32};
static const int64_t smem_pad[] = {0, 1};
static const int64_t smem_unroll[] = {1, 2, 4, 8, 16, 32};
static const int64_t smem_rpt[] = {1, 2, 4, 8};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static gen_template *load_ok(const char *path) {
  gen_template *t = NULL;
  ut_err e = {{0}};
  mmt_status rc = gen_load(path, &t, &e);
  if (rc) fprintf(stderr, "load %s: %s\n", path, e.msg);
  assert_int_equal(rc, MMT_OK);
  assert_non_null(t);
  return t;
}

static gen_template *load_builtin(const char *name) {
  gen_template *t = NULL;
  ut_err e = {{0}};
  setenv("MMTUNE_TEMPLATE_PATH", "", 1);
  mmt_status rc = gen_load_named(name, &t, &e);
  if (rc) fprintf(stderr, "load %s: %s\n", name, e.msg);
  assert_int_equal(rc, MMT_OK);
  return t;
}

/* Loading fails with status and a message containing each of the NULL-terminated words. */
static void expect_load_fails(const char *path, mmt_status status, ...) {
  gen_template *t = (gen_template *)1;
  ut_err e = {{0}};
  mmt_status rc = gen_load(path, &t, &e);
  if (rc != status) fprintf(stderr, "%s: got %s: %s\n", path, mmt_status_name(rc), e.msg);
  assert_int_equal(rc, status);
  assert_null(t);
  va_list ap;
  va_start(ap, status);
  for (const char *word = va_arg(ap, const char *); word; word = va_arg(ap, const char *)) {
    if (!strstr(e.msg, word)) fprintf(stderr, "'%s' not in: %s\n", word, e.msg);
    assert_non_null(strstr(e.msg, word));
  }
  va_end(ap);
}

/* After any failure a good template still loads and emits: nothing is left broken. */
static void assert_good_still_works(void) {
  gen_template *t = load_ok(TEMPLATES "/smem_tiled.lua");
  gen_config cfg;
  gen_kernel k;
  ut_err e;
  gen_config_default(t, &cfg);
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_OK);
  assert_string_equal(k.kernel_name, "mmt_smem_tiled_nn_t32_p0_u1_r1");
  gen_kernel_clear(&k);
  gen_free(t);
}

static void test_load_builtins(void **state) {
  (void)state;
  gen_template *n = load_builtin("naive");
  assert_string_equal(gen_name(n), "naive");
  assert_true(strlen(gen_description(n)) > 0);
  assert_string_equal(gen_path(n), TEMPLATES "/naive.lua");
  assert_int_equal(gen_dtype_count(n), 1);
  assert_string_equal(gen_dtype(n, 0), "f32");
  assert_null(gen_dtype(n, 1));
  assert_true(gen_supports_dtype(n, "f32"));
  assert_false(gen_supports_dtype(n, "f64"));
  assert_int_equal(gen_param_count(n), 2);
  assert_string_equal(gen_param_name(n, 0), "bx");
  assert_string_equal(gen_param_name(n, 1), "by");
  assert_null(gen_param_name(n, 2));
  for (int j = 0; j < COUNT(naive_bx); j++) assert_int_equal(gen_param_value(n, 0, j), naive_bx[j]);
  for (int j = 0; j < COUNT(naive_by); j++) assert_int_equal(gen_param_value(n, 1, j), naive_by[j]);
  assert_int_equal(gen_space_size(n), 36);

  gen_template *s = load_builtin("smem_tiled");
  assert_string_equal(gen_name(s), "smem_tiled");
  assert_int_equal(gen_param_count(s), 4);
  const char *names[] = {"tile", "pad", "unroll", "rpt"};
  const int counts[] = {COUNT(smem_tile), COUNT(smem_pad), COUNT(smem_unroll), COUNT(smem_rpt)};
  for (int i = 0; i < 4; i++) {
    assert_string_equal(gen_param_name(s, i), names[i]);
    assert_int_equal(gen_param_value_count(s, i), counts[i]);
  }
  assert_int_equal(gen_space_size(s), 3 * 2 * 6 * 4);
  gen_free(n);
  gen_free(s);
  gen_free(NULL);
}

static void test_source_hash(void **state) {
  (void)state;
  /* a template that reads no snippet or library: the hash of its own text */
  gen_template *t = load_ok(BAD "sb_probe.lua");
  char *text = NULL, hex[17];
  size_t len = 0;
  assert_int_equal(ut_read_file(BAD "sb_probe.lua", &text, &len, NULL), MMT_OK);
  ut_hash64_hex(ut_hash64(text, len), hex);
  assert_string_equal(gen_source_hash(t), hex);
  free(text);
  gen_free(t);
}

static void test_config_enumeration(void **state) {
  (void)state;
  gen_template *t = load_ok(TEMPLATES "/smem_tiled.lua");
  const int64_t *lists[] = {smem_tile, smem_pad, smem_unroll, smem_rpt};
  const int counts[] = {COUNT(smem_tile), COUNT(smem_pad), COUNT(smem_unroll), COUNT(smem_rpt)};
  uint64_t size = gen_space_size(t);
  for (uint64_t idx = 0; idx < size; idx++) {
    gen_config cfg;
    gen_config_at(t, idx, &cfg);
    assert_int_equal(cfg.n, 4);
    /* first parameter slowest: idx = ((tile * 2 + pad) * 6 + unroll) * 4 + rpt */
    uint64_t rest = idx;
    for (int i = 3; i >= 0; i--) {
      assert_int_equal(cfg.v[i], lists[i][rest % (uint64_t)counts[i]]);
      rest /= (uint64_t)counts[i];
    }
  }
  gen_config last;
  gen_config_at(t, size - 1, &last);
  assert_int_equal(last.v[0], 32);
  assert_int_equal(last.v[3], 8);
  gen_free(t);
}

static void test_config_default(void **state) {
  (void)state;
  gen_template *s = load_ok(TEMPLATES "/smem_tiled.lua");
  gen_template *n = load_ok(TEMPLATES "/naive.lua");
  gen_config cfg;
  char text[256];
  gen_config_default(s, &cfg);
  assert_int_equal(gen_config_format(s, &cfg, text, sizeof text, NULL), MMT_OK);
  assert_string_equal(text, "tile=32,pad=0,unroll=1,rpt=1");
  gen_config_default(n, &cfg);
  assert_int_equal(gen_config_format(n, &cfg, text, sizeof text, NULL), MMT_OK);
  assert_string_equal(text, "bx=32,by=8");
  gen_free(s);
  gen_free(n);
}

static void test_config_parse(void **state) {
  (void)state;
  gen_template *t = load_ok(TEMPLATES "/smem_tiled.lua");
  gen_config cfg;
  ut_err e;
  char text[256];
  assert_int_equal(gen_config_parse(t, "tile=16,unroll=4", &cfg, &e), MMT_OK);
  assert_int_equal(gen_config_format(t, &cfg, text, sizeof text, &e), MMT_OK);
  assert_string_equal(text, "tile=16,pad=0,unroll=4,rpt=1"); /* the rest keep the default */
  assert_int_equal(gen_config_parse(t, "  rpt=2   pad=1 ", &cfg, &e), MMT_OK);
  assert_int_equal(gen_config_format(t, &cfg, text, sizeof text, &e), MMT_OK);
  assert_string_equal(text, "tile=32,pad=1,unroll=1,rpt=2");
  assert_int_equal(gen_config_parse(t, "", &cfg, &e), MMT_OK);
  assert_int_equal(cfg.v[0], 32);

  assert_int_equal(gen_config_parse(t, "tiles=16", &cfg, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "no parameter 'tiles'"));
  assert_int_equal(gen_config_parse(t, "tile=abc", &cfg, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "not an integer"));
  assert_int_equal(gen_config_parse(t, "tile=16x", &cfg, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_config_parse(t, "tile=12", &cfg, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "8, 16, 32"));
  assert_int_equal(gen_config_parse(t, "tile", &cfg, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "name=value"));
  assert_int_equal(gen_config_parse(t, "tile=8,tile=16", &cfg, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "twice"));

  /* every config survives format -> parse */
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config a, b;
    gen_config_at(t, idx, &a);
    assert_int_equal(gen_config_format(t, &a, text, sizeof text, &e), MMT_OK);
    assert_int_equal(gen_config_parse(t, text, &b, &e), MMT_OK);
    assert_memory_equal(a.v, b.v, sizeof a.v[0] * 4);
  }
  gen_config a;
  gen_config_default(t, &a);
  assert_int_equal(gen_config_format(t, &a, text, 10, &e), MMT_ERR_INVALID_ARG);
  a.n = 3;
  assert_int_equal(gen_config_format(t, &a, text, sizeof text, &e), MMT_ERR_INVALID_ARG);
  gen_free(t);
}

/* Number of configs for which gen_check says valid (no problem). */
static int count_valid(gen_template *t) {
  int valid_count = 0;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config cfg;
    bool valid = false;
    char why[128];
    gen_config_at(t, idx, &cfg);
    assert_int_equal(gen_check(t, &cfg, NULL, &valid, why, sizeof why, NULL), MMT_OK);
    if (valid)
      valid_count++;
    else
      assert_true(strlen(why) > 0); /* the built-ins always say why */
  }
  return valid_count;
}

static void test_constraints_count(void **state) {
  (void)state;
  int expect_naive = 0, expect_smem = 0;
  for (int i = 0; i < COUNT(naive_bx); i++)
    for (int j = 0; j < COUNT(naive_by); j++) {
      int64_t threads = naive_bx[i] * naive_by[j];
      expect_naive += threads >= 32 && threads <= 1024;
    }
  for (int a = 0; a < COUNT(smem_tile); a++)
    for (int b = 0; b < COUNT(smem_pad); b++)
      for (int c = 0; c < COUNT(smem_unroll); c++)
        for (int d = 0; d < COUNT(smem_rpt); d++) {
          int64_t tile = smem_tile[a];
          expect_smem += smem_unroll[c] <= tile && tile * tile / smem_rpt[d] >= 32;
        }
  assert_int_equal(expect_naive, 27);
  assert_int_equal(expect_smem, 104);
  gen_template *n = load_ok(TEMPLATES "/naive.lua");
  gen_template *s = load_ok(TEMPLATES "/smem_tiled.lua");
  assert_int_equal(count_valid(n), expect_naive);
  assert_int_equal(count_valid(s), expect_smem);
  gen_free(n);
  gen_free(s);
}

static void test_constraints_problem(void **state) {
  (void)state;
  gen_template *t = load_ok(TEMPLATES "/naive.lua");
  gen_config cfg;
  bool valid = false;
  char why[128];
  ut_err e;
  gen_problem p = {"f32", "nn", 17, 33, 65, 65, 33, 33, 4, NULL, 1};
  assert_int_equal(gen_config_parse(t, "bx=32,by=1", &cfg, &e), MMT_OK);
  assert_int_equal(gen_check(t, &cfg, &p, &valid, why, sizeof why, &e), MMT_OK);
  assert_true(valid);
  assert_string_equal(why, "");
  /* naive declares every layout; an unknown one is refused before Lua runs. */
  for (int i = 0; i < 4; i++) {
    p.layout = (const char *[]){"nn", "nt", "tn", "tt"}[i];
    assert_true(gen_supports_layout(t, p.layout));
    assert_int_equal(gen_check(t, &cfg, &p, &valid, why, sizeof why, &e), MMT_OK);
    assert_true(valid);
  }
  p.layout = "nx";
  assert_int_equal(gen_check(t, &cfg, &p, &valid, why, sizeof why, &e), MMT_OK);
  assert_false(valid);
  assert_string_equal(why, "layout nx not supported");
  p.layout = "nn";
  p.m = 65536; /* 65536 rows, one per block along y: one too many */
  assert_int_equal(gen_check(t, &cfg, &p, &valid, why, sizeof why, &e), MMT_OK);
  assert_false(valid);
  assert_non_null(strstr(why, "65535"));
  p.m = 17;
  p.dtype = "f64";
  assert_int_equal(gen_check(t, &cfg, &p, &valid, why, sizeof why, &e), MMT_OK);
  assert_false(valid);
  assert_non_null(strstr(why, "f64"));
  /* a config outside the lists is the caller's error */
  cfg.v[0] = 7;
  assert_int_equal(gen_check(t, &cfg, NULL, &valid, why, sizeof why, &e), MMT_ERR_INVALID_ARG);
  gen_free(t);
}

/* Emits every valid config; checks the launch description against the config. */
static void emit_all(const char *path, bool smem) {
  gen_template *t = load_ok(path);
  typedef char kernel_name[128];
  kernel_name *names = calloc(gen_space_size(t), sizeof *names);
  assert_non_null(names);
  int emitted = 0;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config cfg;
    gen_kernel k;
    bool valid = false;
    ut_err e;
    gen_config_at(t, idx, &cfg);
    assert_int_equal(gen_check(t, &cfg, NULL, &valid, NULL, 0, &e), MMT_OK);
    if (!valid) continue;
    assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_OK);
    assert_non_null(strstr(k.source, k.kernel_name));
    assert_non_null(strstr(k.source, "extern \"C\" __global__"));
    assert_non_null(strstr(k.source, "Parameters:"));
    assert_null(strstr(k.source, "#include"));
    unsigned by = smem ? (unsigned)(cfg.v[0] / cfg.v[3]) : (unsigned)cfg.v[1];
    assert_int_equal(k.block[0], cfg.v[0]);
    assert_int_equal(k.block[1], by);
    assert_int_equal(k.block[2], 1);
    assert_int_equal(k.grid[0].dim, 'N');
    assert_int_equal(k.grid[0].tile, cfg.v[0]);
    assert_int_equal(k.grid[1].dim, 'M');
    assert_int_equal(k.grid[1].tile, smem ? cfg.v[0] : cfg.v[1]);
    assert_int_equal(k.grid[2].dim, 0);
    assert_int_equal(k.grid[2].tile, 1);
    assert_int_equal(k.shared_bytes, 0);
    assert_int_equal(k.requires.m_multiple, 1);
    assert_int_equal(k.requires.n_multiple, 1);
    assert_int_equal(k.requires.k_multiple, 1);
    assert_int_equal(k.requires.align_bytes, 4);
    for (int j = 0; j < emitted; j++) assert_string_not_equal(names[j], k.kernel_name);
    snprintf(names[emitted++], sizeof names[0], "%s", k.kernel_name);
    gen_kernel_clear(&k);
    assert_null(k.source);
  }
  assert_int_equal(emitted, smem ? 104 : 27);
  free(names);
  gen_free(t);
}

static void test_emit_all_naive(void **state) {
  (void)state;
  emit_all(TEMPLATES "/naive.lua", false);
}

static void test_emit_all_smem(void **state) {
  (void)state;
  emit_all(TEMPLATES "/smem_tiled.lua", true);
}

static void test_emit_details(void **state) {
  (void)state;
  gen_template *t = load_ok(TEMPLATES "/smem_tiled.lua");
  gen_config cfg;
  gen_kernel a, b;
  ut_err e;
  assert_int_equal(gen_config_parse(t, "tile=16,pad=1,unroll=4,rpt=2", &cfg, &e), MMT_OK);
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &a, &e), MMT_OK);
  assert_string_equal(a.kernel_name, "mmt_smem_tiled_nn_t16_p1_u4_r2");
  assert_non_null(strstr(a.source, "#define TILE 16"));
  assert_non_null(strstr(a.source, "#pragma unroll 4"));
  assert_null(strstr(a.source, "${")); /* every placeholder substituted */
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &b, &e), MMT_OK);
  assert_string_equal(a.source, b.source); /* deterministic: the cache key depends on it */
  gen_kernel_clear(&a);
  gen_kernel_clear(&b);
  gen_kernel_clear(NULL);
  assert_int_equal(gen_emit(t, &cfg, "f64", "nn", &a, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "f64"));
  assert_int_equal(gen_emit(t, &cfg, "f32", "xy", &a, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "layout 'xy'"));
  /* The layout is part of the kernel: its name and source differ. */
  assert_int_equal(gen_emit(t, &cfg, "f32", "tn", &a, &e), MMT_OK);
  assert_string_equal(a.kernel_name, "mmt_smem_tiled_tn_t16_p1_u4_r2");
  assert_non_null(strstr(a.source, "#define A_T 1"));
  assert_non_null(strstr(a.source, "#define B_T 0"));
  gen_kernel_clear(&a);
  cfg.v[0] = 12;
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &a, &e), MMT_ERR_INVALID_ARG);
  gen_free(t);
}

static void test_grid_eval(void **state) {
  (void)state;
  unsigned g[3];
  ut_err e;
  const gen_grid_dim smem[3] = {{'N', 32, 1}, {'M', 32, 1}, {0, 1, 1}};
  assert_int_equal(gen_grid_eval(smem, 17, 33, 65, 132, g, &e), MMT_OK);
  assert_int_equal(g[0], 2);
  assert_int_equal(g[1], 1);
  assert_int_equal(g[2], 1);
  const gen_grid_dim naive[3] = {{'N', 16, 1}, {'M', 8, 1}, {0, 1, 1}};
  assert_int_equal(gen_grid_eval(naive, 17, 33, 65, 132, g, &e), MMT_OK);
  assert_int_equal(g[0], 3);
  assert_int_equal(g[1], 3);
  const gen_grid_dim kdim[3] = {{'K', 64, 1}, {0, 5, 1}, {'M', 1, 1}};
  assert_int_equal(gen_grid_eval(kdim, 3, 1, 65, 132, g, &e), MMT_OK);
  assert_int_equal(g[0], 2);
  assert_int_equal(g[1], 5);
  assert_int_equal(g[2], 3);
  assert_int_equal(gen_grid_eval(naive, 0, 33, 65, 132, g, &e), MMT_OK);
  assert_int_equal(g[1], 0);
  /* hardware limits: y < 65536, x < 2^31 */
  const gen_grid_dim rows[3] = {{'N', 1, 1}, {'M', 1, 1}, {0, 1, 1}};
  assert_int_equal(gen_grid_eval(rows, 65535, 1, 1, 132, g, &e), MMT_OK);
  assert_int_equal(gen_grid_eval(rows, 65536, 1, 1, 132, g, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "grid.y"));
  assert_int_equal(gen_grid_eval(rows, 1, (int64_t)1 << 31, 1, 132, g, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_grid_eval(rows, 1, ((int64_t)1 << 31) - 1, 1, 132, g, &e), MMT_OK);
  assert_int_equal(gen_grid_eval(rows, -1, 1, 1, 132, g, &e), MMT_ERR_INVALID_ARG);
  const gen_grid_dim bad[3] = {{'Q', 1, 1}, {'M', 1, 1}, {0, 1, 1}};
  assert_int_equal(gen_grid_eval(bad, 1, 1, 1, 132, g, &e), MMT_ERR_INVALID_ARG);
  /* per SM: blocks * sm_count whatever the size; an empty C launches nothing; the SM count is
   * required */
  const gen_grid_dim persistent[3] = {{'S', 2, 1}, {0, 1, 1}, {0, 1, 1}};
  assert_int_equal(gen_grid_eval(persistent, 1, 1, 1, 114, g, &e), MMT_OK);
  assert_int_equal(g[0], 228);
  assert_int_equal(g[1], 1);
  assert_int_equal(gen_grid_eval(persistent, 100000, 100000, 7, 132, g, &e), MMT_OK);
  assert_int_equal(g[0], 264);
  assert_int_equal(gen_grid_eval(persistent, 0, 5, 5, 132, g, &e), MMT_OK);
  assert_int_equal(g[0], 0);
  assert_int_equal(gen_grid_eval(persistent, 5, 5, 5, 0, g, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "SM count"));
}

static void test_requires_met(void **state) {
  (void)state;
  gen_requires r = {1, 1, 1, 4, false, false};
  gen_problem p = {"f32", "nn", 17, 33, 65, 65, 33, 33, 4, NULL, 1};
  assert_true(gen_requires_met(&r, &p));
  p.align_bytes = 2;
  assert_false(gen_requires_met(&r, &p));
  p.align_bytes = 16;
  assert_true(gen_requires_met(&r, &p));
  p.lda = 64; /* lda < K */
  assert_false(gen_requires_met(&r, &p));
  p.lda = 65;
  p.ldb = 32; /* ldb < N */
  assert_false(gen_requires_met(&r, &p));
  p.ldb = 33;
  p.ldc = 32; /* ldc < N */
  assert_false(gen_requires_met(&r, &p));
  p.ldc = 40;
  assert_true(gen_requires_met(&r, &p));
  gen_requires tiles = {16, 8, 4, 16, false, false};
  assert_false(gen_requires_met(&tiles, &p)); /* 17 is not a multiple of 16 */
  p.m = 32;
  assert_false(gen_requires_met(&tiles, &p)); /* 33 is not a multiple of 8 */
  p.n = 40;
  p.ldb = 40;
  assert_false(gen_requires_met(&tiles, &p)); /* 65 is not a multiple of 4 */
  p.k = 64;
  assert_true(gen_requires_met(&tiles, &p));
  p.align_bytes = 8;
  assert_false(gen_requires_met(&tiles, &p));
  tiles.repack = true; /* the runtime aligns copies: alignment no longer matters ... */
  assert_true(gen_requires_met(&tiles, &p));
  p.k = 65; /* ... multiples still do */
  assert_false(gen_requires_met(&tiles, &p));
  p.k = 64;
  tiles.repack = false;
  /* Transposed operands: A's rows hold M, B's hold K. */
  gen_problem t = {"f32", "tt", 17, 33, 65, 17, 65, 33, 4, NULL, 1};
  assert_true(gen_requires_met(&r, &t));
  t.lda = 16; /* < M */
  assert_false(gen_requires_met(&r, &t));
  t.lda = 17;
  t.ldb = 64; /* < K */
  assert_false(gen_requires_met(&r, &t));
  t.layout = "nt"; /* A's rows hold K again */
  t.ldb = 65;
  assert_false(gen_requires_met(&r, &t));
  t.lda = 65;
  assert_true(gen_requires_met(&r, &t));
  t.layout = "bad";
  assert_false(gen_requires_met(&r, &t));
  int64_t ld[3];
  gen_min_ld("tn", 3, 5, 7, ld);
  assert_true(ld[0] == 3 && ld[1] == 5 && ld[2] == 5);
  gen_min_ld(NULL, 3, 5, 7, ld);
  assert_true(ld[0] == 7 && ld[1] == 5 && ld[2] == 5);
  /* packed rows of 256-byte aligned buffers: the pitches decide the alignment */
  gen_problem q = gen_packed_problem("f32", "nn", 1024, 1024, 1024);
  assert_true(q.lda == 1024 && q.ldb == 1024 && q.ldc == 1024 && q.align_bytes == 16);
  q = gen_packed_problem("f16", "nt", 1000, 1000, 1001); /* A and B rows of 2002 bytes */
  assert_true(q.lda == 1001 && q.ldb == 1001 && q.ldc == 1000 && q.align_bytes == 2);
  assert_string_equal(q.dtype, "f16");
  assert_string_equal(q.layout, "nt");
  int64_t rows[3]; /* A t: K rows, B n: K rows, C: M rows */
  gen_stored_rows("tn", 3, 5, 7, rows);
  assert_true(rows[0] == 7 && rows[1] == 7 && rows[2] == 3);
  gen_stored_rows("nt", 3, 5, 7, rows);
  assert_true(rows[0] == 3 && rows[1] == 5 && rows[2] == 3);
  assert_int_equal(gen_layout_index("tt"), 3);
  assert_int_equal(gen_layout_index("t"), -1);
  assert_int_equal(gen_layout_index(NULL), -1);
}

/* Sizes far past what mmt_gemm accepts (kernels take int; a database's row may hold any
 * int64): the packed problem, the pitches of one row and the grid stay well defined (the
 * sanitized build fails on an overflow) and follow their rules. */
static void test_huge_sizes(void **state) {
  (void)state;
  const int64_t m = (int64_t)1 << 62, k = INT64_MAX;
  /* A's rows of K floats: 4 * (2^63 - 1) bytes, 4-byte aligned; B's and C's of 4096 */
  gen_problem q = gen_packed_problem("f32", "nn", m, 4096, k);
  assert_true(q.lda == k && q.ldb == 4096 && q.ldc == 4096 && q.align_bytes == 4);
  /* C of one row too wide for int keeps its width as pitch; A's one row of 64 is padded */
  q = gen_packed_problem("f16", "nn", 1, INT64_MAX, 64);
  assert_true(q.lda == 64 && q.ldb == INT64_MAX && q.ldc == INT64_MAX && q.align_bytes == 2);
  int64_t ld[3] = {0, 0, 0};
  gen_one_row_pitches("tn", INT64_MAX, 1, 1, ld); /* A: one row of M, C: M rows of 1 */
  assert_true(ld[0] == INT64_MAX && ld[1] == 16 && ld[2] == 0);
  /* the grid: past the hardware's limit, refused before its rounding to whole clusters */
  unsigned g[3];
  ut_err e;
  const gen_grid_dim pairs[3] = {{'N', 1, 2}, {'M', 1, 2}, {0, 1, 1}};
  assert_int_equal(gen_grid_eval(pairs, 1, INT64_MAX, 1, 132, g, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "grid.x"));
  assert_int_equal(gen_grid_eval(pairs, m, 1, 1, 132, g, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "grid.y"));
  /* 2^31 - 1 columns fit; in clusters of two they would be 2^31 */
  assert_int_equal(gen_grid_eval(pairs, 1, INT32_MAX, 1, 132, g, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_grid_eval(pairs, 1, INT32_MAX - 1, 1, 132, g, &e), MMT_OK);
  assert_int_equal(g[0], INT32_MAX - 1);
  assert_int_equal(g[1], 2);
}

static void test_dtype_size(void **state) {
  (void)state;
  assert_int_equal(gen_dtype_size("f32"), 4);
  assert_int_equal(gen_dtype_size("f64"), 8);
  assert_int_equal(gen_dtype_size("f16"), 2);
  assert_int_equal(gen_dtype_size("bf16"), 2);
  assert_int_equal(gen_dtype_size("f8"), 0);
  assert_int_equal(gen_dtype_size(NULL), 0);
}

/* A scratch folder for files the tests write; removed by rm_dir. */
static void make_dir(char *dir) {
  strcpy(dir, "/tmp/mmt_gen_XXXXXX");
  assert_non_null(mkdtemp(dir));
}

static void write_text(const char *dir, const char *file, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  assert_int_equal(ut_write_file_atomic(path, text, strlen(text), NULL), MMT_OK);
}

static void rm_dir(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* gen_config_at decodes idx of a space with value lists of `counts` (values 10 * index + 1) as
 * divisions do. */
static void expect_config_at(gen_template *t, const int *counts, int n, uint64_t idx) {
  gen_config cfg;
  gen_config_at(t, idx, &cfg);
  for (int i = n - 1; i >= 0; i--) {
    assert_int_equal(cfg.v[i], 10 * (int64_t)(idx % (uint64_t)counts[i]) + 1);
    idx /= (uint64_t)counts[i];
  }
}

/* A space of 29 million configs: below 2^24 configs gen_config_at divides by multiplying
 * (gen_int.h), above by dividing. */
static void test_config_at_large(void **state) {
  (void)state;
  static const int counts[] = {64, 63, 61, 59, 2};
  char dir[64], path[160], text[4096];
  int len = snprintf(text, sizeof text, "return {name = \"big\", dtypes = {\"f32\"}, params = {");
  for (int i = 0; i < COUNT(counts); i++) {
    len += snprintf(text + len, sizeof text - (size_t)len, "%s{name = \"p%d\", values = {",
                    i ? ", " : "", i);
    for (int j = 0; j < counts[i]; j++)
      len += snprintf(text + len, sizeof text - (size_t)len, "%s%d", j ? ", " : "", 10 * j + 1);
    len += snprintf(text + len, sizeof text - (size_t)len, "}}");
  }
  snprintf(text + len, sizeof text - (size_t)len, "},\n  emit = function() return {} end}\n");
  make_dir(dir);
  write_text(dir, "big.lua", text);
  snprintf(path, sizeof path, "%s/big.lua", dir);
  gen_template *t = load_ok(path);
  const uint64_t size = gen_space_size(t), edge = 1u << 24;
  assert_true(size > edge);
  for (uint64_t idx = 0; idx < size; idx += 997) expect_config_at(t, counts, COUNT(counts), idx);
  const uint64_t ends[] = {edge - 2, edge - 1, edge, edge + 1, size - 1};
  for (int i = 0; i < COUNT(ends); i++) expect_config_at(t, counts, COUNT(counts), ends[i]);
  gen_free(t);
  rm_dir(dir);
}

static const char override_naive[] =
    "return {name = \"naive\", description = \"override\", dtypes = {\"f32\"},\n"
    "  params = {{name = \"x\", values = {1}}},\n"
    "  emit = function() return {} end}\n";

static void test_search_path(void **state) {
  (void)state;
  char dir[64], path[4096], env[256];
  ut_err e;
  make_dir(dir);
  write_text(dir, "naive.lua", override_naive);
  write_text(dir, "extra.lua", "return 1");
  write_text(dir, "bad-name.lua", "return 1");
  write_text(dir, "notes.txt", "not a template");
  snprintf(env, sizeof env, "/nonexistent/mmt:%s", dir);
  setenv("MMTUNE_TEMPLATE_PATH", env, 1);

  assert_int_equal(gen_find("naive", path, sizeof path, &e), MMT_OK);
  snprintf(env, sizeof env, "%s/naive.lua", dir);
  assert_string_equal(path, env); /* the override comes first */
  assert_int_equal(gen_find("smem_tiled", path, sizeof path, &e), MMT_OK);
  assert_string_equal(path, TEMPLATES "/smem_tiled.lua");
  gen_template *t = NULL;
  assert_int_equal(gen_load_named("naive", &t, &e), MMT_OK);
  assert_string_equal(gen_description(t), "override");
  gen_free(t);

  assert_int_equal(gen_find("no_such_template", path, sizeof path, &e), MMT_ERR_NOT_FOUND);
  assert_non_null(strstr(e.msg, "no_such_template"));
  assert_non_null(strstr(e.msg, dir)); /* the message lists the folders searched */
  assert_non_null(strstr(e.msg, TEMPLATES));
  assert_int_equal(gen_load_named("no_such_template", &t, &e), MMT_ERR_NOT_FOUND);
  assert_null(t);
  assert_int_equal(gen_find("../etc/passwd", path, sizeof path, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_find("naive.lua", path, sizeof path, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_find("", path, sizeof path, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_find(NULL, path, sizeof path, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(gen_find("naive", path, 8, &e), MMT_ERR_INVALID_ARG); /* path too small */

  char **names = NULL;
  int count = 0;
  assert_int_equal(gen_list(&names, &count, &e), MMT_OK);
  int naive = 0, smem = 0, extra = 0;
  for (int i = 0; i < count; i++) {
    if (i > 0) assert_true(strcmp(names[i - 1], names[i]) < 0); /* sorted, distinct */
    naive += strcmp(names[i], "naive") == 0;
    smem += strcmp(names[i], "smem_tiled") == 0;
    extra += strcmp(names[i], "extra") == 0;
    assert_null(strstr(names[i], "-"));
  }
  assert_int_equal(naive + smem + extra, 3);
  gen_names_free(names, count);
  gen_names_free(NULL, 0);

  setenv("MMTUNE_TEMPLATE_PATH", "", 1); /* empty: no extra folders */
  assert_int_equal(gen_find("naive", path, sizeof path, &e), MMT_OK);
  assert_string_equal(path, TEMPLATES "/naive.lua");
  assert_int_equal(gen_find("extra", path, sizeof path, &e), MMT_ERR_NOT_FOUND);
  rm_dir(dir);
}

/* mmt.snippet: snippets/<name>.cu beside the template, then on the search path; at load time
 * only; the template's hash covers each snippet it read. */
static const char snippet_user[] =
    "local body = mmt.snippet(\"helper\")\n"
    "local shared = mmt.snippet(\"elem_f32\")\n" /* a built-in one, from the search path */
    "return {name = \"sn\", dtypes = {\"f32\"}, params = {{name = \"x\", values = {1}}},\n"
    "  description = body .. \"|\" .. #shared,\n"
    "  emit = function() return {source = mmt.snippet(\"helper\"), kernel = \"k\"} end}\n";

static void test_snippets(void **state) {
  (void)state;
  char dir[64], sub[128], path[160], first[17];
  ut_err e;
  make_dir(dir);
  snprintf(sub, sizeof sub, "%s/snippets", dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  write_text(dir, "sn.lua", snippet_user);
  write_text(dir, "snippets/helper.cu", "one");
  snprintf(path, sizeof path, "%s/sn.lua", dir);
  setenv("MMTUNE_TEMPLATE_PATH", "", 1);
  gen_template *t = load_ok(path);
  assert_non_null(strstr(gen_description(t), "one|"));
  ut_copy(first, sizeof first, gen_source_hash(t));
  char *text = NULL, hex[17];
  size_t len = 0;
  assert_int_equal(ut_read_file(path, &text, &len, NULL), MMT_OK);
  ut_hash64_hex(ut_hash64(text, len), hex);
  assert_string_not_equal(first, hex); /* more than the file's own text */
  free(text);
  /* calling it from emit is refused: the hash could no longer cover what it returns */
  gen_config c;
  gen_kernel k;
  gen_config_default(t, &c);
  assert_int_equal(gen_emit(t, &c, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "while the template loads"));
  gen_free(t);
  /* the same template with another snippet text has another hash; the same text, the same */
  write_text(dir, "snippets/helper.cu", "two");
  t = load_ok(path);
  assert_string_not_equal(gen_source_hash(t), first);
  gen_free(t);
  write_text(dir, "snippets/helper.cu", "one");
  t = load_ok(path);
  assert_string_equal(gen_source_hash(t), first);
  gen_free(t);
  /* a missing snippet and a bad name are one-line template errors naming them */
  write_text(dir, "snippets/helper.cu", "one");
  write_text(dir, "sn.lua", "local x = mmt.snippet(\"nowhere\")\nreturn 1");
  assert_int_equal(gen_load(path, &t, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "snippet 'nowhere' not found"));
  write_text(dir, "sn.lua", "local x = mmt.snippet(\"../sn\")\nreturn 1");
  assert_int_equal(gen_load(path, &t, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "invalid snippet name"));
  /* a snippet over 256 KiB is refused, naming the file */
  char *big = malloc((300u << 10) + 1);
  assert_non_null(big);
  memset(big, 'x', 300u << 10);
  big[300u << 10] = '\0';
  write_text(dir, "snippets/big.cu", big);
  free(big);
  write_text(dir, "sn.lua", "local x = mmt.snippet(\"big\")\nreturn 1");
  assert_int_equal(gen_load(path, &t, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "big.cu cannot be read or is over 256 KiB"));
  rm_dir(dir);
}

static void test_load_io_error(void **state) {
  (void)state;
  expect_load_fails(BAD "does_not_exist.lua", MMT_ERR_IO, "does_not_exist.lua", NULL);
}

static void test_sandbox_no_escape(void **state) {
  (void)state;
  unlink("/tmp/mmt_sandbox_escaped");
  expect_load_fails(BAD "sb_os.lua", MMT_ERR_TEMPLATE, "sb_os.lua:2:", "undefined global 'os'",
                    "stack traceback", NULL);
  assert_int_not_equal(access("/tmp/mmt_sandbox_escaped", F_OK), 0);
  assert_good_still_works();
  expect_load_fails(BAD "sb_io.lua", MMT_ERR_TEMPLATE, "sb_io.lua:2:", "undefined global 'io'",
                    NULL);
  assert_good_still_works();
  expect_load_fails(BAD "sb_require.lua", MMT_ERR_TEMPLATE, "undefined global 'require'", NULL);
  expect_load_fails(BAD "sb_dofile.lua", MMT_ERR_TEMPLATE, "undefined global 'dofile'", NULL);
  expect_load_fails(BAD "sb_load.lua", MMT_ERR_TEMPLATE, "undefined global 'load'", NULL);
  assert_good_still_works();
}

static void test_sandbox_strict_globals(void **state) {
  (void)state;
  expect_load_fails(BAD "sb_undefined.lua", MMT_ERR_TEMPLATE,
                    "sb_undefined.lua:2:", "undefined global 'default_tile_size'", NULL);
  expect_load_fails(BAD "sb_new_global.lua", MMT_ERR_TEMPLATE,
                    "sb_new_global.lua:2:", "assignment to undefined global 'helper'", NULL);
  assert_good_still_works();
}

static void test_sandbox_instruction_limit(void **state) {
  (void)state;
  expect_load_fails(BAD "sb_loop_load.lua", MMT_ERR_TEMPLATE_LIMIT, "instruction limit exceeded",
                    "infinite loop", "sb_loop_load.lua:", NULL);
  assert_good_still_works();
  expect_load_fails(BAD "sb_loop_pcall.lua", MMT_ERR_TEMPLATE_LIMIT, "instruction limit", NULL);
  assert_good_still_works();

  /* inside emit: the template loads, each emit call gets its own budget and fails alone */
  gen_template *t = load_ok(BAD "sb_loop_emit.lua");
  gen_config cfg;
  gen_kernel k;
  ut_err e;
  bool valid = false;
  gen_config_default(t, &cfg);
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE_LIMIT);
  assert_non_null(strstr(e.msg, "instruction limit exceeded"));
  assert_non_null(strstr(e.msg, "sb_loop_emit.lua:"));
  /* the same state still answers calls that stay within budget */
  assert_int_equal(gen_check(t, &cfg, NULL, &valid, NULL, 0, &e), MMT_OK);
  assert_true(valid);
  gen_free(t);
  assert_good_still_works();
}

static void test_sandbox_memory_limit(void **state) {
  (void)state;
  expect_load_fails(BAD "sb_mem_string.lua", MMT_ERR_TEMPLATE_LIMIT, "memory limit of 64 MiB",
                    NULL);
  assert_good_still_works();
  expect_load_fails(BAD "sb_mem_table.lua", MMT_ERR_TEMPLATE_LIMIT, "memory limit of 64 MiB", NULL);
  assert_good_still_works();
}

static void test_sandbox_finalizer(void **state) {
  (void)state;
  expect_load_fails(BAD "sb_gc.lua", MMT_ERR_TEMPLATE,
                    "sb_gc.lua:3:", "__gc finalizers are not allowed", NULL);
  gen_template *t = load_ok(BAD "sb_gc_late.lua");
  gen_config cfg;
  gen_kernel k;
  gen_config_default(t, &cfg);
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, NULL), MMT_OK);
  gen_kernel_clear(&k);
  double start = ut_now_seconds();
  gen_free(t); /* its looping __gc was never armed: closing returns at once */
  assert_true(ut_now_seconds() - start < 5.0);
  assert_good_still_works();
}

static void test_syntax_and_declaration(void **state) {
  (void)state;
  expect_load_fails(BAD "sb_syntax.lua", MMT_ERR_TEMPLATE, "sb_syntax.lua:3:", NULL);
  expect_load_fails(BAD "sb_bad_values.lua", MMT_ERR_TEMPLATE,
                    "params[2].values must be a non-empty list of integers", "sb_bad_values", NULL);
  assert_good_still_works();
}

/* Declarations that are wrong in one field each, written to <dir>/decl.lua. */
static const struct {
  const char *text;
  const char *expect;
} bad_decls[] = {
    {"return 5", "must return a table"},
    {"error('kaboom')", "decl.lua:1: kaboom"},
    {"\x1bLua", "binary"},
    {"return {name = 'other', dtypes = {'f32'}, params = {{name = 'a', values = {1}}},"
     " emit = function() end}",
     "must equal the file's base name 'decl'"},
    {"return {name = 'decl', params = {{name = 'a', values = {1}}}, emit = function() end}",
     "dtypes must be a list"},
    {"return {name = 'decl', dtypes = {'f8'}, params = {{name = 'a', values = {1}}},"
     " emit = function() end}",
     "dtypes[1]"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {}, emit = function() end}",
     "params must be a list"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1}},"
     " {name = 'b', values = {}}}, emit = function() end}",
     "params[2].values must be a non-empty"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {'8'}}},"
     " emit = function() end}",
     "params[1].values must be a non-empty list of integers"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1, 1}}},"
     " emit = function() end}",
     "lists 1 twice"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1}},"
     " {name = 'a', values = {2}}}, emit = function() end}",
     "params[2].name 'a' is used twice"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = '1a', values = {1}}},"
     " emit = function() end}",
     "params[1].name"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1}}},"
     " default = {zz = 1}, emit = function() end}",
     "default.zz is not a parameter"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1}}},"
     " default = {a = 2}, emit = function() end}",
     "default.a must be one of params[1].values"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1}}},"
     " constraints = 5, emit = function() end}",
     "constraints must be a function"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1}}}}",
     "emit must be a function"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1}}},"
     " contraints = function() end, emit = function() end}",
     "unknown field 'contraints'"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1}}},"
     " constraints = function() return false, 'nope' end, emit = function() end}",
     "default config a=1 fails its constraints: nope"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1}}},"
     " constraints = function() error('c-fail') end, emit = function() end}",
     "decl.lua:1: c-fail"},
    {"return {name = 'decl', dtypes = {'f32'}, params = {{name = 'a', values = {1}}},"
     " constraints = function() return 1 end, emit = function() end}",
     "constraints must return a boolean"},
};

static void test_declaration_errors(void **state) {
  (void)state;
  char dir[64], path[128];
  make_dir(dir);
  snprintf(path, sizeof path, "%s/decl.lua", dir);
  for (size_t i = 0; i < sizeof bad_decls / sizeof bad_decls[0]; i++) {
    write_text(dir, "decl.lua", bad_decls[i].text);
    expect_load_fails(path, MMT_ERR_TEMPLATE, bad_decls[i].expect, NULL);
  }
  rm_dir(dir);
  assert_good_still_works();
}

static void test_malformed_emit(void **state) {
  (void)state;
  static const char *const expect[] = {
      NULL,
      "no source",
      "block.x",
      "2048 threads",
      "grid.x",
      "grid.x",
      "does not contain kernel 'k_missing'",
      "bad kernel",
      "requires.align = 3",
      "string instead of a table",
      "unknown field 'sorce'",
      "sb_bad_emit.lua:23: boom",
      "shared_bytes",
      "exclusive that is not a boolean",
      "arch that is not an architecture",
      "tensor_maps[1].operand",
      "tensor_maps[1].box that is not",
      "tensor_maps[1].swizzle",
      "256 bytes must be a multiple of 16 and at most the swizzle",
      "without requires.align = 16",
      "repack that is not a boolean",
      "{\"SM\", blocks in [1, 64]}",
      "dependent_launch that is not a boolean",
      "both exclusive and dependent_launch",
      "workspace that is not a multiple of 16 in 0..262144",
      "workspace without exclusive",
      "workspace that is not a multiple of 16 in 0..262144",
  };
  gen_template *t = load_ok(BAD "sb_bad_emit.lua");
  gen_kernel k;
  ut_err e;
  gen_config cfg;
  gen_config_default(t, &cfg);
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_OK);
  assert_false(k.exclusive);
  assert_false(k.dependent_launch);
  gen_kernel_clear(&k);
  for (int c = 1; c < (int)(sizeof expect / sizeof expect[0]); c++) {
    cfg.v[0] = c;
    memset(&k, 0x5a, sizeof k);
    assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
    if (!strstr(e.msg, expect[c])) fprintf(stderr, "case %d: %s\n", c, e.msg);
    assert_non_null(strstr(e.msg, expect[c]));
    assert_non_null(strstr(e.msg, "sb_bad_emit"));
    assert_int_equal(k.block[0], 0x5a5a5a5a); /* out untouched on failure */
  }
  cfg.v[0] = (int64_t)(sizeof expect / sizeof expect[0]); /* the well-formed workspace kernel */
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_OK);
  assert_true(k.exclusive);
  assert_int_equal(k.workspace_per_block, 4096);
  gen_kernel_clear(&k);
  cfg.v[0]++; /* the well-formed sm_90a kernel */
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_OK);
  assert_int_equal(k.workspace_per_block, 0);
  assert_string_equal(k.arch, "sm_90a");
  assert_true(k.dependent_launch);
  assert_int_equal(k.grid[0].dim, 'S');
  assert_int_equal(k.grid[0].tile, 2);
  assert_true(k.requires.repack);
  assert_true(k.requires.c_any_align);
  assert_int_equal(k.ntensor_maps, 2);
  assert_int_equal(k.tensor_maps[0].operand, 'A');
  assert_int_equal(k.tensor_maps[0].box[0], 32);
  assert_int_equal(k.tensor_maps[0].box[1], 128);
  assert_int_equal(k.tensor_maps[0].swizzle, 128);
  assert_int_equal(k.tensor_maps[1].operand, 'B');
  assert_int_equal(k.tensor_maps[1].swizzle, 0);
  gen_kernel_clear(&k);
  cfg.v[0]++; /* store_any_align means nothing without repack */
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "store_any_align without repack"));
  cfg.v[0]++;
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "store_any_align that is not a boolean"));
  cfg.v[0]++; /* a repack kernel's module holds the runtime's copies */
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "repack without " GEN_COPY_ROWS_KERNEL " in the source"));
  static const char *const cluster_errors[] = {
      "cluster that is not a table", "cluster.y that is not an integer in [1, 8]",
      "a cluster of 16 blocks (more than 8)", "cluster.x on a per-SM grid axis",
      "cluster without an arch of sm_90", "cluster without an arch of sm_90"};
  for (size_t i = 0; i < sizeof cluster_errors / sizeof cluster_errors[0]; i++) {
    cfg.v[0]++;
    assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
    if (!strstr(e.msg, cluster_errors[i])) fprintf(stderr, "cluster case %zu: %s\n", i, e.msg);
    assert_non_null(strstr(e.msg, cluster_errors[i]));
  }
  cfg.v[0]++; /* clusters of two along y: the grid's y rounded up to whole clusters */
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_OK);
  assert_int_equal(k.grid[0].cluster, 1);
  assert_int_equal(k.grid[1].cluster, 2);
  assert_int_equal(gen_kernel_cluster_blocks(&k), 2);
  unsigned g[3];
  assert_int_equal(gen_grid_eval(k.grid, 3, 40, 1, 132, g, &e), MMT_OK);
  assert_int_equal(g[0], 2);
  assert_int_equal(g[1], 4); /* 3 rows of 1, in clusters of 2 */
  assert_int_equal(gen_grid_eval(k.grid, 4, 40, 1, 132, g, &e), MMT_OK);
  assert_int_equal(g[1], 4);
  assert_false(k.epilogue_overlap);
  gen_kernel_clear(&k);
  cfg.v[0]++;
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "epilogue_overlap that is not a boolean"));
  cfg.v[0]++;
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_OK);
  assert_true(k.epilogue_overlap);
  assert_false(k.walks_experts);
  gen_kernel_clear(&k);
  cfg.v[0]++;
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "walks_experts that is not a boolean"));
  cfg.v[0]++;
  assert_int_equal(gen_emit(t, &cfg, "f32", "nn", &k, &e), MMT_ERR_TEMPLATE);
  assert_non_null(strstr(e.msg, "walks_experts for a kernel that is not a masked grouped op's"));
  gen_free(t);
  assert_good_still_works();
}

/* Runs probe `what` of sb_probe.lua and returns the reason it reports. */
static const char *probe(gen_template *t, int what, const gen_problem *p) {
  static char why[512];
  gen_config cfg;
  bool valid = true;
  ut_err e;
  gen_config_default(t, &cfg);
  cfg.v[0] = what;
  assert_int_equal(gen_check(t, &cfg, p, &valid, why, sizeof why, &e), MMT_OK);
  assert_false(valid);
  return why;
}

static void test_sandbox_probes(void **state) {
  (void)state;
  gen_template *t = load_ok(BAD "sb_probe.lua");
  assert_string_equal(probe(t, 1, NULL), "false"); /* _G's metatable is protected */
  assert_string_equal(probe(t, 2, NULL), "false"); /* and cannot be removed */
  assert_string_equal(probe(t, 3, NULL), "nilnilnil");
  assert_string_equal(probe(t, 4, NULL), "nilnilnilnilnil");
  assert_string_equal(probe(t, 5, NULL), "4,4,0,-3");
  assert_string_equal(probe(t, 6, NULL), "truefalsefalse");
  assert_string_equal(probe(t, 7, NULL), "a1bzc$d");
  assert_non_null(strstr(probe(t, 8, NULL), "no value for '${nope}'"));
  assert_string_equal(probe(t, 9, NULL), "float4");
  assert_non_null(strstr(probe(t, 10, NULL), "unknown dtype 'f8'"));
  assert_non_null(strstr(probe(t, 11, NULL), "sb_probe.lua:24: undefined global 'undefined_x'"));
  assert_non_null(strstr(probe(t, 12, NULL), "divisor must be >= 1"));
  assert_string_equal(probe(t, 13, NULL), "no problem");
  gen_problem p = {NULL, NULL, 17, 33, 65, 66, 34, 35, 4, NULL, 1};
  assert_string_equal(probe(t, 13, &p), "17,33,65,66,34,35,4,f32,nn");
  /* A template without `layouts` serves nn only: other layouts are refused before Lua. */
  assert_true(gen_supports_layout(t, "nn"));
  assert_false(gen_supports_layout(t, "tn"));
  p.layout = "tn";
  assert_string_equal(probe(t, 13, &p), "layout tn not supported");
  gen_free(t);
}

/* A problem's constraints only add to those with no problem (the tuner's plan checks a
 * problem against the configs valid with none, engine/plan.c): for every built-in template,
 * on problems of each family's kinds (odd, decode, short K; an op, a batch), every config
 * valid for the problem is valid with none, in the problem's dtype, layout and op.  Every
 * STRIDE-th config of the space (a template's space can be 663,552 configs), from a shifting
 * start so that the problems see different ones. */
static void test_problem_constraints_refine(void **state) {
  (void)state;
  enum { STRIDE = 7 };
  static const char *const names[] = {"naive",  "smem_tiled", "reg_tiled", "mma_sync",
                                      "skinny", "skinny_mma", "wgmma"};
  static const struct {
    const char *layout;
    int64_t m, n, k, batch;
    const char *op; /* NULL: the plain GEMM */
  } probs[] = {
      {"nn", 1000, 999, 1001, 1, NULL},
      {"nt", 16, 4096, 4096, 1, NULL},
      {"nt", 4096, 4096, 64, 1, "bias=col,act=silu"},
      {"nn", 256, 128, 1024, 8, "out=f32,residual"},
      {"nt", 2048, 4096, 4096, 1, "act=gelu_tanh,gated"},
  };
  int checked = 0;
  for (int ti = 0; ti < COUNT(names); ti++) {
    gen_template *t = load_builtin(names[ti]);
    for (int pi = 0; pi < COUNT(probs); pi++) {
      const char *dtype = gen_dtype(t, pi % gen_dtype_count(t));
      if (!strcmp(dtype, "e4m3") || !strcmp(dtype, "e5m2")) dtype = gen_dtype(t, 0);
      if (!gen_supports_layout(t, probs[pi].layout) || (probs[pi].op && !gen_has_epilogues(t)))
        continue;
      gen_op op;
      ut_err e = {{0}};
      if (probs[pi].op) assert_int_equal(gen_op_parse(probs[pi].op, dtype, &op, &e), MMT_OK);
      gen_problem p =
          gen_packed_op_problem(dtype, probs[pi].layout, probs[pi].m, probs[pi].n, probs[pi].k,
                                probs[pi].op ? &op : NULL, probs[pi].batch);
      for (uint64_t i = (uint64_t)pi; i < gen_space_size(t); i += STRIDE) {
        gen_config cfg;
        gen_config_at(t, i, &cfg);
        bool for_p = false, for_any = false;
        assert_int_equal(gen_check(t, &cfg, &p, &for_p, NULL, 0, &e), MMT_OK);
        if (!for_p) continue;
        assert_int_equal(gen_check_op_for(t, &cfg, dtype, probs[pi].layout,
                                          probs[pi].op ? &op : NULL, &for_any, NULL, 0, &e),
                         MMT_OK);
        if (!for_any) {
          char text[512];
          gen_config_format(t, &cfg, text, sizeof text, &e);
          fail_msg("%s %s: valid for %s %lldx%lldx%lld %s, not with no problem", names[ti], text,
                   dtype, (long long)p.m, (long long)p.n, (long long)p.k,
                   probs[pi].op ? probs[pi].op : "");
        }
        checked++;
      }
    }
    gen_free(t);
  }
  assert_true(checked > 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_load_builtins),
      cmocka_unit_test(test_source_hash),
      cmocka_unit_test(test_config_enumeration),
      cmocka_unit_test(test_config_at_large),
      cmocka_unit_test(test_config_default),
      cmocka_unit_test(test_config_parse),
      cmocka_unit_test(test_constraints_count),
      cmocka_unit_test(test_constraints_problem),
      cmocka_unit_test(test_emit_all_naive),
      cmocka_unit_test(test_emit_all_smem),
      cmocka_unit_test(test_emit_details),
      cmocka_unit_test(test_grid_eval),
      cmocka_unit_test(test_requires_met),
      cmocka_unit_test(test_huge_sizes),
      cmocka_unit_test(test_dtype_size),
      cmocka_unit_test(test_search_path),
      cmocka_unit_test(test_load_io_error),
      cmocka_unit_test(test_snippets),
      cmocka_unit_test(test_sandbox_no_escape),
      cmocka_unit_test(test_sandbox_strict_globals),
      cmocka_unit_test(test_sandbox_instruction_limit),
      cmocka_unit_test(test_sandbox_memory_limit),
      cmocka_unit_test(test_sandbox_finalizer),
      cmocka_unit_test(test_syntax_and_declaration),
      cmocka_unit_test(test_declaration_errors),
      cmocka_unit_test(test_malformed_emit),
      cmocka_unit_test(test_sandbox_probes),
      cmocka_unit_test(test_problem_constraints_refine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
