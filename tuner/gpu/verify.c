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

/* Grows a host buffer to at least `bytes`. */
static mmt_status host_reserve(void **buf, size_t *cap, size_t bytes, ut_err *err) {
  if (*cap >= bytes) return MMT_OK;
  void *p = realloc(*buf, bytes);
  if (!p) return ut_fail(err, MMT_ERR_NOMEM, "out of host memory (%zu bytes)", bytes);
  *buf = p;
  *cap = bytes;
  return MMT_OK;
}

/* Launches one of the elementwise helper kernels over n elements: args[0..] as given. */
static mmt_status launch_elementwise(tn_gpu *g, CUfunction fn, size_t n, void **args, ut_err *err) {
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

mmt_status tn_gpu_prepare_inputs(tn_gpu *g, const tn_measure_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  size_t na = g->a_elems * (size_t)g->copies, nb = g->b_elems * (size_t)g->copies;
  if ((rc = fill_random(g, g->a, na, o->seed * 2 + 1, err))) return rc;
  if ((rc = fill_random(g, g->b, nb, o->seed * 2 + 2, err))) return rc;
  /* NaN in every element: two 16-bit NaNs per word (c_elems is even) for 16-bit types. */
  unsigned nan_word = g->elem == 4 ? NAN_BITS : g->bf16 ? 0x7fc07fc0u : 0x7e007e00u;
  RT_CU_CHECK(g->cu,
              cuMemsetD32(g->c, nan_word, g->c_elems * (size_t)g->copies * (size_t)g->elem / 4));
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
    snprintf(out->error, sizeof out->error,
             "%llu NaN/Inf elements (unwritten?), first at (%llu, %llu)", cs.st[2], cs.st[3] / ldc,
             cs.st[3] % ldc);
  } else if (cs.st[4] > 0) {
    out->status = DB_VERIFY_FAILED;
    snprintf(out->error, sizeof out->error,
             "wrote outside C: %llu padding elements, first at (%llu, %llu)", cs.st[4],
             cs.st[5] / ldc, cs.st[5] % ldc);
  } else if (!(out->rel_err <= rel_tol && out->max_err <= max_tol)) {
    out->status = DB_VERIFY_FAILED;
    snprintf(out->error, sizeof out->error,
             "error too large: rel %.3g (tol %.1g), max %.3g (tol %.1g)", out->rel_err, rel_tol,
             out->max_err, max_tol);
  }
  return MMT_OK;
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

mmt_status tn_gpu_verify(tn_gpu *g, tn_launch_fn launch, void *user, const tn_measure_opts *o,
                         tn_measurement *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  for (int i = 0; i < (g->gran ? 2 : 1); i++) {
    rt_gemm_args args;
    if ((rc = place_operands(g, o, i, &args, err))) return rc;
    ut_err launch_err = {{0}};
    if (launch(user, &args, 0, &launch_err) != MMT_OK) {
      tn_gpu_launch_error(out, launch_err.msg);
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
