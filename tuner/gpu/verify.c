/*
 * gpu/verify.c -- how a candidate is verified (gpu/measure.h): fresh random inputs drawn on
 * the device, C poisoned with NaN, the float64 reference (on the CPU for small problems, the
 * GPU kernel of gpu/ref.h for large ones), the comparison on the device, and the launches with
 * the operands flush against unmapped memory (gpu/guard.h).
 */
#include "gpu/measure_int.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/ref.h"

/* Problems up to this many multiply-adds get the CPU reference; larger ones the GPU one. */
#define CPU_REF_MAX_MACS (1LL << 24)
#define NAN_BITS 0x7fc00000u /* float quiet NaN: what C is poisoned with */

/* Launches one of the elementwise helper kernels over n elements: args[0..] as given. */
static mmt_status launch_elementwise(tn_gpu *g, CUfunction fn, size_t n, void **args, ut_err *err) {
  mmt_status rc = MMT_OK;
  unsigned blocks = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
  if (blocks == 0) return MMT_OK;
  RT_CU_CHECK(g->cu, cuLaunchKernel(fn, blocks, 1, 1, 256, 1, 1, 0, 0, args, NULL));
cleanup:
  return rc;
}

/* The fill kernel's `bits` of a type: 32 (float), 16 (f16), -16 (bf16); for the problem's
 * inputs also 8 (e4m3) and -8 (e5m2). */
static int fill_bits(int elem, int bf16) { return elem == 4 ? 32 : bf16 ? -16 : 16; }
static int input_bits(const tn_gpu *g, bool b) {
  return g->elem == 1 ? ((b ? g->b_e5m2 : g->e5m2) ? -8 : 8) : fill_bits(g->elem, g->bf16);
}

/* n random elements of a type (fill_bits) at x. */
static mmt_status fill_typed(tn_gpu *g, CUdeviceptr x, size_t n, int bits, uint64_t seed,
                             ut_err *err) {
  unsigned long long count = n, s = seed;
  return launch_elementwise(g, g->fill_fn, n, (void *[]){&x, &count, &s, &bits}, err);
}

/* n random elements of A's type (b: B's) at x. */
static mmt_status fill_random(tn_gpu *g, CUdeviceptr x, size_t n, uint64_t seed, bool b,
                              ut_err *err) {
  return fill_typed(g, x, n, input_bits(g, b), seed, err);
}

/* n 16-bit elements (bf16 or f16) at x as floats at y. */
static mmt_status widen_typed(tn_gpu *g, CUdeviceptr x, CUdeviceptr y, size_t n, int bf16,
                              ut_err *err) {
  unsigned long long count = n;
  return launch_elementwise(g, g->widen_fn, n, (void *[]){&x, &y, &count, &bf16}, err);
}

/* n 16-bit or FP8 elements of A's type (b: B's) at x as floats at y. */
static mmt_status widen(tn_gpu *g, CUdeviceptr x, CUdeviceptr y, size_t n, bool b, ut_err *err) {
  if (g->elem == 1) {
    unsigned long long count = n;
    int e5m2 = b ? g->b_e5m2 : g->e5m2;
    return launch_elementwise(g, g->widen8_fn, n, (void *[]){&x, &y, &count, &e5m2}, err);
  }
  return widen_typed(g, x, y, n, g->bf16, err);
}

/* D's elements (in C's buffer) as floats: wc, or C itself for an f32 D. */
static mmt_status widen_out(tn_gpu *g, CUdeviceptr c, CUdeviceptr *out, ut_err *err) {
  *out = c;
  if (g->out_elem == 4) return MMT_OK;
  *out = g->wc;
  if (g->out_elem == 1) { /* an FP8 D (its scale is 1) */
    unsigned long long count = g->c_extent;
    int e5m2 = g->out_e5m2;
    return launch_elementwise(g, g->widen8_fn, g->c_extent, (void *[]){&c, &g->wc, &count, &e5m2},
                              err);
  }
  return widen_typed(g, c, g->wc, g->c_extent, g->out_bf16, err);
}

/* The quiet NaN pattern of D's type, twice over for 16 bits, four times for FP8 (0x7f is NaN
 * in e4m3 and e5m2). */
static unsigned nan_word(const tn_gpu *g) {
  return g->out_elem == 4   ? NAN_BITS
         : g->out_elem == 1 ? 0x7f7f7f7fu
         : g->out_bf16      ? 0x7fc07fc0u
                            : 0x7e007e00u;
}

/* A residual op's C (gen_op.residual) at x, n elements of D's type: random, the same values
 * wherever it is placed (a function of the seed and the index, as the inputs' fills). */
static mmt_status fill_residual_c(tn_gpu *g, const tn_measure_opts *o, CUdeviceptr x, size_t n,
                                  ut_err *err) {
  return fill_typed(g, x, n, fill_bits(g->out_elem, g->out_bf16), o->seed * 2 + 6, err);
}

/* The op's random vectors (bias of its type, scales in float) and their float copies. */
static mmt_status fill_vectors(tn_gpu *g, const tn_measure_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  if (!g->has_op) return MMT_OK;
  const size_t len = tn_gpu_vector_len(g, o), step = tn_round_up(len, 64);
  const bool f32_bias = g->op.bias_f32 || g->out_elem == 4;
  if ((rc = fill_typed(g, g->bias, len, f32_bias ? 32 : fill_bits(2, g->out_bf16), o->seed * 2 + 3,
                       err)) ||
      (rc = fill_typed(g, g->scale_row, len, 32, o->seed * 2 + 4, err)) ||
      (rc = fill_typed(g, g->scale_col, len, 32, o->seed * 2 + 5, err)))
    return rc;
  /* float copies for the reference: the bias widened, the scales as they are */
  if (f32_bias)
    RT_CU_CHECK(g->cu, cuMemcpyDtoD(g->vec_wide, g->bias, 4 * len));
  else if ((rc = widen_typed(g, g->bias, g->vec_wide, len, g->out_bf16, err)))
    return rc;
  RT_CU_CHECK(g->cu, cuMemcpyDtoD(g->vec_wide + 4 * step, g->scale_row, 4 * len));
  RT_CU_CHECK(g->cu, cuMemcpyDtoD(g->vec_wide + 8 * step, g->scale_col, 4 * len));
cleanup:
  return rc;
}

mmt_status tn_gpu_prepare_inputs(tn_gpu *g, const tn_measure_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  size_t na = g->a_elems * (size_t)g->copies, nb = g->b_elems * (size_t)g->copies;
  if ((rc = fill_random(g, g->a, na, o->seed * 2 + 1, false, err))) return rc;
  if ((rc = fill_random(g, g->b, nb, o->seed * 2 + 2, true, err))) return rc;
  if ((rc = fill_vectors(g, o, err))) return rc;
  /* NaN in every element: two 16-bit NaNs per word (c_elems is even) for 16-bit types. */
  RT_CU_CHECK(g->cu, cuMemsetD32(g->c, nan_word(g),
                                 g->c_elems * (size_t)g->copies * (size_t)g->out_elem / 4));
  /* a residual's C, random, beside every copy's D (gen_op.residual; not an FP8 D) */
  if (g->c_in && (rc = fill_residual_c(g, o, g->c_in, g->c_elems * (size_t)g->copies, err)))
    return rc;
cleanup:
  return rc;
}

/* Synchronizes; a sticky error becomes MMT_ERR_FAULT. */
static mmt_status sync_checked(tn_gpu *g, const char *what, ut_err *err) {
  CUresult r = g->cu->cuCtxSynchronize();
  if (r == CUDA_SUCCESS) return MMT_OK;
  rt_cu_fail(err, what, r);
  return tn_gpu_is_sticky(r) ? MMT_ERR_FAULT : MMT_ERR_CUDA;
}

/* Launches the float64 GPU kernel (gpu/ref.h) on m rows of o's problem: the (float) inputs
 * at a, b, the product into `ref` (row stride n).  Does not synchronize. */
static mmt_status launch_product_reference(tn_gpu *g, const tn_measure_opts *o, int64_t rows,
                                           CUdeviceptr a, CUdeviceptr b, CUdeviceptr ref,
                                           ut_err *err) {
  mmt_status rc = MMT_OK;
  const char *layout = o->layout[0] ? o->layout : "nn";
  int m = (int)rows, n = (int)o->n, k = (int)o->k, lda = (int)o->lda, ldb = (int)o->ldb, ldr = n;
  int ta = layout[0] == 't', tb = layout[1] == 't';
  void *args[] = {&m, &n, &k, &ta, &tb, &a, &lda, &b, &ldb, &ref, &ldr};
  /* Launch geometry of gpu/ref.h: 64x64 tiles; rows stride by a grid.y capped at 65535. */
  int64_t tiles_y = (m + 63) / 64;
  RT_CU_CHECK(g->cu, cuLaunchKernel(g->ref_fn, (unsigned)((n + 63) / 64),
                                    (unsigned)(tiles_y > 65535 ? 65535 : tiles_y), 1, 16, 16, 1, 0,
                                    0, args, NULL));
cleanup:
  return rc;
}

/* The float64 product of problem z of the (float) inputs at a, b into `ref` on the device
 * (row stride n): computed on the CPU and uploaded for small problems, by the float64 GPU
 * kernel for large ones.  Nothing past the problem's extents is read. */
static mmt_status product_reference(tn_gpu *g, const tn_measure_opts *o, CUdeviceptr a,
                                    CUdeviceptr b, CUdeviceptr ref, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  const char *layout = o->layout[0] ? o->layout : "nn";
  size_t ref_bytes = 8 * (size_t)o->m * (size_t)o->n;
  const size_t nb = (size_t)g->batch; /* one problem's extents */
  const size_t a_extent = g->a_extent - (nb - 1) * g->a_stride;
  const size_t b_extent = g->b_extent - (nb - 1) * g->b_stride;
  if ((double)o->m * (double)o->k * (double)o->n <= (double)CPU_REF_MAX_MACS) {
    if ((rc = tn_gpu_host_reserve((void **)&g->host_ref, &g->host_ref_cap, ref_bytes, err)))
      return rc;
    if ((rc = tn_gpu_host_reserve((void **)&g->host_a, &g->host_a_cap, 4 * a_extent, err)))
      return rc;
    if ((rc = tn_gpu_host_reserve((void **)&g->host_b, &g->host_b_cap, 4 * b_extent, err)))
      return rc;
    RT_CU_CHECK(cu, cuMemcpyDtoH(g->host_a, a, 4 * a_extent));
    RT_CU_CHECK(cu, cuMemcpyDtoH(g->host_b, b, 4 * b_extent));
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    if ((rc = tn_ref_gemm_layout(layout, o->m, o->n, o->k, g->host_a, o->lda, g->host_b, o->ldb,
                                 g->host_ref, o->n, threads > 0 ? (int)threads : 1, err)))
      return rc;
    RT_CU_CHECK(cu, cuMemcpyHtoD(ref, g->host_ref, ref_bytes));
    return MMT_OK;
  }
  if ((rc = launch_product_reference(g, o, o->m, a, b, ref, err))) return rc;
  return sync_checked(g, "float64 reference kernel", err);
cleanup:
  return rc;
}

/* A contiguous grouped problem's float64 products into `ref` (row stride n): each expert's
 * rows of routing 0 (the one verification launches run) by its weight, on the GPU.  The
 * routings cover every row of A. */
static mmt_status grouped_product_reference(tn_gpu *g, const tn_measure_opts *o, CUdeviceptr a,
                                            CUdeviceptr b, CUdeviceptr ref, ut_err *err) {
  mmt_status rc = MMT_OK;
  const int32_t *off = g->host_offsets; /* routing 0 */
  for (int64_t z = 0; z < g->batch && !rc; z++)
    if (off[z + 1] > off[z])
      rc = launch_product_reference(g, o, off[z + 1] - off[z], a + 4 * (size_t)off[z] * o->lda,
                                    b + 4 * (size_t)z * g->b_stride,
                                    ref + 8 * (size_t)off[z] * o->n, err);
  return rc ? rc : sync_checked(g, "float64 reference kernel", err);
}

/* Block scales on the widened A and B (an nt problem of one: the constraints say so), in
 * place, from the float copies of the scales. */
static mmt_status apply_block_scales(tn_gpu *g, const tn_measure_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  if (g->elem != 1 || strcmp(o->layout, "nt") != 0 || g->batch != 1)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "block scales: FP8, layout nt, one problem");
  const size_t step = 4 * tn_round_up(tn_gpu_vector_len(g, o), 64);
  long long kb = (o->k + 127) / 128, m = o->m, cols = o->k;
  for (int side = 0; side < 2; side++) {
    CUdeviceptr x = side ? g->wb : g->wa, s = g->vec_wide + (size_t)(side + 1) * step;
    long long rows = side ? o->n : o->m, ld = side ? o->ldb : o->lda;
    int b_side = side;
    void *args[] = {&x, &rows, &cols, &ld, &s, &b_side, &m, &kb};
    const size_t total = (size_t)(rows * cols);
    const unsigned blocks = (unsigned)((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096);
    if (blocks)
      RT_CU_CHECK(g->cu,
                  cuLaunchKernel(g->block_scale_fn, blocks, 1, 1, 256, 1, 1, 0, 0, args, NULL));
  }
  rc = sync_checked(g, "block scale kernel", err);
cleanup:
  return rc;
}

/* Launches the float64 epilogue (helper kernel mmt_epilogue_f64) over nz problems of `rows`
 * rows: the products at p (row stride n) into D at d (row stride n_out), with the float
 * copies of the bias and scales at vb, vr, vc.  Does not synchronize. */
static mmt_status launch_epilogue_reference(tn_gpu *g, const tn_measure_opts *o, int64_t rows,
                                            int64_t nz, CUdeviceptr p, CUdeviceptr d,
                                            CUdeviceptr vb, CUdeviceptr vr, CUdeviceptr vc,
                                            CUdeviceptr c, ut_err *err) {
  mmt_status rc = MMT_OK;
  long long m = rows, n = o->n, z = nz, n_out = g->n_out, ldc = o->ldc,
            c_stride = (long long)g->c_stride;
  int bias = g->op.bias == 'c' ? 1 : g->op.bias == 'r' ? 2 : 0, act = (int)g->op.act;
  /* the scales: 1 a vector, 2 one float (per-tensor: element 0 of the vector) */
  const int tensor = g->op.scale_tensor ? 2 : 0;
  int gated = g->op.gated, srow = tensor | g->op.scale_row, scol = tensor | g->op.scale_col;
  void *args[] = {&m,  &n,    &z,  &p,   &d,     &n_out, &bias, &vb,      &srow,
                  &vr, &scol, &vc, &act, &gated, &c,     &ldc,  &c_stride};
  const size_t total = (size_t)(z * m * n_out);
  unsigned blocks = (unsigned)((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096);
  if (blocks)
    RT_CU_CHECK(g->cu, cuLaunchKernel(g->epi_ref_fn, blocks, 1, 1, 256, 1, 1, 0, 0, args, NULL));
cleanup:
  return rc;
}

/* The float64 reference of the launch on args into g->ref: each problem's product (batch x M x
 * N), then for an op D's whole expression after them (batch x M x n_out, by the helper kernel
 * mmt_epilogue_f64 from the float copies of the vectors and of a residual's C); *ref_d is
 * where the check reads (row stride ref_ld).  The reference reads float: 16-bit inputs (and
 * C) are widened first, exactly. */
static mmt_status compute_reference(tn_gpu *g, const tn_measure_opts *o, const rt_gemm_args *args,
                                    CUdeviceptr *ref_d, int64_t *ref_ld, ut_err *err) {
  mmt_status rc = MMT_OK;
  CUdeviceptr in_a = args->a, in_b = args->b, a = in_a, b = in_b;
  if (g->elem != 4) {
    if ((rc = widen(g, in_a, g->wa, g->a_extent, false, err)) ||
        (rc = widen(g, in_b, g->wb, g->b_extent, true, err)))
      return rc;
    a = g->wa;
    b = g->wb;
  }
  if (g->has_op && g->op.scale_block && (rc = apply_block_scales(g, o, err))) return rc;
  const size_t plane = 8 * (size_t)o->m * (size_t)o->n;
  const int64_t planes = tn_gpu_planes(g);
  if (tn_gpu_grouped(g) && (rc = grouped_product_reference(g, o, a, b, g->ref, err))) return rc;
  for (int64_t z = 0; !tn_gpu_grouped(g) && z < g->batch; z++)
    if ((rc = product_reference(g, o, a + 4 * (size_t)z * g->a_stride,
                                b + 4 * (size_t)z * g->b_stride, g->ref + (size_t)z * plane, err)))
      return rc;
  *ref_d = g->ref;
  *ref_ld = o->n;
  if (!g->has_op) return MMT_OK;
  const size_t step = 4 * tn_round_up(tn_gpu_vector_len(g, o), 64);
  const CUdeviceptr d = g->ref + (size_t)planes * plane;
  CUdeviceptr c = 0; /* a residual's C, as float */
  if (g->op.residual) {
    c = tn_gpu_residual_c(g, args->c);
    if (g->out_elem != 4) {
      if ((rc = widen_typed(g, c, g->wc, g->c_extent, g->out_bf16, err))) return rc;
      c = g->wc;
    }
  }
  if (!tn_gpu_routed(g)) {
    if ((rc = launch_epilogue_reference(g, o, o->m, g->batch, g->ref, d, g->vec_wide,
                                        g->vec_wide + step, g->vec_wide + 2 * step, c, err)))
      return rc;
  } else { /* each expert's rows: its own by-column vectors, the rows' own by-row ones;
              per-tensor scales: A's one float, expert z's B scale the z-th */
    const int32_t *off = g->host_offsets;
    const bool masked = tn_gpu_masked(g); /* expert z's block: all its M rows (checked: its
                                             count), its by-row vectors from row z * M */
    const bool tensor = g->op.scale_tensor;
    for (int64_t z = 0; z < g->batch; z++) {
      const size_t row = masked ? (size_t)z * (size_t)o->m : (size_t)off[z],
                   col = (size_t)z * (size_t)o->n;
      const int64_t rows = masked ? o->m : off[z + 1] - off[z];
      const CUdeviceptr cz = !c       ? 0
                             : masked ? c + 4 * (size_t)z * g->c_stride
                                      : c + 4 * row * (size_t)o->ldc;
      if (rows > 0 &&
          (rc = launch_epilogue_reference(
               g, o, rows, 1, g->ref + 8 * row * (size_t)o->n, d + 8 * row * (size_t)g->n_out,
               g->vec_wide + 4 * (g->op.bias == 'r' ? row : col),
               g->vec_wide + step + 4 * (tensor ? 0 : row),
               g->vec_wide + 2 * step + 4 * (tensor ? (size_t)z : col), cz, err)))
        return rc;
    }
  }
  if ((rc = sync_checked(g, "float64 epilogue reference kernel", err))) return rc;
  *ref_d = d;
  *ref_ld = g->n_out;
  return MMT_OK;
}

/* Runs mmt_check_f32 over the C (D) at in_c (its extent) and the reference at ref (row
 * stride ref_ld), problem by problem of the batch; fills *cs.  A position it reports is an
 * element's offset from the first problem's first. */
static mmt_status device_compare(tn_gpu *g, const tn_measure_opts *o, CUdeviceptr in_c,
                                 CUdeviceptr ref, int64_t ref_ld, check_stats *cs, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  check_stats init = {{0, 0}, {0, 0, 0, ~0ull, 0, ~0ull}};
  RT_CU_CHECK(cu, cuMemcpyHtoD(g->stats, &init, sizeof init));
  long long m = o->m, n = g->n_out, ldc = o->ldc, ldr = ref_ld;
  CUdeviceptr sums = g->stats, st = g->stats + offsetof(check_stats, st), c = in_c;
  /* C widened to float: exact, NaN stays NaN */
  if ((rc = widen_out(g, in_c, &c, err))) return rc;
  unsigned blocks = (unsigned)(m < 8192 ? m : 8192);
  for (int64_t z = 0; z < tn_gpu_planes(g); z++) {
    CUdeviceptr cz = c + 4 * (size_t)z * g->c_stride, rz = ref + 8 * (size_t)(z * m * ldr);
    /* the rows compared; a masked expert's after its count must be as poisoned */
    long long rows = tn_gpu_masked(g) ? g->host_offsets[z] : m;
    void *args[] = {&m, &rows, &n, &cz, &ldc, &rz, &ldr, &sums, &st};
    RT_CU_CHECK(cu, cuLaunchKernel(g->check_fn, blocks, 1, 1, 256, 1, 1, 0, 0, args, NULL));
  }
  if ((rc = sync_checked(g, "result check kernel", err))) return rc;
  RT_CU_CHECK(cu, cuMemcpyDtoH(cs, g->stats, sizeof *cs));
cleanup:
  return rc;
}

/* The tolerance of o's problem: its dtype's, or for an op the looser of the inputs' and the
 * output type's (f32 in, f16 out: f16's; f16 in, f32 out: f32's, the products being exact). */
static void problem_tolerance(const tn_gpu *g, const tn_measure_opts *o, double *rel_tol,
                              double *max_tol) {
  /* FP8: the bound of the accumulation the caller asked for (fast_accum: the looser) */
  tn_tolerance(g->has_op && g->op.fast_accum ? "fp8_fast" : o->dtype, rel_tol, max_tol);
  double rel = 0, max = 0;
  /* an FP8 D: its rounding (up to half an ulp, 2^-4 of e4m3's, 2^-3 of e5m2's) dominates */
  const char *out = !g->has_op                   ? NULL
                    : !strcmp(g->op.out, "e4m3") ? "e4m3_d"
                    : !strcmp(g->op.out, "e5m2") ? "e5m2_d"
                                                 : g->op.out;
  if (!g->has_op || !tn_tolerance(out, &rel, &max)) return;
  if (g->elem == 2) tn_tolerance("f32", rel_tol, max_tol); /* 16-bit inputs: exact products */
  if (rel > *rel_tol) *rel_tol = rel;
  if (max > *max_tol) *max_tol = max;
}

/* Checks the C (D) at c: values against the reference at ref (row stride ref_ld; tn_compare's
 * measures), and padding columns (n..ldc) untouched. */
static mmt_status check_result(tn_gpu *g, const tn_measure_opts *o, CUdeviceptr c, CUdeviceptr ref,
                               int64_t ref_ld, tn_measurement *out, ut_err *err) {
  check_stats cs;
  mmt_status rc = device_compare(g, o, c, ref, ref_ld, &cs, err);
  if (rc) return rc;
  double dmax, rmax, rel_tol = 0, max_tol = 0;
  memcpy(&dmax, &cs.st[0], sizeof dmax);
  memcpy(&rmax, &cs.st[1], sizeof rmax);
  g->ref_max = rmax;
  /* An all-zero reference makes both measures absolute, as in tn_compare. */
  out->rel_err = cs.sums[1] > 0 ? sqrt(cs.sums[0] / cs.sums[1]) : sqrt(cs.sums[0]);
  out->max_err = rmax > 0 ? dmax / rmax : dmax;
  problem_tolerance(g, o, &rel_tol, &max_tol);
  unsigned long long ldc = (unsigned long long)o->ldc;
  if (cs.st[2] > 0) {
    out->status = DB_VERIFY_FAILED;
    snprintf(out->error, sizeof out->error,
             "%llu NaN/Inf elements (unwritten?), first at (%llu, %llu)", cs.st[2], cs.st[3] / ldc,
             cs.st[3] % ldc);
  } else if (cs.st[4] > 0) {
    out->status = DB_VERIFY_FAILED;
    snprintf(out->error, sizeof out->error,
             "wrote outside D: %llu elements of padding or of rows no expert has, first at "
             "(%llu, %llu)",
             cs.st[4], cs.st[5] / ldc, cs.st[5] % ldc);
  } else if (!(out->rel_err <= rel_tol && out->max_err <= max_tol)) {
    out->status = DB_VERIFY_FAILED;
    snprintf(out->error, sizeof out->error,
             "error too large: rel %.3g (tol %.1g), max %.3g (tol %.1g)", out->rel_err, rel_tol,
             out->max_err, max_tol);
  }
  return MMT_OK;
}

/* An op's vectors for a verification launch, flush against unmapped memory as A, B and C are
 * (their own guards), with the values fill_vectors gave them (the fill is a function of the
 * seed and the index): what the launches read until tn_gpu_verify puts the others back. */
static mmt_status place_vectors(tn_gpu *g, const tn_measure_opts *o, tn_guard_side side,
                                ut_err *err) {
  mmt_status rc = MMT_OK;
  const bool f32_bias = g->op.bias_f32 || g->out_elem == 4;
  const size_t n_bias = tn_gpu_bias_len(g, o);
  /* each scale vector as long as the op reads (one float each per tensor; the block
   * scales' arrays), so a read past it faults too */
  const size_t lens[3] = {n_bias, tn_gpu_scale_len(g, o, 0), tn_gpu_scale_len(g, o, 1)};
  const size_t elems[3] = {f32_bias ? 4 : 2, 4, 4};
  const int bits[3] = {f32_bias ? 32 : fill_bits(2, g->out_bf16), 32, 32};
  CUdeviceptr *use[3] = {&g->use_bias, &g->use_scale_row, &g->use_scale_col};
  for (int i = 0; i < 3; i++) {
    *use[i] = tn_guard_place(&g->guard[3 + i], lens[i] * elems[i], (unsigned)elems[i], side);
    if ((rc = fill_typed(g, *use[i], lens[i], bits[i], o->seed * 2 + 3 + (uint64_t)i, err)))
      return rc;
  }
  return rc;
}

/* What each verification launch is, with guard pages: its operands' placement. */
static const char *const k_placements[] = {"operands flush against unmapped memory after them",
                                           "operands flush against unmapped memory before them"};

/* The operands of verification launch `which` (0 or 1; k_placements): A, B and C placed in
 * their guarded buffers (0: ending at the end of the mapped range, at the verified alignment;
 * 1: starting at its start), A and B filled as copy 0 is (the fill is a function of seed and
 * index, so the same values), C poisoned with NaN.  Without guard pages: copy 0 as it is. */
static mmt_status place_operands(tn_gpu *g, const tn_measure_opts *o, int which, rt_gemm_args *args,
                                 ut_err *err) {
  mmt_status rc = MMT_OK;
  *args = tn_gpu_copy_args(g, o, 0);
  if (!g->gran) return MMT_OK;
  const tn_guard_side side = which == 0 ? TN_GUARD_END : TN_GUARD_START;
  const size_t e = (size_t)g->elem;
  args->a = tn_guard_place(&g->guard[0], g->a_extent * e, g->align, side);
  args->b = tn_guard_place(&g->guard[1], g->b_extent * e, g->align, side);
  args->c = tn_guard_place(&g->guard[2], g->c_extent * (size_t)g->out_elem, g->align, side);
  if ((rc = fill_random(g, args->a, g->a_extent, o->seed * 2 + 1, false, err))) return rc;
  if ((rc = fill_random(g, args->b, g->b_extent, o->seed * 2 + 2, true, err))) return rc;
  if (g->out_elem == 4)
    RT_CU_CHECK(g->cu, cuMemsetD32(args->c, NAN_BITS, g->c_extent));
  else if (g->out_elem == 1)
    RT_CU_CHECK(g->cu, cuMemsetD8(args->c, 0x7f, g->c_extent));
  else
    RT_CU_CHECK(g->cu, cuMemsetD16(args->c, g->out_bf16 ? 0x7fc0 : 0x7e00, g->c_extent));
  if (g->has_op && (rc = place_vectors(g, o, side, err))) return rc;
  if (g->has_op && g->op.residual) { /* C: random values, read where D is written */
    g->use_c = tn_guard_place(&g->guard[6], g->c_extent * (size_t)g->out_elem, g->align, side);
    if ((rc = fill_residual_c(g, o, g->use_c, g->c_extent, err))) return rc;
  }
cleanup:
  return rc;
}

/* An FP8 D's amax against the reference's largest magnitude (check_result's, in g->ref_max):
 * the kernel's is of its fp32 values before rounding, so within the accumulation's error. */
static mmt_status check_amax(tn_gpu *g, tn_measurement *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  float amax = 0;
  RT_CU_CHECK(g->cu, cuMemcpyDtoH(&amax, g->d_amax, sizeof amax));
  if (!(fabs(amax - g->ref_max) <= 1e-2 * g->ref_max)) {
    out->status = DB_VERIFY_FAILED;
    snprintf(out->error, sizeof out->error, "amax %.6g, the reference's largest |D| %.6g",
             (double)amax, g->ref_max);
  }
cleanup:
  return rc;
}

/* A grouped kernel's error word after a launch on a valid routing: set, it flagged rows that
 * break no rule. */
static mmt_status check_group_error(tn_gpu *g, tn_measurement *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  int word = 0;
  RT_CU_CHECK(g->cu, cuMemcpyDtoH(&word, g->group_error, sizeof word));
  if (word) {
    out->status = DB_VERIFY_FAILED;
    snprintf(out->error, sizeof out->error,
             "the kernel reported bad group_rows for a valid routing (error word %d)", word);
    RT_CU_CHECK(g->cu, cuMemsetD32(g->group_error, 0, 1));
  }
cleanup:
  return rc;
}

mmt_status tn_gpu_verify(tn_gpu *g, tn_launch_fn launch, void *user, const tn_measure_opts *o,
                         tn_measurement *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  CUdeviceptr ref = 0;
  int64_t ref_ld = 0;
  g->routing = 0; /* a grouped problem's: the one compute_reference reads */
  for (int i = 0; i < (g->gran ? 2 : 1); i++) {
    rt_gemm_args args;
    if ((rc = place_operands(g, o, i, &args, err))) return rc;
    CUresult r = g->d_amax ? g->cu->cuMemsetD32(g->d_amax, 0, 1) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuMemsetD32 (amax)", r);
    ut_err launch_err = {{0}};
    if (launch(user, &args, 0, &launch_err) != MMT_OK) {
      tn_gpu_launch_error(out, launch_err.msg);
      return MMT_OK;
    }
    char what[128];
    snprintf(what, sizeof what, "candidate kernel%s%s", g->gran ? ", " : "",
             g->gran ? k_placements[i] : "");
    if ((rc = sync_checked(g, what, err))) return rc;
    if (i == 0 && (rc = compute_reference(g, o, &args, &ref, &ref_ld, err))) return rc;
    if ((rc = check_result(g, o, args.c, ref, ref_ld, out, err))) return rc;
    if (out->status == DB_OK && g->d_amax && (rc = check_amax(g, out, err))) return rc;
    if (out->status == DB_OK && tn_gpu_routed(g) && (rc = check_group_error(g, out, err)))
      return rc;
    g->use_bias = g->bias, g->use_scale_row = g->scale_row, g->use_scale_col = g->scale_col;
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
