/* db.c -- see db.h.  Opening, checking and creating the database file; statements and
 * errors shared with db_query.c live in db_internal.h.  The only .c files in mmtune that
 * include sqlite3.h are in this folder. */
#include "db_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DB_BUSY_TIMEOUT_MS 5000

#define DB_STR_(x) #x
#define DB_STR(x) DB_STR_(x)

/*
 * Schema version 2, run in one transaction on a new, empty file.  `meta` marks the file as
 * mmtune's (application = mmtune) whatever the schema version; `results` holds one row per
 * measurement; `best` is for people reading the file with the sqlite3 CLI (and db_each_best).
 * REAL columns are NULL where the measurement gave NaN (SQLite stores NaN as NULL).
 */
#define RESULTS_DDL \
    "CREATE TABLE results(\n"\
    "  id INTEGER PRIMARY KEY,\n"\
    "  device_name TEXT NOT NULL,\n"\
    "  device_uuid TEXT NOT NULL,\n"\
    "  cc_major INTEGER NOT NULL,\n"\
    "  cc_minor INTEGER NOT NULL,\n"\
    "  sm_count INTEGER NOT NULL,\n"\
    "  driver_version INTEGER NOT NULL,\n"\
    "  nvrtc_version TEXT NOT NULL,\n"\
    "  template_name TEXT NOT NULL,\n"\
    "  template_hash TEXT NOT NULL,\n"\
    "  params TEXT NOT NULL,\n"\
    "  dtype TEXT NOT NULL,\n"\
    "  layout TEXT NOT NULL,\n"\
    "  m INTEGER NOT NULL CHECK (m >= 0),\n"\
    "  n INTEGER NOT NULL CHECK (n >= 0),\n"\
    "  k INTEGER NOT NULL CHECK (k >= 0),\n"\
    "  status TEXT NOT NULL CHECK (status IN ('ok', 'compile_error', 'verify_failed', 'fault',\n"\
    "                                         'timeout', 'launch_error', 'pruned')),\n"\
    "  error TEXT NOT NULL DEFAULT '',\n"\
    "  ms_min REAL,\n"\
    "  ms_median REAL CHECK (status <> 'ok' OR ms_median IS NOT NULL),\n"\
    "  ms_max REAL,\n"\
    "  runs INTEGER NOT NULL DEFAULT 0,\n"\
    "  tflops REAL,\n"\
    "  rel_err REAL,\n"\
    "  max_err REAL,\n"\
    "  regs INTEGER NOT NULL DEFAULT -1,\n"\
    "  shared_bytes INTEGER NOT NULL DEFAULT -1,\n"\
    "  local_bytes INTEGER NOT NULL DEFAULT -1,\n"\
    "  created_at INTEGER NOT NULL\n"\
    ");\n"\
    "CREATE INDEX results_best ON results(device_name, dtype, layout, m, n, k, status,\n"\
    "                                     ms_median);\n"\
    "CREATE INDEX results_resume ON results(device_name, template_name, template_hash, params,\n"\
    "                                       nvrtc_version, dtype, layout, m, n, k);\n"\
    "CREATE VIEW best AS\n"\
    "  SELECT r.* FROM results AS r\n"\
    "  WHERE r.status = 'ok' AND r.id = (\n"\
    "    SELECT b.id FROM results AS b\n"\
    "    WHERE b.device_name = r.device_name AND b.dtype = r.dtype AND b.layout = r.layout\n"\
    "      AND b.m = r.m AND b.n = r.n AND b.k = r.k AND b.status = 'ok'\n"\
    "    ORDER BY b.ms_median, b.id LIMIT 1);\n"

/* Version 3: the search time each problem has had (db_search_seconds), so a --budget bounds
 * a problem's search across runs.  `candidates` says what was searched (NVRTC version and
 * each template name:hash): time spent on other candidates does not count. */
#define SEARCHES_V3_DDL \
    "CREATE TABLE searches(\n"\
    "  device_name TEXT NOT NULL,\n"\
    "  dtype TEXT NOT NULL,\n"\
    "  layout TEXT NOT NULL,\n"\
    "  m INTEGER NOT NULL,\n"\
    "  n INTEGER NOT NULL,\n"\
    "  k INTEGER NOT NULL,\n"\
    "  candidates TEXT NOT NULL,\n"\
    "  seconds REAL NOT NULL CHECK (seconds >= 0),\n"\
    "  updated_at INTEGER NOT NULL,\n"\
    "  PRIMARY KEY (device_name, dtype, layout, m, n, k, candidates)\n"\
    ");\n"

/* Version 5: a search's time kept per origin, the file whose runs spent it (meta's origin,
 * random at creation), and summed over origins.  Merging takes the larger of two copies of
 * one origin's time, so merging a file again, or a file that started as a copy of the
 * destination, adds nothing twice. */
/* clang-format off */
#define SEARCHES_V5_DDL \
    "CREATE TABLE searches(\n"\
    "  device_name TEXT NOT NULL,\n"\
    "  dtype TEXT NOT NULL,\n"\
    "  layout TEXT NOT NULL,\n"\
    "  m INTEGER NOT NULL,\n"\
    "  n INTEGER NOT NULL,\n"\
    "  k INTEGER NOT NULL,\n"\
    "  candidates TEXT NOT NULL,\n"\
    "  origin TEXT NOT NULL,\n"\
    "  seconds REAL NOT NULL CHECK (seconds >= 0),\n"\
    "  updated_at INTEGER NOT NULL,\n"\
    "  PRIMARY KEY (device_name, dtype, layout, m, n, k, candidates, origin)\n"\
    ");\n"
/* clang-format on */
#define ORIGIN_DML \
    "INSERT OR IGNORE INTO meta(key, value) VALUES ('origin', lower(hex(randomblob(8))));\n"

/* Version 4: each row's launch shape (db_launch), what the performance model needs of the
 * kernel without emitting it again; 0 where unknown (rows measured before version 4). */
#define LAUNCH_DDL \
    "ALTER TABLE results ADD COLUMN tile_m INTEGER NOT NULL DEFAULT 0;\n"\
    "ALTER TABLE results ADD COLUMN tile_n INTEGER NOT NULL DEFAULT 0;\n"\
    "ALTER TABLE results ADD COLUMN slices INTEGER NOT NULL DEFAULT 0;\n"\
    "ALTER TABLE results ADD COLUMN threads INTEGER NOT NULL DEFAULT 0;\n"\
    "ALTER TABLE results ADD COLUMN per_sm INTEGER NOT NULL DEFAULT 0;\n"

/* Version 6: the kernel each row measured (rt_provenance.h); "" for rows measured before. */
#define KERNEL_DDL "ALTER TABLE results ADD COLUMN kernel_hash TEXT NOT NULL DEFAULT '';\n"

/* Version 7: a problem is also its op (the epilogue's canonical text, gen_op_format; "" for
 * the plain GEMM) and its batch (problems of one call; 1 for the plain GEMM), in every row
 * and search time: rows of before are plain GEMMs.  The indexes and `best` are made again
 * with them, and the searches table takes them into its key. */
/* clang-format off */
#define OP_DDL \
    "ALTER TABLE results ADD COLUMN op TEXT NOT NULL DEFAULT '';\n"\
    "ALTER TABLE results ADD COLUMN batch INTEGER NOT NULL DEFAULT 1;\n"\
    "DROP VIEW best;\n"\
    "DROP INDEX results_best;\n"\
    "DROP INDEX results_resume;\n"\
    "CREATE INDEX results_best ON results(device_name, dtype, layout, m, n, k, op, batch,\n"\
    "                                     status, ms_median);\n"\
    "CREATE INDEX results_resume ON results(device_name, template_name, template_hash, params,\n"\
    "                                       nvrtc_version, dtype, layout, m, n, k, op, batch);\n"\
    "CREATE VIEW best AS\n"\
    "  SELECT r.* FROM results AS r\n"\
    "  WHERE r.status = 'ok' AND r.id = (\n"\
    "    SELECT b.id FROM results AS b\n"\
    "    WHERE b.device_name = r.device_name AND b.dtype = r.dtype AND b.layout = r.layout\n"\
    "      AND b.m = r.m AND b.n = r.n AND b.k = r.k AND b.op = r.op AND b.batch = r.batch\n"\
    "      AND b.status = 'ok'\n"\
    "    ORDER BY b.ms_median, b.id LIMIT 1);\n"
#define SEARCHES_DDL \
    "CREATE TABLE searches(\n"\
    "  device_name TEXT NOT NULL,\n"\
    "  dtype TEXT NOT NULL,\n"\
    "  layout TEXT NOT NULL,\n"\
    "  m INTEGER NOT NULL,\n"\
    "  n INTEGER NOT NULL,\n"\
    "  k INTEGER NOT NULL,\n"\
    "  op TEXT NOT NULL DEFAULT '',\n"\
    "  batch INTEGER NOT NULL DEFAULT 1,\n"\
    "  candidates TEXT NOT NULL,\n"\
    "  origin TEXT NOT NULL,\n"\
    "  seconds REAL NOT NULL CHECK (seconds >= 0),\n"\
    "  updated_at INTEGER NOT NULL,\n"\
    "  PRIMARY KEY (device_name, dtype, layout, m, n, k, op, batch, candidates, origin)\n"\
    ");\n"
/* clang-format on */

/* A read-only handle on a file older than version 7 reads its rows through these temporary
 * views (the temp schema shadows main's names), so every statement sees the same columns.
 * Every row of such a file is a plain GEMM's, so its `best` is the plain problems' best. */
static const char k_read_v1[] =
    "CREATE TEMP VIEW results AS SELECT *, 0 AS tile_m, 0 AS tile_n, 0 AS slices,\n"
    "  0 AS threads, 0 AS per_sm, '' AS kernel_hash, '' AS op, 1 AS batch FROM main.results;\n"
    "CREATE TEMP VIEW best AS SELECT *, 0 AS tile_m, 0 AS tile_n, 0 AS slices,\n"
    "  0 AS threads, 0 AS per_sm, '' AS kernel_hash, '' AS op, 1 AS batch FROM main.best;\n";
static const char k_read_v4[] =
    "CREATE TEMP VIEW results AS SELECT *, '' AS kernel_hash, '' AS op, 1 AS batch\n"
    "  FROM main.results;\n"
    "CREATE TEMP VIEW best AS SELECT *, '' AS kernel_hash, '' AS op, 1 AS batch FROM main.best;\n";
static const char k_read_v6[] =
    "CREATE TEMP VIEW results AS SELECT *, '' AS op, 1 AS batch FROM main.results;\n"
    "CREATE TEMP VIEW best AS SELECT *, '' AS op, 1 AS batch FROM main.best;\n";
/* ... and its search times (versions 3 to 6; none before 3) through this one. */
static const char k_read_searches_v3[] =
    "CREATE TEMP VIEW searches AS SELECT *, '' AS op, 1 AS batch FROM main.searches;\n";

/* One part of the schema a line. */
/* clang-format off */
static const char k_schema[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
    "INSERT INTO meta(key, value) VALUES ('application', 'mmtune');\n"
    ORIGIN_DML
    RESULTS_DDL
    SEARCHES_DDL
    LAUNCH_DDL
    KERNEL_DDL
    OP_DDL
    "PRAGMA user_version = " DB_STR(DB_SCHEMA_VERSION) ";\n";
/* clang-format on */

/* Version 1 -> 2 (the status 'pruned' added to the CHECK): SQLite cannot change a CHECK in
 * place, so the table is rebuilt under its new definition and the rows copied across.  The
 * view and indexes go first, or the rename would carry them to the old table. */
static const char k_migrate_v1[] =
    "DROP VIEW best;\n"
    "DROP INDEX results_best;\n"
    "DROP INDEX results_resume;\n"
    "ALTER TABLE results RENAME TO results_v1;\n"
    RESULTS_DDL
    "INSERT INTO results SELECT * FROM results_v1;\n"
    "DROP TABLE results_v1;\n"
    "PRAGMA user_version = 2;\n";

/* Version 2 -> 3: the searches table. */
static const char k_migrate_v2[] = SEARCHES_V3_DDL "PRAGMA user_version = 3;\n";
/* Version 3 -> 4: the launch columns. */
static const char k_migrate_v3[] = LAUNCH_DDL "PRAGMA user_version = 4;\n";
/* clang-format off */
/* Version 4 -> 5: the file gets its origin, and the times it has are its own. */
static const char k_migrate_v4[] =
    ORIGIN_DML
    "ALTER TABLE searches RENAME TO searches_v4;\n"
    SEARCHES_V5_DDL
    "INSERT INTO searches(device_name, dtype, layout, m, n, k, candidates, origin, seconds,\n"
    "                     updated_at)\n"
    "  SELECT device_name, dtype, layout, m, n, k, candidates,\n"
    "         (SELECT value FROM meta WHERE key = 'origin'), seconds, updated_at\n"
    "  FROM searches_v4;\n"
    "DROP TABLE searches_v4;\n"
    "PRAGMA user_version = 5;\n";
/* Version 5 -> 6: the kernel hash column; rows kept, their kernels unknown (""). */
static const char k_migrate_v5[] = KERNEL_DDL "PRAGMA user_version = 6;\n";
/* Version 6 -> 7: op and batch; rows and search times kept, each a plain GEMM's ('' and 1).
 * The searches table is rebuilt: its primary key takes them. */
static const char k_migrate_v6[] =
    OP_DDL
    "ALTER TABLE searches RENAME TO searches_v6;\n"
    SEARCHES_DDL
    "INSERT INTO searches(device_name, dtype, layout, m, n, k, candidates, origin, seconds,\n"
    "                     updated_at)\n"
    "  SELECT device_name, dtype, layout, m, n, k, candidates, origin, seconds, updated_at\n"
    "  FROM searches_v6;\n"
    "DROP TABLE searches_v6;\n"
    "PRAGMA user_version = 7;\n";
/* clang-format on */

/* What a first look at an open file found. */
typedef struct {
  int64_t user_version;
  int64_t objects;  /* rows of sqlite_master: 0 for a new, empty file */
  bool has_meta;    /* a table named meta */
  bool has_results; /* a table named results */
  bool is_mmtune;   /* meta says application = mmtune */
} db_probe;

/* ---- errors ---------------------------------------------------------------------------- */

mmt_status db_sql_fail(db_handle *h, int sqlite_rc, const char *op, ut_err *err) {
  mmt_status st = MMT_ERR_DB;
  switch (sqlite_rc & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT: st = MMT_ERR_DB_CORRUPT; break;
    case SQLITE_NOMEM: st = MMT_ERR_NOMEM; break;
    case SQLITE_CANTOPEN: st = MMT_ERR_IO; break;
    default: break;
  }
  const char *msg = h->sq ? sqlite3_errmsg(h->sq) : sqlite3_errstr(sqlite_rc);
  return ut_fail(err, st, "%s '%s': %s", op, h->path, msg);
}

/* ---- small query helpers ------------------------------------------------------------------ */

/* Runs sql (no parameters) and copies the first column of its first row into *num and/or
 * text (either may be NULL); leaves them untouched when there is no row.  SQLite result code. */
static int query_one(sqlite3 *sq, const char *sql, int64_t *num, char *text, size_t cap) {
  sqlite3_stmt *st = NULL;
  int s = sqlite3_prepare_v2(sq, sql, -1, &st, NULL);
  if (s != SQLITE_OK) goto cleanup;
  s = sqlite3_step(st);
  if (s == SQLITE_ROW) {
    if (num) *num = sqlite3_column_int64(st, 0);
    if (text) {
      const unsigned char *t = sqlite3_column_text(st, 0);
      db_copy_text(text, cap, t, sqlite3_column_bytes(st, 0));
    }
    s = SQLITE_OK;
  } else if (s == SQLITE_DONE) {
    s = SQLITE_OK;
  }
cleanup:
  /* sqlite3_finalize repeats the error of the last step, already in s. */
  (void)sqlite3_finalize(st);
  return s;
}

void db_copy_text(char *dst, size_t cap, const unsigned char *src, int len) {
  size_t n = src && len > 0 ? (size_t)len : 0;
  if (n > cap - 1) {
    n = cap - 1;
    /* Cut before a UTF-8 continuation byte so the field stays valid text. */
    while (n > 0 && (src[n] & 0xC0) == 0x80) n--;
  }
  if (n) memcpy(dst, src, n);
  dst[n] = '\0';
}

/* ---- opening --------------------------------------------------------------------------- */

/* Read-only: the file must exist.  Otherwise: creates the parent folders. */
static mmt_status prepare_path(const char *path, bool read_only, ut_err *err) {
  if (read_only) {
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT)
      return ut_fail(err, MMT_ERR_NOT_FOUND, "database '%s' does not exist", path);
    return MMT_OK;
  }
  const char *slash = strrchr(path, '/');
  if (!slash || slash == path) return MMT_OK;
  char dir[4096];
  size_t n = (size_t)(slash - path);
  if (n >= sizeof dir)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "database path too long: '%s'", path);
  memcpy(dir, path, n);
  dir[n] = '\0';
  mmt_status rc = ut_mkdir_p(dir, err);
  if (rc) ut_err_prefix(err, "cannot open database '%s'", path);
  return rc;
}

/* Whether a read-only handle must read path as immutable: a WAL file whose -shm is missing in
 * a folder this process cannot write.  SQLite would have to create the -shm to read it ("attempt
 * to write a readonly database"), which is what a database shipped in a read-only image or
 * system folder looks like.  When no -wal holds changes, every row is in the file itself and
 * reading it as immutable is exact; when one does, the file cannot be read from here. */
static mmt_status wants_immutable(const char *path, bool *immutable, ut_err *err) {
  *immutable = false;
  unsigned char head[20] = {0};
  FILE *f = fopen(path, "rb");
  if (!f) return MMT_OK; /* SQLite says why */
  size_t got = fread(head, 1, sizeof head, f);
  fclose(f);
  bool wal = got == sizeof head && !memcmp(head, "SQLite format 3", 16) && head[18] == 2;
  if (!wal) return MMT_OK;
  char side[4200], dir[4096];
  struct stat st;
  snprintf(side, sizeof side, "%s-shm", path);
  if (stat(side, &st) == 0) return MMT_OK;
  const char *slash = strrchr(path, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
  if (access(dir, W_OK) == 0) return MMT_OK;
  snprintf(side, sizeof side, "%s-wal", path);
  if (stat(side, &st) == 0 && st.st_size > 0)
    return ut_fail(err, MMT_ERR_IO,
                   "cannot read database '%s' from a folder this user cannot write: changes "
                   "are still in its -wal file (a writer is running, or stopped early); `mmtune "
                   "db pack` on a writable copy makes a file that reads anywhere", path);
  *immutable = true;
  return MMT_OK;
}

/* "file:" and path with the characters a URI gives a meaning to escaped, then "?immutable=1". */
static void immutable_uri(const char *path, char *uri, size_t cap) {
  size_t n = (size_t)snprintf(uri, cap, "file:");
  for (const char *p = path; *p && n + 4 < cap; p++) {
    if (*p == '%' || *p == '?' || *p == '#')
      n += (size_t)snprintf(uri + n, cap - n, "%%%02X", (unsigned char)*p);
    else uri[n++] = *p;
  }
  snprintf(uri + n, cap - n, "?immutable=1");
}

static mmt_status connect_file(db_handle *h, ut_err *err) {
  int flags = h->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  bool immutable = false;
  char uri[8300];
  if (h->read_only) {
    mmt_status rc = wants_immutable(h->path, &immutable, err);
    if (rc) return rc;
  }
  if (immutable) immutable_uri(h->path, uri, sizeof uri);
  int s = sqlite3_open_v2(immutable ? uri : h->path, &h->sq,
                          flags | SQLITE_OPEN_NOMUTEX | (immutable ? SQLITE_OPEN_URI : 0), NULL);
  if (s != SQLITE_OK) {
    if (!h->sq)
      return ut_fail(err, MMT_ERR_NOMEM, "cannot open database '%s': out of memory", h->path);
    return db_sql_fail(h, s, "cannot open database", err);
  }
  s = sqlite3_extended_result_codes(h->sq, 1);
  if (s == SQLITE_OK) s = sqlite3_busy_timeout(h->sq, DB_BUSY_TIMEOUT_MS);
  if (s != SQLITE_OK) return db_sql_fail(h, s, "cannot configure database", err);
  return MMT_OK;
}

/* The first reads of a file: where a file that is not SQLite at all shows (SQLITE_NOTADB). */
static mmt_status probe_fail(db_handle *h, int s, ut_err *err) {
  if ((s & 0xff) == SQLITE_NOTADB)
    return ut_fail(err, MMT_ERR_DB_CORRUPT, "'%s' is not an mmtune database (%s)", h->path,
                   sqlite3_errmsg(h->sq));
  if ((s & 0xff) == SQLITE_CORRUPT)
    return ut_fail(err, MMT_ERR_DB_CORRUPT, "database '%s' is corrupt (%s)", h->path,
                   sqlite3_errmsg(h->sq));
  return db_sql_fail(h, s, "cannot read database", err);
}

static mmt_status probe_file(db_handle *h, db_probe *p, ut_err *err) {
  int64_t meta = 0, results = 0;
  memset(p, 0, sizeof *p);
  int s = query_one(h->sq, "PRAGMA user_version", &p->user_version, NULL, 0);
  if (s == SQLITE_OK)
    s = query_one(h->sq, "SELECT count(*) FROM sqlite_master", &p->objects, NULL, 0);
  if (s == SQLITE_OK)
    s = query_one(h->sq,
                  "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
                  &meta, NULL, 0);
  if (s == SQLITE_OK)
    s = query_one(h->sq,
                  "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'results'",
                  &results, NULL, 0);
  if (s != SQLITE_OK) return probe_fail(h, s, err);
  p->has_meta = meta > 0;
  p->has_results = results > 0;
  if (!p->has_meta) return MMT_OK;
  char app[32] = "";
  s = query_one(h->sq, "SELECT value FROM meta WHERE key = 'application'", NULL, app, sizeof app);
  /* SQLITE_ERROR here: someone else's `meta` table without these columns. */
  if (s != SQLITE_OK && (s & 0xff) != SQLITE_ERROR) return probe_fail(h, s, err);
  p->is_mmtune = s == SQLITE_OK && strcmp(app, "mmtune") == 0;
  return MMT_OK;
}

/* Rolls back an open transaction after a failure; a failed rollback is added to err. */
void db_rollback_after_error(db_handle *h, ut_err *err) {
  if (sqlite3_get_autocommit(h->sq)) return;
  int s = sqlite3_exec(h->sq, "ROLLBACK", NULL, NULL, NULL);
  if (s != SQLITE_OK && err) {
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n, " (rollback failed: %s)", sqlite3_errmsg(h->sq));
  }
}

/* Creates the schema in one transaction, unless another process did it first. */
static mmt_status create_schema(db_handle *h, ut_err *err) {
  int64_t objects = 0;
  int s = sqlite3_exec(h->sq, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (s == SQLITE_OK) s = query_one(h->sq, "SELECT count(*) FROM sqlite_master", &objects, NULL, 0);
  if (s == SQLITE_OK && objects == 0) s = sqlite3_exec(h->sq, k_schema, NULL, NULL, NULL);
  if (s == SQLITE_OK) s = sqlite3_exec(h->sq, "COMMIT", NULL, NULL, NULL);
  if (s == SQLITE_OK) return MMT_OK;
  mmt_status rc = db_sql_fail(h, s, "cannot create the schema in", err);
  db_rollback_after_error(h, err);
  return rc;
}

/* Brings a version-1 to -6 file to the current schema in one transaction (rows kept). */
static mmt_status migrate_schema(db_handle *h, ut_err *err) {
  int64_t version = 0;
  int s = sqlite3_exec(h->sq, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  /* Another process may have migrated it since the probe: look again inside the lock. */
  if (s == SQLITE_OK) s = query_one(h->sq, "PRAGMA user_version", &version, NULL, 0);
  /* step v takes a version-v file to v + 1, each after the one before */
  static const char *const steps[] = {k_migrate_v1, k_migrate_v2, k_migrate_v3,
                                      k_migrate_v4, k_migrate_v5, k_migrate_v6};
  _Static_assert(sizeof steps / sizeof *steps == DB_SCHEMA_VERSION - 1,
                 "a migration step for every schema version before the current one");
  for (; s == SQLITE_OK && version >= 1 && version < DB_SCHEMA_VERSION; version++)
    s = sqlite3_exec(h->sq, steps[version - 1], NULL, NULL, NULL);
  if (s == SQLITE_OK) s = sqlite3_exec(h->sq, "COMMIT", NULL, NULL, NULL);
  if (s == SQLITE_OK) return MMT_OK;
  mmt_status rc = db_sql_fail(h, s, "cannot upgrade the schema of", err);
  db_rollback_after_error(h, err);
  return rc;
}

static mmt_status check_probe(const db_handle *h, const db_probe *p, ut_err *err) {
  if (!p->is_mmtune)
    return ut_fail(err, MMT_ERR_DB_CORRUPT,
                   "'%s' is not an mmtune database (it has no mmtune tables)", h->path);
  if (p->user_version > DB_SCHEMA_VERSION)
    return ut_fail(err, MMT_ERR_DB_VERSION,
                   "database '%s': schema version %lld is newer than this mmtune supports (%d)",
                   h->path, (long long)p->user_version, DB_SCHEMA_VERSION);
  /* Read-only handles read versions 1 and 2 as they are: their rows mean the same (a reader
   * never asks for search times). */
  bool readable_old = h->read_only && p->user_version >= 1;
  if ((p->user_version < DB_SCHEMA_VERSION && !readable_old) || !p->has_results)
    return ut_fail(err, MMT_ERR_DB_CORRUPT,
                   "database '%s' is damaged (schema version %lld, results table %s)", h->path,
                   (long long)p->user_version, p->has_results ? "present" : "missing");
  return MMT_OK;
}

static mmt_status check_or_create(db_handle *h, ut_err *err) {
  db_probe p = {0};
  mmt_status rc = probe_file(h, &p, err);
  if (rc) return rc;
  if (p.objects == 0 && p.user_version == 0) {
    if (h->read_only)
      return ut_fail(err, MMT_ERR_NOT_FOUND, "database '%s' is empty (nothing tuned yet)", h->path);
    rc = create_schema(h, err);
    if (!rc) rc = probe_file(h, &p, err);
    if (rc) return rc;
  }
  if (p.is_mmtune && p.has_results && p.user_version >= 1 &&
      p.user_version < DB_SCHEMA_VERSION && !h->read_only) {
    rc = migrate_schema(h, err);
    if (!rc) rc = probe_file(h, &p, err);
    if (rc) return rc;
  }
  rc = check_probe(h, &p, err);
  if (!rc && p.user_version < DB_SCHEMA_VERSION) {
    const char *views = p.user_version < 4 ? k_read_v1 : p.user_version < 6 ? k_read_v4 : k_read_v6;
    int s = sqlite3_exec(h->sq, views, NULL, NULL, NULL);
    if (s == SQLITE_OK && p.user_version >= 3)
      s = sqlite3_exec(h->sq, k_read_searches_v3, NULL, NULL, NULL);
    if (s != SQLITE_OK) rc = db_sql_fail(h, s, "cannot read the older schema of", err);
  }
  h->schema_version = (int)p.user_version;
  /* Writers record search times as this file's origin (schema 5 gives every file one). */
  if (!rc && !h->read_only) {
    int s = query_one(h->sq, "SELECT value FROM meta WHERE key = 'origin'", NULL, h->origin,
                      sizeof h->origin);
    if (s != SQLITE_OK) rc = db_sql_fail(h, s, "cannot read the origin of", err);
    else if (!h->origin[0])
      rc = ut_fail(err, MMT_ERR_DB_CORRUPT, "database '%s' is damaged (it has no origin)",
                   h->path);
  }
  return rc;
}

mmt_status db_drop_read_views(db_handle *h, ut_err *err) {
  if (h->schema_version >= DB_SCHEMA_VERSION) return MMT_OK;
  int s = sqlite3_exec(h->sq,
                       "DROP VIEW IF EXISTS temp.results; DROP VIEW IF EXISTS temp.best;"
                       " DROP VIEW IF EXISTS temp.searches;",
                       NULL, NULL, NULL);
  return s == SQLITE_OK ? MMT_OK : db_sql_fail(h, s, "cannot drop the read views of", err);
}

/* WAL (writable handles; a read-only one reads a WAL file as it is) and foreign keys.  Run
 * only once the file is known to be mmtune's: a foreign file is left untouched. */
static mmt_status configure(db_handle *h, ut_err *err) {
  int s;
  if (!h->read_only) {
    char mode[16] = "";
    s = query_one(h->sq, "PRAGMA journal_mode = WAL", NULL, mode, sizeof mode);
    if (s != SQLITE_OK) return db_sql_fail(h, s, "cannot set WAL mode on", err);
    if (strcmp(mode, "wal") != 0 && strcmp(mode, "memory") != 0)
      return ut_fail(err, MMT_ERR_DB, "cannot set WAL mode on '%s': journal mode stays '%s'",
                     h->path, mode);
  }
  s = sqlite3_exec(h->sq, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
  if (s != SQLITE_OK) return db_sql_fail(h, s, "cannot enable foreign keys on", err);
  /* The model reads every row of a GPU model: mapped pages instead of a read call each. */
  s = sqlite3_exec(h->sq, "PRAGMA mmap_size = 268435456", NULL, NULL, NULL);
  if (s != SQLITE_OK) return db_sql_fail(h, s, "cannot map", err);
  return MMT_OK;
}

static mmt_status prepare_all(db_handle *h, ut_err *err) {
  for (int i = 0; i < DB_ST_COUNT_; i++) {
    /* An older file read as it is has no searches table; readers never use it. */
    if (h->read_only && (i == DB_ST_SEARCH_GET || i == DB_ST_SEARCH_ADD ||
                         i == DB_ST_SEARCH_CLEAR))
      continue;
    /* Nor can it insert: its `results` may be the temporary view of an older file. */
    if (h->read_only && i == DB_ST_INSERT) continue;
    int s =
        sqlite3_prepare_v3(h->sq, db_stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &h->st[i], NULL);
    /* our fixed SQL fails only on a file whose tables are not mmtune's: a missing table or
     * column, a view dropped */
    if ((s & 0xff) == SQLITE_ERROR)
      return ut_fail(err, MMT_ERR_DB_CORRUPT, "database '%s' is damaged (%s)", h->path,
                     sqlite3_errmsg(h->sq));
    if (s != SQLITE_OK) return db_sql_fail(h, s, "cannot prepare a statement on", err);
  }
  return MMT_OK;
}

mmt_status db_open(const char *path, bool read_only, db_handle **out, ut_err *err) {
  mmt_status rc = MMT_OK;
  db_handle *h = NULL;
  if (!out) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_open: out is NULL");
  *out = NULL;
  if (!path || !path[0]) return ut_fail(err, MMT_ERR_INVALID_ARG, "db_open: empty database path");
  rc = prepare_path(path, read_only, err);
  if (rc) return rc;
  h = calloc(1, sizeof *h);
  if (h) h->path = strdup(path);
  if (!h || !h->path) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "cannot open database '%s': out of memory", path);
    goto cleanup;
  }
  h->read_only = read_only;
  rc = connect_file(h, err);
  if (!rc) rc = check_or_create(h, err);
  if (!rc) rc = configure(h, err);
  if (!rc) rc = prepare_all(h, err);
  if (rc) goto cleanup;
  *out = h;
  h = NULL;
cleanup:
  db_close(h);
  return rc;
}

void db_remove_files(const char *path) {
  static const char *const sides[] = {"", "-wal", "-shm", "-journal"};
  char p[4200];
  for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
    snprintf(p, sizeof p, "%s%s", path, sides[i]);
    (void)unlink(p); /* a missing side file is the common case */
  }
}

mmt_status db_integrity(db_handle *h, const char *pragma, ut_err *err) {
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
  (void)sqlite3_finalize(st); /* repeats the step's error, handled above */
  return rc;
}

void db_close(db_handle *db) {
  if (!db) return;
  for (int i = 0; i < DB_ST_COUNT_; i++) {
    /* finalize repeats the last step's error, which its caller has handled. */
    (void)sqlite3_finalize(db->st[i]);
  }
  /* close_v2 cannot fail once every statement is finalized; NULL is a no-op. */
  (void)sqlite3_close_v2(db->sq);
  free(db->path);
  free(db);
}
