/*
 * cli_run.h -- test helper: runs the built mmtune binary (MMT_CLI_PATH) in a child process
 * with stdin from /dev/null and stdout/stderr captured, bounded by a time limit.
 */
#ifndef MMT_TESTS_CLI_RUN_H
#define MMT_TESTS_CLI_RUN_H

typedef struct {
  int code; /* exit status, or 128 + signal */
  char *out, *err;
} run_result;

/* Runs mmtune with args (NULL-terminated, without argv[0]); the capture files live in dir.
 * env: NULL or NULL-terminated "NAME=value" strings set in the child; MMTUNE_TEMPLATE_PATH is
 * "" unless env sets it.  Fails the test when mmtune runs longer than timeout_s. */
run_result cli_run(const char *dir, const char *const *env, const char *const *args,
                   int timeout_s);
void run_free(run_result *r);

/* Creates dir_template (mkdtemp) and makes it HOME, with XDG_CACHE_HOME under it and no
 * MMTUNE_DB / MMTUNE_CACHE_DIR / MMTUNE_LIBCUBLAS, so no user file is read or written.  Returns
 * 0, or -1 when the folder cannot be made (a cmocka setup's result). */
int cli_fresh_home(char *dir_template);
/* Removes the folder and everything in it; 0 or -1 (a cmocka teardown's result). */
int cli_remove_dir(const char *dir);

/* Number of '\n' in s. */
int cli_count_lines(const char *s);
/* Asserts exit status `code`, nothing on stdout, and exactly one line on stderr that starts
 * with `prefix` and contains `needle`; then frees r. */
void cli_assert_error(run_result r, int code, const char *prefix, const char *needle);

/* A whole file's text (owned); fails the test when it cannot be read. */
char *cli_slurp(const char *path);
/* Waits for a child; kills it and fails the test after timeout_s.  Exit status or
 * 128 + signal. */
int cli_wait(int pid, int timeout_s);

#endif /* MMT_TESTS_CLI_RUN_H */
