/*
 * engine/tune_int.h -- what the two halves of `mmtune tune` share: engine/tune_loop.c (options, the search
 * loop, measuring, reports) and engine/plan.c (kernels, their compiles, and planning each problem's
 * candidates from the templates and the database).  Private to those two files.
 */
#ifndef MMT_TN_ENGINE_TUNE_INT_H
#define MMT_TN_ENGINE_TUNE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "db.h"
#include "engine/search.h"
#include "gen.h"
#include "gpu/pool.h"
#include "gpu/worker.h"
#include "rt_compile.h"

/* One distinct kernel: a template config for a dtype (its source does not depend on shape). */
typedef struct {
  int tmpl;
  char dtype[8];
  uint64_t index; /* the config's index in the template's space */
  char params[256];
  gen_kernel spec; /* launch description; its source is emitted again when submitted */
  db_launch launch; /* its launch shape (rt_launch_of), stored with its rows; 0s: unknown */
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

typedef struct {
  /* options */
  int device;
  tn_shape *shapes;
  int nshapes;
  int later_shapes; /* shapes of the main job's part still to come, counted in the ETA */
  gen_template **ts;
  int nts;
  const char *dtype;  /* NULL: all */
  const char *layout; /* one per run: every kernel of the run is emitted for it */
  tn_shard shard;     /* this process's problems: its block of the plan (tn_shard_owns_block) */
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
  double t0;          /* when the search of the first problem started */
  int problems_done;  /* problems whose search ended this run */
} tune_run;

/* The problem a kernel sees for shape s: packed rows of cudaMalloc'd buffers. */
gen_problem tn_tune_shape_problem(const tn_shape *s, const char *dtype, const char *layout);
/* Queues kernel kid's compile (once). */
mmt_status tn_tune_submit(tune_run *r, int kid, ut_err *err);
/* Waits until kernel kid's compile result is back (the pool returns in submission order). */
mmt_status tn_tune_await_compile(tune_run *r, int kid, ut_err *err);
/* The database's name for problem pb. */
db_problem tn_tune_problem_key(const tune_run *r, const tune_problem *pb);
/* The row that describes a measurement of kernel kid on shape sid (no outcome yet). */
void tn_tune_result_key(const tune_run *r, int sid, int kid, db_result *row);
/* The model strategy: every candidate of pb gets the performance model's predicted time,
 * from a fit on the database's rows of this GPU model (rows of the problem included). */
mmt_status tn_tune_predict(tune_run *r, tune_problem *pb, ut_err *err);
/* Plans every problem of the run (shapes x dtypes): candidates, and what is already known. */
mmt_status tn_tune_plan(tune_run *r, ut_err *err);

#endif /* MMT_TN_ENGINE_TUNE_INT_H */
