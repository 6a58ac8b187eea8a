/*
 * engine/tune_loop.h -- the tune loop: one pass of `mmtune tune`.  Prefix tn_.
 *
 * Each shape and dtype is a problem; its candidates are the valid configs of every template
 * offering the dtype (engine/plan.c), and with an epilogue the op kernels of the templates
 * that have epilogues, stored as rows of that op and batch.  A search (engine/search.h) picks the candidates to
 * measure, one problem at a time: the compile pool (gpu/pool.h) builds the proposed kernels
 * ahead of the GPU, the worker process (gpu/worker.h) verifies and times them, each result is
 * stored with its provenance and reported back to the search, until the search has proposed
 * everything or the problem's time budget is spent.  Resumable: results already in the
 * database with the same provenance are not measured again; the search is told their costs
 * instead.
 *
 * The command (cli/tune.c) fills a tune_run's options and runs one pass per layout; a pass
 * prints its plan, a progress line per candidate and a summary on stdout.
 */
#ifndef MMT_TN_ENGINE_TUNE_LOOP_H
#define MMT_TN_ENGINE_TUNE_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/args.h"
#include "db.h"
#include "engine/search.h"
#include "gen.h"
#include "gpu/pool.h"
#include "gpu/worker.h"
#include "rt_choose.h"

#define TN_MIN_SHARE_S 1.0

typedef struct tune_kernel tune_kernel;   /* engine/tune_int.h */
typedef struct tune_problem tune_problem; /* engine/tune_int.h */
typedef struct tune_space tune_space;     /* engine/tune_int.h */

typedef struct {
  /* options: the command fills these (cli/tune.c) */
  int device;
  tn_shape *shapes;
  int nshapes;
  int later_shapes;   /* shapes of the main job's part still to come, counted in the ETA */
  int later_problems; /* and problems of one dtype each (the main job's op problems) */
  gen_template **ts;
  int nts;
  const char *dtype;    /* NULL: all */
  const char *layout;   /* one per run: every kernel of the run is emitted for it */
  const char *epilogue; /* NULL: the plain GEMM; else every problem is an op kernel's, this op
                           (gen_op_parse's text; out= absent: each dtype's own), of `batch`
                           problems (gen.h, "Epilogues"); one per run, as the layout */
  int64_t batch;        /* with epilogue: 1 or more */
  tn_shard shard;       /* this process's problems: its block of the plan (tn_shard_owns_block) */
  char db_path[4096], cache_dir[4096];
  int jobs;
  double budget_s, watchdog_s; /* budget 0: none */
  /* --limit: ut_now_seconds() by which the whole run should end (0: none).  Each problem's
   * budget is then at most its share of the time left, the problems still to come sharing it
   * evenly (at least TN_MIN_SHARE_S each, so that every problem measures something). */
  double deadline;
  tn_strategy strategy;
  uint64_t seed;
  bool force;
  /* state: the pass's own (tn_tune_pass sets it up, tn_tune_free frees it) */
  db_handle *db;
  tn_worker *worker;
  tn_pool *pool;
  rt_chooser *chooser; /* the model the model strategy ranks by (tn_tune_predict); NULL first */
  db_device dev;
  char arch[16], nvrtc[16];
  tune_kernel *kernels;
  int nkernels, kernel_cap;
  int *kernel_map; /* open addressing over (tmpl, dtype, index) -> kernel; -1 empty */
  size_t kernel_map_cap;
  tune_problem *problems;
  int nproblems, problem_cap;
  tune_space *spaces; /* each (template, dtype) planned: its configs valid for any problem */
  int nspaces, space_cap;
  int ntodo, skipped;   /* candidates not in the database / already there */
  int done, untried;    /* measured / left untried by the budget */
  int compiled, cached; /* compile results collected; of those, served by the cubin cache */
  int lookahead;        /* proposals allowed ahead of the GPU */
  int *starts;          /* the best kernel of each problem tuned so far: anneal starts there */
  int nstarts, start_cap;
  bool tty;
  double t0;         /* when the search of the first problem started */
  int problems_done; /* problems whose search ended this run */
} tune_run;

/* The budget of r's next problem (problems_done of this pass done) at time now
 * (ut_now_seconds): --budget (0: none), or under --limit at most an even share of the time
 * left among the problems left, this pass's and the later ones' (later_shapes, with this
 * pass's dtypes each, and later_problems), and at least TN_MIN_SHARE_S. */
double tn_tune_problem_budget(const tune_run *r, double now);

/* One pass over r's options: opens the database, starts the worker and the compile pool, plans
 * every problem (shapes x dtypes, r->shard's block of them), runs each problem's search and
 * prints the best config of each.  Returns the exit code: 0, 1 (the run failed: one line
 * "mmtune tune: ..." on stderr), 130 (interrupted by tn_tune_on_sigint: what was measured is
 * stored, the same command resumes).  r is left for tn_tune_free. */
int tn_tune_pass(tune_run *r);
/* Frees what r holds, its options' shapes and templates included; r may be all zeros. */
void tn_tune_free(tune_run *r);
/* A SIGINT handler: the running pass stops after the candidate being measured (tn_tune_pass
 * then returns 130). */
void tn_tune_on_sigint(int sig);

#endif /* MMT_TN_ENGINE_TUNE_LOOP_H */
