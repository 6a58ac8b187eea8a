/*
 * report/report.c -- see report/report.h.  This file holds the reading of the database, the
 * running of gnuplot and tn_report_make; the rest is in the files report/report_int.h names:
 * report/bench_csv.c reads --bench, report/charts.c writes report.gp and the data files (the
 * charts are listed there), report/html.c writes index.html.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "report/report.h"
#include "report/report_int.h"

/* ---- helpers ------------------------------------------------------------------------------ */

double tn_report_tflops(const db_problem *p, double ms) {
  return 2.0 * (double)p->m * (double)p->n * (double)p->k / (ms * 1e9);
}

/* Opens DIR/name for writing. */
FILE *tn_report_open(const report *r, const char *name, ut_err *err) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", r->out, name);
  FILE *f = fopen(path, "w");
  if (!f) ut_fail(err, MMT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  return f;
}

/* Closes a file tn_report_open gave, reporting a failed write. */
mmt_status tn_report_close(const report *r, FILE *f, const char *name, ut_err *err) {
  bool bad = ferror(f) != 0;
  if (fclose(f) != 0) bad = true;
  if (bad)
    return ut_fail(err, MMT_ERR_IO, "cannot write '%s/%s': %s", r->out, name, strerror(errno));
  return MMT_OK;
}

/* ---- reading the database ----------------------------------------------------------------- */

static int on_best(const db_result *row, void *user) {
  report *r = user;
  db_result *v = ut_grow(r->best, &r->best_cap, r->nbest + 1, sizeof *v);
  if (!v) return r->nomem = true;
  r->best = v;
  r->best[r->nbest++] = *row;
  return 0;
}

/* The model's config of an ok row, -1 when it has none usable (no launch shape). */
static int config_of(const report *r, const db_result *row) {
  if (row->status != DB_OK || !r->model) return -1;
  int c = rt_model_find(r->model, row->template_name, row->template_hash, row->params,
                        row->problem.dtype);
  if (c < 0) return -1;
  rt_model_config cfg;
  rt_model_get_config(r->model, c, &cfg);
  return cfg.launch.tile_m > 0 && cfg.launch.tile_n > 0 ? c : -1;
}

static int on_row(const db_result *row, void *user) {
  report *r = user;
  rp_row *v = ut_grow(r->rows, &r->rows_cap, r->nrows + 1, sizeof *v);
  if (!v) return r->nomem = true;
  r->rows = v;
  r->rows[r->nrows++] = (rp_row){.p = row->problem,
                                 .id = row->id,
                                 .created_at = row->created_at,
                                 .status = row->status,
                                 .ms = row->ms_median,
                                 .cfg = config_of(r, row)};
  return 0;
}

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

/* By dtype, layout, m, n, k, op, batch: the order of db_each_best. */
static int problem_cmp(const db_problem *x, const db_problem *y) {
  int c = strcmp(x->dtype, y->dtype);
  if (!c) c = strcmp(x->layout, y->layout);
  if (!c) c = cmp_i64(x->m, y->m);
  if (!c) c = cmp_i64(x->n, y->n);
  if (!c) c = cmp_i64(x->k, y->k);
  if (!c) c = strcmp(x->op, y->op);
  return c ? c : cmp_i64(x->batch, y->batch);
}

static int by_problem_id(const void *a, const void *b) {
  const rp_row *x = a, *y = b;
  int c = problem_cmp(&x->p, &y->p);
  return c ? c : cmp_i64(x->id, y->id);
}

/* Sorts the rows by problem and id and cuts them into groups. */
static mmt_status group_rows(report *r, ut_err *err) {
  qsort(r->rows, (size_t)r->nrows, sizeof *r->rows, by_problem_id);
  r->groups = calloc((size_t)r->nrows + 1, sizeof *r->groups);
  if (!r->groups) return ut_fail(err, MMT_ERR_NOMEM, "out of memory grouping rows");
  for (int i = 0; i < r->nrows; i++) {
    if (i == 0 || problem_cmp(&r->rows[i].p, &r->rows[i - 1].p))
      r->groups[r->ngroups++] = (rp_group){.first = i, .best_ms = INFINITY};
    rp_group *g = &r->groups[r->ngroups - 1];
    g->count++;
    if (r->rows[i].status == DB_OK && r->rows[i].ms > 0) {
      g->ok++;
      g->best_ms = fmin(g->best_ms, r->rows[i].ms);
    }
  }
  return MMT_OK;
}

/* The GPU models with ok rows: their count, the first into first[128], all as "'A', 'B'" into
 * list. */
static mmt_status device_names(db_handle *db, char *first, char *list, size_t len, int *count,
                               ut_err *err) {
  report tmp = {.nomem = false};
  mmt_status rc = db_each_best(db, NULL, NULL, NULL, on_best, &tmp, err);
  if (!rc && tmp.nomem) rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  *count = 0;
  list[0] = first[0] = 0;
  for (int i = 0; i < tmp.nbest && !rc; i++) {
    const char *name = tmp.best[i].device.name;
    if (i && !strcmp(name, tmp.best[i - 1].device.name)) continue;
    if (!*count) ut_copy(first, 128, name);
    size_t used = strlen(list);
    snprintf(list + used, len - used, "%s'%s'", *count ? ", " : "", name);
    (*count)++;
  }
  free(tmp.best);
  return rc;
}

/* Reads the device's rows, its best rows and its model from an open database. */
static mmt_status read_rows(report *r, db_handle *db, ut_err *err) {
  mmt_status rc = rt_chooser_new(NULL, 0, &r->ch, err);
  if (!rc) rc = rt_chooser_model(r->ch, db, r->device, &r->model, err);
  if (!rc) rc = db_each_best(db, r->device, NULL, NULL, on_best, r, err);
  if (!rc) rc = db_each_row(db, r->device, on_row, r, err);
  if (!rc && r->nomem) rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory reading rows");
  return rc;
}

/* Opens the database, picks the device, reads its rows; an exit code (0: go on). */
static int read_db(report *r, ut_err *err) {
  db_handle *db = NULL;
  mmt_status rc = db_open(r->db_path, true, &db, err);
  if (rc == MMT_ERR_NOT_FOUND) return tn_usage_error("report", "no database at '%s'", r->db_path);
  if (rc) return tn_fail("report", "%s", err->msg);
  char first[128], names[1024];
  int n = 0, ex = 0;
  if ((rc = device_names(db, first, names, sizeof names, &n, err))) {
    ex = tn_fail("report", "%s", err->msg);
  } else if (!r->device[0] && n != 1) {
    ex = n ? tn_usage_error("report", "'%s' holds %d GPU models (%s): pick one with --device-name",
                            r->db_path, n, names)
           : tn_usage_error("report", "no ok rows in '%s'", r->db_path);
  } else {
    if (!r->device[0]) ut_copy(r->device, sizeof r->device, first);
    if ((rc = read_rows(r, db, err)))
      ex = tn_fail("report", "%s", err->msg);
    else if (r->nbest == 0)
      ex = tn_usage_error("report", "no ok rows for '%s' in '%s' (it has %s)", r->device,
                          r->db_path, n ? names : "none");
  }
  db_close(db);
  if (!ex && (rc = group_rows(r, err))) ex = tn_fail("report", "%s", err->msg);
  return ex;
}

/* The group of problem p, or -1. */
int tn_report_group_of(const report *r, const db_problem *p) {
  int lo = 0, hi = r->ngroups - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2, c = problem_cmp(p, &r->rows[r->groups[mid].first].p);
    if (!c) return mid;
    if (c < 0)
      hi = mid - 1;
    else
      lo = mid + 1;
  }
  return -1;
}

/* ---- running gnuplot ---------------------------------------------------------------------- */

/* The last non-empty line of DIR/gnuplot.log into line (may be ""). */
static void log_tail(const report *r, char *line, size_t len) {
  char path[4200], *text = NULL;
  line[0] = 0;
  snprintf(path, sizeof path, "%s/gnuplot.log", r->out);
  if (ut_read_file(path, &text, NULL, NULL)) return;
  char *end = text + strlen(text);
  while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ')) *--end = 0;
  char *start = strrchr(text, '\n');
  ut_copy(line, len, start ? start + 1 : text);
  free(text);
}

/* In the child: DIR as the working folder, the log as stdout and stderr, then gnuplot
 * report.gp.  A failure writes {stage, errno} to fd (stage 0: chdir, 1: exec). */
static void gnuplot_child(const report *r, int logfd, int fd) {
  int nul = open("/dev/null", O_RDONLY), why[2] = {0, 0};
  if (nul < 0 || dup2(nul, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0 || chdir(r->out)) {
    why[1] = errno;
  } else {
    execlp("gnuplot", "gnuplot", "report.gp", (char *)NULL);
    why[0] = 1, why[1] = errno;
  }
  if (write(fd, why, sizeof why) < 0) _exit(126);
  _exit(127);
}

/* Runs gnuplot on DIR/report.gp and waits for it. */
static mmt_status run_gnuplot(const report *r, ut_err *err) {
  char log[4200];
  int fds[2], why[2];
  snprintf(log, sizeof log, "%s/gnuplot.log", r->out);
  int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (logfd < 0) return ut_fail(err, MMT_ERR_IO, "cannot write '%s': %s", log, strerror(errno));
  if (pipe2(fds, O_CLOEXEC) != 0) {
    close(logfd);
    return ut_fail(err, MMT_ERR_IO, "cannot run gnuplot: pipe: %s", strerror(errno));
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) gnuplot_child(r, logfd, fds[1]);
  int fork_errno = errno, status = 0;
  close(logfd);
  close(fds[1]);
  ssize_t got = 0;
  if (pid > 0)
    while ((got = read(fds[0], why, sizeof why)) < 0 && errno == EINTR) continue;
  close(fds[0]);
  if (pid < 0)
    return ut_fail(err, MMT_ERR_IO, "cannot run gnuplot: fork: %s", strerror(fork_errno));
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return ut_fail(err, MMT_ERR_IO, "waiting for gnuplot: %s", strerror(errno));
  if (got == (ssize_t)sizeof why && why[0] == 1 && why[1] == ENOENT)
    return ut_fail(err, MMT_ERR_NOT_FOUND,
                   "gnuplot is not on PATH (install it: apt-get install "
                   "gnuplot-nox); the data and script are in '%s'",
                   r->out);
  if (got == (ssize_t)sizeof why)
    return ut_fail(err, MMT_ERR_IO, "cannot run gnuplot: %s: %s", why[0] ? "exec" : "setup",
                   strerror(why[1]));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return MMT_OK;
  char tail[512];
  log_tail(r, tail, sizeof tail);
  return ut_fail(err, MMT_ERR_IO, "gnuplot failed (%s %d) on '%s/report.gp': %s",
                 WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), r->out,
                 tail[0] ? tail : "no message (see gnuplot.log)");
}

/* ---- the report --------------------------------------------------------------------------- */

/* The data files and report.gp, then gnuplot, then index.html. */
static mmt_status draw(report *r, ut_err *err) {
  mmt_status rc = ut_mkdir_p(r->out, err);
  if (!rc) rc = tn_report_write_script(r, err);
  if (!rc) rc = run_gnuplot(r, err);
  if (!rc) rc = tn_report_write_html(r, err);
  return rc;
}

static void report_free(report *r) {
  free(r->best);
  free(r->rows);
  free(r->groups);
  free(r->bench);
  rt_chooser_free(r->ch);
}

int tn_report_make(const char *db_path, const char *device, const char *bench_path,
                   const char *out) {
  report r = {.db_path = db_path, .out = out, .bench_path = bench_path};
  if (device) ut_copy(r.device, sizeof r.device, device);
  double t0 = ut_now_seconds();
  ut_err err = {{0}};
  int ex = read_db(&r, &err);
  if (!ex && r.bench_path) ex = tn_report_read_bench(&r, &err);
  if (!ex && draw(&r, &err)) ex = tn_fail("report", "%s", err.msg);
  if (!ex)
    printf("report of %s (%d rows, %d problems): %s/index.html, %d charts, in %.2f s\n", r.device,
           r.nrows, r.ngroups, r.out, r.npics, ut_now_seconds() - t0);
  report_free(&r);
  return ex;
}
