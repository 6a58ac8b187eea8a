/* rt_model.c -- see rt_model.h: the analytic part, the fit over the database's rows, and the
 * kernel regression that corrects the one by the other. */
#include "rt_model.h"
#include "rt_model_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Peaks per SM and clock, by architecture (leads from the vendors' datasheets): dense
 * tensor-core flops for 16-bit inputs and TF32, fp32 FMA flops; DRAM bandwidth; L2 at
 * RT_MODEL_L2_FACTOR (rt_model.h) times DRAM. */
#define RT_MODEL_DEFAULT_SMS 132
#define RT_MODEL_DEFAULT_CC 9

static double log_size(int64_t x) { return log((double)(x < 1 ? 1 : x)); }

double rt_shape_distance(int64_t m, int64_t n, int64_t k, int64_t m2, int64_t n2, int64_t k2) {
  return fabs(log_size(m) - log_size(m2)) + fabs(log_size(n) - log_size(n2)) +
         fabs(log_size(k) - log_size(k2));
}

/* ---- analytic ----------------------------------------------------------------------------- */

static bool is16(const char *dtype) {
  return dtype && (!strcmp(dtype, "f16") || !strcmp(dtype, "bf16"));
}

static bool is8(const char *dtype) {
  return dtype && (!strcmp(dtype, "e4m3") || !strcmp(dtype, "e5m2"));
}

/* Flops per second of one SM for dtype on compute capability cc.  FP8 runs on Hopper's
 * tensor cores at twice the 16-bit rate (its kernels are wgmma's, sm_90 only). */
static double sm_flops(int cc, const char *dtype) {
  double clock = cc >= 9 ? 1.75e9 : cc == 8 ? 1.41e9 : 1.5e9;
  double per_clk = 256; /* fp32 FMA: 128 lanes */
  if (is16(dtype)) per_clk = cc >= 9 ? 4096 : cc == 8 ? 2048 : 1024;
  if (is8(dtype)) per_clk = cc >= 9 ? 8192 : cc == 8 ? 2048 : 1024;
  if (dtype && !strcmp(dtype, "tf32")) per_clk = cc >= 9 ? 2048 : cc == 8 ? 1024 : 256;
  return per_clk * clock;
}

static double dram_bytes_per_s(int cc) { return cc >= 9 ? 3.0e12 : cc == 8 ? 1.8e12 : 0.9e12; }

/* The device's SMs (unknown: RT_MODEL_DEFAULT_SMS). */
static int model_sms(const rt_model_device *dev) {
  return dev && dev->sm_count > 0 ? dev->sm_count : RT_MODEL_DEFAULT_SMS;
}

/* A launch's tile of C (unknown sides: 64). */
static void launch_tile(const db_launch *l, int64_t *tm, int64_t *tn) {
  *tm = l && l->tile_m > 0 ? l->tile_m : 64;
  *tn = l && l->tile_n > 0 ? l->tile_n : 64;
}

void rt_model_peaks(const rt_model_device *dev, const char *dtype, double *flops_per_s,
                    double *bytes_per_s) {
  int sms = model_sms(dev);
  int cc = dev && dev->cc_major > 0 ? dev->cc_major : RT_MODEL_DEFAULT_CC;
  *flops_per_s = sms * sm_flops(cc, dtype);
  *bytes_per_s = dram_bytes_per_s(cc);
}

/* Without a + b - 1, which overflows for a size near 2^63 (a database's row may hold one). */
static int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? a / b + (a % b > 0) : a; }

/* How busy an SM's FMA pipelines are (0..1] when it holds `rounds` work units of launch l: a
 * block of few warps alone on an SM leaves them idle while it waits on memory, and the units
 * of one SM run side by side (up to what fits: RT_MODEL_SM_THREADS; a persistent grid holds
 * per_sm blocks).  The SM is full from RT_MODEL_BUSY_WARPS warps on.  Tensor-core math (one
 * warpgroup's asynchronous MMAs fill them; leave-one-out over H100 rows found no gain from
 * the term there) and unknown threads: busy. */
static double sm_busy(const db_launch *l, double rounds, const char *math) {
  if (!l || l->threads <= 0 || strcmp(math, "f32") != 0) return 1;
  double fit = fmax(1, floor((double)RT_MODEL_SM_THREADS / l->threads));
  double blocks = l->per_sm > 0 ? l->per_sm : fmin(rounds, fit);
  double warps = blocks * ceil(l->threads / 32.0);
  return fmin(1, warps / RT_MODEL_BUSY_WARPS);
}

/* The share of DRAM's bandwidth a grid of `units` work units can draw: it needs loads in
 * flight from most SMs.  A grid of fewer units than RT_MODEL_DRAM_SMS of the SMs gets its
 * share of them (a 4096-wide decode GEMM in 64 tiles of a shallow ring streams its weights at
 * about half the copy bandwidth), unless its rings hold RT_MODEL_DRAM_INFLIGHT bytes: a ring
 * kernel (TMA or cp.async stages) keeps its shared memory's worth of loads in flight, counted
 * for the part of its tile inside the problem (wgmma's 64 x 16 tiles with 12 stages, 64 of
 * them, stream 16x4096x4096 f16 weights at the bandwidth).  Register-streaming kernels have
 * little shared memory and their units' count decides. */
static double dram_share(const db_launch *l, double units, int sms, int64_t tm, int64_t tn,
                         int64_t m, int64_t n) {
  const double resident = fmin(units, (double)sms * (l && l->per_sm > 0 ? l->per_sm : 1));
  double share = fmin(units, (double)sms) / (RT_MODEL_DRAM_SMS * sms);
  if (l && l->shared_bytes > 0) {
    const double inside = (double)((tm < m ? tm : m) + (tn < n ? tn : n)) / (double)(tm + tn);
    share = fmax(share, resident * l->shared_bytes * inside / RT_MODEL_DRAM_INFLIGHT);
  }
  return fmin(1, share);
}

/* The L2 traffic factors of A (waste[0]) and B (waste[1]) of p, elements of elem bytes:
 * RT_MODEL_SECTOR_WASTE where the operand's row pitch (p's, else packed rows) is not a whole
 * number of 32-byte sectors, else 1. */
static void sector_waste(const gen_problem *p, double elem, double waste[2]) {
  int64_t ld[3];
  gen_min_ld(p->layout ? p->layout : "nn", p->m, p->n, p->k, ld);
  const int64_t pitch[2] = {p->lda > 0 ? p->lda : ld[0], p->ldb > 0 ? p->ldb : ld[1]};
  /* bytes modulo 2^64, unsigned: exact modulo 32 whatever the size */
  for (int i = 0; i < 2; i++)
    waste[i] = (uint64_t)pitch[i] * (uint64_t)elem % 32 ? RT_MODEL_SECTOR_WASTE : 1.0;
}

/* The problems p's work is counted over: its batch, but one for a contiguous grouped op,
 * whose M holds every expert's rows and whose batch is its experts (the model sees it as one
 * problem of those rows). */
static double problems(const gen_problem *p) {
  if (p->op && p->op->group == 'c') return 1.0;
  return p->batch > 1 ? (double)p->batch : 1.0;
}

/* The tiles of C a launch computes, every problem of the batch's (split-K's slices not
 * counted); its tile in *tm, *tn. */
static double tile_count(const db_launch *l, const gen_problem *p, int64_t *tm, int64_t *tn) {
  launch_tile(l, tm, tn);
  int64_t m = p->m > 1 ? p->m : 1, n = p->n > 1 ? p->n : 1;
  return (double)ceil_div(m, *tm) * (double)ceil_div(n, *tn) * problems(p);
}

double rt_model_tile_area(const db_launch *l, const gen_problem *p) {
  int64_t tm, tn;
  const double tiles = tile_count(l, p, &tm, &tn);
  return tiles * (double)tm * (double)tn;
}

/* The weight of an op's epilogue work an element of its tile (see rt_model_epilogue_ms). */
static double epilogue_weight(const gen_op *op) {
  static const double act[GEN_ACTS] = {[GEN_ACT_RELU] = 0.2,
                                       [GEN_ACT_GELU_TANH] = 1.2,
                                       [GEN_ACT_GELU_ERF] = 2.0,
                                       [GEN_ACT_SILU] = 1.0};
  double w = op->act > GEN_ACT_NONE && op->act < GEN_ACTS ? act[op->act] : 0;
  if (op->gated) w = w / 2 + 0.5; /* the activation on the gate's half, times the up's */
  if (op->bias) w += 1;
  w += 0.5 * (op->scale_row + op->scale_col);
  if (gen_dtype_fp8(op->out)) w += 0.5; /* D's scale and amax */
  /* a residual's C, an element of D's type a column pair's (gated: half the product's) */
  if (op->residual)
    w += RT_MODEL_C_READ_WEIGHT * (double)gen_dtype_size(op->out) / (op->gated ? 2 : 1);
  return w;
}

double rt_model_epilogue_ms(const rt_model_device *dev, const db_launch *l, const gen_problem *p) {
  if (!p->op) return 0;
  const double w = epilogue_weight(p->op);
  if (w == 0) return 0;
  /* the units one SM runs in turn: the tiles of every problem (split-K's slices but the
   * last run no epilogue) */
  int64_t tm, tn;
  const double rounds = ceil(tile_count(l, p, &tm, &tn) / model_sms(dev));
  /* overlapped: only the SM's last unit's shows, run by half the threads (one consumer) */
  const double in_turn = l && l->overlap ? fmin(2, 2 * rounds) : rounds;
  return in_turn * (double)tm * (double)tn * RT_MODEL_EPILOGUE_NS * w * 1e-6;
}

double rt_model_analytic_ms(const rt_model_device *dev, const db_launch *l, const gen_problem *p) {
  int sms = model_sms(dev);
  int cc = dev && dev->cc_major > 0 ? dev->cc_major : RT_MODEL_DEFAULT_CC;
  double elem = gen_dtype_size(p->dtype) > 0 ? gen_dtype_size(p->dtype) : 4;
  int64_t tm, tn;
  launch_tile(l, &tm, &tn);
  int64_t slices = l && l->slices > 1 ? l->slices : 1;
  int64_t m = p->m > 1 ? p->m : 1, n = p->n > 1 ? p->n : 1, k = p->k > 1 ? p->k : 1;
  /* An op kernel (gen.h, "Epilogues"): `batch` problems, each its own work units and bytes;
   * D of the op's type, half the product's columns when gated.  The epilogue's arithmetic is
   * not the analytic part's: rt_model_epilogue_ms adds it to a prediction, outside the fit. */
  const double batch = problems(p);
  const double out_elem =
      p->op && gen_dtype_size(p->op->out) > 0 ? gen_dtype_size(p->op->out) : elem;
  const double d_cols = p->op && p->op->gated ? (double)n / 2 : (double)n;
  /* a cluster's blocks: tile rows that share B, the grid rounded up to whole clusters */
  int64_t cluster = l && l->cluster > 1 ? l->cluster : 1;
  /* counted in double: any int64 sizes (a database's row) without overflow, and exact below
   * 2^53, so ceil(units / sms) is the integer division rounded up */
  double units = (double)ceil_div(ceil_div(m, tm), cluster) * (double)cluster *
                 (double)ceil_div(n, tn) * (double)slices * batch;
  double rounds = ceil(units / sms); /* units one SM runs in turn */
  double kslice = (double)ceil_div(k, slices);
  /* The tensor cores' rate needs MMA tiles: mmtune's tensor-core families have tiles of 16 or
   * more on both sides (mma_sync's decode blocks are 16 rows), while a tile under 16 on a
   * side (skinny's block of the small side, its usual 1 to 8 rows) is computed by the CUDA
   * cores' FMA.  The bound was 32: mma_sync's 16-row blocks were costed at the FMA rate, 3x
   * their time at batch 16, and the correction that made up for it there carried to batch
   * 32 (two block rows), where it served them at half of the best's speed. */
  const char *math = tm < 16 || tn < 16 ? "f32" : p->dtype;
  double unit_compute = 2.0 * (double)tm * (double)tn * kslice / sm_flops(cc, math);
  /* A tile under 8 on a side (skinny's blocks of 1-4 rows; skinny_mma's start at 8, the
   * tensor cores' m16n8) converts 16-bit and FP8 inputs to fp32 for each FMA, and the
   * conversions and the dot's reductions take most of its issue slots: RT_MODEL_CVT_FMA_SHARE
   * of the fp32 rate.  Without it, 5-8 rows went to skinny, whose best measured config there
   * is 1.2-1.6x slower than skinny_mma's 8-row blocks (8 x 4096 x 4096 bf16, H100: 0.0252 ms
   * against 0.0166; docs/data/decoder-recorded-h100-2026-12-06.json.xz), while 1-4 rows stay
   * its own (0.3: the crossover between 4 and 5 rows on those rows' weights). */
  if ((tm < 8 || tn < 8) && (is16(p->dtype) || is8(p->dtype)))
    unit_compute /= RT_MODEL_CVT_FMA_SHARE;
  /* an FP8 kernel that promotes waits for its wgmmas and adds their partial sums every
   * `promote` K tiles (RT_MODEL_PROMOTE_COST) */
  if (is8(p->dtype) && l && l->promote > 0) unit_compute *= 1 + RT_MODEL_PROMOTE_COST / l->promote;
  double dram = dram_bytes_per_s(cc);
  /* A's and B's tiles along K, read in 32-byte sectors, and C's.  A cluster's multicast of B
   * is counted as what it was measured to be worth: on rows of whole sectors nothing (the
   * blocks' wait below is all), on rows off them the sectors' cost (3000^3 f16: 0.1117 ms in
   * clusters of two, 0.1157 with the pitches padded to 3008, 0.1335 neither). */
  double waste[2] = {1, 1};
  if (cluster == 1) sector_waste(p, elem, waste);
  double unit_bytes = ((double)tm * waste[0] + (double)tn * waste[1]) * kslice * elem +
                      (double)tm * (double)tn * (d_cols / (double)n) * out_elem;
  if (slices > 1) unit_bytes += 2.0 * (double)tm * (double)tn * 4; /* a partial tile out, in */
  double unit_l2 = unit_bytes / (RT_MODEL_L2_FACTOR * dram / sms);
  /* D written and C read; an op kernel without a residual has no C path (gen.h), so D alone.
   * (A plain kernel reads C only where beta != 0, and tuning times it at beta 0; counting its
   * D once too moved untuned tf32 128 x 4096 x 4096 to 128 x 64 tiles in 4 slices, which ran
   * 1.3x slower than 64 x 64 unsplit on that problem into f32, and left the leave-one-out
   * scores as they were, so its C stays counted.) */
  const double c_and_d = p->op && !p->op->residual ? 1.0 : 2.0;
  double compulsory = batch *
                      (((double)m * (double)k + (double)k * (double)n) * elem +
                       c_and_d * (double)m * d_cols * out_elem) /
                      (dram * dram_share(l, units, sms, tm, tn, m, n));
  /* each round starts by filling its pipeline; a persistent kernel overlaps that with the
   * previous tile */
  double fill = RT_MODEL_FILL_MS * 1e-3 * (l && l->per_sm > 0 ? 1 : rounds);
  double body = rounds * fmax(unit_compute, unit_l2) / sm_busy(l, rounds, math) *
                    (cluster > 1 ? RT_MODEL_CLUSTER_WAIT : 1) +
                fill;
  return RT_MODEL_LAUNCH_MS + 1e3 * fmax(body, compulsory);
}

/* ---- launch shapes ------------------------------------------------------------------------ */

static int param_value(const gen_template *t, const gen_config *cfg, const char *name) {
  int i = gen_param_index(t, name);
  return i >= 0 && i < cfg->n ? (int)cfg->v[i] : 0;
}

mmt_status rt_launch_of(const gen_template *t, const gen_config *cfg, const gen_kernel *k,
                        db_launch *out, ut_err *err) {
  memset(out, 0, sizeof *out);
  out->threads = (int)(k->block[0] * k->block[1] * k->block[2]);
  out->slices = 1;
  for (int i = 0; i < 3; i++) {
    const gen_grid_dim *g = &k->grid[i];
    if (g->dim == 'M') out->tile_m = (int)g->tile;
    if (g->dim == 'N') out->tile_n = (int)g->tile;
    if (g->dim == 0) out->slices *= (int)g->tile;
    if (g->dim == 'S') {
      out->per_sm = (int)g->tile;
      out->tile_m = param_value(t, cfg, "bm");
      out->tile_n = param_value(t, cfg, "bn");
      int split = param_value(t, cfg, "split");
      out->slices = split > 0 ? split : 1;
    }
  }
  if (out->tile_m <= 0 || out->tile_n <= 0) {
    int tm = out->tile_m, tn = out->tile_n;
    memset(out, 0, sizeof *out);
    return ut_fail(err, MMT_ERR_TEMPLATE,
                   "template '%s': its grid gives no tile of C (M tile %d, N tile %d); a "
                   "persistent grid needs parameters bm and bn",
                   gen_name(t), tm, tn);
  }
  out->shared_bytes = (int)k->shared_bytes;
  out->cluster = gen_kernel_cluster_blocks(k);
  out->overlap = k->epilogue_overlap;
  out->promote = param_value(t, cfg, "promote");
  return MMT_OK;
}

/* ---- fit ---------------------------------------------------------------------------------- */

typedef struct {
  rt_model *m;
  rt_fit_hooks hooks;
  mmt_status rc;
  ut_err *err;
  int last; /* the config of the previous row, -1 before the first */
} fit_ctx;

/* Whether the problem's packed rows (as the tuner measures: gen_packed_problem) are 16-byte
 * aligned. */
static bool packed_aligned(const db_problem *q) {
  return gen_packed_problem(q->dtype, q->layout, q->m, q->n, q->k).align_bytes >= 16;
}

/* The bin of "name=value" text in template t, added when absent (add) ; -1 when absent and
 * not added, or out of memory. */
static int bin_of(model_tmpl *t, const char *text, size_t len, bool add) {
  if (len >= sizeof t->bins[0].text) return -1;
  for (int i = 0; i < t->nbins; i++)
    if (strlen(t->bins[i].text) == len && !memcmp(t->bins[i].text, text, len)) return i;
  if (!add) return -1;
  model_bin *b = ut_grow(t->bins, &t->bins_cap, t->nbins + 1, sizeof *b);
  if (!b) return -1;
  t->bins = b;
  memset(&b[t->nbins], 0, sizeof b[0]);
  memcpy(b[t->nbins].text, text, len);
  return t->nbins++;
}

/* The bins of params ("a=1,b=2,...") in template t into bins[], their count returned. */
static int params_bins(model_tmpl *t, const char *params, bool add, int *bins) {
  int n = 0;
  for (const char *s = params; *s && n < GEN_MAX_PARAMS;) {
    size_t len = strcspn(s, ",");
    int b = bin_of(t, s, len, add);
    if (b >= 0) bins[n++] = b;
    s += len + (s[len] == ',');
  }
  return n;
}


const char *rt_model_dtype_class(const char *dtype) {
  return is16(dtype) || (dtype && !strcmp(dtype, RT_MODEL_CLASS_16)) ? RT_MODEL_CLASS_16 : dtype;
}

static int tmpl_index(const rt_model *m, const char *name, const char *dtype) {
  const char *cls = rt_model_dtype_class(dtype);
  for (int i = 0; i < m->ntmpls; i++)
    if (!strcmp(m->tmpls[i].name, name) && !strcmp(m->tmpls[i].dtype, cls)) return i;
  return -1;
}

/* dtype: a row's or problem's, or a class (a config holds its class's rows). */
static bool same_config(const model_cfg *c, const char *name, const char *hash,
                        const char *params, const char *dtype) {
  return !strcmp(c->template_name, name) && !strcmp(c->template_hash, hash) &&
         !strcmp(c->params, params) && !strcmp(c->dtype, rt_model_dtype_class(dtype));
}

static size_t config_slot(const rt_model *m, const char *name, const char *hash,
                          const char *params, const char *dtype) {
  uint64_t h = ut_hash64(name, strlen(name));
  h = ut_hash64_more(h, hash, strlen(hash));
  h = ut_hash64_more(h, params, strlen(params));
  const char *cls = rt_model_dtype_class(dtype);
  return (size_t)ut_hash64_more(h, cls, strlen(cls)) & m->table_mask;
}

/* The table slot of a config: its own, or the empty one where it would go. */
static size_t config_find(const rt_model *m, const char *name, const char *hash,
                          const char *params, const char *dtype) {
  size_t i = config_slot(m, name, hash, params, dtype);
  while (m->table[i] >= 0 && !same_config(&m->cfgs[m->table[i]], name, hash, params, dtype))
    i = (i + 1) & m->table_mask;
  return i;
}

/* A config table of cap slots (a power of two, over twice the configs), all rehashed. */
static mmt_status table_build(rt_model *m, size_t cap, ut_err *err) {
  int *t = malloc(cap * sizeof *t);
  if (!t) return ut_fail(err, MMT_ERR_NOMEM, "out of memory fitting the model");
  memset(t, 0xff, cap * sizeof *t);
  free(m->table);
  m->table = t;
  m->table_mask = cap - 1;
  for (int c = 0; c < m->ncfgs; c++) {
    const model_cfg *cfg = &m->cfgs[c];
    t[config_find(m, cfg->template_name, cfg->template_hash, cfg->params, cfg->dtype)] = c;
  }
  return MMT_OK;
}

/* Doubles the config table. */
static mmt_status table_grow(rt_model *m, ut_err *err) {
  return table_build(m, m->table_mask ? 2 * (m->table_mask + 1) : 1024, err);
}

mmt_status rt_model_index(rt_model *m, ut_err *err) {
  size_t cap = 1024;
  while (cap <= 2 * ((size_t)m->ncfgs + 1)) cap *= 2;
  return table_build(m, cap, err);
}

/* The value of parameter `name` in canonical params text ("bm=128,...,cluster=2"); 0 when
 * absent.  The database keeps no column for the launch's cluster or promote. */
static int params_value(const char *params, const char *name) {
  const size_t len = strlen(name);
  for (const char *s = params; *s; s += strcspn(s, ","), s += *s == ',')
    if (!strncmp(s, name, len) && s[len] == '=') return atoi(s + len + 1);
  return 0;
}

/* Starts a config for row r (its first row). */
static mmt_status new_config(fit_ctx *f, const db_model_row *r) {
  rt_model *m = f->m;
  model_cfg *cfgs = ut_grow(m->cfgs, &m->cfgs_cap, m->ncfgs + 1, sizeof *cfgs);
  if (!cfgs) return ut_fail(f->err, MMT_ERR_NOMEM, "out of memory fitting the model");
  m->cfgs = cfgs;
  model_cfg *c = &cfgs[m->ncfgs];
  memset(c, 0, sizeof *c);
  c->template_name = strdup(r->template_name);
  c->template_hash = strdup(r->template_hash);
  c->params = strdup(r->params);
  m->ncfgs++; /* freed by rt_model_free even when a strdup failed */
  if (!c->template_name || !c->template_hash || !c->params)
    return ut_fail(f->err, MMT_ERR_NOMEM, "out of memory fitting the model");
  ut_copy(c->dtype, sizeof c->dtype, rt_model_dtype_class(r->problem.dtype));
  c->launch = r->launch;
  if (c->launch.tile_m <= 0 && f->hooks.launch) {
    ut_err e = {{0}};
    mmt_status rc = f->hooks.launch(r, &c->launch, f->hooks.user, &e);
    if (rc == MMT_ERR_NOMEM) return ut_fail(f->err, rc, "%s", e.msg);
    m->resolved++;
  }
  if (c->launch.cluster <= 0) c->launch.cluster = params_value(c->params, "cluster");
  if (c->launch.promote <= 0) c->launch.promote = params_value(c->params, "promote");
  c->skip = c->launch.tile_m <= 0 || c->launch.tile_n <= 0;
  c->tmpl = tmpl_index(m, c->template_name, c->dtype);
  if (c->tmpl < 0 && !c->skip) {
    model_tmpl *ts = ut_grow(m->tmpls, &m->tmpls_cap, m->ntmpls + 1, sizeof *ts);
    if (!ts) return ut_fail(f->err, MMT_ERR_NOMEM, "out of memory fitting the model");
    m->tmpls = ts;
    memset(&ts[m->ntmpls], 0, sizeof ts[0]);
    ut_copy(ts[m->ntmpls].name, sizeof ts[0].name, c->template_name);
    ut_copy(ts[m->ntmpls].dtype, sizeof ts[0].dtype, c->dtype);
    c->tmpl = m->ntmpls++;
  }
  if (c->tmpl >= 0) c->nbins = params_bins(&m->tmpls[c->tmpl], c->params, true, c->bins);
  return MMT_OK;
}

/* The index of row r's config, a new one when it is the first row of it; -1 on error. */
static int config_of(fit_ctx *f, const db_model_row *r) {
  rt_model *m = f->m;
  const char *name = r->template_name, *hash = r->template_hash, *dtype = r->problem.dtype;
  /* a tuning run writes a config's rows one after another: try the last one first */
  if (f->last >= 0 && same_config(&m->cfgs[f->last], name, hash, r->params, dtype))
    return f->last;
  if (2 * ((size_t)m->ncfgs + 1) > m->table_mask && (f->rc = table_grow(m, f->err))) return -1;
  size_t i = config_find(m, name, hash, r->params, dtype);
  if (m->table[i] < 0) {
    if ((f->rc = new_config(f, r))) return -1;
    m->table[i] = m->ncfgs - 1;
  }
  return f->last = m->table[i];
}

static int on_fit_row(const db_model_row *row, void *user) {
  fit_ctx *f = user;
  rt_model *m = f->m;
  const signed char dt = (signed char)gen_dtype_index(row->problem.dtype);
  if (!(row->ms_median > 0) || gen_layout_index(row->problem.layout) < 0 || dt < 0) return 0;
  /* A plain GEMM's row, or an op kernel's (one problem, not grouped): fitted as the plain
   * product once the epilogue's own term is taken off (fit_corrections), so that an op
   * measured on some shapes, and other ops on the same configs, serve the shapes it was not.
   * A batch's time or a grouped call's hangs on more than the shape (the batch walk, the
   * routing): those rows are left out. */
  if (row->problem.batch != 1) return 0;
  const bool has_op = row->problem.op[0] != 0;
  gen_op op;
  memset(&op, 0, sizeof op);
  ut_err pe;
  if (has_op && (gen_op_parse(row->problem.op, row->problem.dtype, &op, &pe) || op.group)) return 0;
  db_model_row known = *row; /* by the hash its config is known by */
  const db_model_row *r = &known;
  if (f->hooks.hash) {
    const char *hash = NULL;
    ut_err e = {{0}};
    mmt_status rc = f->hooks.hash(row, &hash, f->hooks.user, &e);
    if (rc == MMT_ERR_NOMEM) {
      f->rc = ut_fail(f->err, rc, "%s", e.msg);
      return 1;
    }
    if (hash) known.template_hash = hash;
  }
  int c = config_of(f, r);
  if (c < 0) return 1;
  if (m->cfgs[c].skip) return 0;
  if (has_op && !m->cfgs[c].overlap_known && f->hooks.launch) {
    db_launch emitted;
    ut_err e = {{0}};
    mmt_status rc = f->hooks.launch(r, &emitted, f->hooks.user, &e);
    if (rc == MMT_ERR_NOMEM) {
      f->rc = ut_fail(f->err, rc, "%s", e.msg);
      return 1;
    }
    m->cfgs[c].overlap = !rc && emitted.overlap;
    m->cfgs[c].overlap_known = true;
  }
  if (m->dev.sm_count <= 0 && r->sm_count > 0) m->dev.sm_count = r->sm_count;
  if (m->dev.cc_major <= 0 && r->cc_major > 0) m->dev.cc_major = r->cc_major;
  model_row *rows = ut_grow(m->rows, &m->rows_cap, m->nrows + 1, sizeof *rows);
  if (!rows) {
    f->rc = ut_fail(f->err, MMT_ERR_NOMEM, "out of memory fitting the model");
    return 1;
  }
  m->rows = rows;
  const int layout = gen_layout_index(r->problem.layout);
  model_cfg *cfg = &m->cfgs[c];
  if (!(cfg->layouts & 1u << layout)) {
    /* a row written before launch shapes were stored has the first row's (resolved) */
    cfg->by_layout[layout] = r->launch.tile_m > 0 && r->launch.tile_n > 0 ? r->launch : cfg->launch;
    cfg->by_layout[layout].cluster = cfg->launch.cluster;
    cfg->by_layout[layout].promote = cfg->launch.promote;
    cfg->layouts |= 1u << layout;
  }
  rows[m->nrows++] = (model_row){.m = r->problem.m,
                                 .n = r->problem.n,
                                 .k = r->problem.k,
                                 .lm = (float)log_size(r->problem.m),
                                 .ln = (float)log_size(r->problem.n),
                                 .lk = (float)log_size(r->problem.k),
                                 .id = r->id,
                                 .cfg = c,
                                 .ms = r->ms_median,
                                 .dt = dt,
                                 .layout = gen_layout_index(r->problem.layout),
                                 .aligned = packed_aligned(&r->problem),
                                 .op = op};
  m->cfgs[c].count++;
  return 0;
}

/* Orders the rows by config (a counting sort, stable), so each config's rows are
 * first..first+count-1. */
static mmt_status group_rows(rt_model *m, ut_err *err) {
  model_row *sorted = malloc(((size_t)m->nrows + 1) * sizeof *sorted);
  if (!sorted) return ut_fail(err, MMT_ERR_NOMEM, "out of memory fitting the model");
  int next = 0;
  for (int c = 0; c < m->ncfgs; c++) {
    m->cfgs[c].first = next;
    next += m->cfgs[c].count;
  }
  int *fill = calloc((size_t)m->ncfgs + 1, sizeof *fill);
  if (!fill) {
    free(sorted);
    return ut_fail(err, MMT_ERR_NOMEM, "out of memory fitting the model");
  }
  for (int i = 0; i < m->nrows; i++) {
    int c = m->rows[i].cfg;
    sorted[m->cfgs[c].first + fill[c]++] = m->rows[i];
  }
  free(fill);
  free(m->rows);
  m->rows = sorted;
  m->rows_cap = m->nrows + 1;
  return MMT_OK;
}

static int by_problem(const void *a, const void *b) {
  const model_row *x = *(model_row *const *)a, *y = *(model_row *const *)b;
  if (x->m != y->m) return x->m < y->m ? -1 : 1;
  if (x->n != y->n) return x->n < y->n ? -1 : 1;
  if (x->k != y->k) return x->k < y->k ? -1 : 1;
  if (x->dt != y->dt) return x->dt - y->dt;
  return x->layout - y->layout;
}

/* Each template's mean y (gy), and each row's merit r: its y less the mean y of its
 * template's rows on the same problem (0 when it is the only one). */
static mmt_status fit_merits(rt_model *m, ut_err *err) {
  model_row **byp = malloc(((size_t)m->nrows + 1) * sizeof *byp);
  if (!byp) return ut_fail(err, MMT_ERR_NOMEM, "out of memory fitting the model");
  for (int t = 0; t < m->ntmpls; t++) {
    int n = 0;
    for (int c = 0; c < m->ncfgs; c++) {
      if (m->cfgs[c].tmpl != t) continue;
      for (int i = m->cfgs[c].first; i < m->cfgs[c].first + m->cfgs[c].count; i++)
        byp[n++] = &m->rows[i];
    }
    qsort(byp, (size_t)n, sizeof *byp, by_problem);
    double total = 0;
    for (int i = 0, j; i < n; i = j) {
      double sum = 0;
      for (j = i; j < n && by_problem(&byp[i], &byp[j]) == 0; j++) sum += byp[j]->y;
      /* clamped: a pathological run (a config 100x slower on one shape) must not decide
       * what its parameter values are worth everywhere */
      for (int q = i; q < j; q++) byp[q]->r = fmin(fmax(byp[q]->y - sum / (j - i), -1), 2);
      total += sum;
    }
    m->tmpls[t].gy = n ? total / n : 0;
    m->tmpls[t].gcount = n;
  }
  free(byp);
  return MMT_OK;
}

/* y = ln(measured / analytic) of every row, once the device is known.  An op row's
 * measurement less its epilogue's term (rt_model_epilogue_ms, as a prediction adds it), at
 * least half of it: the product's time, against the analytic part of the op's problem (D's
 * type and columns). */
static void fit_corrections(rt_model *m) {
  if (m->dev.sm_count <= 0) m->dev.sm_count = RT_MODEL_DEFAULT_SMS;
  if (m->dev.cc_major <= 0) m->dev.cc_major = RT_MODEL_DEFAULT_CC;
  for (int c = 0; c < m->ncfgs; c++) {
    model_cfg *cfg = &m->cfgs[c];
    for (int i = cfg->first; i < cfg->first + cfg->count; i++) {
      model_row *r = &m->rows[i];
      gen_problem p = {.dtype = gen_dtype_name(r->dt),
                       .layout = gen_layout_name(r->layout),
                       .m = r->m,
                       .n = r->n,
                       .k = r->k,
                       .op = r->op.out[0] ? &r->op : NULL};
      db_launch l = cfg->by_layout[r->layout];
      l.overlap = cfg->overlap;
      const double ms = fmax(r->ms - rt_model_epilogue_ms(&m->dev, &l, &p), 0.5 * r->ms);
      r->y = log(ms / rt_model_analytic_ms(&m->dev, &l, &p));
    }
  }
}

mmt_status rt_model_fit(db_handle *db, const char *device_name, const rt_model_device *dev,
                        const rt_fit_hooks *hooks, rt_model **out, ut_err *err) {
  *out = NULL;
  rt_model *m = calloc(1, sizeof *m);
  if (!m) return ut_fail(err, MMT_ERR_NOMEM, "out of memory fitting the model");
  if (dev) m->dev = *dev;
  fit_ctx f = {.m = m, .err = err, .last = -1};
  if (hooks) f.hooks = *hooks;
  mmt_status rc = MMT_OK;
  if (db && device_name) rc = db_each_model_row(db, device_name, on_fit_row, &f, err);
  if (!rc) rc = f.rc;
  if (!rc) rc = group_rows(m, err);
  if (rc) {
    rt_model_free(m);
    return rc;
  }
  fit_corrections(m);
  if ((rc = fit_merits(m, err))) {
    rt_model_free(m);
    return rc;
  }
  *out = m;
  return MMT_OK;
}

void rt_model_free(rt_model *m) {
  if (!m) return;
  for (int i = 0; i < m->ncfgs; i++) {
    free(m->cfgs[i].template_name);
    free(m->cfgs[i].template_hash);
    free(m->cfgs[i].params);
  }
  free(m->cfgs);
  if (m->map) munmap(m->map, m->map_len);
  else free(m->rows);
  for (int i = 0; i < m->ntmpls; i++) free(m->tmpls[i].bins);
  free(m->tmpls);
  free(m->table);
  free(m);
}

rt_model_device rt_model_get_device(const rt_model *m) { return m->dev; }
int rt_model_row_count(const rt_model *m) { return m->nrows; }
int rt_model_config_count(const rt_model *m) { return m->ncfgs; }

void rt_model_get_config(const rt_model *m, int i, rt_model_config *out) {
  const model_cfg *c = &m->cfgs[i];
  *out = (rt_model_config){.layouts = c->layouts,
                           .template_name = c->template_name, .template_hash = c->template_hash,
                           .params = c->params, .dtype = c->dtype, .launch = c->launch,
                           .rows = c->count};
}

int rt_model_find(const rt_model *m, const char *template_name, const char *template_hash,
                  const char *params, const char *dtype) {
  if (!m->table) return -1; /* no rows */
  return m->table[config_find(m, template_name, template_hash, params, dtype)];
}

/* ---- prediction --------------------------------------------------------------------------- */

#define USED_WEIGHT 1e-3

void rt_model_focus(rt_model *m, const gen_problem *p, const int64_t *hide) {
  int layout = gen_layout_index(p->layout ? p->layout : "nn");
  bool aligned = p->align_bytes >= 16;
  /* rt_shape_distance, with the rows' logs computed at the fit (as floats: the weights move
   * by about 1e-7) */
  const double lm = (float)log_size(p->m), ln = (float)log_size(p->n), lk = (float)log_size(p->k);
  for (int t = 0; t < m->ntmpls; t++) {
    model_tmpl *tm = &m->tmpls[t];
    tm->sw = tm->swy = tm->swyy = tm->wmax = tm->used = 0;
    for (int b = 0; b < tm->nbins; b++) tm->bins[b].sw = tm->bins[b].swr = 0;
  }
  const char *cls = rt_model_dtype_class(p->dtype);
  const signed char pdt = (signed char)gen_dtype_index(p->dtype);
  for (int c = 0; c < m->ncfgs; c++) {
    model_cfg *cfg = &m->cfgs[c];
    cfg->sw = cfg->swy = cfg->swr_w = cfg->swr = cfg->wmax = 0;
    cfg->basis = 0;
    cfg->used = 0;
    if (cfg->tmpl < 0 || strcmp(cfg->dtype, cls) != 0) continue;
    for (int i = cfg->first; i < cfg->first + cfg->count; i++) {
      const model_row *r = &m->rows[i];
      if (hide && r->m == hide[0] && r->n == hide[1] && r->k == hide[2]) continue;
      double d = fabs(lm - r->lm) + fabs(ln - r->ln) + fabs(lk - r->lk);
      double f = (r->layout == layout ? 1 : RT_MODEL_OTHER_LAYOUT) *
                 (r->aligned == aligned ? 1 : RT_MODEL_OTHER_ALIGN) *
                 (r->dt == pdt ? 1 : RT_MODEL_OTHER_DTYPE);
      double w = exp(-d / RT_MODEL_BANDWIDTH) * f, wr = exp(-d / RT_MODEL_MERIT_BANDWIDTH) * f;
      cfg->sw += w;
      cfg->swy += w * r->y;
      m->tmpls[cfg->tmpl].swyy += w * r->y * r->y;
      cfg->swr_w += wr;
      cfg->swr += wr * r->r;
      for (int b = 0; b < cfg->nbins; b++) {
        model_bin *bin = &m->tmpls[cfg->tmpl].bins[cfg->bins[b]];
        bin->sw += wr;
        bin->swr += wr * r->r;
      }
      cfg->used += w >= USED_WEIGHT;
      if (w > cfg->wmax) {
        cfg->wmax = w;
        cfg->basis = r->id;
      }
    }
    model_tmpl *t = &m->tmpls[cfg->tmpl];
    t->sw += cfg->sw;
    t->swy += cfg->swy;
    t->wmax = fmax(t->wmax, cfg->wmax);
    t->used += cfg->used;
  }
}

/* rt_model_predict, and rt_model_predict_unpromoted when unpromoted */
static void predict(const rt_model *m, int config, const char *template_name, const char *params,
                    const db_launch *launch, double prior, const gen_problem *p, bool unpromoted,
                    rt_prediction *out) {
  const model_cfg *c = config >= 0 && config < m->ncfgs ? &m->cfgs[config] : NULL;
  int t = c ? c->tmpl : tmpl_index(m, template_name, p->dtype);
  const model_tmpl *tm = t >= 0 ? &m->tmpls[t] : NULL;
  /* the template near p, leaning on its mean over every shape where it has few rows near */
  double template_y = !tm || !tm->gcount ? (isnan(prior) ? RT_MODEL_UNKNOWN : prior)
                      : (tm->swy + RT_MODEL_GLOBAL_WEIGHT * tm->gy) /
                            (tm->sw + RT_MODEL_GLOBAL_WEIGHT);
  /* the config's merit against its template: what its parameter values are worth (each
   * value's mean merit over the rows that have it), then its own rows' where it has them */
  double values = 0;
  int bins[GEN_MAX_PARAMS], nb = 0;
  if (tm) nb = c ? c->nbins : params_bins((model_tmpl *)tm, params ? params : "", false, bins);
  for (int b = 0; b < nb; b++) {
    const model_bin *bin = &tm->bins[c ? c->bins[b] : bins[b]];
    values += bin->swr / (bin->sw + RT_MODEL_MERIT_SHRINK);
  }
  double own_w = c ? c->swr_w : 0, own = c ? c->swr : 0;
  /* and a config with no rows near p is uncertain: a penalty that its own rows near p remove;
   * one never measured also pays the spread of its template's y near p (how much its configs
   * disagree with the analytic part) */
  double near = c ? c->sw : 0, spread = 0;
  if (!c && tm && tm->sw > 0) {
    double mean = tm->swy / tm->sw;
    spread = sqrt(fmax(tm->swyy / tm->sw - mean * mean, 0));
  }
  double merit = (own + RT_MODEL_MERIT_SHRINK * values) / (own_w + RT_MODEL_MERIT_SHRINK) +
                 (RT_MODEL_UNMEASURED + spread) * RT_MODEL_PRIOR_WEIGHT /
                     (near + RT_MODEL_PRIOR_WEIGHT);
  double base = template_y + merit;
  double sw = c ? c->sw : 0, swy = c ? c->swy : 0;
  /* The config's own rows against that estimate.  Where its template has rows much nearer p
   * than the config's own (its other configs measured on p's neighbours, it on shapes far
   * away), the estimate weighs in with that share of the own rows' weight: a config's rows
   * at batch 128 said little about it at batch 8, where its template's rows at batch 8 and
   * 16 (the same tiles under other options) ran 1.5x slower, and it was served there. */
  double near_share = c && tm && tm->wmax > 0 ? fmax(0, 1 - c->wmax / tm->wmax) : 0;
  double wb = RT_MODEL_PRIOR_WEIGHT + RT_MODEL_FAR_OWN * near_share * sw;
  double y = (swy + wb * base) / (sw + wb);
  memset(out, 0, sizeof *out);
  /* the config's launch in p's layout: its rows' there, else the caller's, else its first's */
  const int pl = gen_layout_index(p->layout ? p->layout : "nn");
  const db_launch *use = !c                                    ? launch
                         : pl >= 0 && (c->layouts & 1u << pl) ? &c->by_layout[pl]
                         : launch                              ? launch
                                                               : &c->launch;
  db_launch bare;
  if (unpromoted && use) {
    bare = *use;
    bare.promote = 0;
    use = &bare;
  }
  out->analytic_ms = rt_model_analytic_ms(&m->dev, use, p);
  out->tile_area = rt_model_tile_area(use, p);
  out->slices = use && use->slices > 1 ? use->slices : 1;
  /* the overlap is the kernel's (its emitted launch), which a row's launch does not keep */
  db_launch with = use ? *use : (db_launch){0};
  with.overlap = with.overlap || (launch && launch->overlap);
  out->epilogue_ms = rt_model_epilogue_ms(&m->dev, use ? &with : NULL, p);
  out->ms = out->analytic_ms * exp(y) + out->epilogue_ms;
  out->rows = c ? c->used : 0;
  out->template_rows = tm ? tm->used : 0;
  out->basis_id = c ? c->basis : 0;
}

void rt_model_predict(const rt_model *m, int config, const char *template_name, const char *params,
                      const db_launch *launch, double prior, const gen_problem *p,
                      rt_prediction *out) {
  predict(m, config, template_name, params, launch, prior, p, false, out);
}

bool rt_model_may_unpromote(const gen_problem *p) {
  return p->op && p->op->fast_accum && !p->op->scale_block;
}

bool rt_model_with_promote(const gen_template *t, const char *params, int64_t promote, char *out,
                           size_t len) {
  gen_config cfg;
  const int at = gen_param_index(t, "promote");
  if (at < 0 || gen_config_parse(t, params, &cfg, NULL) || at >= cfg.n) return false;
  cfg.v[at] = promote;
  return gen_config_format(t, &cfg, out, len, NULL) == MMT_OK;
}

bool rt_model_predict_unpromoted(const rt_model *m, const gen_template *t, const char *params,
                                 const gen_problem *p, rt_prediction *out) {
  char text[256];
  const int at = gen_param_index(t, "promote");
  /* params is canonical: promote = 0 when setting it to 0 changes nothing */
  if (!rt_model_may_unpromote(p) || !rt_model_with_promote(t, params, 0, text, sizeof text) ||
      strcmp(text, params) != 0)
    return false;
  bool found = false;
  for (int j = 0; j < gen_param_value_count(t, at); j++) {
    const int64_t promote = gen_param_value(t, at, j);
    int i;
    if (promote <= 0 || !rt_model_with_promote(t, params, promote, text, sizeof text) ||
        (i = rt_model_find(m, gen_name(t), gen_source_hash(t), text, p->dtype)) < 0)
      continue;
    rt_prediction pred;
    predict(m, i, NULL, NULL, NULL, NAN, p, true, &pred);
    if (!found || pred.ms < out->ms) *out = pred;
    found = true;
  }
  if (found) out->rows = 0, out->basis_id = 0; /* the kernel itself has none */
  return found;
}
