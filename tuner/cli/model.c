/*
 * cli/model.c -- `mmtune model evaluate`: how well the performance model (rt_model.h)
 * serves shapes it never saw, measured on the database alone (no GPU).  Leave-one-shape-out:
 * for each tuned problem (GPU model, dtype, layout, shape), its rows are hidden from the
 * model, the dispatcher's ranking (rt_rank) is made without them, and the first ranked config
 * that was measured on the problem is taken: its measured time against the problem's best is
 * the score (1 = the model picked the fastest).  Only measured configs can be scored without
 * a GPU, so the report also says how often the ranking's first config was one of them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "rt_choose.h"

static const tn_opt MODEL_OPTS[] = {
    {"db", 0, "PATH", "results database (default as for tune)"},
    {"device-name", 0, "NAME", "GPU model to evaluate (default: every one in the database)"},
    {"dtype", 0, "DTYPE", "only this element type (default: all)"},
    {"json", 0, NULL, "print the result as JSON"},
    {"verbose", 'v', NULL, "a line per problem, and the time to fit and to rank"},
};

static const tn_cmd_spec MODEL_SPEC = {
    "model", "evaluate [--db PATH] [--device-name NAME] [--dtype D] [--json]",
    "evaluate: leave-one-shape-out over the database.  For each tuned problem, its rows are\n"
    "hidden, the performance model ranks every candidate the dispatcher would consider, and\n"
    "the first ranked config measured on the problem is scored: the problem's best time over\n"
    "that config's time (1 = the fastest).  Prints the geometric mean and the worst per GPU\n"
    "model and dtype, and how often the ranking's first config was a measured one; the\n"
    "problems of mmt_matmul's epilogues and batches apart (\"f16+op\": the model ranks their op\n"
    "kernels, fitted on the plain GEMMs' rows and the ops' of other shapes).  Needs no GPU.",
    MODEL_OPTS, (int)(sizeof MODEL_OPTS / sizeof MODEL_OPTS[0])};

/* The problems of one GPU model: plain GEMMs, and mmt_matmul's fused or batched ones. */
typedef struct {
  db_problem *v;
  int count, cap;
  mmt_status rc;
} problem_list;

static void on_problem(const db_problem *p, void *user) {
  problem_list *l = user;
  db_problem *v = l->rc ? NULL : ut_grow(l->v, &l->cap, l->count + 1, sizeof *v);
  if (!v) {
    l->rc = MMT_ERR_NOMEM;
    return;
  }
  l->v = v;
  l->v[l->count++] = *p;
}

/* The ok rows of one problem: "template|params" and median ms. */
typedef struct {
  char key[GEN_NAME_MAX + MMT_PARAMS_MAX];
  double ms;
} measured;

typedef struct {
  measured *v;
  int count, cap;
  bool nomem;
} measured_list;

static int on_measured(const db_result *r, void *user) {
  measured_list *l = user;
  measured *v = ut_grow(l->v, &l->cap, l->count + 1, sizeof *v);
  if (!v) {
    l->nomem = true;
    return 1;
  }
  l->v = v;
  measured *m = &l->v[l->count++];
  snprintf(m->key, sizeof m->key, "%s|%s", r->template_name, r->params);
  m->ms = r->ms_median; /* fastest first: the first row of a config is its best */
  return 0;
}

static double measured_ms(const measured_list *l, const rt_candidate *c) {
  char key[sizeof l->v[0].key];
  snprintf(key, sizeof key, "%s|%s", c->template_name, c->params);
  for (int i = 0; i < l->count; i++)
    if (!strcmp(l->v[i].key, key)) return l->v[i].ms;
  return NAN;
}

/* Scores per dtype. */
typedef struct {
  char dtype[16]; /* "f16", or "f16+op" for mmt_matmul's problems */
  int problems, top_measured;
  double log_sum, worst;
  db_problem worst_at;
} dtype_score;

typedef struct {
  dtype_score s[8];
  int n;
} scores;

static dtype_score *score_of(scores *sc, const char *dtype) {
  for (int i = 0; i < sc->n; i++)
    if (!strcmp(sc->s[i].dtype, dtype)) return &sc->s[i];
  if (sc->n == 8) return NULL;
  dtype_score *d = &sc->s[sc->n++];
  memset(d, 0, sizeof *d);
  ut_copy(d->dtype, sizeof d->dtype, dtype);
  d->worst = 2;
  return d;
}

/* Scores one problem: *ratio (best / chosen), *top (the first ranked config was measured).
 * why (verbose; may be NULL): the first pick, the scored one and the best, for the line. */
static mmt_status score_problem(rt_chooser *ch, db_handle *db, const char *device,
                                const db_problem *q, double *ratio, bool *top,
                                double *rank_s, char *why, size_t why_len, ut_err *err) {
  measured_list ml = {0};
  rt_candidate *cands = NULL;
  int n = 0;
  *ratio = NAN;
  *top = false;
  mmt_status rc = db_each_ok(db, device, q, on_measured, &ml, err);
  if (!rc && ml.nomem) rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory reading rows");
  /* as measured: an op problem's rows are its op kernels' (the model ranks them with its
   * analytic time of the batch and D's type, and the op's epilogue term) */
  gen_op op;
  const bool has_op = q->op[0] && gen_op_parse(q->op, q->dtype, &op, NULL) == MMT_OK;
  if (q->op[0] && !has_op) return MMT_OK; /* an op this mmtune does not know: not scored */
  gen_problem p =
      gen_packed_op_problem(q->dtype, q->layout, q->m, q->n, q->k, has_op ? &op : NULL, q->batch);
  int64_t hide[3] = {q->m, q->n, q->k};
  double t0 = ut_now_seconds();
  if (!rc && ml.count > 0) rc = rt_rank(ch, db, device, &p, hide, &cands, &n, err);
  *rank_s += ut_now_seconds() - t0;
  for (int i = 0; i < n && !rc; i++) {
    double ms = measured_ms(&ml, &cands[i]);
    if (isnan(ms)) continue;
    *ratio = ml.v[0].ms / ms;
    *top = i == 0;
    double best_pred = NAN; /* the best config's prediction, where it is a candidate */
    for (int j = 0; j < n && why; j++) {
      char key[sizeof ml.v[0].key];
      snprintf(key, sizeof key, "%s|%s", cands[j].template_name, cands[j].params);
      if (!strcmp(key, ml.v[0].key)) {
        best_pred = cands[j].pred.ms;
        break;
      }
    }
    if (why)
      snprintf(why, why_len,
               "\n    first pick %s %s (predicted %.4f ms)\n    scored     %s %s (predicted "
               "%.4f, measured %.4f ms)\n    best       %s (predicted %.4f, measured %.4f ms)",
               cands[0].template_name, cands[0].params, cands[0].pred.ms,
               cands[i].template_name, cands[i].params, cands[i].pred.ms, ms, ml.v[0].key,
               best_pred, ml.v[0].ms);
    break;
  }
  free(cands);
  free(ml.v);
  return rc;
}

static mmt_status evaluate_device(db_handle *db, const char *device, const char *dtype,
                                  bool verbose, scores *sc, ut_err *err) {
  problem_list pl = {0};
  rt_chooser *ch = NULL;
  rt_model *m = NULL;
  double rank_s = 0, t0 = ut_now_seconds();
  /* any architecture: the ranking needs none (the model takes the rows'), and only configs
   * that ran on the problem are scored */
  mmt_status rc = rt_chooser_new(NULL, 0, &ch, err);
  if (!rc) rc = rt_chooser_model(ch, db, device, &m, err);
  if (!rc && verbose)
    printf("%s: the model fitted on %d rows (%d configs) in %.1f ms\n", device,
           rt_model_row_count(m), rt_model_config_count(m), 1e3 * (ut_now_seconds() - t0));
  if (!rc) rc = db_each_shape(db, device, dtype, NULL, on_problem, &pl, err);
  if (!rc && pl.rc) rc = ut_fail(err, pl.rc, "out of memory listing problems");
  for (int i = 0; i < pl.count && !rc; i++) {
    const db_problem *q = &pl.v[i];
    double ratio;
    bool top;
    char why[2048] = "";
    if ((rc = score_problem(ch, db, device, q, &ratio, &top, &rank_s, verbose ? why : NULL,
                            sizeof why, err)) ||
        isnan(ratio))
      continue;
    /* mmt_matmul's problems apart: "f16+op" */
    char label[16];
    snprintf(label, sizeof label, "%s%s", q->dtype, q->op[0] || q->batch > 1 ? "+op" : "");
    dtype_score *d = score_of(sc, label);
    if (!d) continue;
    d->problems++;
    d->top_measured += top;
    d->log_sum += log(ratio);
    if (ratio < d->worst) {
      d->worst = ratio;
      d->worst_at = *q;
    }
    if (verbose)
      printf("%s %s %s %lldx%lldx%lld%s%s%s: %.3f%s%s\n", device, q->dtype, q->layout,
             (long long)q->m, (long long)q->n, (long long)q->k, q->op[0] ? " " : "", q->op,
             q->batch > 1 ? " batched" : "", ratio, top ? "" : " (first pick unmeasured)",
             ratio < 0.95 ? why : "");
  }
  if (!rc && verbose && pl.count)
    printf("%s: %.2f ms a ranking (every candidate predicted and sorted)\n", device,
           1e3 * rank_s / pl.count);
  rt_chooser_free(ch);
  free(pl.v);
  return rc;
}

static void print_scores(const char *device, const scores *sc, bool json, bool *first) {
  for (int i = 0; i < sc->n; i++) {
    const dtype_score *d = &sc->s[i];
    double geo = d->problems ? exp(d->log_sum / d->problems) : NAN;
    const db_problem *w = &d->worst_at;
    if (json) {
      printf("%s\n  {\"device\": \"%s\", \"dtype\": \"%s\", \"problems\": %d, \"geomean\": %.4f, "
             "\"worst\": %.4f, \"worst_problem\": \"%s %lldx%lldx%lld\", \"top_measured\": %d}",
             *first ? "" : ",", device, d->dtype, d->problems, geo, d->worst, w->layout,
             (long long)w->m, (long long)w->n, (long long)w->k, d->top_measured);
      *first = false;
    } else {
      printf("%-24s %-5s %4d problems  chosen/best geomean %.3f  worst %.3f (%s %lldx%lldx%lld)"
             "  first pick measured %d/%d\n",
             device, d->dtype, d->problems, geo, d->worst, w->layout, (long long)w->m,
             (long long)w->n, (long long)w->k, d->top_measured, d->problems);
    }
  }
}

/* The GPU models with rows. */
typedef struct {
  char (*names)[128];
  int count, cap;
  bool nomem;
} name_list;

static int on_device(const db_result *r, void *user) {
  name_list *l = user;
  if (l->count && !strcmp(l->names[l->count - 1], r->device.name)) return 0;
  char(*v)[128] = ut_grow(l->names, &l->cap, l->count + 1, sizeof *v);
  if (!v) {
    l->nomem = true;
    return 1;
  }
  l->names = v;
  ut_copy(l->names[l->count++], 128, r->device.name);
  return 0;
}

static int evaluate(const tn_opts *o) {
  char path[4096];
  const char *dtype = NULL, *v;
  int ex = tn_opt_db_path("model", tn_opts_get(o, "db"), path, sizeof path);
  if (ex) return ex;
  mmt_dtype served;
  if ((v = tn_opts_get(o, "dtype")) && (ex = tn_opt_served_dtype("model", v, &served))) return ex;
  if (v) dtype = mmt_dtype_name(served);
  bool json = tn_opts_has(o, "json"), verbose = tn_opts_has(o, "verbose"), first = true;
  ut_err err = {{0}};
  db_handle *db = NULL;
  name_list names = {0};
  mmt_status rc = db_open(path, true, &db, &err);
  if (rc == MMT_ERR_NOT_FOUND) return tn_usage_error("model", "%s", err.msg);
  const char *one = tn_opts_get(o, "device-name");
  if (!rc && one && !*one) {
    db_close(db);
    return tn_usage_error("model", "--device-name is empty");
  }
  if (!rc && one) {
    db_result named = {.device.name = ""};
    ut_copy(named.device.name, sizeof named.device.name, one);
    on_device(&named, &names);
  }
  if (!rc && !one) rc = db_each_best(db, NULL, NULL, NULL, on_device, &names, &err);
  if (!rc && names.nomem) rc = ut_fail(&err, MMT_ERR_NOMEM, "out of memory");
  /* every GPU model's scores first, then the output: a failure prints no half document */
  scores *sc = rc ? NULL : calloc(names.count ? (size_t)names.count : 1, sizeof *sc);
  if (!rc && !sc) rc = ut_fail(&err, MMT_ERR_NOMEM, "out of memory");
  for (int i = 0; i < names.count && !rc; i++)
    rc = evaluate_device(db, names.names[i], dtype, verbose, &sc[i], &err);
  if (!rc && json) printf("[");
  for (int i = 0; i < names.count && !rc; i++) print_scores(names.names[i], &sc[i], json, &first);
  if (!rc && json) printf("\n]\n");
  free(sc);
  if (!rc && !json && names.count == 0) printf("no tuned problems in %s\n", path);
  free(names.names);
  db_close(db);
  return rc ? tn_fail("model", "%s", err.msg) : TN_EXIT_OK;
}

int tn_cmd_model(int argc, char **argv) {
  tn_opts o;
  int ex = tn_opts_parse(&MODEL_SPEC, argc, argv, &o);
  if (ex || o.help) goto done;
  if (o.npos < 1) {
    ex = tn_usage_error("model", "expected a subcommand: evaluate");
  } else if (strcmp(o.pos[0], "evaluate") != 0) {
    ex = tn_usage_error("model", "unknown subcommand '%s' (expected evaluate)", o.pos[0]);
  } else if (o.npos > 1) {
    ex = tn_usage_error("model", "unexpected argument '%s'", o.pos[1]);
  } else {
    ex = evaluate(&o);
  }
done:
  tn_opts_free(&o);
  return ex;
}
