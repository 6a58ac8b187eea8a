/*
 * db_internal.h -- what db.c (opening, schema) and db_query.c (reads and writes) share.
 * Private to db/: the only header in mmtune that includes sqlite3.h.
 */
#ifndef MMT_DB_INTERNAL_H
#define MMT_DB_INTERNAL_H

#include <sqlite3.h>

#include "db.h"

/* A search's time as one origin (one database file that ran searches) recorded it. */
#define DB_CANDIDATES_MAX 4096
#define DB_ORIGIN_MAX 40
typedef struct {
  char device_name[128];
  char dtype[8], layout[8];
  int64_t m, n, k;
  char op[DB_OP_MAX]; /* as db_problem's */
  int64_t batch;
  char candidates[DB_CANDIDATES_MAX];
  double seconds;
  int64_t updated_at;
  char origin[DB_ORIGIN_MAX]; /* 16 hex digits: the file that searched; "l" and 16: an older
                                 file's time, named by its content */
} db_search_row;

/* The statements a handle prepares once, at open (SQL text in db_stmt_sql). */
typedef enum {
  DB_ST_BEGIN, /* BEGIN IMMEDIATE */
  DB_ST_COMMIT,
  DB_ST_INSERT,
  DB_ST_HAS,             /* db_has_result */
  DB_ST_BEST,            /* db_best */
  DB_ST_EACH_OK,         /* db_each_ok */
  DB_ST_EACH_BEST,       /* db_each_best */
  DB_ST_EACH_SHAPE,      /* db_each_shape */
  DB_ST_SHAPES_SINCE,    /* db_each_shape_since */
  DB_ST_EACH_ROW,        /* db_each_model_row */
  DB_ST_DATA_VERSION,    /* db_data_version */
  DB_ST_STAMP,           /* db_rows_stamp */
  DB_ST_GET,             /* db_get */
  DB_ST_NROWS,           /* db_count */
  DB_ST_SEARCH_GET,      /* db_search_seconds (writable handles only) */
  DB_ST_SEARCH_ADD,      /* db_search_add (writable handles only) */
  DB_ST_SEARCH_CLEAR,    /* db_search_add with replace (writable handles only) */
  DB_ST_EACH_DEVICE_ROW, /* db_each_row */
  DB_ST_COUNT_
} db_stmt_id;

extern const char *const db_stmt_sql[DB_ST_COUNT_];

struct db_handle {
  sqlite3 *sq;
  char *path; /* owned copy, for messages */
  bool read_only;
  int schema_version;        /* the file's user_version */
  char origin[DB_ORIGIN_MAX]; /* meta's origin: whose search times db_search_add writes */
  sqlite3_stmt *st[DB_ST_COUNT_];
  bool busy[DB_ST_COUNT_]; /* an iterator is stepping this statement (re-entry guard) */
};

/* Drops the temporary views a read-only handle on an older file reads through (db.c), so
 * that main's own tables show again: what VACUUM INTO needs (it makes main's indexes again
 * in the copy, and would take the view named results for the table: "views may not be
 * indexed").  The handle's queries then see the older schema's columns: close it after.  A
 * no-op on a current file. */
mmt_status db_drop_read_views(db_handle *h, ut_err *err);
/* Fills err with "op 'path': sqlite message" and returns the status for the SQLite result
 * code (NOTADB/CORRUPT -> MMT_ERR_DB_CORRUPT, NOMEM -> MMT_ERR_NOMEM, CANTOPEN -> MMT_ERR_IO,
 * else MMT_ERR_DB). */
mmt_status db_sql_fail(db_handle *h, int sqlite_rc, const char *op, ut_err *err);
/* Rolls back the open transaction, if any; a failed rollback is appended to err. */
void db_rollback_after_error(db_handle *h, ut_err *err);
/* Copies len bytes of src (may be NULL) into dst[cap] as a NUL-terminated string, cut at a
 * UTF-8 character boundary when too long. */
void db_copy_text(char *dst, size_t cap, const unsigned char *src, int len);

/* A JSON value (db_json.c, for db_import_json): numbers and strings as text, objects as
 * keys[i] -> items[i]. */
typedef enum {
  DB_JSON_NULL,
  DB_JSON_TRUE,
  DB_JSON_FALSE,
  DB_JSON_NUMBER,
  DB_JSON_STRING,
  DB_JSON_ARRAY,
  DB_JSON_OBJECT
} db_json_type;
typedef struct db_json {
  db_json_type type;
  char *text;            /* NUMBER: as written; STRING: decoded UTF-8 (may hold a NUL: \u0000) */
  size_t len;            /* bytes of text */
  struct db_json *items; /* ARRAY, OBJECT */
  char **keys;           /* OBJECT */
  int n;
} db_json;
/* Parses the whole of text into *out (free with db_json_free); false with the reason and the
 * byte offset in why. */
bool db_json_parse(const char *text, db_json *out, char *why, size_t whylen);
/* Reads a document whose top level is an object without holding all of it: a member whose
 * value is an array is handed to fn item by item (each freed after the call), the other
 * members are kept in *top (free with db_json_free).  text[len] is a NUL, and text[0..len)
 * may not hold one (refused).
 * fn returns false to stop (its reason is the caller's); false with why "" then.  Parse
 * errors: false with the reason and byte offset in why.  Memory: *top and one item. */
typedef bool (*db_json_item_fn)(const char *list, int index, const db_json *item,
                                const db_json *top, void *user);
bool db_json_stream(const char *text, size_t len, db_json *top, db_json_item_fn fn, void *user,
                    char *why, size_t whylen);
void db_json_free(db_json *v);
/* The value of key in an object; NULL when absent or obj is not an object. */
const db_json *db_json_get(const db_json *obj, const char *key);

/* ---- rows from outside (db_row.c) ------------------------------------------------------- */

#define DB_NCOLS 36        /* columns of `results` but id */
#define DB_SEARCH_NCOLS 12 /* columns of `searches` */

/* Names of the columns in the order every statement of db_merge.c and db_export.c uses: the
 * order of DB_COLS_NOID in db_query.c, then of the searches table (its key first). */
const char *db_col_name(int i);
const char *db_search_col_name(int i);

/* One value of a row as it came: from a SQLite column or a JSON member. */
typedef enum {
  DB_CELL_MISSING, /* a JSON member that is not there */
  DB_CELL_NULL,
  DB_CELL_INT,
  DB_CELL_REAL,
  DB_CELL_TEXT,
  DB_CELL_OTHER /* a BLOB, a JSON list, object or boolean */
} db_cell_type;
typedef struct {
  db_cell_type type;
  int64_t i;
  double r;
  bool overflow;    /* REAL from an integer past int64 */
  const char *text; /* TEXT, borrowed; len bytes, may hold a NUL */
  size_t len;
} db_cell;
void db_cell_of_column(sqlite3_stmt *st, int col, db_cell *out);
void db_cell_of_json(const db_json *v, db_cell *out); /* v NULL: MISSING */

/* Checks every column of a results row (type, range, length, characters, the policy) and
 * fills *out; false with "'column' <what is wrong>" in why. */
bool db_row_take(const db_cell cells[DB_NCOLS], const db_row_policy *pol, db_result *out,
                 char *why, size_t whylen);
bool db_search_take(const db_cell cells[DB_SEARCH_NCOLS], const db_row_policy *pol,
                    db_search_row *out, char *why, size_t whylen);

/* Binds every column of r but id, in db_col_name order, from parameter ?1 on (db_query.c).
 * The strings stay r's: r must outlive the statement's next reset. */
int db_bind_result(sqlite3_stmt *st, const db_result *r);
/* Removes a database file this process created, with its side files (-wal, -shm,
 * -journal); best effort. */
void db_remove_files(const char *path);
/* Runs PRAGMA pragma (integrity_check or quick_check): MMT_ERR_DB_CORRUPT with its first
 * complaint unless it says ok. */
mmt_status db_integrity(db_handle *h, const char *pragma, ut_err *err);

#endif /* MMT_DB_INTERNAL_H */
