/*
 * test_search.c -- tuner/engine/search: the search strategies on synthetic spaces (no GPU), and
 * the tune command's --strategy/--seed/--budget/--limit parsing through the built binary, and
 * a problem's budget under --limit (engine/tune_loop.h).
 *
 * The synthetic space: 4 parameters with 6, 5, 8 and 4 values (960 points), about 10% of
 * them removed as invalid, about 3% failing (cost INFINITY); the cost is a smooth bowl
 * around a known optimum with 0.5% noise, or a rugged variant (random bumps and a second,
 * shallower basin).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/search.h"
#include "engine/tune_int.h"
#include "engine/tune_loop.h"
#include "rt_compile.h"

#define NP 4
static const int NV[NP] = {6, 5, 8, 4};
static const int OPT[NP] = {2, 3, 5, 1};
static const double WEIGHT[NP] = {0.3, 0.15, 0.08, 0.5};

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static double unit(uint64_t x) { return (double)(mix(x) >> 11) * 0x1p-53; }

static uint64_t point_key(const tn_candidate *c) {
  uint64_t k = (uint64_t)c->group;
  for (int p = 0; p < c->ncoords; p++) k = k * 16 + c->coord[p];
  return k;
}

typedef struct {
  tn_candidate cands[1024];
  double truth[1024]; /* noise-free cost; INFINITY for a failing candidate */
  int count, opt;     /* opt: the cheapest candidate */
  bool rugged;
} space;

static double true_cost(const tn_candidate *c, bool rugged) {
  uint64_t k = point_key(c);
  if (unit(k * 5 + 1) < 0.03) return INFINITY;
  double bowl = 1, second = 1.3;
  for (int p = 0; p < NP; p++) {
    double d = c->coord[p] - OPT[p], e = c->coord[p] - (NV[p] - 1 - OPT[p]);
    bowl += WEIGHT[p] * d * d;
    second += WEIGHT[p] * e * e;
  }
  if (!rugged) return bowl;
  return fmin(bowl, second) * (1 + 0.25 * unit(k * 5 + 2));
}

/* Builds the space; the optimum and the default (coords 0,0,0,0 region) are always valid. */
static void make_space(space *s, bool rugged) {
  memset(s, 0, sizeof *s);
  s->rugged = rugged;
  s->opt = -1;
  for (int i = 0; i < NV[0] * NV[1] * NV[2] * NV[3]; i++) {
    tn_candidate c = {.group = 0, .ncoords = NP};
    for (int p = NP - 1, x = i; p >= 0; x /= NV[p], p--) c.coord[p] = (uint8_t)(x % NV[p]);
    bool is_opt = true;
    for (int p = 0; p < NP; p++) is_opt &= c.coord[p] == OPT[p];
    if (i > 0 && !is_opt && unit(point_key(&c) * 5 + 3) < 0.10) continue; /* invalid */
    c.is_default = i == 0;
    s->truth[s->count] = is_opt ? 1 : true_cost(&c, rugged);
    s->cands[s->count] = c;
    if (s->opt < 0 || s->truth[s->count] < s->truth[s->opt]) s->opt = s->count;
    s->count++;
  }
}

/* The measured cost: the truth with 0.5% noise that differs per evaluation. */
static double measured(const space *sp, int idx, uint64_t salt) {
  return sp->truth[idx] * (1 + 0.005 * (unit(point_key(&sp->cands[idx]) ^ (salt << 20)) - 0.5));
}

typedef struct {
  int order[1024];
  int n;
  int best;
} run_log;

/* Runs a search for at most `evals` evaluations (-1: to the end), asking `ahead` proposals
 * before reporting the oldest (the tuner's lookahead). */
static void run_search(const space *sp, tn_strategy st, uint64_t seed, int evals, int ahead,
                       run_log *log) {
  tn_search *s = NULL;
  ut_err err;
  assert_int_equal(tn_search_new(st, sp->cands, sp->count, seed, &s, &err), MMT_OK);
  bool seen[1024] = {false};
  int queue[64], nq = 0;
  log->n = 0;
  /* evals -2: until the search stops by itself (the model strategy) */
  while (evals < 0 || log->n < evals) {
    while (nq < ahead + 1) {
      int i = tn_search_next(s);
      if (i < 0) break;
      assert_true(i >= 0 && i < sp->count);
      assert_false(seen[i]); /* never proposed twice */
      seen[i] = true;
      queue[nq++] = i;
    }
    if (nq == 0) break;
    int i = queue[0];
    memmove(queue, queue + 1, (size_t)--nq * sizeof queue[0]);
    log->order[log->n++] = i;
    assert_int_equal(tn_search_report(s, i, measured(sp, i, (uint64_t)log->n), &err), MMT_OK);
  }
  log->best = tn_search_best(s, NULL);
  if (evals == -2) assert_true(tn_search_converged(s));
  if (evals == -1) {
    assert_int_equal(tn_search_next(s), -1);
    assert_int_equal(tn_search_unseen(s), 0);
  }
  tn_search_free(s);
}

static void test_strategy_names(void **state) {
  (void)state;
  tn_strategy st = TN_STRATEGY_RANDOM;
  for (int i = 0; i < TN_STRATEGY_COUNT_; i++) {
    assert_true(tn_strategy_parse(tn_strategy_name((tn_strategy)i), &st));
    assert_int_equal(st, i);
    assert_non_null(strstr(TN_STRATEGY_NAMES, tn_strategy_name((tn_strategy)i)));
  }
  st = TN_STRATEGY_RANDOM;
  assert_false(tn_strategy_parse("Anneal", &st));
  assert_false(tn_strategy_parse("", &st));
  assert_false(tn_strategy_parse(NULL, &st));
  assert_int_equal(st, TN_STRATEGY_RANDOM);
  assert_string_equal(tn_strategy_name(TN_STRATEGY_COUNT_), "unknown");
  assert_int_equal(TN_STRATEGY_DEFAULT, TN_STRATEGY_MODEL);
}

static void test_bad_arguments(void **state) {
  (void)state;
  tn_search *s = (tn_search *)&s;
  ut_err err;
  tn_candidate c[2] = {{.group = 0, .ncoords = 2, .coord = {1, 2}},
                       {.group = 0, .ncoords = 2, .coord = {1, 2}}};
  assert_int_equal(tn_search_new(TN_STRATEGY_ANNEAL, c, 2, 1, &s, &err), MMT_ERR_INVALID_ARG);
  assert_null(s);
  assert_string_equal(err.msg, "search candidates 0 and 1 are the same point of group 0");
  c[1].group = 1; /* the same coordinates in another group: fine */
  assert_int_equal(tn_search_new(TN_STRATEGY_ANNEAL, c, 2, 1, &s, &err), MMT_OK);
  assert_int_equal(tn_search_report(s, 2, 1.0, &err), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_search_report(s, -1, 1.0, &err), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_search_report(s, 0, -1.0, &err), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_search_report(s, 0, 1.0, &err), MMT_OK);
  assert_int_equal(tn_search_report(s, 0, 1.0, &err), MMT_ERR_INVALID_ARG);
  assert_string_equal(err.msg, "search candidate 0 reported twice");
  tn_search_free(s);
  c[1].group = -1;
  assert_int_equal(tn_search_new(TN_STRATEGY_RANDOM, c, 2, 1, &s, &err), MMT_ERR_INVALID_ARG);
  assert_string_equal(err.msg, "search candidate 1: group -1 is negative");
  c[1].group = 0;
  c[1].ncoords = TN_SEARCH_MAX_COORDS + 1;
  assert_int_equal(tn_search_new(TN_STRATEGY_RANDOM, c, 2, 1, &s, &err), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_search_new(TN_STRATEGY_RANDOM, c, -1, 1, &s, &err), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_search_new(TN_STRATEGY_RANDOM, NULL, 1, 1, &s, &err), MMT_ERR_INVALID_ARG);
  assert_int_equal(tn_search_new(TN_STRATEGY_COUNT_, c, 1, 1, &s, &err), MMT_ERR_INVALID_ARG);
  assert_null(s);
  tn_search_free(NULL);
}

static void test_exhaustive_in_order(void **state) {
  (void)state;
  static space sp;
  static run_log log;
  make_space(&sp, false);
  run_search(&sp, TN_STRATEGY_EXHAUSTIVE, 1, -1, 0, &log);
  assert_int_equal(log.n, sp.count);
  for (int i = 0; i < sp.count; i++) assert_int_equal(log.order[i], i);
  assert_int_equal(log.best, sp.opt);
  run_search(&sp, TN_STRATEGY_EXHAUSTIVE, 1, -1, 7, &log); /* proposing ahead changes nothing */
  for (int i = 0; i < sp.count; i++) assert_int_equal(log.order[i], i);
}

static void test_random_is_a_permutation(void **state) {
  (void)state;
  static space sp;
  static run_log a, b, c;
  make_space(&sp, false);
  run_search(&sp, TN_STRATEGY_RANDOM, 42, -1, 3, &a); /* visits all, none twice */
  assert_int_equal(a.n, sp.count);
  assert_int_equal(a.best, sp.opt);
  run_search(&sp, TN_STRATEGY_RANDOM, 42, -1, 3, &b);
  assert_memory_equal(a.order, b.order, sizeof a.order[0] * (size_t)sp.count);
  run_search(&sp, TN_STRATEGY_RANDOM, 43, -1, 3, &c);
  assert_memory_not_equal(a.order, c.order, sizeof a.order[0] * (size_t)sp.count);
  int in_order = 0;
  for (int i = 0; i < sp.count; i++) in_order += a.order[i] == i;
  assert_true(in_order < sp.count / 10);
}

/* Anneal finds the optimum (within 2%) in 20% of the space, for every seed, with and without
 * proposing ahead; and visits everything when not stopped. */
static void test_anneal_finds_optimum(void **state) {
  (void)state;
  static space sp;
  static run_log log;
  make_space(&sp, false);
  int budget = sp.count / 5;
  for (int ahead = 0; ahead <= 8; ahead += 8)
    for (uint64_t seed = 1; seed <= 20; seed++) {
      run_search(&sp, TN_STRATEGY_ANNEAL, seed, budget, ahead, &log);
      assert_int_equal(log.order[0], 0); /* the default first */
      if (sp.truth[log.best] > 1.02 * sp.truth[sp.opt])
        fail_msg("seed %d ahead %d: best %.4f, optimum %.4f", (int)seed, ahead,
                 sp.truth[log.best], sp.truth[sp.opt]);
    }
  run_search(&sp, TN_STRATEGY_ANNEAL, 5, -1, 4, &log);
  assert_int_equal(log.n, sp.count);
}

/* The model strategy on the rugged space, its predictions the truth distorted by a smooth
 * error (up to 2x, varying along the parameters) and a 20% error of its own per point: the
 * model's error is learned from each report, the optimum (within 2%) is found within 80
 * evaluations (of ~850) for every seed and lookahead, and the search stops by itself well before the
 * space is exhausted.  Without predictions it still proposes every candidate. */
static void test_model_strategy(void **state) {
  (void)state;
  static space sp;
  static run_log log;
  make_space(&sp, true);
  for (int i = 0; i < sp.count; i++) {
    const tn_candidate *c = &sp.cands[i];
    double smooth = exp(0.35 * sin(c->coord[0] * 0.9) + 0.3 * cos(c->coord[1] * 0.7));
    double own = 1 + 0.2 * (unit(point_key(c) * 7 + 5) - 0.5);
    sp.cands[i].predicted = isfinite(sp.truth[i]) ? sp.truth[i] * smooth * own : 1.0;
  }
  for (int ahead = 0; ahead <= 8; ahead += 8)
    for (uint64_t seed = 1; seed <= 5; seed++) {
      run_search(&sp, TN_STRATEGY_MODEL, seed, -2, ahead, &log);
      assert_int_equal(log.order[0], 0); /* the starting point first */
      if (sp.truth[log.best] > 1.02 * sp.truth[sp.opt])
        fail_msg("ahead %d: best %.4f after %d, optimum %.4f", ahead, sp.truth[log.best], log.n,
                 sp.truth[sp.opt]);
      assert_true(log.n <= 80);
    }
  /* unpredicted candidates: proposed in order, to the end */
  for (int i = 0; i < sp.count; i++) sp.cands[i].predicted = 0;
  run_search(&sp, TN_STRATEGY_MODEL, 1, -1, 2, &log);
  assert_int_equal(log.n, sp.count);
  assert_int_equal(log.order[0], 0);
}

/* Runs the model strategy over c[0..count) to its end, reporting truth[i] for each proposal:
 * the proposals in order into order[], their number returned, the best found in *best. */
static int run_model_to_end(const tn_candidate *c, const double *truth, int count, int *order,
                            int *best) {
  tn_search *s = NULL;
  ut_err err;
  assert_int_equal(tn_search_new(TN_STRATEGY_MODEL, c, count, 1, &s, &err), MMT_OK);
  int n = 0, idx;
  while ((idx = tn_search_next(s)) >= 0) {
    order[n++] = idx;
    assert_int_equal(tn_search_report(s, idx, truth[idx], &err), MMT_OK);
  }
  double best_ms;
  *best = tn_search_best(s, &best_ms);
  tn_search_free(s);
  return n;
}

/* Two templates (groups): ten starting points of one, predicted well; one of the other,
 * predicted 15x too slow (the model knows it only from other kinds of problem) but truly
 * three times faster.  The starting points go one per template first, so the other's is the
 * second proposal (not the eleventh, past TN_MODEL_STARTS), and the search ends on it. */
static void test_model_tries_every_template(void **state) {
  (void)state;
  enum { SAME = 10, OTHER = 5 };
  tn_candidate c[SAME + OTHER];
  double truth[SAME + OTHER];
  memset(c, 0, sizeof c);
  for (int i = 0; i < SAME + OTHER; i++) {
    const bool other = i >= SAME;
    c[i] = (tn_candidate){.group = other, .ncoords = 1, .is_default = !other || i == SAME};
    c[i].coord[0] = (uint8_t)(other ? i - SAME : i);
    truth[i] = other ? 0.3 + 0.01 * (i - SAME) : 1.0 + 0.01 * i;
    c[i].predicted = other ? 15 * truth[i] : truth[i];
  }
  int order[SAME + OTHER], best;
  run_model_to_end(c, truth, SAME + OTHER, order, &best);
  assert_int_equal(order[0], 0);    /* the best predicted start */
  assert_int_equal(order[1], SAME); /* then the other template's, whatever its prediction */
  assert_int_equal(best, SAME);
}

/* The polish: one parameter of 40 values, the cost |i - 20| + 1, predicted exactly except at
 * 19, 20 and 21 (100: rows of other shapes say those are slow).  The model measures the best
 * predicted, stops predicting a gain at cost 3 (18 or 22), and the polish walks the best's
 * neighbours to the optimum, 20, then stops TN_MODEL_POLISH misses later or when no
 * neighbour is left: 40 candidates, far fewer measured. */
static void test_model_polish(void **state) {
  (void)state;
  enum { N = 40 };
  tn_candidate c[N];
  double truth[N];
  memset(c, 0, sizeof c);
  for (int i = 0; i < N; i++) {
    c[i] = (tn_candidate){.group = 0, .ncoords = 1, .is_default = i == 0};
    c[i].coord[0] = (uint8_t)i;
    truth[i] = abs(i - 20) + 1;
    c[i].predicted = i >= 19 && i <= 21 ? 100 : truth[i];
  }
  int order[N], best;
  int n = run_model_to_end(c, truth, N, order, &best);
  assert_int_equal(best, 20);
  assert_true(n < N - 10);
  bool saw[N] = {false};
  for (int i = 0; i < n; i++) saw[order[i]] = true;
  assert_true(saw[19] || saw[21]); /* reached through a neighbour, not a prediction */
}

/* Templates take turns at the starting points: ten starts of one template, predicted well;
 * three of the other, predicted 15x too slow, the second of them truly the fastest by far (a
 * skinny kernel's other body, say, whose rows came from another layout).  The proposals go
 * A, B, A, B: the other template's second start is the fourth proposal, where the best
 * predicted starts first would have spent every start on the first template. */
static void test_model_starts_take_turns(void **state) {
  (void)state;
  enum { SAME = 10, OTHER = 3 };
  tn_candidate c[SAME + OTHER];
  double truth[SAME + OTHER];
  memset(c, 0, sizeof c);
  for (int i = 0; i < SAME + OTHER; i++) {
    const bool other = i >= SAME;
    c[i] = (tn_candidate){.group = other, .ncoords = 1, .is_default = true};
    c[i].coord[0] = (uint8_t)(other ? i - SAME : i);
    truth[i] = other ? (i == SAME + 1 ? 0.2 : 0.9 + 0.01 * (i - SAME)) : 1.0 + 0.01 * i;
    c[i].predicted = other ? 15 * truth[i] : truth[i];
  }
  int order[SAME + OTHER], best;
  const int n = run_model_to_end(c, truth, SAME + OTHER, order, &best);
  assert_true(n >= 4);
  assert_true(order[0] < SAME && order[2] < SAME);   /* the first template's best two */
  assert_true(order[1] >= SAME && order[3] >= SAME); /* the other's two, in turn */
  assert_true(order[1] == SAME + 1 || order[3] == SAME + 1);
  assert_int_equal(best, SAME + 1);
}

static void test_anneal_is_deterministic(void **state) {
  (void)state;
  static space sp;
  static run_log a, b, c;
  make_space(&sp, true);
  run_search(&sp, TN_STRATEGY_ANNEAL, 9, 300, 4, &a);
  run_search(&sp, TN_STRATEGY_ANNEAL, 9, 300, 4, &b);
  assert_memory_equal(a.order, b.order, sizeof a.order[0] * 300);
  run_search(&sp, TN_STRATEGY_ANNEAL, 10, 300, 4, &c);
  assert_memory_not_equal(a.order, c.order, sizeof a.order[0] * 300);
}

/* On the rugged space (two basins, 25% bumps: the optimum is a lone point), anneal beats
 * random sampling on average at the same number of evaluations (12% of the space). */
static void test_anneal_beats_random(void **state) {
  (void)state;
  static space sp;
  static run_log log;
  make_space(&sp, true);
  double sum[2] = {0, 0};
  const tn_strategy st[2] = {TN_STRATEGY_RANDOM, TN_STRATEGY_ANNEAL};
  for (int k = 0; k < 2; k++)
    for (uint64_t seed = 1; seed <= 30; seed++) {
      run_search(&sp, st[k], seed, 100, 4, &log);
      sum[k] += sp.truth[log.best] / sp.truth[sp.opt];
    }
  printf("rugged, 100 of %d evaluations: best/optimum random %.4f, anneal %.4f\n", sp.count,
         sum[0] / 30, sum[1] / 30);
  assert_true(sum[1] < sum[0]);
  assert_true(sum[1] / 30 < 1.15);
}

static void test_tiny_spaces(void **state) {
  (void)state;
  ut_err err;
  for (int st = 0; st < TN_STRATEGY_COUNT_; st++) {
    tn_search *s = NULL;
    assert_int_equal(tn_search_new((tn_strategy)st, NULL, 0, 1, &s, &err), MMT_OK);
    assert_int_equal(tn_search_next(s), -1);
    assert_int_equal(tn_search_best(s, NULL), -1);
    tn_search_free(s);
    tn_candidate one = {.group = 3, .ncoords = 0};
    assert_int_equal(tn_search_new((tn_strategy)st, &one, 1, 1, &s, &err), MMT_OK);
    assert_int_equal(tn_search_neighbours(s, 0, NULL, 0), 0);
    assert_int_equal(tn_search_next(s), 0);
    assert_int_equal(tn_search_next(s), -1);
    assert_int_equal(tn_search_report(s, 0, 2.5, &err), MMT_OK);
    double cost = 0;
    assert_int_equal(tn_search_best(s, &cost), 0);
    assert_true(cost == 2.5);
    assert_int_equal(tn_search_next(s), -1);
    tn_search_free(s);
  }
}

/* Every candidate fails: every strategy still proposes each once, and there is no best. */
static void test_all_failing(void **state) {
  (void)state;
  static space sp;
  make_space(&sp, false);
  for (int i = 0; i < sp.count; i++) sp.truth[i] = (i % 2) ? INFINITY : NAN;
  for (int st = 0; st < TN_STRATEGY_COUNT_; st++) {
    run_log log;
    run_search(&sp, (tn_strategy)st, 3, -1, 2, &log);
    assert_int_equal(log.n, sp.count);
    assert_int_equal(log.best, -1);
  }
}

/* A 2-parameter space (4 x 4) with holes, and a second group on the same coordinates:
 *   group 0:  row a0 = 0: b = 0 1 . 3      ('.': invalid)
 *             row a0 = 1: b = 0 . . 3
 *             row a0 = 2: b = . . 2 .
 *             row a0 = 3: b = 0 1 2 3
 */
static void test_neighbours(void **state) {
  (void)state;
  static const char *rows[4] = {"xx.x", "x..x", "..x.", "xxxx"};
  tn_candidate c[32];
  int n = 0, at[4][4];
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) {
      at[a][b] = -1;
      if (rows[a][b] == '.') continue;
      at[a][b] = n;
      c[n++] = (tn_candidate){.group = 0, .ncoords = 2, .coord = {(uint8_t)a, (uint8_t)b}};
    }
  c[n++] = (tn_candidate){.group = 1, .ncoords = 2, .coord = {0, 2}}; /* other group */
  tn_search *s = NULL;
  ut_err err;
  assert_int_equal(tn_search_new(TN_STRATEGY_ANNEAL, c, n, 1, &s, &err), MMT_OK);
  int nb[8];
  /* (0,1): along a: up none, down skips the hole at (1,1), (2,1) -> (3,1); along b: (0,0),
   * and (0,3) skipping the hole (0,2) (group 1's (0,2) is not a neighbour). */
  assert_int_equal(tn_search_neighbours(s, at[0][1], nb, 8), 3);
  assert_int_equal(nb[0], at[3][1]);
  assert_int_equal(nb[1], at[0][0]);
  assert_int_equal(nb[2], at[0][3]);
  /* (2,2): a-1 finds only holes, so a diagonal: (1,1) is a hole, (1,3); a+1: (3,2); b-1
   * finds only holes: (1,1) hole, (3,1); b+1: hole, then the diagonal (1,3) again, listed
   * once. */
  assert_int_equal(tn_search_neighbours(s, at[2][2], nb, 8), 3);
  assert_int_equal(nb[0], at[1][3]);
  assert_int_equal(nb[1], at[3][2]);
  assert_int_equal(nb[2], at[3][1]);
  /* max smaller than the count: only max written, the count returned */
  nb[1] = -7;
  assert_int_equal(tn_search_neighbours(s, at[3][0], nb, 1), 2);
  assert_int_equal(nb[0], at[1][0]);
  assert_int_equal(nb[1], -7);
  assert_int_equal(tn_search_neighbours(s, n - 1, nb, 8), 0); /* alone in its group */
  assert_int_equal(tn_search_neighbours(s, n, nb, 8), 0);
  tn_search_free(s);
}

/* Results reported before any proposal (a resumed run) are never proposed; anneal walks on
 * from the best of them. */
static void test_known_results(void **state) {
  (void)state;
  static space sp;
  make_space(&sp, false);
  sp.cands[0].is_default = false;
  tn_search *s = NULL;
  ut_err err;
  assert_int_equal(tn_search_new(TN_STRATEGY_ANNEAL, sp.cands, sp.count, 4, &s, &err), MMT_OK);
  int known[3] = {0, sp.count / 2, sp.count - 1};
  for (int i = 0; i < 3; i++)
    assert_int_equal(tn_search_report(s, known[i], sp.truth[known[i]], &err), MMT_OK);
  assert_int_equal(tn_search_unseen(s), sp.count - 3);
  int best = known[0];
  for (int i = 1; i < 3; i++)
    if (sp.truth[known[i]] < sp.truth[best]) best = known[i];
  int nb[2 * NP], nnb = tn_search_neighbours(s, best, nb, 2 * NP);
  int first = tn_search_next(s);
  bool is_nb = false;
  for (int i = 0; i < nnb; i++) is_nb |= nb[i] == first;
  assert_true(is_nb);
  int proposed = 1;
  for (int i; (i = tn_search_next(s)) >= 0; proposed++)
    assert_true(i != known[0] && i != known[1] && i != known[2]);
  assert_int_equal(proposed, sp.count - 3);
  tn_search_free(s);
}

/* ---- the tune command's options, through the binary (they fail before any GPU work) ---- */

static int run_cli(const char *args, char *out, size_t outlen) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "MMTUNE_TEMPLATE_PATH= XDG_CACHE_HOME=/nonexistent/mmt %s %s 2>&1",
           MMT_CLI_PATH, args);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  size_t n = fread(out, 1, outlen - 1, f);
  out[n] = '\0';
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_cli_options(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(run_cli("tune --strategy greedy", out, sizeof out), 2);
  assert_string_equal(out,
                      "mmtune tune: --strategy must be one of exhaustive, random, anneal, model, got "
                      "'greedy'\n");
  assert_int_equal(run_cli("--strategy=", out, sizeof out), 2);
  assert_string_equal(out, "mmtune tune: --strategy must be one of exhaustive, random, anneal, "
                           "model, got ''\n");
  assert_int_equal(run_cli("tune --seed -3", out, sizeof out), 2);
  assert_string_equal(out, "mmtune tune: --seed must be an integer in [0, 9223372036854775807], "
                           "got '-3'\n");
  assert_int_equal(run_cli("tune --seed 1x", out, sizeof out), 2);
  assert_int_equal(run_cli("tune --budget soon", out, sizeof out), 2);
  assert_string_equal(out, "mmtune tune: --budget must be a positive number of seconds, got "
                           "'soon'\n");
  assert_int_equal(run_cli("tune --strategy exhaustive --budget 0", out, sizeof out), 2);
  assert_int_equal(run_cli("tune --limit soon", out, sizeof out), 2);
  assert_string_equal(out, "mmtune tune: --limit must be a positive number of seconds, got "
                           "'soon'\n");
  assert_int_equal(run_cli("tune --shapes 8x8x8 --limit 0", out, sizeof out), 2);
  assert_string_equal(out, "mmtune tune: --limit must be a positive number of seconds, got '0'\n");
  assert_int_equal(run_cli("tune --limit -3", out, sizeof out), 2);
  assert_string_equal(out, "mmtune tune: --limit must be a positive number of seconds, got '-3'\n");
  assert_int_equal(run_cli("tune --help", out, sizeof out), 0);
  assert_non_null(strstr(out, "--strategy NAME"));
  assert_non_null(strstr(out, "model (default), anneal, random or exhaustive"));
  assert_non_null(strstr(out, "'none'"));
  assert_non_null(strstr(out, "--seed N"));
  assert_non_null(strstr(out, "--limit SECONDS"));
}

/* --limit: each problem's budget is the lesser of --budget and an even share of the time left
 * among the problems left (this pass's, the later passes' shapes with this pass's dtypes each,
 * and their problems of one dtype), and never under TN_MIN_SHARE_S. */
static void test_limit_shares(void **state) {
  (void)state;
  tune_run r = {.nshapes = 4, .nproblems = 12, .budget_s = 5};
  assert_true(tn_tune_problem_budget(&r, 100) == 5); /* no limit: --budget */
  r.deadline = 160;                                  /* 60 s left for 12 problems */
  assert_true(tn_tune_problem_budget(&r, 100) == 5);
  r.later_shapes = 2; /* 6 more problems (3 dtypes a shape), 18 in all: 3.33 s each */
  assert_true(fabs(tn_tune_problem_budget(&r, 100) - 60.0 / 18) < 1e-9);
  r.later_problems = 2; /* and 2 of one dtype: 20, 3 s */
  assert_true(fabs(tn_tune_problem_budget(&r, 100) - 3) < 1e-9);
  r.problems_done = 10; /* 10 left, 40 s: 4 s */
  assert_true(fabs(tn_tune_problem_budget(&r, 120) - 4) < 1e-9);
  r.budget_s = 0; /* no --budget: the share alone */
  r.problems_done = 0;
  assert_true(fabs(tn_tune_problem_budget(&r, 100) - 3) < 1e-9);
  /* past the deadline, and with nothing left counted: the floor, never 0 or less */
  assert_true(tn_tune_problem_budget(&r, 200) == TN_MIN_SHARE_S);
  r.budget_s = 5;
  r.nproblems = r.problems_done = 0, r.later_shapes = r.later_problems = 0;
  assert_true(tn_tune_problem_budget(&r, 159.5) == TN_MIN_SHARE_S);
}

/* A problem's candidates (engine/plan.c) are exactly the configs a check of the whole space
 * against the problem keeps (valid, requirements met, the device's architecture, no group
 * twin), in the space's order, though the plan checks the space once without a problem
 * (wgmma's 663,552 configs) and then the problem on the valid ones alone. */
static void test_plan_candidates(void **state) {
  (void)state;
  ut_err e = {{0}};
  tune_run r = {
      .nts = 1,
      .nshapes = 1,
      .layout = "nt",
      .dtype = "bf16",
  };
  r.ts = malloc(sizeof *r.ts);
  r.shapes = malloc(sizeof *r.shapes);
  assert_non_null(r.ts);
  assert_non_null(r.shapes);
  r.shapes[0] = (tn_shape){1000, 999, 1001};
  gen_device dev;
  assert_int_equal(gen_device_defaults("sm_90", &dev, &e), MMT_OK);
  assert_int_equal(gen_load_named("wgmma", &r.ts[0], &e), MMT_OK);
  assert_int_equal(gen_set_device(r.ts[0], &dev, &e), MMT_OK);
  snprintf(r.arch, sizeof r.arch, "sm_90");
  snprintf(r.dev.name, sizeof r.dev.name, "a GPU");
  r.dev.cc_major = 9;
  char db_path[] = "/tmp/mmtune-plan-XXXXXX";
  int fd = mkstemp(db_path);
  assert_true(fd >= 0);
  close(fd);
  unlink(db_path);
  assert_int_equal(db_open(db_path, false, &r.db, &e), MMT_OK);
  if (tn_tune_plan(&r, &e) != MMT_OK) fail_msg("%s", e.msg);
  assert_int_equal(r.nproblems, 1);
  const tune_problem *pb = &r.problems[0];
  gen_template *t = r.ts[0];
  gen_problem p = gen_packed_problem("bf16", "nt", 1000, 999, 1001);
  int n = 0;
  for (uint64_t i = 0; i < gen_space_size(t); i++) {
    gen_config cfg;
    bool valid = false;
    gen_config_at(t, i, &cfg);
    assert_int_equal(gen_check(t, &cfg, &p, &valid, NULL, 0, &e), MMT_OK);
    if (!valid) continue;
    gen_kernel k;
    assert_int_equal(gen_emit(t, &cfg, "bf16", "nt", &k, &e), MMT_OK);
    char arch[16];
    ut_err why;
    const bool kept = gen_requires_met(&k.requires, &p) &&
                      rt_kernel_arch("sm_90", k.arch, arch, &why) == MMT_OK &&
                      !gen_group_twin(t, &cfg, &k, &p);
    gen_kernel_clear(&k);
    if (!kept) continue;
    if (n >= pb->count || r.kernels[pb->kernel[n]].index != i)
      fail_msg("candidate %d: config %llu, the plan's %llu", n, (unsigned long long)i,
               n < pb->count ? (unsigned long long)r.kernels[pb->kernel[n]].index : 0ull);
    n++;
  }
  assert_int_equal(n, pb->count);
  assert_true(n > 100);
  tn_tune_free(&r);
  unlink(db_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strategy_names),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_exhaustive_in_order),
      cmocka_unit_test(test_random_is_a_permutation),
      cmocka_unit_test(test_anneal_finds_optimum),
      cmocka_unit_test(test_model_strategy),
      cmocka_unit_test(test_model_tries_every_template),
      cmocka_unit_test(test_model_polish),
      cmocka_unit_test(test_model_starts_take_turns),
      cmocka_unit_test(test_anneal_is_deterministic),
      cmocka_unit_test(test_anneal_beats_random),
      cmocka_unit_test(test_tiny_spaces),
      cmocka_unit_test(test_all_failing),
      cmocka_unit_test(test_neighbours),
      cmocka_unit_test(test_known_results),
      cmocka_unit_test(test_cli_options),
      cmocka_unit_test(test_limit_shares),
      cmocka_unit_test(test_plan_candidates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
