/*
 * engine/search.c -- see engine/search.h.  Candidates are found by (group, coordinates) through an
 * open-addressing hash table, which is all the neighbour graph needs.  One random order
 * (a seeded permutation) serves both the random strategy and anneal's jumps, so "a random
 * unvisited candidate" costs amortized O(1).
 */
#include "engine/search.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { ST_UNSEEN, ST_PENDING, ST_DONE };

/* How a pending candidate was proposed: what its report does to anneal's walk. */
enum { K_KNOWN, K_INIT, K_MOVE, K_JUMP };

struct tn_search {
  tn_strategy strategy;
  tn_candidate *cands;
  int count;
  uint8_t *state, *kind;
  double *cost;
  int *table; /* (group, coordinates) -> index; -1 empty */
  size_t table_mask;
  uint8_t max_coord[TN_SEARCH_MAX_COORDS]; /* over all candidates: bounds a neighbour scan */
  int *order;                              /* proposal order: identity, or a permutation */
  int order_pos;
  int default_pos; /* anneal: next candidate to check for is_default */
  int *ranked;     /* candidates with a finite cost, cheapest first (ties: first reported) */
  int nranked;
  int unseen;
  uint64_t rng;
  /* anneal's walk */
  int cur;
  double cur_cost, temp;
  int restarts;
  int polish_misses; /* model: polish proposals since the best last improved */
  /* model: per candidate, the weights and weighted log errors of the reported predictions */
  double *sw, *swl;
  int starts_proposed;
  int *group_proposed; /* [group]: candidates of the group proposed so far */
};

static const char *const STRATEGY_NAMES[TN_STRATEGY_COUNT_] = {"exhaustive", "random", "anneal",
                                                               "model"};

const char *tn_strategy_name(tn_strategy s) {
  return (unsigned)s < TN_STRATEGY_COUNT_ ? STRATEGY_NAMES[s] : "unknown";
}

bool tn_strategy_parse(const char *text, tn_strategy *out) {
  for (int i = 0; text && i < TN_STRATEGY_COUNT_; i++)
    if (!strcmp(text, STRATEGY_NAMES[i])) {
      *out = (tn_strategy)i;
      return true;
    }
  return false;
}

/* splitmix64: small, fast, and good enough to pick candidates. */
static uint64_t rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0. */
static int rng_below(uint64_t *state, int n) { return (int)(rng_next(state) % (uint64_t)n); }

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *state) { return (double)(rng_next(state) >> 11) * 0x1p-53; }

static size_t slot_of(const tn_search *s, int group, const uint8_t *coord, int ncoords) {
  uint64_t h = ut_hash64(&group, sizeof group);
  h = ut_hash64_more(h, coord, (size_t)ncoords);
  return (size_t)h & s->table_mask;
}

/* The candidate at (group, coord), or -1. */
static int find(const tn_search *s, int group, const uint8_t *coord, int ncoords) {
  for (size_t i = slot_of(s, group, coord, ncoords);; i = (i + 1) & s->table_mask) {
    int c = s->table[i];
    if (c < 0) return -1;
    if (s->cands[c].group == group && s->cands[c].ncoords == ncoords &&
        !memcmp(s->cands[c].coord, coord, (size_t)ncoords))
      return c;
  }
}

static mmt_status check_candidate(const tn_candidate *c, int i, ut_err *err) {
  if (c->group < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "search candidate %d: group %d is negative", i,
                   c->group);
  if (c->ncoords < 0 || c->ncoords > TN_SEARCH_MAX_COORDS)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "search candidate %d: %d coordinates, expected 0..%d",
                   i, c->ncoords, TN_SEARCH_MAX_COORDS);
  return MMT_OK;
}

/* Fills the hash table; a second candidate at the same point is an error. */
static mmt_status build_table(tn_search *s, ut_err *err) {
  size_t cap = 16;
  while (cap < 2 * (size_t)s->count) cap *= 2;
  s->table = malloc(cap * sizeof *s->table);
  if (!s->table) return ut_fail(err, MMT_ERR_NOMEM, "out of memory for the search");
  memset(s->table, 0xff, cap * sizeof *s->table); /* all -1 */
  s->table_mask = cap - 1;
  for (int i = 0; i < s->count; i++) {
    const tn_candidate *c = &s->cands[i];
    int dup = find(s, c->group, c->coord, c->ncoords);
    if (dup >= 0)
      return ut_fail(err, MMT_ERR_INVALID_ARG,
                     "search candidates %d and %d are the same point of group %d", dup, i,
                     c->group);
    size_t slot = slot_of(s, c->group, c->coord, c->ncoords);
    while (s->table[slot] >= 0) slot = (slot + 1) & s->table_mask;
    s->table[slot] = i;
    for (int p = 0; p < c->ncoords; p++)
      if (c->coord[p] > s->max_coord[p]) s->max_coord[p] = c->coord[p];
  }
  return MMT_OK;
}

/* The order in which exhaustive and random propose (and anneal jumps). */
static void build_order(tn_search *s) {
  for (int i = 0; i < s->count; i++) s->order[i] = i;
  if (s->strategy == TN_STRATEGY_EXHAUSTIVE) return;
  for (int i = s->count - 1; i > 0; i--) { /* Fisher-Yates */
    int j = rng_below(&s->rng, i + 1), t = s->order[i];
    s->order[i] = s->order[j];
    s->order[j] = t;
  }
}

mmt_status tn_search_new(tn_strategy strategy, const tn_candidate *cands, int count, uint64_t seed,
                         tn_search **out, ut_err *err) {
  mmt_status rc = MMT_OK;
  *out = NULL;
  if ((unsigned)strategy >= TN_STRATEGY_COUNT_ || count < 0 || (count > 0 && !cands))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "bad search arguments (strategy %d, %d candidates)",
                   (int)strategy, count);
  size_t n = count > 0 ? (size_t)count : 1;
  tn_search *s = calloc(1, sizeof *s);
  if (!s) return ut_fail(err, MMT_ERR_NOMEM, "out of memory for the search");
  s->strategy = strategy;
  s->count = s->unseen = count;
  s->rng = seed;
  s->cur = -1;
  s->cands = malloc(n * sizeof *s->cands);
  s->state = calloc(n, 1);
  s->kind = calloc(n, 1);
  s->cost = malloc(n * sizeof *s->cost);
  s->order = malloc(n * sizeof *s->order);
  s->ranked = malloc(n * sizeof *s->ranked);
  s->sw = malloc(n * sizeof *s->sw);
  s->swl = calloc(n, sizeof *s->swl);
  int groups = 1;
  for (int i = 0; i < count; i++)
    if (cands[i].group >= groups) groups = cands[i].group + 1;
  s->group_proposed = calloc((size_t)groups, sizeof *s->group_proposed);
  if (!s->cands || !s->state || !s->kind || !s->cost || !s->order || !s->ranked || !s->sw ||
      !s->swl || !s->group_proposed) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory for the search");
    goto cleanup;
  }
  if (count > 0) memcpy(s->cands, cands, (size_t)count * sizeof *cands);
  for (int i = 0; i < count; i++)
    if ((rc = check_candidate(&cands[i], i, err))) goto cleanup;
  if ((rc = build_table(s, err))) goto cleanup;
  for (int i = 0; i < count; i++) s->sw[i] = TN_MODEL_PRIOR_WEIGHT;
  build_order(s);
  *out = s;
  s = NULL;
cleanup:
  tn_search_free(s);
  return rc;
}

void tn_search_free(tn_search *s) {
  if (!s) return;
  free(s->cands);
  free(s->state);
  free(s->kind);
  free(s->cost);
  free(s->table);
  free(s->order);
  free(s->ranked);
  free(s->sw);
  free(s->swl);
  free(s->group_proposed);
  free(s);
}

/* The nearest candidate from c along parameter p in direction dir (-1, +1), or -1. */
static int along(const tn_search *s, const tn_candidate *c, uint8_t *coord, int p, int dir) {
  int found = -1;
  for (int v = c->coord[p] + dir; v >= 0 && v <= s->max_coord[p] && found < 0; v += dir) {
    coord[p] = (uint8_t)v;
    found = find(s, c->group, coord, c->ncoords);
  }
  coord[p] = c->coord[p];
  return found;
}

/* When no candidate lies along p: a step along p together with one step of another parameter
 * (coupled parameters, e.g. a tile and its thread count), or -1. */
static int diagonal(const tn_search *s, const tn_candidate *c, uint8_t *coord, int p, int dir) {
  int v = c->coord[p] + dir, found = -1;
  if (v < 0 || v > s->max_coord[p]) return -1;
  coord[p] = (uint8_t)v;
  for (int i = 1; i < c->ncoords && found < 0; i++) {
    int q = (p + i) % c->ncoords;
    for (int e = -1; e <= 1 && found < 0; e += 2) {
      int w = c->coord[q] + e;
      if (w < 0 || w > s->max_coord[q]) continue;
      coord[q] = (uint8_t)w;
      found = find(s, c->group, coord, c->ncoords);
      coord[q] = c->coord[q];
    }
  }
  coord[p] = c->coord[p];
  return found;
}

int tn_search_neighbours(const tn_search *s, int idx, int *out, int max) {
  if (idx < 0 || idx >= s->count) return 0;
  const tn_candidate *c = &s->cands[idx];
  uint8_t coord[TN_SEARCH_MAX_COORDS];
  int found[2 * TN_SEARCH_MAX_COORDS], n = 0;
  memcpy(coord, c->coord, sizeof coord);
  for (int p = 0; p < c->ncoords; p++)
    for (int dir = -1; dir <= 1; dir += 2) {
      int nb = along(s, c, coord, p, dir);
      if (nb < 0) nb = diagonal(s, c, coord, p, dir);
      bool dup = nb < 0;
      for (int i = 0; i < n && !dup; i++) dup = found[i] == nb; /* two diagonals may meet */
      if (!dup) found[n++] = nb;
    }
  for (int i = 0; i < n && i < max; i++) out[i] = found[i];
  return n;
}

/* A random neighbour of idx that is neither proposed nor reported, or -1. */
static int unseen_neighbour(tn_search *s, int idx) {
  int nb[2 * TN_SEARCH_MAX_COORDS], open = 0;
  int n = tn_search_neighbours(s, idx, nb, 2 * TN_SEARCH_MAX_COORDS);
  for (int i = 0; i < n; i++)
    if (s->state[nb[i]] == ST_UNSEEN) nb[open++] = nb[i];
  return open ? nb[rng_below(&s->rng, open)] : -1;
}

/* The next unseen candidate of the order, or -1. */
static int next_in_order(tn_search *s) {
  while (s->order_pos < s->count && s->state[s->order[s->order_pos]] != ST_UNSEEN) s->order_pos++;
  return s->order_pos < s->count ? s->order[s->order_pos] : -1;
}

static int propose(tn_search *s, int idx, int kind) {
  if (idx < 0) return -1;
  s->state[idx] = ST_PENDING;
  s->kind[idx] = (uint8_t)kind;
  s->group_proposed[s->cands[idx].group]++;
  s->unseen--;
  return idx;
}

/* Moves the walk to idx; a restart (reheat) starts again at the initial temperature. */
static void set_current(tn_search *s, int idx, bool reheat) {
  s->cur = idx;
  s->cur_cost = s->cost[idx];
  if (reheat) s->temp = TN_ANNEAL_T0;
}

/* The current point's neighbourhood is used up: restart the walk, alternately from the best
 * point that has unvisited neighbours and from a random unvisited candidate. */
static int anneal_restart(tn_search *s) {
  if (s->nranked > 0 && s->restarts++ % 2 == 0) {
    for (int i = 0; i < s->nranked; i++) {
      int nb = unseen_neighbour(s, s->ranked[i]);
      if (nb >= 0) {
        set_current(s, s->ranked[i], true);
        return propose(s, nb, K_MOVE);
      }
    }
  }
  return propose(s, next_in_order(s), K_JUMP);
}

static int anneal_next(tn_search *s) {
  for (; s->default_pos < s->count; s->default_pos++)
    if (s->cands[s->default_pos].is_default && s->state[s->default_pos] == ST_UNSEEN)
      return propose(s, s->default_pos++, K_INIT);
  if (s->cur >= 0) {
    int nb = unseen_neighbour(s, s->cur);
    if (nb >= 0) return propose(s, nb, K_MOVE);
  }
  return anneal_restart(s);
}

/* ---- model ---- */

static bool has_prediction(const tn_candidate *c) { return c->predicted > 0 && isfinite(c->predicted); }

/* How much candidate j's error says about i's: TN_MODEL_SAME_GROUP for any two configs of a
 * template (the model's bias for the template on this problem), plus a part halved for each
 * parameter they differ in; TN_MODEL_OTHER_GROUP across groups (the model's bias for the
 * problem). */
static double similarity(const tn_candidate *a, const tn_candidate *b) {
  if (a->group != b->group || a->ncoords != b->ncoords) return TN_MODEL_OTHER_GROUP;
  int diff = 0;
  for (int p = 0; p < a->ncoords; p++) diff += a->coord[p] != b->coord[p];
  return TN_MODEL_SAME_GROUP + ldexp(1.0, -diff);
}

/* Candidate i's prediction corrected by the reported errors of similar candidates. */
static double model_estimate(const tn_search *s, int i) {
  if (!has_prediction(&s->cands[i])) return INFINITY;
  return s->cands[i].predicted * exp(s->swl[i] / s->sw[i]);
}

/* A report of j: every unseen candidate's correction learns its error. */
static void model_report(tn_search *s, int j) {
  if (!has_prediction(&s->cands[j])) return;
  double err = isfinite(s->cost[j]) ? log(s->cost[j] / s->cands[j].predicted) : TN_MODEL_FAILED;
  for (int i = 0; i < s->count; i++) {
    if (s->state[i] != ST_UNSEEN) continue;
    double w = similarity(&s->cands[i], &s->cands[j]);
    s->sw[i] += w;
    s->swl[i] += w * err;
  }
}

/* The unseen candidate with the lowest corrected prediction (those without one last, in
 * order), or -1 once the model predicts no gain over the best measured so far. */
static int model_next(tn_search *s) {
  int best = -1;
  double best_est = INFINITY;
  /* first the starting points (the best configs of problems tuned before, the defaults), at
   * most TN_MODEL_STARTS, template (group) by template in turn: the best predicted start of
   * the group with the fewest proposed so far, so that every template gets its measurements
   * however the model ranks it (a template whose rows are all from other kinds of problem,
   * another layout say, is the one it mispredicts) */
  int fewest = INT_MAX;
  if (s->starts_proposed < TN_MODEL_STARTS)
    for (int i = 0; i < s->count; i++) {
      if (s->state[i] != ST_UNSEEN || !s->cands[i].is_default) continue;
      const int tried = s->group_proposed[s->cands[i].group];
      double e = model_estimate(s, i);
      if (best < 0 || tried < fewest || (tried == fewest && e < best_est)) {
        best = i;
        best_est = e;
        fewest = tried;
      }
    }
  if (best >= 0) {
    s->starts_proposed++;
    return propose(s, best, K_INIT);
  }
  for (int i = 0; i < s->count; i++) {
    if (s->state[i] != ST_UNSEEN) continue;
    double e = model_estimate(s, i);
    if (best < 0 || e < best_est) {
      best = i;
      best_est = e;
    }
  }
  double measured;
  int best_measured = tn_search_best(s, &measured);
  if (best >= 0 && isfinite(best_est) && best_measured >= 0 &&
      s->nranked >= TN_MODEL_MIN_MEASURED && !(best_est < measured * (1 + TN_MODEL_MARGIN))) {
    int nb = s->polish_misses < TN_MODEL_POLISH ? unseen_neighbour(s, best_measured) : -1;
    if (nb < 0) return -1;
    s->polish_misses++;
    return propose(s, nb, K_MOVE);
  }
  return propose(s, best, K_INIT);
}

bool tn_search_converged(const tn_search *s) {
  return s->strategy == TN_STRATEGY_MODEL && s->unseen > 0;
}

int tn_search_next(tn_search *s) {
  if (s->unseen == 0) return -1;
  if (s->strategy == TN_STRATEGY_ANNEAL) return anneal_next(s);
  if (s->strategy == TN_STRATEGY_MODEL) return model_next(s);
  return propose(s, next_in_order(s), K_INIT);
}

/* Metropolis: a move to a better point is taken, to a worse one with p = exp(-loss / T) where
 * loss is the relative cost increase.  Starting points (defaults, known results) only replace
 * a worse current point; a jump always restarts the walk where it landed. */
static void anneal_report(tn_search *s, int idx, int kind) {
  double cost = s->cost[idx];
  if (!isfinite(cost)) return;
  bool better = s->cur < 0 || cost < s->cur_cost;
  if (kind == K_JUMP || (kind != K_MOVE && better)) set_current(s, idx, true);
  if (kind != K_MOVE) return;
  double loss = s->cur_cost > 0 ? cost / s->cur_cost - 1 : (cost > 0 ? INFINITY : 0);
  if (better || rng_unit(&s->rng) < exp(-loss / s->temp)) set_current(s, idx, s->cur < 0);
  s->temp *= TN_ANNEAL_COOLING;
}

/* Inserts idx (finite cost) into the ranked list after every candidate as cheap. */
static void rank_insert(tn_search *s, int idx) {
  int i = s->nranked++;
  while (i > 0 && s->cost[s->ranked[i - 1]] > s->cost[idx]) {
    s->ranked[i] = s->ranked[i - 1];
    i--;
  }
  s->ranked[i] = idx;
}

mmt_status tn_search_report(tn_search *s, int idx, double cost, ut_err *err) {
  if (idx < 0 || idx >= s->count)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "search report for candidate %d of %d", idx, s->count);
  if (s->state[idx] == ST_DONE)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "search candidate %d reported twice", idx);
  if (cost < 0) return ut_fail(err, MMT_ERR_INVALID_ARG, "search cost %g is negative", cost);
  if (isnan(cost)) cost = INFINITY;
  if (s->state[idx] == ST_UNSEEN) {
    s->unseen--;
    s->kind[idx] = K_KNOWN;
  }
  s->state[idx] = ST_DONE;
  s->cost[idx] = cost;
  if (isfinite(cost)) rank_insert(s, idx);
  if (s->strategy == TN_STRATEGY_ANNEAL) anneal_report(s, idx, s->kind[idx]);
  if (s->strategy == TN_STRATEGY_MODEL) {
    model_report(s, idx);
    if (s->nranked > 0 && s->ranked[0] == idx) s->polish_misses = 0; /* a new best */
  }
  return MMT_OK;
}

int tn_search_best(const tn_search *s, double *cost) {
  if (s->nranked == 0) return -1;
  if (cost) *cost = s->cost[s->ranked[0]];
  return s->ranked[0];
}

int tn_search_unseen(const tn_search *s) { return s->unseen; }
