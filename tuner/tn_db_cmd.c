/*
 * tn_db_cmd.c -- `mmtune db merge|check|export|import`: gathering the databases of several
 * runs (a cluster's shards, a team's machines) into one, checking a file before it is
 * shipped, and sharing rows as text.  The work is db_merge, db_check, db_export_json and
 * db_import_json (db.h); this is the command line around them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "tn_cli.h"
#include "tn_opts.h"

static const tn_opt DB_OPTS[] = {
    {"into", 0, "DST", "merge, import: the database to add rows to (created if missing)"},
    {"db", 0, "PATH", "check, export: the database (default as for tune; check also takes PATH)"},
    {"device-name", 0, "NAME", "export: only this GPU model's rows"},
    {"json", 0, NULL, "export: as JSON (the one format, and the default)"},
    {"out", 'o', "FILE", "export: write FILE (atomically) instead of stdout"},
};

static const tn_cmd_spec DB_SPEC = {
    "db",
    "merge SRC... --into DST | check [PATH] | export [--db PATH] [--json] [--out FILE] | "
    "import FILE|- --into DST",
    "merge: adds every row of each SRC database to DST with its provenance, in one\n"
    "transaction: all of them or none.  A row equal to one DST already has in every column\n"
    "but its id is dropped; the search times of the same search are added together.  A source\n"
    "that is missing, not an mmtune database, damaged, of a newer schema, or DST itself is\n"
    "refused with a one-line error before DST is touched; an older schema is read as it is.\n"
    "check: runs SQLite's integrity check and mmtune's schema checks on a database and prints\n"
    "a one-line verdict; exit code 1 when it is not an intact mmtune database.\n"
    "export: writes the database's rows and search times as one JSON document, one row a line,\n"
    "so a team can share rows without sharing files.\n"
    "import: adds the rows of such a document (FILE, or - for stdin) to DST as merge adds a\n"
    "database's: one transaction, duplicates dropped; a document that is not one (bad JSON,\n"
    "another format, a newer version, a wrong column) is refused with DST unchanged.",
    DB_OPTS, (int)(sizeof DB_OPTS / sizeof DB_OPTS[0])};

static int merge(const tn_opts *o) {
  const char *into = tn_opts_get(o, "into");
  if (!into || !*into) return tn_usage_error("db", "merge needs --into DST");
  if (o->npos < 2) return tn_usage_error("db", "merge needs at least one SRC database");
  db_handle *dst = NULL;
  ut_err err;
  db_merge_stats st;
  mmt_status rc = db_open(into, false, &dst, &err);
  if (!rc) rc = db_merge(dst, (const char *const *)&o->pos[1], o->npos - 1, &st, &err);
  db_close(dst);
  if (rc) return tn_fail("db", "%s", err.msg);
  printf("merged %d database%s into %s: %lld rows read, %lld added, %lld duplicates dropped, "
         "%lld search times\n",
         o->npos - 1, o->npos - 1 == 1 ? "" : "s", into, (long long)st.rows_read,
         (long long)st.rows_added, (long long)st.duplicates, (long long)st.searches);
  return TN_EXIT_OK;
}

static int check(const tn_opts *o) {
  char path[4096];
  if (o->npos > 2) return tn_usage_error("db", "unexpected argument '%s'", o->pos[2]);
  if (o->npos == 2 && tn_opts_get(o, "db"))
    return tn_usage_error("db", "give the database once: PATH or --db PATH");
  if (o->npos == 2) {
    snprintf(path, sizeof path, "%s", o->pos[1]);
  } else {
    int ex = tn_opt_db_path("db", tn_opts_get(o, "db"), path, sizeof path);
    if (ex) return ex;
  }
  db_check_report rep;
  ut_err err;
  if (db_check(path, &rep, &err)) return tn_fail("db", "check failed: %s", err.msg);
  printf("ok: %s: mmtune database, schema %d%s, %lld rows, integrity ok\n", path,
         rep.schema_version, rep.schema_version < DB_SCHEMA_VERSION ? " (upgraded when written)" : "",
         (long long)rep.rows);
  return TN_EXIT_OK;
}

static int export_json(const tn_opts *o) {
  char path[4096];
  if (o->npos > 1) return tn_usage_error("db", "unexpected argument '%s'", o->pos[1]);
  int ex = tn_opt_db_path("db", tn_opts_get(o, "db"), path, sizeof path);
  if (ex) return ex;
  const char *file = tn_opts_get(o, "out");
  db_handle *db = NULL;
  ut_err err;
  char *text = NULL;
  size_t len = 0;
  FILE *out = file ? open_memstream(&text, &len) : stdout;
  if (!out) return tn_fail("db", "out of memory");
  mmt_status rc = db_open(path, true, &db, &err);
  if (rc == MMT_ERR_NOT_FOUND) rc = ut_fail(&err, rc, "no database at '%s'", path);
  if (!rc) rc = db_export_json(db, tn_opts_get(o, "device-name"), out, NULL, &err);
  db_close(db);
  if (file) {
    fclose(out);
    if (!rc) rc = ut_write_file_atomic(file, text, len, &err);
    free(text);
  }
  return rc ? tn_fail("db", "export failed: %s", err.msg) : TN_EXIT_OK;
}

/* FILE's text, or stdin's for "-". */
static mmt_status read_all(const char *file, char **text, ut_err *err) {
  size_t len = 0;
  if (strcmp(file, "-") != 0) return ut_read_file(file, text, &len, err);
  FILE *mem = open_memstream(text, &len);
  if (!mem) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) fwrite(buf, 1, n, mem);
  bool bad = ferror(stdin);
  fclose(mem);
  if (bad) {
    free(*text);
    *text = NULL;
    return ut_fail(err, MMT_ERR_IO, "cannot read stdin");
  }
  return MMT_OK;
}

static int import_json(const tn_opts *o) {
  const char *into = tn_opts_get(o, "into");
  if (!into || !*into) return tn_usage_error("db", "import needs --into DST");
  if (o->npos != 2) return tn_usage_error("db", "import needs one FILE (or - for stdin)");
  char *text = NULL;
  db_handle *dst = NULL;
  db_merge_stats st;
  ut_err err;
  mmt_status rc = read_all(o->pos[1], &text, &err);
  if (!rc) rc = db_open(into, false, &dst, &err);
  if (!rc) rc = db_import_json(dst, text, &st, &err);
  db_close(dst);
  free(text);
  if (rc) return tn_fail("db", "import of '%s' failed: %s", o->pos[1], err.msg);
  printf("imported %s into %s: %lld rows read, %lld added, %lld duplicates dropped, %lld search "
         "times\n",
         o->pos[1], into, (long long)st.rows_read, (long long)st.rows_added,
         (long long)st.duplicates, (long long)st.searches);
  return TN_EXIT_OK;
}

int tn_cmd_db(int argc, char **argv) {
  tn_opts o;
  int ex = tn_opts_parse(&DB_SPEC, argc, argv, &o);
  if (ex || o.help) goto done;
  if (o.npos < 1)
    ex = tn_usage_error("db", "expected a subcommand: merge, check, export or import");
  else if (!strcmp(o.pos[0], "merge"))
    ex = merge(&o);
  else if (!strcmp(o.pos[0], "check"))
    ex = check(&o);
  else if (!strcmp(o.pos[0], "export"))
    ex = export_json(&o);
  else if (!strcmp(o.pos[0], "import"))
    ex = import_json(&o);
  else
    ex = tn_usage_error("db", "unknown subcommand '%s' (expected merge, check, export or import)",
                        o.pos[0]);
done:
  tn_opts_free(&o);
  return ex;
}
