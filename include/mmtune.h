/*
 * mmtune.h -- the public API of libmmtune: tuned GPU matrix multiplication.
 *
 * An application opens a context on a CUDA device and an mmtune database (filled by the
 * `mmtune` CLI), then calls mmt_gemm() -- BLAS's GEMM, with device pointers -- or its fp32
 * shorthand mmt_sgemm().  The context picks, for each problem, the fastest verified kernel
 * recorded for this GPU model; if the exact shape was never tuned, the kernel a performance
 * model fitted on the database predicts fastest among every config verified on this GPU model,
 * the templates' defaults and a built-in list.  mmt_explain() says which of these it did, the
 * predicted time, and on which measurement the choice relies.
 *
 * Conventions (the whole header):
 *  - Every function that can fail returns mmt_status; MMT_OK is 0.  Details of the last
 *    failure (NVRTC log, SQL error, driver error name) are in mmt_errmsg().
 *  - The library never prints, exits or aborts; what it has to say goes to the log callback
 *    of mmt_options, when one is given.
 *  - This header includes no CUDA header: device pointers are plain pointers from
 *    cudaMalloc/cuMemAlloc, and a stream is a CUstream / cudaStream_t passed as void *.
 *  - Thread safety: any number of host threads may call mmt_gemm, mmt_sgemm, mmt_matmul and
 *    mmt_explain on one context at the same time.  mmt_close must not race with any other call on the
 *    context.  Launches from several threads are ordered only by their streams, as in CUDA.
 */
#ifndef MMTUNE_H
#define MMTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One list generates the enum, mmt_status_name() and mmt_strerror(). */
#define MMT_STATUS_MAP(X)                                                          \
  X(OK, "success")                                                                 \
  X(ERR_INVALID_ARG, "invalid argument")                                           \
  X(ERR_NOMEM, "out of memory")                                                    \
  X(ERR_NOT_FOUND, "not found")                                                    \
  X(ERR_IO, "file input/output error")                                             \
  X(ERR_NO_DRIVER, "CUDA driver (libcuda.so.1) not available")                     \
  X(ERR_NO_DEVICE, "no such CUDA device")                                          \
  X(ERR_CUDA, "CUDA driver call failed")                                           \
  X(ERR_COMPILE, "NVRTC compilation failed")                                       \
  X(ERR_TEMPLATE, "template error")                                                \
  X(ERR_TEMPLATE_LIMIT, "template exceeded its memory or instruction budget")      \
  X(ERR_DB, "database error")                                                      \
  X(ERR_DB_CORRUPT, "database file is corrupt or not an mmtune database")          \
  X(ERR_DB_VERSION, "database schema version not supported")                       \
  X(ERR_UNSUPPORTED, "no kernel supports this problem")                            \
  X(ERR_VERIFY, "result failed verification")                                      \
  X(ERR_FAULT, "kernel faulted")                                                   \
  X(ERR_TIMEOUT, "kernel timed out")                                               \
  X(ERR_INTERRUPTED, "interrupted")

typedef enum {
#define MMT_STATUS_ENUM_(name, text) MMT_##name,
  MMT_STATUS_MAP(MMT_STATUS_ENUM_)
#undef MMT_STATUS_ENUM_
      MMT_STATUS_COUNT_
} mmt_status;

/* "MMT_ERR_NOMEM" etc.; "MMT_UNKNOWN" for a value outside the enum.  Static string. */
const char *mmt_status_name(mmt_status status);
/* One-line human description; static string, never NULL. */
const char *mmt_strerror(mmt_status status);

typedef struct mmt_context mmt_context;

/* Log levels of the callback. */
typedef enum { MMT_LOG_ERROR = 0, MMT_LOG_WARN = 1, MMT_LOG_INFO = 2, MMT_LOG_DEBUG = 3 } mmt_log_level;

/* A log line (no trailing newline), valid during the call only.  Called from the thread that
 * made the mmtune call, possibly from several threads at once, sometimes with the context's
 * lock held: it must not call mmtune functions on the same context. */
typedef void (*mmt_log_fn)(void *user, mmt_log_level level, const char *message);

/* Zero-initialize, then set what you need: every field has a default. */
typedef struct {
  const char *db_path;   /* database file; NULL: $MMTUNE_DB, else $XDG_CACHE_HOME/mmtune/mmtune.db;
                            "": none (template defaults and the model's analytic ranking).
                            It is opened read-only and may sit in a read-only folder or image:
                            ship one made by `mmtune db pack` */
  const char *cache_dir; /* cubin cache folder, which also keeps the performance model's
                            fits (fit-*.model); NULL: $MMTUNE_CACHE_DIR, else
                            $XDG_CACHE_HOME/mmtune/cubin */
  mmt_log_fn log;        /* NULL: no logging */
  void *log_user;        /* passed to log */
  mmt_log_level log_level; /* lines up to this level are passed (0, the default: errors) */
  int record; /* non-zero: each problem this context serves without a row measured for exactly
                 it on this GPU model (a choice other than MMT_CHOICE_EXACT) is added to the
                 database's queue of recorded problems at its first call (a miss, which
                 compiles anyway: warm calls pay nothing), for `mmtune tune --recorded`.  The
                 database is then opened for writing and made if missing; a failed record is
                 logged (MMT_LOG_WARN), never the call's error.  Needs a database (not "").
                 $MMTUNE_RECORD=1 turns it on where this is 0, for every context with a
                 database (so for the BLAS shim, Python and mmtune.torch, which open theirs
                 without options); 0 or unset changes nothing, another value fails mmt_open */
  int online; /* non-zero (record implied): recorded problems are also tuned in the background,
                 by a `mmtune tune --recorded` process (never in this one: a faulting candidate
                 kills that worker, not the application) started on this device with the
                 budget below and 2 compile threads, one at a time a database across threads
                 and processes (a lock file beside it: the path + ".online.lock"); its output
                 is appended to the cubin cache folder's online-worker.log (no cache folder:
                 discarded).  Calls are served meanwhile as without it.  A call checks at most
                 every 200 ms for new results; once they have stopped coming for a second,
                 every problem that has rows of its own and does not launch the best of them
                 (not EXACT, or EXACT on an earlier best) chooses again at its next call, its
                 kernel then loaded from the cubin cache the worker compiled it into (or
                 compiled, where the worker had another cache folder); a problem without rows
                 keeps its choice until its own come.  The worker shares the GPU with the application, which it
                 slows while it measures, and outlives the context (mmt_close leaves it to
                 finish).  A worker that cannot be started is logged (MMT_LOG_WARN) and not
                 tried again.  $MMTUNE_ONLINE=1 turns it on as $MMTUNE_RECORD does recording */
  const char *tuner;    /* the mmtune executable online runs; NULL: $MMTUNE_TUNER, else "mmtune"
                           looked up in PATH */
  double online_budget; /* search seconds a recorded problem gets (counted across runs, as
                           `mmtune tune --budget`); 0: 5 */
} mmt_options;

/*
 * Opens a context on CUDA device `device` (ordinal) with the database in `options`.
 * A missing database is not an error (every call then uses template defaults); a corrupt or
 * foreign file is (MMT_ERR_DB_CORRUPT).  It also reads the performance model of this GPU
 * model (from the fit file in the cubin cache, or fitted from the rows) and loads the
 * templates, so that a call's first choice for a shape is a ranking only (a few ms at most).
 * ctx:     OUT: the new context, owned by the caller (mmt_close).  On failure *ctx is a
 *          context holding only the error message (read mmt_errmsg, then mmt_close), or NULL
 *          when even that could not be allocated.
 * options: may be NULL for defaults; strings are copied.
 * Errors: MMT_ERR_NO_DRIVER, MMT_ERR_NO_DEVICE, MMT_ERR_CUDA, MMT_ERR_DB*, MMT_ERR_NOMEM.
 */
mmt_status mmt_open(mmt_context **ctx, int device, const mmt_options *options);

/* Frees the context, its loaded modules, scratch memory and database handle.
 * mmt_close(NULL) is a no-op. */
void mmt_close(mmt_context *ctx);

/* Details of the last failure of a call this thread made on ctx ("" if none), or of
 * mmt_open when it failed.  Valid until this thread's next call on ctx; each thread sees its
 * own.  mmt_errmsg(NULL) returns a static string. */
const char *mmt_errmsg(const mmt_context *ctx);

/* Storage order of all three matrices, as in CBLAS. */
typedef enum { MMT_ROW_MAJOR = 0, MMT_COL_MAJOR = 1 } mmt_order;
/* op(X) = X or X^T. */
typedef enum { MMT_NO_TRANS = 0, MMT_TRANS = 1 } mmt_transpose;
/* Element types.  Inputs and output are of the type; products accumulate in fp32.
 * MMT_TF32: fp32 matrices multiplied on tensor cores in TF32 (10-bit mantissa) -- a
 * different, less precise result, so never used unless asked for.  MMT_E4M3, MMT_E5M2: the
 * OCP 8-bit floats (FP8), inputs of mmt_matmul only (its D is wider; mmt_gemm refuses them). */
typedef enum {
  MMT_F32 = 0,
  MMT_TF32 = 1,
  MMT_F16 = 2,
  MMT_BF16 = 3,
  MMT_E4M3 = 4,
  MMT_E5M2 = 5
} mmt_dtype;

/*
 * C = alpha * op(A) * op(B) + beta * C, as BLAS GEMM defines it, on device pointers:
 *   op(A) is M x K, op(B) is K x N, C is M x N, each stored in `order`;
 *   row-major:    lda >= max(1, transA ? M : K), ldb >= max(1, transB ? K : N), ldc >= max(1, N);
 *   column-major: lda >= max(1, transA ? K : M), ldb >= max(1, transB ? N : K), ldc >= max(1, M).
 *   Leading dimensions are in elements; A, B, C are of `dtype` (MMT_TF32: float).
 * stream: a CUstream / cudaStream_t, or NULL for the legacy default stream.
 * The call is asynchronous with respect to the host, like cuBLAS.  The first call for a
 * problem may compile (NVRTC, then the disk cache) and load a module; later calls reuse it.
 * BLAS's special cases: M or N == 0 does nothing; alpha == 0 or K == 0 makes C = beta * C
 * without reading A or B (nothing at all when beta == 1 too); beta == 0 sets C without
 * reading it (NaN in C does not propagate).
 * Pointers: the matrices the call reads or writes must be non-NULL and aligned to the
 * element size; the kernel is chosen for their actual alignment, so a pointer misaligned for
 * vector loads gets a kernel that does not need them, never a wrong result.  Such a kernel
 * may copy the matrices into 16-byte-aligned scratch first, in stream order; the context
 * keeps that device memory for later calls (so a warm call allocates nothing) until
 * mmt_close.
 * Workspace: a kernel that splits K across blocks keeps an fp32 workspace, allocated at the
 * first call that needs it and grown when a later call needs more; warm calls and CUDA-graph
 * replays allocate nothing.  Such kernels are run one launch at a time (whatever the stream),
 * and their result is the same bits from run to run.  Under stream capture, make a problem's
 * first call before capturing: a capture that would have to allocate the workspace may be
 * refused (MMT_ERR_CUDA, the message says so).
 * Errors: MMT_ERR_INVALID_ARG (bad order, transpose or dtype value, negative size, ld too
 * small, NULL or misaligned pointer; the message names the argument), MMT_ERR_UNSUPPORTED
 * (a size above 2^31 - 1, or no kernel for the dtype / problem), MMT_ERR_COMPILE,
 * MMT_ERR_CUDA; on a context whose mmt_open failed, that open's status (after the argument
 * checks, which need no GPU).
 */
mmt_status mmt_gemm(mmt_context *ctx, mmt_order order, mmt_transpose transA, mmt_transpose transB,
                    int64_t M, int64_t N, int64_t K, float alpha, const void *A, int64_t lda,
                    const void *B, int64_t ldb, float beta, void *C, int64_t ldc, mmt_dtype dtype,
                    void *stream);

/* mmt_gemm(ctx, MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, M, N, K, 1, A, lda, B, ldb, 0, C,
 * ldc, MMT_F32, stream): C = A * B, fp32, row-major. */
mmt_status mmt_sgemm(mmt_context *ctx, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float *C, int64_t ldc, void *stream);

/* ---- mmt_matmul: a whole Linear layer or batched GEMM in one call ---- */

/* A bias vector added to the product (before the activation). */
typedef enum {
  MMT_BIAS_NONE = 0,
  MMT_BIAS_COL = 1, /* bias[j] added to column j: a vector of N (gated: of 2N, as B's columns) */
  MMT_BIAS_ROW = 2  /* bias[i] added to row i: a vector of M */
} mmt_bias;

/* The activation, applied in fp32 before D is rounded. */
typedef enum {
  MMT_ACT_NONE = 0,
  MMT_ACT_RELU = 1,      /* max(x, 0); NaN stays NaN */
  MMT_ACT_GELU_TANH = 2, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch's "tanh" */
  MMT_ACT_GELU_ERF = 3,  /* 0.5 x (1 + erf(x / sqrt(2))), PyTorch's default GELU */
  MMT_ACT_SILU = 4       /* x / (1 + exp(-x)), SiLU / swish */
} mmt_activation;

/* What mmt_matmul_desc's scale_row and scale_col hold (device floats, read when the kernel
 * runs, so a CUDA graph replays with new values). */
typedef enum {
  MMT_SCALE_VECTORS = 0, /* scale_row: M floats, scale_col: N (gated: 2N); each may be NULL */
  MMT_SCALE_TENSOR = 1,  /* per tensor: scale_row A's, scale_col B's, one float each (both set) */
  /* FP8 inputs, row-major, batch 1: DeepSeek-V3's block scales, A's over 1 x 128 blocks along
   * K and B's over 128 x 128 blocks of op(B)^T (N x K), both set, with KB = ceil(K / 128):
   * scale_row = float[KB][M] (element (kb, i) at kb * M + i), scale_col = float[ceil(N' /
   * 128)][KB] (element (nb, kb) at nb * KB + kb; N' the product's columns, 2N gated), and
   *   P[i][j] = sum over kb of scale_row[kb][i] * scale_col[j / 128][kb] * (the products of
   *             K block kb) */
  MMT_SCALE_BLOCK = 2
} mmt_scale_mode;

/* How the problems of a call share A's and D's rows (mixture-of-experts layers: one problem an
 * expert, the tokens routed to it its rows).  The row counts live in device memory, read when
 * the kernel runs: the host never waits for routing, and a CUDA graph replays with new
 * routings.  See mmt_matmul_desc, "Grouped". */
typedef enum {
  MMT_GROUP_NONE = 0,       /* a batch: problem z is A_z, B_z, C_z, D_z, each of M rows */
  MMT_GROUP_CONTIGUOUS = 1, /* the experts' rows one after another in one A and one D */
  MMT_GROUP_MASKED = 2      /* a batch of M-row blocks, expert z using its first rows */
} mmt_group_mode;

/*
 * What mmt_matmul computes.  Zero-initialize, then set what you need; batch must be >= 1.
 * For each problem z of the batch (0 <= z < batch), with A_z = a + z * stride_a (elements),
 * likewise B_z, C_z, D_z, and P = op(A_z) op(B_z) (M x N, or M x 2N gated), in fp32:
 *   x[i][j]  = alpha * scale_row[i] * scale_col[j] * P[i][j] + bias      (absent factors: 1, 0)
 *   D[i][j]  = act(x[i][j] + beta * C[i][j])                             not gated
 *   D[i][j]  = act(x[i][2j]) * x[i][2j + 1] + beta * C[i][j]             gated (SwiGLU, GeGLU)
 * then D is rounded once to out_type.  Gated: op(B) has 2N columns, gate and up projection
 * interleaved by column (column 2j of op(B) is the gate weight of output j, 2j + 1 its up
 * weight); for PyTorch's W = [W_gate; W_up] (2N x K, used as x W^T), that is
 * torch.stack([W_gate, W_up], 1).reshape(2N, K).  Gated needs row-major order.
 * Storage, as mmt_gemm: every matrix in `order`; A, B of in_type; C, D of out_type; leading
 * dimensions as mmt_gemm's (B's with 2N columns when gated), ldd as ldc.  C is read only when
 * beta != 0 (it may be NULL otherwise) and may be D itself (c == d, ldc == ldd, stride_c ==
 * stride_d): D is then written in place.  A stride of 0 gives every problem the same matrix
 * (a shared weight); D's may be 0 only when batch is 1.
 * Types: in_type f32, tf32, f16 or bf16; out_type MMT_F32, MMT_F16 or MMT_BF16, any with any
 * (f16 in, f32 out; f32 in, bf16 out); bias of out_type or MMT_F32 (bias_type); scales fp32
 * (scale_mode says what they are: for MMT_SCALE_TENSOR, scale_row[i] and scale_col[j] in x's
 * formula are the one float each holds; for MMT_SCALE_BLOCK the scales are inside P).
 * FP8 (in_type MMT_E4M3 or MMT_E5M2, on an sm_90 GPU; B may be of the other FP8 type,
 * b_type, all four pairs): out_type MMT_F32, MMT_F16, MMT_BF16, or FP8 itself (MMT_E4M3,
 * MMT_E5M2: D = sat(value * *scale_d), the value's largest finite-or-infinite magnitude, NaN
 * aside, into *amax; then beta must be 0 and a bias is MMT_F32);
 * both operands K-major, the layout Hopper's FP8 tensor cores read: row-major with trans_a
 * MMT_NO_TRANS and trans_b MMT_TRANS (A is M x K, B is stored N x K as PyTorch's Linear
 * weight), or column-major with trans_a MMT_TRANS and trans_b MMT_NO_TRANS; any other layout
 * is MMT_ERR_UNSUPPORTED (no transposing copy is made), and so are A and B whose addresses,
 * leading dimensions or batch strides are not multiples of 16 (TMA loads them).  The kernels
 * promote wgmma's FP8 sums into fp32 every few K blocks (the decode-size kernels at every 32
 * elements of K); fast_accum lets kernels that do not (faster, less accurate over a long K)
 * serve as well.
 * Grouped (group_mode not MMT_GROUP_NONE; row-major, trans_a MMT_NO_TRANS):
 * batch is G, the experts; expert z multiplies its rows of A by B_z = b + z * stride_b (its
 * weight; stride_b 0 shares one), and the per-column vectors are the expert's own: bias (by
 * column) from bias + z * N', scale_col from scale_col + z * N' (N' the product's columns:
 * N, or 2N gated; MMT_SCALE_TENSOR: A's scale scale_row[0], expert z's scale_col[z]).
 * Per-row vectors (bias by row, scale_row) index the rows of A as stored.  Gated grouped
 * calls are a mixture of experts' SwiGLU / GeGLU up projection (each B_z of 2N columns, as
 * above).  FP8 grouped calls take the FP8 layout above, per-tensor or vector scales (not
 * MMT_SCALE_BLOCK) and an f32, f16 or bf16 out_type; anything else is MMT_ERR_UNSUPPORTED.
 *   MMT_GROUP_CONTIGUOUS: A is M x K and D (and C) M x N, the rows of all experts;
 *     group_rows holds G + 1 ints, expert z's rows [group_rows[z], group_rows[z + 1]), so
 *     0 <= group_rows[0] <= ... <= group_rows[G] <= M; stride_a, stride_c and stride_d are 0.
 *   MMT_GROUP_MASKED: expert z's A, C and D are M-row blocks at stride_a, stride_c, stride_d
 *     as a batch's, of which it uses the first group_rows[z] (0 <= group_rows[z] <= M).
 * Rows outside every expert's range are not written.  An expert may have no rows.
 * group_tokens is the caller's count of the rows all experts have together (0: not known,
 * taken as M for CONTIGUOUS, G * M for MASKED): the kernel is chosen for it, and a masked
 * call's decode-size kernels (skinny, skinny_mma) launch min(G, group_tokens) slices of the
 * experts, each walking its share (a step's few rows among many experts launch nothing for
 * the empty ones); it is never read as a bound: a count below the truth is served right, only
 * slower.  Its routing regime keys the choice: the count rounded up to the next of
 * 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (a masked call's mean count a problem), with G, N, K
 * and the types -- what `mmtune tune --epilogue ...,group=contiguous --batch G` measures
 * over drawn routings (balanced, skewed, some experts empty), masked ones with M the mean
 * count (group=masked).  A masked call without a tuned row of its regime is served the
 * model's pick for blocks of M rows (the most an expert can have), whatever the mean.  group_rows that break the rules above are not an out-of-bounds
 * access: the kernels compute the experts whose rows are valid, skip the others, and record
 * it on the context; the next mmt_matmul call on the context (one that starts after this
 * call's kernel has finished) returns MMT_ERR_INVALID_ARG saying so, before doing anything
 * else.
 */
typedef struct {
  mmt_order order;
  mmt_transpose trans_a, trans_b;
  int64_t m, n, k; /* D is M x N; op(A) is M x K, op(B) K x N (gated: K x 2N) */
  mmt_dtype in_type, out_type;
  float alpha, beta;
  const void *a;
  int64_t lda;
  const void *b;
  int64_t ldb;
  const void *c;
  int64_t ldc;
  void *d;
  int64_t ldd;
  int64_t batch;                                  /* problems, >= 1 */
  int64_t stride_a, stride_b, stride_c, stride_d; /* elements from one problem to the next */
  mmt_bias bias_mode;
  const void *bias;       /* NULL exactly when bias_mode is MMT_BIAS_NONE */
  mmt_dtype bias_type;    /* MMT_F32 (0, the default) or out_type */
  const float *scale_row; /* NULL: none; else M floats (scale_mode: or A's scales) */
  const float *scale_col; /* NULL: none; else N floats, gated 2N (scale_mode: or B's) */
  mmt_activation act;
  int gated;                 /* nonzero: act(gate) * up, see above */
  mmt_scale_mode scale_mode; /* MMT_SCALE_VECTORS (0, the default) */
  int fast_accum;            /* FP8 only: nonzero allows FP8 sums without promotion */
  mmt_dtype b_type;     /* B's type where it differs from in_type (A's): FP8 only, the other FP8
                       type (e4m3 A by e5m2 B or the reverse); MMT_F32 (0, the default) or
                       in_type: B is of in_type */
  const float *scale_d; /* an FP8 D only: D = the value times *scale_d, saturated (NULL: 1) */
  float *amax;          /* an FP8 D only: OUT, the largest |value| before scale_d (NULL: not
                           wanted); zeroed on the stream first, then an atomic max */
  mmt_group_mode group_mode; /* MMT_GROUP_NONE (0, the default): see "Grouped" above */
  const int32_t *group_rows; /* grouped: device ints, G + 1 offsets or G counts */
  int64_t group_tokens;      /* grouped: the rows of all experts, a hint (0: unknown) */
} mmt_matmul_desc;

/*
 * D = the epilogue of alpha * op(A) op(B) and beta * C, for every problem of a batch, as
 * mmt_matmul_desc says: bias, scales, activation and gating fused into the GEMM's kernel (one
 * pass over D), D apart from C, output types other than the inputs'.  Asynchronous, on
 * `stream`, like mmt_gemm, with its special cases: M or N == 0 does nothing; alpha == 0 or
 * K == 0 reads neither A nor B (P = 0, the epilogue still applies).  A descriptor that is a
 * plain GEMM (out_type the inputs' (f32 for tf32), D == C, batch 1, no bias, scale,
 * activation or gate) runs exactly what mmt_gemm runs.  Other descriptors run the op kernels of
 * the templates that have epilogues (wgmma, mma_sync, reg_tiled, skinny, skinny_mma), chosen
 * by the performance model among the configs measured for the plain GEMM.
 * Errors: MMT_ERR_INVALID_ARG, the message naming the field: desc NULL, a value outside an enum,
 * a size, leading dimension or stride below its minimum, batch < 1, stride_d 0 with batch > 1,
 * strides that make D's problems overlap, bias and bias_mode disagreeing, a bias_type other
 * than MMT_F32 or out_type, a NULL or misaligned pointer the call uses, D overlapping A or B,
 * or C without being it, a scale_mode the inputs cannot have or its scales missing, fast_accum
 * without FP8 inputs, a b_type other than 0, in_type or (FP8) the other FP8 type, an FP8
 * out_type after other inputs, scale_d or amax without an FP8 D, amax overlapping what the call
 * reads; nothing is launched then.  MMT_ERR_UNSUPPORTED: gated in column-major
 * order, a size above 2^31 - 1, an FP8 D with beta != 0, FP8 in another layout, before sm_90 or (block scales) in
 * column-major order or a batch, no kernel for the problem (tf32 inputs before sm_90 but for
 * GEMVs, for now);
 * then as mmt_gemm.
 */
mmt_status mmt_matmul(mmt_context *ctx, const mmt_matmul_desc *desc, void *stream);

/*
 * Readies the calls of `count` descriptors (descs[0..count-1]) so that the first mmt_matmul of
 * each costs what a later one does: chooses each call's kernel as mmt_matmul would, compiles
 * the modules not loaded yet on up to `threads` threads at once (0: one per online CPU; the
 * cubin cache serves those compiled before), and loads them.  Launches nothing, reads no
 * operand and no group_rows: a pointer counts only by its alignment, which picks the kernel,
 * so pass the pointers the calls will have (or pointers of the same alignment).  For a model's
 * start-up (its layers' first calls compile on one thread each otherwise, one after another)
 * and before capturing calls into a CUDA graph (a first call loads a module and may allocate a
 * split-K kernel's workspace; a prepared one only launches).  Other threads' calls go on while
 * it compiles.  A plain descriptor readies
 * what mmt_gemm would run.
 * Errors: MMT_ERR_INVALID_ARG: count below 0 or above 2^31 - 1, descs NULL with count > 0,
 * threads below 0; a descriptor mmt_matmul would refuse gets its status and message, which
 * starts "descs[i]: "; nothing is compiled then.  A failed choice, compile or load (MMT_ERR_UNSUPPORTED,
 * MMT_ERR_COMPILE, MMT_ERR_CUDA, ...) names its descriptor too; the problems readied before it
 * stay ready.
 */
mmt_status mmt_matmul_prepare(mmt_context *ctx, const mmt_matmul_desc *descs, int64_t count,
                              int threads);

/* ---- mmt_quantize: FP8 operands for mmt_matmul ---- */

/* Which elements of a row-major rows x cols matrix share a scale, and where it goes in the
 * scale array (RB = ceil(rows / 128), CB = ceil(cols / 128)).  Each is the layout mmt_matmul
 * reads: for A (M x K) MMT_QUANT_TENSOR and MMT_QUANT_ROW give scale_row for
 * MMT_SCALE_TENSOR and MMT_SCALE_VECTORS, MMT_QUANT_1X128 gives it for MMT_SCALE_BLOCK; for B
 * stored N x K (PyTorch's weight, trans_b) the same modes and MMT_QUANT_128X128 give
 * scale_col. */
typedef enum {
  MMT_QUANT_TENSOR = 0, /* one scale: scale[0] */
  MMT_QUANT_ROW = 1,    /* one a row: scale[i], rows floats */
  MMT_QUANT_1X128 = 2,  /* one a row and 128 columns: scale[cb * rows + i], cb = j / 128
                           (CB * rows floats) */
  MMT_QUANT_128X128 = 3 /* one a 128 x 128 tile: scale[rb * CB + cb], rb = i / 128 (RB * CB) */
} mmt_quant_mode;

/* What mmt_quantize does.  Zero-initialize, then set every field but the optional ones
 * (pow2_scales, given_scale, amax). */
typedef struct {
  int64_t rows, cols;
  mmt_dtype in_type;  /* MMT_F32, MMT_F16 or MMT_BF16 */
  mmt_dtype out_type; /* MMT_E4M3 or MMT_E5M2 */
  const void *x;      /* rows x cols of in_type, row-major */
  int64_t ldx;        /* >= max(1, cols) */
  void *q;            /* OUT: rows x cols of out_type, row-major (other bytes left alone) */
  int64_t ldq;        /* >= max(1, cols) */
  float *scale;       /* OUT: mmt_quantize_scales(mode, rows, cols) floats */
  mmt_quant_mode mode;
  int pow2_scales; /* nonzero: each scale rounded up to a power of two (as recipes with
                      8-bit exponent scales want) */
  /* MMT_QUANT_TENSOR only, optional (NULL: the scale is x's, from its amax): a scale already
   * known, read from device memory -- a static (calibrated) one, or delayed scaling's, made
   * from earlier steps' amax -- so that x is read once. */
  const float *given_scale;
  float *amax; /* with given_scale, optional: OUT, x's largest finite |x| */
} mmt_quantize_desc;

/* Floats of mmt_quantize's scale array for a mode and size; -1 for a mode outside the enum
 * or a negative size. */
int64_t mmt_quantize_scales(mmt_quant_mode mode, int64_t rows, int64_t cols);

/*
 * FP8 operands for mmt_matmul: x cast to out_type with one scale per group of elements (mode),
 * on `stream`, asynchronously.  For each group, with amax its largest finite |x| and FP8_MAX
 * the type's largest finite value (448 for e4m3, 57344 for e5m2), in fp32:
 *   scale = max(amax / FP8_MAX, FLT_MIN)   (then rounded up to a power of two if asked)
 *   q     = x * (1 / scale), rounded to nearest even, saturating to +-FP8_MAX
 * so x ~ q * scale; an infinity saturates, NaN stays NaN (neither counts towards amax), and a
 * group of zeros gets scale FLT_MIN.  Each group's amax, scale and cast are one pass over its
 * elements (a warp or a block holds them; MMT_QUANT_ROW reads a row longer than 8192 16-bit or
 * 4096 f32 elements twice), except MMT_QUANT_TENSOR: an amax pass, then the cast (x read twice,
 * the second pass starting on what L2 still holds), three operations on the stream (a memset and
 * two kernels; one kernel for at most 32768 elements), no host sync.
 * With given_scale (per tensor), scale = *given_scale as it is (pow2_scales aside) and
 * q = x * (1 / scale) as above, saturating where x is past the scale's range, in one pass over
 * x (one kernel, after a memset of *amax when amax is asked for); scale[0] = *given_scale
 * (given_scale may be scale), and *amax = x's largest finite |x| (0 for none) when amax is not
 * NULL: the next step's delayed scale is *amax / FP8_MAX, or a history's largest of them.
 * rows or cols == 0 writes nothing.  Needs an FP8-capable GPU (compute capability 8.9 or
 * newer).  The first call compiles the kernels (NVRTC, through the cubin cache).
 * A column-major matrix is the row-major cols x rows one: swap rows and cols (its groups are
 * then along its columns).
 * Errors: MMT_ERR_INVALID_ARG, the message naming the field: desc NULL, a type or mode outside
 * what is listed, a negative size, ldx or ldq below cols, a NULL or misaligned pointer (x to
 * its element, scale, given_scale and amax to 4 bytes) when something is written, x, q and
 * scale overlapping, given_scale with another mode than MMT_QUANT_TENSOR, amax without
 * given_scale, given_scale overlapping q, amax overlapping x, q, scale or given_scale;
 * MMT_ERR_UNSUPPORTED: rows or cols above 2^31 - 1, a GPU before sm_89; then MMT_ERR_COMPILE,
 * MMT_ERR_CUDA.
 */
mmt_status mmt_quantize(mmt_context *ctx, const mmt_quantize_desc *desc, void *stream);

/* A problem as mmt_gemm sees it, for mmt_explain. */
typedef struct {
  mmt_order order;
  mmt_transpose trans_a, trans_b;
  int64_t m, n, k;
  int64_t lda, ldb, ldc;
  mmt_dtype dtype;
} mmt_problem;

/* How a kernel was chosen for a problem. */
typedef enum {
  MMT_CHOICE_EXACT = 0,     /* tuned for exactly this shape on this GPU model */
  MMT_CHOICE_PREDICTED = 1, /* not tuned for this shape: the config the performance model
                               predicts fastest, verified on other shapes of this GPU model */
  MMT_CHOICE_DEFAULT = 2    /* the model's pick among configs never measured on this GPU
                               model: a template default or a built-in config */
} mmt_choice_kind;

/* Bytes of the longest canonical params text ("name=value,..."), its NUL included. */
#define MMT_PARAMS_MAX 256

typedef struct {
  mmt_choice_kind kind;
  char template_name[64]; /* e.g. "reg_tiled"; "" when nothing would be launched */
  char params[MMT_PARAMS_MAX]; /* canonical "name=value,..." */
  /* The problem the kernel computes: row-major C (M x N) = op(A) op(B) with layout "nn",
   * "nt", "tn" or "tt" (A's letter first, t = transposed).  A column-major call is the
   * row-major one with A and B, M and N swapped.  A GEMV in its canonical form: N = 1 with
   * a contiguous C (ldc = 1 row-major) and a contiguous B column is computed as C^T (M = 1),
   * and a unit-stride column of A or B is read as a row; a matrix stored as one row gets
   * the pitch of its width rounded up to 16 elements (it never steps). */
  char layout[4];
  int64_t kernel_m, kernel_n, kernel_k;
  double expected_ms; /* EXACT: the measured median; PREDICTED and DEFAULT: the performance
                         model's prediction */
  int model_rows;     /* PREDICTED: rows of this config (on other shapes) the prediction used */
  /* The verification record the choice relies on (all 0 / "" for DEFAULT): the row of the
   * database (PREDICTED: the config's row nearest the problem), measured on tuned_m x
   * tuned_n x tuned_k on this GPU model, verified against a float64 reference with these
   * errors, with this NVRTC and template source, of this kernel (its emitted source, NVRTC
   * options and launch; "" for a row measured before mmtune recorded it). */
  int64_t record_id;
  int64_t tuned_m, tuned_n, tuned_k;
  double tuned_ms;     /* median of the timed runs */
  double tuned_tflops;
  double rel_err;      /* ||C - ref||_F / ||ref||_F */
  double max_err;      /* max |C - ref| / max |ref| */
  int64_t measured_at; /* Unix seconds */
  char device_name[128];
  char nvrtc_version[16];
  char template_hash[17];
  char kernel_hash[17];
  /* mmt_explain_matmul: the op kernel's epilogue as the kernel computes it (canonical text,
   * e.g. "out=f32,bias=col,act=silu"; the row-major kernel problem's rows and columns, so a
   * column-major call's column bias reads "bias=row") and the problems of one launch; "" and 1
   * for a plain GEMM. */
  char epilogue[128];
  int64_t batch;
} mmt_choice;

/*
 * Says which kernel mmt_gemm would use for problem p, without launching or compiling.
 * Pointers are unknown here, so alignment is what the leading dimensions allow (as for
 * pointers from cudaMalloc).  A problem that launches nothing (M or N == 0) gives MMT_OK
 * with kind DEFAULT and an empty template_name.  alpha == 0 is not part of p: mmt_gemm
 * launches the K = 0 kernel then.
 * choice: OUT.  Errors: as mmt_gemm's argument checks, and MMT_ERR_UNSUPPORTED.
 */
mmt_status mmt_explain(mmt_context *ctx, const mmt_problem *p, mmt_choice *choice);

/*
 * mmt_explain for an mmt_matmul call: which kernel desc would get -- for a plain descriptor
 * mmt_gemm's, else the op kernel -- without launching or compiling.  The pointers may be NULL
 * (alignment is then what the leading dimensions and strides allow, as for mmt_explain); the
 * other fields are checked as mmt_matmul checks them.  choice: OUT.
 * Errors: as mmt_matmul's checks of the fields, and MMT_ERR_UNSUPPORTED.
 */
mmt_status mmt_explain_matmul(mmt_context *ctx, const mmt_matmul_desc *desc, mmt_choice *choice);

/* Name of a choice kind: "exact", "predicted", "default". */
const char *mmt_choice_kind_name(mmt_choice_kind kind);
/* "f32", "tf32", "f16", "bf16", "e4m3", "e5m2"; NULL for a value outside the enum. */
const char *mmt_dtype_name(mmt_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif /* MMTUNE_H */
