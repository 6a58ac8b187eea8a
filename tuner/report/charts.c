/*
 * report/charts.c -- the charts of `mmtune report` (report/report_int.h): DIR/report.gp, the
 * gnuplot script, and one data file per chart; each chart is a picture of the report.
 *
 *   tflops.png          tuned (and cuBLAS, from a `bench --csv` file) TFLOP/s per shape
 *   roofline-DTYPE.png  each ok row and each best row against the model's peaks for DTYPE
 *   search.png          best so far against measurements, the searches with most rows
 *   model.png           the model's leave-one-shape-out prediction against the measurement
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

#define RP_MAX_BARS 40         /* bars of tflops.png */
#define RP_MAX_SEARCHES 12     /* lines of search.png */
#define RP_MAX_MODEL_SHAPES 64 /* problems model.png predicts (one model focus each) */

/* ---- helpers ------------------------------------------------------------------------------ */

static void shape_text(char *buf, size_t len, const db_problem *p) {
  snprintf(buf, len, "%s %s %lldx%lldx%lld", p->dtype, p->layout, (long long)p->m, (long long)p->n,
           (long long)p->k);
}

/* The byte gnuplot is given for byte c of a string from the database, the CSV or the command
 * line: c itself when it is one of a few plain characters, else '_'.  gnuplot runs `...` as
 * a shell command even inside a double-quoted string (where a single quote is plain), and
 * gives meaning to the backslash, '"', '@', '$' and more; a whitelist stays safe whatever a
 * later gnuplot adds.  (A UTF-8 name loses its accents in the charts, not in index.html.) */
static char gp_char(char c) {
  bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr(" -_.,:;=+*/%()[]'", c));
  return plain ? c : '_';
}

/* A gnuplot double-quoted string: a newline breaks the title's line (a caption's own, or
 * one in a name: harmless), every other byte passes gp_char. */
static void gp_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '\n')
      fputs("\\n", f);
    else
      fputc(gp_char(*s), f);
  }
  fputc('"', f);
}

/* Adds a picture of the report; its chart starts in the script. */
static void pic_begin(report *r, const char *name, const char *caption) {
  if (r->npics == RP_MAX_PICS) return;
  ut_copy(r->pics[r->npics], sizeof r->pics[0], name);
  ut_copy(r->caption[r->npics], sizeof r->caption[0], caption);
  r->npics++;
  fprintf(r->gp, "\nreset\nset output '%s'\nset datafile missing '-'\nset grid\n", name);
  fprintf(r->gp, "set key opaque box\nset title ");
  gp_str(r->gp, caption); /* no newline: the caller's commands start with one */
}

/* A data file's quoted string: every byte passes gp_char, so none ends the field or the
 * line, or starts a comment. */
static void dat_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) fputc(gp_char(*s), f);
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

/* ---- chart 1: TFLOP/s per shape ----------------------------------------------------------- */

/* tflops.png from the bench CSV: tuned and cuBLAS bars per shape. */
static mmt_status chart_bench(report *r, ut_err *err) {
  FILE *f = tn_report_open(r, "tflops.dat", err);
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
  mmt_status rc = tn_report_close(r, f, "tflops.dat", err);
  char title[512];
  snprintf(title, sizeof title, "TFLOP/s per shape on %s: mmtune's tuned kernel and cuBLAS\n(%s%s)",
           r->device, r->bench_path, n < r->nbench ? ", the first 40 shapes" : "");
  pic_begin(r, "tflops.png", title);
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
  FILE *f = pick ? tn_report_open(r, "tflops.dat", err) : NULL;
  if (!f) {
    free(pick);
    return pick ? MMT_ERR_IO : ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < r->nbest; i++) {
    int g = tn_report_group_of(r, &r->best[i].problem);
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
    put_num(f, tn_report_tflops(&b->problem, b->ms_median));
    fprintf(f, " %d\n", 1 + dtype_index(dtypes, nd, b->problem.dtype));
  }
  free(pick);
  mmt_status rc = tn_report_close(r, f, "tflops.dat", err);
  char title[512];
  snprintf(title, sizeof title,
           "Tuned TFLOP/s per shape on %s\nthe database's best rows (no "
           "--bench CSV, so no cuBLAS)%s",
           r->device, n < r->nbest ? "; the 40 most measured" : "");
  pic_begin(r, "tflops.png", title);
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
    if (j == 0 || ms[j] > ms[j - 1] * 1.001)
      put_point(f, e, intensity(p), tn_report_tflops(p, ms[j]));
  e->rows += n;
}

/* roofline-DTYPE.dat: block 0 the ok rows of dtype, block 1 the best rows. */
static mmt_status roofline_data(report *r, const char *dtype, const char *name, extent *all,
                                int *nbest, ut_err *err) {
  double *ms = malloc(((size_t)r->nrows + 1) * sizeof *ms);
  FILE *f = ms ? tn_report_open(r, name, err) : NULL;
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
    put_point(f, &best, intensity(&b->problem), tn_report_tflops(&b->problem, b->ms_median));
    (*nbest)++;
  }
  return tn_report_close(r, f, name, err);
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
  FILE *f = pick ? tn_report_open(r, "search.dat", err) : NULL;
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
  mmt_status rc = tn_report_close(r, f, "search.dat", err);
  char title[512], key[160];
  snprintf(title, sizeof title,
           "Best so far against measurements on %s\nthe %d searches with "
           "most rows (of %d)",
           r->device, n, searched);
  pic_begin(r, "search.png", title);
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
  FILE *f = pick ? tn_report_open(r, "model.dat", err) : NULL;
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
  return tn_report_close(r, f, "model.dat", err);
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

/* ---- the script --------------------------------------------------------------------------- */

/* Writes report.gp: the terminal, then the charts, each with its data file. */
mmt_status tn_report_write_script(report *r, ut_err *err) {
  if (!(r->gp = tn_report_open(r, "report.gp", err))) return MMT_ERR_IO;
  fprintf(r->gp, /* no backquote even in a comment: the file holds none, as a test checks */
          "# mmtune report: running gnuplot report.gp in this folder draws the charts again\n"
          "set terminal pngcairo size %d,%d noenhanced font 'sans,10'\n",
          RP_W, RP_H);
  mmt_status rc = r->nbench ? chart_bench(r, err) : chart_best(r, err);
  char dtypes[8][8];
  int nd = best_dtypes(r, dtypes);
  for (int i = 0; i < nd && !rc; i++) rc = chart_roofline(r, dtypes[i], err);
  if (!rc) rc = chart_search(r, err);
  if (!rc) rc = chart_model(r, err);
  fputs("unset output\n", r->gp);
  if (rc)
    fclose(r->gp);
  else
    rc = tn_report_close(r, r->gp, "report.gp", err);
  r->gp = NULL;
  return rc;
}
