/* test_report.c -- `mmtune report` (tuner/report/) through the built binary.
 *
 * The database is tests/data/model_h100.sql (real rows of an H100 main job, f16 and f32);
 * the bench CSVs are tests/data/report_bench.csv (the --shapes format) and
 * report_bench_single.csv (the M N K format): samples written by hand in the columns
 * tuner/cli/bench.c writes, their figures not measured.
 *   - the charts: each PNG's signature and IHDR size (900x600); index.html embeds each one,
 *     byte for byte, and the tables, and refers to no other file;
 *   - bad inputs: one line on stderr, nothing on stdout, exit 2 (arguments) or 1 (work);
 *     gnuplot missing (PATH an empty folder) or failing (a fake gnuplot on PATH);
 *   - untrusted text: shell commands, quotes, backslashes, newlines, markup in every text
 *     column of a database and a bench CSV: no command runs, index.html shows the text escaped;
 *   - a bench CSV of 10^5 shapes read whole, and the reader's bounds (size, shapes);
 *   - 10^5 rows (the fixture's rows copied onto 3,936 problems): the time it takes.
 * The tests that draw skip without gnuplot; all skip without the sqlite3 CLI (which loads the
 * fixture). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "db.h"
#include "util.h"

#define SQLITE_CLI "/usr/bin/sqlite3"
#define DEV "NVIDIA H100 80GB HBM3"
#define RUN_TIMEOUT_S 120
#define PNG_W 900
#define PNG_H 600

static char tmp_dir[] = "/tmp/mmt_report_XXXXXX";
static char g_db[512];

static const char *const k_pictures[] = {"tflops.png", "roofline-f16.png", "roofline-f32.png",
                                         "search.png", "model.png"};
#define NPICTURES (int)(sizeof k_pictures / sizeof k_pictures[0])

static void tmp_path(char *out, size_t len, const char *leaf) {
  snprintf(out, len, "%s/%s", tmp_dir, leaf);
}

static run_result run_env(const char *const *env, const char *const *args) {
  return cli_run(tmp_dir, env, args, RUN_TIMEOUT_S);
}

#define RUN(...) run_env(NULL, (const char *const[]){__VA_ARGS__, NULL})

static bool have_sqlite_cli(void) { return access(SQLITE_CLI, X_OK) == 0; }

static bool have_gnuplot(void) {
  const char *path = getenv("PATH");
  char dirs[4096], exe[4200];
  snprintf(dirs, sizeof dirs, "%s", path ? path : "");
  for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    snprintf(exe, sizeof exe, "%s/gnuplot", d);
    if (access(exe, X_OK) == 0) return true;
  }
  return false;
}

/* Skips a test that needs the fixture or gnuplot. */
static void need(bool gnuplot) {
  if (!have_sqlite_cli()) skip();
  if (gnuplot && !have_gnuplot()) skip();
}

/* An empty mmtune database at path, then the SQL file's rows. */
static int load_db(const char *path, const char *sql_file) {
  db_handle *db = NULL;
  ut_err e;
  if (db_open(path, false, &db, &e) != MMT_OK) return -1;
  db_close(db);
  char cmd[1400];
  snprintf(cmd, sizeof cmd, SQLITE_CLI " '%s' < '%s'", path, sql_file);
  return system(cmd) == 0 ? 0 : -1;
}

static int setup(void **state) {
  (void)state;
  if (cli_fresh_home(tmp_dir)) return -1;
  tmp_path(g_db, sizeof g_db, "h100.db");
  if (!have_sqlite_cli()) return 0; /* the tests skip */
  char sql[600];
  snprintf(sql, sizeof sql, "%s/data/model_h100.sql", MMT_TEST_DIR);
  return load_db(g_db, sql);
}

static int teardown(void **state) {
  (void)state;
  return cli_remove_dir(tmp_dir);
}

/* ---- checking the output ---- */

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A whole binary file (owned) and its length. */
static unsigned char *slurp(const char *path, size_t *len) {
  char *data = NULL;
  ut_err e;
  if (ut_read_file(path, &data, len, &e) != MMT_OK) fail_msg("%s", e.msg);
  return (unsigned char *)data;
}

/* dir/name is a PNG of PNG_W x PNG_H: its signature, then the IHDR chunk. */
static void assert_png(const char *dir, const char *name) {
  char path[700];
  size_t len = 0;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  unsigned char *d = slurp(path, &len);
  if (len < 33 || memcmp(d, "\x89PNG\r\n\x1a\n", 8) != 0 || be32(d + 8) != 13 ||
      memcmp(d + 12, "IHDR", 4) != 0)
    fail_msg("%s is not a PNG", path);
  if (be32(d + 16) != PNG_W || be32(d + 20) != PNG_H)
    fail_msg("%s is %ux%u, not %dx%d", path, be32(d + 16), be32(d + 20), PNG_W, PNG_H);
  free(d);
}

static int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes base64 text up to the first character that is not base64 ('=' ends it). */
static unsigned char *b64_decode(const char *s, size_t *len) {
  size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
  unsigned char *out = malloc(n * 3 / 4 + 3);
  assert_non_null(out);
  uint32_t acc = 0;
  int bits = 0;
  *len = 0;
  for (size_t i = 0; i < n; i++) {
    acc = acc << 6 | (uint32_t)b64_value(s[i]);
    if ((bits += 6) >= 8) out[(*len)++] = (unsigned char)(acc >> (bits -= 8));
  }
  return out;
}

/* index.html embeds dir/name: an <img alt="name"> whose data URI holds the file's bytes. */
static void assert_embedded(const char *html, const char *dir, const char *name) {
  char alt[100], path[700];
  snprintf(alt, sizeof alt, "<img alt=\"%s\"", name);
  const char *img = strstr(html, alt);
  if (!img) fail_msg("index.html has no %s", alt);
  const char *uri = strstr(img, "src=\"data:image/png;base64,");
  assert_non_null(uri);
  assert_true(uri < strchr(img, '>'));
  size_t len = 0, flen = 0;
  unsigned char *bytes = b64_decode(uri + strlen("src=\"data:image/png;base64,"), &len);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  unsigned char *file = slurp(path, &flen);
  if (len != flen || memcmp(bytes, file, len) != 0)
    fail_msg("index.html's %s is not the file's %zu bytes (%zu decoded)", name, flen, len);
  free(bytes);
  free(file);
}

/* The report in dir: every picture, index.html embedding each and referring to no file. */
static char *assert_report(const char *dir) {
  for (int i = 0; i < NPICTURES; i++) assert_png(dir, k_pictures[i]);
  char path[700];
  snprintf(path, sizeof path, "%s/index.html", dir);
  char *html = cli_slurp(path);
  for (int i = 0; i < NPICTURES; i++) assert_embedded(html, dir, k_pictures[i]);
  assert_int_equal(cli_count_lines(html) > 0, 1);
  assert_null(strstr(html, "href="));
  for (const char *s = strstr(html, "src=\""); s; s = strstr(s + 1, "src=\""))
    assert_int_equal(strncmp(s, "src=\"data:", 10), 0);
  assert_non_null(strstr(html, "<h2>Best kernel per shape</h2>"));
  assert_non_null(strstr(html, "<td>8192</td><td>8192</td><td>8192</td>"));
  return html;
}

/* A successful run: exit 0, one line on stdout naming index.html, nothing on stderr. */
static void assert_ok(run_result r, const char *out_dir) {
  if (r.code != 0) fail_msg("exit %d, stderr:\n%s", r.code, r.err);
  assert_int_equal(cli_count_lines(r.out), 1);
  assert_non_null(strstr(r.out, out_dir));
  assert_string_equal(r.err, "");
  run_free(&r);
}

/* ---- the charts ---- */

static void test_help(void **state) {
  (void)state;
  run_result r = RUN("help", "report");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "usage: mmtune report"));
  assert_non_null(strstr(r.out, "--bench CSV"));
  run_free(&r);
}

/* With a bench CSV of the --shapes format: tuned and cuBLAS bars, the bench table. */
static void test_report_with_bench(void **state) {
  (void)state;
  need(true);
  char out[600], csv[600], path[700];
  tmp_path(out, sizeof out, "with-bench/sub");
  snprintf(csv, sizeof csv, "%s/data/report_bench.csv", MMT_TEST_DIR);
  assert_ok(RUN("report", "--db", g_db, "--bench", csv, "--out", out), out);
  char *html = assert_report(out);
  assert_non_null(strstr(html, "<h2>Bench: mmtune against cuBLAS</h2>"));
  assert_non_null(strstr(html, "<tr><td>16x4096x4096</td>")); /* cuBLAS failed there */
  /* the model chart says which predictions it drew; the bars come from the CSV */
  snprintf(path, sizeof path, "%s/report.gp", out);
  char *gp = cli_slurp(path);
  assert_non_null(strstr(gp, "leave-one-shape-out"));
  snprintf(path, sizeof path, "%s/tflops.dat", out);
  char *dat = cli_slurp(path);
  assert_non_null(strstr(dat, "\"1024x1024x1024\" 226.05 177.48\n"));
  assert_non_null(strstr(dat, "\"16x4096x4096\" 23.44 -\n"));
  free(dat);
  free(gp);
  free(html);
}

/* Without --bench: the database's best rows, and the chart's title says so. */
static void test_report_without_bench(void **state) {
  (void)state;
  need(true);
  char out[600], path[700];
  tmp_path(out, sizeof out, "no-bench");
  assert_ok(RUN("report", "--db", g_db, "--device-name", DEV, "--out", out), out);
  char *html = assert_report(out);
  assert_null(strstr(html, "<h2>Bench"));
  assert_non_null(strstr(html, "no --bench CSV, so no cuBLAS"));
  snprintf(path, sizeof path, "%s/tflops.dat", out);
  char *dat = cli_slurp(path);
  assert_int_equal(cli_count_lines(dat), 1 + 24); /* a comment, then the 24 best rows */
  free(dat);
  /* every row of a search, in id order: f16 1000x999x1001's 52 rows end at its best */
  snprintf(path, sizeof path, "%s/search.dat", out);
  dat = cli_slurp(path);
  assert_non_null(strstr(dat, "\n52 1\n"));
  free(dat);
  free(html);
  /* a second run into the same folder replaces the report */
  assert_ok(RUN("report", "--db", g_db, "--out", out), out);
}

/* The CSV of `bench M N K`: its tuned and cuBLAS records make one shape. */
static void test_report_single_csv(void **state) {
  (void)state;
  need(true);
  char out[600], csv[600], path[700];
  tmp_path(out, sizeof out, "single");
  snprintf(csv, sizeof csv, "%s/data/report_bench_single.csv", MMT_TEST_DIR);
  assert_ok(RUN("report", "--db", g_db, "--bench", csv, "--out", out), out);
  free(assert_report(out));
  snprintf(path, sizeof path, "%s/tflops.dat", out);
  char *dat = cli_slurp(path);
  assert_non_null(strstr(dat, "\n\"1024x1024x1024\" 26.2206 35.9715\n"));
  assert_int_equal(cli_count_lines(dat), 2);
  free(dat);
}

/* A GPU model with one row, beside another: --device-name picks it, and every chart is
 * drawn from that row alone. */
static void test_report_two_devices(void **state) {
  (void)state;
  need(true);
  char db2[600], out[600], cmd[1400];
  tmp_path(db2, sizeof db2, "two.db");
  tmp_path(out, sizeof out, "two");
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", g_db, db2);
  assert_int_equal(system(cmd), 0);
  db_handle *db = NULL;
  ut_err e;
  assert_int_equal(db_open(db2, false, &db, &e), MMT_OK);
  db_result r;
  assert_int_equal(db_get(db, 1, &r, &e), MMT_OK);
  strcpy(r.device.name, "Other GPU");
  r.created_at = 0;
  assert_int_equal(db_insert(db, &r, &e), MMT_OK);
  db_close(db);
  cli_assert_error(RUN("report", "--db", db2, "--out", out), 2,
                   "mmtune report:", "holds 2 GPU models ('NVIDIA H100 80GB HBM3', 'Other GPU')");
  assert_ok(RUN("report", "--db", db2, "--device-name", "Other GPU", "--out", out), out);
  assert_png(out, "tflops.png");
  assert_png(out, "roofline-f16.png");
  assert_png(out, "search.png");
  assert_png(out, "model.png");
}

/* ---- bad inputs: one line, nothing on stdout ---- */

static void assert_fails(run_result r, int code, const char *needle) {
  cli_assert_error(r, code, "mmtune report: ", needle);
}

static void test_bad_arguments(void **state) {
  (void)state;
  char out[600], missing[600], csv[600], shapes[600];
  tmp_path(out, sizeof out, "bad");
  tmp_path(missing, sizeof missing, "no-such.db");
  tmp_path(csv, sizeof csv, "no-such.csv");
  snprintf(shapes, sizeof shapes, "%s/data/shapes.txt", MMT_TEST_DIR);
  assert_fails(RUN("report", "--db", g_db), 2, "--out DIR is required");
  assert_fails(RUN("report", "--db", g_db, "--out", out, "extra"), 2,
               "unexpected argument 'extra'");
  assert_fails(RUN("report", "--db", missing, "--out", out), 2, "no database at");
  need(false);
  assert_fails(RUN("report", "--db", g_db, "--device-name", "NVIDIA Nope", "--out", out), 2,
               "no ok rows for 'NVIDIA Nope'");
  assert_fails(RUN("report", "--db", g_db, "--bench", csv, "--out", out), 2, "no bench CSV at");
  assert_fails(RUN("report", "--db", g_db, "--bench", shapes, "--out", out), 1,
               "is not a `mmtune bench --csv` file");
}

/* A file that is not a database, and one damaged in the middle. */
static void test_bad_database(void **state) {
  (void)state;
  char out[600], junk[600], bad[600], cmd[2200];
  tmp_path(out, sizeof out, "bad");
  tmp_path(junk, sizeof junk, "junk.db");
  FILE *f = fopen(junk, "w");
  assert_non_null(f);
  fputs("not a database\n", f);
  assert_int_equal(fclose(f), 0);
  assert_fails(RUN("report", "--db", junk, "--out", out), 1, "is not an mmtune database");
  need(false);
  tmp_path(bad, sizeof bad, "damaged.db");
  snprintf(cmd, sizeof cmd,
           "cp '%s' '%s' && dd if=/dev/zero of='%s' bs=4096 seek=3 count=4 "
           "conv=notrunc 2>/dev/null",
           g_db, bad, bad);
  assert_int_equal(system(cmd), 0);
  assert_fails(RUN("report", "--db", bad, "--out", out), 1, "malformed");
}

/* --out under a file (root may write anywhere else), or a file itself. */
static void test_unwritable_out(void **state) {
  (void)state;
  need(false);
  char file[600], under[700];
  tmp_path(file, sizeof file, "a-file");
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  assert_int_equal(fclose(f), 0);
  snprintf(under, sizeof under, "%s/charts", file);
  assert_fails(RUN("report", "--db", g_db, "--out", under), 1, "cannot create folder");
  assert_fails(RUN("report", "--db", g_db, "--out", file), 1, "is not a folder");
}

static void test_gnuplot_missing_or_failing(void **state) {
  (void)state;
  need(false);
  char out[600], bin[600], env[700], fake[700], csv[600];
  tmp_path(out, sizeof out, "nognuplot");
  tmp_path(bin, sizeof bin, "bin");
  snprintf(env, sizeof env, "PATH=%s", bin);
  assert_int_equal(mkdir(bin, 0755), 0);
  const char *const path_env[] = {env, NULL};
  assert_fails(run_env(path_env, (const char *const[]){"report", "--db", g_db, "--out", out, NULL}),
               1, "gnuplot is not on PATH");
  /* a gnuplot that fails: its last line in the message */
  snprintf(fake, sizeof fake, "%s/gnuplot", bin);
  FILE *f = fopen(fake, "w");
  assert_non_null(f);
  fputs("#!/bin/sh\necho 'report.gp, line 9: something broke' >&2\nexit 3\n", f);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(chmod(fake, 0755), 0);
  snprintf(csv, sizeof csv, "%s/data/report_bench.csv", MMT_TEST_DIR);
  assert_fails(run_env(path_env, (const char *const[]){"report", "--db", g_db, "--bench", csv,
                                                       "--out", out, NULL}),
               1, "gnuplot failed (exit 3) on");
  run_result r =
      run_env(path_env, (const char *const[]){"report", "--db", g_db, "--out", out, NULL});
  assert_non_null(strstr(r.err, "line 9: something broke"));
  run_free(&r);
}

/* ---- data from others: hostile text in every column ---- */

/* A shared database or CSV is untrusted: its text must reach gnuplot as nothing gnuplot runs
 * (it runs `...` as a shell command, even inside a double-quoted string) and index.html as
 * text, never markup.  Each command below, if run, creates a file: tmp_dir/pw-* (absolute)
 * or OUT/pw-* (gnuplot runs in OUT; the dtype holds 7 bytes). */
#define HOSTILE_NAMES 8

typedef struct {
  char device[128], tmpl[64], params[MMT_PARAMS_MAX], dtype[8], layout[8];
  char marker[HOSTILE_NAMES][700]; /* the files the commands would create */
  int nmarkers;
} hostile;

/* Formats into out, failing the test when it does not fit (a truncated command proves
 * nothing). */
static void fit(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fit(char *out, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= len) fail_msg("'%s...' does not fit in %zu bytes", out, len);
}

static void hostile_init(hostile *h, const char *out_dir) {
  fit(h->device, sizeof h->device,
      "H `touch %s/pw-d` \"q' \\ @m $x # system(\"touch %s/pw-s\") <script>alert(1)</script>\nz",
      tmp_dir, tmp_dir);
  fit(h->tmpl, sizeof h->tmpl, "t`touch %s/pw-t`'\"@m#\\<script>", tmp_dir);
  fit(h->params, sizeof h->params,
      "bm=64,`touch %s/pw-p`,x=\"$(touch %s/pw-q)\",system(\"touch %s/pw-r\")\n"
      "#@m \\ <script>alert(2)</script>",
      tmp_dir, tmp_dir, tmp_dir);
  fit(h->dtype, sizeof h->dtype, "`:>pw`");
  fit(h->layout, sizeof h->layout, "'\"<#\\\n");
  const char *abs[] = {"pw-d", "pw-s", "pw-t", "pw-p", "pw-q", "pw-r"};
  h->nmarkers = 0;
  for (int i = 0; i < 6; i++)
    fit(h->marker[h->nmarkers++], sizeof h->marker[0], "%s/%s", tmp_dir, abs[i]);
  fit(h->marker[h->nmarkers++], sizeof h->marker[0], "%s/pw", out_dir);
  fit(h->marker[h->nmarkers++], sizeof h->marker[0], "%s/pw-f", out_dir);
}

/* s as an SQL expression: a blob literal holds any byte, so there is no quoting to get
 * wrong. */
static void sql_text(FILE *f, const char *s) {
  fputs("CAST(X'", f);
  for (; *s; s++) fprintf(f, "%02x", (unsigned char)*s);
  fputs("' AS TEXT)", f);
}

/* A copy of the fixture with the hostile device name on every row, the hostile template and
 * params on every row of f16 1024^3 (so its best row shows them) and the hostile dtype and
 * layout on every row of f32 4096^3. */
static void hostile_db(const hostile *h, const char *path) {
  char sql[600], cmd[2000];
  tmp_path(sql, sizeof sql, "hostile.sql");
  FILE *f = fopen(sql, "w");
  assert_non_null(f);
  fputs("UPDATE results SET device_name = ", f);
  sql_text(f, h->device);
  fputs(";\nUPDATE results SET template_name = ", f);
  sql_text(f, h->tmpl);
  fputs(", params = ", f);
  sql_text(f, h->params);
  fputs(" WHERE dtype = 'f16' AND m = 1024 AND n = 1024 AND k = 1024;\n", f);
  fputs("UPDATE results SET dtype = ", f);
  sql_text(f, h->dtype);
  fputs(", layout = ", f);
  sql_text(f, h->layout);
  fputs(" WHERE dtype = 'f32' AND m = 4096 AND n = 4096 AND k = 4096;\n", f);
  assert_int_equal(fclose(f), 0);
  fit(cmd, sizeof cmd, "cp '%s' '%s' && " SQLITE_CLI " '%s' < '%s'", g_db, path, path, sql);
  assert_int_equal(system(cmd), 0);
}

/* s as one CSV field (RFC 4180: quoted, a quote doubled). */
static void csv_field(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* A bench CSV of the --shapes format: two shapes of the hostile device, the hostile template
 * and params. */
static void hostile_csv(const hostile *h, const char *path) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("device,m,n,k,choice,template,params,tuned_status,tuned_ms,tuned_tflops,"
        "cublas_status,cublas_ms,cublas_tflops,tuned_error,cublas_error\n",
        f);
  for (int i = 0; i < 2; i++) {
    csv_field(f, h->device);
    fprintf(f, ",%d,1024,1024,exact,", 1024 * (i + 1));
    csv_field(f, h->tmpl);
    fputc(',', f);
    csv_field(f, h->params);
    fputs(",ok,0.0095,226.05,ok,0.0121,177.48,", f);
    csv_field(f, h->tmpl);
    fputs(",\n", f);
  }
  assert_int_equal(fclose(f), 0);
}

/* s as index.html must hold it: & < > " ' escaped. */
static char *html_escaped(const char *s) {
  char *out = malloc(strlen(s) * 6 + 1), *w = out;
  assert_non_null(out);
  for (; *s; s++) {
    const char *e = *s == '&'    ? "&amp;"
                    : *s == '<'  ? "&lt;"
                    : *s == '>'  ? "&gt;"
                    : *s == '"'  ? "&quot;"
                    : *s == '\'' ? "&#39;"
                                 : NULL;
    if (e)
      w = stpcpy(w, e);
    else
      *w++ = *s;
  }
  *w = 0;
  return out;
}

static void assert_html_has(const char *html, const char *text) {
  char *e = html_escaped(text);
  if (!strstr(html, e)) fail_msg("index.html lacks the escaped text:\n%s", e);
  free(e);
}

/* What gnuplot reads in dir holds no backquote: report.gp and each data file. */
static void assert_no_backquote(const char *dir) {
  static const char *const files[] = {"report.gp", "tflops.dat", "search.dat", "model.dat"};
  char path[700];
  for (int i = 0; i < (int)(sizeof files / sizeof files[0]); i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    char *text = cli_slurp(path);
    if (strchr(text, '`')) fail_msg("%s holds a backquote", path);
    free(text);
  }
}

static void test_hostile_text(void **state) {
  (void)state;
  need(true);
  hostile h;
  char db[600], out[600], csv[600], path[700];
  tmp_path(db, sizeof db, "hostile.db");
  tmp_path(out, sizeof out, "hostile");
  /* the CSV's own name is in a chart's title */
  tmp_path(csv, sizeof csv, "b `touch pw-f` '\"<i>.csv");
  hostile_init(&h, out);
  hostile_db(&h, db);
  hostile_csv(&h, csv);
  run_result r = RUN("report", "--db", db, "--bench", csv, "--out", out);
  if (r.code != 0) fail_msg("exit %d, stderr:\n%s", r.code, r.err);
  assert_string_equal(r.err, "");
  run_free(&r);
  for (int i = 0; i < h.nmarkers; i++)
    if (access(h.marker[i], F_OK) == 0) fail_msg("an injected command created %s", h.marker[i]);
  assert_no_backquote(out);
  snprintf(path, sizeof path, "%s/index.html", out);
  char *html = cli_slurp(path);
  assert_null(strstr(html, "<script"));
  assert_null(strstr(html, "<i>"));
  assert_html_has(html, h.device);
  assert_html_has(html, h.tmpl);
  assert_html_has(html, h.params);
  assert_html_has(html, h.dtype);
  assert_html_has(html, h.layout);
  assert_html_has(html, csv);
  free(html);
  /* and without the CSV: the best rows' chart labels its bars with the dtype and layout */
  r = RUN("report", "--db", db, "--out", out);
  if (r.code != 0) fail_msg("exit %d, stderr:\n%s", r.code, r.err);
  run_free(&r);
  for (int i = 0; i < h.nmarkers; i++)
    if (access(h.marker[i], F_OK) == 0) fail_msg("an injected command created %s", h.marker[i]);
  assert_no_backquote(out);
}

/* ---- a large bench CSV ---- */

#define BIG_SHAPES 100000

/* The CSV of `bench M N K` with BIG_SHAPES shapes (m = 16 + i): every tuned record, then a
 * shape of another GPU model, then every cuBLAS record in the reverse order, so that each
 * cuBLAS record finds its shape's entry far from the last one made. */
static void big_csv(const char *path) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("device,m,n,k,implementation,config,status,ms,tflops,rel_err,max_err,error\n", f);
  for (int i = 0; i < BIG_SHAPES; i++)
    fprintf(f, DEV ",%d,64,64,tuned (model),\"bm=%d\",ok,%d.5,%d,,,\n", 16 + i, i % 7, i, i);
  fputs("Other GPU,16,64,64,cuBLAS,,ok,1,1,,,\n", f);
  for (int i = BIG_SHAPES - 1; i >= 0; i--)
    fprintf(f, DEV ",%d,64,64,cuBLAS,,ok,%d.25,%d,,,\n", 16 + i, 2 * i, 2 * i);
  assert_int_equal(fclose(f), 0);
}

/* Every shape once in the bench table, each with its tuned and its cuBLAS record (the
 * reading is linear: not timed here, the run's time limit is far above it). */
static void test_bench_csv_1e5_shapes(void **state) {
  (void)state;
  need(true);
  char csv[600], out[600], path[700], row[300];
  tmp_path(csv, sizeof csv, "big.csv");
  tmp_path(out, sizeof out, "big-csv");
  big_csv(csv);
  assert_ok(RUN("report", "--db", g_db, "--bench", csv, "--out", out), out);
  snprintf(path, sizeof path, "%s/index.html", out);
  char *html = cli_slurp(path);
  char *table = strstr(html, "<h2>Bench"), *end = table ? strstr(table, "<h2>Best") : NULL;
  assert_non_null(end);
  int rows = 0;
  /* one pass: strstr from each row would measure the rest of the page each time under ASan
   * (its interceptor takes the haystack's strlen), 10^5 times 10 MB */
  for (const char *s = table; s < end; s++) rows += *s == '<' && !strncmp(s, "<tr><td>", 8);
  assert_int_equal(rows, BIG_SHAPES);
  int i = 54321;
  snprintf(row, sizeof row,
           "<tr><td>%dx64x64</td><td>%d.5000</td><td>%d.00</td><td>%d.2500</td><td>%d.00</td>"
           "<td>0.500x</td><td class=l>bm=%d</td></tr>\n",
           16 + i, i, i, 2 * i, 2 * i, i % 7);
  assert_non_null(strstr(table, row));
  free(html);
  /* the chart's bars: the first 40 shapes, in the CSV's order */
  snprintf(path, sizeof path, "%s/tflops.dat", out);
  char *dat = cli_slurp(path);
  assert_int_equal(cli_count_lines(dat), 1 + 40);
  assert_non_null(strstr(dat, "\n\"55x64x64\" 39 78\n"));
  free(dat);
}

/* The reader's bounds, each one line and exit 1: a file over 64 MiB (sparse here) and more
 * than 250,000 shapes. */
static void test_bench_csv_bounds(void **state) {
  (void)state;
  need(false);
  char csv[600], out[600];
  tmp_path(csv, sizeof csv, "huge.csv");
  tmp_path(out, sizeof out, "huge");
  FILE *f = fopen(csv, "w");
  assert_non_null(f);
  fputs("device,m,n,k,implementation,config,status,ms,tflops,rel_err,max_err,error\n", f);
  assert_int_equal(fflush(f), 0);
  assert_int_equal(ftruncate(fileno(f), (64 << 20) + 1), 0);
  assert_int_equal(fclose(f), 0);
  assert_fails(RUN("report", "--db", g_db, "--bench", csv, "--out", out), 1,
               "is larger than 64 MiB");
  f = fopen(csv, "w");
  assert_non_null(f);
  fputs("device,m,n,k,implementation,config,status,ms,tflops,rel_err,max_err,error\n", f);
  for (int i = 0; i <= 250000; i++) fprintf(f, "G,%d,1,1,cuBLAS,,ok,1,1,,,\n", i + 1);
  assert_int_equal(fclose(f), 0);
  assert_fails(RUN("report", "--db", g_db, "--bench", csv, "--out", out), 1,
               "record 250002: more than 250000 shapes");
}

/* ---- 10^5 rows ---- */

/* The fixture's 611 rows copied 163 more times, copy v on shapes moved by (16v, 8v, 0),
 * times scaled by the flops: 100,204 rows on 3,936 problems. */
static const char k_grow_sql[] =
    "WITH RECURSIVE seq(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM seq WHERE v < 163)\n"
    "INSERT INTO results(device_name, device_uuid, cc_major, cc_minor, sm_count,\n"
    "  driver_version, nvrtc_version, template_name, template_hash, params, dtype, layout, m,\n"
    "  n, k, status, error, ms_min, ms_median, ms_max, runs, tflops, rel_err, max_err, regs,\n"
    "  shared_bytes, local_bytes, created_at, tile_m, tile_n, slices, threads, per_sm)\n"
    "SELECT device_name, device_uuid, cc_major, cc_minor, sm_count, driver_version,\n"
    "  nvrtc_version, template_name, template_hash, params, dtype, layout, m + 16 * v,\n"
    "  n + 8 * v, k, status, error, ms_min * (m + 16.0 * v) * (n + 8.0 * v) / (m * n),\n"
    "  ms_median * (m + 16.0 * v) * (n + 8.0 * v) / (m * n),\n"
    "  ms_max * (m + 16.0 * v) * (n + 8.0 * v) / (m * n), runs, tflops, rel_err, max_err,\n"
    "  regs, shared_bytes, local_bytes, created_at + 100 * v, tile_m, tile_n, slices,\n"
    "  threads, per_sm FROM results, seq ORDER BY v, id;\n";

/* 1e5 rows make a report (the target, 5 s, is a benchmark's: the test prints the time but
 * does not fail on it, since a loaded machine took 68 s under ctest -j16). */
static void test_report_1e5_rows(void **state) {
  (void)state;
  need(true);
  char big[600], sql[600], out[600], cmd[2600];
  tmp_path(big, sizeof big, "big.db");
  tmp_path(sql, sizeof sql, "grow.sql");
  tmp_path(out, sizeof out, "big");
  FILE *f = fopen(sql, "w");
  assert_non_null(f);
  fputs(k_grow_sql, f);
  assert_int_equal(fclose(f), 0);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s' && " SQLITE_CLI " '%s' < '%s'", g_db, big, big, sql);
  assert_int_equal(system(cmd), 0);
  db_handle *db = NULL;
  ut_err e;
  int64_t rows = 0;
  assert_int_equal(db_open(big, true, &db, &e), MMT_OK);
  assert_int_equal(db_count(db, NULL, &rows, &e), MMT_OK);
  db_close(db);
  assert_int_equal(rows, 100204);
  double t0 = ut_now_seconds();
  run_result r = RUN("report", "--db", big, "--out", out);
  double s = ut_now_seconds() - t0;
  assert_non_null(strstr(r.out, "(100204 rows, 3936 problems)"));
  assert_ok(r, out);
  for (int i = 0; i < NPICTURES; i++) assert_png(out, k_pictures[i]);
  print_message("mmtune report of %lld rows: %.2f s (target: 5 s)\n", (long long)rows, s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_help),
      cmocka_unit_test(test_report_with_bench),
      cmocka_unit_test(test_report_without_bench),
      cmocka_unit_test(test_report_single_csv),
      cmocka_unit_test(test_report_two_devices),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_bad_database),
      cmocka_unit_test(test_unwritable_out),
      cmocka_unit_test(test_gnuplot_missing_or_failing),
      cmocka_unit_test(test_hostile_text),
      cmocka_unit_test(test_bench_csv_1e5_shapes),
      cmocka_unit_test(test_bench_csv_bounds),
      cmocka_unit_test(test_report_1e5_rows),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
