/*
 * db_export.c -- a database as something to ship: its rows as JSON text (db_export_json, read
 * back by db_import_json in db_merge.c) and a self-contained copy of the file (db_pack).  See
 * db.h.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db_internal.h"

/* s as a JSON string: quotes, backslashes and control characters escaped, UTF-8 as is. */
static void put_json_string(FILE *out, const unsigned char *s, int len) {
  fputc('"', out);
  for (int i = 0; s && i < len; i++) {
    if (s[i] == '"' || s[i] == '\\')
      fprintf(out, "\\%c", s[i]);
    else if (s[i] < 0x20)
      fprintf(out, "\\u%04x", s[i]);
    else
      fputc(s[i], out);
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
  default:
    put_json_string(out, sqlite3_column_text(st, i), sqlite3_column_bytes(st, i));
    break;
  }
}

/* Writes each row of st as an object of its columns' names, one a line; *rows counts them. */
static int put_json_rows(FILE *out, sqlite3_stmt *st, const char *(*col_name)(int), int n,
                         int64_t *rows) {
  int s;
  while ((s = sqlite3_step(st)) == SQLITE_ROW) {
    fputs(*rows ? ",\n    {" : "\n    {", out);
    for (int i = 0; i < n; i++) {
      fprintf(out, "%s\"%s\": ", i ? ", " : "", col_name(i));
      put_json_value(out, st, i);
    }
    fputc('}', out);
    ++*rows;
  }
  return s;
}

/* "SELECT c1, ..., cn FROM table WHERE ?1 IS NULL OR device_name = ?1 ORDER BY rowid" (a
 * search time of an older file without an origin: its origin column missing, n - 1). */
static void select_sql(char *sql, size_t cap, const char *(*col_name)(int), int n,
                       const char *table) {
  size_t len = (size_t)snprintf(sql, cap, "SELECT ");
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(sql + len, cap - len, "%s%s", i ? ", " : "", col_name(i));
  snprintf(sql + len, cap - len,
           " FROM %s WHERE ?1 IS NULL OR device_name = ?1 ORDER BY rowid", table);
}

/* Writes one list of the export: `name` and the rows of the table. */
static mmt_status put_list(db_handle *db, FILE *out, const char *device_name, const char *table,
                           const char *(*col_name)(int), int n, int64_t *rows, ut_err *err) {
  char sql[2048];
  sqlite3_stmt *st = NULL;
  select_sql(sql, sizeof sql, col_name, n, table);
  int s = sqlite3_prepare_v2(db->sq, sql, -1, &st, NULL);
  if (s == SQLITE_OK) s = sqlite3_bind_text(st, 1, device_name, -1, SQLITE_TRANSIENT);
  if (s == SQLITE_OK) s = put_json_rows(out, st, col_name, n, rows);
  sqlite3_finalize(st);
  if (s != SQLITE_DONE) return db_sql_fail(db, s, "cannot read the rows of", err);
  fputs(*rows ? "\n  ]" : "]", out);
  return MMT_OK;
}

mmt_status db_export_json(db_handle *db, const char *device_name, FILE *out, int64_t *rows,
                          ut_err *err) {
  int64_t nrows = 0, nsearch = 0;
  if (rows) *rows = 0;
  if (!db || !out) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_export_json: NULL argument");
  fprintf(out, "{\"format\": \"mmtune-results\", \"version\": %d,\n  \"results\": [",
          DB_EXPORT_VERSION);
  mmt_status rc = put_list(db, out, device_name, "results", db_col_name, DB_NCOLS, &nrows, err);
  if (!rc) fputs(",\n  \"searches\": [", out);
  /* no search times before schema 3; no origins before 5: a reader names those by content */
  if (!rc && db->schema_version >= 5)
    rc = put_list(db, out, device_name, "searches", db_search_col_name, DB_SEARCH_NCOLS,
                  &nsearch, err);
  else if (!rc && db->schema_version >= 3)
    rc = put_list(db, out, device_name, "searches", db_search_col_name, DB_SEARCH_NCOLS - 1,
                  &nsearch, err);
  else if (!rc)
    fputs("]", out);
  if (rc) return rc;
  fputs("\n}\n", out);
  if (fflush(out) != 0 || ferror(out))
    return ut_fail(err, MMT_ERR_IO, "cannot write the export: %s", strerror(errno));
  if (rows) *rows = nrows;
  return MMT_OK;
}

/* ---- a file that reads anywhere -------------------------------------------------------------- */

mmt_status db_pack(const char *path, const char *out_path, ut_err *err) {
  if (!path || !*path || !out_path || !*out_path)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_pack: empty path");
  char tmp[PATH_MAX + 32];
  if (snprintf(tmp, sizeof tmp, "%s.pack-%ld", out_path, (long)getpid()) >= (int)sizeof tmp)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_pack: path too long: '%s'", out_path);
  struct stat a, b;
  if (stat(path, &a) == 0 && stat(out_path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_pack: '%s' is the database itself", out_path);
  db_handle *db = NULL, *copy = NULL;
  sqlite3_stmt *st = NULL;
  db_check_report rep;
  /* what is shipped is checked as merge checks a file from elsewhere */
  mmt_status rc = db_check(path, NULL, &rep, err);
  if (!rc) rc = db_open(path, true, &db, err);
  /* an older file is copied as it is, then upgraded below as the copy is opened for writing */
  if (!rc) rc = db_drop_read_views(db, err);
  /* VACUUM INTO writes a compacted copy in one read transaction; its file is then switched to
   * a rollback journal, which a reader of a read-only folder needs no side file for. */
  int s = rc ? SQLITE_OK : sqlite3_prepare_v2(db->sq, "VACUUM main INTO ?1", -1, &st, NULL);
  if (!rc && s == SQLITE_OK) s = sqlite3_bind_text(st, 1, tmp, -1, SQLITE_STATIC);
  if (!rc && s == SQLITE_OK && (s = sqlite3_step(st)) == SQLITE_DONE) s = SQLITE_OK;
  if (!rc && s != SQLITE_OK) rc = db_sql_fail(db, s, "cannot copy", err);
  sqlite3_finalize(st);
  db_close(db);
  if (!rc) rc = db_open(tmp, false, &copy, err);
  if (!rc) {
    s = sqlite3_exec(copy->sq, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL);
    if (s != SQLITE_OK) rc = db_sql_fail(copy, s, "cannot leave WAL mode in", err);
  }
  db_close(copy);
  if (!rc && rename(tmp, out_path) != 0)
    rc = ut_fail(err, MMT_ERR_IO, "cannot write '%s': %s", out_path, strerror(errno));
  if (rc) db_remove_files(tmp);
  return rc;
}
