/* db_recorded.c -- the problems applications met without a row of their own (db.h,
 * "Recorded problems"): a table of its own that the first db_record makes, keyed as results
 * are, with a count and the first and last time. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "db_internal.h"

/* Not part of the versioned schema: a reader of any version ignores a table it does not
 * know, so recording never makes a file unreadable to an older mmtune. */
static const char k_recorded_ddl[] =
    "CREATE TABLE IF NOT EXISTS recorded(\n"
    "  device_name TEXT NOT NULL, dtype TEXT NOT NULL, layout TEXT NOT NULL,\n"
    "  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,\n"
    "  op TEXT NOT NULL, batch INTEGER NOT NULL,\n"
    "  calls INTEGER NOT NULL, first_at INTEGER NOT NULL, last_at INTEGER NOT NULL,\n"
    "  PRIMARY KEY (device_name, dtype, layout, m, n, k, op, batch));\n";

static const char k_record_sql[] =
    "INSERT INTO recorded VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, ?9, ?9)\n"
    "  ON CONFLICT DO UPDATE SET calls = calls + 1, last_at = excluded.last_at";

mmt_status db_record(db_handle *db, const char *device_name, const db_problem *p, ut_err *err) {
  if (!db || !device_name || !p)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_record: NULL argument");
  if (db->read_only)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_record: '%s' is open read-only", db->path);
  if (p->m < 0 || p->n < 0 || p->k < 0 || p->batch < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_record: a size or batch below 0");
  sqlite3_stmt *st = NULL;
  int s = sqlite3_exec(db->sq, k_recorded_ddl, NULL, NULL, NULL);
  if (s == SQLITE_OK) s = sqlite3_prepare_v2(db->sq, k_record_sql, -1, &st, NULL);
  const char *text[4] = {device_name, p->dtype, p->layout, p->op};
  const int text_at[4] = {1, 2, 3, 7};
  for (int i = 0; i < 4 && s == SQLITE_OK; i++)
    s = sqlite3_bind_text(st, text_at[i], text[i], -1, SQLITE_STATIC);
  const int64_t num[5] = {p->m, p->n, p->k, p->batch > 1 ? p->batch : 1, ut_unix_time()};
  const int num_at[5] = {4, 5, 6, 8, 9};
  for (int i = 0; i < 5 && s == SQLITE_OK; i++) s = sqlite3_bind_int64(st, num_at[i], num[i]);
  if (s == SQLITE_OK) s = sqlite3_step(st);
  if (s == SQLITE_DONE) s = SQLITE_OK;
  sqlite3_finalize(st);
  return s == SQLITE_OK ? MMT_OK : db_sql_fail(db, s, "cannot record a problem in", err);
}

/* Copies column i's text into out (cap bytes): false when it does not fit. */
static bool column_text(sqlite3_stmt *st, int i, char *out, size_t cap) {
  const unsigned char *t = sqlite3_column_text(st, i);
  if (!t || strlen((const char *)t) >= cap) return false;
  memcpy(out, t, strlen((const char *)t) + 1);
  return true;
}

mmt_status db_each_recorded(db_handle *db, const char *device_name, db_recorded_fn fn, void *user,
                            ut_err *err) {
  if (!db || !fn) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_each_recorded: NULL argument");
  sqlite3_stmt *st = NULL;
  int s = sqlite3_prepare_v2(db->sq,
                             "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                             "name = 'recorded'",
                             -1, &st, NULL);
  bool exists = false;
  if (s == SQLITE_OK && (s = sqlite3_step(st)) == SQLITE_ROW) {
    exists = sqlite3_column_int64(st, 0) > 0;
    s = SQLITE_OK;
  }
  sqlite3_finalize(st);
  st = NULL;
  if (s != SQLITE_OK) return db_sql_fail(db, s, "cannot read the recorded problems of", err);
  if (!exists) return MMT_OK; /* nothing recorded yet */
  s = sqlite3_prepare_v2(db->sq,
                         "SELECT device_name, dtype, layout, m, n, k, op, batch, calls, "
                         "first_at, last_at FROM recorded WHERE ?1 IS NULL OR device_name = ?1 "
                         "ORDER BY device_name, dtype, layout, op, batch, m, n, k",
                         -1, &st, NULL);
  if (s == SQLITE_OK)
    s = device_name ? sqlite3_bind_text(st, 1, device_name, -1, SQLITE_STATIC)
                    : sqlite3_bind_null(st, 1);
  mmt_status rc = MMT_OK;
  while (s == SQLITE_OK && !rc && (s = sqlite3_step(st)) == SQLITE_ROW) {
    s = SQLITE_OK;
    char device[128];
    db_recorded r;
    memset(&r, 0, sizeof r);
    if (!column_text(st, 0, device, sizeof device) ||
        !column_text(st, 1, r.problem.dtype, sizeof r.problem.dtype) ||
        !column_text(st, 2, r.problem.layout, sizeof r.problem.layout) ||
        !column_text(st, 6, r.problem.op, sizeof r.problem.op)) {
      rc =
          ut_fail(err, MMT_ERR_DB_CORRUPT, "'%s': a recorded problem's text is too long", db->path);
      break;
    }
    r.problem.m = sqlite3_column_int64(st, 3);
    r.problem.n = sqlite3_column_int64(st, 4);
    r.problem.k = sqlite3_column_int64(st, 5);
    r.problem.batch = sqlite3_column_int64(st, 7);
    r.calls = sqlite3_column_int64(st, 8);
    r.first_at = sqlite3_column_int64(st, 9);
    r.last_at = sqlite3_column_int64(st, 10);
    if (fn(device, &r, user)) break;
  }
  if (s == SQLITE_DONE) s = SQLITE_OK;
  sqlite3_finalize(st);
  if (!rc && s != SQLITE_OK) rc = db_sql_fail(db, s, "cannot read the recorded problems of", err);
  return rc;
}
