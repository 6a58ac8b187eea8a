/*
 * cli/compile.c -- the CLI's inspection commands: templates, space, emit, compile, show.
 */
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "db.h"
#include "gen.h"
#include "gpu/pool.h"
#include "rt_compile.h"

/* Length of the first line of s (messages are shown one line each). */
static int first_line_len(const char *s) { return (int)strcspn(s, "\r\n"); }

/* ---- walking a template's space ------------------------------------------------------- */

typedef mmt_status (*config_fn)(gen_template *t, const gen_config *cfg, void *user, ut_err *e);

/* Which configs each_valid visits: those valid for a problem, for a dtype and layout (any
 * problem), or for any of the template's dtypes and layouts (both NULL). */
typedef struct {
  const gen_problem *problem;
  const char *dtype, *layout;
} space_filter;

/* Calls fn for each config of t that passes the constraints as f says. */
static mmt_status each_valid(gen_template *t, const space_filter *f, config_fn fn, void *user,
                             ut_err *e) {
  uint64_t size = gen_space_size(t);
  for (uint64_t idx = 0; idx < size; idx++) {
    gen_config cfg;
    bool valid = false;
    gen_config_at(t, idx, &cfg);
    mmt_status rc = f->dtype ? gen_check_for(t, &cfg, f->dtype, f->layout, &valid, NULL, 0, e)
                             : gen_check(t, &cfg, f->problem, &valid, NULL, 0, e);
    if (rc == MMT_OK && valid) rc = fn(t, &cfg, user, e);
    if (rc != MMT_OK) return rc;
  }
  return MMT_OK;
}

static mmt_status count_one(gen_template *t, const gen_config *cfg, void *user, ut_err *e) {
  (void)t, (void)cfg, (void)e;
  (*(uint64_t *)user)++;
  return MMT_OK;
}

/* Loads one template named on the command line; exit code as tn_load_templates. */
static int load_one(const char *cmd, char *name, gen_template **t) {
  gen_template **ts = NULL;
  int n = 0;
  int rc = tn_load_templates(cmd, &name, 1, &ts, &n);
  *t = rc == TN_EXIT_OK ? ts[0] : NULL;
  free(ts);
  return rc;
}

/* The layout option of a command, which template t must support. */
static int template_layout(const char *cmd, const tn_opts *o, const gen_template *t,
                           const char **layout) {
  int rc = tn_opt_layout(cmd, tn_opts_get(o, "layout"), layout);
  if (rc == TN_EXIT_OK && !gen_supports_layout(t, *layout))
    rc = tn_usage_error(cmd, "template '%s' does not support layout '%s'", gen_name(t), *layout);
  return rc;
}

/* The dtype option of a command, which template t must support. */
static int template_dtype(const char *cmd, const tn_opts *o, const gen_template *t,
                          const char **dtype) {
  int rc = tn_opt_dtype(cmd, tn_opts_get(o, "dtype"), dtype);
  if (rc == TN_EXIT_OK && !gen_supports_dtype(t, *dtype))
    rc = tn_usage_error(cmd, "template '%s' does not support dtype '%s'", gen_name(t), *dtype);
  return rc;
}

static int width_of(int w, const char *s) { return (int)strlen(s) > w ? (int)strlen(s) : w; }

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

/* ---- mmtune templates ----------------------------------------------------------------- */

static const tn_cmd_spec templates_spec = {
    "templates", "",
    "Lists every template on the search path ($MMTUNE_TEMPLATE_PATH, <prefix>/share/mmtune/\n"
    "templates, the source tree): its dtypes, parameters with their values, the size of its\n"
    "space and how many configs pass its constraints, and its file.  A template that fails\n"
    "to load is listed with its error; the exit code is then 1.",
    NULL, 0};

/* Prints text with every line indented by `indent` spaces. */
static void print_indented(const char *text, int indent) {
  while (*text) {
    int len = first_line_len(text);
    printf("%*s%.*s\n", indent, "", len, text);
    text += len;
    if (*text == '\r') text++;
    if (*text == '\n') text++;
  }
}

static bool describe_template(gen_template *t) {
  printf("%s: %s\n  path:    %s\n  dtypes: ", gen_name(t), gen_description(t), gen_path(t));
  for (int i = 0; i < gen_dtype_count(t); i++) printf(" %s", gen_dtype(t, i));
  printf("\n  layouts:");
  for (int i = 0; i < GEN_LAYOUTS; i++)
    if (gen_supports_layout(t, gen_layout_name(i))) printf(" %s", gen_layout_name(i));
  printf("\n");
  for (int i = 0; i < gen_param_count(t); i++) {
    printf("  %-8s %s =", i == 0 ? "params:" : "", gen_param_name(t, i));
    for (int j = 0; j < gen_param_value_count(t, i); j++)
      printf("%s %lld", j ? "," : "", (long long)gen_param_value(t, i, j));
    printf("\n");
  }
  uint64_t valid = 0;
  ut_err e;
  const space_filter any = {NULL, NULL, NULL};
  if (each_valid(t, &any, count_one, &valid, &e) != MMT_OK) {
    printf("  space:   %llu configs; constraints failed:\n", (unsigned long long)gen_space_size(t));
    print_indented(e.msg, 4);
    return false;
  }
  printf("  space:   %llu configs, %llu valid\n", (unsigned long long)gen_space_size(t),
         (unsigned long long)valid);
  return true;
}

int tn_cmd_templates(int argc, char **argv) {
  tn_opts o;
  int rc = tn_opts_parse(&templates_spec, argc, argv, &o);
  if (rc == TN_EXIT_OK && !o.help && o.npos > 0)
    rc = tn_usage_error("templates", "unexpected argument '%s'", o.pos[0]);
  tn_opts_free(&o);
  if (rc != TN_EXIT_OK || o.help) return rc;

  char **names = NULL;
  int n = 0;
  ut_err e;
  if (gen_list(&names, &n, &e) != MMT_OK) return tn_fail("templates", "%s", e.msg);
  if (n == 0) rc = tn_fail("templates", "no templates on the search path (MMTUNE_TEMPLATE_PATH)");
  for (int i = 0; i < n; i++) {
    gen_template *t = NULL;
    if (i > 0) printf("\n");
    if (gen_load_named(names[i], &t, &e) != MMT_OK) {
      printf("%s: failed to load\n", names[i]);
      print_indented(e.msg, 4);
      rc = TN_EXIT_FAIL;
    } else if (!describe_template(t)) {
      rc = TN_EXIT_FAIL;
    }
    gen_free(t);
  }
  gen_names_free(names, n);
  return rc;
}

/* ---- mmtune space --------------------------------------------------------------------- */

static const tn_opt space_opts[] = {
    {"problem", 'p', "MxNxK",
     "only configs valid for this problem (lda=K, ldb=N, ldc=N, 16-byte aligned)"},
    {"dtype", 0, "DTYPE", "element type the kernels are emitted for with --problem (default f32)"},
    {"layout", 'l', "LAYOUT", "with --problem: nn (default), nt, tn or tt (t: stored transposed)"},
    {"count", 'c', NULL, "print only the number of configs"},
};
static const tn_cmd_spec space_spec = {
    "space", "TEMPLATE [--problem MxNxK] [--count]",
    "Prints each config of TEMPLATE that passes its constraints, one per line in canonical\n"
    "form (name=value,...).  With --problem, also the problem constraints and the kernel's\n"
    "requirements (multiples of M/N/K, alignment).",
    space_opts, 4};

typedef struct {
  const gen_problem *problem; /* NULL: configs alone */
  bool count_only;
  uint64_t count;
} space_walk;

static mmt_status space_visit(gen_template *t, const gen_config *cfg, void *user, ut_err *e) {
  space_walk *w = user;
  if (w->problem) {
    gen_kernel k;
    mmt_status rc = gen_emit(t, cfg, w->problem->dtype, w->problem->layout, &k, e);
    if (rc != MMT_OK) return rc;
    bool met = gen_requires_met(&k.requires, w->problem);
    gen_kernel_clear(&k);
    if (!met) return MMT_OK;
  }
  w->count++;
  if (w->count_only) return MMT_OK;
  char text[1024];
  mmt_status rc = gen_config_format(t, cfg, text, sizeof text, e);
  if (rc == MMT_OK) printf("%s\n", text);
  return rc;
}

/* The --problem of space as a gen_problem (packed rows in its layout, 16-byte aligned). */
static int space_problem(const tn_opts *o, const gen_template *t, gen_problem *p) {
  const char *text = tn_opts_get(o, "problem");
  tn_shape s;
  ut_err e;
  int rc = template_dtype("space", o, t, &p->dtype);
  if (rc != TN_EXIT_OK) return rc;
  if ((rc = template_layout("space", o, t, &p->layout)) != TN_EXIT_OK) return rc;
  if (tn_parse_shape(text, &s, &e) != MMT_OK)
    return tn_usage_error("space", "--problem: %s", e.msg);
  int64_t ld[3];
  gen_min_ld(p->layout, s.m, s.n, s.k, ld);
  p->m = s.m, p->n = s.n, p->k = s.k;
  p->lda = ld[0], p->ldb = ld[1], p->ldc = ld[2];
  p->align_bytes = 16;
  return TN_EXIT_OK;
}

int tn_cmd_space(int argc, char **argv) {
  tn_opts o;
  gen_template *t = NULL;
  gen_problem problem = {0};
  space_walk w = {NULL, false, 0};
  int rc = tn_opts_parse(&space_spec, argc, argv, &o);
  if (rc != TN_EXIT_OK || o.help) goto cleanup;
  if (o.npos != 1) {
    rc = o.npos == 0 ? tn_usage_error("space", "missing TEMPLATE (see mmtune templates)")
                     : tn_usage_error("space", "unexpected argument '%s'", o.pos[1]);
    goto cleanup;
  }
  if ((rc = load_one("space", o.pos[0], &t)) != TN_EXIT_OK) goto cleanup;
  if (tn_opts_has(&o, "problem")) {
    if ((rc = space_problem(&o, t, &problem)) != TN_EXIT_OK) goto cleanup;
    w.problem = &problem;
  } else if (tn_opts_has(&o, "dtype") || tn_opts_has(&o, "layout")) {
    rc = tn_usage_error("space", "--%s needs --problem", tn_opts_has(&o, "dtype") ? "dtype" : "layout");
    goto cleanup;
  }
  w.count_only = tn_opts_has(&o, "count");
  ut_err e;
  const space_filter filter = {w.problem, NULL, NULL};
  if (each_valid(t, &filter, space_visit, &w, &e) != MMT_OK) {
    rc = tn_fail("space", "%s", e.msg);
    goto cleanup;
  }
  if (w.count_only) printf("%llu\n", (unsigned long long)w.count);
cleanup:
  gen_free(t);
  tn_opts_free(&o);
  return rc;
}

/* ---- mmtune emit ---------------------------------------------------------------------- */

static const tn_opt emit_opts[] = {
    {"dtype", 0, "DTYPE", "element type (default f32)"},
    {"layout", 'l', "LAYOUT", "nn (default), nt, tn or tt: how A and B are stored (t: transposed)"},
    {"info", 'i', NULL, "append the launch description to stdout as a trailing /* comment */"},
};
static const tn_cmd_spec emit_spec = {
    "emit", "TEMPLATE [NAME=VALUE ...] [--dtype DTYPE] [--layout LAYOUT] [--info]",
    "Prints the CUDA C of one config of TEMPLATE on stdout and nothing else, so\n"
    "'mmtune emit smem_tiled > k.cu' gives a file that compiles on its own.  The config is the\n"
    "template's default with the NAME=VALUE overrides (see mmtune templates for the\n"
    "parameters).  --info appends the kernel name, block, grid rule, shared memory and\n"
    "requirements as a comment block after the source.",
    emit_opts, 3};

static void print_launch_info(const gen_template *t, const char *params, const gen_kernel *k) {
  printf("\n/* mmtune emit %s %s\n", gen_name(t), params);
  printf(" *   kernel:       %s\n", k->kernel_name);
  printf(" *   block:        %u x %u x %u\n", k->block[0], k->block[1], k->block[2]);
  printf(" *   grid:        ");
  for (int i = 0; i < 3; i++) {
    const gen_grid_dim *g = &k->grid[i];
    printf("%s", i ? " x " : " ");
    if (g->dim == 'S')
      printf("%lld per SM", (long long)g->tile);
    else if (g->dim)
      printf("ceil(%c/%lld)", g->dim, (long long)g->tile);
    else
      printf("%lld", (long long)g->tile);
  }
  printf("\n *   shared bytes: %u (dynamic)\n *   requires:    ", k->shared_bytes);
  const gen_requires *r = &k->requires;
  if (r->m_multiple > 1) printf(" M %% %lld == 0,", (long long)r->m_multiple);
  if (r->n_multiple > 1) printf(" N %% %lld == 0,", (long long)r->n_multiple);
  if (r->k_multiple > 1) printf(" K %% %lld == 0,", (long long)r->k_multiple);
  printf(" %d-byte aligned A, B, C and rows\n */\n", r->align_bytes);
}

/* Default config of t with the NAME=VALUE overrides of pos[0..n-1]; exit 2 when it is not
 * valid for dtype and layout. */
static int emit_config(gen_template *t, char **pos, int n, const char *dtype, const char *layout,
                       gen_config *cfg) {
  char text[2048] = "";
  size_t used = 0;
  for (int i = 0; i < n; i++) {
    int w = snprintf(text + used, sizeof text - used, "%s%s", i ? "," : "", pos[i]);
    if (w < 0 || (size_t)w >= sizeof text - used)
      return tn_usage_error("emit", "overrides too long");
    used += (size_t)w;
  }
  ut_err e;
  gen_config_default(t, cfg);
  if (n > 0 && gen_config_parse(t, text, cfg, &e) != MMT_OK)
    return tn_usage_error("emit", "%s", e.msg);
  bool valid = false;
  char why[512] = "";
  if (gen_check_for(t, cfg, dtype, layout, &valid, why, sizeof why, &e) != MMT_OK)
    return tn_fail("emit", "%s", e.msg);
  if (!valid)
    return tn_usage_error("emit", "config violates the template's constraints: %s",
                          why[0] ? why : "(the template gave no reason)");
  return TN_EXIT_OK;
}

int tn_cmd_emit(int argc, char **argv) {
  tn_opts o;
  gen_template *t = NULL;
  gen_kernel k = {0};
  gen_config cfg;
  const char *dtype = NULL, *layout = NULL;
  char params[1024];
  ut_err e;
  int rc = tn_opts_parse(&emit_spec, argc, argv, &o);
  if (rc != TN_EXIT_OK || o.help) goto cleanup;
  if (o.npos == 0) {
    rc = tn_usage_error("emit", "missing TEMPLATE (see mmtune templates)");
    goto cleanup;
  }
  if ((rc = load_one("emit", o.pos[0], &t)) != TN_EXIT_OK) goto cleanup;
  if ((rc = template_dtype("emit", &o, t, &dtype)) != TN_EXIT_OK) goto cleanup;
  if ((rc = template_layout("emit", &o, t, &layout)) != TN_EXIT_OK) goto cleanup;
  if ((rc = emit_config(t, o.pos + 1, o.npos - 1, dtype, layout, &cfg)) != TN_EXIT_OK) goto cleanup;
  if (gen_config_format(t, &cfg, params, sizeof params, &e) != MMT_OK ||
      gen_emit(t, &cfg, dtype, layout, &k, &e) != MMT_OK) {
    rc = tn_fail("emit", "%s", e.msg);
    goto cleanup;
  }
  size_t len = strlen(k.source);
  fputs(k.source, stdout);
  if (len == 0 || k.source[len - 1] != '\n') putchar('\n');
  if (tn_opts_has(&o, "info")) print_launch_info(t, params, &k);
cleanup:
  gen_kernel_clear(&k);
  gen_free(t);
  tn_opts_free(&o);
  return rc;
}

/* ---- mmtune compile ------------------------------------------------------------------- */

static const tn_opt compile_opts[] = {
    {"arch", 'a', "ARCH", "target architecture (default sm_90)"},
    {"jobs", 'j', "N", "compile threads (default: the number of CPUs)"},
    {"dtype", 0, "DTYPE", "element type (default f32); templates without it are skipped"},
    {"layout", 'l', "LAYOUT", "nn (default), nt, tn or tt; templates without it are skipped"},
    {"cache-dir", 0, "DIR",
     "cubin cache folder (default $MMTUNE_CACHE_DIR, else ~/.cache/mmtune/cubin)"},
    {"no-cache", 0, NULL, "compile everything, read and write no cache"},
    {"shard", 0, "I/N",
     "only valid configs I, I+N, I+2N, ... in order: N processes (nodes) cover them once"},
};
static const tn_cmd_spec compile_spec = {
    "compile",
    "[--arch ARCH] [--dtype DTYPE] [--layout LAYOUT] [--jobs N] [--no-cache] [--shard I/N] "
    "[TEMPLATE ...]",
    "Compiles every valid config of each TEMPLATE (all templates when none is named) with\n"
    "NVRTC; needs no GPU.  Prints one line per config:\n"
    "  ok|FAILED  TEMPLATE  PARAMS  SECONDS [cached]\n"
    "(a failure is followed by the first error line), then a summary.  Exit code 1 when any\n"
    "config failed.",
    compile_opts, 7};

typedef struct {
  tn_pool *pool;
  const char *dtype, *layout;
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
  if (!ok) printf("        %.*s\n", first_line_len(err), err);
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
  if (rc == MMT_OK) rc = gen_emit(t, cfg, run->dtype, run->layout, &k, e);
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
    return tn_usage_error("compile", "bad --arch '%s': %.*s", arch, first_line_len(e.msg), e.msg);
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
    run->name_width = width_of(run->name_width, gen_name((*ts)[i]));
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
    if (!gen_supports_dtype(ts[i], run.dtype) || !gen_supports_layout(ts[i], run.layout)) {
      compile_drain(&run, 0);
      printf("%-6s  %-*s  (no %s %s kernels)\n", "skip", run.name_width, gen_name(ts[i]),
             run.dtype, run.layout);
    } else if (each_valid(ts[i], &(space_filter){NULL, run.dtype, run.layout}, compile_submit, &run,
                          &e) != MMT_OK) {
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

/* ---- mmtune show ---------------------------------------------------------------------- */

static const tn_opt show_opts[] = {
    {"db", 0, "PATH", "database (default $MMTUNE_DB, else ~/.cache/mmtune/mmtune.db)"},
    {"device", 'd', "NAME", "only this GPU model, e.g. 'NVIDIA H100 80GB HBM3'"},
    {"all", 'a', NULL, "also print how many measurements (any status) the database holds per GPU"},
};
static const tn_cmd_spec show_spec = {
    "show", "[--db PATH] [--device NAME] [--all]",
    "Prints the best kernel recorded for each (GPU model, dtype, layout, M, N, K): its template,\n"
    "parameters, median time, TFLOP/s and relative error against the reference.",
    show_opts, 3};

typedef struct {
  db_result *rows;
  int n, cap;
  bool nomem;
} show_rows;

static int show_collect(const db_result *r, void *user) {
  show_rows *s = user;
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    db_result *rows = realloc(s->rows, (size_t)cap * sizeof *rows);
    if (!rows) {
      s->nomem = true;
      return 1;
    }
    s->rows = rows, s->cap = cap;
  }
  s->rows[s->n++] = *r;
  return 0;
}

static int width_i64(int w, int64_t v) {
  char buf[24];
  int len = snprintf(buf, sizeof buf, "%lld", (long long)v);
  return len > w ? len : w;
}

static void show_table(const db_result *rows, int n) {
  int wd = 6, wt = 8, wp = 6, wm = 1, wn = 1, wk = 1;
  for (int i = 0; i < n; i++) {
    wd = width_of(wd, rows[i].device.name), wt = width_of(wt, rows[i].template_name);
    wp = width_of(wp, rows[i].params), wm = width_i64(wm, rows[i].problem.m);
    wn = width_i64(wn, rows[i].problem.n), wk = width_i64(wk, rows[i].problem.k);
  }
  printf("%-*s  %-5s  %-6s  %*s  %*s  %*s  %-*s  %-*s  %10s  %8s  %8s\n", wd, "device", "dtype",
         "layout", wm, "M", wn, "N", wk, "K", wt, "template", wp, "params", "median ms", "TFLOP/s",
         "rel err");
  for (int i = 0; i < n; i++) {
    const db_result *r = &rows[i];
    printf("%-*s  %-5s  %-6s  %*lld  %*lld  %*lld  %-*s  %-*s  %10.4f  %8.2f  %8.1e\n", wd,
           r->device.name, r->problem.dtype, r->problem.layout, wm, (long long)r->problem.m, wn,
           (long long)r->problem.n, wk, (long long)r->problem.k, wt, r->template_name, wp,
           r->params, r->ms_median, r->tflops, r->rel_err);
  }
}

/* Rows per GPU model (any status): every model with a best row, then the total. */
static int show_counts(db_handle *db, const show_rows *s, const char *device) {
  int64_t count = 0;
  ut_err e;
  printf("\nmeasurements (any status):\n");
  for (int i = 0; i < s->n; i++) {
    const char *name = s->rows[i].device.name;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) seen = strcmp(s->rows[j].device.name, name) == 0;
    if (seen) continue;
    if (db_count(db, name, &count, &e) != MMT_OK) return tn_fail("show", "%s", e.msg);
    printf("  %-30s %lld\n", name, (long long)count);
  }
  if (db_count(db, device, &count, &e) != MMT_OK) return tn_fail("show", "%s", e.msg);
  printf("  %-30s %lld\n", "total", (long long)count);
  return TN_EXIT_OK;
}

static int show_open(const tn_opts *o, char *path, size_t pathlen, db_handle **db) {
  int rc = tn_opt_db_path("show", tn_opts_get(o, "db"), path, pathlen);
  if (rc != TN_EXIT_OK) return rc;
  ut_err e;
  mmt_status st = db_open(path, true, db, &e);
  if (st == MMT_ERR_NOT_FOUND)
    return tn_fail("show", "no database at '%s' (run mmtune --device 0 first)", path);
  if (st != MMT_OK) return tn_fail("show", "%s", e.msg);
  return TN_EXIT_OK;
}

int tn_cmd_show(int argc, char **argv) {
  tn_opts o;
  db_handle *db = NULL;
  show_rows s = {0};
  char path[4096];
  ut_err e;
  int rc = tn_opts_parse(&show_spec, argc, argv, &o);
  if (rc != TN_EXIT_OK || o.help) goto cleanup;
  if (o.npos > 0) {
    rc = tn_usage_error("show", "unexpected argument '%s'", o.pos[0]);
    goto cleanup;
  }
  if ((rc = show_open(&o, path, sizeof path, &db)) != TN_EXIT_OK) goto cleanup;
  const char *device = tn_opts_get(&o, "device");
  if (db_each_best(db, device, NULL, NULL, show_collect, &s, &e) != MMT_OK || s.nomem) {
    rc = tn_fail("show", "%s", s.nomem ? "out of memory" : e.msg);
    goto cleanup;
  }
  if (s.n == 0)
    printf("no tuned results%s%s%s in '%s'\n", device ? " for '" : "", device ? device : "",
           device ? "'" : "", path);
  else
    show_table(s.rows, s.n);
  if (tn_opts_has(&o, "all")) rc = show_counts(db, &s, device);
cleanup:
  free(s.rows);
  db_close(db);
  tn_opts_free(&o);
  return rc;
}
