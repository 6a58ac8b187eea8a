/*
 * db_merge.c -- rows from elsewhere into a database: merging files (db_merge), importing an
 * export (db_import_json) and checking a file (db_check).  See db.h.
 *
 * Every source is read twice.  The first pass checks each row (db_row.c) and writes nothing;
 * only when every row of every source has passed is the destination opened (created,
 * upgraded) and the second pass copies the rows in one transaction.  So a refused input never
 * touches the destination, and a destination created for a copy that then fails is removed.
 * A source file is read inside one read transaction, so both passes see the same rows.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db_internal.h"

/* A source of rows: a database file or an export's text. */
typedef struct {
  const char *name; /* the path, or the export's name, for messages */
  db_handle *db;    /* a file: opened read-only, inside a read transaction */
  const char *text; /* an export: text[0..len) */
  size_t len;
} source;

/* Where checked rows go: nowhere in the first pass (dst NULL), into dst in the second. */
typedef struct {
  db_handle *dst;
  sqlite3_stmt *ins, *sadd;
  const db_row_policy *pol;
  mmt_status refusal; /* a bad row's status: MMT_ERR_DB_CORRUPT in a file, INVALID_ARG in JSON */
  db_merge_stats st;
  ut_err *err;
} sink;

/* The search-time upsert: one origin's time is the larger of two copies of it, so the same
 * rows merged twice change nothing (and count as nothing: the WHERE skips equal ones). */
static const char k_search_upsert[] =
    "INSERT INTO searches(device_name, dtype, layout, m, n, k, op, batch, candidates, seconds,"
    " updated_at, origin) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
    " ON CONFLICT (device_name, dtype, layout, m, n, k, op, batch, candidates, origin)"
    " DO UPDATE SET seconds = max(seconds, excluded.seconds),"
    " updated_at = max(updated_at, excluded.updated_at)"
    " WHERE excluded.seconds > seconds OR excluded.updated_at > updated_at";

/* "INSERT INTO results(c1, ...) SELECT ?1, ... WHERE NOT EXISTS (a row with c1 IS ?1 AND
 * ...)": a row equal in every column but id (NULLs included) is dropped.  Owned; NULL when
 * out of memory. */
static char *insert_sql(void) {
  size_t cap = 256 + 64 * DB_NCOLS, len = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  len += (size_t)snprintf(s, cap, "INSERT INTO results(");
  for (int i = 0; i < DB_NCOLS; i++)
    len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? ", " : "", db_col_name(i));
  len += (size_t)snprintf(s + len, cap - len, ") SELECT ");
  for (int i = 0; i < DB_NCOLS; i++)
    len += (size_t)snprintf(s + len, cap - len, "%s?%d", i ? ", " : "", i + 1);
  len += (size_t)snprintf(s + len, cap - len, " WHERE NOT EXISTS (SELECT 1 FROM results WHERE ");
  for (int i = 0; i < DB_NCOLS; i++)
    len += (size_t)snprintf(s + len, cap - len, "%s%s IS ?%d", i ? " AND " : "", db_col_name(i),
                            i + 1);
  snprintf(s + len, cap - len, ")");
  return s;
}

/* ---- one row --------------------------------------------------------------------------------- */

static mmt_status take_result(sink *k, const db_cell cells[DB_NCOLS], const char *where) {
  db_result r;
  char why[256];
  if (!db_row_take(cells, k->pol, &r, why, sizeof why))
    return ut_fail(k->err, k->refusal, "%s: %s", where, why);
  k->st.rows_read++;
  if (!k->dst) return MMT_OK;
  int s = db_bind_result(k->ins, &r);
  if (s == SQLITE_OK) s = sqlite3_step(k->ins);
  sqlite3_reset(k->ins);
  sqlite3_clear_bindings(k->ins);
  if (s != SQLITE_DONE) return db_sql_fail(k->dst, s, "cannot add a row to", k->err);
  if (sqlite3_changes(k->dst->sq) > 0) k->st.rows_added++;
  else k->st.duplicates++;
  return MMT_OK;
}

/* An origin for a search time that came without one (schema 3 and 4 files, version 1
 * exports): named by its content, so the same entry merged twice is one origin's.  Such a
 * time is a plain GEMM's, so op and batch stay out of the name (as before schema 7). */
static void content_origin(db_search_row *r) {
  uint64_t h = 0xcbf29ce484222325ULL;
  char text[DB_CANDIDATES_MAX + 256];
  int n = snprintf(text, sizeof text, "%s|%s|%s|%lld|%lld|%lld|%s|%.17g|%lld", r->device_name,
                   r->dtype, r->layout, (long long)r->m, (long long)r->n, (long long)r->k,
                   r->candidates, r->seconds, (long long)r->updated_at);
  for (int i = 0; i < n && i < (int)sizeof text; i++)
    h = (h ^ (unsigned char)text[i]) * 0x100000001b3ULL;
  snprintf(r->origin, sizeof r->origin, "l%016llx", (unsigned long long)h);
}

static mmt_status take_search(sink *k, db_cell cells[DB_SEARCH_NCOLS], const char *where) {
  db_search_row r;
  char why[256];
  const bool legacy = cells[DB_SEARCH_NCOLS - 1].type == DB_CELL_MISSING;
  if (legacy) cells[DB_SEARCH_NCOLS - 1] = (db_cell){.type = DB_CELL_TEXT, .text = "l", .len = 1};
  if (!db_search_take(cells, k->pol, &r, why, sizeof why))
    return ut_fail(k->err, k->refusal, "%s: %s", where, why);
  if (legacy) content_origin(&r);
  if (!k->dst) return MMT_OK;
  sqlite3_stmt *st = k->sadd;
  int s = sqlite3_bind_text(st, 1, r.device_name, -1, SQLITE_STATIC);
  if (s == SQLITE_OK) s = sqlite3_bind_text(st, 2, r.dtype, -1, SQLITE_STATIC);
  if (s == SQLITE_OK) s = sqlite3_bind_text(st, 3, r.layout, -1, SQLITE_STATIC);
  if (s == SQLITE_OK) s = sqlite3_bind_int64(st, 4, r.m);
  if (s == SQLITE_OK) s = sqlite3_bind_int64(st, 5, r.n);
  if (s == SQLITE_OK) s = sqlite3_bind_int64(st, 6, r.k);
  if (s == SQLITE_OK) s = sqlite3_bind_text(st, 7, r.op, -1, SQLITE_STATIC);
  if (s == SQLITE_OK) s = sqlite3_bind_int64(st, 8, r.batch);
  if (s == SQLITE_OK) s = sqlite3_bind_text(st, 9, r.candidates, -1, SQLITE_STATIC);
  if (s == SQLITE_OK) s = sqlite3_bind_double(st, 10, r.seconds);
  if (s == SQLITE_OK) s = sqlite3_bind_int64(st, 11, r.updated_at);
  if (s == SQLITE_OK) s = sqlite3_bind_text(st, 12, r.origin, -1, SQLITE_STATIC);
  if (s == SQLITE_OK) s = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (s != SQLITE_DONE) return db_sql_fail(k->dst, s, "cannot add search times to", k->err);
  if (sqlite3_changes(k->dst->sq) > 0) k->st.searches++;
  return MMT_OK;
}

/* ---- a database file ------------------------------------------------------------------------- */

/* Steps `sql` (the rowid, then the columns) on the source, handing each row's first n
 * columns as cells to take_result (ncells DB_NCOLS) or take_search (the searches of an older
 * file lack the last one, the origin: MISSING). */
static mmt_status walk_table(sink *k, const source *src, const char *sql, int n, int ncells,
                             const char *table) {
  sqlite3_stmt *sel = NULL;
  int s = sqlite3_prepare_v2(src->db->sq, sql, -1, &sel, NULL);
  if (s != SQLITE_OK) return db_sql_fail(src->db, s, "cannot read", k->err);
  mmt_status rc = MMT_OK;
  db_cell cells[DB_NCOLS + 1];
  char where[4200];
  while (!rc && (s = sqlite3_step(sel)) == SQLITE_ROW) {
    for (int i = 0; i < ncells; i++) {
      if (i < n) db_cell_of_column(sel, i + 1, &cells[i]);
      else cells[i] = (db_cell){.type = DB_CELL_MISSING};
    }
    snprintf(where, sizeof where, "database '%s' is damaged: %s row %lld", src->name, table,
             (long long)sqlite3_column_int64(sel, 0));
    rc = ncells == DB_NCOLS ? take_result(k, cells, where) : take_search(k, cells, where);
  }
  if (!rc && s != SQLITE_DONE) rc = db_sql_fail(src->db, s, "cannot read", k->err);
  sqlite3_finalize(sel);
  return rc;
}

static mmt_status walk_file(sink *k, const source *src) {
  char sql[2048];
  size_t len = (size_t)snprintf(sql, sizeof sql, "SELECT id");
  for (int i = 0; i < DB_NCOLS; i++)
    len += (size_t)snprintf(sql + len, sizeof sql - len, ", %s", db_col_name(i));
  snprintf(sql + len, sizeof sql - len, " FROM results ORDER BY id");
  mmt_status rc = walk_table(k, src, sql, DB_NCOLS, DB_NCOLS, "results");
  int version = src->db->schema_version;
  if (rc || version < 3) return rc; /* no search times before schema 3 */
  /* the rowid first, as for results (a WITHOUT ROWID table would not have one: never ours) */
  len = (size_t)snprintf(sql, sizeof sql, "SELECT rowid");
  int n = version >= 5 ? DB_SEARCH_NCOLS : DB_SEARCH_NCOLS - 1; /* origin from schema 5 */
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(sql + len, sizeof sql - len, ", %s", db_search_col_name(i));
  snprintf(sql + len, sizeof sql - len, " FROM searches ORDER BY rowid");
  return walk_table(k, src, sql, n, DB_SEARCH_NCOLS, "searches");
}

/* Opens a source file read-only and checks it whole (SQLite's integrity check), then starts
 * the read transaction both passes read in. */
static mmt_status open_source(const char *path, db_handle **out, ut_err *err) {
  mmt_status rc = db_open(path, true, out, err);
  if (rc == MMT_ERR_NOT_FOUND) return ut_fail(err, rc, "no database at '%s'", path);
  if (!rc) rc = db_integrity(*out, "integrity_check", err);
  if (!rc) {
    int s = sqlite3_exec((*out)->sq, "BEGIN", NULL, NULL, NULL);
    if (s != SQLITE_OK) rc = db_sql_fail(*out, s, "cannot read", err);
  }
  if (rc) {
    db_close(*out);
    *out = NULL;
  }
  return rc;
}

/* ---- an export ------------------------------------------------------------------------------- */

typedef struct {
  sink *k;
  int version; /* the export's; 0 until its header has been read */
  mmt_status rc;
} json_walk;

/* The export's "format" and "version", which must come before its lists. */
static mmt_status json_header(const db_json *top, int *version, ut_err *err) {
  const db_json *format = db_json_get(top, "format"), *v = db_json_get(top, "version");
  if (!format || format->type != DB_JSON_STRING || strcmp(format->text, "mmtune-results") != 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "not an mmtune export (it does not start with \"format\": \"mmtune-results\")");
  if (!v || v->type != DB_JSON_NUMBER || strpbrk(v->text, ".eE-") || strlen(v->text) > 9)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "an mmtune export without a version");
  *version = atoi(v->text);
  if (*version < 1 || *version > DB_EXPORT_VERSION)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "export version %s is %s than this mmtune reads (%d)",
                   v->text, *version < 1 ? "older" : "newer", DB_EXPORT_VERSION);
  return MMT_OK;
}

/* The cells of object item by the column names; an unknown member refused. */
static mmt_status json_cells(const db_json *item, const char *(*col_name)(int), int n,
                             db_cell *cells, const char *where, ut_err *err) {
  if (item->type != DB_JSON_OBJECT)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s is not an object", where);
  for (int j = 0; j < item->n; j++) {
    int i = 0;
    while (i < n && strcmp(col_name(i), item->keys[j]) != 0) i++;
    if (i == n)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s: unknown column '%s'", where, item->keys[j]);
  }
  for (int i = 0; i < n; i++) db_cell_of_json(db_json_get(item, col_name(i)), &cells[i]);
  return MMT_OK;
}

static bool json_item(const char *list, int index, const db_json *item, const db_json *top,
                      void *user) {
  json_walk *w = user;
  ut_err *err = w->k->err;
  char where[96];
  db_cell cells[DB_NCOLS];
  if (!w->version && (w->rc = json_header(top, &w->version, err))) return false;
  snprintf(where, sizeof where, "%.20s[%d]", list, index);
  if (!strcmp(list, "results")) {
    w->rc = json_cells(item, db_col_name, DB_NCOLS, cells, where, err);
    if (!w->rc) w->rc = take_result(w->k, cells, where);
  } else if (!strcmp(list, "searches")) {
    /* version 1 has no origins: its times are named by their content */
    int n = w->version >= 2 ? DB_SEARCH_NCOLS : DB_SEARCH_NCOLS - 1;
    w->rc = json_cells(item, db_search_col_name, n, cells, where, err);
    if (!w->rc && n < DB_SEARCH_NCOLS) cells[n] = (db_cell){.type = DB_CELL_MISSING};
    if (!w->rc) w->rc = take_search(w->k, cells, where);
  } else {
    w->rc = ut_fail(err, MMT_ERR_INVALID_ARG, "unknown member \"%.40s\" in an mmtune export", list);
  }
  return !w->rc;
}

static mmt_status walk_json(sink *k, const source *src) {
  json_walk w = {.k = k};
  db_json top;
  char why[128];
  if (!db_json_stream(src->text, src->len, &top, json_item, &w, why, sizeof why))
    return w.rc ? w.rc : ut_fail(k->err, MMT_ERR_INVALID_ARG, "not JSON: %s", why);
  mmt_status rc = w.version ? MMT_OK : json_header(&top, &w.version, k->err);
  for (int i = 0; !rc && i < top.n; i++) {
    const char *key = top.keys[i];
    if (top.items[i].type == DB_JSON_ARRAY) {
      if (strcmp(key, "results") && strcmp(key, "searches"))
        rc = ut_fail(k->err, MMT_ERR_INVALID_ARG, "unknown member \"%.40s\" in an mmtune export",
                     key);
    } else if (strcmp(key, "format") && strcmp(key, "version")) {
      rc = ut_fail(k->err, MMT_ERR_INVALID_ARG, "unknown member \"%.40s\" in an mmtune export",
                   key);
    }
  }
  const db_json *results = db_json_get(&top, "results");
  if (!rc && (!results || results->type != DB_JSON_ARRAY))
    rc = ut_fail(k->err, MMT_ERR_INVALID_ARG, "an mmtune export without a \"results\" list");
  db_json_free(&top);
  return rc;
}

/* ---- the two passes -------------------------------------------------------------------------- */

static mmt_status walk(sink *k, const source *src) {
  mmt_status rc = src->db ? walk_file(k, src) : walk_json(k, src);
  if (rc && src->db && k->dst) ut_err_prefix(k->err, "merging '%s'", src->name);
  return rc;
}

/* The second pass: dst opened (created when missing), every source's rows in one
 * transaction. */
static mmt_status copy_into(const char *dst_path, const source *srcs, int n, sink *k) {
  struct stat before;
  const bool existed = stat(dst_path, &before) == 0;
  ut_err *err = k->err;
  mmt_status rc = db_open(dst_path, false, &k->dst, err);
  char *sql = rc ? NULL : insert_sql();
  if (!rc && !sql) rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  int s = rc ? SQLITE_OK : sqlite3_prepare_v2(k->dst->sq, sql, -1, &k->ins, NULL);
  if (!rc && s == SQLITE_OK) s = sqlite3_prepare_v2(k->dst->sq, k_search_upsert, -1, &k->sadd, NULL);
  if (!rc && s == SQLITE_OK) s = sqlite3_exec(k->dst->sq, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (!rc && s != SQLITE_OK) rc = db_sql_fail(k->dst, s, "cannot begin the merge into", err);
  free(sql);
  k->st = (db_merge_stats){0};
  for (int i = 0; i < n && !rc; i++) rc = walk(k, &srcs[i]);
  if (!rc && (s = sqlite3_exec(k->dst->sq, "COMMIT", NULL, NULL, NULL)) != SQLITE_OK)
    rc = db_sql_fail(k->dst, s, "cannot commit the merge into", err);
  if (rc && k->dst) db_rollback_after_error(k->dst, err);
  sqlite3_finalize(k->ins);
  sqlite3_finalize(k->sadd);
  db_close(k->dst);
  k->dst = NULL;
  if (rc && !existed) db_remove_files(dst_path);
  return rc;
}

/* Checks every source (first pass), then copies them into dst_path (second). */
static mmt_status merge_sources(const char *dst_path, const source *srcs, int n,
                                const db_row_policy *pol, db_merge_stats *stats, ut_err *err) {
  sink k = {.pol = pol, .err = err};
  mmt_status rc = MMT_OK;
  for (int i = 0; i < n && !rc; i++) {
    k.refusal = srcs[i].db ? MMT_ERR_DB_CORRUPT : MMT_ERR_INVALID_ARG;
    rc = walk(&k, &srcs[i]);
  }
  if (!rc) rc = copy_into(dst_path, srcs, n, &k);
  if (!rc && stats) *stats = k.st;
  return rc;
}

/* ---- entry points ---------------------------------------------------------------------------- */

static mmt_status dst_arg(const char *dst_path, db_merge_stats *stats, const char *fn,
                          ut_err *err) {
  if (stats) *stats = (db_merge_stats){0};
  if (!dst_path || !*dst_path)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s: no destination database", fn);
  return MMT_OK;
}

mmt_status db_merge(const char *dst_path, const char *const *srcs, int nsrcs,
                    const db_row_policy *pol, db_merge_stats *stats, ut_err *err) {
  mmt_status rc = dst_arg(dst_path, stats, "db_merge", err);
  if (rc) return rc;
  if (nsrcs < 0 || (nsrcs > 0 && !srcs))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "db_merge: bad source list");
  source *src = calloc(nsrcs > 0 ? (size_t)nsrcs : 1, sizeof *src);
  if (!src) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  struct stat dst_st, src_st;
  const bool dst_exists = stat(dst_path, &dst_st) == 0;
  for (int i = 0; i < nsrcs && !rc; i++) {
    src[i].name = srcs[i];
    if (!srcs[i] || !*srcs[i]) rc = ut_fail(err, MMT_ERR_INVALID_ARG, "an empty source path");
    /* the same file under another name, a link among them, is still the destination */
    else if (dst_exists && stat(srcs[i], &src_st) == 0 && src_st.st_dev == dst_st.st_dev &&
             src_st.st_ino == dst_st.st_ino)
      rc = ut_fail(err, MMT_ERR_INVALID_ARG, "'%s' is both a source and the destination", srcs[i]);
    else rc = open_source(srcs[i], &src[i].db, err);
  }
  if (!rc) rc = merge_sources(dst_path, src, nsrcs, pol, stats, err);
  for (int i = 0; i < nsrcs; i++) db_close(src[i].db); /* ends the read transaction */
  free(src);
  return rc;
}

mmt_status db_import_json(const char *dst_path, const char *name, const char *text, size_t len,
                          const db_row_policy *pol, db_merge_stats *stats, ut_err *err) {
  mmt_status rc = dst_arg(dst_path, stats, "db_import_json", err);
  if (rc) return rc;
  if (!text) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_import_json: NULL text");
  if (len > DB_IMPORT_MAX_BYTES)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "the export is larger than %zu MiB: split it "
                   "(mmtune db export --device-name NAME)", DB_IMPORT_MAX_BYTES >> 20);
  const source src = {.name = name ? name : "export", .text = text, .len = len};
  return merge_sources(dst_path, &src, 1, pol, stats, err);
}

mmt_status db_check(const char *path, const db_row_policy *pol, db_check_report *out,
                    ut_err *err) {
  if (!out) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_check: NULL report");
  memset(out, 0, sizeof *out);
  source src = {.name = path};
  mmt_status rc = path && *path ? open_source(path, &src.db, err)
                                : ut_fail(err, MMT_ERR_INVALID_ARG, "db_check: empty path");
  sink k = {.pol = pol, .refusal = MMT_ERR_DB_CORRUPT, .err = err};
  if (!rc) rc = walk_file(&k, &src);
  if (!rc) {
    out->schema_version = src.db->schema_version;
    out->rows = k.st.rows_read;
  }
  db_close(src.db);
  return rc;
}
