/*
 * report/report_int.h -- what the files of the report (report/report.h) share:
 * report/report.c (reading the database, running gnuplot, tn_report_make),
 * report/bench_csv.c (reading a `bench --csv` file), report/charts.c (report.gp and its data
 * files) and report/html.c (index.html).  Private to those four files (and the fuzz target
 * of the CSV reader, tests/fuzz/fuzz_bench_csv.c).
 */
#ifndef MMT_TN_REPORT_REPORT_INT_H
#define MMT_TN_REPORT_REPORT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "db.h"
#include "rt_choose.h"
#include "util.h"

#define RP_W 900 /* pixels of each PNG */
#define RP_H 600
#define RP_MAX_PICS 16

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

/* report/report.c */

/* The TFLOP/s of problem p done in ms milliseconds. */
double tn_report_tflops(const db_problem *p, double ms);
/* Opens DIR/name for writing. */
FILE *tn_report_open(const report *r, const char *name, ut_err *err);
/* Closes a file tn_report_open gave, reporting a failed write. */
mmt_status tn_report_close(const report *r, FILE *f, const char *name, ut_err *err);
/* The group of problem p, or -1. */
int tn_report_group_of(const report *r, const db_problem *p);

/* report/bench_csv.c: reads --bench into r->bench, the entries of r->device; an exit code. */
int tn_report_read_bench(report *r, ut_err *err);

/* report/charts.c: writes DIR/report.gp and the data files of its charts, adding each
 * chart to r->pics (DIR must exist). */
mmt_status tn_report_write_script(report *r, ut_err *err);

/* report/html.c: writes DIR/index.html: every picture of r->pics embedded (each must be a
 * PNG gnuplot wrote), and the tables. */
mmt_status tn_report_write_html(const report *r, ut_err *err);

#endif /* MMT_TN_REPORT_REPORT_INT_H */
