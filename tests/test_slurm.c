/*
 * test_slurm.c -- the Slurm recipe of examples/slurm, run as its array tasks would run it (each
 * script with the task's SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT), without a Slurm
 * cluster; no GPU.
 *   - merge.sbatch over shard databases made from real measurements (tests/data/
 *     model_h100.sql split three ways, one row in two shards as a rerun task would leave it):
 *     every row once, and the merged file's best rows equal those of one file holding them all;
 *   - compile-array.sbatch as an array of three: each valid config compiled by exactly one task.
 * The shard files are made with the sqlite3 CLI; without it the merge test skips.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"

#define SQLITE_CLI "/usr/bin/sqlite3"
#define SHARDS 3
#define RECIPE MMT_TEST_DIR "/../examples/slurm"

static char g_dir[] = "/tmp/mmt_slurm_XXXXXX";

static int setup(void **state) {
  (void)state;
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* An empty mmtune database at path (the schema db_open writes). */
static void create_db(const char *path) {
  db_handle *db = NULL;
  ut_err e;
  if (db_open(path, false, &db, &e) != MMT_OK) fail_msg("%s", e.msg);
  db_close(db);
}

static void run(const char *cmd) {
  int rc = system(cmd);
  if (rc != 0) fail_msg("exit %d: %s", rc, cmd);
}

/* The best rows of every (GPU model, problem) as text lines. */
static int best_line(const db_result *r, void *user) {
  char *out = user;
  size_t len = strlen(out);
  snprintf(out + len, 65536 - len, "%s %s %s %lldx%lldx%lld %s %s %.9g\n", r->device.name,
           r->problem.dtype, r->problem.layout, (long long)r->problem.m, (long long)r->problem.n,
           (long long)r->problem.k, r->template_name, r->params, r->ms_median);
  return 0;
}

static void best_lines(const char *path, char *out) {
  db_handle *db = NULL;
  ut_err e;
  out[0] = '\0';
  assert_int_equal(db_open(path, true, &db, &e), MMT_OK);
  assert_int_equal(db_each_best(db, NULL, NULL, NULL, best_line, out, &e), MMT_OK);
  db_close(db);
}

static int64_t rows_of(const char *path) {
  db_check_report rep;
  ut_err e;
  if (db_check(path, &rep, &e) != MMT_OK) fail_msg("%s", e.msg);
  return rep.rows;
}

static void test_merge_step(void **state) {
  (void)state;
  if (access(SQLITE_CLI, X_OK) != 0) skip();
  char full[256], cmd[2048], shard[256];
  snprintf(full, sizeof full, "%s/full.db", g_dir);
  create_db(full);
  snprintf(cmd, sizeof cmd, SQLITE_CLI " '%s' < '%s/data/model_h100.sql'", full, MMT_TEST_DIR);
  run(cmd);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/out/shards'", g_dir);
  run(cmd);
  for (int i = 0; i < SHARDS; i++) {
    snprintf(shard, sizeof shard, "%s/out/shards/shard-%d.db", g_dir, i);
    create_db(shard);
    /* this shard's problems; shard 1 also gets the first row of shard 0, as a task run again
     * on another node after copying a finished shard would */
    snprintf(cmd, sizeof cmd,
             SQLITE_CLI " '%s' \"ATTACH '%s' AS f; INSERT INTO results SELECT * FROM f.results"
                        " WHERE (m * 131 + n * 17 + k) %% %d = %d%s;\"",
             shard, full, SHARDS, i,
             i == 1 ? " UNION ALL SELECT * FROM f.results WHERE id = (SELECT min(id) FROM "
                      "f.results WHERE (m * 131 + n * 17 + k) % 3 = 0)"
                    : "");
    run(cmd);
  }
  snprintf(cmd, sizeof cmd, "MMTUNE='%s' MMTUNE_OUT='%s/out' bash " RECIPE "/merge.sbatch > '%s/merge.log' 2>&1",
           MMT_CLI_PATH, g_dir, g_dir);
  run(cmd);
  char merged[256];
  snprintf(merged, sizeof merged, "%s/out/mmtune.db", g_dir);
  assert_true(rows_of(full) > 100);
  assert_int_equal(rows_of(merged), rows_of(full)); /* every row once: the duplicate dropped */
  static char want[65536], got[65536];
  best_lines(full, want);
  best_lines(merged, got);
  assert_string_equal(got, want);
  /* the log says so in one line each: the merge and the check */
  snprintf(cmd, sizeof cmd, "grep -q '1 duplicates dropped' '%s/merge.log' && grep -q '^ok: ' '%s/merge.log'",
           g_dir, g_dir);
  run(cmd);
  /* a damaged shard: the merge task fails and the database is left as it was */
  snprintf(cmd, sizeof cmd, "echo garbage > '%s/out/shards/shard-9.db'", g_dir);
  run(cmd);
  snprintf(cmd, sizeof cmd, "MMTUNE='%s' MMTUNE_OUT='%s/out' bash " RECIPE "/merge.sbatch > /dev/null 2>&1",
           MMT_CLI_PATH, g_dir);
  assert_int_not_equal(system(cmd), 0);
  assert_int_equal(rows_of(merged), rows_of(full));
}

/* The "ok TEMPLATE PARAMS" lines of a compile log, counted into names[]/seen[]. */
static int read_ok(const char *log, char names[][128], int *seen, int n, int cap) {
  FILE *fp = fopen(log, "r");
  assert_non_null(fp);
  char line[512], t[64], p[64];
  while (fgets(line, sizeof line, fp))
    if (sscanf(line, "ok %63s %63s", t, p) == 2) {
      char key[128];
      snprintf(key, sizeof key, "%s %s", t, p);
      int k = 0;
      while (k < n && strcmp(names[k], key) != 0) k++;
      if (k == n && n < cap) snprintf(names[n++], 128, "%s", key);
      if (k < cap) seen[k]++;
    }
  fclose(fp);
  return n;
}

static void test_compile_array(void **state) {
  (void)state;
  static char names[256][128];
  int seen[256] = {0}, n = 0;
  char cmd[2048], log[256];
  for (int i = 0; i < SHARDS; i++) {
    snprintf(log, sizeof log, "%s/compile-%d.log", g_dir, i);
    snprintf(cmd, sizeof cmd,
             "SLURM_ARRAY_TASK_ID=%d SLURM_ARRAY_TASK_COUNT=%d MMTUNE='%s' MMTUNE_OUT='%s/out' "
             "MMTUNE_DTYPES=f32 MMTUNE_TEMPLATES=naive bash " RECIPE "/compile-array.sbatch > '%s' 2>&1",
             i, SHARDS, MMT_CLI_PATH, g_dir, log);
    run(cmd);
    n = read_ok(log, names, seen, n, 256);
  }
  /* the whole space once: as many configs as `mmtune space naive --count`, each once */
  snprintf(cmd, sizeof cmd, "'%s' space naive --count > '%s/count'", MMT_CLI_PATH, g_dir);
  run(cmd);
  snprintf(log, sizeof log, "%s/count", g_dir);
  FILE *fp = fopen(log, "r");
  assert_non_null(fp);
  int count = 0;
  assert_int_equal(fscanf(fp, "%d", &count), 1);
  fclose(fp);
  assert_int_equal(n, count);
  for (int k = 0; k < n; k++)
    if (seen[k] != 1) fail_msg("%s compiled by %d tasks", names[k], seen[k]);
  /* outside an array the script says what it needs */
  snprintf(cmd, sizeof cmd, "MMTUNE_OUT='%s/out' bash " RECIPE "/compile-array.sbatch > /dev/null 2>&1",
           g_dir);
  assert_int_not_equal(system(cmd), 0);
}

int main(void) {
  if (setenv("MMTUNE_CACHE_DIR", "/tmp/mmt_slurm_cache_unused", 1) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_merge_step),
      cmocka_unit_test(test_compile_array),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
