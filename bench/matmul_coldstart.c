/*
 * matmul_coldstart.c -- mmtune-matmul-bench's coldstart family: what a model's start-up costs,
 * the first mmt_matmul call of each of its Linear layers (bias + GELU, every weight of
 * --weights at every batch of --batches) on a fresh context with an empty cubin cache, made
 * (a) one by one, each first call choosing, compiling and loading its kernel, and (b) after
 * one mmt_matmul_prepare of them all, which compiles on every core.  Each timing is wall time
 * from the first call to the last call's completion; (b) counts the prepare in.  A first call
 * on a context of its own goes before them: what a process pays once (NVRTC's first use) is
 * in neither figure.  Where a driver is installed, NVRTC (12.9 and later) and the driver keep
 * compiled code in their own cache (~/.nv/ComputeCache) across contexts and processes, so the
 * second pass, and any run after the first on a machine, compiles nothing: run it with
 * CUDA_CACHE_DISABLE=1 for cold figures (scripts/gpu-check.sh coldstart does).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cli.h"
#include "matmul_bench.h"
#include "rt_choose.h"

/* A fresh context on the bench's device and database, with an empty cubin cache of its own
 * in dir (made here); its loads counted into l. */
static mmt_status open_fresh(const bench *b, char dir[64], mb_log_counts *l, mmt_context **ctx,
                             ut_err *err) {
  mmt_status rc = mb_temp_dir(dir, "a cubin cache folder", err);
  if (rc) return rc;
  mmt_options opts = {.db_path = b->o->db,
                      .cache_dir = dir,
                      .log = mb_count_log,
                      .log_user = l,
                      .log_level = MMT_LOG_DEBUG};
  rc = mmt_open(ctx, b->o->device, &opts);
  if (rc) ut_fail(err, rc, "mmt_open: %s: %s", mmt_status_name(rc), mmt_errmsg(*ctx));
  return rc;
}

/* Seconds from the first of count calls (prepared first when `prepare`) to the last's end,
 * on a fresh context; *kernels: the modules it loaded. */
static mmt_status first_calls(bench *b, const mmt_matmul_desc *d, int count, bool prepare,
                              double *s, int *kernels, ut_err *err) {
  char dir[64];
  mmt_context *ctx = NULL;
  mb_log_counts l = {0};
  mmt_status rc = open_fresh(b, dir, &l, &ctx, err);
  const uint64_t t0 = bench_now_ns();
  if (!rc && prepare && (rc = mmt_matmul_prepare(ctx, d, count, 0)))
    ut_fail(err, rc, "mmt_matmul_prepare: %s", mmt_errmsg(ctx));
  const double prepare_s = (double)(bench_now_ns() - t0) * 1e-9;
  for (int i = 0; i < count && !rc; i++)
    if ((rc = mmt_matmul(ctx, &d[i], b->stream)))
      ut_fail(err, rc, "mmt_matmul: %s", mmt_errmsg(ctx));
  if (!rc) RT_CU_CHECK(b->cu, cuStreamSynchronize(b->stream));
  *s = (double)(bench_now_ns() - t0) * 1e-9;
  rt_dispatch_stats st;
  rt_dispatch_get_stats(ctx, &st);
  *kernels = st.kernels;
  printf("coldstart %-8s %3d calls: %.2f s (prepare %.2f s); modules compiled by NVRTC %d, "
         "ahead %d, from the cache %d\n",
         prepare ? "prepared" : "serial", count, *s, prepare ? prepare_s : 0.0, l.nvrtc, l.ahead,
         l.cached);
cleanup:
  mmt_close(ctx);
  mb_remove_dir(dir);
  return rc;
}

mmt_status mb_coldstart_family(bench *b, const int64_t (*shapes)[2], int nshapes, ut_err *err) {
  const bench_opts *o = b->o;
  const int count = nshapes * o->nbatches;
  int64_t max_m = 1, max_n = 1, max_k = 1;
  for (int j = 0; j < o->nbatches; j++) max_m = o->batches[j] > max_m ? o->batches[j] : max_m;
  for (int i = 0; i < nshapes; i++) {
    max_n = shapes[i][0] > max_n ? shapes[i][0] : max_n;
    max_k = shapes[i][1] > max_k ? shapes[i][1] : max_k;
  }
  const size_t elem = (size_t)mb_size_of(o->type);
  const size_t na = mb_padded(max_m * max_k), nb = mb_padded(max_n * max_k),
               nd = (size_t)(max_m * max_n);
  mmt_matmul_desc *d = calloc((size_t)count, sizeof *d);
  CUdeviceptr base = 0;
  mmt_status rc = MMT_OK;
  if (!d) return ut_fail(err, MMT_ERR_NOMEM, "out of host memory");
  RT_CU_CHECK(b->cu, cuMemAlloc(&base, (na + nb + nd + (size_t)max_n) * elem + 1024));
  if ((rc = mb_fill(b, base, na + nb + (size_t)max_n, o->type, err))) goto cleanup;
  const CUdeviceptr a = base, w = a + na * elem, bias = w + nb * elem,
                    y = (bias + (size_t)max_n * elem + 255) / 256 * 256;
  for (int i = 0; i < nshapes; i++)
    for (int j = 0; j < o->nbatches; j++) {
      mmt_matmul_desc *x = &d[i * o->nbatches + j];
      *x = mb_linear_desc(o->batches[j], shapes[i][0], shapes[i][1], o->type, o->type);
      x->a = (const void *)(uintptr_t)a, x->b = (const void *)(uintptr_t)w;
      x->d = (void *)(uintptr_t)y;
      x->bias_mode = MMT_BIAS_COL, x->bias_type = o->type;
      x->bias = (const void *)(uintptr_t)bias;
      x->act = MMT_ACT_GELU_TANH;
    }
  double warm_s = 0, serial_s = 0, prepared_s = 0;
  int warm_k = 0, serial_k = 0, prepared_k = 0;
  /* one call first, whose costs are the process's once (NVRTC's and the driver's first
   * use), not a context's; then each way, the prepared one first */
  if (!(rc = first_calls(b, d, 1, false, &warm_s, &warm_k, err)) &&
      !(rc = first_calls(b, d, count, true, &prepared_s, &prepared_k, err)) &&
      !(rc = first_calls(b, d, count, false, &serial_s, &serial_k, err))) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("coldstart %d Linear calls (%d kernels), empty cubin cache: first calls one by one "
           "%.2f s; mmt_matmul_prepare (%ld CPUs) and the calls %.2f s (%.1fx)\n",
           count, serial_k, serial_s, cpus, prepared_s, serial_s / prepared_s);
    if (prepared_k != serial_k) printf("coldstart the prepared context loaded %d\n", prepared_k);
  }
cleanup:
  if (base) b->cu->cuMemFree(base);
  free(d);
  return rc;
}
