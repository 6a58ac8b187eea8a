/*
 * gpu/measure.h -- verify, then time, one compiled candidate on the GPU.  Prefix tn_.
 *
 * Each measurement draws fresh random inputs on the device (a seeded generator kernel, never
 * zeros), poisons C with NaN, launches and checks every element against an independent
 * float64 reference (CPU for small problems, the float64 GPU kernel of gpu/ref.h for large
 * ones; the comparison itself runs on the device so that big results need not cross the
 * bus), then times with CUDA events: warm-up, then runs launched back to back (an event
 * between each two, so a sample is device time, not the host's launch cost) until a time
 * budget or run count is reached, rotating among input copies so that small problems are not
 * timed out of L2.
 * The verification launches put each operand flush against unmapped memory (gpu/guard.h): once
 * ending at the last mapped byte (its start at the alignment the problem's pitches give), once
 * starting at the first, so a kernel that touches a byte outside an operand faults and is
 * recorded as such.  Without the driver's virtual memory management: one launch on copy 0.
 * Used in the tuner's worker process and in-process by `mmtune bench`.  What is measured is
 * either a loaded mmtune kernel (tn_gpu_measure) or any launcher of one GEMM
 * (tn_gpu_measure_launch: cuBLAS in bench), through the same verification and timing.
 *
 * One file a job: gpu/context.c opens the device and holds the problem's buffers,
 * gpu/verify.c verifies, gpu/measure.c times; the helper kernels are gpu/helper_kernels.h's,
 * bench's bandwidth figures gpu/bandwidth.h's.
 */
#ifndef MMT_TN_GPU_MEASURE_H
#define MMT_TN_GPU_MEASURE_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "gen.h"
#include "rt_device.h"

typedef struct tn_gpu tn_gpu;

typedef struct {
  int64_t m, n, k, lda, ldb, ldc;
  char dtype[8];
  char layout[4];         /* "nn", "nt", "tn", "tt" (gen.h); "" means "nn" */
  uint64_t seed;          /* fresh per candidate */
  double budget_ms;       /* stop timing once the timed runs add up to this (default 100) */
  int min_runs, max_runs; /* defaults 2 and 200 */
  double cutoff_ms;       /* > 0: first runs (3) with a median over this end the timing (not a
                             contender) */
  double warmup_ms;       /* > 0: untimed runs for this long first (clocks up from idle);
                             0: one untimed run (the tuner keeps the GPU busy anyway) */
  bool cold;              /* every timed run reads operands evicted from L2: A, B and C rotate
                             over copies that add up to more than twice the L2 (else copies
                             cover 3x the L2 up to 32 of them, so small problems run warm) */
  /* An op kernel's problem (gen.h, "Epilogues"): its op as text (gen_op_format; "": the plain
   * GEMM) and batch (0 read as 1).  n is then the product's columns and ldc D's pitch (at
   * least n, or n / 2 gated); D is written in place of C (beta 0, C not read), in the op's
   * output type, each problem of the batch after the one before; the bias and scales are
   * random vectors, and the reference is the whole expression in float64. */
  char op[GEN_OP_TEXT_MAX];
  int64_t batch;
} tn_measure_opts;

typedef struct {
  db_status status;
  char error[512];
  double ms_min, ms_median, ms_max;
  int runs;
  double tflops;
  double rel_err, max_err;
  int regs, shared_bytes, local_bytes;
} tn_measurement;

/* Opens the device and compiles the helper kernels (random fill, float64 reference). */
mmt_status tn_gpu_open(int ordinal, const char *cache_dir, tn_gpu **out, ut_err *err);
void tn_gpu_close(tn_gpu *g);
const rt_device *tn_gpu_device(const tn_gpu *g);
/* NULL when verification launches run on guarded buffers (gpu/guard.h); else why not
 * ("verification without guard pages: ..."), for the caller to say once. */
const char *tn_gpu_guard_note(const tn_gpu *g);

/* Whether candidates of dtype can be measured: inputs filled, a reference computed and the
 * result checked in that type.  "f32", "tf32", "f16" and "bf16", and "e4m3" and "e5m2" for op
 * problems only (16-bit and FP8 data is widened to float, exactly, for the float64 reference
 * and the check); the tuner plans nothing else. */
bool tn_measure_supports(const char *dtype);

/* The columns of D of o's problem: n, or n / 2 for a gated op. */
int64_t tn_measure_out_cols(const tn_measure_opts *o);

/* The epilogue argument an op kernel's launch on args gets in a measurement of g's current
 * problem (D in place of C; the random bias and scales; the batch strides): for a launcher
 * that runs an op problem another way (bench's cuBLASLt), the same vectors and strides. */
rt_epilogue tn_gpu_epilogue(const tn_gpu *g, const rt_gemm_args *args);

/* A residual op's C (gen_op.residual: args.beta is 1) for the launch whose D is at d, the
 * args.c of tn_gpu_epilogue's launches: a copy's D, that copy's C; a verification launch's
 * (flush against a guard page), its own. */
uint64_t tn_gpu_residual_c(const tn_gpu *g, uint64_t d);

/* The op's scale vectors as the timed runs read them, 256-byte aligned; verification reads
 * copies of the same values flush against guard pages (a per-tensor scale 4 bytes from one).
 * For a peer that needs more than 4-byte alignment (cuBLASLt: 16 bytes). */
void tn_gpu_aligned_scales(const tn_gpu *g, uint64_t *scale_row, uint64_t *scale_col);

/* Fills opts' defaults (budget, run counts) where zero. */
void tn_measure_defaults(tn_measure_opts *o);

/*
 * Launches one GEMM C = alpha*A*B + beta*C (fp32 row-major, the kernel ABI of gen.h) on the
 * buffers of args (device addresses) on `stream`, without synchronizing.  On failure returns
 * non-zero with a message in err.  `user` is the pointer given to tn_gpu_measure_launch.
 */
typedef mmt_status (*tn_launch_fn)(void *user, const rt_gemm_args *args, CUstream stream,
                                   ut_err *err);

/*
 * Verifies and times launch(user, ...) like a candidate kernel (fresh inputs, NaN-poisoned C,
 * float64 reference, comparison on the device; events, warm-up, median, rotated copies), on
 * g's device context (made current first).  Returns MMT_OK with out->status saying how it did:
 * ok, verify_failed, or launch_error (the first launch returned an error: its message is in
 * out->error).  regs, shared_bytes and local_bytes are -1 (unknown).  MMT_ERR_FAULT: the work
 * faulted; the context is unusable, as below.  Other errors as for tn_gpu_measure, and a
 * launch that fails during the timed runs is returned as such.
 */
mmt_status tn_gpu_measure_launch(tn_gpu *g, tn_launch_fn launch, void *user,
                                 const tn_measure_opts *o, tn_measurement *out, ut_err *err);

/*
 * Loads, verifies and times one candidate kernel (tn_gpu_measure_launch with
 * rt_kernel_launch, plus the kernel's registers and memory).  Returns MMT_OK with out->status
 * saying how the candidate did (ok, verify_failed, launch_error: also when the module does
 * not load; pruned: the compiled kernel spills to local memory, so it is never launched).
 * Returns MMT_ERR_FAULT when the kernel faulted: the CUDA context is then unusable
 * and the process must not use the device again.  Other errors (out of memory for the
 * problem, driver failures) are returned as such.
 */
mmt_status tn_gpu_measure(tn_gpu *g, const rt_cubin *cubin, const gen_kernel *spec,
                          const tn_measure_opts *o, tn_measurement *out, ut_err *err);

#endif /* MMT_TN_GPU_MEASURE_H */
