/*
 * engine/search.h -- search strategies: which candidate config the tuner measures next.
 * Prefix tn_.  Private to the tuner; knows nothing of GPUs, templates or the database, so it
 * is tested on synthetic cost functions (tests/test_search.c).
 *
 * The tuner enumerates the candidates of one problem (every config of every template that is
 * valid for one shape and dtype) and hands them to a search.  Each candidate is a point of
 * its template's space: a group (the template) and coordinates (for each parameter, the index
 * of its value in the parameter's value list).  Then, in a loop:
 *
 *   idx = tn_search_next(s)            -- a candidate never proposed before, or -1: none left
 *   ... compile, verify and time it ...
 *   tn_search_report(s, idx, cost)     -- median ms; INFINITY for any result that is not a
 *                                         verified timing (compile error, fault, ...)
 *
 * The caller may ask for several candidates before reporting any (the tuner proposes ahead so
 * that compiles run while the GPU measures); the strategies decide from what has been
 * reported so far.  A cost may also be reported for a candidate that was never proposed: a
 * result already known (the tuner resumes from its database); that candidate is then never
 * proposed and the strategies use its cost like any other.  No candidate is ever proposed
 * twice, and every strategy proposes every candidate eventually, so an unbounded search is
 * exhaustive.  The time budget is the caller's: stopping early makes any strategy a partial
 * search, and the order is what makes one strategy better than another.
 *
 * Strategies (--strategy):
 *   exhaustive  every candidate in the order given.  Its pruning is the tuner's: constraints
 *               remove invalid configs before the search, and a candidate whose first run is
 *               2x slower than the best so far is not timed further.
 *   random      a uniformly random order; under a time budget, random sampling.
 *   anneal      (the default) simulated annealing on the neighbour graph.  First the starting
 *               points (is_default), in order; then a walk from the best of them (or of the
 *               known results): propose a random unvisited neighbour of the current point; a
 *               better one becomes the current point, a worse one with probability
 *               exp(-(cost / current - 1) / T), T starting at TN_ANNEAL_T0 and cooling by
 *               TN_ANNEAL_COOLING per move.  When the current point has no unvisited
 *               neighbour left, the walk restarts, alternately from the best point that still
 *               has unvisited neighbours (intensify) and from a random unvisited candidate
 *               (explore: the walk goes on from wherever it lands).  While no result is finite
 *               it proposes random candidates.  Costs are compared relatively, so their unit
 *               does not matter.  On the synthetic spaces of tests/test_search.c (~900
 *               points): a bowl, optimum within 2% in 20% of the evaluations for every seed;
 *               a rugged one, 1.09x the optimum on average after 12% (random: 1.35x).
 *   model       (the default) model-guided: each candidate carries the performance model's
 *               predicted cost (tn_candidate.predicted; the tuner's rt_model).  It proposes
 *               the unseen candidate whose prediction, corrected by what was measured so far,
 *               is lowest: each report's log error log(cost / predicted) is passed on to
 *               every unseen candidate, weighted by similarity (TN_MODEL_SAME_GROUP within a
 *               group plus a part halved per parameter that differs, TN_MODEL_OTHER_GROUP
 *               across groups: a bias common to all is learned too; a failure counts as
 *               TN_MODEL_FAILED), averaged against TN_MODEL_PRIOR_WEIGHT of "no error".
 *               First, up to TN_MODEL_STARTS starting points (is_default: the tuner's
 *               template defaults and best configs of problems tuned before): the best
 *               predicted start of the group (template) with the fewest candidates proposed
 *               so far, the best predicted first among equals: templates take turns, so
 *               each is measured however the model ranks it.  Candidates without a prediction come last.  It stops (next() returns -1
 *               with candidates unseen: tn_search_converged) once TN_MODEL_MIN_MEASURED
 *               results are finite and no unseen candidate is predicted within
 *               TN_MODEL_MARGIN of the best: the model predicts no further gain, after a
 *               polish: unseen neighbours of the best, one at a time, until TN_MODEL_POLISH
 *               of them in a row find nothing better (a better one starts the count again).
 *               The model ranks configs by what rows of other shapes say; the polish is what
 *               the one-parameter steps of the best measured say.  This is the one strategy
 *               that may leave candidates unproposed without a budget.
 *
 * Neighbours, of a candidate c: for each parameter and each direction, the nearest candidate
 * of c's group that differs from c in that parameter only (a step skips values whose configs
 * are invalid, so constraints do not cut the graph); when there is none, a candidate one
 * value along that parameter and one value along another (coupled parameters: a tile size
 * and the thread count that must follow it), the first found in parameter order from the
 * next one.  At most 2 * ncoords, each listed once.
 *
 * Determinism: the same candidates, seed, and sequence of calls give the same proposals.
 * Thread-safety: a search is used by one thread at a time.
 */
#ifndef MMT_TN_ENGINE_SEARCH_H
#define MMT_TN_ENGINE_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

#define TN_SEARCH_MAX_COORDS 32 /* parameters of a candidate (gen: GEN_MAX_PARAMS) */
#define TN_ANNEAL_T0 0.05       /* initial temperature: a 5% worse move is taken with p = 1/e */
#define TN_ANNEAL_COOLING 0.9   /* temperature factor per reported move */
#define TN_MODEL_PRIOR_WEIGHT 1.0 /* model: weight of "the prediction is right" */
#define TN_MODEL_SAME_GROUP 0.25 /* model: similarity of any two candidates of a group */
#define TN_MODEL_OTHER_GROUP 0.1  /* model: similarity of candidates of different groups */
#define TN_MODEL_FAILED 1.4       /* model: log error a failed candidate counts as (4x) */
#define TN_MODEL_STARTS 8         /* model: starting points (is_default) proposed first */
#define TN_MODEL_MIN_MEASURED 16  /* model: finite results before it may stop */
#define TN_MODEL_MARGIN 0.10      /* model: stop when nothing is predicted within 10% of best */
#define TN_MODEL_POLISH 6         /* model: neighbours of the best without a gain, then stop */

typedef enum {
  TN_STRATEGY_EXHAUSTIVE,
  TN_STRATEGY_RANDOM,
  TN_STRATEGY_ANNEAL,
  TN_STRATEGY_MODEL,
  TN_STRATEGY_COUNT_
} tn_strategy;

#define TN_STRATEGY_DEFAULT TN_STRATEGY_MODEL
/* "exhaustive, random, anneal, model": the names, for messages and help. */
#define TN_STRATEGY_NAMES "exhaustive, random, anneal, model"

/* "exhaustive", "random", "anneal", "model"; "unknown" outside the enum.  Static string. */
const char *tn_strategy_name(tn_strategy s);
/* Inverse of tn_strategy_name (exact, case-sensitive); false for any other text (*out kept). */
bool tn_strategy_parse(const char *text, tn_strategy *out);

/* One candidate of a problem. */
typedef struct {
  int group;   /* >= 0; neighbours are only within a group (the tuner: one per template) */
  int ncoords; /* number of parameters, 0..TN_SEARCH_MAX_COORDS (the same within a group:
                * candidates with different counts are never neighbours) */
  uint8_t coord[TN_SEARCH_MAX_COORDS]; /* value index of each parameter; the rest ignored */
  bool is_default; /* a starting point (the tuner: a template's default config, its configs
                    * in the architecture's built-in list, and the best config of each shape
                    * tuned before) */
  double predicted; /* model: the predicted cost (same unit as reports); 0 or NaN: none */
} tn_candidate;

typedef struct tn_search tn_search;

/*
 * Creates a search over cands[0..count-1] (copied; indexes into this array are what next()
 * returns and report() takes).  count may be 0 (next() then returns -1).
 * seed: the random strategies' seed (exhaustive ignores it).
 * out:  OUT: the search, owned by the caller (tn_search_free); NULL on failure.
 * Errors: MMT_ERR_INVALID_ARG (unknown strategy, count < 0, NULL cands with count > 0, a
 * negative group, ncoords out of range, two candidates with the same group and coordinates;
 * the message names the candidate), MMT_ERR_NOMEM.
 */
mmt_status tn_search_new(tn_strategy strategy, const tn_candidate *cands, int count, uint64_t seed,
                         tn_search **out, ut_err *err);
/* tn_search_free(NULL) is a no-op. */
void tn_search_free(tn_search *s);

/* The next candidate to measure: an index never proposed nor reported before, or -1 when
 * every candidate has been proposed or reported. */
int tn_search_next(tn_search *s);

/* Reports candidate idx's cost: >= 0 (lower is better), or INFINITY (NaN is taken as
 * INFINITY) for a candidate without a verified timing.  idx may be one never proposed (a
 * known result, see above).  Errors: MMT_ERR_INVALID_ARG for idx out of range, a negative
 * cost, or a candidate already reported. */
mmt_status tn_search_report(tn_search *s, int idx, double cost, ut_err *err);

/* The reported candidate with the lowest finite cost (ties: the first reported), -1 when
 * none; its cost into *cost when not NULL. */
int tn_search_best(const tn_search *s, double *cost);
/* Candidates neither proposed nor reported yet. */
int tn_search_unseen(const tn_search *s);
/* Whether a model search stopped with candidates unseen: it predicts no further gain (valid
 * once next() returned -1). */
bool tn_search_converged(const tn_search *s);

/* The neighbours of candidate idx (see above) into out[0..max-1], in parameter order, the
 * lower direction first; returns how many there are (may exceed max: only max written), or
 * 0 for idx out of range. */
int tn_search_neighbours(const tn_search *s, int idx, int *out, int max);

#endif /* MMT_TN_ENGINE_SEARCH_H */
