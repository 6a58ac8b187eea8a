/*
 * matmul_bench.h -- what the files of mmtune-matmul-bench share (bench/matmul.c: the options,
 * the device, the timing and reporting, the Linear, SwiGLU, attention and host families;
 * matmul_grouped.c, matmul_quantize.c, matmul_coldstart.c and matmul_online.c: a family
 * each).  Internal to the bench; prefix mb_.
 */
#ifndef MMT_BENCH_MATMUL_BENCH_H
#define MMT_BENCH_MATMUL_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu/cublas.h"
#include "gpu/cublaslt.h"
#include "gpu/measure.h"
#include "mmtune.h"
#include "rt_device.h"
#include "rt_driver.h"
#include "util.h"

#define MAX_RUNS 200
#define MAX_COPIES 64
#define OPERANDS_MAX_BYTES ((size_t)6 << 30) /* a case whose operands would pass it is left out */

enum {
  F_LINEAR,
  F_SWIGLU,
  F_RESIDUAL,
  F_F32OUT,
  F_ATTENTION,
  F_HOST,
  F_QUANTIZE,
  F_GROUPED,
  F_COLDSTART, /* only when named */
  F_ONLINE,    /* only when named */
  FAMILIES
};

typedef struct {
  int device;
  const char *db, *dtype, *weights, *csv;
  mmt_dtype type;
  bool family[FAMILIES], cold;
  int64_t batches[16];
  int nbatches;
  int runs;
  int online_shapes;                  /* the online family's shapes */
  double online_budget, online_limit; /* its seconds a shape (0: the library's), its cap */
} bench_opts;

typedef struct {
  const bench_opts *o;
  const rt_cu *cu;
  rt_device dev;
  mmt_context *ctx;
  tn_gpu *g; /* the SwiGLU baseline's elementwise kernel */
  tn_cublas *cb;
  tn_cublaslt *lt;
  CUstream stream;
  CUmodule fill_mod;
  CUfunction fill_fn;
  CUevent ev[MAX_RUNS + 1];
  int l2_bytes;
  uint64_t seed;
  FILE *csv;
} bench;

/* What a family's cases add up to. */
typedef struct {
  double log_sum, min;
  int count, mismatched, failed;
} tally;

/* One launch of a library on input copy `copy`. */
typedef mmt_status (*launch_fn)(bench *b, void *user, int copy, ut_err *err);

/* Bytes of an element of t (f32 4, the 16-bit types 2). */
int mb_size_of(mmt_dtype t);
/* v sorted ascending; the median of its n values (sorting them). */
void mb_sort(double *v, int n);
double mb_median(double *v, int n);
/* elems rounded up to 128: the elements of a buffer that keeps the next one on 256 bytes
 * (16-bit elements), whatever the sizes. */
size_t mb_padded(int64_t elems);
/* Random elements of type t on the device (never zero), on the bench's stream. */
mmt_status mb_fill(bench *b, CUdeviceptr x, size_t n, mmt_dtype t, ut_err *err);
/* The median of --runs timed launches of fn, each on the next of `copies` input copies, after
 * a warm-up. */
mmt_status mb_time_ms(bench *b, launch_fn fn, void *user, int copies, double *ms, ut_err *err);
/* mmtune's time (fn_mm) and its peer's (fn_peer), each as mb_time_ms does; where one is past
 * MB_RETIME_RATIO times the other, both are timed again and each keeps its faster median, as
 * `mmtune bench` does: a single timing of either library can run 2x slow in one run and not
 * the next, and a family's smallest ratio would be that timing's. */
#define MB_RETIME_RATIO 1.25
mmt_status mb_time_pair(bench *b, launch_fn fn_mm, launch_fn fn_peer, void *user, int copies,
                        double *mm_ms, double *peer_ms, ut_err *err);
/* Copies of a set of set_bytes: 3x the L2 (warm) or cold enough, within the caps. */
int mb_copies_for(const bench *b, size_t set_bytes);
/* The relative Frobenius difference of two device matrices of n elements of type t. */
mmt_status mb_compare(bench *b, CUdeviceptr x, CUdeviceptr y, size_t n, mmt_dtype t, double *rel,
                      ut_err *err);
/* One case's line (and CSV row); into tl unless rel is past tol (a mismatch, left out). */
void mb_report(bench *b, tally *tl, const char *family, const char *what, double mm_ms,
               double peer_ms, double rel, double tol, const char *kernel);
/* The kernel mmt_matmul would launch for d, in words ("?" when explain fails). */
void mb_kernel_of(bench *b, const mmt_matmul_desc *d, char *out, size_t len);
/* A fresh folder /tmp/mmt_bench_XXXXXX in dir (`what` names it in the error), and its removal
 * with what it holds (a failure said on stderr). */
mmt_status mb_temp_dir(char dir[64], const char *what, ut_err *err);
void mb_remove_dir(const char *dir);
/* x (M x K) W^T (W: N x K), row-major, one problem: the plain descriptor of a Linear layer. */
mmt_matmul_desc mb_linear_desc(int64_t m, int64_t n, int64_t k, mmt_dtype in, mmt_dtype out);

/* What a context's log lines said (an mmt_options.log callback, mb_count_log, with log_user
 * one of these and log_level MMT_LOG_DEBUG): how its modules came, how many problems online
 * tuning's new results made choose again, and the line saying online tuning stopped ("" if
 * none did). */
typedef struct {
  int nvrtc, cached, ahead, rechosen;
  char stopped[256];
} mb_log_counts;
void mb_count_log(void *user, mmt_log_level level, const char *line);

/* The coldstart family (matmul_coldstart.c): first calls of the Linear layers of nshapes
 * weights (N, K) at every batch, one by one and after mmt_matmul_prepare. */
mmt_status mb_coldstart_family(bench *b, const int64_t (*shapes)[2], int nshapes, ut_err *err);

/* The online family (matmul_online.c): never-tuned Linear layers called in a loop while
 * online tuning tunes them beside it. */
mmt_status mb_online_family(bench *b, ut_err *err);

/* A grouped layout's tallies: against cuBLAS's grouped GEMM, against a loop of mmt_matmul
 * calls, and (decode: 64 routed rows or fewer) against a plain read of the weights hit. */
typedef struct {
  tally *vs[3];        /* against cuBLAS, the loop, a read */
  const char *name[3]; /* their lines' family names */
} grouped_tallies;
/* The grouped family (matmul_grouped.c): the contiguous layout's cases, and the masked one's. */
mmt_status mb_grouped_family(bench *b, grouped_tallies *contiguous, grouped_tallies *masked,
                             ut_err *err);
/* One quantize case (matmul_quantize.c): weight `name` (rows x cols) in `mode`; given (per
 * tensor): with a given scale, its amax out (mmt_quantize_desc's given_scale). */
mmt_status mb_quantize_one(bench *b, int64_t rows, int64_t cols, mmt_quant_mode mode, bool given,
                           const char *name, tally *tl, ut_err *err);

#endif /* MMT_BENCH_MATMUL_BENCH_H */
