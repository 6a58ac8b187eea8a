/*
 * report/bench_csv.c -- `mmtune report --bench CSV` (report/report_int.h): reads either CSV `mmtune
 * bench --csv` writes into one entry per shape, tuned and cuBLAS TFLOP/s, and keeps the
 * entries of the report's GPU model.  The CSV may come from anyone: its size and its count of
 * shapes are bounded, and each record finds its entry through a hash index (linear time).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "report/report_int.h"

/* Bounds on what a CSV can make a report hold: a bench CSV of 10^5 shapes is about 10 MB, its
 * entries (0.5 kB each) 50 MB. */
#define RP_MAX_CSV_BYTES (64 << 20)
#define RP_MAX_BENCH 250000
#define RP_STR_(x) #x
#define RP_STR(x) RP_STR_(x) /* a number's digits, in a message */

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

/* The entries being read, with their index by (device, m, n, k): open addressing, each used
 * slot an entry's position + 1, at most half the slots used.  A record finds its entry in a
 * few probes; a scan of the entries made 10^5 shapes take 42 s. */
typedef struct {
  report *r;
  int *slots;
  size_t nslots; /* a power of 2 (0 before the first entry) */
} bench_index;

static size_t key_hash(const char *device, int64_t m, int64_t n, int64_t k) {
  int64_t mnk[3] = {m, n, k};
  return (size_t)ut_hash64_more(ut_hash64(device, strlen(device)), mnk, sizeof mnk);
}

/* The slot of (device, m, n, k): its entry's, or the empty one where it goes. */
static size_t find_slot(const bench_index *ix, const char *device, int64_t m, int64_t n,
                        int64_t k) {
  size_t mask = ix->nslots - 1, s = key_hash(device, m, n, k) & mask;
  for (;; s = (s + 1) & mask) {
    if (!ix->slots[s]) return s;
    const rp_bench *b = &ix->r->bench[ix->slots[s] - 1];
    if (b->m == m && b->n == n && b->k == k && !strcmp(b->device, device)) return s;
  }
}

/* Doubles the slots and puts every entry back; false when out of memory. */
static bool index_grow(bench_index *ix) {
  size_t nslots = ix->nslots ? ix->nslots * 2 : 1024;
  int *slots = calloc(nslots, sizeof *slots);
  if (!slots) return false;
  free(ix->slots);
  ix->slots = slots, ix->nslots = nslots;
  for (int i = 0; i < ix->r->nbench; i++) {
    const rp_bench *b = &ix->r->bench[i];
    ix->slots[find_slot(ix, b->device, b->m, b->n, b->k)] = i + 1;
  }
  return true;
}

/* The entry of (device, m, n, k) into *out, added when new; NULL, or why it cannot be. */
static const char *bench_entry(bench_index *ix, const char *device_text, int64_t m, int64_t n,
                               int64_t k, rp_bench **out) {
  report *r = ix->r;
  char device[sizeof r->bench->device];
  ut_copy(device, sizeof device, device_text); /* the key as the entry keeps it */
  if ((size_t)r->nbench * 2 >= ix->nslots && !index_grow(ix)) return "out of memory";
  size_t s = find_slot(ix, device, m, n, k);
  if (ix->slots[s]) {
    *out = &r->bench[ix->slots[s] - 1];
    return NULL;
  }
  if (r->nbench == RP_MAX_BENCH)
    return "more than " RP_STR(RP_MAX_BENCH) " shapes, the most a report reads";
  rp_bench *v = ut_grow(r->bench, &r->bench_cap, r->nbench + 1, sizeof *v);
  if (!v) return "out of memory";
  r->bench = v;
  rp_bench *b = &v[r->nbench];
  *b = (rp_bench){
      .m = m, .n = n, .k = k, .tuned_ms = NAN, .tuned = NAN, .cublas_ms = NAN, .cublas = NAN};
  ut_copy(b->device, sizeof b->device, device);
  ix->slots[s] = ++r->nbench;
  *out = b;
  return NULL;
}

/* The columns of either CSV `mmtune bench` writes: --shapes (one record a shape: tuned_* and
 * cublas_*) or M N K (one record an implementation: "tuned (...)", "cuBLAS", ...). */
typedef struct {
  int device, m, n, k;
  int impl, config, ms, tflops;                         /* M N K */
  int tuned_ms, tuned, cublas_ms, cublas, tmpl, params; /* --shapes */
} csv_cols;

/* Adds one record to its shape's entry; NULL, or what is wrong with it. */
static const char *bench_record(bench_index *ix, const csv_cols *c, char **f, int n) {
  double m, nn, k, t_ms, t, c_ms = NAN, cu = NAN; /* c_ms, cu: a shapes CSV only */
  bool ok = csv_num(f, n, c->m, &m) && csv_num(f, n, c->n, &nn) && csv_num(f, n, c->k, &k);
  if (!ok || !(m >= 1 && nn >= 1 && k >= 1 && m < 1e15 && nn < 1e15 && k < 1e15))
    return "a bad number";
  const char *impl = c->impl >= 0 && c->impl < n ? f[c->impl] : "";
  bool single = c->impl >= 0, tuned = !strncmp(impl, "tuned", 5), cublas = !strcmp(impl, "cuBLAS");
  if (single && !tuned && !cublas) return NULL; /* the CPU and classic GPU rows */
  ok = single ? csv_num(f, n, c->ms, &t_ms) && csv_num(f, n, c->tflops, &t)
              : csv_num(f, n, c->tuned_ms, &t_ms) && csv_num(f, n, c->tuned, &t) &&
                    csv_num(f, n, c->cublas_ms, &c_ms) && csv_num(f, n, c->cublas, &cu);
  if (!ok) return "a bad number";
  rp_bench *b = NULL;
  const char *why = bench_entry(ix, c->device < n ? f[c->device] : "", (int64_t)m, (int64_t)nn,
                                (int64_t)k, &b);
  if (why) return why;
  if (single && cublas) {
    b->cublas_ms = t_ms, b->cublas = t;
  } else {
    b->tuned_ms = t_ms, b->tuned = t;
    if (!single) b->cublas_ms = c_ms, b->cublas = cu;
    if (single && c->config < n) ut_copy(b->kernel, sizeof b->kernel, f[c->config]);
    if (!single && c->tmpl < n && c->params < n)
      snprintf(b->kernel, sizeof b->kernel, "%.63s %.250s", f[c->tmpl], f[c->params]);
  }
  return NULL;
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

/* Reads the records after the header into entries; an exit code. */
static int bench_records(report *r, const csv_cols *c, char *pos) {
  bench_index ix = {.r = r};
  char *f[32];
  const char *why = NULL;
  int n, line = 1;
  while (!why && (n = csv_next(&pos, f, 32)) > 0) {
    line++;
    if (n == 1 && !f[0][0]) continue; /* an empty line */
    why = bench_record(&ix, c, f, n);
  }
  free(ix.slots);
  return why ? tn_fail("report", "bench CSV '%s', record %d: %s", r->bench_path, line, why) : 0;
}

/* Reads --bench; an exit code. */
int tn_report_read_bench(report *r, ut_err *err) {
  char *text = NULL, *f[32];
  struct stat st;
  if (stat(r->bench_path, &st) != 0)
    return tn_usage_error("report", "no bench CSV at '%s'", r->bench_path);
  if (st.st_size > RP_MAX_CSV_BYTES)
    return tn_fail("report", "bench CSV '%s' is larger than %d MiB, the most a report reads",
                   r->bench_path, RP_MAX_CSV_BYTES >> 20);
  if (ut_read_file(r->bench_path, &text, NULL, err)) return tn_fail("report", "%s", err->msg);
  csv_cols c;
  char *pos = text;
  int n = csv_next(&pos, f, 32), ex = 0;
  if (!csv_header(f, n, &c))
    ex = tn_fail("report",
                 "'%s' is not a `mmtune bench --csv` file (its header lacks the "
                 "columns m, n, k and tuned_tflops or implementation)",
                 r->bench_path);
  if (!ex) ex = bench_records(r, &c, pos);
  free(text);
  return ex ? ex : bench_device(r);
}
