/*
 * matmul_grouped.c -- mmtune-matmul-bench's grouped family (bench/matmul.c's header comment
 * says what it measures and how): mixture-of-experts layers, one grouped mmt_matmul (the
 * contiguous layout, and at up to MASKED_ROWS routed rows the masked one) against
 * cublasGemmGroupedBatchedEx and against a loop of plain calls.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_bench.h"
#include "gpu/bandwidth.h"
#include "gpu/ref.h"
#include "gpu/routing.h"

/* ---- grouped: a mixture of experts' layer ---- */

typedef struct {
  mmt_matmul_desc d;      /* the grouped call */
  CUdeviceptr base, ptrs; /* the copies; cuBLAS's pointer arrays, a set a copy */
  size_t set_bytes, a_bytes, b_bytes, d_bytes;
  int64_t g, used;  /* experts; those with rows */
  int *rows;        /* each expert's rows (host) */
  int32_t *offsets; /* G + 1: expert z's rows start at offsets[z] (what mmtune reads) */
  int *used_rows;   /* the rows of those with rows, in order (cuBLAS's m) */
  int64_t block;    /* masked: the rows of each expert's block of A and D (its most); 0 */
} grouped_case;

/* The first row of expert z in A and D as stored: its block's, or its offset. */
static int64_t first_row(const grouped_case *gc, int64_t z) {
  return gc->block ? z * gc->block : gc->offsets[z];
}

static mmt_status grouped_mm(bench *b, void *user, int copy, ut_err *err) {
  grouped_case *gc = user;
  mmt_matmul_desc d = gc->d;
  const CUdeviceptr set = gc->base + (CUdeviceptr)copy * gc->set_bytes;
  d.a = (const void *)(uintptr_t)set;
  d.b = (const void *)(uintptr_t)(set + gc->a_bytes);
  d.d = (void *)(uintptr_t)(set + gc->a_bytes + gc->b_bytes);
  mmt_status rc = mmt_matmul(b->ctx, &d, b->stream);
  return rc ? ut_fail(err, rc, "mmt_matmul: %s", mmt_errmsg(b->ctx)) : MMT_OK;
}

static mmt_status grouped_peer(bench *b, void *user, int copy, ut_err *err) {
  grouped_case *gc = user;
  const mmt_matmul_desc *d = &gc->d;
  return tn_cublas_gemm_grouped(b->cb, b->stream, b->o->dtype, "nt", gc->used, gc->used_rows, d->n,
                                d->k, 1.0f, d->lda, d->ldb, 0.0f, d->ldd,
                                gc->ptrs + (CUdeviceptr)copy * 24 * (size_t)gc->used, err);
}

/* The loop a caller without a grouped call writes: a plain mmt_matmul an expert with rows. */
static mmt_status grouped_loop(bench *b, void *user, int copy, ut_err *err) {
  grouped_case *gc = user;
  const CUdeviceptr set = gc->base + (CUdeviceptr)copy * gc->set_bytes;
  const size_t e = (size_t)mb_size_of(b->o->type);
  mmt_matmul_desc d = gc->d;
  d.batch = 1, d.stride_a = d.stride_b = d.stride_c = d.stride_d = 0;
  d.group_mode = MMT_GROUP_NONE, d.group_rows = NULL, d.group_tokens = 0;
  for (int64_t z = 0; z < gc->g; z++) {
    if (!gc->rows[z]) continue;
    d.m = gc->rows[z];
    d.a = (const void *)(uintptr_t)(set + (size_t)(first_row(gc, z) * d.k) * e);
    d.b = (const void *)(uintptr_t)(set + gc->a_bytes + (size_t)(z * d.n * d.k) * e);
    d.d = (void *)(uintptr_t)(set + gc->a_bytes + gc->b_bytes + 2 * gc->d_bytes +
                              (size_t)(first_row(gc, z) * d.n) * e);
    mmt_status rc = mmt_matmul(b->ctx, &d, b->stream);
    if (rc)
      return ut_fail(err, rc, "mmt_matmul (expert %lld): %s", (long long)z, mmt_errmsg(b->ctx));
  }
  return MMT_OK;
}

/* Each of `copies` sets' A and B filled, and cuBLAS's pointer arrays of the experts with rows
 * (A, B and cuBLAS's D of each, a set a copy) uploaded to gc->ptrs. */
static mmt_status grouped_operands(bench *b, grouped_case *gc, int copies, ut_err *err) {
  mmt_status rc = MMT_OK;
  const mmt_dtype t = b->o->type;
  const size_t e = (size_t)mb_size_of(t), per_copy = 3 * (size_t)gc->used;
  const int64_t r = gc->block ? gc->g * gc->block : gc->d.m, n = gc->d.n, k = gc->d.k;
  uint64_t *ptrs = malloc(8 * per_copy * (size_t)copies);
  if (!ptrs) return ut_fail(err, MMT_ERR_NOMEM, "out of host memory");
  for (int c = 0; c < copies && !rc; c++) {
    const CUdeviceptr set = gc->base + (CUdeviceptr)c * gc->set_bytes;
    uint64_t *p = ptrs + per_copy * (size_t)c;
    int64_t u = 0;
    for (int64_t z = 0; z < gc->g; z++) {
      if (!gc->rows[z]) continue;
      p[u] = set + (size_t)(first_row(gc, z) * k) * e;                      /* A */
      p[gc->used + u] = set + gc->a_bytes + (size_t)(z * n * k) * e;        /* B */
      p[2 * gc->used + u] = set + gc->a_bytes + gc->b_bytes + gc->d_bytes + /* D */
                            (size_t)(first_row(gc, z) * n) * e;
      u++;
    }
    if (!(rc = mb_fill(b, set, (size_t)(r * k), t, err)))
      rc = mb_fill(b, set + gc->a_bytes, (size_t)(gc->g * n * k), t, err);
  }
  if (!rc) RT_CU_CHECK(b->cu, cuMemcpyHtoD(gc->ptrs, ptrs, 8 * per_copy * (size_t)copies));
cleanup:
  free(ptrs);
  return rc;
}

/* The decode regime (GROUPED_DECODE_ROWS routed rows or fewer): the experts' weights are the
 * bytes, so a grouped call is held to a plain read of the weights of the experts with rows. */
#define GROUPED_DECODE_ROWS 64
/* The masked layout (a graph-replayed decode step's) is measured up to this many routed rows:
 * past it, a skewed routing's deepest block makes the buffers mostly rows no expert has. */
#define MASKED_ROWS 256

/* The three D's compared (mmtune's and the loop's with cuBLAS's), the three timed, the two
 * ratios reported; in the decode regime a third, against a plain read of the weights hit. */
static mmt_status grouped_measure(bench *b, grouped_case *gc, int copies, const char *name,
                                  bool zipf, grouped_tallies *ts, ut_err *err) {
  const mmt_dtype t = b->o->type;
  const int64_t routed = gc->d.group_tokens, stored = gc->block ? gc->g * gc->block : routed;
  const size_t elems = (size_t)(stored * gc->d.n);
  const CUdeviceptr d0 = gc->base + gc->a_bytes + gc->b_bytes;
  double rel = INFINITY, rel_loop = INFINITY, mm_ms = 0, peer_ms = 0, loop_ms = 0, tol, max_tol;
  mmt_status rc;
  /* masked: the rows past each expert's count, which none of the three writes, alike */
  CUresult r =
      gc->block ? b->cu->cuMemsetD32Async(d0, 0, 3 * gc->d_bytes / 4, b->stream) : CUDA_SUCCESS;
  if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuMemsetD32Async (masked D)", r);
  if ((rc = grouped_mm(b, gc, 0, err)) || (rc = grouped_peer(b, gc, 0, err)) ||
      (rc = grouped_loop(b, gc, 0, err)) ||
      (rc = mb_compare(b, d0, d0 + gc->d_bytes, elems, t, &rel, err)) ||
      (rc = mb_compare(b, d0 + 2 * gc->d_bytes, d0 + gc->d_bytes, elems, t, &rel_loop, err)) ||
      (rc = mb_time_pair(b, grouped_mm, grouped_peer, gc, copies, &mm_ms, &peer_ms, err)) ||
      (rc = mb_time_ms(b, grouped_loop, gc, copies, &loop_ms, err)))
    return rc;
  char what[96], kernel[400];
  int most = 0;
  for (int64_t z = 0; z < gc->g; z++) most = gc->rows[z] > most ? gc->rows[z] : most;
  snprintf(what, sizeof what, "%s R=%lld %s (%lld used, max %d)", name, (long long)routed,
           zipf ? "zipf" : "unif", (long long)gc->used, most);
  mb_kernel_of(b, &gc->d, kernel, sizeof kernel);
  tn_tolerance(b->o->dtype, &tol, &max_tol);
  mb_report(b, ts->vs[0], ts->name[0], what, mm_ms, peer_ms, rel, tol, kernel);
  mb_report(b, ts->vs[1], ts->name[1], what, mm_ms, loop_ms, fmax(rel, rel_loop), tol, "");
  if (routed > GROUPED_DECODE_ROWS) return MMT_OK;
  double read_ms = 0;
  const double weights = (double)gc->used * (double)gc->d.n * (double)gc->d.k * mb_size_of(t);
  if ((rc = rt_device_bind(&b->dev, err)) ||
      (rc = tn_gpu_read_ms(b->g, weights, b->o->cold, &read_ms, err)) ||
      (rc = rt_device_bind(&b->dev, err)))
    return rc;
  mb_report(b, ts->vs[2], ts->name[2], what, mm_ms, read_ms, rel, tol, "");
  return MMT_OK;
}

/* Layer `name` (g experts of n x k) over r routed rows, the routing uniform or Zipf-skewed,
 * in the contiguous layout or the masked one (each expert a block as deep as the most rows
 * any expert got). */
static mmt_status grouped_one(bench *b, const char *name, int64_t g, int64_t n, int64_t k,
                              int64_t r, bool zipf, bool masked, grouped_tallies *ts, ut_err *err) {
  mmt_status rc = MMT_OK;
  const mmt_dtype t = b->o->type;
  const size_t e = (size_t)mb_size_of(t), al = 256;
  grouped_case gc = {.g = g};
  gc.rows = calloc((size_t)g, sizeof *gc.rows);
  gc.used_rows = calloc((size_t)g, sizeof *gc.used_rows);
  gc.offsets = calloc((size_t)g + 1, sizeof *gc.offsets);
  double *cdf = calloc((size_t)g, sizeof *cdf);
  CUdeviceptr rows_dev = 0;
  if (!gc.rows || !gc.used_rows || !gc.offsets || !cdf) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of host memory");
    goto cleanup;
  }
  tn_route(zipf ? TN_ROUTE_ZIPF : TN_ROUTE_UNIFORM, g, r, (uint64_t)(g * 131 + r * 7 + zipf), cdf,
           gc.rows);
  for (int64_t z = 0; z < g; z++) {
    gc.offsets[z + 1] = gc.offsets[z] + gc.rows[z];
    if (gc.rows[z]) gc.used_rows[gc.used++] = gc.rows[z];
    if (masked && gc.rows[z] > gc.block) gc.block = gc.rows[z];
  }
  const int64_t stored = masked ? g * gc.block : r; /* the rows of A and D */
  gc.a_bytes = ((size_t)(stored * k) * e + al - 1) / al * al;
  gc.b_bytes = ((size_t)(g * n * k) * e + al - 1) / al * al;
  gc.d_bytes = ((size_t)(stored * n) * e + al - 1) / al * al;
  gc.set_bytes = gc.a_bytes + gc.b_bytes + 3 * gc.d_bytes; /* D: mmtune's, cuBLAS's, the loop's */
  if (gc.set_bytes > OPERANDS_MAX_BYTES) goto cleanup;     /* left out: OPERANDS_MAX_BYTES */
  const int copies = mb_copies_for(b, gc.set_bytes);
  RT_CU_CHECK(b->cu, cuMemAlloc(&gc.base, gc.set_bytes * (size_t)copies));
  RT_CU_CHECK(b->cu, cuMemAlloc(&gc.ptrs, 24 * (size_t)gc.used * (size_t)copies));
  RT_CU_CHECK(b->cu, cuMemAlloc(&rows_dev, 4 * (size_t)(g + 1)));
  /* what mmtune reads: G + 1 offsets, or masked G counts */
  RT_CU_CHECK(b->cu, cuMemcpyHtoD(rows_dev, masked ? (const void *)gc.rows : gc.offsets,
                                  4 * (size_t)(masked ? g : g + 1)));
  gc.d = mb_linear_desc(masked ? gc.block : r, n, k, t, t); /* with the experts: */
  gc.d.batch = g, gc.d.stride_b = n * k;
  gc.d.group_mode = masked ? MMT_GROUP_MASKED : MMT_GROUP_CONTIGUOUS;
  if (masked) gc.d.stride_a = gc.block * k, gc.d.stride_d = gc.block * n;
  gc.d.group_rows = (const int32_t *)(uintptr_t)rows_dev, gc.d.group_tokens = r;
  if (!(rc = grouped_operands(b, &gc, copies, err)))
    rc = grouped_measure(b, &gc, copies, name, zipf, ts, err);
cleanup:
  if (gc.base) b->cu->cuMemFree(gc.base);
  if (gc.ptrs) b->cu->cuMemFree(gc.ptrs);
  if (rows_dev) b->cu->cuMemFree(rows_dev);
  free(cdf);
  free(gc.rows);
  free(gc.used_rows);
  free(gc.offsets);
  return rc;
}

/* Mixture-of-experts layers: Mixtral's (8 experts, its up and down projections) and
 * fine-grained ones (64 to 160 experts), each at 1 to 16384 routed rows, both routings, in
 * the contiguous layout, and up to MASKED_ROWS rows in the masked one too. */
mmt_status mb_grouped_family(bench *b, grouped_tallies *contiguous, grouped_tallies *masked,
                             ut_err *err) {
  static const struct {
    const char *name;
    int64_t g, n, k;
  } layers[] = {{"8x14336x4096", 8, 14336, 4096},
                {"8x4096x14336", 8, 4096, 14336},
                {"64x1408x2048", 64, 1408, 2048},
                {"128x768x2048", 128, 768, 2048},
                {"160x1536x5120", 160, 1536, 5120}};
  static const int64_t routed[] = {1, 16, 64, 256, 2048, 16384};
  mmt_status rc = MMT_OK;
  for (size_t l = 0; l < sizeof layers / sizeof layers[0] && !rc; l++)
    for (size_t i = 0; i < sizeof routed / sizeof routed[0] && !rc; i++)
      for (int zipf = 0; zipf < 2 && !rc; zipf++)
        for (int m = 0; m < 2 && !rc; m++)
          if (!m || routed[i] <= MASKED_ROWS)
            rc = grouped_one(b, layers[l].name, layers[l].g, layers[l].n, layers[l].k, routed[i],
                             zipf, m, m ? masked : contiguous, err);
  return rc;
}
