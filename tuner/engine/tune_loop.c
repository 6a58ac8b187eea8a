/*
 * engine/tune_loop.c -- see engine/tune_loop.h: one pass of `mmtune tune`, from the setup (the
 * database, the worker, the compile pool) through each problem's search to the summary.
 * Planning (kernels and candidates) is in engine/plan.c.
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "engine/tune_int.h"
#include "rt_matmul.h"

_Static_assert(GEN_MAX_PARAMS <= TN_SEARCH_MAX_COORDS, "a config must fit a search candidate");
_Static_assert(GEN_MAX_VALUES <= 256, "search coordinates are uint8_t");

#define MAX_LOOKAHEAD 64 /* proposals waiting for the GPU */

static volatile sig_atomic_t g_interrupted;
void tn_tune_on_sigint(int sig) {
  (void)sig;
  g_interrupted = 1;
}

/* ---- measuring ---------------------------------------------------------------------------- */

/* Problems of the run not done yet: this pass's, and the later passes' (their shapes with as
 * many dtypes each as this pass's, and their problems of one dtype). */
static int problems_left(const tune_run *r) {
  int left = r->nproblems - r->problems_done + r->later_problems;
  if (r->nshapes > 0) left += r->later_shapes * r->nproblems / r->nshapes; /* same dtypes */
  return left;
}

double tn_tune_problem_budget(const tune_run *r, double now) {
  if (r->deadline <= 0) return r->budget_s;
  const int left = problems_left(r);
  double share = (r->deadline - now) / (left > 0 ? left : 1);
  if (!(share >= TN_MIN_SHARE_S)) share = TN_MIN_SHARE_S;
  return r->budget_s > 0 && r->budget_s < share ? r->budget_s : share;
}

/* Seconds left, from the problems done so far (before any: each problem's budget). */
static double eta_seconds(const tune_run *r) {
  const int left = problems_left(r);
  double spent = ut_now_seconds() - r->t0;
  if (r->problems_done > 0) return spent / r->problems_done * left;
  return r->budget_s > 0 ? r->budget_s * left : NAN;
}

static void format_eta(const tune_run *r, char *out, size_t len) {
  double s = eta_seconds(r);
  if (isnan(s))
    snprintf(out, len, "ETA ?");
  else if (s >= 60)
    snprintf(out, len, "ETA %dm%02ds", (int)(s / 60), (int)s % 60);
  else
    snprintf(out, len, "ETA %ds", (int)s);
}

/* One line per finished candidate: a redrawn bar on a terminal, a log line otherwise; both
 * count problems (shape and dtype) done and the time left. */
static void report_progress(const tune_run *r, const db_result *row, double best_ms) {
  const db_problem *p = &row->problem;
  int done = r->problems_done, total = r->nproblems;
  char eta[32];
  format_eta(r, eta, sizeof eta);
  if (r->tty) {
    int width = 30, fill = total ? (int)((long long)done * width / total) : width;
    printf("\r\033[K[%.*s%.*s] %d/%d problems, %s  %lldx%lldx%lld %s  %s  best %.3f ms", fill,
           "##############################", width - fill, "..............................", done,
           total, eta, (long long)p->m, (long long)p->n, (long long)p->k, p->dtype,
           row->template_name, best_ms);
  } else if (row->status == DB_OK) {
    printf("[%d/%d problems, %s] %lldx%lldx%lld %s %s %s: %.4f ms, %.2f TFLOP/s, rel err %.1e\n",
           done, total, eta, (long long)p->m, (long long)p->n, (long long)p->k, p->dtype,
           row->template_name, row->params, row->ms_median, row->tflops, row->rel_err);
  } else {
    printf("[%d/%d problems, %s] %lldx%lldx%lld %s %s %s: %s: %s\n", done, total, eta,
           (long long)p->m, (long long)p->n, (long long)p->k, p->dtype, row->template_name,
           row->params, db_status_name(row->status), row->error);
  }
  fflush(stdout);
}

/* The best stored row of problem i into *best; false when it has no verified config. */
static bool problem_best(const tune_run *r, int i, db_result *best) {
  db_problem p = tn_tune_problem_key(r, &r->problems[i]);
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
  tn_tune_result_key(r, sid, kid, row);
  mmt_status rc = tn_tune_await_compile(r, kid, err);
  if (rc) return rc;
  tune_kernel *k = &r->kernels[kid];
  if (k->compile_rc != MMT_OK) {
    row->status = DB_COMPILE_ERROR;
    snprintf(row->error, sizeof row->error, "%s", k->compile_error);
    return MMT_OK;
  }
  gen_op op;
  gen_problem p = tn_tune_shape_problem(
      r, &(tn_shape){row->problem.m, row->problem.n, row->problem.k}, k->dtype, &op);
  tn_measure_opts o = {.m = p.m,
                       .n = p.n,
                       .k = p.k,
                       .lda = p.lda,
                       .ldb = p.ldb,
                       .ldc = p.ldc,
                       .cutoff_ms = cutoff_ms};
  snprintf(o.dtype, sizeof o.dtype, "%s", k->dtype);
  snprintf(o.layout, sizeof o.layout, "%s", r->layout);
  if (p.op) {
    gen_op_format(p.op, o.op, sizeof o.op, NULL);
    o.batch = p.batch;
  }
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
    mmt_status rc = tn_tune_submit(r, pb->kernel[c], err);
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
  /* A config 2x slower than the best so far gets only its first runs: it cannot win. */
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

/* Marks as starting points the candidates of pb that are the best of a problem tuned before
 * (plan_template has marked each template's default and built-in configs) (a good config for one shape is a good start for the
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
  int *st = ut_grow(r->starts, &r->start_cap, r->nstarts + 1, sizeof *st);
  if (!st) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  r->starts = st;
  r->starts[r->nstarts++] = kid;
  return MMT_OK;
}

/* One line when a problem is done: how much of it was measured, and its best. */
static void report_problem(const tune_run *r, const tune_problem *pb, double budget_s,
                           double seconds, double earlier_s, bool budget_spent, bool converged,
                           double best_ms) {
  const tn_shape *sh = &r->shapes[pb->shape];
  printf("%s[%d/%d] %lldx%lldx%lld %s: %s measured %d of %d candidates in %.1f s%s",
         r->tty ? "\r\033[K" : "", r->problems_done, r->nproblems, (long long)sh->m,
         (long long)sh->n, (long long)sh->k, pb->dtype, tn_strategy_name(r->strategy), pb->measured,
         pb->count - pb->nknown, seconds,
         budget_spent ? " (budget spent)"
         : converged  ? " (the model predicts no further gain)"
                      : "");
  if (budget_spent && budget_s < r->budget_s) printf(" (its share of --limit, %.1f s)", budget_s);
  if (earlier_s > 0 && budget_s > 0)
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
  const double budget = tn_tune_problem_budget(r, ut_now_seconds());
  uint64_t seed = r->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(pi + 1));
  db_problem key = tn_tune_problem_key(r, pb);
  double earlier = 0;
  mark_starts(r, pb);
  mmt_status rc = r->force
                      ? MMT_OK
                      : db_search_seconds(r->db, r->dev.name, &key, pb->candidates, &earlier, err);
  if (!rc && r->strategy == TN_STRATEGY_MODEL) rc = tn_tune_predict(r, pb, err);
  if (!rc) rc = tn_search_new(r->strategy, pb->cands, pb->count, seed, &s, err);
  for (int i = 0; i < pb->count && !rc; i++)
    if (!isnan(pb->known[i])) rc = tn_search_report(s, i, pb->known[i], err);
  double start = ut_now_seconds(), best_ms = 0;
  if (!rc && tn_search_best(s, &best_ms) < 0) best_ms = 0;
  bool spent = false;
  while (!rc && !g_interrupted) {
    if ((spent = budget > 0 && earlier + ut_now_seconds() - start >= budget)) break;
    if ((rc = fill_queue(r, s, pb, &q, err)) || q.count == 0) break;
    rc = measure_candidate(r, s, pb, take_ready(r, pb, &q), &best_ms, err);
  }
  double seconds = ut_now_seconds() - start;
  bool converged = !rc && !spent && !g_interrupted && s && tn_search_converged(s);
  /* A search that converged counts as its whole budget: running again searches no further. */
  double recorded = converged && budget - earlier > seconds ? budget - earlier : seconds;
  r->problems_done++;
  if (!rc) rc = db_search_add(r->db, r->dev.name, &key, pb->candidates, recorded, r->force, err);
  if (!rc && !g_interrupted) {
    r->untried += pb->count - pb->nknown - pb->measured;
    report_problem(r, pb, budget, seconds, earlier, spent, converged, best_ms);
  }
  int best = s ? tn_search_best(s, NULL) : -1;
  if (!rc && best >= 0) rc = add_start(r, pb->kernel[best], err);
  tn_search_free(s);
  return rc;
}

static mmt_status run_problems(tune_run *r, ut_err *err) {
  r->t0 = ut_now_seconds();
  for (int i = 0; i < r->nproblems && !g_interrupted; i++) {
    mmt_status rc = run_problem(r, i, err);
    if (rc) return rc;
  }
  if (r->tty && g_interrupted) printf("\n"); /* end the bar */
  return MMT_OK;
}

/* ---- the pass ------------------------------------------------------------------------------ */

void tn_tune_free(tune_run *r) {
  rt_chooser_free(r->chooser);
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
  for (int i = 0; i < r->nspaces; i++) free(r->spaces[i].index);
  free(r->spaces);
  tn_templates_free(r->ts, r->nts);
  free(r->shapes);
}

/* The templates check their configs against the device's limits (mmt.device): its
 * architecture's, with its own SM count (the device itself is the worker's). */
static mmt_status tune_device(tune_run *r, ut_err *err) {
  gen_device dev;
  mmt_status rc = gen_device_defaults(r->arch, &dev, err);
  if (!rc && r->dev.sm_count > 0) dev.sm_count = r->dev.sm_count;
  for (int i = 0; i < r->nts && !rc; i++) rc = gen_set_device(r->ts[i], &dev, err);
  return rc;
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
  if ((rc = tune_device(r, err))) return rc;
  const char *note = tn_worker_guard_note(r->worker);
  if (note) fprintf(stderr, "mmtune: %s\n", note); /* once: every worker has the same */
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
  if (r->deadline > 0)
    printf("--limit: %.0f s left for %d problems\n", r->deadline - ut_now_seconds(),
           problems_left(r));
  fflush(stdout);
}

/* A grouped op's shapes at the rows their calls are keyed by (mmt_matmul's key:
 * rt_group_rows_bucket of the experts' rows in all, contiguous; of their mean, masked), so
 * that the rows land where calls of that routing regime look; said once when any moves. */
static void bucket_grouped_shapes(tune_run *r) {
  gen_op op;
  ut_err e;
  if (!r->epilogue || gen_op_parse(r->epilogue, r->dtype ? r->dtype : "f16", &op, &e) || !op.group)
    return;
  bool moved = false;
  for (int i = 0; i < r->nshapes; i++) {
    const int64_t m = rt_group_rows_bucket(r->shapes[i].m);
    moved = moved || m != r->shapes[i].m;
    r->shapes[i].m = m;
  }
  if (moved)
    printf("grouped: each shape's M (%s) rounded up to its routing regime's bucket (1, 2, 3, "
           "4, 6, 8, 12, ...), where calls look\n",
           op.group == 'm' ? "an expert's rows on average" : "the experts' rows in all");
}

int tn_tune_pass(tune_run *r) {
  ut_err err = {{0}};
  r->tty = isatty(STDOUT_FILENO);
  double t0 = ut_now_seconds();
  bucket_grouped_shapes(r);
  mmt_status rc = tune_setup(r, &err);
  if (!rc) rc = tn_tune_plan(r, &err);
  if (!rc) {
    print_plan(r);
    rc = run_problems(r, &err);
  }
  if (rc) {
    fprintf(stderr, "mmtune tune: %s\n", err.msg);
    return TN_EXIT_FAIL;
  }
  return report_summary(r, ut_now_seconds() - t0);
}
