/*
 * engine/multi.c -- `mmtune tune --device all|I,J,...`: every listed GPU of the node tunes, one
 * worker process each, fed from one plan.
 *
 * The plan (shapes x dtypes, or the process's --shard of it) is split among the GPUs of each model:
 * GPU j of n of a model runs `mmtune tune --device G --shard S/T` with S/T the j-th part of this
 * process's shard (I*n + j of N*n: a block within the block, cli/args.h), into a database of its
 * own beside the main one (DB.gpuG.db, started as a copy of the main one's rows, so the worker
 * resumes and its model sees every row), so each candidate is measured once per GPU model; GPUs of
 * different models tune their own rows (rows are keyed by model).  The parent prints every worker's
 * lines prefixed with its GPU, and it alone writes the main database: when the workers are done it
 * merges their databases into it (db_merge: one transaction) and removes them.
 *
 * A worker that fails (exits with an error or a signal: its device lost, the process killed)
 * is reported, its GPU is not used again, and its part goes to another GPU of the same model
 * when that one is free: the new worker resumes from the part's database, so no finished
 * measurement is lost or repeated.  With no GPU of the model left, the part stays unfinished:
 * the run exits 1 after merging what was measured, and running the same command again
 * completes it.  Ctrl-C reaches the workers (one process group): each saves what it measured,
 * the parent merges and exits 130.  A parent killed outright takes its workers with it
 * (PR_SET_PDEATHSIG); the parts' databases stay, and the same command resumes and merges them.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "db.h"
#include "engine/multi.h"
#include "rt_driver.h"

#define MAX_GPUS TN_MULTI_MAX_GPUS

typedef struct {
  int ordinal;
  char model[128];
  bool dead; /* its worker failed: not used again */
  int job;   /* the job it runs, -1 when free */
  pid_t pid;
  int fd; /* the worker's stdout and stderr */
  char line[1024];
  size_t len;
} gpu;

typedef struct {
  char model[128];
  tn_shard shard;
  char db[4160];
  bool done;
} job;

bool tn_multi_wanted(const char *device) {
  return device && (!strcmp(device, "all") || strchr(device, ','));
}

int tn_multi_parse_devices(const char *text, int count, int *out, int *n) {
  *n = 0;
  if (!strcmp(text, "all")) {
    for (int i = 0; i < count && i < MAX_GPUS; i++) out[(*n)++] = i;
    return TN_EXIT_OK;
  }
  for (const char *p = text; *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char item[24];
    int64_t v = -1;
    ut_err e;
    if (len == 0 || len >= sizeof item)
      return tn_usage_error("tune", "bad --device '%s': an empty or overlong entry", text);
    memcpy(item, p, len);
    item[len] = '\0';
    if (tn_parse_i64(item, "a device ordinal", 0, MAX_GPUS - 1, &v, &e) != MMT_OK)
      return tn_usage_error("tune", "bad --device '%s': %s", text, e.msg);
    for (int i = 0; i < *n; i++)
      if (out[i] == v) return tn_usage_error("tune", "bad --device '%s': %s twice", text, item);
    if (v >= count && count >= 0)
      return tn_usage_error("tune", "bad --device '%s': device %s requested but %d present",
                            text, item, count);
    out[(*n)++] = (int)v;
    p += len + (comma != NULL);
    if (comma && !*p) return tn_usage_error("tune", "bad --device '%s': an empty entry", text);
  }
  return TN_EXIT_OK;
}

char **tn_multi_worker_args(int argc, char **argv, int *n) {
  static const char *const drop[] = {"--device", "-d", "--shard", "--db"};
  char **args = calloc((size_t)argc + 8, sizeof *args);
  if (!args) return NULL;
  *n = 0;
  for (int i = 1; i < argc; i++) {
    bool skip = false;
    for (size_t d = 0; d < sizeof drop / sizeof drop[0] && !skip; d++) {
      size_t len = strlen(drop[d]);
      if (!strcmp(argv[i], drop[d])) skip = true, i++; /* and its value */
      else if (!strncmp(argv[i], drop[d], len) && argv[i][len] == '=') skip = true;
    }
    if (!skip) args[(*n)++] = argv[i];
  }
  return args;
}

/* Starts job j on GPU g: fork, exec this mmtune with the worker's options. */
static int start_worker(gpu *g, const job *jb, char **base, int nbase) {
  char device[16], shard[32];
  snprintf(device, sizeof device, "%d", g->ordinal);
  snprintf(shard, sizeof shard, "%d/%d", jb->shard.index, jb->shard.count);
  const char *args[160];
  int n = 0;
  args[n++] = "mmtune";
  args[n++] = "tune";
  for (int i = 0; i < nbase && n < 150; i++) args[n++] = base[i];
  args[n++] = "--device", args[n++] = device;
  args[n++] = "--shard", args[n++] = shard;
  args[n++] = "--db", args[n++] = jb->db;
  args[n] = NULL;
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return close(fds[0]), close(fds[1]), -1;
  if (pid == 0) {
    /* A worker dies with the parent: left running, it would go on writing its part's database
     * while a rerun's worker resumes from the same file.  (The parent may be gone already.) */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]), close(fds[1]);
    signal(SIGINT, SIG_DFL);
    execv("/proc/self/exe", (char *const *)args);
    fprintf(stderr, "cannot start a worker: %s\n", strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  g->pid = pid;
  g->fd = fds[0];
  g->len = 0;
  printf("[gpu %d] %s: part %s of the plan -> %s\n", g->ordinal, g->model, shard, jb->db);
  fflush(stdout);
  return 0;
}

/* Prints the worker's complete lines, prefixed; false at end of output. */
static bool pump(gpu *g) {
  char buf[4096];
  ssize_t got = read(g->fd, buf, sizeof buf);
  if (got < 0 && errno == EINTR) return true;
  if (got <= 0) {
    if (g->len) printf("[gpu %d] %.*s\n", g->ordinal, (int)g->len, g->line), g->len = 0;
    fflush(stdout);
    return false;
  }
  for (ssize_t i = 0; i < got; i++) {
    char c = buf[i];
    if (c == '\n' || c == '\r' || g->len == sizeof g->line - 1) {
      if (g->len) printf("[gpu %d] %.*s\n", g->ordinal, (int)g->len, g->line);
      g->len = 0;
      if (c == '\n' || c == '\r') continue;
    }
    g->line[g->len++] = c;
  }
  fflush(stdout);
  return true;
}

/* Gives free, live GPUs the pending jobs of their model. */
static void assign(gpu *gs, int ng, job *jobs, int nj, char **base, int nbase) {
  for (int j = 0; j < nj; j++) {
    bool running = false;
    for (int i = 0; i < ng; i++) running |= gs[i].job == j;
    if (jobs[j].done || running) continue;
    for (int i = 0; i < ng; i++)
      if (!gs[i].dead && gs[i].job < 0 && !strcmp(gs[i].model, jobs[j].model)) {
        if (start_worker(&gs[i], &jobs[j], base, nbase) == 0) gs[i].job = j;
        else gs[i].dead = true;
        break;
      }
  }
}

/* The worker of GPU g has ended with wait status st: its job is done, or goes back. */
static void reap(gpu *g, job *jobs, int st, bool *interrupted) {
  job *jb = &jobs[g->job];
  close(g->fd);
  g->job = -1;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    jb->done = true;
  } else if (WIFEXITED(st) && WEXITSTATUS(st) == 130) {
    *interrupted = true;
  } else {
    g->dead = true;
    printf("[gpu %d] worker failed (%s %d): the GPU is left out; its part goes to another "
           "GPU of the same model\n",
           g->ordinal, WIFEXITED(st) ? "exit status" : "signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    fflush(stdout);
  }
}

/* Starts each job's database as a copy of the main one's rows (when it has none yet), so its
 * worker skips what was measured before and its performance model fits on every row, not
 * only on its own part's. */
static int seed_parts(const char *main_db, job *jobs, int nj) {
  if (access(main_db, F_OK) != 0) return TN_EXIT_OK; /* a first run: nothing to copy */
  for (int j = 0; j < nj; j++) {
    if (access(jobs[j].db, F_OK) == 0) continue; /* resumed: it has its rows already */
    ut_err e;
    const char *src[] = {main_db};
    mmt_status rc = db_merge(jobs[j].db, src, 1, NULL, NULL, &e);
    if (rc) return tn_fail("tune", "cannot start '%s' from '%s': %s", jobs[j].db, main_db, e.msg);
  }
  return TN_EXIT_OK;
}

/* Merges the jobs' databases into the main one (every existing one: unfinished parts keep
 * what they measured), removing those merged from finished jobs. */
static int merge_parts(const char *main_db, job *jobs, int nj) {
  const char *srcs[MAX_GPUS];
  int n = 0;
  for (int j = 0; j < nj; j++)
    if (access(jobs[j].db, F_OK) == 0) srcs[n++] = jobs[j].db;
  if (n == 0) return TN_EXIT_OK;
  db_merge_stats st;
  ut_err e;
  /* the parts started as copies: their copies of the main file's search times are the main
   * file's origin's, which the merge does not count twice */
  mmt_status rc = db_merge(main_db, srcs, n, NULL, &st, &e);
  if (rc) return tn_fail("tune", "cannot merge the GPUs' results into '%s': %s", main_db, e.msg);
  printf("merged %d GPU database%s into %s: %lld rows added\n", n, n == 1 ? "" : "s", main_db,
         (long long)st.rows_added);
  for (int j = 0; j < nj; j++)
    if (jobs[j].done) {
      char wal[4200];
      unlink(jobs[j].db);
      snprintf(wal, sizeof wal, "%s-wal", jobs[j].db), unlink(wal);
      snprintf(wal, sizeof wal, "%s-shm", jobs[j].db), unlink(wal);
    }
  return TN_EXIT_OK;
}

int tn_tune_multi(int argc, char **argv, const char *devices, tn_shard shard, const char *db_path) {
  const rt_cu *cu = NULL;
  ut_err e;
  int count = 0, ords[MAX_GPUS], ng = 0;
  /* the list's syntax first (a usage error needs no driver), then against the devices */
  int ex = tn_multi_parse_devices(devices, -1, ords, &ng);
  if (ex) return ex;
  if (rt_driver(&cu, &e) != MMT_OK) return tn_fail("tune", "%s", e.msg);
  if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1)
    return tn_fail("tune", "no CUDA device present");
  if ((ex = tn_multi_parse_devices(devices, count, ords, &ng))) return ex;
  gpu gs[MAX_GPUS];
  job jobs[MAX_GPUS];
  int nj = 0;
  memset(gs, 0, sizeof gs);
  for (int i = 0; i < ng; i++) {
    CUdevice d;
    gs[i].ordinal = ords[i];
    gs[i].job = -1;
    if (cu->cuDeviceGet(&d, ords[i]) != CUDA_SUCCESS ||
        cu->cuDeviceGetName(gs[i].model, sizeof gs[i].model, d) != CUDA_SUCCESS)
      return tn_fail("tune", "cannot query device %d", ords[i]);
  }
  /* one job per GPU: GPU j of the n of its model gets part (I*n + j) of (N*n) */
  for (int i = 0; i < ng; i++) {
    int j = 0, n = 0;
    for (int k = 0; k < ng; k++)
      if (!strcmp(gs[k].model, gs[i].model)) j += k < i, n++;
    job *jb = &jobs[nj++];
    memset(jb, 0, sizeof *jb);
    snprintf(jb->model, sizeof jb->model, "%s", gs[i].model);
    jb->shard = (tn_shard){shard.index * n + j, shard.count * n};
    snprintf(jb->db, sizeof jb->db, "%s.gpu%d.db", db_path, gs[i].ordinal);
  }
  if ((ex = seed_parts(db_path, jobs, nj))) return ex;
  int nbase = 0;
  char **base = tn_multi_worker_args(argc, argv, &nbase);
  if (!base) return tn_fail("tune", "out of memory");
  printf("%d GPU%s: ", ng, ng == 1 ? "" : "s");
  for (int i = 0; i < ng; i++) printf("%s%d (%s)", i ? ", " : "", gs[i].ordinal, gs[i].model);
  printf("; results merged into %s\n", db_path);
  fflush(stdout);
  struct sigaction ignore = {.sa_handler = SIG_IGN}, old;
  sigaction(SIGINT, &ignore, &old); /* the workers get Ctrl-C and save; the parent merges */
  bool interrupted = false;
  assign(gs, ng, jobs, nj, base, nbase);
  for (;;) {
    struct pollfd pf[MAX_GPUS];
    int idx[MAX_GPUS], np = 0;
    for (int i = 0; i < ng; i++)
      if (gs[i].job >= 0) pf[np] = (struct pollfd){gs[i].fd, POLLIN, 0}, idx[np++] = i;
    if (np == 0) break;
    if (poll(pf, (nfds_t)np, -1) < 0 && errno != EINTR) break;
    for (int p = 0; p < np; p++) {
      gpu *g = &gs[idx[p]];
      if (!(pf[p].revents & (POLLIN | POLLHUP | POLLERR)) || pump(g)) continue;
      int st = 0;
      while (waitpid(g->pid, &st, 0) < 0 && errno == EINTR) {
      }
      reap(g, jobs, st, &interrupted);
    }
    if (!interrupted) assign(gs, ng, jobs, nj, base, nbase);
  }
  sigaction(SIGINT, &old, NULL);
  free(base);
  int unfinished = 0;
  for (int j = 0; j < nj; j++) unfinished += !jobs[j].done;
  ex = merge_parts(db_path, jobs, nj);
  if (ex) return ex;
  if (interrupted) return 130;
  if (unfinished)
    return tn_fail("tune", "%d part%s of the plan unfinished (no working GPU of the model left): "
                           "run the same command again to complete %s",
                   unfinished, unfinished == 1 ? "" : "s", unfinished == 1 ? "it" : "them");
  return TN_EXIT_OK;
}
