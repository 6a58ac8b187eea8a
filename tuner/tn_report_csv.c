/*
 * tn_report_csv.c -- `mmtune report --bench CSV` (tn_report_int.h): reads either CSV `mmtune
 * bench --csv` writes into one entry per shape, tuned and cuBLAS TFLOP/s, and keeps the
 * entries of the report's GPU model.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tn_cli.h"
#include "tn_opts.h"
#include "tn_report_int.h"

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
int tn_report_read_bench(report *r, ut_err *err) {
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
