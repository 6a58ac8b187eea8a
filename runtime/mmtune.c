/*
 * mmtune.c -- the public API (include/mmtune.h): contexts, the dispatch cache, mmt_sgemm.
 *
 * A context caches, per problem key (M, N, K, lda, ldb, ldc, alignment), the loaded kernel and
 * the description of its choice, in an open-addressing table with linear probing (load at
 * most 1/2, doubled when full).  Loaded modules are shared: every problem whose choice has
 * the same template and params launches the same module.  A warm mmt_sgemm checks its
 * arguments, probes the table, makes the device current and launches: no SQL, no Lua, no
 * NVRTC and no allocation.  A problem's choice is made once per context, at its first call;
 * rows the tuner adds to the database afterwards do not change it.
 *
 * K == 0 launches the chosen kernel with K = 0: by the kernel ABI (gen.h) it computes
 * C = alpha * (an empty sum) = 0 with beta == 0, stream-ordered like any other call (a
 * driver memset would not be ordered on the caller's stream, and rows with ldc > N would
 * need a 2D memset the driver table lacks).
 */
#include "mmtune.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "gen.h"
#include "rt_choose.h"
#include "rt_compile.h"
#include "rt_device.h"
#include "util.h"

/* Everything a choice depends on besides the device and the database.  No padding: keys are
 * compared with memcmp and hashed as bytes. */
typedef struct {
  int64_t m, n, k, lda, ldb, ldc, align;
} problem_key;

/* One cached problem: the kernel it launches (index into kernels) and how it was chosen. */
typedef struct {
  bool used;
  problem_key key;
  int kernel;
  mmt_choice choice;
} problem_slot;

/* One loaded module, shared by every problem whose choice has this template and params. */
typedef struct {
  char template_name[GEN_NAME_MAX];
  char params[256];
  rt_kernel k;
} loaded_kernel;

struct mmt_context {
  ut_err err;         /* what mmt_errmsg returns */
  mmt_status open_rc; /* how mmt_open ended: only an MMT_OK context dispatches */
  bool dev_open;
  rt_device dev;
  db_handle *db;   /* NULL: no database file (every choice is a DEFAULT) */
  char *cache_dir; /* NULL: no cubin cache */
  rt_chooser *chooser;
  problem_slot *slots; /* slot_cap is 0 or a power of two */
  int slot_cap, slot_count;
  loaded_kernel *kernels;
  int kernel_cap, kernel_count;
  uint64_t launches, hits, misses;
};

/* ---- opening and closing ---- */

static mmt_status open_db(mmt_context *ctx, const char *path) {
  char buf[4096];
  mmt_status rc;
  if (!path) {
    rc = ut_default_db_path(buf, sizeof buf, &ctx->err);
    if (rc == MMT_ERR_NOT_FOUND) { /* neither HOME nor XDG_CACHE_HOME: no database */
      ut_err_clear(&ctx->err);
      return MMT_OK;
    }
    if (rc) return rc;
    path = buf;
  }
  rc = db_open(path, true, &ctx->db, &ctx->err);
  if (rc == MMT_ERR_NOT_FOUND) { /* never tuned: template defaults */
    ctx->db = NULL;
    ut_err_clear(&ctx->err);
    return MMT_OK;
  }
  if (rc) ut_err_prefix(&ctx->err, "database '%s'", path);
  return rc;
}

static mmt_status open_cache_dir(mmt_context *ctx, const char *dir) {
  char buf[4096];
  if (!dir) {
    if (ut_default_cubin_dir(buf, sizeof buf, &ctx->err) != MMT_OK) { /* no HOME: no cache */
      ut_err_clear(&ctx->err);
      return MMT_OK;
    }
    dir = buf;
  }
  ctx->cache_dir = strdup(dir);
  if (!ctx->cache_dir) return ut_fail(&ctx->err, MMT_ERR_NOMEM, "out of memory opening mmtune");
  return MMT_OK;
}

/* Frees what the context holds and zeroes it, keeping only the message and how mmt_open
 * ended (a context whose open failed is released at once, then again by mmt_close). */
static void release(mmt_context *ctx) {
  for (int i = 0; i < ctx->kernel_count; i++) rt_kernel_unload(&ctx->kernels[i].k);
  free(ctx->kernels);
  free(ctx->slots);
  rt_chooser_free(ctx->chooser);
  db_close(ctx->db);
  free(ctx->cache_dir);
  if (ctx->dev_open) rt_device_close(&ctx->dev);
  ut_err keep = ctx->err;
  mmt_status open_rc = ctx->open_rc;
  memset(ctx, 0, sizeof *ctx);
  ctx->err = keep;
  ctx->open_rc = open_rc;
}

mmt_status mmt_open(mmt_context **out, int device, const mmt_options *options) {
  if (!out) return MMT_ERR_INVALID_ARG;
  mmt_context *ctx = calloc(1, sizeof *ctx);
  *out = ctx;
  if (!ctx) return MMT_ERR_NOMEM;
  /* The database first: a corrupt file is reported even on a machine without a GPU. */
  mmt_status rc = open_db(ctx, options ? options->db_path : NULL);
  if (!rc) rc = open_cache_dir(ctx, options ? options->cache_dir : NULL);
  if (!rc) rc = rt_chooser_new(&ctx->chooser, &ctx->err);
  if (!rc) rc = rt_device_open(device, &ctx->dev, &ctx->err);
  if (!rc) ctx->dev_open = true;
  ctx->open_rc = rc;
  if (rc) release(ctx);
  return rc;
}

void mmt_close(mmt_context *ctx) {
  if (!ctx) return;
  release(ctx);
  free(ctx);
}

const char *mmt_errmsg(const mmt_context *ctx) {
  return ctx ? ctx->err.msg : "no context (mmt_open could not allocate one)";
}

const char *mmt_choice_kind_name(mmt_choice_kind kind) {
  switch (kind) {
    case MMT_CHOICE_EXACT: return "exact";
    case MMT_CHOICE_NEAREST: return "nearest";
    case MMT_CHOICE_DEFAULT: return "default";
  }
  return "unknown";
}

void rt_dispatch_get_stats(const mmt_context *ctx, rt_dispatch_stats *out) {
  memset(out, 0, sizeof *out);
  if (!ctx) return;
  out->launches = ctx->launches;
  out->hits = ctx->hits;
  out->misses = ctx->misses;
  out->problems = ctx->slot_count;
  out->kernels = ctx->kernel_count;
}

/* A context whose mmt_open failed holds only its message. */
static mmt_status check_open(mmt_context *ctx) {
  if (ctx->open_rc == MMT_OK) return MMT_OK;
  return ut_fail(&ctx->err, ctx->open_rc,
                 "the context did not open (%s): only mmt_errmsg and mmt_close apply",
                 mmt_status_name(ctx->open_rc));
}

/* ---- the problem cache ---- */

static problem_slot *slot_find(const mmt_context *ctx, const problem_key *key) {
  if (!ctx->slot_cap) return NULL;
  size_t mask = (size_t)ctx->slot_cap - 1;
  for (size_t i = ut_hash64(key, sizeof *key) & mask;; i = (i + 1) & mask) {
    problem_slot *s = &ctx->slots[i];
    if (!s->used) return NULL; /* load <= 1/2: an empty slot always ends the probe */
    if (memcmp(&s->key, key, sizeof *key) == 0) return s;
  }
}

/* The empty slot for key in a table that has room. */
static problem_slot *slot_free(problem_slot *slots, int cap, const problem_key *key) {
  size_t mask = (size_t)cap - 1, i = ut_hash64(key, sizeof *key) & mask;
  while (slots[i].used) i = (i + 1) & mask;
  return &slots[i];
}

static mmt_status slots_grow(mmt_context *ctx) {
  int cap = ctx->slot_cap ? 2 * ctx->slot_cap : 64;
  problem_slot *slots = calloc((size_t)cap, sizeof *slots);
  if (!slots) return ut_fail(&ctx->err, MMT_ERR_NOMEM, "out of memory growing the kernel cache");
  for (int i = 0; i < ctx->slot_cap; i++)
    if (ctx->slots[i].used) *slot_free(slots, cap, &ctx->slots[i].key) = ctx->slots[i];
  free(ctx->slots);
  ctx->slots = slots;
  ctx->slot_cap = cap;
  return MMT_OK;
}

static mmt_status slot_insert(mmt_context *ctx, const problem_key *key, int kernel,
                              const mmt_choice *choice, problem_slot **out) {
  if (2 * (ctx->slot_count + 1) > ctx->slot_cap) {
    mmt_status rc = slots_grow(ctx);
    if (rc) return rc;
  }
  problem_slot *s = slot_free(ctx->slots, ctx->slot_cap, key);
  *s = (problem_slot){.used = true, .key = *key, .kernel = kernel, .choice = *choice};
  ctx->slot_count++;
  *out = s;
  return MMT_OK;
}

/* The loaded module for a choice: one already loaded with the same template and params, else
 * compiled (through the cubin cache) and loaded now. */
static mmt_status kernel_get(mmt_context *ctx, const rt_choice *ch, int *index) {
  for (int i = 0; i < ctx->kernel_count; i++) {
    const loaded_kernel *lk = &ctx->kernels[i];
    if (!strcmp(lk->template_name, ch->template_name) && !strcmp(lk->params, ch->params)) {
      *index = i;
      return MMT_OK;
    }
  }
  ut_err *err = &ctx->err;
  if (ctx->kernel_count == ctx->kernel_cap) {
    int cap = ctx->kernel_cap ? 2 * ctx->kernel_cap : 8;
    loaded_kernel *v = realloc(ctx->kernels, (size_t)cap * sizeof *v);
    if (!v) return ut_fail(err, MMT_ERR_NOMEM, "out of memory loading a kernel");
    ctx->kernels = v;
    ctx->kernel_cap = cap;
  }
  loaded_kernel *lk = &ctx->kernels[ctx->kernel_count];
  memset(lk, 0, sizeof *lk);
  rt_cubin cubin = {0};
  mmt_status rc = rt_compile_cached(ctx->cache_dir, ch->spec.source, ch->spec.kernel_name,
                                    ctx->dev.arch, &cubin, NULL, NULL, err);
  if (!rc) rc = rt_kernel_load(&ctx->dev, &cubin, &ch->spec, &lk->k, err);
  rt_cubin_free(&cubin);
  if (rc) {
    ut_err_prefix(err, "kernel %s %s", ch->template_name, ch->params);
    return rc;
  }
  memcpy(lk->template_name, ch->template_name, sizeof lk->template_name);
  memcpy(lk->params, ch->params, sizeof lk->params);
  *index = ctx->kernel_count++;
  return MMT_OK;
}

static gen_problem problem_of(const problem_key *key) {
  return (gen_problem){.dtype = "f32", .layout = "nn", .m = key->m, .n = key->n, .k = key->k,
                       .lda = key->lda, .ldb = key->ldb, .ldc = key->ldc,
                       .align_bytes = (int)key->align};
}

/* A cache miss: choose, compile, load, remember. */
static mmt_status build(mmt_context *ctx, const problem_key *key, problem_slot **out) {
  rt_choice ch = {0};
  mmt_choice desc;
  int kernel = -1;
  gen_problem p = problem_of(key);
  mmt_status rc = rt_choose(ctx->chooser, ctx->db, ctx->dev.info.name, &p, &ch, &ctx->err);
  if (rc) goto cleanup;
  rt_choice_describe(&ch, &desc);
  if ((rc = kernel_get(ctx, &ch, &kernel))) goto cleanup;
  if ((rc = slot_insert(ctx, key, kernel, &desc, out))) goto cleanup;
  ctx->misses++;
cleanup:
  rt_choice_clear(&ch);
  return rc;
}

/* The key of a problem with M, N > 0.  Alignment counts the matrices the problem uses (NULL:
 * assume well-aligned, as for explain) and every leading dimension in bytes. */
static problem_key key_of(int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                          const void *B, int64_t ldb, const void *C, int64_t ldc) {
  const uint64_t v[6] = {K > 0 ? (uint64_t)(uintptr_t)A : 0,
                         K > 0 ? (uint64_t)(uintptr_t)B : 0,
                         (uint64_t)(uintptr_t)C,
                         (uint64_t)lda * sizeof(float),
                         (uint64_t)ldb * sizeof(float),
                         (uint64_t)ldc * sizeof(float)};
  return (problem_key){M, N, K, lda, ldb, ldc, rt_align_bytes(v, 6)};
}

/* ---- GEMM ---- */

mmt_status mmt_sgemm(mmt_context *ctx, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float *C, int64_t ldc, void *stream) {
  if (!ctx) return MMT_ERR_INVALID_ARG;
  ut_err_clear(&ctx->err);
  mmt_status rc = rt_check_sgemm_args(M, N, K, A, lda, B, ldb, C, ldc, &ctx->err);
  if (!rc) rc = check_open(ctx);
  if (rc || M == 0 || N == 0) return rc;
  problem_key key = key_of(M, N, K, A, lda, B, ldb, C, ldc);
  problem_slot *s = slot_find(ctx, &key);
  if (s)
    ctx->hits++;
  else if ((rc = build(ctx, &key, &s)))
    return rc;
  rt_gemm_args args = {.m = M, .n = N, .k = K, .alpha = 1.0f, .beta = 0.0f,
                       .a = (CUdeviceptr)(uintptr_t)A, .b = (CUdeviceptr)(uintptr_t)B,
                       .c = (CUdeviceptr)(uintptr_t)C, .lda = lda, .ldb = ldb, .ldc = ldc};
  rc = rt_kernel_launch(&ctx->kernels[s->kernel].k, &args, (CUstream)stream, &ctx->err);
  if (!rc) ctx->launches++;
  return rc;
}

mmt_status mmt_sgemm_explain(mmt_context *ctx, int64_t M, int64_t N, int64_t K, int64_t lda,
                             int64_t ldb, int64_t ldc, mmt_choice *choice) {
  if (!ctx) return MMT_ERR_INVALID_ARG;
  ut_err_clear(&ctx->err);
  if (!choice) return ut_fail(&ctx->err, MMT_ERR_INVALID_ARG, "choice is NULL");
  memset(choice, 0, sizeof *choice);
  mmt_status rc = rt_check_sgemm_dims(M, N, K, lda, ldb, ldc, &ctx->err);
  if (!rc) rc = check_open(ctx);
  if (rc) return rc;
  if (M == 0 || N == 0) { /* launches nothing: DEFAULT with no template */
    choice->kind = MMT_CHOICE_DEFAULT;
    return MMT_OK;
  }
  problem_key key = key_of(M, N, K, NULL, lda, NULL, ldb, NULL, ldc);
  const problem_slot *s = slot_find(ctx, &key);
  if (s) {
    *choice = s->choice;
    return MMT_OK;
  }
  rt_choice ch = {0};
  gen_problem p = problem_of(&key);
  rc = rt_choose(ctx->chooser, ctx->db, ctx->dev.info.name, &p, &ch, &ctx->err);
  if (!rc) rt_choice_describe(&ch, choice);
  rt_choice_clear(&ch);
  return rc;
}
