/* gpu/worker.c -- see gpu/worker.h.  The wire format is raw structs: both ends are the same
 * binary.  Every message is a header then `size` payload bytes. */
#include "gpu/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"

#define WIRE_MAGIC 0x6d6d7475u /* "mmtu" */
#define CHILD_IN_FD 100
#define CHILD_OUT_FD 101

enum { MSG_INFO = 1, MSG_MEASURE, MSG_RESULT, MSG_QUIT };

typedef struct {
  uint32_t magic, type;
  uint64_t size;
} wire_head;

typedef struct {
  int32_t rc;
  char msg[1024];
  db_device device;
  char arch[16];
  char guard_note[256]; /* tn_gpu_guard_note, "" when verification has guard pages */
} wire_info;

typedef struct {
  tn_measure_opts opts;
  char kernel_name[256];
  gen_kernel spec; /* every launch field; its pointers (source, kernel_name) are NULL */
} wire_job; /* followed by the cubin */

typedef struct {
  int32_t rc;
  char msg[1024];
  tn_measurement m;
} wire_result;

struct tn_worker {
  pid_t pid; /* 0: none running */
  int to_child, from_child;
  int ordinal;
  char *cache_dir;
  double watchdog_s;
  char guard_note[256]; /* from the last worker started */
};

/* ---- I/O with deadlines -------------------------------------------------------------- */

static int write_full(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Reads exactly len bytes before `deadline` (ut_now_seconds; <= 0: no deadline).
 * Returns 0, -1 on EOF/error, -2 on timeout. */
static int read_full(int fd, void *buf, size_t len, double deadline) {
  char *p = buf;
  while (len > 0) {
    if (deadline > 0) {
      double left = deadline - ut_now_seconds();
      if (left <= 0) return -2;
      struct pollfd pfd = {.fd = fd, .events = POLLIN};
      int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) return -2;
      if (pr < 0) return -1;
    }
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int send_msg(int fd, uint32_t type, const void *a, size_t alen, const void *b, size_t blen) {
  wire_head h = {WIRE_MAGIC, type, alen + blen};
  if (write_full(fd, &h, sizeof h)) return -1;
  if (alen && write_full(fd, a, alen)) return -1;
  if (blen && write_full(fd, b, blen)) return -1;
  return 0;
}

/* ---- the worker process -------------------------------------------------------------- */

static int worker_serve_one(tn_gpu *g, int in, int out, const wire_head *h) {
  wire_job job;
  wire_result res;
  memset(&res, 0, sizeof res);
  if (h->size < sizeof job || h->size - sizeof job > (1u << 30)) return -1;
  size_t cubin_size = h->size - sizeof job;
  rt_cubin cubin = {malloc(cubin_size), cubin_size};
  if (!cubin.data || read_full(in, &job, sizeof job, 0) || read_full(in, cubin.data, cubin_size, 0)) {
    rt_cubin_free(&cubin);
    return -1;
  }
  gen_kernel spec = job.spec;
  spec.source = NULL;
  spec.kernel_name = job.kernel_name;
  job.kernel_name[sizeof job.kernel_name - 1] = '\0';
  ut_err err = {{0}};
  mmt_status rc = tn_gpu_measure(g, &cubin, &spec, &job.opts, &res.m, &err);
  rt_cubin_free(&cubin);
  if (rc == MMT_ERR_FAULT) {
    res.m.status = DB_FAULT;
    ut_copy(res.m.error, sizeof res.m.error, err.msg);
    rc = MMT_OK;
  }
  res.rc = rc;
  snprintf(res.msg, sizeof res.msg, "%s", err.msg);
  if (send_msg(out, MSG_RESULT, &res, sizeof res, NULL, 0)) return -1;
  return res.m.status == DB_FAULT ? 1 : 0; /* a faulted context is dead: exit */
}

int tn_cmd_worker(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "mmtune __worker: internal command, started by the tuner\n");
    return TN_EXIT_USAGE;
  }
  signal(SIGINT, SIG_IGN); /* the tuner decides when to stop; it kills us if needed */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int in = CHILD_IN_FD, out = CHILD_OUT_FD;
  const char *cache_dir = strcmp(argv[2], "-") ? argv[2] : NULL;
  wire_info info;
  memset(&info, 0, sizeof info);
  ut_err err = {{0}};
  tn_gpu *g = NULL;
  int64_t ordinal = 0;
  info.rc = tn_parse_i64(argv[1], "device", 0, 1 << 20, &ordinal, &err);
  if (!info.rc) info.rc = tn_gpu_open((int)ordinal, cache_dir, &g, &err);
  if (!info.rc) {
    info.device = tn_gpu_device(g)->info;
    memcpy(info.arch, tn_gpu_device(g)->arch, sizeof info.arch);
    const char *note = tn_gpu_guard_note(g);
    ut_copy(info.guard_note, sizeof info.guard_note, note ? note : "");
  }
  snprintf(info.msg, sizeof info.msg, "%s", err.msg);
  int status = send_msg(out, MSG_INFO, &info, sizeof info, NULL, 0) || info.rc ? 1 : 0;
  while (status == 0) {
    wire_head h;
    if (read_full(in, &h, sizeof h, 0) || h.magic != WIRE_MAGIC || h.type != MSG_MEASURE) break;
    status = worker_serve_one(g, in, out, &h);
  }
  /* After a fault the context is unusable; leave without touching it. */
  if (status == 0) tn_gpu_close(g);
  _exit(status > 0 ? 3 : 0);
}

/* ---- the tuner's side ---------------------------------------------------------------- */

static void worker_kill(tn_worker *w) {
  if (w->pid > 0) {
    kill(w->pid, SIGKILL);
    while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  if (w->to_child >= 0) close(w->to_child);
  if (w->from_child >= 0) close(w->from_child);
  w->pid = 0;
  w->to_child = w->from_child = -1;
}

static void child_exec(int in, int out, int ordinal, const char *cache_dir) {
  char exe[4096], dev[32];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0 || dup2(in, CHILD_IN_FD) < 0 || dup2(out, CHILD_OUT_FD) < 0) _exit(127);
  exe[n] = '\0';
  snprintf(dev, sizeof dev, "%d", ordinal);
  execl(exe, exe, "__worker", dev, cache_dir ? cache_dir : "-", (char *)NULL);
  _exit(127);
}

/* Forks and execs a worker, then waits for its INFO message. */
static mmt_status worker_spawn(tn_worker *w, db_device *info, char arch[16], ut_err *err) {
  int down[2], up[2];
  if (pipe2(down, O_CLOEXEC)) return ut_fail(err, MMT_ERR_IO, "pipe: %s", strerror(errno));
  if (pipe2(up, O_CLOEXEC)) {
    close(down[0]);
    close(down[1]);
    return ut_fail(err, MMT_ERR_IO, "pipe: %s", strerror(errno));
  }
  pid_t pid = fork();
  if (pid == 0) child_exec(down[0], up[1], w->ordinal, w->cache_dir);
  close(down[0]);
  close(up[1]);
  w->to_child = down[1];
  w->from_child = up[0];
  if (pid < 0) {
    worker_kill(w);
    return ut_fail(err, MMT_ERR_IO, "cannot start the GPU worker: %s", strerror(errno));
  }
  w->pid = pid;
  wire_head h;
  wire_info wi;
  /* Opening the device and compiling helpers can take a while on a cold cache. */
  double deadline = ut_now_seconds() + 120;
  if (read_full(w->from_child, &h, sizeof h, deadline) || h.magic != WIRE_MAGIC ||
      h.type != MSG_INFO || h.size != sizeof wi || read_full(w->from_child, &wi, sizeof wi, deadline)) {
    worker_kill(w);
    return ut_fail(err, MMT_ERR_CUDA, "the GPU worker did not start");
  }
  if (wi.rc != MMT_OK) {
    worker_kill(w);
    return ut_fail(err, (mmt_status)wi.rc, "%s", wi.msg);
  }
  if (info) *info = wi.device;
  if (arch) memcpy(arch, wi.arch, 16);
  wi.guard_note[sizeof wi.guard_note - 1] = '\0';
  memcpy(w->guard_note, wi.guard_note, sizeof w->guard_note);
  return MMT_OK;
}

mmt_status tn_worker_start(int ordinal, const char *cache_dir, double watchdog_s, tn_worker **out,
                           db_device *info, char arch[16], ut_err *err) {
  *out = NULL;
  tn_worker *w = calloc(1, sizeof *w);
  if (!w) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  w->to_child = w->from_child = -1;
  w->ordinal = ordinal;
  w->watchdog_s = watchdog_s > 0 ? watchdog_s : 60;
  w->cache_dir = ut_strdup(cache_dir);
  signal(SIGPIPE, SIG_IGN); /* a dead worker must not kill the tuner */
  mmt_status rc = worker_spawn(w, info, arch, err);
  if (rc) {
    tn_worker_stop(w);
    return rc;
  }
  *out = w;
  return MMT_OK;
}

/* Reaps a worker that closed its pipe and describes how it ended. */
static void describe_death(tn_worker *w, tn_measurement *out) {
  int st = 0;
  pid_t r;
  while ((r = waitpid(w->pid, &st, 0)) < 0 && errno == EINTR) {
  }
  w->pid = 0;
  worker_kill(w);
  out->status = DB_FAULT;
  if (r > 0 && WIFSIGNALED(st))
    snprintf(out->error, sizeof out->error, "worker died from signal %d", WTERMSIG(st));
  else
    snprintf(out->error, sizeof out->error, "worker exited (status %d) without a result",
             r > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

mmt_status tn_worker_measure(tn_worker *w, const rt_cubin *cubin, const gen_kernel *spec,
                             const tn_measure_opts *opts, tn_measurement *out, ut_err *err) {
  memset(out, 0, sizeof *out);
  out->regs = out->shared_bytes = out->local_bytes = -1; /* unknown unless the worker says */
  mmt_status rc;
  if (w->pid == 0 && (rc = worker_spawn(w, NULL, NULL, err))) return rc;
  wire_job job;
  memset(&job, 0, sizeof job);
  job.opts = *opts;
  if ((rc = ut_snprintf(job.kernel_name, sizeof job.kernel_name, err, "%s", spec->kernel_name)))
    return rc;
  job.spec = *spec;
  job.spec.source = NULL;
  job.spec.kernel_name = NULL;
  if (send_msg(w->to_child, MSG_MEASURE, &job, sizeof job, cubin->data, cubin->size)) {
    describe_death(w, out);
    return MMT_OK;
  }
  wire_head h;
  wire_result res;
  double deadline = ut_now_seconds() + w->watchdog_s;
  int r = read_full(w->from_child, &h, sizeof h, deadline);
  if (r == 0 && (h.magic != WIRE_MAGIC || h.type != MSG_RESULT || h.size != sizeof res)) r = -1;
  if (r == 0) r = read_full(w->from_child, &res, sizeof res, deadline);
  if (r == -2) {
    worker_kill(w);
    out->status = DB_TIMEOUT;
    snprintf(out->error, sizeof out->error, "no result within the %.0f s watchdog; worker killed",
             w->watchdog_s);
    return MMT_OK;
  }
  if (r != 0) {
    describe_death(w, out);
    return MMT_OK;
  }
  *out = res.m;
  if (out->status == DB_FAULT) describe_death(w, &(tn_measurement){0}); /* it exits: reap it */
  if (res.rc != MMT_OK) return ut_fail(err, (mmt_status)res.rc, "%s", res.msg);
  return MMT_OK;
}

const char *tn_worker_guard_note(const tn_worker *w) {
  return w->guard_note[0] ? w->guard_note : NULL;
}

void tn_worker_stop(tn_worker *w) {
  if (!w) return;
  if (w->pid > 0) {
    close(w->to_child); /* EOF: the worker leaves its loop and exits */
    w->to_child = -1;
    double deadline = ut_now_seconds() + 5;
    int st;
    pid_t r;
    while ((r = waitpid(w->pid, &st, WNOHANG)) == 0 && ut_now_seconds() < deadline) usleep(10000);
    if (r == w->pid) w->pid = 0; /* reaped: nothing left to kill */
    worker_kill(w);
  }
  if (w->from_child >= 0) close(w->from_child);
  free(w->cache_dir);
  free(w);
}
