/*
 * test_model.c -- runtime/rt_model.c and the dispatcher's ranking (rt_rank) on real
 * measurements: tests/data/model_h100.sql, the f16 and f32 rows of a main job on an H100
 * (schema 4: each row with its launch shape).  No GPU.
 *   - the analytic part: wave quantization, K, split-K, persistent launch shapes;
 *   - the fit: every row read, its configs grouped, in milliseconds;
 *   - predictions with the rows: a measured config is predicted near its measurement;
 *   - leave-one-shape-out: with a shape's rows hidden, the first ranked config measured there
 *     is at least a floor of the best (a regression test for the model: the figures of
 *     docs/perf.md are what it reached when written).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "db.h"
#include "rt_choose.h"
#include "rt_model.h"
#include "rt_model_int.h"

#define SQLITE_CLI "/usr/bin/sqlite3"
#define DEV "NVIDIA H100 80GB HBM3"

static char g_dir[] = "/tmp/mmt_model_XXXXXX";
static char g_db[64];

static int setup(void **state) {
  (void)state;
  if (!mkdtemp(g_dir)) return -1;
  snprintf(g_db, sizeof g_db, "%s/m.db", g_dir);
  db_handle *db = NULL;
  ut_err e;
  if (db_open(g_db, false, &db, &e) != MMT_OK) return -1;
  db_close(db);
  if (access(SQLITE_CLI, X_OK) != 0) return 0; /* the tests skip */
  char cmd[512];
  snprintf(cmd, sizeof cmd, SQLITE_CLI " '%s' < '%s/data/model_h100.sql'", g_db, MMT_TEST_DIR);
  return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static db_handle *open_fixture(void) {
  if (access(SQLITE_CLI, X_OK) != 0) skip();
  db_handle *db = NULL;
  ut_err e;
  assert_int_equal(db_open(g_db, true, &db, &e), MMT_OK);
  return db;
}

static gen_problem packed(const char *dtype, const char *layout, int64_t m, int64_t n, int64_t k) {
  return gen_packed_problem(dtype, layout, m, n, k);
}

static void test_analytic(void **state) {
  (void)state;
  rt_model_device dev = {.sm_count = 132, .cc_major = 9};
  db_launch l = {.tile_m = 128, .tile_n = 128, .slices = 1, .threads = 256};
  /* 132 tiles fill one wave; 133 take a second round */
  gen_problem p = packed("f16", "nn", 128 * 12, 128 * 11, 4096);
  gen_problem q = packed("f16", "nn", 128 * 12 + 1, 128 * 11, 4096);
  double a = rt_model_analytic_ms(&dev, &l, &p), b = rt_model_analytic_ms(&dev, &l, &q);
  assert_true(b > 1.8 * (a - RT_MODEL_LAUNCH_MS) + RT_MODEL_LAUNCH_MS);
  /* twice the K, about twice the time; f32 on the SIMT units is slower than f16 */
  gen_problem k2 = packed("f16", "nn", 128 * 12, 128 * 11, 8192);
  double c = rt_model_analytic_ms(&dev, &l, &k2) - RT_MODEL_LAUNCH_MS;
  assert_true(fabs(c / (a - RT_MODEL_LAUNCH_MS) - 2) < 0.1); /* the fill is paid once a round */
  gen_problem f = packed("f32", "nn", 128 * 12, 128 * 11, 4096);
  assert_true(rt_model_analytic_ms(&dev, &l, &f) > 5 * a);
  /* few tiles, long K: split-K slices spread the work over more SMs */
  gen_problem s = packed("f16", "nn", 256, 256, 65536);
  db_launch split = l;
  split.slices = 8;
  assert_true(rt_model_analytic_ms(&dev, &split, &s) < 0.5 * rt_model_analytic_ms(&dev, &l, &s));
  /* never below the compulsory bytes at DRAM bandwidth */
  gen_problem gemv = packed("f16", "nt", 1, 8192, 8192);
  assert_true(rt_model_analytic_ms(&dev, &l, &gemv) > 8192.0 * 8192 * 2 / 3.0e12 * 1e3);
  /* a decode batch: 16-row tensor-core blocks (mma_sync's) stream the weights near their
   * compulsory time (measured: 0.045 ms on an H100, about 1.3x it); blocks of a few rows
   * (skinny's) multiply on the CUDA cores, slower for as many rows */
  gen_problem decode = packed("f16", "nt", 16, 14336, 4096);
  double flops_per_s, bytes_per_s;
  rt_model_peaks(&dev, "f16", &flops_per_s, &bytes_per_s);
  /* FP8's tensor-core rate is twice 16-bit's on Hopper; its compute-bound time half */
  double fp8_flops, fp8_bytes;
  rt_model_peaks(&dev, "e4m3", &fp8_flops, &fp8_bytes);
  assert_true(fp8_flops == 2 * flops_per_s && fp8_bytes == bytes_per_s);
  const double weights_ms = 14336.0 * 4096 * 2 / bytes_per_s * 1e3;
  db_launch mma16 = {.tile_m = 16, .tile_n = 128, .slices = 1, .threads = 64};
  db_launch fma8 = {.tile_m = 8, .tile_n = 128, .slices = 1, .threads = 64};
  const double t16 = rt_model_analytic_ms(&dev, &mma16, &decode);
  assert_true(t16 < 1.5 * weights_ms + RT_MODEL_LAUNCH_MS);
  assert_true(rt_model_analytic_ms(&dev, &fma8, &decode) > 1.5 * t16);
  /* 64 work units get DRAM's bandwidth only with loads in flight: a deep ring (wgmma's swap
   * tile of 16 x 64 with 12 stages of 80 rows of 128 bytes: 0.0162 ms measured at
   * 16x4096x4096, 1.14x the compulsory time and the launch) does, a unit without one gets its
   * SMs' share; a ring over a tile mostly outside the problem counts for its inside part */
  gen_problem batch16 = packed("f16", "nn", 16, 4096, 4096);
  const double w16_ms = 4096.0 * 4096 * 2 / bytes_per_s * 1e3;
  db_launch ring = {.tile_m = 16, .tile_n = 64, .slices = 1, .threads = 128,
                    .shared_bytes = 12 * 80 * 128};
  db_launch shallow = ring;
  shallow.shared_bytes = 0;
  assert_true(rt_model_analytic_ms(&dev, &ring, &batch16) < 1.1 * w16_ms + RT_MODEL_LAUNCH_MS);
  assert_true(rt_model_analytic_ms(&dev, &shallow, &batch16) > 1.4 * w16_ms + RT_MODEL_LAUNCH_MS);
  db_launch tall = ring; /* 64 x 64 tiles, 4 stages: at M = 16, 48 of their 64 rows hold no loads */
  tall.tile_m = 64;
  tall.shared_bytes = 4 * 128 * 128;
  gen_problem batch64 = packed("f16", "nn", 64, 4096, 4096);
  assert_true(rt_model_analytic_ms(&dev, &tall, &batch16) >
              1.2 * rt_model_analytic_ms(&dev, &tall, &batch64));
  /* rows of 6000 bytes read five 32-byte sectors for every four on every other row: 3000^3 in
   * 16 bits costs more L2 time than with its pitches padded to 3008 (or f32's 12000 bytes);
   * a cluster of two sharing B reads half of B from L2, and waits for its other block */
  db_launch big = {.tile_m = 128, .tile_n = 256, .slices = 1, .threads = 384};
  gen_problem odd = packed("f16", "nn", 3000, 3000, 3000), padded = odd;
  padded.lda = padded.ldb = 3008;
  const double t_odd = rt_model_analytic_ms(&dev, &big, &odd);
  const double t_padded = rt_model_analytic_ms(&dev, &big, &padded);
  assert_true(t_odd > 1.05 * t_padded);
  db_launch pair = big;
  pair.cluster = 2;
  assert_true(rt_model_analytic_ms(&dev, &pair, &odd) < 0.97 * t_odd);
  gen_problem square = packed("f16", "nn", 4096, 4096, 4096);
  const double t_square = rt_model_analytic_ms(&dev, &big, &square);
  assert_true(rt_model_analytic_ms(&dev, &pair, &square) < 1.05 * t_square);
  assert_true(rt_model_analytic_ms(&dev, &pair, &square) > 0.95 * t_square);
  /* the grid in whole clusters: 3 tile rows run as 4 */
  db_launch rows = {.tile_m = 128, .tile_n = 128, .slices = 1, .threads = 384, .cluster = 2};
  gen_problem three = packed("f16", "nn", 3 * 128, 128 * 44, 8192);
  gen_problem four = packed("f16", "nn", 4 * 128, 128 * 44, 8192);
  assert_true(rt_model_analytic_ms(&dev, &rows, &three) ==
              rt_model_analytic_ms(&dev, &rows, &four));
  /* an FP8 kernel's promotion costs its compute-bound time a share, less the longer its
   * interval; the 16-bit types' kernels do not promote, whatever the parameter says */
  db_launch fast = big, every = big, every2 = big;
  every.promote = 1;
  every2.promote = 2;
  gen_problem fp8 = packed("e4m3", "nt", 8192, 8192, 8192),
              f16 = packed("f16", "nt", 8192, 8192, 8192);
  const double t_fast = rt_model_analytic_ms(&dev, &fast, &fp8);
  const double t_every = rt_model_analytic_ms(&dev, &every, &fp8);
  assert_true(t_every > 1.04 * t_fast);
  assert_true(rt_model_analytic_ms(&dev, &every2, &fp8) < t_every);
  assert_true(rt_model_analytic_ms(&dev, &every2, &fp8) > t_fast);
  assert_true(rt_model_analytic_ms(&dev, &every, &f16) == rt_model_analytic_ms(&dev, &fast, &f16));
}

/* The launch shape of a per-tile grid, a persistent one, a split-K one and a swapped one (C^T:
 * bm of N and bn of M a block, so its tile of C is bn x bm). */
static void test_launch_of(void **state) {
  (void)state;
  gen_template *t = NULL;
  gen_config cfg;
  gen_kernel k = {0};
  db_launch l;
  ut_err e;
  assert_int_equal(gen_load_named("wgmma", &t, &e), MMT_OK);
  const struct {
    const char *params;
    db_launch want;
  } cases[] = {
      /* shared_bytes: the kernel's (checked below) */
      {"bm=128,bn=256,consumers=2,persist=0", {128, 256, 1, 384, 0, 0, 1, 0, 1}},
      {"bm=128,bn=64,consumers=2,blocks=2,persist=1", {128, 64, 1, 384, 2, 0, 1, 0, 1}},
      {"bm=128,bn=128,consumers=2,persist=2", {128, 128, 1, 384, 1, 0, 1, 1, 1}}, /* ping-pong */
      {"bm=64,bn=64,consumers=1,split=4", {64, 64, 4, 256, 0, 0, 1, 0, 1}},
      {"bm=128,bn=32,consumers=2,split=2,swap=1", {32, 128, 2, 384, 0, 0, 1, 0, 1}},
      {"bm=128,bn=128,consumers=2,split=2,cluster=2", {128, 128, 2, 384, 0, 0, 2, 0, 1}},
      {"bm=128,bn=128,consumers=2,promote=2", {128, 128, 1, 384, 0, 0, 1, 0, 2}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(gen_config_parse(t, cases[i].params, &cfg, &e), MMT_OK);
    assert_int_equal(gen_emit(t, &cfg, "f16", "nn", &k, &e), MMT_OK);
    assert_int_equal(rt_launch_of(t, &cfg, &k, &l, &e), MMT_OK);
    assert_int_equal(l.tile_m, cases[i].want.tile_m);
    assert_int_equal(l.tile_n, cases[i].want.tile_n);
    assert_int_equal(l.slices, cases[i].want.slices);
    assert_int_equal(l.per_sm, cases[i].want.per_sm);
    assert_int_equal(l.cluster, cases[i].want.cluster);
    assert_int_equal(l.overlap, cases[i].want.overlap);
    assert_int_equal(l.promote, cases[i].want.promote); /* the config's, whatever the type */
    assert_true(l.threads > 0);
    assert_int_equal(l.shared_bytes, (int)k.shared_bytes); /* the ring: its loads in flight */
    assert_true(l.shared_bytes > 0);
    gen_kernel_clear(&k);
  }
  gen_free(t);
}

static void test_fit(void **state) {
  (void)state;
  db_handle *db = open_fixture();
  rt_model *m = NULL;
  ut_err e;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(rt_model_fit(db, DEV, NULL, NULL, &m, &e), MMT_OK);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
  print_message("fit: %d rows, %d configs in %.1f ms\n", rt_model_row_count(m),
                rt_model_config_count(m), ms);
  assert_int_equal(rt_model_row_count(m), 611); /* every ok row has its launch shape */
  assert_true(rt_model_config_count(m) > 100);
  rt_model_device dev = rt_model_get_device(m);
  assert_int_equal(dev.sm_count, 132); /* from the rows */
  assert_int_equal(dev.cc_major, 9);
  rt_model_free(m);
  /* another GPU model: no rows, an empty model that still predicts */
  assert_int_equal(rt_model_fit(db, "Other GPU", NULL, NULL, &m, &e), MMT_OK);
  assert_int_equal(rt_model_row_count(m), 0);
  rt_model_free(m);
  db_close(db);
}

/* With every row present, each problem's fastest config is predicted within 1.5x of its
 * measurement, and a row's shape hidden moves its prediction. */
static int on_best(const db_result *r, void *user) {
  rt_model *m = user;
  gen_problem p = packed(r->problem.dtype, r->problem.layout, r->problem.m, r->problem.n,
                         r->problem.k);
  rt_model_focus(m, &p, NULL);
  int c = rt_model_find(m, r->template_name, r->template_hash, r->params, r->problem.dtype);
  assert_true(c >= 0);
  rt_prediction pred;
  rt_model_predict(m, c, NULL, NULL, NULL, NAN, &p, &pred);
  if (!(pred.ms < 1.5 * r->ms_median && pred.ms > r->ms_median / 1.5))
    fail_msg("%s %lldx%lldx%lld %s %s: predicted %.4f ms, measured %.4f", r->problem.dtype,
             (long long)p.m, (long long)p.n, (long long)p.k, r->template_name, r->params,
             pred.ms, r->ms_median);
  assert_true(pred.rows >= 1 && pred.basis_id > 0);
  return 0;
}

static void test_predict_measured(void **state) {
  (void)state;
  db_handle *db = open_fixture();
  rt_model *m = NULL;
  ut_err e;
  assert_int_equal(rt_model_fit(db, DEV, NULL, NULL, &m, &e), MMT_OK);
  assert_int_equal(db_each_best(db, DEV, NULL, NULL, on_best, m, &e), MMT_OK);
  rt_model_free(m);
  db_close(db);
}

/* A config's launch shape is its rows' in the problem's layout; in a layout it has no rows in
 * (the fixture's are all nn), the one the caller emitted for that layout, else its first
 * row's.  A grid of 2 blocks (skinny's axpy body on a GEMV's wide W) is predicted far slower
 * than one that fills the GPU. */
static void test_predict_other_layout(void **state) {
  (void)state;
  db_handle *db = open_fixture();
  rt_model *m = NULL;
  ut_err e;
  assert_int_equal(rt_model_fit(db, DEV, NULL, NULL, &m, &e), MMT_OK);
  rt_model_config mc;
  rt_model_get_config(m, 0, &mc);
  assert_int_equal(mc.layouts, 1u << gen_layout_index("nn"));
  const db_launch few = {.tile_m = 1, .tile_n = 2048, .slices = 1, .threads = 128};
  const db_launch many = {.tile_m = 1, .tile_n = 8, .slices = 1, .threads = 128};
  rt_prediction own, with_few, with_many, nn_few;
  gen_problem nt = packed(mc.dtype, "nt", 1, 4096, 11008);
  rt_model_focus(m, &nt, NULL);
  rt_model_predict(m, 0, NULL, NULL, NULL, NAN, &nt, &own);
  rt_model_predict(m, 0, NULL, NULL, &few, NAN, &nt, &with_few);
  rt_model_predict(m, 0, NULL, NULL, &many, NAN, &nt, &with_many);
  const rt_model_device h100 = {132, 9};
  assert_true(own.analytic_ms == rt_model_analytic_ms(&h100, &mc.launch, &nt));
  assert_true(with_few.analytic_ms > 10 * with_many.analytic_ms);
  assert_true(with_few.ms > 10 * with_many.ms);
  gen_problem nn = packed(mc.dtype, "nn", 1, 4096, 11008); /* its rows' layout: theirs */
  rt_model_focus(m, &nn, NULL);
  rt_model_predict(m, 0, NULL, NULL, &few, NAN, &nn, &nn_few);
  assert_true(nn_few.analytic_ms == rt_model_analytic_ms(&h100, &mc.launch, &nn));
  rt_model_free(m);
  db_close(db);
}

/* An ok row of the test GPU, NVRTC 13.0, for `batch` problems p (nt; op: its text) taking ms. */
static void fill_row(db_result *r, const char *tname, const char *hash, const char *params,
                     const gen_problem *p, int64_t batch, const char *op, db_launch launch,
                     double ms) {
  memset(r, 0, sizeof *r);
  snprintf(r->device.name, sizeof r->device.name, "%s", DEV);
  snprintf(r->device.uuid, sizeof r->device.uuid, "GPU-test");
  r->device.cc_major = 9;
  r->device.sm_count = 132;
  snprintf(r->nvrtc_version, sizeof r->nvrtc_version, "13.0");
  snprintf(r->template_name, sizeof r->template_name, "%s", tname);
  snprintf(r->template_hash, sizeof r->template_hash, "%s", hash);
  snprintf(r->params, sizeof r->params, "%s", params);
  r->problem = (db_problem){.layout = "nt", .m = p->m, .n = p->n, .k = p->k, .batch = batch};
  snprintf(r->problem.dtype, sizeof r->problem.dtype, "%s", p->dtype);
  snprintf(r->problem.op, sizeof r->problem.op, "%s", op);
  r->status = DB_OK;
  r->ms_min = r->ms_median = r->ms_max = ms;
  r->runs = 10;
  r->tflops = 2.0 * (double)p->m * (double)p->n * (double)p->k / (ms * 1e9);
  r->regs = r->shared_bytes = r->local_bytes = -1;
  r->launch = launch;
}

/* A row of config `params` of template "tpl" (dtype, nt, tiles of 64 x 64, op and batch)
 * taking `factor` times the analytic time, and an op's epilogue term on top. */
static void put_op_row(db_handle *db, const char *dtype, const char *params, int64_t m, int64_t n,
                       int64_t k, double factor, const char *op, int64_t batch) {
  const db_launch l = {.tile_m = 64, .tile_n = 64, .slices = 1, .threads = 128};
  const rt_model_device h100 = {132, 9};
  gen_problem p = packed(dtype, "nt", m, n, k);
  gen_op parsed;
  db_result r;
  ut_err e;
  if (op[0]) {
    assert_int_equal(gen_op_parse(op, dtype, &parsed, &e), MMT_OK);
    p.op = &parsed;
  }
  fill_row(&r, "tpl", "0123456789abcdef", params, &p, batch, op, l,
           factor * rt_model_analytic_ms(&h100, &l, &p) + rt_model_epilogue_ms(&h100, &l, &p));
  assert_int_equal(db_insert(db, &r, &e), MMT_OK);
}

/* The same as a plain GEMM's row. */
static void put_row_of(db_handle *db, const char *dtype, const char *params, int64_t m, int64_t n,
                       int64_t k, double factor) {
  put_op_row(db, dtype, params, m, n, k, factor, "", 1);
}

static void put_row(db_handle *db, const char *params, int64_t m, int64_t n, int64_t k,
                    double factor) {
  put_row_of(db, "f16", params, m, n, k, factor);
}

/* The correction of config `params` of "tpl" for p (its ms over the analytic ms). */
static double ratio_for(rt_model *m, const char *params, const gen_problem *p) {
  const int c = rt_model_find(m, "tpl", "0123456789abcdef", params, p->dtype);
  assert_true(c >= 0);
  rt_model_focus(m, p, NULL);
  rt_prediction pred;
  rt_model_predict(m, c, NULL, NULL, NULL, NAN, p, &pred);
  assert_true(pred.rows >= 1);
  return pred.ms / pred.analytic_ms;
}

/* A database of its own under the test directory, emptied first. */
static db_handle *fresh_db(const char *name) {
  char path[96];
  db_handle *db = NULL;
  ut_err e;
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  unlink(path);
  assert_int_equal(db_open(path, false, &db, &e), MMT_OK);
  return db;
}

/* f16 and bf16 rows of a config are one config of the model: a config measured only in f16 is
 * predicted for bf16 from its f16 rows, which weigh RT_MODEL_OTHER_DTYPE against bf16's own;
 * f32 rows stay apart. */
static void test_predict_other_16bit(void **state) {
  (void)state;
  db_handle *db = fresh_db("class.db");
  ut_err e;
  put_row_of(db, "f16", "x=1", 8, 5120, 5120, 2.0);
  put_row_of(db, "f16", "x=1", 16, 14336, 4096, 2.0);
  put_row_of(db, "f32", "x=1", 8, 5120, 5120, 0.3);
  put_row_of(db, "bf16", "x=2", 128, 5120, 5120, 1.0);
  put_row_of(db, "f16", "x=3", 8, 5120, 5120, 4.0);
  put_row_of(db, "bf16", "x=3", 8, 5120, 5120, 1.0);
  rt_model *m = NULL;
  assert_int_equal(rt_model_fit(db, DEV, NULL, NULL, &m, &e), MMT_OK);
  const char *tpl = "tpl", *hash = "0123456789abcdef";
  const int of_f16 = rt_model_find(m, tpl, hash, "x=1", "f16");
  assert_int_equal(rt_model_find(m, tpl, hash, "x=1", "bf16"), of_f16);
  assert_true(rt_model_find(m, tpl, hash, "x=1", "f32") >= 0);
  assert_int_not_equal(rt_model_find(m, tpl, hash, "x=1", "f32"), of_f16);
  assert_int_equal(rt_model_find(m, tpl, hash, "x=2", "tf32"), -1);
  /* bf16 on f16's rows alone; f32 on its own */
  gen_problem b = packed("bf16", "nt", 8, 11008, 4096), f = packed("f32", "nt", 8, 11008, 4096);
  const double rb = ratio_for(m, "x=1", &b), rf = ratio_for(m, "x=1", &f);
  assert_true(rb > 1.6 && rb < 2.4);
  assert_true(rf > 0.2 && rf < 0.45);
  /* rows of both on p: each dtype's own rows weigh more.  Weighed alike, both would be 2 */
  gen_problem b8 = packed("bf16", "nt", 8, 5120, 5120), f8 = packed("f16", "nt", 8, 5120, 5120);
  const double own_b = ratio_for(m, "x=3", &b8), own_f = ratio_for(m, "x=3", &f8);
  assert_true(own_b > 1.0 && own_b < 2.0);
  assert_true(own_f > 2.0 && own_f < 4.0);
  rt_model_free(m);
  db_close(db);
}

/* The template and params rt_choose_blocks (block_m > 0) or rt_choose picks for op (text) on
 * the bf16 nt problem of G = 160 experts of M x 1536 x 5120, with no database. */
static void blocks_pick(const char *op_text, int64_t m, int64_t block_m, char *out, size_t len) {
  rt_chooser *ch = NULL;
  ut_err e;
  gen_op op;
  assert_int_equal(rt_chooser_new("sm_90", 132, &ch, &e), MMT_OK);
  assert_int_equal(gen_op_parse(op_text, "bf16", &op, &e), MMT_OK);
  const gen_problem p = gen_packed_op_problem("bf16", "nt", m, 1536, 5120, &op, 160);
  rt_choice c = {0};
  const mmt_status rc = block_m ? rt_choose_blocks(ch, NULL, DEV, &p, block_m, &c, &e)
                                : rt_choose(ch, NULL, DEV, &p, &c, &e);
  if (rc) fail_msg("%s", e.msg);
  snprintf(out, len, "%s %s", c.template_name, c.params);
  rt_choice_clear(&c);
  rt_chooser_free(ch);
}

/* A masked call without its regime's row: the pick for its blocks' depth, not for the mean
 * an expert has (which hides a skewed routing's fullest expert); blocks no deeper than the
 * mean, and contiguous calls, as rt_choose picks. */
static void test_masked_blocks_choice(void **state) {
  (void)state;
  char mean[400], deep[400], blocks[400], same[400], contiguous[400], plain[400];
  blocks_pick("out=bf16,group=masked", 1, 0, mean, sizeof mean);
  blocks_pick("out=bf16,group=masked", 128, 0, deep, sizeof deep);
  blocks_pick("out=bf16,group=masked", 1, 128, blocks, sizeof blocks);
  blocks_pick("out=bf16,group=masked", 1, 1, same, sizeof same);
  assert_string_not_equal(mean, deep); /* the depth matters to the pick */
  assert_string_equal(blocks, deep);
  assert_string_equal(same, mean);
  blocks_pick("out=bf16,group=contiguous", 1, 128, contiguous, sizeof contiguous);
  blocks_pick("out=bf16,group=contiguous", 1, 0, plain, sizeof plain);
  assert_string_equal(contiguous, plain);
}

/* An op kernel's row of one problem is fitted as the product, its epilogue's term taken off:
 * a config measured only as ops serves other shapes and other ops, and plain GEMMs.  A batch's
 * row and a grouped call's, whose times hang on more than the shape, are left out. */
static void test_fit_op_rows(void **state) {
  (void)state;
  db_handle *db = fresh_db("ops.db");
  ut_err e;
  put_row(db, "x=1", 8, 5120, 5120, 1.0);
  put_op_row(db, "f16", "x=1", 8, 5120, 5120, 10.0, "", 4);
  put_op_row(db, "f16", "x=1", 8, 5120, 5120, 10.0, "out=f16,group=contiguous", 1);
  put_op_row(db, "f16", "x=2", 16, 5120, 5120, 2.0, "out=f16,bias=col,act=gelu_tanh", 1);
  put_op_row(db, "f16", "x=2", 8, 14336, 4096, 2.0, "out=f32", 1);
  rt_model *m = NULL;
  assert_int_equal(rt_model_fit(db, DEV, NULL, NULL, &m, &e), MMT_OK);
  assert_int_equal(rt_model_row_count(m), 3);
  gen_problem p = packed("f16", "nt", 8, 5120, 5120);
  const double plain1 = ratio_for(m, "x=1", &p), plain2 = ratio_for(m, "x=2", &p);
  assert_true(plain1 > 0.9 && plain1 < 1.1); /* the batch's 10x is not in it */
  assert_true(plain2 > 1.8 && plain2 < 2.2);
  /* another op, shape and type: the product's correction, and its own epilogue's term */
  gen_op silu = {.out = "bf16", .bias = 'c', .act = GEN_ACT_SILU};
  gen_problem q = packed("bf16", "nt", 8, 11008, 4096);
  q.op = &silu;
  const int c = rt_model_find(m, "tpl", "0123456789abcdef", "x=2", "bf16");
  assert_true(c >= 0);
  rt_model_focus(m, &q, NULL);
  rt_prediction pred;
  rt_model_predict(m, c, NULL, NULL, NULL, NAN, &q, &pred);
  assert_int_equal(pred.rows, 2);
  assert_true(pred.epilogue_ms > 0);
  const double product = (pred.ms - pred.epilogue_ms) / pred.analytic_ms;
  assert_true(product > 1.6 && product < 2.4);
  rt_model_free(m);
  db_close(db);
}

/* A row of wgmma config `params` (its current source) for an e4m3 nt op problem, taking the
 * analytic time of its launch. */
static void put_wgmma_row(db_handle *db, gen_template *t, const char *params, const char *op,
                          int64_t m, int64_t n, int64_t k) {
  const rt_model_device h100 = {132, 9};
  gen_op parsed;
  ut_err e;
  assert_int_equal(gen_op_parse(op, "e4m3", &parsed, &e), MMT_OK);
  const gen_problem p = gen_packed_op_problem("e4m3", "nt", m, n, k, &parsed, 1);
  const db_launch l = {.tile_m = 128, .tile_n = 256, .slices = 1, .threads = 384, .promote = 2};
  db_result r;
  fill_row(&r, gen_name(t), gen_source_hash(t), params, &p, 1, op, l,
           rt_model_analytic_ms(&h100, &l, &p));
  assert_int_equal(db_insert(db, &r, &e), MMT_OK);
}

/* The index of the first candidate of v with these params, or -1. */
static int ranked_at(const rt_candidate *v, int n, const char *params) {
  for (int i = 0; i < n; i++)
    if (!strcmp(v[i].params, params)) return i;
  return -1;
}

/* A fast_accum FP8 problem near rows of a promoting config only: the same config without
 * promotions is a candidate, predicted from those rows less the promotions' cost, ranked
 * ahead of them and chosen; a problem that must promote never sees it. */
static void test_unpromoted_sibling(void **state) {
  (void)state;
  gen_template *t = NULL;
  ut_err e;
  gen_config cfg;
  char promoting[256], bare[256];
  assert_int_equal(gen_load_named("wgmma", &t, &e), MMT_OK);
  const char *base = "bm=128,bn=256,stages=3,consumers=2,group=1,persist=1";
  snprintf(promoting, sizeof promoting, "%s,promote=2", base);
  assert_int_equal(gen_config_parse(t, promoting, &cfg, &e), MMT_OK);
  assert_int_equal(gen_config_format(t, &cfg, promoting, sizeof promoting, &e), MMT_OK);
  snprintf(bare, sizeof bare, "%s,promote=0", base);
  assert_int_equal(gen_config_parse(t, bare, &cfg, &e), MMT_OK);
  assert_int_equal(gen_config_format(t, &cfg, bare, sizeof bare, &e), MMT_OK);
  db_handle *db = fresh_db("unpromoted.db");
  put_wgmma_row(db, t, promoting, "out=bf16,scale=tensor", 2048, 4096, 4096);
  put_wgmma_row(db, t, promoting, "out=bf16,scale=tensor", 4096, 7168, 16384);
  rt_model *m = NULL;
  assert_int_equal(rt_model_fit(db, DEV, NULL, NULL, &m, &e), MMT_OK);
  gen_op fast, precise;
  assert_int_equal(gen_op_parse("out=bf16,scale=tensor,fast_accum", "e4m3", &fast, &e), MMT_OK);
  assert_int_equal(gen_op_parse("out=bf16,scale=tensor", "e4m3", &precise, &e), MMT_OK);
  const gen_problem pf = gen_packed_op_problem("e4m3", "nt", 4096, 4096, 4096, &fast, 1);
  const gen_problem pp = gen_packed_op_problem("e4m3", "nt", 4096, 4096, 4096, &precise, 1);
  rt_model_focus(m, &pf, NULL);
  rt_prediction with, without, none;
  rt_model_predict(m, rt_model_find(m, "wgmma", gen_source_hash(t), promoting, "e4m3"), NULL, NULL,
                   NULL, NAN, &pf, &with);
  assert_true(rt_model_predict_unpromoted(m, t, bare, &pf, &without));
  assert_false(rt_model_predict_unpromoted(m, t, promoting, &pf, &none));
  assert_int_equal(without.rows, 0);
  /* the promotions' share alone: 1 + RT_MODEL_PROMOTE_COST / 2 of the compute */
  assert_true(without.ms < with.ms && without.ms > with.ms / (1 + RT_MODEL_PROMOTE_COST));
  rt_model_free(m);

  rt_chooser *ch = NULL;
  assert_int_equal(rt_chooser_new("sm_90", 132, &ch, &e), MMT_OK);
  rt_candidate *v = NULL;
  int n = 0;
  assert_int_equal(rt_rank(ch, db, DEV, &pf, NULL, &v, &n, &e), MMT_OK);
  const int at_bare = ranked_at(v, n, bare), at_promoting = ranked_at(v, n, promoting);
  assert_true(at_bare >= 0 && at_promoting > at_bare);
  assert_int_equal(v[at_bare].config, -1);
  assert_string_equal(v[at_bare].template_hash, gen_source_hash(t));
  free(v);
  rt_choice c = {0};
  if (rt_choose(ch, db, DEV, &pf, &c, &e)) fail_msg("%s", e.msg);
  assert_string_equal(c.params, bare);
  rt_choice_clear(&c);
  assert_int_equal(rt_rank(ch, db, DEV, &pp, NULL, &v, &n, &e), MMT_OK);
  assert_int_equal(ranked_at(v, n, bare), -1);
  free(v);
  rt_chooser_free(ch);
  db_close(db);
  gen_free(t);
}

/* rt_fit_hooks.launch: the emitted launch of a row's config, overlapping its epilogue when
 * *user says so. */
static mmt_status overlap_hook(const db_model_row *row, db_launch *out, void *user, ut_err *err) {
  (void)err;
  *out = row->launch;
  out->overlap = *(const bool *)user;
  return MMT_OK;
}

/* Which epilogue term comes off an op row is its kernel's: the fit asks the templates (the
 * launch hook) whether the config overlaps it.  A row that took the whole term (no overlap):
 * its product's correction is 1 where the kernel does not overlap, more where it would have
 * hidden all but its last tiles'. */
static void test_fit_op_overlap(void **state) {
  (void)state;
  db_handle *db = fresh_db("overlap.db");
  ut_err e;
  put_op_row(db, "f16", "x=1", 8192, 4096, 4096, 1.0, "out=f16,bias=col,act=gelu_tanh", 1);
  gen_problem p = packed("f16", "nt", 8192, 4096, 4096);
  double ratio[2];
  for (int overlap = 0; overlap < 2; overlap++) {
    bool says = overlap;
    const rt_fit_hooks hooks = {.launch = overlap_hook, .user = &says};
    rt_model *m = NULL;
    assert_int_equal(rt_model_fit(db, DEV, NULL, &hooks, &m, &e), MMT_OK);
    ratio[overlap] = ratio_for(m, "x=1", &p); /* plain p: no epilogue term */
    rt_model_free(m);
  }
  assert_true(ratio[0] > 0.95 && ratio[0] < 1.05);
  assert_true(ratio[1] > 1.05);
  db_close(db);
}

/* A config measured only far from the problem (batch 128) leans on its template's rows near
 * it (other configs at batch 8 and 16, 2x the analytic time), not on its far rows alone (0.5x):
 * served at batch 8 on those, 64-row wgmma tiles ran at 0.74-0.81x cuBLAS.  With no nearer
 * rows of its template, its own far rows decide. */
static void test_predict_far_own_rows(void **state) {
  (void)state;
  for (int with_near = 0; with_near < 2; with_near++) {
    db_handle *db = fresh_db("far.db");
    ut_err e;
    put_row(db, "x=1", 128, 5120, 5120, 0.5);
    put_row(db, "x=1", 384, 5120, 5120, 0.5);
    if (with_near) {
      put_row(db, "x=2", 8, 5120, 5120, 2.0);
      put_row(db, "x=2", 16, 14336, 4096, 2.0);
    }
    rt_model *m = NULL;
    assert_int_equal(rt_model_fit(db, DEV, NULL, NULL, &m, &e), MMT_OK);
    const int far = rt_model_find(m, "tpl", "0123456789abcdef", "x=1", "f16");
    assert_true(far >= 0);
    gen_problem p = packed("f16", "nt", 8, 11008, 4096);
    rt_model_focus(m, &p, NULL);
    rt_prediction pred;
    rt_model_predict(m, far, NULL, NULL, NULL, NAN, &p, &pred);
    const double ratio = pred.ms / pred.analytic_ms;
    if (with_near)
      assert_true(ratio > 1.0); /* was 0.59: the far rows outweighed the near ones 3 to 1 */
    else
      assert_true(ratio > 0.45 && ratio < 0.75);
    rt_model_free(m);
    db_close(db);
  }
}

/* A row's cluster is its `cluster` parameter (the database has no column for it): the fit's
 * analytic time for a config of clusters of two is the launch's with cluster = 2. */
static void test_fit_cluster(void **state) {
  (void)state;
  db_handle *db = fresh_db("cluster.db");
  ut_err e;
  put_row(db, "x=1,cluster=2", 3000, 3000, 3000, 1.0);
  put_row(db, "x=1,cluster=1", 3000, 3000, 3000, 1.0);
  rt_model *m = NULL;
  assert_int_equal(rt_model_fit(db, DEV, NULL, NULL, &m, &e), MMT_OK);
  const int two = rt_model_find(m, "tpl", "0123456789abcdef", "x=1,cluster=2", "f16");
  const int one = rt_model_find(m, "tpl", "0123456789abcdef", "x=1,cluster=1", "f16");
  assert_true(two >= 0 && one >= 0);
  gen_problem p = packed("f16", "nt", 3000, 3000, 3000);
  rt_model_focus(m, &p, NULL);
  rt_prediction a, b;
  rt_model_predict(m, two, NULL, NULL, NULL, NAN, &p, &a);
  rt_model_predict(m, one, NULL, NULL, NULL, NAN, &p, &b);
  const rt_model_device h100 = {132, 9};
  db_launch l = {.tile_m = 64, .tile_n = 64, .slices = 1, .threads = 128, .cluster = 2};
  assert_true(fabs(a.analytic_ms - rt_model_analytic_ms(&h100, &l, &p)) < 1e-9);
  l.cluster = 1;
  assert_true(fabs(b.analytic_ms - rt_model_analytic_ms(&h100, &l, &p)) < 1e-9);
  assert_true(a.analytic_ms != b.analytic_ms);
  rt_model_free(m);
  db_close(db);
}

/* Sizes past int, which no kernel takes but a database's row may hold (a user's fuzzing:
 * 2^62 x 4096 x 2^63-1): the analytic time is finite and grows with them, and a fit over such
 * a row predicts finite times for it and for its neighbours.  The sanitized build fails on an
 * overflow. */
static void test_huge_sizes(void **state) {
  (void)state;
  const rt_model_device h100 = {132, 9};
  const int64_t m = (int64_t)1 << 62, k = INT64_MAX;
  const db_launch launches[] = {{.tile_m = 128, .tile_n = 128, .slices = 4, .threads = 256},
                                {.tile_m = 1, .tile_n = 64, .slices = 1, .threads = 64},
                                {.tile_m = 128,
                                 .tile_n = 256,
                                 .slices = 1,
                                 .threads = 384,
                                 .per_sm = 1,
                                 .cluster = 2,
                                 .shared_bytes = 200 << 10}};
  const gen_problem huge = packed("f32", "nn", m, 4096, k);
  const gen_problem big = packed("f32", "nn", 1 << 20, 4096, 1 << 20);
  const gen_problem widest = {.dtype = "f16",
                              .layout = "tt",
                              .m = INT64_MAX,
                              .n = INT64_MAX,
                              .k = INT64_MAX,
                              .lda = INT64_MAX,
                              .ldb = INT64_MAX,
                              .ldc = INT64_MAX,
                              .align_bytes = 2};
  for (size_t i = 0; i < sizeof launches / sizeof launches[0]; i++) {
    const double t = rt_model_analytic_ms(&h100, &launches[i], &huge);
    assert_true(isfinite(t) && t > rt_model_analytic_ms(&h100, &launches[i], &big));
    assert_true(isfinite(rt_model_analytic_ms(&h100, &launches[i], &widest)));
  }
  /* the rows as a database file may hold them: written small, then changed in the file */
  if (access(SQLITE_CLI, X_OK) != 0) skip();
  db_handle *db = fresh_db("huge.db");
  put_row(db, "x=1", 64, 4096, 64, 1.0);
  put_row(db, "x=2", 64, 4096, 64, 2.0);
  db_close(db);
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           SQLITE_CLI " '%s/huge.db' \"UPDATE results SET m = %lld, k = %lld WHERE params = "
                      "'x=2'\"",
           g_dir, (long long)m, (long long)k);
  assert_int_equal(system(cmd), 0);
  char path[96];
  snprintf(path, sizeof path, "%s/huge.db", g_dir);
  ut_err e;
  assert_int_equal(db_open(path, true, &db, &e), MMT_OK);
  rt_model *model = NULL;
  assert_int_equal(rt_model_fit(db, DEV, NULL, NULL, &model, &e), MMT_OK);
  assert_int_equal(rt_model_row_count(model), 2);
  const gen_problem probs[] = {packed("f16", "nt", m, 4096, k), packed("f16", "nt", 64, 4096, 64)};
  for (size_t i = 0; i < sizeof probs / sizeof probs[0]; i++) {
    rt_model_focus(model, &probs[i], NULL);
    for (int c = 0; c < rt_model_config_count(model); c++) {
      rt_prediction pred;
      rt_model_predict(model, c, NULL, NULL, NULL, NAN, &probs[i], &pred);
      assert_true(isfinite(pred.ms) && pred.ms > 0);
    }
  }
  rt_model_free(model);
  db_close(db);
}

/* A model without rows (a GPU model never tuned, or a device name of none) packs and reads
 * back: memcpy gets no NULL for its empty tables. */
static void test_pack_empty(void **state) {
  (void)state;
  rt_model *m = NULL, *back = NULL;
  ut_err e;
  assert_int_equal(rt_model_fit(NULL, NULL, NULL, NULL, &m, &e), MMT_OK);
  void *data = NULL;
  size_t len = 0;
  assert_int_equal(rt_model_pack(m, &data, &len, &e), MMT_OK);
  assert_true(len >= sizeof(pack_header));
  assert_int_equal(rt_model_unpack(data, len, &back, &e), MMT_OK);
  assert_int_equal(rt_model_row_count(back), 0);
  assert_int_equal(rt_model_config_count(back), 0);
  const db_launch l = {.tile_m = 64, .tile_n = 64, .slices = 1, .threads = 128};
  const gen_problem p = packed("f32", "nn", 100, 100, 100);
  rt_model_focus(back, &p, NULL);
  rt_prediction pred;
  rt_model_predict(back, -1, "reg_tiled", "", &l, NAN, &p, &pred);
  assert_true(isfinite(pred.ms) && pred.ms > 0 && pred.rows == 0);
  free(data);
  rt_model_free(back);
  rt_model_free(m);
}

/* Every config's prediction on a problem, for comparing two models of the same rows. */
static void predict_all(rt_model *m, const gen_problem *p, double *ms, int n) {
  rt_model_focus(m, p, NULL);
  for (int c = 0; c < n; c++) {
    rt_prediction pred;
    rt_model_predict(m, c, NULL, NULL, NULL, NAN, p, &pred);
    ms[c] = pred.ms;
  }
}

/* A fit packed and unpacked predicts what it did, bit for bit; bytes cut short, of another
 * format or with an index out of range are refused with a message, not read. */
static void test_pack(void **state) {
  (void)state;
  db_handle *db = open_fixture();
  rt_model *m = NULL, *back = NULL;
  ut_err e;
  assert_int_equal(rt_model_fit(db, DEV, NULL, NULL, &m, &e), MMT_OK);
  void *data = NULL;
  size_t len = 0;
  assert_int_equal(rt_model_pack(m, &data, &len, &e), MMT_OK);
  assert_int_equal(rt_model_unpack(data, len, &back, &e), MMT_OK);
  const int n = rt_model_config_count(m);
  assert_int_equal(rt_model_config_count(back), n);
  assert_int_equal(rt_model_row_count(back), rt_model_row_count(m));
  double *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
  assert_true(a && b);
  const gen_problem probs[] = {packed("f16", "nn", 1000, 999, 1001),
                               packed("f32", "nt", 1, 4096, 4096),
                               packed("f16", "nt", 8, 5120, 5120)};
  for (size_t i = 0; i < sizeof probs / sizeof probs[0]; i++) {
    predict_all(m, &probs[i], a, n);
    predict_all(back, &probs[i], b, n);
    assert_memory_equal(a, b, (size_t)n * sizeof *a);
  }
  for (int c = 0; c < n; c++) { /* the config table: every config found by its fields */
    rt_model_config mc;
    rt_model_get_config(m, c, &mc);
    assert_int_equal(
        rt_model_find(back, mc.template_name, mc.template_hash, mc.params, mc.dtype), c);
  }
  rt_model_free(back);
  back = NULL;
  /* from a mapping that the model takes, the bytes after a prefix (the fit cache's key): rows
   * in place at an aligned offset, copied at an odd one; the same predictions; bytes cut
   * short refused, the mapping released either way (valgrind and ASan see no leak) */
  for (size_t offset = 0; offset <= 64; offset += 61) {
    for (size_t cut = 0; cut <= len; cut += len) {
      void *map = mmap(NULL, offset + len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
      assert_true(map != MAP_FAILED);
      memcpy((char *)map + offset, data, len);
      mmt_status want = cut == len ? MMT_OK : MMT_ERR_IO;
      assert_int_equal(rt_model_unpack_map(map, offset + cut, offset, &back, &e), want);
      if (want) {
        assert_null(back);
        continue;
      }
      assert_true((back->map != NULL) == (offset % 8 == 0));
      for (size_t i = 0; i < sizeof probs / sizeof probs[0]; i++) {
        predict_all(m, &probs[i], a, n);
        predict_all(back, &probs[i], b, n);
        assert_memory_equal(a, b, (size_t)n * sizeof *a);
      }
      rt_model_free(back);
      back = NULL;
    }
  }
  { /* an offset past the mapping: refused, the mapping released */
    void *map = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(rt_model_unpack_map(map, 4096, 4097, &back, &e), MMT_ERR_IO);
    assert_null(back);
    assert_non_null(strstr(e.msg, "past the 4096 bytes"));
  }
  /* cut short, anywhere */
  for (size_t cut = 0; cut < len; cut += len / 7 + 1) {
    assert_int_equal(rt_model_unpack(data, cut, &back, &e), MMT_ERR_IO);
    assert_null(back);
  }
  assert_non_null(strstr(e.msg, "packed model"));
  /* another format */
  unsigned char *bytes = data;
  bytes[0] ^= 1;
  assert_int_equal(rt_model_unpack(data, len, &back, &e), MMT_ERR_IO);
  assert_non_null(strstr(e.msg, "another build's format"));
  bytes[0] ^= 1;
  /* the first template's bin count and the last one's bins pointer garbage: refused, and
   * nothing freed that was not allocated */
  const size_t tmpls_at = sizeof(pack_header) +
                          (size_t)rt_model_row_count(m) * sizeof(model_row) +
                          (size_t)n * (sizeof(model_cfg) + 3 * sizeof(uint64_t));
  int ntmpls = 0;
  memcpy(&ntmpls, bytes + offsetof(pack_header, ntmpls), sizeof ntmpls);
  assert_true(ntmpls >= 2);
  model_tmpl first, last;
  const size_t last_at = tmpls_at + (size_t)(ntmpls - 1) * sizeof(model_tmpl);
  memcpy(&first, bytes + tmpls_at, sizeof first);
  memcpy(&last, bytes + last_at, sizeof last);
  model_tmpl junk = first;
  junk.nbins = 1 << 30;
  memcpy(bytes + tmpls_at, &junk, sizeof junk);
  junk = last;
  junk.bins = (model_bin *)(uintptr_t)0x1234;
  memcpy(bytes + last_at, &junk, sizeof junk);
  assert_int_equal(rt_model_unpack(data, len, &back, &e), MMT_ERR_IO);
  assert_non_null(strstr(e.msg, "bins out of range"));
  memcpy(bytes + tmpls_at, &first, sizeof first);
  memcpy(bytes + last_at, &last, sizeof last);
  /* the first row's config index past the configs */
  const size_t at = sizeof(pack_header) + offsetof(model_row, cfg);
  int32_t bad = n;
  unsigned char saved[sizeof bad];
  memcpy(saved, bytes + at, sizeof bad);
  memcpy(bytes + at, &bad, sizeof bad);
  assert_int_equal(rt_model_unpack(data, len, &back, &e), MMT_ERR_IO);
  assert_non_null(strstr(e.msg, "out of range"));
  memcpy(bytes + at, saved, sizeof bad);
  /* ... and its dtype past the four */
  const size_t dt_at = sizeof(pack_header) + offsetof(model_row, dt);
  const signed char dt_saved = (signed char)bytes[dt_at];
  bytes[dt_at] = GEN_DTYPES;
  assert_int_equal(rt_model_unpack(data, len, &back, &e), MMT_ERR_IO);
  assert_non_null(strstr(e.msg, "dtype out of range"));
  bytes[dt_at] = (unsigned char)dt_saved;
  /* ... and its alignment flag neither false nor true (no bool: undefined to read as one) */
  const size_t aligned_at = sizeof(pack_header) + offsetof(model_row, aligned);
  const unsigned char aligned_saved = bytes[aligned_at];
  bytes[aligned_at] = 3;
  assert_int_equal(rt_model_unpack(data, len, &back, &e), MMT_ERR_IO);
  assert_non_null(strstr(e.msg, "alignment flag"));
  bytes[aligned_at] = aligned_saved;
  assert_int_equal(rt_model_unpack(data, len, &back, &e), MMT_OK);
  rt_model_free(back);
  /* any byte changed: read back or refused, never a crash (each index the predictions use
   * is checked; a changed number only changes a prediction) */
  uint64_t seed = 12345;
  for (int i = 0; i < 400; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const size_t flip = (size_t)(seed >> 33) % len;
    const unsigned char old = bytes[flip];
    bytes[flip] ^= (unsigned char)(1u << (seed >> 20 & 7));
    back = NULL;
    mmt_status rc = rt_model_unpack(data, len, &back, &e);
    assert_true(rc == MMT_OK || rc == MMT_ERR_IO);
    if (back) {
      double *ms = calloc((size_t)rt_model_config_count(back) + 1, sizeof *ms);
      assert_non_null(ms);
      predict_all(back, &probs[0], ms, rt_model_config_count(back));
      free(ms);
    }
    rt_model_free(back);
    bytes[flip] = old;
  }
  back = NULL;
  free(data);
  free(a);
  free(b);
  rt_model_free(m);
  db_close(db);
}

/* The chooser's fit cache: the first chooser fits and writes the file, a second one (a new
 * process) reads it and ranks the same; a row added makes the next one fit again. */
static void test_fit_cache(void **state) {
  (void)state;
  db_handle *db = open_fixture();
  ut_err e;
  char dir[128], copy[128], cmd[512];
  snprintf(dir, sizeof dir, "%s/fits", g_dir);
  snprintf(copy, sizeof copy, "%s/copy.db", g_dir);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", g_db, copy);
  assert_int_equal(system(cmd), 0);
  db_close(db);
  db_handle *w = NULL;
  assert_int_equal(db_open(copy, false, &w, &e), MMT_OK);
  const gen_problem p = packed("f16", "nn", 1000, 999, 1001);
  char first[2][400] = {{0}};
  for (int turn = 0; turn < 3; turn++) {
    if (turn == 2) { /* a row more: the file no longer matches */
      db_result r;
      assert_int_equal(db_get(w, 1, &r, &e), MMT_OK);
      r.problem.m = 777;
      assert_int_equal(db_insert(w, &r, &e), MMT_OK);
    }
    rt_chooser *ch = NULL;
    assert_int_equal(rt_chooser_new("sm_90", 132, &ch, &e), MMT_OK);
    assert_int_equal(rt_chooser_set_fit_cache(ch, dir, &e), MMT_OK);
    rt_model *m = NULL;
    assert_int_equal(rt_chooser_model(ch, w, DEV, &m, &e), MMT_OK);
    int fitted = -1, read = -1;
    rt_chooser_fit_counts(ch, &fitted, &read);
    assert_int_equal(fitted, turn == 1 ? 0 : 1);
    assert_int_equal(read, turn == 1 ? 1 : 0);
    assert_true((m->map != NULL) == (turn == 1)); /* a model read keeps its rows in the file */
    rt_choice c = {0};
    assert_int_equal(rt_choose(ch, w, DEV, &p, &c, &e), MMT_OK);
    if (turn < 2)
      snprintf(first[turn], sizeof first[0], "%s %s %.9g", c.template_name, c.params,
               c.predicted_ms);
    rt_choice_clear(&c);
    rt_chooser_free(ch);
  }
  assert_string_equal(first[0], first[1]);
  /* a file cut short is fitted again, not trusted */
  snprintf(cmd, sizeof cmd,
           "for f in '%s'/fit-*.model; do head -c 100 \"$f\" > \"$f.t\" && mv \"$f.t\" \"$f\"; done",
           dir);
  assert_int_equal(system(cmd), 0);
  rt_chooser *ch = NULL;
  assert_int_equal(rt_chooser_new("sm_90", 132, &ch, &e), MMT_OK);
  assert_int_equal(rt_chooser_set_fit_cache(ch, dir, &e), MMT_OK);
  rt_model *m = NULL;
  assert_int_equal(rt_chooser_model(ch, w, DEV, &m, &e), MMT_OK);
  int fitted = 0, read = 0;
  rt_chooser_fit_counts(ch, &fitted, &read);
  assert_int_equal(fitted, 1);
  assert_int_equal(read, 0);
  rt_chooser_free(ch);
  db_close(w);
}

/* Leave-one-shape-out, as `mmtune model evaluate` does it, per dtype. */
typedef struct {
  db_problem v[64];
  int n;
} shapes;

static void on_shape(const db_problem *p, void *user) {
  shapes *s = user;
  if (s->n < 64) s->v[s->n++] = *p;
}

typedef struct {
  char key[64][320];
  double ms[64];
  int n;
} measured_set;

static int on_row(const db_result *r, void *user) {
  measured_set *s = user;
  if (s->n == 64) return 1;
  snprintf(s->key[s->n], sizeof s->key[0], "%s|%s", r->template_name, r->params);
  s->ms[s->n++] = r->ms_median; /* fastest first */
  return 0;
}

static void test_leave_one_shape_out(void **state) {
  (void)state;
  db_handle *db = open_fixture();
  rt_chooser *ch = NULL;
  ut_err e;
  assert_int_equal(rt_chooser_new("sm_90", 132, &ch, &e), MMT_OK);
  const char *dtypes[] = {"f16", "f32"};
  const double floor[] = {0.78, 0.78}; /* docs/perf.md: 0.84 and 0.85 when written */
  for (int d = 0; d < 2; d++) {
    shapes sh = {.n = 0};
    double logsum = 0;
    assert_int_equal(db_each_shape(db, DEV, dtypes[d], NULL, on_shape, &sh, &e), MMT_OK);
    assert_int_equal(sh.n, 12);
    for (int i = 0; i < sh.n; i++) {
      const db_problem *q = &sh.v[i];
      static measured_set ms;
      ms.n = 0;
      assert_int_equal(db_each_ok(db, DEV, q, on_row, &ms, &e), MMT_OK);
      gen_problem p = packed(q->dtype, q->layout, q->m, q->n, q->k);
      int64_t hide[3] = {q->m, q->n, q->k};
      rt_candidate *v = NULL;
      int n = 0;
      assert_int_equal(rt_rank(ch, db, DEV, &p, hide, &v, &n, &e), MMT_OK);
      double ratio = 0;
      for (int c = 0; c < n && ratio == 0; c++) {
        char key[320];
        snprintf(key, sizeof key, "%s|%s", v[c].template_name, v[c].params);
        for (int j = 0; j < ms.n; j++)
          if (!strcmp(ms.key[j], key)) {
            ratio = ms.ms[0] / ms.ms[j];
            break;
          }
      }
      free(v);
      assert_true(ratio > 0 && ratio <= 1);
      logsum += log(ratio);
    }
    double geo = exp(logsum / sh.n);
    print_message("%s: leave-one-shape-out geomean %.3f over %d shapes\n", dtypes[d], geo, sh.n);
    assert_true(geo >= floor[d]);
  }
  rt_chooser_free(ch);
  db_close(db);
}

/* An op kernel's problem: a batch is that many problems' work units and bytes, D of the op's
 * type (half the columns gated); the plain GEMM is as before. */
/* The area a launch's tiles cover: each problem padded to whole tiles, slices not counted. */
static void test_tile_area(void **state) {
  (void)state;
  const db_launch big = {.tile_m = 128, .tile_n = 128, .slices = 4, .threads = 256};
  const db_launch swapped = {.tile_m = 16, .tile_n = 64, .slices = 1, .threads = 128};
  gen_problem p = packed("f16", "nn", 16, 14336, 4096);
  assert_true(rt_model_tile_area(&big, &p) == 128.0 * 14336);
  assert_true(rt_model_tile_area(&swapped, &p) == 16.0 * 14336);
  p.n = 14337, p.batch = 3; /* a partial tile column, three problems */
  assert_true(rt_model_tile_area(&swapped, &p) == 3 * 16.0 * 14400);
}

/* An op's epilogue work is charged after each unit's main loop, to a launch whose epilogue
 * overlaps the next unit (ping-pong) the last unit's alone at twice the cost, and nothing to the
 * plain GEMM or an op of plain stores. */
static void test_epilogue_term(void **state) {
  (void)state;
  const rt_model_device dev = {.sm_count = 132, .cc_major = 9};
  db_launch coop = {.tile_m = 128, .tile_n = 256, .slices = 1, .threads = 384, .per_sm = 1};
  db_launch pingpong = coop;
  pingpong.overlap = 1;
  gen_problem p = packed("f16", "nt", 8192, 4096, 4096); /* 1024 tiles: 8 an SM in turn */
  assert_true(rt_model_epilogue_ms(&dev, &coop, &p) == 0);
  gen_op stores = {.out = "f32"}, gelu = {.out = "f16", .bias = 'c', .act = GEN_ACT_GELU_TANH};
  p.op = &stores;
  assert_true(rt_model_epilogue_ms(&dev, &coop, &p) == 0);
  p.op = &gelu; /* weight 1 (bias) + 1.2 (tanh GELU) */
  const double one = 8 * 128 * 256 * RT_MODEL_EPILOGUE_NS * 2.2 * 1e-6;
  assert_true(fabs(rt_model_epilogue_ms(&dev, &coop, &p) - one) < 1e-12);
  /* ping-pong: the last tile's alone, one consumer's: two tiles' worth where each SM had 8 */
  assert_true(fabs(rt_model_epilogue_ms(&dev, &pingpong, &p) - one / 4) < 1e-12);
  p.batch = 3; /* 3072 tiles: 24 an SM */
  assert_true(fabs(rt_model_epilogue_ms(&dev, &coop, &p) - 3 * one) < 1e-12);
  assert_true(fabs(rt_model_epilogue_ms(&dev, &pingpong, &p) - one / 4) < 1e-12);
  p.batch = 1, p.m = 128; /* 16 tiles, one an SM: ping-pong's one consumer takes twice as long */
  const double single = 128 * 256 * RT_MODEL_EPILOGUE_NS * 2.2 * 1e-6;
  assert_true(fabs(rt_model_epilogue_ms(&dev, &coop, &p) - single) < 1e-12);
  assert_true(fabs(rt_model_epilogue_ms(&dev, &pingpong, &p) - 2 * single) < 1e-12);
  gen_op gated = {.out = "bf16", .act = GEN_ACT_SILU, .gated = true}; /* 1 / 2 + 0.5 */
  p.op = &gated, p.m = 8192;
  assert_true(fabs(rt_model_epilogue_ms(&dev, &coop, &p) - one / 2.2) < 1e-12);
  /* a residual's C: RT_MODEL_C_READ_WEIGHT a byte of D's element (gated: D's half) */
  const double unit = one / 2.2;
  gated.residual = true;
  assert_true(fabs(rt_model_epilogue_ms(&dev, &coop, &p) - unit * (1 + RT_MODEL_C_READ_WEIGHT)) <
              1e-12);
  gen_op residual = {.out = "f32", .residual = true};
  p.op = &residual;
  assert_true(fabs(rt_model_epilogue_ms(&dev, &coop, &p) - unit * 4 * RT_MODEL_C_READ_WEIGHT) <
              1e-12);
  assert_true(rt_model_epilogue_ms(&dev, &pingpong, &p) < rt_model_epilogue_ms(&dev, &coop, &p));
}

static void test_analytic_ops(void **state) {
  (void)state;
  rt_model_device dev = {.sm_count = 132, .cc_major = 9};
  db_launch l = {.tile_m = 128, .tile_n = 128, .slices = 1, .threads = 256};
  gen_problem one = packed("f16", "nt", 1024, 1024, 1024); /* 64 tiles: half a wave */
  gen_op plain = {.out = "f16"};
  gen_problem op = one;
  op.op = &plain;
  const double a = rt_model_analytic_ms(&dev, &l, &one) - RT_MODEL_LAUNCH_MS;
  assert_true(fabs(rt_model_analytic_ms(&dev, &l, &op) - RT_MODEL_LAUNCH_MS - a) < 1e-9);
  op.batch = 8; /* 512 units: 4 rounds where one problem took 1 */
  const double b = rt_model_analytic_ms(&dev, &l, &op) - RT_MODEL_LAUNCH_MS;
  assert_true(b > 3.5 * a && b < 8.5 * a);
  /* memory-bound: a decode batch writing f32 D costs more than bf16 D, a gated D less, and
   * one that reads C (a residual; a plain kernel, where beta may be set) more: an op kernel
   * without a residual has no C path */
  gen_problem dec = packed("bf16", "nt", 4096, 8192, 64);
  gen_op bf16 = {.out = "bf16"}, f32 = {.out = "f32"}, gated = {.out = "bf16", .gated = true};
  gen_op res = {.out = "bf16", .residual = true};
  gen_problem narrow = dec, wide = dec, half = dec, with_c = dec;
  narrow.op = &bf16;
  wide.op = &f32;
  half.op = &gated;
  with_c.op = &res;
  const double base = rt_model_analytic_ms(&dev, &l, &narrow);
  assert_true(rt_model_analytic_ms(&dev, &l, &wide) > base);
  assert_true(rt_model_analytic_ms(&dev, &l, &half) < base);
  assert_true(rt_model_analytic_ms(&dev, &l, &with_c) > base);
  assert_true(rt_model_analytic_ms(&dev, &l, &dec) > base);
  assert_true(fabs(rt_model_analytic_ms(&dev, &l, &with_c) - rt_model_analytic_ms(&dev, &l, &dec)) <
              1e-12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_analytic),
      cmocka_unit_test(test_tile_area),
      cmocka_unit_test(test_epilogue_term),
      cmocka_unit_test(test_analytic_ops),
      cmocka_unit_test(test_launch_of),
      cmocka_unit_test(test_fit),
      cmocka_unit_test(test_predict_measured),
      cmocka_unit_test(test_predict_other_layout),
      cmocka_unit_test(test_predict_far_own_rows),
      cmocka_unit_test(test_fit_cluster),
      cmocka_unit_test(test_predict_other_16bit),
      cmocka_unit_test(test_fit_op_rows),
      cmocka_unit_test(test_masked_blocks_choice),
      cmocka_unit_test(test_fit_op_overlap),
      cmocka_unit_test(test_unpromoted_sibling),
      cmocka_unit_test(test_leave_one_shape_out),
      cmocka_unit_test(test_pack),
      cmocka_unit_test(test_fit_cache),
      cmocka_unit_test(test_huge_sizes),
      cmocka_unit_test(test_pack_empty),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
