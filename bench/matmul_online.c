/*
 * matmul_online.c -- mmtune-matmul-bench's online family: an application that calls Linear
 * layers it never tuned (bias + tanh GELU, layout nt, --dtype), pass after pass, while online
 * tuning (mmt_options.online) tunes them in a worker process beside it on the same GPU.  What
 * it measures is what such an application sees: how fast its loop runs while the tuning goes
 * on, against the same loop untuned, and how long until each shape is served EXACT.
 *
 * The shapes: --online-shapes of them (default 50), drawn from a fixed seed: M log-uniform in
 * [1, 4096], N and K in [256, 8192], three in four rounded to a multiple of 64 and the others
 * left as drawn (odd sizes too), so no database holds them.  Everything happens on a fresh
 * database and cubin cache in a temporary folder:
 *   1. untuned: a context without recording, its kernels loaded by mmt_matmul_prepare; a pass
 *      (every shape once, then a stream sync) warms up, then ONLINE_PASSES passes are timed
 *      in wall time (host included): the untuned pass is their median;
 *   2. tuning: a context with online = 1 on the same database and cache (the worker's tuner:
 *      $MMTUNE_TUNER, else mmtune in PATH; its budget --online-budget seconds a problem, else
 *      the library's), prepared likewise (which records every shape, so the worker starts),
 *      then passes until every shape is served EXACT or --online-limit seconds have gone;
 *      every ONLINE_CHECK_S, outside the timed passes, mmt_explain_matmul says what each
 *      shape's calls launch;
 *   3. tuned: ONLINE_PASSES more passes, their median.
 * Speed while tuning: the passes cut into consecutive windows of at least 1 s of pass time;
 * a window's speed is (its passes x the untuned pass) / its time, 1.0 the untuned loop's.
 * Printed: the untuned pass; the tuning's passes, their median, the overall and the slowest
 * window's speed, the longest pass; when the shapes were served EXACT (median, last); the
 * tuned pass and its speed; and every shape's D from the untuned and the online context,
 * compared (the largest relative Frobenius difference).
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "bench_cli.h"
#include "matmul_bench.h"
#include "rt_online.h"

#define ONLINE_PASSES 30
#define ONLINE_CHECK_S 0.25
#define ONLINE_WINDOW_S 1.0
#define ONLINE_SEED 0x49u

static double seconds_since(uint64_t t0) { return (double)(bench_now_ns() - t0) * 1e-9; }

/* xorshift64: the shapes' own stream, the same every run */
static uint64_t next_u64(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* log-uniform in [lo, hi] */
static int64_t draw(uint64_t *s, int64_t lo, int64_t hi) {
  const double u = (double)(next_u64(s) >> 11) / 9007199254740992.0;
  const int64_t v =
      (int64_t)llround(exp(log((double)lo) + u * (log((double)hi) - log((double)lo))));
  return v < lo ? lo : v > hi ? hi : v;
}

static int64_t round64(int64_t v) { return v < 64 ? 64 : (v + 32) / 64 * 64; }

/* One pass: every shape's call on ctx into D at y, then a sync; its wall time in *s. */
static mmt_status pass(bench *b, mmt_context *ctx, mmt_matmul_desc *d, int n, CUdeviceptr y,
                       double *s, ut_err *err) {
  mmt_status rc = MMT_OK;
  const uint64_t t0 = bench_now_ns();
  for (int i = 0; i < n && !rc; i++) {
    d[i].d = (void *)(uintptr_t)y;
    if ((rc = mmt_matmul(ctx, &d[i], b->stream)))
      return ut_fail(err, rc, "mmt_matmul of %lldx%lldx%lld: %s", (long long)d[i].m,
                     (long long)d[i].n, (long long)d[i].k, mmt_errmsg(ctx));
  }
  RT_CU_CHECK(b->cu, cuStreamSynchronize(b->stream));
  *s = seconds_since(t0);
cleanup:
  return rc;
}

/* The median of ONLINE_PASSES passes, after one that warms up. */
static mmt_status median_pass(bench *b, mmt_context *ctx, mmt_matmul_desc *d, int n, CUdeviceptr y,
                              double *s, ut_err *err) {
  double t[ONLINE_PASSES];
  mmt_status rc = pass(b, ctx, d, n, y, &t[0], err);
  for (int i = 0; i < ONLINE_PASSES && !rc; i++) rc = pass(b, ctx, d, n, y, &t[i], err);
  if (!rc) *s = mb_median(t, ONLINE_PASSES);
  return rc;
}

/* A context on the family's database and cache, online or not recording at all; its log
 * counted into l. */
static mmt_status open_ctx(const bench *b, const char *db, const char *cache, bool online,
                           mb_log_counts *l, mmt_context **ctx, ut_err *err) {
  const mmt_options o = {.db_path = db,
                         .cache_dir = cache,
                         .online = online,
                         .online_budget = b->o->online_budget,
                         .log = mb_count_log,
                         .log_user = l,
                         .log_level = MMT_LOG_DEBUG};
  const mmt_status rc = mmt_open(ctx, b->o->device, &o);
  if (rc) ut_fail(err, rc, "mmt_open (%s): %s", online ? "online" : "untuned", mmt_errmsg(*ctx));
  return rc;
}

/* Pass times of the tuning phase (grown as they come). */
typedef struct {
  double *v;
  int n, cap;
} times;

static mmt_status times_push(times *t, double s, ut_err *err) {
  if (t->n == t->cap) {
    const int cap = t->cap ? 2 * t->cap : 4096;
    double *v = realloc(t->v, (size_t)cap * sizeof *v);
    if (!v) return ut_fail(err, MMT_ERR_NOMEM, "out of host memory");
    t->v = v, t->cap = cap;
  }
  t->v[t->n++] = s;
  return MMT_OK;
}

/* The slowest window's speed (see the top of the file); 0 when the passes make no window. */
static double slowest_window(const times *t, double untuned) {
  double worst = 0, sum = 0;
  int count = 0;
  for (int i = 0; i < t->n; i++) {
    sum += t->v[i], count++;
    if (sum < ONLINE_WINDOW_S) continue;
    const double speed = count * untuned / sum;
    if (worst == 0 || speed < worst) worst = speed;
    sum = 0, count = 0;
  }
  return worst;
}

/* Marks each shape not yet EXACT that now is, at time `at`; how many are EXACT. */
static mmt_status check_exact(mmt_context *ctx, const mmt_matmul_desc *d, int n, double *exact_at,
                              double at, int *count, ut_err *err) {
  *count = 0;
  for (int i = 0; i < n; i++) {
    if (exact_at[i] < 0) {
      mmt_choice ch;
      const mmt_status rc = mmt_explain_matmul(ctx, &d[i], &ch);
      if (rc) return ut_fail(err, rc, "mmt_explain_matmul: %s", mmt_errmsg(ctx));
      if (ch.kind == MMT_CHOICE_EXACT) exact_at[i] = at;
    }
    *count += exact_at[i] >= 0;
  }
  return MMT_OK;
}

/* The tuning phase: passes on ctx until every shape is EXACT or the limit; into t and
 * exact_at (seconds from the context's first call; -1: never). */
static mmt_status tune_phase(bench *b, mmt_context *ctx, const mb_log_counts *log,
                             mmt_matmul_desc *d, int n, CUdeviceptr y, times *t, double *exact_at,
                             int *exact, ut_err *err) {
  const uint64_t t0 = bench_now_ns();
  for (int i = 0; i < n; i++) exact_at[i] = -1;
  mmt_status rc = mmt_matmul_prepare(ctx, d, n, 0);
  if (rc) return ut_fail(err, rc, "mmt_matmul_prepare (online): %s", mmt_errmsg(ctx));
  double next_check = 0;
  *exact = 0;
  while (!rc && *exact < n && seconds_since(t0) < b->o->online_limit) {
    double s;
    if (!(rc = pass(b, ctx, d, n, y, &s, err))) rc = times_push(t, s, err);
    const double now = seconds_since(t0);
    if (!rc && log->stopped[0]) /* no worker: nothing would ever be served EXACT */
      rc = ut_fail(err, MMT_ERR_IO, "%s (set MMTUNE_TUNER to mmtune's path)", log->stopped);
    if (!rc && now >= next_check) {
      next_check = now + ONLINE_CHECK_S;
      rc = check_exact(ctx, d, n, exact_at, now, exact, err);
    }
  }
  return rc;
}

/* Waits up to `limit` seconds for the database's online worker to end (its lock free), so
 * that the tuned passes do not share the GPU with it and the folder goes only after it;
 * whether it ended. */
static bool worker_done(const char *db, double limit) {
  char lock[128];
  if (!rt_online_lock_path(db, lock, sizeof lock)) return false;
  const uint64_t t0 = bench_now_ns();
  for (;;) {
    const int fd = open(lock, O_RDWR | O_CLOEXEC);
    if (fd < 0) return true; /* no worker ever made it */
    const bool free_now = flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd);
    if (free_now) return true;
    if (seconds_since(t0) > limit) return false;
    usleep(100000);
  }
}

/* Every shape's D from both contexts (y0: the untuned one's, y1: the online one's); the
 * largest relative difference into *worst. */
static mmt_status compare_all(bench *b, mmt_context *c0, mmt_context *c1, mmt_matmul_desc *d, int n,
                              CUdeviceptr y0, CUdeviceptr y1, double *worst, ut_err *err) {
  mmt_status rc = MMT_OK;
  *worst = 0;
  for (int i = 0; i < n && !rc; i++) {
    double rel = 0;
    d[i].d = (void *)(uintptr_t)y0;
    if ((rc = mmt_matmul(c0, &d[i], b->stream)))
      return ut_fail(err, rc, "mmt_matmul (untuned): %s", mmt_errmsg(c0));
    d[i].d = (void *)(uintptr_t)y1;
    if ((rc = mmt_matmul(c1, &d[i], b->stream)))
      return ut_fail(err, rc, "mmt_matmul (online): %s", mmt_errmsg(c1));
    rc = mb_compare(b, y0, y1, (size_t)(d[i].m * d[i].n), d[i].out_type, &rel, err);
    if (rel > *worst) *worst = rel;
  }
  return rc;
}

mmt_status mb_online_family(bench *b, ut_err *err) {
  const bench_opts *o = b->o;
  const int n = o->online_shapes;
  uint64_t s = ONLINE_SEED;
  int64_t max_m = 1, max_n = 1, max_k = 1, sum_nk = 0;
  mmt_matmul_desc *d = calloc((size_t)n, sizeof *d);
  double *exact_at = calloc((size_t)n, sizeof *exact_at);
  times t = {0};
  CUdeviceptr base = 0;
  mmt_context *c0 = NULL, *c1 = NULL;
  mb_log_counts l0 = {0}, l1 = {0};
  char dir[64] = "", db[96];
  mmt_status rc = MMT_OK;
  if (!d || !exact_at) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of host memory");
    goto cleanup;
  }
  for (int i = 0; i < n; i++) {
    const int64_t m = draw(&s, 1, 4096);
    int64_t nn = draw(&s, 256, 8192), k = draw(&s, 256, 8192);
    if (next_u64(&s) % 4) nn = round64(nn), k = round64(k);
    d[i] = mb_linear_desc(m, nn, k, o->type, o->type);
    d[i].bias_mode = MMT_BIAS_COL, d[i].bias_type = o->type, d[i].act = MMT_ACT_GELU_TANH;
    max_m = m > max_m ? m : max_m, max_n = nn > max_n ? nn : max_n, max_k = k > max_k ? k : max_k;
    sum_nk += (int64_t)mb_padded(nn * k);
  }
  /* x, the bias and D shared, each layer a weight of its own (as a model's are: no layer
   * finds the last one's weight in L2); every buffer on 256 bytes (mb_padded), so that only a
   * layer's own odd sizes make its rows misaligned (x of 1861 x 7781 elements unpadded had
   * put every weight on 2 bytes) */
  const size_t elem = (size_t)mb_size_of(o->type);
  const size_t na = mb_padded(max_m * max_k), nb = (size_t)sum_nk, nd = (size_t)(max_m * max_n);
  RT_CU_CHECK(b->cu, cuMemAlloc(&base, (na + nb + (size_t)max_n + 2 * nd) * elem + 1024));
  if ((rc = mb_fill(b, base, na + nb + (size_t)max_n, o->type, err))) goto cleanup;
  const CUdeviceptr a = base, w = a + na * elem, bias = w + nb * elem,
                    y0 = (bias + (size_t)max_n * elem + 255) / 256 * 256,
                    y1 = (y0 + nd * elem + 255) / 256 * 256;
  CUdeviceptr wi = w;
  for (int i = 0; i < n; wi += mb_padded(d[i].n * d[i].k) * elem, i++) {
    d[i].a = (const void *)(uintptr_t)a, d[i].b = (const void *)(uintptr_t)wi;
    d[i].d = (void *)(uintptr_t)y0; /* pass() points it at its context's */
    d[i].bias = (const void *)(uintptr_t)bias;
  }
  if ((rc = mb_temp_dir(dir, "a database and cubin cache folder", err))) goto cleanup;
  snprintf(db, sizeof db, "%s/online.db", dir);
  double untuned = 0, tuned = 0, worst = 0;
  int exact = 0;
  if ((rc = open_ctx(b, db, dir, false, &l0, &c0, err))) goto cleanup;
  if ((rc = mmt_matmul_prepare(c0, d, n, 0))) {
    ut_fail(err, rc, "mmt_matmul_prepare (untuned): %s", mmt_errmsg(c0));
    goto cleanup;
  }
  if ((rc = median_pass(b, c0, d, n, y0, &untuned, err))) goto cleanup;
  printf("online    %d %s Linear layers (bias + GELU, nt), never tuned: untuned pass %.3f ms "
         "(median of %d)\n",
         n, o->dtype, untuned * 1e3, ONLINE_PASSES);
  fflush(stdout);
  if ((rc = open_ctx(b, db, dir, true, &l1, &c1, err))) goto cleanup;
  const uint64_t t0 = bench_now_ns();
  rc = tune_phase(b, c1, &l1, d, n, y1, &t, exact_at, &exact, err);
  const double span = seconds_since(t0);
  const mb_log_counts during = l1;
  if (rc) goto cleanup;
  double sum = 0, longest = 0, *sorted = malloc((size_t)(t.n ? t.n : 1) * sizeof *sorted);
  int slow = 0; /* passes past twice the untuned one */
  if (!sorted) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of host memory");
    goto cleanup;
  }
  for (int i = 0; i < t.n; i++) {
    sum += t.v[i], sorted[i] = t.v[i];
    longest = t.v[i] > longest ? t.v[i] : longest;
    slow += t.v[i] > 2 * untuned;
  }
  const double mid = t.n ? mb_median(sorted, t.n) : 0;
  free(sorted);
  mb_sort(exact_at, n); /* -1 (never) first */
  int served = 0;
  while (served < n && exact_at[n - 1 - served] >= 0) served++;
  double *at = exact_at + (n - served);
  printf("online    while tuning (%g s a shape): %d passes in %.1f s, median pass %.3f ms, "
         "speed %.3fx overall, slowest %.0f s window %.3fx, longest pass %.1f ms\n",
         o->online_budget > 0 ? o->online_budget : RT_ONLINE_BUDGET_S, t.n, span, mid * 1e3,
         sum > 0 ? t.n * untuned / sum : 0.0, ONLINE_WINDOW_S, slowest_window(&t, untuned),
         longest * 1e3);
  printf("online    %d passes past twice the untuned one; the online context chose again %d "
         "times, its modules %d compiled by NVRTC, %d from the cache, %d compiled ahead\n",
         slow, during.rechosen, during.nvrtc, during.cached, during.ahead);
  printf("online    served EXACT: %d of %d shapes, median at %.1f s, last at %.1f s\n", served, n,
         served ? mb_median(at, served) : 0.0, served ? at[served - 1] : 0.0);
  if (!worker_done(db, o->online_limit))
    printf("online    the worker still runs after --online-limit more seconds\n");
  if ((rc = median_pass(b, c1, d, n, y1, &tuned, err))) goto cleanup;
  if ((rc = compare_all(b, c0, c1, d, n, y0, y1, &worst, err))) goto cleanup;
  printf("online    tuned pass %.3f ms (median of %d): %.3fx the untuned loop; D of every shape "
         "against the untuned context's: largest relative difference %.1e\n",
         tuned * 1e3, ONLINE_PASSES, untuned / tuned, worst);
cleanup:
  mmt_close(c1);
  mmt_close(c0);
  if (dir[0] && !worker_done(db, 60))
    fprintf(stderr, "online: the worker still runs; its folder %s goes anyway\n", dir);
  if (base) b->cu->cuMemFree(base);
  if (dir[0]) mb_remove_dir(dir);
  free(t.v);
  free(exact_at);
  free(d);
  return rc;
}
