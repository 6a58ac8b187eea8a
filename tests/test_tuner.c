/*
 * test_tuner.c -- the `mmtune` main job end to end, through the built binary.
 * CPU: without a driver, tune fails cleanly with one line.  GPU (skipped without one):
 * faulting and hanging templates are contained and recorded; results land in the database;
 * a second run resumes (measures nothing); the budget counts across runs; Ctrl-C stops
 * cleanly and keeps what was measured; a grouped op is tuned over routings and served.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db.h"
#include "gen.h"
#include "rt_compile.h"
#include "rt_device.h"
#include "rt_gemm.h"
#include "gpu/helper_kernels.h"
#include "gpu/ref.h"

static char g_dir[64];
static char g_db[128];

/* Runs the CLI with a shell command line after the binary; output into *out (owned). */
static int run_cli(const char *args, char **out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "MMTUNE_TEMPLATE_PATH=%s/templates_gpu XDG_CACHE_HOME=%s %s %s 2>&1",
           MMT_TEST_DIR, g_dir, MMT_CLI_PATH, args);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  size_t n;
  while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (len + 1 == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
  }
  buf[len] = '\0';
  int st = pclose(f);
  *out = buf;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs the CLI as a user would (the installed templates), output into *out (owned). */
static int run_cli_user(const char *args, char **out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "env -u MMTUNE_TEMPLATE_PATH XDG_CACHE_HOME=%s %s %s 2>&1", g_dir,
           MMT_CLI_PATH, args);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  size_t cap = 1 << 20, len = 0, n;
  char *buf = malloc(cap);
  assert_non_null(buf);
  while (len + 1 < cap && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) len += n;
  buf[len] = '\0';
  int st = pclose(f);
  *out = buf;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/mmt_tuner_XXXXXX");
  if (!mkdtemp(g_dir)) return -1;
  snprintf(g_db, sizeof g_db, "%s/t.db", g_dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static bool have_gpu(void) {
  rt_device d;
  ut_err err;
  if (rt_device_open(0, &d, &err) != MMT_OK) return false;
  rt_device_close(&d);
  return true;
}

static void test_no_driver_is_one_clean_line(void **state) {
  (void)state;
  if (have_gpu()) skip();
  char *out = NULL;
  char args[256];
  snprintf(args, sizeof args, "--device 0 --shapes 64x64x64 --db %s", g_db);
  int ex = run_cli(args, &out);
  assert_int_equal(ex, 1);
  assert_non_null(strstr(out, "cannot use device 0"));
  assert_non_null(strstr(out, "libcuda.so.1"));
  int lines = 0;
  for (const char *c = out; *c; c++) lines += *c == '\n';
  assert_int_equal(lines, 1);
  free(out);
}

typedef struct {
  int ok;
  const char *tmpl;
} status_count;

static int count_row(const db_result *r, void *user) {
  status_count *c = user;
  if (c->tmpl && strcmp(r->template_name, c->tmpl)) return 0;
  c->ok++;
  return 0;
}

/* Counts the ok rows of a template (NULL: any) for an f32 nn shape on a device in database
 * `path`, where the tuner stores them: under the shape's canonical form (rt_gemm.h; 1x1x1 nn
 * is tuned as 1x1x1 nt, a unit-stride column of B as a row). */
static int ok_rows_in(const char *path, const char *tmpl, const char *device, int64_t m, int64_t n,
                      int64_t k) {
  db_handle *db = NULL;
  ut_err err;
  assert_int_equal(db_open(path, true, &db, &err), MMT_OK);
  rt_gemm_kernel_problem kp;
  rt_gemm_canonical_packed("nn", m, n, k, &kp);
  db_problem p = {.dtype = "f32", .m = kp.m, .n = kp.n, .k = kp.k};
  snprintf(p.layout, sizeof p.layout, "%s", kp.layout);
  status_count c = {.tmpl = tmpl};
  assert_int_equal(db_each_ok(db, device, &p, count_row, &c, &err), MMT_OK);
  db_close(db);
  return c.ok;
}

/* The ok rows of a template for 64x64x64 (faults and timeouts are checked in the log). */
static int ok_rows(const char *tmpl, const char *device) {
  return ok_rows_in(g_db, tmpl, device, 64, 64, 64);
}

static void device_name(char *out, size_t len) {
  rt_device d;
  ut_err err;
  assert_int_equal(rt_device_open(0, &d, &err), MMT_OK);
  snprintf(out, len, "%s", d.info.name);
  rt_device_close(&d);
}

/* Every valid config of both built-in templates verifies on shapes that are not tile
 * multiples: every stored row is ok. */
static void test_templates_on_ragged_shapes(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char device[128], db[160], args[512];
  device_name(device, sizeof device);
  snprintf(db, sizeof db, "%s/ragged.db", g_dir);
  snprintf(args, sizeof args,
           "--device 0 --templates naive,smem_tiled --strategy exhaustive "
           "--shapes 1x1x1,17x33x65,1000x999x1001 --db %s",
           db);
  char *out = NULL;
  int ex = run_cli(args, &out);
  if (ex != 0 || strstr(out, "verify_failed")) fail_msg("exit %d\n%s", ex, out);
  const int64_t shapes[3][3] = {{1, 1, 1}, {17, 33, 65}, {1000, 999, 1001}};
  int ok = 0;
  for (int i = 0; i < 3; i++) {
    int here = ok_rows_in(db, NULL, device, shapes[i][0], shapes[i][1], shapes[i][2]);
    assert_true(here > 100); /* both templates' spaces, not a handful */
    ok += here;
  }
  db_handle *h = NULL;
  ut_err err;
  int64_t total = 0;
  assert_int_equal(db_open(db, true, &h, &err), MMT_OK);
  assert_int_equal(db_count(h, NULL, &total, &err), MMT_OK);
  db_close(h);
  /* Every row is ok, or pruned for spilling (never timed, which is right: a config at the
   * edge of the register file may spill with one compiler and not another). */
  int pruned = 0;
  for (const char *p = strstr(out, ": pruned: spills"); p; p = strstr(p + 1, ": pruned: spills"))
    pruned++;
  if (total != ok + pruned) {
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
      if (!strstr(line, " ms, ")) print_message("%s\n", line);
    fail_msg("%lld rows, %d ok, %d pruned", (long long)total, ok, pruned);
  }
  assert_true(pruned * 20 < total); /* a few at most */
  free(out);
}

static void test_fault_and_hang_are_contained(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char device[128];
  device_name(device, sizeof device);
  char *out = NULL;
  char args[512];
  snprintf(args, sizeof args,
           "--device 0 --shapes 64x64x64 --templates fault,hang,wrong,unwritten,spill,overread,naive "
           "--watchdog 5 --strategy exhaustive "
           "--db %s",
           g_db);
  int ex = run_cli(args, &out);
  printf("%s", out);
  assert_int_equal(ex, 0);
  assert_non_null(strstr(out, "fault: "));   /* recorded as fault ... */
  assert_non_null(strstr(out, "timeout: ")); /* ... and timeout ... */
  assert_non_null(strstr(out, "verify_failed: error too large"));
  assert_non_null(strstr(out, "spill variant=0: pruned: spills: "));
  assert_non_null(strstr(out, "verify_failed: 64 NaN/Inf elements (unwritten?), first at (63, 0)"));
  /* One element past B, one before A: guard pages make both fault, whatever the result. */
  assert_non_null(strstr(out, "overread variant=0: fault: candidate kernel, operands flush "
                              "against unmapped memory after them: CUDA_ERROR_ILLEGAL_ADDRESS"));
  assert_non_null(strstr(out, "overread variant=1: fault: candidate kernel, operands flush "
                              "against unmapped memory before them: CUDA_ERROR_ILLEGAL_ADDRESS"));
  assert_true(ok_rows("naive", device) > 0); /* ... and tuning went on */
  assert_int_equal(ok_rows("fault", device), 0);
  assert_int_equal(ok_rows("wrong", device), 0);
  assert_int_equal(ok_rows("unwritten", device), 0);
  assert_int_equal(ok_rows("spill", device), 0);
  assert_int_equal(ok_rows("overread", device), 0);
  free(out);

  /* Resume: everything is in the database with the same provenance. */
  ex = run_cli(args, &out);
  assert_int_equal(ex, 0);
  assert_non_null(strstr(out, ": 0 to measure"));
  free(out);

  /* The dispatcher serves the verified naive row, never a faulted one. */
  snprintf(args, sizeof args, "explain 64 64 64 --device 0 --db %s", g_db);
  ex = run_cli(args, &out);
  if (ex != 0 || !strstr(out, "naive") || strstr(out, "overread")) fail_msg("exit %d\n%s", ex, out);
  free(out);
}

/* Without guard pages (MMTUNE_GUARD_PAGES=0 stands for a driver without virtual memory
 * management) verification runs on plain buffers as before, and the tuner says so once. */
static void test_guard_fallback_said_once(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char db[160], args[512];
  snprintf(db, sizeof db, "%s/noguard.db", g_dir);
  snprintf(args, sizeof args, "--device 0 --templates naive --shapes 64x64x64,33x17x65 --db %s", db);
  setenv("MMTUNE_GUARD_PAGES", "0", 1);
  char *out = NULL;
  int ex = run_cli(args, &out);
  unsetenv("MMTUNE_GUARD_PAGES");
  const char *note = "mmtune: verification without guard pages: MMTUNE_GUARD_PAGES=0\n";
  const char *first = strstr(out, note);
  if (ex != 0 || !first || strstr(first + 1, note)) fail_msg("exit %d\n%s", ex, out);
  char device[128];
  device_name(device, sizeof device);
  assert_true(ok_rows_in(db, "naive", device, 64, 64, 64) > 0);
  free(out);
}

/* --budget counts across runs: the same command again measures and compiles nothing; a larger
 * budget goes on from where the first stopped; --force searches again from nothing. */
static void test_budget_across_runs(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char db[160], args[512];
  snprintf(db, sizeof db, "%s/budget.db", g_dir);
  const char *common = "--device 0 --templates reg_tiled --shapes 512x512x512 --strategy random "
                       "--seed 3";
  char *out = NULL;
  snprintf(args, sizeof args, "%s --budget 3 --db %s", common, db);
  int ex = run_cli(args, &out);
  if (ex != 0 || !strstr(out, "left untried by the budget")) fail_msg("exit %d\n%s", ex, out);
  /* The budget is checked between candidates, so a run overshoots it by what its last
   * candidate took (a cold compile cache can make that seconds): the larger budget below
   * is 2 s more than what this run spent. */
  const char *in = strstr(out, " candidates in ");
  double spent = in ? atof(in + strlen(" candidates in ")) : 0;
  assert_true(spent >= 3);
  free(out);

  ex = run_cli(args, &out); /* the same command: the budget is spent */
  if (ex != 0 || !strstr(out, "measured 0 of") ||
      !strstr(out, "; 0 kernels compiled by NVRTC, 0 from the cubin cache") ||
      !strstr(out, "in earlier runs (--budget more or --force to search again)"))
    fail_msg("exit %d\n%s", ex, out);
  free(out);

  snprintf(args, sizeof args, "%s --budget %.0f --db %s", common, spent + 3, db); /* 2 s more */
  ex = run_cli(args, &out);
  if (ex != 0 || strstr(out, "random: measured 0 of") || !strstr(out, "in earlier runs"))
    fail_msg("exit %d\n%s", ex, out);
  free(out);

  snprintf(args, sizeof args, "%s --budget 1 --force --db %s", common, db);
  ex = run_cli(args, &out);
  if (ex != 0 || strstr(out, "random: measured 0 of") || strstr(out, "in earlier runs"))
    fail_msg("exit %d\n%s", ex, out);
  free(out);
}

/* The ok rows of problem p (an op's, as stored) on this GPU in database `path`. */
static int ok_problem_rows(const char *path, const db_problem *p) {
  char dev[128];
  device_name(dev, sizeof dev);
  db_handle *db = NULL;
  ut_err err;
  assert_int_equal(db_open(path, true, &db, &err), MMT_OK);
  status_count c = {0};
  assert_int_equal(db_each_ok(db, dev, p, count_row, &c, &err), MMT_OK);
  db_close(db);
  return c.ok;
}

/* Tunes grouped op `op` of 8 experts at shape (f16, nt, a 4 s budget) into `file` in the
 * test folder: the run must say its M went to its bucket (`said`) and no candidate may fail
 * verification; then problem (m, n, k) of it has ok rows, and `explain CALL` on the
 * database (a call of the same regime) is served them exactly (and says `computes`, if not
 * NULL). */
static void grouped_tuned(const char *file, const char *dtype, const char *op, const char *shape,
                          const char *said, int64_t m, int64_t n, int64_t k, const char *call,
                          const char *computes) {
  if (!have_gpu()) skip();
  char db_path[160], args[1024];
  snprintf(db_path, sizeof db_path, "%s/%s", g_dir, file);
  snprintf(args, sizeof args,
           "tune --device 0 --dtype %s --layout nt --epilogue %s --batch 8 --shapes %s "
           "--budget 4 --db %s",
           dtype, op, shape, db_path);
  char *out = NULL;
  int ex = run_cli_user(args, &out);
  if (ex != 0 || !strstr(out, said) || strstr(out, "error too large") || strstr(out, "NaN/Inf") ||
      strstr(out, "wrote outside"))
    fail_msg("exit %d\n%s", ex, out);
  free(out);
  gen_op parsed;
  ut_err err;
  db_problem p = {.layout = "nt", .m = m, .n = n, .k = k, .batch = 8};
  snprintf(p.dtype, sizeof p.dtype, "%s", dtype);
  assert_int_equal(gen_op_parse(op, dtype, &parsed, &err), MMT_OK);
  assert_int_equal(gen_op_format(&parsed, p.op, sizeof p.op, &err), MMT_OK);
  assert_true(ok_problem_rows(db_path, &p) > 0);
  snprintf(args, sizeof args,
           "explain %s --dtype %s --trans-b --epilogue %s --batch 8 --device 0 --db %s", call,
           dtype, op, db_path);
  ex = run_cli_user(args, &out);
  if (ex != 0 || !strstr(out, "choice:    exact") || (computes && !strstr(out, computes)))
    fail_msg("exit %d\n%s", ex, out);
  free(out);
}

/* A contiguous grouped op tuned over drawn routings: rows at the experts' rows rounded up to
 * their bucket (100 -> 128) and the experts as the batch, every row verified, and a call of
 * that regime (97 tokens, the same bucket) served them exactly. */
static void test_grouped_tuned(void **state) {
  (void)state;
  grouped_tuned("grouped.db", "f16", "out=f16,bias=col,act=silu,group=contiguous", "100x256x192",
                "the experts' rows in all) rounded up to its routing regime's bucket", 128, 256,
                192, "4096 256 192 --group-tokens 97", "computes:  row-major 128x256x192");
}

/* A masked grouped op tuned: M is the mean rows an expert (13 -> its bucket, 16), each
 * candidate run on G blocks of the most rows a drawn routing gives an expert, verified on the
 * rows each expert has (with its own weight, bias, column scales and C, and the row scales of
 * A's rows as stored) and on the rows past them left
 * unwritten; a masked call of that regime (blocks of 40 rows, 8 x 14 in all: a mean of 14)
 * is served the row. */
static void test_masked_tuned(void **state) {
  (void)state;
  grouped_tuned("masked.db", "f16", "out=f16,bias=col,scale=row+col,act=silu,residual,group=masked",
                "13x256x192", "an expert's rows on average) rounded up", 16, 256, 192,
                "40 256 192 --group-tokens 112", NULL);
}

/* A mixture-of-experts up projection in FP8, tuned: e4m3 experts' weights of 2N columns (gate
 * and up interleaved), each expert's own per-tensor B scale (the z-th float, A's the one
 * float), SiLU-gated into a bf16 D of N columns, verified expert by expert; a call of its
 * regime (N = 128, the product's 256) served the row. */
static void test_grouped_fp8_gated_tuned(void **state) {
  (void)state;
  grouped_tuned("gated.db", "e4m3", "out=bf16,scale=tensor,act=silu,gated,group=contiguous",
                "100x256x192", "rounded up to its routing regime's bucket", 128, 256, 192,
                "4096 128 192 --group-tokens 97", NULL);
}

/* A residual op (beta 1, C apart from D) tuned: every candidate verified against a reference
 * that adds C (a kernel that skipped C, or a reference without it, fails), stored under its
 * own key, which a call that reads C is served from and one that does not is not. */
static void test_residual_tuned(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char db_path[160], args[1024];
  snprintf(db_path, sizeof db_path, "%s/residual.db", g_dir);
  snprintf(args, sizeof args,
           "tune --device 0 --dtype f16 --layout nt --epilogue out=f16,bias=col,residual "
           "--shapes 200x264x136 --budget 4 --db %s",
           db_path);
  char *out = NULL;
  int ex = run_cli_user(args, &out);
  /* no candidate off the reference (a verification failure is a row, not an exit) */
  if (ex != 0 || strstr(out, "error too large") || strstr(out, "NaN/Inf"))
    fail_msg("exit %d\n%s", ex, out);
  free(out);
  const db_problem p = {.dtype = "f16",
                        .layout = "nt",
                        .op = "out=f16,bias=col,residual",
                        .m = 200,
                        .n = 264,
                        .k = 136,
                        .batch = 1};
  assert_true(ok_problem_rows(db_path, &p) > 0);
  const char *ops[2] = {"out=f16,bias=col,residual", "out=f16,bias=col"};
  for (int i = 0; i < 2; i++) {
    snprintf(args, sizeof args,
             "explain 200 264 136 --dtype f16 --trans-b --epilogue %s --device 0 --db %s", ops[i],
             db_path);
    ex = run_cli_user(args, &out);
    if (ex != 0 || !strstr(out, "choice:    exact") != (i == 1)) fail_msg("exit %d\n%s", ex, out);
    free(out);
  }
}

static void test_interrupt_keeps_results(void **state) {
  (void)state;
  if (!have_gpu()) skip();
  char cmd[1024], db2[160];
  snprintf(db2, sizeof db2, "%s/int.db", g_dir);
  /* SIGINT after 3 seconds of a run that takes longer: exit 130, results kept. */
  snprintf(cmd, sizeof cmd,
           "cd %s && XDG_CACHE_HOME=%s timeout --preserve-status -s INT 3 %s --device 0 --templates naive,smem_tiled "
           "--shapes 1024x1024x1024,1000x999x1001,2048x2048x2048 --db %s >/dev/null 2>&1",
           g_dir, g_dir, MMT_CLI_PATH, db2);
  int st = system(cmd);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 130);
  db_handle *db = NULL;
  ut_err err;
  assert_int_equal(db_open(db2, true, &db, &err), MMT_OK);
  int64_t n = 0;
  assert_int_equal(db_count(db, NULL, &n, &err), MMT_OK);
  db_close(db);
  assert_true(n > 0);
}

/* The float64 GPU reference compiles with NVRTC (CI) and, on a GPU, equals tn_ref_gemm bit
 * for bit on a ragged, strided problem that spans several tiles. */
/* The measurement's helper kernels compile for the oldest and newest targets (CI: no GPU). */
static void test_helpers_compile(void **state) {
  (void)state;
  char *source = tn_gpu_helpers_source();
  assert_non_null(source);
  static const char *const arches[] = {"sm_75", "sm_90"}; /* CUDA 13: sm_75 and up */
  for (int i = 0; i < 2; i++) {
    rt_cubin cubin = {0};
    char *log = NULL;
    ut_err err;
    mmt_status rc = rt_compile(source, "helpers", arches[i], &cubin, &log, &err);
    if (rc) fprintf(stderr, "%s: %s\n%s\n", arches[i], err.msg, log ? log : "");
    assert_int_equal(rc, MMT_OK);
    free(log);
    rt_cubin_free(&cubin);
  }
  free(source);
}

static void test_reference_kernel(void **state) {
  (void)state;
  rt_cubin cubin = {0};
  ut_err err;
  assert_int_equal(rt_compile(tn_ref_gpu_source(), "ref", "sm_90", &cubin, NULL, &err), MMT_OK);
  rt_device d;
  if (rt_device_open(0, &d, &err) != MMT_OK) {
    rt_cubin_free(&cubin);
    skip();
  }
  const rt_cu *cu;
  assert_int_equal(rt_driver(&cu, &err), MMT_OK);
  CUmodule mod;
  CUfunction fn;
  assert_int_equal(cu->cuModuleLoadData(&mod, cubin.data), CUDA_SUCCESS);
  assert_int_equal(cu->cuModuleGetFunction(&fn, mod, TN_REF_GPU_KERNEL), CUDA_SUCCESS);
  /* Every layout: A stored as M rows (or K rows when transposed), B as K rows (N rows). */
  static const char *const layouts[] = {"nn", "nt", "tn", "tt"};
  for (int l = 0; l < 4; l++) {
    int ta = layouts[l][0] == 't', tb = layouts[l][1] == 't';
    int m = 130, n = 77, k = 301, lda = (ta ? m : k) + 4, ldb = (tb ? k : n) + 3;
    size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nr = (size_t)m * n;
    float *a = malloc(4 * na), *b = malloc(4 * nb);
    double *want = malloc(8 * nr), *got = malloc(8 * nr);
    assert_true(a && b && want && got);
    uint64_t seed = 7 + (uint64_t)l;
    tn_fill_random(a, na, &seed);
    tn_fill_random(b, nb, &seed);
    assert_int_equal(tn_ref_gemm_layout(layouts[l], m, n, k, a, lda, b, ldb, want, n, 1, &err),
                     MMT_OK);
    CUdeviceptr da, db, dr;
    assert_int_equal(cu->cuMemAlloc(&da, 4 * na), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemAlloc(&db, 4 * nb), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemAlloc(&dr, 8 * nr), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyHtoD(da, a, 4 * na), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyHtoD(db, b, 4 * nb), CUDA_SUCCESS);
    int ldr = n;
    void *args[] = {&m, &n, &k, &ta, &tb, &da, &lda, &db, &ldb, &dr, &ldr};
    /* grid.y of 1 also exercises the row stride. */
    assert_int_equal(cu->cuLaunchKernel(fn, (n + 63) / 64, 1, 1, 16, 16, 1, 0, 0, args, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyDtoH(got, dr, 8 * nr), CUDA_SUCCESS);
    assert_memory_equal(got, want, 8 * nr);
    cu->cuMemFree(da);
    cu->cuMemFree(db);
    cu->cuMemFree(dr);
    free(a);
    free(b);
    free(want);
    free(got);
  }
  cu->cuModuleUnload(mod);
  rt_device_close(&d);
  rt_cubin_free(&cubin);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_driver_is_one_clean_line),
      cmocka_unit_test(test_reference_kernel),
      cmocka_unit_test(test_helpers_compile),
      cmocka_unit_test(test_templates_on_ragged_shapes),
      cmocka_unit_test(test_fault_and_hang_are_contained),
      cmocka_unit_test(test_guard_fallback_said_once),
      cmocka_unit_test(test_budget_across_runs),
      cmocka_unit_test(test_grouped_tuned),
      cmocka_unit_test(test_masked_tuned),
      cmocka_unit_test(test_grouped_fp8_gated_tuned),
      cmocka_unit_test(test_residual_tuned),
      cmocka_unit_test(test_interrupt_keeps_results),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
