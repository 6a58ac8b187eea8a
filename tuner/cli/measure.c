/*
 * cli/measure.c -- `mmtune measure T [name=value ...] --shape MxNxK`: one config of one
 * template on one problem, verified and timed exactly as tuning does it (the problem's
 * constraints and the kernel's requirements, the cubin cache, the worker process, the tuner's
 * measurement options), then printed.  Writes nothing to the database.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "gen.h"
#include "gpu/measure.h"
#include "gpu/worker.h"
#include "rt_compile.h"

#define CMD "measure"
#define DEFAULT_WATCHDOG_S 60 /* as tune */
#define MAX_RUNS 100000

static const tn_opt MEASURE_OPTS[] = {
    {"shape", 's', "MxNxK", "the problem: C (M x N) = op(A) (M x K) * op(B) (K x N); required"},
    {"dtype", 0, "DTYPE", "element type (default f32)"},
    {"layout", 'l', "LAYOUT", "nn (default), nt, tn or tt: how A and B are stored (t: transposed)"},
    {"lda", 0, "N", "row pitch of A in elements (default: A's row width, K or M by layout)"},
    {"ldb", 0, "N", "row pitch of B in elements (default: B's row width, N or K by layout)"},
    {"ldc", 0, "N", "row pitch of C (D) in elements (default N, or N/2 for a gated epilogue)"},
    {"epilogue", 'e', "OP",
     "an op kernel's epilogue, e.g. out=f32,bias=col,act=silu (mmtune emit --help lists the "
     "fields; N counts the product's columns)"},
    {"batch", 0, "N", "problems of one launch of an op kernel (default 1)"},
    {"device", 'd', "N", "CUDA device ordinal (default 0)"},
    {"runs", 'r', "N", "at most N timed runs (default: as tuning, up to 200 within about 100 ms)"},
    {"cutoff", 0, "MS",
     "as the tuner times a candidate behind a best of MS/2: if the median of "
     "its first 3 timed runs is over MS milliseconds, they are all it gets"},
    {"cache-dir", 0, "DIR", "cubin cache (default $MMTUNE_CACHE_DIR, else ~/.cache/mmtune/cubin)"},
    {"watchdog", 'w', "SECONDS", "a kernel with no result after this is killed (default 60)"},
};

static const tn_cmd_spec MEASURE_SPEC = {
    CMD,
    "TEMPLATE [NAME=VALUE ...] --shape MxNxK [--dtype DTYPE] [--layout LAYOUT]\n"
    "       [--lda N --ldb N --ldc N] [--epilogue OP] [--batch N] [--device N] [--runs N]\n"
    "       [--cutoff MS]",
    "Verifies and times one config of TEMPLATE on one problem as tuning does: the config is\n"
    "the template's default with the NAME=VALUE overrides (see mmtune templates); it must pass\n"
    "the template's constraints for the problem and meet its kernel's requirements (buffers\n"
    "are 256-byte aligned, so alignment is what the row pitches allow).  It is compiled\n"
    "through the cubin cache, then a worker process checks it against a float64 reference on\n"
    "fresh random inputs and times it with CUDA events.  Prints the device, the config, the\n"
    "problem, the status, the times, TFLOP/s, the errors and the kernel's registers and\n"
    "memory.  With --epilogue, the config's op kernel: D (in place of C, of the op's output\n"
    "type) is checked against the whole expression in float64, with random bias and scale\n"
    "vectors, for each of --batch problems.  Nothing is written to the database.  Exit code\n"
    "0 when the config verified and\n"
    "was timed, 1 when it did not (verify_failed, fault, timeout, launch_error,\n"
    "compile_error, pruned) or the device cannot be used, 2 for bad arguments.",
    MEASURE_OPTS, (int)(sizeof MEASURE_OPTS / sizeof MEASURE_OPTS[0])};

typedef struct {
  /* options */
  gen_template *t;
  gen_config cfg;
  char params[1024]; /* canonical */
  gen_problem p;     /* dtype and layout borrow argv or literals; op points to `op` */
  gen_op op;
  int device;
  int runs; /* 0: the tuner's default */
  double cutoff_ms; /* --cutoff; 0: none */
  double watchdog_s;
  char cache_dir[4096];
  /* state */
  gen_kernel k;
  tn_worker *worker;
  db_device dev;
  char arch[16]; /* the device's */
} measure_run;

/* ---- options ------------------------------------------------------------------------------ */

/* The template (pos[0]) and its config: the default with the overrides pos[1..]. */
static int parse_config(const tn_opts *o, measure_run *r) {
  if (o->npos == 0) return tn_usage_error(CMD, "missing TEMPLATE (see mmtune templates)");
  gen_template **ts = NULL;
  int n = 0;
  int ex = tn_load_templates(CMD, o->pos, 1, &ts, &n);
  if (ex) return ex;
  r->t = ts[0];
  free(ts);
  char text[2048] = "";
  size_t used = 0;
  for (int i = 1; i < o->npos; i++) {
    int w = snprintf(text + used, sizeof text - used, "%s%s", i > 1 ? "," : "", o->pos[i]);
    if (w < 0 || (size_t)w >= sizeof text - used) return tn_usage_error(CMD, "overrides too long");
    used += (size_t)w;
  }
  ut_err e;
  if (gen_config_parse(r->t, text, &r->cfg, &e)) return tn_usage_error(CMD, "%s", e.msg);
  if (gen_config_format(r->t, &r->cfg, r->params, sizeof r->params, &e))
    return tn_fail(CMD, "%s", e.msg);
  return TN_EXIT_OK;
}

/* --dtype and --layout, which the template must offer and the tuner must be able to measure. */
static int parse_types(const tn_opts *o, measure_run *r) {
  int ex = tn_opt_dtype(CMD, tn_opts_get(o, "dtype"), &r->p.dtype);
  if (ex) return ex;
  if (!gen_supports_dtype(r->t, r->p.dtype))
    return tn_usage_error(CMD, "template '%s' does not support dtype '%s'", gen_name(r->t),
                          r->p.dtype);
  if (!tn_measure_supports(r->p.dtype))
    return tn_usage_error(CMD,
                          "dtype %s cannot be measured yet (f32, tf32, f16, bf16, e4m3 "
                          "and e5m2 can)",
                          r->p.dtype);
  if ((ex = tn_opt_layout(CMD, tn_opts_get(o, "layout"), &r->p.layout))) return ex;
  if (!gen_supports_layout(r->t, r->p.layout))
    return tn_usage_error(CMD, "template '%s' does not support layout '%s'", gen_name(r->t),
                          r->p.layout);
  bool has_op = false;
  if ((ex = tn_opt_measured_epilogue(CMD, o, r->p.dtype, &r->op, &has_op))) return ex;
  r->p.op = has_op ? &r->op : NULL;
  if (!has_op && gen_dtype_fp8(r->p.dtype))
    return tn_usage_error(CMD, "%s inputs need --epilogue (D is f32, f16 or bf16)", r->p.dtype);
  if (has_op && !gen_has_epilogues(r->t))
    return tn_usage_error(CMD, "template '%s' has no epilogues", gen_name(r->t));
  r->p.batch = 1;
  const char *v = tn_opts_get(o, "batch");
  if (v && tn_opt_i64(CMD, v, "--batch", 1, 65535, &r->p.batch)) return TN_EXIT_USAGE;
  if (r->p.batch > 1 && !has_op)
    return tn_usage_error(CMD,
                          "--batch needs --epilogue (a batch runs an op kernel; "
                          "--epilogue out=%s is the plain product)",
                          strcmp(r->p.dtype, "tf32") ? r->p.dtype : "f32");
  return TN_EXIT_OK;
}

/* --shape and the pitches; alignment as in the tuner's cudaMalloc'd (256-byte) buffers. */
static int parse_shape(const tn_opts *o, measure_run *r) {
  static const char *const ld_names[3] = {"lda", "ldb", "ldc"}, *const operands = "ABC";
  const char *text = tn_opts_get(o, "shape");
  if (!text) return tn_usage_error(CMD, "missing --shape MxNxK (e.g. --shape 1024x1024x1024)");
  tn_shape s;
  ut_err e;
  if (tn_parse_shape(text, &s, &e)) return tn_usage_error(CMD, "--shape: %s", e.msg);
  gen_problem *p = &r->p;
  p->m = s.m, p->n = s.n, p->k = s.k;
  int64_t min[3], *ld[3] = {&p->lda, &p->ldb, &p->ldc};
  gen_min_ld(p->layout, s.m, s.n, s.k, min);
  if (p->op && p->op->gated) {
    if (s.n % 2)
      return tn_usage_error(CMD,
                            "a gated epilogue needs an even N (gate and up columns), got "
                            "%lld",
                            (long long)s.n);
    min[2] = s.n / 2;
  }
  const char width[3] = {p->layout[0] == 'n' ? 'K' : 'M', p->layout[1] == 'n' ? 'N' : 'K', 'N'};
  for (int i = 0; i < 3; i++) {
    char what[8];
    snprintf(what, sizeof what, "--%s", ld_names[i]);
    *ld[i] = min[i];
    const char *v = tn_opts_get(o, ld_names[i]);
    if (v && tn_opt_i64(CMD, v, what, 1, TN_DIM_MAX, ld[i])) return TN_EXIT_USAGE;
    if (*ld[i] < min[i])
      return tn_usage_error(CMD, "%s must be at least %lld, the row width of %c (%c) in layout %s,"
                                 " got %lld", what, (long long)min[i], operands[i], width[i],
                            p->layout, (long long)*ld[i]);
  }
  /* A matrix of one row at the pitch mmt_gemm and the tuner give it (gen_one_row_pitches). */
  int64_t one_row[3] = {p->lda, p->ldb, p->ldc};
  gen_one_row_pitches(p->layout, s.m, s.n, s.k, one_row);
  p->lda = one_row[0], p->ldb = one_row[1], p->ldc = one_row[2];
  int64_t elem = gen_dtype_size(p->dtype);
  /* an op kernel loads A and B only (its epilogue stores D at any alignment) */
  uint64_t pitches[] = {256, (uint64_t)(p->lda * elem), (uint64_t)(p->ldb * elem),
                        p->op ? 256 : (uint64_t)(p->ldc * elem)};
  p->align_bytes = gen_align_bytes(pitches, 4);
  return TN_EXIT_OK;
}

/* --device, --runs, --cutoff, --watchdog, --cache-dir. */
static int parse_numbers(const tn_opts *o, measure_run *r) {
  const char *v;
  int64_t x;
  ut_err e;
  if ((v = tn_opts_get(o, "device")) && tn_opt_device(CMD, v, &r->device)) return TN_EXIT_USAGE;
  if ((v = tn_opts_get(o, "runs"))) {
    if (tn_opt_i64(CMD, v, "--runs", 1, MAX_RUNS, &x)) return TN_EXIT_USAGE;
    r->runs = (int)x;
  }
  if ((v = tn_opts_get(o, "cutoff")) && tn_parse_positive(v, "--cutoff", 1e9, &r->cutoff_ms, &e))
    return tn_usage_error(CMD, "%s", e.msg);
  r->watchdog_s = DEFAULT_WATCHDOG_S;
  if ((v = tn_opts_get(o, "watchdog")) &&
      tn_parse_seconds(v, "--watchdog", 1e6, &r->watchdog_s, &e))
    return tn_usage_error(CMD, "%s", e.msg);
  v = tn_opts_get(o, "cache-dir");
  if (v ? ut_snprintf(r->cache_dir, sizeof r->cache_dir, &e, "%s", v)
        : ut_default_cubin_dir(r->cache_dir, sizeof r->cache_dir, &e))
    return tn_usage_error(CMD, "%s", e.msg);
  return TN_EXIT_OK;
}

/* Why the emitted kernel's requirements are not met by the problem (gen_requires_met's
 * checks; the pitches were checked against the row widths already). */
static void unmet_reason(const gen_requires *q, const gen_problem *p, char *out, size_t len) {
  const int64_t mult[3] = {q->m_multiple, q->n_multiple, q->k_multiple};
  const int64_t dim[3] = {p->m, p->n, p->k};
  for (int i = 0; i < 3; i++)
    if (mult[i] > 1 && dim[i] % mult[i] != 0) {
      snprintf(out, len, "the kernel needs %c %% %lld == 0, %c is %lld", "MNK"[i],
               (long long)mult[i], "MNK"[i], (long long)dim[i]);
      return;
    }
  if (p->align_bytes < q->align_bytes && !q->repack) {
    snprintf(out, len, "the kernel needs %d-byte aligned rows; lda, ldb and ldc give %d bytes",
             q->align_bytes, p->align_bytes);
    return;
  }
  snprintf(out, len, "the problem does not meet the kernel's requirements");
}

/* The config against the problem: the template's constraints, then the emitted kernel's
 * requirements, as tuning plans candidates (engine/plan.c).  Emits r->k. */
static int check_config(measure_run *r) {
  const gen_problem *p = &r->p;
  bool valid = false;
  char why[512] = "";
  ut_err e;
  if (gen_check(r->t, &r->cfg, p, &valid, why, sizeof why, &e)) return tn_fail(CMD, "%s", e.msg);
  if (valid) {
    if (gen_emit_op(r->t, &r->cfg, p->dtype, p->layout, p->op, &r->k, &e))
      return tn_fail(CMD, "%s", e.msg);
    valid = gen_requires_met(&r->k.requires, p);
    if (!valid) unmet_reason(&r->k.requires, p, why, sizeof why);
  }
  if (valid) return TN_EXIT_OK;
  return tn_usage_error(CMD, "%s %s is invalid for %lldx%lldx%lld %s %s: %s", gen_name(r->t),
                        r->params, (long long)p->m, (long long)p->n, (long long)p->k, p->dtype,
                        p->layout, why[0] ? why : "(the template gave no reason)");
}

static int parse_options(const tn_opts *o, measure_run *r) {
  int ex;
  if ((ex = parse_config(o, r))) return ex;
  if ((ex = parse_types(o, r))) return ex;
  if ((ex = parse_shape(o, r))) return ex;
  if ((ex = parse_numbers(o, r))) return ex;
  return check_config(r);
}

/* ---- measuring ---------------------------------------------------------------------------- */

/* Prints text, its later lines indented to the value column. */
static void print_value(const char *label, const char *text) {
  printf("%-11s", label);
  do {
    int len = (int)strcspn(text, "\n");
    printf("%.*s\n", len, text);
    text += len;
    if (*text == '\n') text++;
    if (*text) printf("%11s", "");
  } while (*text);
}

static void print_head(const measure_run *r) {
  const gen_problem *p = &r->p;
  printf("%-11s%s (device %d, %s, %d SMs)\n", "device:", r->dev.name, r->device, r->arch,
         r->dev.sm_count);
  printf("%-11s%s %s\n", "kernel:", gen_name(r->t), r->params);
  printf("%-11s%lldx%lldx%lld %s %s, lda %lld, ldb %lld, ldc %lld (%d-byte aligned)\n",
         "problem:", (long long)p->m, (long long)p->n, (long long)p->k, p->dtype, p->layout,
         (long long)p->lda, (long long)p->ldb, (long long)p->ldc, p->align_bytes);
  if (p->op) printf("%-11s%s, batch %lld\n", "epilogue:", r->k.op, (long long)p->batch);
  fflush(stdout);
}

/* Compiles r->k for the device as the tuner's compile pool does (rt_compile_for_device).  A
 * failure is the candidate's: false, and *m says compile_error. */
static bool compile_kernel(const measure_run *r, rt_cubin *cubin, tn_measurement *m) {
  char arch[16];
  bool hit = false;
  ut_err e = {{0}};
  double t0 = ut_now_seconds();
  mmt_status rc = rt_compile_for_device(r->cache_dir, r->arch, r->k.arch, r->k.source,
                                        r->k.kernel_name, cubin, &hit, arch, &e);
  if (rc) {
    memset(m, 0, sizeof *m);
    m->status = DB_COMPILE_ERROR;
    m->regs = m->shared_bytes = m->local_bytes = -1;
    ut_copy(m->error, sizeof m->error, e.msg);
    return false;
  }
  if (hit)
    printf("%-11s%s, from the cubin cache\n", "compiled:", arch);
  else
    printf("%-11s%s in %.2f s\n", "compiled:", arch, ut_now_seconds() - t0);
  fflush(stdout);
  return true;
}

static void print_result(const tn_measurement *m) {
  print_value("status:", db_status_name(m->status));
  if (m->status != DB_OK) print_value("message:", m->error[0] ? m->error : "(none)");
  if (m->status == DB_OK) {
    printf("%-11s%.4f ms median (%.4f..%.4f ms, %d run%s)\n", "time:", m->ms_median, m->ms_min,
           m->ms_max, m->runs, m->runs == 1 ? "" : "s");
    printf("%-11s%.2f\n", "TFLOP/s:", m->tflops);
  }
  if (m->status == DB_OK || m->status == DB_VERIFY_FAILED)
    printf("%-11srel %.1e, max %.1e (against float64)\n", "error:", m->rel_err, m->max_err);
  /* Unknown (-1) after a compile error, or when the worker died or was killed with no report. */
  if (m->regs >= 0)
    printf("%-11s%d registers, %d bytes shared memory, %d bytes local memory\n", "resources:",
           m->regs, m->shared_bytes, m->local_bytes);
}

/* Starts the worker, compiles, measures, prints.  Exit code. */
static int run_measure(measure_run *r) {
  ut_err e = {{0}};
  if (tn_worker_start(r->device, r->cache_dir, r->watchdog_s, &r->worker, &r->dev, r->arch, &e))
    return tn_fail(CMD, "cannot use device %d: %s", r->device, e.msg);
  const char *note = tn_worker_guard_note(r->worker);
  if (note) fprintf(stderr, "mmtune %s: %s\n", CMD, note);
  print_head(r);
  rt_cubin cubin = {0};
  tn_measurement m;
  if (compile_kernel(r, &cubin, &m)) {
    /* The tuner's options (engine/tune_loop.c measure_one) for a first candidate (no cutoff unless
     * --cutoff); but
     * warmed up as bench is, since nothing ran before it to bring the clocks up from idle. */
    tn_measure_opts mo = {.m = r->p.m, .n = r->p.n, .k = r->p.k, .lda = r->p.lda,
                          .ldb = r->p.ldb, .ldc = r->p.ldc, .warmup_ms = 200,
                          .cutoff_ms = r->cutoff_ms};
    snprintf(mo.dtype, sizeof mo.dtype, "%s", r->p.dtype);
    snprintf(mo.layout, sizeof mo.layout, "%s", r->p.layout);
    snprintf(mo.op, sizeof mo.op, "%s", r->k.op);
    mo.batch = r->p.batch;
    mo.seed = (uint64_t)ut_unix_time() * 1000003u ^ (uint64_t)getpid();
    mo.max_runs = r->runs;
    mo.min_runs = r->runs == 1 ? 1 : 0; /* 0: the default, 2 */
    mmt_status rc = tn_worker_measure(r->worker, &cubin, &r->k, &mo, &m, &e);
    rt_cubin_free(&cubin);
    if (rc) return tn_fail(CMD, "%s", e.msg);
  }
  print_result(&m);
  return m.status == DB_OK ? TN_EXIT_OK : TN_EXIT_FAIL;
}

int tn_cmd_measure(int argc, char **argv) {
  tn_opts o;
  measure_run r;
  memset(&r, 0, sizeof r);
  int ex = tn_opts_parse(&MEASURE_SPEC, argc, argv, &o);
  if (!ex && !o.help) ex = parse_options(&o, &r);
  if (!ex && !o.help) ex = run_measure(&r);
  tn_worker_stop(r.worker);
  gen_kernel_clear(&r.k);
  gen_free(r.t);
  tn_opts_free(&o);
  return ex;
}
