/*
 * db_merge.c -- combining result files (db_merge) and checking one (db_check): what a team or
 * a cluster's shards need to gather their measurements into the database an application
 * ships.  See db.h.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_internal.h"

/* Every column of `results` but id, in one order for reading a source and writing DST.  A
 * source older than schema 4 is read through db_open's temporary views, which give the
 * launch columns as 0: the rows are upgraded on read. */
static const char *const k_cols[] = {
    "device_name", "device_uuid", "cc_major", "cc_minor", "sm_count", "driver_version",
    "nvrtc_version", "template_name", "template_hash", "params", "dtype", "layout", "m", "n",
    "k", "status", "error", "ms_min", "ms_median", "ms_max", "runs", "tflops", "rel_err",
    "max_err", "regs", "shared_bytes", "local_bytes", "created_at", "tile_m", "tile_n",
    "slices", "threads", "per_sm"};
#define NCOLS ((int)(sizeof k_cols / sizeof k_cols[0]))

/* The search-time columns (schema 3 on); the first seven are the table's key. */
static const char k_search_select[] =
    "SELECT device_name, dtype, layout, m, n, k, candidates, seconds, updated_at FROM searches";
static const char k_search_add[] =
    "INSERT INTO searches(device_name, dtype, layout, m, n, k, candidates, seconds, updated_at)\n"
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)\n"
    "ON CONFLICT (device_name, dtype, layout, m, n, k, candidates) DO UPDATE SET\n"
    "  seconds = seconds + excluded.seconds, updated_at = max(updated_at, excluded.updated_at)";

/* Appends k_cols joined by sep to s (length *len, capacity cap), each as its name, its
 * parameter ?i, or "name IS ?i". */
typedef enum { COL_NAME, COL_PARAM, COL_EQUAL } col_form;
static void put_cols(char *s, size_t cap, size_t *len, const char *sep, col_form form) {
  for (int i = 0; i < NCOLS; i++) {
    const char *lead = i ? sep : "";
    if (form == COL_NAME) *len += (size_t)snprintf(s + *len, cap - *len, "%s%s", lead, k_cols[i]);
    if (form == COL_PARAM) *len += (size_t)snprintf(s + *len, cap - *len, "%s?%d", lead, i + 1);
    if (form == COL_EQUAL)
      *len += (size_t)snprintf(s + *len, cap - *len, "%s%s IS ?%d", lead, k_cols[i], i + 1);
  }
}

/* "SELECT c1, ..., cN FROM results ORDER BY id" and the insert that skips an exact duplicate
 * (every column but id equal, NULLs included: IS).  Owned; NULL when out of memory. */
static char *select_sql(void) {
  size_t cap = 64 + 24 * NCOLS, len = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  len += (size_t)snprintf(s, cap, "SELECT ");
  put_cols(s, cap, &len, ", ", COL_NAME);
  snprintf(s + len, cap - len, " FROM results ORDER BY id");
  return s;
}

static char *insert_sql(void) {
  size_t cap = 256 + 64 * NCOLS, len = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  len += (size_t)snprintf(s, cap, "INSERT INTO results(");
  put_cols(s, cap, &len, ", ", COL_NAME);
  len += (size_t)snprintf(s + len, cap - len, ") SELECT ");
  put_cols(s, cap, &len, ", ", COL_PARAM);
  len += (size_t)snprintf(s + len, cap - len, " WHERE NOT EXISTS (SELECT 1 FROM results WHERE ");
  put_cols(s, cap, &len, " AND ", COL_EQUAL);
  snprintf(s + len, cap - len, ")");
  return s;
}

/* Whether two paths name the same existing file. */
static bool same_file(const char *a, const char *b) {
  char ra[PATH_MAX], rb[PATH_MAX];
  return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

/* The schema version of an open file. */
static int user_version(db_handle *h) {
  sqlite3_stmt *st = NULL;
  int v = -1;
  if (sqlite3_prepare_v2(h->sq, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* Runs `pragma` (integrity_check or quick_check) on h: MMT_OK when it says "ok", else
 * MMT_ERR_DB_CORRUPT with its first complaint. */
static mmt_status integrity(db_handle *h, const char *pragma, ut_err *err) {
  sqlite3_stmt *st = NULL;
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA %s", pragma);
  int s = sqlite3_prepare_v2(h->sq, sql, -1, &st, NULL);
  if (s == SQLITE_OK) s = sqlite3_step(st);
  mmt_status rc = MMT_OK;
  if (s == SQLITE_ROW) {
    const char *verdict = (const char *)sqlite3_column_text(st, 0);
    if (!verdict || strcmp(verdict, "ok") != 0)
      rc = ut_fail(err, MMT_ERR_DB_CORRUPT, "database '%s' is damaged (%s: %s)", h->path, pragma,
                   verdict ? verdict : "no answer");
  } else {
    rc = db_sql_fail(h, s, "cannot check the integrity of", err);
  }
  sqlite3_finalize(st);
  return rc;
}

/* Opens source `path` read-only and checks it: an mmtune file of this schema or older
 * (db_open's refusals), intact (quick_check). */
static mmt_status open_source(const char *path, db_handle **out, ut_err *err) {
  mmt_status rc = db_open(path, true, out, err);
  if (rc == MMT_ERR_NOT_FOUND) return ut_fail(err, rc, "no database at '%s'", path);
  if (!rc) rc = integrity(*out, "quick_check", err);
  if (rc) {
    db_close(*out);
    *out = NULL;
  }
  return rc;
}

/* Copies src's rows and search times into dst (inside dst's open transaction). */
static mmt_status merge_one(db_handle *dst, db_handle *src, sqlite3_stmt *ins,
                            db_merge_stats *st, ut_err *err) {
  mmt_status rc = MMT_OK;
  sqlite3_stmt *sel = NULL, *ssel = NULL, *sadd = NULL;
  char *sql = select_sql();
  if (!sql) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  int s = sqlite3_prepare_v2(src->sq, sql, -1, &sel, NULL);
  free(sql);
  if (s != SQLITE_OK) return db_sql_fail(src, s, "cannot read the rows of", err);
  while ((s = sqlite3_step(sel)) == SQLITE_ROW) {
    for (int i = 0; i < NCOLS && s == SQLITE_ROW; i++)
      if (sqlite3_bind_value(ins, i + 1, sqlite3_column_value(sel, i)) != SQLITE_OK) s = SQLITE_ERROR;
    int is = s == SQLITE_ROW ? sqlite3_step(ins) : SQLITE_ERROR;
    sqlite3_reset(ins);
    if (is != SQLITE_DONE) {
      rc = db_sql_fail(dst, is, "cannot add a row to", err);
      break;
    }
    st->rows_read++;
    if (sqlite3_changes(dst->sq) > 0)
      st->rows_added++;
    else
      st->duplicates++;
  }
  if (!rc && s != SQLITE_DONE) rc = db_sql_fail(src, s, "cannot read the rows of", err);
  sqlite3_finalize(sel);
  if (rc || user_version(src) < 3) return rc; /* no searches table before schema 3 */
  s = sqlite3_prepare_v2(src->sq, k_search_select, -1, &ssel, NULL);
  if (s != SQLITE_OK) return db_sql_fail(src, s, "cannot read the search times of", err);
  s = sqlite3_prepare_v2(dst->sq, k_search_add, -1, &sadd, NULL);
  if (s != SQLITE_OK) {
    sqlite3_finalize(ssel);
    return db_sql_fail(dst, s, "cannot add search times to", err);
  }
  while ((s = sqlite3_step(ssel)) == SQLITE_ROW) {
    for (int i = 0; i < 9; i++) sqlite3_bind_value(sadd, i + 1, sqlite3_column_value(ssel, i));
    int as = sqlite3_step(sadd);
    sqlite3_reset(sadd);
    if (as != SQLITE_DONE) {
      rc = db_sql_fail(dst, as, "cannot add search times to", err);
      break;
    }
    st->searches++;
  }
  if (!rc && s != SQLITE_DONE) rc = db_sql_fail(src, s, "cannot read the search times of", err);
  sqlite3_finalize(ssel);
  sqlite3_finalize(sadd);
  return rc;
}

mmt_status db_merge(db_handle *dst, const char *const *srcs, int nsrcs, db_merge_stats *stats,
                    ut_err *err) {
  db_merge_stats st = {0};
  if (stats) *stats = st;
  if (!dst || (nsrcs > 0 && !srcs) || nsrcs < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_merge: bad arguments");
  if (dst->read_only)
    return ut_fail(err, MMT_ERR_DB, "cannot merge into '%s': opened readonly", dst->path);
  db_handle **h = calloc(nsrcs > 0 ? (size_t)nsrcs : 1, sizeof *h);
  if (!h) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  mmt_status rc = MMT_OK;
  /* Every source is checked before DST is touched: one refused leaves DST as it was. */
  for (int i = 0; i < nsrcs && !rc; i++) {
    if (!srcs[i] || !*srcs[i]) rc = ut_fail(err, MMT_ERR_INVALID_ARG, "an empty source path");
    else if (same_file(srcs[i], dst->path))
      rc = ut_fail(err, MMT_ERR_INVALID_ARG, "'%s' is both a source and the destination", srcs[i]);
    else rc = open_source(srcs[i], &h[i], err);
  }
  sqlite3_stmt *ins = NULL;
  char *sql = rc ? NULL : insert_sql();
  if (!rc && !sql) rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  if (!rc) {
    int s = sqlite3_prepare_v2(dst->sq, sql, -1, &ins, NULL);
    if (s != SQLITE_OK) rc = db_sql_fail(dst, s, "cannot prepare the merge into", err);
  }
  free(sql);
  /* One transaction over every source: all rows or none. */
  if (!rc) {
    int s = sqlite3_exec(dst->sq, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (s != SQLITE_OK) rc = db_sql_fail(dst, s, "cannot begin a transaction on", err);
    for (int i = 0; i < nsrcs && !rc; i++) {
      rc = merge_one(dst, h[i], ins, &st, err);
      if (rc) ut_err_prefix(err, "merging '%s'", srcs[i]);
    }
    if (!rc && (s = sqlite3_exec(dst->sq, "COMMIT", NULL, NULL, NULL)) != SQLITE_OK)
      rc = db_sql_fail(dst, s, "cannot commit the merge into", err);
    if (rc) db_rollback_after_error(dst, err);
  }
  sqlite3_finalize(ins);
  for (int i = 0; i < nsrcs; i++) db_close(h[i]);
  free(h);
  if (!rc && stats) *stats = st;
  return rc;
}

mmt_status db_check(const char *path, db_check_report *out, ut_err *err) {
  memset(out, 0, sizeof *out);
  db_handle *h = NULL;
  mmt_status rc = db_open(path, true, &h, err);
  if (rc == MMT_ERR_NOT_FOUND) return ut_fail(err, rc, "no database at '%s'", path);
  if (!rc) rc = integrity(h, "integrity_check", err);
  if (!rc) {
    out->schema_version = user_version(h);
    rc = db_count(h, NULL, &out->rows, err);
  }
  db_close(h);
  return rc;
}
