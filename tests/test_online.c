/* test_online.c -- online tuning's worker (rt_online.h), with a stand-in for mmtune: a
 * script that writes its arguments and whether it holds the lock, then waits for a file.
 * No GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_online.h"

static char g_dir[] = "/tmp/mmt_online_XXXXXX";
static char g_tuner[128], g_db[128], g_log[128], g_args[128], g_go[128];

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

static int setup(void **state) {
  (void)state;
  if (!mkdtemp(g_dir)) return -1;
  snprintf(g_tuner, sizeof g_tuner, "%s/fake-mmtune", g_dir);
  snprintf(g_db, sizeof g_db, "%s/app.db", g_dir);
  snprintf(g_log, sizeof g_log, "%s/worker.log", g_dir);
  snprintf(g_args, sizeof g_args, "%s/args", g_dir);
  snprintf(g_go, sizeof g_go, "%s/go", g_dir);
  char script[1024];
  /* the lock is its descriptor 3; it runs until the test makes the file "go" */
  snprintf(script, sizeof script,
           "#!/bin/sh\n"
           "echo \"$*\" >> %s\n"
           "if [ -e /proc/self/fd/3 ]; then echo holds fd 3; fi\n"
           "while [ ! -e %s ]; do sleep 0.02; done\n",
           g_args, g_go);
  write_file(g_tuner, script);
  return chmod(g_tuner, 0755);
}

static int teardown(void **state) {
  (void)state;
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Waits up to 10 s for worker pid to end; whether it did. */
static bool wait_end(pid_t pid) {
  for (int i = 0; i < 1000; i++) {
    if (rt_online_reap(pid)) return true;
    usleep(10000);
  }
  return false;
}

static char *read_file(const char *path) {
  static char buf[4096];
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* One worker a database: a second start while the first runs starts nothing; once it has
 * ended, a start runs a new one.  The worker is `tune --recorded` of the database, on the
 * device, with the budget and the jobs, its output in the log, holding the lock. */
static void test_one_worker(void **state) {
  (void)state;
  unlink(g_go);
  unlink(g_args);
  const rt_online_worker w = {
      .tuner = g_tuner, .db_path = g_db, .cache_dir = "/tmp/cubins", .device = 1, .budget_s = 2.5};
  ut_err e;
  pid_t first = 0, second = 0, third = 0;
  assert_int_equal(rt_online_start(&w, g_log, &first, &e), MMT_OK);
  assert_true(first > 0);
  assert_int_equal(rt_online_start(&w, g_log, &second, &e), MMT_OK);
  assert_int_equal(second, 0);
  /* a lock taken by hand is what a worker of another process holds */
  char lock[256];
  assert_true(rt_online_lock_path(g_db, lock, sizeof lock));
  const int fd = open(lock, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), -1);
  assert_int_equal(errno, EWOULDBLOCK);
  assert_false(rt_online_reap(first));
  write_file(g_go, "");
  assert_true(wait_end(first));
  assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0); /* released with the worker */
  assert_int_equal(rt_online_start(&w, g_log, &third, &e), MMT_OK);
  assert_int_equal(third, 0); /* held here now */
  close(fd);
  assert_int_equal(rt_online_start(&w, g_log, &third, &e), MMT_OK);
  assert_true(third > 0);
  assert_true(wait_end(third)); /* "go" is still there */
  char want[512];
  snprintf(want, sizeof want,
           "tune --recorded --device 1 --db %s --budget 2.5 --jobs %d --cache-dir /tmp/cubins\n"
           "tune --recorded --device 1 --db %s --budget 2.5 --jobs %d --cache-dir /tmp/cubins\n",
           g_db, RT_ONLINE_JOBS, g_db, RT_ONLINE_JOBS);
  const char *args = read_file(g_args);
  assert_non_null(args);
  assert_string_equal(args, want);
  const char *log = read_file(g_log);
  assert_non_null(log);
  assert_non_null(strstr(log, "holds fd 3"));
}

/* A tuner that is not there, and missing fields: an error naming the problem, nothing
 * started, the lock left free. */
static void test_bad_worker(void **state) {
  (void)state;
  rt_online_worker w = {
      .tuner = "/nonexistent/mmtune", .db_path = g_db, .device = 0, .budget_s = 5};
  ut_err e;
  pid_t pid = 123;
  assert_int_equal(rt_online_start(&w, g_log, &pid, &e), MMT_ERR_NOT_FOUND);
  assert_int_equal(pid, 0);
  assert_non_null(strstr(e.msg, "/nonexistent/mmtune"));
  char lock[256];
  assert_true(rt_online_lock_path(g_db, lock, sizeof lock));
  const int fd = open(lock, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
  close(fd);
  w.tuner = g_tuner;
  w.budget_s = 0;
  assert_int_equal(rt_online_start(&w, g_log, &pid, &e), MMT_ERR_INVALID_ARG);
  w.budget_s = 1;
  w.db_path = "";
  assert_int_equal(rt_online_start(&w, g_log, &pid, &e), MMT_ERR_INVALID_ARG);
  assert_true(rt_online_reap(0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_worker),
      cmocka_unit_test(test_bad_worker),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
