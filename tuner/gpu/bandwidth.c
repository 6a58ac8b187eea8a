/* gpu/bandwidth.c -- see gpu/bandwidth.h. */
#include "gpu/bandwidth.h"

#include <math.h>
#include <stddef.h>

#include "gpu/measure_int.h"

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
  const double median = tn_gpu_sorted_median(ms, RUNS);
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
static mmt_status time_read(tn_gpu *g, unsigned grid, unsigned threads, unsigned long long words,
                            size_t stride, int rotation, int untimed, double *median_ms,
                            ut_err *err) {
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
  *median_ms = tn_gpu_sorted_median(ms, TIME_BATCH);
cleanup:
  return rc;
}

mmt_status tn_gpu_read_ms(tn_gpu *g, double bytes, bool cold, double *ms, ut_err *err) {
  mmt_status rc = rt_device_bind(&g->dev, err);
  if (rc) return rc;
  const rt_cu *cu = g->cu;
  /* Whole 16-byte words (the kernel's loads), at least one; each copy 256-byte aligned. */
  const unsigned long long words = bytes > 16 ? (unsigned long long)ceil(bytes / 16) : 1;
  const size_t stride = tn_round_up((size_t)words * 16, 256);
  /* The copies rotated as a problem's are (cold: at most MAX_COLD_COPIES, a read that small
   * being all launch wherever its bytes are, and one more for the untimed launch; warm: the
   * untimed launch on the first). */
  size_t rotation = tn_gpu_timed_copies(g, stride, cold);
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
