/*
 * engine/tune_int.h -- what the two halves of a tune pass share: engine/tune_loop.c (the search
 * loop, measuring, progress and summary) and engine/plan.c (kernels, their compiles, and
 * planning each problem's candidates from the templates and the database).  Private to those
 * two files; the pass's contract with the command is engine/tune_loop.h.
 */
#ifndef MMT_TN_ENGINE_TUNE_INT_H
#define MMT_TN_ENGINE_TUNE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "engine/search.h"
#include "engine/tune_loop.h"
#include "gen.h"
#include "rt_compile.h"

/* One distinct kernel: a template config for a dtype (its source does not depend on shape). */
struct tune_kernel {
  int tmpl;
  char dtype[8];
  uint64_t index; /* the config's index in the template's space */
  char params[MMT_PARAMS_MAX];
  gen_kernel spec;      /* launch description; its source is emitted again when submitted */
  db_launch launch;     /* its launch shape (rt_launch_of), stored with its rows; 0s: unknown */
  char kernel_hash[17]; /* rt_kernel_hash: what its rows say they measured */
  bool emitted;         /* spec, launch and kernel_hash are filled (the plan emits in batches) */
  bool submitted, compiled;
  mmt_status compile_rc;
  char compile_error[512];
  rt_cubin cubin;
};

/* One problem: a shape and a dtype, and its candidates (search order = these arrays). */
struct tune_problem {
  int shape;
  char dtype[8];
  tn_candidate *cands;
  int *kernel;   /* per candidate: its kernel */
  double *known; /* per candidate: cost stored in the database; NAN: not measured yet */
  int count, cap, nknown;
  int measured;         /* this run */
  char candidates[128]; /* what its search time is counted against (db_search_seconds) */
};

/* The configs of a template valid for some problem of a dtype in the run's layout and op: its
 * constraints with no problem (a problem's only add to them), checked once a pass. */
struct tune_space {
  int tmpl;
  char dtype[8];
  uint64_t *index; /* the valid configs' indices in the template's space, in order */
  int count;
};

/* The run's op for inputs of dtype into *op (false: the run is of plain GEMMs). */
bool tn_tune_op(const tune_run *r, const char *dtype, gen_op *op);
/* The problem a kernel sees for shape s: packed rows of cudaMalloc'd buffers (an op's: D of
 * the op's columns, a batch's problems packed one after another; its alignment is what A's
 * and B's pitches and batch strides allow, its epilogue storing D at any).  op: where the
 * problem's op is kept (p.op points to it; NULL for a plain run). */
gen_problem tn_tune_shape_problem(const tune_run *r, const tn_shape *s, const char *dtype,
                                  gen_op *op);
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
