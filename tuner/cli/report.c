/*
 * cli/report.c -- `mmtune report`: its options, checked, then the report's work
 * (report/report.h).
 */
#include "cli/cli.h"
#include "cli/opts.h"
#include "report/report.h"

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

static int report_run(const tn_opts *o) {
  char path[4096];
  const char *out = tn_opts_get(o, "out"), *bench = tn_opts_get(o, "bench");
  const char *dev = tn_opts_get(o, "device-name");
  int ex = tn_opt_db_path("report", tn_opts_get(o, "db"), path, sizeof path);
  if (ex) return ex;
  if (!out || !*out) return tn_usage_error("report", "--out DIR is required");
  if (bench && !*bench) return tn_usage_error("report", "--bench needs a CSV file");
  if (dev && !*dev) return tn_usage_error("report", "--device-name needs a GPU model name");
  return tn_report_make(path, dev, bench, out);
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
