/*
 * matmul_quantize.c -- mmtune-matmul-bench's quantize family (bench/matmul.c's header comment
 * says what it measures and how): mmt_quantize against a plain read of its bytes.
 */
#include "matmul_bench.h"
#include "gpu/bandwidth.h"

/* ---- quantize: mmt_quantize against a plain read of its bytes ---- */

typedef struct {
  mmt_quantize_desc d;
  bool given; /* per tensor with a given scale: the scale area's [2], its amax [4] */
  CUdeviceptr base;
  size_t set_bytes, x_bytes, q_bytes;
} quant_case;

static mmt_status quant_mm(bench *b, void *user, int copy, ut_err *err) {
  quant_case *qc = user;
  mmt_quantize_desc d = qc->d;
  const CUdeviceptr set = qc->base + (CUdeviceptr)copy * qc->set_bytes;
  d.x = (const void *)(uintptr_t)set;
  d.q = (void *)(uintptr_t)(set + qc->x_bytes);
  d.scale = (float *)(uintptr_t)(set + qc->x_bytes + qc->q_bytes);
  if (qc->given) d.given_scale = d.scale + 2, d.amax = d.scale + 4; /* [2] filled before */
  mmt_status rc = mmt_quantize(b->ctx, &d, b->stream);
  return rc ? ut_fail(err, rc, "mmt_quantize: %s", mmt_errmsg(b->ctx)) : MMT_OK;
}

mmt_status mb_quantize_one(bench *b, int64_t rows, int64_t cols, mmt_quant_mode mode, bool given,
                           const char *name, tally *tl, ut_err *err) {
  static const char *const modes[] = {"tensor", "row", "1x128", "128x128"};
  mmt_status rc = MMT_OK;
  quant_case qc = {.d = {.rows = rows,
                         .cols = cols,
                         .in_type = b->o->type,
                         .out_type = MMT_E4M3,
                         .ldx = cols,
                         .ldq = cols,
                         .mode = mode},
                   .given = given};
  const size_t n = (size_t)(rows * cols), align = 256;
  /* with a given scale: the scale, the given one and amax, 8 bytes apart */
  const size_t s_bytes = given ? 20 : (size_t)mmt_quantize_scales(mode, rows, cols) * 4;
  qc.x_bytes = (n * (size_t)mb_size_of(b->o->type) + align - 1) / align * align;
  qc.q_bytes = (n + align - 1) / align * align;
  qc.set_bytes = qc.x_bytes + qc.q_bytes + (s_bytes + align - 1) / align * align;
  const int copies = mb_copies_for(b, qc.set_bytes);
  double mm_ms = 0, read_ms = 0;
  RT_CU_CHECK(b->cu, cuMemAlloc(&qc.base, qc.set_bytes * (size_t)copies));
  for (int c = 0; c < copies && !rc; c++) {
    const CUdeviceptr set = qc.base + (CUdeviceptr)c * qc.set_bytes;
    rc = mb_fill(b, set, n, b->o->type, err);
    if (!rc && given) { /* a scale of 2^-8: the filled values' range stays within e4m3's */
      const float s = 0x1p-8f;
      RT_CU_CHECK(b->cu, cuMemcpyHtoD(set + qc.x_bytes + qc.q_bytes + 8, &s, 4));
    }
  }
  if (!rc) rc = mb_time_ms(b, quant_mm, &qc, copies, &mm_ms, err);
  if (!rc) rc = rt_device_bind(&b->dev, err);
  if (!rc)
    rc = tn_gpu_read_ms(b->g, (double)(n * (size_t)mb_size_of(b->o->type) + n + s_bytes),
                        b->o->cold, &read_ms, err);
  if (!rc) rc = rt_device_bind(&b->dev, err);
  if (!rc) {
    char what[96];
    snprintf(what, sizeof what, "%s %lldx%lld %s", name, (long long)rows, (long long)cols,
             given ? "given" : modes[mode]);
    mb_report(b, tl, "quantize", what, mm_ms, read_ms, 0, 1, "e4m3");
  }
cleanup:
  if (qc.base) b->cu->cuMemFree(qc.base);
  return rc;
}
