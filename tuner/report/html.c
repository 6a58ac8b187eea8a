/*
 * report/html.c -- DIR/index.html of `mmtune report` (report/report_int.h): the pictures
 * gnuplot drew, embedded as base64 data URIs, and the tables (the bench CSV's shapes, the best
 * kernel of each shape), so that the page opens alone.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report/report_int.h"

/* s as HTML text or a quoted attribute's value: every string from the database, the CSV or
 * the command line goes through here, so none of it is ever markup. */
static void html_text(FILE *f, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '&': fputs("&amp;", f); break;
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '"': fputs("&quot;", f); break;
      case '\'': fputs("&#39;", f); break;
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
    int g = tn_report_group_of(r, &b->problem);
    fputs("<tr><td>", f);
    html_text(f, b->problem.dtype);
    fputs("</td><td>", f);
    html_text(f, b->problem.layout);
    fprintf(f, "</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%d</td><td>%d</td>",
            (long long)b->problem.m, (long long)b->problem.n, (long long)b->problem.k,
            g >= 0 ? r->groups[g].count : 0, g >= 0 ? r->groups[g].ok : 0);
    html_num(f, "%.4f", b->ms_median);
    html_num(f, "%.2f", tn_report_tflops(&b->problem, b->ms_median));
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
  fputs("<figure><img alt=\"", f);
  html_text(f, r->pics[i]); /* plain characters (a dtype made so), escaped all the same */
  fprintf(f, "\" width=\"%d\" height=\"%d\" src=\"data:image/png;base64,", RP_W, RP_H);
  base64(f, (const unsigned char *)data, len);
  fputs("\"><figcaption>", f);
  html_text(f, r->caption[i]);
  fputs("</figcaption></figure>\n", f);
  free(data);
  return MMT_OK;
}

mmt_status tn_report_write_html(const report *r, ut_err *err) {
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
