/*
 * dispatch.c -- mmtune-dispatch-bench: the host cost of mmt_sgemm's dispatch.
 *
 * The targets it reports against (from the dispatcher's issue):
 *   warm dispatch (tuned shape, module loaded): host overhead <= 1 us per call above a bare
 *     cuLaunchKernel of the same kernel, over >= 100k calls; no SQL on that path;
 *   cold start (new process, tuned shape, cubin in the disk cache): first call <= 5 ms, no
 *     NVRTC run.
 *
 * Usage:
 *   mmtune-dispatch-bench [--device N] [--db PATH] [--calls N] [--batch N] [--runs N] [M N K]
 * On the GPU machine, after tuning the shape into the database:
 *   build/bench/mmtune-dispatch-bench --device 0 --db /tmp/mmtune.db 256 256 256
 * Without a GPU it prints one line "mmtune-dispatch-bench: <reason>" and exits 1; bad
 * arguments exit 2.  Each figure is printed with "met" or "MISSED" against its target; the
 * exit code does not judge them (timing is noisy).
 *
 * How it measures:
 *   warm: after a first call (choice, compile or disk cache, module load) and warm-up calls,
 *     a batch of --batch calls of mmt_sgemm and a batch of cuLaunchKernel on the same kernel
 *     (the chosen template and params, emitted, compiled through the same cubin cache and
 *     loaded in the same context) take turns.  Only the enqueue of each batch is timed
 *     (CLOCK_MONOTONIC); the stream is synchronized between batches, so the launch queue never
 *     fills and GPU time is not measured.  Both results are compared bit for bit first.
 *     Reported: median over batches and mean, in ns per call, and the difference.  The
 *     dispatcher's counters (rt_dispatch_get_stats) show that every timed call was a cache
 *     hit: no choice, so no SQL, Lua or NVRTC.  That the hit path allocates nothing is the
 *     dispatcher's design (runtime/mmtune.c), not measured here.
 *   cold: --runs fresh processes (this program re-executed with a hidden flag) each time
 *     mmt_open, then separately the first mmt_sgemm plus a stream synchronize.  The warm run
 *     before them leaves the cubin in the disk cache.  NVRTC runs are counted by wrapping
 *     nvrtcCompileProgram (below).  Reported: the median of each and every run's figures.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <nvrtc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gen.h"
#include "bench_cli.h"
#include "mmtune.h"
#include "rt_choose.h"
#include "rt_compile.h"
#include "rt_device.h"
#include "cli/args.h"
#include "util.h"

#define PROG "mmtune-dispatch-bench"
#define COLD_CHILD_FLAG "--cold-child" /* hidden: this process is one cold-start run */
#define WARMUP_BATCHES 8
#define WARM_TARGET_NS 1000.0
#define COLD_TARGET_MS 5.0
#define MAX_RUNS 100

typedef struct {
  int device;
  const char *db; /* NULL: the library's default */
  int64_t m, n, k;
  int64_t calls, batch, runs;
  bool cold_child;
} bench_opts;

/* ---- NVRTC runs in this process ---- */

/* The runtime is linked into this executable, so this definition is the one rt_compile calls;
 * it counts, then calls libnvrtc's. */
static int nvrtc_compiles;

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char *const *options) {
  static __typeof__(&nvrtcCompileProgram) real;
  if (!real) real = (__typeof__(real))dlsym(RTLD_NEXT, "nvrtcCompileProgram");
  nvrtc_compiles++;
  return real ? real(prog, numOptions, options) : NVRTC_ERROR_INTERNAL_ERROR;
}

/* ---- arguments ---- */

static void print_usage(void) {
  printf(
          "usage: " PROG " [--device N] [--db PATH] [--calls N] [--batch N] [--runs N] [M N K]\n"
          "Host time of mmt_sgemm per call against a bare cuLaunchKernel of the same kernel\n"
          "(warm), and mmt_open plus the first call in fresh processes (cold).\n"
          "  --device N   CUDA device ordinal (default 0)\n"
          "  --db PATH    mmtune database (default: $MMTUNE_DB, else the cache folder's)\n"
          "  --calls N    timed calls of each kind (default 200000)\n"
          "  --batch N    calls enqueued between stream synchronizations (default 256)\n"
          "  --runs N     fresh processes timed for the cold start (default 5; 0: none)\n"
          "  M N K        the problem, row-major fp32 (default 256 256 256)\n");
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, bench_opts *o) {
  static const struct option longs[] = {
      {"device", required_argument, NULL, 'd'}, {"db", required_argument, NULL, 'b'},
      {"calls", required_argument, NULL, 'c'},  {"batch", required_argument, NULL, 'B'},
      {"runs", required_argument, NULL, 'r'},   {"help", no_argument, NULL, 'h'},
      {"cold-child", no_argument, NULL, 'C'},   {NULL, 0, NULL, 0}};
  *o = (bench_opts){.m = 256, .n = 256, .k = 256, .calls = 200000, .batch = 256, .runs = 5};
  int64_t device = 0;
  int c, bad = 0;
  opterr = 0;
  while (!bad && (c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
    switch (c) {
      case 'd': bad = bench_parse_number(optarg, "--device", 0, INT_MAX, &device); break;
      case 'b': o->db = optarg; break;
      case 'c': bad = bench_parse_number(optarg, "--calls", 1, 1000000000, &o->calls); break;
      case 'B': bad = bench_parse_number(optarg, "--batch", 1, 4096, &o->batch); break;
      case 'r': bad = bench_parse_number(optarg, "--runs", 0, MAX_RUNS, &o->runs); break;
      case 'C': o->cold_child = true; break;
      case 'h': print_usage(); return 0;
      default: return bench_option_error(c, argv);
    }
  }
  if (bad) return bad;
  if ((bad = bench_parse_mnk(argc, argv, optind, &o->m, &o->n, &o->k))) return bad;
  o->device = (int)device;
  return -1;
}

/* ---- the GPU side: context, stream, buffers ---- */

typedef struct {
  const bench_opts *o;
  mmt_context *ctx;
  const rt_cu *cu;
  rt_device dev; /* this program's own hold on the device: the same primary context */
  CUstream stream;
  CUdeviceptr a, b, c, c2; /* c: mmt_sgemm's output, c2: the bare kernel's */
} bench_gpu;

/* mmt_open alone (the cold start times it). */
static mmt_status open_mmt(bench_gpu *g, const bench_opts *o, ut_err *err) {
  memset(g, 0, sizeof *g);
  g->o = o;
  mmt_options opts = {.db_path = o->db};
  mmt_status rc = mmt_open(&g->ctx, o->device, &opts);
  if (rc)
    return ut_fail(err, rc, "mmt_open: %s: %s", mmt_status_name(rc), mmt_errmsg(g->ctx));
  return MMT_OK;
}

/* A matrix of rows x cols with a non-zero pattern in [-0.5, 0.5], on the device. */
static mmt_status upload(const rt_cu *cu, int64_t rows, int64_t cols, int salt, CUdeviceptr *out,
                         ut_err *err) {
  mmt_status rc = MMT_OK;
  size_t count = (size_t)rows * (size_t)cols;
  float *host = malloc(count * sizeof *host);
  if (!host) return ut_fail(err, MMT_ERR_NOMEM, "out of memory for a %lldx%lld matrix",
                            (long long)rows, (long long)cols);
  for (size_t i = 0; i < count; i++) host[i] = (float)((i * 7 + (size_t)salt) % 13) / 13.0f - 0.46f;
  RT_CU_CHECK(cu, cuMemAlloc(out, count * sizeof *host));
  RT_CU_CHECK(cu, cuMemcpyHtoD(*out, host, count * sizeof *host));
cleanup:
  free(host);
  return rc;
}

/* After open_mmt: the driver table, the device (its primary context made current on this
 * thread), a stream, and A, B (filled), C, C2 (zeroed). */
static mmt_status open_rest(bench_gpu *g, ut_err *err) {
  const bench_opts *o = g->o;
  size_t c_count = (size_t)o->m * (size_t)o->n;
  mmt_status rc = rt_driver(&g->cu, err);
  if (!rc) rc = rt_device_open(o->device, &g->dev, err);
  if (rc) return rc;
  const rt_cu *cu = g->cu;
  RT_CU_CHECK(cu, cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING));
  if ((rc = upload(cu, o->m, o->k, 1, &g->a, err)) || (rc = upload(cu, o->k, o->n, 5, &g->b, err)))
    goto cleanup;
  RT_CU_CHECK(cu, cuMemAlloc(&g->c, c_count * sizeof(float)));
  RT_CU_CHECK(cu, cuMemAlloc(&g->c2, c_count * sizeof(float)));
  RT_CU_CHECK(cu, cuMemsetD32(g->c, 0, c_count));
  RT_CU_CHECK(cu, cuMemsetD32(g->c2, 0, c_count));
cleanup:
  return rc;
}

/* Frees what open_mmt and open_rest made.  Safe on a zeroed struct. */
static void close_gpu(bench_gpu *g) {
  if (g->cu && g->dev.ctx && rt_device_bind(&g->dev, NULL) == MMT_OK) {
    CUdeviceptr bufs[4] = {g->a, g->b, g->c, g->c2};
    for (int i = 0; i < 4; i++)
      if (bufs[i]) g->cu->cuMemFree(bufs[i]);
    if (g->stream) g->cu->cuStreamDestroy(g->stream);
  }
  mmt_close(g->ctx);
  rt_device_close(&g->dev);
  memset(g, 0, sizeof *g);
}

static mmt_status sgemm(bench_gpu *g, CUdeviceptr c, ut_err *err) {
  const bench_opts *o = g->o;
  mmt_status rc = mmt_sgemm(g->ctx, o->m, o->n, o->k, (const float *)(uintptr_t)g->a, o->k,
                            (const float *)(uintptr_t)g->b, o->n, (float *)(uintptr_t)c, o->n,
                            g->stream);
  if (rc) return ut_fail(err, rc, "mmt_sgemm: %s: %s", mmt_status_name(rc), mmt_errmsg(g->ctx));
  return MMT_OK;
}

static mmt_status sync_stream(bench_gpu *g, ut_err *err) {
  CUresult r = g->cu->cuStreamSynchronize(g->stream);
  return r == CUDA_SUCCESS ? MMT_OK : rt_cu_fail(err, "cuStreamSynchronize", r);
}

/* ---- the bare kernel: the dispatcher's choice, loaded a second time ---- */

typedef struct {
  rt_kernel k; /* in g's context */
  unsigned grid[3];
  int m, n, kk, lda, ldb, ldc;
  float alpha, beta;
  CUdeviceptr a, b, c;
  CUdeviceptr ws; /* a split-K kernel's workspace (its last argument), owned; 0: none */
  void *params[12]; /* the kernel ABI (gen.h), pointing at the fields above */
} bare_kernel;

/* Emits template + params for the layout (as mmt_explain reported them), compiles through
 * the default cubin cache (the dispatcher's, so a hit), loads, and binds the arguments of g's
 * problem writing C2.  bk must not move afterwards (params point into it). */
static mmt_status bare_load(bench_gpu *g, const mmt_choice *how, bare_kernel *bk, ut_err *err) {
  const bench_opts *o = g->o;
  gen_template *t = NULL;
  gen_config cfg;
  gen_kernel spec = {0};
  rt_cubin cubin = {0};
  char cache[4096];
  memset(bk, 0, sizeof *bk);
  mmt_status rc = gen_load_named(how->template_name, &t, err);
  if (!rc) rc = gen_config_parse(t, how->params, &cfg, err);
  if (!rc) rc = gen_emit(t, &cfg, "f32", how->layout, &spec, err);
  if (rc) goto cleanup;
  bool cached = ut_default_cubin_dir(cache, sizeof cache, NULL) == MMT_OK;
  if ((rc = rt_compile_cached(cached ? cache : NULL, spec.source, spec.kernel_name,
                              g->dev.arch, &cubin, NULL, NULL, err)) ||
      (rc = rt_kernel_load(&g->dev, &cubin, &spec, &bk->k, err)) ||
      (rc = gen_grid_eval(bk->k.grid, o->m, o->n, o->k, bk->k.sm_count, bk->grid, err)))
    goto cleanup;
  bk->m = (int)o->m, bk->n = (int)o->n, bk->kk = (int)o->k;
  bk->lda = (int)o->k, bk->ldb = (int)o->n, bk->ldc = (int)o->n;
  bk->alpha = 1.0f, bk->beta = 0.0f;
  bk->a = g->a, bk->b = g->b, bk->c = g->c2;
  void *params[12] = {&bk->m, &bk->n,   &bk->kk, &bk->alpha, &bk->a,  &bk->lda,
                      &bk->b, &bk->ldb, &bk->beta, &bk->c,   &bk->ldc, &bk->ws};
  memcpy(bk->params, params, sizeof params);
  /* a kernel with split-K through a workspace takes it last (rt_kernel_launch's ABI): a
   * buffer of its size here, where the dispatcher's launches use the kernel's own */
  const rt_gemm_args args = {.m = o->m, .n = o->n, .k = o->k};
  size_t ws_bytes = 0;
  if (!(rc = rt_workspace_need(&bk->k, &args, &ws_bytes, err)) && ws_bytes) {
    CUresult r = g->cu->cuMemAlloc(&bk->ws, ws_bytes);
    if (r != CUDA_SUCCESS) rc = rt_cu_fail(err, "cuMemAlloc", r);
  }
cleanup:
  if (rc) ut_err_prefix(err, "bare kernel %s %s", how->template_name, how->params);
  rt_cubin_free(&cubin);
  gen_kernel_clear(&spec);
  gen_free(t);
  return rc;
}

static CUresult bare_launch(const rt_cu *cu, bare_kernel *bk, CUstream stream) {
  return cu->cuLaunchKernel(bk->k.fn, bk->grid[0], bk->grid[1], bk->grid[2], bk->k.block[0],
                            bk->k.block[1], bk->k.block[2], bk->k.shared_bytes, stream,
                            bk->params, NULL);
}

/* One launch of each into C and C2; the results must be the same bits. */
static mmt_status check_same_result(bench_gpu *g, bare_kernel *bk, ut_err *err) {
  mmt_status rc = MMT_OK;
  size_t bytes = (size_t)g->o->m * (size_t)g->o->n * sizeof(float);
  float *c = malloc(bytes), *c2 = malloc(bytes);
  if (!c || !c2) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory for C");
    goto cleanup;
  }
  if ((rc = sgemm(g, g->c, err))) goto cleanup;
  CUresult r = bare_launch(g->cu, bk, g->stream);
  if (r != CUDA_SUCCESS) {
    rc = rt_cu_fail(err, "cuLaunchKernel", r);
    goto cleanup;
  }
  if ((rc = sync_stream(g, err))) goto cleanup;
  RT_CU_CHECK(g->cu, cuMemcpyDtoH(c, g->c, bytes));
  RT_CU_CHECK(g->cu, cuMemcpyDtoH(c2, g->c2, bytes));
  if (memcmp(c, c2, bytes) != 0)
    rc = ut_fail(err, MMT_ERR_VERIFY, "the bare kernel's C differs from mmt_sgemm's");
cleanup:
  free(c);
  free(c2);
  return rc;
}

/* ---- warm dispatch ---- */

/* Enqueue time of one batch of mmt_sgemm (bk NULL) or of bare launches, in ns; then syncs.
 * Both loops check each call's result. */
static mmt_status time_batch(bench_gpu *g, bare_kernel *bk, uint64_t *ns, ut_err *err) {
  const bench_opts *o = g->o;
  const float *a = (const float *)(uintptr_t)g->a, *b = (const float *)(uintptr_t)g->b;
  float *c = (float *)(uintptr_t)g->c;
  mmt_status rc = MMT_OK;
  CUresult r = CUDA_SUCCESS;
  uint64_t t0 = bench_now_ns();
  if (bk)
    for (int64_t i = 0; i < o->batch && r == CUDA_SUCCESS; i++)
      r = bare_launch(g->cu, bk, g->stream);
  else
    for (int64_t i = 0; i < o->batch && rc == MMT_OK; i++)
      rc = mmt_sgemm(g->ctx, o->m, o->n, o->k, a, o->k, b, o->n, c, o->n, g->stream);
  *ns = bench_now_ns() - t0;
  if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuLaunchKernel", r);
  if (rc) return ut_fail(err, rc, "mmt_sgemm: %s", mmt_errmsg(g->ctx));
  return sync_stream(g, err);
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return (a > b) - (a < b);
}

typedef struct {
  double median_ns, mean_ns; /* per call */
} per_call;

/* What the warm part measured. */
typedef struct {
  int64_t calls; /* timed calls of each path */
  per_call mmt, bare;
  uint64_t hits, misses; /* the dispatcher's, over the timed calls */
  int compiles;          /* NVRTC runs during the timed calls */
} warm_result;

/* Median over batches and mean over all calls; sorts ns. */
static per_call summarize(uint64_t *ns, int64_t batches, int64_t batch) {
  uint64_t total = 0;
  for (int64_t i = 0; i < batches; i++) total += ns[i];
  qsort(ns, (size_t)batches, sizeof *ns, cmp_u64);
  double median = batches % 2 ? (double)ns[batches / 2]
                              : 0.5 * ((double)ns[batches / 2 - 1] + (double)ns[batches / 2]);
  return (per_call){median / (double)batch, (double)total / (double)(batches * batch)};
}

/* Alternating batches of both paths (drift then hits both alike), after warm-up. */
static mmt_status warm_dispatch(bench_gpu *g, bare_kernel *bk, warm_result *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  rt_dispatch_stats before, after;
  int compiles = 0;
  int64_t batches = (g->o->calls + g->o->batch - 1) / g->o->batch;
  uint64_t *mmt_ns = calloc((size_t)batches, sizeof *mmt_ns);
  uint64_t *bare_ns = calloc((size_t)batches, sizeof *bare_ns);
  uint64_t scratch;
  if (!mmt_ns || !bare_ns) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory for %lld batch times", (long long)batches);
    goto cleanup;
  }
  for (int i = 0; i < WARMUP_BATCHES && !rc; i++)
    if (!(rc = time_batch(g, NULL, &scratch, err))) rc = time_batch(g, bk, &scratch, err);
  rt_dispatch_get_stats(g->ctx, &before);
  compiles = nvrtc_compiles;
  for (int64_t i = 0; i < batches && !rc; i++)
    if (!(rc = time_batch(g, NULL, &mmt_ns[i], err))) rc = time_batch(g, bk, &bare_ns[i], err);
  if (rc) goto cleanup;
  rt_dispatch_get_stats(g->ctx, &after);
  out->calls = batches * g->o->batch;
  out->mmt = summarize(mmt_ns, batches, g->o->batch);
  out->bare = summarize(bare_ns, batches, g->o->batch);
  out->hits = after.hits - before.hits;
  out->misses = after.misses - before.misses;
  out->compiles = nvrtc_compiles - compiles;
cleanup:
  free(mmt_ns);
  free(bare_ns);
  return rc;
}

static void print_choice(const bench_opts *o, const rt_device *dev, const mmt_choice *how) {
  printf(PROG ": %lldx%lldx%lld fp32 on device %d (%s, %s)\n", (long long)o->m,
         (long long)o->n, (long long)o->k, o->device, dev->info.name, dev->arch);
  printf("choice: %s %s %s (layout %s)", mmt_choice_kind_name(how->kind), how->template_name,
         how->params, how->layout);
  if (how->kind != MMT_CHOICE_DEFAULT)
    printf(" (tuned on %lldx%lldx%lld: %.4f ms, %.2f TFLOP/s)\n", (long long)how->tuned_m,
           (long long)how->tuned_n, (long long)how->tuned_k, how->tuned_ms, how->tuned_tflops);
  else
    printf(" (nothing tuned applies; the targets assume a tuned shape)\n");
}

static void print_warm(const bench_opts *o, const warm_result *w) {
  double over_median = w->mmt.median_ns - w->bare.median_ns;
  double over_mean = w->mmt.mean_ns - w->bare.mean_ns;
  printf("warm dispatch: %lld calls of each, batches of %lld, host enqueue time per call\n",
         (long long)w->calls, (long long)o->batch);
  printf("  %-22s median %8.1f ns   mean %8.1f ns\n", "mmt_sgemm", w->mmt.median_ns,
         w->mmt.mean_ns);
  printf("  %-22s median %8.1f ns   mean %8.1f ns\n", "bare cuLaunchKernel", w->bare.median_ns,
         w->bare.mean_ns);
  printf("  %-22s median %8.1f ns   mean %8.1f ns   target <= %.0f ns: %s\n",
         "mmt_sgemm overhead", over_median, over_mean, WARM_TARGET_NS,
         over_median <= WARM_TARGET_NS ? "met" : "MISSED");
  printf("  timed mmt_sgemm calls: %llu cache hits, %llu misses, %d NVRTC compiles\n",
         (unsigned long long)w->hits, (unsigned long long)w->misses, w->compiles);
}

/* The warm part, in this process. */
static mmt_status run_warm(const bench_opts *o, ut_err *err) {
  bench_gpu g;
  bare_kernel bk;
  mmt_choice how;
  warm_result w = {0};
  memset(&bk, 0, sizeof bk);
  mmt_status rc = open_mmt(&g, o, err);
  if (!rc) rc = open_rest(&g, err);
  if (!rc) rc = sgemm(&g, g.c, err); /* choice, compile or cache, load */
  if (!rc) rc = sync_stream(&g, err);
  if (rc) goto cleanup;
  mmt_problem p = {.order = MMT_ROW_MAJOR, .trans_a = MMT_NO_TRANS, .trans_b = MMT_NO_TRANS,
                   .m = o->m, .n = o->n, .k = o->k, .lda = o->k, .ldb = o->n, .ldc = o->n,
                   .dtype = MMT_F32};
  rc = mmt_explain(g.ctx, &p, &how);
  if (rc) {
    rc = ut_fail(err, rc, "mmt_explain: %s", mmt_errmsg(g.ctx));
    goto cleanup;
  }
  if ((rc = bare_load(&g, &how, &bk, err))) goto cleanup;
  print_choice(o, &g.dev, &how);
  if ((rc = check_same_result(&g, &bk, err))) goto cleanup;
  if ((rc = warm_dispatch(&g, &bk, &w, err))) goto cleanup;
  print_warm(o, &w);
  if (bk.k.last_launch)
    printf("  note: an exclusive kernel: mmt_sgemm also asks the stream's capture state and id "
           "and records an event after each launch (a launch on another stream waits for it)\n");
cleanup:
  if (bk.ws) (void)g.cu->cuMemFree(bk.ws);
  rt_kernel_unload(&bk.k);
  close_gpu(&g);
  return rc;
}

/* ---- cold start ---- */

/* The child: times mmt_open, then the first call with a synchronize; prints one line for the
 * parent: "cold open_ms=X first_ms=Y nvrtc=N", N the NVRTC runs of this whole process. */
static mmt_status run_cold_child(const bench_opts *o, ut_err *err) {
  bench_gpu g;
  uint64_t t0 = bench_now_ns();
  mmt_status rc = open_mmt(&g, o, err);
  uint64_t t1 = bench_now_ns();
  if (!rc) rc = open_rest(&g, err);
  if (rc) goto cleanup;
  uint64_t t2 = bench_now_ns();
  if ((rc = sgemm(&g, g.c, err)) || (rc = sync_stream(&g, err))) goto cleanup;
  uint64_t t3 = bench_now_ns();
  printf("cold open_ms=%.3f first_ms=%.3f nvrtc=%d\n", (double)(t1 - t0) / 1e6,
         (double)(t3 - t2) / 1e6, nvrtc_compiles);
cleanup:
  close_gpu(&g);
  return rc;
}

/* The child's command line: "--cold-child", the device, the database and the problem. */
typedef struct {
  char dev[16], m[24], n[24], k[24];
  char *argv[12];
} cold_args;

static void cold_args_fill(const bench_opts *o, cold_args *a) {
  int i = 0;
  snprintf(a->dev, sizeof a->dev, "%d", o->device);
  snprintf(a->m, sizeof a->m, "%lld", (long long)o->m);
  snprintf(a->n, sizeof a->n, "%lld", (long long)o->n);
  snprintf(a->k, sizeof a->k, "%lld", (long long)o->k);
  a->argv[i++] = PROG;
  a->argv[i++] = COLD_CHILD_FLAG;
  a->argv[i++] = "--device";
  a->argv[i++] = a->dev;
  if (o->db) {
    a->argv[i++] = "--db";
    a->argv[i++] = (char *)o->db;
  }
  a->argv[i++] = "--";
  a->argv[i++] = a->m;
  a->argv[i++] = a->n;
  a->argv[i++] = a->k;
  a->argv[i] = NULL;
}

/* Runs this program again (/proc/self/exe) as a cold-start child and parses the line it
 * prints; its stderr is ours, so a failing child has said why. */
static mmt_status spawn_cold(const bench_opts *o, double *open_ms, double *first_ms, int *nvrtc,
                             ut_err *err) {
  cold_args args;
  cold_args_fill(o, &args);
  int fds[2];
  if (pipe(fds) != 0) return ut_fail(err, MMT_ERR_IO, "pipe: %s", strerror(errno));
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execv("/proc/self/exe", args.argv);
    fprintf(stderr, PROG ": exec /proc/self/exe: %s\n", strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return ut_fail(err, MMT_ERR_IO, "fork: %s", strerror(errno));
  }
  char line[256] = "";
  FILE *f = fdopen(fds[0], "r");
  if (!f) close(fds[0]);
  if (f && !fgets(line, sizeof line, f)) line[0] = '\0';
  if (f) fclose(f); /* the child only writes one line */
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return ut_fail(err, MMT_ERR_FAULT, "the cold-start process %s %d (its reason is above)",
                   WIFEXITED(status) ? "exited with" : "died of signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  if (sscanf(line, "cold open_ms=%lf first_ms=%lf nvrtc=%d", open_ms, first_ms, nvrtc) != 3)
    return ut_fail(err, MMT_ERR_IO, "the cold-start process printed '%s'", line);
  return MMT_OK;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median_of(const double *v, int n) {
  double s[MAX_RUNS];
  memcpy(s, v, (size_t)n * sizeof *v);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void print_runs(const char *what, const double *v, int n, const char *verdict) {
  printf("  %-10s median %8.3f ms   runs", what, median_of(v, n));
  for (int i = 0; i < n; i++) printf(" %.3f", v[i]);
  printf("%s\n", verdict);
}

static mmt_status run_cold(const bench_opts *o, ut_err *err) {
  double open_ms[MAX_RUNS], first_ms[MAX_RUNS];
  int runs = (int)o->runs, compiles = 0;
  for (int i = 0; i < runs; i++) {
    int nvrtc = 0;
    mmt_status rc = spawn_cold(o, &open_ms[i], &first_ms[i], &nvrtc, err);
    if (rc) return rc;
    compiles += nvrtc;
  }
  if (runs == 0) return MMT_OK;
  char verdict[64];
  snprintf(verdict, sizeof verdict, "   target <= %.0f ms: %s", COLD_TARGET_MS,
           median_of(first_ms, runs) <= COLD_TARGET_MS ? "met" : "MISSED");
  printf("cold start: %d fresh processes, the cubin in the disk cache\n", runs);
  print_runs("mmt_open", open_ms, runs, "");
  print_runs("first call", first_ms, runs, verdict);
  printf("  NVRTC compiles in those processes: %d (target 0: %s)\n", compiles,
         compiles == 0 ? "met" : "MISSED");
  return MMT_OK;
}

int main(int argc, char **argv) {
  bench_prog = PROG;
  bench_opts o;
  int code = parse_args(argc, argv, &o);
  if (code >= 0) return code;
  ut_err err = {{0}};
  mmt_status rc = o.cold_child ? run_cold_child(&o, &err) : run_warm(&o, &err);
  if (!rc && !o.cold_child) {
    fflush(stdout);
    rc = run_cold(&o, &err);
  }
  if (rc) {
    fprintf(stderr, PROG ": %s\n", err.msg);
    return 1;
  }
  return 0;
}
