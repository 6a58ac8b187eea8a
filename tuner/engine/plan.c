/*
 * engine/plan.c -- the planning half of `mmtune tune` (engine/tune_int.h): the distinct kernels
 * of a run (one per template config and dtype, emitted once, compiled once through the pool),
 * and for each problem its candidates: every valid config whose requirements the problem meets
 * and whose architecture the device runs, with the cost the database already holds for it.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/tune_int.h"
#include "gpu/measure.h"
#include "rt_choose.h"
#include "rt_model.h"
#include "rt_provenance.h"

/* The ok rows of a problem already in the database: "template\nparams" -> median ms, and the
 * kernel the row measured ("": a row from before kernel hashes, of the template as it is). */
typedef struct {
  char key[GEN_NAME_MAX + MMT_PARAMS_MAX];
  double ms;
  char kernel_hash[17];
} known_row;

/* ---- kernels ------------------------------------------------------------------------------ */

bool tn_tune_op(const tune_run *r, const char *dtype, gen_op *op) {
  ut_err ignored; /* cli/tune.c parsed it for every dtype of the run */
  return r->epilogue && gen_op_parse(r->epilogue, dtype, op, &ignored) == MMT_OK;
}

gen_problem tn_tune_shape_problem(const tune_run *r, const tn_shape *s, const char *dtype,
                                  gen_op *op) {
  const int64_t batch = r->batch > 1 ? r->batch : 1;
  return gen_packed_op_problem(dtype, r->layout, s->m, s->n, s->k,
                               tn_tune_op(r, dtype, op) ? op : NULL, batch);
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

/* Finds or adds the kernel for (template, config, dtype); a new one is not emitted yet
 * (kernel_emit, emit_kernels). */
static mmt_status kernel_for(tune_run *r, int ti, uint64_t index, const gen_config *cfg,
                             const char *dtype, int *kid, ut_err *err) {
  if ((*kid = kernel_find(r, ti, dtype, index)) >= 0) return MMT_OK;
  tune_kernel *ks = ut_grow(r->kernels, &r->kernel_cap, r->nkernels + 1, sizeof *ks);
  if (!ks) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  r->kernels = ks;
  tune_kernel *k = &ks[r->nkernels];
  memset(k, 0, sizeof *k);
  k->tmpl = ti;
  k->index = index;
  snprintf(k->dtype, sizeof k->dtype, "%s", dtype);
  mmt_status rc = gen_config_format(r->ts[ti], cfg, k->params, sizeof k->params, err);
  if (rc) return rc;
  *kid = r->nkernels++;
  return kernel_map_add(r, *kid, err);
}

/* Emits kernel k on t (its template, or a copy of it) for its launch description
 * (requirements, launch shape, hash); not compiled: see submit. */
static mmt_status kernel_emit(const tune_run *r, gen_template *t, tune_kernel *k, ut_err *err) {
  gen_config cfg;
  gen_config_at(t, k->index, &cfg);
  gen_op op;
  const gen_op *opp = tn_tune_op(r, k->dtype, &op) ? &op : NULL;
  mmt_status rc = gen_emit_op(t, &cfg, k->dtype, r->layout, opp, &k->spec, err);
  if (rc) return rc;
  rt_kernel_hash(&k->spec, k->kernel_hash);
  ut_err no_tile; /* a template whose grid names no tile: its rows go without a launch shape */
  (void)rt_launch_of(t, &cfg, &k->spec, &k->launch, &no_tile);
  free(k->spec.source); /* emitted again when submitted: thousands of sources add up */
  k->spec.source = NULL;
  k->emitted = true;
  return MMT_OK;
}

/* ---- work on threads: a Lua state serves one thread, so each has its own copy of the
 * template, loaded from its file (a few milliseconds) ---- */

#define PLAN_THREADS 16

/* A share of work on template t: items first, first + stride, ... of `user`'s. */
typedef mmt_status (*share_fn)(const tune_run *r, gen_template *t, int64_t first, int64_t stride,
                               void *user, ut_err *err);

typedef struct {
  const tune_run *r;
  gen_template *t;
  int64_t first, stride;
  share_fn fn;
  void *user;
  mmt_status rc;
  ut_err err;
} share;

static void *share_run(void *arg) {
  share *s = arg;
  gen_template *t = s->t, *copy = NULL;
  if (s->stride > 1) { /* its own copy, which must be the template the run loaded */
    if ((s->rc = gen_load(gen_path(t), &copy, &s->err)) ||
        (s->rc = gen_set_device(copy, gen_device_of(t), &s->err))) {
      gen_free(copy);
      return NULL;
    }
    if (strcmp(gen_source_hash(copy), gen_source_hash(t)) != 0) {
      s->rc = ut_fail(&s->err, MMT_ERR_TEMPLATE, "template '%s' changed on disk during the run",
                      gen_name(t));
      gen_free(copy);
      return NULL;
    }
    t = copy;
  }
  s->rc = s->fn(s->r, t, s->first, s->stride, s->user, &s->err);
  gen_free(copy);
  return NULL;
}

/* The threads for `items` items of work of about `item_us` microseconds each: one below about
 * 20 ms of work, else the run's --jobs or CPUs, at most PLAN_THREADS. */
static int plan_threads(const tune_run *r, int64_t items, double item_us) {
  if ((double)items * item_us < 20000) return 1;
  long n = r->jobs > 0 ? r->jobs : sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > PLAN_THREADS ? PLAN_THREADS : (int)n;
}

/* fn's n shares of work on t, on n threads (n 1: on this one, on t itself); the first error. */
static mmt_status on_threads(const tune_run *r, gen_template *t, int n, share_fn fn, void *user,
                             ut_err *err) {
  share shares[PLAN_THREADS];
  pthread_t threads[PLAN_THREADS];
  bool started[PLAN_THREADS] = {false};
  if (n < 1) n = 1;
  if (n > PLAN_THREADS) n = PLAN_THREADS;
  for (int i = 0; i < n; i++) {
    shares[i] = (share){.r = r, .t = t, .first = i, .stride = n, .fn = fn, .user = user};
    if (n > 1 && pthread_create(&threads[i], NULL, share_run, &shares[i]) == 0)
      started[i] = true;
    else if (n > 1)
      shares[i].rc = ut_fail(&shares[i].err, MMT_ERR_NOMEM, "cannot start a thread");
  }
  if (n == 1) share_run(&shares[0]);
  mmt_status rc = MMT_OK;
  for (int i = 0; i < n; i++) {
    if (started[i]) pthread_join(threads[i], NULL);
    if (!rc && shares[i].rc) rc = shares[i].rc, *err = shares[i].err;
  }
  return rc;
}

/* ---- emission ---- */

/* Kernels to emit: kid[0 .. count) of r->kernels. */
typedef struct {
  const int *kid;
  int count;
} emit_batch;

static mmt_status emit_share(const tune_run *r, gen_template *t, int64_t first, int64_t stride,
                             void *user, ut_err *err) {
  const emit_batch *b = user;
  mmt_status rc = MMT_OK;
  for (int64_t j = first; j < b->count && !rc; j += stride)
    rc = kernel_emit(r, t, &r->kernels[b->kid[j]], err);
  return rc;
}

/* Emits kernels kid[0 .. count) of template ti (about 3 ms each of wgmma's). */
static mmt_status emit_kernels(tune_run *r, int ti, const int *kid, int count, ut_err *err) {
  emit_batch b = {kid, count};
  return on_threads(r, r->ts[ti], plan_threads(r, count, 1000), emit_share, &b, err);
}

/* Queues kernel kid's compile (once). */
mmt_status tn_tune_submit(tune_run *r, int kid, ut_err *err) {
  tune_kernel *k = &r->kernels[kid];
  if (k->submitted) return MMT_OK;
  gen_config cfg;
  gen_kernel spec;
  gen_config_at(r->ts[k->tmpl], k->index, &cfg);
  gen_op op;
  const gen_op *opp = tn_tune_op(r, k->dtype, &op) ? &op : NULL;
  mmt_status rc = gen_emit_op(r->ts[k->tmpl], &cfg, k->dtype, r->layout, opp, &spec, err);
  if (rc) return rc;
  rc = tn_pool_submit(r->pool, spec.source, spec.kernel_name, spec.arch, (void *)(intptr_t)kid,
                      err);
  gen_kernel_clear(&spec);
  k->submitted = rc == MMT_OK;
  return rc;
}

/* Waits until kernel kid's compile result is back (the pool returns in submission order). */
mmt_status tn_tune_await_compile(tune_run *r, int kid, ut_err *err) {
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

_Static_assert(DB_OP_MAX == GEN_OP_TEXT_MAX, "a row's op is an op's canonical text");

/* The op and batch of the run's problems of dtype into a database problem (the plain GEMM's
 * "" and 1 for a run without an epilogue). */
static void set_op_key(const tune_run *r, const char *dtype, db_problem *p) {
  gen_op op;
  p->op[0] = '\0';
  p->batch = 1;
  if (!tn_tune_op(r, dtype, &op)) return;
  gen_op_format(&op, p->op, sizeof p->op, NULL);
  p->batch = r->batch > 1 ? r->batch : 1;
}

/* The database's name for problem pb. */
db_problem tn_tune_problem_key(const tune_run *r, const tune_problem *pb) {
  const tn_shape *s = &r->shapes[pb->shape];
  db_problem p = {.m = s->m, .n = s->n, .k = s->k, .batch = 1};
  snprintf(p.dtype, sizeof p.dtype, "%s", pb->dtype);
  snprintf(p.layout, sizeof p.layout, "%s", r->layout);
  set_op_key(r, pb->dtype, &p);
  return p;
}

/* pb->candidates: the NVRTC version and a hash of the name and source hash of each template
 * searched, so that time spent searching other candidates does not count against a budget. */
static void name_candidates(const tune_run *r, tune_problem *pb) {
  uint64_t h = ut_hash64(r->nvrtc, strlen(r->nvrtc));
  int n = 0;
  for (int t = 0; t < r->nts; t++) {
    if (!gen_supports_dtype(r->ts[t], pb->dtype) || !gen_supports_layout(r->ts[t], r->layout) ||
        (r->epilogue && !gen_has_epilogues(r->ts[t])))
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
void tn_tune_result_key(const tune_run *r, int sid, int kid, db_result *row) {
  const tune_kernel *kern = &r->kernels[kid];
  const gen_template *t = r->ts[kern->tmpl];
  memset(row, 0, sizeof *row);
  row->device = r->dev;
  snprintf(row->nvrtc_version, sizeof row->nvrtc_version, "%s", r->nvrtc);
  snprintf(row->template_name, sizeof row->template_name, "%s", gen_name(t));
  snprintf(row->template_hash, sizeof row->template_hash, "%s", gen_source_hash(t));
  snprintf(row->params, sizeof row->params, "%s", kern->params);
  snprintf(row->kernel_hash, sizeof row->kernel_hash, "%s", kern->kernel_hash);
  snprintf(row->problem.dtype, sizeof row->problem.dtype, "%s", kern->dtype);
  snprintf(row->problem.layout, sizeof row->problem.layout, "%s", r->layout);
  row->problem.m = r->shapes[sid].m;
  row->problem.n = r->shapes[sid].n;
  row->problem.k = r->shapes[sid].k;
  set_op_key(r, kern->dtype, &row->problem);
  row->regs = row->shared_bytes = row->local_bytes = -1;
  row->launch = kern->launch;
}

/* The model the dispatcher would fit on the run's rows (a chooser's: rows of an earlier
 * version of a template count for its configs where they measured the kernels it emits now),
 * fitted again when the database has changed. */
mmt_status tn_tune_predict(tune_run *r, tune_problem *pb, ut_err *err) {
  rt_model *m = NULL;
  mmt_status rc = MMT_OK;
  if (!r->chooser) {
    gen_device dev;
    if ((rc = rt_chooser_new(r->arch, r->dev.sm_count, &r->chooser, err))) return rc;
    if (!gen_device_defaults(r->arch, &dev, NULL)) {
      if (r->dev.sm_count > 0) dev.sm_count = r->dev.sm_count;
      rt_chooser_set_device(r->chooser, &dev); /* the limits the run's templates check */
    }
  }
  if ((rc = rt_chooser_model(r->chooser, r->db, r->dev.name, &m, err))) return rc;
  gen_op op;
  gen_problem p = tn_tune_shape_problem(r, &r->shapes[pb->shape], pb->dtype, &op);
  rt_model_focus(m, &p, NULL);
  for (int i = 0; i < pb->count; i++) {
    const tune_kernel *k = &r->kernels[pb->kernel[i]];
    const gen_template *t = r->ts[k->tmpl];
    int idx = rt_model_find(m, gen_name(t), gen_source_hash(t), k->params, k->dtype);
    rt_prediction pred;
    rt_model_predict(m, idx, gen_name(t), k->params, &k->launch, rt_template_prior(gen_name(t)),
                     &p, &pred);
    /* a fast_accum problem's promote = 0 kernel never measured: its promoting configs' rows
     * say more than its template's (the dispatcher ranks it so too, rt_rank) */
    rt_prediction bare;
    if (idx < 0 && rt_model_predict_unpromoted(m, t, k->params, &p, &bare) && bare.ms < pred.ms)
      pred = bare;
    pb->cands[i].predicted = pred.ms;
  }
  return MMT_OK;
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

/* db_each_ok callback: keeps rows of this run's NVRTC and templates that may have measured
 * the run's kernels: those with a kernel hash (known_cost compares it) and older ones whose
 * template is as measured. */
static int collect_known(const db_result *row, void *user) {
  known_set *ks = user;
  if (strcmp(row->nvrtc_version, ks->r->nvrtc)) return 0;
  for (int t = 0; t < ks->r->nts; t++) {
    gen_template *tm = ks->r->ts[t];
    const rt_row_kernel rk = {.template_hash = row->template_hash,
                              .kernel_hash = "",
                              .params = row->params,
                              .dtype = row->problem.dtype,
                              .layout = row->problem.layout};
    bool current = true;
    if (strcmp(gen_name(tm), row->template_name)) continue;
    if (!row->kernel_hash[0] && (rt_row_current(tm, &rk, NULL, &current, NULL) || !current))
      continue;
    known_row *rows = ut_grow(ks->rows, &ks->cap, ks->count + 1, sizeof *rows);
    if (!rows) {
      ks->nomem = true;
      return 1; /* stop */
    }
    ks->rows = rows;
    known_row *k = &rows[ks->count++];
    snprintf(k->key, sizeof k->key, "%s\n%s", row->template_name, row->params);
    k->ms = isnan(row->ms_median) ? INFINITY : row->ms_median;
    memcpy(k->kernel_hash, row->kernel_hash, sizeof k->kernel_hash);
  }
  return 0;
}

/* The stored ok rows of problem pb, sorted by key then ms (the first of a key is its best). */
static mmt_status known_rows(tune_run *r, const tune_problem *pb, known_set *ks, ut_err *err) {
  memset(ks, 0, sizeof *ks);
  ks->r = r;
  if (r->force) return MMT_OK;
  db_problem p = tn_tune_problem_key(r, pb);
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
  tn_tune_result_key(r, pb->shape, kid, &key);
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
  /* the fastest of them that measured this kernel */
  for (; lo < ks->count && !strcmp(ks->rows[lo].key, want.key); lo++) {
    const char *kh = ks->rows[lo].kernel_hash;
    if (!kh[0] || !strcmp(kh, key.kernel_hash)) {
      *cost = ks->rows[lo].ms;
      break;
    }
  }
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

/* The configs of template t in the built-in list (rt_choose.h: configs that measured well
 * across shapes) that the dispatcher offers for problem p on a device of compute capability
 * cc_major (rt_builtin_offered: not those for misaligned rows on an aligned problem, where a
 * search's few starts went to element loads): starting points of a search, besides the
 * template's default.  Entries that do not parse (another version of the template) are
 * skipped.  Returns the count written to out (at most cap). */
static int builtin_configs(const gen_template *t, int cc_major, const gen_problem *p,
                           gen_config *out, int cap) {
  int nbuiltin, n = 0;
  const rt_builtin *builtin = rt_builtins(&nbuiltin);
  for (int i = 0; i < nbuiltin && n < cap; i++) {
    ut_err ignored;
    if (!rt_builtin_offered(&builtin[i], cc_major, p) || strcmp(builtin[i].name, gen_name(t)))
      continue;
    if (gen_config_parse(t, builtin[i].params, &out[n], &ignored) == MMT_OK) n++;
  }
  return n;
}

/* Config indices, in the order found. */
typedef struct {
  uint64_t *index;
  int count, cap;
} index_list;

/* Each share's configs valid with no problem (valid_space), in its own list. */
typedef struct {
  const char *dtype;
  const gen_op *op;
  index_list found[PLAN_THREADS];
} space_check;

static mmt_status space_share(const tune_run *r, gen_template *t, int64_t first, int64_t stride,
                              void *user, ut_err *err) {
  space_check *c = user;
  mmt_status rc = MMT_OK;
  for (uint64_t i = (uint64_t)first; i < gen_space_size(t) && !rc; i += (uint64_t)stride) {
    gen_config cfg;
    bool valid = false;
    gen_config_at(t, i, &cfg);
    if ((rc = gen_check_op_for(t, &cfg, c->dtype, r->layout, c->op, &valid, NULL, 0, err)) ||
        !valid)
      continue;
    index_list *f = &c->found[first];
    uint64_t *grown = ut_grow(f->index, &f->cap, f->count + 1, sizeof *grown);
    if (!grown) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
    f->index = grown;
    f->index[f->count++] = i;
  }
  return rc;
}

static int compare_index(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The configs of template ti valid for some problem of dtype in the run's layout and op
 * (struct tune_space), checked the first time a pass asks.  A template's space is the
 * product of its parameters' values (wgmma's 663,552 configs, about 9,700 of them valid):
 * checking every one against every problem took a main job's first pass 105 of its 195 s on
 * an H100, where each problem now checks the valid ones alone.  The check runs the template's
 * Lua for each config (wgmma with an op: 4.5 s on one core), so it is shared among threads. */
static mmt_status valid_space(tune_run *r, int ti, const char *dtype, const tune_space **out,
                              ut_err *err) {
  for (int i = 0; i < r->nspaces; i++)
    if (r->spaces[i].tmpl == ti && !strcmp(r->spaces[i].dtype, dtype)) {
      *out = &r->spaces[i];
      return MMT_OK;
    }
  tune_space *v = ut_grow(r->spaces, &r->space_cap, r->nspaces + 1, sizeof *v);
  if (!v) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  r->spaces = v;
  tune_space *s = &v[r->nspaces];
  memset(s, 0, sizeof *s);
  s->tmpl = ti;
  snprintf(s->dtype, sizeof s->dtype, "%s", dtype);
  gen_template *t = r->ts[ti];
  gen_op op;
  space_check c = {.dtype = dtype, .op = tn_tune_op(r, dtype, &op) ? &op : NULL};
  const int n = plan_threads(r, (int64_t)gen_space_size(t), 5);
  mmt_status rc = on_threads(r, t, n, space_share, &c, err);
  int total = 0;
  for (int i = 0; i < n; i++) total += c.found[i].count;
  if (!rc && total && !(s->index = malloc((size_t)total * sizeof *s->index)))
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    if (!rc)
      memcpy(s->index + s->count, c.found[i].index, (size_t)c.found[i].count * sizeof *s->index);
    if (!rc) s->count += c.found[i].count;
    free(c.found[i].index);
  }
  if (rc) {
    free(s->index);
    return rc;
  }
  qsort(s->index, (size_t)s->count, sizeof *s->index, compare_index);
  r->nspaces++;
  *out = s;
  return MMT_OK;
}

/* The kernels of template ti's configs valid for problem p (of those valid for any problem,
 * valid_space) into *kid (owned, *count of them, in the space's order), every one emitted. */
static mmt_status problem_kernels(tune_run *r, int ti, const gen_problem *p, int **kid, int *count,
                                  ut_err *err) {
  gen_template *t = r->ts[ti];
  const tune_space *space = NULL;
  *kid = NULL, *count = 0;
  mmt_status rc = valid_space(r, ti, p->dtype, &space, err);
  /* at most every valid config's kernel: the new ones among them at the end, emitted there */
  int *ids = rc ? NULL : malloc((size_t)(space->count > 0 ? space->count : 1) * sizeof *ids);
  if (!rc && !ids) rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  int n = 0, fresh = 0;
  for (int j = 0; !rc && j < space->count; j++) {
    gen_config cfg;
    bool valid = false;
    gen_config_at(t, space->index[j], &cfg);
    if ((rc = gen_check(t, &cfg, p, &valid, NULL, 0, err)) || !valid) continue;
    if (!(rc = kernel_for(r, ti, space->index[j], &cfg, p->dtype, &ids[n], err)))
      fresh += !r->kernels[ids[n++]].emitted;
  }
  int *todo = fresh && !rc ? malloc((size_t)fresh * sizeof *todo) : NULL;
  if (fresh && !rc && !todo) rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  for (int j = 0, f = 0; todo && j < n; j++)
    if (!r->kernels[ids[j]].emitted) todo[f++] = ids[j];
  if (todo) rc = emit_kernels(r, ti, todo, fresh, err);
  free(todo);
  if (rc) free(ids), ids = NULL, n = 0;
  *kid = ids, *count = n;
  return rc;
}

/* Adds template ti's valid configs as candidates of problem pb: those valid for any problem
 * (valid_space) that pb's constraints keep. */
static mmt_status plan_template(tune_run *r, tune_problem *pb, int ti, const known_set *ks,
                                ut_err *err) {
  gen_template *t = r->ts[ti];
  gen_op op;
  gen_problem p = tn_tune_shape_problem(r, &r->shapes[pb->shape], pb->dtype, &op);
  gen_config starts[32];
  gen_config_default(t, &starts[0]);
  const int nstarts = 1 + builtin_configs(t, r->dev.cc_major, &p, starts + 1, 31);
  int *kids = NULL, nkids = 0;
  mmt_status rc = problem_kernels(r, ti, &p, &kids, &nkids, err);
  for (int j = 0; !rc && j < nkids; j++) {
    const int kid = kids[j];
    const uint64_t i = r->kernels[kid].index;
    gen_config cfg;
    gen_config_at(t, i, &cfg);
    if (!gen_requires_met(&r->kernels[kid].spec.requires, &p)) continue;
    char arch[16];
    ut_err why;
    if (rt_kernel_arch(r->arch, r->kernels[kid].spec.arch, arch, &why)) continue; /* not here */
    /* the same kernel as its group = 1 config on this problem's grid: that one is timed */
    if (gen_group_twin(t, &cfg, &r->kernels[kid].spec, &p)) continue;
    tn_candidate c;
    candidate_of(t, ti, i, &c);
    for (int s = 0; s < nstarts && !c.is_default; s++)
      c.is_default = !memcmp(cfg.v, starts[s].v, (size_t)cfg.n * sizeof cfg.v[0]);
    double known;
    if ((rc = known_cost(r, pb, kid, ks, &known, err))) break;
    rc = add_candidate(pb, &c, kid, known, err);
  }
  free(kids);
  return rc;
}

/* Plans the problem (shape sid, dtype): its candidates and what is already known. */
static mmt_status plan_problem(tune_run *r, int sid, const char *dtype, ut_err *err) {
  tune_problem *ps = ut_grow(r->problems, &r->problem_cap, r->nproblems + 1, sizeof *ps);
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
    if (r->epilogue && !gen_has_epilogues(r->ts[t])) continue;
    if ((rc = plan_template(r, pb, t, &ks, err)))
      ut_err_prefix(err, "template '%s'", gen_name(r->ts[t]));
  }
  free(ks.rows);
  r->ntodo += pb->count - pb->nknown;
  r->skipped += pb->nknown;
  return rc;
}

/* Whether dtype is the one to tune and no earlier template offers it (each dtype once).  tf32
 * changes the result (10-bit mantissa products), and FP8 the inputs themselves, so they are
 * tuned only when asked for. */
static bool first_with(const tune_run *r, int t, const char *dtype) {
  if (r->dtype ? strcmp(r->dtype, dtype) != 0 : strcmp(dtype, "tf32") == 0 || gen_dtype_fp8(dtype))
    return false;
  if (!tn_measure_supports(dtype)) return false;
  for (int u = 0; u < t; u++)
    if (gen_supports_dtype(r->ts[u], dtype)) return false;
  return true;
}

/* The rank of dtype among those seen so far (added when new); -1 past PLAN_DTYPES_MAX. */
#define PLAN_DTYPES_MAX 16
static int dtype_rank(const char **seen, int *nseen, const char *dtype) {
  for (int i = 0; i < *nseen; i++)
    if (!strcmp(seen[i], dtype)) return i;
  if (*nseen == PLAN_DTYPES_MAX) return -1;
  seen[*nseen] = dtype;
  return (*nseen)++;
}

/* The problems are planned shape by shape (each dtype once); --shard keeps its block of them
 * in dtype-major order (tn_shard_owns_block): a first pass counts each dtype's problems, the
 * second gives each problem its dtype-major position. */
mmt_status tn_tune_plan(tune_run *r, ut_err *err) {
  const char *dtypes[PLAN_DTYPES_MAX];
  int ndtypes = 0;
  int64_t count[PLAN_DTYPES_MAX] = {0}, next[PLAN_DTYPES_MAX] = {0}, total = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int s = 0; s < r->nshapes; s++)
      for (int t = 0; t < r->nts; t++)
        for (int d = 0; d < gen_dtype_count(r->ts[t]); d++) {
          const char *dtype = gen_dtype(r->ts[t], d);
          if (!first_with(r, t, dtype)) continue;
          int rank = dtype_rank(dtypes, &ndtypes, dtype);
          if (rank < 0) return ut_fail(err, MMT_ERR_UNSUPPORTED, "more than %d dtypes in a plan",
                                       PLAN_DTYPES_MAX);
          if (pass == 0) {
            count[rank]++, total++;
            continue;
          }
          int64_t pos = next[rank]++;
          for (int q = 0; q < rank; q++) pos += count[q];
          mmt_status rc;
          if (tn_shard_owns_block(r->shard, pos, total) && (rc = plan_problem(r, s, dtype, err)))
            return rc;
        }
  return MMT_OK;
}
