/*
 * db_internal.h -- what db.c (opening, schema) and db_query.c (reads and writes) share.
 * Private to db/: the only header in mmtune that includes sqlite3.h.
 */
#ifndef MMT_DB_INTERNAL_H
#define MMT_DB_INTERNAL_H

#include <sqlite3.h>

#include "db.h"

/* The statements a handle prepares once, at open (SQL text in db_stmt_sql). */
typedef enum {
  DB_ST_BEGIN, /* BEGIN IMMEDIATE */
  DB_ST_COMMIT,
  DB_ST_INSERT,
  DB_ST_HAS,        /* db_has_result */
  DB_ST_BEST,       /* db_best */
  DB_ST_EACH_OK,    /* db_each_ok */
  DB_ST_EACH_BEST,  /* db_each_best */
  DB_ST_EACH_SHAPE, /* db_each_shape */
  DB_ST_EACH_ROW,   /* db_each_model_row */
  DB_ST_DATA_VERSION, /* db_data_version */
  DB_ST_STAMP,        /* db_rows_stamp */
  DB_ST_GET,        /* db_get */
  DB_ST_NROWS,      /* db_count */
  DB_ST_SEARCH_GET, /* db_search_seconds (writable handles only) */
  DB_ST_SEARCH_ADD, /* db_search_add (writable handles only) */
  DB_ST_EACH_DEVICE_ROW, /* db_each_row */
  DB_ST_COUNT_
} db_stmt_id;

extern const char *const db_stmt_sql[DB_ST_COUNT_];

struct db_handle {
  sqlite3 *sq;
  char *path; /* owned copy, for messages */
  bool read_only;
  sqlite3_stmt *st[DB_ST_COUNT_];
  bool busy[DB_ST_COUNT_]; /* an iterator is stepping this statement (re-entry guard) */
};

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
  char *text;            /* NUMBER: as written; STRING: decoded UTF-8 */
  struct db_json *items; /* ARRAY, OBJECT */
  char **keys;           /* OBJECT */
  int n;
} db_json;
/* Parses the whole of text into *out (free with db_json_free); false with the reason and the
 * byte offset in why. */
bool db_json_parse(const char *text, db_json *out, char *why, size_t whylen);
void db_json_free(db_json *v);
/* The value of key in an object; NULL when absent or obj is not an object. */
const db_json *db_json_get(const db_json *obj, const char *key);

#endif /* MMT_DB_INTERNAL_H */
