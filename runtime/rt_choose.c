/* rt_choose.c -- see rt_choose.h: EXACT, then the model's ranking (PREDICTED or DEFAULT). */
#include "rt_choose.h"

#include "rt_compile.h"
#include "rt_fit_cache.h"
#include "rt_provenance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One template the chooser loaded, or failed to load (t NULL, why says why). */
typedef struct {
  char name[GEN_NAME_MAX];
  gen_template *t;
  char why[512];
} tmpl_slot;

/* The launch shape of a config without rows (a default or built-in one), emitted once. */
typedef struct {
  char key[GEN_NAME_MAX + 256 + 16]; /* "template|params|dtype|layout" */
  db_launch launch;                  /* zeroed: the config is invalid */
} launch_slot;

/* Whether the rows of one (template, template_hash, kernel_hash, params, dtype, layout)
 * measured what the template emits now: asked once per chooser (an emit) for the model. */
typedef struct {
  char *key; /* NULL: an empty slot */
  bool current;
} verdict;

struct rt_chooser {
  tmpl_slot *slots;
  int count, cap;
  char device_arch[16]; /* "" : any */
  int cc_major;         /* of device_arch; 0: any */
  int sm_count;         /* 0: unknown */
  gen_device device;    /* what the templates' configs must fit (rt_chooser_set_device) */
  char why[512];        /* why the last candidate was refused */
  rt_model *model;      /* of model_device, fitted at the database's model_version */
  char model_device[128];
  int64_t model_version;
  bool model_db;        /* fitted on a database (not an empty model) */
  char *fit_dir;        /* the fit cache (NULL: none) */
  int fitted, read;     /* models fitted from rows, read from the fit cache */
  launch_slot *launches;
  int nlaunches, launch_cap;
  verdict *verdicts;   /* rows whose template changed since: measured what it emits now? */
  size_t verdict_mask; /* the table's slots minus 1 (0: no table yet) */
  size_t nverdicts;
};

mmt_status rt_chooser_new(const char *device_arch, int sm_count, rt_chooser **out, ut_err *err) {
  *out = calloc(1, sizeof **out);
  if (!*out) return ut_fail(err, MMT_ERR_NOMEM, "out of memory creating the kernel chooser");
  snprintf((*out)->device_arch, sizeof (*out)->device_arch, "%s", device_arch ? device_arch : "");
  int cc = 0;
  if (device_arch && sscanf(device_arch, "sm_%d", &cc) == 1) (*out)->cc_major = cc / 10;
  (*out)->sm_count = sm_count > 0 ? sm_count : 0;
  /* Until the device's own limits are set: its architecture's (sm_90's for any) */
  gen_device *dev = &(*out)->device;
  if (gen_device_defaults(cc ? device_arch : NULL, dev, NULL) != MMT_OK)
    (void)gen_device_defaults(NULL, dev, NULL); /* an architecture older than the table's */
  if (sm_count > 0) dev->sm_count = sm_count;
  return MMT_OK;
}

void rt_chooser_set_device(rt_chooser *ch, const gen_device *dev) { ch->device = *dev; }

void rt_chooser_free(rt_chooser *ch) {
  if (!ch) return;
  for (int i = 0; i < ch->count; i++) gen_free(ch->slots[i].t);
  free(ch->slots);
  rt_model_free(ch->model);
  free(ch->fit_dir);
  free(ch->launches);
  for (size_t i = 0; ch->verdict_mask && i <= ch->verdict_mask; i++) free(ch->verdicts[i].key);
  free(ch->verdicts);
  free(ch);
}

mmt_status rt_chooser_set_fit_cache(rt_chooser *ch, const char *dir, ut_err *err) {
  char *copy = dir && *dir ? strdup(dir) : NULL;
  if (dir && *dir && !copy) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  free(ch->fit_dir);
  ch->fit_dir = copy;
  return MMT_OK;
}

void rt_chooser_fit_counts(const rt_chooser *ch, int *fitted, int *read) {
  *fitted = ch->fitted;
  *read = ch->read;
}

static void refuse(rt_chooser *ch, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records why the candidate being tried was refused (cut short when long). */
static void refuse(rt_chooser *ch, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ch->why, sizeof ch->why, fmt, ap);
  va_end(ap);
}

/* A gen_ call failed on a candidate: running out of memory is an error of the choice; any
 * other failure (a broken template, a bad row) only refuses the candidate. */
static mmt_status gen_failed(rt_chooser *ch, mmt_status rc, const ut_err *e, const char *what,
                             ut_err *err) {
  if (rc == MMT_ERR_NOMEM) return ut_fail(err, rc, "%s: %s", what, e->msg);
  refuse(ch, "%s: %s", what, e->msg);
  return MMT_OK;
}

/* The template called name, loaded once per chooser.  *t is NULL (and ch->why says why) when
 * it does not load; only running out of memory is an error. */
static mmt_status template_get(rt_chooser *ch, const char *name, gen_template **t, ut_err *err) {
  *t = NULL;
  for (int i = 0; i < ch->count; i++) {
    if (strcmp(ch->slots[i].name, name) != 0) continue;
    *t = ch->slots[i].t;
    if (!*t) refuse(ch, "%s", ch->slots[i].why);
    return MMT_OK;
  }
  if (strlen(name) >= GEN_NAME_MAX) {
    refuse(ch, "template name '%.80s...' is too long", name);
    return MMT_OK;
  }
  if (ch->count == ch->cap) {
    int cap = ch->cap ? 2 * ch->cap : 4;
    tmpl_slot *slots = realloc(ch->slots, (size_t)cap * sizeof *slots);
    if (!slots) return ut_fail(err, MMT_ERR_NOMEM, "out of memory caching template '%s'", name);
    ch->slots = slots;
    ch->cap = cap;
  }
  ut_err e = {{0}};
  mmt_status rc = gen_load_named(name, t, &e);
  if (!rc && (rc = gen_set_device(*t, &ch->device, &e))) { /* limits out of range */
    gen_free(*t);
    *t = NULL;
  }
  if (rc == MMT_ERR_NOMEM) return ut_fail(err, rc, "loading template '%s': %s", name, e.msg);
  tmpl_slot *s = &ch->slots[ch->count++];
  ut_copy(s->name, sizeof s->name, name);
  s->t = rc ? NULL : *t;
  s->why[0] = '\0';
  if (rc) {
    refuse(ch, "template '%s': %s", name, e.msg);
    memcpy(s->why, ch->why, sizeof s->why);
  }
  return MMT_OK;
}

/* First half of a candidate: template, hash (NULL: any; a row's is checked by kernel_for),
 * dtype, params (NULL: the default config) and constraints against the problem.  *ok false
 * (ch->why says why) refuses it. */
static mmt_status config_for(rt_chooser *ch, const char *tname, const char *hash,
                             const char *params, const gen_problem *p, gen_template **tp,
                             gen_config *cfg, bool *ok, ut_err *err) {
  gen_template *t = NULL;
  ut_err e = {{0}};
  char why[256] = "";
  bool valid = false;
  *ok = false;
  mmt_status rc = template_get(ch, tname, &t, err);
  if (rc || !t) return rc;
  if (hash && strcmp(hash, gen_source_hash(t)) != 0) {
    refuse(ch, "%s: template changed since it was measured (hash %s, now %s)", tname, hash,
           gen_source_hash(t));
    return MMT_OK;
  }
  if (!gen_supports_dtype(t, p->dtype)) {
    refuse(ch, "%s: does not support dtype %s", tname, p->dtype);
    return MMT_OK;
  }
  if (params)
    rc = gen_config_parse(t, params, cfg, &e);
  else
    gen_config_default(t, cfg);
  if (!rc) rc = gen_check(t, cfg, p, &valid, why, sizeof why, &e);
  if (rc) return gen_failed(ch, rc, &e, tname, err);
  if (!valid) {
    refuse(ch, "%s %s: constraint failed for this problem: %s", tname, params ? params : "default",
           why[0] ? why : "(no reason given)");
    return MMT_OK;
  }
  *tp = t;
  *ok = true;
  return MMT_OK;
}

/* Second half: emits the kernel and checks that it is the one row (NULL: none) measured, and
 * its requirements and grid for the problem.  On *ok the caller owns *spec; otherwise it is
 * empty. */
static mmt_status kernel_for(rt_chooser *ch, gen_template *t, const gen_config *cfg,
                             const rt_row_kernel *row, const gen_problem *p, gen_kernel *spec,
                             bool *ok, ut_err *err) {
  ut_err e = {{0}};
  unsigned grid[3] = {0, 0, 0};
  *ok = false;
  char arch[16];
  mmt_status rc = gen_emit_op(t, cfg, p->dtype, p->layout, p->op, spec, &e);
  if (rc) return gen_failed(ch, rc, &e, gen_name(t), err);
  bool current = true;
  if (row && (rc = rt_row_current(t, row, spec, &current, err))) goto refused;
  if (!current) {
    if (row->kernel_hash[0])
      refuse(ch, "%s: its kernel changed since it was measured (kernel %s)", gen_name(t),
             row->kernel_hash);
    else
      refuse(ch, "%s: template changed since it was measured (hash %s, now %s)", gen_name(t),
             row->template_hash, gen_source_hash(t));
    goto refused;
  }
  if (ch->device_arch[0] && rt_kernel_arch(ch->device_arch, spec->arch, arch, &e)) {
    refuse(ch, "%s: %s", gen_name(t), e.msg);
    goto refused;
  }
  const gen_requires *r = &spec->requires;
  if (!gen_requires_met(r, p)) {
    refuse(ch,
           "%s: kernel requires M, N, K multiples of %lld, %lld, %lld and %d-byte alignment; "
           "problem is %lldx%lldx%lld, lda=%lld ldb=%lld ldc=%lld, %d-byte aligned",
           gen_name(t), (long long)r->m_multiple, (long long)r->n_multiple,
           (long long)r->k_multiple, r->align_bytes, (long long)p->m, (long long)p->n,
           (long long)p->k, (long long)p->lda, (long long)p->ldb, (long long)p->ldc,
           p->align_bytes);
    goto refused;
  }
  /* Any SM count: the question is whether the grid is valid and not empty. */
  rc = gen_grid_eval(spec->grid, p->m, p->n, p->k, 1, grid, &e);
  if (rc) {
    rc = gen_failed(ch, rc, &e, gen_name(t), err);
    goto refused;
  }
  if (!grid[0] || !grid[1] || !grid[2]) {
    refuse(ch, "%s: empty grid %ux%ux%u for this problem", gen_name(t), grid[0], grid[1], grid[2]);
    goto refused;
  }
  *ok = true;
  return MMT_OK;
refused:
  gen_kernel_clear(spec);
  return rc;
}

/* Tries one candidate (see rt_choose.h for what "usable" means): a stored row (row), or a
 * config of the model or a default (hash: the template source it must have; NULL: any);
 * fills out's template, params, config and kernel when *ok. */
static mmt_status try_candidate(rt_chooser *ch, const char *tname, const char *hash,
                                const rt_row_kernel *row, const char *params, const gen_problem *p,
                                rt_choice *out, bool *ok, ut_err *err) {
  gen_template *t = NULL;
  gen_config cfg;
  gen_kernel spec = {0};
  char text[sizeof out->params];
  ut_err e = {{0}};
  mmt_status rc = config_for(ch, tname, hash, params, p, &t, &cfg, ok, err);
  if (rc || !*ok) return rc;
  rc = kernel_for(ch, t, &cfg, row, p, &spec, ok, err);
  if (rc || !*ok) return rc;
  rc = gen_config_format(t, &cfg, text, sizeof text, &e);
  if (rc) {
    gen_kernel_clear(&spec);
    *ok = false;
    return gen_failed(ch, rc, &e, tname, err);
  }
  ut_copy(out->template_name, sizeof out->template_name, tname);
  memcpy(out->params, text, sizeof text);
  out->tmpl = t;
  out->cfg = cfg;
  out->spec = spec;
  return MMT_OK;
}

/* Walks the ok rows of one problem, fastest first, stopping at the first usable one. */
typedef struct {
  rt_chooser *ch;
  const gen_problem *p;
  rt_choice *out;
  bool found;
  mmt_status rc;
  ut_err *err;
} row_walk;

static int on_row(const db_result *r, void *user) {
  row_walk *w = user;
  bool ok = false;
  const rt_row_kernel row = {.template_hash = r->template_hash,
                             .kernel_hash = r->kernel_hash,
                             .params = r->params,
                             .dtype = r->problem.dtype,
                             .layout = r->problem.layout};
  w->rc = try_candidate(w->ch, r->template_name, NULL, &row, r->params, w->p, w->out, &ok, w->err);
  if (w->rc) return 1;
  if (!ok) return 0;
  w->out->record = *r;
  w->out->has_record = true;
  w->found = true;
  return 1;
}

/* The first usable ok row of the tuned problem (m, n, k) with the problem's dtype/layout. */
static mmt_status walk_rows(row_walk *w, db_handle *db, const char *device_name, int64_t m,
                            int64_t n, int64_t k) {
  db_problem dp = {.m = m, .n = n, .k = k, .batch = w->p->batch > 1 ? w->p->batch : 1};
  mmt_status rc = ut_snprintf(dp.dtype, sizeof dp.dtype, w->err, "%s", w->p->dtype);
  if (!rc) rc = ut_snprintf(dp.layout, sizeof dp.layout, w->err, "%s", w->p->layout);
  if (!rc && w->p->op) rc = gen_op_format(w->p->op, dp.op, sizeof dp.op, w->err);
  if (rc) return rc;
  w->rc = MMT_OK;
  rc = db_each_ok(db, device_name, &dp, on_row, w, w->err);
  return rc ? rc : w->rc;
}

/* ---- the model's candidates ---------------------------------------------------------------- */

/* The launch shape of config cfg of t emitted for dtype and layout; zeroed when it does not
 * emit (a config this dtype or layout does not allow): only running out of memory is an
 * error. */
static mmt_status emit_launch(gen_template *t, const gen_config *cfg, const char *dtype,
                              const char *layout, db_launch *out, ut_err *err) {
  gen_kernel k = {0};
  ut_err e = {{0}};
  mmt_status rc = gen_emit(t, cfg, dtype, layout, &k, &e);
  if (!rc) rc = rt_launch_of(t, cfg, &k, out, &e);
  gen_kernel_clear(&k);
  if (rc) memset(out, 0, sizeof *out);
  return rc == MMT_ERR_NOMEM ? ut_fail(err, rc, "%s", e.msg) : MMT_OK;
}

/* rt_fit_hooks.launch for rows measured before schema 4: the config emitted for the row's
 * dtype and layout. */
static mmt_status launch_of_row(const db_model_row *row, db_launch *out, void *user,
                                ut_err *err) {
  rt_chooser *ch = user;
  gen_template *t = NULL;
  gen_config cfg;
  memset(out, 0, sizeof *out);
  mmt_status rc = template_get(ch, row->template_name, &t, err);
  if (rc || !t || strcmp(gen_source_hash(t), row->template_hash) != 0) return rc;
  if (gen_config_parse(t, row->params, &cfg, NULL)) return MMT_OK; /* not this template's */
  return emit_launch(t, &cfg, row->problem.dtype, row->problem.layout, out, err);
}

/* The slot of key in the verdict table: its own, or the empty one it goes into (the table
 * grown first when half full).  NULL: out of memory. */
static verdict *verdict_slot(rt_chooser *ch, const char *key) {
  if (2 * (ch->nverdicts + 1) > ch->verdict_mask) {
    size_t cap = ch->verdict_mask ? 2 * (ch->verdict_mask + 1) : 64;
    verdict *v = calloc(cap, sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; ch->verdict_mask && i <= ch->verdict_mask; i++) {
      if (!ch->verdicts[i].key) continue;
      size_t j = ut_hash64(ch->verdicts[i].key, strlen(ch->verdicts[i].key)) & (cap - 1);
      while (v[j].key) j = (j + 1) & (cap - 1);
      v[j] = ch->verdicts[i];
    }
    free(ch->verdicts);
    ch->verdicts = v;
    ch->verdict_mask = cap - 1;
  }
  size_t i = ut_hash64(key, strlen(key)) & ch->verdict_mask;
  while (ch->verdicts[i].key && strcmp(ch->verdicts[i].key, key) != 0)
    i = (i + 1) & ch->verdict_mask;
  return &ch->verdicts[i];
}

/* rt_fit_hooks.hash: a row that measured what its template emits now is known by the
 * template's hash as it is now, so a template edit that emits the same kernels keeps the
 * model's configs (and their candidates pass config_for's hash check). */
static mmt_status hash_of_row(const db_model_row *row, const char **hash, void *user, ut_err *err) {
  rt_chooser *ch = user;
  gen_template *t = NULL;
  *hash = NULL;
  mmt_status rc = template_get(ch, row->template_name, &t, err);
  if (rc || !t || !strcmp(row->template_hash, gen_source_hash(t))) return rc;
  char key[GEN_NAME_MAX + 2 * 17 + DB_PARAMS_MAX + 32];
  snprintf(key, sizeof key, "%s|%s|%s|%s|%s|%s", row->template_name, row->template_hash,
           row->kernel_hash, row->params, row->problem.dtype, row->problem.layout);
  verdict *v = verdict_slot(ch, key);
  if (!v) return ut_fail(err, MMT_ERR_NOMEM, "out of memory fitting the model");
  if (!v->key) {
    const rt_row_kernel rk = {.template_hash = row->template_hash,
                              .kernel_hash = row->kernel_hash,
                              .params = row->params,
                              .dtype = row->problem.dtype,
                              .layout = row->problem.layout};
    if ((rc = rt_row_current(t, &rk, NULL, &v->current, err))) return rc;
    if (!(v->key = strdup(key))) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
    ch->nverdicts++;
  }
  if (v->current) *hash = gen_source_hash(t);
  return MMT_OK;
}

/* The templates' hashes as they are (their names and sources): a fit kept on disk was made
 * under them, since which rows are current depends on them. */
static uint64_t templates_stamp(rt_chooser *ch) {
  char **names = NULL;
  int n = 0;
  uint64_t h = ut_hash64("templates", 9);
  if (gen_list(&names, &n, NULL) != MMT_OK) return h;
  for (int i = 0; i < n; i++) {
    gen_template *t = NULL;
    h = ut_hash64_more(h, names[i], strlen(names[i]) + 1);
    if (template_get(ch, names[i], &t, NULL) == MMT_OK && t)
      h = ut_hash64_more(h, gen_source_hash(t), strlen(gen_source_hash(t)));
  }
  gen_names_free(names, n);
  return h;
}

mmt_status rt_chooser_model(rt_chooser *ch, db_handle *db, const char *device_name,
                            rt_model **out, ut_err *err) {
  int64_t version = 0;
  mmt_status rc = MMT_OK;
  if (db && device_name && (rc = db_data_version(db, &version, err))) return rc;
  bool same = ch->model && ch->model_db == (db && device_name) && ch->model_version == version &&
              !strcmp(ch->model_device, device_name ? device_name : "");
  if (!same) {
    rt_model *m = NULL;
    rt_model_device dev = {.sm_count = ch->sm_count, .cc_major = ch->cc_major};
    char path[4200];
    rt_fit_key key;
    bool cached = rt_fit_cache_file(ch->fit_dir, db, device_name, &dev, path, sizeof path, &key);
    if (cached) key.templates = templates_stamp(ch);
    if (cached && (m = rt_fit_cache_read(path, &key))) {
      ch->read++;
    } else {
      const rt_fit_hooks hooks = {.launch = launch_of_row, .hash = hash_of_row, .user = ch};
      if ((rc = rt_model_fit(db, device_name, &dev, &hooks, &m, err))) return rc;
      ch->fitted++;
      if (cached) rt_fit_cache_write(ch->fit_dir, path, &key, m);
    }
    rt_model_free(ch->model);
    ch->model = m;
    ch->model_version = version;
    ch->model_db = db && device_name;
    ut_copy(ch->model_device, sizeof ch->model_device, device_name ? device_name : "");
  }
  *out = ch->model;
  return MMT_OK;
}

/* The launch shape of config cfg (text: its canonical params) of template t for p's dtype and
 * layout, emitted once per chooser; zeroed when it does not emit. */
static mmt_status default_launch(rt_chooser *ch, gen_template *t, const gen_config *cfg,
                                 const char *text, const gen_problem *p, db_launch *out,
                                 ut_err *err) {
  const char *layout = p->layout ? p->layout : "nn";
  char key[sizeof ch->launches[0].key];
  snprintf(key, sizeof key, "%s|%s|%s|%s", gen_name(t), text, p->dtype, layout);
  for (int i = 0; i < ch->nlaunches; i++)
    if (!strcmp(ch->launches[i].key, key)) {
      *out = ch->launches[i].launch;
      return MMT_OK;
    }
  memset(out, 0, sizeof *out);
  mmt_status rc = MMT_OK;
  if (gen_supports_layout(t, layout) && (rc = emit_launch(t, cfg, p->dtype, layout, out, err)))
    return rc;
  launch_slot *v = ut_grow(ch->launches, &ch->launch_cap, ch->nlaunches + 1, sizeof *v);
  if (!v) return ut_fail(err, MMT_ERR_NOMEM, "out of memory caching launch shapes");
  ch->launches = v;
  launch_slot *slot = &ch->launches[ch->nlaunches++];
  memcpy(slot->key, key, sizeof key);
  slot->launch = *out;
  return MMT_OK;
}

double rt_template_prior(const char *tname) {
  static const struct {
    const char *name;
    double y;
  } priors[] = RT_PRIORS;
  for (size_t i = 0; i < sizeof priors / sizeof priors[0]; i++)
    if (!strcmp(priors[i].name, tname)) return priors[i].y;
  return NAN;
}

typedef struct {
  rt_candidate *v;
  int count, cap;
} cand_list;

static mmt_status cand_push(cand_list *l, const rt_candidate *c, ut_err *err) {
  rt_candidate *v = ut_grow(l->v, &l->cap, l->count + 1, sizeof *v);
  if (!v) return ut_fail(err, MMT_ERR_NOMEM, "out of memory ranking kernels");
  l->v = v;
  l->v[l->count++] = *c;
  return MMT_OK;
}

/* Whether a default or built-in entry of this offer is a candidate for p on a device of
 * compute capability cc_major (rt_offer). */
static bool entry_offered(rt_offer offer, int cc_major, const gen_problem *p) {
  switch (offer) {
  case RT_OFFER_UNALIGNED: return p->align_bytes < 16;
  case RT_OFFER_FP8: return gen_dtype_fp8(p->dtype);
  case RT_OFFER_NO_FP8_SWAP: return !gen_dtype_fp8(p->dtype) || (p->op && p->op->group);
  case RT_OFFER_NO_WGMMA: return cc_major < 9 || p->align_bytes < 16 || (p->op && p->op->group);
  case RT_OFFER_NO_SWAP:
    return entry_offered(RT_OFFER_NO_WGMMA, cc_major, p) ||
           (!gen_dtype_fp8(p->dtype) && p->op && p->op->gated);
  default: return true;
  }
}

bool rt_builtin_offered(const rt_builtin *b, int cc_major, const gen_problem *p) {
  return cc_major >= b->min_cc && entry_offered(b->offer, cc_major, p);
}

/* A config without rows of this GPU model: a default or built-in one (skipped when the model
 * has rows of it under the template's current source, or it is listed already). */
static mmt_status push_unmeasured(rt_chooser *ch, rt_model *m, const char *tname,
                                  const char *params, const gen_problem *p, cand_list *l,
                                  ut_err *err) {
  gen_template *t = NULL;
  gen_config cfg;
  char text[256];
  mmt_status rc = template_get(ch, tname, &t, err);
  if (rc || !t || !gen_supports_dtype(t, p->dtype)) return rc;
  if (params ? gen_config_parse(t, params, &cfg, NULL) : (gen_config_default(t, &cfg), MMT_OK))
    return MMT_OK; /* a list entry this template no longer has: not a candidate */
  if (gen_config_format(t, &cfg, text, sizeof text, NULL)) return MMT_OK;
  if (rt_model_find(m, tname, gen_source_hash(t), text, p->dtype) >= 0) return MMT_OK;
  for (int i = 0; i < l->count; i++)
    if (l->v[i].config < 0 && !strcmp(l->v[i].template_name, tname) &&
        !strcmp(l->v[i].params, text))
      return MMT_OK;
  db_launch launch;
  if ((rc = default_launch(ch, t, &cfg, text, p, &launch, err))) return rc;
  if (launch.tile_m <= 0) return MMT_OK; /* does not emit for this dtype and layout */
  rt_candidate c = {.config = -1};
  ut_copy(c.template_name, sizeof c.template_name, tname);
  ut_copy(c.params, sizeof c.params, text);
  rt_model_predict(m, -1, tname, text, &launch, rt_template_prior(tname), p, &c.pred);
  return cand_push(l, &c, err);
}

/* For a problem that may run it (rt_model_may_unpromote: fast_accum): model config mc's kernel
 * without its promotions (promote = 0) when mc promotes and the model has no rows of that
 * kernel, predicted from the rows of its promoting configs (rt_model_predict_unpromoted).
 * Without it a fast_accum problem near FP8 problems that must promote would be served their
 * promoting kernels, whose rows are many, over never-measured promote = 0 built-ins. */
static mmt_status push_unpromoted(rt_chooser *ch, rt_model *m, const rt_model_config *mc,
                                  const gen_problem *p, cand_list *l, ut_err *err) {
  gen_template *t = NULL;
  char text[256];
  if (mc->launch.promote <= 0 || !rt_model_may_unpromote(p)) return MMT_OK;
  mmt_status rc = template_get(ch, mc->template_name, &t, err);
  if (rc || !t || strcmp(mc->template_hash, gen_source_hash(t)) != 0) return rc;
  if (!rt_model_with_promote(t, mc->params, 0, text, sizeof text)) return MMT_OK;
  if (rt_model_find(m, mc->template_name, mc->template_hash, text, p->dtype) >= 0) return MMT_OK;
  for (int j = 0; j < l->count; j++) /* another promote value of the same config listed it */
    if (l->v[j].config < 0 && !strcmp(l->v[j].template_name, mc->template_name) &&
        !strcmp(l->v[j].params, text))
      return MMT_OK;
  rt_candidate c = {.config = -1};
  if (!rt_model_predict_unpromoted(m, t, text, p, &c.pred)) return MMT_OK;
  ut_copy(c.template_name, sizeof c.template_name, mc->template_name);
  ut_copy(c.template_hash, sizeof c.template_hash, mc->template_hash);
  ut_copy(c.params, sizeof c.params, text);
  return cand_push(l, &c, err);
}

/* Lowest predicted time first; equal times by the area their tiles cover (the smaller
 * first: rt_model_tile_area), then by split-K's slices (the fewer first), then by name and
 * params, so the order never depends on the database's. */
static int by_prediction(const void *a, const void *b) {
  const rt_candidate *x = a, *y = b;
  if (x->pred.ms != y->pred.ms) return x->pred.ms < y->pred.ms ? -1 : 1;
  if (x->pred.tile_area != y->pred.tile_area) return x->pred.tile_area < y->pred.tile_area ? -1 : 1;
  if (x->pred.slices != y->pred.slices) return x->pred.slices < y->pred.slices ? -1 : 1;
  int c = strcmp(x->template_name, y->template_name);
  return c ? c : strcmp(x->params, y->params);
}

/* The first RT_RANK_RELAUNCH candidates of l (sorted) that are model configs without rows in
 * p's layout get the launch shape of their kernel emitted for that layout, and a prediction
 * with it; l is sorted again, until the first ones all have theirs.  A template's grid may
 * depend on the layout (skinny's dot and axpy bodies cover W differently), and a config
 * measured in nt only would otherwise be predicted in nn with its nt grid.  Only the first few
 * are emitted: emitting every config of the model would cost a cold call tens of ms. */
static mmt_status relaunch_first(rt_chooser *ch, rt_model *m, const gen_problem *p,
                                 cand_list *l, ut_err *err) {
  for (int pass = 0; pass < RT_RANK_RELAUNCH; pass++) {
    bool changed = false;
    for (int i = 0; i < l->count && i < RT_RANK_RELAUNCH; i++) {
      rt_candidate *c = &l->v[i];
      if (!c->other_layout) continue;
      c->other_layout = false;
      gen_template *t = NULL;
      gen_config cfg;
      db_launch launch;
      mmt_status rc = template_get(ch, c->template_name, &t, err);
      if (rc) return rc;
      if (!t || gen_config_parse(t, c->params, &cfg, NULL)) continue; /* as predicted */
      if ((rc = default_launch(ch, t, &cfg, c->params, p, &launch, err))) return rc;
      if (launch.tile_m <= 0) continue; /* no kernel for this layout: not usable anyway */
      rt_model_predict(m, c->config, NULL, NULL, &launch, NAN, p, &c->pred);
      changed = true;
    }
    if (!changed) break;
    qsort(l->v, (size_t)l->count, sizeof *l->v, by_prediction);
  }
  return MMT_OK;
}

/* RT_DEFAULTS: each template's default config. */
typedef struct {
  const char *name, *params;
  rt_offer offer;
} default_entry;

static const default_entry *default_list(int *count) {
  static const default_entry list[] = RT_DEFAULTS;
  *count = (int)(sizeof list / sizeof list[0]);
  return list;
}

const rt_builtin *rt_builtins(int *count) {
  static const rt_builtin list[] = RT_BUILTIN;
  *count = (int)(sizeof list / sizeof list[0]);
  return list;
}

mmt_status rt_chooser_prepare(rt_chooser *ch, db_handle *db, const char *device_name,
                              ut_err *err) {
  int ndefaults;
  const default_entry *defaults = default_list(&ndefaults);
  rt_model *m = NULL;
  ut_err e = {{0}};
  mmt_status rc = rt_chooser_model(ch, db, device_name, &m, &e);
  if (rc == MMT_ERR_NOMEM) return ut_fail(err, rc, "%s", e.msg);
  gen_template *t;
  rc = MMT_OK;
  for (int i = 0; i < ndefaults && !rc; i++)
    rc = template_get(ch, defaults[i].name, &t, err);
  int nbuiltin;
  const rt_builtin *builtin = rt_builtins(&nbuiltin);
  for (int i = 0; i < nbuiltin && !rc; i++) rc = template_get(ch, builtin[i].name, &t, err);
  for (int i = 0; m && i < rt_model_config_count(m) && !rc; i++) {
    rt_model_config mc;
    rt_model_get_config(m, i, &mc);
    rc = template_get(ch, mc.template_name, &t, err);
  }
  return rc;
}

mmt_status rt_rank(rt_chooser *ch, db_handle *db, const char *device_name, const gen_problem *p,
                   const int64_t *hide, rt_candidate **out, int *count, ut_err *err) {
  int ndefaults;
  const default_entry *defaults = default_list(&ndefaults);
  rt_model *m = NULL;
  cand_list l = {0};
  *out = NULL;
  *count = 0;
  mmt_status rc = rt_chooser_model(ch, db, device_name, &m, err);
  if (rc) return rc;
  rt_model_focus(m, p, hide);
  const int layout = gen_layout_index(p->layout ? p->layout : "nn");
  for (int i = 0; i < rt_model_config_count(m) && !rc; i++) {
    rt_model_config mc;
    rt_model_get_config(m, i, &mc);
    if (strcmp(mc.dtype, rt_model_dtype_class(p->dtype)) != 0) continue;
    rt_candidate c = {.config = i, .other_layout = layout >= 0 && !(mc.layouts & 1u << layout)};
    ut_copy(c.template_name, sizeof c.template_name, mc.template_name);
    ut_copy(c.template_hash, sizeof c.template_hash, mc.template_hash);
    ut_copy(c.params, sizeof c.params, mc.params);
    rt_model_predict(m, i, NULL, NULL, NULL, NAN, p, &c.pred);
    rc = cand_push(&l, &c, err);
    if (!rc) rc = push_unpromoted(ch, m, &mc, p, &l, err);
  }
  int cc = ch->cc_major ? ch->cc_major : rt_model_get_device(m).cc_major;
  for (int i = 0; i < ndefaults && !rc; i++)
    if (entry_offered(defaults[i].offer, cc, p))
      rc = push_unmeasured(ch, m, defaults[i].name, defaults[i].params, p, &l, err);
  int nbuiltin;
  const rt_builtin *builtin = rt_builtins(&nbuiltin);
  for (int i = 0; i < nbuiltin && !rc; i++)
    if (rt_builtin_offered(&builtin[i], cc, p))
      rc = push_unmeasured(ch, m, builtin[i].name, builtin[i].params, p, &l, err);
  if (rc) {
    free(l.v);
    return rc;
  }
  /* none at all (no template serves p's dtype) leaves l.v NULL, which qsort must not get */
  if (l.count > 1) qsort(l.v, (size_t)l.count, sizeof *l.v, by_prediction);
  if ((rc = relaunch_first(ch, m, p, &l, err))) {
    free(l.v);
    return rc;
  }
  *out = l.v;
  *count = l.count;
  return MMT_OK;
}

mmt_status rt_choose_candidate(rt_chooser *ch, const rt_candidate *c, const gen_problem *p,
                               rt_choice *out, ut_err *err) {
  bool ok = false;
  mmt_status rc = try_candidate(ch, c->template_name, c->template_hash[0] ? c->template_hash : NULL,
                                NULL, c->params, p, out, &ok, err);
  if (rc) return rc;
  if (!ok) return ut_fail(err, MMT_ERR_UNSUPPORTED, "%s", ch->why);
  out->predicted_ms = c->pred.ms;
  out->model_rows = c->pred.rows;
  out->kind = MMT_CHOICE_DEFAULT;
  return MMT_OK;
}

/* The first usable candidate of the model's ranking. */
static mmt_status choose_ranked(rt_chooser *ch, db_handle *db, const char *device_name,
                                const gen_problem *p, rt_choice *out, ut_err *err) {
  rt_candidate *v = NULL;
  int n = 0;
  char reasons[1024] = "";
  mmt_status rc = rt_rank(ch, db, device_name, p, NULL, &v, &n, err);
  for (int i = 0; i < n && !rc; i++) {
    const rt_candidate *c = &v[i];
    ut_err why = {{0}};
    rc = rt_choose_candidate(ch, c, p, out, &why);
    if (rc == MMT_ERR_UNSUPPORTED) {
      /* why the first unmeasured config of each template was refused (the others of a
       * template are refused for the same kind of reason, and would crowd the others out) */
      bool listed = false;
      for (int j = 0; j < i && !listed; j++)
        listed = v[j].config < 0 && !strcmp(v[j].template_name, c->template_name);
      size_t used = strlen(reasons);
      if (c->config < 0 && !listed && used < sizeof reasons - 1)
        snprintf(reasons + used, sizeof reasons - used, "%s%.300s", used ? "; " : "", why.msg);
      rc = MMT_OK;
      continue;
    }
    if (rc) {
      if (err) *err = why;
      break;
    }
    if (c->config >= 0 && c->pred.basis_id > 0) {
      ut_err e = {{0}};
      /* the row the prediction leans on most: its verification record */
      if (db_get(db, c->pred.basis_id, &out->record, &e) == MMT_OK) {
        out->has_record = true;
        out->kind = MMT_CHOICE_PREDICTED;
      }
    }
    free(v);
    return MMT_OK;
  }
  free(v);
  if (rc) return rc;
  return ut_fail(err, MMT_ERR_UNSUPPORTED,
                 "no kernel supports %s %s %lldx%lldx%lld (lda=%lld ldb=%lld ldc=%lld, %d-byte "
                 "aligned): %s",
                 p->dtype, p->layout ? p->layout : "nn", (long long)p->m, (long long)p->n,
                 (long long)p->k, (long long)p->lda, (long long)p->ldb, (long long)p->ldc,
                 p->align_bytes, reasons[0] ? reasons : "no candidate for this dtype");
}

/* EXACT, then the model's ranking, for the problem as it is. */
static mmt_status choose_for(rt_chooser *ch, db_handle *db, const char *device_name,
                             const gen_problem *p, rt_choice *out, ut_err *err) {
  row_walk w = {.ch = ch, .p = p, .out = out, .err = err};
  mmt_status rc = MMT_OK;
  if (db && device_name) { /* rows of exactly this problem: an op's, of its batch, too */
    if ((rc = walk_rows(&w, db, device_name, p->m, p->n, p->k))) return rc;
    if (w.found) {
      out->kind = MMT_CHOICE_EXACT;
      return MMT_OK;
    }
  }
  return choose_ranked(ch, db, device_name, p, out, err);
}

/* Whether template `name` (loaded through ch) offers tf32 too: its f32 row then measures the
 * kernel it would run for tf32 (skinny: fp32 products on the CUDA cores in both). */
static bool computes_tf32(rt_chooser *ch, const char *name) {
  gen_template *t = NULL;
  ut_err ignored;
  return template_get(ch, name, &t, &ignored) == MMT_OK && t && gen_supports_dtype(t, "tf32");
}

/* The time a choice is expected to take: its row's for EXACT, else the model's (0: none). */
static double expected_ms(const rt_choice *c) {
  return c->kind == MMT_CHOICE_EXACT ? c->record.ms_median : c->predicted_ms;
}

/* rt_choose_blocks: a masked grouped call without a row of its regime gets the model's pick
 * for its blocks as deep as they are (block_m), not for the mean an expert has.  The mean
 * hides skew: a routing that gives one expert 21 rows of a mean of 0.4 had skinny's one-row
 * blocks stream that expert's weights 21 times (0.25x cuBLAS's grouped call, H100), where
 * tuning over drawn routings picks tiles that hold the fullest expert (1.05x); a kernel
 * picked for the blocks' depth streams each weight once whatever the routing, at the cost of
 * idle rows when the routing is even. */
mmt_status rt_choose_blocks(rt_chooser *ch, db_handle *db, const char *device_name,
                            const gen_problem *p, int64_t block_m, rt_choice *out, ut_err *err) {
  mmt_status rc = rt_choose(ch, db, device_name, p, out, err);
  if (rc || out->kind == MMT_CHOICE_EXACT || !p->op || p->op->group != 'm' || block_m <= p->m)
    return rc;
  gen_problem deep = *p;
  deep.m = block_m;
  rt_choice alt = {0};
  ut_err alt_err;
  if (rt_choose(ch, db, device_name, &deep, &alt, &alt_err) != MMT_OK) return MMT_OK;
  if (alt.kind == MMT_CHOICE_EXACT) { /* a row of another regime: its time, not this call's */
    alt.kind = MMT_CHOICE_PREDICTED;
    alt.predicted_ms = alt.record.ms_median;
  }
  rt_choice_clear(out);
  *out = alt; /* the kernel it owns moves with it */
  return MMT_OK;
}

mmt_status rt_choose(rt_chooser *ch, db_handle *db, const char *device_name, const gen_problem *p,
                     rt_choice *out, ut_err *err) {
  ut_err first = {{0}};
  mmt_status rc = choose_for(ch, db, device_name, p, out, &first);
  const bool tf32 = p->dtype && strcmp(p->dtype, "tf32") == 0;
  if (!tf32 || (rc && rc != MMT_ERR_UNSUPPORTED)) {
    if (rc && err) *err = first;
    return rc;
  }
  /* TF32 permits tensor-core rounding; plain fp32 is a more precise answer to it, taken where
   * no tf32 kernel serves the problem, or where an f32 choice whose template computes tf32
   * too (on the CUDA cores, the same kernel in both: skinny's GEMVs, which the main job tunes
   * in f32 alone) is expected to be faster than the tf32 choice; but never over a tf32 row of
   * the problem itself.  An f32 kernel without tf32 (reg_tiled) is not weighed against the
   * tensor cores: with no tf32 rows, their prediction is the model's analytic part alone, and
   * reg_tiled's measured rows beat it where the tensor cores run 1.5-3x faster (the main
   * job's database: 8192x8192x128 at 0.29x cuBLAS, 4096x4096x64 at 0.58x). */
  gen_problem f32 = *p;
  f32.dtype = "f32";
  if (rc == MMT_ERR_UNSUPPORTED) {
    rc = choose_for(ch, db, device_name, &f32, out, err);
    if (rc) ut_err_prefix(err, "%s; as f32", first.msg);
    return rc;
  }
  if (out->kind == MMT_CHOICE_EXACT) return MMT_OK;
  rt_choice alt = {0};
  ut_err alt_err;
  const double ms = expected_ms(out);
  if (choose_for(ch, db, device_name, &f32, &alt, &alt_err) == MMT_OK && ms > 0 &&
      expected_ms(&alt) > 0 && expected_ms(&alt) < ms && computes_tf32(ch, alt.template_name)) {
    rt_choice_clear(out);
    *out = alt; /* the kernel it owns moves with it */
    return MMT_OK;
  }
  rt_choice_clear(&alt);
  return MMT_OK;
}

void rt_choice_clear(rt_choice *c) {
  if (!c) return;
  gen_kernel_clear(&c->spec);
  memset(c, 0, sizeof *c);
}

void rt_choice_describe(const rt_choice *c, const gen_problem *p, mmt_choice *out) {
  memset(out, 0, sizeof *out);
  out->kind = c->kind;
  ut_copy(out->template_name, sizeof out->template_name, c->template_name);
  ut_copy(out->params, sizeof out->params, c->params);
  ut_copy(out->layout, sizeof out->layout, p->layout ? p->layout : "nn");
  out->kernel_m = p->m;
  out->kernel_n = p->n;
  out->kernel_k = p->k;
  out->expected_ms = expected_ms(c);
  out->model_rows = c->model_rows;
  out->batch = p->batch > 1 ? p->batch : 1;
  if (p->op) gen_op_format(p->op, out->epilogue, sizeof out->epilogue, NULL);
  if (!c->has_record) return;
  const db_result *r = &c->record;
  out->record_id = r->id;
  out->tuned_m = r->problem.m;
  out->tuned_n = r->problem.n;
  out->tuned_k = r->problem.k;
  out->tuned_ms = r->ms_median;
  out->tuned_tflops = r->tflops;
  out->rel_err = r->rel_err;
  out->max_err = r->max_err;
  out->measured_at = r->created_at;
  ut_copy(out->device_name, sizeof out->device_name, r->device.name);
  ut_copy(out->nvrtc_version, sizeof out->nvrtc_version, r->nvrtc_version);
  ut_copy(out->template_hash, sizeof out->template_hash, r->template_hash);
  ut_copy(out->kernel_hash, sizeof out->kernel_hash, r->kernel_hash);
}
