/*
 * gpu/measure.c -- see gpu/measure.h: the entry points, and timing.  The device context and
 * its buffers are gpu/context.c's, verification gpu/verify.c's.
 */
#include "gpu/measure_int.h"

#include <stdlib.h>
#include <string.h>

/* Runs of the first batch (time_runs): the cutoff's judge and the later batches' size. */
#define PROBE_RUNS 3

bool tn_measure_supports(const char *dtype) {
  /* tf32 data is f32: only the kernel's arithmetic (and the tolerance) differ.  FP8: op
   * problems only (tn_measure_opts' op; the tuner's commands check it). */
  return dtype && (!strcmp(dtype, "f32") || !strcmp(dtype, "tf32") || !strcmp(dtype, "f16") ||
                   !strcmp(dtype, "bf16") || gen_dtype_fp8(dtype));
}

void tn_measure_defaults(tn_measure_opts *o) {
  if (o->budget_ms <= 0) o->budget_ms = 100;
  if (o->min_runs <= 0) o->min_runs = 2;
  if (o->max_runs <= 0) o->max_runs = 200;
  if (o->max_runs < o->min_runs) o->max_runs = o->min_runs;
  if (!o->dtype[0]) memcpy(o->dtype, "f32", 4);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double tn_gpu_sorted_median(double *times, int n) {
  qsort(times, (size_t)n, sizeof *times, cmp_double);
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

/* Min, median and max of `runs` times (sorted in place), and the TFLOP/s of the median. */
static void set_times(const tn_gpu *g, tn_measurement *out, const tn_measure_opts *o, double *times,
                      int runs) {
  out->ms_median = tn_gpu_sorted_median(times, runs);
  out->runs = runs;
  out->ms_min = times[0];
  out->ms_max = times[runs - 1];
  /* the rows the experts have, not a masked op's blocks' */
  const double rows =
      tn_gpu_masked(g) ? (double)g->routed_rows : (double)tn_gpu_planes(g) * (double)o->m;
  out->tflops = 2.0 * rows * (double)o->n * (double)o->k / (out->ms_median * 1e-3) / 1e12;
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
  rt_gemm_args warm = tn_gpu_copy_args(g, o, o->cold ? g->copies - 1 : g->copies > 1 ? 1 : 0);
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
      rt_gemm_args args = tn_gpu_copy_args(g, o, (runs + i) % rotation);
      g->routing = (runs + i) % TN_ROUTINGS; /* a grouped problem's routings in turn */
      if ((rc = launch(user, &args, 0, err))) goto cleanup;
      RT_CU_CHECK(cu, cuEventRecord(g->ev[i + 1], 0));
    }
    CUresult r = cu->cuEventSynchronize(g->ev[n]);
    if (r != CUDA_SUCCESS) {
      rt_cu_fail(err, "timed run", r);
      rc = tn_gpu_is_sticky(r) ? MMT_ERR_FAULT : MMT_ERR_CUDA;
      goto cleanup;
    }
    for (int i = 0; i < n; i++) {
      float ms = 0;
      RT_CU_CHECK(cu, cuEventElapsedTime(&ms, g->ev[i], g->ev[i + 1]));
      times[runs++] = ms;
      total += ms;
    }
    if (runs == n) { /* the probe: its times, as its row would hold them */
      set_times(g, out, o, times, runs);
      const double probe_ms = out->ms_median;
      if (o->cutoff_ms > 0 && probe_ms > o->cutoff_ms) break; /* far behind the best so far */
      const double per_batch = probe_ms > 0 ? o->budget_ms / 4 / probe_ms : TIME_BATCH;
      batch = per_batch < 1 ? 1 : per_batch > TIME_BATCH ? TIME_BATCH : (int)per_batch;
    }
    if (runs >= o->min_runs && total >= o->budget_ms) break;
  }
  set_times(g, out, o, times, runs);
cleanup:
  g->routing = 0;
  free(times);
  return rc;
}

void tn_gpu_launch_error(tn_measurement *out, const char *msg) {
  out->status = DB_LAUNCH_ERROR;
  ut_copy(out->error, sizeof out->error, msg);
}

/* Verifies, then times, launch(user, ...) on the problem of o (defaults filled) into out
 * (initialized by the caller); the device is bound.  Timing runs on the copies (prepared
 * before verification, which may use them). */
static mmt_status measure(tn_gpu *g, tn_launch_fn launch, void *user, const tn_measure_opts *opts,
                          tn_measurement *out, ut_err *err) {
  tn_measure_opts blocks = *opts, *o = &blocks; /* a masked op's: M the rows of its blocks */
  mmt_status rc = tn_gpu_masked_blocks(g, o, err);
  if (rc) return rc;
  if ((rc = tn_gpu_reserve_problem(g, o, err))) return rc;
  if ((rc = tn_gpu_prepare_inputs(g, o, err))) return rc;
  if ((rc = tn_gpu_verify(g, launch, user, o, out, err))) return rc;
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

/* A candidate kernel and the context it is measured in (its op's epilogue). */
typedef struct {
  rt_kernel *kern;
  const tn_gpu *g;
} kernel_launch;

static mmt_status launch_kernel(void *user, const rt_gemm_args *args, CUstream stream,
                                ut_err *err) {
  const kernel_launch *kl = user;
  if (!kl->kern->epilogue) return rt_kernel_launch(kl->kern, args, stream, err);
  const rt_epilogue epi = tn_gpu_epilogue_of(kl->g, args); /* D in place of C */
  rt_gemm_args with = *args;
  with.epi = &epi;
  if (kl->g->op.residual) with.c = tn_gpu_residual_c(kl->g, args->c); /* beta 1: C apart */
  return rt_kernel_launch(kl->kern, &with, stream, err);
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
    tn_gpu_launch_error(out, load_err.msg);
    return MMT_OK;
  }
  if (lrc) return ut_fail(err, lrc, "%s", load_err.msg);
  out->regs = kern.regs;
  out->shared_bytes = kern.static_shared_bytes + (int)kern.shared_bytes;
  out->local_bytes = kern.local_bytes;
  tn_kernel_figures fig = {.regs = kern.regs,
                           .local_bytes = kern.local_bytes,
                           .threads = (int)(kern.block[0] * kern.block[1] * kern.block[2]),
                           .shared_bytes = out->shared_bytes};
  if (tn_prune(&fig, &g->limits, out->error, sizeof out->error)) {
    out->status = DB_PRUNED; /* compiler feedback: timing it would only cost GPU time */
    rt_kernel_unload(&kern);
    return MMT_OK;
  }
  if (kern.epilogue != (o.op[0] != '\0')) {
    rt_kernel_unload(&kern);
    return ut_fail(err, MMT_ERR_INVALID_ARG, "kernel %s is %s op kernel, the problem %s",
                   spec->kernel_name, kern.epilogue ? "an" : "not an",
                   o.op[0] ? "has an op" : "has none");
  }
  kernel_launch kl = {&kern, g};
  rc = measure(g, launch_kernel, &kl, &o, out, err);
  if (rc != MMT_ERR_FAULT) rt_kernel_unload(&kern); /* a dead context cannot unload */
  return rc;
}
