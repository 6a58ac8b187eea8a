/*
 * report/report.h -- the work of `mmtune report`: charts of one GPU model's rows, drawn by
 * gnuplot, and a page that shows them.  Prefix tn_.
 *
 * The rows are read once (db_each_row, db_each_best; the performance model as `mmtune model
 * evaluate` fits it), then DIR gets one data file per chart and one script, report.gp, which
 * a gnuplot child process runs in DIR (its output in DIR/gnuplot.log).  The charts are PNG
 * (pngcairo, RP_W x RP_H pixels): a roofline or a scatter of 10^5 rows is as large as a PNG
 * of few points, where an SVG grows with every point.  DIR/index.html embeds every picture
 * as a base64 data URI, with the tables, so it opens alone.
 *
 * Needs no GPU.  The command (cli/report.c) checks its options and calls tn_report_make.
 */
#ifndef MMT_TN_REPORT_REPORT_H
#define MMT_TN_REPORT_REPORT_H

/* Writes the report of GPU model `device` (NULL: the database's only one) from the database at
 * db_path, with the `mmtune bench --csv` file at bench_path (NULL: none), into the folder out
 * (created if missing), and prints one line saying where it is.  Returns an exit code
 * (cli/cli.h) after one line "mmtune report: ..." on stderr: 2 when there is no database or
 * CSV at the path, or no ok rows of the GPU model (or several models and device NULL); 1 when
 * the work failed (a damaged database or CSV, a CSV without rows of the model, out not
 * writable, gnuplot missing or failing). */
int tn_report_make(const char *db_path, const char *device, const char *bench_path,
                   const char *out);

#endif /* MMT_TN_REPORT_REPORT_H */
