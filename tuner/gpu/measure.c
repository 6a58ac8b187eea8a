/* gpu/measure.c -- see gpu/measure.h. */
#include "gpu/measure.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/guard.h"
#include "gpu/prune.h"
#include "gpu/ref.h"

/* Problems up to this many multiply-adds get the CPU reference; larger ones the GPU one. */
#define CPU_REF_MAX_MACS (1LL << 24)
/* Input copies rotated while timing: enough to cover this many times the L2 size. */
#define L2_COVER 3
#define MAX_COPIES 32
/* tn_measure_opts.cold: the timed runs rotate over copies adding up to more than this many
 * times the L2 (the untimed runs' copy is kept out of the rotation). */
#define COLD_L2_COVER 2
#define MAX_COLD_COPIES 8192
/* Timed runs are launched back to back in batches of up to this many, an event between each
 * two: the host queues a run while the previous one executes, so a sample is the kernel's time
 * on the device, not the host's cost of launching it onto an idle stream (which, for a 10 us
 * GEMM, was a third of the figure, for cuBLAS and mmtune alike). */
#define TIME_BATCH 16
/* Runs of the first batch (time_runs): the cutoff's judge and the later batches' size. */
#define PROBE_RUNS 3
#define NAN_BITS 0x7fc00000u

/* Random fill on the device: splitmix64 of (seed, index) -> an odd multiple of 2^-24 in
 * (-1, 1), so no element is ever zero (like tn_fill_random, with its own stream), stored as
 * float (bits 32), or rounded to nearest even as f16 (16) or bf16 (-16; by hand:
 * cvt.rn.bf16.f32 needs sm_80; the values are never NaN).  And the widening of 16-bit data to
 * float (exact; NaN stays NaN), which lets the float64 reference and the check below read what
 * a 16-bit kernel read and wrote. */
static const char FILL_SOURCE[] =
    "extern \"C\" __global__ void mmt_fill_uniform(void *x, unsigned long long n,\n"
    "                                              unsigned long long seed, int bits) {\n"
    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < n; i += stride) {\n"
    "    unsigned long long z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;\n"
    "    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;\n"
    "    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;\n"
    "    z ^= z >> 31;\n"
    "    float v = (float)(2.0 * (double)(z >> 40) + 1.0 - 16777216.0) * (1.0f / 16777216.0f);\n"
    "    if (bits == 32) {\n"
    "      ((float *)x)[i] = v;\n"
    "    } else if (bits == -16) {\n"
    "      unsigned u = __float_as_uint(v);\n"
    "      ((unsigned short *)x)[i] = (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);\n"
    "    } else {\n"
    "      unsigned short h;\n"
    "      asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v));\n"
    "      ((unsigned short *)x)[i] = h;\n"
    "    }\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void mmt_widen_16(const unsigned short *x, float *y,\n"
    "                                          unsigned long long n, int bf16) {\n"
    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < n; i += stride) {\n"
    "    unsigned short h = x[i];\n"
    "    float f;\n"
    "    if (bf16) f = __uint_as_float((unsigned)h << 16);\n"
    "    else asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "    y[i] = f;\n"
    "  }\n"
    "}\n";

/* The comparison of C with the float64 reference, reduced on the device so that only a few
 * numbers cross the bus: sums of squares of (C - R) and R, max |C - R| and max |R| (as bits:
 * non-negative doubles order like unsigned integers), NaN/Inf count and first position, and
 * writes into C's padding columns (n..ldc of every row but the last, left NaN) with the first
 * position.  Nothing past C's last element is read: it may be unmapped (gpu/guard.h).
 * x - x != 0 is true exactly for NaN and Inf. */
static const char CHECK_SOURCE[] =
    "extern \"C\" __global__ void mmt_check_f32(long long M, long long N, const float *C,\n"
    "    long long ldc, const double *R, long long ldr, double *sums, unsigned long long *st) {\n"
    "  double d2 = 0, r2 = 0, dmax = 0, rmax = 0;\n"
    "  unsigned long long bad = 0, first_bad = ~0ull, outside = 0, first_out = ~0ull;\n"
    "  for (long long i = blockIdx.x; i < M; i += gridDim.x)\n"
    "    for (long long j = threadIdx.x; j < (i == M - 1 ? N : ldc); j += blockDim.x) {\n"
    "      unsigned long long at = (unsigned long long)i * ldc + j;\n"
    "      float c = C[at];\n"
    "      if (j >= N) {\n"
    "        if (c == c) { outside++; first_out = min(first_out, at); }\n"
    "        continue;\n"
    "      }\n"
    "      double r = R[(unsigned long long)i * ldr + j], d = (double)c - r;\n"
    "      if (d - d != 0.0 || r - r != 0.0) { bad++; first_bad = min(first_bad, at); continue; }\n"
    "      d2 += d * d; r2 += r * r; dmax = fmax(dmax, fabs(d)); rmax = fmax(rmax, fabs(r));\n"
    "    }\n"
    "  for (int off = 16; off > 0; off /= 2) {\n"
    "    d2 += __shfl_down_sync(0xffffffffu, d2, off);\n"
    "    r2 += __shfl_down_sync(0xffffffffu, r2, off);\n"
    "    dmax = fmax(dmax, __shfl_down_sync(0xffffffffu, dmax, off));\n"
    "    rmax = fmax(rmax, __shfl_down_sync(0xffffffffu, rmax, off));\n"
    "    bad += __shfl_down_sync(0xffffffffu, bad, off);\n"
    "    first_bad = min(first_bad, __shfl_down_sync(0xffffffffu, first_bad, off));\n"
    "    outside += __shfl_down_sync(0xffffffffu, outside, off);\n"
    "    first_out = min(first_out, __shfl_down_sync(0xffffffffu, first_out, off));\n"
    "  }\n"
    "  if ((threadIdx.x & 31) != 0) return;\n"
    "  atomicAdd(&sums[0], d2);\n"
    "  atomicAdd(&sums[1], r2);\n"
    "  atomicMax(&st[0], (unsigned long long)__double_as_longlong(dmax));\n"
    "  atomicMax(&st[1], (unsigned long long)__double_as_longlong(rmax));\n"
    "  atomicAdd(&st[2], bad);\n"
    "  atomicMin(&st[3], first_bad);\n"
    "  atomicAdd(&st[4], outside);\n"
    "  atomicMin(&st[5], first_out);\n"
    "}\n";

/* A plain read of n16 16-byte words from p: what a memory-bound kernel's time compares with.
 * Grid-stride, four independent 16-byte loads a thread in flight (a stride apart), past L1
 * (read once); what it reads folds into one word, stored only when it equals a value nothing
 * checks, so that no load can be dropped. */
static const char READ_SOURCE[] =
    "__device__ __forceinline__ unsigned mmt_read16(const uint4 *p) {\n"
    "  unsigned x, y, z, w;\n"
    "  asm(\"ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\"\n"
    "      : \"=r\"(x), \"=r\"(y), \"=r\"(z), \"=r\"(w) : \"l\"(p));\n"
    "  return x ^ y ^ z ^ w;\n"
    "}\n"
    "extern \"C\" __global__ void mmt_read_bytes(const uint4 *p, unsigned long long n16,\n"
    "                                            unsigned *sink) {\n"
    "  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "  unsigned acc = 0;\n"
    "  for (; i + 3 * stride < n16; i += 4 * stride)\n"
    "    acc ^= mmt_read16(p + i) ^ mmt_read16(p + i + stride) ^\n"
    "           mmt_read16(p + i + 2 * stride) ^ mmt_read16(p + i + 3 * stride);\n"
    "  for (; i < n16; i += stride) acc ^= mmt_read16(p + i);\n"
    "  if (acc == 0x9E3779B9u) *sink = acc;\n"
    "}\n";

/* What mmt_check_f32 accumulates (device layout: 2 doubles, then 6 unsigned 64-bit). */
typedef struct {
  double sums[2];
  unsigned long long st[6];
} check_stats;

struct tn_gpu {
  rt_device dev;
  const rt_cu *cu;
  CUmodule helpers;
  CUfunction fill_fn, widen_fn, ref_fn, check_fn, read_fn;
  CUdeviceptr stats; /* check_stats */
  CUdeviceptr read_buf; /* tn_gpu_read_ms's copies, read_cap bytes */
  size_t read_cap;
  CUevent ev[TIME_BATCH + 1]; /* ev[i] .. ev[i+1] brackets run i of a batch */
  int l2_bytes;
  tn_device_limits limits; /* what tn_prune checks compiled kernels against */
  /* Device buffers: `copies` consecutive (A, B, C) sets of elem-byte elements, and the
   * float64 reference; for 16-bit dtypes also wa, wb, wc: copy 0 widened to float. */
  CUdeviceptr a, b, c, ref, wa, wb, wc;
  size_t a_elems, b_elems, c_elems, cap_bytes, ref_cap_bytes, wide_cap_bytes;
  int copies;
  int elem;  /* bytes per element of the problem being measured */
  int bf16;  /* 16-bit elements are bf16 (else f16) */
  /* Elements each operand addresses ((rows - 1) * ld + row width), and the alignment of the
   * problem's pitches: what a candidate is verified for. */
  size_t a_extent, b_extent, c_extent;
  unsigned align;
  /* The verification launches put A, B and C flush against unmapped memory (gpu/guard.h),
   * once at the end of a mapped range and once at its start; gran == 0 when the device cannot
   * (guard_note says why, and copy 0 is verified as it is). */
  size_t gran;
  tn_guard guard[3];
  char guard_note[256];
  /* Host buffers for the check. */
  float *host_a, *host_b;
  double *host_ref;
  size_t host_a_cap, host_b_cap, host_ref_cap;
};

const rt_device *tn_gpu_device(const tn_gpu *g) { return &g->dev; }

const char *tn_gpu_guard_note(const tn_gpu *g) { return g->gran ? NULL : g->guard_note; }

bool tn_measure_supports(const char *dtype) {
  /* tf32 data is f32: only the kernel's arithmetic (and the tolerance) differ. */
  return dtype && (!strcmp(dtype, "f32") || !strcmp(dtype, "tf32") || !strcmp(dtype, "f16") ||
                   !strcmp(dtype, "bf16"));
}

void tn_measure_defaults(tn_measure_opts *o) {
  if (o->budget_ms <= 0) o->budget_ms = 100;
  if (o->min_runs <= 0) o->min_runs = 2;
  if (o->max_runs <= 0) o->max_runs = 200;
  if (o->max_runs < o->min_runs) o->max_runs = o->min_runs;
  if (!o->dtype[0]) memcpy(o->dtype, "f32", 4);
}

char *tn_gpu_helpers_source(void) {
  const char *ref = tn_ref_gpu_source();
  size_t len =
      strlen(FILL_SOURCE) + strlen(CHECK_SOURCE) + strlen(READ_SOURCE) + strlen(ref) + 4;
  char *source = malloc(len);
  if (source)
    snprintf(source, len, "%s\n%s\n%s\n%s", FILL_SOURCE, CHECK_SOURCE, READ_SOURCE, ref);
  return source;
}

static mmt_status load_helpers(tn_gpu *g, const char *cache_dir, ut_err *err) {
  mmt_status rc = MMT_OK;
  rt_cubin cubin = {0};
  char *source = tn_gpu_helpers_source();
  if (!source) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  if ((rc = rt_compile_cached(cache_dir, source, "mmtune_helpers", g->dev.arch, &cubin, NULL, NULL,
                              err)))
    goto cleanup;
  const rt_cu *cu = g->cu;
  RT_CU_CHECK(cu, cuModuleLoadData(&g->helpers, cubin.data));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->fill_fn, g->helpers, "mmt_fill_uniform"));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->widen_fn, g->helpers, "mmt_widen_16"));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->ref_fn, g->helpers, TN_REF_GPU_KERNEL));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->check_fn, g->helpers, "mmt_check_f32"));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->read_fn, g->helpers, "mmt_read_bytes"));
  RT_CU_CHECK(cu, cuMemAlloc(&g->stats, sizeof(check_stats)));
cleanup:
  rt_cubin_free(&cubin);
  free(source);
  return rc;
}

mmt_status tn_gpu_open(int ordinal, const char *cache_dir, tn_gpu **out, ut_err *err) {
  mmt_status rc = MMT_OK;
  *out = NULL;
  tn_gpu *g = calloc(1, sizeof *g);
  if (!g) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  if ((rc = rt_device_open(ordinal, &g->dev, err))) goto cleanup;
  if ((rc = rt_driver(&g->cu, err))) goto cleanup;
  const rt_cu *cu = g->cu;
  RT_CU_CHECK(cu, cuDeviceGetAttribute(&g->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, g->dev.dev));
  RT_CU_CHECK(cu, cuDeviceGetAttribute(&g->limits.regs_per_block,
                                       CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, g->dev.dev));
  g->limits.shared_per_block = g->dev.max_shared_optin;
  for (int i = 0; i <= TIME_BATCH; i++) RT_CU_CHECK(cu, cuEventCreate(&g->ev[i], CU_EVENT_DEFAULT));
  if ((rc = load_helpers(g, cache_dir, err))) goto cleanup;
  ut_err guard_err = {{0}};
  mmt_status grc = tn_guard_probe(cu, g->dev.dev, &g->gran, &guard_err);
  if (grc == MMT_ERR_UNSUPPORTED) {
    g->gran = 0;
    ut_copy(g->guard_note, sizeof g->guard_note, "verification without guard pages: ");
    size_t used = strlen(g->guard_note);
    ut_copy(g->guard_note + used, sizeof g->guard_note - used, guard_err.msg);
  } else if (grc) {
    rc = ut_fail(err, grc, "%s", guard_err.msg);
    goto cleanup;
  }
  *out = g;
  g = NULL;
cleanup:
  tn_gpu_close(g);
  return rc;
}

static void free_device_buffers(tn_gpu *g) {
  if (g->a) g->cu->cuMemFree(g->a);
  if (g->ref) g->cu->cuMemFree(g->ref);
  if (g->wa) g->cu->cuMemFree(g->wa);
  g->a = g->b = g->c = g->ref = g->wa = g->wb = g->wc = 0;
  g->cap_bytes = g->ref_cap_bytes = g->wide_cap_bytes = 0;
}

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts times[0 .. n) (n >= 1) and returns their median. */
static double sorted_median(double *times, int n) {
  qsort(times, (size_t)n, sizeof *times, cmp_double);
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

/* Copies of a set of `set_bytes` that timed runs rotate over: cold, enough that the others
 * move more than COLD_L2_COVER x L2 between two runs on one copy; else L2_COVER x L2 in all,
 * between 1 and MAX_COPIES.  (Cold callers keep one copy more for the untimed runs.) */
static size_t timed_copies(const tn_gpu *g, size_t set_bytes, bool cold) {
  if (cold) return ((size_t)COLD_L2_COVER * (size_t)g->l2_bytes + set_bytes - 1) / set_bytes + 1;
  size_t want = ((size_t)L2_COVER * (size_t)g->l2_bytes + set_bytes - 1) / set_bytes;
  return want < 1 ? 1 : want > MAX_COPIES ? MAX_COPIES : want;
}

mmt_status tn_gpu_copy_bandwidth(tn_gpu *g, double *bytes_per_s, ut_err *err) {
  enum { RUNS = 10 };
  mmt_status rc = rt_device_bind(&g->dev, err);
  if (rc) return rc;
  const rt_cu *cu = g->cu;
  size_t bytes = 4 * (size_t)g->l2_bytes;
  bytes = bytes < ((size_t)256 << 20) ? (size_t)256 << 20 : bytes;
  CUdeviceptr src = 0, dst = 0;
  double ms[RUNS];
  RT_CU_CHECK(cu, cuMemAlloc(&src, bytes));
  RT_CU_CHECK(cu, cuMemAlloc(&dst, bytes));
  RT_CU_CHECK(cu, cuMemsetD32(src, 0x3f800000u, bytes / 4));
  RT_CU_CHECK(cu, cuMemcpyDtoD(dst, src, bytes)); /* warm-up: clocks up, pages touched */
  for (int i = 0; i < RUNS; i++) {
    RT_CU_CHECK(cu, cuEventRecord(g->ev[0], 0));
    RT_CU_CHECK(cu, cuMemcpyDtoD(dst, src, bytes));
    RT_CU_CHECK(cu, cuEventRecord(g->ev[1], 0));
    RT_CU_CHECK(cu, cuEventSynchronize(g->ev[1]));
    float run_ms = 0;
    RT_CU_CHECK(cu, cuEventElapsedTime(&run_ms, g->ev[0], g->ev[1]));
    ms[i] = run_ms;
  }
  const double median = sorted_median(ms, RUNS);
  *bytes_per_s = 2.0 * (double)bytes / (median * 1e-3);
cleanup:
  if (dst) cu->cuMemFree(dst);
  if (src) cu->cuMemFree(src);
  return rc;
}

/* Median of TIME_BATCH back-to-back launches of the read kernel over `words` 16-byte words,
 * grid blocks of `threads`, an event between each two, rotating over copies 0 .. rotation - 1,
 * `stride` bytes apart, after one untimed launch on copy `untimed`; as time_runs times a
 * kernel. */
static mmt_status time_read(tn_gpu *g, unsigned grid, unsigned threads,
                            unsigned long long words, size_t stride, int rotation, int untimed,
                            double *median_ms, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  double ms[TIME_BATCH];
  CUdeviceptr sink = g->stats; /* written only by chance; the check sets it before each use */
  for (int i = -1; i < TIME_BATCH; i++) {
    CUdeviceptr src = g->read_buf + stride * (size_t)(i < 0 ? untimed : i % rotation);
    void *params[] = {&src, &words, &sink};
    RT_CU_CHECK(cu, cuLaunchKernel(g->read_fn, grid, 1, 1, threads, 1, 1, 0, 0, params, NULL));
    RT_CU_CHECK(cu, cuEventRecord(g->ev[i + 1], 0)); /* ev[0]: after the untimed one */
  }
  RT_CU_CHECK(cu, cuEventSynchronize(g->ev[TIME_BATCH]));
  for (int i = 0; i < TIME_BATCH; i++) {
    float run_ms = 0;
    RT_CU_CHECK(cu, cuEventElapsedTime(&run_ms, g->ev[i], g->ev[i + 1]));
    ms[i] = run_ms;
  }
  *median_ms = sorted_median(ms, TIME_BATCH);
cleanup:
  return rc;
}

mmt_status tn_gpu_read_ms(tn_gpu *g, double bytes, bool cold, double *ms, ut_err *err) {
  mmt_status rc = rt_device_bind(&g->dev, err);
  if (rc) return rc;
  const rt_cu *cu = g->cu;
  /* Whole 16-byte words (the kernel's loads), at least one; each copy 256-byte aligned. */
  const unsigned long long words = bytes > 16 ? (unsigned long long)ceil(bytes / 16) : 1;
  const size_t stride = round_up((size_t)words * 16, 256);
  /* The copies rotated as a problem's are (cold: at most MAX_COLD_COPIES, a read that small
   * being all launch wherever its bytes are, and one more for the untimed launch; warm: the
   * untimed launch on the first). */
  size_t rotation = timed_copies(g, stride, cold);
  if (cold && rotation > MAX_COLD_COPIES) rotation = MAX_COLD_COPIES;
  const size_t copies = cold ? rotation + 1 : rotation;
  if (stride * copies > g->read_cap) {
    if (g->read_buf) cu->cuMemFree(g->read_buf);
    g->read_buf = 0;
    g->read_cap = 0;
    RT_CU_CHECK(cu, cuMemAlloc(&g->read_buf, stride * copies));
    g->read_cap = stride * copies;
    RT_CU_CHECK(cu, cuMemsetD32(g->read_buf, 0x3f800000u, g->read_cap / 4));
  }
  /* The fastest of a few grids, blocks a multiprocessor x threads a block (which wins depends
   * on the size and the device: fewer blocks start sooner, more keep more loads in flight). */
  static const unsigned grids[][2] = {{1, 1024}, {2, 1024}, {4, 512}, {8, 256}};
  double best = 0;
  for (size_t v = 0; v < sizeof grids / sizeof grids[0]; v++) {
    double median = 0;
    const unsigned grid = grids[v][0] * (unsigned)g->dev.info.sm_count;
    if ((rc = time_read(g, grid, grids[v][1], words, stride, (int)rotation,
                        cold ? (int)rotation : 0, &median, err)))
      return rc;
    if (best == 0 || median < best) best = median;
  }
  *ms = best;
cleanup:
  return rc;
}

void tn_gpu_close(tn_gpu *g) {
  if (!g) return;
  if (g->cu && g->dev.ctx) {
    g->cu->cuCtxSetCurrent(g->dev.ctx);
    free_device_buffers(g);
    for (int i = 0; i < 3; i++) tn_guard_free(g->cu, &g->guard[i]);
    for (int i = 0; i <= TIME_BATCH; i++)
      if (g->ev[i]) g->cu->cuEventDestroy(g->ev[i]);
    if (g->helpers) g->cu->cuModuleUnload(g->helpers);
    if (g->stats) g->cu->cuMemFree(g->stats);
    if (g->read_buf) g->cu->cuMemFree(g->read_buf);
  }
  rt_device_close(&g->dev);
  free(g->host_a);
  free(g->host_b);
  free(g->host_ref);
  free(g);
}

/* Grows a host buffer to at least `bytes`. */
static mmt_status host_reserve(void **buf, size_t *cap, size_t bytes, ut_err *err) {
  if (*cap >= bytes) return MMT_OK;
  void *p = realloc(*buf, bytes);
  if (!p) return ut_fail(err, MMT_ERR_NOMEM, "out of host memory (%zu bytes)", bytes);
  *buf = p;
  *cap = bytes;
  return MMT_OK;
}

/* Sizes the device buffers for the problem: copies of (A, B, C) covering L2_COVER x L2. */
static mmt_status reserve_problem(tn_gpu *g, const tn_measure_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  /* Each copy starts 256-byte aligned, like a cudaMalloc'd buffer, as the tuner assumes. */
  int64_t rows[3], width[3]; /* as stored */
  gen_stored_rows(o->layout, o->m, o->n, o->k, rows);
  gen_min_ld(o->layout, o->m, o->n, o->k, width);
  g->a_elems = round_up((size_t)rows[0] * (size_t)o->lda, 64);
  g->b_elems = round_up((size_t)rows[1] * (size_t)o->ldb, 64);
  g->c_elems = round_up((size_t)rows[2] * (size_t)o->ldc, 64);
  g->a_extent = (size_t)((rows[0] - 1) * o->lda + width[0]);
  g->b_extent = (size_t)((rows[1] - 1) * o->ldb + width[1]);
  g->c_extent = (size_t)((rows[2] - 1) * o->ldc + width[2]);
  g->elem = gen_dtype_size(o->dtype);
  g->bf16 = strcmp(o->dtype, "bf16") == 0;
  if (!tn_measure_supports(o->dtype))
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "measuring dtype %s is not supported", o->dtype);
  /* The tuner's buffers start 256-byte aligned: the pitches decide (gen_packed_problem). */
  uint64_t pitches[] = {256, (uint64_t)(o->lda * g->elem), (uint64_t)(o->ldb * g->elem),
                        (uint64_t)(o->ldc * g->elem)};
  g->align = (unsigned)gen_align_bytes(pitches, 4);
  const size_t extents[3] = {g->a_extent, g->b_extent, g->c_extent};
  for (int i = 0; g->gran && i < 3; i++)
    if ((rc = tn_guard_reserve(cu, g->dev.dev, g->gran, &g->guard[i],
                               extents[i] * (size_t)g->elem, err)))
      return rc;
  size_t set_bytes = (size_t)g->elem * (g->a_elems + g->b_elems + g->c_elems);
  /* Cold: one copy more for the untimed runs. */
  const size_t want = timed_copies(g, set_bytes, o->cold) + (o->cold ? 1 : 0);
  if (o->cold && want > MAX_COLD_COPIES)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "--cold: the problem is too small to rotate over twice the L2 (%zu copies)",
                   want);
  g->copies = (int)want;
  size_t bytes = set_bytes * (size_t)g->copies;
  size_t ref_bytes = 8 * (size_t)o->m * (size_t)o->n; /* the reference lives on the device */
  if (bytes > g->cap_bytes || ref_bytes > g->ref_cap_bytes) {
    free_device_buffers(g);
    RT_CU_CHECK(cu, cuMemAlloc(&g->a, bytes));
    g->cap_bytes = bytes;
    RT_CU_CHECK(cu, cuMemAlloc(&g->ref, ref_bytes));
    g->ref_cap_bytes = ref_bytes;
  }
  /* Layout: all A copies, then all B copies, then all C copies. */
  g->b = g->a + (size_t)g->elem * g->a_elems * (size_t)g->copies;
  g->c = g->b + (size_t)g->elem * g->b_elems * (size_t)g->copies;
  size_t wide_bytes = g->elem == 4 ? 0 : 4 * (g->a_elems + g->b_elems + g->c_elems);
  if (wide_bytes > g->wide_cap_bytes) {
    if (g->wa) g->cu->cuMemFree(g->wa);
    g->wa = 0;
    g->wide_cap_bytes = 0;
    RT_CU_CHECK(cu, cuMemAlloc(&g->wa, wide_bytes));
    g->wide_cap_bytes = wide_bytes;
  }
  g->wb = g->wa + 4 * g->a_elems;
  g->wc = g->wb + 4 * g->b_elems;
cleanup:
  if (rc) free_device_buffers(g);
  return rc;
}

/* Launches one of the elementwise helper kernels over n elements: args[0..] as given. */
static mmt_status launch_elementwise(tn_gpu *g, CUfunction fn, size_t n, void **args,
                                     ut_err *err) {
  mmt_status rc = MMT_OK;
  unsigned blocks = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
  if (blocks == 0) return MMT_OK;
  RT_CU_CHECK(g->cu, cuLaunchKernel(fn, blocks, 1, 1, 256, 1, 1, 0, 0, args, NULL));
cleanup:
  return rc;
}

/* n random elements of the problem's dtype at x. */
static mmt_status fill_random(tn_gpu *g, CUdeviceptr x, size_t n, uint64_t seed, ut_err *err) {
  unsigned long long count = n, s = seed;
  int bits = g->elem == 4 ? 32 : g->bf16 ? -16 : 16;
  return launch_elementwise(g, g->fill_fn, n, (void *[]){&x, &count, &s, &bits}, err);
}

/* n 16-bit elements at x as floats at y. */
static mmt_status widen(tn_gpu *g, CUdeviceptr x, CUdeviceptr y, size_t n, ut_err *err) {
  unsigned long long count = n;
  return launch_elementwise(g, g->widen_fn, n, (void *[]){&x, &y, &count, &g->bf16}, err);
}

/* Fresh random A and B in every copy (seeded per candidate), every C poisoned with NaN. */
static mmt_status prepare_inputs(tn_gpu *g, const tn_measure_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  size_t na = g->a_elems * (size_t)g->copies, nb = g->b_elems * (size_t)g->copies;
  if ((rc = fill_random(g, g->a, na, o->seed * 2 + 1, err))) return rc;
  if ((rc = fill_random(g, g->b, nb, o->seed * 2 + 2, err))) return rc;
  /* NaN in every element: two 16-bit NaNs per word (c_elems is even) for 16-bit types. */
  unsigned nan_word = g->elem == 4 ? NAN_BITS : g->bf16 ? 0x7fc07fc0u : 0x7e007e00u;
  RT_CU_CHECK(g->cu, cuMemsetD32(g->c, nan_word, g->c_elems * (size_t)g->copies * (size_t)g->elem / 4));
cleanup:
  return rc;
}

static rt_gemm_args copy_args(const tn_gpu *g, const tn_measure_opts *o, int copy) {
  rt_gemm_args a = {.m = o->m, .n = o->n, .k = o->k, .alpha = 1.0f, .beta = 0.0f,
                    .lda = o->lda, .ldb = o->ldb, .ldc = o->ldc};
  a.a = g->a + (size_t)g->elem * g->a_elems * (size_t)copy;
  a.b = g->b + (size_t)g->elem * g->b_elems * (size_t)copy;
  a.c = g->c + (size_t)g->elem * g->c_elems * (size_t)copy;
  return a;
}

/* Errors after which the context is dead: the process must stop using the device. */
static bool is_sticky(CUresult r) {
  return r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED ||
         r == CUDA_ERROR_MISALIGNED_ADDRESS || r == CUDA_ERROR_ILLEGAL_INSTRUCTION ||
         r == CUDA_ERROR_HARDWARE_STACK_ERROR || r == CUDA_ERROR_INVALID_PC ||
         r == CUDA_ERROR_ASSERT || r == CUDA_ERROR_LAUNCH_TIMEOUT || r == CUDA_ERROR_ECC_UNCORRECTABLE;
}

/* Synchronizes; a sticky error becomes MMT_ERR_FAULT. */
static mmt_status sync_checked(tn_gpu *g, const char *what, ut_err *err) {
  CUresult r = g->cu->cuCtxSynchronize();
  if (r == CUDA_SUCCESS) return MMT_OK;
  rt_cu_fail(err, what, r);
  return is_sticky(r) ? MMT_ERR_FAULT : MMT_ERR_CUDA;
}

/* The float64 reference of the inputs at in_a, in_b (their extents: nothing past them is
 * read) into g->ref on the device (row stride n): computed on the CPU and uploaded for small
 * problems, by the float64 GPU kernel for large ones. */
static mmt_status compute_reference(tn_gpu *g, const tn_measure_opts *o, CUdeviceptr in_a,
                                    CUdeviceptr in_b, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  const char *layout = o->layout[0] ? o->layout : "nn";
  size_t ref_bytes = 8 * (size_t)o->m * (size_t)o->n;
  /* The reference reads float: 16-bit inputs are widened first, exactly. */
  CUdeviceptr a = in_a, b = in_b;
  if (g->elem != 4) {
    if ((rc = widen(g, in_a, g->wa, g->a_extent, err)) ||
        (rc = widen(g, in_b, g->wb, g->b_extent, err)))
      return rc;
    a = g->wa;
    b = g->wb;
  }
  if ((double)o->m * (double)o->k * (double)o->n <= (double)CPU_REF_MAX_MACS) {
    if ((rc = host_reserve((void **)&g->host_ref, &g->host_ref_cap, ref_bytes, err))) return rc;
    if ((rc = host_reserve((void **)&g->host_a, &g->host_a_cap, 4 * g->a_extent, err))) return rc;
    if ((rc = host_reserve((void **)&g->host_b, &g->host_b_cap, 4 * g->b_extent, err))) return rc;
    RT_CU_CHECK(cu, cuMemcpyDtoH(g->host_a, a, 4 * g->a_extent));
    RT_CU_CHECK(cu, cuMemcpyDtoH(g->host_b, b, 4 * g->b_extent));
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    if ((rc = tn_ref_gemm_layout(layout, o->m, o->n, o->k, g->host_a, o->lda, g->host_b, o->ldb,
                                 g->host_ref, o->n, threads > 0 ? (int)threads : 1, err)))
      return rc;
    RT_CU_CHECK(cu, cuMemcpyHtoD(g->ref, g->host_ref, ref_bytes));
    return MMT_OK;
  }
  int m = (int)o->m, n = (int)o->n, k = (int)o->k, lda = (int)o->lda, ldb = (int)o->ldb, ldr = n;
  int ta = layout[0] == 't', tb = layout[1] == 't';
  void *args[] = {&m, &n, &k, &ta, &tb, &a, &lda, &b, &ldb, &g->ref, &ldr};
  /* Launch geometry of gpu/ref.h: 64x64 tiles; rows stride by a grid.y capped at 65535. */
  int64_t tiles_y = (m + 63) / 64;
  RT_CU_CHECK(cu, cuLaunchKernel(g->ref_fn, (unsigned)((n + 63) / 64),
                                 (unsigned)(tiles_y > 65535 ? 65535 : tiles_y), 1, 16, 16, 1, 0, 0,
                                 args, NULL));
  rc = sync_checked(g, "float64 reference kernel", err);
cleanup:
  return rc;
}

/* Runs mmt_check_f32 over the C at in_c (its extent) and the reference; fills *cs. */
static mmt_status device_compare(tn_gpu *g, const tn_measure_opts *o, CUdeviceptr in_c,
                                 check_stats *cs, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  check_stats init = {{0, 0}, {0, 0, 0, ~0ull, 0, ~0ull}};
  RT_CU_CHECK(cu, cuMemcpyHtoD(g->stats, &init, sizeof init));
  long long m = o->m, n = o->n, ldc = o->ldc, ldr = o->n;
  CUdeviceptr sums = g->stats, st = g->stats + offsetof(check_stats, st), c = in_c;
  if (g->elem != 4) { /* C widened to float: exact, NaN stays NaN */
    if ((rc = widen(g, in_c, g->wc, g->c_extent, err))) return rc;
    c = g->wc;
  }
  void *args[] = {&m, &n, &c, &ldc, &g->ref, &ldr, &sums, &st};
  unsigned blocks = (unsigned)(m < 8192 ? m : 8192);
  RT_CU_CHECK(cu, cuLaunchKernel(g->check_fn, blocks, 1, 1, 256, 1, 1, 0, 0, args, NULL));
  if ((rc = sync_checked(g, "result check kernel", err))) return rc;
  RT_CU_CHECK(cu, cuMemcpyDtoH(cs, g->stats, sizeof *cs));
cleanup:
  return rc;
}

/* Checks the C at c: values against the reference (tn_compare's measures and tolerances),
 * and padding columns (n..ldc) untouched. */
static mmt_status check_result(tn_gpu *g, const tn_measure_opts *o, CUdeviceptr c,
                               tn_measurement *out, ut_err *err) {
  check_stats cs;
  mmt_status rc = device_compare(g, o, c, &cs, err);
  if (rc) return rc;
  double dmax, rmax, rel_tol = 0, max_tol = 0;
  memcpy(&dmax, &cs.st[0], sizeof dmax);
  memcpy(&rmax, &cs.st[1], sizeof rmax);
  /* An all-zero reference makes both measures absolute, as in tn_compare. */
  out->rel_err = cs.sums[1] > 0 ? sqrt(cs.sums[0] / cs.sums[1]) : sqrt(cs.sums[0]);
  out->max_err = rmax > 0 ? dmax / rmax : dmax;
  tn_tolerance(o->dtype, &rel_tol, &max_tol);
  unsigned long long ldc = (unsigned long long)o->ldc;
  if (cs.st[2] > 0) {
    out->status = DB_VERIFY_FAILED;
    snprintf(out->error, sizeof out->error, "%llu NaN/Inf elements (unwritten?), first at (%llu, %llu)",
             cs.st[2], cs.st[3] / ldc, cs.st[3] % ldc);
  } else if (cs.st[4] > 0) {
    out->status = DB_VERIFY_FAILED;
    snprintf(out->error, sizeof out->error, "wrote outside C: %llu padding elements, first at (%llu, %llu)",
             cs.st[4], cs.st[5] / ldc, cs.st[5] % ldc);
  } else if (!(out->rel_err <= rel_tol && out->max_err <= max_tol)) {
    out->status = DB_VERIFY_FAILED;
    snprintf(out->error, sizeof out->error, "error too large: rel %.3g (tol %.1g), max %.3g (tol %.1g)",
             out->rel_err, rel_tol, out->max_err, max_tol);
  }
  return MMT_OK;
}


/* Min, median and max of `runs` times (sorted in place), and the TFLOP/s of the median. */
static void set_times(tn_measurement *out, const tn_measure_opts *o, double *times, int runs) {
  out->ms_median = sorted_median(times, runs);
  out->runs = runs;
  out->ms_min = times[0];
  out->ms_max = times[runs - 1];
  out->tflops = 2.0 * (double)o->m * (double)o->n * (double)o->k / (out->ms_median * 1e-3) / 1e12;
}

/* Timed runs with events, rotating input copies, in back-to-back batches (TIME_BATCH); fills
 * the time fields of out.  The first batch is PROBE_RUNS runs: their median sizes the later
 * batches so that one stays within the time budget, and judges the cutoff (o->cutoff_ms): a
 * candidate whose median is over it is not a contender, and its row holds those runs.  The
 * cutoff was once judged on a single run, and one run can carry a stall of the host that
 * queues it (16 compile threads share its cores): 11% of a main job's rows were such rows,
 * some 2-4x slower than the same kernel timed in full, and the model believed them. */
static mmt_status time_runs(tn_gpu *g, tn_launch_fn launch, void *user, const tn_measure_opts *o,
                            tn_measurement *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  double *times = calloc((size_t)o->max_runs, sizeof *times);
  if (!times) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  /* Cold: the untimed runs use the last copy, which the timed ones never touch. */
  const int rotation = o->cold ? g->copies - 1 : g->copies;
  rt_gemm_args warm = copy_args(g, o, o->cold ? g->copies - 1 : g->copies > 1 ? 1 : 0);
  if ((rc = launch(user, &warm, 0, err))) goto cleanup;
  /* An idle GPU runs at low clocks for tens of milliseconds: a row measured right after one
   * would be slower than the same kernel measured in a busy loop. */
  for (double t0 = ut_now_seconds(); (ut_now_seconds() - t0) * 1e3 < o->warmup_ms;) {
    if ((rc = launch(user, &warm, 0, err))) goto cleanup;
    RT_CU_CHECK(cu, cuStreamSynchronize(0));
  }
  int batch = PROBE_RUNS;
  double total = 0;
  int runs = 0;
  while (runs < o->max_runs) {
    int n = o->max_runs - runs < batch ? o->max_runs - runs : batch;
    /* The untimed run ahead keeps the device busy while the first timed one is queued. */
    if ((rc = launch(user, &warm, 0, err))) goto cleanup;
    RT_CU_CHECK(cu, cuEventRecord(g->ev[0], 0));
    for (int i = 0; i < n; i++) {
      rt_gemm_args args = copy_args(g, o, (runs + i) % rotation);
      if ((rc = launch(user, &args, 0, err))) goto cleanup;
      RT_CU_CHECK(cu, cuEventRecord(g->ev[i + 1], 0));
    }
    CUresult r = cu->cuEventSynchronize(g->ev[n]);
    if (r != CUDA_SUCCESS) {
      rt_cu_fail(err, "timed run", r);
      rc = is_sticky(r) ? MMT_ERR_FAULT : MMT_ERR_CUDA;
      goto cleanup;
    }
    for (int i = 0; i < n; i++) {
      float ms = 0;
      RT_CU_CHECK(cu, cuEventElapsedTime(&ms, g->ev[i], g->ev[i + 1]));
      times[runs++] = ms;
      total += ms;
    }
    if (runs == n) { /* the probe: its times, as its row would hold them */
      set_times(out, o, times, runs);
      const double probe_ms = out->ms_median;
      if (o->cutoff_ms > 0 && probe_ms > o->cutoff_ms) break; /* far behind the best so far */
      const double per_batch = probe_ms > 0 ? o->budget_ms / 4 / probe_ms : TIME_BATCH;
      batch = per_batch < 1 ? 1 : per_batch > TIME_BATCH ? TIME_BATCH : (int)per_batch;
    }
    if (runs >= o->min_runs && total >= o->budget_ms) break;
  }
  set_times(out, o, times, runs);
cleanup:
  free(times);
  return rc;
}

/* The kernel could not be loaded or launched: a property of the config, not of the GPU. */
static void launch_error(tn_measurement *out, const char *msg) {
  out->status = DB_LAUNCH_ERROR;
  ut_copy(out->error, sizeof out->error, msg);
}

/* What each verification launch is, with guard pages: its operands' placement. */
static const char *const k_placements[] = {"operands flush against unmapped memory after them",
                                           "operands flush against unmapped memory before them"};

/* The operands of verification launch `which` (0 or 1; k_placements): A, B and C placed in
 * their guarded buffers (0: ending at the end of the mapped range, at the verified alignment;
 * 1: starting at its start), A and B filled as copy 0 is (the fill is a function of seed and
 * index, so the same values), C poisoned with NaN.  Without guard pages: copy 0 as it is. */
static mmt_status place_operands(tn_gpu *g, const tn_measure_opts *o, int which,
                                 rt_gemm_args *args, ut_err *err) {
  mmt_status rc = MMT_OK;
  *args = copy_args(g, o, 0);
  if (!g->gran) return MMT_OK;
  const tn_guard_side side = which == 0 ? TN_GUARD_END : TN_GUARD_START;
  const size_t e = (size_t)g->elem;
  args->a = tn_guard_place(&g->guard[0], g->a_extent * e, g->align, side);
  args->b = tn_guard_place(&g->guard[1], g->b_extent * e, g->align, side);
  args->c = tn_guard_place(&g->guard[2], g->c_extent * e, g->align, side);
  if ((rc = fill_random(g, args->a, g->a_extent, o->seed * 2 + 1, err))) return rc;
  if ((rc = fill_random(g, args->b, g->b_extent, o->seed * 2 + 2, err))) return rc;
  if (e == 4)
    RT_CU_CHECK(g->cu, cuMemsetD32(args->c, NAN_BITS, g->c_extent));
  else
    RT_CU_CHECK(g->cu, cuMemsetD16(args->c, g->bf16 ? 0x7fc0 : 0x7e00, g->c_extent));
cleanup:
  return rc;
}

/* The verification launches (both placements with guard pages, else one on copy 0), each
 * checked against the float64 reference.  out->status stays DB_OK when all pass.  A fault
 * is MMT_ERR_FAULT, its message naming the placement. */
static mmt_status verify(tn_gpu *g, tn_launch_fn launch, void *user, const tn_measure_opts *o,
                         tn_measurement *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  for (int i = 0; i < (g->gran ? 2 : 1); i++) {
    rt_gemm_args args;
    if ((rc = place_operands(g, o, i, &args, err))) return rc;
    ut_err launch_err = {{0}};
    if (launch(user, &args, 0, &launch_err) != MMT_OK) {
      launch_error(out, launch_err.msg);
      return MMT_OK;
    }
    char what[128];
    snprintf(what, sizeof what, "candidate kernel%s%s", g->gran ? ", " : "",
             g->gran ? k_placements[i] : "");
    if ((rc = sync_checked(g, what, err))) return rc;
    if (i == 0 && (rc = compute_reference(g, o, args.a, args.b, err))) return rc;
    if ((rc = check_result(g, o, args.c, out, err))) return rc;
    if (out->status != DB_OK) {
      if (g->gran) {
        size_t used = strlen(out->error);
        snprintf(out->error + used, sizeof out->error - used, " (%s)", k_placements[i]);
      }
      return MMT_OK;
    }
  }
  return MMT_OK;
}

/* Verifies, then times, launch(user, ...) on the problem of o (defaults filled) into out
 * (initialized by the caller); the device is bound.  Timing runs on the copies (prepared
 * before verification, which may use them). */
static mmt_status measure(tn_gpu *g, tn_launch_fn launch, void *user, const tn_measure_opts *o,
                          tn_measurement *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  if ((rc = reserve_problem(g, o, err))) return rc;
  if ((rc = prepare_inputs(g, o, err))) return rc;
  if ((rc = verify(g, launch, user, o, out, err))) return rc;
  if (out->status != DB_OK) return MMT_OK;
  return time_runs(g, launch, user, o, out, err);
}

static void measurement_init(tn_measurement *out) {
  memset(out, 0, sizeof *out);
  out->regs = out->shared_bytes = out->local_bytes = -1;
}

mmt_status tn_gpu_measure_launch(tn_gpu *g, tn_launch_fn launch, void *user,
                                 const tn_measure_opts *opts, tn_measurement *out, ut_err *err) {
  tn_measure_opts o = *opts;
  tn_measure_defaults(&o);
  measurement_init(out);
  mmt_status rc = rt_device_bind(&g->dev, err);
  return rc ? rc : measure(g, launch, user, &o, out, err);
}

static mmt_status launch_kernel(void *kern, const rt_gemm_args *args, CUstream stream,
                                ut_err *err) {
  return rt_kernel_launch(kern, args, stream, err);
}

mmt_status tn_gpu_measure(tn_gpu *g, const rt_cubin *cubin, const gen_kernel *spec,
                          const tn_measure_opts *opts, tn_measurement *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  rt_kernel kern = {0};
  tn_measure_opts o = *opts;
  tn_measure_defaults(&o);
  measurement_init(out);
  if ((rc = rt_device_bind(&g->dev, err))) return rc;
  ut_err load_err = {{0}};
  mmt_status lrc = rt_kernel_load(&g->dev, cubin, spec, &kern, &load_err);
  if (lrc == MMT_ERR_UNSUPPORTED || lrc == MMT_ERR_CUDA) {
    launch_error(out, load_err.msg);
    return MMT_OK;
  }
  if (lrc) return ut_fail(err, lrc, "%s", load_err.msg);
  out->regs = kern.regs;
  out->shared_bytes = kern.static_shared_bytes + (int)kern.shared_bytes;
  out->local_bytes = kern.local_bytes;
  tn_kernel_figures fig = {.regs = kern.regs, .local_bytes = kern.local_bytes,
                           .threads = (int)(kern.block[0] * kern.block[1] * kern.block[2]),
                           .shared_bytes = out->shared_bytes};
  if (tn_prune(&fig, &g->limits, out->error, sizeof out->error)) {
    out->status = DB_PRUNED; /* compiler feedback: timing it would only cost GPU time */
    rt_kernel_unload(&kern);
    return MMT_OK;
  }
  rc = measure(g, launch_kernel, &kern, &o, out, err);
  if (rc != MMT_ERR_FAULT) rt_kernel_unload(&kern); /* a dead context cannot unload */
  return rc;
}
