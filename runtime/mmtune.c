/*
 * mmtune.c -- the public API (include/mmtune.h): contexts, the dispatch cache, mmt_gemm,
 * mmt_matmul, mmt_quantize.
 *
 * A context caches, per problem key (the kernel problem of rt_gemm.h: M, N, K, leading
 * dimensions, layout, dtype, alignment), the loaded kernel and the description of its
 * choice, in an open-addressing table with linear probing (load at most 1/2, doubled when
 * full).  Loaded modules are shared: every problem whose choice has the same template,
 * params, dtype and layout launches the same module; each is allocated once and never moves,
 * so a launch can use it outside the lock.  mmt_matmul_prepare fills the cache ahead of the
 * calls, compiling on threads of its own with the lock released.  A warm mmt_gemm checks its
 * arguments, probes the table under the context's mutex, and launches: no SQL, no Lua, no
 * NVRTC and no allocation.  A problem's choice is made once per context, at its first call; rows the
 * tuner adds to the database afterwards do not change it, except in online mode
 * (mmt_options.online), where a call finding new results drops the choices whose problem now
 * has a best row other than the one they launch (online_stale).
 *
 * Threads: the mutex guards the table, the modules list, the chooser (Lua states) and the
 * database handle; a miss (choose, compile, load) holds it, so concurrent first calls wait
 * for each other.  Launches of ordinary kernels happen after it is released; those of
 * exclusive kernels (split-K counters, rt_device.h) under it, so that the wait-launch-record
 * sequence of one is never interleaved with another's.  Error messages are per thread.
 *
 * alpha == 0 and K == 0 launch the chosen kernel with K = 0: by the kernel ABI (gen.h) it
 * computes C = alpha * (an empty sum) + beta * C without reading A or B, stream-ordered like
 * any other call (a driver memset would not be ordered on the caller's stream, and rows with
 * ldc > N would need a 2D memset the driver table lacks).
 */
#include "mmtune.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "gen.h"
#include "rt_choose.h"
#include "rt_compile.h"
#include "rt_device.h"
#include "rt_gemm.h"
#include "rt_matmul.h"
#include "rt_online.h"
#include "rt_quantize.h"
#include "util.h"

/* Everything a choice depends on besides the device and the database.  No padding: keys are
 * compared with memcmp and hashed as bytes. */
typedef struct {
  int64_t m, n, k, lda, ldb, ldc, align;
  int64_t dtype;  /* mmt_dtype */
  int64_t layout; /* gen_layout_index */
  int64_t op;     /* rt_op_code: 0 for the plain GEMM */
  int64_t batch;  /* op kernels: the problems of a call; 1 otherwise */
  int64_t block_m; /* a masked grouped call: the bucket of its blocks' rows (gen_problem's) */
} problem_key;

/* One cached problem: the kernel it launches and how it was chosen. */
typedef struct {
  bool used;
  problem_key key;
  struct loaded_kernel *kernel;
  mmt_choice choice;
} problem_slot;

/* One loaded module, shared by every problem whose choice has this template, params, dtype,
 * layout and op (the emitted source depends on all five).  Heap-allocated once: never moves. */
typedef struct loaded_kernel {
  char template_name[GEN_NAME_MAX];
  char params[MMT_PARAMS_MAX];
  int64_t dtype, layout, op;
  rt_kernel k;
} loaded_kernel;

struct mmt_context {
  mmt_status open_rc; /* how mmt_open ended: only an MMT_OK context dispatches */
  ut_err open_err;    /* its message when it failed */
  mmt_log_fn log;
  void *log_user;
  mmt_log_level log_level;
  bool lock_ok; /* lock initialized */
  pthread_mutex_t lock;
  /* Guarded by lock from here on. */
  bool dev_open;
  bool record; /* mmt_options.record: the database is open for writing */
  rt_device dev;
  db_handle *db;   /* NULL: no database file (every choice is a DEFAULT) */
  char *cache_dir; /* NULL: no cubin cache */
  rt_chooser *chooser;
  problem_slot *slots; /* slot_cap is 0 or a power of two */
  int slot_cap, slot_count;
  loaded_kernel **kernels;
  int kernel_cap, kernel_count;
  uint64_t hits, misses;
  _Atomic uint64_t launches; /* counted outside the lock */
  rt_quantizer quant; /* mmt_quantize's kernels, loaded at its first call, then never changed */
  /* Grouped calls' error word (mmtune.h, "Grouped"): pinned host memory the kernels write
   * through its device address, so a call reads it without a sync; made under the lock at
   * the first grouped call, then published (atomic stores) and never changed. */
  int *group_error;
  CUdeviceptr group_error_dev;
  /* Online tuning (mmt_options.online): the worker this context started and what it needs. */
  bool online;
  char *db_path, *tuner, *worker_log; /* the database's real path; log "/dev/null": none */
  double online_budget;
  int device;
  pid_t worker;         /* 0: none running that this context started */
  bool worker_wanted;   /* problems recorded since the last worker started */
  bool worker_failed;   /* a start failed: not tried again */
  double next_poll;     /* ut_now_seconds() of the next check */
  int64_t results_id;   /* the results table's largest id the choices have seen */
  int64_t results_seen; /* its value at the last check, and when it last changed */
  double results_changed_at;
};

/* How often a call checks for a worker to start and for new results (online), and how long
 * new results must have stopped coming before the choices take them. */
#define ONLINE_POLL_S 0.2
#define ONLINE_SETTLE_S 1.0

static void group_error_free(mmt_context *ctx);

/* ---- errors and logging ---- */

/* The calling thread's last failure, and the context it happened on. */
static _Thread_local struct {
  const mmt_context *ctx;
  ut_err err;
} t_last;

/* The calling thread's error for a new call on ctx, cleared. */
static ut_err *call_err(const mmt_context *ctx) {
  t_last.ctx = ctx;
  ut_err_clear(&t_last.err);
  return &t_last.err;
}

__attribute__((format(printf, 3, 4))) static void log_line(const mmt_context *ctx,
                                                            mmt_log_level level, const char *fmt,
                                                            ...) {
  if (!ctx->log || level > ctx->log_level) return;
  char line[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  ctx->log(ctx->log_user, level, line);
}

/* The end of a public call: a failure goes to the log too. */
static mmt_status finish(const mmt_context *ctx, const char *fn, mmt_status rc, const ut_err *err) {
  if (rc) log_line(ctx, MMT_LOG_ERROR, "%s: %s: %s", fn, mmt_status_name(rc), err->msg);
  return rc;
}

/* ---- opening and closing ---- */

static mmt_status open_db(mmt_context *ctx, const char *path, ut_err *err) {
  char buf[4096];
  mmt_status rc;
  if (path && !*path) { /* asked for no database */
    if (ctx->record)
      return ut_fail(err, MMT_ERR_INVALID_ARG,
                     "options->%s needs a database to record into, but db_path is \"\"",
                     ctx->online ? "online" : "record");
    log_line(ctx, MMT_LOG_INFO, "no database (db_path \"\"): template defaults");
    return MMT_OK;
  }
  if (!path) {
    rc = ut_default_db_path(buf, sizeof buf, err);
    if (rc == MMT_ERR_NOT_FOUND) { /* neither HOME nor XDG_CACHE_HOME: no database */
      ut_err_clear(err);
      log_line(ctx, MMT_LOG_WARN, "no HOME or XDG_CACHE_HOME: no database, template defaults");
      return MMT_OK;
    }
    if (rc) return rc;
    path = buf;
  }
  rc = db_open(path, !ctx->record, &ctx->db, err); /* recording makes it if missing */
  if (rc == MMT_ERR_NOT_FOUND) { /* never tuned: template defaults */
    ctx->db = NULL;
    ut_err_clear(err);
    log_line(ctx, MMT_LOG_INFO, "no database at %s: template defaults (run mmtune to tune)", path);
    return MMT_OK;
  }
  if (rc) {
    ut_err_prefix(err, "database '%s'", path);
    return rc;
  }
  if (ctx->online) { /* the worker's database, whatever the application's folder then */
    ctx->db_path = realpath(path, NULL);
    if (!ctx->db_path && !(ctx->db_path = strdup(path)))
      return ut_fail(err, MMT_ERR_NOMEM, "out of memory opening mmtune");
  }
  return MMT_OK;
}

static mmt_status open_cache_dir(mmt_context *ctx, const char *dir, ut_err *err) {
  char buf[4096];
  if (!dir) {
    if (ut_default_cubin_dir(buf, sizeof buf, err) != MMT_OK) { /* no HOME: no cache */
      ut_err_clear(err);
      return MMT_OK;
    }
    dir = buf;
  }
  ctx->cache_dir = strdup(dir);
  if (!ctx->cache_dir) return ut_fail(err, MMT_ERR_NOMEM, "out of memory opening mmtune");
  return MMT_OK;
}

/* Frees what the context holds (a context whose open failed is released at once, then again
 * by mmt_close: everything is left NULL / zero). */
static void release(mmt_context *ctx) {
  for (int i = 0; i < ctx->kernel_count; i++) {
    rt_kernel_unload(&ctx->kernels[i]->k);
    free(ctx->kernels[i]);
  }
  free(ctx->kernels);
  free(ctx->slots);
  rt_chooser_free(ctx->chooser);
  db_close(ctx->db);
  free(ctx->cache_dir);
  rt_quantizer_unload(&ctx->quant);
  group_error_free(ctx);
  rt_online_reap(ctx->worker); /* reaped if it has ended; else it finishes on its own */
  free(ctx->db_path);
  free(ctx->tuner);
  free(ctx->worker_log);
  ctx->db_path = ctx->tuner = ctx->worker_log = NULL;
  ctx->worker = 0;
  if (ctx->dev_open) rt_device_close(&ctx->dev);
  ctx->kernels = NULL;
  ctx->slots = NULL;
  ctx->chooser = NULL;
  ctx->db = NULL;
  ctx->cache_dir = NULL;
  ctx->dev_open = false;
  ctx->kernel_count = ctx->kernel_cap = ctx->slot_count = ctx->slot_cap = 0;
}

/* The online worker's tuner, budget, device and log (mmt_options.online). */
static mmt_status online_options(mmt_context *ctx, int device, const mmt_options *o, ut_err *err) {
  if (!(o->online_budget >= 0) || o->online_budget > 1e6)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "options->online_budget must be 0 (the default) or seconds up to 1e6, got %g",
                   o->online_budget);
  const char *tuner = o->tuner ? o->tuner : getenv("MMTUNE_TUNER");
  if (!tuner || !*tuner) tuner = "mmtune";
  ctx->online_budget = o->online_budget > 0 ? o->online_budget : RT_ONLINE_BUDGET_S;
  ctx->device = device;
  if (!(ctx->tuner = strdup(tuner)))
    return ut_fail(err, MMT_ERR_NOMEM, "out of memory opening mmtune");
  return MMT_OK;
}

/* The worker's log (in the cubin cache folder, else none) and the results it starts from. */
static mmt_status online_start_state(mmt_context *ctx, ut_err *err) {
  static const char name[] = "/online-worker.log";
  const char *dir = ctx->cache_dir ? ctx->cache_dir : "";
  const size_t len = ctx->cache_dir ? strlen(dir) + sizeof name : sizeof "/dev/null";
  if (!(ctx->worker_log = malloc(len))) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  snprintf(ctx->worker_log, len, "%s%s", ctx->cache_dir ? dir : "/dev/null",
           ctx->cache_dir ? name : "");
  ut_err e;
  if (ctx->cache_dir) ut_mkdir_p(ctx->cache_dir, &e); /* the log's folder; a failure: its open's */
  uint64_t files;
  if (ctx->db && db_rows_stamp(ctx->db, &ctx->results_id, &files, &e)) ctx->results_id = 0;
  ctx->results_seen = ctx->results_id;
  return MMT_OK;
}

/* $MMTUNE_RECORD and $MMTUNE_ONLINE: "1" turns recording (online tuning) on where the options
 * leave it off, so that the callers that open a context without options of their own -- the
 * BLAS shim, Python's module-level calls, mmtune.torch's operators -- can record too; "0" or
 * unset changes nothing, and so does a context opened without a database (db_path "").
 * Anything else is refused rather than guessed at. */
static mmt_status env_switch(const char *name, const mmt_options *o, int *on, ut_err *err) {
  const char *v = getenv(name);
  if (o->db_path && !*o->db_path) return MMT_OK; /* no database asked for: nothing to record in */
  if (!v || !*v || !strcmp(v, "0")) return MMT_OK;
  if (strcmp(v, "1"))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "$%s must be 0 or 1, got \"%.40s\"", name, v);
  *on = 1;
  return MMT_OK;
}

mmt_status mmt_open(mmt_context **out, int device, const mmt_options *options) {
  if (!out) return MMT_ERR_INVALID_ARG;
  mmt_context *ctx = calloc(1, sizeof *ctx);
  *out = ctx;
  if (!ctx) return MMT_ERR_NOMEM;
  ut_err *err = &ctx->open_err;
  mmt_options o = options ? *options : (mmt_options){0};
  ctx->log = o.log;
  ctx->log_user = o.log_user;
  ctx->log_level = o.log_level;
  mmt_status rc = env_switch("MMTUNE_RECORD", &o, &o.record, err);
  if (!rc) rc = env_switch("MMTUNE_ONLINE", &o, &o.online, err);
  ctx->record = o.record != 0 || o.online != 0;
  ctx->online = o.online != 0;
  if (!rc && ctx->online) rc = online_options(ctx, device, &o, err);
  if (!rc && pthread_mutex_init(&ctx->lock, NULL) != 0)
    rc = ut_fail(err, MMT_ERR_NOMEM, "cannot create the context's mutex");
  ctx->lock_ok = rc == MMT_OK;
  /* The database first: a corrupt file is reported even on a machine without a GPU. */
  if (!rc) rc = open_db(ctx, o.db_path, err);
  if (!rc) rc = open_cache_dir(ctx, o.cache_dir, err);
  if (!rc) rc = rt_device_open(device, &ctx->dev, err);
  if (!rc) ctx->dev_open = true;
  /* After the device: the chooser refuses kernels its architecture cannot run. */
  if (!rc) rc = rt_chooser_new(ctx->dev.arch, ctx->dev.info.sm_count, &ctx->chooser, err);
  if (!rc) rt_chooser_set_device(ctx->chooser, &ctx->dev.limits); /* before any template */
  /* the model's fits beside the cubins: a process's first choice reads one */
  if (!rc) rc = rt_chooser_set_fit_cache(ctx->chooser, ctx->cache_dir, err);
  /* the model and the templates now, so that a call's choice is a ranking */
  if (!rc) rc = rt_chooser_prepare(ctx->chooser, ctx->db, ctx->dev.info.name, err);
  if (!rc && ctx->online) rc = online_start_state(ctx, err);
  ctx->open_rc = rc;
  if (rc) {
    release(ctx);
    return finish(ctx, "mmt_open", rc, err);
  }
  log_line(ctx, MMT_LOG_INFO, "device %d: %s (%s); cubin cache %s", device, ctx->dev.info.name,
           ctx->dev.arch, ctx->cache_dir ? ctx->cache_dir : "off");
  return MMT_OK;
}

void mmt_close(mmt_context *ctx) {
  if (!ctx) return;
  release(ctx);
  if (ctx->lock_ok) pthread_mutex_destroy(&ctx->lock);
  if (t_last.ctx == ctx) t_last.ctx = NULL;
  free(ctx);
}

const char *mmt_errmsg(const mmt_context *ctx) {
  if (!ctx) return "no context (mmt_open could not allocate one)";
  if (t_last.ctx == ctx && t_last.err.msg[0]) return t_last.err.msg;
  return ctx->open_rc ? ctx->open_err.msg : "";
}

const char *mmt_choice_kind_name(mmt_choice_kind kind) {
  switch (kind) {
    case MMT_CHOICE_EXACT: return "exact";
    case MMT_CHOICE_PREDICTED: return "predicted";
    case MMT_CHOICE_DEFAULT: return "default";
  }
  return "unknown";
}

const char *mmt_dtype_name(mmt_dtype dtype) {
  const rt_dtype_info *d = rt_dtype(dtype);
  return d ? d->name : NULL;
}

void rt_dispatch_get_stats(const mmt_context *ctx, rt_dispatch_stats *out) {
  memset(out, 0, sizeof *out);
  if (!ctx) return;
  mmt_context *c = (mmt_context *)ctx; /* the mutex is not logically part of the state */
  if (c->lock_ok) pthread_mutex_lock(&c->lock);
  out->launches = atomic_load(&c->launches);
  out->hits = c->hits;
  out->misses = c->misses;
  out->problems = c->slot_count;
  out->kernels = c->kernel_count;
  for (int i = 0; i < c->kernel_count; i++) {
    const rt_workspace *ws = c->kernels[i]->k.ws;
    if (ws) out->workspace_allocs += ws->allocs, out->workspace_bytes += ws->bytes;
    if (c->kernels[i]->k.trail) out->exclusive_waits += c->kernels[i]->k.trail->waits;
  }
  if (c->lock_ok) pthread_mutex_unlock(&c->lock);
}

/* A context whose mmt_open failed holds only its message. */
static mmt_status check_open(const mmt_context *ctx, ut_err *err) {
  if (ctx->open_rc == MMT_OK) return MMT_OK;
  return ut_fail(err, ctx->open_rc, "the context did not open (%s: %s): only mmt_errmsg and "
                 "mmt_close apply", mmt_status_name(ctx->open_rc), ctx->open_err.msg);
}

/* ---- the problem cache (callers hold the lock) ---- */

static problem_slot *slot_find(const mmt_context *ctx, const problem_key *key) {
  if (!ctx->slot_cap) return NULL;
  size_t mask = (size_t)ctx->slot_cap - 1;
  for (size_t i = ut_hash64(key, sizeof *key) & mask;; i = (i + 1) & mask) {
    problem_slot *s = &ctx->slots[i];
    if (!s->used) return NULL; /* load <= 1/2: an empty slot always ends the probe */
    if (memcmp(&s->key, key, sizeof *key) == 0) return s;
  }
}

/* The empty slot for key in a table that has room. */
static problem_slot *slot_free(problem_slot *slots, int cap, const problem_key *key) {
  size_t mask = (size_t)cap - 1, i = ut_hash64(key, sizeof *key) & mask;
  while (slots[i].used) i = (i + 1) & mask;
  return &slots[i];
}

static mmt_status slots_grow(mmt_context *ctx, ut_err *err) {
  int cap = ctx->slot_cap ? 2 * ctx->slot_cap : 64;
  problem_slot *slots = calloc((size_t)cap, sizeof *slots);
  if (!slots) return ut_fail(err, MMT_ERR_NOMEM, "out of memory growing the kernel cache");
  for (int i = 0; i < ctx->slot_cap; i++)
    if (ctx->slots[i].used) *slot_free(slots, cap, &ctx->slots[i].key) = ctx->slots[i];
  free(ctx->slots);
  ctx->slots = slots;
  ctx->slot_cap = cap;
  return MMT_OK;
}

static mmt_status slot_insert(mmt_context *ctx, const problem_key *key, loaded_kernel *kernel,
                              const mmt_choice *choice, problem_slot **out, ut_err *err) {
  if (2 * (ctx->slot_count + 1) > ctx->slot_cap) {
    mmt_status rc = slots_grow(ctx, err);
    if (rc) return rc;
  }
  problem_slot *s = slot_free(ctx->slots, ctx->slot_cap, key);
  *s = (problem_slot){.used = true, .key = *key, .kernel = kernel, .choice = *choice};
  ctx->slot_count++;
  *out = s;
  return MMT_OK;
}

/* Whether the module of template tname and params for (dtype, layout, op) is the one choice
 * ch needs for key: the emitted source depends on all five. */
static bool module_serves(const char *tname, const char *params, int64_t dtype, int64_t layout,
                          int64_t op, const rt_choice *ch, const problem_key *key) {
  return !strcmp(tname, ch->template_name) && !strcmp(params, ch->params) && dtype == key->dtype &&
         layout == key->layout && op == key->op;
}

/* The loaded module choice ch needs for key; NULL when there is none. */
static loaded_kernel *kernel_find(const mmt_context *ctx, const rt_choice *ch,
                                  const problem_key *key) {
  for (int i = 0; i < ctx->kernel_count; i++) {
    loaded_kernel *lk = ctx->kernels[i];
    if (module_serves(lk->template_name, lk->params, lk->dtype, lk->layout, lk->op, ch, key))
      return lk;
  }
  return NULL;
}

/* The loaded module for a choice: kernel_find's, else loaded now from `compiled` (its cubin,
 * when the caller compiled it; NULL: compiled here, through the cubin cache). */
static mmt_status kernel_get(mmt_context *ctx, const rt_choice *ch, const problem_key *key,
                             const rt_cubin *compiled, loaded_kernel **out, ut_err *err) {
  if ((*out = kernel_find(ctx, ch, key))) return MMT_OK;
  if (ctx->kernel_count == ctx->kernel_cap) {
    int cap = ctx->kernel_cap ? 2 * ctx->kernel_cap : 8;
    loaded_kernel **v = realloc(ctx->kernels, (size_t)cap * sizeof *v);
    if (!v) return ut_fail(err, MMT_ERR_NOMEM, "out of memory loading a kernel");
    ctx->kernels = v;
    ctx->kernel_cap = cap;
  }
  loaded_kernel *lk = calloc(1, sizeof *lk);
  if (!lk) return ut_fail(err, MMT_ERR_NOMEM, "out of memory loading a kernel");
  rt_cubin cubin = {0};
  bool cached = false;
  char arch[16];
  mmt_status rc = MMT_OK;
  if (!compiled && !(rc = rt_kernel_arch(ctx->dev.arch, ch->spec.arch, arch, err)))
    rc = rt_compile_cached(ctx->cache_dir, ch->spec.source, ch->spec.kernel_name, arch, &cubin,
                           &cached, NULL, err);
  if (!rc) rc = rt_kernel_load(&ctx->dev, compiled ? compiled : &cubin, &ch->spec, &lk->k, err);
  rt_cubin_free(&cubin);
  if (rc) {
    free(lk);
    ut_err_prefix(err, "kernel %s %s", ch->template_name, ch->params);
    return rc;
  }
  memcpy(lk->template_name, ch->template_name, sizeof lk->template_name);
  memcpy(lk->params, ch->params, sizeof lk->params);
  lk->dtype = key->dtype;
  lk->layout = key->layout;
  lk->op = key->op;
  ctx->kernels[ctx->kernel_count++] = lk;
  log_line(ctx, MMT_LOG_DEBUG, "loaded %s %s (%s)", ch->template_name, ch->params,
           compiled ? "compiled ahead"
           : cached ? "cubin from the cache"
                    : "compiled by NVRTC");
  *out = lk;
  return MMT_OK;
}

/* The problem of key; op holds its op (p.op points to it, NULL for the plain GEMM). */
static gen_problem problem_of(const problem_key *key, gen_op *op) {
  return (gen_problem){.dtype = rt_dtype((mmt_dtype)key->dtype)->name,
                       .layout = gen_layout_name((int)key->layout),
                       .m = key->m,
                       .n = key->n,
                       .k = key->k,
                       .lda = key->lda,
                       .ldb = key->ldb,
                       .ldc = key->ldc,
                       .align_bytes = (int)key->align,
                       .op = key->op && op && rt_op_of_code(key->op, op) ? op : NULL,
                       .batch = key->batch};
}

/* Chooses a kernel for key into ch.  Lock held. */
static mmt_status choose(mmt_context *ctx, const problem_key *key, rt_choice *ch, ut_err *err) {
  gen_op op;
  gen_problem p = problem_of(key, &op);
  return rt_choose_blocks(ctx->chooser, ctx->db, ctx->dev.info.name, &p, key->block_m, ch, err);
}

/* ---- online tuning (callers hold the lock) ---- */

/* Starts a worker when problems were recorded since the last one started and none that this
 * context started is still running (another's lock: tried again at a later check). */
static void online_kick(mmt_context *ctx) {
  if (!ctx->worker_wanted || ctx->worker_failed || !rt_online_reap(ctx->worker)) return;
  ctx->worker = 0;
  const rt_online_worker w = {.tuner = ctx->tuner,
                              .db_path = ctx->db_path,
                              .cache_dir = ctx->cache_dir,
                              .device = ctx->device,
                              .budget_s = ctx->online_budget};
  pid_t pid = 0;
  ut_err e;
  if (rt_online_start(&w, ctx->worker_log, &pid, &e)) {
    ctx->worker_failed = true;
    log_line(ctx, MMT_LOG_WARN, "online tuning stops: %s", e.msg);
    return;
  }
  if (!pid) return;
  ctx->worker = pid;
  ctx->worker_wanted = false;
  log_line(ctx, MMT_LOG_INFO, "online: worker %ld tunes the problems recorded in %s (log %s)",
           (long)pid, ctx->db_path, ctx->worker_log);
}

/* Empties slot i, moving back the later slots of its run that would no longer be found
 * (linear probing's deletion: no tombstones, no allocation). */
static void slot_remove(mmt_context *ctx, size_t i) {
  const size_t mask = (size_t)ctx->slot_cap - 1;
  for (size_t j = i;;) {
    ctx->slots[i].used = false;
    for (;;) {
      j = (j + 1) & mask;
      if (!ctx->slots[j].used) return;
      const size_t home = ut_hash64(&ctx->slots[j].key, sizeof ctx->slots[j].key) & mask;
      /* it stays where its home lies cyclically in (i, j] */
      if (i <= j ? i < home && home <= j : i < home || home <= j) continue;
      break;
    }
    ctx->slots[i] = ctx->slots[j];
    i = j;
  }
}

/* The database's key of a kernel problem: what record_problem queues and the tuner keys its
 * rows by. */
static db_problem db_problem_of(const gen_problem *p) {
  db_problem dp = {.m = p->m, .n = p->n, .k = p->k, .batch = p->batch > 1 ? p->batch : 1};
  ut_copy(dp.dtype, sizeof dp.dtype, p->dtype);
  ut_copy(dp.layout, sizeof dp.layout, p->layout);
  if (p->op) gen_op_format(p->op, dp.op, sizeof dp.op, NULL);
  return dp;
}

/* A problem with ok rows newer than those the choices saw (db_each_shape_since), and the id
 * of its best row now (0: none, or the query failed). */
typedef struct {
  db_problem p;
  int64_t best_id;
} renewed_problem;

typedef struct {
  renewed_problem *v;
  int n, cap;
  bool nomem;
} renewed_list;

static void on_renewed(const db_problem *p, void *user) {
  renewed_list *l = user;
  renewed_problem *v = ut_grow(l->v, &l->cap, l->n + 1, sizeof *v);
  if (!v) {
    l->nomem = true;
    return;
  }
  l->v = v;
  l->v[l->n++] = (renewed_problem){.p = *p};
}

static bool same_db_problem(const db_problem *a, const db_problem *b) {
  return a->m == b->m && a->n == b->n && a->k == b->k && a->batch == b->batch &&
         !strcmp(a->dtype, b->dtype) && !strcmp(a->layout, b->layout) && !strcmp(a->op, b->op);
}

/* Whether slot s should choose again now that the worker wrote rows: its problem is one of
 * the renewed ones, has a best row, and s does not launch it (not EXACT, or EXACT on an
 * earlier best).  A problem without rows of its own keeps its choice: the model's new guess
 * for it need not be better, and switching would compile a kernel inside a call (the likely
 * cause of a 0.93 s pass in a loop of never-tuned layers whose untuned pass is 2 ms); its own
 * rows come when the worker reaches it, their kernels compiled into the cubin cache this
 * context shares.  A failed query keeps it too. */
static bool online_stale(const problem_slot *s, const renewed_list *renewed) {
  gen_op op;
  const gen_problem p = problem_of(&s->key, &op);
  const db_problem dp = db_problem_of(&p);
  for (int i = 0; i < renewed->n; i++)
    if (same_db_problem(&dp, &renewed->v[i].p))
      return renewed->v[i].best_id != 0 &&
             (s->choice.kind != MMT_CHOICE_EXACT || s->choice.record_id != renewed->v[i].best_id);
  return false;
}

/* Forgets the choices online_stale picks (their next call chooses again); how many.  A
 * removal may move a slot back past the table's end to one already passed (and checked):
 * hence the passes until one removes nothing.  Memory only: the queries were renewed's. */
static int slots_drop_stale(mmt_context *ctx, const renewed_list *renewed) {
  int dropped = 0, pass;
  do {
    pass = 0;
    for (int i = 0; i < ctx->slot_cap; i++)
      while (ctx->slots[i].used && online_stale(&ctx->slots[i], renewed)) {
        slot_remove(ctx, (size_t)i);
        pass++;
      }
    dropped += pass;
  } while (pass);
  ctx->slot_count -= dropped;
  return dropped;
}

/* The problems with ok rows above ctx->results_id and their best rows, into *out: one query
 * for the new rows and one a problem among them, however many choices the context holds.
 * False when the rows could not be read (tried again at the next poll). */
static bool renewed_problems(mmt_context *ctx, renewed_list *out) {
  ut_err e;
  if (db_each_shape_since(ctx->db, ctx->dev.info.name, ctx->results_id, on_renewed, out, &e) ||
      out->nomem)
    return false;
  for (int i = 0; i < out->n; i++) {
    db_result best;
    if (!db_best(ctx->db, ctx->dev.info.name, &out->v[i].p, &best, &e)) out->v[i].best_id = best.id;
  }
  return true;
}

/* At most every ONLINE_POLL_S: a worker to start, and new results (a larger results id)
 * that the choices made before them did not see.  They are taken once they settle (no new row
 * for ONLINE_SETTLE_S): a worker writes a row a candidate, and choosing again at each would
 * compile the model's changing picks inside the application's calls. */
static void online_poll(mmt_context *ctx) {
  const double now = ut_now_seconds();
  if (now < ctx->next_poll) return;
  ctx->next_poll = now + ONLINE_POLL_S;
  online_kick(ctx);
  int64_t id = 0;
  uint64_t files = 0;
  ut_err e;
  if (!ctx->db || db_rows_stamp(ctx->db, &id, &files, &e)) return;
  if (id != ctx->results_seen) {
    ctx->results_seen = id, ctx->results_changed_at = now;
    return;
  }
  if (id == ctx->results_id || now - ctx->results_changed_at < ONLINE_SETTLE_S) return;
  renewed_list renewed = {0};
  if (!renewed_problems(ctx, &renewed)) {
    free(renewed.v);
    return;
  }
  const int dropped = renewed.n ? slots_drop_stale(ctx, &renewed) : 0;
  free(renewed.v);
  ctx->results_id = id;
  if (dropped)
    log_line(ctx, MMT_LOG_INFO, "online: new results; %d problems choose again at their next call",
             dropped);
}

/* Adds problem p to the database's queue of recorded problems (mmt_options.record); a
 * failure is logged, not returned.  Lock held. */
static void record_problem(mmt_context *ctx, const gen_problem *p) {
  const db_problem dp = db_problem_of(p);
  ut_err e;
  if (db_record(ctx->db, ctx->dev.info.name, &dp, &e)) {
    log_line(ctx, MMT_LOG_WARN, "could not record %lldx%lldx%lld %s %s: %s", (long long)p->m,
             (long long)p->n, (long long)p->k, p->layout, p->dtype, e.msg);
    return;
  }
  if (ctx->online) {
    ctx->worker_wanted = true;
    online_kick(ctx);
  }
}

/* Remembers key's choice ch: its module (kernel_get's, `compiled` as there) and its slot.
 * Lock held. */
static mmt_status install(mmt_context *ctx, const problem_key *key, const rt_choice *ch,
                          const rt_cubin *compiled, problem_slot **out, ut_err *err) {
  gen_op op;
  const gen_problem p = problem_of(key, &op);
  mmt_choice desc;
  rt_choice_describe(ch, &p, &desc);
  loaded_kernel *kernel = NULL;
  mmt_status rc = kernel_get(ctx, ch, key, compiled, &kernel, err);
  if (!rc) rc = slot_insert(ctx, key, kernel, &desc, out, err);
  if (!rc && ctx->record && ctx->db && desc.kind != MMT_CHOICE_EXACT) record_problem(ctx, &p);
  if (!rc) {
    ctx->misses++;
    char op_text[GEN_OP_TEXT_MAX] = "";
    if (p.op) gen_op_format(p.op, op_text, sizeof op_text, NULL);
    log_line(ctx, MMT_LOG_INFO, "%lldx%lldx%lld %s %s%s%s x%lld: %s %s %s (expected %.4g ms)",
             (long long)key->m, (long long)key->n, (long long)key->k, desc.layout, p.dtype,
             p.op ? " " : "", op_text, (long long)key->batch, mmt_choice_kind_name(desc.kind),
             desc.template_name, desc.params, desc.expected_ms);
  }
  return rc;
}

/* A cache miss: choose, compile, load, remember.  Lock held. */
static mmt_status build(mmt_context *ctx, const problem_key *key, problem_slot **out, ut_err *err) {
  rt_choice ch = {0};
  mmt_status rc = choose(ctx, key, &ch, err);
  if (!rc) rc = install(ctx, key, &ch, NULL, out, err);
  rt_choice_clear(&ch);
  return rc;
}

static problem_key key_make(const rt_gemm_kernel_problem *kp, mmt_dtype dtype, int align,
                            int64_t op, int64_t batch) {
  return (problem_key){
      kp->m, kp->n, kp->k, kp->lda, kp->ldb, kp->ldc, align, dtype, gen_layout_index(kp->layout),
      op,    batch, 0};
}

/* The key of a kernel problem with M, N > 0.  Alignment counts the matrices the kernel reads
 * (NULL: assume well-aligned, as for explain) and every leading dimension in bytes. */
static problem_key key_of(const rt_gemm_kernel_problem *kp, mmt_dtype dtype, const void *A,
                          const void *B, const void *C) {
  uint64_t elem = (uint64_t)rt_dtype(dtype)->elem_bytes;
  const uint64_t v[6] = {kp->k > 0 ? (uint64_t)(uintptr_t)A : 0,
                         kp->k > 0 ? (uint64_t)(uintptr_t)B : 0,
                         (uint64_t)(uintptr_t)C,
                         (uint64_t)kp->lda * elem,
                         (uint64_t)kp->ldb * elem,
                         (uint64_t)kp->ldc * elem};
  return key_make(kp, dtype, gen_align_bytes(v, 6), 0, 1);
}

gen_problem rt_explain_problem(const mmt_problem *p) {
  rt_gemm_kernel_problem kp;
  rt_gemm_map(p, &kp);
  problem_key key = key_of(&kp, p->dtype, NULL, NULL, NULL);
  return problem_of(&key, NULL);
}

mmt_status rt_explain(rt_chooser *ch, db_handle *db, const char *device_name, const mmt_problem *p,
                      mmt_choice *out, ut_err *err) {
  memset(out, 0, sizeof *out);
  mmt_status rc = rt_gemm_check(p, err);
  if (rc) return rc;
  out->kind = MMT_CHOICE_DEFAULT;
  if (p->m == 0 || p->n == 0) return MMT_OK; /* launches nothing: DEFAULT with no template */
  gen_problem gp = rt_explain_problem(p);
  rt_choice c = {0};
  rc = rt_choose(ch, db, device_name, &gp, &c, err);
  if (!rc) rt_choice_describe(&c, &gp, out);
  rt_choice_clear(&c);
  return rc;
}

/* ---- GEMM ---- */

/* The module of key's choice (found or built) and, for an exclusive kernel, the lock still
 * held.  The module, not the slot: a module never moves, while another thread's miss may
 * grow (move) the table once the lock is released. */
static mmt_status lookup(mmt_context *ctx, const problem_key *key, loaded_kernel **out,
                         bool *locked, ut_err *err) {
  pthread_mutex_lock(&ctx->lock);
  if (ctx->online) online_poll(ctx);
  problem_slot *s = slot_find(ctx, key);
  mmt_status rc = MMT_OK;
  if (s)
    ctx->hits++;
  else
    rc = build(ctx, key, &s, err);
  *out = rc ? NULL : s->kernel;
  *locked = !rc && s->kernel->k.last_launch != NULL;
  if (!*locked) pthread_mutex_unlock(&ctx->lock);
  return rc;
}

/* The kernel problem of a checked GEMM call (*kp) and its key; false when the call launches
 * nothing. */
static bool gemm_call_key(const mmt_problem *p, float alpha, const void *A, const void *B,
                          float beta, const void *C, rt_gemm_kernel_problem *kp, problem_key *key) {
  if (p->m == 0 || p->n == 0) return false;
  const bool no_product = p->k == 0 || alpha == 0.0f;
  if (no_product && beta == 1.0f) return false; /* C = C */
  rt_gemm_map(p, kp);
  if (no_product) kp->k = 0; /* C = beta * C, A and B not read */
  *key = key_of(kp, p->dtype, kp->swapped ? B : A, kp->swapped ? A : B, C);
  return true;
}

static mmt_status gemm(mmt_context *ctx, const mmt_problem *p, float alpha, const void *A,
                       const void *B, float beta, void *C, void *stream, ut_err *err) {
  mmt_status rc = rt_gemm_check_call(p, alpha, A, B, C, err);
  if (!rc) rc = check_open(ctx, err);
  rt_gemm_kernel_problem kp;
  problem_key key;
  if (rc || !gemm_call_key(p, alpha, A, B, beta, C, &kp, &key)) return rc;
  const void *ka = kp.swapped ? B : A, *kb = kp.swapped ? A : B;
  loaded_kernel *kernel;
  bool locked;
  if ((rc = lookup(ctx, &key, &kernel, &locked, err))) return rc;
  rt_gemm_args args = {.m = kp.m, .n = kp.n, .k = kp.k, .alpha = alpha, .beta = beta,
                       .a = (CUdeviceptr)(uintptr_t)ka, .b = (CUdeviceptr)(uintptr_t)kb,
                       .c = (CUdeviceptr)(uintptr_t)C, .lda = kp.lda, .ldb = kp.ldb,
                       .ldc = kp.ldc};
  rc = rt_kernel_launch(&kernel->k, &args, (CUstream)stream, err);
  if (locked) pthread_mutex_unlock(&ctx->lock);
  if (!rc) atomic_fetch_add_explicit(&ctx->launches, 1, memory_order_relaxed);
  return rc;
}

mmt_status mmt_gemm(mmt_context *ctx, mmt_order order, mmt_transpose transA, mmt_transpose transB,
                    int64_t M, int64_t N, int64_t K, float alpha, const void *A, int64_t lda,
                    const void *B, int64_t ldb, float beta, void *C, int64_t ldc, mmt_dtype dtype,
                    void *stream) {
  if (!ctx) return MMT_ERR_INVALID_ARG;
  ut_err *err = call_err(ctx);
  const mmt_problem p = {order, transA, transB, M, N, K, lda, ldb, ldc, dtype};
  return finish(ctx, "mmt_gemm", gemm(ctx, &p, alpha, A, B, beta, C, stream, err), err);
}

mmt_status mmt_sgemm(mmt_context *ctx, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float *C, int64_t ldc, void *stream) {
  if (!ctx) return MMT_ERR_INVALID_ARG;
  ut_err *err = call_err(ctx);
  const mmt_problem p = {MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, M, N, K, lda, ldb, ldc, MMT_F32};
  return finish(ctx, "mmt_sgemm", gemm(ctx, &p, 1.0f, A, B, 0.0f, C, stream, err), err);
}

/* ---- matmul ---- */

/* The key of an op call's kernel problem: the alignment of what the kernel loads from A and B
 * (their bases, pitches and batch strides); C and D are read and written by the epilogue at
 * any alignment. */
static problem_key op_key_of(const rt_matmul_plan *pl, mmt_dtype dtype) {
  const uint64_t elem = (uint64_t)rt_dtype(dtype)->elem_bytes;
  const bool reads = pl->kp.k > 0;
  const uint64_t v[6] = {reads ? (uint64_t)(uintptr_t)pl->a : 0,
                         reads ? (uint64_t)(uintptr_t)pl->b : 0,
                         (uint64_t)pl->kp.lda * elem,
                         (uint64_t)pl->kp.ldb * elem,
                         (uint64_t)pl->stride_a * elem,
                         (uint64_t)pl->stride_b * elem};
  /* A grouped call is keyed, and its kernel chosen, by its experts (the batch, G) and the
   * bucket of the rows they have (rt_group_rows_bucket: the routing regime `tune` measures):
   * contiguous, the rows of all of them (the caller's hint, M without it); masked, their mean
   * (G * M without a hint).  Never read as a bound: the launch runs the plan's M. */
  rt_gemm_kernel_problem kp = pl->kp;
  const int64_t tokens = pl->group_tokens, block_m = rt_group_rows_bucket(kp.m);
  if (pl->op.group == 'c')
    kp.m = rt_group_rows_bucket(tokens > 0 ? tokens : kp.m);
  else if (pl->op.group == 'm')
    kp.m = rt_group_rows_bucket(tokens > 0 ? (tokens + pl->batch - 1) / pl->batch : kp.m);
  problem_key key = key_make(&kp, dtype, gen_align_bytes(v, 6), rt_op_code(&pl->op), pl->batch);
  if (pl->op.group == 'm') key.block_m = block_m; /* the model's pick: rt_choose */
  return key;
}

/* The grouped calls' error word of ctx, made at the first (under the lock); the calls after
 * it read its published address without the lock. */
static mmt_status group_error_word(mmt_context *ctx, CUdeviceptr *out, ut_err *err) {
  if ((*out = __atomic_load_n(&ctx->group_error_dev, __ATOMIC_ACQUIRE))) return MMT_OK;
  mmt_status rc = MMT_OK;
  const rt_cu *cu;
  pthread_mutex_lock(&ctx->lock);
  if (!ctx->group_error) {
    void *host = NULL;
    if ((rc = rt_driver(&cu, err)) || (rc = rt_device_bind(&ctx->dev, err))) goto cleanup;
    CUresult r = cu->cuMemHostAlloc(&host, sizeof(int), CU_MEMHOSTALLOC_DEVICEMAP);
    if (r != CUDA_SUCCESS) {
      rc = rt_cu_fail(err, "cuMemHostAlloc (grouped calls' error word)", r);
      goto cleanup;
    }
    CUdeviceptr dev = 0;
    if ((r = cu->cuMemHostGetDevicePointer(&dev, host, 0)) != CUDA_SUCCESS) {
      cu->cuMemFreeHost(host);
      rc = rt_cu_fail(err, "cuMemHostGetDevicePointer (grouped calls' error word)", r);
      goto cleanup;
    }
    *(volatile int *)host = 0;
    __atomic_store_n(&ctx->group_error, (int *)host, __ATOMIC_RELEASE);
    __atomic_store_n(&ctx->group_error_dev, dev, __ATOMIC_RELEASE);
  }
  *out = ctx->group_error_dev;
cleanup:
  pthread_mutex_unlock(&ctx->lock);
  return rc;
}

static void group_error_free(mmt_context *ctx) {
  const rt_cu *cu;
  ut_err err;
  if (ctx->group_error && !rt_driver(&cu, &err) && !rt_device_bind(&ctx->dev, &err))
    cu->cuMemFreeHost(ctx->group_error);
  ctx->group_error = NULL;
  ctx->group_error_dev = 0;
}

/* A grouped kernel that found bad group_rows since the last call set the word: this call
 * says so (once) and does nothing else. */
static mmt_status check_group_error(mmt_context *ctx, ut_err *err) {
  int *word = __atomic_load_n(&ctx->group_error, __ATOMIC_ACQUIRE);
  if (!word || !__atomic_exchange_n(word, 0, __ATOMIC_ACQ_REL)) return MMT_OK;
  return ut_fail(err, MMT_ERR_INVALID_ARG,
                 "an earlier grouped mmt_matmul call on this context had group_rows that break "
                 "their rules (an offset below 0, past M or below the one before it; a count "
                 "below 0 or past M): its experts with bad rows were skipped");
}

/* The launches of an op call: one per 65535 problems of the batch (grid.z's limit; a grouped
 * call has at most 65535 experts, rt_matmul_check). */
static mmt_status launch_op(mmt_context *ctx, loaded_kernel *kernel, const rt_matmul_plan *pl,
                            const mmt_matmul_desc *d, CUdeviceptr group_error, void *stream,
                            ut_err *err) {
  const int64_t in = rt_dtype(d->in_type)->elem_bytes, out = rt_dtype(d->out_type)->elem_bytes;
  mmt_status rc = MMT_OK;
  if (pl->amax) { /* an FP8 D's amax: an atomic max over every launch, from 0 */
    const rt_cu *cu;
    if ((rc = rt_driver(&cu, err)) || (rc = rt_device_bind(&ctx->dev, err))) return rc;
    CUresult r = cu->cuMemsetD32Async((CUdeviceptr)pl->amax, 0, 1, (CUstream)stream);
    if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuMemsetD32Async (amax)", r);
  }
  for (int64_t z = 0; z < pl->batch && !rc; z += 65535) {
    const rt_epilogue epi = {.d = (CUdeviceptr)(pl->d + (uint64_t)(z * pl->stride_d * out)),
                             .ldd = pl->ldd,
                             .bias = pl->bias,
                             .scale_row = pl->scale_row,
                             .scale_col = pl->scale_col,
                             .batch_a = pl->stride_a,
                             .batch_b = pl->stride_b,
                             .batch_c = pl->stride_c,
                             .batch_d = pl->stride_d,
                             .scale_d = pl->scale_d,
                             .amax = pl->amax,
                             .group_rows = pl->group_rows,
                             .group_error = group_error,
                             .groups = pl->op.group ? pl->batch : 0};
    const rt_gemm_args args = {
        .m = pl->kp.m,
        .n = pl->kp.n,
        .k = pl->kp.k,
        .alpha = d->alpha,
        .beta = d->beta,
        .a = (CUdeviceptr)((uintptr_t)pl->a + (uint64_t)(z * pl->stride_a * in)),
        .b = (CUdeviceptr)((uintptr_t)pl->b + (uint64_t)(z * pl->stride_b * in)),
        .c = pl->c ? (CUdeviceptr)(pl->c + (uint64_t)(z * pl->stride_c * out)) : 0,
        .lda = pl->kp.lda,
        .ldb = pl->kp.ldb,
        .ldc = pl->kp.ldc,
        .epi = &epi,
        .batch = pl->batch - z < 65535 ? pl->batch - z : 65535,
        .group = pl->op.group,
        .tokens = pl->group_tokens};
    rc = rt_kernel_launch(&kernel->k, &args, (CUstream)stream, err);
    if (!rc) atomic_fetch_add_explicit(&ctx->launches, 1, memory_order_relaxed);
  }
  return rc;
}

/* FP8 runs on Hopper: wgmma's kernels (sm_90a) and skinny_mma's (mma.sync, sm_89 and newer)
 * for the small sides; another GPU has no kernel for it, and says so (rt_kernel_arch's
 * message, prefixed). */
static mmt_status check_fp8_device(const mmt_context *ctx, const mmt_matmul_desc *d, ut_err *err) {
  if (!rt_dtype_fp8(d->in_type)) return MMT_OK;
  char arch[16];
  mmt_status rc = rt_kernel_arch(ctx->dev.arch, "sm_90a", arch, err);
  if (rc) ut_err_prefix(err, "FP8 inputs (%s) run on wgmma kernels", rt_dtype(d->in_type)->name);
  return rc;
}

/* rt_matmul_map's plan of d, an op call's with K = 0 where its product is 0 (A and B are not
 * read then). */
static void matmul_plan(const mmt_matmul_desc *d, rt_matmul_plan *pl) {
  rt_matmul_map(d, pl);
  if (!pl->plain && (d->k == 0 || d->alpha == 0.0f)) pl->kp.k = 0;
}

static mmt_status matmul(mmt_context *ctx, const mmt_matmul_desc *d, void *stream, ut_err *err) {
  mmt_status rc = check_group_error(ctx, err);
  if (!rc) rc = rt_matmul_check(d, err);
  if (!rc) rc = check_open(ctx, err);
  if (!rc) rc = check_fp8_device(ctx, d, err);
  if (rc || d->m == 0 || d->n == 0) return rc;
  rt_matmul_plan pl;
  matmul_plan(d, &pl);
  if (pl.plain) return gemm(ctx, &pl.gemm, d->alpha, d->a, d->b, d->beta, d->d, stream, err);
  CUdeviceptr group_error = 0; /* made before the lookup, which may keep the lock */
  if (pl.op.group && (rc = group_error_word(ctx, &group_error, err))) return rc;
  problem_key key = op_key_of(&pl, pl.dtype);
  loaded_kernel *kernel;
  bool locked;
  if ((rc = lookup(ctx, &key, &kernel, &locked, err))) return rc;
  rc = launch_op(ctx, kernel, &pl, d, group_error, stream, err);
  if (locked) pthread_mutex_unlock(&ctx->lock);
  return rc;
}

mmt_status mmt_matmul(mmt_context *ctx, const mmt_matmul_desc *desc, void *stream) {
  if (!ctx) return MMT_ERR_INVALID_ARG;
  ut_err *err = call_err(ctx);
  return finish(ctx, "mmt_matmul", matmul(ctx, desc, stream, err), err);
}

/* ---- mmt_matmul_prepare ---- */

/* The key of a checked descriptor's kernel problem; false when its call launches nothing. */
static bool matmul_call_key(const mmt_matmul_desc *d, problem_key *key) {
  if (d->m == 0 || d->n == 0) return false;
  rt_matmul_plan pl;
  matmul_plan(d, &pl);
  rt_gemm_kernel_problem kp;
  if (pl.plain) return gemm_call_key(&pl.gemm, d->alpha, d->a, d->b, d->beta, d->d, &kp, key);
  *key = op_key_of(&pl, pl.dtype);
  return true;
}

/* Grows the workspace of slot s's kernel (a split-K one's; others have none) to what a call
 * of its key needs, so that the call allocates nothing (a CUDA graph capture may refuse to).
 * The key's sizes are the launch's: split-K kernels serve neither batches nor grouped calls,
 * the only keys whose M is not.  Lock held. */
static mmt_status reserve_workspace(const problem_slot *s, ut_err *err) {
  const rt_gemm_args args = {.m = s->key.m, .n = s->key.n, .k = s->key.k, .batch = 1};
  return rt_workspace_reserve(&s->kernel->k, &args, err);
}

/* A kernel problem a prepare call adds to the cache: its choice and, for the first problem of
 * a module not loaded yet, that module's compile (job >= 0). */
typedef struct {
  problem_key key;
  int64_t desc; /* the first descriptor of the key */
  rt_choice ch;
  int job;
} prepared;

/* The arguments of a prepare call, each descriptor's as mmt_matmul checks them. */
static mmt_status prepare_check(const mmt_matmul_desc *descs, int64_t count, int threads,
                                ut_err *err) {
  if (count < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "count is %lld: below 0", (long long)count);
  if (count > INT32_MAX)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "count is %lld: above 2^31 - 1", (long long)count);
  if (count > 0 && !descs) return ut_fail(err, MMT_ERR_INVALID_ARG, "descs is NULL");
  if (threads < 0) return ut_fail(err, MMT_ERR_INVALID_ARG, "threads is %d: below 0", threads);
  mmt_status rc = MMT_OK;
  for (int64_t i = 0; i < count && !rc; i++)
    if ((rc = rt_matmul_check(&descs[i], err))) ut_err_prefix(err, "descs[%lld]", (long long)i);
  return rc;
}

/* The keys of count checked descriptors; *used says which launch a kernel.  Grouped ones get
 * the context's error word now: their calls never allocate. */
static mmt_status prepare_keys(mmt_context *ctx, const mmt_matmul_desc *descs, int64_t count,
                               problem_key *keys, bool *used, ut_err *err) {
  mmt_status rc = MMT_OK;
  for (int64_t i = 0; i < count && !rc; i++) {
    const mmt_matmul_desc *d = &descs[i];
    rc = check_fp8_device(ctx, d, err);
    CUdeviceptr word;
    if (!rc && d->group_mode != MMT_GROUP_NONE) rc = group_error_word(ctx, &word, err);
    if (rc) ut_err_prefix(err, "descs[%lld]", (long long)i);
    if (!rc) used[i] = matmul_call_key(d, &keys[i]);
  }
  return rc;
}

/* Chooses the kernel of each new key (not cached, not an earlier descriptor's) into pr and
 * names the modules to compile in jobs (source and name borrowed from pr).  Lock held. */
static mmt_status prepare_choose(mmt_context *ctx, const problem_key *keys, const bool *used,
                                 int64_t count, prepared *pr, int *n_pr, rt_compile_job *jobs,
                                 int *n_jobs, ut_err *err) {
  mmt_status rc = MMT_OK;
  for (int64_t i = 0; i < count && !rc; i++) {
    bool known = !used[i] || slot_find(ctx, &keys[i]);
    for (int j = 0; j < *n_pr && !known; j++) known = !memcmp(&pr[j].key, &keys[i], sizeof keys[i]);
    if (known) continue;
    prepared *p = &pr[*n_pr];
    *p = (prepared){.key = keys[i], .desc = i, .job = -1};
    if ((rc = choose(ctx, &p->key, &p->ch, err))) {
      ut_err_prefix(err, "descs[%lld]", (long long)i);
      break;
    }
    ++*n_pr;
    bool loaded = kernel_find(ctx, &p->ch, &p->key) != NULL;
    for (int j = 0; j < *n_pr - 1 && !loaded; j++) /* another problem's module: compiled once */
      loaded =
          pr[j].job >= 0 && module_serves(pr[j].ch.template_name, pr[j].ch.params, pr[j].key.dtype,
                                          pr[j].key.layout, pr[j].key.op, &p->ch, &p->key);
    if (loaded) continue;
    rt_compile_job *job = &jobs[*n_jobs];
    *job = (rt_compile_job){.source = p->ch.spec.source, .name = p->ch.spec.kernel_name};
    if ((rc = rt_kernel_arch(ctx->dev.arch, p->ch.spec.arch, job->arch, err))) {
      ut_err_prefix(err, "descs[%lld]", (long long)i);
      break;
    }
    p->job = (*n_jobs)++;
  }
  return rc;
}

/* The batch's compiles first (threads), then every problem's load and slot (lock held). */
static mmt_status prepare(mmt_context *ctx, const mmt_matmul_desc *descs, int64_t count,
                          int threads, ut_err *err) {
  mmt_status rc = prepare_check(descs, count, threads, err);
  if (!rc) rc = check_open(ctx, err);
  if (rc || count == 0) return rc;
  problem_key *keys = calloc((size_t)count, sizeof *keys);
  bool *used = calloc((size_t)count, sizeof *used);
  prepared *pr = calloc((size_t)count, sizeof *pr);
  rt_compile_job *jobs = calloc((size_t)count, sizeof *jobs);
  int n_pr = 0, n_jobs = 0;
  if (!keys || !used || !pr || !jobs) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory preparing %lld descriptors", (long long)count);
    goto cleanup;
  }
  if ((rc = prepare_keys(ctx, descs, count, keys, used, err))) goto cleanup;
  pthread_mutex_lock(&ctx->lock);
  rc = prepare_choose(ctx, keys, used, count, pr, &n_pr, jobs, &n_jobs, err);
  pthread_mutex_unlock(&ctx->lock);
  if (rc) goto cleanup;
  rt_compile_batch(ctx->cache_dir, jobs, n_jobs, threads); /* the lock free: calls go on */
  pthread_mutex_lock(&ctx->lock);
  for (int j = 0; j < n_pr && !rc; j++) {
    const prepared *p = &pr[j];
    const rt_compile_job *job = p->job >= 0 ? &jobs[p->job] : NULL;
    problem_slot *s = slot_find(ctx, &p->key); /* a call on another thread made it meanwhile */
    if (!s && job && job->rc) {
      rc = job->rc;
      *err = job->err;
      ut_err_prefix(err, "kernel %s %s", p->ch.template_name, p->ch.params);
    } else if (!s) {
      rc = install(ctx, &p->key, &p->ch, job ? &job->cubin : NULL, &s, err);
    }
    if (!rc) rc = reserve_workspace(s, err);
    if (rc) ut_err_prefix(err, "descs[%lld]", (long long)p->desc);
  }
  pthread_mutex_unlock(&ctx->lock);
  if (!rc)
    log_line(ctx, MMT_LOG_INFO, "prepared %lld descriptors: %d new problems, %d modules compiled",
             (long long)count, n_pr, n_jobs);
cleanup:
  for (int j = 0; pr && j < n_pr; j++) rt_choice_clear(&pr[j].ch);
  for (int j = 0; jobs && j < n_jobs; j++) rt_cubin_free(&jobs[j].cubin), free(jobs[j].log);
  free(keys), free(used), free(pr), free(jobs);
  return rc;
}

mmt_status mmt_matmul_prepare(mmt_context *ctx, const mmt_matmul_desc *descs, int64_t count,
                              int threads) {
  if (!ctx) return MMT_ERR_INVALID_ARG;
  ut_err *err = call_err(ctx);
  return finish(ctx, "mmt_matmul_prepare", prepare(ctx, descs, count, threads, err), err);
}

/* ---- mmt_quantize ---- */

static mmt_status quantize(mmt_context *ctx, const mmt_quantize_desc *d, void *stream,
                           ut_err *err) {
  mmt_status rc = rt_quantize_check(d, err);
  if (!rc) rc = check_open(ctx, err);
  if (rc || d->rows == 0 || d->cols == 0) return rc;
  pthread_mutex_lock(&ctx->lock);
  if (!ctx->quant.module) rc = rt_quantizer_load(&ctx->dev, ctx->cache_dir, &ctx->quant, err);
  pthread_mutex_unlock(&ctx->lock);
  if (!rc) rc = rt_quantize_launch(&ctx->quant, d, (CUstream)stream, err);
  if (!rc) atomic_fetch_add_explicit(&ctx->launches, 1, memory_order_relaxed);
  return rc;
}

mmt_status mmt_quantize(mmt_context *ctx, const mmt_quantize_desc *desc, void *stream) {
  if (!ctx) return MMT_ERR_INVALID_ARG;
  ut_err *err = call_err(ctx);
  return finish(ctx, "mmt_quantize", quantize(ctx, desc, stream, err), err);
}

static mmt_status explain(mmt_context *ctx, const mmt_problem *p, mmt_choice *choice,
                          ut_err *err) {
  if (!choice) return ut_fail(err, MMT_ERR_INVALID_ARG, "choice is NULL");
  memset(choice, 0, sizeof *choice);
  mmt_status rc = rt_gemm_check(p, err);
  if (!rc) rc = check_open(ctx, err);
  if (rc) return rc;
  choice->kind = MMT_CHOICE_DEFAULT;
  if (p->m == 0 || p->n == 0) return MMT_OK; /* launches nothing: DEFAULT with no template */
  rt_gemm_kernel_problem kp;
  rt_gemm_map(p, &kp);
  problem_key key = key_of(&kp, p->dtype, NULL, NULL, NULL);
  pthread_mutex_lock(&ctx->lock);
  const problem_slot *s = slot_find(ctx, &key);
  if (s)
    *choice = s->choice; /* what calls of this problem launch */
  else
    rc = rt_explain(ctx->chooser, ctx->db, ctx->dev.info.name, p, choice, err);
  pthread_mutex_unlock(&ctx->lock);
  return rc;
}

/* The key of an explained op descriptor (matmul_plan's plan, not plain): its pointers, which
 * may be NULL, count as aligned. */
static problem_key explained_op_key(rt_matmul_plan *pl) {
  pl->a = pl->b = NULL;
  return op_key_of(pl, pl->dtype);
}

gen_problem rt_explain_matmul_problem(const mmt_matmul_desc *d, gen_op *op) {
  rt_matmul_plan pl;
  matmul_plan(d, &pl);
  if (pl.plain) return rt_explain_problem(&pl.gemm);
  const problem_key key = explained_op_key(&pl);
  return problem_of(&key, op);
}

mmt_status rt_explain_matmul(rt_chooser *ch, db_handle *db, const char *device_name,
                             const mmt_matmul_desc *d, mmt_choice *out, ut_err *err) {
  memset(out, 0, sizeof *out);
  mmt_status rc = rt_matmul_check_fields(d, err);
  if (rc) return rc;
  out->kind = MMT_CHOICE_DEFAULT;
  out->batch = 1;
  if (d->m == 0 || d->n == 0) return MMT_OK; /* launches nothing */
  rt_matmul_plan pl;
  matmul_plan(d, &pl);
  if (pl.plain) {
    rc = rt_explain(ch, db, device_name, &pl.gemm, out, err);
    out->batch = 1;
    return rc;
  }
  gen_op op;
  const problem_key key = explained_op_key(&pl);
  const gen_problem gp = problem_of(&key, &op);
  rt_choice c = {0};
  rc = rt_choose_blocks(ch, db, device_name, &gp, key.block_m, &c, err);
  if (!rc) rt_choice_describe(&c, &gp, out);
  rt_choice_clear(&c);
  return rc;
}

static mmt_status explain_matmul(mmt_context *ctx, const mmt_matmul_desc *d, mmt_choice *choice,
                                 ut_err *err) {
  if (!choice) return ut_fail(err, MMT_ERR_INVALID_ARG, "choice is NULL");
  memset(choice, 0, sizeof *choice);
  mmt_status rc = rt_matmul_check_fields(d, err);
  if (!rc) rc = check_open(ctx, err);
  if (rc) return rc;
  rt_matmul_plan pl;
  matmul_plan(d, &pl);
  if (pl.plain || d->m == 0 || d->n == 0) {
    pthread_mutex_lock(&ctx->lock);
    rc = rt_explain_matmul(ctx->chooser, ctx->db, ctx->dev.info.name, d, choice, err);
    pthread_mutex_unlock(&ctx->lock);
    return rc;
  }
  const problem_key key = explained_op_key(&pl);
  pthread_mutex_lock(&ctx->lock);
  const problem_slot *s = slot_find(ctx, &key);
  if (s)
    *choice = s->choice; /* what calls of this problem launch */
  else
    rc = rt_explain_matmul(ctx->chooser, ctx->db, ctx->dev.info.name, d, choice, err);
  pthread_mutex_unlock(&ctx->lock);
  return rc;
}

mmt_status mmt_explain_matmul(mmt_context *ctx, const mmt_matmul_desc *desc, mmt_choice *choice) {
  if (!ctx) return MMT_ERR_INVALID_ARG;
  ut_err *err = call_err(ctx);
  return finish(ctx, "mmt_explain_matmul", explain_matmul(ctx, desc, choice, err), err);
}

mmt_status mmt_explain(mmt_context *ctx, const mmt_problem *p, mmt_choice *choice) {
  if (!ctx) return MMT_ERR_INVALID_ARG;
  ut_err *err = call_err(ctx);
  return finish(ctx, "mmt_explain", explain(ctx, p, choice, err), err);
}
