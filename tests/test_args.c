/* test_args.c -- tuner/cli/args: numbers, seconds, shapes, shape files, lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"

/* Asserts that parsing `text` as an M-like size fails with a message naming M and the text. */
static void expect_bad_size(const char *text, const char *extra) {
  ut_err e;
  int64_t v = 42;
  char want[256];
  snprintf(want, sizeof want, "M must be an integer in [1, 2147483647], got '%s'%s", text, extra);
  assert_int_equal(tn_parse_i64(text, "M", 1, TN_DIM_MAX, &v, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, want);
  assert_int_equal(v, 42); /* untouched on failure */
}

static void test_parse_i64(void **state) {
  (void)state;
  ut_err e;
  int64_t v = 0;
  assert_int_equal(tn_parse_i64("1", "M", 1, TN_DIM_MAX, &v, &e), MMT_OK);
  assert_int_equal(v, 1);
  assert_int_equal(tn_parse_i64("2147483647", "M", 1, TN_DIM_MAX, &v, &e), MMT_OK);
  assert_int_equal(v, 2147483647);
  assert_int_equal(tn_parse_i64("007", "M", 1, TN_DIM_MAX, &v, &e), MMT_OK);
  assert_int_equal(v, 7);
  expect_bad_size("0", "");
  expect_bad_size("-1", "");
  expect_bad_size("+5", "");
  expect_bad_size("abc", "");
  expect_bad_size("", "");
  expect_bad_size("12abc", "");
  expect_bad_size("99999999999999999999", " (out of range)");
  expect_bad_size("2147483648", " (out of range)");
  expect_bad_size(" 12", "");
  expect_bad_size("12 ", "");
  expect_bad_size("1 2", "");
  expect_bad_size("0x10", "");
  /* negative values where min < 0 */
  assert_int_equal(tn_parse_i64("-3", "--offset", -5, 5, &v, &e), MMT_OK);
  assert_int_equal(v, -3);
  assert_int_equal(tn_parse_i64("6", "--offset", -5, 5, &v, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "--offset must be an integer in [-5, 5], got '6' (out of range)");
  assert_int_equal(tn_parse_i64("-6", "--offset", -5, 5, &v, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "--offset must be an integer in [-5, 5], got '-6'");
  assert_int_equal(tn_parse_i64("-", "--offset", -5, 5, &v, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_parse_i64("--1", "--offset", -5, 5, &v, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_parse_i64("-99999999999999999999", "--offset", INT64_MIN, 5, &v, &e),
                   MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "out of range"));
  assert_int_equal(tn_parse_i64(NULL, "M", 1, 5, &v, &e), MMT_ERR_INVALID_ARG);
  /* a NULL err is allowed */
  assert_int_equal(tn_parse_i64("x", "M", 1, 5, &v, NULL), MMT_ERR_INVALID_ARG);
}

static void test_messages_one_line(void **state) {
  (void)state;
  ut_err e;
  int64_t v;
  char longtext[300];
  memset(longtext, '7', sizeof longtext - 1);
  longtext[sizeof longtext - 1] = '\0';
  assert_int_equal(tn_parse_i64("1\n2", "M", 1, 9, &v, &e), MMT_ERR_INVALID_ARG);
  assert_null(strchr(e.msg, '\n'));
  assert_string_equal(e.msg, "M must be an integer in [1, 9], got '1?2'");
  assert_int_equal(tn_parse_i64(longtext, "M", 1, 9, &v, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "...' (out of range)"));
  assert_true(strlen(e.msg) < 200);
}

static void test_parse_seconds(void **state) {
  (void)state;
  ut_err e;
  double s = 0;
  assert_int_equal(tn_parse_seconds("2", "--budget", 3600, &s, &e), MMT_OK);
  assert_true(s == 2.0);
  assert_int_equal(tn_parse_seconds("0.5", "--budget", 3600, &s, &e), MMT_OK);
  assert_true(s == 0.5);
  assert_int_equal(tn_parse_seconds(".25", "--budget", 3600, &s, &e), MMT_OK);
  assert_true(s == 0.25);
  assert_int_equal(tn_parse_seconds("1e3", "--budget", 3600, &s, &e), MMT_OK);
  assert_true(s == 1000.0);
  assert_int_equal(tn_parse_seconds("1.5E-1", "--budget", 3600, &s, &e), MMT_OK);
  assert_true(s == 0.15);
  assert_int_equal(tn_parse_seconds("3600", "--budget", 3600, &s, &e), MMT_OK);
  static const char *const bad[] = {"abc", "",    "0",    "0.0", "-1", "+1",     " 1",   "1 ", "1s",
                                    "inf", "nan", "0x10", "1e",  ".",  "1e-999", "1..2", "e5"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char want[128];
    snprintf(want, sizeof want, "--budget must be a positive number of seconds, got '%s'", bad[i]);
    s = 7;
    assert_int_equal(tn_parse_seconds(bad[i], "--budget", 3600, &s, &e), MMT_ERR_INVALID_ARG);
    assert_string_equal(e.msg, want);
    assert_true(s == 7);
  }
  assert_int_equal(tn_parse_seconds("3601", "--budget", 3600, &s, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg,
                      "--budget must be a positive number of seconds, at most 3600, got "
                      "'3601' (out of range)");
  assert_int_equal(tn_parse_seconds("1e999", "--budget", 1e300, &s, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "out of range"));
  assert_int_equal(tn_parse_seconds(NULL, "--budget", 1, &s, &e), MMT_ERR_INVALID_ARG);
  /* the same rules for a quantity that is not a time */
  assert_int_equal(tn_parse_positive("2.5", "--cpu-max-gflop", 1e9, &s, &e), MMT_OK);
  assert_true(s == 2.5);
  assert_int_equal(tn_parse_positive("-2", "--cpu-max-gflop", 1e9, &s, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "--cpu-max-gflop must be a positive number, got '-2'");
  assert_int_equal(tn_parse_positive("2e9", "--cpu-max-gflop", 1e9, &s, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg,
                      "--cpu-max-gflop must be a positive number, at most 1e+09, got '2e9' "
                      "(out of range)");
}

static void test_parse_shape(void **state) {
  (void)state;
  ut_err e;
  tn_shape s;
  assert_int_equal(tn_parse_shape("1024x512x16384", &s, &e), MMT_OK);
  assert_int_equal(s.m, 1024);
  assert_int_equal(s.n, 512);
  assert_int_equal(s.k, 16384);
  assert_int_equal(tn_parse_shape("2147483647x1x1", &s, &e), MMT_OK);
  assert_int_equal(s.m, 2147483647);

  static const char *const wrong_form[] = {"12x3",  "1x2",   "1x2x3x4", "",   "1024",
                                           "1,2,3", "1X2X3", "x",       "xxx"};
  for (size_t i = 0; i < sizeof wrong_form / sizeof wrong_form[0]; i++) {
    char want[128];
    snprintf(want, sizeof want, "shape must be MxNxK (e.g. 1024x1024x1024), got '%s'",
             wrong_form[i]);
    assert_int_equal(tn_parse_shape(wrong_form[i], &s, &e), MMT_ERR_INVALID_ARG);
    assert_string_equal(e.msg, want);
  }
  assert_int_equal(tn_parse_shape("0x5x5", &s, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "shape '0x5x5': M must be an integer in [1, 2147483647], got '0'");
  assert_int_equal(tn_parse_shape("axbxc", &s, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "shape 'axbxc': M must be an integer in [1, 2147483647], got 'a'");
  assert_int_equal(tn_parse_shape("1x2x", &s, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "shape '1x2x': K must be an integer in [1, 2147483647], got ''");
  assert_int_equal(tn_parse_shape("4x-4x4", &s, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "N must be"));
  assert_int_equal(tn_parse_shape("4x4x2147483648", &s, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "K must be"));
  assert_non_null(strstr(e.msg, "out of range"));
  assert_int_equal(tn_parse_shape(" 4x4x4", &s, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_parse_shape(NULL, &s, &e), MMT_ERR_INVALID_ARG);
}

static void test_shapes_list(void **state) {
  (void)state;
  ut_err e;
  tn_shape *s = NULL;
  int n = -1;
  assert_int_equal(tn_parse_shapes("1x2x3,4x5x6", &s, &n, &e), MMT_OK);
  assert_int_equal(n, 2);
  assert_int_equal(s[0].m, 1);
  assert_int_equal(s[0].k, 3);
  assert_int_equal(s[1].n, 5);
  free(s);
  assert_int_equal(tn_parse_shapes("64x64x64", &s, &n, &e), MMT_OK);
  assert_int_equal(n, 1);
  free(s);

  assert_int_equal(tn_parse_shapes("1x2x3,,4x5x6", &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "shapes list has an empty item in '1x2x3,,4x5x6'");
  assert_null(s);
  assert_int_equal(n, 0);
  assert_int_equal(tn_parse_shapes("1x2x3,", &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_parse_shapes(",1x2x3", &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_parse_shapes("", &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "shapes must be a file or a comma-separated list of MxNxK, got ''");
  assert_int_equal(tn_parse_shapes(NULL, &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_parse_shapes("1x2x3,1x2", &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "shape must be MxNxK (e.g. 1024x1024x1024), got '1x2'");
  assert_null(s);
  assert_int_equal(tn_parse_shapes("1x2x3,0x2x3", &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "shape '0x2x3': M must be"));
  assert_null(s);
}

/* Writes text to dir/name and returns the path in out. */
static void write_file(const char *dir, const char *name, const char *text, char *out, size_t n) {
  snprintf(out, n, "%s/%s", dir, name);
  FILE *f = fopen(out, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
}

/* Setup: a fresh temporary folder, made the current one; *state points to its path. */
static int tmpdir_setup(void **state) {
  char *dir = strdup("/tmp/mmt_args_XXXXXX");
  if (!dir || !mkdtemp(dir) || chdir(dir) != 0) {
    free(dir);
    return -1;
  }
  *state = dir;
  return 0;
}

static int tmpdir_teardown(void **state) {
  char *dir = *state, cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  int rc = chdir("/") == 0 && system(cmd) == 0 ? 0 : -1;
  free(dir);
  return rc;
}

static void test_shapes_file_good(void **state) {
  const char *dir = *state;
  char path[256];
  ut_err e;
  tn_shape *s = NULL;
  int n = 0;
  write_file(dir, "good.txt",
             "# M N K\n\n  1024 1024 1024   # square\n\t16\t4096  8\r\n"
             "2x3x4\n   \n#only a comment\n7x8x9 # with comment\n5 6 7",
             path, sizeof path);
  assert_int_equal(tn_parse_shapes(path, &s, &n, &e), MMT_OK);
  assert_int_equal(n, 5);
  assert_true(s[0].m == 1024 && s[0].n == 1024 && s[0].k == 1024);
  assert_true(s[1].m == 16 && s[1].n == 4096 && s[1].k == 8);
  assert_true(s[2].m == 2 && s[2].n == 3 && s[2].k == 4);
  assert_true(s[3].m == 7 && s[3].n == 8 && s[3].k == 9);
  assert_true(s[4].m == 5 && s[4].n == 6 && s[4].k == 7); /* no final newline */
  free(s);
  /* the file wins over the list syntax even without '/' or ".txt": a relative name */
  assert_int_equal(tn_parse_shapes("good.txt", &s, &n, &e), MMT_OK);
  assert_int_equal(n, 5);
  free(s);
}

/* tune's shapes files: a line may name its epilogue and batch; other commands refuse them. */
static void test_shapes_file_extras(void **state) {
  const char *dir = *state;
  char path[256];
  ut_err e;
  tn_shape *s = NULL;
  tn_shape_extra *x = NULL;
  int n = 0;
  /* more lines than the first growth of the arrays (16) */
  char text[4096] = "1024 1024 1024\n";
  for (int i = 0; i < 20; i++) {
    size_t used = strlen(text);
    snprintf(text + used, sizeof text - used, "%dx64x64 epilogue=out=f32,act=silu batch=%d\n",
             i + 1, i + 2);
  }
  strcat(text, "  batch=3   8 8 8  epilogue=act=relu # fields in any order\n");
  write_file(dir, "ops.txt", text, path, sizeof path);
  assert_int_equal(tn_parse_shapes_extra(path, &s, &x, &n, &e), MMT_OK);
  assert_int_equal(n, 22);
  assert_string_equal(x[0].op, "");
  assert_int_equal(x[0].batch, 0);
  assert_int_equal(s[20].m, 20);
  assert_string_equal(x[20].op, "out=f32,act=silu");
  assert_int_equal(x[20].batch, 21);
  assert_true(s[21].m == 8 && s[21].k == 8);
  assert_string_equal(x[21].op, "act=relu");
  assert_int_equal(x[21].batch, 3);
  free(s);
  free(x);
  /* a list: no extras, all empty */
  assert_int_equal(tn_parse_shapes_extra("1x2x3,4x5x6", &s, &x, &n, &e), MMT_OK);
  assert_true(n == 2 && x[1].op[0] == '\0' && x[1].batch == 0);
  free(s);
  free(x);
  /* commands without ops refuse the fields; bad values are named */
  assert_int_equal(tn_parse_shapes(path, &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "line 2: 'epilogue' is for mmtune tune's shapes files only"));
  write_file(dir, "bad.txt", "1 2 3 batch=0\n", path, sizeof path);
  assert_int_equal(tn_parse_shapes_extra(path, &s, &x, &n, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "batch must be an integer in [1, 65535]"));
  write_file(dir, "bad.txt", "epilogue=act=relu\n", path, sizeof path);
  assert_int_equal(tn_parse_shapes_extra(path, &s, &x, &n, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "without a shape"));
  assert_null(s);
  assert_null(x);
}

static void test_shapes_file_bad(void **state) {
  const char *dir = *state;
  char path[256], want[512];
  ut_err e;
  tn_shape *s = NULL;
  int n = 0;
  write_file(dir, "bad.txt", "# header\n1 2 3\n1 0 3\n", path, sizeof path);
  assert_int_equal(tn_parse_shapes(path, &s, &n, &e), MMT_ERR_INVALID_ARG);
  snprintf(want, sizeof want,
           "shapes file '%s' line 3: N must be an integer in [1, 2147483647], got '0'", path);
  assert_string_equal(e.msg, want);
  assert_null(s);
  assert_int_equal(n, 0);

  write_file(dir, "bad2.txt", "1 2 3\n1 2\n", path, sizeof path);
  assert_int_equal(tn_parse_shapes(path, &s, &n, &e), MMT_ERR_INVALID_ARG);
  snprintf(want, sizeof want, "shapes file '%s' line 2: expected 'M N K' or 'MxNxK', got '1 2'",
           path);
  assert_string_equal(e.msg, want);

  write_file(dir, "bad3.txt", "1 2 3 4\n", path, sizeof path);
  assert_int_equal(tn_parse_shapes(path, &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "line 1: expected 'M N K' or 'MxNxK', got '1 2 3 4'"));

  write_file(dir, "bad4.txt", "\n\n1x2\n", path, sizeof path);
  assert_int_equal(tn_parse_shapes(path, &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "line 3: shape must be MxNxK"));

  /* a binary file: a NUL byte must not end the text silently */
  static const char nul_text[] = "1 2 3\n\0004 5 6\n";
  snprintf(path, sizeof path, "%s/nul.txt", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(nul_text, 1, sizeof nul_text - 1, f), sizeof nul_text - 1);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(tn_parse_shapes(path, &s, &n, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "NUL"));

  write_file(dir, "empty.txt", "# nothing\n\n", path, sizeof path);
  assert_int_equal(tn_parse_shapes(path, &s, &n, &e), MMT_ERR_INVALID_ARG);
  snprintf(want, sizeof want, "shapes file '%s' has no shapes", path);
  assert_string_equal(e.msg, want);
}

static void test_shapes_file_missing(void **state) {
  const char *dir = *state;
  char path[256], want[512];
  ut_err e;
  tn_shape *s = NULL;
  int n = 0;
  snprintf(path, sizeof path, "%s/missing.txt", dir);
  assert_int_equal(tn_parse_shapes(path, &s, &n, &e), MMT_ERR_IO);
  snprintf(want, sizeof want, "shapes file '%s' not found", path);
  assert_string_equal(e.msg, want);
  assert_int_equal(tn_parse_shapes("missing.txt", &s, &n, &e), MMT_ERR_IO);
  assert_string_equal(e.msg, "shapes file 'missing.txt' not found");
  assert_int_equal(tn_parse_shapes("no/such/file", &s, &n, &e), MMT_ERR_IO);
  assert_int_equal(tn_parse_shapes(dir, &s, &n, &e), MMT_ERR_IO); /* a folder */
  assert_non_null(strstr(e.msg, "not a regular file"));
  assert_null(s);
  assert_int_equal(n, 0);
}

static void test_bench_shapes_file(void **state) {
  (void)state;
  ut_err e;
  tn_shape *s = NULL;
  int n = 0;
  /* tests/data/shapes.txt is a copy of the public suite (shared/bench/shapes.txt). */
  assert_int_equal(tn_parse_shapes(MMT_TEST_DIR "/data/shapes.txt", &s, &n, &e), MMT_OK);
  assert_int_equal(n, 10);
  assert_true(s[0].m == 1024 && s[0].n == 1024 && s[0].k == 1024);
  assert_true(s[9].m == 512 && s[9].n == 512 && s[9].k == 16384);
  free(s);
  /* The suite itself, where CI has it beside the clone; skipped where it does not exist. */
  const char *shared = MMT_TEST_DIR "/../../shared/bench/shapes.txt";
  if (access(shared, R_OK) == 0) {
    assert_int_equal(tn_parse_shapes(shared, &s, &n, &e), MMT_OK);
    assert_int_equal(n, 10);
    assert_true(s[9].k == 16384);
    free(s);
  }
}

/* --shard I/N: every item of a plan belongs to exactly one of the N shards, for N = 1..16,
 * and the shards are as even as can be; bad texts are refused with the reason. */
static void test_shard(void **state) {
  (void)state;
  ut_err e;
  for (int n = 1; n <= 16; n++) {
    int owners[1000] = {0}, per[16] = {0};
    for (int i = 0; i < n; i++) {
      char text[16];
      tn_shard s = {-1, -1};
      snprintf(text, sizeof text, "%d/%d", i, n);
      assert_int_equal(tn_parse_shard(text, &s, &e), MMT_OK);
      assert_int_equal(s.index, i);
      assert_int_equal(s.count, n);
      for (int item = 0; item < 1000; item++)
        if (tn_shard_owns(s, item)) owners[item]++, per[i]++;
    }
    for (int item = 0; item < 1000; item++) assert_int_equal(owners[item], 1);
    for (int i = 0; i < n; i++) assert_true(per[i] == 1000 / n || per[i] == 1000 / n + 1);
  }
  /* tune's blocks, for plans of 1 to 60 problems: each position owned once, each block
   * contiguous and as even as can be, and block I of N split among n GPUs (I*n + j of N*n)
   * stays inside it */
  for (int n = 1; n <= 16; n++)
    for (int64_t total = 1; total <= 60; total++) {
      int owner[60], per[16] = {0};
      for (int64_t pos = 0; pos < total; pos++) {
        owner[pos] = -1;
        for (int i = 0; i < n; i++)
          if (tn_shard_owns_block((tn_shard){i, n}, pos, total)) {
            assert_int_equal(owner[pos], -1);
            owner[pos] = i, per[i]++;
          }
        assert_true(owner[pos] >= 0);
        if (pos) assert_true(owner[pos] >= owner[pos - 1]); /* contiguous: never back */
        for (int gpus = 1; gpus <= 4; gpus++) {
          int parts = 0;
          for (int q = 0; q < n * gpus; q++)
            if (tn_shard_owns_block((tn_shard){q, n * gpus}, pos, total))
              parts++, assert_int_equal(q / gpus, owner[pos]);
          assert_int_equal(parts, 1);
        }
      }
      for (int i = 0; i < n; i++)
        assert_true(per[i] == total / n || per[i] == (total + n - 1) / n);
    }
  static const struct {
    const char *text, *why;
  } bad[] = {{"", "expected I/N"},     {"3", "expected I/N"},   {"/4", "expected I/N"},
             {"1/", "N"},              {"4/4", "I"},            {"-1/4", "I"},
             {"0/0", "N"},             {"1/70000", "N"},        {"a/b", "N"},
             {"1/2/3", "N"},           {" 1/2", "I"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tn_shard s = {7, 7};
    assert_int_equal(tn_parse_shard(bad[i].text, &s, &e), MMT_ERR_INVALID_ARG);
    assert_int_equal(s.index, 7); /* untouched */
    assert_non_null(strstr(e.msg, "bad --shard"));
    if (!strstr(e.msg, bad[i].why)) fail_msg("'%s': %s", bad[i].text, e.msg);
    assert_null(strchr(e.msg, '\n'));
  }
}

static void test_split_list(void **state) {
  (void)state;
  ut_err e;
  char **items = NULL;
  int n = 0;
  assert_int_equal(tn_split_list("a,bb,c c", "--dtypes", &items, &n, &e), MMT_OK);
  assert_int_equal(n, 3);
  assert_string_equal(items[0], "a");
  assert_string_equal(items[1], "bb");
  assert_string_equal(items[2], "c c");
  tn_list_free(items, n);
  assert_int_equal(tn_split_list("one", "--dtypes", &items, &n, &e), MMT_OK);
  assert_int_equal(n, 1);
  assert_string_equal(items[0], "one");
  tn_list_free(items, n);

  static const char *const bad[] = {"a,,b", ",a", "a,", ","};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char want[128];
    snprintf(want, sizeof want, "--dtypes has an empty item in '%s'", bad[i]);
    assert_int_equal(tn_split_list(bad[i], "--dtypes", &items, &n, &e), MMT_ERR_INVALID_ARG);
    assert_string_equal(e.msg, want);
    assert_null(items);
    assert_int_equal(n, 0);
  }
  assert_int_equal(tn_split_list("", "--dtypes", &items, &n, &e), MMT_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "--dtypes must be a comma-separated list, got ''");
  assert_int_equal(tn_split_list(NULL, "--dtypes", &items, &n, &e), MMT_ERR_INVALID_ARG);
  tn_list_free(NULL, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_i64),
      cmocka_unit_test(test_messages_one_line),
      cmocka_unit_test(test_parse_seconds),
      cmocka_unit_test(test_parse_shape),
      cmocka_unit_test(test_shapes_list),
      cmocka_unit_test_setup_teardown(test_shapes_file_good, tmpdir_setup, tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_shapes_file_bad, tmpdir_setup, tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_shapes_file_extras, tmpdir_setup, tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_shapes_file_missing, tmpdir_setup, tmpdir_teardown),
      cmocka_unit_test(test_bench_shapes_file),
      cmocka_unit_test(test_split_list),
      cmocka_unit_test(test_shard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
