/*
 * tn_tune.c -- the main job: `mmtune [tune] --device N`.  For every shape, template, dtype and
 * valid config: compile (thread pool, ahead of the GPU), verify and time in the worker
 * process, store the result with its provenance.  Resumable: configs already measured with the
 * same provenance are skipped.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "gen.h"
#include "rt_choose.h"
#include "rt_compile.h"
#include "tn_cli.h"
#include "tn_opts.h"
#include "tn_pool.h"
#include "tn_worker.h"

/* The default shape suite: the public benchmark shapes (shared/bench/shapes.txt) plus small
 * and ragged ones where launch overhead and tails dominate. */
static const tn_shape DEFAULT_SHAPES[] = {
    {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
    {3000, 3000, 3000}, {16, 4096, 4096},   {4096, 16, 4096},   {4096, 4096, 64},
    {8192, 8192, 128},  {512, 512, 16384},  {128, 128, 128},    {1000, 999, 1001},
};

static const tn_opt TUNE_OPTS[] = {
    {"device", 'd', "N", "CUDA device ordinal (default 0)"},
    {"shapes", 's', "FILE|MxNxK,...", "shapes to tune (default: the built-in suite)"},
    {"templates", 't', "A,B", "templates to tune (default: all on the search path)"},
    {"dtype", 0, "DTYPE", "element type (default: every dtype each template supports)"},
    {"db", 0, "PATH", "results database (default $MMTUNE_DB or ~/.cache/mmtune/mmtune.db)"},
    {"cache-dir", 0, "DIR", "cubin cache (default ~/.cache/mmtune/cubin)"},
    {"jobs", 'j', "N", "compile threads (default: CPU count)"},
    {"budget", 'b', "SECONDS", "stop timing new configs of a shape after this long"},
    {"watchdog", 'w', "SECONDS", "a candidate with no result after this is killed (default 60)"},
    {"force", 'f', NULL, "measure again configs already in the database"},
};

static const tn_cmd_spec TUNE_SPEC = {
    "tune", "[--device N] [--shapes FILE|MxNxK,...] [--templates A,B] [options]",
    "Tunes every shape: each valid config of each template is compiled, verified against a\n"
    "float64 reference on fresh random inputs, timed, and stored in the database.  A run that\n"
    "is interrupted (Ctrl-C) resumes where it stopped.",
    TUNE_OPTS, (int)(sizeof TUNE_OPTS / sizeof TUNE_OPTS[0])};

static volatile sig_atomic_t g_interrupted;
static void on_sigint(int sig) {
  (void)sig;
  g_interrupted = 1;
}

/* One distinct kernel: a template config for a dtype (its source does not depend on shape). */
typedef struct {
  int tmpl;
  char dtype[8];
  char params[256];
  gen_kernel spec; /* source freed after submit */
  bool compiled;
  mmt_status compile_rc;
  char compile_error[512];
  rt_cubin cubin;
} tune_kernel;

/* One measurement to make: a kernel on a shape. */
typedef struct {
  int shape, kernel;
} tune_job;

typedef struct {
  /* options */
  int device;
  tn_shape *shapes;
  int nshapes;
  gen_template **ts;
  int nts;
  const char *dtype; /* NULL: all */
  char db_path[4096], cache_dir[4096];
  int jobs;
  double budget_s, watchdog_s;
  bool force;
  /* state */
  db_handle *db;
  tn_worker *worker;
  tn_pool *pool;
  db_device dev;
  char arch[16], nvrtc[16];
  tune_kernel *kernels;
  int nkernels, kernel_cap;
  tune_job *todo;
  int ntodo, todo_cap;
  int skipped;
  int next_back; /* next kernel whose compile result the pool hands back (submission order) */
  bool tty;
} tune_run;

static int parse_numbers(tune_run *r, const tn_opts *o) {
  const char *v;
  int64_t x;
  if ((v = tn_opts_get(o, "device")) && tn_opt_device("tune", v, &r->device)) return TN_EXIT_USAGE;
  if ((v = tn_opts_get(o, "jobs"))) {
    if (tn_opt_i64("tune", v, "--jobs", 1, 1024, &x)) return TN_EXIT_USAGE;
    r->jobs = (int)x;
  }
  ut_err err;
  if ((v = tn_opts_get(o, "budget")) && tn_parse_seconds(v, "--budget", 1e6, &r->budget_s, &err))
    return tn_usage_error("tune", "%s", err.msg);
  r->watchdog_s = 60;
  if ((v = tn_opts_get(o, "watchdog")) &&
      tn_parse_seconds(v, "--watchdog", 1e6, &r->watchdog_s, &err))
    return tn_usage_error("tune", "%s", err.msg);
  return TN_EXIT_OK;
}

static int parse_options(tune_run *r, const tn_opts *o) {
  int ex;
  if (o->npos > 0) return tn_usage_error("tune", "unexpected argument '%s'", o->pos[0]);
  if ((ex = parse_numbers(r, o))) return ex;
  const char *v = tn_opts_get(o, "shapes");
  if (v) {
    if ((ex = tn_opt_shapes("tune", v, &r->shapes, &r->nshapes))) return ex;
  } else {
    r->nshapes = (int)(sizeof DEFAULT_SHAPES / sizeof DEFAULT_SHAPES[0]);
    r->shapes = malloc(sizeof DEFAULT_SHAPES);
    if (!r->shapes) return TN_EXIT_FAIL;
    memcpy(r->shapes, DEFAULT_SHAPES, sizeof DEFAULT_SHAPES);
  }
  if ((v = tn_opts_get(o, "dtype")) && (ex = tn_opt_dtype("tune", v, &r->dtype))) return ex;
  if ((ex = tn_opt_templates("tune", tn_opts_get(o, "templates"), &r->ts, &r->nts))) return ex;
  if ((ex = tn_opt_db_path("tune", tn_opts_get(o, "db"), r->db_path, sizeof r->db_path))) return ex;
  ut_err err;
  v = tn_opts_get(o, "cache-dir");
  if (v ? ut_snprintf(r->cache_dir, sizeof r->cache_dir, &err, "%s", v)
        : ut_default_cubin_dir(r->cache_dir, sizeof r->cache_dir, &err))
    return tn_usage_error("tune", "%s", err.msg);
  r->force = tn_opts_has(o, "force");
  return TN_EXIT_OK;
}

static gen_problem shape_problem(const tn_shape *s, const char *dtype) {
  /* Packed rows; the worker's buffers are cudaMalloc'd (256-byte aligned), so alignment is
   * what the row pitches allow. */
  int64_t elem = gen_dtype_size(dtype);
  uint64_t pitches[] = {256, (uint64_t)(s->k * elem), (uint64_t)(s->n * elem)};
  return (gen_problem){.dtype = dtype, .layout = "nn", .m = s->m, .n = s->n, .k = s->k,
                       .lda = s->k, .ldb = s->n, .ldc = s->n, .align_bytes = rt_align_bytes(pitches, 3)};
}

/* The row that describes a measurement of kernel kid on shape sid (no outcome yet). */
static void result_key(const tune_run *r, int sid, int kid, db_result *row) {
  const tune_kernel *kern = &r->kernels[kid];
  const gen_template *t = r->ts[kern->tmpl];
  memset(row, 0, sizeof *row);
  row->device = r->dev;
  snprintf(row->nvrtc_version, sizeof row->nvrtc_version, "%s", r->nvrtc);
  snprintf(row->template_name, sizeof row->template_name, "%s", gen_name(t));
  snprintf(row->template_hash, sizeof row->template_hash, "%s", gen_source_hash(t));
  snprintf(row->params, sizeof row->params, "%s", kern->params);
  snprintf(row->problem.dtype, sizeof row->problem.dtype, "%s", kern->dtype);
  snprintf(row->problem.layout, sizeof row->problem.layout, "nn");
  row->problem.m = r->shapes[sid].m;
  row->problem.n = r->shapes[sid].n;
  row->problem.k = r->shapes[sid].k;
  row->regs = row->shared_bytes = row->local_bytes = -1;
}

static void *grow(void *arr, int *cap, int need, size_t elem) {
  if (need <= *cap) return arr;
  int cap2 = *cap ? *cap * 2 : 64;
  while (cap2 < need) cap2 *= 2;
  void *p = realloc(arr, (size_t)cap2 * elem);
  if (p) *cap = cap2;
  return p;
}

/* Finds or adds the kernel for (template, config, dtype); emits and submits new ones. */
static mmt_status kernel_for(tune_run *r, int ti, const gen_config *cfg, const char *dtype, int *kid,
                             ut_err *err) {
  char params[256];
  mmt_status rc = gen_config_format(r->ts[ti], cfg, params, sizeof params, err);
  if (rc) return rc;
  for (int i = 0; i < r->nkernels; i++)
    if (r->kernels[i].tmpl == ti && !strcmp(r->kernels[i].params, params) &&
        !strcmp(r->kernels[i].dtype, dtype)) {
      *kid = i;
      return MMT_OK;
    }
  tune_kernel *ks = grow(r->kernels, &r->kernel_cap, r->nkernels + 1, sizeof *ks);
  if (!ks) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  r->kernels = ks;
  tune_kernel *k = &ks[r->nkernels];
  memset(k, 0, sizeof *k);
  k->tmpl = ti;
  snprintf(k->dtype, sizeof k->dtype, "%s", dtype);
  memcpy(k->params, params, sizeof params);
  if ((rc = gen_emit(r->ts[ti], cfg, dtype, &k->spec, err))) return rc;
  if ((rc = tn_pool_submit(r->pool, k->spec.source, k->spec.kernel_name, NULL, err))) return rc;
  free(k->spec.source); /* the pool has its copy */
  k->spec.source = NULL;
  *kid = r->nkernels++;
  return MMT_OK;
}

/* Adds the measurements of one template's valid configs on one shape. */
static mmt_status plan_template(tune_run *r, int sid, int ti, const char *dtype, ut_err *err) {
  gen_template *t = r->ts[ti];
  gen_problem p = shape_problem(&r->shapes[sid], dtype);
  mmt_status rc = MMT_OK;
  for (uint64_t i = 0; i < gen_space_size(t); i++) {
    gen_config cfg;
    bool valid = false;
    gen_config_at(t, i, &cfg);
    if ((rc = gen_check(t, &cfg, &p, &valid, NULL, 0, err))) return rc;
    if (!valid) continue;
    int kid = -1;
    if ((rc = kernel_for(r, ti, &cfg, dtype, &kid, err))) return rc;
    if (!gen_requires_met(&r->kernels[kid].spec.requires, &p)) continue;
    db_result key;
    result_key(r, sid, kid, &key);
    bool found = false;
    if (!r->force && (rc = db_has_result(r->db, &key, &found, err))) return rc;
    if (found) {
      r->skipped++;
      continue;
    }
    tune_job *todo = grow(r->todo, &r->todo_cap, r->ntodo + 1, sizeof *todo);
    if (!todo) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
    r->todo = todo;
    r->todo[r->ntodo++] = (tune_job){sid, kid};
  }
  return MMT_OK;
}

static mmt_status plan(tune_run *r, ut_err *err) {
  mmt_status rc;
  for (int s = 0; s < r->nshapes; s++)
    for (int t = 0; t < r->nts; t++)
      for (int d = 0; d < gen_dtype_count(r->ts[t]); d++) {
        const char *dtype = gen_dtype(r->ts[t], d);
        if (r->dtype && strcmp(r->dtype, dtype)) continue;
        if ((rc = plan_template(r, s, t, dtype, err))) {
          ut_err_prefix(err, "template '%s'", gen_name(r->ts[t]));
          return rc;
        }
      }
  return MMT_OK;
}

/* Waits until kernel kid's compile result is back (the pool returns in submission order). */
static void await_compile(tune_run *r, int kid) {
  while (!r->kernels[kid].compiled) {
    tn_pool_result res;
    if (!tn_pool_next(r->pool, &res)) break;
    tune_kernel *k = &r->kernels[r->next_back++];
    k->compiled = true;
    k->compile_rc = res.rc;
    memcpy(k->compile_error, res.error, sizeof k->compile_error);
    k->cubin = res.cubin;
  }
}

/* The first template (by index) offering dtype: the summary prints each dtype once. */
static int first_template_with(const tune_run *r, const char *dtype) {
  for (int t = 0; t < r->nts; t++)
    if (gen_supports_dtype(r->ts[t], dtype)) return t;
  return -1;
}

/* One line per finished candidate: a redrawn bar on a terminal, a log line otherwise. */
static void report_progress(const tune_run *r, int done, const db_result *row, double best_ms) {
  const db_problem *p = &row->problem;
  if (r->tty) {
    int width = 30, fill = (int)((long long)done * width / r->ntodo);
    printf("\r\033[K[%.*s%.*s] %d/%d  %lldx%lldx%lld  %s %s  best %.3f ms", fill,
           "##############################", width - fill, "..............................", done,
           r->ntodo, (long long)p->m, (long long)p->n, (long long)p->k, row->template_name,
           row->params, best_ms);
  } else if (row->status == DB_OK) {
    printf("[%d/%d] %lldx%lldx%lld %s %s %s: %.4f ms, %.2f TFLOP/s, rel err %.1e\n", done, r->ntodo,
           (long long)p->m, (long long)p->n, (long long)p->k, p->dtype, row->template_name,
           row->params, row->ms_median, row->tflops, row->rel_err);
  } else {
    printf("[%d/%d] %lldx%lldx%lld %s %s %s: %s: %s\n", done, r->ntodo, (long long)p->m,
           (long long)p->n, (long long)p->k, p->dtype, row->template_name, row->params,
           db_status_name(row->status), row->error);
  }
  fflush(stdout);
}

/* The best stored config of every tuned (shape, dtype), then the run's totals. */
static int report_summary(const tune_run *r, double seconds) {
  printf("\n%-20s %-5s %-11s %-34s %10s %9s %9s\n", "shape", "dtype", "template", "params", "ms",
         "TFLOP/s", "max err");
  for (int s = 0; s < r->nshapes; s++)
    for (int t = 0; t < r->nts; t++)
      for (int d = 0; d < gen_dtype_count(r->ts[t]); d++) {
        const char *dtype = gen_dtype(r->ts[t], d);
        if ((r->dtype && strcmp(r->dtype, dtype)) || t != first_template_with(r, dtype)) continue;
        db_problem p = {.m = r->shapes[s].m, .n = r->shapes[s].n, .k = r->shapes[s].k};
        snprintf(p.dtype, sizeof p.dtype, "%s", dtype);
        snprintf(p.layout, sizeof p.layout, "nn");
        db_result best;
        ut_err err;
        char shape[64];
        snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)p.m, (long long)p.n, (long long)p.k);
        if (db_best(r->db, r->dev.name, &p, &best, &err) != MMT_OK) {
          printf("%-20s %-5s (no verified config)\n", shape, dtype);
          continue;
        }
        printf("%-20s %-5s %-11s %-34s %10.4f %9.2f %9.1e\n", shape, dtype, best.template_name,
               best.params, best.ms_median, best.tflops, best.max_err);
      }
  printf("%.1f s on %s; results in %s\n", seconds, r->dev.name, r->db_path);
  if (g_interrupted) {
    printf("interrupted: what was measured is saved; run the same command again to resume\n");
    return 130;
  }
  return TN_EXIT_OK;
}

static mmt_status measure_one(tune_run *r, const tune_job *job, double cutoff_ms, db_result *row,
                              ut_err *err) {
  tune_kernel *k = &r->kernels[job->kernel];
  result_key(r, job->shape, job->kernel, row);
  await_compile(r, job->kernel);
  if (k->compile_rc != MMT_OK) {
    row->status = DB_COMPILE_ERROR;
    snprintf(row->error, sizeof row->error, "%s", k->compile_error);
    return MMT_OK;
  }
  tn_measure_opts o = {.m = row->problem.m, .n = row->problem.n, .k = row->problem.k,
                       .lda = row->problem.k, .ldb = row->problem.n, .ldc = row->problem.n,
                       .cutoff_ms = cutoff_ms};
  snprintf(o.dtype, sizeof o.dtype, "%s", k->dtype);
  o.seed = (uint64_t)ut_unix_time() * 1000003u + (uint64_t)(job - r->todo);
  tn_measurement m;
  mmt_status rc = tn_worker_measure(r->worker, &k->cubin, &k->spec, &o, &m, err);
  if (rc) return rc;
  row->status = m.status;
  snprintf(row->error, sizeof row->error, "%s", m.error);
  row->ms_min = m.ms_min;
  row->ms_median = m.ms_median;
  row->ms_max = m.ms_max;
  row->runs = m.runs;
  row->tflops = m.tflops;
  row->rel_err = m.rel_err;
  row->max_err = m.max_err;
  row->regs = m.regs;
  row->shared_bytes = m.shared_bytes;
  row->local_bytes = m.local_bytes;
  return MMT_OK;
}

/* Measures every planned job in order, storing each result. */
static mmt_status run_jobs(tune_run *r, ut_err *err) {
  mmt_status rc = MMT_OK;
  int shape = -1;
  double shape_start = 0, best_ms = 0;
  for (int i = 0; i < r->ntodo && !g_interrupted; i++) {
    const tune_job *job = &r->todo[i];
    if (job->shape != shape) {
      shape = job->shape;
      shape_start = ut_now_seconds();
      best_ms = 0;
    }
    if (r->budget_s > 0 && ut_now_seconds() - shape_start > r->budget_s) continue;
    db_result row;
    /* A config 2x slower than the best so far is timed once only: it cannot win. */
    if ((rc = measure_one(r, job, best_ms > 0 ? 2 * best_ms : 0, &row, err))) return rc;
    if ((rc = db_insert(r->db, &row, err))) return rc;
    if (row.status == DB_OK && (best_ms == 0 || row.ms_median < best_ms)) best_ms = row.ms_median;
    report_progress(r, i + 1, &row, best_ms);
  }
  if (r->tty) printf("\n");
  return MMT_OK;
}

static void tune_free(tune_run *r) {
  tn_pool_free(r->pool);
  tn_worker_stop(r->worker);
  db_close(r->db);
  for (int i = 0; i < r->nkernels; i++) {
    gen_kernel_clear(&r->kernels[i].spec);
    rt_cubin_free(&r->kernels[i].cubin);
  }
  free(r->kernels);
  free(r->todo);
  tn_templates_free(r->ts, r->nts);
  free(r->shapes);
}

static mmt_status tune_setup(tune_run *r, ut_err *err) {
  mmt_status rc;
  if ((rc = db_open(r->db_path, false, &r->db, err))) return rc;
  if ((rc = rt_nvrtc_version(r->nvrtc, sizeof r->nvrtc, err))) return rc;
  if ((rc = tn_worker_start(r->device, r->cache_dir, r->watchdog_s, &r->worker, &r->dev, r->arch,
                            err))) {
    ut_err_prefix(err, "cannot use device %d", r->device);
    return rc;
  }
  return tn_pool_start(r->jobs, r->arch, r->cache_dir, &r->pool, err);
}

int tn_cmd_tune(int argc, char **argv) {
  tn_opts o;
  tune_run r;
  memset(&r, 0, sizeof r);
  int ex = tn_opts_parse(&TUNE_SPEC, argc, argv, &o);
  if (ex || o.help) goto done;
  if ((ex = parse_options(&r, &o))) goto done;
  ut_err err = {{0}};
  r.tty = isatty(STDOUT_FILENO);
  struct sigaction sa = {.sa_handler = on_sigint}, old_sa;
  sigaction(SIGINT, &sa, &old_sa);
  double t0 = ut_now_seconds();
  mmt_status rc = tune_setup(&r, &err);
  if (!rc) rc = plan(&r, &err);
  if (!rc) {
    printf("mmtune: %s (%s, %d SMs), %d shapes, %d templates: %d to measure, %d already in %s\n",
           r.dev.name, r.arch, r.dev.sm_count, r.nshapes, r.nts, r.ntodo, r.skipped, r.db_path);
    rc = run_jobs(&r, &err);
  }
  sigaction(SIGINT, &old_sa, NULL);
  if (rc) {
    fprintf(stderr, "mmtune tune: %s\n", err.msg);
    ex = TN_EXIT_FAIL;
  } else {
    ex = report_summary(&r, ut_now_seconds() - t0);
  }
done:
  tune_free(&r);
  tn_opts_free(&o);
  return ex;
}
