/*
 * tn_tune.c -- the main job: `mmtune [tune] --device N`.  Each shape and dtype is a problem;
 * its candidates are the valid configs of every template offering the dtype.  A search
 * (tn_search.h) picks the candidates to measure, one problem at a time: the compile pool
 * builds the proposed kernels ahead of the GPU, the worker process verifies and times them,
 * each result is stored with its provenance and reported back to the search, until the
 * search has proposed everything or the problem's time budget is spent.  Resumable: results
 * already in the database with the same provenance are not measured again; the search is
 * told their costs instead.
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
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
#include "tn_search.h"
#include "tn_worker.h"

_Static_assert(GEN_MAX_PARAMS <= TN_SEARCH_MAX_COORDS, "a config must fit a search candidate");
_Static_assert(GEN_MAX_VALUES <= 256, "search coordinates are uint8_t");

/* Per problem (shape and dtype), for the strategies that sample: the 12 default shapes take
 * about 7 minutes per dtype. */
#define DEFAULT_BUDGET_S 35
#define MAX_LOOKAHEAD 64    /* proposals waiting for the GPU */

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
    {"layout", 'l', "LAYOUT", "nn (default), nt, tn or tt: how A and B are stored (t: transposed)"},
    {"strategy", 0, "NAME", "anneal (default), random or exhaustive: see above"},
    {"budget", 'b', "SECONDS",
     "search time per shape and dtype, counted across runs, or 'none' (default 35, exhaustive "
     "none)"},
    {"seed", 0, "N", "seed of anneal and random (default: from the clock, printed)"},
    {"db", 0, "PATH", "results database (default $MMTUNE_DB or ~/.cache/mmtune/mmtune.db)"},
    {"cache-dir", 0, "DIR", "cubin cache (default ~/.cache/mmtune/cubin)"},
    {"jobs", 'j', "N", "compile threads (default: CPU count)"},
    {"watchdog", 'w', "SECONDS", "a candidate with no result after this is killed (default 60)"},
    {"force", 'f', NULL, "measure again configs already in the database"},
};

static const tn_cmd_spec TUNE_SPEC = {
    "tune", "[--device N] [--shapes FILE|MxNxK,...] [--templates A,B] [options]",
    "Tunes every shape: a search over the valid configs of every template picks configs,\n"
    "each is compiled, verified against a float64 reference on fresh random inputs, timed,\n"
    "and stored in the database.  Strategies (--strategy):\n"
    "  anneal      simulated annealing over neighbouring configs (one parameter one value\n"
    "              apart) with restarts, from each template's default config and the best\n"
    "              configs of the shapes tuned before\n"
    "  random      configs in random order: random sampling under a budget\n"
    "  exhaustive  every config in order (one slower than 2x the best is timed once)\n"
    "Any strategy measures every config when its budget allows.  A run that is interrupted\n"
    "(Ctrl-C) resumes where it stopped: configs in the database are not measured again, and\n"
    "the budget counts the time earlier runs spent on the problem, so running the same\n"
    "command again measures nothing once every problem has had its budget (a larger\n"
    "--budget searches further; --force starts again from nothing).",
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
  uint64_t index; /* the config's index in the template's space */
  char params[256];
  gen_kernel spec; /* launch description; its source is emitted again when submitted */
  bool submitted, compiled;
  mmt_status compile_rc;
  char compile_error[512];
  rt_cubin cubin;
} tune_kernel;

/* One problem: a shape and a dtype, and its candidates (search order = these arrays). */
typedef struct {
  int shape;
  char dtype[8];
  tn_candidate *cands;
  int *kernel;   /* per candidate: its kernel */
  double *known; /* per candidate: cost stored in the database; NAN: not measured yet */
  int count, cap, nknown;
  int measured; /* this run */
  char candidates[128]; /* what its search time is counted against (db_search_seconds) */
} tune_problem;

/* The ok rows of a problem already in the database: "template\nparams" -> median ms. */
typedef struct {
  char key[GEN_NAME_MAX + 256];
  double ms;
} known_row;

typedef struct {
  /* options */
  int device;
  tn_shape *shapes;
  int nshapes;
  gen_template **ts;
  int nts;
  const char *dtype;  /* NULL: all */
  const char *layout; /* one per run: every kernel of the run is emitted for it */
  char db_path[4096], cache_dir[4096];
  int jobs;
  double budget_s, watchdog_s; /* budget 0: none */
  tn_strategy strategy;
  uint64_t seed;
  bool force;
  /* state */
  db_handle *db;
  tn_worker *worker;
  tn_pool *pool;
  db_device dev;
  char arch[16], nvrtc[16];
  tune_kernel *kernels;
  int nkernels, kernel_cap;
  int *kernel_map; /* open addressing over (tmpl, dtype, index) -> kernel; -1 empty */
  size_t kernel_map_cap;
  tune_problem *problems;
  int nproblems, problem_cap;
  int ntodo, skipped;  /* candidates not in the database / already there */
  int done, untried;   /* measured / left untried by the budget */
  int compiled, cached; /* compile results collected; of those, served by the cubin cache */
  int lookahead;       /* proposals allowed ahead of the GPU */
  int *starts;         /* the best kernel of each problem tuned so far: anneal starts there */
  int nstarts, start_cap;
  bool tty;
} tune_run;

/* ---- options ------------------------------------------------------------------------------ */

static int parse_search(tune_run *r, const tn_opts *o) {
  const char *v;
  int64_t x;
  ut_err err;
  r->strategy = TN_STRATEGY_DEFAULT;
  if ((v = tn_opts_get(o, "strategy")) && !tn_strategy_parse(v, &r->strategy))
    return tn_usage_error("tune", "--strategy must be one of %s, got '%s'", TN_STRATEGY_NAMES, v);
  r->budget_s = r->strategy == TN_STRATEGY_EXHAUSTIVE ? 0 : DEFAULT_BUDGET_S;
  if ((v = tn_opts_get(o, "budget"))) {
    if (!strcmp(v, "none"))
      r->budget_s = 0;
    else if (tn_parse_seconds(v, "--budget", 1e6, &r->budget_s, &err))
      return tn_usage_error("tune", "%s", err.msg);
  }
  r->seed = (uint64_t)ut_unix_time() * 1000003u ^ (uint64_t)getpid();
  if ((v = tn_opts_get(o, "seed"))) {
    if (tn_opt_i64("tune", v, "--seed", 0, INT64_MAX, &x)) return TN_EXIT_USAGE;
    r->seed = (uint64_t)x;
  }
  return TN_EXIT_OK;
}

static int parse_numbers(tune_run *r, const tn_opts *o) {
  const char *v;
  int64_t x;
  if ((v = tn_opts_get(o, "device")) && tn_opt_device("tune", v, &r->device)) return TN_EXIT_USAGE;
  if ((v = tn_opts_get(o, "jobs"))) {
    if (tn_opt_i64("tune", v, "--jobs", 1, 1024, &x)) return TN_EXIT_USAGE;
    r->jobs = (int)x;
  }
  ut_err err;
  r->watchdog_s = 60;
  if ((v = tn_opts_get(o, "watchdog")) &&
      tn_parse_seconds(v, "--watchdog", 1e6, &r->watchdog_s, &err))
    return tn_usage_error("tune", "%s", err.msg);
  return parse_search(r, o);
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
  if (r->dtype && !tn_measure_supports(r->dtype))
    return tn_usage_error("tune", "dtype %s cannot be measured yet (f32, tf32, f16 and bf16 can)",
                          r->dtype);
  if ((ex = tn_opt_layout("tune", tn_opts_get(o, "layout"), &r->layout))) return ex;
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

/* ---- kernels ------------------------------------------------------------------------------ */

static gen_problem shape_problem(const tn_shape *s, const char *dtype, const char *layout) {
  /* Packed rows; the worker's buffers are cudaMalloc'd (256-byte aligned), so alignment is
   * what the row pitches allow. */
  int64_t elem = gen_dtype_size(dtype), ld[3];
  gen_min_ld(layout, s->m, s->n, s->k, ld);
  uint64_t pitches[] = {256, (uint64_t)(ld[0] * elem), (uint64_t)(ld[1] * elem),
                        (uint64_t)(ld[2] * elem)};
  return (gen_problem){.dtype = dtype, .layout = layout, .m = s->m, .n = s->n, .k = s->k,
                       .lda = ld[0], .ldb = ld[1], .ldc = ld[2],
                       .align_bytes = rt_align_bytes(pitches, 4)};
}

static void *grow(void *arr, int *cap, int need, size_t elem) {
  if (need <= *cap) return arr;
  int cap2 = *cap ? *cap * 2 : 64;
  while (cap2 < need) cap2 *= 2;
  void *p = realloc(arr, (size_t)cap2 * elem);
  if (p) *cap = cap2;
  return p;
}

static size_t kernel_slot(const tune_run *r, int tmpl, const char *dtype, uint64_t index) {
  uint64_t h = ut_hash64(&index, sizeof index);
  h = ut_hash64_more(h, &tmpl, sizeof tmpl);
  return (size_t)ut_hash64_more(h, dtype, strlen(dtype)) & (r->kernel_map_cap - 1);
}

/* The kernel of (template, config index, dtype), or -1. */
static int kernel_find(const tune_run *r, int tmpl, const char *dtype, uint64_t index) {
  if (!r->kernel_map_cap) return -1;
  for (size_t i = kernel_slot(r, tmpl, dtype, index);; i = (i + 1) & (r->kernel_map_cap - 1)) {
    int kid = r->kernel_map[i];
    if (kid < 0) return -1;
    const tune_kernel *k = &r->kernels[kid];
    if (k->tmpl == tmpl && k->index == index && !strcmp(k->dtype, dtype)) return kid;
  }
}

static void kernel_map_put(tune_run *r, int kid) {
  const tune_kernel *k = &r->kernels[kid];
  size_t i = kernel_slot(r, k->tmpl, k->dtype, k->index);
  while (r->kernel_map[i] >= 0) i = (i + 1) & (r->kernel_map_cap - 1);
  r->kernel_map[i] = kid;
}

/* Indexes kernel kid, the newest; the map grows to stay at most half full. */
static mmt_status kernel_map_add(tune_run *r, int kid, ut_err *err) {
  if (2 * (size_t)(kid + 1) > r->kernel_map_cap) {
    size_t cap = r->kernel_map_cap ? 2 * r->kernel_map_cap : 1024;
    int *map = malloc(cap * sizeof *map);
    if (!map) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
    memset(map, 0xff, cap * sizeof *map); /* all -1 */
    free(r->kernel_map);
    r->kernel_map = map;
    r->kernel_map_cap = cap;
    for (int i = 0; i < kid; i++) kernel_map_put(r, i);
  }
  kernel_map_put(r, kid);
  return MMT_OK;
}

/* Finds or adds the kernel for (template, config, dtype).  A new one is emitted for its launch
 * description (requirements, name) but not compiled: see submit. */
static mmt_status kernel_for(tune_run *r, int ti, uint64_t index, const gen_config *cfg,
                             const char *dtype, int *kid, ut_err *err) {
  if ((*kid = kernel_find(r, ti, dtype, index)) >= 0) return MMT_OK;
  tune_kernel *ks = grow(r->kernels, &r->kernel_cap, r->nkernels + 1, sizeof *ks);
  if (!ks) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  r->kernels = ks;
  tune_kernel *k = &ks[r->nkernels];
  memset(k, 0, sizeof *k);
  k->tmpl = ti;
  k->index = index;
  snprintf(k->dtype, sizeof k->dtype, "%s", dtype);
  mmt_status rc = gen_config_format(r->ts[ti], cfg, k->params, sizeof k->params, err);
  if (!rc) rc = gen_emit(r->ts[ti], cfg, dtype, r->layout, &k->spec, err);
  if (rc) return rc;
  free(k->spec.source); /* emitted again when submitted: thousands of sources add up */
  k->spec.source = NULL;
  *kid = r->nkernels++;
  return kernel_map_add(r, *kid, err);
}

/* Queues kernel kid's compile (once). */
static mmt_status submit(tune_run *r, int kid, ut_err *err) {
  tune_kernel *k = &r->kernels[kid];
  if (k->submitted) return MMT_OK;
  gen_config cfg;
  gen_kernel spec;
  gen_config_at(r->ts[k->tmpl], k->index, &cfg);
  mmt_status rc = gen_emit(r->ts[k->tmpl], &cfg, k->dtype, r->layout, &spec, err);
  if (rc) return rc;
  rc = tn_pool_submit(r->pool, spec.source, spec.kernel_name, spec.arch, (void *)(intptr_t)kid,
                      err);
  gen_kernel_clear(&spec);
  k->submitted = rc == MMT_OK;
  return rc;
}

/* Waits until kernel kid's compile result is back (the pool returns in submission order). */
static mmt_status await_compile(tune_run *r, int kid, ut_err *err) {
  while (!r->kernels[kid].compiled) {
    tn_pool_result res;
    if (!tn_pool_next(r->pool, &res))
      return ut_fail(err, MMT_ERR_INVALID_ARG, "kernel %s was never compiled",
                     r->kernels[kid].params);
    tune_kernel *k = &r->kernels[(intptr_t)res.tag];
    r->compiled++;
    r->cached += res.cache_hit;
    k->compiled = true;
    k->compile_rc = res.rc;
    memcpy(k->compile_error, res.error, sizeof k->compile_error);
    k->cubin = res.cubin;
  }
  return MMT_OK;
}

/* ---- planning ----------------------------------------------------------------------------- */

/* The database's name for problem pb. */
static db_problem problem_key(const tune_run *r, const tune_problem *pb) {
  const tn_shape *s = &r->shapes[pb->shape];
  db_problem p = {.m = s->m, .n = s->n, .k = s->k};
  snprintf(p.dtype, sizeof p.dtype, "%s", pb->dtype);
  snprintf(p.layout, sizeof p.layout, "%s", r->layout);
  return p;
}

/* pb->candidates: the NVRTC version and a hash of the name and source hash of each template
 * searched, so that time spent searching other candidates does not count against a budget. */
static void name_candidates(const tune_run *r, tune_problem *pb) {
  uint64_t h = ut_hash64(r->nvrtc, strlen(r->nvrtc));
  int n = 0;
  for (int t = 0; t < r->nts; t++) {
    if (!gen_supports_dtype(r->ts[t], pb->dtype) || !gen_supports_layout(r->ts[t], r->layout))
      continue;
    h = ut_hash64_more(h, gen_name(r->ts[t]), strlen(gen_name(r->ts[t])) + 1);
    h = ut_hash64_more(h, gen_source_hash(r->ts[t]), strlen(gen_source_hash(r->ts[t])) + 1);
    n++;
  }
  char hex[17];
  ut_hash64_hex(h, hex);
  snprintf(pb->candidates, sizeof pb->candidates, "nvrtc %s, %d templates, %s", r->nvrtc, n, hex);
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
  snprintf(row->problem.layout, sizeof row->problem.layout, "%s", r->layout);
  row->problem.m = r->shapes[sid].m;
  row->problem.n = r->shapes[sid].n;
  row->problem.k = r->shapes[sid].k;
  row->regs = row->shared_bytes = row->local_bytes = -1;
}

typedef struct {
  const tune_run *r;
  known_row *rows;
  int count, cap;
  bool nomem;
} known_set;

static int compare_known(const void *a, const void *b) {
  const known_row *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x->ms > y->ms) - (x->ms < y->ms);
}

/* db_each_ok callback: keeps rows with this run's provenance (NVRTC, template source). */
static int collect_known(const db_result *row, void *user) {
  known_set *ks = user;
  if (strcmp(row->nvrtc_version, ks->r->nvrtc)) return 0;
  for (int t = 0; t < ks->r->nts; t++) {
    const gen_template *tm = ks->r->ts[t];
    if (strcmp(gen_name(tm), row->template_name) || strcmp(gen_source_hash(tm), row->template_hash))
      continue;
    known_row *rows = grow(ks->rows, &ks->cap, ks->count + 1, sizeof *rows);
    if (!rows) {
      ks->nomem = true;
      return 1; /* stop */
    }
    ks->rows = rows;
    known_row *k = &rows[ks->count++];
    snprintf(k->key, sizeof k->key, "%s\n%s", row->template_name, row->params);
    k->ms = isnan(row->ms_median) ? INFINITY : row->ms_median;
  }
  return 0;
}

/* The stored ok rows of problem pb, sorted by key then ms (the first of a key is its best). */
static mmt_status known_rows(tune_run *r, const tune_problem *pb, known_set *ks, ut_err *err) {
  memset(ks, 0, sizeof *ks);
  ks->r = r;
  if (r->force) return MMT_OK;
  db_problem p = problem_key(r, pb);
  mmt_status rc = db_each_ok(r->db, r->dev.name, &p, collect_known, ks, err);
  if (!rc && ks->nomem) rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  if (!rc && ks->count > 1) qsort(ks->rows, (size_t)ks->count, sizeof *ks->rows, compare_known);
  return rc;
}

/* The stored cost of kernel kid on pb's shape: NAN when not measured, INFINITY when measured
 * without a verified timing (compile error, fault, ...). */
static mmt_status known_cost(tune_run *r, const tune_problem *pb, int kid, const known_set *ks,
                             double *cost, ut_err *err) {
  *cost = NAN;
  if (r->force) return MMT_OK;
  db_result key;
  bool found = false;
  result_key(r, pb->shape, kid, &key);
  mmt_status rc = db_has_result(r->db, &key, &found, err);
  if (rc || !found) return rc;
  *cost = INFINITY;
  int lo = 0, hi = ks->count; /* first row with the key: its fastest */
  known_row want;
  snprintf(want.key, sizeof want.key, "%s\n%s", key.template_name, key.params);
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (strcmp(ks->rows[mid].key, want.key) < 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo < ks->count && !strcmp(ks->rows[lo].key, want.key)) *cost = ks->rows[lo].ms;
  return MMT_OK;
}

static mmt_status add_candidate(tune_problem *pb, const tn_candidate *c, int kid, double known,
                                ut_err *err) {
  if (pb->count == pb->cap) {
    int cap = pb->cap ? 2 * pb->cap : 256;
    tn_candidate *cands = realloc(pb->cands, (size_t)cap * sizeof *cands);
    if (cands) pb->cands = cands;
    int *kernel = realloc(pb->kernel, (size_t)cap * sizeof *kernel);
    if (kernel) pb->kernel = kernel;
    double *kn = realloc(pb->known, (size_t)cap * sizeof *kn);
    if (kn) pb->known = kn;
    if (!cands || !kernel || !kn) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
    pb->cap = cap;
  }
  pb->cands[pb->count] = *c;
  pb->kernel[pb->count] = kid;
  pb->known[pb->count++] = known;
  pb->nknown += !isnan(known);
  return MMT_OK;
}

/* The search coordinates of config `index` (mixed radix, as gen_config_at). */
static void candidate_of(const gen_template *t, int ti, uint64_t index, tn_candidate *c) {
  memset(c, 0, sizeof *c);
  c->group = ti;
  c->ncoords = gen_param_count(t);
  for (int i = c->ncoords - 1; i >= 0; i--) {
    uint64_t radix = (uint64_t)gen_param_value_count(t, i);
    c->coord[i] = (uint8_t)(index % radix);
    index /= radix;
  }
}

/* Adds template ti's valid configs as candidates of problem pb. */
static mmt_status plan_template(tune_run *r, tune_problem *pb, int ti, const known_set *ks,
                                ut_err *err) {
  gen_template *t = r->ts[ti];
  gen_problem p = shape_problem(&r->shapes[pb->shape], pb->dtype, r->layout);
  gen_config def;
  gen_config_default(t, &def);
  mmt_status rc = MMT_OK;
  for (uint64_t i = 0; i < gen_space_size(t); i++) {
    gen_config cfg;
    bool valid = false;
    gen_config_at(t, i, &cfg);
    if ((rc = gen_check(t, &cfg, &p, &valid, NULL, 0, err))) return rc;
    if (!valid) continue;
    int kid = -1;
    if ((rc = kernel_for(r, ti, i, &cfg, pb->dtype, &kid, err))) return rc;
    if (!gen_requires_met(&r->kernels[kid].spec.requires, &p)) continue;
    char arch[16];
    ut_err why;
    if (rt_kernel_arch(r->arch, r->kernels[kid].spec.arch, arch, &why)) continue; /* not here */
    tn_candidate c;
    candidate_of(t, ti, i, &c);
    c.is_default = !memcmp(cfg.v, def.v, (size_t)cfg.n * sizeof cfg.v[0]);
    double known;
    if ((rc = known_cost(r, pb, kid, ks, &known, err))) return rc;
    if ((rc = add_candidate(pb, &c, kid, known, err))) return rc;
  }
  return MMT_OK;
}

/* Plans the problem (shape sid, dtype): its candidates and what is already known. */
static mmt_status plan_problem(tune_run *r, int sid, const char *dtype, ut_err *err) {
  tune_problem *ps = grow(r->problems, &r->problem_cap, r->nproblems + 1, sizeof *ps);
  if (!ps) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  r->problems = ps;
  tune_problem *pb = &ps[r->nproblems++];
  memset(pb, 0, sizeof *pb);
  pb->shape = sid;
  snprintf(pb->dtype, sizeof pb->dtype, "%s", dtype);
  name_candidates(r, pb);
  known_set ks;
  mmt_status rc = known_rows(r, pb, &ks, err);
  for (int t = 0; t < r->nts && !rc; t++) {
    if (!gen_supports_dtype(r->ts[t], dtype)) continue;
    if ((rc = plan_template(r, pb, t, &ks, err)))
      ut_err_prefix(err, "template '%s'", gen_name(r->ts[t]));
  }
  free(ks.rows);
  r->ntodo += pb->count - pb->nknown;
  r->skipped += pb->nknown;
  return rc;
}

/* Whether dtype is the one to tune and no earlier template offers it (each dtype once).  tf32
 * changes the result (10-bit mantissa products), so it is tuned only when asked for. */
static bool first_with(const tune_run *r, int t, const char *dtype) {
  if (r->dtype ? strcmp(r->dtype, dtype) != 0 : strcmp(dtype, "tf32") == 0) return false;
  if (!tn_measure_supports(dtype)) return false;
  for (int u = 0; u < t; u++)
    if (gen_supports_dtype(r->ts[u], dtype)) return false;
  return true;
}

static mmt_status plan(tune_run *r, ut_err *err) {
  mmt_status rc;
  for (int s = 0; s < r->nshapes; s++)
    for (int t = 0; t < r->nts; t++)
      for (int d = 0; d < gen_dtype_count(r->ts[t]); d++)
        if (first_with(r, t, gen_dtype(r->ts[t], d)) &&
            (rc = plan_problem(r, s, gen_dtype(r->ts[t], d), err)))
          return rc;
  return MMT_OK;
}

/* ---- measuring ---------------------------------------------------------------------------- */

/* One line per finished candidate: a redrawn bar on a terminal, a log line otherwise. */
static void report_progress(const tune_run *r, const db_result *row, double best_ms) {
  const db_problem *p = &row->problem;
  int done = r->done, total = r->ntodo;
  if (r->tty) {
    int width = 30, fill = total ? (int)((long long)(done + r->untried) * width / total) : width;
    printf("\r\033[K[%.*s%.*s] %d/%d  %lldx%lldx%lld  %s %s  best %.3f ms", fill,
           "##############################", width - fill, "..............................", done,
           total, (long long)p->m, (long long)p->n, (long long)p->k, row->template_name,
           row->params, best_ms);
  } else if (row->status == DB_OK) {
    printf("[%d/%d] %lldx%lldx%lld %s %s %s: %.4f ms, %.2f TFLOP/s, rel err %.1e\n", done, total,
           (long long)p->m, (long long)p->n, (long long)p->k, p->dtype, row->template_name,
           row->params, row->ms_median, row->tflops, row->rel_err);
  } else {
    printf("[%d/%d] %lldx%lldx%lld %s %s %s: %s: %s\n", done, total, (long long)p->m,
           (long long)p->n, (long long)p->k, p->dtype, row->template_name, row->params,
           db_status_name(row->status), row->error);
  }
  fflush(stdout);
}

/* The best stored row of problem i into *best; false when it has no verified config. */
static bool problem_best(const tune_run *r, int i, db_result *best) {
  db_problem p = problem_key(r, &r->problems[i]);
  ut_err err;
  return db_best(r->db, r->dev.name, &p, best, &err) == MMT_OK;
}

/* The best stored config of every tuned (shape, dtype), then the run's totals. */
static int report_summary(const tune_run *r, double seconds) {
  db_result best;
  int width = 34; /* of the params column */
  for (int i = 0; i < r->nproblems; i++)
    if (problem_best(r, i, &best) && (int)strlen(best.params) > width)
      width = (int)strlen(best.params);
  printf("\n%-20s %-5s %-11s %-*s %10s %9s %9s\n", "shape", "dtype", "template", width, "params",
         "ms", "TFLOP/s", "max err");
  for (int i = 0; i < r->nproblems; i++) {
    const tn_shape *s = &r->shapes[r->problems[i].shape];
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)s->m, (long long)s->n,
             (long long)s->k);
    if (!problem_best(r, i, &best))
      printf("%-20s %-5s (no verified config)\n", shape, r->problems[i].dtype);
    else
      printf("%-20s %-5s %-11s %-*s %10.4f %9.2f %9.1e\n", shape, best.problem.dtype,
             best.template_name, width, best.params, best.ms_median, best.tflops, best.max_err);
  }
  printf("%s: measured %d of %d candidates", tn_strategy_name(r->strategy), r->done, r->ntodo);
  if (r->untried) printf(", %d left untried by the budget", r->untried);
  printf("; %d kernels compiled by NVRTC, %d from the cubin cache", r->compiled - r->cached,
         r->cached);
  printf("\n%.1f s on %s; results in %s\n", seconds, r->dev.name, r->db_path);
  if (g_interrupted) {
    printf("interrupted: what was measured is saved; run the same command again to resume\n");
    return 130;
  }
  return TN_EXIT_OK;
}

/* Measures kernel kid on shape sid into *row (compile errors become rows too). */
static mmt_status measure_one(tune_run *r, int sid, int kid, double cutoff_ms, db_result *row,
                              ut_err *err) {
  result_key(r, sid, kid, row);
  mmt_status rc = await_compile(r, kid, err);
  if (rc) return rc;
  tune_kernel *k = &r->kernels[kid];
  if (k->compile_rc != MMT_OK) {
    row->status = DB_COMPILE_ERROR;
    snprintf(row->error, sizeof row->error, "%s", k->compile_error);
    return MMT_OK;
  }
  gen_problem p = shape_problem(&(tn_shape){row->problem.m, row->problem.n, row->problem.k},
                                k->dtype, r->layout);
  tn_measure_opts o = {.m = p.m, .n = p.n, .k = p.k, .lda = p.lda, .ldb = p.ldb, .ldc = p.ldc,
                       .cutoff_ms = cutoff_ms};
  snprintf(o.dtype, sizeof o.dtype, "%s", k->dtype);
  snprintf(o.layout, sizeof o.layout, "%s", r->layout);
  o.seed = (uint64_t)ut_unix_time() * 1000003u + (uint64_t)r->done;
  tn_measurement m;
  if ((rc = tn_worker_measure(r->worker, &k->cubin, &k->spec, &o, &m, err))) return rc;
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

/* Proposals waiting for the GPU: their kernels compile meanwhile.  Asks the search for more
 * until the compile pool has `lookahead` jobs or the newest proposal is ready to measure. */
typedef struct {
  int idx[MAX_LOOKAHEAD];
  int count;
} tune_queue;

static mmt_status fill_queue(tune_run *r, tn_search *s, const tune_problem *pb, tune_queue *q,
                             ut_err *err) {
  while (q->count < r->lookahead) {
    if (q->count > 0 && (r->kernels[pb->kernel[q->idx[q->count - 1]]].compiled ||
                         tn_pool_pending(r->pool) >= r->lookahead))
      break;
    int c = tn_search_next(s);
    if (c < 0) break;
    mmt_status rc = submit(r, pb->kernel[c], err);
    if (rc) return rc;
    q->idx[q->count++] = c;
  }
  return MMT_OK;
}

/* Takes the first proposal whose kernel is compiled, else the oldest. */
static int take_ready(const tune_run *r, const tune_problem *pb, tune_queue *q) {
  int i = 0;
  while (i < q->count && !r->kernels[pb->kernel[q->idx[i]]].compiled) i++;
  if (i == q->count) i = 0;
  int c = q->idx[i];
  memmove(&q->idx[i], &q->idx[i + 1], (size_t)(q->count - i - 1) * sizeof q->idx[0]);
  q->count--;
  return c;
}

/* Measures candidate c of pb, stores it and tells the search. */
static mmt_status measure_candidate(tune_run *r, tn_search *s, tune_problem *pb, int c,
                                    double *best_ms, ut_err *err) {
  db_result row;
  /* A config 2x slower than the best so far is timed once only: it cannot win. */
  double cutoff = *best_ms > 0 ? 2 * *best_ms : 0;
  mmt_status rc = measure_one(r, pb->shape, pb->kernel[c], cutoff, &row, err);
  if (!rc) rc = db_insert(r->db, &row, err);
  if (!rc) rc = tn_search_report(s, c, row.status == DB_OK ? row.ms_median : INFINITY, err);
  if (rc) return rc;
  if (row.status == DB_OK && (*best_ms == 0 || row.ms_median < *best_ms)) *best_ms = row.ms_median;
  pb->measured++;
  r->done++;
  report_progress(r, &row, *best_ms);
  return MMT_OK;
}

/* Marks as starting points the candidates of pb that are the defaults of their template or
 * the best of a problem tuned before (a good config for one shape is a good start for the
 * next). */
static void mark_starts(const tune_run *r, tune_problem *pb) {
  for (int i = 0; i < pb->count; i++)
    for (int j = 0; j < r->nstarts && !pb->cands[i].is_default; j++)
      pb->cands[i].is_default = pb->kernel[i] == r->starts[j];
}

/* Records the best kernel of a tuned problem as a start for the next ones. */
static mmt_status add_start(tune_run *r, int kid, ut_err *err) {
  for (int j = 0; j < r->nstarts; j++)
    if (r->starts[j] == kid) return MMT_OK;
  int *st = grow(r->starts, &r->start_cap, r->nstarts + 1, sizeof *st);
  if (!st) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  r->starts = st;
  r->starts[r->nstarts++] = kid;
  return MMT_OK;
}

/* One line when a problem is done: how much of it was measured, and its best. */
static void report_problem(const tune_run *r, const tune_problem *pb, double seconds,
                           double earlier_s, bool budget_spent, double best_ms) {
  const tn_shape *sh = &r->shapes[pb->shape];
  printf("%s%lldx%lldx%lld %s: %s measured %d of %d candidates in %.1f s%s",
         r->tty ? "\r\033[K" : "", (long long)sh->m, (long long)sh->n, (long long)sh->k, pb->dtype,
         tn_strategy_name(r->strategy), pb->measured, pb->count - pb->nknown, seconds,
         budget_spent ? " (budget spent)" : "");
  if (earlier_s > 0 && r->budget_s > 0)
    printf(" after %.1f s in earlier runs%s", earlier_s,
           pb->measured == 0 ? " (--budget more or --force to search again)" : "");
  if (best_ms > 0) printf(", best %.4f ms", best_ms);
  printf("\n");
  fflush(stdout);
}

/* Runs the search of one problem until it has proposed everything or its budget is spent.
 * The budget counts the search time of earlier runs over the same candidates (unless
 * --force), so running the same command again searches no further: it measures and compiles
 * nothing once a problem has had its budget. */
static mmt_status run_problem(tune_run *r, int pi, ut_err *err) {
  tune_problem *pb = &r->problems[pi];
  tn_search *s = NULL;
  tune_queue q = {.count = 0};
  uint64_t seed = r->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(pi + 1));
  db_problem key = problem_key(r, pb);
  double earlier = 0;
  mark_starts(r, pb);
  mmt_status rc = r->force ? MMT_OK
                           : db_search_seconds(r->db, r->dev.name, &key, pb->candidates, &earlier,
                                               err);
  if (!rc) rc = tn_search_new(r->strategy, pb->cands, pb->count, seed, &s, err);
  for (int i = 0; i < pb->count && !rc; i++)
    if (!isnan(pb->known[i])) rc = tn_search_report(s, i, pb->known[i], err);
  double start = ut_now_seconds(), best_ms = 0;
  if (!rc && tn_search_best(s, &best_ms) < 0) best_ms = 0;
  bool spent = false;
  while (!rc && !g_interrupted) {
    if ((spent = r->budget_s > 0 && earlier + ut_now_seconds() - start >= r->budget_s)) break;
    if ((rc = fill_queue(r, s, pb, &q, err)) || q.count == 0) break;
    rc = measure_candidate(r, s, pb, take_ready(r, pb, &q), &best_ms, err);
  }
  double seconds = ut_now_seconds() - start;
  if (!rc) rc = db_search_add(r->db, r->dev.name, &key, pb->candidates, seconds, r->force, err);
  if (!rc && !g_interrupted) {
    r->untried += pb->count - pb->nknown - pb->measured;
    report_problem(r, pb, seconds, earlier, spent, best_ms);
  }
  int best = s ? tn_search_best(s, NULL) : -1;
  if (!rc && best >= 0) rc = add_start(r, pb->kernel[best], err);
  tn_search_free(s);
  return rc;
}

static mmt_status run_problems(tune_run *r, ut_err *err) {
  for (int i = 0; i < r->nproblems && !g_interrupted; i++) {
    mmt_status rc = run_problem(r, i, err);
    if (rc) return rc;
  }
  if (r->tty && g_interrupted) printf("\n"); /* end the bar */
  return MMT_OK;
}

/* ---- the command -------------------------------------------------------------------------- */

static void tune_free(tune_run *r) {
  tn_pool_free(r->pool);
  tn_worker_stop(r->worker);
  db_close(r->db);
  for (int i = 0; i < r->nkernels; i++) {
    gen_kernel_clear(&r->kernels[i].spec);
    rt_cubin_free(&r->kernels[i].cubin);
  }
  free(r->kernels);
  free(r->kernel_map);
  free(r->starts);
  for (int i = 0; i < r->nproblems; i++) {
    free(r->problems[i].cands);
    free(r->problems[i].kernel);
    free(r->problems[i].known);
  }
  free(r->problems);
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
  /* One proposal ahead per compile thread keeps them busy while the GPU measures; more would
   * make anneal decide from staler results. */
  long threads = r->jobs > 0 ? r->jobs : sysconf(_SC_NPROCESSORS_ONLN);
  r->lookahead = threads < 2 ? 2 : threads > MAX_LOOKAHEAD ? MAX_LOOKAHEAD : (int)threads;
  return tn_pool_start(r->jobs, r->arch, r->cache_dir, &r->pool, err);
}

static void print_plan(const tune_run *r) {
  printf("mmtune: %s (%s, %d SMs), %d shapes, %d templates: %d to measure, %d already in %s\n",
         r->dev.name, r->arch, r->dev.sm_count, r->nshapes, r->nts, r->ntodo, r->skipped,
         r->db_path);
  if (r->budget_s > 0)
    printf("search: %s, budget %g s a shape, seed %llu\n", tn_strategy_name(r->strategy),
           r->budget_s, (unsigned long long)r->seed);
  else
    printf("search: %s, no budget, seed %llu\n", tn_strategy_name(r->strategy),
           (unsigned long long)r->seed);
  fflush(stdout);
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
    print_plan(&r);
    rc = run_problems(&r, &err);
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
