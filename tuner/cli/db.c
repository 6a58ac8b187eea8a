/*
 * cli/db.c -- `mmtune db merge|check|export|import|pack|rekey`: gathering the databases of
 * several runs (a cluster's shards, a team's machines) into one, checking a file before it is
 * shipped, sharing rows as text, packing a file to ship, and recording the kernels of rows
 * from before kernel hashes.  The work is db_merge, db_check, db_export_json, db_import_json,
 * db_pack (db.h) and tn_rekey; this is the command line around them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/rekey.h"
#include "cli/row_policy.h"
#include "db.h"

static const tn_opt DB_OPTS[] = {
    {"into", 0, "DST", "merge, import: the database to add rows to (created if missing)"},
    {"db", 0, "PATH",
     "check, export, pack, rekey: the database (default as for tune; check "
     "also takes PATH)"},
    {"device-name", 0, "NAME", "export: only this GPU model's rows"},
    {"json", 0, NULL, "export: as JSON (the one format, and the default)"},
    {"out", 'o', "FILE",
     "export: write FILE (atomically) instead of stdout; pack: the file to "
     "write"},
};

static const tn_cmd_spec DB_SPEC = {
    "db",
    "merge SRC... --into DST | check [PATH] | export [--db PATH] [--json] [--out FILE] | "
    "import FILE|- --into DST | pack [--db PATH] --out FILE | rekey [--db PATH]",
    "Databases and exports from elsewhere are untrusted: merge, import and check read every\n"
    "row and refuse a file whose row has a column of the wrong type, out of range (sizes over\n"
    "2^31 - 1, a negative or infinite time), with bytes that are not printable UTF-8, an\n"
    "unknown dtype, layout or status, or params that are not a config of the row's template\n"
    "(when this machine has that version of it); the message names the row and column.\n"
    "merge: adds every row of each SRC database to DST with its provenance, in one\n"
    "transaction: all of them or none.  A row equal to one DST already has in every column\n"
    "but its id is dropped; search times are kept per origin (the file that searched), so\n"
    "merging the same file again changes nothing.  Every SRC is checked in full (as check\n"
    "does) before DST is opened: a refused merge leaves DST byte for byte as it was and\n"
    "creates no file.  An older schema is read as it is.\n"
    "check: runs SQLite's integrity check, mmtune's schema checks and the row checks above on\n"
    "a database and prints a one-line verdict; exit code 1 when it is not an intact mmtune\n"
    "database.\n"
    "export: writes the database's rows and search times as one JSON document, one row a line,\n"
    "so a team can share rows without sharing files.\n"
    "import: adds the rows of such a document (FILE, or - for stdin; at most 2 GiB) to DST as\n"
    "merge adds a database's, refusing it whole, with DST untouched, when any row is bad.\n"
    "pack: writes a self-contained copy of a database to FILE: compacted, without the -wal and\n"
    "-shm side files, readable from a read-only folder or image.  What to ship with an\n"
    "application.\n"
    "rekey: records the kernel each row measured before mmtune kept kernel hashes (an older\n"
    "database) where this machine's templates still emit it, so that the row outlives the\n"
    "next edit of its template.  Rows need it only for that: without it they serve while\n"
    "their template is as measured (or listed in its lineage).\n"
    "Exit codes: 2 for bad arguments and missing files, 1 when the work failed (a refused\n"
    "input, a damaged database).",
    DB_OPTS, (int)(sizeof DB_OPTS / sizeof DB_OPTS[0])};

/* The exit code for a failed db_merge, db_check or db_pack: a missing file or a bad argument
 * (a source that is the destination) is 2, the rest failed work (1). */
static int db_failed(mmt_status rc, const char *what, const ut_err *err) {
  if (rc == MMT_ERR_NOT_FOUND || rc == MMT_ERR_INVALID_ARG)
    return tn_usage_error("db", "%s", err->msg);
  return tn_fail("db", "%s%s", what, err->msg);
}

static int merge(const tn_opts *o) {
  const char *into = tn_opts_get(o, "into");
  if (!into || !*into) return tn_usage_error("db", "merge needs --into DST");
  if (o->npos < 2) return tn_usage_error("db", "merge needs at least one SRC database");
  ut_err err;
  db_merge_stats st;
  tn_row_policy pol;
  tn_row_policy_init(&pol);
  mmt_status rc =
      db_merge(into, (const char *const *)&o->pos[1], o->npos - 1, &pol.policy, &st, &err);
  tn_row_policy_free(&pol);
  if (rc) return db_failed(rc, "", &err);
  printf("merged %d database%s into %s: %lld rows read, %lld added, %lld duplicates dropped, "
         "%lld search times added or grown\n",
         o->npos - 1, o->npos - 1 == 1 ? "" : "s", into, (long long)st.rows_read,
         (long long)st.rows_added, (long long)st.duplicates, (long long)st.searches);
  return TN_EXIT_OK;
}

/* The database a command reads: PATH (check's positional) or --db or the default. */
static int db_arg(const tn_opts *o, bool positional, char *path, size_t cap) {
  if (o->npos > (positional ? 2 : 1))
    return tn_usage_error("db", "unexpected argument '%s'", o->pos[positional ? 2 : 1]);
  if (o->npos == 2 && tn_opts_get(o, "db"))
    return tn_usage_error("db", "give the database once: PATH or --db PATH");
  if (o->npos == 2) {
    snprintf(path, cap, "%s", o->pos[1]);
    return TN_EXIT_OK;
  }
  return tn_opt_db_path("db", tn_opts_get(o, "db"), path, cap);
}

static int check(const tn_opts *o) {
  char path[4096];
  int ex = db_arg(o, true, path, sizeof path);
  if (ex) return ex;
  db_check_report rep;
  ut_err err;
  tn_row_policy pol;
  tn_row_policy_init(&pol);
  mmt_status rc = db_check(path, &pol.policy, &rep, &err);
  tn_row_policy_free(&pol);
  if (rc) return db_failed(rc, "check failed: ", &err);
  printf("ok: %s: mmtune database, schema %d%s, %lld rows, integrity ok\n", path,
         rep.schema_version, rep.schema_version < DB_SCHEMA_VERSION ? " (upgraded when written)" : "",
         (long long)rep.rows);
  return TN_EXIT_OK;
}

static int export_json(const tn_opts *o) {
  char path[4096];
  int ex = db_arg(o, false, path, sizeof path);
  if (ex) return ex;
  const char *file = tn_opts_get(o, "out");
  db_handle *db = NULL;
  ut_err err;
  char *text = NULL;
  size_t len = 0;
  mmt_status rc = db_open(path, true, &db, &err);
  if (rc == MMT_ERR_NOT_FOUND) return tn_usage_error("db", "%s", err.msg);
  FILE *out = rc ? NULL : file ? open_memstream(&text, &len) : stdout;
  if (!rc && !out) rc = ut_fail(&err, MMT_ERR_NOMEM, "out of memory");
  if (!rc) rc = db_export_json(db, tn_opts_get(o, "device-name"), out, NULL, &err);
  db_close(db);
  if (out && file && fclose(out) != 0 && !rc) rc = ut_fail(&err, MMT_ERR_NOMEM, "out of memory");
  if (!rc && file) rc = ut_write_file_atomic(file, text, len, &err);
  free(text);
  return rc ? tn_fail("db", "export failed: %s", err.msg) : TN_EXIT_OK;
}

/* FILE's text, or stdin's for "-", NUL-terminated, at most DB_IMPORT_MAX_BYTES: endless input
 * ends with an error instead of filling the memory. */
static mmt_status read_input(const char *file, char **text, size_t *len, ut_err *err) {
  const bool is_stdin = !strcmp(file, "-");
  FILE *f = is_stdin ? stdin : fopen(file, "rb");
  *text = NULL;
  *len = 0;
  if (!f)
    return ut_fail(err, errno == ENOENT ? MMT_ERR_NOT_FOUND : MMT_ERR_IO, "cannot open '%s': %s",
                   file, strerror(errno));
  mmt_status rc = MMT_OK;
  size_t cap = 0, n = 0;
  char *buf = NULL;
  for (;;) {
    if (n + 65536 + 1 > cap) {
      /* doubling, but never past the limit and one read more: that read tells it is passed */
      size_t want = cap ? 2 * cap : (size_t)1 << 20;
      if (want > DB_IMPORT_MAX_BYTES + 65536 + 1) want = DB_IMPORT_MAX_BYTES + 65536 + 1;
      char *grown = realloc(buf, want);
      if (!grown) {
        rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory reading '%s'", file);
        break;
      }
      buf = grown, cap = want;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (n > DB_IMPORT_MAX_BYTES) {
      rc = ut_fail(err, MMT_ERR_INVALID_ARG, "'%s' is larger than %zu MiB: split the export "
                   "(mmtune db export --device-name NAME)", file, DB_IMPORT_MAX_BYTES >> 20);
      break;
    }
    if (got == 0) {
      if (ferror(f)) rc = ut_fail(err, MMT_ERR_IO, "cannot read '%s': %s", file, strerror(errno));
      break;
    }
  }
  if (!is_stdin) fclose(f);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *text = buf;
  *len = n;
  return MMT_OK;
}

static int import_json(const tn_opts *o) {
  const char *into = tn_opts_get(o, "into");
  if (!into || !*into) return tn_usage_error("db", "import needs --into DST");
  if (o->npos != 2) return tn_usage_error("db", "import needs one FILE (or - for stdin)");
  char *text = NULL;
  size_t len = 0;
  db_merge_stats st;
  ut_err err;
  tn_row_policy pol;
  tn_row_policy_init(&pol);
  mmt_status rc = read_input(o->pos[1], &text, &len, &err);
  const bool missing = rc == MMT_ERR_NOT_FOUND;
  if (!rc) rc = db_import_json(into, o->pos[1], text, len, &pol.policy, &st, &err);
  tn_row_policy_free(&pol);
  free(text);
  /* a missing FILE is a bad argument; a refused document is failed work */
  if (missing) return tn_usage_error("db", "%s", err.msg);
  if (rc) return tn_fail("db", "import of '%s' failed: %s", o->pos[1], err.msg);
  printf("imported %s into %s: %lld rows read, %lld added, %lld duplicates dropped, %lld search "
         "times added or grown\n",
         o->pos[1], into, (long long)st.rows_read, (long long)st.rows_added,
         (long long)st.duplicates, (long long)st.searches);
  return TN_EXIT_OK;
}

static int pack(const tn_opts *o) {
  char path[4096];
  int ex = db_arg(o, false, path, sizeof path);
  if (ex) return ex;
  const char *out = tn_opts_get(o, "out");
  if (!out || !*out) return tn_usage_error("db", "pack needs --out FILE");
  ut_err err;
  mmt_status rc = db_pack(path, out, &err);
  if (rc) return db_failed(rc, "pack failed: ", &err);
  printf("packed %s into %s: one file, no -wal or -shm, reads from a read-only folder\n", path,
         out);
  return TN_EXIT_OK;
}

static int rekey(const tn_opts *o) {
  char path[4096];
  int ex = db_arg(o, false, path, sizeof path);
  if (ex) return ex;
  if (access(path, F_OK) != 0) return tn_usage_error("db", "no database at '%s'", path);
  ut_err err;
  int64_t done = 0, left = 0;
  mmt_status rc = tn_rekey(path, &done, &left, &err);
  if (rc == MMT_ERR_NOT_FOUND) return tn_usage_error("db", "%s", err.msg);
  if (rc) return tn_fail("db", "rekey failed: %s", err.msg);
  printf("rekeyed %s: %lld rows given the hash of their kernel, %lld left without one (their "
         "template changed since, or is not here)\n",
         path, (long long)done, (long long)left);
  return TN_EXIT_OK;
}

int tn_cmd_db(int argc, char **argv) {
  tn_opts o;
  int ex = tn_opts_parse(&DB_SPEC, argc, argv, &o);
  if (ex || o.help) goto done;
  if (o.npos < 1)
    ex = tn_usage_error("db", "expected a subcommand: merge, check, export, import, pack or rekey");
  else if (!strcmp(o.pos[0], "merge"))
    ex = merge(&o);
  else if (!strcmp(o.pos[0], "check"))
    ex = check(&o);
  else if (!strcmp(o.pos[0], "export"))
    ex = export_json(&o);
  else if (!strcmp(o.pos[0], "import"))
    ex = import_json(&o);
  else if (!strcmp(o.pos[0], "pack"))
    ex = pack(&o);
  else if (!strcmp(o.pos[0], "rekey"))
    ex = rekey(&o);
  else
    ex = tn_usage_error(
        "db", "unknown subcommand '%s' (expected merge, check, export, import, pack or rekey)",
        o.pos[0]);
done:
  tn_opts_free(&o);
  return ex;
}
