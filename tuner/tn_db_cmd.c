/*
 * tn_db_cmd.c -- `mmtune db merge` and `mmtune db check`: gathering the databases of several
 * runs (a cluster's shards, a team's machines) into one, and checking a file before it is
 * shipped.  The work is db_merge and db_check (db.h); this is the command line around them.
 */
#include <stdio.h>
#include <string.h>

#include "db.h"
#include "tn_cli.h"
#include "tn_opts.h"

static const tn_opt DB_OPTS[] = {
    {"into", 0, "DST", "merge: the database to add the sources' rows to (created if missing)"},
    {"db", 0, "PATH", "check: the database (default as for tune; or give PATH after check)"},
};

static const tn_cmd_spec DB_SPEC = {
    "db", "merge SRC... --into DST | check [PATH]",
    "merge: adds every row of each SRC database to DST with its provenance, in one\n"
    "transaction: all of them or none.  A row equal to one DST already has in every column\n"
    "but its id is dropped; the search times of the same search are added together.  A source\n"
    "that is missing, not an mmtune database, damaged, of a newer schema, or DST itself is\n"
    "refused with a one-line error before DST is touched; an older schema is read as it is.\n"
    "check: runs SQLite's integrity check and mmtune's schema checks on a database and prints\n"
    "a one-line verdict; exit code 1 when it is not an intact mmtune database.",
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

int tn_cmd_db(int argc, char **argv) {
  tn_opts o;
  int ex = tn_opts_parse(&DB_SPEC, argc, argv, &o);
  if (ex || o.help) goto done;
  if (o.npos < 1)
    ex = tn_usage_error("db", "expected a subcommand: merge or check");
  else if (!strcmp(o.pos[0], "merge"))
    ex = merge(&o);
  else if (!strcmp(o.pos[0], "check"))
    ex = check(&o);
  else
    ex = tn_usage_error("db", "unknown subcommand '%s' (expected merge or check)", o.pos[0]);
done:
  tn_opts_free(&o);
  return ex;
}
