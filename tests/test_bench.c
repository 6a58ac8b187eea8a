/* test_bench.c -- `mmtune bench` (tuner/cli/bench.c) through the built binary, and its CSV
 * (tuner/report/csv.c) and cuBLAS (tuner/gpu/cublas.c) modules.
 *
 * CPU: argument errors; without a device, one line and no CSV; CSV quoting; cuBLAS loading
 * without a driver (in forked children: the library is loaded once per process).  GPU
 * (skipped without one): the cuBLAS row verified in both modes, the ratio and the geometric
 * mean printed and consistent with the CSV; without libcublas, the reason and the rest of the
 * table.  Every run gets HOME and XDG_CACHE_HOME in a fresh temporary folder (an empty
 * database: the tuned kernel is the dispatcher's default) and MMTUNE_TEMPLATE_PATH="". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "gpu/cublas.h"
#include "report/csv.h"
#include "util.h"

#define RUN_TIMEOUT_S 300

static char tmp_dir[] = "/tmp/mmt_bench_XXXXXX";

/* Runs mmtune; libcublas (NULL: unset) is its MMTUNE_LIBCUBLAS. */
static run_result run_env(const char *libcublas, const char *const *args) {
  static char env[1024];
  snprintf(env, sizeof env, "MMTUNE_LIBCUBLAS=%s", libcublas ? libcublas : "");
  return cli_run(tmp_dir, libcublas ? (const char *const[]){env, NULL} : NULL, args,
                 RUN_TIMEOUT_S);
}

#define RUN(...) run_env(NULL, (const char *const[]){__VA_ARGS__, NULL})


/* The exit code, nothing on stdout, one line on stderr starting "mmtune bench: " with needle. */
static void assert_error(run_result r, int code, const char *needle) {
  cli_assert_error(r, code, "mmtune bench: ", needle);
}

static void tmp_path(char *out, size_t len, const char *name) {
  snprintf(out, len, "%s/%s", tmp_dir, name);
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Whether device 0 can be used: probed in a child, so that this process never initializes
 * CUDA (children forked after that could not use it). */
static bool have_gpu(void) {
  static int known = -1;
  if (known >= 0) return known;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) _exit(1);
    int (*init)(unsigned) = NULL;
    int (*count)(int *) = NULL;
    void *si = dlsym(h, "cuInit"), *sc = dlsym(h, "cuDeviceGetCount");
    memcpy(&init, &si, sizeof si);
    memcpy(&count, &sc, sizeof sc);
    int n = 0;
    _exit(init && count && init(0) == 0 && count(&n) == 0 && n > 0 ? 0 : 1);
  }
  known = cli_wait(pid, RUN_TIMEOUT_S) == 0;
  return known;
}

static int setup(void **state) {
  (void)state;
  return cli_fresh_home(tmp_dir);
}

static int teardown(void **state) {
  (void)state;
  return cli_remove_dir(tmp_dir);
}

/* ---- arguments (no GPU needed: each fails before the device is opened) ---- */

static void test_usage_errors(void **state) {
  (void)state;
  char csv[400], missing[400];
  tmp_path(csv, sizeof csv, "out.csv");
  tmp_path(missing, sizeof missing, "no/such/folder/out.csv");
  assert_error(RUN("bench", "--shapes", "64x64x64", "64", "64", "64"), 2, "not both");
  assert_error(RUN("bench", "64", "64", "64", "--shapes", "64x64x64"), 2, "not both");
  assert_error(RUN("bench", "--shapes", "64x64x64", "--csv"), 2, "--csv");
  assert_error(RUN("bench", "--shapes", "64x64x64", "--csv="), 2, "--csv needs a file path");
  assert_error(RUN("bench", "--shapes", "64x64x64", "--csv", missing), 2, "does not exist");
  assert_error(RUN("bench", "--shapes", "64x64x64", "--csv", tmp_dir), 2, "is a folder");
  assert_error(RUN("bench", "--shapes", "/nonexistent.txt"), 2, "'/nonexistent.txt' not found");
  assert_error(RUN("bench", "--shapes", "64x64"), 2, "MxNxK");
  assert_error(RUN("bench", "--shapes", "64x64x64", "--threads", "2"), 2, "--threads");
  assert_error(RUN("bench"), 2, "expected M N K (or --shapes)");
  /* mmt_matmul's op problems: with --shapes, a known epilogue, a batch only with one */
  assert_error(RUN("bench", "64", "64", "64", "--epilogue", "act=relu"), 2,
               "--epilogue goes with --shapes");
  assert_error(RUN("bench", "--shapes", "64x64x64", "--batch", "2"), 2,
               "--batch goes with --epilogue");
  assert_error(RUN("bench", "--shapes", "64x64x64", "--epilogue", "act=tanh"), 2,
               "bad epilogue field 'act=tanh'");
  assert_false(exists(csv));
}

/* Without a device: one line, nothing on stdout, and no CSV (an old one stays as it was). */
static void test_no_device_leaves_no_csv(void **state) {
  (void)state;
  if (have_gpu()) skip();
  char csv[400], old[400];
  tmp_path(csv, sizeof csv, "out.csv");
  tmp_path(old, sizeof old, "old.csv");
  assert_error(RUN("bench", "--shapes", "64x64x64", "--csv", csv, "--device", "0"), 1,
               "cannot use device 0: ");
  assert_false(exists(csv));
  ut_err e;
  assert_int_equal(ut_write_file_atomic(old, "keep\n", 5, &e), MMT_OK);
  assert_error(RUN("bench", "--shapes", "64x64x64", "--csv", old), 1, "cannot use device 0");
  char *text = cli_slurp(old);
  assert_string_equal(text, "keep\n");
  free(text);
  /* M N K mode prints its CPU rows first, then the same line; no CSV either. */
  run_result r = RUN("bench", "16", "16", "16", "--csv", csv);
  assert_int_equal(r.code, 1);
  assert_non_null(strstr(r.out, "CPU serial"));
  assert_int_equal(cli_count_lines(r.err), 1);
  assert_non_null(strstr(r.err, "mmtune bench: cannot use device 0: "));
  assert_false(exists(csv));
  run_free(&r);
}

/* ---- tn_csv ---- */

static char *csv_of(const char *const *fields, int n) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  tn_csv_row(f, fields, n);
  assert_int_equal(fclose(f), 0);
  return text;
}

static void test_csv_quoting(void **state) {
  (void)state;
  const struct {
    const char *field, *want;
  } cases[] = {
      {"plain", "plain"},
      {"", ""},
      {"tile=32,pad=0", "\"tile=32,pad=0\""},
      {"say \"hi\"", "\"say \"\"hi\"\"\""},
      {"\"", "\"\"\"\""},
      {"two\nlines", "\"two\nlines\""},
      {"cr\r", "\"cr\r\""},
      {" lead", "\" lead\""},
      {"trail ", "\"trail \""},
      {"in side", "in side"},
      {"NVIDIA H200", "NVIDIA H200"},
      {"1.5e-06", "1.5e-06"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    tn_csv_field(f, cases[i].field);
    assert_int_equal(fclose(f), 0);
    assert_string_equal(text, cases[i].want);
    free(text);
  }
  const char *row[] = {"a", NULL, "b,c", ""};
  char *text = csv_of(row, 4);
  assert_string_equal(text, "a,,\"b,c\",\n");
  free(text);
  text = csv_of(row, 0);
  assert_string_equal(text, "\n");
  free(text);
}

/* ---- tn_cublas (in children: it loads the library once per process) ---- */

/* Runs fn in a child; the child's exit status is fn's result (0: passed). */
static int in_child(int (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int rc = fn();
    fflush(NULL);
    _exit(rc);
  }
  return cli_wait(pid, RUN_TIMEOUT_S);
}

/* Without a driver the library loads (the toolkit has it) but no handle can be created: a
 * clean error, twice.  With a GPU (device 0's primary context via the runtime): a handle. */
static int cublas_open_child(void) {
  for (int i = 0; i < 2; i++) {
    tn_cublas *cb = (tn_cublas *)1;
    ut_err e = {{0}};
    mmt_status rc = tn_cublas_open(&cb, &e);
    if (rc == MMT_OK) {
      bool good = cb && strncmp(tn_cublas_version(cb), "1", 1) == 0;
      tn_cublas_close(cb);
      if (!good) return 10;
      continue;
    }
    if (cb != NULL) return 11;
    if (rc == MMT_ERR_CUDA && strncmp(e.msg, "cublasCreate_v2: CUBLAS_STATUS_", 31) != 0) return 12;
    if (rc == MMT_ERR_NOT_FOUND && !strstr(e.msg, "libcublas.so.13 not found: ")) return 13;
    if (rc != MMT_ERR_CUDA && rc != MMT_ERR_NOT_FOUND) return 14;
    printf("tn_cublas_open: %s: %s\n", mmt_status_name(rc), e.msg);
  }
  tn_cublas_close(NULL);
  return 0;
}

static void test_cublas_open(void **state) {
  (void)state;
  assert_int_equal(in_child(cublas_open_child), 0);
}

/* A missing library: MMT_ERR_NOT_FOUND naming it, the same the second time. */
static int cublas_missing_child(void) {
  setenv("MMTUNE_LIBCUBLAS", "/nonexistent/libcublas.so.13", 1);
  for (int i = 0; i < 2; i++) {
    tn_cublas *cb = NULL;
    ut_err e = {{0}};
    if (tn_cublas_open(&cb, &e) != MMT_ERR_NOT_FOUND || cb) return 20;
    if (!strstr(e.msg, "/nonexistent/libcublas.so.13 not found: ")) return 21;
  }
  return 0;
}

static void test_cublas_missing_library(void **state) {
  (void)state;
  assert_int_equal(in_child(cublas_missing_child), 0);
}

/* ---- GPU: the bench command ---- */

/* Splits one CSV record (RFC 4180 quoting) in place into fields; returns the count. */
static int split_csv(char *line, char **fields, int max) {
  int n = 0;
  char *w = line, *r = line;
  while (n < max) {
    fields[n++] = w;
    bool quoted = *r == '"';
    if (quoted) r++;
    for (; *r; r++) {
      if (quoted && *r == '"' && r[1] == '"') {
        *w++ = '"';
        r++;
      } else if (quoted && *r == '"') {
        quoted = false;
      } else if (!quoted && (*r == ',' || *r == '\n')) {
        break;
      } else {
        *w++ = *r;
      }
    }
    char end = *r;
    *w++ = '\0';
    if (end != ',') break;
    r++;
  }
  return n;
}

typedef struct {
  char *text;
  char *lines[16];
  int nlines;
  char *header[32];
  int ncols;
} csv_file;

/* Reads the CSV at path: the header's columns and the record lines (at most 15). */
static void csv_read(const char *path, csv_file *c) {
  memset(c, 0, sizeof *c);
  c->text = cli_slurp(path);
  assert_non_null(c->text);
  for (char *p = c->text; *p && c->nlines < 16; c->nlines++) {
    c->lines[c->nlines] = p;
    char *nl = strchr(p, '\n');
    assert_non_null(nl);
    *nl = '\0';
    p = nl + 1;
  }
  assert_true(c->nlines >= 1);
  c->ncols = split_csv(c->lines[0], c->header, 32);
}

/* Field `col` of record i (1-based after the header) into buf. */
static const char *csv_get(const csv_file *c, int i, const char *col, char *buf, size_t len) {
  char copy[4096], *fields[32];
  assert_true(i < c->nlines);
  ut_copy(copy, sizeof copy, c->lines[i]);
  int n = split_csv(copy, fields, 32);
  assert_int_equal(n, c->ncols);
  for (int j = 0; j < c->ncols; j++)
    if (!strcmp(c->header[j], col)) {
      ut_copy(buf, len, fields[j]);
      return buf;
    }
  fail_msg("no column %s", col);
  return NULL;
}

static void test_gpu_single_shape_rows(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char csv[400], buf[600];
  tmp_path(csv, sizeof csv, "single.csv");
  run_result r = RUN("bench", "17", "33", "65", "--device", "0", "--csv", csv);
  printf("%s%s", r.out, r.err);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "cublasSgemm pedantic fp32 (cuBLAS 13."));
  assert_non_null(strstr(r.out, "\ntuned / cuBLAS = "));
  assert_non_null(strstr(r.out, "device 0: "));
  csv_file c;
  csv_read(csv, &c);
  assert_int_equal(c.nlines, 7); /* header, CPU x2, naive, smem_tiled, tuned, cuBLAS */
  for (int i = 1; i < c.nlines; i++)
    assert_string_equal(csv_get(&c, i, "status", buf, sizeof buf), "ok");
  assert_string_equal(csv_get(&c, 6, "implementation", buf, sizeof buf), "cuBLAS");
  assert_string_equal(csv_get(&c, 6, "k", buf, sizeof buf), "65");
  assert_true(strtod(csv_get(&c, 6, "ms", buf, sizeof buf), NULL) > 0);
  free(c.text);
  run_free(&r);
}

/* --shapes: both rows verified; the printed geometric mean squares to the product of the
 * CSV's two ratios (no libm here: g * g against r1 * r2), and the win count matches. */
static void test_gpu_shapes_rows(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char csv[400], buf[600];
  tmp_path(csv, sizeof csv, "shapes.csv");
  run_result r = RUN("bench", "--shapes", "17x33x65,1000x999x1001", "--device", "0", "--csv", csv);
  printf("%s%s", r.out, r.err);
  assert_int_equal(r.code, 0);
  csv_file c;
  csv_read(csv, &c);
  assert_int_equal(c.nlines, 3);
  double product = 1;
  int wins = 0;
  for (int i = 1; i < 3; i++) {
    assert_string_equal(csv_get(&c, i, "tuned_status", buf, sizeof buf), "ok");
    assert_string_equal(csv_get(&c, i, "cublas_status", buf, sizeof buf), "ok");
    assert_string_equal(csv_get(&c, i, "choice", buf, sizeof buf), "default");
    double ratio = strtod(csv_get(&c, i, "tuned_over_cublas", buf, sizeof buf), NULL);
    double t_ms = strtod(csv_get(&c, i, "tuned_ms", buf, sizeof buf), NULL);
    double c_ms = strtod(csv_get(&c, i, "cublas_ms", buf, sizeof buf), NULL);
    assert_true(ratio > 0 && t_ms > 0 && c_ms > 0);
    assert_true(ratio > 0.999 * c_ms / t_ms && ratio < 1.001 * c_ms / t_ms);
    product *= ratio;
    wins += ratio > 1;
  }
  assert_string_equal(csv_get(&c, 2, "m", buf, sizeof buf), "1000");
  const char *line = strstr(r.out, "geometric mean tuned/cuBLAS: ");
  assert_non_null(line);
  double g = 0;
  int count = 0, faster = 0, of = 0;
  assert_int_equal(sscanf(line, "geometric mean tuned/cuBLAS: %lfx over %d shapes; mmtune faster on %d of %d",
                          &g, &count, &faster, &of),
                   4);
  assert_int_equal(count, 2);
  assert_int_equal(of, 2);
  assert_int_equal(faster, wins);
  assert_true(g * g > 0.99 * product && g * g < 1.01 * product);
  /* a ratio past 1.25x either way is timed twice (counted after the mean): a row out there
   * without the count line was not; with it, at most both rows were */
  const char *twice = strstr(r.out, "\ntimed twice: ");
  int retimed = 0;
  if (twice) assert_int_equal(sscanf(twice, "\ntimed twice: %d shape", &retimed), 1);
  assert_true(!twice || (retimed >= 1 && retimed <= 2));
  for (int i = 1; i < 3 && !twice; i++) {
    double ratio = strtod(csv_get(&c, i, "tuned_over_cublas", buf, sizeof buf), NULL);
    assert_true(ratio <= 1.25 && ratio >= 1 / 1.25);
  }
  free(c.text);
  run_free(&r);
}

/* --cold: a GEMV (memory-bound) gets its GB/s, its share of the measured copy bandwidth and
 * the GB/s of a plain read of its bytes; a 1024^3 (compute-bound) none of them.  The copy
 * bandwidth is that of an HBM GPU (> 500 GB/s); neither the kernel nor the read moves the
 * GEMV's bytes faster than 1.5x of it (a warm-L2 figure would); the read is no slower than a
 * third of the copy bandwidth (64 MiB: the launch's ramp-up is a small share), and the
 * kernel, which reads those bytes and more, is not 20% faster than the plain read of them. */
static void test_gpu_cold_bandwidth(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char csv[400], buf[600];
  tmp_path(csv, sizeof csv, "cold.csv");
  run_result r = RUN("bench", "--shapes", "1x4096x4096,1024x1024x1024", "--cold", "--csv", csv);
  printf("%s%s", r.out, r.err);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, ", cold (operands rotated over more than twice the L2)"));
  assert_non_null(strstr(r.out, "\ncopy bandwidth "));
  csv_file c;
  csv_read(csv, &c);
  assert_int_equal(c.nlines, 3);
  const double copy = strtod(csv_get(&c, 1, "copy_gbps", buf, sizeof buf), NULL);
  assert_true(copy > 500);
  assert_string_equal(csv_get(&c, 1, "cold", buf, sizeof buf), "1");
  assert_string_equal(csv_get(&c, 1, "memory_bound", buf, sizeof buf), "1");
  const double bytes = strtod(csv_get(&c, 1, "bytes", buf, sizeof buf), NULL);
  const double want = 4.0 * (4096 + 4096 * 4096.0 + 4096); /* A, B, C once; %.6g in the CSV */
  assert_true(bytes > 0.99999 * want && bytes < 1.00001 * want);
  const double gbps = strtod(csv_get(&c, 1, "tuned_gbps", buf, sizeof buf), NULL);
  assert_true(gbps > 0 && gbps < 1.5 * copy);
  const double read = strtod(csv_get(&c, 1, "read_gbps", buf, sizeof buf), NULL);
  assert_true(read > copy / 3 && read < 1.5 * copy);
  assert_true(gbps < 1.2 * read);
  assert_non_null(strstr(r.out, "GB/s (% copy, read)"));
  assert_string_equal(csv_get(&c, 2, "memory_bound", buf, sizeof buf), "0");
  assert_string_equal(csv_get(&c, 2, "read_gbps", buf, sizeof buf), "");
  free(c.text);
  run_free(&r);
  /* Too small to be cold: refused with the reason. */
  r = RUN("bench", "--shapes", "8x8x8", "--cold");
  assert_int_not_equal(r.code, 0);
  assert_non_null(strstr(r.err, "--cold: the problem is too small to rotate over twice the L2"));
  run_free(&r);
}

/* The plain read of a memory-bound row's bytes at the smallest sizes: 1x1x1 (12 bytes, less
 * than one of the read's 16-byte loads) and 17x33x65 (15 KB) get a read, a compute-bound
 * 1000x999x1001 none, and the table is whole. */
static void test_gpu_read_of_small_rows(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char csv[400], buf[600];
  tmp_path(csv, sizeof csv, "small.csv");
  run_result r = RUN("bench", "--shapes", "1x1x1,17x33x65,1000x999x1001", "--csv", csv);
  printf("%s%s", r.out, r.err);
  assert_int_equal(r.code, 0);
  csv_file c;
  csv_read(csv, &c);
  assert_int_equal(c.nlines, 4);
  for (int i = 1; i <= 2; i++) {
    assert_string_equal(csv_get(&c, i, "memory_bound", buf, sizeof buf), "1");
    assert_true(strtod(csv_get(&c, i, "read_gbps", buf, sizeof buf), NULL) > 0);
  }
  assert_string_equal(csv_get(&c, 3, "memory_bound", buf, sizeof buf), "0");
  assert_string_equal(csv_get(&c, 3, "read_gbps", buf, sizeof buf), "");
  free(c.text);
  run_free(&r);
}

/* Without libcublas the table still runs: the reason is printed and the run succeeds. */
static void test_gpu_without_cublas(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char csv[400], buf[600];
  tmp_path(csv, sizeof csv, "nocublas.csv");
  run_result r = run_env("/nonexistent/libcublas.so.13",
                         (const char *const[]){"bench", "--shapes", "17x33x65", "--csv", csv, NULL});
  printf("%s%s", r.out, r.err);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "cuBLAS not available: /nonexistent/libcublas.so.13 not found: "));
  assert_non_null(strstr(r.out, "geometric mean tuned/cuBLAS: n/a (no cuBLAS)"));
  csv_file c;
  csv_read(csv, &c);
  assert_int_equal(c.nlines, 2);
  assert_string_equal(csv_get(&c, 1, "tuned_status", buf, sizeof buf), "ok");
  assert_string_equal(csv_get(&c, 1, "cublas_status", buf, sizeof buf), "unavailable");
  free(c.text);
  run_free(&r);
  r = run_env("/nonexistent/libcublas.so.13",
              (const char *const[]){"bench", "17", "33", "65", NULL});
  assert_int_equal(r.code, 0);
  const char *row = strstr(r.out, "\ncuBLAS ");
  assert_non_null(row);
  assert_non_null(strstr(row, "not available: /nonexistent/libcublas.so.13 not found: "));
  run_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_no_device_leaves_no_csv),
      cmocka_unit_test(test_csv_quoting),
      cmocka_unit_test(test_cublas_open),
      cmocka_unit_test(test_cublas_missing_library),
      cmocka_unit_test(test_gpu_single_shape_rows),
      cmocka_unit_test(test_gpu_shapes_rows),
      cmocka_unit_test(test_gpu_cold_bandwidth),
      cmocka_unit_test(test_gpu_read_of_small_rows),
      cmocka_unit_test(test_gpu_without_cublas),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
