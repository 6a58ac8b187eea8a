/* db_query.c -- see db.h: status names, inserting results and the queries on them. */
#include "db_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

/* Columns of a results row in the order bind_result() and read_result() use. */
#define DB_COLS_NOID                                                                               \
  "device_name, device_uuid, cc_major, cc_minor, sm_count, driver_version, nvrtc_version, "        \
  "template_name, template_hash, params, dtype, layout, m, n, k, op, batch, status, error, "       \
  "ms_min, ms_median, ms_max, runs, tflops, rel_err, max_err, regs, shared_bytes, local_bytes, "   \
  "created_at, tile_m, tile_n, slices, threads, per_sm, kernel_hash"
#define DB_COLS "id, " DB_COLS_NOID
/* A problem, bound by b_problem after the device name: ?2 .. ?8. */
#define DB_PROBLEM_MATCH                                                                           \
  "dtype = ?2 AND layout = ?3 AND m = ?4 AND n = ?5 AND k = ?6 AND op = ?7 AND batch = ?8"

const char *const db_stmt_sql[DB_ST_COUNT_] = {
    [DB_ST_BEGIN] = "BEGIN IMMEDIATE",
    [DB_ST_COMMIT] = "COMMIT",
    [DB_ST_INSERT] =
        "INSERT INTO results(" DB_COLS_NOID ") VALUES ("
        "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
        "?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, "
        "?34, ?35, ?36)",
    [DB_ST_HAS] =
        "SELECT 1 FROM results WHERE device_name = ?1 AND " DB_PROBLEM_MATCH
        " AND nvrtc_version = ?9 AND template_name = ?10 AND params = ?12"
        " AND ((?13 <> '' AND kernel_hash = ?13) OR (kernel_hash = '' AND template_hash = ?11))"
        " LIMIT 1",
    [DB_ST_BEST] = "SELECT " DB_COLS " FROM results WHERE device_name = ?1 AND " DB_PROBLEM_MATCH
                   " AND status = 'ok' ORDER BY ms_median, id LIMIT 1",
    [DB_ST_EACH_OK] = "SELECT " DB_COLS " FROM results WHERE device_name = ?1 AND " DB_PROBLEM_MATCH
                      " AND status = 'ok' ORDER BY ms_median, id",
    [DB_ST_EACH_BEST] = "SELECT " DB_COLS " FROM best WHERE (?1 IS NULL OR device_name = ?1)"
                        " AND (?2 IS NULL OR dtype = ?2) AND (?3 IS NULL OR layout = ?3)"
                        " ORDER BY device_name, dtype, layout, m, n, k, op, batch",
    [DB_ST_EACH_SHAPE] = "SELECT DISTINCT dtype, layout, m, n, k, op, batch FROM results"
                         " WHERE (?1 IS NULL OR device_name = ?1) AND status = 'ok'"
                         " AND (?2 IS NULL OR dtype = ?2) AND (?3 IS NULL OR layout = ?3)"
                         " ORDER BY dtype, layout, m, n, k, op, batch",
    /* the rows after an id: a range of the primary key, however many rows came before */
    [DB_ST_SHAPES_SINCE] = "SELECT DISTINCT dtype, layout, m, n, k, op, batch FROM results"
                           " WHERE id > ?2 AND device_name = ?1 AND status = 'ok'",
    [DB_ST_EACH_ROW] = "SELECT id, template_name, template_hash, params, dtype, layout, m, n, k,"
                       " ms_median, sm_count, cc_major, tile_m, tile_n, slices, threads, per_sm,"
                       " max(shared_bytes, 0), kernel_hash, op, batch FROM results"
                       " WHERE +device_name = ?1 AND status = 'ok'",
    /* the unary + keeps SQLite from walking an index and seeking each row: one table scan */
    [DB_ST_DATA_VERSION] = "PRAGMA data_version",
    [DB_ST_STAMP] = "SELECT coalesce(max(id), 0) FROM results", /* the b-tree's last key */
    [DB_ST_GET] = "SELECT " DB_COLS " FROM results WHERE id = ?1",
    [DB_ST_NROWS] = "SELECT count(*) FROM results WHERE ?1 IS NULL OR device_name = ?1",
    /* a search's time is the sum of its origins' (schema 5) */
    [DB_ST_SEARCH_GET] = "SELECT coalesce(sum(seconds), 0) FROM searches WHERE device_name = ?1"
                         " AND " DB_PROBLEM_MATCH " AND candidates = ?9",
    [DB_ST_SEARCH_ADD] =
        "INSERT INTO searches(device_name, dtype, layout, m, n, k, op, batch, candidates, origin,"
        " seconds, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
        " ON CONFLICT(device_name, dtype, layout, m, n, k, op, batch, candidates, origin)"
        " DO UPDATE SET seconds = seconds + excluded.seconds, updated_at = excluded.updated_at",
    [DB_ST_SEARCH_CLEAR] =
        "DELETE FROM searches WHERE device_name = ?1 AND " DB_PROBLEM_MATCH " AND candidates = ?9",
    [DB_ST_EACH_DEVICE_ROW] = "SELECT " DB_COLS " FROM results WHERE device_name = ?1 ORDER BY id",
};

static const char *const k_status_names[DB_STATUS_COUNT_] = {
    [DB_OK] = "ok",
    [DB_COMPILE_ERROR] = "compile_error",
    [DB_VERIFY_FAILED] = "verify_failed",
    [DB_FAULT] = "fault",
    [DB_TIMEOUT] = "timeout",
    [DB_LAUNCH_ERROR] = "launch_error",
    [DB_PRUNED] = "pruned",
};

const char *db_status_name(db_status s) {
  if ((int)s < 0 || s >= DB_STATUS_COUNT_) return "unknown";
  return k_status_names[s];
}

int db_status_parse(const char *text) {
  if (!text) return -1;
  for (int i = 0; i < DB_STATUS_COUNT_; i++)
    if (strcmp(text, k_status_names[i]) == 0) return i;
  return -1;
}

/* ---- binding: parameters ?1, ?2, ... in order; the first failure is kept ------------------ */

typedef struct {
  sqlite3_stmt *st;
  int idx;
  int rc;
} binder;

/* A fixed-size field that may lack its NUL: at most cap bytes.  The caller's memory must live
 * until stmt_done(), which clears the bindings. */
static void b_field(binder *b, const char *s, size_t cap) {
  b->idx++;
  if (b->rc == SQLITE_OK)
    b->rc = sqlite3_bind_text(b->st, b->idx, s, (int)strnlen(s, cap), SQLITE_STATIC);
}

/* A C string, or NULL bound as SQL NULL. */
static void b_text(binder *b, const char *s) {
  b->idx++;
  if (b->rc != SQLITE_OK) return;
  b->rc =
      s ? sqlite3_bind_text(b->st, b->idx, s, -1, SQLITE_STATIC) : sqlite3_bind_null(b->st, b->idx);
}

static void b_int(binder *b, int64_t v) {
  b->idx++;
  if (b->rc == SQLITE_OK) b->rc = sqlite3_bind_int64(b->st, b->idx, v);
}

/* NaN is stored as NULL by SQLite itself. */
static void b_real(binder *b, double v) {
  b->idx++;
  if (b->rc == SQLITE_OK) b->rc = sqlite3_bind_double(b->st, b->idx, v);
}

/* A batch as stored and matched: 0 (a zeroed db_problem) is 1. */
static int64_t batch_of(const db_problem *p) { return p->batch ? p->batch : 1; }

/* ?(idx+1) .. ?(idx+7): dtype, layout, m, n, k, op, batch. */
static void b_problem(binder *b, const db_problem *p) {
  b_field(b, p->dtype, sizeof p->dtype);
  b_field(b, p->layout, sizeof p->layout);
  b_int(b, p->m);
  b_int(b, p->n);
  b_int(b, p->k);
  b_field(b, p->op, sizeof p->op);
  b_int(b, batch_of(p));
}

static void bind_result(binder *b, const db_result *r, int64_t created_at) {
  const db_device *d = &r->device;
  b_field(b, d->name, sizeof d->name);
  b_field(b, d->uuid, sizeof d->uuid);
  b_int(b, d->cc_major);
  b_int(b, d->cc_minor);
  b_int(b, d->sm_count);
  b_int(b, d->driver_version);
  b_field(b, r->nvrtc_version, sizeof r->nvrtc_version);
  b_field(b, r->template_name, sizeof r->template_name);
  b_field(b, r->template_hash, sizeof r->template_hash);
  b_field(b, r->params, sizeof r->params);
  b_problem(b, &r->problem);
  b_text(b, db_status_name(r->status));
  b_field(b, r->error, sizeof r->error);
  b_real(b, r->ms_min);
  b_real(b, r->ms_median);
  b_real(b, r->ms_max);
  b_int(b, r->runs);
  b_real(b, r->tflops);
  b_real(b, r->rel_err);
  b_real(b, r->max_err);
  b_int(b, r->regs);
  b_int(b, r->shared_bytes);
  b_int(b, r->local_bytes);
  b_int(b, created_at);
  b_int(b, r->launch.tile_m);
  b_int(b, r->launch.tile_n);
  b_int(b, r->launch.slices);
  b_int(b, r->launch.threads);
  b_int(b, r->launch.per_sm);
  b_field(b, r->kernel_hash, sizeof r->kernel_hash);
}

int db_bind_result(sqlite3_stmt *st, const db_result *r) {
  binder b = {st, 0, SQLITE_OK};
  bind_result(&b, r, r->created_at);
  return b.rc;
}

/* After every use of a prepared statement: ready for the next one, no borrowed pointers. */
static void stmt_done(sqlite3_stmt *st) {
  /* reset repeats the last step's error, which the caller has handled; clear_bindings
   * cannot fail. */
  (void)sqlite3_reset(st);
  (void)sqlite3_clear_bindings(st);
}

/* ---- reading: columns 0, 1, ... in order -------------------------------------------------- */

typedef struct {
  sqlite3_stmt *st;
  int col;
} reader;

static void r_field(reader *rd, char *dst, size_t cap) {
  const unsigned char *t = sqlite3_column_text(rd->st, rd->col);
  db_copy_text(dst, cap, t, sqlite3_column_bytes(rd->st, rd->col));
  rd->col++;
}

static int64_t r_int(reader *rd) { return sqlite3_column_int64(rd->st, rd->col++); }

/* NULL (a NaN when stored) reads back as NaN. */
static double r_real(reader *rd) {
  int c = rd->col++;
  return sqlite3_column_type(rd->st, c) == SQLITE_NULL ? NAN : sqlite3_column_double(rd->st, c);
}

static void r_problem(reader *rd, db_problem *p) {
  r_field(rd, p->dtype, sizeof p->dtype);
  r_field(rd, p->layout, sizeof p->layout);
  p->m = r_int(rd);
  p->n = r_int(rd);
  p->k = r_int(rd);
  r_field(rd, p->op, sizeof p->op);
  p->batch = r_int(rd);
}

/* One row of DB_COLS into *r. */
static mmt_status read_result(db_handle *h, sqlite3_stmt *st, db_result *r, ut_err *err) {
  reader rd = {st, 0};
  char status[32];
  memset(r, 0, sizeof *r);
  r->id = r_int(&rd);
  r_field(&rd, r->device.name, sizeof r->device.name);
  r_field(&rd, r->device.uuid, sizeof r->device.uuid);
  r->device.cc_major = (int)r_int(&rd);
  r->device.cc_minor = (int)r_int(&rd);
  r->device.sm_count = (int)r_int(&rd);
  r->device.driver_version = (int)r_int(&rd);
  r_field(&rd, r->nvrtc_version, sizeof r->nvrtc_version);
  r_field(&rd, r->template_name, sizeof r->template_name);
  r_field(&rd, r->template_hash, sizeof r->template_hash);
  r_field(&rd, r->params, sizeof r->params);
  r_problem(&rd, &r->problem);
  r_field(&rd, status, sizeof status);
  r_field(&rd, r->error, sizeof r->error);
  r->ms_min = r_real(&rd);
  r->ms_median = r_real(&rd);
  r->ms_max = r_real(&rd);
  r->runs = (int)r_int(&rd);
  r->tflops = r_real(&rd);
  r->rel_err = r_real(&rd);
  r->max_err = r_real(&rd);
  r->regs = (int)r_int(&rd);
  r->shared_bytes = (int)r_int(&rd);
  r->local_bytes = (int)r_int(&rd);
  r->created_at = r_int(&rd);
  r->launch.tile_m = (int)r_int(&rd);
  r->launch.tile_n = (int)r_int(&rd);
  r->launch.slices = (int)r_int(&rd);
  r->launch.threads = (int)r_int(&rd);
  r->launch.per_sm = (int)r_int(&rd);
  r_field(&rd, r->kernel_hash, sizeof r->kernel_hash);
  r->launch.shared_bytes = r->shared_bytes > 0 ? r->shared_bytes : 0;
  int s = db_status_parse(status);
  if (s < 0)
    return ut_fail(err, MMT_ERR_DB_CORRUPT, "database '%s': row %lld has unknown status '%s'",
                   h->path, (long long)r->id, status);
  r->status = (db_status)s;
  return MMT_OK;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* Steps a statement that returns no rows. */
static mmt_status step_done(db_handle *h, db_stmt_id id, const char *op, ut_err *err) {
  int s = sqlite3_step(h->st[id]);
  mmt_status rc = s == SQLITE_DONE ? MMT_OK : db_sql_fail(h, s, op, err);
  stmt_done(h->st[id]);
  return rc;
}

static mmt_status insert_row(db_handle *h, const db_result *r, int64_t created_at, int64_t *id,
                             ut_err *err) {
  sqlite3_stmt *st = h->st[DB_ST_INSERT];
  binder b = {st, 0, SQLITE_OK};
  bind_result(&b, r, created_at);
  mmt_status rc = MMT_OK;
  int s = b.rc == SQLITE_OK ? sqlite3_step(st) : b.rc;
  if (s != SQLITE_DONE)
    rc = db_sql_fail(h, s, "cannot insert a result into", err);
  else
    *id = sqlite3_last_insert_rowid(h->sq);
  stmt_done(st);
  return rc;
}

mmt_status db_insert(db_handle *db, db_result *r, ut_err *err) {
  if (!db || !r) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_insert: NULL argument");
  if ((int)r->status < 0 || r->status >= DB_STATUS_COUNT_)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_insert: invalid status %d", (int)r->status);
  if (r->problem.batch < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_insert: invalid batch %lld",
                   (long long)r->problem.batch);
  if (db->read_only)
    return ut_fail(err, MMT_ERR_DB, "cannot insert a result into '%s': opened readonly", db->path);
  int64_t created_at = r->created_at ? r->created_at : ut_unix_time();
  int64_t id = 0;
  mmt_status rc = step_done(db, DB_ST_BEGIN, "cannot begin a transaction on", err);
  if (rc) return rc;
  rc = insert_row(db, r, created_at, &id, err);
  if (!rc) rc = step_done(db, DB_ST_COMMIT, "cannot commit a result to", err);
  if (rc) {
    db_rollback_after_error(db, err);
    return rc;
  }
  r->created_at = created_at;
  r->id = id;
  return MMT_OK;
}

/* ---- reading queries ---------------------------------------------------------------------- */

/* Before binding an iterator's statement: refuses re-entry from a callback of the same query
 * (the statement is being stepped). */
static mmt_status iter_check_free(const db_handle *h, db_stmt_id id, const char *fn_name,
                                  ut_err *err) {
  if (h->busy[id])
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s called from its own callback", fn_name);
  return MMT_OK;
}

/* After binding: reports a failed bind, else marks the statement in use. */
static mmt_status iter_bound(db_handle *h, db_stmt_id id, const binder *b, ut_err *err) {
  if (b->rc != SQLITE_OK) {
    mmt_status rc = db_sql_fail(h, b->rc, "cannot bind query parameters on", err);
    stmt_done(h->st[id]);
    return rc;
  }
  h->busy[id] = true;
  return MMT_OK;
}

/* Steps statement id (bound already), calling fn on each row until it returns non-zero. */
static mmt_status each_result(db_handle *h, db_stmt_id id, db_result_fn fn, void *user,
                              ut_err *err) {
  sqlite3_stmt *st = h->st[id];
  mmt_status rc = MMT_OK;
  db_result r;
  for (;;) {
    int s = sqlite3_step(st);
    if (s == SQLITE_DONE) break;
    if (s != SQLITE_ROW) {
      rc = db_sql_fail(h, s, "cannot read results from", err);
      break;
    }
    rc = read_result(h, st, &r, err);
    if (rc || fn(&r, user)) break;
  }
  stmt_done(st);
  h->busy[id] = false;
  return rc;
}

/* One row db_rekey gives a kernel hash. */
typedef struct {
  int64_t id;
  char hash[17];
} rekeyed_row;

/* The rows without a kernel hash that fn gives one, into *out (owned), *n of them. */
static mmt_status rekey_collect(db_handle *db, db_rekey_fn fn, void *user, rekeyed_row **out,
                                int64_t *n, ut_err *err) {
  sqlite3_stmt *st = NULL;
  int cap = 0;
  *out = NULL;
  *n = 0;
  int s = sqlite3_prepare_v2(db->sq, "SELECT " DB_COLS " FROM results WHERE kernel_hash = ''", -1,
                             &st, NULL);
  if (s != SQLITE_OK) return db_sql_fail(db, s, "cannot read results from", err);
  mmt_status rc = MMT_OK;
  db_result r;
  while (!rc && (s = sqlite3_step(st)) == SQLITE_ROW) {
    char hash[17] = "";
    if ((rc = read_result(db, st, &r, err)) || (rc = fn(&r, hash, user, err)) || !hash[0]) continue;
    rekeyed_row *v = ut_grow(*out, &cap, (int)*n + 1, sizeof *v);
    if (!v) {
      rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory");
      break;
    }
    *out = v;
    v[*n].id = r.id;
    memcpy(v[(*n)++].hash, hash, sizeof hash);
  }
  if (!rc && s != SQLITE_DONE) rc = db_sql_fail(db, s, "cannot read results from", err);
  sqlite3_finalize(st);
  return rc;
}

mmt_status db_rekey(db_handle *db, db_rekey_fn fn, void *user, int64_t *count, ut_err *err) {
  if (!db || !fn) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_rekey: NULL argument");
  if (count) *count = 0;
  if (db->read_only)
    return ut_fail(err, MMT_ERR_DB, "cannot rekey '%s': opened readonly", db->path);
  rekeyed_row *rows = NULL;
  int64_t n = 0;
  sqlite3_stmt *st = NULL;
  mmt_status rc = rekey_collect(db, fn, user, &rows, &n, err);
  if (!rc && n) rc = step_done(db, DB_ST_BEGIN, "cannot begin a transaction on", err);
  if (rc || !n) {
    free(rows);
    return rc;
  }
  int s = sqlite3_prepare_v2(db->sq, "UPDATE results SET kernel_hash = ?1 WHERE id = ?2", -1, &st,
                             NULL);
  for (int64_t i = 0; i < n && s == SQLITE_OK; i++) {
    s = sqlite3_bind_text(st, 1, rows[i].hash, -1, SQLITE_STATIC);
    if (s == SQLITE_OK) s = sqlite3_bind_int64(st, 2, rows[i].id);
    if (s == SQLITE_OK && (s = sqlite3_step(st)) == SQLITE_DONE) s = sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  rc = s == SQLITE_OK ? step_done(db, DB_ST_COMMIT, "cannot commit kernel hashes to", err)
                      : db_sql_fail(db, s, "cannot record kernel hashes in", err);
  if (rc)
    db_rollback_after_error(db, err);
  else if (count)
    *count = n;
  free(rows);
  return rc;
}

mmt_status db_has_result(db_handle *db, const db_result *key, bool *found, ut_err *err) {
  if (!db || !key || !found)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_has_result: NULL argument");
  *found = false;
  sqlite3_stmt *st = db->st[DB_ST_HAS];
  binder b = {st, 0, SQLITE_OK};
  b_field(&b, key->device.name, sizeof key->device.name);
  b_problem(&b, &key->problem);
  b_field(&b, key->nvrtc_version, sizeof key->nvrtc_version);
  b_field(&b, key->template_name, sizeof key->template_name);
  b_field(&b, key->template_hash, sizeof key->template_hash);
  b_field(&b, key->params, sizeof key->params);
  b_field(&b, key->kernel_hash, sizeof key->kernel_hash);
  int s = b.rc == SQLITE_OK ? sqlite3_step(st) : b.rc;
  mmt_status rc = MMT_OK;
  if (s == SQLITE_ROW)
    *found = true;
  else if (s != SQLITE_DONE)
    rc = db_sql_fail(db, s, "cannot look up a result in", err);
  stmt_done(st);
  return rc;
}

mmt_status db_best(db_handle *db, const char *device_name, const db_problem *p, db_result *out,
                   ut_err *err) {
  if (!db || !device_name || !p || !out)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_best: NULL argument");
  sqlite3_stmt *st = db->st[DB_ST_BEST];
  binder b = {st, 0, SQLITE_OK};
  b_text(&b, device_name);
  b_problem(&b, p);
  int s = b.rc == SQLITE_OK ? sqlite3_step(st) : b.rc;
  mmt_status rc = MMT_OK;
  char what[DB_OP_MAX + 128]; /* the problem, for the message: op and batch unless plain */
  int n = snprintf(what, sizeof what, "%.8s %.8s %lldx%lldx%lld", p->dtype, p->layout,
                   (long long)p->m, (long long)p->n, (long long)p->k);
  if (p->op[0] || batch_of(p) != 1)
    snprintf(what + n, sizeof what - (size_t)n, " (op '%.*s', batch %lld)",
             (int)strnlen(p->op, sizeof p->op), p->op, (long long)batch_of(p));
  if (s == SQLITE_ROW)
    rc = read_result(db, st, out, err);
  else if (s == SQLITE_DONE)
    rc = ut_fail(err, MMT_ERR_NOT_FOUND, "no ok result for %s on '%s'", what, device_name);
  else
    rc = db_sql_fail(db, s, "cannot read the best result from", err);
  stmt_done(st);
  return rc;
}

mmt_status db_each_ok(db_handle *db, const char *device_name, const db_problem *p, db_result_fn fn,
                      void *user, ut_err *err) {
  if (!db || !device_name || !p || !fn)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_each_ok: NULL argument");
  mmt_status rc = iter_check_free(db, DB_ST_EACH_OK, "db_each_ok", err);
  if (rc) return rc;
  binder b = {db->st[DB_ST_EACH_OK], 0, SQLITE_OK};
  b_text(&b, device_name);
  b_problem(&b, p);
  rc = iter_bound(db, DB_ST_EACH_OK, &b, err);
  if (rc) return rc;
  return each_result(db, DB_ST_EACH_OK, fn, user, err);
}

/* A borrowed text column ("" for NULL). */
static const char *col_text(sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? (const char *)t : "";
}

mmt_status db_each_model_row(db_handle *db, const char *device_name, db_model_row_fn fn,
                             void *user, ut_err *err) {
  if (!db || !device_name || !fn)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_each_model_row: NULL argument");
  mmt_status rc = iter_check_free(db, DB_ST_EACH_ROW, "db_each_model_row", err);
  if (rc) return rc;
  sqlite3_stmt *st = db->st[DB_ST_EACH_ROW];
  binder b = {st, 0, SQLITE_OK};
  b_text(&b, device_name);
  rc = iter_bound(db, DB_ST_EACH_ROW, &b, err);
  if (rc) return rc;
  for (;;) {
    int s = sqlite3_step(st);
    if (s == SQLITE_DONE) break;
    if (s != SQLITE_ROW) {
      rc = db_sql_fail(db, s, "cannot read results from", err);
      break;
    }
    db_model_row r = {.id = sqlite3_column_int64(st, 0),
                      .template_name = col_text(st, 1),
                      .template_hash = col_text(st, 2),
                      .params = col_text(st, 3),
                      .kernel_hash = col_text(st, 18),
                      .problem = {.m = sqlite3_column_int64(st, 6),
                                  .n = sqlite3_column_int64(st, 7),
                                  .k = sqlite3_column_int64(st, 8),
                                  .batch = sqlite3_column_int64(st, 20)},
                      .ms_median = sqlite3_column_double(st, 9),
                      .sm_count = sqlite3_column_int(st, 10),
                      .cc_major = sqlite3_column_int(st, 11),
                      .launch = {sqlite3_column_int(st, 12), sqlite3_column_int(st, 13),
                                 sqlite3_column_int(st, 14), sqlite3_column_int(st, 15),
                                 sqlite3_column_int(st, 16), sqlite3_column_int(st, 17)}};
    db_copy_text(r.problem.dtype, sizeof r.problem.dtype, sqlite3_column_text(st, 4),
                 sqlite3_column_bytes(st, 4));
    db_copy_text(r.problem.layout, sizeof r.problem.layout, sqlite3_column_text(st, 5),
                 sqlite3_column_bytes(st, 5));
    db_copy_text(r.problem.op, sizeof r.problem.op, sqlite3_column_text(st, 19),
                 sqlite3_column_bytes(st, 19));
    if (fn(&r, user)) break;
  }
  stmt_done(st);
  db->busy[DB_ST_EACH_ROW] = false;
  return rc;
}

mmt_status db_data_version(db_handle *db, int64_t *version, ut_err *err) {
  if (!db || !version) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_data_version: NULL argument");
  sqlite3_stmt *st = db->st[DB_ST_DATA_VERSION];
  int s = sqlite3_step(st);
  mmt_status rc = MMT_OK;
  /* data_version moves with other connections' commits, total_changes with this one's */
  if (s == SQLITE_ROW)
    *version = (int64_t)((uint64_t)sqlite3_column_int64(st, 0) << 32 ^
                         (uint64_t)sqlite3_total_changes64(db->sq));
  else
    rc = db_sql_fail(db, s, "cannot read the data version of", err);
  stmt_done(st);
  return rc;
}

/* The size and modification time of path (zeros when it does not exist) into h. */
static uint64_t hash_file_state(uint64_t h, const char *path) {
  struct stat st;
  int64_t v[3] = {0, 0, 0};
  if (stat(path, &st) == 0) {
    v[0] = (int64_t)st.st_size;
    v[1] = (int64_t)st.st_mtim.tv_sec;
    v[2] = (int64_t)st.st_mtim.tv_nsec;
  }
  return ut_hash64_more(h, v, sizeof v);
}

mmt_status db_rows_stamp(db_handle *db, int64_t *max_id, uint64_t *files, ut_err *err) {
  if (!db || !max_id || !files)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_rows_stamp: NULL argument");
  /* the files first: a write after them changes them again, so a fit made after this call
   * is never filed under a stamp older than its rows */
  char wal[4200];
  uint64_t h = hash_file_state(ut_hash64("mmtune", 6), db->path);
  if (ut_snprintf(wal, sizeof wal, err, "%s-wal", db->path)) return MMT_ERR_INVALID_ARG;
  *files = hash_file_state(h, wal);
  sqlite3_stmt *st = db->st[DB_ST_STAMP];
  int s = sqlite3_step(st);
  mmt_status rc = MMT_OK;
  if (s == SQLITE_ROW)
    *max_id = sqlite3_column_int64(st, 0);
  else
    rc = db_sql_fail(db, s, "cannot read the last row id of", err);
  stmt_done(st);
  return rc;
}

const char *db_path(const db_handle *db) { return db ? db->path : NULL; }

mmt_status db_get(db_handle *db, int64_t id, db_result *out, ut_err *err) {
  if (!db || !out) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_get: NULL argument");
  sqlite3_stmt *st = db->st[DB_ST_GET];
  binder b = {st, 0, SQLITE_OK};
  b_int(&b, id);
  int s = b.rc == SQLITE_OK ? sqlite3_step(st) : b.rc;
  mmt_status rc = MMT_OK;
  if (s == SQLITE_ROW)
    rc = read_result(db, st, out, err);
  else if (s == SQLITE_DONE)
    rc = ut_fail(err, MMT_ERR_NOT_FOUND, "no result with id %lld in '%s'", (long long)id,
                 db->path);
  else
    rc = db_sql_fail(db, s, "cannot read a result from", err);
  stmt_done(st);
  return rc;
}

mmt_status db_each_best(db_handle *db, const char *device_name, const char *dtype,
                        const char *layout, db_result_fn fn, void *user, ut_err *err) {
  if (!db || !fn) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_each_best: NULL argument");
  mmt_status rc = iter_check_free(db, DB_ST_EACH_BEST, "db_each_best", err);
  if (rc) return rc;
  binder b = {db->st[DB_ST_EACH_BEST], 0, SQLITE_OK};
  b_text(&b, device_name);
  b_text(&b, dtype);
  b_text(&b, layout);
  rc = iter_bound(db, DB_ST_EACH_BEST, &b, err);
  if (rc) return rc;
  return each_result(db, DB_ST_EACH_BEST, fn, user, err);
}

mmt_status db_each_row(db_handle *db, const char *device_name, db_result_fn fn, void *user,
                       ut_err *err) {
  if (!db || !device_name || !fn)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_each_row: NULL argument");
  mmt_status rc = iter_check_free(db, DB_ST_EACH_DEVICE_ROW, "db_each_row", err);
  if (rc) return rc;
  binder b = {db->st[DB_ST_EACH_DEVICE_ROW], 0, SQLITE_OK};
  b_text(&b, device_name);
  rc = iter_bound(db, DB_ST_EACH_DEVICE_ROW, &b, err);
  if (rc) return rc;
  return each_result(db, DB_ST_EACH_DEVICE_ROW, fn, user, err);
}

/* Steps statement id (bound already, marked in use), calling fn on each row's problem. */
static mmt_status each_problem(db_handle *db, db_stmt_id id, db_problem_fn fn, void *user,
                               ut_err *err) {
  sqlite3_stmt *st = db->st[id];
  mmt_status rc = MMT_OK;
  for (;;) {
    int s = sqlite3_step(st);
    if (s == SQLITE_DONE) break;
    if (s != SQLITE_ROW) {
      rc = db_sql_fail(db, s, "cannot read tuned shapes from", err);
      break;
    }
    reader rd = {st, 0};
    db_problem p;
    r_problem(&rd, &p);
    fn(&p, user);
  }
  stmt_done(st);
  db->busy[id] = false;
  return rc;
}

mmt_status db_each_shape(db_handle *db, const char *device_name, const char *dtype,
                         const char *layout, db_problem_fn fn, void *user, ut_err *err) {
  if (!db || !fn) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_each_shape: NULL argument");
  mmt_status rc = iter_check_free(db, DB_ST_EACH_SHAPE, "db_each_shape", err);
  if (rc) return rc;
  binder b = {db->st[DB_ST_EACH_SHAPE], 0, SQLITE_OK};
  b_text(&b, device_name);
  b_text(&b, dtype);
  b_text(&b, layout);
  rc = iter_bound(db, DB_ST_EACH_SHAPE, &b, err);
  return rc ? rc : each_problem(db, DB_ST_EACH_SHAPE, fn, user, err);
}

mmt_status db_each_shape_since(db_handle *db, const char *device_name, int64_t after_id,
                               db_problem_fn fn, void *user, ut_err *err) {
  if (!db || !device_name || !fn)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_each_shape_since: NULL argument");
  mmt_status rc = iter_check_free(db, DB_ST_SHAPES_SINCE, "db_each_shape_since", err);
  if (rc) return rc;
  binder b = {db->st[DB_ST_SHAPES_SINCE], 0, SQLITE_OK};
  b_text(&b, device_name);
  b_int(&b, after_id);
  rc = iter_bound(db, DB_ST_SHAPES_SINCE, &b, err);
  return rc ? rc : each_problem(db, DB_ST_SHAPES_SINCE, fn, user, err);
}

mmt_status db_count(db_handle *db, const char *device_name, int64_t *count, ut_err *err) {
  if (!db || !count) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_count: NULL argument");
  *count = 0;
  sqlite3_stmt *st = db->st[DB_ST_NROWS];
  binder b = {st, 0, SQLITE_OK};
  b_text(&b, device_name);
  int s = b.rc == SQLITE_OK ? sqlite3_step(st) : b.rc;
  mmt_status rc = MMT_OK;
  if (s == SQLITE_ROW)
    *count = sqlite3_column_int64(st, 0);
  else
    rc = db_sql_fail(db, s, "cannot count results in", err);
  stmt_done(st);
  return rc;
}

/* ---- search time -------------------------------------------------------------------------- */

static mmt_status search_args(const db_handle *db, const char *device_name, const db_problem *p,
                              const char *candidates, const char *fn, ut_err *err) {
  if (!db || !device_name || !p || !candidates)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s: NULL argument", fn);
  if (db->read_only)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s: database '%s' is open read-only", fn, db->path);
  return MMT_OK;
}

mmt_status db_search_seconds(db_handle *db, const char *device_name, const db_problem *p,
                             const char *candidates, double *seconds, ut_err *err) {
  mmt_status rc = search_args(db, device_name, p, candidates, "db_search_seconds", err);
  if (rc) return rc;
  if (!seconds) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_search_seconds: NULL argument");
  *seconds = 0;
  sqlite3_stmt *st = db->st[DB_ST_SEARCH_GET];
  binder b = {st, 0, SQLITE_OK};
  b_text(&b, device_name);
  b_problem(&b, p);
  b_text(&b, candidates);
  int s = b.rc == SQLITE_OK ? sqlite3_step(st) : b.rc;
  if (s == SQLITE_ROW)
    *seconds = sqlite3_column_double(st, 0);
  else if (s != SQLITE_DONE)
    rc = db_sql_fail(db, s, "cannot read the search time from", err);
  stmt_done(st);
  return rc;
}

/* Steps the search statement id bound to (device, problem, candidates) and, for the add,
 * (origin, seconds, now). */
static int search_step(db_handle *db, db_stmt_id id, const char *device_name, const db_problem *p,
                       const char *candidates, double seconds) {
  sqlite3_stmt *st = db->st[id];
  binder b = {st, 0, SQLITE_OK};
  b_text(&b, device_name);
  b_problem(&b, p);
  b_text(&b, candidates);
  if (id == DB_ST_SEARCH_ADD) {
    b_text(&b, db->origin);
    b_real(&b, seconds);
    b_int(&b, ut_unix_time());
  }
  int s = b.rc == SQLITE_OK ? sqlite3_step(st) : b.rc;
  stmt_done(st);
  return s;
}

mmt_status db_search_add(db_handle *db, const char *device_name, const db_problem *p,
                         const char *candidates, double seconds, bool replace, ut_err *err) {
  mmt_status rc = search_args(db, device_name, p, candidates, "db_search_add", err);
  if (rc) return rc;
  if (!(seconds >= 0) || isinf(seconds))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_search_add: seconds = %g", seconds);
  /* replace: every origin's time goes, this file's becomes the whole (one transaction) */
  if (replace) rc = step_done(db, DB_ST_BEGIN, "cannot begin a transaction on", err);
  if (rc) return rc;
  int s = replace ? search_step(db, DB_ST_SEARCH_CLEAR, device_name, p, candidates, 0)
                  : SQLITE_DONE;
  if (s == SQLITE_DONE) s = search_step(db, DB_ST_SEARCH_ADD, device_name, p, candidates, seconds);
  if (s != SQLITE_DONE) rc = db_sql_fail(db, s, "cannot record the search time in", err);
  if (!rc && replace) rc = step_done(db, DB_ST_COMMIT, "cannot commit a search time to", err);
  if (rc) db_rollback_after_error(db, err);
  return rc;
}
