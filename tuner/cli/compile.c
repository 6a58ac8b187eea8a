/*
 * cli/compile.c -- `mmtune compile`: every valid config of the templates compiled with NVRTC
 * by the compile pool (gpu/pool.h), through the cubin cache; needs no GPU.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/inspect.h"
#include "cli/opts.h"
#include "gen.h"
#include "gpu/pool.h"
#include "rt_compile.h"

/* Length of the longest canonical params text of t ("name=value,..."). */
static int params_width(const gen_template *t) {
  int width = 0;
  for (int i = 0; i < gen_param_count(t); i++) {
    int value = 0;
    for (int j = 0; j < gen_param_value_count(t, i); j++) {
      char buf[24];
      int len = snprintf(buf, sizeof buf, "%lld", (long long)gen_param_value(t, i, j));
      if (len > value) value = len;
    }
    width += (i ? 1 : 0) + (int)strlen(gen_param_name(t, i)) + 1 + value;
  }
  return width;
}

static const tn_opt compile_opts[] = {
    {"arch", 'a', "ARCH", "target architecture (default sm_90)"},
    {"jobs", 'j', "N", "compile threads (default: the number of CPUs)"},
    {"dtype", 0, "DTYPE", "element type (default f32); templates without it are skipped"},
    {"layout", 'l', "LAYOUT", "nn (default), nt, tn or tt; templates without it are skipped"},
    {"epilogue", 'e', "OP",
     "the op kernels of this epilogue (as mmtune emit's); templates without epilogues are "
     "skipped"},
    {"cache-dir", 0, "DIR",
     "cubin cache folder (default $MMTUNE_CACHE_DIR, else ~/.cache/mmtune/cubin)"},
    {"no-cache", 0, NULL, "compile everything, read and write no cache"},
    {"shard", 0, "I/N",
     "only valid configs I, I+N, I+2N, ... in order: N processes (nodes) cover them once"},
};
static const tn_cmd_spec compile_spec = {
    "compile",
    "[--arch ARCH] [--dtype DTYPE] [--layout LAYOUT] [--epilogue OP] [--jobs N] [--no-cache] "
    "[--shard I/N] "
    "[TEMPLATE ...]",
    "Compiles every valid config of each TEMPLATE (all templates when none is named) with\n"
    "NVRTC; needs no GPU.  Prints one line per config:\n"
    "  ok|FAILED  TEMPLATE  PARAMS  SECONDS [cached]\n"
    "(a failure is followed by the first error line), then a summary.  Exit code 1 when any\n"
    "config failed.",
    compile_opts, 8};

typedef struct {
  tn_pool *pool;
  const char *dtype, *layout;
  const gen_op *op; /* NULL: the plain GEMM; else &op_value */
  gen_op op_value;
  int name_width;   /* template name column */
  int params_width; /* params column */
  int window;       /* results kept in flight */
  int total, ok, failed;
  tn_shard shard;
  int64_t item; /* valid configs seen, in order: the shard takes those it owns */
} compile_run;

typedef struct {
  const char *template_name;
  char params[1024];
} compile_job;

static void compile_line(const compile_run *run, const compile_job *job, bool ok, const char *err,
                         double seconds, bool cached) {
  printf("%-6s  %-*s  %-*s  %5.2fs%s\n", ok ? "ok" : "FAILED", run->name_width, job->template_name,
         run->params_width, job->params, seconds, cached ? " cached" : "");
  if (!ok) printf("        %.*s\n", tn_first_line_len(err), err);
}

/* Prints results until at most `keep` are pending. */
static void compile_drain(compile_run *run, int keep) {
  tn_pool_result r;
  while (tn_pool_pending(run->pool) > keep && tn_pool_next(run->pool, &r)) {
    compile_job *job = r.tag;
    bool ok = r.rc == MMT_OK;
    compile_line(run, job, ok, r.error, r.seconds, r.cache_hit);
    if (ok) rt_cubin_free(&r.cubin);
    run->ok += ok;
    run->failed += !ok;
    free(job);
  }
}

/* Emits one config and queues it (a failure to emit is printed in order, as a failed config). */
static mmt_status compile_submit(gen_template *t, const gen_config *cfg, void *user, ut_err *e) {
  compile_run *run = user;
  if (!tn_shard_owns(run->shard, run->item++)) return MMT_OK;
  compile_job *job = calloc(1, sizeof *job);
  if (!job) return ut_fail(e, MMT_ERR_NOMEM, "out of memory");
  job->template_name = gen_name(t);
  gen_kernel k = {0};
  mmt_status rc = gen_config_format(t, cfg, job->params, sizeof job->params, e);
  if (rc == MMT_OK) rc = gen_emit_op(t, cfg, run->dtype, run->layout, run->op, &k, e);
  run->total++;
  if (rc == MMT_OK) rc = tn_pool_submit(run->pool, k.source, k.kernel_name, k.arch, job, e);
  gen_kernel_clear(&k);
  if (rc != MMT_OK) {
    compile_drain(run, 0);
    compile_line(run, job, false, e->msg, 0.0, false);
    run->failed++;
    free(job);
    return rc == MMT_ERR_NOMEM ? rc : MMT_OK;
  }
  compile_drain(run, run->window);
  return MMT_OK;
}

/* A trivial compile: NVRTC rejects an arch it does not know before any template work. */
static int compile_check_arch(const char *arch) {
  static const char probe[] = "extern \"C\" __global__ void mmtune_probe(void) {}\n";
  rt_cubin cubin = {0};
  ut_err e;
  mmt_status rc = rt_compile(probe, "mmtune_probe", arch, &cubin, NULL, &e);
  if (rc == MMT_OK) {
    rt_cubin_free(&cubin);
    return TN_EXIT_OK;
  }
  if (rc == MMT_ERR_INVALID_ARG || rc == MMT_ERR_COMPILE)
    return tn_usage_error("compile", "bad --arch '%s': %.*s", arch, tn_first_line_len(e.msg),
                          e.msg);
  return tn_fail("compile", "%s", e.msg);
}

/* The cache folder for --cache-dir / --no-cache; *dir NULL for no cache. */
static int compile_cache_dir(const tn_opts *o, char *buf, size_t len, const char **dir) {
  const char *given = tn_opts_get(o, "cache-dir");
  ut_err e;
  *dir = NULL;
  if (tn_opts_has(o, "no-cache"))
    return given ? tn_usage_error("compile", "--no-cache and --cache-dir exclude each other")
                 : TN_EXIT_OK;
  if (given) {
    *dir = given;
    return TN_EXIT_OK;
  }
  if (ut_default_cubin_dir(buf, len, &e) != MMT_OK) return tn_fail("compile", "%s", e.msg);
  *dir = buf;
  return TN_EXIT_OK;
}

/* The templates' configs are checked against the limits of arch's devices (no device is at
 * hand: the defaults of its architecture). */
static int compile_device(const char *arch, gen_template **ts, int nts) {
  gen_device dev;
  ut_err e;
  if (gen_device_defaults(arch, &dev, &e) != MMT_OK)
    return tn_usage_error("compile", "--arch: %s", e.msg);
  for (int i = 0; i < nts; i++)
    if (gen_set_device(ts[i], &dev, &e) != MMT_OK) return tn_fail("compile", "%s", e.msg);
  return TN_EXIT_OK;
}

/* Options of compile, then the templates and the pool.  Exit code. */
static int compile_setup(const tn_opts *o, compile_run *run, gen_template ***ts, int *nts) {
  const char *arch = tn_opts_get(o, "arch") ? tn_opts_get(o, "arch") : "sm_90";
  const char *jobs_text = tn_opts_get(o, "jobs");
  char cache_buf[4096];
  const char *cache = NULL;
  int64_t jobs = 0;
  ut_err e;
  int rc = TN_EXIT_OK;
  if (jobs_text) rc = tn_opt_i64("compile", jobs_text, "--jobs", 1, 1024, &jobs);
  if (rc == TN_EXIT_OK) rc = tn_opt_dtype("compile", tn_opts_get(o, "dtype"), &run->dtype);
  if (rc == TN_EXIT_OK) rc = tn_opt_layout("compile", tn_opts_get(o, "layout"), &run->layout);
  bool has_op = false;
  if (rc == TN_EXIT_OK) rc = tn_opt_epilogue("compile", o, run->dtype, &run->op_value, &has_op);
  run->op = has_op ? &run->op_value : NULL;
  if (rc == TN_EXIT_OK) rc = compile_cache_dir(o, cache_buf, sizeof cache_buf, &cache);
  if (rc == TN_EXIT_OK) rc = tn_opt_shard("compile", tn_opts_get(o, "shard"), &run->shard);
  if (rc == TN_EXIT_OK) rc = compile_check_arch(arch);
  if (rc == TN_EXIT_OK)
    rc = o->npos > 0 ? tn_load_templates("compile", o->pos, o->npos, ts, nts)
                     : tn_opt_templates("compile", NULL, ts, nts);
  if (rc == TN_EXIT_OK) rc = compile_device(arch, *ts, *nts);
  if (rc != TN_EXIT_OK) return rc;
  if (tn_pool_start((int)jobs, arch, cache, &run->pool, &e) != MMT_OK)
    return tn_fail("compile", "%s", e.msg);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  run->window = 4 * (jobs > 0 ? (int)jobs : (cpus > 0 ? (int)cpus : 1));
  for (int i = 0; i < *nts; i++) {
    run->name_width = tn_width_of(run->name_width, gen_name((*ts)[i]));
    int w = params_width((*ts)[i]);
    if (w > run->params_width) run->params_width = w;
  }
  return TN_EXIT_OK;
}

int tn_cmd_compile(int argc, char **argv) {
  tn_opts o;
  gen_template **ts = NULL;
  int nts = 0;
  compile_run run = {0};
  int rc = tn_opts_parse(&compile_spec, argc, argv, &o);
  if (rc != TN_EXIT_OK || o.help) goto cleanup;
  if ((rc = compile_setup(&o, &run, &ts, &nts)) != TN_EXIT_OK) goto cleanup;
  double start = ut_now_seconds();
  for (int i = 0; i < nts; i++) {
    ut_err e;
    if (!gen_supports_dtype(ts[i], run.dtype) || !gen_supports_layout(ts[i], run.layout) ||
        (run.op && !gen_has_epilogues(ts[i]))) {
      compile_drain(&run, 0);
      printf("%-6s  %-*s  (no %s %s%s kernels)\n", "skip", run.name_width, gen_name(ts[i]),
             run.dtype, run.layout, run.op ? " op" : "");
    } else if (tn_each_valid(ts[i], &(tn_space_filter){NULL, run.dtype, run.layout, run.op},
                             compile_submit, &run, &e) != MMT_OK) {
      compile_job job = {gen_name(ts[i]), "(constraints)"};
      compile_drain(&run, 0);
      compile_line(&run, &job, false, e.msg, 0.0, false);
      run.total++, run.failed++;
    }
  }
  compile_drain(&run, 0);
  printf("%d configs: %d ok, %d failed, %.1fs\n", run.total, run.ok, run.failed,
         ut_now_seconds() - start);
  rc = run.failed > 0 ? TN_EXIT_FAIL : TN_EXIT_OK;
cleanup:
  tn_pool_free(run.pool);
  tn_templates_free(ts, nts);
  tn_opts_free(&o);
  return rc;
}
