/* rt_online.c -- see rt_online.h. */
#include "rt_online.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

bool rt_online_lock_path(const char *db_path, char *out, size_t len) {
  const int n = snprintf(out, len, "%s.online.lock", db_path);
  return n > 0 && (size_t)n < len;
}

/* The worker's process attributes: detached from the application's terminal (setsid: its
 * terminal signals are not the worker's), no signal blocked or ignored that it had. */
static int spawn_attrs(posix_spawnattr_t *attr) {
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
#ifdef POSIX_SPAWN_SETSID
  flags |= POSIX_SPAWN_SETSID;
#endif
  int e = posix_spawnattr_setflags(attr, flags);
  if (!e) e = posix_spawnattr_setsigmask(attr, &none);
  if (!e) e = posix_spawnattr_setsigdefault(attr, &all);
  return e;
}

/* Its descriptors: stdin /dev/null, stdout and stderr the log (appended), 3 the lock. */
static int spawn_files(posix_spawn_file_actions_t *fa, int lock_fd, const char *log_path) {
  int e = posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
  if (!e)
    e = posix_spawn_file_actions_addopen(fa, 1, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (!e) e = posix_spawn_file_actions_adddup2(fa, 1, 2);
  if (!e) e = posix_spawn_file_actions_adddup2(fa, lock_fd, 3); /* dup2 clears close-on-exec */
  return e;
}

mmt_status rt_online_start(const rt_online_worker *w, const char *log_path, pid_t *pid,
                           ut_err *err) {
  *pid = 0;
  if (!w->tuner || !*w->tuner || !w->db_path || !*w->db_path || !log_path || w->device < 0 ||
      !(w->budget_s > 0))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "online worker: needs a tuner, a database, a log, a device >= 0 and a "
                   "budget > 0");
  char lock_path[4096];
  if (!rt_online_lock_path(w->db_path, lock_path, sizeof lock_path))
    return ut_fail(err, MMT_ERR_IO, "online worker: the database path is too long");
  const int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return ut_fail(err, MMT_ERR_IO, "online worker: cannot open '%s': %s", lock_path,
                   strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    close(fd);
    if (e == EWOULDBLOCK) return MMT_OK; /* a worker is at work on this database */
    return ut_fail(err, MMT_ERR_IO, "online worker: cannot lock '%s': %s", lock_path, strerror(e));
  }
  char device[16], budget[32], jobs[16];
  snprintf(device, sizeof device, "%d", w->device);
  snprintf(budget, sizeof budget, "%g", w->budget_s);
  snprintf(jobs, sizeof jobs, "%d", RT_ONLINE_JOBS);
  char *argv[] = {
      (char *)w->tuner, "tune", "--recorded", "--device", device, "--db", (char *)w->db_path,
      "--budget",       budget, "--jobs",     jobs,       NULL,   NULL,   NULL};
  if (w->cache_dir) argv[11] = "--cache-dir", argv[12] = (char *)w->cache_dir;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t fa;
  const bool attr_ok = posix_spawnattr_init(&attr) == 0;
  const bool fa_ok = posix_spawn_file_actions_init(&fa) == 0;
  int e = attr_ok && fa_ok ? 0 : ENOMEM;
  if (!e) e = spawn_attrs(&attr);
  if (!e) e = spawn_files(&fa, fd, log_path);
  if (!e) e = posix_spawnp(pid, w->tuner, &fa, &attr, argv, environ);
  if (fa_ok) posix_spawn_file_actions_destroy(&fa);
  if (attr_ok) posix_spawnattr_destroy(&attr);
  close(fd); /* the worker holds the lock now, or nobody does */
  if (e) {
    *pid = 0;
    return ut_fail(err, e == ENOENT ? MMT_ERR_NOT_FOUND : MMT_ERR_IO,
                   "online worker: cannot start '%s': %s", w->tuner, strerror(e));
  }
  return MMT_OK;
}

bool rt_online_reap(pid_t pid) {
  if (pid <= 0) return true;
  int status;
  const pid_t r = waitpid(pid, &status, WNOHANG);
  return r == pid || (r < 0 && errno == ECHILD);
}
