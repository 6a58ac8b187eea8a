/*
 * db_merge.c -- combining result files (db_merge) and checking one (db_check): what a team or
 * a cluster's shards need to gather their measurements into the database an application
 * ships.  See db.h.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
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
/* Each column's kind in an export: 'T' text, 'I' integer, 'R' real (null where NaN). */
static const char k_kinds[] = "TTIIIITTTTTTIIITTRRRIRRRIIIIIIIII";
_Static_assert(sizeof k_kinds - 1 == NCOLS, "a kind per column");

/* The search-time columns (schema 3 on); the first seven are the table's key. */
static const char *const k_search_cols[] = {"device_name", "dtype", "layout", "m", "n", "k",
                                            "candidates", "seconds", "updated_at"};
static const char k_search_kinds[] = "TTTIIITRI";
static const char k_search_select[] =
    "SELECT device_name, dtype, layout, m, n, k, candidates, seconds, updated_at FROM searches";
/* The same search's times: added (independent runs), or the larger kept (a file that started
 * as a copy of the destination holds the destination's time plus its own). */
#define SEARCH_UPSERT(combine)                                                                 \
  "INSERT INTO searches(device_name, dtype, layout, m, n, k, candidates, seconds, updated_at)\n" \
  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)\n"                                               \
  "ON CONFLICT (device_name, dtype, layout, m, n, k, candidates) DO UPDATE SET\n"               \
  "  seconds = " combine ", updated_at = max(updated_at, excluded.updated_at)"
static const char k_search_add[] = SEARCH_UPSERT("seconds + excluded.seconds");
static const char k_search_max[] = SEARCH_UPSERT("max(seconds, excluded.seconds)");

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

/* Steps the bound duplicate-skipping insert and counts the row. */
static mmt_status insert_bound(db_handle *dst, sqlite3_stmt *ins, db_merge_stats *st, ut_err *err) {
  int s = sqlite3_step(ins);
  sqlite3_reset(ins);
  sqlite3_clear_bindings(ins);
  if (s != SQLITE_DONE) return db_sql_fail(dst, s, "cannot add a row to", err);
  st->rows_read++;
  if (sqlite3_changes(dst->sq) > 0)
    st->rows_added++;
  else
    st->duplicates++;
  return MMT_OK;
}

/* Copies src's rows and search times into dst (inside dst's open transaction). */
static mmt_status merge_one(db_handle *dst, db_handle *src, sqlite3_stmt *ins, bool add_times,
                            db_merge_stats *st, ut_err *err) {
  mmt_status rc = MMT_OK;
  sqlite3_stmt *sel = NULL, *ssel = NULL, *sadd = NULL;
  char *sql = select_sql();
  if (!sql) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  int s = sqlite3_prepare_v2(src->sq, sql, -1, &sel, NULL);
  free(sql);
  if (s != SQLITE_OK) return db_sql_fail(src, s, "cannot read the rows of", err);
  while ((s = sqlite3_step(sel)) == SQLITE_ROW) {
    for (int i = 0; i < NCOLS; i++) sqlite3_bind_value(ins, i + 1, sqlite3_column_value(sel, i));
    if ((rc = insert_bound(dst, ins, st, err))) break;
  }
  if (!rc && s != SQLITE_DONE) rc = db_sql_fail(src, s, "cannot read the rows of", err);
  sqlite3_finalize(sel);
  if (rc || user_version(src) < 3) return rc; /* no searches table before schema 3 */
  s = sqlite3_prepare_v2(src->sq, k_search_select, -1, &ssel, NULL);
  if (s != SQLITE_OK) return db_sql_fail(src, s, "cannot read the search times of", err);
  s = sqlite3_prepare_v2(dst->sq, add_times ? k_search_add : k_search_max, -1, &sadd, NULL);
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

static mmt_status merge(db_handle *dst, const char *const *srcs, int nsrcs, bool add_times,
                        db_merge_stats *stats, ut_err *err) {
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
      rc = merge_one(dst, h[i], ins, add_times, &st, err);
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

mmt_status db_merge(db_handle *dst, const char *const *srcs, int nsrcs, db_merge_stats *stats,
                    ut_err *err) {
  return merge(dst, srcs, nsrcs, true, stats, err);
}

mmt_status db_merge_copies(db_handle *dst, const char *const *srcs, int nsrcs,
                           db_merge_stats *stats, ut_err *err) {
  return merge(dst, srcs, nsrcs, false, stats, err);
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

/* ---- export and import as JSON ------------------------------------------------------------ */

/* s as a JSON string: quotes, backslashes and control characters escaped, UTF-8 as is. */
static void put_json_string(FILE *out, const unsigned char *s) {
  fputc('"', out);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(out, "\\%c", *s);
    else if (*s < 0x20)
      fprintf(out, "\\u%04x", *s);
    else
      fputc(*s, out);
  }
  fputc('"', out);
}

/* Column i of st's row as a JSON value (null, an integer, a double that reads back the same
 * bits, a string). */
static void put_json_value(FILE *out, sqlite3_stmt *st, int i) {
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_NULL: fputs("null", out); break;
  case SQLITE_INTEGER: fprintf(out, "%lld", (long long)sqlite3_column_int64(st, i)); break;
  case SQLITE_FLOAT: {
    /* an infinity (a zero-time row's TFLOP/s) as a number that reads back as one */
    const double v = sqlite3_column_double(st, i);
    if (isinf(v)) fputs(v > 0 ? "1e999" : "-1e999", out);
    else fprintf(out, "%.17g", v);
    break;
  }
  default: put_json_string(out, sqlite3_column_text(st, i)); break;
  }
}

/* Writes each row of st as an object of names[], one a line after `lead`; *rows counts them. */
static int put_json_rows(FILE *out, sqlite3_stmt *st, const char *const *names, int n,
                         int64_t *rows) {
  int s;
  while ((s = sqlite3_step(st)) == SQLITE_ROW) {
    fputs(*rows ? ",\n    {" : "\n    {", out);
    for (int i = 0; i < n; i++) {
      fprintf(out, "%s\"%s\": ", i ? ", " : "", names[i]);
      put_json_value(out, st, i);
    }
    fputc('}', out);
    ++*rows;
  }
  return s;
}

mmt_status db_export_json(db_handle *db, const char *device_name, FILE *out, int64_t *rows,
                          ut_err *err) {
  int64_t nrows = 0, nsearch = 0;
  if (rows) *rows = 0;
  if (!db || !out) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_export_json: NULL argument");
  char *cols = select_sql();
  char sql[1024];
  if (!cols) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  /* "... FROM results ORDER BY id" with the device filter before the order */
  char *order = strstr(cols, " ORDER BY id");
  *order = '\0';
  snprintf(sql, sizeof sql, "%s WHERE ?1 IS NULL OR device_name = ?1 ORDER BY id", cols);
  free(cols);
  sqlite3_stmt *st = NULL;
  int s = sqlite3_prepare_v2(db->sq, sql, -1, &st, NULL);
  if (s != SQLITE_OK) return db_sql_fail(db, s, "cannot read the rows of", err);
  sqlite3_bind_text(st, 1, device_name, -1, SQLITE_TRANSIENT);
  fprintf(out, "{\"format\": \"mmtune-results\", \"version\": %d,\n  \"results\": [",
          DB_EXPORT_VERSION);
  s = put_json_rows(out, st, k_cols, NCOLS, &nrows);
  sqlite3_finalize(st);
  if (s != SQLITE_DONE) return db_sql_fail(db, s, "cannot read the rows of", err);
  fputs(nrows ? "\n  ],\n  \"searches\": [" : "],\n  \"searches\": [", out);
  if (user_version(db) >= 3) { /* no search times before schema 3 */
    snprintf(sql, sizeof sql, "%s WHERE ?1 IS NULL OR device_name = ?1", k_search_select);
    s = sqlite3_prepare_v2(db->sq, sql, -1, &st, NULL);
    if (s != SQLITE_OK) return db_sql_fail(db, s, "cannot read the search times of", err);
    sqlite3_bind_text(st, 1, device_name, -1, SQLITE_TRANSIENT);
    s = put_json_rows(out, st, k_search_cols, 9, &nsearch);
    sqlite3_finalize(st);
    if (s != SQLITE_DONE) return db_sql_fail(db, s, "cannot read the search times of", err);
  }
  fputs(nsearch ? "\n  ]\n}\n" : "]\n}\n", out);
  if (fflush(out) != 0 || ferror(out))
    return ut_fail(err, MMT_ERR_IO, "cannot write the export: %s", strerror(errno));
  if (rows) *rows = nrows;
  return MMT_OK;
}

/* Binds object obj's value of each of names[] (kinds as k_kinds) to st: refuses a missing,
 * unknown or mistyped column, naming `what` (e.g. "results[3]"). */
static mmt_status bind_object(sqlite3_stmt *st, const db_json *obj, const char *const *names,
                              const char *kinds, int n, const char *what, ut_err *err) {
  if (obj->type != DB_JSON_OBJECT) return ut_fail(err, MMT_ERR_INVALID_ARG, "%s is not an object", what);
  for (int k = 0; k < obj->n; k++) {
    int i = 0;
    while (i < n && strcmp(names[i], obj->keys[k]) != 0) i++;
    if (i == n)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s: unknown column '%s'", what, obj->keys[k]);
  }
  for (int i = 0; i < n; i++) {
    const db_json *v = db_json_get(obj, names[i]);
    const char kind = kinds[i];
    bool ok = v != NULL;
    if (ok && kind == 'T') ok = v->type == DB_JSON_STRING;
    if (ok && kind == 'I') ok = v->type == DB_JSON_NUMBER && !strpbrk(v->text, ".eE");
    if (ok && kind == 'R') ok = v->type == DB_JSON_NUMBER || v->type == DB_JSON_NULL;
    if (ok && !strcmp(names[i], "status")) ok = db_status_parse(v->text) >= 0;
    if (!ok)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s: column '%s' %s", what, names[i],
                     !v ? "is missing"
                     : !strcmp(names[i], "status") && v->type == DB_JSON_STRING
                         ? "is not a status mmtune knows"
                     : kind == 'T' ? "is not a string"
                     : kind == 'I' ? "is not an integer" : "is not a number or null");
    if (v->type == DB_JSON_NULL) sqlite3_bind_null(st, i + 1);
    else if (kind == 'T') sqlite3_bind_text(st, i + 1, v->text, -1, SQLITE_STATIC);
    else if (kind == 'I') sqlite3_bind_int64(st, i + 1, strtoll(v->text, NULL, 10));
    else sqlite3_bind_double(st, i + 1, strtod(v->text, NULL));
  }
  return MMT_OK;
}

/* The document's header and its two lists. */
static mmt_status import_header(const db_json *doc, const db_json **results,
                                const db_json **searches, ut_err *err) {
  const db_json *format = db_json_get(doc, "format"), *version = db_json_get(doc, "version");
  if (!format || format->type != DB_JSON_STRING || strcmp(format->text, "mmtune-results") != 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "not an mmtune export (its \"format\" is not \"mmtune-results\")");
  if (!version || version->type != DB_JSON_NUMBER || strpbrk(version->text, ".eE-"))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "an mmtune export without a version");
  if (strtoll(version->text, NULL, 10) > DB_EXPORT_VERSION)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "export version %s is newer than this mmtune reads (%d)", version->text,
                   DB_EXPORT_VERSION);
  *results = db_json_get(doc, "results");
  *searches = db_json_get(doc, "searches");
  if (!*results || (*results)->type != DB_JSON_ARRAY)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "an mmtune export without a \"results\" list");
  if (*searches && (*searches)->type != DB_JSON_ARRAY)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "\"searches\" is not a list");
  return MMT_OK;
}

/* Inserts the document's rows and search times (inside dst's open transaction). */
static mmt_status import_rows(db_handle *dst, const db_json *results, const db_json *searches,
                              db_merge_stats *st, ut_err *err) {
  sqlite3_stmt *ins = NULL, *sadd = NULL;
  char *sql = insert_sql();
  if (!sql) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  int s = sqlite3_prepare_v2(dst->sq, sql, -1, &ins, NULL);
  free(sql);
  if (s == SQLITE_OK) s = sqlite3_prepare_v2(dst->sq, k_search_add, -1, &sadd, NULL);
  mmt_status rc = s == SQLITE_OK ? MMT_OK : db_sql_fail(dst, s, "cannot prepare the import into", err);
  char what[48];
  for (int i = 0; i < results->n && !rc; i++) {
    snprintf(what, sizeof what, "results[%d]", i);
    rc = bind_object(ins, &results->items[i], k_cols, k_kinds, NCOLS, what, err);
    if (!rc) rc = insert_bound(dst, ins, st, err);
    if (rc) sqlite3_reset(ins);
  }
  for (int i = 0; searches && i < searches->n && !rc; i++) {
    snprintf(what, sizeof what, "searches[%d]", i);
    rc = bind_object(sadd, &searches->items[i], k_search_cols, k_search_kinds, 9, what, err);
    if (!rc && (s = sqlite3_step(sadd)) != SQLITE_DONE)
      rc = db_sql_fail(dst, s, "cannot add search times to", err);
    sqlite3_reset(sadd);
    if (!rc) st->searches++;
  }
  sqlite3_finalize(ins);
  sqlite3_finalize(sadd);
  return rc;
}

mmt_status db_import_json(db_handle *dst, const char *text, db_merge_stats *stats, ut_err *err) {
  db_merge_stats st = {0};
  if (stats) *stats = st;
  if (!dst || !text) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_import_json: NULL argument");
  if (dst->read_only)
    return ut_fail(err, MMT_ERR_DB, "cannot import into '%s': opened readonly", dst->path);
  db_json doc;
  char why[128];
  if (!db_json_parse(text, &doc, why, sizeof why))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "not JSON: %s", why);
  const db_json *results = NULL, *searches = NULL;
  mmt_status rc = import_header(&doc, &results, &searches, err);
  if (!rc) {
    int s = sqlite3_exec(dst->sq, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (s != SQLITE_OK) rc = db_sql_fail(dst, s, "cannot begin a transaction on", err);
    if (!rc) rc = import_rows(dst, results, searches, &st, err);
    if (!rc && (s = sqlite3_exec(dst->sq, "COMMIT", NULL, NULL, NULL)) != SQLITE_OK)
      rc = db_sql_fail(dst, s, "cannot commit the import into", err);
    if (rc) db_rollback_after_error(dst, err);
  }
  db_json_free(&doc);
  if (!rc && stats) *stats = st;
  return rc;
}
