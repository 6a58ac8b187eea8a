/* cli_run.c -- see cli_run.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "util.h"

int cli_fresh_home(char *dir_template) {
  char path[512];
  if (!mkdtemp(dir_template)) return -1;
  snprintf(path, sizeof path, "%s/cache", dir_template);
  setenv("HOME", dir_template, 1);
  setenv("XDG_CACHE_HOME", path, 1);
  unsetenv("MMTUNE_DB");
  unsetenv("MMTUNE_CACHE_DIR");
  unsetenv("MMTUNE_LIBCUBLAS");
  return 0;
}

int cli_remove_dir(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

int cli_count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

void cli_assert_error(run_result r, int code, const char *prefix, const char *needle) {
  if (r.code != code || cli_count_lines(r.err) != 1 || strncmp(r.err, prefix, strlen(prefix)) != 0 ||
      !strstr(r.err, needle))
    fail_msg("want exit %d and one line with '%s'; got exit %d, stderr:\n%s", code, needle, r.code,
             r.err);
  assert_string_equal(r.out, "");
  run_free(&r);
}

void run_free(run_result *r) {
  free(r->out);
  free(r->err);
}

char *cli_slurp(const char *path) {
  char *data = NULL;
  ut_err e;
  assert_int_equal(ut_read_file(path, &data, NULL, &e), MMT_OK);
  return data;
}

static void child(const char *const *env, char **argv, const char *out, const char *err) {
  int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int fi = open("/dev/null", O_RDONLY);
  if (fo < 0 || fe < 0 || fi < 0) _exit(126);
  dup2(fi, 0), dup2(fo, 1), dup2(fe, 2);
  setenv("MMTUNE_TEMPLATE_PATH", "", 1);
  for (; env && *env; env++)
    if (putenv((char *)*env) != 0) _exit(126);
  execv(MMT_CLI_PATH, argv);
  _exit(127);
}

int cli_wait(int pid, int timeout_s) {
  int status = 0;
  time_t deadline = time(NULL) + timeout_s;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (time(NULL) > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      fail_msg("mmtune ran more than %d s", timeout_s);
    }
    usleep(10000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

run_result cli_run(const char *dir, const char *const *env, const char *const *args,
                   int timeout_s) {
  char *argv[64];
  int n = 0;
  argv[n++] = (char *)MMT_CLI_PATH;
  for (; args[n - 1] && n < 63; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  char out[512], err[512];
  snprintf(out, sizeof out, "%s/stdout", dir);
  snprintf(err, sizeof err, "%s/stderr", dir);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) child(env, argv, out, err);
  run_result r;
  r.code = cli_wait(pid, timeout_s);
  r.out = cli_slurp(out);
  r.err = cli_slurp(err);
  return r;
}
