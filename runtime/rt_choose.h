/*
 * rt_choose.h -- which kernel a GEMM problem gets: the dispatcher's choice logic.  Prefix rt_.  Needs no GPU and no driver (CI tests it).
 *
 * Given the results database (may be NULL), a GPU model name and a problem, rt_choose() picks:
 *   1. EXACT:   the ok rows of exactly this (device name, dtype, layout, m, n, k), fastest
 *               first; the first row that is usable for the problem (see below).
 *   2. NEAREST: the other tuned problems of this device name, dtype and layout, nearest first
 *               by the log-space distance rt_shape_distance(); for each of them (at most
 *               RT_NEAREST_MAX_SHAPES), its ok rows fastest first; the first usable row.
 *   3. DEFAULT: each config of RT_DEFAULTS in order; the first usable one.  None usable ->
 *               MMT_ERR_UNSUPPORTED, the message saying why each default was refused.
 *   A tf32 problem that none of these serves is chosen again as f32 (tf32 only permits
 *   tensor-core rounding; fp32 kernels answer it more precisely).
 * A row or default is usable when: its template loads; for rows, the template's source hash
 * still equals the row's template_hash (a template edited since it was measured is not
 * trusted); the template supports the dtype; the params parse; the template's constraints
 * pass for THIS problem; the device can run the kernel's arch; the emitted kernel's
 * requirements are met (gen_requires_met: multiples, alignment, leading dimensions); and its
 * grid for the problem is within the hardware limits and not empty.
 *
 * Thread-safety: an rt_chooser (it caches loaded templates) is used by one thread at a time.
 */
#ifndef MMT_RT_CHOOSE_H
#define MMT_RT_CHOOSE_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "gen.h"
#include "util.h"

/* Fallbacks, tried in this order: template and config ("name=value,..." over the template's
 * default; NULL: the default).  wgmma (sm_90a, TMA: 16-byte aligned rows) serves f16/bf16 and
 * tf32 in layout nt on Hopper; mma_sync (tensor cores, sm_80+) f16/bf16 elsewhere, its
 * realigned-copy variant (vec=0) the problems whose rows are not 16-byte aligned (twice the
 * element-wise vec=1 at 4097^3 on an H200); smem_tiled and naive serve f32. */
#define RT_DEFAULTS                                                                         \
  {{"wgmma", NULL},                                                                         \
   {"mma_sync", NULL},                                                                      \
   {"mma_sync", "bm=64,bn=64,wm=32,wn=32,stages=5,vec=0,group=1"},                          \
   {"smem_tiled", NULL},                                                                    \
   {"naive", NULL}}
/* How many tuned shapes NEAREST considers (the nearest ones) before falling back. */
#define RT_NEAREST_MAX_SHAPES 64

/* A chooser: caches every template it loaded (and every load that failed) by name, so a
 * choice runs no Lua file load after the first. */
typedef struct rt_chooser rt_chooser;

/* Creates an empty chooser for a device of device_arch ("sm_90"): kernels it cannot run (an
 * sm_90a kernel elsewhere: rt_kernel_arch) are refused.  NULL or "": any architecture (e.g.
 * `mmtune explain --device-name`, answered from the database alone).  Errors: MMT_ERR_NOMEM. */
mmt_status rt_chooser_new(const char *device_arch, rt_chooser **out, ut_err *err);
/* Frees the chooser and its templates.  rt_chooser_free(NULL) is a no-op. */
void rt_chooser_free(rt_chooser *ch);

/* A choice.  Zero-initialize before rt_choose; free with rt_choice_clear. */
typedef struct {
  mmt_choice_kind kind;
  char template_name[GEN_NAME_MAX];
  char params[256];  /* canonical "name=value,..." (gen_config_format) */
  bool has_record;   /* false for DEFAULT */
  db_result record;  /* the measured row the choice relies on, when has_record */
  gen_template *tmpl; /* borrowed from the chooser: valid until rt_chooser_free */
  gen_config cfg;
  gen_kernel spec;    /* owned: the emitted kernel for the problem's dtype, ready to compile */
} rt_choice;

/*
 * Chooses a kernel for problem p on GPU model device_name (db_device.name), by the rules at
 * the top of this file.  db may be NULL (no tuning data: DEFAULT).  out must be zeroed (or
 * cleared); it is filled only on success.
 * Errors: MMT_ERR_UNSUPPORTED (nothing usable; the message says why), MMT_ERR_DB (a query
 * failed), MMT_ERR_INVALID_ARG (dtype/layout text too long for the database), MMT_ERR_NOMEM.
 * Broken templates and rows are skipped, not errors.
 */
mmt_status rt_choose(rt_chooser *ch, db_handle *db, const char *device_name, const gen_problem *p,
                     rt_choice *out, ut_err *err);
/* Frees the emitted kernel and zeroes the choice.  Safe on a zeroed struct. */
void rt_choice_clear(rt_choice *c);
/* The public description of choice c made for problem p (the record's fields are 0 / ""
 * for DEFAULT; expected_ms: see mmtune.h). */
void rt_choice_describe(const rt_choice *c, const gen_problem *p, mmt_choice *out);

/*
 * The distance NEAREST orders tuned shapes by: the L1 distance of the shapes in log space,
 *   d = |ln(m/m')| + |ln(n/n')| + |ln(k/k')|,
 * so that halving or doubling any one dimension costs the same (ln 2) whatever its size, and
 * 1000^3 is near 1024^3 but far from 64^3.  Sizes below 1 count as 1.
 */
double rt_shape_distance(int64_t m, int64_t n, int64_t k, int64_t m2, int64_t n2, int64_t k2);


/* mmt_explain without a context or a GPU: the choice for p (checked as mmt_gemm checks it,
 * pointers as from cudaMalloc) on GPU model device_name from db (may be NULL).  The same
 * mapping and choice as mmt_explain's (runtime/mmtune.c); `mmtune explain --device-name`
 * uses it.  Errors: rt_gemm_check's and rt_choose's. */
mmt_status rt_explain(rt_chooser *ch, db_handle *db, const char *device_name, const mmt_problem *p,
                      mmt_choice *out, ut_err *err);

/* Dispatcher figures of a context (mmtune.c), for tests and diagnostics. */
typedef struct {
  uint64_t launches; /* mmt_gemm calls that launched a kernel */
  uint64_t hits;     /* ... of which found their problem in the context's cache */
  uint64_t misses;   /* ... of which chose, compiled and loaded (or reused a loaded module) */
  int problems;      /* problems in the cache */
  int kernels;       /* loaded modules (distinct template + params) */
} rt_dispatch_stats;
/* Fills *out from ctx (zeroes when ctx is NULL). */
void rt_dispatch_get_stats(const mmt_context *ctx, rt_dispatch_stats *out);

#endif /* MMT_RT_CHOOSE_H */
