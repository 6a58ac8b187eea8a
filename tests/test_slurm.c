/*
 * test_slurm.c -- the Slurm recipe of examples/slurm, run as its array tasks would run it (each
 * script with the task's SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT), without a Slurm
 * cluster; no GPU.
 *   - merge.sbatch over shard databases made from real measurements (tests/data/
 *     model_h100.sql split three ways, one row in two shards as a rerun task would leave it):
 *     every row once, and the merged file's best rows equal those of one file holding them all;
 *   - compile-array.sbatch as an array of three: each valid config compiled by exactly one task;
 *     and with the default templates and dtypes on a sample (MMTUNE_SHARDS): every config
 *     compiles, so the tasks succeed and what waits for them (afterok) starts.
 *   - the same through a real one-node Slurm (tests/slurm_cluster.sh: munged, slurmctld and
 *     slurmd of Debian's slurm-wlm, in the foreground, under a private folder): the compile
 *     array of the default templates (a sample) submitted with sbatch --array, the merge job
 *     after it with --dependency=afterok.
 *     Skipped where slurm-wlm and munge are not installed (.ci/run installs them).
 * The shard files are made with the sqlite3 CLI; without it the merge tests skip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db.h"

#define SQLITE_CLI "/usr/bin/sqlite3"
#define SHARDS 3
/* The default templates' configs in this many shards: the array's three tasks compile a
 * sample of 4 or 5 configs a dtype each (every template's configs come in turn), about 20 s a
 * task on one CPU. */
#define SAMPLE_SHARDS 3000
#define RECIPE MMT_TEST_DIR "/../examples/slurm"

static char g_dir[] = "/tmp/mmt_slurm_XXXXXX";
static char g_cluster[300]; /* a running cluster's folder, stopped by teardown */

static int setup(void **state) {
  (void)state;
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[512];
  if (g_cluster[0]) {
    snprintf(cmd, sizeof cmd, "bash '%s/slurm_cluster.sh' stop '%s'", MMT_TEST_DIR, g_cluster);
    if (system(cmd) != 0) return -1;
  }
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
  if (db_check(path, NULL, &rep, &e) != MMT_OK) fail_msg("%s", e.msg);
  return rep.rows;
}

/* full.db (the fixture) and out/shards/shard-I.db: its rows split SHARDS ways by problem,
 * shard 1 also holding the first row of shard 0, as a task run again elsewhere after a copy
 * would leave it. */
static void make_shards(const char *out_dir, char *full, size_t cap) {
  char cmd[2048], shard[400];
  snprintf(full, cap, "%s/full.db", out_dir);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/shards'", out_dir);
  run(cmd);
  create_db(full);
  snprintf(cmd, sizeof cmd, SQLITE_CLI " '%s' < '%s/data/model_h100.sql'", full, MMT_TEST_DIR);
  run(cmd);
  for (int i = 0; i < SHARDS; i++) {
    snprintf(shard, sizeof shard, "%s/shards/shard-%d.db", out_dir, i);
    create_db(shard);
    snprintf(cmd, sizeof cmd,
             SQLITE_CLI " '%s' \"ATTACH '%s' AS f; INSERT INTO results SELECT * FROM f.results"
                        " WHERE (m * 131 + n * 17 + k) %% %d = %d%s;\"",
             shard, full, SHARDS, i,
             i == 1 ? " UNION ALL SELECT * FROM f.results WHERE id = (SELECT min(id) FROM "
                      "f.results WHERE (m * 131 + n * 17 + k) % 3 = 0)"
                    : "");
    run(cmd);
  }
}

/* The merged database has every row of full once and the same best kernels. */
static void check_merged(const char *full, const char *merged) {
  assert_true(rows_of(full) > 100);
  assert_int_equal(rows_of(merged), rows_of(full)); /* every row once: the duplicate dropped */
  static char want[65536], got[65536];
  best_lines(full, want);
  best_lines(merged, got);
  assert_string_equal(got, want);
}

static void test_merge_step(void **state) {
  (void)state;
  if (access(SQLITE_CLI, X_OK) != 0) skip();
  char full[400], out_dir[256], cmd[2048];
  snprintf(out_dir, sizeof out_dir, "%s/out", g_dir);
  make_shards(out_dir, full, sizeof full);
  snprintf(cmd, sizeof cmd, "MMTUNE='%s' MMTUNE_OUT='%s/out' bash " RECIPE "/merge.sbatch > '%s/merge.log' 2>&1",
           MMT_CLI_PATH, g_dir, g_dir);
  run(cmd);
  char merged[256];
  snprintf(merged, sizeof merged, "%s/out/mmtune.db", g_dir);
  check_merged(full, merged);
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

/* The count of naive's valid configs (mmtune space --count). */
static int naive_count(void) {
  char cmd[1024], path[300];
  snprintf(path, sizeof path, "%s/count", g_dir);
  snprintf(cmd, sizeof cmd, "'%s' space naive --count > '%s'", MMT_CLI_PATH, path);
  run(cmd);
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  int count = 0;
  assert_int_equal(fscanf(fp, "%d", &count), 1);
  fclose(fp);
  return count;
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
  assert_int_equal(n, naive_count());
  for (int k = 0; k < n; k++)
    if (seen[k] != 1) fail_msg("%s compiled by %d tasks", names[k], seen[k]);
  /* outside an array the script says what it needs */
  snprintf(cmd, sizeof cmd, "MMTUNE_OUT='%s/out' bash " RECIPE "/compile-array.sbatch > /dev/null 2>&1",
           g_dir);
  assert_int_not_equal(system(cmd), 0);
}

/* The configs a compile log says were compiled: its "N configs: N ok, 0 failed" lines
 * added up; a FAILED line fails the test. */
static int read_sample(const char *log) {
  FILE *fp = fopen(log, "r");
  assert_non_null(fp);
  char line[512];
  int total = 0, ok = 0, failed = 0, compiled = 0;
  while (fgets(line, sizeof line, fp)) {
    if (!strncmp(line, "FAILED", 6)) fail_msg("%s: %s", log, line);
    if (sscanf(line, "%d configs: %d ok, %d failed", &total, &ok, &failed) == 3) {
      assert_int_equal(failed, 0);
      assert_int_equal(ok, total);
      compiled += ok;
    }
  }
  fclose(fp);
  return compiled;
}

/* The default templates in every dtype of the recipe, a sample: each task succeeds. */
static void test_compile_sample(void **state) {
  (void)state;
  char cmd[2048], log[256];
  int compiled = 0;
  for (int i = 0; i < SHARDS; i++) {
    snprintf(log, sizeof log, "%s/sample-%d.log", g_dir, i);
    snprintf(cmd, sizeof cmd,
             "SLURM_ARRAY_TASK_ID=%d SLURM_ARRAY_TASK_COUNT=%d MMTUNE_SHARDS=%d MMTUNE='%s' "
             "MMTUNE_OUT='%s/sample' bash " RECIPE "/compile-array.sbatch > '%s' 2>&1",
             i, SHARDS, SAMPLE_SHARDS, MMT_CLI_PATH, g_dir, log);
    run(cmd);
    compiled += read_sample(log);
  }
  assert_true(compiled >= SHARDS * 3); /* some configs of each dtype a task */
}

/* The recipe through a real one-node Slurm: the compile array (sbatch --array=0-2), then the
 * merge job after it (--dependency=afterok), both waited for. */
static void test_real_slurm(void **state) {
  (void)state;
  if (access(SQLITE_CLI, X_OK) != 0) skip();
  char cmd[4096], env_file[400], out_dir[256], full[400];
  snprintf(g_cluster, sizeof g_cluster, "%s/cluster", g_dir);
  snprintf(env_file, sizeof env_file, "%s/cluster.env", g_dir);
  snprintf(cmd, sizeof cmd, "bash '%s/slurm_cluster.sh' start '%s' > '%s' 2> '%s.err'",
           MMT_TEST_DIR, g_cluster, env_file, env_file);
  int rc = system(cmd);
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
    g_cluster[0] = '\0';
    skip(); /* slurm-wlm and munge are not installed here */
  }
  if (rc != 0) {
    /* installed but unable to run here (a container without what slurmd needs): say why and
     * skip; the recipe itself is covered by the tests above */
    snprintf(cmd, sizeof cmd, "cat '%s.err' >&2", env_file);
    if (system(cmd) != 0) fail_msg("cannot print the cluster's error");
    g_cluster[0] = '\0';
    print_message("the one-node Slurm did not start here: skipped\n");
    skip();
  }
  /* the cluster's client settings (export SLURM_CONF=...) */
  FILE *fp = fopen(env_file, "r");
  assert_non_null(fp);
  char line[512];
  while (fgets(line, sizeof line, fp))
    if (!strncmp(line, "export SLURM_CONF=", 18)) {
      line[strcspn(line, "\n")] = '\0';
      assert_int_equal(setenv("SLURM_CONF", line + 18, 1), 0);
    }
  fclose(fp);
  assert_non_null(getenv("SLURM_CONF"));
  snprintf(out_dir, sizeof out_dir, "%s/real", g_dir);
  make_shards(out_dir, full, sizeof full);
  /* the compile array first (one CPU a task: the test node may have two), the merge after
   * it; sbatch --wait returns when that has ended (a timeout: a job that can never start) */
  char jobid[64] = "";
  snprintf(
      cmd, sizeof cmd,
      "cd '%s' && sbatch --parsable --array=0-%d --cpus-per-task=1 --output='%s/compile-%%a.log' "
      "--export=ALL,MMTUNE='%s',MMTUNE_OUT='%s',MMTUNE_SHARDS=%d " RECIPE
      "/compile-array.sbatch > '%s/jobid'",
      out_dir, SHARDS - 1, out_dir, MMT_CLI_PATH, out_dir, SAMPLE_SHARDS, out_dir);
  run(cmd);
  snprintf(line, sizeof line, "%s/jobid", out_dir);
  fp = fopen(line, "r");
  assert_non_null(fp);
  assert_non_null(fgets(jobid, sizeof jobid, fp));
  fclose(fp);
  jobid[strcspn(jobid, "\n;")] = '\0';
  snprintf(cmd, sizeof cmd,
           "cd '%s' && timeout 300 sbatch --wait --dependency=afterok:%s --output='%s/merge.log' "
           "--export=ALL,MMTUNE='%s',MMTUNE_OUT='%s' " RECIPE "/merge.sbatch > /dev/null",
           out_dir, jobid, out_dir, MMT_CLI_PATH, out_dir);
  run(cmd);
  /* every task's configs compiled (the default templates, a sample); the merge ran after
   * them, which afterok allows only when every task succeeded */
  for (int i = 0; i < SHARDS; i++) {
    snprintf(line, sizeof line, "%s/compile-%d.log", out_dir, i);
    assert_true(read_sample(line) > 0);
  }
  char merged[400];
  snprintf(merged, sizeof merged, "%s/mmtune.db", out_dir);
  check_merged(full, merged);
}

int main(void) {
  if (setenv("MMTUNE_CACHE_DIR", "/tmp/mmt_slurm_cache_unused", 1) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_merge_step),
      cmocka_unit_test(test_compile_array),
      cmocka_unit_test(test_compile_sample),
      cmocka_unit_test(test_real_slurm),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
