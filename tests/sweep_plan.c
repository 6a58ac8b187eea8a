/* sweep_plan.c -- see sweep_plan.h. */
#include "sweep_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const int64_t k_sizes[] = SW_SIZES;
#define TAIL_SIZES 6 /* the first six of k_sizes: 1 .. 127 */
static const char *const k_swept[] = SW_SWEPT_PARAMS;
/* alpha and non-zero beta: exact in every dtype, signs and magnitudes mixed */
static const float k_alphas[] = {1.0f, -1.5f, 0.75f, 2.0f, -0.5f};
static const float k_betas[] = {0.5f, -1.0f, 1.5f, 2.0f};
static const char *const k_ops[] = SW_OPS;
static const char *const k_ops_fp8[] = SW_OPS_FP8;
static const char *const k_ops_fp8_block[] = SW_OPS_FP8_BLOCK;

#define UNITS 5          /* alignment units of 1, 2, 4, 8, 16 elements */
#define ATTEMPTS 48      /* problem draws per case before a config is given up */
#define RANDOM_TRIES 500 /* random configs tried per wanted one */
#define MAX_FIXED (1 + 4 * GEN_MAX_VALUES)

/* splitmix64: tiny, and the same sequence on every machine (determinism is part of the
 * contract: a case number from a GPU log must name the same case on the dev machine). */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n) { return n ? next_u64(s) % n : 0; }

static int64_t round_up(int64_t x, int64_t m) { return m > 1 ? (x + m - 1) / m * m : x; }

/* The base offsets 0..SW_OFFSET_MAX that are multiples of one alignment unit, dealt in a
 * seeded order and reshuffled when spent: every value turns up within a few problems of a
 * template, which independent draws would not guarantee (the plan promises offsets 1..7 on
 * every operand of a kernel that takes any alignment). */
typedef struct {
  int64_t v[SW_OFFSET_MAX + 1];
  int n, pos;
} deck;

typedef struct {
  gen_template *t;
  int tmpl;
  const sw_opts *opts;
  sw_plan *plan;
  int kernel_cap, case_cap, skip_cap;
  uint64_t rng;
  deck decks[3][UNITS]; /* per operand and unit */
  int beta_turn;        /* alternates beta == 0 and beta != 0 from config to config */
  int op_turn;          /* the next op of SW_OPS (SW_OPS_FP8) an op kernel tries first */
  ut_err *err;
} builder;

typedef struct {
  gen_config cfg;
  sw_origin origin;
  int param;
} cfg_item;

static int unit_index(int64_t unit) {
  int i = 0;
  while (i < UNITS - 1 && ((int64_t)1 << i) < unit) i++;
  return i;
}

static int64_t deck_peek(builder *b, int operand, int64_t unit) {
  deck *d = &b->decks[operand][unit_index(unit)];
  if (d->pos >= d->n) {
    d->n = 0;
    for (int64_t v = 0; v <= SW_OFFSET_MAX; v += unit) d->v[d->n++] = v;
    for (int i = d->n - 1; i > 0; i--) { /* Fisher-Yates */
      int j = (int)below(&b->rng, (uint64_t)i + 1);
      int64_t x = d->v[i];
      d->v[i] = d->v[j];
      d->v[j] = x;
    }
    d->pos = 0;
  }
  return d->v[d->pos];
}

static void deck_take(builder *b, int operand, int64_t unit) {
  b->decks[operand][unit_index(unit)].pos++;
}

static mmt_status grow(void **array, int *cap, int need, size_t elem, ut_err *err) {
  if (need <= *cap) return MMT_OK;
  int cap2 = *cap ? *cap * 2 : 64;
  while (cap2 < need) cap2 *= 2;
  void *p = realloc(*array, (size_t)cap2 * elem);
  if (!p) return ut_fail(err, MMT_ERR_NOMEM, "out of memory planning the sweep");
  *array = p;
  *cap = cap2;
  return MMT_OK;
}

static bool same_config(const gen_config *a, const gen_config *b) {
  return a->n == b->n && memcmp(a->v, b->v, sizeof a->v[0] * (size_t)a->n) == 0;
}

static mmt_status add_skip(builder *b, const char *dtype, const char *layout, const char *what,
                           const char *why) {
  sw_plan *p = b->plan;
  mmt_status rc = grow((void **)&p->skips, &b->skip_cap, p->nskips + 1, sizeof *p->skips, b->err);
  if (rc) return rc;
  sw_skip *s = &p->skips[p->nskips++];
  memset(s, 0, sizeof *s);
  s->tmpl = b->tmpl;
  ut_copy(s->dtype, sizeof s->dtype, dtype);
  ut_copy(s->layout, sizeof s->layout, layout);
  ut_copy(s->what, sizeof s->what, what);
  ut_copy(s->why, sizeof s->why, why);
  return MMT_OK;
}

/* ---- public helpers ------------------------------------------------------------------------ */

gen_problem sw_gen_problem(const sw_plan *plan, const sw_case *c) {
  const sw_kernel *k = &plan->kernels[c->kernel];
  const uint64_t elem = (uint64_t)gen_dtype_size(k->dtype);
  /* an op kernel's epilogue stores D (C's place) at any alignment: only A and B count, as in
   * the dispatcher's key */
  const uint64_t elem_c = k->has_op ? 0 : elem;
  int64_t stride[3];
  sw_batch_strides(plan, c, stride);
  /* an op kernel's batch: A's and B's problems one stride apart (their alignment counts) */
  const bool many = c->batch > 1;
  const uint64_t v[8] = {(uint64_t)c->offset[0] * elem,
                         (uint64_t)c->offset[1] * elem,
                         (uint64_t)c->offset[2] * elem_c,
                         (uint64_t)c->ld[0] * elem,
                         (uint64_t)c->ld[1] * elem,
                         (uint64_t)c->ld[2] * elem_c,
                         many ? (uint64_t)stride[0] * elem : 0,
                         many ? (uint64_t)stride[1] * elem : 0};
  return (gen_problem){k->dtype,
                       k->layout,
                       c->m,
                       c->n,
                       c->k,
                       c->ld[0],
                       c->ld[1],
                       c->ld[2],
                       gen_align_bytes(v, 8),
                       k->has_op ? &k->op : NULL,
                       c->batch > 1 ? c->batch : 1};
}

void sw_operand_shape(const sw_plan *plan, const sw_case *c, int64_t rows[3], int64_t width[3],
                      int64_t extent[3]) {
  const sw_kernel *k = &plan->kernels[c->kernel];
  const char *layout = k->layout;
  gen_stored_rows(layout, c->m, c->n, c->k, rows);
  gen_min_ld(layout, c->m, c->n, c->k, width);
  if (k->has_op && k->op.gated) width[2] = c->n / 2; /* D: the gated half of the columns */
  for (int i = 0; i < 3; i++)
    extent[i] = rows[i] > 0 && width[i] > 0 ? (rows[i] - 1) * c->ld[i] + width[i] : 0;
}

void sw_batch_strides(const sw_plan *plan, const sw_case *c, int64_t stride[3]) {
  const sw_kernel *k = &plan->kernels[c->kernel];
  int64_t rows[3], width[3], extent[3];
  sw_operand_shape(plan, c, rows, width, extent);
  const int64_t elem = gen_dtype_size(k->dtype), align = k->spec.requires.align_bytes;
  const int64_t unit = align > elem ? align / elem : 1; /* A's and B's, in elements */
  for (int i = 0; i < 3; i++) stride[i] = i < 2 ? (extent[i] + unit - 1) / unit * unit : extent[i];
}

void sw_origin_format(gen_template *const *templates, const sw_kernel *k, char *out,
                      size_t outlen) {
  if (k->origin == SW_OP) {
    char text[GEN_OP_TEXT_MAX];
    gen_op_format(&k->op, text, sizeof text, NULL);
    snprintf(out, outlen, "op %s", text);
  } else if (k->origin == SW_PARAM)
    snprintf(out, outlen, "%s=%lld", gen_param_name(templates[k->tmpl], k->param),
             (long long)k->cfg.v[k->param]);
  else
    ut_copy(out, outlen, k->origin == SW_DEFAULT ? "default" : "random");
}

void sw_case_format(const sw_plan *plan, gen_template *const *templates, int i, char *out,
                    size_t outlen) {
  const sw_case *c = &plan->cases[i];
  const sw_kernel *k = &plan->kernels[c->kernel];
  char cfg[512], origin[96];
  if (gen_config_format(templates[k->tmpl], &k->cfg, cfg, sizeof cfg, NULL)) ut_copy(cfg, 4, "?");
  sw_origin_format(templates, k, origin, sizeof origin);
  snprintf(out, outlen,
           "#%d %s %s %s %s [%s] %lldx%lldx%lld lda=%lld ldb=%lld ldc=%lld off=%lld,%lld,%lld "
           "alpha=%g beta=%g batch=%lld",
           i, gen_name(templates[k->tmpl]), k->dtype, k->layout, cfg, origin, (long long)c->m,
           (long long)c->n, (long long)c->k, (long long)c->ld[0], (long long)c->ld[1],
           (long long)c->ld[2], (long long)c->offset[0], (long long)c->offset[1],
           (long long)c->offset[2], (double)c->alpha, (double)c->beta,
           (long long)(c->batch > 1 ? c->batch : 1));
}

void sw_plan_free(sw_plan *plan) {
  if (!plan) return;
  for (int i = 0; i < plan->nkernels; i++) gen_kernel_clear(&plan->kernels[i].spec);
  free(plan->kernels);
  free(plan->cases);
  free(plan->skips);
  memset(plan, 0, sizeof *plan);
}

/* ---- problems ------------------------------------------------------------------------------ */

/* Whether the config accepts the case: its kernel's requires, then its constraints. */
static mmt_status case_valid(builder *b, const sw_kernel *k, const sw_case *c, bool *ok) {
  const gen_problem p = sw_gen_problem(b->plan, c);
  *ok = gen_requires_met(&k->spec.requires, &p);
  if (!*ok) return MMT_OK;
  return gen_check(b->t, &k->cfg, &p, ok, NULL, 0, b->err);
}

/* The case's pitches for sizes m, n, k: the row widths plus the drawn pads, rounded up to the
 * alignment unit (so a padded pitch keeps the rows aligned). */
static void set_sizes(sw_case *c, const char *layout, int64_t m, int64_t n, int64_t k,
                      const int64_t pad[3], int64_t unit) {
  int64_t w[3];
  c->m = m, c->n = n, c->k = k;
  gen_min_ld(layout, m, n, k, w);
  for (int i = 0; i < 3; i++) c->ld[i] = round_up(w[i] + pad[i], unit);
}

/* A repack kernel exists for problems that are not 16-byte aligned (wgmma's constraints turn
 * aligned ones away): an aligned draw gets an odd offset for A, which makes it unaligned
 * whatever the element size (<= 8 bytes). */
static void unalign_for_repack(const builder *b, sw_case *c) {
  if (sw_gen_problem(b->plan, c).align_bytes >= 16) c->offset[0] ^= 1;
}

/* Draws sizes, pads and offsets until the config accepts them.  A rejected draw is adapted
 * first: sizes are rounded up to the multiples and pads and offsets to the alignment unit by
 * construction; then K about doubles (split-K needs K >= split * bk or more); after half the
 * attempts, M and N come from the tails only (configs limited in tiles of C). */
static mmt_status draw_case(builder *b, int kidx, int64_t batch, bool *found, sw_case *out) {
  mmt_status rc = MMT_OK;
  const sw_kernel *k = &b->plan->kernels[kidx];
  const gen_requires *r = &k->spec.requires;
  const int64_t elem = gen_dtype_size(k->dtype);
  const int64_t unit = r->repack || r->align_bytes <= elem ? 1 : r->align_bytes / elem;
  sw_case c = {.kernel = kidx, .batch = batch};
  *found = false;
  for (int i = 0; i < 3; i++) c.offset[i] = deck_peek(b, i, unit);
  for (int attempt = 0; attempt < ATTEMPTS && !*found; attempt++) {
    const uint64_t nsizes = attempt < ATTEMPTS / 2 ? (uint64_t)COUNT(k_sizes) : TAIL_SIZES;
    const int64_t m = round_up(k_sizes[below(&b->rng, nsizes)], r->m_multiple);
    const int64_t n = round_up(k_sizes[below(&b->rng, nsizes)], r->n_multiple);
    int64_t kk = round_up(k_sizes[below(&b->rng, COUNT(k_sizes))], r->k_multiple);
    int64_t pad[3];
    for (int i = 0; i < 3; i++) pad[i] = (int64_t)below(&b->rng, SW_PAD_MAX + 1);
    for (;;) {
      set_sizes(&c, k->layout, m, n, kk, pad, unit);
      if (r->repack) unalign_for_repack(b, &c);
      if ((rc = case_valid(b, k, &c, found))) return rc;
      if (*found || kk >= SW_K_MAX) break;
      kk = round_up(kk * 2 + 1, r->k_multiple); /* odd: a tail past every power-of-two bk */
    }
  }
  if (!*found) return MMT_OK;
  for (int i = 0; i < 3; i++) deck_take(b, i, unit);
  *out = c;
  return MMT_OK;
}

/* Plans problems for kernel kidx; *count receives how many were found. */
static mmt_status plan_cases(builder *b, int kidx, int *count) {
  mmt_status rc = MMT_OK;
  sw_plan *p = b->plan;
  *count = 0;
  const int turn = b->beta_turn++;
  /* beta != 0 where the kernel reads C: a plain kernel, a residual op's (SW_OPS) */
  const sw_kernel *k = &p->kernels[kidx];
  const bool reads_c = !k->has_op || k->op.residual;
  for (int j = 0; j < b->opts->problems; j++) {
    sw_case c;
    bool found = false;
    /* an op kernel: every second case a batch of 2, where the config takes one */
    if (p->kernels[kidx].has_op && j % 2 == 1 && (rc = draw_case(b, kidx, 2, &found, &c)))
      return rc;
    if (!found && (rc = draw_case(b, kidx, 1, &found, &c))) return rc;
    if (!found) break; /* 48 draws failed: the next would too */
    c.alpha = k_alphas[below(&b->rng, COUNT(k_alphas))];
    c.beta = !reads_c || (turn + j) % 2 == 0 ? 0.0f : k_betas[below(&b->rng, COUNT(k_betas))];
    if ((rc = grow((void **)&p->cases, &b->case_cap, p->ncases + 1, sizeof *p->cases, b->err)))
      return rc;
    p->cases[p->ncases++] = c;
    ++*count;
  }
  return MMT_OK;
}

/* ---- configs ------------------------------------------------------------------------------- */

static int params_differing(const gen_config *a, const gen_config *b) {
  int d = 0;
  for (int i = 0; i < a->n; i++) d += a->v[i] != b->v[i];
  return d;
}

/* The valid config with parameter `param` = value nearest the default (fewest other
 * parameters changed; the first in space order among equals): the default itself changed
 * where that is valid (mma_sync's vec=1 also needs stages=2, reg_tiled's split > 1 group=1).
 * Valid on `plain` too where some such config is (wgmma's swap: at most 64 columns a tile but
 * in tf32 nn; tf32's A fragments must fit), else valid as a config (repack, which no aligned
 * problem takes).  Enumerating distances in C is cheap; only candidates at the current
 * distance go to Lua. */
static mmt_status nearest_with(builder *b, const gen_config *def, int param, int64_t value,
                               const gen_problem *plain, gen_config *out, bool *found) {
  mmt_status rc = MMT_OK;
  const uint64_t size = gen_space_size(b->t);
  *found = false;
  for (int pass = 0; pass < 2 && !*found; pass++)
    for (int dist = 1; dist <= def->n && !*found; dist++)
      for (uint64_t idx = 0; idx < size && !*found; idx++) {
        gen_config c;
        gen_config_at(b->t, idx, &c);
        if (c.v[param] != value || params_differing(&c, def) != dist) continue;
        /* valid in plain's dtype and layout, then (first pass) on plain itself */
        if ((rc = gen_check_for(b->t, &c, plain->dtype, plain->layout, found, NULL, 0, b->err)))
          return rc;
        if (*found && pass == 0 && (rc = gen_check(b->t, &c, plain, found, NULL, 0, b->err)))
          return rc;
        if (*found) *out = c;
      }
  return MMT_OK;
}

/* The default, then per swept parameter each of its other values (nearest valid config, on
 * the pair's plain problem where one is), without duplicates. */
static mmt_status fixed_configs(builder *b, const gen_problem *plain, cfg_item *items,
                                int *count) {
  mmt_status rc = MMT_OK;
  gen_config def;
  gen_config_default(b->t, &def);
  items[0] = (cfg_item){def, SW_DEFAULT, -1};
  *count = 1;
  for (int s = 0; s < COUNT(k_swept); s++)
    for (int p = 0; p < gen_param_count(b->t); p++) {
      if (strcmp(gen_param_name(b->t, p), k_swept[s]) != 0) continue;
      for (int j = 0; j < gen_param_value_count(b->t, p); j++) {
        const int64_t value = gen_param_value(b->t, p, j);
        gen_config c;
        bool found = false, dup = false;
        if (value == def.v[p]) continue; /* the default covers it */
        if ((rc = nearest_with(b, &def, p, value, plain, &c, &found))) return rc;
        for (int i = 0; i < *count && found; i++) dup = dup || same_config(&items[i].cfg, &c);
        if (found && !dup) items[(*count)++] = (cfg_item){c, SW_PARAM, p};
      }
    }
  return MMT_OK;
}

/* The plan's next kernel slot (not yet counted), zeroed but for the config's identity. */
static mmt_status new_kernel(builder *b, const cfg_item *item, const char *dtype,
                             const char *layout, sw_kernel **out) {
  sw_plan *p = b->plan;
  mmt_status rc =
      grow((void **)&p->kernels, &b->kernel_cap, p->nkernels + 1, sizeof *p->kernels, b->err);
  if (rc) return rc;
  sw_kernel *k = *out = &p->kernels[p->nkernels];
  memset(k, 0, sizeof *k);
  k->tmpl = b->tmpl;
  ut_copy(k->dtype, sizeof k->dtype, dtype);
  ut_copy(k->layout, sizeof k->layout, layout);
  k->cfg = item->cfg;
  return MMT_OK;
}

/* The op kernel of a config: the config emitted for the first of `ops` from b->op_turn on
 * that it takes (a gated op needs stores of column pairs), with problems of its own; *planned
 * false when it takes none (*why: the last reason) or has no problem. */
static mmt_status plan_op_kernel(builder *b, const cfg_item *item, const char *dtype,
                                 const char *layout, const char *const *ops, int nops,
                                 bool *planned, char *why, size_t whylen) {
  mmt_status rc = MMT_OK;
  sw_plan *p = b->plan;
  *planned = false;
  for (int tries = 0; tries < nops; tries++) {
    gen_op op;
    bool valid = false;
    const char *text = ops[b->op_turn++ % nops];
    if (gen_op_parse(text, dtype, &op, b->err) != MMT_OK || !gen_op_valid(&op, dtype)) continue;
    if ((rc = gen_check_op_for(b->t, &item->cfg, dtype, layout, &op, &valid, why, whylen, b->err)))
      return rc;
    if (!valid) continue;
    sw_kernel *k;
    if ((rc = new_kernel(b, item, dtype, layout, &k))) return rc;
    k->origin = SW_OP;
    k->param = -1;
    k->has_op = true;
    k->op = op;
    if ((rc = gen_emit_op(b->t, &k->cfg, dtype, layout, &k->op, &k->spec, b->err))) return rc;
    p->nkernels++;
    int count = 0;
    if ((rc = plan_cases(b, p->nkernels - 1, &count))) return rc;
    *planned = count > 0;
    if (!*planned) gen_kernel_clear(&p->kernels[--p->nkernels].spec);
    return MMT_OK;
  }
  return MMT_OK;
}

/* The op twin of a planned config: its op kernel for the next op of SW_OPS it takes. */
static mmt_status plan_op_twin(builder *b, const cfg_item *item, const char *dtype,
                               const char *layout) {
  bool planned;
  char why[256];
  return plan_op_kernel(b, item, dtype, layout, k_ops, COUNT(k_ops), &planned, why, sizeof why);
}

/* The largest value of parameter p of t at most `limit` (-1 where none is): halving a tile
 * side of 192 gives 96, which is not one of wgmma's. */
static int64_t value_at_most(const gen_template *t, int p, int64_t limit) {
  int64_t best = -1;
  for (int j = 0; j < gen_param_value_count(t, p); j++) {
    const int64_t v = gen_param_value(t, p, j);
    if (v <= limit && v > best) best = v;
  }
  return best;
}

/* FP8 (the input of op kernels only): each bf16 nt config planned so far, emitted for the next
 * op of SW_OPS_FP8 it takes, promoting (PROMOTE 1, 2, 4 in turn) where the partial sums fit,
 * else with half its columns (BN / 2, or the tile side below it) promoting, else (and every
 * fourth first) with fast accumulation (PROMOTE 0: an op that allows it); a template without
 * the parameter (skinny_mma, which promotes at every MMA) as the config is.  So FP8 gets the
 * spread of configs the 16-bit types got, without a scan of the space (every check of an op
 * runs Lua).  A layout that none takes is skipped with the template's reason. */
static mmt_status plan_fp8_pair(builder *b, const char *dtype, const char *layout) {
  static const int64_t promotes[] = {1, 2, 4};
  mmt_status rc = MMT_OK;
  const int promote = gen_param_index(b->t, "promote"), bn = gen_param_index(b->t, "bn");
  const int nk = b->plan->nkernels;
  int turn = 0, planned_any = 0;
  char why[256] = "no bf16 nt config to take";
  for (int i = 0; i < nk; i++) {
    const sw_kernel *src = &b->plan->kernels[i];
    if (src->tmpl != b->tmpl || src->has_op || strcmp(src->dtype, "bf16") ||
        strcmp(src->layout, "nt"))
      continue;
    const gen_config base = src->cfg; /* a copy: planning may move the kernels */
    bool planned = false;
    if (promote < 0) { /* no promotion parameter: the config as it is */
      cfg_item item = {base, SW_OP, -1};
      if ((rc = plan_op_kernel(b, &item, dtype, layout, k_ops_fp8, COUNT(k_ops_fp8), &planned, why,
                               sizeof why)))
        return rc;
    }
    for (int j = 0; j < 3 && !planned && promote >= 0; j++) {
      const int v = turn % 4 == 3 ? (j + 2) % 3 : j; /* as is, BN / 2, fast; every 4th fast */
      cfg_item item = {base, SW_OP, -1};
      if (v == 1 && (bn < 0 || base.v[bn] < 64)) continue;
      if (v == 1) item.cfg.v[bn] = value_at_most(b->t, bn, base.v[bn] / 2);
      item.cfg.v[promote] = v == 2 ? 0 : promotes[turn % COUNT(promotes)];
      if ((rc = plan_op_kernel(b, &item, dtype, layout, k_ops_fp8, COUNT(k_ops_fp8), &planned, why,
                               sizeof why)))
        return rc;
    }
    turn++;
    planned_any += planned;
    if (!planned || bn < 0) continue;
    /* its block-scaled twin: promote 1, at most 128 columns a tile or 256 (promoted by
     * halves, each half one block of B's scales) */
    cfg_item item = {base, SW_OP, -1};
    item.cfg.v[promote] = 1;
    if (item.cfg.v[bn] > 128 && item.cfg.v[bn] != 256)
      item.cfg.v[bn] = value_at_most(b->t, bn, 128);
    bool twin = false;
    char twin_why[256];
    if ((rc = plan_op_kernel(b, &item, dtype, layout, k_ops_fp8_block, COUNT(k_ops_fp8_block),
                             &twin, twin_why, sizeof twin_why)))
      return rc;
  }
  return planned_any ? MMT_OK : add_skip(b, dtype, layout, "all configs", why);
}

/* Adds the kernel (emitted) and its problems.  A config with no problem at all in this dtype
 * and layout is taken out again; *planned says whether it stayed.  One whose emit the
 * template refuses in this layout (skinny's lanes < 32 where W is K-contiguous; the test
 * template tests/templates_sweep/refuses_tn.lua) is a skip with the template's reason;
 * *refused says so. */
static mmt_status plan_config(builder *b, const cfg_item *item, const char *dtype,
                              const char *layout, bool *planned, bool *refused) {
  mmt_status rc = MMT_OK;
  sw_plan *p = b->plan;
  *planned = *refused = false;
  sw_kernel *k;
  if ((rc = new_kernel(b, item, dtype, layout, &k))) return rc;
  k->origin = item->origin;
  k->param = item->param;
  ut_err emit_err = {{0}};
  if ((rc = gen_emit(b->t, &k->cfg, dtype, layout, &k->spec, &emit_err))) {
    char text[512];
    if (gen_config_format(b->t, &k->cfg, text, sizeof text, NULL)) ut_copy(text, 4, "?");
    if (rc == MMT_ERR_TEMPLATE) { /* the template refuses the config in this layout */
      *refused = true;
      return add_skip(b, dtype, layout, text, emit_err.msg);
    }
    return ut_fail(b->err, rc, "%s %s %s %s: %s", gen_name(b->t), dtype, layout, text,
                   emit_err.msg);
  }
  p->nkernels++;
  int count = 0;
  if ((rc = plan_cases(b, p->nkernels - 1, &count))) return rc;
  *planned = count > 0;
  if (!*planned) gen_kernel_clear(&p->kernels[--p->nkernels].spec);
  if (*planned && gen_has_epilogues(b->t)) return plan_op_twin(b, item, dtype, layout);
  return MMT_OK;
}

/* Random valid configs not planned yet in this dtype and layout (first: its first kernel). */
static mmt_status plan_random(builder *b, const char *dtype, const char *layout, int first) {
  mmt_status rc = MMT_OK;
  const uint64_t size = gen_space_size(b->t);
  int got = 0;
  for (int tries = 0; got < b->opts->configs && tries < RANDOM_TRIES * b->opts->configs; tries++) {
    cfg_item item = {.origin = SW_RANDOM, .param = -1};
    bool valid = false, dup = false, planned = false, refused = false;
    gen_config_at(b->t, below(&b->rng, size), &item.cfg);
    for (int i = first; i < b->plan->nkernels && !dup; i++)
      dup = same_config(&b->plan->kernels[i].cfg, &item.cfg);
    if (dup) continue;
    if ((rc = gen_check_for(b->t, &item.cfg, dtype, layout, &valid, NULL, 0, b->err))) return rc;
    if (!valid) continue;
    if ((rc = plan_config(b, &item, dtype, layout, &planned, &refused))) return rc;
    got += planned;
  }
  return MMT_OK;
}

/* Whether some config of the template is valid on `plain` (the first in space order). */
static mmt_status some_config_takes(builder *b, const gen_problem *plain, bool *found) {
  mmt_status rc = MMT_OK;
  *found = false;
  for (uint64_t idx = 0; idx < gen_space_size(b->t) && !*found; idx++) {
    gen_config c;
    bool valid = false;
    gen_config_at(b->t, idx, &c);
    if ((rc = gen_check_for(b->t, &c, plain->dtype, plain->layout, &valid, NULL, 0, b->err)))
      return rc;
    if (valid && (rc = gen_check(b->t, &c, plain, found, NULL, 0, b->err))) return rc;
  }
  return MMT_OK;
}

/* The pair's plain aligned problem: 256^3, or where no config takes that, 16 x 256 x 256 or
 * 256 x 16 x 256 (skinny and skinny_mma: a small side of at most 64), the first one some
 * config takes; *valid false and why the default's reason on 256^3 where none is. */
static mmt_status plain_problem(builder *b, const char *dtype, const char *layout,
                                gen_problem *plain, bool *valid, char *why, size_t whylen) {
  static const int64_t probes[3][3] = {{256, 256, 256}, {16, 256, 256}, {256, 16, 256}};
  mmt_status rc = MMT_OK;
  gen_config def;
  gen_config_default(b->t, &def);
  *valid = false;
  for (int i = 0; i < 3 && !*valid; i++) {
    const int64_t m = probes[i][0], n = probes[i][1], k = probes[i][2];
    int64_t ld[3];
    gen_min_ld(layout, m, n, k, ld);
    *plain = (gen_problem){dtype, layout, m, n, k, ld[0], ld[1], ld[2], 16, NULL, 1};
    if ((rc = gen_check(b->t, &def, plain, valid, i ? NULL : why, i ? 0 : whylen, b->err)))
      return rc;
    if (!*valid && (rc = some_config_takes(b, plain, valid))) return rc;
  }
  return MMT_OK;
}

/* One dtype and layout of the template.  A pair that no config takes on a plain aligned
 * problem is one the template does not serve (wgmma's tf32 tn): it is recorded as skipped
 * with the default's reason, not planned.  One that the default refuses but other configs take
 * (wgmma's tf32 nn: swap configs; tt: tiles whose A fragments fit) is planned: its configs
 * that the template refuses are skips of their own. */
static mmt_status plan_pair(builder *b, const char *dtype, const char *layout, cfg_item *fixed) {
  mmt_status rc = MMT_OK;
  gen_problem plain;
  char why[256] = "", text[512];
  bool valid = false;
  int nfixed = 0;
  if ((rc = plain_problem(b, dtype, layout, &plain, &valid, why, sizeof why))) return rc;
  if (!valid) return add_skip(b, dtype, layout, "all configs", why);
  if ((rc = fixed_configs(b, &plain, fixed, &nfixed))) return rc;
  const int first = b->plan->nkernels;
  for (int i = 0; i < nfixed; i++) {
    bool planned = false, refused = false;
    if ((rc = plan_config(b, &fixed[i], dtype, layout, &planned, &refused))) return rc;
    if (planned || refused) continue;
    if (gen_config_format(b->t, &fixed[i].cfg, text, sizeof text, NULL)) ut_copy(text, 4, "?");
    snprintf(why, sizeof why, "no problem it accepts in %d draws", ATTEMPTS);
    if ((rc = add_skip(b, dtype, layout, text, why))) return rc;
  }
  return plan_random(b, dtype, layout, first);
}

mmt_status sw_plan_build(gen_template *const *templates, int count, const sw_opts *opts,
                         sw_plan *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  builder b = {.opts = opts, .plan = out, .err = err};
  memset(out, 0, sizeof *out);
  cfg_item *fixed = malloc(sizeof *fixed * MAX_FIXED);
  if (!fixed) return ut_fail(err, MMT_ERR_NOMEM, "out of memory planning the sweep");
  for (int ti = 0; ti < count; ti++) {
    const char *name = gen_name(templates[ti]);
    b.t = templates[ti];
    b.tmpl = ti;
    b.rng = opts->seed ^ ut_hash64(name, strlen(name)); /* a stream of its own */
    b.beta_turn = 0;
    b.op_turn = 0;
    memset(b.decks, 0, sizeof b.decks);
    for (int d = 0; d < gen_dtype_count(b.t); d++)
      for (int l = 0; l < GEN_LAYOUTS; l++) {
        const char *layout = gen_layout_name(l);
        if (!gen_supports_layout(b.t, layout)) continue;
        const char *dtype = gen_dtype(b.t, d);
        rc = gen_dtype_fp8(dtype) ? plan_fp8_pair(&b, dtype, layout)
                                  : plan_pair(&b, dtype, layout, fixed);
        if (rc) goto cleanup;
      }
  }
cleanup:
  free(fixed);
  if (rc) sw_plan_free(out);
  return rc;
}
