/*
 * tn_report.c -- `mmtune report`: charts of one GPU model's rows, drawn by gnuplot.
 *
 * The rows are read once (db_each_row, db_each_best; the performance model as `mmtune model
 * evaluate` fits it), then DIR gets one data file per chart and one script, report.gp, which
 * a gnuplot child process runs in DIR (its output in DIR/gnuplot.log).  The charts are PNG
 * (pngcairo, RP_W x RP_H pixels): a roofline or a scatter of 10^5 rows is as large as a PNG
 * of few points, where an SVG grows with every point.  DIR/index.html embeds every picture
 * as a base64 data URI, with the tables, so it opens alone.
 *
 *   tflops.png          tuned (and cuBLAS, from a `bench --csv` file) TFLOP/s per shape
 *   roofline-DTYPE.png  each ok row and each best row against the model's peaks for DTYPE
 *   search.png          best so far against measurements, the searches with most rows
 *   model.png           the model's leave-one-shape-out prediction against the measurement
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rt_choose.h"
#include "tn_cli.h"
#include "tn_opts.h"

#define RP_W 900
#define RP_H 600
#define RP_MAX_BARS 40         /* bars of tflops.png */
#define RP_MAX_SEARCHES 12     /* lines of search.png */
#define RP_MAX_MODEL_SHAPES 64 /* problems model.png predicts (one model focus each) */
#define RP_MAX_PICS 16

static const tn_opt REPORT_OPTS[] = {
    {"db", 0, "PATH", "results database (default as for tune)"},
    {"device-name", 0, "NAME", "GPU model to report (default: the database's only one)"},
    {"bench", 0, "CSV", "a `mmtune bench --csv` file: tuned and cuBLAS TFLOP/s per shape"},
    {"out", 'o', "DIR", "folder to write (created if missing): PNGs, data, index.html"},
};

static const tn_cmd_spec REPORT_SPEC = {
    "report", "[--db PATH] [--device-name NAME] [--bench CSV] --out DIR",
    "Draws charts of one GPU model's rows with gnuplot (a child process; gnuplot must be on\n"
    "PATH) into DIR, 900x600 PNGs: tflops.png, tuned TFLOP/s per shape (with cuBLAS's from\n"
    "--bench, else the database's best rows alone); roofline-DTYPE.png, every ok row and the\n"
    "best of each shape against the performance model's peak compute and DRAM bandwidth;\n"
    "search.png, the best so far of the 12 searches with most rows, against measurements;\n"
    "model.png, the model's leave-one-shape-out predictions against the measured times.\n"
    "DIR/index.html holds every picture (embedded) and the tables, and opens alone.  DIR also\n"
    "keeps the data files and report.gp, the script: edit and rerun `gnuplot report.gp`.\n"
    "Needs no GPU.  Exit 2: bad arguments (a missing file, a GPU model with no rows); exit 1:\n"
    "the work failed (a damaged database or CSV, DIR not writable, gnuplot missing or failing).",
    REPORT_OPTS, (int)(sizeof REPORT_OPTS / sizeof REPORT_OPTS[0])};

/* One row of the device (any status). */
typedef struct {
  db_problem p;
  int64_t id, created_at;
  db_status status;
  double ms;
  int cfg; /* its config in the model, -1: none (not ok, or no launch shape) */
} rp_row;

/* The rows of one problem: rows[first .. first+count), in id order. */
typedef struct {
  int first, count, ok;
  double best_ms;
} rp_group;

/* One shape of the bench CSV. */
typedef struct {
  char device[128];
  int64_t m, n, k;
  double tuned_ms, tuned, cublas_ms, cublas; /* NaN where the CSV has none */
  char kernel[320];
} rp_bench;

typedef struct {
  const char *db_path, *bench_path, *out;
  char device[128];
  db_result *best; /* db_each_best's rows */
  int nbest, best_cap;
  rp_row *rows; /* sorted by problem, then id */
  int nrows, rows_cap;
  rp_group *groups;
  int ngroups;
  rp_bench *bench;
  int nbench, bench_cap;
  rt_chooser *ch;
  rt_model *model; /* borrowed from ch */
  bool nomem;
  FILE *gp; /* report.gp */
  char pics[RP_MAX_PICS][64], caption[RP_MAX_PICS][512];
  int npics;
} report;

/* ---- helpers ------------------------------------------------------------------------------ */

static double tflops_of(const db_problem *p, double ms) {
  return 2.0 * (double)p->m * (double)p->n * (double)p->k / (ms * 1e9);
}

static void shape_text(char *buf, size_t len, const db_problem *p) {
  snprintf(buf, len, "%s %s %lldx%lldx%lld", p->dtype, p->layout, (long long)p->m, (long long)p->n,
           (long long)p->k);
}

/* A gnuplot double-quoted string: a newline in s breaks the line, quotes and backslashes are
 * escaped, other control characters become spaces. */
static void gp_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '\n')
      fputs("\\n", f);
    else if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else
      fputc((unsigned char)*s < 32 ? ' ' : *s, f);
  }
  fputc('"', f);
}

static void html_text(FILE *f, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '&': fputs("&amp;", f); break;
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '"': fputs("&quot;", f); break;
      default: fputc(*s, f);
    }
  }
}

static void base64(FILE *f, const unsigned char *d, size_t n) {
  static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < n; i += 3) {
    unsigned v =
        (unsigned)d[i] << 16 | (i + 1 < n ? d[i + 1] : 0u) << 8 | (i + 2 < n ? d[i + 2] : 0u);
    fputc(a[v >> 18 & 63], f);
    fputc(a[v >> 12 & 63], f);
    fputc(i + 1 < n ? a[v >> 6 & 63] : '=', f);
    fputc(i + 2 < n ? a[v & 63] : '=', f);
  }
}

/* Opens DIR/name for writing. */
static FILE *out_open(const report *r, const char *name, ut_err *err) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", r->out, name);
  FILE *f = fopen(path, "w");
  if (!f) ut_fail(err, MMT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  return f;
}

/* Closes a file out_open gave, reporting a failed write. */
static mmt_status out_close(const report *r, FILE *f, const char *name, ut_err *err) {
  bool bad = ferror(f) != 0;
  if (fclose(f) != 0) bad = true;
  if (bad)
    return ut_fail(err, MMT_ERR_IO, "cannot write '%s/%s': %s", r->out, name, strerror(errno));
  return MMT_OK;
}

/* Adds a picture of the report; its chart starts in the script. */
static void pic_begin(report *r, const char *name, const char *caption) {
  if (r->npics == RP_MAX_PICS) return;
  ut_copy(r->pics[r->npics], sizeof r->pics[0], name);
  ut_copy(r->caption[r->npics], sizeof r->caption[0], caption);
  r->npics++;
  fprintf(r->gp, "\nreset\nset output '%s'\nset datafile missing '-'\nset grid\n", name);
  fprintf(r->gp, "set key opaque box\n");
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

static int problem_cmp(const db_problem *x, const db_problem *y) {
  int c = strcmp(x->dtype, y->dtype);
  if (!c) c = strcmp(x->layout, y->layout);
  if (!c) c = cmp_i64(x->m, y->m);
  if (!c) c = cmp_i64(x->n, y->n);
  return c ? c : cmp_i64(x->k, y->k);
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

/* ---- the bench CSV ------------------------------------------------------------------------ */

/* Cuts the next record (RFC 4180) of *pos into fields, unquoted in place; the field count, 0
 * at the end of the text.  Fields past max are dropped. */
static int csv_next(char **pos, char **fields, int max) {
  char *rd = *pos, *wr = *pos;
  if (!*rd) return 0;
  int n = 0;
  bool quoted = false;
  fields[n++] = wr; /* max > 0 */
  for (;; rd++) {
    char c = *rd;
    if (quoted && c == '"' && rd[1] == '"') {
      *wr++ = '"';
      rd++;
    } else if (c == '"' && (quoted || wr == fields[n - 1])) {
      quoted = !quoted;
    } else if (!quoted && c == ',') {
      *wr++ = 0;
      if (n < max) fields[n++] = wr;
    } else if (!c || (!quoted && (c == '\n' || (c == '\r' && rd[1] == '\n')))) {
      *wr = 0;
      *pos = !c ? rd : rd + (c == '\r' ? 2 : 1);
      return n;
    } else {
      *wr++ = c;
    }
  }
}

static int col_index(char **header, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(header[i], name)) return i;
  return -1;
}

/* The number in field col of a record; NaN when empty or absent; false when not a number. */
static bool csv_num(char **f, int n, int col, double *out) {
  *out = NAN;
  if (col < 0 || col >= n || !f[col][0]) return true;
  char *end;
  errno = 0;
  *out = strtod(f[col], &end);
  return !*end && !errno;
}

/* The entry of (device, m, n, k), added when new; NULL when out of memory. */
static rp_bench *bench_entry(report *r, const char *device, int64_t m, int64_t n, int64_t k) {
  for (int i = 0; i < r->nbench; i++) {
    rp_bench *b = &r->bench[i];
    if (!strcmp(b->device, device) && b->m == m && b->n == n && b->k == k) return b;
  }
  rp_bench *v = ut_grow(r->bench, &r->bench_cap, r->nbench + 1, sizeof *v);
  if (!v) return NULL;
  r->bench = v;
  rp_bench *b = &v[r->nbench++];
  *b = (rp_bench){
      .m = m, .n = n, .k = k, .tuned_ms = NAN, .tuned = NAN, .cublas_ms = NAN, .cublas = NAN};
  ut_copy(b->device, sizeof b->device, device);
  return b;
}

/* The columns of either CSV `mmtune bench` writes: --shapes (one record a shape: tuned_* and
 * cublas_*) or M N K (one record an implementation: "tuned (...)", "cuBLAS", ...). */
typedef struct {
  int device, m, n, k;
  int impl, config, ms, tflops;                         /* M N K */
  int tuned_ms, tuned, cublas_ms, cublas, tmpl, params; /* --shapes */
} csv_cols;

/* Adds one record to its shape's entry; false when a number is bad. */
static bool bench_record(report *r, const csv_cols *c, char **f, int n, bool *nomem) {
  double m, nn, k, t_ms, t, c_ms, cu;
  bool ok = csv_num(f, n, c->m, &m) && csv_num(f, n, c->n, &nn) && csv_num(f, n, c->k, &k);
  if (!ok || !(m >= 1 && nn >= 1 && k >= 1 && m < 1e15 && nn < 1e15 && k < 1e15)) return false;
  const char *impl = c->impl >= 0 && c->impl < n ? f[c->impl] : "";
  bool single = c->impl >= 0, tuned = !strncmp(impl, "tuned", 5), cublas = !strcmp(impl, "cuBLAS");
  if (single && !tuned && !cublas) return true; /* the CPU and classic GPU rows */
  ok = single ? csv_num(f, n, c->ms, &t_ms) && csv_num(f, n, c->tflops, &t)
              : csv_num(f, n, c->tuned_ms, &t_ms) && csv_num(f, n, c->tuned, &t) &&
                    csv_num(f, n, c->cublas_ms, &c_ms) && csv_num(f, n, c->cublas, &cu);
  if (!ok) return false;
  rp_bench *b =
      bench_entry(r, c->device < n ? f[c->device] : "", (int64_t)m, (int64_t)nn, (int64_t)k);
  if (!b) return !(*nomem = true);
  if (single && cublas) {
    b->cublas_ms = t_ms, b->cublas = t;
  } else {
    b->tuned_ms = t_ms, b->tuned = t;
    if (!single) b->cublas_ms = c_ms, b->cublas = cu;
    if (single && c->config < n) ut_copy(b->kernel, sizeof b->kernel, f[c->config]);
    if (!single && c->tmpl < n && c->params < n)
      snprintf(b->kernel, sizeof b->kernel, "%.63s %.250s", f[c->tmpl], f[c->params]);
  }
  return true;
}

/* The header's columns; false when it is neither of the bench CSVs. */
static bool csv_header(char **h, int n, csv_cols *c) {
  *c = (csv_cols){col_index(h, n, "device"),
                  col_index(h, n, "m"),
                  col_index(h, n, "n"),
                  col_index(h, n, "k"),
                  col_index(h, n, "implementation"),
                  col_index(h, n, "config"),
                  col_index(h, n, "ms"),
                  col_index(h, n, "tflops"),
                  col_index(h, n, "tuned_ms"),
                  col_index(h, n, "tuned_tflops"),
                  col_index(h, n, "cublas_ms"),
                  col_index(h, n, "cublas_tflops"),
                  col_index(h, n, "template"),
                  col_index(h, n, "params")};
  if (c->device < 0 || c->m < 0 || c->n < 0 || c->k < 0) return false;
  if (c->impl >= 0) return c->ms >= 0 && c->tflops >= 0 && c->config >= 0;
  return c->tuned_ms >= 0 && c->tuned >= 0 && c->cublas_ms >= 0 && c->cublas >= 0 && c->tmpl >= 0 &&
         c->params >= 0;
}

/* Keeps the entries of the report's device; an exit code. */
static int bench_device(report *r) {
  int kept = 0;
  for (int i = 0; i < r->nbench; i++)
    if (!strcmp(r->bench[i].device, r->device)) r->bench[kept++] = r->bench[i];
  if (kept == 0 && r->nbench > 0)
    return tn_fail("report", "bench CSV '%s' has no rows for '%s' (its rows are for '%s')",
                   r->bench_path, r->device, r->bench[0].device);
  if (r->nbench == 0) return tn_fail("report", "bench CSV '%s' has no rows", r->bench_path);
  r->nbench = kept;
  return 0;
}

/* Reads --bench; an exit code. */
static int read_bench(report *r, ut_err *err) {
  char *text = NULL, *f[32];
  if (access(r->bench_path, F_OK) != 0)
    return tn_usage_error("report", "no bench CSV at '%s'", r->bench_path);
  if (ut_read_file(r->bench_path, &text, NULL, err)) return tn_fail("report", "%s", err->msg);
  csv_cols c;
  char *pos = text;
  int n = csv_next(&pos, f, 32), ex = 0, line = 1;
  bool nomem = false;
  if (!csv_header(f, n, &c))
    ex = tn_fail("report",
                 "'%s' is not a `mmtune bench --csv` file (its header lacks the "
                 "columns m, n, k and tuned_tflops or implementation)",
                 r->bench_path);
  while (!ex && (n = csv_next(&pos, f, 32)) > 0) {
    line++;
    if (n == 1 && !f[0][0]) continue; /* an empty line */
    if (!bench_record(r, &c, f, n, &nomem))
      ex = nomem
               ? tn_fail("report", "out of memory reading '%s'", r->bench_path)
               : tn_fail("report", "bench CSV '%s', record %d: a bad number", r->bench_path, line);
  }
  free(text);
  return ex ? ex : bench_device(r);
}

/* ---- chart 1: TFLOP/s per shape ----------------------------------------------------------- */

static int by_count_desc(const void *a, const void *b) {
  const int *x = a, *y = b; /* pairs: count, index */
  return x[0] != y[0] ? (x[0] < y[0] ? 1 : -1) : x[1] - y[1];
}

static int by_index(const void *a, const void *b) {
  const int *x = a, *y = b;
  return x[1] - y[1];
}

/* The indexes of at most max items with the largest counts, in their own order: pairs[i] =
 * {count, index} on entry, the chosen indexes in pairs[0..ret) [1] on return. */
static int top_counts(int (*pairs)[2], int n, int max) {
  qsort(pairs, (size_t)n, sizeof *pairs, by_count_desc);
  if (n > max) n = max;
  qsort(pairs, (size_t)n, sizeof *pairs, by_index);
  return n;
}

/* The group of problem p, or -1. */
static int group_of(const report *r, const db_problem *p) {
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

/* A data file's quoted string (a double quote in s becomes a single one). */
static void dat_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) fputc(*s == '"' ? '\'' : (unsigned char)*s < 32 ? ' ' : *s, f);
  fputc('"', f);
}

/* v, or "-" (gnuplot's missing value) when it is not a number. */
static void put_num(FILE *f, double v) {
  if (isfinite(v))
    fprintf(f, " %.6g", v);
  else
    fputs(" -", f);
}

/* The dtypes of the best rows, in order (at most 8); their count. */
static int best_dtypes(const report *r, char (*names)[8]) {
  int n = 0;
  for (int i = 0; i < r->nbest; i++) {
    int j = 0;
    while (j < n && strcmp(names[j], r->best[i].problem.dtype)) j++;
    if (j == n && n < 8) ut_copy(names[n++], 8, r->best[i].problem.dtype);
  }
  return n;
}

static int dtype_index(char (*names)[8], int n, const char *dtype) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], dtype)) return i;
  return n;
}

/* tflops.png from the bench CSV: tuned and cuBLAS bars per shape. */
static mmt_status chart_bench(report *r, ut_err *err) {
  FILE *f = out_open(r, "tflops.dat", err);
  if (!f) return MMT_ERR_IO;
  int n = r->nbench < RP_MAX_BARS ? r->nbench : RP_MAX_BARS;
  fprintf(f, "# shape tuned_tflops cublas_tflops\n");
  for (int i = 0; i < n; i++) {
    const rp_bench *b = &r->bench[i];
    fprintf(f, "\"%lldx%lldx%lld\"", (long long)b->m, (long long)b->n, (long long)b->k);
    put_num(f, b->tuned);
    put_num(f, b->cublas);
    fputc('\n', f);
  }
  mmt_status rc = out_close(r, f, "tflops.dat", err);
  char title[512];
  snprintf(title, sizeof title, "TFLOP/s per shape on %s: mmtune's tuned kernel and cuBLAS\n(%s%s)",
           r->device, r->bench_path, n < r->nbench ? ", the first 40 shapes" : "");
  pic_begin(r, "tflops.png", title);
  fputs("set title ", r->gp);
  gp_str(r->gp, title);
  fputs(
      "\nset style data histograms\nset style histogram clustered gap 1\n"
      "set style fill solid 0.9 border -1\nset ylabel 'TFLOP/s (higher is better)'\n"
      "set yrange [0:*]\nset xtics rotate by 90 right\nset key top left\n"
      "set offsets 0, 0, graph 0.05, 0\n"
      "plot 'tflops.dat' using 2:xtic(1) title 'mmtune (tuned)' lc rgb '#1f77b4', \\\n"
      "  '' using 3 title 'cuBLAS' lc rgb '#ff7f0e', \\\n" /* each bar's value above it */
      "  '' using ($0 - 1 / 6.):2:(sprintf('%.3g', $2)) with labels offset 0,0.7 font ',8' "
      "notitle, \\\n"
      "  '' using ($0 + 1 / 6.):3:(sprintf('%.3g', $3)) with labels offset 0,0.7 font ',8' "
      "notitle\n",
      r->gp);
  return rc;
}

/* tflops.png without a CSV: the best row of each shape (the most measured 40). */
static mmt_status chart_best(report *r, ut_err *err) {
  int(*pick)[2] = malloc(((size_t)r->nbest + 1) * sizeof *pick);
  FILE *f = pick ? out_open(r, "tflops.dat", err) : NULL;
  if (!f) {
    free(pick);
    return pick ? MMT_ERR_IO : ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < r->nbest; i++) {
    int g = group_of(r, &r->best[i].problem);
    pick[i][0] = g >= 0 ? r->groups[g].count : 0;
    pick[i][1] = i;
  }
  int n = top_counts(pick, r->nbest, RP_MAX_BARS);
  char dtypes[8][8], label[96];
  int nd = best_dtypes(r, dtypes);
  fprintf(f, "# bar label tflops dtype_index\n");
  for (int i = 0; i < n; i++) {
    const db_result *b = &r->best[pick[i][1]];
    shape_text(label, sizeof label, &b->problem);
    fprintf(f, "%d ", i);
    dat_str(f, label);
    put_num(f, tflops_of(&b->problem, b->ms_median));
    fprintf(f, " %d\n", 1 + dtype_index(dtypes, nd, b->problem.dtype));
  }
  free(pick);
  mmt_status rc = out_close(r, f, "tflops.dat", err);
  char title[512];
  snprintf(title, sizeof title,
           "Tuned TFLOP/s per shape on %s\nthe database's best rows (no "
           "--bench CSV, so no cuBLAS)%s",
           r->device, n < r->nbest ? "; the 40 most measured" : "");
  pic_begin(r, "tflops.png", title);
  fputs("set title ", r->gp);
  gp_str(r->gp, title);
  fputs(
      "\nset style fill solid 0.9 border -1\nset boxwidth 0.8\nset ylabel 'TFLOP/s'\n"
      "set yrange [0:*]\nset offsets 0, 0, graph 0.05, 0\nset xtics rotate by 90 right\n"
      "set key top left\nplot 'tflops.dat' using 1:3:4:xticlabels(2) with boxes lc variable "
      "notitle, \\\n  '' using 1:3:(sprintf('%.3g', $3)) with labels offset 0,0.7 font ',8' "
      "notitle",
      r->gp);
  for (int i = 0; i < nd; i++) {
    fprintf(r->gp, ", \\\n  keyentry with boxes lc %d title ", i + 1);
    gp_str(r->gp, dtypes[i]);
  }
  fputc('\n', r->gp);
  return rc;
}

/* ---- chart 2: rooflines ------------------------------------------------------------------- */

/* Flops per byte of A, B and C each moved once. */
static double intensity(const db_problem *p) {
  double e = gen_dtype_size(p->dtype) > 0 ? gen_dtype_size(p->dtype) : 4;
  double m = (double)p->m, n = (double)p->n, k = (double)p->k;
  return 2.0 * m * n * k / ((m * k + k * n + m * n) * e);
}

typedef struct {
  double x0, x1, y0, y1;
  int rows;
} extent;

static void put_point(FILE *f, extent *e, double x, double y) {
  if (!(x > 0 && y > 0 && isfinite(x) && isfinite(y))) return;
  fprintf(f, "%.6g %.6g\n", x, y);
  e->x0 = fmin(e->x0, x), e->x1 = fmax(e->x1, x);
  e->y0 = fmin(e->y0, y), e->y1 = fmax(e->y1, y);
}

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The ok rows of group g as points; of the times within 0.1% of each other (one pixel: the
 * rows of a shape share their x) only the first is written. */
static void group_points(FILE *f, const report *r, const rp_group *g, double *ms, extent *e) {
  int n = 0;
  for (int j = g->first; j < g->first + g->count; j++)
    if (r->rows[j].status == DB_OK && r->rows[j].ms > 0) ms[n++] = r->rows[j].ms;
  qsort(ms, (size_t)n, sizeof *ms, by_double);
  const db_problem *p = &r->rows[g->first].p;
  for (int j = 0; j < n; j++)
    if (j == 0 || ms[j] > ms[j - 1] * 1.001) put_point(f, e, intensity(p), tflops_of(p, ms[j]));
  e->rows += n;
}

/* roofline-DTYPE.dat: block 0 the ok rows of dtype, block 1 the best rows. */
static mmt_status roofline_data(report *r, const char *dtype, const char *name, extent *all,
                                int *nbest, ut_err *err) {
  double *ms = malloc(((size_t)r->nrows + 1) * sizeof *ms);
  FILE *f = ms ? out_open(r, name, err) : NULL;
  if (!f) {
    free(ms);
    return ms ? MMT_ERR_IO : ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  }
  fprintf(f, "# flops/byte TFLOP/s: the ok rows, then (after two blank lines) the best rows\n");
  for (int i = 0; i < r->ngroups; i++)
    if (!strcmp(r->rows[r->groups[i].first].p.dtype, dtype))
      group_points(f, r, &r->groups[i], ms, all);
  free(ms);
  fprintf(f, "\n\n");
  extent best = {INFINITY, 0, INFINITY, 0, 0};
  for (int i = 0; i < r->nbest; i++) {
    const db_result *b = &r->best[i];
    if (strcmp(b->problem.dtype, dtype)) continue;
    put_point(f, &best, intensity(&b->problem), tflops_of(&b->problem, b->ms_median));
    (*nbest)++;
  }
  return out_close(r, f, name, err);
}

static mmt_status chart_roofline(report *r, const char *dtype, ut_err *err) {
  char tag[8], dat[64], png[64], title[512];
  ut_copy(tag, sizeof tag, dtype); /* the database's text, as a file name */
  for (char *c = tag; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
      *c = '_';
  snprintf(dat, sizeof dat, "roofline-%s.dat", tag);
  snprintf(png, sizeof png, "roofline-%s.png", tag);
  extent e = {INFINITY, 0, INFINITY, 0, 0};
  int nbest = 0;
  mmt_status rc = roofline_data(r, dtype, dat, &e, &nbest, err);
  rt_model_device dev = rt_model_get_device(r->model);
  double flops, bytes;
  rt_model_peaks(&dev, dtype, &flops, &bytes);
  double pf = flops / 1e12, bw = bytes / 1e12; /* TFLOP/s; TB/s: TFLOP/s per flop/byte */
  snprintf(title, sizeof title,
           "Roofline, %s on %s: %d ok rows, the best of %d shapes\npeaks "
           "of mmtune's performance model (compute capability %d.x, %d SMs)",
           dtype, r->device, e.rows, nbest, dev.cc_major, dev.sm_count);
  pic_begin(r, png, title);
  fputs("set title ", r->gp);
  gp_str(r->gp, title);
  if (e.rows == 0) e = (extent){1, 1, 1, 1, 0};
  fprintf(r->gp,
          "\nPF = %.6g\nBW = %.6g\nroof(x) = x * BW < PF ? x * BW : PF\n"
          "set logscale xy\nset samples 1000\nset xrange [%.6g:%.6g]\nset yrange [%.6g:%.6g]\n",
          pf, bw, e.x0 / 2, fmax(e.x1, pf / bw) * 2, fmin(e.y0, e.x0 / 2 * bw) / 2, pf * 2);
  fprintf(r->gp,
          "set xlabel 'arithmetic intensity: flops / bytes of A, B and C (%d-byte "
          "elements), log scale'\nset ylabel 'TFLOP/s, log scale'\nset key bottom right\n",
          gen_dtype_size(dtype) > 0 ? gen_dtype_size(dtype) : 4);
  fprintf(r->gp,
          "plot roof(x) with lines lw 2 lc rgb 'black' title "
          "sprintf('roofline: %%.0f TFLOP/s peak, %%.2f TB/s DRAM', PF, BW), \\\n"
          "  '%s' index 0 with points pt 7 ps 0.3 lc rgb '#a0a0a0' title 'every ok row', \\\n"
          "  '' index 1 with points pt 7 ps 1.2 lc rgb '#d62728' title 'best of each shape'\n",
          dat);
  return rc;
}

/* ---- chart 3: best so far against measurements ------------------------------------------- */

/* One search's block of search.dat: measurement number, best so far / final best, where it
 * changes and at the last measurement (drawn as steps). */
static void search_block(FILE *f, const report *r, const rp_group *g) {
  double best = INFINITY;
  for (int j = 0; j < g->count; j++) {
    const rp_row *w = &r->rows[g->first + j];
    bool better = w->status == DB_OK && w->ms > 0 && w->ms < best;
    if (better) best = w->ms;
    if ((better || j == g->count - 1) && isfinite(best))
      fprintf(f, "%d %.6g\n", j + 1, g->best_ms / best);
  }
  fprintf(f, "\n\n");
}

static mmt_status chart_search(report *r, ut_err *err) {
  int(*pick)[2] = malloc(((size_t)r->ngroups + 1) * sizeof *pick);
  FILE *f = pick ? out_open(r, "search.dat", err) : NULL;
  if (!f) {
    free(pick);
    return pick ? MMT_ERR_IO : ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  }
  int searched = 0; /* the problems with an ok row */
  for (int i = 0; i < r->ngroups; i++) {
    if (r->groups[i].ok == 0) continue;
    pick[searched][0] = r->groups[i].count;
    pick[searched++][1] = i;
  }
  int n = top_counts(pick, searched, RP_MAX_SEARCHES);
  fprintf(f, "# per search (blocks): measurement number, best so far / final best\n");
  for (int i = 0; i < n; i++) search_block(f, r, &r->groups[pick[i][1]]);
  mmt_status rc = out_close(r, f, "search.dat", err);
  char title[512], key[160];
  snprintf(title, sizeof title,
           "Best so far against measurements on %s\nthe %d searches with "
           "most rows (of %d)",
           r->device, n, searched);
  pic_begin(r, "search.png", title);
  fputs("set title ", r->gp);
  gp_str(r->gp, title);
  fputs(
      "\nset logscale x\nset yrange [0:1.05]\nset key bottom right font ',8'\n"
      "set xlabel 'measurements of the search, in the order made (rows by id; log scale)'\n"
      "set ylabel 'best so far / final best (TFLOP/s)'\nplot",
      r->gp);
  for (int i = 0; i < n; i++) {
    const rp_group *g = &r->groups[pick[i][1]];
    const rp_row *a = &r->rows[g->first], *z = &r->rows[g->first + g->count - 1];
    shape_text(key, sizeof key, &a->p);
    size_t len = strlen(key);
    snprintf(key + len, sizeof key - len, ": %d rows in %llds", g->count,
             (long long)(z->created_at - a->created_at));
    fprintf(r->gp, "%s \\\n  'search.dat' index %d with steps lw 2 lc %d dt %d title ",
            i ? "," : "", i, i % 8 + 1, i / 8 + 1);
    gp_str(r->gp, key);
  }
  fputc('\n', r->gp);
  free(pick);
  return rc;
}

/* ---- chart 4: the model's predictions ----------------------------------------------------- */

typedef struct {
  int points, shapes;
  double x0, x1, log_err;
  char dtypes[8][8]; /* one block of model.dat each */
  int ndtypes;
} model_stats;

/* Predicts every ok row of group g with its shape hidden from the model (as `mmtune model
 * evaluate` does) and writes measured, predicted ms. */
static void predict_group(FILE *f, const report *r, const rp_group *g, model_stats *st) {
  const db_problem *q = &r->rows[g->first].p;
  gen_problem p = gen_packed_problem(q->dtype, q->layout, q->m, q->n, q->k);
  int64_t hide[3] = {q->m, q->n, q->k};
  rt_model_focus(r->model, &p, hide);
  for (int j = g->first; j < g->first + g->count; j++) {
    const rp_row *w = &r->rows[j];
    if (w->cfg < 0 || !(w->ms > 0)) continue;
    rt_prediction pred;
    rt_model_predict(r->model, w->cfg, NULL, NULL, NULL, NAN, &p, &pred);
    if (!(pred.ms > 0) || !isfinite(pred.ms)) continue;
    fprintf(f, "%.6g %.6g\n", w->ms, pred.ms);
    st->x0 = fmin(st->x0, fmin(w->ms, pred.ms));
    st->x1 = fmax(st->x1, fmax(w->ms, pred.ms));
    st->log_err += fabs(log(pred.ms / w->ms));
    st->points++;
  }
}

/* model.dat: a block per dtype, of the RP_MAX_MODEL_SHAPES problems with most ok rows. */
static mmt_status model_data(report *r, model_stats *st, int *candidates, ut_err *err) {
  int(*pick)[2] = malloc(((size_t)r->ngroups + 1) * sizeof *pick);
  FILE *f = pick ? out_open(r, "model.dat", err) : NULL;
  if (!f) {
    free(pick);
    return pick ? MMT_ERR_IO : ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  }
  int n = 0;
  for (int i = 0; i < r->ngroups; i++) {
    if (r->groups[i].ok == 0) continue;
    pick[n][0] = r->groups[i].ok;
    pick[n++][1] = i;
  }
  *candidates = n;
  n = top_counts(pick, n, RP_MAX_MODEL_SHAPES);
  fprintf(f, "# measured ms, predicted ms (leave-one-shape-out); a block per dtype\n");
  for (int i = 0; i < n; i++) {
    const rp_group *g = &r->groups[pick[i][1]];
    const char *dtype = r->rows[g->first].p.dtype;
    if ((!st->ndtypes || strcmp(st->dtypes[st->ndtypes - 1], dtype)) && st->ndtypes < 8) {
      if (st->ndtypes) fprintf(f, "\n\n");
      ut_copy(st->dtypes[st->ndtypes++], 8, dtype);
    }
    predict_group(f, r, g, st);
    st->shapes++;
  }
  free(pick);
  return out_close(r, f, "model.dat", err);
}

static mmt_status chart_model(report *r, ut_err *err) {
  model_stats st = {.x0 = INFINITY};
  int candidates = 0;
  mmt_status rc = model_data(r, &st, &candidates, err);
  char title[512], more[64] = "";
  if (st.shapes < candidates)
    snprintf(more, sizeof more, ", the %d most measured of %d", st.shapes, candidates);
  snprintf(title, sizeof title,
           "Performance model on %s: predicted against measured time\n"
           "leave-one-shape-out (each shape's rows hidden), %d rows of %d shapes%s\ngeomean "
           "error x%.2f",
           r->device, st.points, st.shapes, more, st.points ? exp(st.log_err / st.points) : NAN);
  pic_begin(r, "model.png", title);
  fputs("set title ", r->gp);
  gp_str(r->gp, title);
  if (st.points == 0) st.x0 = 1e-3, st.x1 = 1;
  fprintf(r->gp,
          "\nset logscale xy\nset size square\nset xrange [%.6g:%.6g]\n"
          "set yrange [%.6g:%.6g]\nset xlabel 'measured ms (log scale)'\n"
          "set ylabel 'predicted ms (log scale)'\nset key top left\n"
          "plot x with lines lc rgb 'black' dt 2 title 'y = x'",
          st.x0 / 1.5, st.x1 * 1.5, st.x0 / 1.5, st.x1 * 1.5);
  for (int i = 0; i < st.ndtypes && st.points; i++) {
    fprintf(r->gp, ", \\\n  'model.dat' index %d with points pt 7 ps 0.5 title ", i);
    gp_str(r->gp, st.dtypes[i]);
  }
  fputc('\n', r->gp);
  return rc;
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

/* ---- index.html --------------------------------------------------------------------------- */

static void html_num(FILE *f, const char *fmt, double v) {
  fputs("<td>", f);
  if (isfinite(v))
    fprintf(f, fmt, v);
  else
    fputs("-", f);
  fputs("</td>", f);
}

static void html_bench(FILE *f, const report *r) {
  fputs("<h2>Bench: mmtune against cuBLAS</h2>\n<p>From <code>", f);
  html_text(f, r->bench_path);
  fputs(
      "</code>.</p>\n<table><tr><th>shape</th><th>tuned ms</th><th>tuned TFLOP/s</th>"
      "<th>cuBLAS ms</th><th>cuBLAS TFLOP/s</th><th>tuned / cuBLAS</th>"
      "<th class=l>tuned kernel</th></tr>\n",
      f);
  for (int i = 0; i < r->nbench; i++) {
    const rp_bench *b = &r->bench[i];
    fprintf(f, "<tr><td>%lldx%lldx%lld</td>", (long long)b->m, (long long)b->n, (long long)b->k);
    html_num(f, "%.4f", b->tuned_ms);
    html_num(f, "%.2f", b->tuned);
    html_num(f, "%.4f", b->cublas_ms);
    html_num(f, "%.2f", b->cublas);
    html_num(f, "%.3fx", b->tuned / b->cublas);
    fputs("<td class=l>", f);
    html_text(f, b->kernel);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
}

static void html_best(FILE *f, const report *r) {
  fputs(
      "<h2>Best kernel per shape</h2>\n<table><tr><th>dtype</th><th>layout</th><th>M</th>"
      "<th>N</th><th>K</th><th>rows</th><th>ok</th><th>best ms</th><th>TFLOP/s</th>"
      "<th class=l>template</th><th class=l>params</th></tr>\n",
      f);
  for (int i = 0; i < r->nbest; i++) {
    const db_result *b = &r->best[i];
    int g = group_of(r, &b->problem);
    fputs("<tr><td>", f);
    html_text(f, b->problem.dtype);
    fputs("</td><td>", f);
    html_text(f, b->problem.layout);
    fprintf(f, "</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%d</td><td>%d</td>",
            (long long)b->problem.m, (long long)b->problem.n, (long long)b->problem.k,
            g >= 0 ? r->groups[g].count : 0, g >= 0 ? r->groups[g].ok : 0);
    html_num(f, "%.4f", b->ms_median);
    html_num(f, "%.2f", tflops_of(&b->problem, b->ms_median));
    fputs("<td class=l>", f);
    html_text(f, b->template_name);
    fputs("</td><td class=l>", f);
    html_text(f, b->params);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
}

/* Embeds DIR/name; false when it is not a PNG gnuplot wrote. */
static mmt_status html_picture(FILE *f, const report *r, int i, ut_err *err) {
  char path[4200], *data = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/%s", r->out, r->pics[i]);
  if (ut_read_file(path, &data, &len, NULL) || len < 24 || memcmp(data, "\x89PNG\r\n\x1a\n", 8)) {
    free(data);
    return ut_fail(err, MMT_ERR_IO, "gnuplot wrote no picture '%s' (see '%s/gnuplot.log')", path,
                   r->out);
  }
  fprintf(f, "<figure><img alt=\"%s\" width=\"%d\" height=\"%d\" src=\"data:image/png;base64,",
          r->pics[i], RP_W, RP_H);
  base64(f, (const unsigned char *)data, len);
  fputs("\"><figcaption>", f);
  html_text(f, r->caption[i]);
  fputs("</figcaption></figure>\n", f);
  free(data);
  return MMT_OK;
}

static mmt_status write_html(const report *r, ut_err *err) {
  char *text = NULL, path[4200], when[32];
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return ut_fail(err, MMT_ERR_NOMEM, "index.html: %s", strerror(errno));
  time_t now = time(NULL);
  struct tm tm;
  strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime_r(&now, &tm));
  int ok = 0;
  for (int i = 0; i < r->ngroups; i++) ok += r->groups[i].ok;
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mmtune report: ",
        f);
  html_text(f, r->device);
  fputs(
      "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:960px}"
      "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
      "padding:2px 6px;text-align:right}.l{text-align:left}img{max-width:100%;height:auto}"
      "figcaption{font-size:13px;color:#444}</style></head><body>\n<h1>mmtune report: ",
      f);
  html_text(f, r->device);
  fputs("</h1>\n<p>Database <code>", f);
  html_text(f, r->db_path);
  fprintf(f, "</code>: %d rows of this GPU model (%d ok) over %d problems; %s.</p>\n", r->nrows, ok,
          r->ngroups, when);
  mmt_status rc = MMT_OK;
  for (int i = 0; i < r->npics && !rc; i++) rc = html_picture(f, r, i, err);
  if (r->nbench) html_bench(f, r);
  html_best(f, r);
  fputs("</body></html>\n", f);
  if (fclose(f) != 0 && !rc) rc = ut_fail(err, MMT_ERR_NOMEM, "index.html: %s", strerror(errno));
  snprintf(path, sizeof path, "%s/index.html", r->out);
  if (!rc) rc = ut_write_file_atomic(path, text, len, err);
  free(text);
  return rc;
}

/* ---- the command -------------------------------------------------------------------------- */

/* The data files and report.gp, then gnuplot, then index.html. */
static mmt_status draw(report *r, ut_err *err) {
  mmt_status rc = ut_mkdir_p(r->out, err);
  if (rc) return rc;
  if (!(r->gp = out_open(r, "report.gp", err))) return MMT_ERR_IO;
  fprintf(r->gp,
          "# mmtune report: `gnuplot report.gp` in this folder draws the charts again\n"
          "set terminal pngcairo size %d,%d noenhanced font 'sans,10'\n",
          RP_W, RP_H);
  rc = r->nbench ? chart_bench(r, err) : chart_best(r, err);
  char dtypes[8][8];
  int nd = best_dtypes(r, dtypes);
  for (int i = 0; i < nd && !rc; i++) rc = chart_roofline(r, dtypes[i], err);
  if (!rc) rc = chart_search(r, err);
  if (!rc) rc = chart_model(r, err);
  fputs("unset output\n", r->gp);
  if (rc)
    fclose(r->gp);
  else
    rc = out_close(r, r->gp, "report.gp", err);
  r->gp = NULL;
  if (!rc) rc = run_gnuplot(r, err);
  if (!rc) rc = write_html(r, err);
  return rc;
}

static void report_free(report *r) {
  free(r->best);
  free(r->rows);
  free(r->groups);
  free(r->bench);
  rt_chooser_free(r->ch);
}

static int report_run(const tn_opts *o) {
  char path[4096];
  report r = {.out = tn_opts_get(o, "out"), .bench_path = tn_opts_get(o, "bench")};
  const char *dev = tn_opts_get(o, "device-name");
  int ex = tn_opt_db_path("report", tn_opts_get(o, "db"), path, sizeof path);
  if (ex) return ex;
  if (!r.out || !*r.out) return tn_usage_error("report", "--out DIR is required");
  if (r.bench_path && !*r.bench_path) return tn_usage_error("report", "--bench needs a CSV file");
  if (dev && !*dev) return tn_usage_error("report", "--device-name needs a GPU model name");
  if (dev) ut_copy(r.device, sizeof r.device, dev);
  r.db_path = path;
  double t0 = ut_now_seconds();
  ut_err err = {{0}};
  ex = read_db(&r, &err);
  if (!ex && r.bench_path) ex = read_bench(&r, &err);
  if (!ex && draw(&r, &err)) ex = tn_fail("report", "%s", err.msg);
  if (!ex)
    printf("report of %s (%d rows, %d problems): %s/index.html, %d charts, in %.2f s\n", r.device,
           r.nrows, r.ngroups, r.out, r.npics, ut_now_seconds() - t0);
  report_free(&r);
  return ex;
}

int tn_cmd_report(int argc, char **argv) {
  tn_opts o;
  int ex = tn_opts_parse(&REPORT_SPEC, argc, argv, &o);
  if (!ex && !o.help) {
    if (o.npos > 0)
      ex = tn_usage_error("report", "unexpected argument '%s'", o.pos[0]);
    else
      ex = report_run(&o);
  }
  tn_opts_free(&o);
  return ex;
}
