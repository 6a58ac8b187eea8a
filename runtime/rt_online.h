/*
 * rt_online.h -- online tuning's worker (mmt_options.online): a `mmtune tune --recorded`
 * process started beside the application, one a database at a time.  Prefix rt_online_.
 *
 * The worker is a process of its own, never a thread of the application: a candidate kernel
 * that faults or hangs kills or stalls the worker, not the caller.  One database has at most
 * one worker, across threads, contexts and processes: the starter takes an exclusive flock
 * on the lock file (the database's path + ".online.lock") and hands the locked file to the
 * worker as its descriptor 3, so the lock lives exactly as long as the worker does; a start
 * that finds the lock held starts nothing.  The worker's output goes to the log file.
 */
#ifndef MMT_RT_ONLINE_H
#define MMT_RT_ONLINE_H

#include <stdbool.h>
#include <sys/types.h>

#include "mmtune.h"
#include "util.h"

/* Compile threads a worker uses (`--jobs`): it shares the machine with the application. */
#define RT_ONLINE_JOBS 2
/* Seconds of search a recorded problem gets by default (`--budget`, counted across runs). */
#define RT_ONLINE_BUDGET_S 5.0

typedef struct {
  const char *tuner;     /* the mmtune executable: a path, or a name looked up in PATH */
  const char *db_path;   /* the database the application records into */
  const char *cache_dir; /* the cubin cache (NULL: the tuner's default) */
  int device;            /* CUDA ordinal, as the application numbers its devices */
  double budget_s;       /* search seconds a problem (> 0) */
} rt_online_worker;

/* Starts w's worker unless one holds the database's lock: *pid is the worker's (0 when none
 * was started: another holds the lock).  The caller reaps it (rt_online_reap).  Errors:
 * MMT_ERR_NOT_FOUND (no tuner by that name), MMT_ERR_IO (the lock or log file cannot be
 * opened, the process cannot be started), MMT_ERR_INVALID_ARG (a field missing or out of
 * range); the message names the file or the tuner. */
mmt_status rt_online_start(const rt_online_worker *w, const char *log_path, pid_t *pid,
                           ut_err *err);

/* Whether worker pid has ended (and is reaped, without waiting); true for pid 0. */
bool rt_online_reap(pid_t pid);

/* The lock file of database db_path into out[len] (false: too long). */
bool rt_online_lock_path(const char *db_path, char *out, size_t len);

#endif /* MMT_RT_ONLINE_H */
