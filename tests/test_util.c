/* test_util.c -- util/: error messages, hashing, files, paths, status names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static void test_status_names(void **state) {
  (void)state;
  assert_string_equal(mmt_status_name(MMT_OK), "MMT_OK");
  assert_string_equal(mmt_status_name(MMT_ERR_DB_CORRUPT), "MMT_ERR_DB_CORRUPT");
  assert_string_equal(mmt_status_name((mmt_status)9999), "MMT_UNKNOWN");
  assert_string_equal(mmt_strerror(MMT_OK), "success");
  for (int s = 0; s < MMT_STATUS_COUNT_; s++) assert_true(strlen(mmt_strerror((mmt_status)s)) > 0);
}

static void test_fail_and_prefix(void **state) {
  (void)state;
  ut_err e;
  assert_int_equal(ut_fail(&e, MMT_ERR_IO, "x=%d", 3), MMT_ERR_IO);
  assert_string_equal(e.msg, "x=3");
  ut_err_prefix(&e, "load '%s'", "a.lua");
  assert_string_equal(e.msg, "load 'a.lua': x=3");
  assert_int_equal(ut_fail(NULL, MMT_ERR_NOMEM, "ignored"), MMT_ERR_NOMEM);
}

static void test_hash(void **state) {
  (void)state;
  char hex[17];
  /* FNV-1a 64 of "a" is a known constant. */
  ut_hash64_hex(ut_hash64("a", 1), hex);
  assert_string_equal(hex, "af63dc4c8601ec8c");
  assert_true(ut_hash64("ab", 2) == ut_hash64_more(ut_hash64("a", 1), "b", 1));
}

static void test_files(void **state) {
  (void)state;
  char dir[] = "/tmp/mmt_util_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[256], path[300];
  snprintf(sub, sizeof sub, "%s/a/b/c", dir);
  ut_err e;
  assert_int_equal(ut_mkdir_p(sub, &e), MMT_OK);
  assert_int_equal(ut_mkdir_p(sub, &e), MMT_OK);
  snprintf(path, sizeof path, "%s/f.bin", sub);
  assert_int_equal(ut_write_file_atomic(path, "hello", 5, &e), MMT_OK);
  char *data = NULL;
  size_t len = 0;
  assert_int_equal(ut_read_file(path, &data, &len, &e), MMT_OK);
  assert_int_equal(len, 5);
  assert_string_equal(data, "hello");
  free(data);
  snprintf(path, sizeof path, "%s/missing", dir);
  assert_int_equal(ut_read_file(path, &data, &len, &e), MMT_ERR_IO);
  assert_non_null(strstr(e.msg, "missing"));
  /* a file in the way of a folder */
  snprintf(path, sizeof path, "%s/a/b/c/f.bin/x", dir);
  assert_int_equal(ut_mkdir_p(path, &e), MMT_ERR_IO);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

static void test_default_paths(void **state) {
  (void)state;
  char out[512];
  ut_err e;
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  unsetenv("MMTUNE_DB");
  assert_int_equal(ut_default_db_path(out, sizeof out, &e), MMT_OK);
  assert_string_equal(out, "/x/cache/mmtune/mmtune.db");
  setenv("MMTUNE_DB", "/y/my.db", 1);
  assert_int_equal(ut_default_db_path(out, sizeof out, &e), MMT_OK);
  assert_string_equal(out, "/y/my.db");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  unsetenv("MMTUNE_CACHE_DIR");
  assert_int_equal(ut_default_cubin_dir(out, sizeof out, &e), MMT_OK);
  assert_string_equal(out, "/home/u/.cache/mmtune/cubin");
  assert_int_equal(ut_snprintf(out, 4, &e, "%s", "toolong"), MMT_ERR_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_names), cmocka_unit_test(test_fail_and_prefix),
      cmocka_unit_test(test_hash),         cmocka_unit_test(test_files),
      cmocka_unit_test(test_default_paths),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
