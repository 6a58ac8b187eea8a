/* test_db.c -- db/: schema, inserts, best-row queries, resume lookup, foreign and broken files.
 * Tests use the db API only; files are crafted with the sqlite3 CLI where there is one
 * (those tests skip() without it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db.h"

#define SQLITE_CLI "/usr/bin/sqlite3"

/* ---- fixtures and helpers ------------------------------------------------------------------ */

typedef struct {
  char dir[64];
  char path[256]; /* dir/sub/folders/mmtune.db: parents do not exist yet */
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f) return -1;
  snprintf(f->dir, sizeof f->dir, "/tmp/mmt_db_XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->path, sizeof f->path, "%s/sub/folders/mmtune.db", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", f->dir, f->dir);
  int rc = system(cmd);
  free(f);
  return rc == 0 ? 0 : -1;
}

static bool have_cli(void) { return access(SQLITE_CLI, X_OK) == 0; }

/* Runs `sqlite3 path sql`, stdout into out (trailing newline removed).  Exit status. */
static int cli(const char *path, const char *sql, char *out, size_t cap) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, SQLITE_CLI " '%s' \"%s\" 2>&1", path, sql);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t n = out ? fread(out, 1, cap - 1, p) : 0;
  if (out) {
    out[n] = '\0';
    while (n > 0 && out[n - 1] == '\n') out[--n] = '\0';
  } else {
    char sink[256];
    while (fread(sink, 1, sizeof sink, p) > 0) {
    }
  }
  return pclose(p);
}

static void write_bytes(const char *path, const void *data, size_t len) {
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(data, 1, len, fp), len);
  assert_int_equal(fclose(fp), 0);
}

static db_problem problem(int64_t m, int64_t n, int64_t k) {
  db_problem p = {.dtype = "f32", .layout = "nn", .m = m, .n = n, .k = k};
  return p;
}

static db_result result(const char *dev, int64_t m, int64_t n, int64_t k, db_status st, double ms,
                        const char *params) {
  db_result r;
  memset(&r, 0, sizeof r);
  snprintf(r.device.name, sizeof r.device.name, "%s", dev);
  snprintf(r.device.uuid, sizeof r.device.uuid, "GPU-1234");
  r.device.cc_major = 9;
  r.device.cc_minor = 0;
  r.device.sm_count = 132;
  r.device.driver_version = 13000;
  snprintf(r.nvrtc_version, sizeof r.nvrtc_version, "13.0");
  snprintf(r.template_name, sizeof r.template_name, "smem_tiled");
  snprintf(r.template_hash, sizeof r.template_hash, "0123456789abcdef");
  snprintf(r.params, sizeof r.params, "%s", params);
  r.problem = problem(m, n, k);
  r.status = st;
  if (st != DB_OK) snprintf(r.error, sizeof r.error, "failed: %s", db_status_name(st));
  r.ms_min = ms * 0.9;
  r.ms_median = ms;
  r.ms_max = ms * 1.1;
  r.runs = 10;
  r.tflops = 2.0 * (double)(m * n * k) / (ms * 1e9);
  r.rel_err = 1e-7;
  r.max_err = 2e-7;
  r.regs = 64;
  r.shared_bytes = 16384;
  r.local_bytes = 0;
  return r;
}

static void insert(db_handle *db, db_result r, int64_t *id) {
  ut_err e;
  mmt_status rc = db_insert(db, &r, &e);
  if (rc) fail_msg("db_insert: %s", e.msg);
  assert_true(r.id > 0);
  assert_true(r.created_at > 0);
  if (id) *id = r.id;
}

static db_handle *open_ok(const char *path, bool read_only) {
  db_handle *db = NULL;
  ut_err e;
  mmt_status rc = db_open(path, read_only, &db, &e);
  if (rc) fail_msg("db_open(%s): %s: %s", path, mmt_status_name(rc), e.msg);
  assert_non_null(db);
  return db;
}

/* Collects ids (and a few fields) of the rows an iterator gives. */
typedef struct {
  int64_t ids[32];
  db_result rows[32];
  int count;
  int stop_after; /* 0: never */
} collect;

static int collect_fn(const db_result *r, void *user) {
  collect *c = user;
  if (c->count < 32) {
    c->ids[c->count] = r->id;
    c->rows[c->count] = *r;
  }
  c->count++;
  return c->stop_after && c->count >= c->stop_after;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_status_names(void **state) {
  (void)state;
  for (int s = 0; s < DB_STATUS_COUNT_; s++)
    assert_int_equal(db_status_parse(db_status_name((db_status)s)), s);
  assert_string_equal(db_status_name(DB_OK), "ok");
  assert_string_equal(db_status_name(DB_LAUNCH_ERROR), "launch_error");
  assert_string_equal(db_status_name((db_status)99), "unknown");
  assert_string_equal(db_status_name((db_status)-1), "unknown");
  assert_int_equal(db_status_parse("verify_failed"), DB_VERIFY_FAILED);
  assert_int_equal(db_status_parse("OK"), -1);
  assert_int_equal(db_status_parse(""), -1);
  assert_int_equal(db_status_parse(NULL), -1);
}

static void test_create_and_schema(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false); /* parent folders created */
  int64_t n = -1;
  ut_err e;
  assert_int_equal(db_count(db, NULL, &n, &e), MMT_OK);
  assert_int_equal(n, 0);
  db_close(db);
  db = open_ok(f->path, false); /* an existing, empty mmtune file passes the checks */
  db_close(db);
  db_close(NULL);
  if (!have_cli()) skip();
  char out[256];
  char expect[16];
  snprintf(expect, sizeof expect, "%d", DB_SCHEMA_VERSION);
  assert_int_equal(cli(f->path, "PRAGMA user_version", out, sizeof out), 0);
  assert_string_equal(out, expect);
  assert_int_equal(cli(f->path, "PRAGMA journal_mode", out, sizeof out), 0);
  assert_string_equal(out, "wal");
  assert_int_equal(cli(f->path, "SELECT value FROM meta WHERE key='application'", out, sizeof out),
                   0);
  assert_string_equal(out, "mmtune");
  /* the CHECK constraint rejects unknown status names */
  assert_int_not_equal(cli(f->path,
                           "INSERT INTO results(device_name, device_uuid, cc_major, cc_minor, "
                           "sm_count, driver_version, nvrtc_version, template_name, template_hash, "
                           "params, dtype, layout, m, n, k, status, created_at) VALUES "
                           "('d','u',9,0,1,1,'13.0','t','h','p','f32','nn',1,1,1,'great',1)",
                           NULL, 0),
                       0);
}

static void test_insert_round_trip(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  db_result r = result("GPU A", 1024, 512, 256, DB_OK, 1.25, "BM=64,BN=64");
  r.created_at = 1700000000;
  r.rel_err = NAN; /* stored as NULL, read back as NaN */
  ut_err e;
  assert_int_equal(db_insert(db, &r, &e), MMT_OK);
  assert_int_equal(r.created_at, 1700000000);
  db_result got;
  db_problem p = problem(1024, 512, 256);
  assert_int_equal(db_best(db, "GPU A", &p, &got, &e), MMT_OK);
  assert_int_equal(got.id, r.id);
  assert_string_equal(got.device.name, "GPU A");
  assert_string_equal(got.device.uuid, "GPU-1234");
  assert_int_equal(got.device.cc_major, 9);
  assert_int_equal(got.device.sm_count, 132);
  assert_int_equal(got.device.driver_version, 13000);
  assert_string_equal(got.nvrtc_version, "13.0");
  assert_string_equal(got.template_name, "smem_tiled");
  assert_string_equal(got.template_hash, "0123456789abcdef");
  assert_string_equal(got.params, "BM=64,BN=64");
  assert_string_equal(got.problem.dtype, "f32");
  assert_string_equal(got.problem.layout, "nn");
  assert_int_equal(got.problem.m, 1024);
  assert_int_equal(got.problem.n, 512);
  assert_int_equal(got.problem.k, 256);
  assert_int_equal(got.status, DB_OK);
  assert_string_equal(got.error, "");
  assert_true(got.ms_min == r.ms_min && got.ms_median == 1.25 && got.ms_max == r.ms_max);
  assert_int_equal(got.runs, 10);
  assert_true(got.tflops == r.tflops);
  assert_true(isnan(got.rel_err));
  assert_true(got.max_err == 2e-7);
  assert_int_equal(got.regs, 64);
  assert_int_equal(got.shared_bytes, 16384);
  assert_int_equal(got.local_bytes, 0);
  assert_int_equal(got.created_at, 1700000000);
  /* bad arguments */
  r.status = (db_status)42;
  assert_int_equal(db_insert(db, &r, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(db_insert(db, NULL, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(db_best(db, NULL, &p, &got, &e), MMT_ERR_INVALID_ARG);
  db_handle *none = (db_handle *)1;
  assert_int_equal(db_open("", false, &none, &e), MMT_ERR_INVALID_ARG);
  assert_null(none);
  db_close(db);
}

/* Rows for the query tests; returns the id of the fastest ok row of GPU A 1024^3. */
static int64_t fill(db_handle *db) {
  int64_t best = 0, id = 0;
  insert(db, result("GPU A", 1024, 1024, 1024, DB_OK, 3.0, "v=1"), NULL);
  insert(db, result("GPU A", 1024, 1024, 1024, DB_OK, 2.0, "v=2"), &best);
  insert(db, result("GPU A", 1024, 1024, 1024, DB_VERIFY_FAILED, 0.5, "v=3"), NULL);
  insert(db, result("GPU A", 1024, 1024, 1024, DB_COMPILE_ERROR, 0.0, "v=4"), NULL);
  insert(db, result("GPU A", 1024, 1024, 1024, DB_FAULT, 0.1, "v=5"), NULL);
  insert(db, result("GPU A", 1024, 1024, 1024, DB_TIMEOUT, 0.2, "v=6"), NULL);
  insert(db, result("GPU A", 1024, 1024, 1024, DB_LAUNCH_ERROR, 0.3, "v=7"), NULL);
  insert(db, result("GPU B", 1024, 1024, 1024, DB_OK, 1.0, "v=8"), NULL); /* other device */
  insert(db, result("GPU A", 1024, 1024, 512, DB_OK, 1.0, "v=9"), NULL);  /* other shape */
  insert(db, result("GPU A", 1024, 1024, 1024, DB_OK, 3.0, "v=10"), &id); /* tie with v=1 */
  db_result t = result("GPU A", 1024, 1024, 1024, DB_OK, 0.5, "v=11");
  snprintf(t.problem.layout, sizeof t.problem.layout, "nt"); /* other layout */
  insert(db, t, NULL);
  (void)id;
  return best;
}

static void test_best(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  int64_t best = fill(db);
  db_result got;
  ut_err e;
  db_problem p = problem(1024, 1024, 1024);
  assert_int_equal(db_best(db, "GPU A", &p, &got, &e), MMT_OK);
  assert_int_equal(got.id, best);
  assert_string_equal(got.params, "v=2");
  assert_int_equal(db_best(db, "GPU B", &p, &got, &e), MMT_OK);
  assert_string_equal(got.params, "v=8");
  p.k = 512;
  assert_int_equal(db_best(db, "GPU A", &p, &got, &e), MMT_OK);
  assert_string_equal(got.params, "v=9");
  p.k = 7;
  assert_int_equal(db_best(db, "GPU A", &p, &got, &e), MMT_ERR_NOT_FOUND);
  assert_non_null(strstr(e.msg, "1024x1024x7"));
  assert_int_equal(db_best(db, "GPU C", &p, &got, &e), MMT_ERR_NOT_FOUND);
  int64_t n = 0;
  assert_int_equal(db_count(db, "GPU A", &n, &e), MMT_OK);
  assert_int_equal(n, 10);
  assert_int_equal(db_count(db, NULL, &n, &e), MMT_OK);
  assert_int_equal(n, 11);
  db_close(db);
}

static void test_each_ok(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  fill(db);
  ut_err e;
  db_problem p = problem(1024, 1024, 1024);
  collect c = {0};
  assert_int_equal(db_each_ok(db, "GPU A", &p, collect_fn, &c, &e), MMT_OK);
  assert_int_equal(c.count, 3); /* only ok rows of this device and problem */
  assert_string_equal(c.rows[0].params, "v=2");
  assert_string_equal(c.rows[1].params, "v=1"); /* tie on 3.0 ms: lower id first */
  assert_string_equal(c.rows[2].params, "v=10");
  assert_true(c.ids[1] < c.ids[2]);
  collect stop = {.stop_after = 1};
  assert_int_equal(db_each_ok(db, "GPU A", &p, collect_fn, &stop, &e), MMT_OK);
  assert_int_equal(stop.count, 1);
  collect none = {0};
  assert_int_equal(db_each_ok(db, "GPU Z", &p, collect_fn, &none, &e), MMT_OK);
  assert_int_equal(none.count, 0);
  /* the handle is usable after an early stop */
  collect again = {0};
  assert_int_equal(db_each_ok(db, "GPU A", &p, collect_fn, &again, &e), MMT_OK);
  assert_int_equal(again.count, 3);
  db_close(db);
}

static void test_each_best(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  fill(db);
  insert(db, result("GPU A", 64, 64, 64, DB_OK, 0.01, "s=1"), NULL);
  insert(db, result("GPU A", 64, 64, 64, DB_OK, 0.02, "s=2"), NULL);
  insert(db, result("GPU A", 2048, 64, 64, DB_FAULT, 0.01, "s=3"), NULL); /* no ok row */
  ut_err e;
  collect c = {0};
  assert_int_equal(db_each_best(db, "GPU A", NULL, NULL, collect_fn, &c, &e), MMT_OK);
  assert_int_equal(c.count, 4);
  /* ordered by dtype, layout, m, n, k */
  assert_string_equal(c.rows[0].params, "s=1");  /* f32 nn 64^3 */
  assert_string_equal(c.rows[1].params, "v=9");  /* f32 nn 1024x1024x512 */
  assert_string_equal(c.rows[2].params, "v=2");  /* f32 nn 1024^3 */
  assert_string_equal(c.rows[3].params, "v=11"); /* f32 nt 1024^3 */
  collect nt = {0};
  assert_int_equal(db_each_best(db, "GPU A", "f32", "nt", collect_fn, &nt, &e), MMT_OK);
  assert_int_equal(nt.count, 1);
  collect f16 = {0};
  assert_int_equal(db_each_best(db, "GPU A", "f16", NULL, collect_fn, &f16, &e), MMT_OK);
  assert_int_equal(f16.count, 0);
  collect all = {0};
  assert_int_equal(db_each_best(db, NULL, NULL, NULL, collect_fn, &all, &e), MMT_OK);
  assert_int_equal(all.count, 5); /* GPU A's four, then GPU B's one */
  assert_string_equal(all.rows[4].device.name, "GPU B");
  assert_string_equal(all.rows[4].params, "v=8");
  collect stop = {.stop_after = 2};
  assert_int_equal(db_each_best(db, NULL, NULL, NULL, collect_fn, &stop, &e), MMT_OK);
  assert_int_equal(stop.count, 2);
  db_close(db);
}

/* The rows db_each_model_row gives: every ok row of one device name, its columns as stored. */
typedef struct {
  int count;
  db_model_row first; /* strings copied below: borrowed ones die with the callback */
  char kernel_hash[17], params[64];
  char ops[4][DB_OP_MAX]; /* of the first four rows */
  int64_t last_batch;
} model_rows;

static int model_row_fn(const db_model_row *r, void *user) {
  model_rows *m = user;
  if (m->count == 0) {
    m->first = *r;
    snprintf(m->kernel_hash, sizeof m->kernel_hash, "%s", r->kernel_hash);
    snprintf(m->params, sizeof m->params, "%s", r->params);
  }
  if (m->count < 4) snprintf(m->ops[m->count], sizeof m->ops[0], "%s", r->problem.op);
  m->last_batch = r->problem.batch;
  m->count++;
  return 0;
}

static void test_each_model_row(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  db_result r = result("GPU A", 64, 32, 16, DB_OK, 0.5, "x=1");
  snprintf(r.kernel_hash, sizeof r.kernel_hash, "00112233445566ff");
  r.launch = (db_launch){.tile_m = 64, .tile_n = 32, .slices = 2, .threads = 128, .per_sm = 1};
  insert(db, r, NULL);
  insert(db, result("GPU A", 64, 32, 16, DB_FAULT, 0.1, "x=2"), NULL); /* not ok */
  insert(db, result("GPU B", 64, 32, 16, DB_OK, 0.5, "x=3"), NULL);    /* other device */
  ut_err e;
  model_rows m = {0};
  assert_int_equal(db_each_model_row(db, "GPU A", model_row_fn, &m, &e), MMT_OK);
  assert_int_equal(m.count, 1);
  assert_string_equal(m.params, "x=1");
  assert_string_equal(m.kernel_hash, "00112233445566ff");
  assert_string_equal(m.first.problem.dtype, "f32");
  assert_int_equal(m.first.problem.n, 32);
  assert_true(m.first.ms_median == 0.5);
  assert_int_equal(m.first.sm_count, 132);
  assert_int_equal(m.first.launch.slices, 2);
  assert_int_equal(m.first.launch.shared_bytes, 16384);
  db_close(db);
}

typedef struct {
  db_problem shapes[16];
  int count;
} shapes;

static void shape_fn(const db_problem *p, void *user) {
  shapes *s = user;
  if (s->count < 16) s->shapes[s->count] = *p;
  s->count++;
}

static void test_each_shape(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  fill(db);
  insert(db, result("GPU A", 2048, 64, 64, DB_FAULT, 0.01, "s=3"), NULL); /* no ok row */
  ut_err e;
  shapes s = {0};
  assert_int_equal(db_each_shape(db, "GPU A", "f32", "nn", shape_fn, &s, &e), MMT_OK);
  assert_int_equal(s.count, 2);
  assert_int_equal(s.shapes[0].k, 512);
  assert_int_equal(s.shapes[1].k, 1024);
  assert_string_equal(s.shapes[1].layout, "nn");
  shapes any = {0};
  assert_int_equal(db_each_shape(db, "GPU A", NULL, NULL, shape_fn, &any, &e), MMT_OK);
  assert_int_equal(any.count, 3);
  shapes b = {0};
  assert_int_equal(db_each_shape(db, "GPU B", NULL, NULL, shape_fn, &b, &e), MMT_OK);
  assert_int_equal(b.count, 1);
  shapes all = {0};
  assert_int_equal(db_each_shape(db, NULL, NULL, NULL, shape_fn, &all, &e), MMT_OK);
  assert_int_equal(all.count, 3); /* distinct problems: GPU B's is one of GPU A's */
  db_close(db);
}

/* The problems with ok rows after an id: what an online context asks when new rows come, so
 * that it looks again at those problems' choices alone. */
static void test_each_shape_since(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  fill(db);
  ut_err e;
  int64_t seen = 0;
  uint64_t files = 0;
  assert_int_equal(db_rows_stamp(db, &seen, &files, &e), MMT_OK);
  shapes none = {0};
  assert_int_equal(db_each_shape_since(db, "GPU A", seen, shape_fn, &none, &e), MMT_OK);
  assert_int_equal(none.count, 0);
  shapes all = {0};
  assert_int_equal(db_each_shape_since(db, "GPU A", 0, shape_fn, &all, &e), MMT_OK);
  assert_int_equal(all.count, 3); /* as db_each_shape: 1024^3 nn and nt, 1024^2 x 512 */
  insert(db, result("GPU A", 64, 64, 64, DB_OK, 0.01, "v=20"), NULL);     /* a new problem */
  insert(db, result("GPU A", 1024, 1024, 512, DB_OK, 2.0, "v=21"), NULL); /* an old one */
  insert(db, result("GPU A", 32, 32, 32, DB_FAULT, 0.01, "v=22"), NULL);  /* no ok row */
  insert(db, result("GPU B", 16, 16, 16, DB_OK, 0.01, "v=23"), NULL);     /* another GPU */
  insert(db, result("GPU A", 64, 64, 64, DB_OK, 0.02, "v=24"), NULL);     /* once */
  shapes s = {0};
  assert_int_equal(db_each_shape_since(db, "GPU A", seen, shape_fn, &s, &e), MMT_OK);
  assert_int_equal(s.count, 2);
  const db_problem *small = s.shapes[0].m == 64 ? &s.shapes[0] : &s.shapes[1];
  const db_problem *old = s.shapes[0].m == 64 ? &s.shapes[1] : &s.shapes[0];
  assert_int_equal(small->k, 64);
  assert_int_equal(old->m, 1024);
  assert_int_equal(old->k, 512);
  assert_int_equal(db_each_shape_since(db, NULL, 0, shape_fn, &s, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(db_each_shape_since(db, "GPU A", 0, NULL, &s, &e), MMT_ERR_INVALID_ARG);
  db_close(db);
}

static void test_has_result(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  db_result base = result("GPU A", 256, 256, 256, DB_VERIFY_FAILED, 1.0, "BM=32");
  insert(db, base, NULL);
  ut_err e;
  bool found = false;
  db_result k = base;
  k.status = DB_OK; /* any status matches */
  k.ms_median = 99.0;
  snprintf(k.device.uuid, sizeof k.device.uuid, "GPU-other"); /* not part of the key */
  assert_int_equal(db_has_result(db, &k, &found, &e), MMT_OK);
  assert_true(found);
  for (int field = 0; field < 10; field++) {
    k = base;
    switch (field) {
      case 0: snprintf(k.device.name, sizeof k.device.name, "GPU B"); break;
      case 1: snprintf(k.nvrtc_version, sizeof k.nvrtc_version, "12.9"); break;
      case 2: snprintf(k.template_name, sizeof k.template_name, "naive"); break;
      case 3: snprintf(k.template_hash, sizeof k.template_hash, "fedcba9876543210"); break;
      case 4: snprintf(k.params, sizeof k.params, "BM=64"); break;
      case 5: snprintf(k.problem.dtype, sizeof k.problem.dtype, "f16"); break;
      case 6: snprintf(k.problem.layout, sizeof k.problem.layout, "tn"); break;
      case 7: k.problem.m = 257; break;
      case 8: k.problem.n = 255; break;
      default: k.problem.k = 1; break;
    }
    found = true;
    assert_int_equal(db_has_result(db, &k, &found, &e), MMT_OK);
    if (found) fail_msg("key field %d differs but a result was found", field);
  }
  db_close(db);
}

#define OP_SILU "out=f32,bias=col,act=silu" /* a fused problem's op */

/* r as a row of the problem with this op and batch. */
static db_result with_op(db_result r, const char *op, int64_t batch) {
  snprintf(r.problem.op, sizeof r.problem.op, "%s", op);
  r.problem.batch = batch;
  return r;
}

static db_problem op_problem(int64_t m, int64_t n, int64_t k, const char *op, int64_t batch) {
  db_problem p = problem(m, n, k);
  snprintf(p.op, sizeof p.op, "%s", op);
  p.batch = batch;
  return p;
}

/* Rows of one shape that differ only in op or batch are three problems: each query finds
 * the rows of its own, a zeroed batch is 1, and each has its own search time. */
static void test_op_batch(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  int64_t plain = 0, fused = 0, batched = 0;
  insert(db, result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=1"), &plain); /* batch 0: stored 1 */
  insert(db, with_op(result("GPU A", 64, 64, 64, DB_OK, 0.25, "x=1"), OP_SILU, 1), &fused);
  insert(db, with_op(result("GPU A", 64, 64, 64, DB_OK, 0.125, "x=1"), "", 4), &batched);
  ut_err e;
  db_result got;
  assert_int_equal(db_get(db, fused, &got, &e), MMT_OK);
  assert_string_equal(got.problem.op, OP_SILU);
  assert_int_equal(got.problem.batch, 1);
  assert_int_equal(db_get(db, plain, &got, &e), MMT_OK);
  assert_string_equal(got.problem.op, "");
  assert_int_equal(got.problem.batch, 1);
  /* each problem's ok rows and best are its own */
  const db_problem probs[] = {problem(64, 64, 64), op_problem(64, 64, 64, "", 1),
                              op_problem(64, 64, 64, OP_SILU, 0), op_problem(64, 64, 64, "", 4)};
  const int64_t want[] = {plain, plain, fused, batched};
  for (int i = 0; i < 4; i++) {
    collect c = {0};
    assert_int_equal(db_each_ok(db, "GPU A", &probs[i], collect_fn, &c, &e), MMT_OK);
    assert_int_equal(c.count, 1);
    assert_int_equal(c.ids[0], want[i]);
    assert_int_equal(db_best(db, "GPU A", &probs[i], &got, &e), MMT_OK);
    assert_int_equal(got.id, want[i]);
  }
  db_problem other = op_problem(64, 64, 64, "out=f16", 1);
  assert_int_equal(db_best(db, "GPU A", &other, &got, &e), MMT_ERR_NOT_FOUND);
  assert_non_null(strstr(e.msg, "64x64x64 (op 'out=f16', batch 1)"));
  other = op_problem(64, 64, 64, "", 2);
  assert_int_equal(db_best(db, "GPU A", &other, &got, &e), MMT_ERR_NOT_FOUND);
  /* resume: a key that differs only in op or batch was not measured */
  bool found = false;
  db_result key = result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=1");
  assert_int_equal(db_has_result(db, &key, &found, &e), MMT_OK);
  assert_true(found);
  key = with_op(key, "out=f16", 1);
  assert_int_equal(db_has_result(db, &key, &found, &e), MMT_OK);
  assert_false(found);
  key = with_op(key, "", 2);
  assert_int_equal(db_has_result(db, &key, &found, &e), MMT_OK);
  assert_false(found);
  /* three best rows, three shapes: by op, then batch */
  collect best = {0};
  assert_int_equal(db_each_best(db, "GPU A", NULL, NULL, collect_fn, &best, &e), MMT_OK);
  assert_int_equal(best.count, 3);
  assert_int_equal(best.ids[0], plain);
  assert_int_equal(best.ids[1], batched);
  assert_int_equal(best.ids[2], fused);
  shapes sh = {0};
  assert_int_equal(db_each_shape(db, "GPU A", NULL, NULL, shape_fn, &sh, &e), MMT_OK);
  assert_int_equal(sh.count, 3);
  assert_string_equal(sh.shapes[0].op, "");
  assert_int_equal(sh.shapes[0].batch, 1);
  assert_int_equal(sh.shapes[1].batch, 4);
  assert_string_equal(sh.shapes[2].op, OP_SILU);
  /* the model's rows tell them apart */
  model_rows mr = {0};
  assert_int_equal(db_each_model_row(db, "GPU A", model_row_fn, &mr, &e), MMT_OK);
  assert_int_equal(mr.count, 3);
  assert_int_equal(mr.first.problem.batch, 1);
  assert_string_equal(mr.first.problem.op, "");
  assert_int_equal(mr.last_batch, 4);
  assert_string_equal(mr.ops[1], OP_SILU);
  /* search times per problem */
  double sec = -1;
  assert_int_equal(db_search_add(db, "GPU A", &probs[2], "c", 3.0, false, &e), MMT_OK);
  assert_int_equal(db_search_add(db, "GPU A", &probs[0], "c", 1.0, false, &e), MMT_OK);
  assert_int_equal(db_search_seconds(db, "GPU A", &probs[1], "c", &sec, &e), MMT_OK);
  assert_true(sec == 1.0);
  assert_int_equal(db_search_seconds(db, "GPU A", &probs[2], "c", &sec, &e), MMT_OK);
  assert_true(sec == 3.0);
  assert_int_equal(db_search_seconds(db, "GPU A", &probs[3], "c", &sec, &e), MMT_OK);
  assert_true(sec == 0);
  /* a negative batch is not a problem */
  db_result bad = with_op(result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=2"), "", -1);
  assert_int_equal(db_insert(db, &bad, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "batch -1"));
  db_close(db);
  if (!have_cli()) return;
  char out[64];
  assert_int_equal(cli(f->path, "SELECT count(*) FROM best", out, sizeof out), 0);
  assert_string_equal(out, "3");
}

static void test_persistence_and_two_handles(void **state) {
  fixture *f = *state;
  db_handle *a = open_ok(f->path, false);
  db_handle *b = open_ok(f->path, false);
  db_handle *ro = open_ok(f->path, true);
  int64_t id = 0;
  insert(a, result("GPU A", 8, 8, 8, DB_OK, 0.5, "x=1"), &id);
  ut_err e;
  db_result got;
  db_problem p = problem(8, 8, 8);
  assert_int_equal(db_best(b, "GPU A", &p, &got, &e), MMT_OK); /* second handle sees it */
  assert_int_equal(got.id, id);
  assert_int_equal(db_best(ro, "GPU A", &p, &got, &e), MMT_OK);
  insert(b, result("GPU A", 8, 8, 8, DB_OK, 0.25, "x=2"), NULL);
  assert_int_equal(db_best(a, "GPU A", &p, &got, &e), MMT_OK);
  assert_string_equal(got.params, "x=2");
  db_close(a);
  db_close(b);
  db_close(ro);
  db_handle *again = open_ok(f->path, true); /* persisted */
  int64_t n = 0;
  assert_int_equal(db_count(again, NULL, &n, &e), MMT_OK);
  assert_int_equal(n, 2);
  assert_int_equal(db_best(again, "GPU A", &p, &got, &e), MMT_OK);
  assert_string_equal(got.params, "x=2");
  db_close(again);
}

/* A callback may use the handle, but not re-enter its own iterator. */
typedef struct {
  db_handle *db;
  mmt_status nested_rc, insert_rc;
  int calls;
} reenter;

static int reenter_fn(const db_result *r, void *user) {
  reenter *x = user;
  ut_err e;
  collect c = {0};
  x->calls++;
  x->nested_rc = db_each_ok(x->db, r->device.name, &r->problem, collect_fn, &c, &e);
  db_result copy = *r;
  copy.problem.m += 1;
  x->insert_rc = db_insert(x->db, &copy, &e);
  return 0;
}

static void test_reentry(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  insert(db, result("GPU A", 8, 8, 8, DB_OK, 0.5, "x=1"), NULL);
  reenter x = {db, MMT_OK, MMT_ERR_DB, 0};
  ut_err e;
  db_problem p = problem(8, 8, 8);
  assert_int_equal(db_each_ok(db, "GPU A", &p, reenter_fn, &x, &e), MMT_OK);
  assert_int_equal(x.calls, 1);
  assert_int_equal(x.nested_rc, MMT_ERR_INVALID_ARG);
  assert_int_equal(x.insert_rc, MMT_OK);
  int64_t n = 0;
  assert_int_equal(db_count(db, NULL, &n, &e), MMT_OK);
  assert_int_equal(n, 2);
  db_close(db);
}

static void test_read_only(void **state) {
  fixture *f = *state;
  db_handle *db = (db_handle *)1;
  ut_err e;
  assert_int_equal(db_open(f->path, true, &db, &e), MMT_ERR_NOT_FOUND);
  assert_null(db);
  assert_non_null(strstr(e.msg, f->path));
  struct stat st;
  char parent[256];
  snprintf(parent, sizeof parent, "%s/sub", f->dir);
  assert_int_not_equal(stat(parent, &st), 0); /* read-only creates nothing */
  /* an empty file: nothing tuned yet */
  char empty[256];
  snprintf(empty, sizeof empty, "%s/empty.db", f->dir);
  write_bytes(empty, "", 0);
  assert_int_equal(db_open(empty, true, &db, &e), MMT_ERR_NOT_FOUND);
  db = open_ok(empty, false); /* a writable open gives it the schema */
  db_close(db);
  /* writes through a read-only handle fail cleanly (injected failure) */
  db = open_ok(f->path, false);
  insert(db, result("GPU A", 8, 8, 8, DB_OK, 0.5, "x=1"), NULL);
  db_close(db);
  db = open_ok(f->path, true);
  db_result r = result("GPU A", 8, 8, 8, DB_OK, 0.1, "x=2");
  assert_int_equal(db_insert(db, &r, &e), MMT_ERR_DB);
  assert_non_null(strstr(e.msg, "readonly"));
  assert_int_equal(r.id, 0);
  int64_t n = 0;
  assert_int_equal(db_count(db, NULL, &n, &e), MMT_OK);
  assert_int_equal(n, 1);
  db_close(db);
}

static void expect_corrupt(const char *path, const char *why) {
  db_handle *db = (db_handle *)1;
  ut_err e;
  mmt_status rc = db_open(path, false, &db, &e);
  if (rc != MMT_ERR_DB_CORRUPT) fail_msg("%s: got %s: %s", path, mmt_status_name(rc), e.msg);
  assert_null(db);
  assert_non_null(strstr(e.msg, path));
  if (!strstr(e.msg, why)) fail_msg("'%s' not in '%s'", why, e.msg);
  rc = db_open(path, true, &db, &e);
  assert_int_equal(rc, MMT_ERR_DB_CORRUPT);
}

static void test_not_sqlite(void **state) {
  fixture *f = *state;
  char path[256];
  unsigned char junk[8192];
  srand(42);
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)rand();
  snprintf(path, sizeof path, "%s/random.db", f->dir);
  write_bytes(path, junk, sizeof junk);
  expect_corrupt(path, "not an mmtune database (file is not a database)");
  /* the file is left as it was */
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  unsigned char back[sizeof junk + 1];
  assert_int_equal(fread(back, 1, sizeof back, fp), sizeof junk);
  fclose(fp);
  assert_memory_equal(back, junk, sizeof junk);
  snprintf(path, sizeof path, "%s/notes.txt", f->dir);
  const char *text = "these are my notes, not a database\n";
  write_bytes(path, text, strlen(text));
  expect_corrupt(path, "not a database");
  char big[5000];
  memset(big, 'a', sizeof big);
  write_bytes(path, big, sizeof big);
  expect_corrupt(path, "not a database");
}

static void test_foreign_sqlite(void **state) {
  fixture *f = *state;
  if (!have_cli()) skip();
  char path[256], out[256];
  snprintf(path, sizeof path, "%s/foreign.db", f->dir);
  assert_int_equal(cli(path, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", NULL, 0), 0);
  expect_corrupt(path, "has no mmtune tables");
  assert_int_equal(cli(path, "PRAGMA journal_mode", out, sizeof out), 0);
  assert_string_equal(out, "delete"); /* not switched to WAL: a foreign file is not modified */
  /* someone else's meta table, with or without our columns, and a newer user_version */
  snprintf(path, sizeof path, "%s/foreign2.db", f->dir);
  assert_int_equal(cli(path, "PRAGMA user_version=7; CREATE TABLE meta(a, b);", NULL, 0), 0);
  expect_corrupt(path, "has no mmtune tables");
  snprintf(path, sizeof path, "%s/foreign3.db", f->dir);
  assert_int_equal(
      cli(path,
          "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
          " INSERT INTO meta VALUES ('application', 'other'); CREATE TABLE results(x);",
          NULL, 0),
      0);
  expect_corrupt(path, "has no mmtune tables");
  /* ours, but damaged: results dropped */
  db_close(open_ok(f->path, false));
  assert_int_equal(cli(f->path, "DROP VIEW best; DROP TABLE results;", NULL, 0), 0);
  expect_corrupt(f->path, "results table missing");
}

static void test_newer_schema(void **state) {
  fixture *f = *state;
  if (!have_cli()) skip();
  db_handle *db = open_ok(f->path, false);
  insert(db, result("GPU A", 8, 8, 8, DB_OK, 0.5, "x=1"), NULL);
  db_close(db);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version=%d", DB_SCHEMA_VERSION + 1);
  assert_int_equal(cli(f->path, sql, NULL, 0), 0);
  ut_err e;
  db = (db_handle *)1;
  assert_int_equal(db_open(f->path, false, &db, &e), MMT_ERR_DB_VERSION);
  assert_null(db);
  char want[96];
  snprintf(want, sizeof want, "schema version %d is newer than this mmtune supports (%d)",
           DB_SCHEMA_VERSION + 1, DB_SCHEMA_VERSION);
  assert_non_null(strstr(e.msg, want));
  assert_non_null(strstr(e.msg, f->path));
  assert_int_equal(db_open(f->path, true, &db, &e), MMT_ERR_DB_VERSION);
}

/* A version-1 file (tests/data/schema_v1.sql, as the foundation release wrote it): read as it
 * is read-only; opened for writing, upgraded in place to the current version with its rows
 * kept, the status 'pruned' (v2) accepted and search times (v3) recorded. */
static void test_upgrade_v1(void **state) {
  fixture *f = *state;
  if (!have_cli()) skip();
  char cmd[1024], out[64];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/sub/folders' && " SQLITE_CLI " '%s' < '%s/data/schema_v1.sql'",
           f->dir, f->path, MMT_TEST_DIR);
  assert_int_equal(system(cmd), 0);
  ut_err e;
  db_result best;
  db_problem p = problem(64, 64, 64);
  db_handle *db = NULL;
  assert_int_equal(db_open(f->path, true, &db, &e), MMT_OK);
  assert_int_equal(db_best(db, "GPU A", &p, &best, &e), MMT_OK);
  db_close(db);
  assert_int_equal(cli(f->path, "PRAGMA user_version", out, sizeof out), 0);
  assert_string_equal(out, "1"); /* a reader changes nothing */

  assert_int_equal(best.launch.tile_m, 0); /* unknown before version 4 */
  db = open_ok(f->path, false);
  assert_int_equal(cli(f->path, "PRAGMA user_version", out, sizeof out), 0);
  assert_int_equal(atoi(out), DB_SCHEMA_VERSION);
  double seconds = -1;
  assert_int_equal(db_search_add(db, "GPU A", &p, "c", 2.5, false, &e), MMT_OK);
  assert_int_equal(db_search_seconds(db, "GPU A", &p, "c", &seconds, &e), MMT_OK);
  assert_true(seconds == 2.5);
  assert_int_equal(db_best(db, "GPU A", &p, &best, &e), MMT_OK);
  assert_string_equal(best.params, "bx=16,by=16");
  assert_true(best.ms_median == 0.25);
  db_result pruned = result("GPU A", 64, 64, 64, DB_PRUNED, 0, "bx=8,by=8");
  pruned.shared_bytes = -1; /* unknown */
  assert_int_equal(db_insert(db, &pruned, &e), MMT_OK);
  /* version 4: launch shapes are stored and read back */
  db_result shaped = result("GPU A", 64, 64, 64, DB_OK, 0.5, "bx=4,by=4");
  shaped.launch = (db_launch){.tile_m = 4, .tile_n = 4, .slices = 1, .threads = 16};
  shaped.shared_bytes = 4096;
  assert_int_equal(db_insert(db, &shaped, &e), MMT_OK);
  db_result back;
  assert_int_equal(db_get(db, shaped.id, &back, &e), MMT_OK);
  assert_int_equal(back.launch.tile_n, 4);
  assert_int_equal(back.launch.threads, 16);
  assert_int_equal(back.launch.per_sm, 0);
  assert_int_equal(back.launch.shared_bytes, 4096); /* the shared_bytes column's */
  assert_int_equal(db_get(db, pruned.id, &back, &e), MMT_OK);
  assert_int_equal(back.shared_bytes, -1);
  assert_int_equal(back.launch.shared_bytes, 0); /* unknown */
  assert_int_equal(db_get(db, 999999, &back, &e), MMT_ERR_NOT_FOUND);
  db_close(db);
  assert_int_equal(cli(f->path, "SELECT count(*) FROM best", out, sizeof out), 0);
  assert_string_equal(out, "1");
  db = open_ok(f->path, false); /* already current: opens as it is */
  db_close(db);
}

/* ---- merge and check ------------------------------------------------------------------------ */

#define FIXED_TIME 1764000000 /* created_at of the merge fixtures: equal rows are exact copies */

/* Creates file `name` in f->dir with rows[0..n-1] (created_at fixed) and, when seconds > 0, a
 * search time for problem 64^3 of GPU A; returns its path in path. */
static void make_source(const fixture *f, const char *name, const db_result *rows, int n,
                        double seconds, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s", f->dir, name);
  db_handle *db = open_ok(path, false);
  for (int i = 0; i < n; i++) {
    db_result r = rows[i];
    r.created_at = FIXED_TIME;
    insert(db, r, NULL);
  }
  ut_err e;
  db_problem p = problem(64, 64, 64);
  if (seconds > 0) assert_int_equal(db_search_add(db, "GPU A", &p, "c", seconds, false, &e), MMT_OK);
  db_close(db);
}

static int64_t count_rows(const char *path) {
  db_handle *db = open_ok(path, true);
  int64_t n = -1;
  ut_err e;
  assert_int_equal(db_count(db, NULL, &n, &e), MMT_OK);
  db_close(db);
  return n;
}

/* The best rows of every problem, as "device dtype MxNxK template params ms" lines. */
static void best_lines(const char *path, char *out, size_t cap) {
  collect c = {0};
  ut_err e;
  db_handle *db = open_ok(path, true);
  assert_int_equal(db_each_best(db, NULL, NULL, NULL, collect_fn, &c, &e), MMT_OK);
  db_close(db);
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < c.count && i < 32; i++) {
    const db_result *r = &c.rows[i];
    len += (size_t)snprintf(out + len, cap - len, "%s %s %lldx%lldx%lld %s %s %g\n", r->device.name,
                            r->problem.dtype, (long long)r->problem.m, (long long)r->problem.n,
                            (long long)r->problem.k, r->template_name, r->params, r->ms_median);
  }
}

/* A file's bytes (owned; NULL when it does not exist), to show a refused merge left it as
 * it was. */
static char *file_bytes(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0, got;
  do {
    if (n + 65536 > cap) {
      cap = cap ? 2 * cap : 65536;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
    got = fread(buf + n, 1, cap - n, fp);
    n += got;
  } while (got > 0);
  fclose(fp);
  *len = n;
  return buf;
}

/* Whether path's bytes are still before[0..len). */
static void assert_unchanged(const char *path, const char *before, size_t len) {
  size_t now_len = 0;
  char *now = file_bytes(path, &now_len);
  assert_non_null(now);
  assert_int_equal(now_len, len);
  assert_memory_equal(now, before, len);
  free(now);
}

static double search_time(const char *path, const char *device, int64_t m) {
  db_handle *db = open_ok(path, false);
  db_problem p = problem(m, m, m);
  double s = -1;
  ut_err e;
  assert_int_equal(db_search_seconds(db, device, &p, "c", &s, &e), MMT_OK);
  db_close(db);
  return s;
}

/* Two shards' files merged: the union of their rows with provenance, an exact duplicate
 * dropped, search times of the same search added; the merged file's best rows equal those
 * of one file holding every row; merging again adds no row and no time. */
static void test_merge_union(void **state) {
  fixture *f = *state;
  const db_result a[] = {
      result("GPU A", 64, 64, 64, DB_OK, 0.50, "x=1"),
      result("GPU A", 64, 64, 64, DB_FAULT, 0, "x=2"),
      result("GPU A", 128, 128, 128, DB_OK, 0.90, "x=1"),
  };
  const db_result b[] = {
      result("GPU A", 64, 64, 64, DB_OK, 0.50, "x=1"), /* the same measurement as a[0] */
      result("GPU A", 64, 64, 64, DB_OK, 0.40, "x=3"), /* faster: the new best of 64^3 */
      result("GPU B", 128, 128, 128, DB_OK, 0.70, "x=1"),
  };
  char pa[256], pb[256], one[256], dst[256];
  make_source(f, "a.db", a, 3, 2.0, pa, sizeof pa);
  make_source(f, "b.db", b, 3, 3.0, pb, sizeof pb);
  db_result all[6];
  memcpy(all, a, sizeof a);
  memcpy(all + 3, b, sizeof b);
  make_source(f, "one.db", all, 6, 0, one, sizeof one);
  snprintf(dst, sizeof dst, "%s/new/merged.db", f->dir); /* created, folder and all */
  const char *srcs[] = {pa, pb};
  db_merge_stats st;
  ut_err e;
  mmt_status rc = db_merge(dst, srcs, 2, NULL, &st, &e);
  if (rc) fail_msg("db_merge: %s", e.msg);
  assert_int_equal(st.rows_read, 6);
  assert_int_equal(st.rows_added, 5);
  assert_int_equal(st.duplicates, 1);
  assert_int_equal(st.searches, 2);
  assert_true(search_time(dst, "GPU A", 64) == 5.0);
  db_handle *db = open_ok(dst, true);
  db_problem p = problem(64, 64, 64);
  db_result best;
  assert_int_equal(db_best(db, "GPU A", &p, &best, &e), MMT_OK);
  assert_string_equal(best.params, "x=3");
  assert_string_equal(best.device.uuid, "GPU-1234"); /* provenance kept */
  assert_int_equal(best.created_at, FIXED_TIME);
  db_close(db);
  /* merging a file again adds nothing: no row, no second copy of its search time */
  const char *again[] = {pb, pa};
  assert_int_equal(db_merge(dst, again, 2, NULL, &st, &e), MMT_OK);
  assert_int_equal(st.rows_added, 0);
  assert_int_equal(st.duplicates, 6);
  assert_int_equal(st.searches, 0);
  assert_true(search_time(dst, "GPU A", 64) == 5.0);
  assert_int_equal(count_rows(dst), 5);
  char merged[2048], single[2048];
  best_lines(dst, merged, sizeof merged);
  best_lines(one, single, sizeof single);
  assert_string_equal(merged, single);
  /* the merged file checks out */
  db_check_report rep;
  assert_int_equal(db_check(dst, NULL, &rep, &e), MMT_OK);
  assert_int_equal(rep.schema_version, DB_SCHEMA_VERSION);
  assert_int_equal(rep.rows, 5);
}

/* A file started as a copy of the main one (tune --device all's per-GPU parts) and merged
 * back: its rows come in once, and a search time is the main file's plus the part's own:
 * the part's copy of the main file's time is the main file's origin's, not counted twice. */
static void test_merge_copies(void **state) {
  fixture *f = *state;
  const db_result a[] = {result("GPU A", 64, 64, 64, DB_OK, 0.50, "x=1")};
  char main_db[256], part[256];
  make_source(f, "main.db", a, 1, 2.0, main_db, sizeof main_db);
  snprintf(part, sizeof part, "%s/main.db.gpu0.db", f->dir);
  ut_err e;
  const char *seed[] = {main_db};
  assert_int_equal(db_merge(part, seed, 1, NULL, NULL, &e), MMT_OK);
  db_handle *db = open_ok(part, false);
  db_problem p = problem(64, 64, 64);
  assert_int_equal(db_search_add(db, "GPU A", &p, "c", 1.0, false, &e), MMT_OK); /* its own */
  insert(db, result("GPU A", 64, 64, 64, DB_OK, 0.40, "x=2"), NULL);
  db_close(db);
  const char *back[] = {part};
  db_merge_stats st;
  assert_int_equal(db_merge(main_db, back, 1, NULL, &st, &e), MMT_OK);
  assert_int_equal(st.rows_added, 1);
  assert_int_equal(st.duplicates, 1);
  assert_true(search_time(main_db, "GPU A", 64) == 3.0);
  assert_int_equal(db_merge(main_db, back, 1, NULL, &st, &e), MMT_OK); /* again: the same */
  assert_true(search_time(main_db, "GPU A", 64) == 3.0);
}

/* A source refused -- missing, not a database, damaged, of a newer schema, the destination
 * itself or a hard link to it -- leaves the destination byte for byte as it was, even after
 * good sources in the same call, and creates no destination that did not exist; an older
 * schema is read as it is. */
static void test_merge_refusals(void **state) {
  fixture *f = *state;
  const db_result a[] = {result("GPU A", 64, 64, 64, DB_OK, 0.50, "x=1")};
  char good[256], dst[256], junk[256], missing[256], fresh[256], link_path[256];
  make_source(f, "good.db", a, 1, 1.0, good, sizeof good);
  snprintf(dst, sizeof dst, "%s/dst.db", f->dir);
  db_handle *db = open_ok(dst, false);
  insert(db, result("GPU A", 32, 32, 32, DB_OK, 0.1, "x=9"), NULL);
  db_close(db);
  size_t len = 0;
  char *before = file_bytes(dst, &len);
  snprintf(junk, sizeof junk, "%s/junk.db", f->dir);
  unsigned char bytes[4096];
  for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 131 + 7);
  write_bytes(junk, bytes, sizeof bytes);
  snprintf(missing, sizeof missing, "%s/none.db", f->dir);
  snprintf(fresh, sizeof fresh, "%s/fresh/new.db", f->dir);
  snprintf(link_path, sizeof link_path, "%s/dst-link.db", f->dir);
  assert_int_equal(link(dst, link_path), 0);
  ut_err e;
  db_merge_stats st = {.rows_added = 99};
  const char *with_junk[] = {good, junk};
  assert_int_equal(db_merge(dst, with_junk, 2, NULL, &st, &e), MMT_ERR_DB_CORRUPT);
  assert_non_null(strstr(e.msg, "junk.db"));
  assert_int_equal(st.rows_added, 0);
  assert_int_equal(db_merge(fresh, with_junk, 2, NULL, &st, &e), MMT_ERR_DB_CORRUPT);
  const char *with_missing[] = {good, missing};
  assert_int_equal(db_merge(dst, with_missing, 2, NULL, &st, &e), MMT_ERR_NOT_FOUND);
  assert_non_null(strstr(e.msg, "none.db"));
  assert_int_equal(db_merge(fresh, with_missing, 2, NULL, &st, &e), MMT_ERR_NOT_FOUND);
  const char *itself[] = {dst}, *linked[] = {good, link_path};
  assert_int_equal(db_merge(dst, itself, 1, NULL, &st, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "both a source and the destination"));
  assert_int_equal(db_merge(dst, linked, 2, NULL, &st, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "dst-link.db' is both a source and the destination"));
  assert_int_equal(access(fresh, F_OK), -1); /* nothing created */
  char fresh_dir[256];
  snprintf(fresh_dir, sizeof fresh_dir, "%s/fresh", f->dir);
  assert_int_equal(access(fresh_dir, F_OK), -1);
  db_check_report rep;
  assert_int_equal(db_check(junk, NULL, &rep, &e), MMT_ERR_DB_CORRUPT);
  assert_int_equal(db_check(missing, NULL, &rep, &e), MMT_ERR_NOT_FOUND);
  if (have_cli()) {
    char newer[256], v1[256], cmd[1024];
    make_source(f, "newer.db", a, 1, 0, newer, sizeof newer);
    snprintf(cmd, sizeof cmd, "PRAGMA user_version=%d", DB_SCHEMA_VERSION + 1);
    assert_int_equal(cli(newer, cmd, NULL, 0), 0);
    const char *with_newer[] = {good, newer};
    assert_int_equal(db_merge(dst, with_newer, 2, NULL, &st, &e), MMT_ERR_DB_VERSION);
    assert_int_equal(db_check(newer, NULL, &rep, &e), MMT_ERR_DB_VERSION);
    /* a damaged page: the results table's root overwritten */
    char damaged[256];
    make_source(f, "damaged.db", a, 1, 0, damaged, sizeof damaged);
    assert_int_equal(cli(damaged, "PRAGMA journal_mode=delete", NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "dd if=/dev/urandom of='%s' bs=1024 seek=3 count=2 conv=notrunc 2>/dev/null",
             damaged);
    assert_int_equal(system(cmd), 0);
    const char *with_damaged[] = {good, damaged};
    assert_int_equal(db_merge(dst, with_damaged, 2, NULL, &st, &e), MMT_ERR_DB_CORRUPT);
    assert_int_equal(db_check(damaged, NULL, &rep, &e), MMT_ERR_DB_CORRUPT);
    assert_unchanged(dst, before, len); /* nothing of the good sources came in */
    /* version 1, as the first release wrote it: read as it is (launch shapes 0) */
    snprintf(v1, sizeof v1, "%s/v1.db", f->dir);
    snprintf(cmd, sizeof cmd, SQLITE_CLI " '%s' < '%s/data/schema_v1.sql'", v1, MMT_TEST_DIR);
    assert_int_equal(system(cmd), 0);
    const char *old[] = {v1};
    mmt_status rc = db_merge(dst, old, 1, NULL, &st, &e);
    if (rc) fail_msg("db_merge v1: %s", e.msg);
    assert_true(st.rows_added > 0);
    assert_int_equal(cli(v1, "PRAGMA user_version", cmd, sizeof cmd), 0);
    assert_string_equal(cmd, "1"); /* the source is not modified */
  } else {
    assert_unchanged(dst, before, len);
  }
  free(before);
}

/* A source whose rows are garbled -- values a damaged page or a hand-made file can hold, and
 * a table declared loosely (any type in any column) -- is refused naming the file, the row
 * and the column, with the destination untouched; db check refuses it the same way. */
static void test_merge_bad_rows(void **state) {
  fixture *f = *state;
  if (!have_cli()) skip();
  const db_result a[] = {result("GPU A", 64, 64, 64, DB_OK, 0.50, "x=1"),
                         result("GPU A", 32, 32, 32, DB_OK, 0.25, "x=1")};
  char dst[256], src[256];
  make_source(f, "dst.db", a, 1, 0, dst, sizeof dst);
  size_t len = 0;
  char *before = file_bytes(dst, &len);
  static const struct {
    const char *set, *why;
  } bad[] = {
      {"cc_major = -33", "'cc_major' = -33 is outside 1 .. 99"},
      {"device_name = x'4e5600ff'", "'device_name' is not a string"}, /* a BLOB */
      {"device_name = 'GPU' || char(7)", "'device_name' holds a control character"},
      {"device_name = ''", "'device_name' is empty"},
      {"params = 'x=1n' || char(7) || 'plit=4'", "'params' holds a control character"},
      {"params = 'x=1,,y=2'", "'params' is not of the form name=integer"},
      {"template_hash = 'XYZ'", "'template_hash' is not lower-case hexadecimal"},
      {"kernel_hash = 'ABCDEF0123456789'", "'kernel_hash' is not lower-case hexadecimal"},
      {"kernel_hash = '0123456789abcdef0'", "'kernel_hash' is longer than 16 bytes"},
      {"dtype = 'f3 2'", "'dtype' holds a character other than"},
      {"layout = 'nx'", "'layout' is not one of nn, nt, tn, tt"},
      {"k = 4611686018427387904", "'k' = 4611686018427387904 is outside 0 .. 2147483647"},
      {"ms_median = 1e999", "'ms_median' = inf is not a finite number >= 0"},
      {"ms_min = -1", "'ms_min' = -1 is not a finite number >= 0"},
      {"threads = 100000", "'threads' = 100000 is outside 0 .. 4096"},
      {"created_at = -5", "'created_at' = -5 is outside"},
      {"op = 'out=F32'", "'op' holds a character other than a-z, 0-9 and _=,+."},
      {"op = 'act=silu;gated'", "'op' holds a character other than a-z, 0-9 and _=,+."},
      {"op = 'act=silu' || char(10)", "'op' holds a control character"},
      {"op = printf('%.*c', 128, 'a')", "'op' is longer than 127 bytes"},
      {"op = x'6f70'", "'op' is not a string"}, /* a BLOB */
      {"batch = 0", "'batch' = 0 is outside 1 .. 2147483647"},
      {"batch = -2", "'batch' = -2 is outside 1 .. 2147483647"},
      {"batch = 1.5", "'batch' is not an integer"},
  };
  ut_err e;
  db_check_report rep;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char name[32], sql[256];
    snprintf(name, sizeof name, "bad%zu.db", i);
    make_source(f, name, a, 2, 0, src, sizeof src);
    snprintf(sql, sizeof sql, "UPDATE results SET %s WHERE id = 2", bad[i].set);
    assert_int_equal(cli(src, sql, NULL, 0), 0);
    const char *srcs[] = {src};
    assert_int_equal(db_merge(dst, srcs, 1, NULL, NULL, &e), MMT_ERR_DB_CORRUPT);
    if (!strstr(e.msg, bad[i].why) || !strstr(e.msg, "results row 2") || !strstr(e.msg, name))
      fail_msg("case %zu (%s): '%s'", i, bad[i].set, e.msg);
    assert_int_equal(db_check(src, NULL, &rep, &e), MMT_ERR_DB_CORRUPT);
    assert_non_null(strstr(e.msg, bad[i].why));
  }
  /* a table declared without types takes 'abc' in m */
  snprintf(src, sizeof src, "%s/loose.db", f->dir);
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           SQLITE_CLI " '%s' \"CREATE TABLE meta(key, value); INSERT INTO meta VALUES "
           "('application', 'mmtune'); CREATE TABLE results(id INTEGER PRIMARY KEY, device_name, "
           "device_uuid, cc_major, cc_minor, sm_count, driver_version, nvrtc_version, "
           "template_name, template_hash, params, dtype, layout, m, n, k, status, error, ms_min, "
           "ms_median, ms_max, runs, tflops, rel_err, max_err, regs, shared_bytes, local_bytes, "
           "created_at, tile_m, tile_n, slices, threads, per_sm); INSERT INTO results VALUES (1, "
           "'GPU A', '', 9, 0, 132, 13000, '13.0', 't', 'ab', 'x=1', 'f32', 'nn', 'abc', 8, 8, "
           "'ok', '', 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0); PRAGMA user_version = 4;\"",
           src);
  assert_int_equal(system(cmd), 0);
  const char *loose[] = {src};
  /* without the view `best` it is not whole */
  assert_int_equal(db_merge(dst, loose, 1, NULL, NULL, &e), MMT_ERR_DB_CORRUPT);
  assert_non_null(strstr(e.msg, "is damaged (no such table: main.best)"));
  assert_int_equal(cli(src, "CREATE VIEW best AS SELECT * FROM results; CREATE TABLE searches("
                            "device_name, dtype, layout, m, n, k, candidates, seconds, updated_at)",
                       NULL, 0),
                   0);
  mmt_status rc = db_merge(dst, loose, 1, NULL, NULL, &e);
  if (rc != MMT_ERR_DB_CORRUPT || !strstr(e.msg, "results row 1: 'm' is not an integer"))
    fail_msg("loose: %s: %s", mmt_status_name(rc), e.msg);
  assert_unchanged(dst, before, len);
  free(before);
}

/* Bytes of a real database overwritten at random, a few hundred ways: each copy is refused
 * with the destination unchanged, or merged into a destination that then passes db check. */
static void test_merge_damaged_copies(void **state) {
  fixture *f = *state;
  char good[256], dst[256], copy[256];
  db_result rows[40];
  for (int i = 0; i < 40; i++)
    rows[i] = result(i % 3 ? "GPU A" : "GPU B", 16 + i, 32, 64, i % 5 ? DB_OK : DB_FAULT,
                     0.1 + i * 0.01, i % 2 ? "x=1" : "x=2");
  make_source(f, "good.db", rows, 40, 3.0, good, sizeof good);
  snprintf(dst, sizeof dst, "%s/dst.db", f->dir);
  make_source(f, "dst.db", rows, 1, 0, dst, sizeof dst);
  size_t glen = 0, dlen = 0;
  /* the source as one file: its -wal checkpointed into it */
  db_check_report rep;
  ut_err e;
  assert_int_equal(db_check(good, NULL, &rep, &e), MMT_OK);
  char *src = file_bytes(good, &glen), *before = file_bytes(dst, &dlen);
  snprintf(copy, sizeof copy, "%s/copy.db", f->dir);
  uint64_t seed = 0x2545f4914f6cdd1dULL;
  int refused = 0, merged = 0;
  for (int t = 0; t < 300; t++) {
    char *b = malloc(glen);
    assert_non_null(b);
    memcpy(b, src, glen);
    int flips = 1 + t % 12;
    for (int i = 0; i < flips; i++) {
      seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
      b[(seed >> 16) % glen] = (char)(seed >> 8);
    }
    unlink(copy);
    write_bytes(copy, b, glen);
    free(b);
    const char *srcs[] = {copy};
    mmt_status rc = db_merge(dst, srcs, 1, NULL, NULL, &e);
    if (rc) {
      refused++;
      assert_unchanged(dst, before, dlen);
      continue;
    }
    merged++;
    if (db_check(dst, NULL, &rep, &e) != MMT_OK) fail_msg("copy %d merged, then: %s", t, e.msg);
    free(before);
    before = file_bytes(dst, &dlen);
  }
  print_message("damaged copies: %d refused, %d merged\n", refused, merged);
  assert_true(refused > 0);
  free(src);
  free(before);
}

/* The export of a file as text (owned). */
static char *export_text(const char *path, const char *device) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_non_null(mem);
  db_handle *db = open_ok(path, true);
  ut_err e;
  int64_t rows = -1;
  mmt_status rc = db_export_json(db, device, mem, &rows, &e);
  if (rc) fail_msg("db_export_json: %s", e.msg);
  db_close(db);
  fclose(mem);
  return text;
}

static mmt_status import_text(const char *dst, const char *text, db_merge_stats *st, ut_err *e) {
  return db_import_json(dst, "test.json", text, strlen(text), NULL, st, e);
}

/* Export then import: the same rows (every column, a NaN as null, doubles to the bit, text
 * with quotes, newlines and non-ASCII), the same search times; importing again adds no row
 * and no time, so exporting the import gives the same text. */
static void test_export_import(void **state) {
  fixture *f = *state;
  db_result rows[] = {
      result("GPU A", 64, 64, 64, DB_OK, 0.1 + 0.2, "x=1"),
      result("GPU A", 64, 64, 64, DB_VERIFY_FAILED, 0, "x=2"),
      result("GPU B \"quoted\" é 中", 128, 128, 128, DB_OK, 1.0 / 3.0, "x=1"),
  };
  snprintf(rows[1].error, sizeof rows[1].error, "line one\nline \"two\"\ttab \\ end");
  rows[1].rel_err = NAN;
  rows[0].launch = (db_launch){.tile_m = 64, .tile_n = 32, .slices = 4, .threads = 128, .per_sm = 2};
  char src[256], dst[256];
  make_source(f, "src.db", rows, 3, 2.5, src, sizeof src);
  char *text = export_text(src, NULL);
  assert_non_null(strstr(text, "\"format\": \"mmtune-results\""));
  assert_non_null(strstr(text, "\"rel_err\": null"));
  assert_non_null(strstr(text, "\"origin\": \""));
  snprintf(dst, sizeof dst, "%s/imported.db", f->dir);
  db_merge_stats st;
  ut_err e;
  mmt_status rc = import_text(dst, text, &st, &e);
  if (rc) fail_msg("db_import_json: %s", e.msg);
  assert_int_equal(st.rows_added, 3);
  assert_int_equal(st.searches, 1);
  assert_int_equal(import_text(dst, text, &st, &e), MMT_OK);
  assert_int_equal(st.rows_added, 0);
  assert_int_equal(st.duplicates, 3);
  assert_int_equal(st.searches, 0);
  assert_true(search_time(dst, "GPU A", 64) == 2.5);
  db_handle *db = open_ok(dst, true);
  collect c = {0};
  db_problem p = problem(64, 64, 64);
  assert_int_equal(db_each_ok(db, "GPU A", &p, collect_fn, &c, &e), MMT_OK);
  assert_int_equal(c.count, 1);
  assert_true(c.rows[0].ms_median == 0.1 + 0.2); /* to the bit */
  assert_int_equal(c.rows[0].launch.per_sm, 2);
  assert_int_equal(c.rows[0].launch.slices, 4);
  db_close(db);
  char *back = export_text(dst, NULL);
  assert_string_equal(text, back);
  free(back);
  /* one GPU model only */
  char *one = export_text(src, "GPU A");
  assert_null(strstr(one, "GPU B"));
  assert_non_null(strstr(one, "\"params\": \"x=2\""));
  free(one);
  free(text);
}

/* Makes an export's "version" v (one digit), as an older mmtune wrote it. */
static void set_version(char *text, int v) {
  char want[32];
  snprintf(want, sizeof want, "\"version\": %d", DB_EXPORT_VERSION);
  char *at = strstr(text, want);
  assert_non_null(at);
  at[11] = (char)('0' + v);
}

/* Removes every `, "name": VALUE` (a string without escapes, or a number) from an export's
 * text, as a version without that member wrote it. */
static void drop_member(char *text, const char *name) {
  char key[64];
  snprintf(key, sizeof key, ", \"%s\": ", name);
  int n = 0;
  for (char *at; (at = strstr(text, key)); n++) {
    char *end = at + strlen(key);
    if (*end == '"')
      end = strchr(end + 1, '"') + 1;
    else
      end += strspn(end, "-0123456789.e");
    memmove(at, end, strlen(end) + 1);
  }
  assert_true(n > 0);
}

/* A version-1 export (no origins) imported twice: its search time is counted once. */
static void test_import_version_1(void **state) {
  fixture *f = *state;
  const db_result rows[] = {result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=1")};
  char src[256], dst[256];
  make_source(f, "src.db", rows, 1, 4.0, src, sizeof src);
  char *text = export_text(src, NULL);
  /* as version 1 wrote it: the version, no kernel hash, op or batch in a row and no origin,
   * op or batch in a search time */
  set_version(text, 1);
  drop_member(text, "kernel_hash");
  drop_member(text, "origin");
  drop_member(text, "op");
  drop_member(text, "batch");
  snprintf(dst, sizeof dst, "%s/dst.db", f->dir);
  ut_err e;
  mmt_status rc = import_text(dst, text, NULL, &e);
  if (rc) fail_msg("version 1: %s", e.msg);
  assert_int_equal(import_text(dst, text, NULL, &e), MMT_OK);
  assert_true(search_time(dst, "GPU A", 64) == 4.0);
  free(text);
}

/* A file's rows of a fused and a batched problem, each equal to a plain row but for its op
 * or batch, and their search times: through export and import, and through merge, every one
 * arrives as itself (none is a duplicate of another), twice changes nothing, and each query
 * finds its own. */
static void test_op_batch_travel(void **state) {
  fixture *f = *state;
  const db_result rows[] = {
      result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=1"),
      with_op(result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=1"), OP_SILU, 1),
      with_op(result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=1"), "", 8),
  };
  char src[256], imported[256], merged[256];
  make_source(f, "src.db", rows, 3, 2.0, src, sizeof src);
  db_handle *db = open_ok(src, false);
  ut_err e;
  const db_problem fused = op_problem(64, 64, 64, OP_SILU, 1);
  const db_problem batched = op_problem(64, 64, 64, "", 8);
  assert_int_equal(db_search_add(db, "GPU A", &fused, "c", 5.0, false, &e), MMT_OK);
  db_close(db);
  char *text = export_text(src, NULL);
  char want[64];
  snprintf(want, sizeof want, "\"version\": %d", DB_EXPORT_VERSION);
  assert_non_null(strstr(text, want));
  assert_non_null(strstr(text, "\"op\": \"" OP_SILU "\", \"batch\": 1"));
  assert_non_null(strstr(text, "\"op\": \"\", \"batch\": 8"));
  snprintf(imported, sizeof imported, "%s/imported.db", f->dir);
  snprintf(merged, sizeof merged, "%s/merged.db", f->dir);
  db_merge_stats st;
  mmt_status rc = import_text(imported, text, &st, &e);
  if (rc) fail_msg("db_import_json: %s", e.msg);
  assert_int_equal(st.rows_added, 3);
  assert_int_equal(st.searches, 2);
  assert_int_equal(import_text(imported, text, &st, &e), MMT_OK);
  assert_int_equal(st.rows_added, 0);
  assert_int_equal(st.duplicates, 3);
  char *back = export_text(imported, NULL);
  assert_string_equal(text, back);
  free(back);
  const char *srcs[] = {src};
  assert_int_equal(db_merge(merged, srcs, 1, NULL, &st, &e), MMT_OK);
  assert_int_equal(st.rows_added, 3);
  assert_int_equal(st.duplicates, 0);
  assert_int_equal(st.searches, 2);
  assert_int_equal(db_merge(merged, srcs, 1, NULL, &st, &e), MMT_OK);
  assert_int_equal(st.rows_added, 0);
  assert_int_equal(st.duplicates, 3);
  assert_int_equal(st.searches, 0);
  char packed[256];
  snprintf(packed, sizeof packed, "%s/packed.db", f->dir);
  assert_int_equal(db_pack(src, packed, &e), MMT_OK);
  const char *dsts[] = {imported, merged, packed};
  for (int i = 0; i < 3; i++) {
    db_check_report rep;
    assert_int_equal(db_check(dsts[i], NULL, &rep, &e), MMT_OK);
    assert_int_equal(rep.rows, 3);
    db = open_ok(dsts[i], false);
    db_result got;
    assert_int_equal(db_best(db, "GPU A", &fused, &got, &e), MMT_OK);
    assert_string_equal(got.problem.op, OP_SILU);
    assert_int_equal(got.problem.batch, 1);
    assert_int_equal(db_best(db, "GPU A", &batched, &got, &e), MMT_OK);
    assert_string_equal(got.problem.op, "");
    assert_int_equal(got.problem.batch, 8);
    collect c = {0};
    db_problem p = problem(64, 64, 64);
    assert_int_equal(db_each_ok(db, "GPU A", &p, collect_fn, &c, &e), MMT_OK);
    assert_int_equal(c.count, 1);
    assert_int_equal(c.rows[0].problem.batch, 1);
    double sec = -1;
    assert_int_equal(db_search_seconds(db, "GPU A", &fused, "c", &sec, &e), MMT_OK);
    assert_true(sec == 5.0);
    assert_int_equal(db_search_seconds(db, "GPU A", &p, "c", &sec, &e), MMT_OK);
    assert_true(sec == 2.0);
    db_close(db);
  }
  /* an export from before op and batch (version 3): its rows and times are plain GEMMs', the
   * same as this version's plain ones */
  char plain_src[256], old[256];
  make_source(f, "plain.db", rows, 1, 2.0, plain_src, sizeof plain_src);
  char *now = export_text(plain_src, NULL), *v3 = export_text(plain_src, NULL);
  set_version(v3, 3);
  drop_member(v3, "op");
  drop_member(v3, "batch");
  snprintf(old, sizeof old, "%s/old.db", f->dir);
  rc = import_text(old, v3, &st, &e);
  if (rc) fail_msg("version 3: %s", e.msg);
  assert_int_equal(st.rows_added, 1);
  assert_int_equal(st.searches, 1);
  assert_int_equal(import_text(old, now, &st, &e), MMT_OK);
  assert_int_equal(st.rows_added, 0);
  assert_int_equal(st.duplicates, 1);
  assert_int_equal(st.searches, 0);
  db = open_ok(old, false);
  double sec = -1;
  db_problem p = problem(64, 64, 64);
  db_result got;
  assert_int_equal(db_best(db, "GPU A", &p, &got, &e), MMT_OK);
  assert_string_equal(got.problem.op, "");
  assert_int_equal(got.problem.batch, 1);
  assert_int_equal(db_search_seconds(db, "GPU A", &p, "c", &sec, &e), MMT_OK);
  assert_true(sec == 2.0);
  db_close(db);
  free(now);
  if (have_cli()) { /* a search time's op and batch are checked as a row's */
    db_check_report rep;
    assert_int_equal(cli(src, "UPDATE searches SET batch = 0 WHERE op <> ''", NULL, 0), 0);
    assert_int_equal(db_check(src, NULL, &rep, &e), MMT_ERR_DB_CORRUPT);
    if (!strstr(e.msg, "searches row 2: 'batch' = 0 is outside")) fail_msg("%s", e.msg);
    assert_int_equal(
        cli(src, "UPDATE searches SET batch = 1, op = 'act=SiLU' WHERE op <> ''", NULL, 0), 0);
    assert_int_equal(db_check(src, NULL, &rep, &e), MMT_ERR_DB_CORRUPT);
    if (!strstr(e.msg, "searches row 2: 'op' holds a character other than")) fail_msg("%s", e.msg);
  }
  free(v3);
  free(text);
}

/* Texts that are not an export are refused with the reason before the destination is
 * opened: it is left byte for byte as it was (an older schema is not upgraded), and a
 * missing one is not created, even when the bad row comes after good ones. */
static void test_import_refusals(void **state) {
  fixture *f = *state;
  const db_result rows[] = {result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=1"),
                            result("GPU A", 32, 32, 32, DB_OK, 0.2, "x=1")};
  char src[256], dst[256], fresh[256];
  make_source(f, "src.db", rows, 2, 0, src, sizeof src);
  char *good = export_text(src, NULL);
  snprintf(dst, sizeof dst, "%s/dst.db", f->dir);
  snprintf(fresh, sizeof fresh, "%s/fresh.db", f->dir);
  if (have_cli()) { /* a version-1 destination: an accepted import would upgrade it */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, SQLITE_CLI " '%s' < '%s/data/schema_v1.sql'", dst, MMT_TEST_DIR);
    assert_int_equal(system(cmd), 0);
  } else {
    db_close(open_ok(dst, false));
  }
  size_t len = 0;
  char *before = file_bytes(dst, &len);
  /* the second row's values made bad, one way a case: the first row must not stay either */
  static const struct {
    const char *from, *to, *why;
  } row_cases[] = {
      {"\"status\": \"ok\"", "\"status\": \"ko\"",
       "results[1]: 'status' is not a status mmtune knows"},
      {"\"k\": 32,", "\"k\": 99999999999999999999999,", "results[1]: 'k' is out of range"},
      {"\"k\": 32,", "\"k\": 4611686018427387904,", "'k' = 4611686018427387904 is outside"},
      {"\"k\": 32,", "\"k\": -32,", "'k' = -32 is outside 0 .. 2147483647"},
      {"\"k\": 32,", "\"k\": 32.5,", "'k' is not an integer"},
      {"\"device_name\": \"GPU A\"", "\"device_name\": \"GPU\\u0000A\"",
       "'device_name' holds a NUL"},
      {"\"device_name\": \"GPU A\"", "\"device_name\": \"GPU\\u001b[31mA\"",
       "'device_name' holds a control character"},
      {"\"device_name\": \"GPU A\"", "\"device_name\": 7", "'device_name' is not a string"},
      {"\"params\": \"x=1\"", "\"params\": \"x=1;rm\"", "'params' is not of the form"},
      {"\"ms_median\": 0.2", "\"ms_median\": 1e999", "'ms_median' = inf is not a finite"},
      {"\"dtype\": \"f32\"", "\"dtype\": \"f32\\\"\"", "'dtype' holds a character other than"},
      {"\"op\": \"\"", "\"op\": \"Out=f32\"", "results[1]: 'op' holds a character other than"},
      {"\"batch\": 1,", "\"batch\": 0,", "results[1]: 'batch' = 0 is outside 1 .. 2147483647"},
  };
  ut_err e;
  for (size_t i = 0; i < sizeof row_cases / sizeof row_cases[0]; i++) {
    size_t n = strlen(good) + 64;
    char *text = malloc(n);
    assert_non_null(text);
    char *first = strstr(good, row_cases[i].from);
    assert_non_null(first);
    char *second = strstr(strstr(good, "\n    {\"device_name\"") + 1, "\n    {\"device_name\"");
    assert_non_null(second);
    char *at = strstr(second, row_cases[i].from);
    assert_non_null(at);
    snprintf(text, n, "%.*s%s%s", (int)(at - good), good, row_cases[i].to,
             at + strlen(row_cases[i].from));
    assert_int_equal(import_text(dst, text, NULL, &e), MMT_ERR_INVALID_ARG);
    if (!strstr(e.msg, row_cases[i].why)) fail_msg("row case %zu: '%s'", i, e.msg);
    assert_int_equal(import_text(fresh, text, NULL, &e), MMT_ERR_INVALID_ARG);
    free(text);
  }
  static const struct {
    const char *text, *why;
  } bad[] = {
      {"", "not JSON: unexpected end at byte 0"},
      {"{\"format\": \"mmtune-results\", \"version\": 2, \"results\": [}", "not JSON"},
      {"{\"a\": 1} x", "text after the value"},
      {"{\"s\": \"\\ud800\"}", "lone surrogate"},
      {"[1, 2]", "expected an object"},
      {"{\"format\": \"other\", \"version\": 2, \"results\": []}", "not an mmtune export"},
      {"{\"format\": \"mmtune-results\", \"results\": []}", "without a version"},
      {"{\"format\": \"mmtune-results\", \"version\": 9, \"results\": []}", "version 9 is newer"},
      {"{\"format\": \"mmtune-results\", \"version\": 2}", "without a \"results\" list"},
      {"{\"format\": \"mmtune-results\", \"version\": 2, \"results\": [], \"x\": 1}",
       "unknown member \"x\""},
      {"{\"format\": \"mmtune-results\", \"version\": 2, \"results\": [3]}", "results[0] is not an object"},
      {"{\"format\": \"mmtune-results\", \"version\": 2, \"results\": [{\"colour\": 1}]}",
       "results[0]: unknown column 'colour'"},
      {"{\"format\": \"mmtune-results\", \"version\": 2, \"results\": [{\"m\": 1}]}",
       "results[0]: 'device_name' is missing"},
      {"{\"format\": \"mmtune-results\", \"version\": 2, \"results\": [], \"searches\": [{}]}",
       "searches[0]: 'device_name' is missing"},
      {"{\"results\": [{}], \"format\": \"mmtune-results\", \"version\": 2}", "does not start with"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(import_text(dst, bad[i].text, NULL, &e), MMT_ERR_INVALID_ARG);
    if (!strstr(e.msg, bad[i].why)) fail_msg("case %zu: '%s' not in '%s'", i, bad[i].why, e.msg);
  }
  /* a NUL byte inside the text, and a text past the size limit (never read) */
  const char nul[] = "{\"format\": \"mmtune-results\"\0, \"version\": 2}";
  assert_int_equal(db_import_json(dst, "nul", nul, sizeof nul - 1, NULL, NULL, &e),
                   MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "a NUL byte at byte 27"));
  assert_int_equal(db_import_json(dst, "big", "", DB_IMPORT_MAX_BYTES + 1, NULL, NULL, &e),
                   MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "larger than"));
  assert_unchanged(dst, before, len);
  assert_int_equal(access(fresh, F_OK), -1);
  /* \u escapes decode to UTF-8, a surrogate pair to one code point */
  const char *at = strstr(good, "GPU A");
  assert_non_null(at);
  size_t head = (size_t)(at - good), total = strlen(good) + 64;
  char *escaped = malloc(total);
  assert_non_null(escaped);
  snprintf(escaped, total, "%.*sGPU \\u00e9\\ud83d\\ude00%s", (int)head, good, at + 5);
  mmt_status rc = import_text(dst, escaped, NULL, &e);
  if (rc) fail_msg("escaped: %s", e.msg);
  char *back = export_text(dst, NULL);
  assert_non_null(strstr(back, "GPU \xc3\xa9\xf0\x9f\x98\x80"));
  free(back);
  free(escaped);
  free(before);
  free(good);
}

/* What only the caller knows: an element type it has, params its template takes. */
static bool only_f32(const char *dtype, void *user) {
  (void)user;
  return !strcmp(dtype, "f32");
}
static bool no_x2(const char *template_name, const char *template_hash, const char *params,
                  void *user, char *why, size_t whylen) {
  (void)template_name, (void)template_hash, (void)user;
  if (strcmp(params, "x=2") != 0) return true;
  snprintf(why, whylen, "'params' x=2 is not a config of the template");
  return false;
}

static void test_row_policy(void **state) {
  fixture *f = *state;
  db_result rows[] = {result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=1"),
                      result("GPU A", 64, 64, 64, DB_OK, 0.4, "x=2")};
  char src[256], dst[256];
  make_source(f, "src.db", rows, 2, 1.0, src, sizeof src);
  snprintf(dst, sizeof dst, "%s/dst.db", f->dir);
  const db_row_policy pol = {.dtype_known = only_f32, .params_ok = no_x2};
  const char *srcs[] = {src};
  ut_err e;
  assert_int_equal(db_merge(dst, srcs, 1, &pol, NULL, &e), MMT_ERR_DB_CORRUPT);
  assert_non_null(strstr(e.msg, "results row 2: 'params' x=2 is not a config"));
  db_check_report rep;
  assert_int_equal(db_check(src, &pol, &rep, &e), MMT_ERR_DB_CORRUPT);
  char *text = export_text(src, NULL);
  char *dt = strstr(text, "\"dtype\": \"f32\"");
  assert_non_null(dt);
  memcpy(dt + 10, "f64", 3);
  const db_row_policy types_only = {.dtype_known = only_f32};
  assert_int_equal(db_import_json(dst, "t", text, strlen(text), &types_only, NULL, &e),
                   MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "results[0]: 'dtype' 'f64' is not an element type"));
  assert_int_equal(access(dst, F_OK), -1);
  free(text);
}

/* A database in a folder its reader cannot write (a read-only image, a system folder): read
 * as it is when its -wal holds nothing, with a clear error when it does; a packed copy reads
 * there too.  Run as an unprivileged user: root may write anywhere. */
static void test_read_only_place(void **state) {
  fixture *f = *state;
  const db_result rows[] = {result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=1")};
  char src[256], dir[256], path[300], packed[300], stale[300], cmd[2048];
  make_source(f, "src.db", rows, 1, 1.0, src, sizeof src);
  snprintf(dir, sizeof dir, "%s/ro", f->dir);
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(path, sizeof path, "%s/tuned.db", dir);
  snprintf(packed, sizeof packed, "%s/packed.db", dir);
  snprintf(stale, sizeof stale, "%s/stale.db", dir);
  ut_err e;
  const char *srcs[] = {src};
  assert_int_equal(db_merge(path, srcs, 1, NULL, NULL, &e), MMT_OK); /* WAL, -wal emptied */
  assert_int_equal(db_pack(src, packed, &e), MMT_OK);
  assert_int_equal(db_pack(src, src, &e), MMT_ERR_INVALID_ARG);
  /* a writer that stopped with rows in its -wal: the file and -wal, no -shm */
  db_handle *w = open_ok(src, false);
  insert(w, result("GPU A", 8, 8, 8, DB_OK, 0.5, "x=1"), NULL);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s' && cp '%s-wal' '%s-wal'", src, stale, src, stale);
  assert_int_equal(system(cmd), 0);
  db_close(w);
  assert_int_equal(chmod(f->dir, 0755), 0);
  assert_int_equal(chmod(dir, 0555), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(90);
    db_handle *db = NULL;
    int64_t n = 0;
    if (db_open(path, true, &db, &e) != MMT_OK || db_count(db, NULL, &n, &e) || n != 1) _exit(91);
    db_close(db);
    db_check_report rep;
    if (db_check(path, NULL, &rep, &e) != MMT_OK || rep.rows != 1) _exit(92);
    if (db_open(packed, true, &db, &e) != MMT_OK || db_count(db, NULL, &n, &e) || n != 1) _exit(93);
    db_close(db);
    if (db_open(stale, true, &db, &e) != MMT_ERR_IO || !strstr(e.msg, "db pack")) _exit(94);
    _exit(access(path, W_OK) == 0 ? 95 : 0); /* the test meant a folder it cannot write */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_int_equal(chmod(dir, 0755), 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  /* a packed file is one file, in rollback-journal mode */
  char side[320];
  snprintf(side, sizeof side, "%s-wal", packed);
  assert_int_equal(access(side, F_OK), -1);
  if (have_cli()) {
    char mode[32];
    assert_int_equal(cli(packed, "PRAGMA journal_mode", mode, sizeof mode), 0);
    assert_string_equal(mode, "delete");
  }
}

/* A file of an older schema (1, 6) packed: the copy is of the current schema with every row
 * and search time, the source left as it was. */
static void test_pack_older(void **state) {
  fixture *f = *state;
  if (!have_cli()) skip();
  static const struct {
    const char *sql;
    int version, rows, searches;
  } olds[] = {{"schema_v1.sql", 1, 1, 0}, {"schema_v6.sql", 6, 2, 1}};
  for (size_t i = 0; i < sizeof olds / sizeof olds[0]; i++) {
    char old[256], packed[256], cmd[1024], out[256], want[64];
    snprintf(old, sizeof old, "%s/old%zu.db", f->dir, i);
    snprintf(packed, sizeof packed, "%s/packed%zu.db", f->dir, i);
    snprintf(cmd, sizeof cmd, SQLITE_CLI " '%s' < '%s/data/%s'", old, MMT_TEST_DIR, olds[i].sql);
    assert_int_equal(system(cmd), 0);
    ut_err e;
    mmt_status rc = db_pack(old, packed, &e);
    if (rc) fail_msg("db_pack %s: %s", olds[i].sql, e.msg);
    assert_int_equal(cli(packed,
                         "PRAGMA user_version; SELECT count(*) FROM results WHERE op = '' AND "
                         "batch = 1; SELECT count(*) FROM searches",
                         out, sizeof out),
                     0);
    snprintf(want, sizeof want, "%d\n%d\n%d", DB_SCHEMA_VERSION, olds[i].rows, olds[i].searches);
    assert_string_equal(out, want);
    assert_int_equal(cli(old, "PRAGMA user_version", out, sizeof out), 0);
    assert_int_equal(atoi(out), olds[i].version);
    db_check_report rep;
    assert_int_equal(db_check(packed, NULL, &rep, &e), MMT_OK);
    assert_int_equal(rep.rows, olds[i].rows);
  }
}

/* A schema-4 file's search times, upgraded to schema 5: the same sums, now the file's own
 * origin's. */
static void test_upgrade_v4_searches(void **state) {
  fixture *f = *state;
  if (!have_cli()) skip();
  const db_result rows[] = {result("GPU A", 64, 64, 64, DB_OK, 0.5, "x=1")};
  char src[256];
  make_source(f, "old.db", rows, 1, 7.5, src, sizeof src);
  /* back to schema 4 as it was: results without op and batch (schema 7) and their indexes
   * and view as before, searches without origins, meta without one */
  assert_int_equal(cli(src,
                       "DROP VIEW best; DROP INDEX results_best; DROP INDEX results_resume; "
                       "ALTER TABLE results DROP COLUMN op; ALTER TABLE results DROP COLUMN "
                       "batch; CREATE INDEX results_best ON results(device_name, dtype, layout, "
                       "m, n, k, status, ms_median); CREATE INDEX results_resume ON "
                       "results(device_name, template_name, template_hash, params, "
                       "nvrtc_version, dtype, layout, m, n, k); CREATE VIEW best AS SELECT r.* "
                       "FROM results AS r WHERE r.status = 'ok' AND r.id = (SELECT b.id FROM "
                       "results AS b WHERE b.device_name = r.device_name AND b.dtype = r.dtype "
                       "AND b.layout = r.layout AND b.m = r.m AND b.n = r.n AND b.k = r.k AND "
                       "b.status = 'ok' ORDER BY b.ms_median, b.id LIMIT 1); "
                       "CREATE TABLE s4 AS SELECT device_name, dtype, layout, m, n, k, "
                       "candidates, seconds, updated_at FROM searches; DROP TABLE searches; "
                       "ALTER TABLE s4 RENAME TO searches; DELETE FROM meta WHERE key = "
                       "'origin'; ALTER TABLE results DROP COLUMN kernel_hash; "
                       "PRAGMA user_version = 4",
                       NULL, 0),
                   0);
  ut_err e;
  db_check_report rep;
  assert_int_equal(db_check(src, NULL, &rep, &e), MMT_OK);
  assert_int_equal(rep.schema_version, 4);
  char dst[256];
  snprintf(dst, sizeof dst, "%s/dst.db", f->dir);
  const char *srcs[] = {src};
  assert_int_equal(db_merge(dst, srcs, 1, NULL, NULL, &e), MMT_OK);
  assert_int_equal(db_merge(dst, srcs, 1, NULL, NULL, &e), MMT_OK); /* named by content: once */
  assert_true(search_time(dst, "GPU A", 64) == 7.5);
  assert_true(search_time(src, "GPU A", 64) == 7.5); /* opened for writing: upgraded */
  char out[64];
  assert_int_equal(cli(src, "PRAGMA user_version", out, sizeof out), 0);
  assert_int_equal(atoi(out), DB_SCHEMA_VERSION);
  assert_int_equal(cli(src, "SELECT count(*) FROM searches WHERE origin = (SELECT value FROM "
                            "meta WHERE key = 'origin')", out, sizeof out),
                   0);
  assert_string_equal(out, "1");
}

/* A schema-6 file (tests/data/schema_v6.sql, as the release before op and batch wrote it):
 * read as it is when opened read-only, every row and search time a plain GEMM's (op "",
 * batch 1), exported and merged as such; opened for writing, upgraded in place to 7 with its
 * rows and search times kept, then holding rows of other ops and batches apart. */
static void test_upgrade_v6(void **state) {
  fixture *f = *state;
  if (!have_cli()) skip();
  char v6[256], cmd[1024], out[256];
  snprintf(v6, sizeof v6, "%s/v6.db", f->dir);
  snprintf(cmd, sizeof cmd, SQLITE_CLI " '%s' < '%s/data/schema_v6.sql'", v6, MMT_TEST_DIR);
  assert_int_equal(system(cmd), 0);
  const char *cand = "nvrtc 13.0; naive:0123456789abcdef"; /* the fixture's search */
  ut_err e;
  db_problem p = problem(64, 64, 64);
  db_handle *db = open_ok(v6, true);
  collect c = {0};
  assert_int_equal(db_each_ok(db, "GPU A", &p, collect_fn, &c, &e), MMT_OK);
  assert_int_equal(c.count, 1);
  assert_string_equal(c.rows[0].params, "bx=16,by=16");
  assert_string_equal(c.rows[0].kernel_hash, "fedcba9876543210");
  assert_string_equal(c.rows[0].problem.op, "");
  assert_int_equal(c.rows[0].problem.batch, 1);
  db_result got;
  assert_int_equal(db_get(db, 2, &got, &e), MMT_OK);
  assert_int_equal(got.status, DB_LAUNCH_ERROR);
  assert_int_equal(got.problem.batch, 1);
  db_problem fused = op_problem(64, 64, 64, OP_SILU, 1);
  assert_int_equal(db_best(db, "GPU A", &fused, &got, &e), MMT_ERR_NOT_FOUND);
  model_rows mr = {0};
  assert_int_equal(db_each_model_row(db, "GPU A", model_row_fn, &mr, &e), MMT_OK);
  assert_int_equal(mr.count, 1);
  assert_int_equal(mr.first.problem.batch, 1);
  shapes sh = {0};
  assert_int_equal(db_each_shape(db, NULL, NULL, NULL, shape_fn, &sh, &e), MMT_OK);
  assert_int_equal(sh.count, 1);
  assert_int_equal(sh.shapes[0].batch, 1);
  collect best = {0};
  assert_int_equal(db_each_best(db, NULL, NULL, NULL, collect_fn, &best, &e), MMT_OK);
  assert_int_equal(best.count, 1);
  assert_int_equal(best.rows[0].problem.batch, 1);
  db_close(db);
  char *text = export_text(v6, NULL);
  assert_non_null(strstr(text, "\"k\": 64, \"op\": \"\", \"batch\": 1, \"status\": \"ok\""));
  assert_non_null(strstr(text, "\"k\": 64, \"op\": \"\", \"batch\": 1, \"candidates\""));
  free(text);
  db_check_report rep;
  assert_int_equal(db_check(v6, NULL, &rep, &e), MMT_OK);
  assert_int_equal(rep.schema_version, 6);
  assert_int_equal(rep.rows, 2);
  char dst[256];
  snprintf(dst, sizeof dst, "%s/dst.db", f->dir);
  const char *srcs[] = {v6};
  db_merge_stats st;
  assert_int_equal(db_merge(dst, srcs, 1, NULL, &st, &e), MMT_OK);
  assert_int_equal(st.rows_added, 2);
  assert_int_equal(st.searches, 1);
  assert_int_equal(cli(v6, "PRAGMA user_version", out, sizeof out), 0);
  assert_string_equal(out, "6"); /* readers change nothing */
  /* opened for writing: upgraded, rows and search time kept */
  db = open_ok(v6, false);
  assert_int_equal(cli(v6, "PRAGMA user_version", out, sizeof out), 0);
  assert_int_equal(atoi(out), DB_SCHEMA_VERSION);
  int64_t n = 0;
  assert_int_equal(db_count(db, NULL, &n, &e), MMT_OK);
  assert_int_equal(n, 2);
  double sec = -1;
  assert_int_equal(db_search_seconds(db, "GPU A", &p, cand, &sec, &e), MMT_OK);
  assert_true(sec == 2.5);
  assert_int_equal(db_search_seconds(db, "GPU A", &fused, cand, &sec, &e), MMT_OK);
  assert_true(sec == 0);
  assert_int_equal(db_best(db, "GPU A", &p, &got, &e), MMT_OK);
  assert_int_equal(got.id, 1);
  assert_string_equal(got.kernel_hash, "fedcba9876543210");
  insert(db, with_op(result("GPU A", 64, 64, 64, DB_OK, 0.01, "bx=16,by=16"), OP_SILU, 1), NULL);
  assert_int_equal(db_best(db, "GPU A", &p, &got, &e), MMT_OK);
  assert_int_equal(got.id, 1); /* the faster fused row is another problem's */
  assert_int_equal(db_best(db, "GPU A", &fused, &got, &e), MMT_OK);
  assert_string_equal(got.problem.op, OP_SILU);
  db_close(db);
  assert_int_equal(cli(v6, "SELECT count(*) FROM best", out, sizeof out), 0);
  assert_string_equal(out, "2");
  assert_int_equal(cli(v6,
                       "SELECT count(*) FROM sqlite_master WHERE sql LIKE '%k, op, batch%' AND "
                       "name IN ('results_best', 'results_resume', 'searches')",
                       out, sizeof out),
                   0);
  assert_string_equal(out, "3");
  assert_int_equal(cli(v6, "SELECT origin, seconds, op, batch FROM searches", out, sizeof out), 0);
  assert_string_equal(out, "00112233aabbccdd|2.5||1");
  assert_int_equal(db_check(v6, NULL, &rep, &e), MMT_OK);
  assert_int_equal(rep.schema_version, DB_SCHEMA_VERSION);
  assert_int_equal(rep.rows, 3);
}

/* Search time per (device name, problem, candidates): 0 when never searched, added up across
 * runs, set again with replace; other devices, problems and candidate sets are separate;
 * bad arguments and read-only handles are refused. */
static void test_search_seconds(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  ut_err e;
  db_problem p = problem(64, 64, 64), q = problem(64, 64, 65);
  double s = -1;
  assert_int_equal(db_search_seconds(db, "GPU A", &p, "nvrtc 13.0; t:1", &s, &e), MMT_OK);
  assert_true(s == 0);
  assert_int_equal(db_search_add(db, "GPU A", &p, "nvrtc 13.0; t:1", 10.5, false, &e), MMT_OK);
  assert_int_equal(db_search_add(db, "GPU A", &p, "nvrtc 13.0; t:1", 4.25, false, &e), MMT_OK);
  assert_int_equal(db_search_add(db, "GPU B", &p, "nvrtc 13.0; t:1", 1, false, &e), MMT_OK);
  assert_int_equal(db_search_add(db, "GPU A", &q, "nvrtc 13.0; t:1", 2, false, &e), MMT_OK);
  assert_int_equal(db_search_add(db, "GPU A", &p, "nvrtc 13.0; t:2", 3, false, &e), MMT_OK);
  assert_int_equal(db_search_seconds(db, "GPU A", &p, "nvrtc 13.0; t:1", &s, &e), MMT_OK);
  assert_true(s == 14.75);
  assert_int_equal(db_search_seconds(db, "GPU A", &p, "nvrtc 13.0; t:2", &s, &e), MMT_OK);
  assert_true(s == 3);
  assert_int_equal(db_search_add(db, "GPU A", &p, "nvrtc 13.0; t:1", 1.5, true, &e), MMT_OK);
  assert_int_equal(db_search_seconds(db, "GPU A", &p, "nvrtc 13.0; t:1", &s, &e), MMT_OK);
  assert_true(s == 1.5);
  assert_int_equal(db_search_seconds(db, "GPU A", &q, "nvrtc 13.0; t:1", &s, &e), MMT_OK);
  assert_true(s == 2);
  assert_int_equal(db_search_add(db, "GPU A", &p, "c", -1, false, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(db_search_add(db, "GPU A", &p, "c", NAN, false, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(db_search_add(db, "GPU A", &p, NULL, 1, false, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(db_search_seconds(db, "GPU A", &p, "c", NULL, &e), MMT_ERR_INVALID_ARG);
  db_close(db);
  db = open_ok(f->path, true);
  assert_int_equal(db_search_seconds(db, "GPU A", &p, "c", &s, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "read-only"));
  db_close(db);
}

static void test_truncation(void **state) {
  fixture *f = *state;
  db_handle *db = open_ok(f->path, false);
  db_result r = result("GPU A", 8, 8, 8, DB_OK, 0.5, "x");
  /* fields filled to the last byte, no NUL: taken whole, never read past */
  memset(r.params, 'p', sizeof r.params);
  memset(r.error, 'e', sizeof r.error);
  memset(r.template_hash, 'h', sizeof r.template_hash);
  memset(r.problem.dtype, 'd', sizeof r.problem.dtype);
  ut_err e;
  assert_int_equal(db_insert(db, &r, &e), MMT_OK);
  collect c = {0};
  assert_int_equal(db_each_best(db, "GPU A", NULL, NULL, collect_fn, &c, &e), MMT_OK);
  assert_int_equal(c.count, 1);
  db_result *got = &c.rows[0];
  assert_int_equal(strlen(got->params), sizeof got->params - 1);
  assert_int_equal(strlen(got->error), sizeof got->error - 1);
  assert_int_equal(strlen(got->template_hash), sizeof got->template_hash - 1);
  assert_int_equal(strlen(got->problem.dtype), sizeof got->problem.dtype - 1);
  db_close(db);
  if (!have_cli()) skip();
  /* longer text written by another program, and a cut inside a UTF-8 character:
   * 254 'a' + "é" (2 bytes) fills 256 bytes, so the cut at 255 falls inside "é" */
  assert_int_equal(cli(f->path,
                       "UPDATE results SET params = printf('%.*c', 254, 'a') || char(233) || 'zz',"
                       " error = printf('%.*c', 5000, 'x'), device_uuid = printf('%.*c', 300, 'u')",
                       NULL, 0),
                   0);
  db = open_ok(f->path, true);
  collect c2 = {0};
  assert_int_equal(db_each_best(db, "GPU A", NULL, NULL, collect_fn, &c2, &e), MMT_OK);
  assert_int_equal(c2.count, 1);
  assert_int_equal(strlen(c2.rows[0].params), 254);
  assert_int_equal(strlen(c2.rows[0].error), sizeof c2.rows[0].error - 1);
  assert_int_equal(strlen(c2.rows[0].device.uuid), sizeof c2.rows[0].device.uuid - 1);
  db_close(db);
}

/* Another process holds the write lock past the busy timeout: db_insert fails cleanly. */
static void test_busy(void **state) {
  fixture *f = *state;
  if (!have_cli()) skip();
  db_close(open_ok(f->path, false));
  char flag[256], cmd[1024];
  snprintf(flag, sizeof flag, "%s/locked", f->dir);
  snprintf(cmd, sizeof cmd,
           "printf 'BEGIN IMMEDIATE;\\nINSERT INTO meta VALUES (\\047lock\\047, \\0471\\047);\\n"
           ".shell touch %s\\n.shell sleep 6\\nROLLBACK;\\n.shell rm %s\\n' | " SQLITE_CLI
           " '%s' >/dev/null 2>&1 &",
           flag, flag, f->path);
  assert_int_equal(system(cmd), 0);
  for (int i = 0; i < 500 && access(flag, F_OK) != 0; i++) usleep(10000);
  assert_int_equal(access(flag, F_OK), 0);
  db_handle *db = open_ok(f->path, false);
  db_result r = result("GPU A", 8, 8, 8, DB_OK, 0.5, "x=1");
  ut_err e;
  assert_int_equal(db_insert(db, &r, &e), MMT_ERR_DB);
  assert_non_null(strstr(e.msg, "locked"));
  int64_t n = -1;
  assert_int_equal(db_count(db, NULL, &n, &e), MMT_OK); /* reads go on (WAL) */
  assert_int_equal(n, 0);
  db_close(db);
  /* let the holder finish before the folder is removed */
  for (int i = 0; i < 1000 && access(flag, F_OK) == 0; i++) usleep(10000);
}

/* A folder made read-only after the file exists: writes fail with a status (root: skipped). */
static void test_read_only_folder(void **state) {
  fixture *f = *state;
  if (geteuid() == 0) skip();
  db_close(open_ok(f->path, false));
  char dir[256], path[300];
  snprintf(dir, sizeof dir, "%s/ro", f->dir);
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(path, sizeof path, "%s/ro/x.db", f->dir);
  db_close(open_ok(path, false));
  assert_int_equal(chmod(path, 0444), 0);
  assert_int_equal(chmod(dir, 0555), 0);
  db_handle *db = NULL;
  ut_err e;
  mmt_status rc = db_open(path, false, &db, &e);
  if (rc == MMT_OK) {
    db_result r = result("GPU A", 8, 8, 8, DB_OK, 0.5, "x=1");
    rc = db_insert(db, &r, &e);
    db_close(db);
  }
  assert_int_not_equal(rc, MMT_OK);
  assert_true(strlen(e.msg) > 0);
  snprintf(path, sizeof path, "%s/ro/sub/y.db", f->dir);
  assert_int_equal(db_open(path, false, &db, &e), MMT_ERR_IO); /* folder cannot be created */
}

/* The recorded problems: none before the first record (no table, no error), then one row a
 * device and problem with its count, per device or all; the schema version stays; a
 * read-only handle reads them and refuses to add. */
typedef struct {
  int count, stop_after; /* 0: never */
  char devices[4][32];
  db_recorded rows[4];
} recorded_list;

static int recorded_fn(const char *device_name, const db_recorded *r, void *user) {
  recorded_list *l = user;
  if (l->count < 4) {
    snprintf(l->devices[l->count], sizeof l->devices[0], "%s", device_name);
    l->rows[l->count] = *r;
  }
  return ++l->count == l->stop_after;
}

static void test_recorded(void **state) {
  fixture *f = *state;
  ut_err e;
  db_handle *db = NULL;
  assert_int_equal(db_open(f->path, false, &db, &e), MMT_OK);
  recorded_list l = {0};
  assert_int_equal(db_each_recorded(db, NULL, recorded_fn, &l, &e), MMT_OK);
  assert_int_equal(l.count, 0);
  db_problem plain = {.dtype = "f16", .layout = "nt", .m = 16, .n = 4096, .k = 4096};
  db_problem op = plain;
  snprintf(op.op, sizeof op.op, "%s", "bias=col,act=gelu_tanh");
  op.batch = 8;
  assert_int_equal(db_record(db, "GPU A", &plain, &e), MMT_OK);
  assert_int_equal(db_record(db, "GPU A", &op, &e), MMT_OK);
  assert_int_equal(db_record(db, "GPU A", &plain, &e), MMT_OK);
  assert_int_equal(db_record(db, "GPU B", &plain, &e), MMT_OK);
  assert_int_equal(db_each_recorded(db, "GPU A", recorded_fn, &l, &e), MMT_OK);
  assert_int_equal(l.count, 2); /* plain ('' op) first, then the op */
  assert_string_equal(l.rows[0].problem.op, "");
  assert_int_equal(l.rows[0].calls, 2);
  assert_int_equal(l.rows[0].problem.batch, 1);
  assert_true(l.rows[0].first_at > 0 && l.rows[0].last_at >= l.rows[0].first_at);
  assert_string_equal(l.rows[1].problem.op, "bias=col,act=gelu_tanh");
  assert_int_equal(l.rows[1].problem.batch, 8);
  assert_int_equal(l.rows[1].calls, 1);
  assert_int_equal(l.rows[1].problem.m, 16);
  memset(&l, 0, sizeof l);
  assert_int_equal(db_each_recorded(db, NULL, recorded_fn, &l, &e), MMT_OK);
  assert_int_equal(l.count, 3);
  assert_string_equal(l.devices[2], "GPU B");
  memset(&l, 0, sizeof l);
  l.stop_after = 1; /* the callback stops the walk */
  assert_int_equal(db_each_recorded(db, NULL, recorded_fn, &l, &e), MMT_OK);
  assert_int_equal(l.count, 1);
  db_problem bad = plain;
  bad.m = -1;
  assert_int_equal(db_record(db, "GPU A", &bad, &e), MMT_ERR_INVALID_ARG);
  db_close(db);
  char out[64], expect[16];
  snprintf(expect, sizeof expect, "%d", DB_SCHEMA_VERSION);
  assert_int_equal(cli(f->path, "PRAGMA user_version", out, sizeof out), 0);
  assert_non_null(strstr(out, expect));
  assert_int_equal(db_open(f->path, true, &db, &e), MMT_OK);
  memset(&l, 0, sizeof l);
  assert_int_equal(db_each_recorded(db, "GPU B", recorded_fn, &l, &e), MMT_OK);
  assert_int_equal(l.count, 1);
  assert_int_equal(db_record(db, "GPU A", &plain, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "read-only"));
  db_close(db);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_names),
      cmocka_unit_test_setup_teardown(test_create_and_schema, setup, teardown),
      cmocka_unit_test_setup_teardown(test_insert_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_best, setup, teardown),
      cmocka_unit_test_setup_teardown(test_each_ok, setup, teardown),
      cmocka_unit_test_setup_teardown(test_each_best, setup, teardown),
      cmocka_unit_test_setup_teardown(test_each_shape, setup, teardown),
      cmocka_unit_test_setup_teardown(test_each_shape_since, setup, teardown),
      cmocka_unit_test_setup_teardown(test_each_model_row, setup, teardown),
      cmocka_unit_test_setup_teardown(test_has_result, setup, teardown),
      cmocka_unit_test_setup_teardown(test_op_batch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_persistence_and_two_handles, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reentry, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_sqlite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_foreign_sqlite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_newer_schema, setup, teardown),
      cmocka_unit_test_setup_teardown(test_search_seconds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_upgrade_v1, setup, teardown),
      cmocka_unit_test_setup_teardown(test_upgrade_v6, setup, teardown),
      cmocka_unit_test_setup_teardown(test_truncation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_busy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_only_folder, setup, teardown),
      cmocka_unit_test_setup_teardown(test_merge_union, setup, teardown),
      cmocka_unit_test_setup_teardown(test_merge_refusals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_merge_bad_rows, setup, teardown),
      cmocka_unit_test_setup_teardown(test_merge_damaged_copies, setup, teardown),
      cmocka_unit_test_setup_teardown(test_merge_copies, setup, teardown),
      cmocka_unit_test_setup_teardown(test_export_import, setup, teardown),
      cmocka_unit_test_setup_teardown(test_import_version_1, setup, teardown),
      cmocka_unit_test_setup_teardown(test_op_batch_travel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_import_refusals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_row_policy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_only_place, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pack_older, setup, teardown),
      cmocka_unit_test_setup_teardown(test_upgrade_v4_searches, setup, teardown),
      cmocka_unit_test_setup_teardown(test_recorded, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
