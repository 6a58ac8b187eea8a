/* rt_choose.c -- see rt_choose.h: EXACT, then NEAREST, then DEFAULT. */
#include "rt_choose.h"

#include "rt_compile.h"

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

struct rt_chooser {
  tmpl_slot *slots;
  int count, cap;
  char device_arch[16]; /* "" : any */
  char why[512];        /* why the last candidate was refused */
};

mmt_status rt_chooser_new(const char *device_arch, rt_chooser **out, ut_err *err) {
  *out = calloc(1, sizeof **out);
  if (!*out) return ut_fail(err, MMT_ERR_NOMEM, "out of memory creating the kernel chooser");
  snprintf((*out)->device_arch, sizeof (*out)->device_arch, "%s", device_arch ? device_arch : "");
  return MMT_OK;
}

void rt_chooser_free(rt_chooser *ch) {
  if (!ch) return;
  for (int i = 0; i < ch->count; i++) gen_free(ch->slots[i].t);
  free(ch->slots);
  free(ch);
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

/* First half of a candidate: template, hash (NULL: any), dtype, params (NULL: the default
 * config) and constraints against the problem.  *ok false (ch->why says why) refuses it. */
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

/* Second half: emits the kernel and checks its requirements and grid for the problem.  On
 * *ok the caller owns *spec; otherwise it is empty. */
static mmt_status kernel_for(rt_chooser *ch, gen_template *t, const gen_config *cfg,
                             const gen_problem *p, gen_kernel *spec, bool *ok, ut_err *err) {
  ut_err e = {{0}};
  unsigned grid[3] = {0, 0, 0};
  *ok = false;
  char arch[16];
  mmt_status rc = gen_emit(t, cfg, p->dtype, p->layout, spec, &e);
  if (rc) return gen_failed(ch, rc, &e, gen_name(t), err);
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

/* Tries one candidate (see rt_choose.h for what "usable" means); fills out's template,
 * params, config and kernel when *ok. */
static mmt_status try_candidate(rt_chooser *ch, const char *tname, const char *hash,
                                const char *params, const gen_problem *p, rt_choice *out, bool *ok,
                                ut_err *err) {
  gen_template *t = NULL;
  gen_config cfg;
  gen_kernel spec = {0};
  char text[sizeof out->params];
  ut_err e = {{0}};
  mmt_status rc = config_for(ch, tname, hash, params, p, &t, &cfg, ok, err);
  if (rc || !*ok) return rc;
  rc = kernel_for(ch, t, &cfg, p, &spec, ok, err);
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
  w->rc = try_candidate(w->ch, r->template_name, r->template_hash, r->params, w->p, w->out, &ok,
                        w->err);
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
  db_problem dp = {.m = m, .n = n, .k = k};
  mmt_status rc = ut_snprintf(dp.dtype, sizeof dp.dtype, w->err, "%s", w->p->dtype);
  if (!rc) rc = ut_snprintf(dp.layout, sizeof dp.layout, w->err, "%s", w->p->layout);
  if (rc) return rc;
  w->rc = MMT_OK;
  rc = db_each_ok(db, device_name, &dp, on_row, w, w->err);
  return rc ? rc : w->rc;
}

/* A tuned shape and its distance to the asked one. */
typedef struct {
  int64_t m, n, k;
  double d;
} tuned_shape;

typedef struct {
  tuned_shape *v;
  int count, cap;
  const gen_problem *p;
  mmt_status rc;
  ut_err *err;
} shape_list;

static void on_shape(const db_problem *q, void *user) {
  shape_list *s = user;
  const gen_problem *p = s->p;
  if (s->rc || (q->m == p->m && q->n == p->n && q->k == p->k)) return; /* EXACT tried it */
  if (s->count == s->cap) {
    int cap = s->cap ? 2 * s->cap : 32;
    tuned_shape *v = realloc(s->v, (size_t)cap * sizeof *v);
    if (!v) {
      s->rc = ut_fail(s->err, MMT_ERR_NOMEM, "out of memory listing tuned shapes");
      return;
    }
    s->v = v;
    s->cap = cap;
  }
  s->v[s->count++] =
      (tuned_shape){q->m, q->n, q->k, rt_shape_distance(p->m, p->n, p->k, q->m, q->n, q->k)};
}

/* Nearest first; ties by size, so the order never depends on the database's. */
static int by_distance(const void *a, const void *b) {
  const tuned_shape *x = a, *y = b;
  if (x->d != y->d) return x->d < y->d ? -1 : 1;
  if (x->m != y->m) return x->m < y->m ? -1 : 1;
  if (x->n != y->n) return x->n < y->n ? -1 : 1;
  return (x->k > y->k) - (x->k < y->k);
}

static mmt_status choose_nearest(row_walk *w, db_handle *db, const char *device_name) {
  shape_list s = {.p = w->p, .err = w->err};
  mmt_status rc = db_each_shape(db, device_name, w->p->dtype, w->p->layout, on_shape, &s, w->err);
  if (!rc) rc = s.rc;
  if (rc) goto cleanup;
  qsort(s.v, (size_t)s.count, sizeof *s.v, by_distance);
  for (int i = 0; i < s.count && i < RT_NEAREST_MAX_SHAPES && !w->found; i++)
    if ((rc = walk_rows(w, db, device_name, s.v[i].m, s.v[i].n, s.v[i].k))) goto cleanup;
cleanup:
  free(s.v);
  return rc;
}

/* The first usable config of RT_DEFAULTS. */
static mmt_status choose_default(rt_chooser *ch, const gen_problem *p, rt_choice *out,
                                 ut_err *err) {
  static const struct {
    const char *name, *params;
  } defaults[] = RT_DEFAULTS;
  char reasons[1024] = "";
  for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
    bool ok = false;
    mmt_status rc =
        try_candidate(ch, defaults[i].name, NULL, defaults[i].params, p, out, &ok, err);
    if (rc) return rc;
    if (ok) {
      out->kind = MMT_CHOICE_DEFAULT;
      return MMT_OK;
    }
    size_t used = strlen(reasons);
    snprintf(reasons + used, sizeof reasons - used, "%s%s", used ? "; " : "", ch->why);
  }
  return ut_fail(err, MMT_ERR_UNSUPPORTED,
                 "no kernel supports %s %s %lldx%lldx%lld (lda=%lld ldb=%lld ldc=%lld, %d-byte "
                 "aligned): %s",
                 p->dtype, p->layout, (long long)p->m, (long long)p->n, (long long)p->k,
                 (long long)p->lda, (long long)p->ldb, (long long)p->ldc, p->align_bytes, reasons);
}

/* EXACT, NEAREST, DEFAULT for the problem as it is. */
static mmt_status choose_for(rt_chooser *ch, db_handle *db, const char *device_name,
                             const gen_problem *p, rt_choice *out, ut_err *err) {
  row_walk w = {.ch = ch, .p = p, .out = out, .err = err};
  mmt_status rc = MMT_OK;
  if (db && device_name) {
    if ((rc = walk_rows(&w, db, device_name, p->m, p->n, p->k))) return rc;
    if (w.found) {
      out->kind = MMT_CHOICE_EXACT;
      return MMT_OK;
    }
    if ((rc = choose_nearest(&w, db, device_name))) return rc;
    if (w.found) {
      out->kind = MMT_CHOICE_NEAREST;
      return MMT_OK;
    }
  }
  return choose_default(ch, p, out, err);
}

mmt_status rt_choose(rt_chooser *ch, db_handle *db, const char *device_name, const gen_problem *p,
                     rt_choice *out, ut_err *err) {
  ut_err first = {{0}};
  mmt_status rc = choose_for(ch, db, device_name, p, out, &first);
  if (rc == MMT_ERR_UNSUPPORTED && p->dtype && strcmp(p->dtype, "tf32") == 0) {
    /* TF32 permits tensor-core rounding; plain fp32 is a more precise answer to it. */
    gen_problem f32 = *p;
    f32.dtype = "f32";
    rc = choose_for(ch, db, device_name, &f32, out, err);
    if (rc) ut_err_prefix(err, "%s; as f32", first.msg);
    return rc;
  }
  if (rc && err) *err = first;
  return rc;
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
  /* Time scales with the flops to a first approximation (NEAREST: a rough guide only). */
  double flops = (double)p->m * (double)p->n * (double)p->k;
  double tuned = (double)r->problem.m * (double)r->problem.n * (double)r->problem.k;
  out->expected_ms = c->kind == MMT_CHOICE_EXACT ? r->ms_median
                     : tuned > 0                 ? r->ms_median * flops / tuned
                                                 : 0;
}

static double log_size(int64_t x) { return log((double)(x < 1 ? 1 : x)); }

double rt_shape_distance(int64_t m, int64_t n, int64_t k, int64_t m2, int64_t n2, int64_t k2) {
  return fabs(log_size(m) - log_size(m2)) + fabs(log_size(n) - log_size(n2)) +
         fabs(log_size(k) - log_size(k2));
}

