/*
 * rt_model.h -- the performance model: a kernel's predicted time for a problem on one GPU
 * model, fitted on what the database measured there.  Prefix rt_model_ (and rt_launch_of,
 * rt_shape_distance).  Needs no GPU or driver, so CI tests it.  The dispatcher (rt_choose.h)
 * ranks its candidates with it, the tuner's `model` strategy orders its search by it, and
 * `mmtune model evaluate` measures it.
 *
 *   predicted ms = analytic(launch, problem, device) * exp(correction) + epilogue
 *
 * (epilogue: an op's work after each unit's main loop, rt_model_epilogue_ms; 0 for the plain
 * GEMM; an op row's correction is fitted on its time less this term)
 *
 * Analytic (rt_model_analytic_ms), from the config's launch shape (db_launch): the work units
 * are the tiles of C times the split-K slices; each SM runs ceil(units / SMs) of them one after
 * another (wave quantization: 133 units on 132 SMs take two rounds); a unit costs the larger of
 * its flops at the SM's peak for the dtype and its bytes (operand tiles along K, its tile of C)
 * at the SM's share of L2 bandwidth (small tiles re-read more); each round fills a pipeline
 * first (once for a persistent kernel); the problem's compulsory bytes (A and B once, C read
 * and written) at the grid's share of DRAM bandwidth bound the whole (all of it from units on
 * RT_MODEL_DRAM_SMS of the SMs, or from RT_MODEL_DRAM_INFLIGHT bytes of ring stages in flight:
 * db_launch.shared_bytes); plus a launch.  The constants below were
 * chosen by `mmtune model evaluate` on two H100 databases
 * (docs/history/performance-model.md).  The peaks are per architecture (RT_MODEL_* below), leads only: the correction absorbs what they miss.
 *
 * Correction: the log ratio y = ln(measured / analytic) of the database's ok rows of the GPU
 * model, averaged by kernel regression in log-shape space.  For a problem p, a row at
 * distance d = rt_shape_distance(p, row) weighs w = exp(-d / RT_MODEL_BANDWIDTH), times
 * RT_MODEL_OTHER_LAYOUT when its layout differs (a config behaves alike across layouts, not
 * the same), and RT_MODEL_OTHER_DTYPE when it is of the other 16-bit dtype (f16 and bf16 run
 * the same kernels: a bf16 search starts from what f16 measured, and back).  Then, over the
 * rows of the problem's dtype class:
 *   own(c)      = sum w y / sum w over the rows of config c (template, hash, params, class);
 *   template(t) = the same over every row of template t, + RT_MODEL_UNMEASURED (the rows
 *                 are the configs searches chose to measure, better than a config never
 *                 measured);
 *   correction  = (sum w * own + RT_MODEL_PRIOR_WEIGHT * template) / (sum w +
 *                 RT_MODEL_PRIOR_WEIGHT)
 * so a config measured near p is predicted from its own rows, one measured far away leans on
 * its template's rows near p, and one never measured is its template's.  (In rt_model_predict
 * the config's rows weigh against an estimate from its template's rows near p and its
 * merit, which also gets RT_MODEL_FAR_OWN x (1 - the config's nearest row weight / the
 * template's) of their weight: a config whose own rows are all much farther from p than its
 * template's does not ride on them alone.)  A template with no rows of the dtype takes the
 * caller's prior (the dispatcher's built-in list), else RT_MODEL_UNKNOWN.
 *
 * Fit (rt_model_fit): one pass over the rows (db_each_model_row), about 100 ms for 10^5 rows;
 * the caller caches the model and fits again when the rows change (db_data_version), and the
 * chooser keeps fits on disk for the next process (rt_chooser_set_fit_cache: rt_model_pack's
 * bytes, read back in about 5 ms at 10^5 rows).  Rows of one problem count: plain GEMMs' and
 * op kernels' (mmt_matmul's epilogues), the latter as the product once the epilogue's term
 * (rt_model_epilogue_ms, overlapped or not as the config's kernel is: the launch hook) is off;
 * a batch's or a grouped call's rows do not (their times hang on the batch walk, the routing).
 * Rows written before schema 4 have no launch shape: the caller's resolver gives it (an
 * emit), or they are left out.
 *
 * Thread-safety: a model is used by one thread at a time (rt_model_focus keeps per-problem
 * sums in it).
 */
#ifndef MMT_RT_MODEL_H
#define MMT_RT_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "gen.h"
#include "util.h"

/* The constants below were chosen by coordinate descent on leave-one-shape-out (`mmtune model
 * evaluate`) over three H100 main-job databases of 2026-11-25; a fourth, held out, scored the
 * same as with the constants before (docs/history/performance-model.md).
 * RT_MODEL_OTHER_LAYOUT stays at 0.25, where leave-one-out scores the same as at its best, 0.1: at 0.1 the main job's few nt rows
 * (decode sizes) outweighed every nn row on mid-size nt problems, which it never tunes, and
 * small-block kernels were served there at half of wgmma's speed. */
#define RT_MODEL_BANDWIDTH 2.0     /* log-shape distance at which a row's weight is 1/e */
#define RT_MODEL_MERIT_BANDWIDTH 2.0 /* the same for a config's merit over its template */
#define RT_MODEL_MERIT_SHRINK 3.0  /* weight of "no better or worse than its template" */
#define RT_MODEL_OTHER_LAYOUT 0.25 /* weight factor of a row measured in another layout */
#define RT_MODEL_OTHER_ALIGN 0.1   /* ... on a problem 16-byte aligned where p is not, or back */
#define RT_MODEL_OTHER_DTYPE 0.5   /* ... in the other 16-bit dtype (f16 for bf16, or back) */
#define RT_MODEL_PRIOR_WEIGHT 0.1  /* the template's weight against a config's own rows */
#define RT_MODEL_FAR_OWN 1.0       /* ... plus this share of theirs where they are far (predict) */
#define RT_MODEL_GLOBAL_WEIGHT 0.02 /* a template's mean over all shapes, against its rows near */
#define RT_MODEL_UNMEASURED 0.70   /* log penalty of a config with no rows near the problem */
#define RT_MODEL_UNKNOWN 1.5       /* correction of a template with no rows and no prior */
#define RT_MODEL_LAUNCH_MS 0.003   /* a launch, and the first tile's latency */
#define RT_MODEL_FILL_MS 0.001     /* filling a block's pipeline, once per round of work units */
#define RT_MODEL_SM_THREADS 2048   /* threads an SM holds at most */
#define RT_MODEL_BUSY_WARPS 8      /* warps that keep an SM's FMA pipelines busy (sm_busy) */
#define RT_MODEL_CVT_FMA_SHARE 0.3 /* FMA's rate on converted 16-bit or FP8 inputs (tiles < 8) */
#define RT_MODEL_DRAM_SMS 0.75     /* share of the SMs whose loads in flight fill DRAM */
#define RT_MODEL_DRAM_INFLIGHT 4e6 /* bytes in flight that fill DRAM (its bandwidth x ~1.5 us) */
/* L2 bandwidth over DRAM's.  2.0 to 3.0 rank 128x11008x4096 f16 (an L2-bound problem for
 * 32-row tiles) right, but score leave-one-out lower (an H200 main job: bf16 0.933 ->
 * 0.899-0.908, worst 0.748 -> 0.584; the H100 fixture: f16 0.869 -> 0.74-0.76). */
#define RT_MODEL_L2_FACTOR 4.0
/* L2 traffic of an operand whose row pitch is not a multiple of 32 bytes: a 128-byte row of a
 * tile spans five sectors on every other row (3000^3 f16, wgmma 128 x 256: 0.1429 ms against
 * 0.1157 with the pitches padded to 3008, before the L2 promotion of 128 bytes; 0.126 after). */
#define RT_MODEL_SECTOR_WASTE 1.15
/* A cluster's blocks wait for one another at every stage (a stage is refilled once each has
 * released it): clusters of two ran 1-7% slower on rows of whole sectors (1536^3 to 8192^3
 * f16), where multicasting B saved nothing; on rows off them they save about the sectors'
 * cost (the analytic time counts no RT_MODEL_SECTOR_WASTE for them). */
#define RT_MODEL_CLUSTER_WAIT 1.04
/* An FP8 kernel's promotion of its partial sums into fp32, once every db_launch.promote K tiles:
 * the consumers wait for their wgmmas to finish and add, while the tensor cores idle.  Its
 * share of the main loop at one K tile an interval: wgmma's 128 x 256 persistent tiles (by
 * halves) against the same tiles without promotion, e4m3 -> bf16 (H100, 2026-12-07): 8192^3
 * 0.9172 against 0.8694 ms, 4096^3 0.1184 against 0.1026, 2048 x 14336 x 4096 0.2066 against
 * 0.1914.  Without it the model tied the two, and a call that allows fast accumulation was
 * served a promoting kernel. */
#define RT_MODEL_PROMOTE_COST 0.08
/* An op epilogue's work beyond a plain store, in ns an element of a work unit's tile on one SM
 * for each unit of rt_model_epilogue_ms's weights (a bias is 1; tanh GELU through __expf 1.2):
 * wgmma's 128 x 256 tiles at 8192 x 4096 x 4096 f16 on an H100 ran 3.3 us a tile longer with a
 * column bias, 7.2 us with a bias and tanh GELU, where the tensor cores wait for it -- when the
 * epilogue read and stored pair by pair, as the other templates' still do.  wgmma's 16-bit path
 * now reads a run of pairs first (the epilogue snippet's EPI_RUN): bias and tanh GELU there
 * cost about 2 us a tile (0.03 ns an element a unit), which this constant does not tell apart. */
#define RT_MODEL_EPILOGUE_NS 0.1
/* A residual's read of C in the epilogue (gen_op.residual), in those units a byte of C's
 * element.  On an H100 at 8192 x 4096 x 4096 f16 (nt), since the 16-bit epilogues read a run
 * of C's pairs before they store any (the epilogue snippet's EPI_RUN), a C added cost wgmma's
 * cooperative 128 x 256 0.0029 ms (0.4556 -> 0.4585 ms; 0.05 units a byte) and ping-pong's
 * 128 x 128 0.0101 ms (0.4519 -> 0.4620; its C read beside the other consumer's main loop:
 * 1.5 units a byte of its two exposed units); a store after each pair's read had cost the
 * cooperative kernel 0.0476 ms. */
#define RT_MODEL_C_READ_WEIGHT 0.5

/* The GPU the model predicts for.  sm_count 0: the rows' count, else 132; cc_major 0: the
 * rows', else 9. */
typedef struct {
  int sm_count;
  int cc_major;
} rt_model_device;

typedef struct rt_model rt_model;

/* What the fit asks of the templates about a row (each may be NULL; errors other than
 * MMT_ERR_NOMEM just leave the row out). */
typedef struct {
  /* The launch shape of a row measured before schema 4 (out zeroed: unknown, the row is left
   * out); asked too of a config's first op row, for its kernel's epilogue_overlap (which no
   * column keeps). */
  mmt_status (*launch)(const db_model_row *row, db_launch *out, void *user, ut_err *err);
  /* The template hash the row's config is known by (*hash NULL: the row's own): the
   * template's as it is now where the row measured the kernel it emits now
   * (rt_provenance.h), so rows from before an edit that kept the kernels stay its configs. */
  mmt_status (*hash)(const db_model_row *row, const char **hash, void *user, ut_err *err);
  void *user;
} rt_fit_hooks;

/*
 * Fits a model on the ok rows of GPU model device_name in db (NULL: an empty model, which
 * predicts from the analytic part and the priors alone).  dev: what is known of the device
 * (NULL: all unknown).  hooks may be NULL (rows without a launch shape are left out; every
 * row is known by its own template hash).  out: OUT, owned by the caller (rt_model_free).
 * Errors: db_each_model_row's, MMT_ERR_NOMEM.
 */
mmt_status rt_model_fit(db_handle *db, const char *device_name, const rt_model_device *dev,
                        const rt_fit_hooks *hooks, rt_model **out, ut_err *err);
/* rt_model_free(NULL) is a no-op. */
void rt_model_free(rt_model *m);

/*
 * The fit as bytes, and back (rt_model_pack.c): what the chooser keeps on disk so that a
 * process's first choice reads a fit instead of redoing it (10^5 rows: about 90 ms to fit, a
 * few to read).  The bytes are this build's layout, checked on unpack (a header of sizes,
 * RT_MODEL_PACK_FORMAT, a print of the model's constants and analytic part; every count and
 * index), not a portable format.  A model fitted with
 * launch shapes from the resolver (rows written before schema 4: an emit of today's
 * templates) is not packed (MMT_ERR_UNSUPPORTED): the bytes would outlive a template edit.
 * rt_model_pack: *data (malloc'd, the caller frees) and *len.  Errors: MMT_ERR_UNSUPPORTED,
 * MMT_ERR_NOMEM.  rt_model_unpack: *out, owned by the caller.  Errors: MMT_ERR_IO (bytes
 * of another build, truncated or inconsistent; the message says which), MMT_ERR_NOMEM.
 * rt_model_unpack_map: the same from the bytes at `offset` of map (map_len bytes from mmap,
 * readable), which the model then owns (munmap by rt_model_free; on failure, here): its rows
 * are read in place, not copied (a fresh process would spend milliseconds faulting in the
 * pages of a 7 MB copy).
 */
/* Bump when what the fit computes changes but no struct size, constant or analytic time does
 * (e.g. how merits are averaged). */
/* 2: a config holds its dtype class; 3: a row names its dtype by gen_dtype_index */
#define RT_MODEL_PACK_FORMAT 4
mmt_status rt_model_pack(const rt_model *m, void **data, size_t *len, ut_err *err);
mmt_status rt_model_unpack(const void *data, size_t len, rt_model **out, ut_err *err);
mmt_status rt_model_unpack_map(void *map, size_t map_len, size_t offset, rt_model **out,
                               ut_err *err);

/* The device the model predicts for, unknowns filled in (from its rows, else defaults). */
rt_model_device rt_model_get_device(const rt_model *m);
/* Rows the model was fitted on. */
int rt_model_row_count(const rt_model *m);

/* A dtype's class: f16 and bf16 are RT_MODEL_CLASS_16 (one kernel but for its conversions:
 * the same bytes, the same tensor-core rate), every other dtype its own.  A config of the
 * model holds the rows of its class (its f16 rows and its bf16 rows), each weighing
 * RT_MODEL_OTHER_DTYPE for a problem of the other type. */
#define RT_MODEL_CLASS_16 "16-bit"
const char *rt_model_dtype_class(const char *dtype);

/* The configs the model has rows of: index 0..rt_model_config_count()-1. */
typedef struct {
  unsigned layouts; /* bit gen_layout_index(l): the config has rows in layout l */
  const char *template_name, *template_hash, *params; /* borrowed from the model */
  const char *dtype; /* its dtype's class (rt_model_dtype_class), borrowed */
  db_launch launch; /* its first row's */
  int rows;
} rt_model_config;
int rt_model_config_count(const rt_model *m);
void rt_model_get_config(const rt_model *m, int i, rt_model_config *out);
/* The index of the config with these fields (dtype: a dtype or a class; the config of its
 * class), or -1 (a hash lookup). */
int rt_model_find(const rt_model *m, const char *template_name, const char *template_hash,
                  const char *params, const char *dtype);

/* Sets the problem the next predictions are for: one pass over the rows of p's dtype's class.  hide
 * (may be NULL): rows of exactly this shape (m, n, k) are left out, as if never measured
 * (leave-one-shape-out). */
void rt_model_focus(rt_model *m, const gen_problem *p, const int64_t *hide);

typedef struct {
  double ms;           /* predicted time */
  double analytic_ms;  /* the analytic part alone */
  double epilogue_ms;  /* an op epilogue's part of ms (rt_model_epilogue_ms) */
  int rows;            /* rows of the config that weighed in (weight >= 1e-3) */
  int template_rows;   /* rows of its template that weighed in */
  int64_t basis_id;    /* the config's heaviest row (0: none): what the prediction relies on */
  double tile_area;    /* C's elements its tiles cover (rt_model_tile_area): ranks equal times */
  int slices;          /* split-K's slices of its launch (1: none): ranks equal times and areas */
} rt_prediction;

/*
 * The predicted time of a config on the focused problem p (the same p as rt_model_focus's).
 * config: an index of the model, or -1 for a config it has no rows of, described by
 * template_name, params (canonical "name=value,...") and launch.  For an index, the launch
 * shape is that of the config's rows in p's layout; where it has none there, `launch` when
 * given (the config emitted for p's layout: a template's grid may depend on the layout), else
 * its first row's.  prior: the correction to use when the template has no rows (NaN:
 * RT_MODEL_UNKNOWN).
 */
void rt_model_predict(const rt_model *m, int config, const char *template_name,
                      const char *params, const db_launch *launch, double prior,
                      const gen_problem *p, rt_prediction *out);

/*
 * The prediction of t's config `params` (canonical), a kernel that never promotes its FP8
 * partial sums (promote = 0: what a fast_accum problem may run), from the rows of the same
 * config promoting (each other promote value the model has rows of under t's current source;
 * the lowest): the same tiles and pipeline less the promotions' waits, their rows' correction
 * carried over (the promotions' cost is the analytic part's, RT_MODEL_PROMOTE_COST).  False
 * (out untouched) when params does not have promote = 0 or no such rows exist.  out->rows and
 * basis_id are 0: the kernel itself has no rows.  (On an H100, the main job's fast_accum
 * problem, 4096 x 8192 x 8192, ran a config 1.10x faster with promote = 0 than with 1.)
 */
bool rt_model_predict_unpromoted(const rt_model *m, const gen_template *t, const char *params,
                                 const gen_problem *p, rt_prediction *out);
/* t's config `params` with its promote parameter set to `promote`, canonical, into out (len
 * bytes); false when t has no such parameter or params does not parse or fit. */
bool rt_model_with_promote(const gen_template *t, const char *params, int64_t promote, char *out,
                           size_t len);
/* Whether p may run an FP8 kernel that never promotes: an op that allows fast accumulation
 * and has no block scales (whose kernels promote every K block).  rt_model_predict_unpromoted
 * is false for any other p. */
bool rt_model_may_unpromote(const gen_problem *p);

/* The time an op's epilogue adds to a launch whose units run it after their main loop (0 for
 * the plain GEMM and an op of plain stores): each SM's units in turn times their tile's
 * elements times RT_MODEL_EPILOGUE_NS times the op's weight (a bias 1, a scale vector 0.5, an
 * FP8 D 0.5, the activation: relu 0.2, silu 1, tanh GELU 1.2, erf GELU 2; gated: half of it and
 * a product; a residual's C RT_MODEL_C_READ_WEIGHT a byte of its element).  A launch with
 * `overlap` hides every unit's but the SM's last, which one of two consumers runs alone: two
 * units' worth (so ping-pong loses where each SM has one tile, ties at two).  Added to
 * rt_model_predict's time, outside the fitted part (an op row is fitted with it taken off). */
double rt_model_epilogue_ms(const rt_model_device *dev, const db_launch *launch,
                            const gen_problem *p);

/* The analytic part alone (see the top of this file), in ms. */
double rt_model_analytic_ms(const rt_model_device *dev, const db_launch *launch,
                            const gen_problem *p);

/* The elements of C a launch's tiles cover, every problem of the batch padded to whole tiles
 * (slices of K not counted).  Where the compulsory DRAM traffic bounds every config of a
 * template alike (decode-size M, FP8 decode), their predictions are equal; the one whose
 * tiles overhang the problem least loads and computes least for nothing (a 128-row tile over
 * 16 rows: 8 times the rows; wgmma's swapped 64 x 16 tile: none).  Configs that cover the
 * same area rank by their slices (fewer first: slices write and read partial tiles that such
 * a bound does not count: 128 x 4096 x 4096 with an f32 D ran 128 x 64 tiles in 4 slices in
 * 0.0269 ms on an H100, 64 x 64 unsplit, tied with it, in 0.0206), then in name order. */
double rt_model_tile_area(const db_launch *launch, const gen_problem *p);

/* The peaks the analytic part assumes for a GPU of dev (unknowns: the defaults above) and
 * dtype: *flops_per_s, the whole GPU's math rate (tensor cores for 16-bit inputs and tf32,
 * fp32 FMA otherwise), and *bytes_per_s, its DRAM bandwidth.  Leads from the datasheets, per
 * architecture (`mmtune report` draws its rooflines with them). */
void rt_model_peaks(const rt_model_device *dev, const char *dtype, double *flops_per_s,
                    double *bytes_per_s);

/* The launch shape of kernel k, emitted from config cfg of template t: tiles from its grid
 * rule (x over N, y over M, z the split-K slices); a persistent grid (per SM) takes its tile
 * from the parameters bm and bn and its slices from split.  Errors: MMT_ERR_TEMPLATE when
 * the grid says neither (the message names the template). */
mmt_status rt_launch_of(const gen_template *t, const gen_config *cfg, const gen_kernel *k,
                        db_launch *out, ut_err *err);

/*
 * The distance between two shapes: the L1 distance in log space,
 *   d = |ln(m/m')| + |ln(n/n')| + |ln(k/k')|,
 * so that halving or doubling any one dimension costs the same (ln 2) whatever its size, and
 * 1000^3 is near 1024^3 but far from 64^3.  Sizes below 1 count as 1.
 */
double rt_shape_distance(int64_t m, int64_t n, int64_t k, int64_t m2, int64_t n2, int64_t k2);

#endif /* MMT_RT_MODEL_H */
