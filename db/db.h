/*
 * db.h -- the results database (SQLite).  Prefix db_.  db/ is the only code that includes
 * sqlite3.h.
 *
 * Every measurement is one row of `results` with its provenance.  The best config for a
 * (GPU model, problem) is the fastest `ok` row for that device name and problem.  Schema is
 * versioned with PRAGMA user_version; the file runs in WAL mode; every write is one
 * transaction; statements are prepared once per handle.
 *
 * Thread-safety: a db_handle is used by one thread at a time.  Several processes may open the
 * same file (WAL, busy timeout of 5 s: a writer waits that long for another, then fails with
 * MMT_ERR_DB "database is locked").
 *
 * Errors: every function returns MMT_OK or a status with the operation, the path and SQLite's
 * message in err.  A file that SQLite reports as corrupt -> MMT_ERR_DB_CORRUPT; SQLite out of
 * memory -> MMT_ERR_NOMEM; any other SQLite failure -> MMT_ERR_DB; NULL arguments (where not
 * allowed) -> MMT_ERR_INVALID_ARG.
 *
 * Callbacks (db_each_*) may call other db_ functions on the same handle, but not the same
 * db_each_* function (MMT_ERR_INVALID_ARG): its statement is being stepped.
 *
 * Text fields are copied into the fixed-size arrays below cut at a UTF-8 character boundary
 * when too long, always NUL-terminated.  On insert, a field that fills its array without a
 * NUL is taken whole.  The REAL figures (ms_*, tflops, rel_err, max_err) may be NaN: SQLite
 * stores NaN as NULL, read back as NaN.
 *
 * The file also holds meta(key, value) with ('application', 'mmtune') and, for people using
 * the sqlite3 CLI, a view `best`: the fastest ok row of each (device_name, dtype, layout, m,
 * n, k, op, batch), e.g. `sqlite3 mmtune.db "SELECT device_name, m, n, k, template_name,
 * params, ms_median FROM best WHERE op = '' AND batch = 1"` (the plain GEMMs).
 */
#ifndef MMT_DB_H
#define MMT_DB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

/* 2: status 'pruned'.  3: table searches (db_search_seconds).  4: each row's launch shape
 * (db_launch).  5: search times per origin (the file that searched), so merging the same
 * file twice adds nothing.  6: each row's kernel_hash, what was compiled and launched
 * (rt_provenance.h).  7: each row's and search time's op and batch (db_problem), so fused
 * and batched problems are problems of their own.  An older file is upgraded in place when
 * opened for writing and read as it is when opened read-only (its launch shapes read as 0,
 * unknown; its kernel hashes as ""; its ops as "" and batches as 1, the plain GEMM). */
#define DB_SCHEMA_VERSION 7

typedef struct db_handle db_handle;

#define DB_PARAMS_MAX 256 /* bytes of a config's canonical text, its NUL included */
/* Bytes of an op's canonical text, its NUL included: gen.h's GEN_OP_TEXT_MAX (db/ does not
 * include gen.h; the two must stay equal). */
#define DB_OP_MAX 128

/* Result status of one candidate. */
typedef enum {
  DB_OK = 0,
  DB_COMPILE_ERROR,
  DB_VERIFY_FAILED,
  DB_FAULT,
  DB_TIMEOUT,
  DB_LAUNCH_ERROR, /* e.g. too many resources requested */
  DB_PRUNED,       /* compiled, then never timed: the compiler's figures rule it out (spills) */
  DB_STATUS_COUNT_
} db_status;
/* "ok", "compile_error", "verify_failed", "fault", "timeout", "launch_error", "pruned"; "unknown" for a
 * value outside the enum.  Static string. */
const char *db_status_name(db_status s);
/* Inverse of db_status_name; -1 for unknown text. */
int db_status_parse(const char *text);

typedef struct {
  char name[128];   /* "NVIDIA H100 80GB HBM3"; the key results are grouped by */
  char uuid[48];    /* "GPU-xxxxxxxx-..." */
  int cc_major, cc_minor;
  int sm_count;
  int driver_version; /* cuDriverGetVersion, e.g. 13000 */
} db_device;

/* A problem as results are keyed by.  A zeroed one with dtype, layout, m, n and k set is the
 * plain GEMM: an op of "" and a batch of 0, which every function reads as 1. */
typedef struct {
  char dtype[8];  /* "f32" */
  char layout[8]; /* "nn" */
  int64_t m, n, k;
  char op[DB_OP_MAX]; /* the epilogue's canonical text (gen_op_format), e.g.
                         "out=f32,bias=col,act=silu"; "": the plain GEMM */
  int64_t batch;      /* problems of one call (>= 1; 0 reads as 1): 1 for the plain GEMM */
} db_problem;

/* How a kernel covers a problem, whatever its size: what the performance model
 * (runtime/rt_model.h) needs of a config without emitting it.  All 0: unknown. */
typedef struct {
  int tile_m, tile_n; /* the block of C one work unit computes */
  int slices;         /* split-K: K is cut into this many slices, each a work unit (1: none) */
  int threads;        /* per block */
  int per_sm;         /* persistent kernel: blocks resident per SM, walking the work units; 0:
                         one block per work unit */
  int shared_bytes;   /* shared memory of a block: a ring kernel's (TMA, cp.async) bytes in
                         flight.  Kept in the row's shared_bytes column; 0: unknown */
  int cluster;        /* blocks of a thread-block cluster that share one tile of B (each
                         reads 1 / cluster of it from L2, multicast to the others); 0 or 1:
                         none.  No column: the performance model takes it from a row's
                         `cluster` parameter, rt_launch_of from the kernel's grid */
  int overlap;        /* 1: a work unit's epilogue overlaps the next one's main loop
                         (gen_kernel.epilogue_overlap).  No column: rt_launch_of sets it; 0
                         for a row's launch */
  int promote;        /* K tiles between the promotions of an FP8 kernel's partial sums into
                         fp32 (0: none, the tensor cores' own accumulation; ignored for other
                         types).  No column: the performance model takes it from a row's
                         `promote` parameter, rt_launch_of from the config's */
} db_launch;

typedef struct {
  db_device device;
  char nvrtc_version[16]; /* "13.0" */
  char template_name[64];
  char template_hash[17];     /* the template's source as measured (gen_source_hash) */
  char params[DB_PARAMS_MAX]; /* canonical "name=value,..." */
  char kernel_hash[17];       /* the kernel measured (rt_kernel_hash); "": before schema 6 */
  db_problem problem;
  db_status status;
  char error[512];        /* "" when ok */
  double ms_min, ms_median, ms_max;
  int runs;
  double tflops;
  double rel_err;         /* ||C - ref|| / ||ref|| */
  double max_err;         /* max |C - ref| / max |ref| */
  int regs, shared_bytes, local_bytes; /* from the compiled kernel; -1 unknown */
  int64_t created_at;     /* Unix seconds; filled by db_insert when 0 */
  db_launch launch;       /* the measured kernel's launch shape; 0s: unknown */
  int64_t id;             /* row id; filled by reads */
} db_result;

/*
 * Opens or creates the database.  Creates missing parent folders.  A new file gets the
 * schema; an existing one is checked: not SQLite or not mmtune's (foreign tables, missing
 * `results`) -> MMT_ERR_DB_CORRUPT; user_version newer than DB_SCHEMA_VERSION ->
 * MMT_ERR_DB_VERSION.  read_only opens without creating (a missing file -> MMT_ERR_NOT_FOUND).
 *
 * A file is mmtune's when its table meta says application = mmtune; only then is its
 * user_version compared (so a foreign SQLite file is MMT_ERR_DB_CORRUPT whatever its
 * user_version: "'x.db' is not an mmtune database (it has no mmtune tables)"; garbage bytes or
 * text: "'x.db' is not an mmtune database (file is not a database)"; a newer one: "database
 * 'x.db': schema version 7 is newer than this mmtune supports (1)").  A foreign file is never
 * modified.  An empty file (0 bytes, e.g. being created by another process right now) gets the
 * schema, or with read_only is MMT_ERR_NOT_FOUND.  Writable handles switch the file to WAL.
 * path:      the file; "" or NULL -> MMT_ERR_INVALID_ARG.
 * read_only: open with SQLITE_OPEN_READONLY; db_insert then fails with MMT_ERR_DB.
 * out:       OUT: the handle, owned by the caller (db_close); NULL on failure.
 * Errors: also MMT_ERR_IO (folders cannot be created, file cannot be opened).
 */
mmt_status db_open(const char *path, bool read_only, db_handle **out, ut_err *err);
/* db_close(NULL) is a no-op. */
void db_close(db_handle *db);

/* Inserts one result in its own transaction (BEGIN IMMEDIATE ... COMMIT; rolled back on any
 * failure, so no partial row is ever left).  Fills r->created_at when 0 and r->id (only on
 * success); a problem.batch of 0 is stored as 1.  r->status outside the enum or a negative
 * batch -> MMT_ERR_INVALID_ARG. */
mmt_status db_insert(db_handle *db, db_result *r, ut_err *err);

/* Whether a result exists with the same device name, NVRTC version, template name and hash,
 * params and problem, op and batch included (any status): resume skips those. */
mmt_status db_has_result(db_handle *db, const db_result *key, bool *found, ut_err *err);

/* The fastest ok row for (device name, problem) (ties: lowest id) into *out;
 * MMT_ERR_NOT_FOUND when none.  Here and below, a problem is all of db_problem: a row of
 * another op or batch is another problem's. */
mmt_status db_best(db_handle *db, const char *device_name, const db_problem *p, db_result *out,
                   ut_err *err);

/* Calls fn for each ok row of (device name, problem), fastest first (ties: lowest id), until
 * fn returns non-zero.  Used to skip rows whose template changed since they were measured.
 * r is valid during the call only. */
typedef int (*db_result_fn)(const db_result *r, void *user);
mmt_status db_each_ok(db_handle *db, const char *device_name, const db_problem *p, db_result_fn fn,
                      void *user, ut_err *err);

/* One ok row as the performance model reads it (the columns it needs): strings borrowed, valid
 * during the callback only; the problem copied, its op and batch included. */
typedef struct {
  int64_t id;
  const char *template_name, *template_hash, *params, *kernel_hash;
  db_problem problem; /* of any op and batch: the caller tells them apart */
  double ms_median;
  int sm_count, cc_major;
  db_launch launch;
} db_model_row;
typedef int (*db_model_row_fn)(const db_model_row *r, void *user);

/* Calls fn for every ok row of a device name (any problem), in the file's order (a scan:
 * the caller groups them), until fn returns non-zero.  The performance
 * model fits on these (10^5 rows in about 100 ms, half of it this scan). */
mmt_status db_each_model_row(db_handle *db, const char *device_name, db_model_row_fn fn,
                             void *user, ut_err *err);

/* A number that changes whenever the file's rows change, by another connection (SQLite's
 * data_version) or through this handle: what was read stays valid while it stays the same. */
mmt_status db_data_version(db_handle *db, int64_t *version, ut_err *err);

/* What tells one state of the rows from another across processes and opens (data_version
 * does not), in microseconds: the results table's largest id (mmtune only ever adds rows,
 * each with a larger id) and *files, a hash of the size and modification time of the file
 * and its -wal (a change made by another tool; a checkpoint changes it too).  A count of the
 * rows would read all of an index: 5 ms at 10^5 rows in a fresh process. */
mmt_status db_rows_stamp(db_handle *db, int64_t *max_id, uint64_t *files, ut_err *err);

/* The path the handle was opened with (NULL for NULL). */
const char *db_path(const db_handle *db);

/* The row with this id into *out; MMT_ERR_NOT_FOUND when there is none. */
mmt_status db_get(db_handle *db, int64_t id, db_result *out, ut_err *err);

/* Calls fn for the best ok row of every tuned problem of a device name (and dtype/layout
 * when not NULL), ordered by dtype, layout, m, n, k, op, batch, until fn returns non-zero.
 * device_name NULL: every device, the best row of each (device name, problem), ordered by
 * device name first. */
mmt_status db_each_best(db_handle *db, const char *device_name, const char *dtype,
                        const char *layout, db_result_fn fn, void *user, ut_err *err);

/* Calls fn for every row of a device name, any status, in id order (the order they were
 * measured), until fn returns non-zero: a search's history (`mmtune report`). */
mmt_status db_each_row(db_handle *db, const char *device_name, db_result_fn fn, void *user,
                       ut_err *err);

/* Counts rows (all statuses) for a device name (NULL: all). */
mmt_status db_count(db_handle *db, const char *device_name, int64_t *count, ut_err *err);

/* Calls fn for each distinct problem that has at least one ok row for a device name (NULL:
 * any device), with dtype/layout filters when not NULL, ordered by dtype, layout, m, n, k,
 * op, batch (a shape tuned plain and with an op is two problems).
 * The dispatcher's "nearest tuned shape" lists these, ranks them by distance to the asked
 * problem, then walks each one's rows with db_each_ok (db_each_best alone would give only the
 * fastest row of a shape, which may not be usable for the asked problem).  p is valid during
 * the call only. */
typedef void (*db_problem_fn)(const db_problem *p, void *user);
mmt_status db_each_shape(db_handle *db, const char *device_name, const char *dtype,
                         const char *layout, db_problem_fn fn, void *user, ut_err *err);
/* The same for the problems with an ok row of id above after_id for device_name, in no order:
 * the problems whose best row may have changed since a reader saw the rows up to that id
 * (ids only grow: db_rows_stamp). */
mmt_status db_each_shape_since(db_handle *db, const char *device_name, int64_t after_id,
                               db_problem_fn fn, void *user, ut_err *err);

/* Search time: how many seconds the tuner has searched a problem (op and batch included) of
 * a device name over a set of candidates (`candidates`: text naming them, e.g. NVRTC version
 * and template hashes; another set starts from 0).  A single statement each (atomic);
 * writable handles only (MMT_ERR_INVALID_ARG on a read-only one).  *seconds is 0 for a
 * problem never searched. */
mmt_status db_search_seconds(db_handle *db, const char *device_name, const db_problem *p,
                             const char *candidates, double *seconds, ut_err *err);
/* Adds seconds (>= 0) to the problem's search time, or sets it with replace. */
mmt_status db_search_add(db_handle *db, const char *device_name, const db_problem *p,
                         const char *candidates, double seconds, bool replace, ut_err *err);

/* ---- rows from elsewhere: merging, importing, checking (db_merge.c, db_row.c) -------------- *
 *
 * Files and exports travel between people and machines, so their rows are untrusted: each
 * is read twice, once to check every column of every row (db_row.c: types, ranges, lengths,
 * characters, and the caller's db_row_policy) and, only when all of them pass, once more into
 * the destination in one transaction.  A refused merge or import leaves the destination as it
 * was, byte for byte, and creates no file; merging or importing the same rows again changes
 * nothing (rows equal in every column but id are dropped; search times are kept per origin,
 * the larger of two copies of one origin's time). */

/* What only the caller knows of a row (the element types, each template's parameters);
 * either function may be NULL.  Each returns false to refuse the row (params_ok with its
 * reason in why). */
typedef struct {
  bool (*dtype_known)(const char *dtype, void *user);
  bool (*params_ok)(const char *template_name, const char *template_hash, const char *params,
                    void *user, char *why, size_t whylen);
  void *user;
} db_row_policy;

typedef struct {
  int64_t rows_read;  /* rows of the sources */
  int64_t rows_added; /* ... added to the destination */
  int64_t duplicates; /* ... already there: every column but the row id equal */
  int64_t searches;   /* search times added or grown */
} db_merge_stats;

/* ---- recorded problems (mmt_options.record) ----
 * The problems an application's calls met without a row of their own, for `mmtune tune
 * --recorded`: one row a device name and problem, with how many contexts met it so and when
 * first and last (Unix seconds).  They live in a table of their own that the first db_record
 * makes: a reader of any version ignores it, so the schema version stays. */
typedef struct {
  db_problem problem;
  int64_t calls, first_at, last_at;
} db_recorded;

/* Adds one meeting of p (on GPU model device_name) to the queue: a new row with calls 1, or
 * calls + 1 and a new last_at.  The handle must be writable.
 * Errors: MMT_ERR_INVALID_ARG (NULL, read-only, negative sizes), MMT_ERR_DB (busy, I/O). */
mmt_status db_record(db_handle *db, const char *device_name, const db_problem *p, ut_err *err);

/* fn(device_name, r, user) for each recorded problem of device_name (NULL: every device), by
 * device, dtype, layout, op, batch and size; a non-zero return stops.  None recorded (no
 * table yet): no call, MMT_OK. */
typedef int (*db_recorded_fn)(const char *device_name, const db_recorded *r, void *user);
mmt_status db_each_recorded(db_handle *db, const char *device_name, db_recorded_fn fn, void *user,
                            ut_err *err);

/* Adds every row and search time of each source file to the database at dst_path (created,
 * with its folders, when missing).  Each source is opened read-only and checked as db_check
 * checks a file (missing: MMT_ERR_NOT_FOUND; not mmtune's or damaged, or a row that fails
 * its checks: MMT_ERR_DB_CORRUPT naming the file, row and column; a newer schema:
 * MMT_ERR_DB_VERSION; dst itself, also through a link: MMT_ERR_INVALID_ARG) before dst is
 * opened.  pol may be NULL.  *stats (may be NULL) is filled on success. */
mmt_status db_merge(const char *dst_path, const char *const *srcs, int nsrcs,
                    const db_row_policy *pol, db_merge_stats *stats, ut_err *err);

/* Gives row r (one without a kernel hash) its kernel hash: hash[0] left '\0' when it is not
 * known (the row stays as it is).  An error stops db_rekey. */
typedef mmt_status (*db_rekey_fn)(const db_result *r, char hash[17], void *user, ut_err *err);
/* Records the kernel hash fn gives each row that has none (rows from before schema 6), in
 * one transaction: all of them or none.  *count (may be NULL): the rows given one.  Errors:
 * fn's; MMT_ERR_DB (a read-only handle, SQLite), MMT_ERR_NOMEM. */
mmt_status db_rekey(db_handle *db, db_rekey_fn fn, void *user, int64_t *count, ut_err *err);

/* Rows as text, to share them without sharing files (mmtune db export / import).  The
 * document: {"format": "mmtune-results", "version": 4, "results": [...], "searches": [...]},
 * each result an object of every column of `results` but id (db_result's fields by their
 * column names; REAL columns null where NaN, 1e999 for an infinity), each search time an
 * object of the searches table's columns; one row a line.  Versions 1 (no search origins),
 * 2 (no kernel_hash: read as "") and 3 (no op or batch: read as "" and 1, the plain GEMM) are
 * read too. */
#define DB_EXPORT_VERSION 4
/* The largest export db_import_json reads (a tuned database of 10^6 rows is about 0.6 GiB). */
#define DB_IMPORT_MAX_BYTES ((size_t)1 << 31)
/* Writes every row of db (device_name NULL: every GPU model) and its search times to out;
 * *rows (may be NULL) gets the number of results written.  Errors: MMT_ERR_IO when out
 * cannot be written, else SQLite's. */
mmt_status db_export_json(db_handle *db, const char *device_name, FILE *out, int64_t *rows,
                          ut_err *err);
/* Adds the rows and search times of an export (text[0..len), text[len] a NUL; named `name`
 * in messages) to the
 * database at dst_path as db_merge adds a file's.  A text that is not such a document -- bad
 * JSON, a NUL byte, another format, a newer version, an unknown member, a row with a column
 * missing, unknown, of the wrong type or out of range -- is refused (MMT_ERR_INVALID_ARG
 * naming the row and column) before dst is opened. */
mmt_status db_import_json(const char *dst_path, const char *name, const char *text, size_t len,
                          const db_row_policy *pol, db_merge_stats *stats, ut_err *err);

typedef struct {
  int schema_version;
  int64_t rows;
} db_check_report;

/* Opens path read-only, runs SQLite's full integrity check and checks every row and search
 * time as db_merge does (pol may be NULL): MMT_OK with the schema version and row count when
 * it is an intact mmtune database; else db_open's errors (a foreign file, a newer schema) or
 * MMT_ERR_DB_CORRUPT naming the first problem found. */
mmt_status db_check(const char *path, const db_row_policy *pol, db_check_report *out,
                    ut_err *err);

/* Writes a self-contained copy of the database at path to out_path (atomically: a temporary
 * beside it, then a rename): every row, compacted, in rollback-journal mode, so it needs no
 * -wal or -shm file and reads from a read-only folder or image as it is.  What to ship with
 * an application.  The source is checked first as db_check checks it (its errors); out_path
 * must not be path (MMT_ERR_INVALID_ARG).  The copy has the current schema: a file of an
 * older one is upgraded in the copy, and left as it is. */
mmt_status db_pack(const char *path, const char *out_path, ut_err *err);

#endif /* MMT_DB_H */
