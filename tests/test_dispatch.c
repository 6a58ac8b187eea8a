/*
 * test_dispatch.c -- runtime/rt_choose.c and runtime/mmtune.c: the kernel choice (EXACT,
 * PREDICTED, DEFAULT) against a database written here, the argument checks, the public API on
 * a machine without a GPU, and (with a GPU) mmt_sgemm end to end against a CPU reference.
 *
 * Templates: the real ones (templates/) plus tests/templates_dispatch/ (searched first):
 * kmul4.lua, whose kernel requires K % 4 == 0 and 16-byte alignment and whose constraint
 * refuses N > 4096.  tests/templates_dispatch/refusing/ shadows smem_tiled and naive with
 * templates that accept no problem (for MMT_ERR_UNSUPPORTED).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db.h"
#include "gen.h"
#include "mmtune.h"
#include "rt_choose.h"
#include "rt_device.h"
#include "rt_driver.h"

#define TEMPLATES_DIR MMT_TEST_DIR "/templates_dispatch"
#define DEV "Test GPU"

/* ---- the database fixture ---- */

typedef struct {
  char dir[64];
  char db_path[128];
  db_handle *db;
  char smem_hash[17], naive_hash[17], kmul_hash[17];
  char smem_default[256], naive_default[256], smem_alt[256];
  rt_chooser *ch;
} fixture;

static void hash_and_default(const char *name, char hash[17], char *params, size_t len) {
  gen_template *t = NULL;
  ut_err e;
  gen_config cfg;
  assert_int_equal(gen_load_named(name, &t, &e), MMT_OK);
  snprintf(hash, 17, "%s", gen_source_hash(t));
  gen_config_default(t, &cfg);
  assert_int_equal(gen_config_format(t, &cfg, params, len, &e), MMT_OK);
  gen_free(t);
}

static gen_problem square(int64_t m, int64_t n, int64_t k, int align) {
  return (gen_problem){"f32", "nn", m, n, k, k, n, n, align, NULL, 1};
}

/* A smem_tiled config other than the default that is usable for 4096^3. */
static void smem_alt_config(fixture *f) {
  gen_template *t = NULL;
  ut_err e;
  gen_problem p = square(4096, 4096, 4096, 16);
  assert_int_equal(gen_load_named("smem_tiled", &t, &e), MMT_OK);
  for (uint64_t i = 0; i < gen_space_size(t); i++) {
    gen_config cfg;
    gen_kernel k = {0};
    bool valid = false;
    gen_config_at(t, i, &cfg);
    assert_int_equal(gen_config_format(t, &cfg, f->smem_alt, sizeof f->smem_alt, &e), MMT_OK);
    if (!strcmp(f->smem_alt, f->smem_default)) continue;
    assert_int_equal(gen_check(t, &cfg, &p, &valid, NULL, 0, &e), MMT_OK);
    if (!valid || gen_emit(t, &cfg, "f32", "nn", &k, &e) != MMT_OK) continue;
    valid = gen_requires_met(&k.requires, &p);
    gen_kernel_clear(&k);
    if (valid) break;
  }
  gen_free(t);
  assert_string_not_equal(f->smem_alt, f->smem_default);
}

/* A row of an f32 problem in layout `layout`, its launch shape unknown (the chooser's resolver
 * emits the kernel for it, as for rows written before launch shapes were stored). */
static void insert_in(db_handle *db, const char *layout, const char *device, const char *tname,
                      const char *hash, const char *params, int64_t m, int64_t n, int64_t k,
                      db_status status, double ms) {
  db_result r;
  ut_err e;
  memset(&r, 0, sizeof r);
  snprintf(r.device.name, sizeof r.device.name, "%s", device);
  snprintf(r.device.uuid, sizeof r.device.uuid, "GPU-test");
  r.device.cc_major = 9;
  snprintf(r.nvrtc_version, sizeof r.nvrtc_version, "13.0");
  snprintf(r.template_name, sizeof r.template_name, "%s", tname);
  snprintf(r.template_hash, sizeof r.template_hash, "%s", hash);
  snprintf(r.params, sizeof r.params, "%s", params);
  r.problem = (db_problem){.dtype = "f32", .m = m, .n = n, .k = k};
  snprintf(r.problem.layout, sizeof r.problem.layout, "%s", layout);
  r.status = status;
  r.ms_min = r.ms_median = r.ms_max = ms;
  r.runs = 10;
  r.tflops = 2.0 * (double)m * (double)n * (double)k / (ms * 1e9);
  r.regs = r.shared_bytes = r.local_bytes = -1;
  assert_int_equal(db_insert(db, &r, &e), MMT_OK);
}

static void insert(db_handle *db, const char *device, const char *tname, const char *hash,
                   const char *params, int64_t m, int64_t n, int64_t k, db_status status,
                   double ms) {
  insert_in(db, "nn", device, tname, hash, params, m, n, k, status, ms);
}

static int fixture_setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  ut_err e;
  assert_non_null(f);
  snprintf(f->dir, sizeof f->dir, "/tmp/mmt_dispatch_XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->db_path, sizeof f->db_path, "%s/t.db", f->dir);
  assert_int_equal(db_open(f->db_path, false, &f->db, &e), MMT_OK);
  hash_and_default("smem_tiled", f->smem_hash, f->smem_default, sizeof f->smem_default);
  hash_and_default("naive", f->naive_hash, f->naive_default, sizeof f->naive_default);
  char kmul_default[256];
  hash_and_default("kmul4", f->kmul_hash, kmul_default, sizeof kmul_default);
  smem_alt_config(f);
  db_handle *db = f->db;
  /* 1024^3: the fastest rows are unusable (failed, stale template, other GPU). */
  insert(db, DEV, "smem_tiled", f->smem_hash, f->smem_default, 1024, 1024, 1024, DB_OK, 2.0);
  insert(db, DEV, "naive", f->naive_hash, f->naive_default, 1024, 1024, 1024, DB_OK, 1.5);
  insert(db, DEV, "smem_tiled", f->smem_hash, f->smem_default, 1024, 1024, 1024,
         DB_VERIFY_FAILED, 0.5);
  insert(db, DEV, "smem_tiled", "0123456789abcdef", f->smem_default, 1024, 1024, 1024, DB_OK,
         1.0);
  insert(db, "Other GPU", "smem_tiled", f->smem_hash, f->smem_default, 1024, 1024, 1024, DB_OK,
         0.1);
  insert(db, DEV, "no_such_template", "0123456789abcdef", "x=1", 1024, 1024, 1024, DB_OK, 0.2);
  insert(db, DEV, "smem_tiled", f->smem_hash, f->smem_alt, 4096, 4096, 4096, DB_OK, 80.0);
  insert(db, DEV, "naive", f->naive_hash, f->naive_default, 64, 64, 64, DB_OK, 0.01);
  /* 512^3: kmul4 is fastest but requires K % 4 == 0, 16-byte alignment and N <= 4096. */
  insert(db, DEV, "kmul4", f->kmul_hash, kmul_default, 512, 512, 512, DB_OK, 0.1);
  insert(db, DEV, "naive", f->naive_hash, f->naive_default, 512, 512, 512, DB_OK, 1.0);
  insert(db, DEV, "kmul4", f->kmul_hash, kmul_default, 512, 8192, 512, DB_OK, 0.1);
  insert(db, DEV, "naive", f->naive_hash, f->naive_default, 512, 8192, 512, DB_OK, 9.0);
  /* 256^3: an sm_90a-only kernel is fastest (see test_device_arch). */
  char arch_hash[17], arch_default[256];
  hash_and_default("arch90a", arch_hash, arch_default, sizeof arch_default);
  insert(db, DEV, "arch90a", arch_hash, arch_default, 256, 256, 256, DB_OK, 0.01);
  insert(db, DEV, "naive", f->naive_hash, f->naive_default, 256, 256, 256, DB_OK, 0.5);
  assert_int_equal(rt_chooser_new(NULL, 0, &f->ch, &e), MMT_OK);
  *state = f;
  return 0;
}

static int fixture_teardown(void **state) {
  fixture *f = *state;
  rt_chooser_free(f->ch);
  db_close(f->db);
  /* every file the tests left (their databases and SQLite's -wal and -shm beside them) */
  DIR *d = opendir(f->dir);
  for (struct dirent *ent; d && (ent = readdir(d));) {
    char path[512];
    if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", f->dir, ent->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(f->dir);
  free(f);
  return 0;
}

/* Chooses for p on device dev and checks kind and template. */
static void expect_choice(fixture *f, db_handle *db, const char *dev, gen_problem p,
                          mmt_choice_kind kind, const char *tname, rt_choice *c) {
  ut_err e = {{0}};
  memset(c, 0, sizeof *c);
  assert_int_equal(rt_choose(f->ch, db, dev, &p, c, &e), MMT_OK);
  assert_int_equal(c->kind, kind);
  assert_string_equal(c->template_name, tname);
  assert_non_null(c->tmpl);
  assert_non_null(c->spec.source);
  assert_non_null(c->spec.kernel_name);
  assert_int_equal(c->has_record, kind != MMT_CHOICE_DEFAULT);
}

/* ---- choice ---- */

static void test_exact_skips_unusable_rows(void **state) {
  fixture *f = *state;
  rt_choice c;
  mmt_choice d;
  gen_problem p = square(1024, 1024, 1024, 16);
  expect_choice(f, f->db, DEV, p, MMT_CHOICE_EXACT, "naive", &c);
  assert_string_equal(c.params, f->naive_default);
  assert_string_equal(c.record.template_hash, f->naive_hash);
  assert_true(c.record.ms_median == 1.5);
  rt_choice_describe(&c, &p, &d);
  /* The verification record the choice relies on, and the expected time (EXACT: measured). */
  assert_string_equal(d.layout, "nn");
  assert_int_equal(d.kernel_m, 1024);
  assert_true(d.record_id > 0);
  assert_true(d.expected_ms == 1.5);
  assert_string_equal(d.template_hash, f->naive_hash);
  assert_string_equal(d.device_name, DEV);
  assert_true(d.measured_at > 0);
  assert_int_equal(d.kind, MMT_CHOICE_EXACT);
  assert_string_equal(d.template_name, "naive");
  assert_string_equal(d.params, f->naive_default);
  assert_int_equal(d.tuned_m, 1024);
  assert_int_equal(d.tuned_k, 1024);
  assert_true(d.tuned_ms == 1.5);
  assert_true(d.tuned_tflops > 0);
  rt_choice_clear(&c);
  expect_choice(f, f->db, "Other GPU", square(1024, 1024, 1024, 16), MMT_CHOICE_EXACT,
                "smem_tiled", &c);
  assert_true(c.record.ms_median == 0.1);
  rt_choice_clear(&c);
}

/* Not tuned for the shape: the model's ranking, whose first usable candidate is served, with
 * the record of that config nearest the problem. */
static void expect_first_usable(fixture *f, gen_problem p, rt_choice *c) {
  rt_candidate *v = NULL;
  int n = 0;
  ut_err e;
  memset(c, 0, sizeof *c);
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &p, c, &e), MMT_OK);
  assert_int_equal(rt_rank(f->ch, f->db, DEV, &p, NULL, &v, &n, &e), MMT_OK);
  assert_true(n > 0);
  for (int i = 0; i < n; i++) {
    rt_choice u = {0};
    if (rt_choose_candidate(f->ch, &v[i], &p, &u, &e) != MMT_OK) continue;
    /* the first usable one, fastest predicted */
    assert_string_equal(c->template_name, v[i].template_name);
    assert_string_equal(c->params, u.params);
    assert_true(c->predicted_ms == v[i].pred.ms);
    for (int j = i + 1; j < n; j++) assert_true(v[j].pred.ms >= v[i].pred.ms);
    rt_choice_clear(&u);
    break;
  }
  assert_int_equal(c->kind == MMT_CHOICE_PREDICTED, c->has_record);
  if (c->has_record) assert_string_equal(c->record.template_name, c->template_name);
  free(v);
}

static void test_predicted(void **state) {
  fixture *f = *state;
  rt_choice c;
  expect_first_usable(f, square(1000, 1000, 1000, 16), &c);
  assert_true(c.predicted_ms > 0);
  rt_choice_clear(&c);
  expect_first_usable(f, square(4000, 4100, 4096, 16), &c);
  rt_choice_clear(&c);
  expect_first_usable(f, square(60, 70, 50, 16), &c);
  rt_choice_clear(&c);
}

/* A fixture whose answer is known: two naive configs measured on six shapes, one always
 * three times faster than the other and than anything else could be.  An unseen shape gets
 * the fast one, PREDICTED, its prediction below the slow one's; never the slower. */
static void test_predicted_known_answer(void **state) {
  fixture *f = *state;
  char path[160], fast[] = "bx=32,by=1,", slow[] = "bx=8,by=8";
  db_handle *db = NULL;
  rt_chooser *ch = NULL;
  ut_err e;
  snprintf(path, sizeof path, "%s/known.db", f->dir);
  assert_int_equal(db_open(path, false, &db, &e), MMT_OK);
  gen_template *t = NULL;
  gen_config cfg;
  char fast_c[256], slow_c[256];
  assert_int_equal(gen_load_named("naive", &t, &e), MMT_OK);
  assert_int_equal(gen_config_parse(t, fast, &cfg, &e), MMT_OK);
  assert_int_equal(gen_config_format(t, &cfg, fast_c, sizeof fast_c, &e), MMT_OK);
  assert_int_equal(gen_config_parse(t, slow, &cfg, &e), MMT_OK);
  assert_int_equal(gen_config_format(t, &cfg, slow_c, sizeof slow_c, &e), MMT_OK);
  static const int64_t shapes[][3] = {{256, 256, 256},   {512, 512, 512}, {1024, 1024, 1024},
                                      {2048, 2048, 2048}, {512, 2048, 1024}, {2048, 512, 256}};
  for (int i = 0; i < 6; i++) {
    const int64_t *s = shapes[i];
    double ms = 2.0 * (double)s[0] * (double)s[1] * (double)s[2] / 1e15; /* 1 PFLOP/s */
    insert(db, DEV, "naive", f->naive_hash, fast_c, s[0], s[1], s[2], DB_OK, ms);
    insert(db, DEV, "naive", f->naive_hash, slow_c, s[0], s[1], s[2], DB_OK, 3 * ms);
  }
  assert_int_equal(rt_chooser_new("sm_90", 132, &ch, &e), MMT_OK);
  gen_problem p = square(700, 900, 800, 16);
  rt_choice c = {0};
  assert_int_equal(rt_choose(ch, db, DEV, &p, &c, &e), MMT_OK);
  assert_int_equal(c.kind, MMT_CHOICE_PREDICTED);
  assert_string_equal(c.template_name, "naive");
  assert_string_equal(c.params, fast_c);
  assert_true(c.model_rows > 0);
  rt_candidate *v = NULL;
  int n = 0;
  double fast_ms = 0, slow_ms = 0;
  assert_int_equal(rt_rank(ch, db, DEV, &p, NULL, &v, &n, &e), MMT_OK);
  for (int i = 0; i < n; i++) {
    if (!strcmp(v[i].params, fast_c)) fast_ms = v[i].pred.ms;
    if (!strcmp(v[i].params, slow_c)) slow_ms = v[i].pred.ms;
  }
  assert_true(fast_ms > 0 && slow_ms > 2 * fast_ms);
  /* within 30% of what the rows say: 2 * 700 * 900 * 800 flops at 1 PFLOP/s */
  assert_true(fabs(fast_ms / (2.0 * 700 * 900 * 800 / 1e15) - 1) < 0.3);
  free(v);
  rt_choice_clear(&c);
  /* hiding a shape's rows leaves the choice to the others: still the fast config */
  int64_t hide[3] = {1024, 1024, 1024};
  p = square(1024, 1024, 1024, 16);
  assert_int_equal(rt_rank(ch, db, DEV, &p, hide, &v, &n, &e), MMT_OK);
  assert_string_equal(v[0].params, fast_c);
  free(v);
  rt_chooser_free(ch);
  gen_free(t);
  db_close(db);
}

/* A config measured in one layout is predicted in another with the grid of its kernel for
 * that layout.  skinny's dot body (W K-contiguous: side=0 in nt) gives a GEMV 512 blocks; the
 * same parameters in nn take the axpy body, 4 blocks of 1024 columns: rows measured fast in nt
 * must not make it the nn choice (it ran at 0.004x cuBLAS that way on an H100). */
static void test_predicted_other_layout(void **state) {
  fixture *f = *state;
  char path[160], hash[17], params[MMT_PARAMS_MAX];
  db_handle *db = NULL;
  rt_chooser *ch = NULL;
  ut_err e;
  gen_template *t = NULL;
  gen_config cfg;
  snprintf(path, sizeof path, "%s/layouts.db", f->dir);
  assert_int_equal(db_open(path, false, &db, &e), MMT_OK);
  assert_int_equal(gen_load_named("skinny", &t, &e), MMT_OK);
  snprintf(hash, sizeof hash, "%s", gen_source_hash(t));
  assert_int_equal(
      gen_config_parse(t, "side=0,bs=1,rl=2,warps=4,kw=1,unroll=2,vec=1,split=1", &cfg, &e),
      MMT_OK);
  assert_int_equal(gen_config_format(t, &cfg, params, sizeof params, &e), MMT_OK);
  static const int64_t nk[][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {8192, 8192}};
  for (int i = 0; i < 4; i++) /* the weight's bytes at 2.5 TB/s */
    insert_in(db, "nt", DEV, "skinny", hash, params, 1, nk[i][0], nk[i][1], DB_OK,
              4.0 * (double)nk[i][0] * (double)nk[i][1] / 2.5e9);
  assert_int_equal(rt_chooser_new("sm_90", 132, &ch, &e), MMT_OK);
  double pred[2] = {0, 0};
  static const char *const layouts[] = {"nt", "nn"};
  for (int l = 0; l < 2; l++) {
    gen_problem p = gen_packed_problem("f32", layouts[l], 1, 4096, 6144);
    rt_candidate *v = NULL;
    int n = 0;
    assert_int_equal(rt_rank(ch, db, DEV, &p, NULL, &v, &n, &e), MMT_OK);
    for (int i = 0; i < n; i++)
      if (v[i].config >= 0 && !strcmp(v[i].params, params)) pred[l] = v[i].pred.ms;
    if (l == 0) assert_string_equal(v[0].params, params); /* its own layout: the fastest */
    else assert_string_not_equal(v[0].params, params);
    free(v);
  }
  assert_true(pred[0] > 0 && pred[1] > 10 * pred[0]);
  rt_chooser_free(ch);
  gen_free(t);
  db_close(db);
}

static void test_requirements_and_constraints(void **state) {
  fixture *f = *state;
  rt_choice c;
  /* The exact shape meets kmul4's requirements. */
  expect_choice(f, f->db, DEV, square(512, 512, 512, 16), MMT_CHOICE_EXACT, "kmul4", &c);
  assert_int_equal(c.spec.requires.k_multiple, 4);
  rt_choice_clear(&c);
  /* Same shape, 8-byte alignment: kmul4 refused, the next row of the shape is used. */
  expect_choice(f, f->db, DEV, square(512, 512, 512, 8), MMT_CHOICE_EXACT, "naive", &c);
  assert_true(c.record.ms_median == 1.0);
  rt_choice_clear(&c);
  /* K = 510: kmul4 (K % 4) is never served, whatever its prediction. */
  expect_first_usable(f, square(512, 512, 510, 16), &c);
  assert_string_not_equal(c.template_name, "kmul4");
  rt_choice_clear(&c);
  /* K = 508 meets K % 4: kmul4 may be served (if the model ranks it first). */
  expect_first_usable(f, square(512, 512, 508, 16), &c);
  rt_choice_clear(&c);
  /* Exact 512x8192x512: kmul4's constraint refuses N > 4096, so naive. */
  expect_choice(f, f->db, DEV, square(512, 8192, 512, 16), MMT_CHOICE_EXACT, "naive", &c);
  assert_true(c.record.ms_median == 9.0);
  rt_choice_clear(&c);
}

/* c: the choice of a fresh chooser for arch on db (the chooser freed: c->tmpl is not to be
 * used). */
static void choose_fresh(db_handle *db, const char *arch, const gen_problem *q, rt_choice *c) {
  rt_chooser *ch = NULL;
  ut_err e;
  assert_int_equal(rt_chooser_new(arch, 0, &ch, &e), MMT_OK);
  memset(c, 0, sizeof *c);
  assert_int_equal(rt_choose(ch, db, DEV, q, c, &e), MMT_OK);
  rt_chooser_free(ch);
}

/* No rows for the GPU model: every dtype gets a competitive default (reg_tiled for f32, not
 * the classic kernels; wgmma on sm_90, mma_sync on sm_80), with a predicted time. */
static void test_default(void **state) {
  fixture *f = *state;
  rt_choice c;
  ut_err e;
  db_handle *empty = NULL;
  char path[160];
  expect_choice(f, NULL, DEV, square(1024, 1024, 1024, 16), MMT_CHOICE_DEFAULT, "reg_tiled", &c);
  assert_true(c.predicted_ms > 0);
  rt_choice_clear(&c);
  expect_choice(f, f->db, "No Rows GPU", square(1024, 1024, 1024, 16), MMT_CHOICE_DEFAULT,
                "reg_tiled", &c);
  rt_choice_clear(&c);
  expect_choice(f, f->db, NULL, square(1024, 1024, 1024, 16), MMT_CHOICE_DEFAULT, "reg_tiled",
                &c);
  rt_choice_clear(&c);
  snprintf(path, sizeof path, "%s/empty.db", f->dir);
  assert_int_equal(db_open(path, false, &empty, &e), MMT_OK);
  gen_problem p = square(70, 90, 11, 4); /* 4-byte rows: reg_tiled's vec=1 config */
  expect_choice(f, empty, DEV, p, MMT_CHOICE_DEFAULT, "reg_tiled", &c);
  assert_non_null(strstr(c.params, "vec=1"));
  mmt_choice d;
  rt_choice_describe(&c, &p, &d);
  assert_true(d.expected_ms > 0);
  assert_int_equal(d.record_id, 0);
  assert_int_equal(d.kind, MMT_CHOICE_DEFAULT);
  assert_int_equal(d.tuned_m, 0);
  assert_true(d.tuned_ms == 0);
  rt_choice_clear(&c);
  /* the tensor-core dtypes, per architecture */
  static const struct {
    const char *arch, *dtype, *layout, *want;
  } cases[] = {{"sm_90", "f16", "nn", "wgmma"},    {"sm_90", "bf16", "nt", "wgmma"},
               {"sm_90", "tf32", "nt", "wgmma"},   {"sm_80", "f16", "nn", "mma_sync"},
               {"sm_80", "bf16", "tt", "mma_sync"}, {"sm_80", "f32", "nn", "reg_tiled"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gen_problem q = {
        cases[i].dtype, cases[i].layout, 4096, 4096, 4096, 4096, 4096, 4096, 16, NULL, 1};
    choose_fresh(empty, cases[i].arch, &q, &c);
    assert_int_equal(c.kind, MMT_CHOICE_DEFAULT);
    assert_string_equal(c.template_name, cases[i].want);
    /* aligned rows: not a variant for misaligned ones (RT_OFFER_UNALIGNED in RT_BUILTIN) */
    if (!strcmp(cases[i].want, "reg_tiled")) assert_non_null(strstr(c.params, "vec=4"));
    rt_choice_clear(&c);
  }
  /* GEMV and decode sizes (one of M, N at most 64) get a skinny family, any dtype and
   * architecture, on its small side: the CUDA cores' at batch 1 and 2, the tensor cores'
   * (16-bit, layout nt) from batch 5 (at 8, skinny's 16-bit conversions cost it 1.2-1.6x:
   * RT_MODEL_CVT_FMA_SHARE); at 16-64 rows on Hopper, wgmma's swapped tiles (below) */
  static const struct {
    const char *arch, *dtype, *layout;
    int64_t m, n;
    const char *side, *want;
  } skinny[] = {{"sm_90", "f16", "nt", 1, 4096, "side=0", "skinny"},
                {"sm_90", "bf16", "nt", 2, 4096, "side=0", "skinny"},
                {"sm_90", "bf16", "nt", 8, 4096, "side=0", "skinny_mma"},
                {"sm_90", "f16", "nt", 4096, 8, "side=1", "skinny_mma"},
                {"sm_80", "bf16", "nt", 16, 4096, "side=0", "skinny_mma"},
                {"sm_80", "f16", "nt", 32, 4096, "side=0", "skinny_mma"},
                {"sm_90", "bf16", "nt", 4096, 16, "side=1", "skinny_mma"},
                {"sm_90", "f32", "nn", 4096, 1, "side=1", "skinny"},
                {"sm_90", "f32", "nt", 1, 4096, "side=0", "skinny"}};
  for (size_t i = 0; i < sizeof skinny / sizeof skinny[0]; i++) {
    gen_problem q =
        gen_packed_problem(skinny[i].dtype, skinny[i].layout, skinny[i].m, skinny[i].n, 4096);
    choose_fresh(empty, skinny[i].arch, &q, &c);
    assert_int_equal(c.kind, MMT_CHOICE_DEFAULT);
    assert_string_equal(c.template_name, skinny[i].want);
    assert_non_null(strstr(c.params, skinny[i].side));
    if (!strcmp(c.template_name, "skinny") && q.align_bytes >= 16)
      /* 16-byte loads where the rows allow (not 4096x1: N = 1) */
      assert_non_null(strstr(c.params, "vec=1"));
    rt_choice_clear(&c);
  }
  /* Decode sizes that only wgmma serves (16 rows in nn): every tile is bound by the weight's
   * DRAM traffic, its candidates predict alike, and the one whose tiles overhang the rows least
   * wins (the swapped 64 x 16 tile, not name order's 128 x 128) */
  gen_problem q = gen_packed_problem("f16", "nn", 16, 14336, 4096);
  choose_fresh(empty, "sm_90", &q, &c);
  assert_string_equal(c.template_name, "wgmma");
  if (!strstr(c.params, "swap=1")) fail_msg("f16 nn: %s", c.params);
  rt_choice_clear(&c);
  /* FP8 decode (an op: per-tensor scales, bf16 D): skinny_mma's 8-row m16n8k32 blocks on
   * either side, from one row (FP8 has no CUDA-core family); wgmma's swapped tiles at 16 rows
   * (skinny_mma's 16- and 32-row blocks are not offered to FP8: RT_OFFER_NO_FP8_SWAP); wgmma's
   * tiles from 128 rows */
  static const struct {
    int64_t m, n;
    const char *want, *side;
  } fp8[] = {{1, 4096, "skinny_mma", "side=0"},
             {16, 4096, "wgmma", "swap=1"},
             {4096, 8, "skinny_mma", "side=1"},
             {128, 4096, "wgmma", "swap=0"}};
  for (size_t i = 0; i < sizeof fp8 / sizeof fp8[0]; i++) {
    gen_op op = {.out = "bf16", .scale_tensor = true};
    q = gen_packed_op_problem("e4m3", "nt", fp8[i].m, fp8[i].n, 4096, &op, 1);
    choose_fresh(empty, "sm_90", &q, &c);
    assert_string_equal(c.template_name, fp8[i].want);
    if (!strstr(c.params, fp8[i].side))
      fail_msg("e4m3 %lldx%lld: %s", (long long)fp8[i].m, (long long)fp8[i].n, c.params);
    rt_choice_clear(&c);
  }
  /* FP8 at compute-bound sizes: a call that allows fast accumulation gets a kernel that does
   * not promote (the model charges promotion: RT_MODEL_PROMOTE_COST), one that does not a
   * kernel that does, whatever the shape */
  static const int64_t big[][3] = {{4096, 4096, 4096}, {3000, 9216, 2048}, {8192, 1536, 14336}};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
    for (int fast = 0; fast < 2; fast++) {
      gen_op op = {.out = "bf16", .scale_tensor = true, .fast_accum = fast};
      q = gen_packed_op_problem("e4m3", "nt", big[i][0], big[i][1], big[i][2], &op, 1);
      choose_fresh(empty, "sm_90", &q, &c);
      assert_string_equal(c.template_name, "wgmma");
      if (!strstr(c.params, fast ? "promote=0" : "promote=1"))
        fail_msg("e4m3 %lldx%lldx%lld%s: %s", (long long)big[i][0], (long long)big[i][1],
                 (long long)big[i][2], fast ? " fast_accum" : "", c.params);
      rt_choice_clear(&c);
    }
  /* 16-bit decode at 24-64 rows, an op: wgmma's swapped tiles, and for a gated op (which
   * swapped tiles do not serve) its 64 x 64 ones (skinny_mma's 32-row blocks are not offered
   * where wgmma serves, RT_OFFER_NO_WGMMA; its 16-row ones serve gated ops up to 16 rows) */
  gen_op gelu = {.out = "f16", .bias = 'c', .act = GEN_ACT_GELU_TANH};
  q = gen_packed_op_problem("f16", "nt", 32, 4096, 4096, &gelu, 1);
  choose_fresh(empty, "sm_90", &q, &c);
  assert_string_equal(c.template_name, "wgmma");
  if (!strstr(c.params, "swap=1")) fail_msg("f16 32x4096x4096 bias+gelu: %s", c.params);
  rt_choice_clear(&c);
  gen_op swiglu = {.out = "f16", .gated = true, .act = GEN_ACT_SILU};
  q = gen_packed_op_problem("f16", "nt", 32, 2 * 14336, 4096, &swiglu, 1);
  choose_fresh(empty, "sm_90", &q, &c);
  assert_string_equal(c.template_name, "wgmma");
  rt_choice_clear(&c);
  /* An f32 D from 128 rows: 64 x 64 tiles and 128 x 64 ones in 4 slices cover the same area
   * and predict alike (the weight's DRAM traffic bounds both); the unsplit one wins, the
   * slices' partial tiles being traffic that bound leaves out (rt_model_tile_area), not name
   * order's split kernel */
  gen_op f32 = {.out = "f32"};
  q = gen_packed_op_problem("f16", "nt", 128, 4096, 4096, &f32, 1);
  choose_fresh(empty, "sm_90", &q, &c);
  assert_string_equal(c.template_name, "wgmma");
  if (!strstr(c.params, "split=1,")) fail_msg("128x4096x4096 out=f32: %s", c.params);
  rt_choice_clear(&c);
  db_close(empty);
}

/* Which built-in entries the dispatcher (and a search's starts) offer: by compute capability,
 * those for misaligned rows only to misaligned problems, those for FP8 only to FP8 ones, those
 * that wgmma's swapped FP8 tiles beat to other types and to grouped FP8 ones, those that
 * wgmma's few-row tiles beat only where wgmma does not serve (or, at 16 rows, only its 64 x 64
 * tiles do: 16-bit gated ops). */
static void test_builtin_offered(void **state) {
  (void)state;
  const rt_builtin aligned = {9, "wgmma", "bm=128", RT_OFFER_ALL};
  const rt_builtin misaligned = {0, "mma_sync", "vec=0", RT_OFFER_UNALIGNED};
  const rt_builtin fp8 = {9, "wgmma", "bn=192", RT_OFFER_FP8};
  const rt_builtin no_fp8_swap = {8, "skinny_mma", "bs=16", RT_OFFER_NO_FP8_SWAP};
  gen_problem p = gen_packed_problem("f16", "nn", 256, 256, 256); /* 16-byte rows */
  assert_true(rt_builtin_offered(&aligned, 9, &p));
  assert_false(rt_builtin_offered(&aligned, 8, &p));
  assert_false(rt_builtin_offered(&misaligned, 9, &p));
  p = gen_packed_problem("f16", "nn", 100, 100, 100); /* 200-byte rows: 8-byte aligned */
  assert_true(p.align_bytes < 16);
  assert_true(rt_builtin_offered(&misaligned, 8, &p));
  assert_true(rt_builtin_offered(&aligned, 9, &p));
  assert_false(rt_builtin_offered(&fp8, 9, &p));
  assert_true(rt_builtin_offered(&no_fp8_swap, 9, &p));
  p = gen_packed_problem("e4m3", "nt", 256, 256, 256);
  assert_true(rt_builtin_offered(&fp8, 9, &p));
  assert_false(rt_builtin_offered(&fp8, 8, &p));
  assert_false(rt_builtin_offered(&misaligned, 9, &p));
  assert_false(rt_builtin_offered(&no_fp8_swap, 9, &p));
  gen_op tensor = {.out = "bf16", .scale_tensor = true};
  p = gen_packed_op_problem("e4m3", "nt", 256, 256, 256, &tensor, 1);
  assert_false(rt_builtin_offered(&no_fp8_swap, 9, &p));
  gen_op masked = {.out = "bf16", .scale_tensor = true, .group = 'm'}; /* no swapped tiles */
  p = gen_packed_op_problem("e4m3", "nt", 16, 256, 256, &masked, 8);
  assert_true(rt_builtin_offered(&no_fp8_swap, 9, &p));

  /* RT_OFFER_NO_WGMMA, of any type: before Hopper, rows not 16-byte aligned, grouped calls */
  const rt_builtin no_wgmma = {8, "skinny_mma", "bs=16", RT_OFFER_NO_WGMMA};
  p = gen_packed_problem("f16", "nt", 16, 4096, 4096);
  assert_false(rt_builtin_offered(&no_wgmma, 9, &p));
  assert_true(rt_builtin_offered(&no_wgmma, 8, &p));
  p = gen_packed_problem("bf16", "nt", 16, 4100, 4100); /* 8200-byte rows: 8-byte aligned */
  assert_true(rt_builtin_offered(&no_wgmma, 9, &p));
  gen_op bias = {.out = "f16", .bias = 'c', .act = GEN_ACT_GELU_TANH};
  p = gen_packed_op_problem("f16", "nt", 16, 4096, 4096, &bias, 1);
  assert_false(rt_builtin_offered(&no_wgmma, 9, &p));
  gen_op gated = {.out = "f16", .gated = true, .act = GEN_ACT_SILU}; /* wgmma's 64 x 64 */
  p = gen_packed_op_problem("f16", "nt", 16, 4096, 4096, &gated, 1);
  assert_false(rt_builtin_offered(&no_wgmma, 9, &p));
  gen_op contiguous = {.out = "bf16", .group = 'c'};
  p = gen_packed_op_problem("bf16", "nt", 16, 4096, 4096, &contiguous, 8);
  assert_true(rt_builtin_offered(&no_wgmma, 9, &p));
  p = gen_packed_op_problem("e4m3", "nt", 16, 256, 256, &tensor, 1);
  assert_false(rt_builtin_offered(&no_wgmma, 9, &p));
  p = gen_packed_op_problem("e4m3", "nt", 16, 256, 256, &masked, 8);
  assert_true(rt_builtin_offered(&no_wgmma, 9, &p));

  /* RT_OFFER_NO_SWAP: as RT_OFFER_NO_WGMMA, and 16-bit gated ops (not FP8 ones) */
  const rt_builtin no_swap = {8, "skinny_mma", "bs=16", RT_OFFER_NO_SWAP};
  p = gen_packed_op_problem("f16", "nt", 16, 4096, 4096, &gated, 1);
  assert_true(rt_builtin_offered(&no_swap, 9, &p));
  p = gen_packed_op_problem("f16", "nt", 16, 4096, 4096, &bias, 1);
  assert_false(rt_builtin_offered(&no_swap, 9, &p));
  assert_true(rt_builtin_offered(&no_swap, 8, &p));
  gen_op gated8 = {.out = "bf16", .scale_tensor = true, .gated = true, .act = GEN_ACT_SILU};
  p = gen_packed_op_problem("e4m3", "nt", 16, 256, 256, &gated8, 1);
  assert_false(rt_builtin_offered(&no_swap, 9, &p));
  p = gen_packed_op_problem("e4m3", "nt", 16, 256, 256, &masked, 8);
  assert_true(rt_builtin_offered(&no_swap, 9, &p));
}

/* Every built-in and default config names a template on the path and parses there, valid as
 * a config or (FP8's fast-accumulation tile) for an FP8 op that allows it. */
static void test_builtin_lists_parse(void **state) {
  (void)state;
  static const rt_builtin builtin[] = RT_BUILTIN;
  for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
    gen_template *t = NULL;
    gen_config cfg;
    bool valid = false;
    ut_err e;
    assert_int_equal(gen_load_named(builtin[i].name, &t, &e), MMT_OK);
    if (gen_config_parse(t, builtin[i].params, &cfg, &e) != MMT_OK) fail_msg("%s", e.msg);
    assert_int_equal(gen_check(t, &cfg, NULL, &valid, NULL, 0, &e), MMT_OK);
    if (!valid && gen_supports_dtype(t, "e4m3")) {
      gen_op fast;
      assert_int_equal(gen_op_parse("out=bf16,fast_accum", "e4m3", &fast, &e), MMT_OK);
      assert_int_equal(gen_check_op_for(t, &cfg, "e4m3", "nt", &fast, &valid, NULL, 0, &e), MMT_OK);
    }
    if (!valid) fail_msg("built-in %s %s is not a valid config", builtin[i].name, builtin[i].params);
    assert_false(isnan(rt_template_prior(builtin[i].name)));
    gen_free(t);
  }
}

/* A chooser for a device refuses kernels the device cannot run (an sm_90a kernel anywhere but
 * sm_90) and takes the next usable row; one for no particular device takes any. */
static void test_device_arch(void **state) {
  fixture *f = *state;
  static const struct {
    const char *arch, *want;
  } cases[] = {{"sm_90", "arch90a"}, {NULL, "arch90a"}, {"sm_80", "naive"}, {"sm_100", "naive"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rt_chooser *ch = NULL;
    rt_choice c = {0};
    ut_err e;
    gen_problem p = square(256, 256, 256, 16);
    assert_int_equal(rt_chooser_new(cases[i].arch, 0, &ch, &e), MMT_OK);
    assert_int_equal(rt_choose(ch, f->db, DEV, &p, &c, &e), MMT_OK);
    assert_int_equal(c.kind, MMT_CHOICE_EXACT);
    assert_string_equal(c.template_name, cases[i].want);
    /* aligned rows: not a variant for misaligned ones (RT_OFFER_UNALIGNED in RT_BUILTIN) */
    if (!strcmp(cases[i].want, "reg_tiled")) assert_non_null(strstr(c.params, "vec=4"));
    rt_choice_clear(&c);
    rt_chooser_free(ch);
  }
}

/* tf32 only permits tensor-core rounding: with no tf32 kernel for the problem (layout tn:
 * wgmma's tf32 needs one operand K-major), an fp32 kernel serves it; in nn, wgmma's swap (its
 * A through registers) is a tf32 kernel, chosen before the f32 row of the same shape. */
static void test_tf32_falls_back_to_f32(void **state) {
  fixture *f = *state;
  rt_choice c = {0};
  ut_err e;
  gen_problem p = square(1024, 1024, 1024, 16);
  p.dtype = "tf32";
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &p, &c, &e), MMT_OK);
  assert_string_equal(c.template_name, "wgmma");
  assert_string_equal(c.spec.dtype, "tf32");
  assert_non_null(strstr(c.params, "swap=1"));
  rt_choice_clear(&c);
  p.layout = "tn";
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &p, &c, &e), MMT_OK);
  assert_string_equal(c.spec.dtype, "f32");
  assert_string_equal(c.spec.layout, "tn");
  rt_choice_clear(&c);
}

/* A tf32 problem whose f32 row (EXACT) is expected faster than the tf32 choice (the model's
 * prediction) runs the f32 kernel; one whose f32 row is expected slower keeps the tf32
 * choice. */
static void test_tf32_takes_faster_f32(void **state) {
  fixture *f = *state;
  rt_choice c = {0};
  ut_err e;
  /* A GEMV: an f32 row of skinny (which computes tf32 as f32, the same kernel) at ten times
   * the tf32 choice's prediction is not taken; at a tenth of it, it is. */
  char skinny_hash[17], skinny_default[256];
  hash_and_default("skinny", skinny_hash, skinny_default, sizeof skinny_default);
  gen_problem q = square(1, 2048, 2000, 16);
  q.dtype = "tf32";
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &q, &c, &e), MMT_OK);
  assert_string_equal(c.spec.dtype, "tf32"); /* no f32 row yet */
  const double q_ms = c.predicted_ms;
  rt_choice_clear(&c);
  insert(f->db, DEV, "skinny", skinny_hash, skinny_default, 1, 2048, 2000, DB_OK, q_ms * 10);
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &q, &c, &e), MMT_OK);
  assert_string_equal(c.spec.dtype, "tf32");
  rt_choice_clear(&c);
  gen_problem p = square(1, 2000, 2000, 16);
  p.dtype = "tf32";
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &p, &c, &e), MMT_OK);
  const double tf32_ms = c.predicted_ms; /* (of f32 already, where that is predicted faster) */
  assert_true(tf32_ms > 0);
  rt_choice_clear(&c);
  insert(f->db, DEV, "skinny", skinny_hash, skinny_default, 1, 2000, 2000, DB_OK, tf32_ms / 10);
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &p, &c, &e), MMT_OK);
  assert_int_equal(c.kind, MMT_CHOICE_EXACT);
  assert_string_equal(c.template_name, "skinny");
  assert_string_equal(c.spec.dtype, "f32");
  rt_choice_clear(&c);
  /* An f32 row of a template without tf32 (naive), however fast, is not weighed against the
   * tf32 choice: the tensor cores' prediction stands. */
  gen_problem r = square(2000, 2000, 2000, 16);
  r.dtype = "tf32";
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &r, &c, &e), MMT_OK);
  const double r_ms = c.predicted_ms;
  rt_choice_clear(&c);
  insert(f->db, DEV, "naive", f->naive_hash, f->naive_default, 2000, 2000, 2000, DB_OK, r_ms / 10);
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &r, &c, &e), MMT_OK);
  assert_string_equal(c.spec.dtype, "tf32");
  rt_choice_clear(&c);
}

static void test_unsupported(void **state) {
  (void)state;
  rt_chooser *ch = NULL;
  rt_choice c = {0};
  ut_err e;
  gen_problem p = square(100, 100, 100, 16); /* not skinny: the built-in skinny is not a choice */
  assert_int_equal(setenv("MMTUNE_TEMPLATE_PATH", TEMPLATES_DIR "/refusing", 1), 0);
  assert_int_equal(rt_chooser_new(NULL, 0, &ch, &e), MMT_OK);
  assert_int_equal(rt_choose(ch, NULL, DEV, &p, &c, &e), MMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "no kernel supports f32 nn 100x100x100"));
  assert_non_null(strstr(e.msg, "smem_tiled"));
  assert_non_null(strstr(e.msg, "naive"));
  assert_null(c.spec.source);
  rt_chooser_free(ch);
  assert_int_equal(setenv("MMTUNE_TEMPLATE_PATH", TEMPLATES_DIR, 1), 0);
}

/* A dtype no template serves (a database's row may name one) has no candidates: none ranked,
 * and the choice says so (qsort got NULL for them).  A problem past int (2^62 x 4096 x
 * 2^63-1, from a fuzzed database) ranks with finite predictions, and no kernel takes it.  The
 * sanitized build fails on either. */
static void test_no_candidates_and_huge_sizes(void **state) {
  fixture *f = *state;
  rt_candidate *v = NULL;
  int n = -1;
  ut_err e;
  gen_problem p = square(100, 100, 100, 16);
  p.dtype = "f64";
  assert_int_equal(rt_rank(f->ch, f->db, DEV, &p, NULL, &v, &n, &e), MMT_OK);
  assert_int_equal(n, 0);
  assert_null(v);
  rt_choice c = {0};
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &p, &c, &e), MMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "no candidate for this dtype"));
  const gen_problem huge = gen_packed_problem("f32", "nn", (int64_t)1 << 62, 4096, INT64_MAX);
  assert_int_equal(rt_rank(f->ch, f->db, DEV, &huge, NULL, &v, &n, &e), MMT_OK);
  assert_true(n > 0);
  for (int i = 0; i < n; i++) assert_true(isfinite(v[i].pred.ms) && v[i].pred.ms > 0);
  free(v);
  assert_int_equal(rt_choose(f->ch, f->db, DEV, &huge, &c, &e), MMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "no kernel supports f32 nn 4611686018427387904x4096x"));
  assert_null(c.spec.source);
}

static void test_distance_and_alignment(void **state) {
  (void)state;
  double d = rt_shape_distance(1000, 1000, 1000, 1024, 1024, 1024);
  assert_true(fabs(d - 3 * log(1.024)) < 1e-12);
  assert_true(rt_shape_distance(1, 2, 3, 1, 2, 3) == 0);
  assert_true(fabs(rt_shape_distance(64, 64, 64, 128, 64, 64) - log(2.0)) < 1e-12);
  assert_true(rt_shape_distance(64, 64, 64, 128, 64, 64) ==
              rt_shape_distance(128, 64, 64, 64, 64, 64));
  assert_true(rt_shape_distance(0, 1, 1, 1, 1, 1) == 0);
  uint64_t v[4] = {256, 4000, 0, 4 * 1024};
  assert_int_equal(gen_align_bytes(v, 4), 16);
  v[1] = 4 * 17;
  assert_int_equal(gen_align_bytes(v, 4), 4);
  v[1] = 8 * 17;
  assert_int_equal(gen_align_bytes(v, 4), 8);
  v[0] = 2;
  assert_int_equal(gen_align_bytes(v, 4), 2);
  v[0] = 3;
  assert_int_equal(gen_align_bytes(v, 4), 1);
  assert_int_equal(gen_align_bytes(v, 0), 16);
}

/* mmt_explain of the row-major, untransposed fp32 problem (mmt_sgemm's). */
static mmt_status explain_rm(mmt_context *ctx, int64_t m, int64_t n, int64_t k, int64_t lda,
                             int64_t ldb, int64_t ldc, mmt_choice *d) {
  const mmt_problem p = {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, m, n, k, lda, ldb, ldc, MMT_F32};
  return mmt_explain(ctx, &p, d);
}

/* ---- the public API without a GPU ---- */

static void test_public_basics(void **state) {
  (void)state;
  assert_string_equal(mmt_choice_kind_name(MMT_CHOICE_EXACT), "exact");
  assert_string_equal(mmt_choice_kind_name(MMT_CHOICE_PREDICTED), "predicted");
  assert_string_equal(mmt_choice_kind_name(MMT_CHOICE_DEFAULT), "default");
  assert_string_equal(mmt_choice_kind_name((mmt_choice_kind)42), "unknown");
  mmt_close(NULL);
  assert_true(strlen(mmt_errmsg(NULL)) > 0);
  assert_int_equal(mmt_open(NULL, 0, NULL), MMT_ERR_INVALID_ARG);
  mmt_choice d;
  assert_int_equal(mmt_sgemm(NULL, 1, 1, 1, NULL, 1, NULL, 1, NULL, 1, NULL), MMT_ERR_INVALID_ARG);
  mmt_problem pr = {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, 1, 1, 1, 1, 1, 1, MMT_F32};
  assert_int_equal(mmt_explain(NULL, &pr, &d), MMT_ERR_INVALID_ARG);
  assert_int_equal(mmt_gemm(NULL, MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, 1, 1, 1, 1, NULL, 1,
                            NULL, 1, 0, NULL, 1, MMT_F32, NULL),
                   MMT_ERR_INVALID_ARG);
  assert_string_equal(mmt_dtype_name(MMT_BF16), "bf16");
  assert_null(mmt_dtype_name((mmt_dtype)9));
  rt_dispatch_stats st;
  rt_dispatch_get_stats(NULL, &st);
  assert_int_equal(st.launches, 0);
}

static void test_open_without_gpu(void **state) {
  fixture *f = *state;
  char missing[160];
  snprintf(missing, sizeof missing, "%s/missing.db", f->dir);
  mmt_options o = {.db_path = missing, .cache_dir = f->dir};
  mmt_context *ctx = NULL;
  mmt_status rc = mmt_open(&ctx, 0, &o);
  if (rc == MMT_OK) {
    mmt_close(ctx);
    skip();
  }
  assert_true(rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE);
  assert_non_null(ctx);
  assert_true(strlen(mmt_errmsg(ctx)) > 0);
  /* Arguments are checked first; then the failed context says it did not open. */
  float x = 0;
  mmt_choice d;
  assert_int_equal(mmt_sgemm(ctx, -1, 1, 1, &x, 1, &x, 1, &x, 1, NULL), MMT_ERR_INVALID_ARG);
  assert_string_equal(mmt_errmsg(ctx), "M must be >= 0, got -1");
  assert_int_equal(mmt_sgemm(ctx, 1, 1, 1, &x, 1, &x, 1, &x, 1, NULL), rc);
  assert_non_null(strstr(mmt_errmsg(ctx), "did not open"));
  mmt_problem pr = {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, 1, 1, 1, 1, 0, 1, MMT_F32};
  assert_int_equal(mmt_explain(ctx, &pr, &d), MMT_ERR_INVALID_ARG);
  assert_string_equal(mmt_errmsg(ctx), "ldb must be >= max(1, N) = 1, got 0");
  pr.ldb = 1;
  assert_int_equal(mmt_explain(ctx, &pr, NULL), MMT_ERR_INVALID_ARG);
  assert_int_equal(mmt_explain(ctx, NULL, &d), MMT_ERR_INVALID_ARG);
  assert_int_equal(mmt_explain(ctx, &pr, &d), rc);
  /* mmt_gemm: every argument check before the open check; nothing launched. */
  assert_int_equal(mmt_gemm(ctx, (mmt_order)2, MMT_NO_TRANS, MMT_NO_TRANS, 1, 1, 1, 1, &x, 1, &x,
                            1, 0, &x, 1, MMT_F32, NULL),
                   MMT_ERR_INVALID_ARG);
  assert_string_equal(mmt_errmsg(ctx), "order must be MMT_ROW_MAJOR or MMT_COL_MAJOR, got 2");
  assert_int_equal(mmt_gemm(ctx, MMT_COL_MAJOR, MMT_TRANS, MMT_NO_TRANS, 3, 2, 5, 1, &x, 4, &x, 5,
                            0, &x, 3, MMT_F32, NULL),
                   MMT_ERR_INVALID_ARG);
  assert_string_equal(mmt_errmsg(ctx), "lda must be >= max(1, K) = 5, got 4");
  assert_int_equal(mmt_gemm(ctx, MMT_COL_MAJOR, MMT_TRANS, MMT_NO_TRANS, 3, 2, 5, 1, &x, 5, &x, 5,
                            0, &x, 3, MMT_F32, NULL),
                   rc);
  /* mmt_matmul_prepare: its own arguments, then each descriptor's, before the open check */
  mmt_matmul_desc md[2] = {{.order = MMT_ROW_MAJOR,
                            .m = 2,
                            .n = 3,
                            .k = 4,
                            .in_type = MMT_F16,
                            .out_type = MMT_F32,
                            .alpha = 1,
                            .a = (void *)0x10000,
                            .lda = 4,
                            .b = (void *)0x20000,
                            .ldb = 3,
                            .d = (void *)0x30000,
                            .ldd = 3,
                            .batch = 1}};
  md[1] = md[0];
  md[1].batch = 0;
  const struct {
    const mmt_matmul_desc *descs;
    int64_t count;
    int threads;
    const char *msg;
  } bad[] = {{md, -1, 0, "count is -1: below 0"},
             {md, (int64_t)1 << 31, 0, "count is 2147483648: above 2^31 - 1"},
             {NULL, 1, 0, "descs is NULL"},
             {md, 1, -2, "threads is -2: below 0"},
             {md, 2, 0, "descs[1]: batch must be >= 1, got 0"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(mmt_matmul_prepare(ctx, bad[i].descs, bad[i].count, bad[i].threads),
                     MMT_ERR_INVALID_ARG);
    assert_string_equal(mmt_errmsg(ctx), bad[i].msg);
  }
  assert_int_equal(mmt_matmul_prepare(ctx, md, 1, 0), rc);
  assert_non_null(strstr(mmt_errmsg(ctx), "did not open"));
  mmt_close(ctx);
  assert_int_equal(access(missing, F_OK), -1); /* read-only open created nothing */
}

/* Recording needs a database: refused before the device is opened (no GPU needed). */
static void test_record_needs_a_database(void **state) {
  (void)state;
  mmt_options o = {.db_path = "", .record = 1};
  mmt_context *ctx = NULL;
  assert_int_equal(mmt_open(&ctx, 0, &o), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(mmt_errmsg(ctx), "record needs a database"));
  mmt_close(ctx);
}

/* Online tuning records, so it needs a database too; its budget is seconds (0: the default),
 * checked before anything is opened (no GPU needed). */
static void test_online_options(void **state) {
  fixture *f = *state;
  char path[160];
  snprintf(path, sizeof path, "%s/online.db", f->dir);
  mmt_options o = {.db_path = "", .online = 1};
  mmt_context *ctx = NULL;
  assert_int_equal(mmt_open(&ctx, 0, &o), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(mmt_errmsg(ctx), "online needs a database"));
  mmt_close(ctx);
  const double bad[] = {-1, NAN, 1e7};
  for (int i = 0; i < 3; i++) {
    o = (mmt_options){.db_path = path, .online = 1, .online_budget = bad[i]};
    assert_int_equal(mmt_open(&ctx, 0, &o), MMT_ERR_INVALID_ARG);
    assert_non_null(strstr(mmt_errmsg(ctx), "online_budget"));
    mmt_close(ctx);
  }
  assert_int_equal(access(path, F_OK), -1); /* refused before the database was made */
}

/* $MMTUNE_RECORD / $MMTUNE_ONLINE turn recording on for contexts whose options leave it off
 * (how the BLAS shim, Python and mmtune.torch record): "1" on, "0" nothing, another value
 * refused with the variable named; a context without a database ignores them.  The database is
 * made (opened for writing) before the device is opened, so this needs no GPU. */
static void test_record_from_environment(void **state) {
  fixture *f = *state;
  char path[160];
  snprintf(path, sizeof path, "%s/env-record.db", f->dir);
  mmt_options o = {.db_path = path, .cache_dir = f->dir};
  mmt_context *ctx = NULL;
  const struct {
    const char *name, *value;
  } bad[] = {{"MMTUNE_RECORD", "yes"}, {"MMTUNE_ONLINE", "2"}};
  for (int i = 0; i < 2; i++) {
    setenv(bad[i].name, bad[i].value, 1);
    assert_int_equal(mmt_open(&ctx, 0, &o), MMT_ERR_INVALID_ARG);
    char want[64];
    snprintf(want, sizeof want, "$%s must be 0 or 1, got \"%s\"", bad[i].name, bad[i].value);
    assert_non_null(strstr(mmt_errmsg(ctx), want));
    mmt_close(ctx);
    unsetenv(bad[i].name);
  }
  assert_int_equal(access(path, F_OK), -1); /* refused before the database was made */
  setenv("MMTUNE_RECORD", "0", 1);
  mmt_open(&ctx, 0, &o); /* read-only: without a GPU it fails at the device, after the db */
  mmt_close(ctx);
  assert_int_equal(access(path, F_OK), -1);
  setenv("MMTUNE_RECORD", "1", 1);
  mmt_open(&ctx, 0, &o);
  mmt_close(ctx);
  assert_int_equal(access(path, F_OK), 0); /* recording: opened for writing, made */
  mmt_options none = {.db_path = ""};
  assert_int_not_equal(mmt_open(&ctx, 0, &none), MMT_ERR_INVALID_ARG);
  mmt_close(ctx);
  unsetenv("MMTUNE_RECORD");
  /* online through the environment: its options are checked as the option's are */
  setenv("MMTUNE_ONLINE", "1", 1);
  o.online_budget = -1;
  assert_int_equal(mmt_open(&ctx, 0, &o), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(mmt_errmsg(ctx), "online_budget"));
  mmt_close(ctx);
  unsetenv("MMTUNE_ONLINE");
}

static void test_open_corrupt_db(void **state) {
  fixture *f = *state;
  char path[160];
  ut_err e;
  snprintf(path, sizeof path, "%s/corrupt.db", f->dir);
  const char junk[] = "this is not a database, just some text that is long enough......";
  assert_int_equal(ut_write_file_atomic(path, junk, sizeof junk, &e), MMT_OK);
  mmt_options o = {.db_path = path};
  mmt_context *ctx = NULL;
  assert_int_equal(mmt_open(&ctx, 0, &o), MMT_ERR_DB_CORRUPT);
  assert_non_null(ctx);
  assert_non_null(strstr(mmt_errmsg(ctx), "corrupt.db"));
  mmt_close(ctx);
}

/* ---- GPU ---- */

typedef struct {
  int64_t m, n, k, lda, ldb, ldc;
} gemm_case;

static float rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* ||C - A*B||_F / ||A*B||_F over the M x N block; the padding of C must still be NaN. */
static double check_result(const gemm_case *g, const float *a, const float *b, const float *c) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < g->m; i++) {
    for (int64_t j = 0; j < g->n; j++) {
      double ref = 0;
      for (int64_t p = 0; p < g->k; p++) ref += (double)a[i * g->lda + p] * b[p * g->ldb + j];
      double d = (double)c[i * g->ldc + j] - ref;
      if (isnan(d)) return INFINITY;
      num += d * d;
      den += ref * ref;
    }
    for (int64_t j = g->n; j < g->ldc; j++)
      if (!isnan(c[i * g->ldc + j])) return INFINITY; /* wrote outside C */
  }
  if (den == 0) return sqrt(num);
  return sqrt(num / den);
}

/* Runs one case through mmt_sgemm twice on stream and checks the result. */
static void run_case(mmt_context *ctx, const gemm_case *g, CUstream stream, uint64_t seed) {
  const rt_cu *cu = NULL;
  ut_err e;
  assert_int_equal(rt_driver(&cu, &e), MMT_OK);
  size_t na = (size_t)(g->m * g->lda), nb = (size_t)(g->k * g->ldb), nc = (size_t)(g->m * g->ldc);
  float *a = malloc((na + 1) * 4), *b = malloc((nb + 1) * 4), *c = malloc(nc * 4);
  assert_true(a && b && c);
  for (size_t i = 0; i < na; i++) a[i] = rnd(&seed);
  for (size_t i = 0; i < nb; i++) b[i] = rnd(&seed);
  CUdeviceptr da = 0, db = 0, dc = 0;
  assert_int_equal(cu->cuMemAlloc(&da, (na + 1) * 4), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&db, (nb + 1) * 4), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&dc, nc * 4), CUDA_SUCCESS);
  if (na) assert_int_equal(cu->cuMemcpyHtoD(da, a, na * 4), CUDA_SUCCESS);
  if (nb) assert_int_equal(cu->cuMemcpyHtoD(db, b, nb * 4), CUDA_SUCCESS);
  for (int rep = 0; rep < 2; rep++) {
    for (size_t i = 0; i < nc; i++) c[i] = NAN;
    assert_int_equal(cu->cuMemcpyHtoD(dc, c, nc * 4), CUDA_SUCCESS);
    mmt_status rc = mmt_sgemm(ctx, g->m, g->n, g->k, (const float *)(uintptr_t)da, g->lda,
                              (const float *)(uintptr_t)db, g->ldb, (float *)(uintptr_t)dc,
                              g->ldc, stream);
    if (rc) fail_msg("%s: %s", mmt_status_name(rc), mmt_errmsg(ctx));
    assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyDtoH(c, dc, nc * 4), CUDA_SUCCESS);
    double rel = check_result(g, a, b, c);
    if (!(rel < 1e-5))
      fail_msg("%lldx%lldx%lld: relative error %g", (long long)g->m, (long long)g->n,
               (long long)g->k, rel);
  }
  cu->cuMemFree(da);
  cu->cuMemFree(db);
  cu->cuMemFree(dc);
  free(a);
  free(b);
  free(c);
}

/* Opens a context on device 0 with the empty database, or skips without a GPU. */
static mmt_context *open_or_skip(fixture *f, const char *db_path) {
  mmt_options o = {.db_path = db_path, .cache_dir = f->dir};
  mmt_context *ctx = NULL;
  mmt_status rc = mmt_open(&ctx, 0, &o);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE) {
    mmt_close(ctx);
    skip();
  }
  if (rc) fail_msg("mmt_open: %s: %s", mmt_status_name(rc), mmt_errmsg(ctx));
  return ctx;
}

/* mmt_matmul_prepare fills the cache: each new problem once (a repeated descriptor and one
 * that launches nothing add none), no launch; the calls after it are hits, and preparing
 * again changes nothing. */
static void test_gpu_prepare(void **state) {
  fixture *f = *state;
  char path[160];
  snprintf(path, sizeof path, "%s/empty.db", f->dir);
  mmt_context *ctx = open_or_skip(f, path);
  const rt_cu *cu = NULL;
  ut_err e;
  assert_int_equal(rt_driver(&cu, &e), MMT_OK);
  CUdeviceptr buf[3];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(cu->cuMemAlloc(&buf[i], 1 << 20), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemsetD32(buf[i], 0x3c003c00, (1 << 20) / 4), CUDA_SUCCESS);
  }
  const mmt_matmul_desc op = {.order = MMT_ROW_MAJOR,
                              .m = 64,
                              .n = 48,
                              .k = 32,
                              .in_type = MMT_F16,
                              .out_type = MMT_F32,
                              .alpha = 1,
                              .a = (void *)(uintptr_t)buf[0],
                              .lda = 32,
                              .b = (void *)(uintptr_t)buf[1],
                              .ldb = 48,
                              .d = (void *)(uintptr_t)buf[2],
                              .ldd = 48,
                              .batch = 1,
                              .act = MMT_ACT_RELU};
  mmt_matmul_desc plain = op, none = op;
  plain.out_type = MMT_F16, plain.act = MMT_ACT_NONE, plain.c = plain.d, plain.ldc = 48;
  none.m = 0;
  const mmt_matmul_desc descs[4] = {op, plain, op, none};
  rt_dispatch_stats before, st;
  rt_dispatch_get_stats(ctx, &before);
  if (mmt_matmul_prepare(ctx, descs, 4, 2)) fail_msg("prepare: %s", mmt_errmsg(ctx));
  rt_dispatch_get_stats(ctx, &st);
  assert_int_equal(st.problems, before.problems + 2);
  assert_int_equal(st.misses, before.misses + 2);
  assert_int_equal(st.launches, before.launches);
  for (int i = 0; i < 4; i++) assert_int_equal(mmt_matmul(ctx, &descs[i], NULL), MMT_OK);
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  rt_dispatch_get_stats(ctx, &st);
  assert_int_equal(st.misses, before.misses + 2);
  assert_int_equal(st.hits, before.hits + 3);
  assert_int_equal(st.launches, before.launches + 3);
  float got;
  assert_int_equal(cu->cuMemcpyDtoH(&got, buf[2], 4), CUDA_SUCCESS);
  assert_true(got == 32.0f); /* the last call's (op) D: K products of ones */
  assert_int_equal(mmt_matmul_prepare(ctx, descs, 4, 0), MMT_OK);
  rt_dispatch_get_stats(ctx, &before);
  assert_int_equal(before.problems, st.problems);
  assert_int_equal(before.misses, st.misses);
  for (int i = 0; i < 3; i++) cu->cuMemFree(buf[i]);
  mmt_close(ctx);
}

static void test_gpu_sgemm(void **state) {
  fixture *f = *state;
  char path[160];
  snprintf(path, sizeof path, "%s/empty.db", f->dir);
  mmt_context *ctx = open_or_skip(f, path);
  const rt_cu *cu = NULL;
  CUstream stream = NULL;
  ut_err e;
  mmt_choice d1, d2;
  rt_dispatch_stats st;
  assert_int_equal(rt_driver(&cu, &e), MMT_OK);
  assert_int_equal(cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(explain_rm(ctx, 130, 70, 33, 40, 75, 80, &d1), MMT_OK);
  assert_int_equal(d1.kind, MMT_CHOICE_DEFAULT);
  assert_string_equal(d1.template_name, "reg_tiled"); /* the f32 default, any alignment */
  assert_int_equal(explain_rm(ctx, 17, 33, 65, 68, 38, 34, &d2), MMT_OK);
  assert_string_equal(d2.template_name, "skinny"); /* M <= 64 */
  const gemm_case cases[] = {{1, 1, 1, 1, 1, 1},          {17, 33, 65, 68, 38, 34},
                             {1000, 999, 1001, 1001, 999, 999}, {130, 70, 33, 40, 75, 80},
                             {5, 7, 0, 1, 7, 9}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_case(ctx, &cases[i], i % 2 ? stream : NULL, 1234 + i);
  rt_dispatch_get_stats(ctx, &st);
  assert_int_equal(st.launches, 10);
  assert_int_equal(st.misses, 5);
  assert_int_equal(st.hits, 5);
  assert_int_equal(st.problems, 5);
  /* the model's default for each shape: a module per distinct config, shared by problems */
  assert_true(st.kernels >= 1 && st.kernels <= st.problems);
  assert_int_equal(explain_rm(ctx, 130, 70, 33, 40, 75, 80, &d2), MMT_OK);
  assert_int_equal(d2.kind, d1.kind);
  assert_string_equal(d2.template_name, d1.template_name);
  assert_string_equal(d2.params, d1.params);
  /* M or N == 0 launches nothing; explain names no template. */
  assert_int_equal(mmt_sgemm(ctx, 0, 5, 5, NULL, 5, NULL, 5, NULL, 5, NULL), MMT_OK);
  assert_int_equal(mmt_sgemm(ctx, 5, 0, 5, NULL, 5, NULL, 1, NULL, 1, NULL), MMT_OK);
  assert_int_equal(explain_rm(ctx, 0, 5, 5, 5, 5, 5, &d2), MMT_OK);
  assert_int_equal(d2.kind, MMT_CHOICE_DEFAULT);
  assert_string_equal(d2.template_name, "");
  assert_int_equal(mmt_sgemm(ctx, -5, 5, 5, NULL, 5, NULL, 5, NULL, 5, NULL), MMT_ERR_INVALID_ARG);
  assert_string_equal(mmt_errmsg(ctx), "M must be >= 0, got -5");
  rt_dispatch_get_stats(ctx, &st);
  assert_int_equal(st.launches, 10);
  assert_int_equal(cu->cuStreamDestroy(stream), CUDA_SUCCESS);
  mmt_close(ctx);
}

/* The GPU model name of device 0 (what database rows are keyed by); skips without a GPU. */
static void device_name_or_skip(char *out, size_t len) {
  rt_device dev;
  ut_err e;
  mmt_status rc = rt_device_open(0, &dev, &e);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE) skip();
  assert_int_equal(rc, MMT_OK);
  snprintf(out, len, "%s", dev.info.name);
  rt_device_close(&dev);
}

static void test_gpu_exact_and_bad_device(void **state) {
  fixture *f = *state;
  mmt_choice d;
  char device[128];
  device_name_or_skip(device, sizeof device);
  insert(f->db, device, "smem_tiled", f->smem_hash, f->smem_alt, 96, 80, 72, DB_OK, 0.01);
  mmt_context *ctx = open_or_skip(f, f->db_path);
  assert_int_equal(explain_rm(ctx, 96, 80, 72, 72, 80, 80, &d), MMT_OK);
  assert_int_equal(d.kind, MMT_CHOICE_EXACT);
  assert_string_equal(d.params, f->smem_alt);
  const gemm_case g = {96, 80, 72, 72, 80, 80};
  run_case(ctx, &g, NULL, 99);
  assert_int_equal(explain_rm(ctx, 90, 80, 72, 72, 80, 80, &d), MMT_OK);
  assert_int_not_equal(d.kind, MMT_CHOICE_EXACT); /* the model's pick */
  assert_true(d.expected_ms > 0);
  mmt_close(ctx);
  mmt_options o = {.db_path = f->db_path, .cache_dir = f->dir};
  assert_int_equal(mmt_open(&ctx, 99, &o), MMT_ERR_NO_DEVICE);
  assert_true(strlen(mmt_errmsg(ctx)) > 0);
  mmt_close(ctx);
}

/* Every template family through mmt_sgemm on ragged shapes with leading dimensions that are
 * not multiples of 4 (lda = K + 1, ...): each config is made the exact tuned choice in its own
 * database.  For reg_tiled, a faster vec=4 row (needs K % 4 == 0, 16-byte rows) must be passed
 * over for the vec=1 one. */
static void test_gpu_families_unaligned_ld(void **state) {
  fixture *f = *state;
  ut_err e;
  char device[128];
  device_name_or_skip(device, sizeof device);
  /* Canonical params (every parameter named), as the dispatcher reports them. */
  static const char *const configs[][2] = {
      {"naive", NULL},
      {"smem_tiled", NULL},
      {"smem_tiled", "tile=32,pad=1,unroll=16,rpt=8"},
      {"reg_tiled", "bm=32,bn=32,bk=8,tm=4,tn=4,vec=1,stages=1,pad=0,group=1,split=1"},
      {"reg_tiled", "bm=64,bn=64,bk=16,tm=8,tn=8,vec=1,stages=2,pad=0,group=8,split=1"},
      {"reg_tiled", "bm=128,bn=128,bk=32,tm=8,tn=8,vec=1,stages=3,pad=4,group=1,split=1"},
  };
  const char *vec4 = "bm=64,bn=128,bk=8,tm=16,tn=8,vec=4,stages=2,pad=4,group=1,split=1";
  const gemm_case cases[] = {{127, 257, 1023, 1024, 260, 258}, {1, 1, 1, 2, 2, 3}};
  for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
    char hash[17], params[MMT_PARAMS_MAX], path[200];
    hash_and_default(configs[i][0], hash, params, sizeof params);
    if (configs[i][1]) snprintf(params, sizeof params, "%s", configs[i][1]);
    snprintf(path, sizeof path, "%s/family%zu.db", f->dir, i);
    db_handle *db = NULL;
    assert_int_equal(db_open(path, false, &db, &e), MMT_OK);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      const gemm_case *g = &cases[c];
      insert(db, device, configs[i][0], hash, params, g->m, g->n, g->k, DB_OK, 1.0);
      if (!strcmp(configs[i][0], "reg_tiled"))
        insert(db, device, "reg_tiled", hash, vec4, g->m, g->n, g->k, DB_OK, 0.001);
    }
    db_close(db);
    mmt_context *ctx = open_or_skip(f, path);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      const gemm_case *g = &cases[c];
      mmt_choice d;
      assert_int_equal(explain_rm(ctx, g->m, g->n, g->k, g->lda, g->ldb, g->ldc, &d), MMT_OK);
      assert_int_equal(d.kind, MMT_CHOICE_EXACT);
      assert_string_equal(d.template_name, configs[i][0]);
      assert_string_equal(d.params, params);
      run_case(ctx, g, NULL, 4242 + i * 7 + c);
    }
    mmt_close(ctx);
  }
}

/* A split-K kernel (exclusive: arrival counters and a workspace in the module) chosen for one
 * shape, and
 * EXCL_SETS independent problems of that shape: inputs on the host and the device, a C each,
 * a stream each. */
#define EXCL_SETS 3
typedef struct {
  mmt_context *ctx;
  const rt_cu *cu;
  gemm_case g;
  float *a[EXCL_SETS], *b[EXCL_SETS];
  CUdeviceptr da[EXCL_SETS], db[EXCL_SETS], dc[EXCL_SETS];
  CUstream st[EXCL_SETS];
} exclusive_setup;

static void exclusive_open(fixture *f, exclusive_setup *x) {
  ut_err e;
  char device[128], hash[17], params[MMT_PARAMS_MAX], path[200];
  device_name_or_skip(device, sizeof device);
  const char *split = "bm=32,bn=128,bk=16,tm=8,tn=4,vec=4,stages=3,pad=4,group=1,split=16";
  memset(x, 0, sizeof *x);
  x->g = (gemm_case){64, 512, 4096, 4096, 512, 512};
  const gemm_case *g = &x->g;
  hash_and_default("reg_tiled", hash, params, sizeof params);
  snprintf(path, sizeof path, "%s/exclusive.db", f->dir);
  db_handle *db = NULL;
  assert_int_equal(db_open(path, false, &db, &e), MMT_OK);
  insert(db, device, "reg_tiled", hash, split, g->m, g->n, g->k, DB_OK, 0.05);
  db_close(db);
  x->ctx = open_or_skip(f, path);
  mmt_choice d;
  assert_int_equal(explain_rm(x->ctx, g->m, g->n, g->k, g->lda, g->ldb, g->ldc, &d), MMT_OK);
  assert_string_equal(d.params, split);
  assert_int_equal(rt_driver(&x->cu, &e), MMT_OK);
  const rt_cu *cu = x->cu;
  size_t na = (size_t)(g->m * g->lda), nb = (size_t)(g->k * g->ldb), nc = (size_t)(g->m * g->ldc);
  uint64_t seed = 77;
  for (int s = 0; s < EXCL_SETS; s++) {
    x->a[s] = malloc(na * 4), x->b[s] = malloc(nb * 4);
    assert_true(x->a[s] && x->b[s]);
    for (size_t i = 0; i < na; i++) x->a[s][i] = rnd(&seed);
    for (size_t i = 0; i < nb; i++) x->b[s][i] = rnd(&seed);
    assert_int_equal(cu->cuStreamCreate(&x->st[s], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemAlloc(&x->da[s], na * 4), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemAlloc(&x->db[s], nb * 4), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemAlloc(&x->dc[s], nc * 4), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyHtoD(x->da[s], x->a[s], na * 4), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyHtoD(x->db[s], x->b[s], nb * 4), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemsetD32(x->dc[s], 0x7fc00000u, nc), CUDA_SUCCESS); /* NaN */
  }
  /* the copies and fills landed: the sets' non-blocking streams are not ordered after them */
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
}

/* C of set s = A * B of set s, on stream `stream`. */
static void exclusive_call(exclusive_setup *x, int s, CUstream stream) {
  const gemm_case *g = &x->g;
  mmt_status rc = mmt_sgemm(x->ctx, g->m, g->n, g->k, (const float *)(uintptr_t)x->da[s], g->lda,
                            (const float *)(uintptr_t)x->db[s], g->ldb,
                            (float *)(uintptr_t)x->dc[s], g->ldc, stream);
  if (rc) fail_msg("%s: %s", mmt_status_name(rc), mmt_errmsg(x->ctx));
}

/* Waits for every stream, checks each set's C against the CPU, frees everything. */
static void exclusive_check_close(exclusive_setup *x) {
  const rt_cu *cu = x->cu;
  const gemm_case *g = &x->g;
  size_t nc = (size_t)(g->m * g->ldc);
  float *c = malloc(nc * 4);
  assert_non_null(c);
  for (int s = 0; s < EXCL_SETS; s++) {
    assert_int_equal(cu->cuStreamSynchronize(x->st[s]), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyDtoH(c, x->dc[s], nc * 4), CUDA_SUCCESS);
    double rel = check_result(g, x->a[s], x->b[s], c);
    if (!(rel < 1e-5)) fail_msg("set %d: relative error %g", s, rel);
    cu->cuMemFree(x->da[s]), cu->cuMemFree(x->db[s]), cu->cuMemFree(x->dc[s]);
    cu->cuStreamDestroy(x->st[s]);
    free(x->a[s]), free(x->b[s]);
  }
  free(c);
  mmt_close(x->ctx);
}

/* The split-K kernel launched back to back on different streams with no host
 * synchronization between: the runtime must order the launches, or they take each other's
 * turns (wrong results or a hang). */
static void test_gpu_exclusive_two_streams(void **state) {
  exclusive_setup x;
  exclusive_open(*state, &x);
  rt_dispatch_stats st;
  exclusive_call(&x, 0, x.st[0]);
  rt_dispatch_get_stats(x.ctx, &st);
  assert_int_equal(st.workspace_allocs, 1); /* the first call sizes the workspace... */
  const uint64_t bytes = st.workspace_bytes;
  assert_true(bytes >= (uint64_t)x.g.m * x.g.n * 16 * 4); /* a tile of fp32 per slice */
  for (int rep = 0; rep < 20; rep++)
    for (int s = 0; s < EXCL_SETS; s++) exclusive_call(&x, s, x.st[s]);
  rt_dispatch_get_stats(x.ctx, &st);
  assert_int_equal(st.workspace_allocs, 1); /* ...and warm calls reuse it */
  assert_int_equal(st.workspace_bytes, bytes);
  /* every launch on another stream than the one before waited: all but the loop's first */
  assert_int_equal(st.exclusive_waits, 20 * EXCL_SETS);
  exclusive_check_close(&x);
}

/* Runs of launches on one stream, then on the next, with no host synchronization: within a
 * run stream order keeps the launches apart, so only the first of each run waits on the
 * event, and the first of the next run must still wait for the last of it. */
static void test_gpu_exclusive_same_stream_runs(void **state) {
  exclusive_setup x;
  exclusive_open(*state, &x);
  for (int round = 0; round < 4; round++)
    for (int s = 0; s < EXCL_SETS; s++)
      for (int i = 0; i < 5; i++) exclusive_call(&x, s, x.st[s]);
  rt_dispatch_stats st;
  rt_dispatch_get_stats(x.ctx, &st);
  assert_int_equal(st.exclusive_waits, 4 * EXCL_SETS); /* one a run */
  exclusive_check_close(&x);
}

/* The split-K kernel captured into a CUDA graph (two calls, sets 0 and 1), whose replays run
 * between eager calls of it on another stream (set 2), with no host synchronization: the
 * capture must succeed (no wait on an event recorded outside it), and the replays and eager
 * launches must still never overlap. */
static void test_gpu_exclusive_graph(void **state) {
  exclusive_setup x;
  exclusive_open(*state, &x);
  const rt_cu *cu = x.cu;
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  exclusive_call(&x, 2, x.st[2]); /* an eager launch before the capture: sizes the workspace */
  rt_dispatch_stats st;
  rt_dispatch_get_stats(x.ctx, &st);
  assert_int_equal(st.workspace_allocs, 1);
  assert_int_equal(cu->cuStreamBeginCapture(x.st[0], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                   CUDA_SUCCESS);
  exclusive_call(&x, 0, x.st[0]);
  exclusive_call(&x, 1, x.st[0]);
  assert_int_equal(cu->cuStreamEndCapture(x.st[0], &graph), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  for (int rep = 0; rep < 10; rep++) {
    assert_int_equal(cu->cuGraphLaunch(exec, x.st[0]), CUDA_SUCCESS);
    exclusive_call(&x, 2, x.st[2]);
  }
  assert_int_equal(cu->cuStreamSynchronize(x.st[0]), CUDA_SUCCESS);
  rt_dispatch_get_stats(x.ctx, &st);
  assert_int_equal(st.workspace_allocs, 1); /* captured and replayed with the same workspace */
  /* once a launch was captured, every launch waits (a replay may run anywhere) */
  assert_int_equal(st.exclusive_waits, 1 + 2 + 10);
  assert_int_equal(cu->cuGraphExecDestroy(exec), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphDestroy(graph), CUDA_SUCCESS);
  exclusive_check_close(&x);
}

/* A context opened with o (the test skipped without a GPU) and three zeroed 64 x 64 f32
 * matrices a, b, c in one allocation (*buf, freed by the caller). */
typedef struct {
  mmt_context *ctx;
  const rt_cu *cu;
  CUdeviceptr buf;
  const float *a, *b;
  float *c;
} sgemm_setup;

static sgemm_setup open_sgemm(const mmt_options *o) {
  sgemm_setup t = {0};
  mmt_status rc = mmt_open(&t.ctx, 0, o);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE) {
    mmt_close(t.ctx);
    skip();
  }
  if (rc) fail_msg("mmt_open: %s", mmt_errmsg(t.ctx));
  ut_err e;
  assert_int_equal(rt_driver(&t.cu, &e), MMT_OK);
  assert_int_equal(t.cu->cuMemAlloc(&t.buf, 3 * 64 * 64 * 4), CUDA_SUCCESS);
  assert_int_equal(t.cu->cuMemsetD32(t.buf, 0, 3 * 64 * 64), CUDA_SUCCESS);
  t.a = (const float *)(uintptr_t)t.buf, t.b = t.a + 64 * 64;
  t.c = (float *)(uintptr_t)(t.buf + 2 * 64 * 64 * 4);
  return t;
}

/* options.record: a context's first call of a problem without an exact row adds it to the
 * database's queue (made with the file), a second call of it adds nothing; the rows are the
 * kernel problems, as tune keys them. */
typedef struct {
  int count;
  db_recorded first;
} recorded_seen;

static int seen_fn(const char *device_name, const db_recorded *r, void *user) {
  (void)device_name;
  recorded_seen *s = user;
  if (!s->count++) s->first = *r;
  return 0;
}

static void test_gpu_record(void **state) {
  fixture *f = *state;
  char path[160];
  snprintf(path, sizeof path, "%s/recorded.db", f->dir);
  mmt_options o = {.db_path = path, .cache_dir = f->dir, .record = 1};
  sgemm_setup t = open_sgemm(&o);
  for (int i = 0; i < 2; i++)
    assert_int_equal(mmt_sgemm(t.ctx, 48, 40, 64, t.a, 64, t.b, 64, t.c, 64, NULL), MMT_OK);
  assert_int_equal(t.cu->cuCtxSynchronize(), CUDA_SUCCESS);
  mmt_close(t.ctx);
  t.cu->cuMemFree(t.buf);
  /* the same through $MMTUNE_RECORD, options leaving it off: a second problem */
  setenv("MMTUNE_RECORD", "1", 1);
  o.record = 0;
  t = open_sgemm(&o);
  unsetenv("MMTUNE_RECORD");
  assert_int_equal(mmt_sgemm(t.ctx, 56, 40, 64, t.a, 64, t.b, 64, t.c, 64, NULL), MMT_OK);
  assert_int_equal(t.cu->cuCtxSynchronize(), CUDA_SUCCESS);
  mmt_close(t.ctx);
  t.cu->cuMemFree(t.buf);
  db_handle *db = NULL;
  ut_err e;
  assert_int_equal(db_open(path, true, &db, &e), MMT_OK);
  recorded_seen seen = {0};
  assert_int_equal(db_each_recorded(db, NULL, seen_fn, &seen, &e), MMT_OK);
  db_close(db);
  assert_int_equal(seen.count, 2); /* 48 x 40 x 64 first: ordered by m */
  assert_int_equal(seen.first.calls, 1);
  assert_int_equal(seen.first.problem.m, 48);
  assert_int_equal(seen.first.problem.n, 40);
  assert_int_equal(seen.first.problem.k, 64);
  assert_string_equal(seen.first.problem.dtype, "f32");
  assert_string_equal(seen.first.problem.layout, "nn");
  assert_string_equal(seen.first.problem.op, "");
}

/* Fails an online test whose problem was not served EXACT in time, the worker's log (the
 * tuner's output) on stderr first. */
static void fail_with_worker_log(const char *log) {
  FILE *lf = fopen(log, "r");
  char line[512];
  while (lf && fgets(line, sizeof line, lf)) fputs(line, stderr);
  if (lf) fclose(lf);
  fail_msg("not served exact within 120 s of online tuning (the worker's log above)");
}

/* options.online: the first call records the problem and starts mmtune's worker, which tunes
 * it (a second of search); a later call then chooses again and is served EXACT, without a
 * restart.  The worker's output is in the cache folder. */
static void test_gpu_online(void **state) {
  fixture *f = *state;
  char path[160], log[200];
  snprintf(path, sizeof path, "%s/online-gpu.db", f->dir);
  snprintf(log, sizeof log, "%s/online-worker.log", f->dir);
  mmt_options o = {
      .db_path = path, .cache_dir = f->dir, .online = 1, .tuner = MMT_CLI_PATH, .online_budget = 1};
  sgemm_setup t = open_sgemm(&o);
  const mmt_problem p = {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, 56, 40, 64, 64, 64, 64,
                         MMT_F32};
  mmt_choice ch;
  assert_int_equal(mmt_sgemm(t.ctx, 56, 40, 64, t.a, 64, t.b, 64, t.c, 64, NULL), MMT_OK);
  assert_int_equal(mmt_explain(t.ctx, &p, &ch), MMT_OK);
  assert_int_not_equal(ch.kind, MMT_CHOICE_EXACT);
  const double until = ut_now_seconds() + 120;
  while (ch.kind != MMT_CHOICE_EXACT && ut_now_seconds() < until) {
    usleep(250000);
    assert_int_equal(mmt_sgemm(t.ctx, 56, 40, 64, t.a, 64, t.b, 64, t.c, 64, NULL), MMT_OK);
    assert_int_equal(mmt_explain(t.ctx, &p, &ch), MMT_OK);
  }
  assert_int_equal(t.cu->cuCtxSynchronize(), CUDA_SUCCESS);
  mmt_close(t.ctx);
  t.cu->cuMemFree(t.buf);
  if (ch.kind != MMT_CHOICE_EXACT) fail_with_worker_log(log);
  assert_int_equal(access(log, F_OK), 0);
}

/* Calls problem A (56 x 40 x 64) and B (40 x 56 x 64) every 100 ms until A's choice is
 * `tmpl`, at most 10 s; A's choice. */
static mmt_choice call_until(sgemm_setup *t, const char *tmpl) {
  const mmt_problem a = {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, 56, 40, 64, 64, 64, 64,
                         MMT_F32};
  mmt_choice ch = {0};
  const double until = ut_now_seconds() + 10;
  do {
    usleep(100000); /* polls come at most every 200 ms, rows count once 1 s old */
    assert_int_equal(mmt_sgemm(t->ctx, 56, 40, 64, t->a, 64, t->b, 64, t->c, 64, NULL), MMT_OK);
    assert_int_equal(mmt_sgemm(t->ctx, 40, 56, 64, t->a, 64, t->b, 64, t->c, 64, NULL), MMT_OK);
    assert_int_equal(mmt_explain(t->ctx, &a, &ch), MMT_OK);
  } while (strcmp(ch.template_name, tmpl) != 0 && ut_now_seconds() < until);
  return ch;
}

/* Online mode's choosing again, with rows written by hand (no worker: its tuner is not
 * there).  Once new rows have settled, a problem with a best row it does not launch
 * chooses again (DEFAULT to EXACT, then EXACT to the EXACT of a faster row), and a problem
 * without rows keeps its choice: choosing again would compile the model's new guess inside
 * a call. */
static void test_gpu_online_rechoice(void **state) {
  fixture *f = *state;
  char path[160], device[128];
  device_name_or_skip(device, sizeof device);
  snprintf(path, sizeof path, "%s/online-rechoice.db", f->dir);
  mmt_options o = {
      .db_path = path, .cache_dir = f->dir, .online = 1, .tuner = "/nonexistent/mmtune"};
  sgemm_setup t = open_sgemm(&o);
  assert_int_equal(mmt_sgemm(t.ctx, 56, 40, 64, t.a, 64, t.b, 64, t.c, 64, NULL), MMT_OK);
  assert_int_equal(mmt_sgemm(t.ctx, 40, 56, 64, t.a, 64, t.b, 64, t.c, 64, NULL), MMT_OK);
  rt_dispatch_stats st0, st;
  rt_dispatch_get_stats(t.ctx, &st0);
  assert_int_equal(st0.problems, 2);
  db_handle *db = NULL;
  ut_err e;
  assert_int_equal(db_open(path, false, &db, &e), MMT_OK);
  insert(db, device, "naive", f->naive_hash, f->naive_default, 56, 40, 64, DB_OK, 1.0);
  mmt_choice ch = call_until(&t, "naive");
  assert_int_equal(ch.kind, MMT_CHOICE_EXACT);
  rt_dispatch_get_stats(t.ctx, &st);
  assert_int_equal(st.misses, st0.misses + 1); /* A chose again, B kept its choice */
  insert(db, device, "smem_tiled", f->smem_hash, f->smem_default, 56, 40, 64, DB_OK, 0.5);
  ch = call_until(&t, "smem_tiled");
  assert_int_equal(ch.kind, MMT_CHOICE_EXACT);
  assert_string_equal(ch.params, f->smem_default);
  rt_dispatch_get_stats(t.ctx, &st);
  assert_int_equal(st.misses, st0.misses + 2);
  db_close(db);
  assert_int_equal(t.cu->cuCtxSynchronize(), CUDA_SUCCESS);
  mmt_close(t.ctx);
  t.cu->cuMemFree(t.buf);
}

/* Rows of template `name` with status `st`, counted by db_each_row. */
typedef struct {
  const char *name;
  db_status st;
  int count;
} row_count;

static int count_row(const db_result *r, void *user) {
  row_count *c = user;
  c->count += !strcmp(r->template_name, c->name) && r->status == c->st;
  return 0;
}

/* options.online with a candidate that faults: a template on the search path (the worker
 * inherits the application's environment) whose kernel stores to an unmapped address.  The
 * worker measures it (a search starts from every template's default), records it `fault`,
 * replaces its GPU process and tunes on; meanwhile every call of the application computes
 * the right product, and the problem ends up served EXACT by a kernel that did not fault. */
static void test_gpu_online_fault(void **state) {
  fixture *f = *state;
  char path[160], dir[160], tmpl[200], log[200];
  snprintf(path, sizeof path, "%s/online-fault.db", f->dir);
  snprintf(dir, sizeof dir, "%s/faulting", f->dir);
  snprintf(tmpl, sizeof tmpl, "%s/fault.lua", dir);
  snprintf(log, sizeof log, "%s/online-worker.log", f->dir);
  assert_int_equal(mkdir(dir, 0755), 0);
  ut_err e;
  char *src = NULL;
  size_t len = 0;
  assert_int_equal(ut_read_file(MMT_TEST_DIR "/templates_gpu/fault.lua", &src, &len, &e), MMT_OK);
  assert_int_equal(ut_write_file_atomic(tmpl, src, len, &e), MMT_OK);
  free(src);
  assert_int_equal(setenv("MMTUNE_TEMPLATE_PATH", dir, 1), 0);
  mmt_options o = {
      .db_path = path, .cache_dir = f->dir, .online = 1, .tuner = MMT_CLI_PATH, .online_budget = 3};
  mmt_context *ctx = NULL;
  mmt_status rc = mmt_open(&ctx, 0, &o);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE) {
    mmt_close(ctx);
    setenv("MMTUNE_TEMPLATE_PATH", TEMPLATES_DIR, 1);
    skip();
  }
  if (rc) fail_msg("mmt_open: %s", mmt_errmsg(ctx));
  const rt_cu *cu;
  assert_int_equal(rt_driver(&cu, &e), MMT_OK);
  const gemm_case g = {72, 24, 40, 40, 24, 27}; /* C's rows padded: NaN stays there */
  const size_t na = (size_t)(g.m * g.lda), nb = (size_t)(g.k * g.ldb), nc = (size_t)(g.m * g.ldc);
  float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4);
  assert_true(a && b && c);
  uint64_t seed = 0x49;
  for (size_t i = 0; i < na; i++) a[i] = rnd(&seed);
  for (size_t i = 0; i < nb; i++) b[i] = rnd(&seed);
  CUdeviceptr buf;
  assert_int_equal(cu->cuMemAlloc(&buf, (na + nb + nc) * 4), CUDA_SUCCESS);
  const CUdeviceptr da = buf, db = da + na * 4, dc = db + nb * 4;
  assert_int_equal(cu->cuMemcpyHtoD(da, a, na * 4), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(db, b, nb * 4), CUDA_SUCCESS);
  const mmt_problem p = {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, g.m,   g.n,
                         g.k,           g.lda,        g.ldb,        g.ldc, MMT_F32};
  mmt_choice ch = {0};
  int calls = 0;
  const double until = ut_now_seconds() + 120;
  do {
    if (calls) usleep(250000);
    assert_int_equal(cu->cuMemsetD32(dc, 0x7fc00000u, nc), CUDA_SUCCESS); /* NaN: unwritten */
    rc = mmt_sgemm(ctx, g.m, g.n, g.k, (const float *)(uintptr_t)da, g.lda,
                   (const float *)(uintptr_t)db, g.ldb, (float *)(uintptr_t)dc, g.ldc, NULL);
    if (rc) fail_msg("call %d: %s", calls, mmt_errmsg(ctx));
    assert_int_equal(cu->cuMemcpyDtoH(c, dc, nc * 4), CUDA_SUCCESS);
    const double rel = check_result(&g, a, b, c);
    if (!(rel < 1e-5)) fail_msg("call %d while tuning: relative error %g", calls, rel);
    calls++;
    assert_int_equal(mmt_explain(ctx, &p, &ch), MMT_OK);
  } while (ch.kind != MMT_CHOICE_EXACT && ut_now_seconds() < until);
  assert_int_equal(setenv("MMTUNE_TEMPLATE_PATH", TEMPLATES_DIR, 1), 0);
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  cu->cuMemFree(buf);
  free(a), free(b), free(c);
  mmt_close(ctx);
  if (ch.kind != MMT_CHOICE_EXACT) fail_with_worker_log(log);
  assert_string_not_equal(ch.template_name, "fault");
  db_handle *h = NULL;
  assert_int_equal(db_open(path, true, &h, &e), MMT_OK);
  row_count faults = {"fault", DB_FAULT, 0};
  assert_int_equal(db_each_row(h, ch.device_name, count_row, &faults, &e), MMT_OK);
  db_close(h);
  if (faults.count < 1) fail_msg("no fault row of the faulting template in %s", path);
}

/* mmt_matmul_prepare loads a split-K kernel and sizes its workspace without a launch, so
 * that the problem's first call can be captured into a graph. */
static void test_gpu_prepare_graph(void **state) {
  exclusive_setup x;
  exclusive_open(*state, &x);
  const rt_cu *cu = x.cu;
  const gemm_case *g = &x.g;
  void *c = (void *)(uintptr_t)x.dc[0];
  const mmt_matmul_desc d = {.order = MMT_ROW_MAJOR,
                             .m = g->m,
                             .n = g->n,
                             .k = g->k,
                             .in_type = MMT_F32,
                             .out_type = MMT_F32,
                             .alpha = 1,
                             .a = (void *)(uintptr_t)x.da[0],
                             .lda = g->lda,
                             .b = (void *)(uintptr_t)x.db[0],
                             .ldb = g->ldb,
                             .c = c,
                             .ldc = g->ldc,
                             .d = c,
                             .ldd = g->ldc,
                             .batch = 1};
  if (mmt_matmul_prepare(x.ctx, &d, 1, 0)) fail_msg("prepare: %s", mmt_errmsg(x.ctx));
  rt_dispatch_stats st;
  rt_dispatch_get_stats(x.ctx, &st);
  assert_int_equal(st.workspace_allocs, 1);
  assert_int_equal(st.launches, 0);
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  assert_int_equal(cu->cuStreamBeginCapture(x.st[0], CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  exclusive_call(&x, 0, x.st[0]); /* the problem's first call */
  assert_int_equal(cu->cuStreamEndCapture(x.st[0], &graph), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphLaunch(exec, x.st[0]), CUDA_SUCCESS);
  for (int s = 1; s < EXCL_SETS; s++) exclusive_call(&x, s, x.st[s]);
  assert_int_equal(cu->cuStreamSynchronize(x.st[0]), CUDA_SUCCESS);
  rt_dispatch_get_stats(x.ctx, &st);
  assert_int_equal(st.workspace_allocs, 1);
  assert_int_equal(st.misses, 1);
  assert_int_equal(cu->cuGraphExecDestroy(exec), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphDestroy(graph), CUDA_SUCCESS);
  exclusive_check_close(&x);
}

int main(void) {
  /* Test templates first, then the source tree's. */
  if (setenv("MMTUNE_TEMPLATE_PATH", TEMPLATES_DIR, 1) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exact_skips_unusable_rows),
      cmocka_unit_test(test_predicted),
      cmocka_unit_test(test_predicted_known_answer),
      cmocka_unit_test(test_predicted_other_layout),
      cmocka_unit_test(test_requirements_and_constraints),
      cmocka_unit_test(test_default),
      cmocka_unit_test(test_builtin_offered),
      cmocka_unit_test(test_builtin_lists_parse),
      cmocka_unit_test(test_device_arch),
      cmocka_unit_test(test_tf32_falls_back_to_f32),
      cmocka_unit_test(test_tf32_takes_faster_f32),
      cmocka_unit_test(test_unsupported),
      cmocka_unit_test(test_no_candidates_and_huge_sizes),
      cmocka_unit_test(test_distance_and_alignment),
      cmocka_unit_test(test_public_basics),
      cmocka_unit_test(test_open_without_gpu),
      cmocka_unit_test(test_open_corrupt_db),
      cmocka_unit_test(test_record_needs_a_database),
      cmocka_unit_test(test_record_from_environment),
      cmocka_unit_test(test_online_options),
      cmocka_unit_test(test_gpu_sgemm),
      cmocka_unit_test(test_gpu_prepare),
      cmocka_unit_test(test_gpu_exact_and_bad_device),
      cmocka_unit_test(test_gpu_families_unaligned_ld),
      cmocka_unit_test(test_gpu_exclusive_two_streams),
      cmocka_unit_test(test_gpu_exclusive_same_stream_runs),
      cmocka_unit_test(test_gpu_exclusive_graph),
      cmocka_unit_test(test_gpu_prepare_graph),
      cmocka_unit_test(test_gpu_record),
      cmocka_unit_test(test_gpu_online),
      cmocka_unit_test(test_gpu_online_fault),
      cmocka_unit_test(test_gpu_online_rechoice),
  };
  return cmocka_run_group_tests(tests, fixture_setup, fixture_teardown);
}
