/*
 * cli/show.c -- `mmtune show`: the best kernel the database holds for each GPU model, dtype,
 * layout and shape.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/inspect.h"
#include "cli/opts.h"
#include "db.h"

static const tn_opt show_opts[] = {
    {"db", 0, "PATH", "database (default $MMTUNE_DB, else ~/.cache/mmtune/mmtune.db)"},
    {"device", 'd', "NAME", "only this GPU model, e.g. 'NVIDIA H100 80GB HBM3'"},
    {"all", 'a', NULL, "also print how many measurements (any status) the database holds per GPU"},
};
static const tn_cmd_spec show_spec = {
    "show", "[--db PATH] [--device NAME] [--all]",
    "Prints the best kernel recorded for each (GPU model, dtype, layout, M, N, K, epilogue,\n"
    "batch): its template, parameters, median time, TFLOP/s and relative error against the\n"
    "reference, and for mmt_matmul's fused or batched problems their epilogue and batch.",
    show_opts, 3};

typedef struct {
  db_result *rows;
  int n, cap;
  bool nomem;
} show_rows;

static int show_collect(const db_result *r, void *user) {
  show_rows *s = user;
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    db_result *rows = realloc(s->rows, (size_t)cap * sizeof *rows);
    if (!rows) {
      s->nomem = true;
      return 1;
    }
    s->rows = rows, s->cap = cap;
  }
  s->rows[s->n++] = *r;
  return 0;
}

static int width_i64(int w, int64_t v) {
  char buf[24];
  int len = snprintf(buf, sizeof buf, "%lld", (long long)v);
  return len > w ? len : w;
}

static void show_table(const db_result *rows, int n) {
  int wd = 6, wt = 8, wp = 6, wm = 1, wn = 1, wk = 1;
  for (int i = 0; i < n; i++) {
    wd = tn_width_of(wd, rows[i].device.name), wt = tn_width_of(wt, rows[i].template_name);
    wp = tn_width_of(wp, rows[i].params), wm = width_i64(wm, rows[i].problem.m);
    wn = width_i64(wn, rows[i].problem.n), wk = width_i64(wk, rows[i].problem.k);
  }
  printf("%-*s  %-5s  %-6s  %*s  %*s  %*s  %-*s  %-*s  %10s  %8s  %8s\n", wd, "device", "dtype",
         "layout", wm, "M", wn, "N", wk, "K", wt, "template", wp, "params", "median ms", "TFLOP/s",
         "rel err");
  for (int i = 0; i < n; i++) {
    const db_result *r = &rows[i];
    printf("%-*s  %-5s  %-6s  %*lld  %*lld  %*lld  %-*s  %-*s  %10.4f  %8.2f  %8.1e", wd,
           r->device.name, r->problem.dtype, r->problem.layout, wm, (long long)r->problem.m, wn,
           (long long)r->problem.n, wk, (long long)r->problem.k, wt, r->template_name, wp,
           r->params, r->ms_median, r->tflops, r->rel_err);
    /* an op kernel's problem (mmt_matmul): its epilogue and batch after the figures */
    if (r->problem.op[0] || r->problem.batch > 1)
      printf("  %s%s batch %lld", r->problem.op[0] ? "epilogue " : "", r->problem.op,
             (long long)(r->problem.batch > 1 ? r->problem.batch : 1));
    printf("\n");
  }
}

/* Rows per GPU model (any status): every model with a best row, then the total. */
static int show_counts(db_handle *db, const show_rows *s, const char *device) {
  int64_t count = 0;
  ut_err e;
  printf("\nmeasurements (any status):\n");
  for (int i = 0; i < s->n; i++) {
    const char *name = s->rows[i].device.name;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) seen = strcmp(s->rows[j].device.name, name) == 0;
    if (seen) continue;
    if (db_count(db, name, &count, &e) != MMT_OK) return tn_fail("show", "%s", e.msg);
    printf("  %-30s %lld\n", name, (long long)count);
  }
  if (db_count(db, device, &count, &e) != MMT_OK) return tn_fail("show", "%s", e.msg);
  printf("  %-30s %lld\n", "total", (long long)count);
  return TN_EXIT_OK;
}

static int show_open(const tn_opts *o, char *path, size_t pathlen, db_handle **db) {
  int rc = tn_opt_db_path("show", tn_opts_get(o, "db"), path, pathlen);
  if (rc != TN_EXIT_OK) return rc;
  ut_err e;
  mmt_status st = db_open(path, true, db, &e);
  if (st == MMT_ERR_NOT_FOUND)
    return tn_fail("show", "no database at '%s' (run mmtune --device 0 first)", path);
  if (st != MMT_OK) return tn_fail("show", "%s", e.msg);
  return TN_EXIT_OK;
}

int tn_cmd_show(int argc, char **argv) {
  tn_opts o;
  db_handle *db = NULL;
  show_rows s = {0};
  char path[4096];
  ut_err e;
  int rc = tn_opts_parse(&show_spec, argc, argv, &o);
  if (rc != TN_EXIT_OK || o.help) goto cleanup;
  if (o.npos > 0) {
    rc = tn_usage_error("show", "unexpected argument '%s'", o.pos[0]);
    goto cleanup;
  }
  if ((rc = show_open(&o, path, sizeof path, &db)) != TN_EXIT_OK) goto cleanup;
  const char *device = tn_opts_get(&o, "device");
  if (db_each_best(db, device, NULL, NULL, show_collect, &s, &e) != MMT_OK || s.nomem) {
    rc = tn_fail("show", "%s", s.nomem ? "out of memory" : e.msg);
    goto cleanup;
  }
  if (s.n == 0)
    printf("no tuned results%s%s%s in '%s'\n", device ? " for '" : "", device ? device : "",
           device ? "'" : "", path);
  else
    show_table(s.rows, s.n);
  if (tn_opts_has(&o, "all")) rc = show_counts(db, &s, device);
cleanup:
  free(s.rows);
  db_close(db);
  tn_opts_free(&o);
  return rc;
}
