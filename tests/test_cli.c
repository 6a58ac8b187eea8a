/* test_cli.c -- the mmtune executable, run as a user would: exit codes, stdout, stderr.
 *
 * Every run gets MMTUNE_TEMPLATE_PATH="" (only the source tree's templates), HOME and
 * XDG_CACHE_HOME in a fresh temporary folder, and no MMTUNE_DB / MMTUNE_CACHE_DIR, so no
 * user file is read or written.  Needs no GPU (compile uses NVRTC only). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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
#include "db.h"
#include "gen.h"
#include "util.h"

#define RUN_TIMEOUT_S 300

static char tmp_dir[] = "/tmp/mmt_cli_XXXXXX";

/* Runs mmtune; template_path (NULL: none) is its MMTUNE_TEMPLATE_PATH. */
static run_result run_env(const char *template_path, const char *const *args) {
  static char env[1024];
  snprintf(env, sizeof env, "MMTUNE_TEMPLATE_PATH=%s", template_path ? template_path : "");
  return cli_run(tmp_dir, (const char *const[]){env, NULL}, args, RUN_TIMEOUT_S);
}

#define RUN(...) run_env(NULL, (const char *const[]){__VA_ARGS__, NULL})


static int count_substr(const char *s, const char *sub) {
  int n = 0;
  for (const char *p = strstr(s, sub); p; p = strstr(p + 1, sub)) n++;
  return n;
}

/* A usage or failure message: the exit code, nothing on stdout, exactly one line on stderr
 * that starts with "mmtune" and contains `needle`. */
static void assert_error(run_result r, int code, const char *needle) {
  cli_assert_error(r, code, "mmtune", needle);
}

static void assert_usage_error(run_result r, const char *needle) { assert_error(r, 2, needle); }

static int setup(void **state) {
  (void)state;
  return cli_fresh_home(tmp_dir);
}

static int teardown(void **state) {
  (void)state;
  return cli_remove_dir(tmp_dir);
}

/* ---- top level ---- */

static const char *const all_commands[] = {"tune",    "bench",   "templates", "space",
                                           "emit",    "compile", "measure",   "show",
                                           "explain", "model",   "db",        "report",
                                           "help"};

static void test_help_lists_commands(void **state) {
  (void)state;
  const char *forms[] = {"--help", "-h", "help"};
  for (int f = 0; f < 3; f++) {
    run_result r = RUN(forms[f]);
    assert_int_equal(r.code, 0);
    for (size_t i = 0; i < sizeof all_commands / sizeof *all_commands; i++) {
      char line[64];
      snprintf(line, sizeof line, "\n  %s ", all_commands[i]);
      if (!strstr(r.out, line))
        fail_msg("'%s' does not list %s:\n%s", forms[f], all_commands[i], r.out);
    }
    assert_null(strstr(r.out, "__worker"));
    assert_string_equal(r.err, "");
    run_free(&r);
  }
}

static void test_version(void **state) {
  (void)state;
  run_result r = RUN("--version");
  assert_int_equal(r.code, 0);
  assert_int_equal(strncmp(r.out, "mmtune ", 7), 0);
  assert_int_equal(cli_count_lines(r.out), 1);
  run_free(&r);
}

/* tune and bench --help exercise the lead's commands (cli/tune.c, cli/bench.c). */
static void test_command_help(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof all_commands / sizeof *all_commands; i++) {
    const char *cmd = all_commands[i];
    if (strcmp(cmd, "help") == 0) continue;
    char usage[64];
    snprintf(usage, sizeof usage, "mmtune %s", cmd);
    run_result r = RUN(cmd, "--help");
    if (r.code != 0 || !strstr(r.out, usage) || r.err[0])
      fail_msg("%s --help: exit %d, stdout:\n%s\nstderr:\n%s", cmd, r.code, r.out, r.err);
    run_free(&r);
  }
  run_result r = RUN("help", "space");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "usage: mmtune space"));
  run_free(&r);
  assert_usage_error(RUN("help", "nope"), "unknown command 'nope'");
  assert_usage_error(RUN("help", "__worker"), "unknown command '__worker'");
}

static void test_unknown_command(void **state) {
  (void)state;
  run_result r = RUN("frobnicate", "--x");
  assert_int_equal(r.code, 2);
  assert_string_equal(r.err, "mmtune: unknown command 'frobnicate' (see mmtune --help)\n");
  assert_string_equal(r.out, "");
  run_free(&r);
  assert_usage_error(RUN("__nope"), "unknown command '__nope'");
}

static void test_bad_options(void **state) {
  (void)state;
  assert_usage_error(RUN("space", "smem_tiled", "--bogus"), "unknown option '--bogus'");
  assert_usage_error(RUN("templates", "-z"), "unknown option '-z'");
  assert_usage_error(RUN("show", "--all=1"), "option '--all' takes no value");
  assert_usage_error(RUN("space", "smem_tiled", "--problem"), "option '--problem' needs a value");
  assert_usage_error(RUN("compile", "-j"), "option '-j' needs a value");
  assert_usage_error(RUN("templates", "extra"), "unexpected argument 'extra'");
  assert_usage_error(RUN("show", "extra"), "unexpected argument 'extra'");
  /* Unknown options of the default command (tune, the lead's cli/tune.c). */
  assert_usage_error(RUN("--bogus-option"), "--bogus-option");
}

/* ---- private test templates (in a folder on MMTUNE_TEMPLATE_PATH) ---- */

#define KERNEL_SIG                                                                        \
  "(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, " \
  "float beta, float *C, int ldc) {}"

/* "cons": a=2 violates the constraints; the kernel needs M % a == 0. */
static const char cons_lua[] =
    "return {\n"
    "  name = 'cons', description = 'test only: constraints and requirements',\n"
    "  dtypes = {'f32'},\n"
    "  params = { {name = 'a', values = {1, 2, 4}} },\n"
    "  constraints = function(p, prob)\n"
    "    if p.a == 2 then return false, 'a must not be 2' end\n"
    "    return true\n"
    "  end,\n"
    "  emit = function(p, dtype)\n"
    "    return {source = 'extern \"C\" __global__ void mmt_test_cons" KERNEL_SIG
    "',\n"
    "            kernel = 'mmt_test_cons', block = {32, 1, 1},\n"
    "            grid = {x = {'N', 16}, y = {'M', 8}, z = 1},\n"
    "            requires = {m_multiple = p.a}}\n"
    "  end,\n"
    "}\n";

/* "badsrc": every config's source fails to compile. */
static const char badsrc_lua[] =
    "return {\n"
    "  name = 'badsrc', description = 'test only: does not compile',\n"
    "  dtypes = {'f32'},\n"
    "  params = { {name = 'v', values = {0}} },\n"
    "  emit = function(p, dtype)\n"
    "    return {source = 'extern \"C\" __global__ void mmt_test_bad() { no_such_thing(); }\\n',\n"
    "            kernel = 'mmt_test_bad', block = {32, 1, 1}, grid = {x = 1}}\n"
    "  end,\n"
    "}\n";

/* The folder holding the test templates (created on first use). */
static const char *test_templates(void) {
  static char dir[300];
  if (dir[0]) return dir;
  char file[340];
  ut_err e;
  snprintf(dir, sizeof dir, "%s/tpl_test", tmp_dir);
  assert_int_equal(ut_mkdir_p(dir, &e), MMT_OK);
  snprintf(file, sizeof file, "%s/cons.lua", dir);
  assert_int_equal(ut_write_file_atomic(file, cons_lua, strlen(cons_lua), &e), MMT_OK);
  snprintf(file, sizeof file, "%s/badsrc.lua", dir);
  assert_int_equal(ut_write_file_atomic(file, badsrc_lua, strlen(badsrc_lua), &e), MMT_OK);
  return dir;
}

#define RUN_T(...) run_env(test_templates(), (const char *const[]){__VA_ARGS__, NULL})

static void test_space_constraints_and_requires(void **state) {
  (void)state;
  run_result r = RUN_T("space", "cons");
  assert_int_equal(r.code, 0);
  assert_string_equal(r.out, "a=1\na=4\n");
  run_free(&r);
  r = RUN_T("space", "cons", "--problem", "8x8x8");
  assert_int_equal(r.code, 0);
  assert_string_equal(r.out, "a=1\na=4\n");
  run_free(&r);
  r = RUN_T("space", "cons", "--problem", "6x8x8"); /* 6 % 4 != 0 */
  assert_int_equal(r.code, 0);
  assert_string_equal(r.out, "a=1\n");
  run_free(&r);
}

static void test_emit_constraints_and_info(void **state) {
  (void)state;
  assert_usage_error(RUN_T("emit", "cons", "a=2"),
                     "mmtune emit: config violates the template's constraints: a must not be 2");
  run_result r = RUN_T("emit", "cons", "a=4", "--info");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "kernel:       mmt_test_cons\n"));
  assert_non_null(strstr(r.out, "block:        32 x 1 x 1\n"));
  assert_non_null(strstr(r.out, "grid:         ceil(N/16) x ceil(M/8) x 1\n"));
  assert_non_null(strstr(r.out, "requires:     M % 4 == 0, 4-byte aligned"));
  run_free(&r);
}

static void test_compile_failure(void **state) {
  (void)state;
  run_result r = RUN_T("compile", "--no-cache", "cons", "badsrc");
  assert_int_equal(r.code, 1);
  assert_int_equal(count_substr(r.out, "\nok      cons    a="), 1); /* a=4; a=1 starts the output */
  assert_int_equal(strncmp(r.out, "ok      cons    a=1  ", 21), 0);
  char *bad = strstr(r.out, "FAILED  badsrc  v=0  ");
  assert_non_null(bad);
  char *next = strchr(bad, '\n');
  assert_non_null(next);
  assert_true(strncmp(next + 1, "        ", 8) == 0 && next[9] != ' ' && next[9] != '\n');
  assert_non_null(strstr(r.out, "3 configs: 2 ok, 1 failed, "));
  run_free(&r);
}

/* ---- templates ---- */

static void test_templates_lists_builtins(void **state) {
  (void)state;
  run_result r = RUN("templates");
  if (r.code != 0) fail_msg("exit %d\n%s%s", r.code, r.out, r.err);
  assert_non_null(strstr(r.out, "naive: "));
  assert_non_null(strstr(r.out, "smem_tiled: "));
  assert_non_null(strstr(r.out, "naive.lua"));
  assert_non_null(strstr(r.out, "tile ="));
  assert_non_null(strstr(r.out, " f32"));
  assert_int_equal(count_substr(r.out, " valid\n"), count_substr(r.out, "  path: "));
  run_free(&r);
}

static void test_templates_lists_broken_one(void **state) {
  (void)state;
  char dir[300], file[340];
  snprintf(dir, sizeof dir, "%s/tpl_broken", tmp_dir);
  snprintf(file, sizeof file, "%s/aaa_broken.lua", dir);
  ut_err e;
  assert_int_equal(ut_mkdir_p(dir, &e), MMT_OK);
  assert_int_equal(ut_write_file_atomic(file, "return {\n", 9, &e), MMT_OK);
  run_result r = run_env(dir, (const char *const[]){"templates", NULL});
  assert_int_equal(r.code, 1);
  assert_non_null(strstr(r.out, "aaa_broken: failed to load\n"));
  assert_non_null(strstr(r.out, "aaa_broken.lua"));
  /* the others are still listed */
  assert_non_null(strstr(r.out, "naive: "));
  assert_non_null(strstr(r.out, "smem_tiled: "));
  run_free(&r);
  /* and naming it elsewhere fails with the load error, not "unknown" */
  r = run_env(dir, (const char *const[]){"space", "aaa_broken", NULL});
  assert_int_equal(r.code, 1);
  assert_non_null(strstr(r.err, "aaa_broken"));
  assert_null(strstr(r.err, "unknown template"));
  run_free(&r);
}

/* ---- space ---- */

static long parse_count(const run_result *r) {
  char *end = NULL;
  long n = strtol(r->out, &end, 10);
  if (r->code != 0 || end == r->out || strcmp(end, "\n") != 0)
    fail_msg("not a count (exit %d): '%s' %s", r->code, r->out, r->err);
  return n;
}

static void test_space_count_matches_list(void **state) {
  (void)state;
  run_result list = RUN("space", "smem_tiled");
  run_result count = RUN("space", "smem_tiled", "--count");
  assert_int_equal(list.code, 0);
  long n = parse_count(&count);
  assert_true(n > 0);
  assert_int_equal(n, cli_count_lines(list.out));
  assert_non_null(strstr(list.out, "tile="));
  assert_string_equal(list.err, "");
  run_free(&list);
  run_free(&count);

  /* A problem only removes configs; a tiny odd one removes at least as many as a big one. */
  run_result big = RUN("space", "smem_tiled", "--problem", "1024x1024x1024", "--count");
  run_result odd = RUN("space", "smem_tiled", "-c", "--problem=17x5x3");
  long nbig = parse_count(&big), nodd = parse_count(&odd);
  assert_true(nbig > 0 && nbig <= n);
  assert_true(nodd <= nbig);
  run_free(&big);
  run_free(&odd);
}

static void test_space_errors(void **state) {
  (void)state;
  assert_usage_error(RUN("space", "nope"), "mmtune space: unknown template 'nope'");
  assert_usage_error(RUN("space", "../etc"), "unknown template '../etc'");
  assert_usage_error(RUN("space"), "missing TEMPLATE");
  assert_usage_error(RUN("space", "naive", "smem_tiled"), "unexpected argument 'smem_tiled'");
  assert_usage_error(RUN("space", "smem_tiled", "--problem", "0x1x1"), "--problem");
  assert_usage_error(RUN("space", "smem_tiled", "--problem", "64x64"), "--problem");
  assert_usage_error(RUN("space", "smem_tiled", "--problem", "8x8x8", "--dtype", "f99"),
                     "unknown dtype 'f99'");
}

/* ---- emit ---- */

static void test_emit(void **state) {
  (void)state;
  run_result r = RUN("emit", "smem_tiled", "tile=16");
  if (r.code != 0) fail_msg("exit %d: %s", r.code, r.err);
  assert_non_null(strstr(r.out, "__global__"));
  assert_non_null(strstr(r.out, "tile"));
  assert_null(strstr(r.out, "mmtune emit smem_tiled"));
  assert_string_equal(r.err, "");
  run_free(&r);

  r = RUN("emit", "--info", "smem_tiled", "tile=16");
  assert_int_equal(r.code, 0);
  char *info = strstr(r.out, "/* mmtune emit smem_tiled ");
  assert_non_null(info);
  assert_true(info > strstr(r.out, "__global__"));
  assert_non_null(strstr(info, "tile=16"));
  assert_non_null(strstr(info, "kernel:"));
  assert_non_null(strstr(info, "grid:         ceil(N/16) x ceil(M/16) x 1\n"));
  run_free(&r);
  /* a persistent kernel's grid is per SM */
  r = RUN("emit", "--info", "wgmma", "persist=1", "blocks=2", "bm=64", "bn=128", "consumers=1",
          "--dtype", "f16");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "grid:         2 per SM x 1 x 1\n"));
  run_free(&r);

  r = RUN("emit", "naive");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "__global__"));
  run_free(&r);
}

static void test_emit_errors(void **state) {
  (void)state;
  assert_usage_error(RUN("emit", "smem_tiled", "tile=7"), "tile");
  assert_usage_error(RUN("emit", "smem_tiled", "bogus=1"), "bogus");
  assert_usage_error(RUN("emit", "smem_tiled", "tile=abc"), "tile");
  assert_usage_error(RUN("emit"), "missing TEMPLATE");
  assert_usage_error(RUN("emit", "nope"), "unknown template 'nope'");
  assert_usage_error(RUN("emit", "smem_tiled", "--dtype", "f99"), "unknown dtype 'f99'");
}

/* ---- compile (real NVRTC, no GPU) ---- */

static void assert_compile_all_ok(const run_result *r, bool cached) {
  if (r->code != 0) fail_msg("exit %d\n%s%s", r->code, r->out, r->err);
  int lines = cli_count_lines(r->out);
  assert_true(lines >= 2);
  char summary[64];
  snprintf(summary, sizeof summary, "%d configs: %d ok, 0 failed, ", lines - 1, lines - 1);
  if (!strstr(r->out, summary)) fail_msg("want summary '%s' in:\n%s", summary, r->out);
  assert_int_equal(count_substr(r->out, "ok      naive  "), lines - 1);
  assert_int_equal(count_substr(r->out, "s cached\n"), cached ? lines - 1 : 0);
}

static void test_compile_and_cache(void **state) {
  (void)state;
  char cache[300];
  snprintf(cache, sizeof cache, "%s/cubins", tmp_dir);
  run_result r = RUN("compile", "--arch", "sm_90", "--cache-dir", cache, "naive");
  assert_compile_all_ok(&r, false);
  run_free(&r);
  r = RUN("compile", "--arch=sm_90", "-j", "2", "--cache-dir", cache, "naive");
  assert_compile_all_ok(&r, true);
  run_free(&r);
  r = RUN("compile", "--no-cache", "naive");
  assert_compile_all_ok(&r, false);
  run_free(&r);

  /* default cache folder: $XDG_CACHE_HOME/mmtune/cubin */
  char dflt[300];
  struct stat st;
  snprintf(dflt, sizeof dflt, "%s/cache/mmtune/cubin", tmp_dir);
  r = RUN("compile", "naive");
  assert_compile_all_ok(&r, false);
  run_free(&r);
  assert_int_equal(stat(dflt, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
}

/* Every valid config of both built-in templates compiles for sm_90 (the count comes from
 * `space --count`, so a template that grows is still covered whole). */
static void test_compile_every_config(void **state) {
  (void)state;
  int total = 0;
  const char *names[] = {"naive", "smem_tiled"};
  for (int i = 0; i < 2; i++) {
    run_result r = RUN("space", names[i], "--count");
    assert_int_equal(r.code, 0);
    int n = atoi(r.out);
    assert_true(n > 0);
    total += n;
    run_free(&r);
  }
  run_result r = RUN("compile", "--arch", "sm_90", "--no-cache", "naive", "smem_tiled");
  if (r.code != 0) fail_msg("exit %d\n%s%s", r.code, r.out, r.err);
  char summary[64];
  snprintf(summary, sizeof summary, "%d configs: %d ok, 0 failed, ", total, total);
  if (!strstr(r.out, summary)) fail_msg("want summary '%s' in:\n%s", summary, r.out);
  run_free(&r);
}

/* The "ok" lines of a compile run's output, each "template params", into lines[]. */
static int compile_ok_lines(const char *out, char lines[][160], int cap) {
  int n = 0;
  for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    char name[64], params[96];
    if (sscanf(p, "ok %63s %95s", name, params) == 2 && n < cap)
      snprintf(lines[n++], 160, "%s %s", name, params);
  }
  return n;
}

/* compile --shard I/N for N = 1..4: the shards together compile every valid config exactly
 * once (what N CPU nodes do to fill a shared cubin cache ahead of the GPU jobs). */
static void test_compile_shards(void **state) {
  (void)state;
  static char all[512][160], part[512][160];
  run_result r = RUN("compile", "--no-cache", "naive", "smem_tiled");
  assert_int_equal(r.code, 0);
  const int total = compile_ok_lines(r.out, all, 512);
  run_free(&r);
  assert_true(total > 27);
  for (int n = 1; n <= 4; n++) {
    int seen[512] = {0};
    for (int i = 0; i < n; i++) {
      char shard[16];
      snprintf(shard, sizeof shard, "%d/%d", i, n);
      r = RUN("compile", "--no-cache", "--shard", shard, "naive", "smem_tiled");
      assert_int_equal(r.code, 0);
      int got = compile_ok_lines(r.out, part, 512);
      run_free(&r);
      assert_true(got >= total / n && got <= total / n + 1);
      for (int j = 0; j < got; j++) {
        int k = 0;
        while (k < total && strcmp(all[k], part[j]) != 0) k++;
        assert_true(k < total);
        seen[k]++;
      }
    }
    for (int k = 0; k < total; k++)
      if (seen[k] != 1) fail_msg("N = %d: '%s' compiled %d times", n, all[k], seen[k]);
  }
  assert_usage_error(RUN("compile", "--shard", "2/2", "naive"), "bad --shard '2/2'");
  assert_usage_error(RUN("tune", "--shard", "1"), "bad --shard '1': expected I/N");
}

static void test_compile_errors(void **state) {
  (void)state;
  assert_usage_error(RUN("compile", "--arch", "sm_nope", "naive"), "sm_nope");
  assert_usage_error(RUN("compile", "--jobs", "0", "naive"), "--jobs");
  assert_usage_error(RUN("compile", "--jobs", "-1", "naive"), "--jobs");
  assert_usage_error(RUN("compile", "--jobs", "x", "naive"), "--jobs");
  assert_usage_error(RUN("compile", "--no-cache", "--cache-dir", "/tmp", "naive"), "exclude");
  assert_usage_error(RUN("compile", "nope"), "unknown template 'nope'");
  assert_usage_error(RUN("compile", "--layout", "nx", "naive"), "unknown layout 'nx'");
  /* An sm_90a template for an older architecture: every config fails, naming why, and
   * nothing reaches NVRTC. */
  run_result r = RUN("compile", "--arch", "sm_80", "--dtype", "f16", "--no-cache", "wgmma");
  assert_int_equal(r.code, 1);
  assert_non_null(strstr(r.out, "the kernel needs sm_90a (compute capability 9.0 exactly); the "
                                "device is sm_80"));
  assert_non_null(strstr(r.out, " 0 ok, "));
  run_free(&r);
}

/* ---- measure: every bad argument is refused before any GPU work ---- */

static void test_measure_errors(void **state) {
  (void)state;
  assert_usage_error(RUN("measure", "--shape", "8x8x8"), "mmtune measure: missing TEMPLATE");
  assert_usage_error(RUN("measure", "nope", "--shape", "8x8x8"), "unknown template 'nope'");
  assert_usage_error(RUN("measure", "smem_tiled", "bogus=1", "--shape", "8x8x8"),
                     "template 'smem_tiled' has no parameter 'bogus'");
  assert_usage_error(RUN("measure", "smem_tiled", "tile=7", "--shape", "8x8x8"),
                     "tile=7 is not one of tile's values");
  assert_usage_error(RUN("measure", "smem_tiled", "tile=abc", "--shape", "8x8x8"), "tile=abc");
  assert_usage_error(RUN("measure", "smem_tiled"), "missing --shape MxNxK");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "0x8x8"), "--shape: shape '0x8x8'");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x8"),
                     "--shape: shape must be MxNxK");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x8x8", "--dtype", "f99"),
                     "unknown dtype 'f99'");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x8x8", "--dtype", "f16"),
                     "template 'smem_tiled' does not support dtype 'f16'");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x8x8", "--layout", "nx"),
                     "unknown layout 'nx'");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x6x4", "--lda", "3"),
                     "--lda must be at least 4, the row width of A (K) in layout nn, got 3");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x6x4", "--layout", "tt", "--ldb",
                         "3"),
                     "--ldb must be at least 4, the row width of B (K) in layout tt, got 3");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x6x4", "--ldc", "5"),
                     "--ldc must be at least 6, the row width of C (N) in layout nn, got 5");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x8x8", "--ldc", "x"), "--ldc");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x8x8", "--runs", "0"), "--runs");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x8x8", "--cutoff", "0"),
                     "--cutoff must be a positive number, got '0'");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x8x8", "--device", "-1"),
                     "--device");
  assert_usage_error(RUN("measure", "smem_tiled", "--shape", "8x8x8", "--watchdog", "0"),
                     "--watchdog");
  /* Invalid for the problem: the template's reason, or the kernel's requirement. */
  assert_usage_error(RUN_T("measure", "cons", "a=2", "--shape", "8x8x8"),
                     "mmtune measure: cons a=2 is invalid for 8x8x8 f32 nn: a must not be 2");
  assert_usage_error(RUN_T("measure", "cons", "a=4", "--shape", "6x8x8"),
                     "cons a=4 is invalid for 6x8x8 f32 nn: the kernel needs M % 4 == 0, M is 6");
  assert_usage_error(RUN("measure", "reg_tiled", "vec=4", "--shape", "64x64x64", "--lda", "65"),
                     "the kernel needs 16-byte aligned rows; lda, ldb and ldc give 4 bytes");
}

/* A valid request gets as far as the device: without one, one line naming the problem. */
static void test_measure_device(void **state) {
  (void)state;
  bool gpu = access("/dev/nvidiactl", F_OK) == 0;
  assert_error(RUN("measure", "naive", "--shape", "64x64x64", "--device", "9999"), 1,
               "mmtune measure: cannot use device 9999: ");
  run_result r = RUN("measure", "naive", "--shape", "64x64x64", "--runs", "3");
  if (!gpu) {
    assert_error(r, 1, "mmtune measure: cannot use device 0: ");
    return;
  }
  if (r.code != 0) fail_msg("exit %d\n%s%s", r.code, r.out, r.err);
  assert_non_null(strstr(r.out, "\nkernel:    naive "));
  assert_non_null(strstr(r.out, "\nproblem:   64x64x64 f32 nn, lda 64, ldb 64, ldc 64"));
  assert_non_null(strstr(r.out, "\nstatus:    ok\n"));
  assert_non_null(strstr(r.out, " ms, 3 runs)\n"));
  run_free(&r);
  /* --cutoff is judged on a run timed as the others, not on the verification launch, which
   * pays for the first launch (here the split-K workspace's allocation): a kernel of about
   * 0.03 ms gets all its runs under a cutoff of 0.1 ms. */
  r = RUN("measure", "skinny", "side=0", "bs=1", "rl=1", "warps=4", "kw=1", "unroll=4", "vec=1",
          "split=64", "--shape", "1x4096x4096", "--runs", "5", "--cutoff", "0.1");
  if (r.code != 0) fail_msg("exit %d\n%s%s", r.code, r.out, r.err);
  assert_non_null(strstr(r.out, " ms, 5 runs)\n"));
  run_free(&r);
  /* Under a cutoff it cannot meet, a candidate gets the 3 runs whose median judged it, not
   * one run (which can carry a stall of the host). */
  r = RUN("measure", "skinny", "side=0", "bs=1", "rl=1", "warps=4", "kw=1", "unroll=4", "vec=1",
          "split=64", "--shape", "1x4096x4096", "--runs", "5", "--cutoff", "0.0001");
  if (r.code != 0) fail_msg("exit %d\n%s%s", r.code, r.out, r.err);
  assert_non_null(strstr(r.out, " ms, 3 runs)\n"));
  run_free(&r);
}

/* ---- show ---- */

static void test_show_missing_db(void **state) {
  (void)state;
  char path[340], dir[300];
  struct stat st;
  snprintf(dir, sizeof dir, "%s/x", tmp_dir);
  snprintf(path, sizeof path, "%s/missing.db", dir);
  run_result r = RUN("show", "--db", path);
  char want[400];
  snprintf(want, sizeof want, "mmtune show: no database at '%s' (run mmtune --device 0 first)",
           path);
  assert_error(r, 1, want);
  assert_int_not_equal(stat(dir, &st), 0); /* read-only: created nothing */

  /* the default path is under $XDG_CACHE_HOME */
  assert_error(RUN("show"), 1, "/cache/mmtune/mmtune.db");
}

static void test_show_corrupt_db(void **state) {
  (void)state;
  char path[300];
  const char text[] = "this is not a database\n";
  ut_err e;
  snprintf(path, sizeof path, "%s/notes.txt", tmp_dir);
  assert_int_equal(ut_write_file_atomic(path, text, sizeof text - 1, &e), MMT_OK);
  assert_error(RUN("show", "--db", path), 1, "is not an mmtune database");
}

/* ---- numeric arguments of bench and tune: these exercise the LEAD's commands
 * (cli/bench.c, cli/tune.c) and fail until they exist.  Each must fail before touching a GPU,
 * with exit 2 and one line on stderr. ---- */

static void test_bench_bad_numbers(void **state) {
  (void)state;
  assert_usage_error(RUN("bench", "0", "1", "1"), "'0'");
  assert_usage_error(RUN("bench", "-1", "1", "1"), "'-1'");
  assert_usage_error(RUN("bench", "a", "1", "1"), "'a'");
  assert_usage_error(RUN("bench", "99999999999999999999", "1", "1"), "99999999999999999999");
  assert_usage_error(RUN("bench", "1", "1"), "mmtune bench");
  assert_usage_error(RUN("bench", "--device", "-1", "64", "64", "64"), "'-1'");
  assert_usage_error(RUN("bench", "--device", "abc", "64", "64", "64"), "'abc'");
}

/* tune plans each GEMV in the form mmt_gemm serves it in (rt_gemm.h), and says so before it
 * touches a device; the shapes left as they are get no line. */
static void test_tune_canonical_forms(void **state) {
  (void)state;
  run_result r = RUN("tune", "--device", "9999", "--layout", "tn", "--shapes",
                     "4096x1x4096,1x64x128,96x80x64,4096x1x2048");
  assert_int_equal(r.code, 1);
  assert_non_null(strstr(r.err, "mmtune tune: cannot use device 9999: "));
  assert_non_null(strstr(r.out, "mmtune: 4096x1x4096 tn is tuned as 1x4096x4096 nn, the form "
                                "mmt_gemm serves it in (C^T = op(B)^T op(A)^T)\n"));
  assert_non_null(strstr(r.out, "mmtune: 1x64x128 tn is tuned as 1x64x128 nn, the form mmt_gemm "
                                "serves it in (a unit-stride column as a row)\n"));
  assert_non_null(strstr(r.out, "4096x1x2048 tn is tuned as 1x4096x2048 nn"));
  assert_null(strstr(r.out, "96x80x64"));
  run_free(&r);
  /* nt: Mx1xK is 1xMxK nt; 1xNxK is already in its form */
  r = RUN("tune", "--device", "9999", "--layout", "nt", "--shapes", "300x1x64,1x300x64");
  assert_int_equal(r.code, 1);
  assert_non_null(strstr(r.out, "300x1x64 nt is tuned as 1x300x64 nt"));
  assert_null(strstr(r.out, "1x300x64 nt is tuned"));
  run_free(&r);
}

static void test_tune_bad_arguments(void **state) {
  (void)state;
  assert_usage_error(RUN("--device", "0", "--shapes", "0x1x1"), "'0'");
  assert_usage_error(RUN("tune", "--device", "0", "--shapes", "0x1x1"), "'0'");
  assert_usage_error(RUN("--device", "0", "--shapes", "/nonexistent/file.txt"),
                     "/nonexistent/file.txt");
  assert_usage_error(RUN("--device", "0", "--shapes", "64x64x64", "--templates", "nope"),
                     "unknown template 'nope'");
  assert_usage_error(RUN("--device", "x"), "'x'");
  assert_usage_error(RUN("tune", "--device", "x"), "'x'");
  assert_usage_error(RUN("tune", "--watchdog", "0"),
                     "--watchdog must be a positive number of seconds, got '0'");
  assert_usage_error(RUN("tune", "--watchdog", "soon"), "--watchdog");
  /* several GPUs: the list is checked before any driver call */
  assert_usage_error(RUN("tune", "--device", "0,0"), "bad --device '0,0': 0 twice");
  assert_usage_error(RUN("tune", "--device", "0,,1"), "an empty or overlong entry");
  assert_usage_error(RUN("tune", "--device", "1,"), "bad --device '1,': an empty entry");
  assert_usage_error(RUN("tune", "--device", "0,x"), "got 'x'");
  assert_usage_error(RUN("tune", "--device", "0,64"), "got '64' (out of range)");
  assert_usage_error(RUN("tune", "--device", "al"), "'al'");
  assert_usage_error(RUN("tune", "--jobs", "0"), "--jobs");
  assert_usage_error(RUN("tune", "--jobs", "9999"), "--jobs");
  assert_usage_error(RUN("bench", "8", "8", "8", "--cpu-max-gflop", "abc"),
                     "--cpu-max-gflop must be a positive number, got 'abc'");
}

/* tune --recorded: with nothing recorded it says so and needs no GPU; it excludes the
 * options that name problems; a queue with problems goes to the GPU (here: no driver, one
 * line). */
static void test_tune_recorded(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof path, "%s/recorded.db", tmp_dir);
  run_result r = RUN("tune", "--recorded", "--db", path);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "nothing recorded in"));
  run_free(&r);
  assert_usage_error(RUN("tune", "--recorded", "--shapes", "8x8x8", "--db", path),
                     "not with --shapes, --epilogue or --batch");
  ut_err e;
  db_handle *db = NULL;
  assert_int_equal(db_open(path, false, &db, &e), MMT_OK);
  const db_problem p = {.dtype = "f16", .layout = "nt", .m = 16, .n = 4096, .k = 4096};
  assert_int_equal(db_record(db, "Some GPU", &p, &e), MMT_OK);
  db_close(db);
  r = RUN("tune", "--recorded", "--db", path);
  if (r.code == 0) { /* a GPU here: its model has nothing recorded */
    assert_non_null(strstr(r.out, "0 recorded problems of"));
  } else {
    assert_int_equal(r.code, 1);
    const char *nl = strchr(r.err, '\n');
    assert_true(nl && nl[1] == '\0'); /* one line */
    assert_non_null(strstr(r.err, "mmtune tune: "));
  }
  run_free(&r);
}

static void test_layout_options(void **state) {
  (void)state;
  assert_usage_error(RUN("tune", "--layout", "nx"), "unknown layout 'nx'");
  assert_usage_error(RUN("tune", "--dtype", "f64"), "dtype f64 cannot be measured yet");
  assert_usage_error(RUN("bench", "8", "8", "8", "--dtype", "f64"), "dtype f64 cannot be measured");
  assert_usage_error(RUN("bench", "8", "8", "8", "--dtype", "f17"), "unknown dtype 'f17'");
  /* FP8: op kernels only, of wgmma, in layout nt */
  assert_usage_error(RUN("tune", "--dtype", "e4m3"), "e4m3 inputs need --epilogue");
  assert_usage_error(RUN("bench", "8", "8", "8", "--dtype", "e5m2"), "e5m2 inputs need --epilogue");
  assert_usage_error(
      RUN("measure", "wgmma", "bn=128", "--shape", "64x64x64", "--dtype", "e4m3", "--layout", "nt"),
      "e4m3 inputs need --epilogue");
  assert_usage_error(RUN("emit", "wgmma", "bn=128", "persist=2", "--dtype", "f16", "--layout", "nt",
                         "--epilogue", "group=contiguous"),
                     "persist = 2: not with a grouped op");
  assert_usage_error(RUN("emit", "wgmma", "bn=128", "--dtype", "e4m3", "--layout", "nn",
                         "--epilogue", "scale=tensor"),
                     "layout nt only");
  /* 128 x 256 promotes by halves: one K tile an interval */
  run_result h =
      RUN("emit", "wgmma", "--dtype", "e4m3", "--layout", "nt", "--epilogue", "scale=tensor");
  assert_int_equal(h.code, 0);
  assert_non_null(strstr(h.out, "m64n128k32.f32.e4m3.e4m3"));
  assert_non_null(strstr(h.out, "wgmma_half(part[i]"));
  run_free(&h);
  assert_usage_error(RUN("emit", "wgmma", "promote=2", "--dtype", "e4m3", "--layout", "nt",
                         "--epilogue", "scale=tensor"),
                     "promote = 1 at bn = 256");
  assert_usage_error(
      RUN("emit", "wgmma", "--dtype", "f16", "--layout", "nt", "--epilogue", "fast_accum"),
      "is not one for f16 inputs");
  /* explain: an untuned FP8 call gets a config that promotes (128 x 256 by halves, or the
   * built-in 128 x 192 offered to FP8 problems alone); a 16-bit one never gets 128 x 192 */
  run_result x = RUN("explain", "8192", "8192", "8192", "--dtype", "e4m3", "--trans-b",
                     "--epilogue", "scale=tensor", "--device-name", "NVIDIA H200", "--defaults");
  assert_int_equal(x.code, 0);
  assert_non_null(strstr(x.out, "epilogue:  out=bf16,scale=tensor"));
  assert_true(strstr(x.out, "kernel:    wgmma bm=128,bn=256,") ||
              strstr(x.out, "kernel:    wgmma bm=128,bn=192,"));
  assert_non_null(strstr(x.out, "promote=1"));
  run_free(&x);
  x = RUN("explain", "8192", "8192", "8192", "--dtype", "f16", "--trans-b", "--device-name",
          "NVIDIA H200", "--defaults");
  assert_int_equal(x.code, 0);
  assert_null(strstr(x.out, "bn=192"));
  run_free(&x);
  x = RUN("explain", "64", "64", "64", "--dtype", "e4m3", "--epilogue", "scale=tensor",
          "--device-name", "NVIDIA H200", "--defaults");
  assert_int_equal(x.code, 1);
  assert_non_null(strstr(x.err, "FP8 needs both operands K-major"));
  run_free(&x);
  run_result f = RUN("emit", "wgmma", "bn=128", "promote=2", "--dtype", "e5m2", "--layout", "nt",
                     "--epilogue", "out=f32,scale=tensor");
  assert_int_equal(f.code, 0);
  assert_non_null(strstr(f.out, "#define PROMOTE 2"));
  assert_non_null(strstr(f.out, "m64n128k32.f32.e5m2.e5m2"));
  run_free(&f);
  assert_usage_error(RUN("bench", "8", "8", "8", "--layout", "TT"), "unknown layout 'TT'");
  /* grouped ops: tuned over drawn routings; neither measured or benched one config at a
   * time */
  assert_usage_error(RUN("tune", "--dtype", "f16", "--layout", "tn", "--shapes", "64x64x64",
                         "--epilogue", "out=f16,group=contiguous", "--batch", "4"),
                     "a grouped op's A is its experts' rows as stored");
  assert_usage_error(RUN("tune", "--dtype", "e4m3", "--layout", "nt", "--shapes", "64x64x64",
                         "--epilogue", "out=e4m3,scale=tensor,group=contiguous", "--batch", "4"),
                     "group= takes no block scales nor an FP8 out=");
  assert_usage_error(
      RUN("bench", "8", "8", "8", "--dtype", "f16", "--epilogue", "out=f16,group=contiguous"),
      "grouped ops are not measured here");
  assert_usage_error(RUN("measure", "mma_sync", "--shape", "64x64x64", "--dtype", "f16",
                         "--epilogue", "out=f16,group=masked"),
                     "grouped ops are not measured here");
  assert_usage_error(RUN("emit", "wgmma", "cluster=2", "--dtype", "f16", "--layout", "nt",
                         "--epilogue", "out=f16,group=masked"),
                     "grouped: no cluster");
  assert_usage_error(RUN("emit", "skinny", "side=1", "--dtype", "f16", "--layout", "nt",
                         "--epilogue", "out=f16,group=masked"),
                     "grouped: not by this config");
  assert_usage_error(RUN("emit", "naive", "--layout", "n"), "unknown layout 'n'");
  assert_usage_error(RUN("space", "naive", "--layout", "tn"), "--layout needs --problem");
  run_result r = RUN("emit", "naive", "--layout", "tn");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "#define A_T 1"));
  assert_non_null(strstr(r.out, "mmt_naive_tn_"));
  run_free(&r);
  /* vec=4 with A transposed needs M % 4, not K % 4: 64x64x63 has float4 configs in tn only. */
  r = RUN("space", "reg_tiled", "--problem", "64x64x63", "--layout", "tn", "--count");
  assert_int_equal(r.code, 0);
  long tn = strtol(r.out, NULL, 10);
  run_free(&r);
  r = RUN("space", "reg_tiled", "--problem", "64x64x63", "--count");
  assert_int_equal(r.code, 0);
  long nn = strtol(r.out, NULL, 10);
  run_free(&r);
  assert_true(tn > nn && nn > 0);
  r = RUN("templates");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "layouts: nn nt tn tt"));
  run_free(&r);
}

/* An ok row of reg_tiled's default config on (device, layout, m, n, k), 0.01 ms, measured on
 * a device of compute capability cc (90: 9.0); op: an op problem's epilogue ("": plain). */
static void insert_op_row(const char *db_path, const char *device, int cc, const char *layout,
                          int64_t m, int64_t n, int64_t k, const char *op) {
  db_handle *db = NULL;
  gen_template *t = NULL;
  gen_config cfg;
  ut_err e;
  db_result r;
  memset(&r, 0, sizeof r);
  assert_int_equal(db_open(db_path, false, &db, &e), MMT_OK);
  assert_int_equal(gen_load_named("reg_tiled", &t, &e), MMT_OK);
  gen_config_default(t, &cfg);
  assert_int_equal(gen_config_format(t, &cfg, r.params, sizeof r.params, &e), MMT_OK);
  snprintf(r.device.name, sizeof r.device.name, "%s", device);
  r.device.cc_major = cc / 10, r.device.cc_minor = cc % 10;
  snprintf(r.nvrtc_version, sizeof r.nvrtc_version, "13.0");
  snprintf(r.template_name, sizeof r.template_name, "reg_tiled");
  snprintf(r.template_hash, sizeof r.template_hash, "%s", gen_source_hash(t));
  snprintf(r.problem.dtype, sizeof r.problem.dtype, "f32");
  snprintf(r.problem.layout, sizeof r.problem.layout, "%s", layout);
  r.problem.m = m, r.problem.n = n, r.problem.k = k;
  snprintf(r.problem.op, sizeof r.problem.op, "%s", op);
  r.status = DB_OK;
  r.ms_min = r.ms_median = r.ms_max = 0.01;
  r.tflops = 2.0 * (double)m * (double)n * (double)k / 1e-5 / 1e12;
  r.rel_err = 1.5e-6;
  r.regs = r.shared_bytes = r.local_bytes = -1;
  assert_int_equal(db_insert(db, &r, &e), MMT_OK);
  gen_free(t);
  db_close(db);
}

static void insert_row(const char *db_path, const char *device, int cc, const char *layout,
                       int64_t m, int64_t n, int64_t k) {
  insert_op_row(db_path, device, cc, layout, m, n, k, "");
}

/* explain --defaults of a masked bf16 call of `experts` experts of 1536 x 5120 weights, m rows
 * each, on an sm_90 GPU model without rows; tokens (NULL: none) its --group-tokens hint. */
static run_result explain_masked(const char *m, const char *experts, const char *tokens) {
  const char *hint = tokens ? "--group-tokens" : NULL;
  return RUN("explain", m, "1536", "5120", "--dtype", "bf16", "--trans-b", "--epilogue",
             "out=bf16,group=masked", "--batch", experts, "--device-name", "X", "--arch", "sm_90",
             "--defaults", hint, tokens);
}

/* explain's line for a grid dimension that counts tiles (what: "tile rows of "): ceil(size /
 * tile) + extra blocks, the tile as the line gives it, then `then`. */
static void assert_grid_line(const char *out, const char *what, long long size, long long extra,
                             const char *then) {
  const char *at = strstr(out, what);
  assert_non_null(at);
  long long tile = 0;
  char fmt[64], want[160];
  snprintf(fmt, sizeof fmt, "%s%%lld", what);
  assert_int_equal(sscanf(at, fmt, &tile), 1);
  assert_true(tile > 0);
  snprintf(want, sizeof want, ": %lld, %s%lld%s", (size + tile - 1) / tile + extra, what, tile,
           then);
  assert_non_null(strstr(out, want));
}

static void test_explain(void **state) {
  (void)state;
  char db[256];
  snprintf(db, sizeof db, "%s/explain.db", tmp_dir);
  /* No database: an error, unless the built-in defaults are asked for */
  assert_usage_error(RUN("explain", "100", "200", "300", "--device-name", "GPU X", "--db", db),
                     "does not exist (tune first, or --defaults for the built-in choice)");
  assert_usage_error(RUN("explain", "100", "200", "300", "--device", "0", "--db", db),
                     "(tune first, or --defaults for the built-in choice)");
  run_result r = RUN("explain", "100", "200", "300", "--device-name", "GPU X", "--defaults");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "choice:    default"));
  assert_non_null(strstr(r.out, "kernel:    reg_tiled "));
  assert_non_null(strstr(r.out, "ms predicted by the model (this config was never measured"));
  /* the launch it makes: its grid, as a GPU model without rows is assumed to have */
  assert_non_null(strstr(r.out, "launch:    grid "));
  assert_non_null(strstr(r.out, "(132 SMs: assumed: no row gives the GPU model's)"));
  run_free(&r);
  /* A masked call's decode kernel walks the experts: min(G, group_tokens) slices of them on
   * grid.z, all G without the hint */
  r = explain_masked("16", "160", "3");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, " x 3 of "));
  assert_non_null(strstr(r.out, "z: 3, slices of the 160 experts, each walking its share"));
  run_free(&r);
  r = explain_masked("16", "160", NULL);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "z: 160, slices of the 160 experts"));
  run_free(&r);
  /* A persistent kernel's per-SM grid is shared among the experts (132 SMs / 16); grid.y is
   * a constant 1, which counts nothing */
  r = explain_masked("1000", "16", NULL);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "launch:    grid 8 x 1 x 16 of "));
  assert_non_null(
      strstr(r.out, "x: 8, blocks walking each expert's tiles (1 per SM, shared among z)"));
  assert_non_null(strstr(r.out, "z: 16, the experts"));
  assert_null(strstr(r.out, "y: "));
  run_free(&r);
  /* a gated op's tiles cover B's gate and up columns: 2N of them */
  r = RUN("explain", "16", "4096", "4096", "--dtype", "bf16", "--trans-b", "--epilogue",
          "out=bf16,act=silu,gated", "--device-name", "X", "--arch", "sm_90", "--defaults");
  assert_int_equal(r.code, 0);
  assert_grid_line(r.out, "tile columns of ", 8192, 0, " (B's gate and up columns");
  run_free(&r);
  /* a contiguous one's tile rows: its own M's and a partial one an expert, past its key's */
  r = RUN("explain", "300", "4096", "14336", "--dtype", "bf16", "--trans-b", "--epilogue",
          "out=bf16,group=contiguous", "--batch", "8", "--group-tokens", "256", "--device-name",
          "X", "--arch", "sm_90", "--defaults");
  assert_int_equal(r.code, 0);
  assert_grid_line(r.out, "tile rows of ", 300, 8, ", the experts' partial ones too");
  run_free(&r);
  /* A GPU model without rows, of a given architecture: its tensor-core default. */
  r = RUN("explain", "4096", "4096", "4096", "--dtype", "bf16", "--device-name", "New GPU",
          "--arch", "sm_90", "--defaults");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "kernel:    wgmma "));
  run_free(&r);
  r = RUN("explain", "4096", "4096", "4096", "--dtype", "bf16", "--device-name", "New GPU",
          "--arch", "sm_80", "--defaults");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "kernel:    mma_sync "));
  run_free(&r);
  assert_usage_error(RUN("explain", "4", "4", "4", "--device-name", "X", "--arch", "90"),
                     "--arch must be sm_XY (e.g. sm_90), not '90'");
  assert_usage_error(RUN("explain", "4", "4", "4", "--device", "0", "--arch", "sm_90"),
                     "--arch goes with --device-name");
  insert_row(db, "GPU X", 90, "nn", 512, 512, 512);
  insert_row(db, "GPU X", 90, "nn", 1024, 256, 128); /* a column-major 256x1024x128 call's */
  r = RUN("explain", "512", "512", "512", "--device-name", "GPU X", "--db", db);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "choice:    exact"));
  assert_non_null(strstr(r.out, "kernel:    reg_tiled bm=128,bn=128"));
  assert_non_null(strstr(r.out, "expected:  0.0100 ms"));
  assert_non_null(strstr(r.out, "record:    #1, 512x512x512 on GPU X"));
  assert_non_null(strstr(r.out, "rel err 1.5e-06"));
  /* reg_tiled's default 128 x 128 tiles of 512 x 512, unsplit */
  assert_non_null(strstr(r.out, "launch:    grid 4 x 4 x 1 of "));
  assert_non_null(strstr(r.out, "x: 4, tile columns of 128"));
  assert_non_null(strstr(r.out, "y: 4, tile rows of 128"));
  assert_null(strstr(r.out, "z: "));
  run_free(&r);
  /* --top: the first N lines of the ranking the choice came from, numbered */
  r = RUN("explain", "512", "512", "512", "--device-name", "GPU X", "--db", db, "--top", "3");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "ranking:   "));
  assert_non_null(strstr(r.out, ", the first 3 (predicted ms"));
  assert_non_null(strstr(r.out, "\n     1 "));
  assert_non_null(strstr(r.out, "\n     3 "));
  assert_null(strstr(r.out, "\n     4 "));
  run_free(&r);
  /* ... and of an op call's: ranked for its epilogue, the choice among the candidates */
  r = RUN("explain", "512", "512", "512", "--device-name", "GPU X", "--db", db, "--epilogue",
          "bias=col,act=relu", "--top", "40");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "ranking:   "));
  const char *kernel = strstr(r.out, "kernel:    ");
  assert_non_null(kernel);
  char chosen[160];
  assert_int_equal(sscanf(kernel + 11, "%159[^\n]", chosen), 1);
  assert_non_null(strstr(strstr(r.out, "ranking:   "), chosen));
  run_free(&r);
  /* a grouped call's kernel is chosen for the caller's hint of the rows all experts have,
   * rounded up to its bucket (13 -> 16) */
  r = RUN("explain", "2048", "1024", "512", "--device-name", "GPU X", "--db", db, "--dtype", "f16",
          "--trans-b", "--epilogue", "group=contiguous", "--batch", "8", "--group-tokens", "13");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "computes:  row-major 16x1024x512"));
  run_free(&r);
  assert_usage_error(RUN("explain", "4", "4", "4", "--device-name", "X", "--epilogue", "out=f32",
                         "--group-tokens", "3"),
                     "--group-tokens goes with a grouped --epilogue");
  assert_usage_error(RUN("explain", "4", "4", "4", "--device-name", "X", "--top", "0"), "--top");
  assert_usage_error(RUN("explain", "4", "4", "4", "--device", "0", "--top", "5"),
                     "--top goes with --device-name");
  r = RUN("explain", "256", "1024", "128", "--order", "col", "--device-name", "GPU X", "--db", db);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "choice:    exact"));
  assert_non_null(strstr(r.out, "computes:  row-major 1024x256x128, layout nn"));
  run_free(&r);
  /* Transposed: the nn rows are another layout's; an odd K keeps float4 configs away. */
  r = RUN("explain", "512", "512", "511", "--trans-a", "--device-name", "GPU X", "--db", db);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "row-major tn 512x512x511"));
  assert_non_null(strstr(r.out, "choice:    default"));
  run_free(&r);
  r = RUN("explain", "500", "512", "512", "--device-name", "GPU X", "--db", db);
  assert_int_equal(r.code, 0);
  /* not tuned: the model's pick, verified here (predicted) or a built-in one (default) */
  assert_non_null(strstr(r.out, "ms predicted by the model"));
  run_free(&r);
  /* the sizes a kernel is launched for: an empty product, or past int, is a bad argument */
  assert_usage_error(RUN("explain", "0", "5", "5", "--device-name", "GPU X", "--db", db),
                     "M must be an integer in [1, 2147483647], got '0'");
  assert_usage_error(RUN("explain", "2147483649", "64", "64", "--device-name", "GPU X"),
                     "M must be an integer in [1, 2147483647], got '2147483649'");
  assert_usage_error(RUN("explain", "4", "4", "4", "--device-name", ""), "--device-name is empty");
  assert_usage_error(RUN("explain", "1", "2"), "expected M N K");
  assert_usage_error(RUN("explain", "1", "2", "3", "4"), "unexpected argument '4'");
  assert_usage_error(RUN("explain", "1", "2", "-3", "--device-name", "X"), "-3");
  assert_usage_error(RUN("explain", "4", "4", "4", "--dtype", "f8", "--device-name", "X"),
                     "unknown dtype 'f8'");
  assert_usage_error(RUN("explain", "4", "4", "4", "--order", "diag", "--device-name", "X"),
                     "--order must be row or col");
  assert_usage_error(RUN("explain", "4", "4", "4", "--lda", "3", "--device-name", "X", "--db", db),
                     "lda must be >= max(1, K) = 4, got 3");
  assert_usage_error(RUN("explain", "4", "4", "4", "--device", "0", "--device-name", "X"),
                     "exclude each other");
  /* tf32 in layout nn: wgmma's swap, its A (op(B)^T) through registers; in tn, no
   * tensor-core kernel: the fp32 one serves it. */
  r = RUN("explain", "1000", "1000", "1000", "--dtype", "tf32", "--device-name", "X", "--db", db);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "kernel:    wgmma "));
  assert_non_null(strstr(r.out, "swap=1"));
  run_free(&r);
  r = RUN("explain", "100", "100", "100", "--dtype", "tf32", "--trans-a", "--device-name", "X",
          "--db", db);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "reg_tiled"));
  run_free(&r);
  /* f16: wgmma where the device name's rows were measured on sm_90 (or it has none), mma_sync
   * on an sm_80 one; mma_sync's element-wise variant where rows are not 16-byte aligned. */
  insert_row(db, "GPU A", 80, "nn", 512, 512, 512);
  const char *const wgmma_devices[] = {"X", "GPU X"};
  for (int i = 0; i < 2; i++) {
    r = RUN("explain", "1000", "1000", "1000", "--dtype", "f16", "--device-name",
            wgmma_devices[i], "--db", db);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "kernel:    wgmma "));
    run_free(&r);
  }
  r = RUN("explain", "1000", "1000", "1000", "--dtype", "f16", "--device-name", "GPU A", "--db",
          db);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "kernel:    mma_sync "));
  assert_non_null(strstr(r.out, "vec=8"));
  run_free(&r);
  r = RUN("explain", "1001", "1001", "1001", "--dtype", "f16", "--device-name", "X", "--db", db);
  assert_int_equal(r.code, 0);
  assert_true(strstr(r.out, "vec=0") || strstr(r.out, "repack=1")); /* an unaligned path */
  run_free(&r);
}

/* mmtune model evaluate: leave-one-shape-out on a database, and its bad arguments. */
static void test_model_evaluate(void **state) {
  (void)state;
  char db[256];
  snprintf(db, sizeof db, "%s/model.db", tmp_dir);
  insert_row(db, "GPU M", 90, "nn", 512, 512, 512);
  insert_row(db, "GPU M", 90, "nn", 1024, 1024, 1024);
  run_result r = RUN("model", "evaluate", "--db", db);
  assert_int_equal(r.code, 0);
  /* one config on both shapes: with either hidden, the model picks it, the best */
  assert_non_null(strstr(r.out, "GPU M"));
  assert_non_null(strstr(r.out, "2 problems  chosen/best geomean 1.000  worst 1.000"));
  run_free(&r);
  r = RUN("model", "evaluate", "--db", db, "--json", "--dtype", "f32");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "\"dtype\": \"f32\", \"problems\": 2, \"geomean\": 1.0000"));
  run_free(&r);
  /* an op problem of mmt_matmul: scored apart, its op kernels ranked by the plain rows' model */
  insert_op_row(db, "GPU M", 90, "nn", 768, 768, 768, "out=f32,act=relu");
  r = RUN("model", "evaluate", "--db", db, "--json");
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "\"dtype\": \"f32\", \"problems\": 2,"));
  assert_non_null(strstr(r.out, "\"dtype\": \"f32+op\", \"problems\": 1, \"geomean\": 1.0000"));
  run_free(&r);
  assert_usage_error(RUN("model"), "expected a subcommand: evaluate");
  assert_usage_error(RUN("model", "fit"), "unknown subcommand 'fit' (expected evaluate)");
  assert_usage_error(RUN("model", "evaluate", "--dtype", "f8"), "f8");
  /* the dtypes the library serves; a missing database is a bad argument, and a failed
   * evaluation prints no half document */
  assert_usage_error(RUN("model", "evaluate", "--db", db, "--dtype", "f64"),
                     "unknown dtype 'f64' (f32, tf32, f16, bf16, e4m3 or e5m2)");
  char missing[256];
  snprintf(missing, sizeof missing, "%s/no-such.db", tmp_dir);
  assert_usage_error(RUN("model", "evaluate", "--db", missing, "--json"), "does not exist");
  assert_usage_error(RUN("model", "evaluate", "--db", db, "--device-name", ""),
                     "--device-name is empty");
}

/* db merge and db check: a one-line summary, one-line errors, exit codes 0, 1 and 2. */
static void test_db_merge_check(void **state) {
  (void)state;
  char a[256], b[256], dst[256], junk[256];
  snprintf(a, sizeof a, "%s/shard0.db", tmp_dir);
  snprintf(b, sizeof b, "%s/shard1.db", tmp_dir);
  snprintf(dst, sizeof dst, "%s/merged.db", tmp_dir);
  insert_row(a, "GPU M", 90, "nn", 512, 512, 512);
  insert_row(b, "GPU M", 90, "nn", 1024, 1024, 1024);
  run_result r = RUN("db", "merge", a, b, "--into", dst);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "merged 2 databases into"));
  assert_non_null(strstr(r.out, "2 rows read, 2 added, 0 duplicates dropped"));
  run_free(&r);
  r = RUN("db", "merge", b, "--into", dst);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "1 rows read, 0 added, 1 duplicates dropped"));
  run_free(&r);
  r = RUN("db", "check", dst);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "ok: "));
  assert_non_null(strstr(r.out, "2 rows, integrity ok"));
  run_free(&r);
  snprintf(junk, sizeof junk, "%s/junk.db", tmp_dir);
  const char text[] = "not a database at all\n";
  ut_err e;
  assert_int_equal(ut_write_file_atomic(junk, text, sizeof text - 1, &e), MMT_OK);
  assert_error(RUN("db", "check", junk), 1, "is not an mmtune database");
  assert_error(RUN("db", "merge", a, junk, "--into", dst), 1, "is not an mmtune database");
  r = RUN("db", "check", dst); /* the failed merge left it as it was */
  assert_non_null(strstr(r.out, "2 rows, integrity ok"));
  run_free(&r);
  /* export to a file, import into a new database: the same rows */
  char json[256], copy[256];
  snprintf(json, sizeof json, "%s/rows.json", tmp_dir);
  snprintf(copy, sizeof copy, "%s/copy.db", tmp_dir);
  r = RUN("db", "export", "--db", dst, "--json", "--out", json);
  assert_int_equal(r.code, 0);
  run_free(&r);
  r = RUN("db", "import", json, "--into", copy);
  assert_int_equal(r.code, 0);
  assert_non_null(strstr(r.out, "2 rows read, 2 added, 0 duplicates dropped"));
  run_free(&r);
  r = RUN("db", "check", copy);
  assert_non_null(strstr(r.out, "2 rows, integrity ok"));
  run_free(&r);
  assert_error(RUN("db", "import", junk, "--into", copy), 1, "not JSON");
  assert_usage_error(RUN("db", "import", json), "import needs --into DST");
  /* missing files are bad arguments, and nothing is created for them */
  char none[256], fresh[256], link_path[256];
  snprintf(none, sizeof none, "%s/none.json", tmp_dir);
  snprintf(fresh, sizeof fresh, "%s/fresh.db", tmp_dir);
  snprintf(link_path, sizeof link_path, "%s/merged-link.db", tmp_dir);
  assert_usage_error(RUN("db", "import", none, "--into", fresh), "cannot open");
  assert_usage_error(RUN("db", "merge", none, "--into", fresh), "no database at");
  assert_usage_error(RUN("db", "export", "--db", none), "does not exist");
  assert_usage_error(RUN("db", "pack", "--db", none, "--out", fresh), "no database at");
  assert_int_equal(access(fresh, F_OK), -1);
  assert_int_equal(link(dst, link_path), 0);
  assert_usage_error(RUN("db", "merge", link_path, "--into", dst),
                     "is both a source and the destination");
  /* a refused import leaves its destination byte for byte as it was */
  char *before = NULL, *after = NULL;
  size_t before_len = 0, after_len = 0;
  assert_int_equal(ut_read_file(copy, &before, &before_len, &e), MMT_OK);
  char empty_json[256];
  snprintf(empty_json, sizeof empty_json, "%s/empty.json", tmp_dir);
  assert_int_equal(ut_write_file_atomic(empty_json, "", 0, &e), MMT_OK);
  assert_error(RUN("db", "import", empty_json, "--into", copy), 1, "not JSON: unexpected end");
  assert_int_equal(ut_read_file(copy, &after, &after_len, &e), MMT_OK);
  assert_int_equal(before_len, after_len);
  assert_memory_equal(before, after, before_len);
  free(before);
  free(after);
  /* pack: one file that reads as the original does */
  char packed[256];
  snprintf(packed, sizeof packed, "%s/packed.db", tmp_dir);
  r = RUN("db", "pack", "--db", dst, "--out", packed);
  assert_int_equal(r.code, 0);
  run_free(&r);
  r = RUN("db", "check", packed);
  assert_non_null(strstr(r.out, "2 rows, integrity ok"));
  run_free(&r);
  assert_usage_error(RUN("db", "pack", "--db", dst), "pack needs --out FILE");
  /* endless input on stdin ends at the size limit with one line, and nothing created */
  char cmd[1024], err_path[256];
  snprintf(err_path, sizeof err_path, "%s/endless.err", tmp_dir);
  snprintf(cmd, sizeof cmd, "yes '{\"a\": 1}' | '%s' db import - --into '%s' 2>'%s'",
           MMT_CLI_PATH, fresh, err_path);
  int status = system(cmd);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1);
  char *err_text = cli_slurp(err_path);
  assert_int_equal(cli_count_lines(err_text), 1);
  assert_non_null(strstr(err_text, "'-' is larger than 2048 MiB"));
  free(err_text);
  assert_int_equal(access(fresh, F_OK), -1);
  assert_usage_error(RUN("db"),
                     "expected a subcommand: merge, check, export, import, pack or rekey");
  assert_usage_error(RUN("db", "rekey", "--db", fresh), "no database at");
  assert_int_equal(access(fresh, F_OK), -1);
  assert_usage_error(RUN("db", "merge", a), "merge needs --into DST");
  assert_usage_error(RUN("db", "merge", "--into", dst), "at least one SRC");
  assert_usage_error(RUN("db", "fold"), "unknown subcommand 'fold'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_db_merge_check),
      cmocka_unit_test(test_model_evaluate),
      cmocka_unit_test(test_help_lists_commands),
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_command_help),
      cmocka_unit_test(test_unknown_command),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_templates_lists_builtins),
      cmocka_unit_test(test_templates_lists_broken_one),
      cmocka_unit_test(test_space_count_matches_list),
      cmocka_unit_test(test_space_errors),
      cmocka_unit_test(test_emit),
      cmocka_unit_test(test_emit_errors),
      cmocka_unit_test(test_compile_and_cache),
      cmocka_unit_test(test_compile_every_config),
      cmocka_unit_test(test_compile_errors),
      cmocka_unit_test(test_compile_shards),
      cmocka_unit_test(test_show_missing_db),
      cmocka_unit_test(test_show_corrupt_db),
      cmocka_unit_test(test_space_constraints_and_requires),
      cmocka_unit_test(test_emit_constraints_and_info),
      cmocka_unit_test(test_compile_failure),
      cmocka_unit_test(test_measure_errors),
      cmocka_unit_test(test_measure_device),
      /* the lead's commands */
      cmocka_unit_test(test_bench_bad_numbers),
      cmocka_unit_test(test_tune_bad_arguments),
      cmocka_unit_test(test_tune_recorded),
      cmocka_unit_test(test_tune_canonical_forms),
      cmocka_unit_test(test_layout_options),
      cmocka_unit_test(test_explain),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
