/*
 * gpu/measure_int.h -- what the files of the measurement (gpu/measure.h) share: the device
 * context and its buffers (gpu/context.c), candidate verification (gpu/verify.c), timing
 * (gpu/measure.c) and bench's bandwidth figures (gpu/bandwidth.c).  Private to those files.
 */
#ifndef MMT_TN_GPU_MEASURE_INT_H
#define MMT_TN_GPU_MEASURE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu/guard.h"
#include "gpu/measure.h"
#include "gpu/prune.h"
#include "gpu/routing.h"

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
/* Routings a grouped problem is timed over: each kind of gpu/routing.h twice (two draws). */
#define TN_ROUTINGS (2 * TN_ROUTE_KINDS)

/* What mmt_check_f32 accumulates (device layout: 2 doubles, then 6 unsigned 64-bit). */
typedef struct {
  double sums[2];
  unsigned long long st[6];
} check_stats;

struct tn_gpu {
  rt_device dev;
  const rt_cu *cu;
  CUmodule helpers;
  CUfunction fill_fn, widen_fn, widen8_fn, ref_fn, check_fn, read_fn, epi_ref_fn, swiglu_fn;
  CUfunction block_scale_fn;
  CUdeviceptr stats;    /* check_stats */
  CUdeviceptr read_buf; /* tn_gpu_read_ms's copies, read_cap bytes */
  size_t read_cap;
  CUevent ev[TIME_BATCH + 1]; /* ev[i] .. ev[i+1] brackets run i of a batch */
  int l2_bytes;
  tn_device_limits limits; /* what tn_prune checks compiled kernels against */
  /* Device buffers: `copies` consecutive (A, B, C) sets of elem-byte elements, and the
   * float64 reference; for 16-bit dtypes also wa, wb, wc: copy 0 widened to float. */
  CUdeviceptr a, b, c, ref, wa, wb, wc;
  /* A residual op's C (gen_op.residual): `copies` more of C's size after the C copies, random,
   * read (never written): C copy i is D copy i's (tn_gpu_residual_c); 0 for other problems. */
  CUdeviceptr c_in;
  size_t a_elems, b_elems, c_elems, cap_bytes, ref_cap_bytes, wide_cap_bytes;
  int copies;
  int elem;   /* bytes per element of the problem being measured */
  int bf16;   /* 16-bit elements are bf16 (else f16) */
  int e5m2;   /* 8-bit elements are e5m2 (else e4m3) */
  int b_e5m2; /* B's: the other FP8 type than A's for a mixed op (gen_op.mixed_fp8) */
  /* An op kernel's problem (tn_measure_opts.op): its op, D's element (C's buffer holds D) and
   * columns, the problems of the batch (A, B and D each `batch` matrices a_elems / batch, ...
   * apart within a copy), and the random vectors (bias, scale_row, scale_col: one allocation,
   * each widened to float in vec_wide for the reference).  Without an op: has_op false,
   * out_elem = elem, batch 1. */
  bool has_op;
  gen_op op;
  int out_elem, out_bf16, out_e5m2;
  int64_t n_out, batch;
  size_t a_stride, b_stride, c_stride; /* elements from one problem to the next */
  CUdeviceptr vec, bias, scale_row, scale_col, vec_wide;
  CUdeviceptr d_scale, d_amax; /* an FP8 D's: 1.0f, and its amax (after the vectors) */
  double ref_max;              /* the last check's largest |reference| */
  size_t vec_cap;
  /* A grouped op (tn_gpu_routed): batch is its experts, G; B the G weights, each by-column
   * vector G copies.  Contiguous (tn_gpu_grouped): A and D are one matrix of M rows
   * (a_stride, c_stride 0).  Masked (tn_gpu_masked): A and D are G blocks of M rows as a
   * batch's, M the most rows a routing gives an expert (tn_gpu_masked_blocks), expert z
   * using its first counts[z].  Their routings (TN_ROUTINGS, drawn once for the problem: the
   * same for every candidate), G + 1 ints each on the host and at `routings` on the device
   * (contiguous: offsets; masked: the G counts, then their sum), then the kernels' error
   * word: verification runs routing 0, the timed runs take them in turn (`routing`: the next
   * launch's).  routed_rows: the rows all experts have together in each routing. */
  int32_t *host_offsets;
  int64_t routed_rows;
  size_t host_offsets_cap; /* bytes */
  CUdeviceptr routings, group_error;
  size_t routings_cap;
  int routing;
  /* The vectors the launches read: the ones above, or during verification their copies flush
   * against unmapped memory (place_operands). */
  CUdeviceptr use_bias, use_scale_row, use_scale_col;
  CUdeviceptr use_c; /* a residual's C for a verification launch with guard pages */
  /* Elements each operand addresses ((rows - 1) * ld + row width), and the alignment of the
   * problem's pitches: what a candidate is verified for. */
  size_t a_extent, b_extent, c_extent;
  unsigned align;
  /* The verification launches put A, B and C flush against unmapped memory (gpu/guard.h),
   * once at the end of a mapped range and once at its start; gran == 0 when the device cannot
   * (guard_note says why, and copy 0 is verified as it is). */
  size_t gran;
  tn_guard guard[7]; /* A, B, C (D); an op's bias, scale_row, scale_col; a residual's C */
  char guard_note[256];
  /* Host buffers for the check. */
  float *host_a, *host_b;
  double *host_ref;
  size_t host_a_cap, host_b_cap, host_ref_cap;
};

/* Whether g's problem is a contiguous grouped op, a masked one, either. */
static inline bool tn_gpu_grouped(const tn_gpu *g) { return g->has_op && g->op.group == 'c'; }
static inline bool tn_gpu_masked(const tn_gpu *g) { return g->has_op && g->op.group == 'm'; }
static inline bool tn_gpu_routed(const tn_gpu *g) { return g->has_op && g->op.group != 0; }

/* gpu/context.c */

/* Copies of a set of `set_bytes` that timed runs rotate over: cold, enough that the others
 * move more than COLD_L2_COVER x L2 between two runs on one copy; else L2_COVER x L2 in all,
 * between 1 and MAX_COPIES.  (Cold callers keep one copy more for the untimed runs.) */
size_t tn_gpu_timed_copies(const tn_gpu *g, size_t set_bytes, bool cold);
/* Grows a host buffer to at least `bytes` (its contents kept, as realloc). */
mmt_status tn_gpu_host_reserve(void **buf, size_t *cap, size_t bytes, ut_err *err);
/* A masked grouped op's problem (else nothing): o's M, the mean rows an expert has (what
 * calls are keyed by), becomes the rows of each expert's blocks of A and D, the most any of
 * the problem's routings gives one expert; g->routed_rows, G times the mean.  Before
 * tn_gpu_reserve_problem, whose o it makes. */
mmt_status tn_gpu_masked_blocks(tn_gpu *g, tn_measure_opts *o, ut_err *err);
/* Sizes the device buffers for the problem: copies of (A, B, C) covering L2_COVER x L2. */
mmt_status tn_gpu_reserve_problem(tn_gpu *g, const tn_measure_opts *o, ut_err *err);
/* The GEMM arguments of input copy `copy` (0 .. g->copies - 1) of the problem of o.  An op
 * kernel's launch adds its epilogue (tn_gpu_epilogue_of) and batch. */
rt_gemm_args tn_gpu_copy_args(const tn_gpu *g, const tn_measure_opts *o, int copy);
/* The epilogue argument of an op kernel launched on args (D in place of C). */
rt_epilogue tn_gpu_epilogue_of(const tn_gpu *g, const rt_gemm_args *args);
/* Errors after which the context is dead: the process must stop using the device. */
bool tn_gpu_is_sticky(CUresult r);
/* x rounded up to a multiple of `to`. */
static inline size_t tn_round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* gpu/verify.c */

/* Fresh random A and B in every copy (seeded per candidate), every C poisoned with NaN. */
mmt_status tn_gpu_prepare_inputs(tn_gpu *g, const tn_measure_opts *o, ut_err *err);
/* The verification launches (both placements with guard pages, else one on copy 0), each
 * checked against the float64 reference.  out->status stays DB_OK when all pass.  A fault
 * is MMT_ERR_FAULT, its message naming the placement. */
mmt_status tn_gpu_verify(tn_gpu *g, tn_launch_fn launch, void *user, const tn_measure_opts *o,
                         tn_measurement *out, ut_err *err);

/* gpu/measure.c */

/* Sorts times[0 .. n) (n >= 1) and returns their median. */
double tn_gpu_sorted_median(double *times, int n);
/* The kernel could not be loaded or launched: a property of the config, not of the GPU. */
void tn_gpu_launch_error(tn_measurement *out, const char *msg);

/* The floats of an op's scale vector `side` (0 scale_row, 1 scale_col): M or N, 1 for
 * per-tensor scales, KB * M or ceil(N / 128) * KB for block scales (gen.h). */
size_t tn_gpu_scale_len(const tn_gpu *g, const tn_measure_opts *o, int side);
/* The problems of g's current problem that its work and its reference count: its batch, one
 * for a contiguous grouped op (every expert's rows are one M). */
int64_t tn_gpu_planes(const tn_gpu *g);
/* The elements of an op's bias: M by row, N by column (a grouped op's experts N each). */
size_t tn_gpu_bias_len(const tn_gpu *g, const tn_measure_opts *o);
/* The length every op vector is allocated with (the longest of the bias and the scales). */
size_t tn_gpu_vector_len(const tn_gpu *g, const tn_measure_opts *o);

#endif /* MMT_TN_GPU_MEASURE_INT_H */
