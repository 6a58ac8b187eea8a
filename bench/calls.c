/*
 * calls.c -- mmtune-calls-bench: where the time of one GEMM call goes, for mmt_gemm and for
 * cuBLAS on the same problem, measured four ways in one run.
 *
 * Usage:
 *   mmtune-calls-bench [--device N] [--db PATH] [--dtype D] [--layout L] [--calls N] [M N K]
 * On the GPU machine, after tuning the shape into the database:
 *   build/bench/mmtune-calls-bench --device 0 --db /tmp/mmtune.db --dtype f16 1000 1000 1000
 * Without a GPU it prints one line "mmtune-calls-bench: <reason>" and exits 1; bad arguments
 * exit 2.
 *
 * Why: at small shapes a call's cost is not one number.  `mmtune bench` and the tuner time
 * runs back to back with an event between each two (what an application that calls in a loop
 * sees, host costs included where they exceed the kernel); a CUDA graph removes the host and
 * most of the launch gap (the kernel's own time); and which library wins can differ between
 * the two.  This program prints all of them side by side:
 *   host    wall time to enqueue --calls calls (CLOCK_MONOTONIC), per call: the host's cost
 *           (the launch queue never fills at 64 calls);
 *   stream  events around --calls back-to-back calls, per call: max(host, device) per call;
 *   events  an event between each two calls (bench's method), median interval;
 *   graph   the --calls calls captured into one CUDA graph, events around a replay, per call.
 * Each figure is the median of SAMPLES samples after warm-up calls.  Inputs are random
 * (never zero) and rotate over enough copies to cover three times the L2 cache (at most 32),
 * so that repeated calls do not just read the cache.  Before timing, the C of both libraries
 * on copy 0 is compared (tn_compare, cuBLAS's as the reference, the dtype's tolerances): a
 * wrong kernel is not timed.
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "half16.h"
#include "bench_cli.h"
#include "mmtune.h"
#include "rt_device.h"
#include "rt_driver.h"
#include "cli/args.h"
#include "gpu/cublas.h"
#include "gpu/ref.h"
#include "util.h"

#define PROG "mmtune-calls-bench"
#define SAMPLES 15
#define WARMUP_CALLS 200
#define MAX_CALLS 1024
#define MAX_COPIES 32
#define L2_COVER 3

typedef struct {
  int device;
  const char *db; /* NULL: the library's default */
  const char *dtype, *layout;
  mmt_dtype type; /* dtype's */
  int64_t m, n, k, calls;
} bench_opts;

static void print_usage(void) {
  printf("usage: " PROG " [--device N] [--db PATH] [--dtype D] [--layout L] [--calls N] [M N K]\n"
         "Per-call time of mmt_gemm and cuBLAS on one problem: host enqueue, back to back,\n"
         "an event between calls, and CUDA graph replay.\n"
         "  --device N   CUDA device ordinal (default 0)\n"
         "  --db PATH    mmtune database (default: $MMTUNE_DB, else the cache folder's)\n"
         "  --dtype D    f32, tf32, f16 or bf16 (default f16)\n"
         "  --layout L   nn, nt, tn or tt: A's and B's storage, row-major (default nn)\n"
         "  --calls N    calls a sample (default 64, at most %d)\n"
         "  M N K        the problem (default 1000 1000 1000)\n",
         MAX_CALLS);
}

/* The mmt_dtype named `name` (mmt_dtype_name's inverse), or -1. */
static int dtype_of(const char *name) {
  for (int d = MMT_F32; d <= MMT_BF16; d++)
    if (strcmp(mmt_dtype_name((mmt_dtype)d), name) == 0) return d;
  return -1;
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, bench_opts *o) {
  static const struct option longs[] = {
      {"device", required_argument, NULL, 'd'}, {"db", required_argument, NULL, 'b'},
      {"dtype", required_argument, NULL, 't'},  {"layout", required_argument, NULL, 'l'},
      {"calls", required_argument, NULL, 'c'},  {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  *o = (bench_opts){.dtype = "f16", .layout = "nn", .m = 1000, .n = 1000, .k = 1000,
                    .calls = 64};
  int64_t device = 0;
  int c, bad = 0;
  opterr = 0;
  while (!bad && (c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
    switch (c) {
      case 'd': bad = bench_parse_number(optarg, "--device", 0, INT_MAX, &device); break;
      case 'b': o->db = optarg; break;
      case 't': o->dtype = optarg; break;
      case 'l': o->layout = optarg; break;
      case 'c': bad = bench_parse_number(optarg, "--calls", 1, MAX_CALLS, &o->calls); break;
      case 'h': print_usage(); return 0;
      default: return bench_option_error(c, argv);
    }
  }
  if (bad) return bad;
  if (dtype_of(o->dtype) < 0)
    return bench_usage_error("--dtype '%s' is not one of f32, tf32, f16, bf16", o->dtype);
  o->type = (mmt_dtype)dtype_of(o->dtype);
  if (gen_layout_index(o->layout) < 0)
    return bench_usage_error("--layout '%s' is not one of nn, nt, tn, tt", o->layout);
  if ((bad = bench_parse_mnk(argc, argv, optind, &o->m, &o->n, &o->k))) return bad;
  o->device = (int)device;
  return -1;
}

/* ---- the problem on the device ---- */

typedef struct {
  const bench_opts *o;
  const rt_cu *cu;
  rt_device dev; /* this program's hold on the device: the same primary context as mmt's */
  mmt_context *ctx;
  tn_cublas *cb;
  CUstream stream;
  CUevent ev[MAX_CALLS + 1];
  int elem;                 /* bytes per element */
  int64_t lda, ldb, ldc;    /* row-major pitches, the least the layout allows */
  size_t a_elems, b_elems, c_elems;
  int copies;
  CUdeviceptr a, b, c;      /* `copies` consecutive matrices each */
} bench_gpu;

/* A random element of the dtype, never zero: |x| in [1/8, 1) as f16 or bf16 bits, or a float
 * in (-1, 1) away from 0 (xorshift64). */
static void random_fill(void *buf, size_t count, int elem, bool bf16, uint64_t *s) {
  for (size_t i = 0; i < count; i++) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    unsigned sign = (unsigned)(*s >> 63) << 15, r = (unsigned)(*s >> 20);
    if (elem == 4)
      ((float *)buf)[i] = (sign ? -1.0f : 1.0f) * (0.125f + 0.875f * (float)(r % 65536) / 65536);
    else /* exponents for [1/8, 1): f16 0x3000..0x3bff, bf16 0x3e00..0x3f7f */
      ((unsigned short *)buf)[i] =
          (unsigned short)(sign | (bf16 ? 0x3e00u + r % 0x180u : 0x3000u + r % 0xc00u));
  }
}

static mmt_status upload_random(bench_gpu *g, CUdeviceptr *out, size_t count, uint64_t seed,
                                ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  void *host = malloc(count * (size_t)g->elem);
  if (!host) return ut_fail(err, MMT_ERR_NOMEM, "out of memory for %zu elements", count);
  random_fill(host, count, g->elem, strcmp(g->o->dtype, "bf16") == 0, &seed);
  RT_CU_CHECK(cu, cuMemAlloc(out, count * (size_t)g->elem));
  RT_CU_CHECK(cu, cuMemcpyHtoD(*out, host, count * (size_t)g->elem));
cleanup:
  free(host);
  return rc;
}


/* One call: C = A B of input copy `copy`, by mmt_gemm (lib 0) or cuBLAS (lib 1). */
static mmt_status call(bench_gpu *g, int lib, int copy, ut_err *err) {
  const bench_opts *o = g->o;
  const uint64_t eb = (uint64_t)g->elem;
  const CUdeviceptr a = g->a + copy * g->a_elems * eb, b = g->b + copy * g->b_elems * eb;
  const CUdeviceptr c = g->c + copy * g->c_elems * eb;
  if (lib == 1)
    return tn_cublas_gemm(g->cb, g->stream, o->dtype, o->layout, o->m, o->n, o->k, 1.0f, a,
                          g->lda, b, g->ldb, 0.0f, c, g->ldc, err);
  mmt_status rc = mmt_gemm(g->ctx, MMT_ROW_MAJOR, o->layout[0] == 't' ? MMT_TRANS : MMT_NO_TRANS,
                           o->layout[1] == 't' ? MMT_TRANS : MMT_NO_TRANS, o->m, o->n, o->k, 1.0f,
                           (const void *)(uintptr_t)a, g->lda, (const void *)(uintptr_t)b, g->ldb,
                           0.0f, (void *)(uintptr_t)c, g->ldc, o->type, g->stream);
  if (rc) return ut_fail(err, rc, "mmt_gemm: %s: %s", mmt_status_name(rc), mmt_errmsg(g->ctx));
  return MMT_OK;
}

static mmt_status open_gpu(bench_gpu *g, const bench_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  memset(g, 0, sizeof *g);
  g->o = o;
  mmt_options opts = {.db_path = o->db};
  if ((rc = mmt_open(&g->ctx, o->device, &opts)))
    return ut_fail(err, rc, "mmt_open: %s: %s", mmt_status_name(rc), mmt_errmsg(g->ctx));
  if ((rc = rt_device_open(o->device, &g->dev, err))) return rc;
  if ((rc = rt_driver(&g->cu, err))) return rc;
  if ((rc = tn_cublas_open(&g->cb, err))) return rc;
  const rt_cu *cu = g->cu;
  RT_CU_CHECK(cu, cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i <= MAX_CALLS; i++) RT_CU_CHECK(cu, cuEventCreate(&g->ev[i], CU_EVENT_DEFAULT));
  g->elem = gen_dtype_size(o->dtype);
  int64_t width[3], rows[3];
  gen_min_ld(o->layout, o->m, o->n, o->k, width);
  gen_stored_rows(o->layout, o->m, o->n, o->k, rows);
  g->lda = width[0], g->ldb = width[1], g->ldc = width[2];
  g->a_elems = (size_t)(rows[0] * width[0]);
  g->b_elems = (size_t)(rows[1] * width[1]);
  g->c_elems = (size_t)(rows[2] * width[2]);
  int l2 = 0;
  RT_CU_CHECK(cu, cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, g->dev.dev));
  const double set_bytes = (double)(g->a_elems + g->b_elems + g->c_elems) * g->elem;
  const double want = ceil(L2_COVER * (double)l2 / set_bytes);
  g->copies = want < 1 ? 1 : want > MAX_COPIES ? MAX_COPIES : (int)want;
  if ((rc = upload_random(g, &g->a, g->a_elems * (size_t)g->copies, 11, err)) ||
      (rc = upload_random(g, &g->b, g->b_elems * (size_t)g->copies, 23, err)))
    return rc;
  RT_CU_CHECK(cu, cuMemAlloc(&g->c, g->c_elems * (size_t)g->copies * (size_t)g->elem));
cleanup:
  return rc;
}

static void close_gpu(bench_gpu *g) {
  const rt_cu *cu = g->cu;
  if (cu) {
    if (g->a) cu->cuMemFree(g->a);
    if (g->b) cu->cuMemFree(g->b);
    if (g->c) cu->cuMemFree(g->c);
    for (int i = 0; i <= MAX_CALLS; i++)
      if (g->ev[i]) cu->cuEventDestroy(g->ev[i]);
    if (g->stream) cu->cuStreamDestroy(g->stream);
  }
  tn_cublas_close(g->cb);
  mmt_close(g->ctx);
  rt_device_close(&g->dev);
}

/* The element of a downloaded C as a float (16-bit types widened exactly). */
static float c_elem(const bench_gpu *g, const void *c, size_t i) {
  if (g->elem == 4) return ((const float *)c)[i];
  const unsigned short h = ((const unsigned short *)c)[i];
  return strcmp(g->o->dtype, "bf16") == 0 ? th_bf16_to_f32(h) : th_f16_to_f32(h);
}

/* C of copy 0 from both libraries, mmt_gemm's checked against cuBLAS's as the reference
 * (tn_compare: the dtype's tolerances, NaN/Inf counted), into *out.  C is poisoned with NaN
 * before each call, so an unwritten element fails. */
static mmt_status compare(bench_gpu *g, tn_check *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  const size_t n = g->c_elems, bytes = n * (size_t)g->elem;
  const unsigned nan_bits = g->elem == 4                          ? 0x7fc00000u
                            : strcmp(g->o->dtype, "bf16") == 0 ? 0x7fc07fc0u
                                                               : 0x7e007e00u;
  void *c[2] = {malloc(bytes), malloc(bytes)};
  float *mine = malloc(n * sizeof *mine);
  double *ref = malloc(n * sizeof *ref);
  if (!c[0] || !c[1] || !mine || !ref) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory for C");
    goto cleanup;
  }
  for (int lib = 0; lib < 2; lib++) {
    RT_CU_CHECK(cu, cuMemsetD32(g->c, nan_bits, bytes / 4));
    if ((rc = call(g, lib, 0, err))) goto cleanup;
    RT_CU_CHECK(cu, cuStreamSynchronize(g->stream));
    RT_CU_CHECK(cu, cuMemcpyDtoH(c[lib], g->c, bytes));
  }
  for (size_t i = 0; i < n; i++) mine[i] = c_elem(g, c[0], i), ref[i] = c_elem(g, c[1], i);
  tn_compare(g->o->m, g->o->n, mine, g->ldc, ref, g->ldc, g->o->dtype, out);
cleanup:
  free(c[0]);
  free(c[1]);
  free(mine);
  free(ref);
  return rc;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The four figures of one library, in microseconds per call. */
typedef struct {
  double host, stream, events, graph;
} call_times;

static mmt_status elapsed_us(const rt_cu *cu, CUevent from, CUevent to, double *us, ut_err *err) {
  float ms = 0;
  CUresult r = cu->cuEventElapsedTime(&ms, from, to);
  if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuEventElapsedTime", r);
  *us = ms * 1e3;
  return MMT_OK;
}

static mmt_status time_lib(bench_gpu *g, int lib, call_times *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  const int calls = (int)g->o->calls;
  double host[SAMPLES], stream[SAMPLES], graph[SAMPLES], us = 0;
  double *events = malloc(sizeof *events * SAMPLES * (size_t)calls);
  CUgraph graph_def = NULL;
  CUgraphExec exec = NULL;
  if (!events) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  for (int i = 0; i < WARMUP_CALLS; i++)
    if ((rc = call(g, lib, i % g->copies, err))) goto cleanup;
  RT_CU_CHECK(cu, cuStreamSynchronize(g->stream));
  for (int s = 0; s < SAMPLES; s++) { /* host and stream */
    const uint64_t t0 = bench_now_ns();
    RT_CU_CHECK(cu, cuEventRecord(g->ev[0], g->stream));
    for (int i = 0; i < calls; i++)
      if ((rc = call(g, lib, i % g->copies, err))) goto cleanup;
    RT_CU_CHECK(cu, cuEventRecord(g->ev[1], g->stream));
    host[s] = (double)(bench_now_ns() - t0) * 1e-3 / calls;
    RT_CU_CHECK(cu, cuEventSynchronize(g->ev[1]));
    if ((rc = elapsed_us(cu, g->ev[0], g->ev[1], &us, err))) goto cleanup;
    stream[s] = us / calls;
  }
  for (int s = 0; s < SAMPLES; s++) { /* an event between each two */
    if ((rc = call(g, lib, 0, err))) goto cleanup; /* keeps the device busy meanwhile */
    RT_CU_CHECK(cu, cuEventRecord(g->ev[0], g->stream));
    for (int i = 0; i < calls; i++) {
      if ((rc = call(g, lib, i % g->copies, err))) goto cleanup;
      RT_CU_CHECK(cu, cuEventRecord(g->ev[i + 1], g->stream));
    }
    RT_CU_CHECK(cu, cuEventSynchronize(g->ev[calls]));
    for (int i = 0; i < calls; i++)
      if ((rc = elapsed_us(cu, g->ev[i], g->ev[i + 1], &events[s * calls + i], err)))
        goto cleanup;
  }
  RT_CU_CHECK(cu, cuStreamBeginCapture(g->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  for (int i = 0; i < calls && !rc; i++) rc = call(g, lib, i % g->copies, err);
  CUresult end = cu->cuStreamEndCapture(g->stream, &graph_def); /* ends it even after a failure */
  if (rc) goto cleanup;
  if (end != CUDA_SUCCESS) {
    rc = rt_cu_fail(err, "cuStreamEndCapture", end);
    goto cleanup;
  }
  RT_CU_CHECK(cu, cuGraphInstantiate(&exec, graph_def, 0));
  RT_CU_CHECK(cu, cuGraphLaunch(exec, g->stream));
  for (int s = 0; s < SAMPLES; s++) {
    RT_CU_CHECK(cu, cuEventRecord(g->ev[0], g->stream));
    RT_CU_CHECK(cu, cuGraphLaunch(exec, g->stream));
    RT_CU_CHECK(cu, cuEventRecord(g->ev[1], g->stream));
    RT_CU_CHECK(cu, cuEventSynchronize(g->ev[1]));
    if ((rc = elapsed_us(cu, g->ev[0], g->ev[1], &us, err))) goto cleanup;
    graph[s] = us / calls;
  }
  *out = (call_times){median(host, SAMPLES), median(stream, SAMPLES),
                      median(events, SAMPLES * calls), median(graph, SAMPLES)};
cleanup:
  if (exec) cu->cuGraphExecDestroy(exec);
  if (graph_def) cu->cuGraphDestroy(graph_def);
  free(events);
  return rc;
}

static mmt_status run(const bench_opts *o, ut_err *err) {
  bench_gpu g;
  mmt_status rc = open_gpu(&g, o, err);
  tn_check chk;
  if (!rc) rc = compare(&g, &chk, err);
  if (!rc && !chk.pass)
    rc = ut_fail(err, MMT_ERR_CUDA, "mmt_gemm and cuBLAS disagree: relative difference %.3g, "
                 "max %.3g, %lld NaN/Inf; nothing timed", chk.rel_err, chk.max_err,
                 (long long)chk.bad_count);
  call_times t[2];
  if (!rc) rc = time_lib(&g, 0, &t[0], err);
  if (!rc) rc = time_lib(&g, 1, &t[1], err);
  if (!rc) {
    const mmt_problem p = {MMT_ROW_MAJOR, o->layout[0] == 't', o->layout[1] == 't', o->m, o->n,
                           o->k, g.lda, g.ldb, g.ldc, o->type};
    mmt_choice ch;
    if ((rc = mmt_explain(g.ctx, &p, &ch)))
      rc = ut_fail(err, rc, "mmt_explain: %s", mmt_errmsg(g.ctx));
    if (!rc) {
      const double flop = 2.0 * (double)o->m * (double)o->n * (double)o->k;
      printf("%s, %s %s %lldx%lldx%lld; %d input copies, %lld calls a sample, median of %d\n",
             g.dev.info.name, o->dtype, o->layout, (long long)o->m, (long long)o->n,
             (long long)o->k, g.copies, (long long)o->calls, SAMPLES);
      printf("mmtune runs %s %s (%s); mmtune vs cuBLAS: relative difference %.2g; cuBLAS %s\n",
             ch.template_name, ch.params, mmt_choice_kind_name(ch.kind), chk.rel_err,
             tn_cublas_version(g.cb));
      printf("%-8s %10s %10s %10s %10s %14s\n", "us/call", "host", "stream", "events", "graph",
             "graph TFLOP/s");
      const char *names[2] = {"mmtune", "cuBLAS"};
      for (int lib = 0; lib < 2; lib++)
        printf("%-8s %10.2f %10.2f %10.2f %10.2f %14.1f\n", names[lib], t[lib].host,
               t[lib].stream, t[lib].events, t[lib].graph, flop / (t[lib].graph * 1e-6) / 1e12);
      printf("%-8s %10s %9.3fx %9.3fx %9.3fx   (cuBLAS time / mmtune time)\n", "ratio", "",
             t[1].stream / t[0].stream, t[1].events / t[0].events, t[1].graph / t[0].graph);
    }
  }
  close_gpu(&g);
  return rc;
}

int main(int argc, char **argv) {
  bench_prog = PROG;
  bench_opts o;
  int code = parse_args(argc, argv, &o);
  if (code >= 0) return code;
  ut_err err = {{0}};
  if (run(&o, &err)) {
    fprintf(stderr, PROG ": %s\n", err.msg);
    return 1;
  }
  return 0;
}
