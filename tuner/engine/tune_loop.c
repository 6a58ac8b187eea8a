/*
 * engine/tune_loop.c -- the main job: `mmtune [tune] --device N`.  Each shape and dtype is a problem;
 * its candidates are the valid configs of every template offering the dtype.  A search
 * (engine/search.h) picks the candidates to measure, one problem at a time: the compile pool
 * builds the proposed kernels ahead of the GPU, the worker process verifies and times them,
 * each result is stored with its provenance and reported back to the search, until the
 * search has proposed everything or the problem's time budget is spent.  Resumable: results
 * already in the database with the same provenance are not measured again; the search is
 * told their costs instead.  Planning (kernels and candidates) is in engine/plan.c.
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/opts.h"
#include "engine/multi.h"
#include "engine/tune_int.h"
#include "gpu/measure.h"
#include "rt_gemm.h"

_Static_assert(GEN_MAX_PARAMS <= TN_SEARCH_MAX_COORDS, "a config must fit a search candidate");
_Static_assert(GEN_MAX_VALUES <= 256, "search coordinates are uint8_t");

/* Per problem (shape and dtype), for the strategies that sample.  The model strategy mostly
 * stops earlier, when it predicts no further gain. */
#define DEFAULT_BUDGET_S 35
#define MODEL_BUDGET_S 5
#define MAX_LOOKAHEAD 64    /* proposals waiting for the GPU */

/* The default shape suite: the public benchmark shapes (shared/bench/shapes.txt) plus small
 * and ragged ones where launch overhead and tails dominate, and the matrix-vector end (M or
 * N = 1, the GEMVs of decoding), where the skinny family streams the weights: without rows
 * there, the model predicts GEMVs from the M = 16 rows, whose kernels behave otherwise.  Each
 * GEMV side is tuned at two sizes (a weight of 32 MiB in f32, under the L2, and one of 256
 * MiB, streamed from DRAM), so that a GEMV of another size has rows of its own kind on
 * either side of it: with one, the model had nothing but the 16-wide rows to go by for any
 * GEMV of the other size (leave-one-shape-out served 4096x1x4096 at 0.44 of its best).  The
 * Mx1xK ones are tuned in their canonical form (rt_gemm.h), 1xMxK nt: the dot body's rows,
 * as the 1xNxK ones in nn are the axpy body's.  And rows that are neither 16-byte aligned nor
 * odd: 300x300x6000, whose 600-byte rows in 16 bits take the 4-byte loads (mma_sync vec=2)
 * that 1000x999x1001's 2-byte alignment refuses, with few tiles and a long K; without rows of
 * such configs the model served untuned 8-byte-aligned problems element-wise realigned or
 * repacked kernels at 0.2-0.6x cuBLAS where tuning found 4-byte ones at 1.0-1.1x.  And two
 * mid-size ones of 4-byte-aligned rows, 1202^3 (100 tiles of 128 x 128) and 2002x3002x258 (a
 * short K): with 300x300x6000's few-tile rows alone, mid-size problems of such rows were
 * served wgmma with both operands repacked at 0.52-0.87x, where mma_sync's 4-byte loads ran
 * at cuBLAS's speed or better.  And a GEMV whose weight has odd rows, 1x8193x4095 (its twin in
 * nt, 1x4095x8193, is among the Linear layers below): without rows of skinny's element loads
 * the model served such calls wgmma repacking the whole weight, at 0.24-0.43x cuBLAS. */
static const tn_shape DEFAULT_SHAPES[] = {
    {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
    {3000, 3000, 3000}, {16, 4096, 4096},   {4096, 16, 4096},   {4096, 4096, 64},
    {8192, 8192, 128},  {512, 512, 16384},  {128, 128, 128},    {1000, 999, 1001},
    {1, 4096, 4096},    {4096, 1, 4096},    {1, 8192, 8192},    {8192, 1, 8192},
    {300, 300, 6000},   {1202, 1202, 1202}, {2002, 3002, 258},  {1, 8193, 4095},
};

/* The main job (no --shapes, no --layout) tunes DEFAULT_SHAPES in layout nn, then the decode
 * end of a Linear layer, x * W^T, in layout nt: the skinny kernels' bodies differ by layout (a
 * dot product along K against an axpy over N), and mma_sync's small blocks stream W in another
 * order, so their rows in nn say little about the layout applications call at batch 1 to 32.
 * Batch 16 on a weight of twice the L2 (112 MiB in 16 bits): what streaming W from DRAM costs
 * each kernel, which a 32 MiB weight (batch 1 here) partly hides in the L2.  And batch 8 on a
 * 5120-wide weight: 80 column tiles of 64, fewer than the SMs, where split-K (more blocks
 * streaming W) decides the speed of every narrow layer.  And a prefill-size batch, 384, on the
 * same weight: 120 tiles of 128 x 128, the mid-size nt problems where without nt rows of
 * their own the model had only the decode rows' small blocks to go by.  And batch 128
 * between them (batch 16 to 384 is a gap of 24x): 40 tiles of 128 x 128 on a weight above the
 * H100's L2, where the decode rows' 32-row blocks re-read W four times and a 128-row block
 * reads it once (without it an untuned 128x11008x4096 f16 was served 32-row blocks at 0.39x
 * cuBLAS on an H200).  And the ends of the decode range on wide weights, batch 4 on 12288
 * columns and batch 32 on a 128 MiB weight: with rows at batch 8 and 16 alone, the model
 * took the 64-row wgmma tiles' speed at batch 128 for theirs at batch 4 to 16 (0.74-0.81x
 * cuBLAS at 4-16x11008x4096) and had no row of skinny_mma's 32-row blocks.  And batch 1 on
 * a weight of odd rows (K = 8193): skinny's dot body with element loads.  And batches 4 and
 * 16 on a narrow weight with a long K (a down projection, 4096 x 14336: 112 MiB in 64 column
 * tiles of 64): skinny's and skinny_mma's blocks of fewer rows than the batch read W once per
 * block row, which their rows at batch 1 and 8 and at short K do not show; without rows here
 * the model served them at 4 and 16 x 4096 x 11008 (0.042 ms, 0.89x and 0.93x cuBLAS) where
 * wgmma's swap runs 0.037. */
static const tn_shape LINEAR_NT_SHAPES[] = {
    {1, 4096, 4096},   {16, 14336, 4096}, {8, 5120, 5120},  {128, 5120, 5120}, {384, 5120, 5120},
    {4, 12288, 4096},  {32, 8192, 8192},  {1, 4095, 8193},  {4, 4096, 14336}, {16, 4096, 14336}};

static const tn_opt TUNE_OPTS[] = {
    {"device", 'd', "N|all|I,J,...",
     "CUDA device ordinal (default 0); all or a list: one worker per GPU, the plan split among "
     "the GPUs of each model, results merged into --db"},
    {"shapes", 's', "FILE|MxNxK,...",
     "shapes to tune (default: the built-in suite in --layout; without --layout too, then "
     "1x4096x4096, 16x14336x4096, 8x5120x5120, 128x5120x5120, 384x5120x5120, 4x12288x4096, "
     "32x8192x8192, 1x4095x8193, 4x4096x14336 and 16x4096x14336 in nt: Linear layers)"},
    {"templates", 't', "A,B", "templates to tune (default: all on the search path)"},
    {"dtype", 0, "DTYPE", "element type (default: every dtype each template supports)"},
    {"layout", 'l', "LAYOUT", "nn (default), nt, tn or tt: how A and B are stored (t: transposed)"},
    {"strategy", 0, "NAME", "model (default), anneal, random or exhaustive: see above"},
    {"budget", 'b', "SECONDS",
     "search time per shape and dtype, counted across runs, or 'none' (default: model 5, "
     "anneal and random 35, exhaustive none)"},
    {"seed", 0, "N", "seed of anneal and random (default: from the clock, printed)"},
    {"db", 0, "PATH", "results database (default $MMTUNE_DB or ~/.cache/mmtune/mmtune.db)"},
    {"cache-dir", 0, "DIR", "cubin cache (default ~/.cache/mmtune/cubin)"},
    {"jobs", 'j', "N", "compile threads (default: CPU count)"},
    {"watchdog", 'w', "SECONDS", "a candidate with no result after this is killed (default 60)"},
    {"force", 'f', NULL, "measure again configs already in the database"},
    {"shard", 0, "I/N",
     "only part I of N of the plan (its problems, shapes x dtypes, cut into N blocks with each "
     "dtype's problems together): N processes (a Slurm array's tasks) cover it once; merge "
     "their databases with mmtune db merge"},
};

static const tn_cmd_spec TUNE_SPEC = {
    "tune", "[--device N] [--shapes FILE|MxNxK,...] [--templates A,B] [options]",
    "Tunes every shape: a search over the valid configs of every template picks configs,\n"
    "each is compiled, verified against a float64 reference on fresh random inputs, timed,\n"
    "and stored in the database.  Strategies (--strategy):\n"
    "  model       the performance model (fitted on the database) ranks every config; the\n"
    "              best predicted are measured first, each result correcting the predictions\n"
    "              of similar configs; stops when no config is predicted to beat the best\n"
    "  anneal      simulated annealing over neighbouring configs (one parameter one value\n"
    "              apart) with restarts, from each template's default config and the best\n"
    "              configs of the shapes tuned before\n"
    "  random      configs in random order: random sampling under a budget\n"
    "  exhaustive  every config in order (one slower than 2x the best is timed once)\n"
    "Any strategy but model measures every config when its budget allows.  A run that is\n"
    "interrupted\n"
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

/* ---- options ------------------------------------------------------------------------------ */

static int parse_search(tune_run *r, const tn_opts *o) {
  const char *v;
  int64_t x;
  ut_err err;
  r->strategy = TN_STRATEGY_DEFAULT;
  if ((v = tn_opts_get(o, "strategy")) && !tn_strategy_parse(v, &r->strategy))
    return tn_usage_error("tune", "--strategy must be one of %s, got '%s'", TN_STRATEGY_NAMES, v);
  r->budget_s = r->strategy == TN_STRATEGY_EXHAUSTIVE ? 0
                : r->strategy == TN_STRATEGY_MODEL    ? MODEL_BUDGET_S
                                                      : DEFAULT_BUDGET_S;
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
  /* several GPUs (all, or a list) are engine/multi.c's; it checks the list against the devices */
  if ((v = tn_opts_get(o, "device")) && !tn_multi_wanted(v) &&
      tn_opt_device("tune", v, &r->device))
    return TN_EXIT_USAGE;
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
  if ((ex = tn_opt_shard("tune", tn_opts_get(o, "shard"), &r->shard))) return ex;
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

/* ---- measuring ---------------------------------------------------------------------------- */

/* Seconds left, from the problems done so far (before any: each problem's budget). */
static double eta_seconds(const tune_run *r) {
  int left = r->nproblems - r->problems_done;
  if (r->nshapes > 0) left += r->later_shapes * r->nproblems / r->nshapes; /* same dtypes */
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
  gen_problem p = tn_tune_shape_problem(&(tn_shape){row->problem.m, row->problem.n, row->problem.k},
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
static void report_problem(const tune_run *r, const tune_problem *pb, double seconds,
                           double earlier_s, bool budget_spent, bool converged, double best_ms) {
  const tn_shape *sh = &r->shapes[pb->shape];
  printf("%s[%d/%d] %lldx%lldx%lld %s: %s measured %d of %d candidates in %.1f s%s",
         r->tty ? "\r\033[K" : "", r->problems_done, r->nproblems, (long long)sh->m,
         (long long)sh->n, (long long)sh->k, pb->dtype, tn_strategy_name(r->strategy),
         pb->measured, pb->count - pb->nknown, seconds,
         budget_spent ? " (budget spent)"
         : converged  ? " (the model predicts no further gain)"
                      : "");
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
  db_problem key = tn_tune_problem_key(r, pb);
  double earlier = 0;
  mark_starts(r, pb);
  mmt_status rc = r->force ? MMT_OK
                           : db_search_seconds(r->db, r->dev.name, &key, pb->candidates, &earlier,
                                               err);
  if (!rc && r->strategy == TN_STRATEGY_MODEL) rc = tn_tune_predict(r, pb, err);
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
  bool converged = !rc && !spent && !g_interrupted && s && tn_search_converged(s);
  /* A search that converged counts as its whole budget: running again searches no further. */
  double recorded = converged && r->budget_s - earlier > seconds ? r->budget_s - earlier : seconds;
  r->problems_done++;
  if (!rc) rc = db_search_add(r->db, r->dev.name, &key, pb->candidates, recorded, r->force, err);
  if (!rc && !g_interrupted) {
    r->untried += pb->count - pb->nknown - pb->measured;
    report_problem(r, pb, seconds, earlier, spent, converged, best_ms);
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
  fflush(stdout);
}

/* One plan: set up, plan, measure, summarize; the exit code. */
static int tune_pass(tune_run *r) {
  ut_err err = {{0}};
  r->tty = isatty(STDOUT_FILENO);
  double t0 = ut_now_seconds();
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

/* Tunes shapes (packed, in layout) from r, parsed from o: a pass for each layout of their
 * canonical forms (rt_gemm_canonical_packed), the problems mmt_gemm serves them as, so that
 * the rows land where calls look (a GEMV Mx1xK is tuned as 1xMxK); one pass when nothing
 * changes.  later: shapes of passes after these, for the ETA.  The exit code. */
static int tune_canonical(tune_run *r, const tn_opts *o, const tn_shape *shapes, int n,
                          const char *layout, int later) {
  tn_shape *forms = malloc((size_t)(n > 0 ? n : 1) * sizeof *forms);
  int *form_layout = malloc((size_t)(n > 0 ? n : 1) * sizeof *form_layout);
  int ex = forms && form_layout ? TN_EXIT_OK : TN_EXIT_FAIL;
  for (int i = 0; !ex && i < n; i++) {
    rt_gemm_kernel_problem kp;
    rt_gemm_canonical_packed(layout, shapes[i].m, shapes[i].n, shapes[i].k, &kp);
    forms[i] = (tn_shape){kp.m, kp.n, kp.k};
    form_layout[i] = gen_layout_index(kp.layout);
    if (strcmp(kp.layout, layout) != 0 || kp.m != shapes[i].m)
      printf("mmtune: %lldx%lldx%lld %s is tuned as %lldx%lldx%lld %s, the form mmt_gemm "
             "serves it in (%s)\n",
             (long long)shapes[i].m, (long long)shapes[i].n, (long long)shapes[i].k, layout,
             (long long)kp.m, (long long)kp.n, (long long)kp.k, kp.layout,
             kp.transposed ? "C^T = op(B)^T op(A)^T" : "a unit-stride column as a row");
  }
  int first = gen_layout_index(layout), left = n;
  for (int pass = 0; !ex && pass < 4; pass++) {
    int li = pass == 0 ? first : pass <= first ? pass - 1 : pass; /* layout's own pass first */
    tn_shape *group = malloc((size_t)(n > 0 ? n : 1) * sizeof *group);
    int count = 0;
    for (int i = 0; group && i < n; i++) {
      bool seen = form_layout[i] != li;
      for (int j = 0; !seen && j < count; j++) seen = !memcmp(&group[j], &forms[i], sizeof *group);
      if (!seen) group[count++] = forms[i];
    }
    for (int i = 0; i < n; i++) left -= form_layout[i] == li;
    if (!group || count == 0) {
      free(group);
      ex = group ? TN_EXIT_OK : TN_EXIT_FAIL;
      continue;
    }
    if (r->db) { /* a pass ran in r (its setup opens the database first): parse again */
      tune_free(r);
      memset(r, 0, sizeof *r);
      if ((ex = parse_options(r, o))) {
        free(group);
        break;
      }
    }
    free(r->shapes);
    r->shapes = group;
    r->nshapes = count;
    r->layout = gen_layout_name(li);
    r->later_shapes = left + later;
    ex = tune_pass(r);
  }
  free(forms);
  free(form_layout);
  return ex;
}

int tn_cmd_tune(int argc, char **argv) {
  tn_opts o;
  tune_run r;
  memset(&r, 0, sizeof r);
  int ex = tn_opts_parse(&TUNE_SPEC, argc, argv, &o);
  if (ex || o.help) goto done;
  if ((ex = parse_options(&r, &o))) goto done;
  const char *devices = tn_opts_get(&o, "device");
  if (tn_multi_wanted(devices)) {
    ex = tn_tune_multi(argc, argv, devices, r.shard, r.db_path);
    goto done;
  }
  struct sigaction sa = {.sa_handler = on_sigint}, old_sa;
  sigaction(SIGINT, &sa, &old_sa);
  const bool main_job = !tn_opts_has(&o, "shapes") && !tn_opts_has(&o, "layout");
  const int nlinear = (int)(sizeof LINEAR_NT_SHAPES / sizeof LINEAR_NT_SHAPES[0]);
  /* r's own shapes go with its first pass */
  tn_shape *shapes = malloc((size_t)(r.nshapes > 0 ? r.nshapes : 1) * sizeof *shapes);
  if (!shapes) ex = TN_EXIT_FAIL;
  else memcpy(shapes, r.shapes, (size_t)r.nshapes * sizeof *shapes);
  if (!ex) ex = tune_canonical(&r, &o, shapes, r.nshapes, r.layout, main_job ? nlinear : 0);
  free(shapes);
  if (!ex && main_job) {
    printf("\nmain job, second part: the decode end of a Linear layer (x * W^T), layout nt\n");
    ex = tune_canonical(&r, &o, LINEAR_NT_SHAPES, nlinear, "nt", 0);
  }
  sigaction(SIGINT, &old_sa, NULL);
done:
  tune_free(&r);
  tn_opts_free(&o);
  return ex;
}
