/*
 * gen.h -- the template host: loads Lua templates in a sandbox, enumerates their parameter
 * spaces, checks constraints and emits CUDA C for one config.  Prefix gen_.
 *
 * gen/ includes no CUDA header: what it produces is text plus a launch description
 * (gen_kernel) that runtime/ turns into a launch.  The template contract (what a template file
 * returns) is documented for authors in templates/README.md.
 *
 * Thread-safety: a gen_template wraps one Lua state; use it from one thread at a time.
 * Different templates (or two loads of the same file) are independent.
 */
#ifndef MMT_GEN_H
#define MMT_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define GEN_MAX_PARAMS 32
#define GEN_MAX_VALUES 64
#define GEN_NAME_MAX 64

/* Sandbox budgets for every call into a template (load, constraints, emit). */
#define GEN_MEMORY_LIMIT_BYTES (64u << 20)
#define GEN_INSTRUCTION_LIMIT 200000000L

typedef struct gen_template gen_template;

/* The limits of the device a template's configs must fit, read by templates as mmt.device
 * (templates/README.md): from the device itself where there is one (the runtime reads them
 * from the driver), else the defaults of its architecture (gen_device_defaults).  Bytes and
 * counts. */
typedef struct {
  int cc;                /* compute capability, major * 10 + minor: 90 */
  int sm_count;          /* multiprocessors */
  int max_shared;        /* shared memory a block may have when it opts in (static + dynamic) */
  int max_shared_static; /* ... without opting in: the most static __shared__ arrays may take */
  int sm_shared;         /* shared memory of a multiprocessor */
  int reserved_shared;   /* of it, what the system keeps for each resident block */
  int regs_per_sm;       /* 32-bit registers of a multiprocessor */
  int max_threads_sm;    /* resident threads of a multiprocessor */
  int max_grid[3];       /* blocks along grid x, y, z */
} gen_device;

/* The architecture whose defaults a template sees until told otherwise (gen_set_device). */
#define GEN_DEFAULT_ARCH "sm_90"
/* The defaults of architecture arch ("sm_90", "sm_90a", "sm_100f"; NULL: GEN_DEFAULT_ARCH),
 * from a table of architectures (gen_device.c says its sources); one not in it takes the
 * newest before it, cc being arch's own.  Errors: MMT_ERR_INVALID_ARG (not an architecture, or
 * older than the table). */
mmt_status gen_device_defaults(const char *arch, gen_device *out, ut_err *err);

/* One point of a template's space: v[i] is the value of parameter i (declaration order). */
typedef struct {
  int n;
  int64_t v[GEN_MAX_PARAMS];
} gen_config;

/*
 * Layouts.  Every kernel computes the row-major C (M x N) = op(A) * op(B), where op(A) is
 * M x K and op(B) is K x N.  The layout names how A and B are stored, A's letter first:
 *   'n': as op(X), row-major: A is M rows of K (lda >= K), B is K rows of N (ldb >= N);
 *   't': transposed, i.e. op(X)^T row-major: A is K rows of M (lda >= M), B is N rows of K
 *        (ldb >= K).
 * So "nn" is the plain row-major product and "tt" is C = A^T * B^T.  (A column-major caller
 * maps onto these by swapping A and B, M and N: see mmt_gemm in mmtune.h.)
 */
#define GEN_LAYOUTS 4
/* 0..3 for "nn", "nt", "tn", "tt"; -1 for anything else (NULL included). */
int gen_layout_index(const char *layout);
/* The inverse: "nn" .. "tt" for 0..3, NULL otherwise. */
const char *gen_layout_name(int index);
/* The smallest lda, ldb, ldc of an m x n x k problem in layout (NULL: "nn"): the row widths
 * of A and B as stored, and n. */
void gen_min_ld(const char *layout, int64_t m, int64_t n, int64_t k, int64_t ld[3]);
/* The rows of A, B and C as stored in layout (NULL: "nn"): A 'n' m, 't' k; B 'n' k, 't' n;
 * C m.  With gen_min_ld's widths, the shape of each operand in memory. */
void gen_stored_rows(const char *layout, int64_t m, int64_t n, int64_t k, int64_t rows[3]);
/* The pitch of a matrix stored as one row (gen_stored_rows 1: C and an 'n' A when m = 1, a
 * 't' A and an 'n' B when k = 1, a 't' B when n = 1) never steps: any pitch of at least the
 * row's width is the same matrix.  Each such ld[i] becomes that width rounded up to 16
 * elements (a multiple of 16 bytes in every dtype; the width itself if the rounding would pass
 * 2^31 - 1), so that such a pitch never makes a problem less aligned than its pointers (a
 * batch-1 call with an odd N, 1x50257x768, was a problem of 2-byte alignment for every
 * kernel) and a TMA map over the row gets a legal stride.  Other ld[i] are left alone. */
void gen_one_row_pitches(const char *layout, int64_t m, int64_t n, int64_t k, int64_t ld[3]);

/*
 * Epilogues: what a kernel does with the product before it stores it.  A plain GEMM kernel
 * (op NULL everywhere below) stores C = alpha * P + beta * C, P = op(A) * op(B), in the inputs'
 * type.  An op kernel (a template that declares `epilogues = true`, emitted for a gen_op)
 * computes, in fp32, for the product P (M x N) and its element (i, j):
 *   x[i][j] = alpha * s_row[i] * s_col[j] * P[i][j] + bias      (bias: bias[j] by column, bias[i] by row)
 *   not gated:  D[i][j]  = act(x[i][j] + beta * C[i][j])
 *   gated:      D[i][j'] = act(x[i][2j']) * x[i][2j' + 1] + beta * C[i][j']   (D: M x N/2)
 * and rounds D to the output type once.  Gated pairs P's columns: 2j' is the gate of output
 * column j', 2j' + 1 its up projection (B holds the two weights interleaved by column; N is
 * even).  C and D have the output type; s_row, s_col and an fp32 bias are float vectors.  An
 * op kernel takes D apart from C (it may be C itself) and is batched: blockIdx.z is the
 * problem of the batch (see the op ABI below).  lib/epilogue.lua writes this once for every
 * template (templates/README.md, "Epilogues").
 */
typedef enum {
  GEN_ACT_NONE = 0,
  GEN_ACT_RELU,
  GEN_ACT_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
  GEN_ACT_GELU_ERF,  /* 0.5 x (1 + erf(x / sqrt(2))) */
  GEN_ACT_SILU,      /* x / (1 + exp(-x)) */
  GEN_ACTS
} gen_act;
/* "none", "relu", "gelu_tanh", "gelu_erf", "silu"; NULL out of range.  And back: -1 unknown. */
const char *gen_act_name(gen_act act);
int gen_act_index(const char *name);

typedef struct {
  char out[8];    /* D's and C's dtype: "f32", "f16" or "bf16"; after FP8 inputs also "e4m3"
                     or "e5m2": D times the epilogue's scale_d, saturated, and the largest
                     |D| before that scale into its amax (a bias is then f32) */
  char bias;      /* 0: none; 'c': a vector of N, bias[j] added to column j; 'r': of M, by row */
  bool bias_f32;  /* the bias vector is fp32 (else of the output type) */
  bool scale_row; /* s_row, a float vector of M, multiplies row i of the product */
  bool scale_col; /* s_col, of N, column j */
  gen_act act;
  bool gated;
  /* Per-tensor scales (FP8's dequantization): s_row and s_col hold one float each, A's and
   * B's, multiplying every element (s_row[i] = s_row[0], s_col[j] = s_col[0] in x's formula).
   * Not with scale_row or scale_col. */
  bool scale_tensor;
  /* Block scales (FP8 inputs only; DeepSeek-V3's recipe): A's 1 x 128 blocks along K and B's
   * 128 x 128 blocks, applied to each K block's partial product inside the main loop:
   *   P[i][j] = sum over kb of s_a[kb][i] * s_b[j / 128][kb] * sum_{k in block kb} A[i][k] B[k][j]
   * with KB = ceil(K / 128) blocks, s_a = scale_row as float[KB][M] (M contiguous) and s_b =
   * scale_col as float[ceil(N / 128)][KB].  Not with the other scales. */
  bool scale_block;
  /* FP8 inputs only: the caller allows "fast accumulation", wgmma's own FP8 accumulator over
   * the whole of K (its partial sums are not promoted into fp32 at an interval), and the
   * looser error bound that comes with it.  The kernel's code is the template's concern (a
   * parameter); the op only says which kernels may serve. */
  bool fast_accum;
  /* FP8 inputs only: B is of the other FP8 type than A (the problem's dtype): e4m3 A with
   * e5m2 B, or e5m2 A with e4m3 B (wgmma reads the pair as it is). */
  bool mixed_fp8;
  /* Grouped GEMMs (mmtune.h's mmt_group_mode): 0 none, 'c' contiguous (the experts' rows of
   * one A and D, G + 1 row offsets), 'm' masked (a batch whose problems use their first rows,
   * G row counts).  The counts come in the epilogue (gen.h's op ABI); problem z's per-column
   * vectors are the z-th of G.  Row-major A ('n'), gated or not; no block scales, no FP8 out. */
  char group;
  /* The call adds beta * C with beta != 0 (a residual): C is read.  Only such an op's kernel
   * has code that reads C (when its beta is not 0); any other op's kernel is launched with
   * beta 0 and reads it as 0.  It keys such calls apart (their kernel reads a matrix more), the
   * model charges the read, and the tuner measures them with beta = 1 and C apart from D.  Not
   * with an FP8 D (written without C). */
  bool residual;
} gen_op;

/* The most bytes of gen_op_format's text, NUL included. */
#define GEN_OP_TEXT_MAX 128
/* An op as text, its canonical form, the database's key: "out=f16" then those of
 * ",bias=col" / ",bias=row", ",bias_type=f32", ",scale=row" / "=col" / "=row+col" / "=tensor"
 * / "=block",
 * ",act=NAME", ",gated", ",fast_accum", ",mixed" (mixed_fp8), ",group=contiguous" / "=masked",
 * ",residual" that apply, in this order.  NULL: "" (the plain GEMM).  Errors:
 * MMT_ERR_INVALID_ARG (a field out of range, outlen too short). */
mmt_status gen_op_format(const gen_op *op, char *out, size_t outlen, ut_err *err);
/* The inverse, accepting the fields in any order and out= absent (then in_dtype's output:
 * f32 for tf32, bf16 for FP8).  Errors: MMT_ERR_INVALID_ARG naming the bad field. */
mmt_status gen_op_parse(const char *text, const char *in_dtype, gen_op *op, ut_err *err);
/* Whether an op may follow inputs of in_dtype: outputs f32, f16 and bf16 for every input,
 * e4m3 and e5m2 (with an f32 bias if any) for FP8 inputs;
 * fast_accum, scale_block and mixed_fp8 for FP8 inputs only; at most one of scale_tensor, scale_block
 * and the vectors (scale_row, scale_col); residual not with an FP8 D. */
bool gen_op_valid(const gen_op *op, const char *in_dtype);
/* gen_op_valid's rules that hold whatever the inputs' type: each field in range, one scale
 * mode, a grouped op without block scales or an FP8 D, an FP8 D's bias in fp32 and no C
 * read.  (An op decoded from its code, rt_op_of_code, is checked by these.) */
bool gen_op_consistent(const gen_op *op);

/* The problem a config is checked against.  Row-major; lda/ldb/ldc in elements. */
typedef struct {
  const char *dtype;  /* "f32" */
  const char *layout; /* "nn", "nt", "tn" or "tt" (see Layouts); NULL means "nn" */
  int64_t m, n, k;
  int64_t lda, ldb, ldc;
  int align_bytes; /* largest power of two (<= 16) dividing every base address and ld*elem size */
  const gen_op *op; /* NULL: the plain GEMM; else the epilogue (gated: n counts P's columns) */
  int64_t batch;    /* problems of a batch (op kernels), 0 read as 1 */
} gen_problem;

/* The problem as the tuner measures it: packed rows (gen_min_ld's leading dimensions, a
 * matrix of one row at gen_one_row_pitches's) of cudaMalloc'd buffers (256-byte aligned), so
 * the row pitches decide its align_bytes.  dtype and layout are borrowed. */
gen_problem gen_packed_problem(const char *dtype, const char *layout, int64_t m, int64_t n,
                               int64_t k);
/* The packed problem of an op kernel (op NULL: gen_packed_problem's): `batch` problems one
 * after another, D of the op's columns (n / 2 gated) at a packed pitch; its alignment is what
 * A's and B's pitches and batch strides allow (the epilogue stores D at any), as mmt_matmul's
 * key has it.  op is borrowed (p.op points to it). */
gen_problem gen_packed_op_problem(const char *dtype, const char *layout, int64_t m, int64_t n,
                                  int64_t k, const gen_op *op, int64_t batch);

/* One grid dimension: ceil(dim / tile), `tile` alone when dim is 0, or `tile` blocks per SM of
 * the device when dim is 'S' (a persistent kernel that loops over its tiles); rounded up to a
 * multiple of `cluster`, the blocks of a thread-block cluster along this axis (the kernel
 * table's `cluster`; 0 or 1: no clusters). */
typedef struct {
  char dim; /* 'M', 'N', 'K', 'S' (per SM), or 0 for the constant `tile` */
  int64_t tile;
  int cluster;
} gen_grid_dim;

/* What a config needs of the problem to be correct; the dispatcher checks it before launch. */
typedef struct {
  int64_t m_multiple, n_multiple, k_multiple; /* 1 = any */
  int align_bytes;                            /* base pointers and rows aligned to this; >= elem */
  bool repack; /* the runtime copies each of A, B and C that is not 16-byte aligned (base or
                  row pitch) into an aligned buffer (rows padded), runs the kernel there and
                  copies C back: align_bytes is then met whatever the caller's pointers */
  bool c_any_align; /* with repack: the kernel stores (and reads) C at any alignment, testing
                       C's base and pitch itself, so the runtime leaves C in place */
} gen_requires;

/* The kernel a repack kernel's module must also define (the copy_rows snippet,
 * templates/snippets/copy_rows.cu): the runtime's copies into aligned rows and back. */
#define GEN_COPY_ROWS_KERNEL "mmt_copy_rows"

/* A TMA tensor map over one operand, encoded by the runtime for each launch and passed after
 * the ABI arguments (see the kernel table's `tensor_maps` in templates/README.md).  The map
 * covers the operand as stored: dimension 0 is its contiguous one (A 'n': K, A 't': M, B 'n':
 * N, B 't': K), dimension 1 its rows; elements outside the matrix read as zero. */
#define GEN_MAX_TENSOR_MAPS 4
/* Blocks of a thread-block cluster at most (the portable size, sm_90 on). */
#define GEN_MAX_CLUSTER 8
/* The most workspace a kernel may ask per block of its grid (a 256 x 256 tile of fp32). */
#define GEN_MAX_WORKSPACE_PER_BLOCK (256 * 1024)
/* Split-K's limits (mmt.split_k_refusal): tiles of C a launch (the split_k snippet's arrival
 * counters, SPLITK_TILES) and workspace bytes a launch. */
#define GEN_SPLITK_TILES 65536
#define GEN_MAX_SPLITK_WORKSPACE (64 << 20)
typedef struct {
  char operand;     /* 'A' or 'B' */
  unsigned box[2];  /* elements copied per load: [0] along dimension 0, [1] rows; 1..256 */
  unsigned swizzle; /* bytes: 0 (none), 32, 64 or 128 */
} gen_tensor_map;

/* A config's emitted kernel: source plus how to launch it. Owned; free with gen_kernel_clear. */
typedef struct {
  char dtype[8];     /* what it was emitted for: "f16" */
  char layout[4];    /* "nn" .. "tt" */
  char *source;      /* complete CUDA C translation unit, compiles on its own */
  char *kernel_name; /* extern "C" __global__ entry point */
  unsigned block[3];
  gen_grid_dim grid[3];
  unsigned shared_bytes; /* dynamic shared memory per block */
  bool exclusive;        /* launches must not overlap: the kernel keeps state between blocks in
                            module globals (split-K arrival counters); runtime orders them */
  unsigned workspace_per_block; /* bytes of fp32 workspace per block of the grid (0: none);
                                  the runtime passes a buffer of grid blocks times this many
                                  bytes as the kernel's last argument, kept between launches;
                                  only with exclusive */
  bool dependent_launch; /* every thread runs griddepcontrol.wait before it touches global
                            memory, so on sm_90 and newer the runtime lets the launch start
                            while the kernel before it in the stream finishes (programmatic
                            dependent launch); never with exclusive */
  gen_requires requires;
  char arch[16]; /* "": compiled for the device's own architecture; else exactly this one
                    (e.g. "sm_90a", whose cubins run only on compute capability 9.0) */
  int ntensor_maps;
  gen_tensor_map tensor_maps[GEN_MAX_TENSOR_MAPS]; /* appended to the arguments in this order */
  /* New fields go last: scripts/lineage.sh describes an earlier tree's kernels through this
   * struct's first fields (gen_launch.c), which must stay where they were. */
  char op[GEN_OP_TEXT_MAX]; /* the op it was emitted for (gen_op_format); "": the plain GEMM */
  bool epilogue_overlap;    /* a work unit's epilogue runs while the SM's tensor cores or FMA
                            pipes compute the next unit (wgmma's ping-pong): what the
                            performance model charges an op's epilogue (rt_model.h) */
  bool walks_experts;       /* a masked grouped op's kernel whose blocks walk the experts:
                               slice blockIdx.z of gridDim.z takes experts z, z + gridDim.z,
                               ... (the epilogue snippet's epi_walk_experts), so the runtime
                               may launch fewer slices than G (sized by the call's
                               group_tokens: rt_device.h's rt_gemm_args) */
} gen_kernel;

/*
 * Every template kernel has this signature (the ABI the runtime launches):
 *   extern "C" __global__ void NAME(int M, int N, int K, float alpha,
 *       const T *A, int lda, const T *B, int ldb, float beta, T *C, int ldc)
 * computing C = alpha * op(A)*op(B) + beta * C row-major, op given by the layout the kernel
 * was emitted for (see Layouts); when beta == 0, C is not read.  K == 0 must
 * write alpha * 0 (+ beta * C): the dispatcher relies on it for BLAS's K == 0 case.
 * A kernel with tensor maps takes one more argument per map, after ldc:
 *   const __grid_constant__ M map  (M: a 64-byte aligned 128-byte struct, CUtensorMap's layout)
 * and a kernel with a workspace (workspace_per_block > 0) one more, last:
 *   float *WS  (16-byte aligned; its contents are undefined at the start of each launch)
 *
 * An op kernel (emitted for a gen_op: its op is not "") takes C in the op's output type TO,
 * read only (when beta != 0), and one more argument right after ldc, before any tensor map:
 *   const TO *C, int ldc, mmt_epilogue E
 * the struct of the epilogue snippet (templates/snippets/epilogue.cu; GEN_EPILOGUE_BYTES):
 *   { void *D; long long ldd; const void *bias; const float *scale_row, *scale_col;
 *     long long batch_a, batch_b, batch_c, batch_d; const float *scale_d; float *amax;
 *     const int *group_rows; int *group_error; long long groups; }
 * D (ldd, TO; gated: M x N/2) is written; bias, scale_row, scale_col are read as the op says
 * (NULL where it has none).  scale_d and amax are an FP8 D's (its scale, NULL for 1; where
 * the largest |D| before it goes by atomic max, NULL for nowhere); a kernel of another output
 * type declares the struct without them (its first 72 bytes: the launch copies what the
 * kernel's parameter holds); group_rows, group_error and groups are a grouped op's (gen_op's
 * group), whose struct has all of them (112 bytes) and whose tile rows are its experts' (the
 * epilogue snippet's EPI_GROUP): contiguous, grid.z 1 and G tile rows more than M's; masked,
 * grid.z the G experts as a batch's.  The problems of a batch are blockIdx.z: problem z's A, B, C and D
 * start batch_a * z, ... elements past the pointers (0: the same matrix for every z).  The
 * runtime launches grid.z = the batch when the kernel's grid.z is the constant 1; a kernel
 * whose grid.z is anything else (split-K's slices) runs batches of 1 only (its constraints say
 * so for prob.batch > 1).  An op kernel's tensor maps are 3-D: dimension 2 is the batch, its
 * stride the operand's batch stride (problem z's box at z), or of size 1 where the operand is
 * shared (stride 0) or the batch is 1 (z 0).
 */
#define GEN_EPILOGUE_BYTES 112

/* Template discovery.  The search path is $MMTUNE_TEMPLATE_PATH (colon-separated folders,
 * searched first), then <exe dir>/../share/mmtune/templates, then the installed folder
 * (<prefix>/share/mmtune/templates, compiled in), then the source tree's templates/ folder
 * compiled in as MMT_SOURCE_TEMPLATE_DIR.  A template named T is the file
 * T.lua in the first folder that has one. */

/* Finds the file for template `name`.  Names are [A-Za-z0-9_]+.  Errors: MMT_ERR_NOT_FOUND
 * (message lists the folders searched), MMT_ERR_INVALID_ARG (bad name). */
mmt_status gen_find(const char *name, char *path, size_t pathlen, ut_err *err);

/* Lists the distinct template names on the search path, sorted.  *names is an owned array of
 * owned strings; free with gen_names_free. */
mmt_status gen_list(char ***names, int *count, ut_err *err);
void gen_names_free(char **names, int count);

/* Loads a template file in a fresh sandbox and validates its declaration (name, dtypes,
 * params, constraints, emit) and that its default config passes its own constraints.
 * Errors: MMT_ERR_IO, MMT_ERR_TEMPLATE (syntax/runtime/malformed; the message has file:line
 * and a traceback), MMT_ERR_TEMPLATE_LIMIT, MMT_ERR_NOMEM, MMT_ERR_INVALID_ARG (NULL). */
mmt_status gen_load(const char *path, gen_template **out, ut_err *err);
/* gen_find + gen_load. */
mmt_status gen_load_named(const char *name, gen_template **out, ut_err *err);
/* The device whose limits t's constraints and emit read (mmt.device) from now on; a template
 * is loaded with the defaults of GEN_DEFAULT_ARCH, and its default config checked there.
 * Copied.  Errors: MMT_ERR_INVALID_ARG (NULL, a limit below 1). */
mmt_status gen_set_device(gen_template *t, const gen_device *dev, ut_err *err);
const gen_device *gen_device_of(const gen_template *t);
/* gen_free(NULL) is a no-op. */
void gen_free(gen_template *t);

const char *gen_name(const gen_template *t);
const char *gen_description(const gen_template *t);
const char *gen_path(const gen_template *t);
/* Hash of the template's source text, 16 hex digits (provenance). */
const char *gen_source_hash(const gen_template *t);
/*
 * Lineage: rows measured with an earlier version of a template that emits what this one emits.
 * A database row records the hash of the template that emitted its kernel (gen_source_hash);
 * when the template file is edited, the hash changes and the row no longer names the current
 * template.  A refactor that emits the same kernels declares so in `lineage.txt`, the file of
 * that name in the template file's own folder (a user's template folder has its own, or none),
 * one line each:
 *   # comment
 *   <template> <earlier hash> <current hash>
 *       each kernel that <template> emitted when its hash was <earlier hash> (every config,
 *       dtype and layout) is emitted byte for byte the same (source and launch description,
 *       gen_kernel_launch_text) by <template> with hash <current hash>;
 *   <template> <earlier hash> <current hash> <dtype> <layout> <params>
 *       except this config (params canonical, gen_config_format): its kernel changed, or it
 *       emits no longer; rows of it stay stale.
 * Hashes are 16 lowercase hex digits; fields are separated by spaces or tabs.  Only lines whose
 * current hash is the template's own take effect, so any later edit of the template (which
 * changes its hash) makes them inert until they are written again for the new hash
 * (scripts/lineage.sh does, checking what both versions emit).  Malformed lines, lines over
 * 4 KiB and whatever lies past the file's first 16 MiB are ignored.
 */
/* Whether a row measured with template hash earlier_hash of t's name, for (dtype, layout,
 * params), measured the kernel t emits now: earlier_hash is gen_source_hash(t), or t's
 * lineage.txt lists (name, earlier_hash, gen_source_hash(t)) and not that config as an
 * exception.  The file is read at the first call and kept with t (so t changes: one thread at a
 * time, as for every call on t); a missing or unreadable file
 * is no lineage (false but for t's own hash), and so is running out of memory reading it.
 * Strings are compared as they are (params as the row stores them).  NULL arguments: false. */
bool gen_emits_as(gen_template *t, const char *earlier_hash, const char *dtype, const char *layout,
                  const char *params);
bool gen_supports_dtype(const gen_template *t, const char *dtype);
/* Whether the template declares layout (its `layouts` list; {"nn"} when it has none). */
bool gen_supports_layout(const gen_template *t, const char *layout);
int gen_dtype_count(const gen_template *t);
const char *gen_dtype(const gen_template *t, int i);

int gen_param_count(const gen_template *t);
const char *gen_param_name(const gen_template *t, int i);
/* Index of the parameter called name, or -1. */
int gen_param_index(const gen_template *t, const char *name);
int gen_param_value_count(const gen_template *t, int i);
int64_t gen_param_value(const gen_template *t, int i, int j);
/* Product of the value counts (configs before constraints). */
uint64_t gen_space_size(const gen_template *t);

/* The idx-th config of the space (mixed radix, first parameter varies slowest). */
void gen_config_at(const gen_template *t, uint64_t idx, gen_config *cfg);
/* The template's default config: its `default` table if it declares one, else the first value
 * of each parameter. */
void gen_config_default(const gen_template *t, gen_config *cfg);
/* Parses "name=value,name=value" (or with spaces instead of commas); parameters not named
 * keep the default.  Errors: MMT_ERR_INVALID_ARG for an unknown name, a non-integer value, or
 * a value not in the parameter's list (the message says which). */
mmt_status gen_config_parse(const gen_template *t, const char *text, gen_config *cfg, ut_err *err);
/* Canonical text "name=value,..." in declaration order. */
mmt_status gen_config_format(const gen_template *t, const gen_config *cfg, char *out, size_t outlen,
                             ut_err *err);

/*
 * Runs the template's constraints, constraints(p, prob, dtype, layout) in Lua.  With a problem:
 * constraints(p, prob, prob.dtype, prob.layout).  problem NULL checks the config alone (the
 * space that `mmtune space` lists): valid when constraints(p, nil, dtype, layout) holds for at
 * least one dtype and layout the template declares.  *valid receives the verdict, *why (may be
 * NULL) the template's reason when invalid ("" if none; without a problem, the first pair's and
 * the first different one's).  A problem dtype or layout the template does not support is
 * invalid (with a reason) without running Lua.  Errors: template failures, and
 * MMT_ERR_INVALID_ARG for a config whose values are not in the parameters' lists.
 * On a config alone the answers are kept (templates/README.md: the parameters each call read
 * decide it), so a config the kept answers decide runs no Lua, unless a reason is asked for an
 * invalid one; gen_set_device forgets them.
 */
mmt_status gen_check(gen_template *t, const gen_config *cfg, const gen_problem *problem, bool *valid,
                     char *why, size_t whylen, ut_err *err);
/* The config alone for one dtype and layout, whatever the problem's sizes: constraints(p, nil,
 * dtype, layout).  A config valid here emits for that dtype and layout (what `mmtune compile
 * --dtype --layout` compiles); one valid for a problem of that dtype and layout is valid here.
 * An unsupported dtype or layout is invalid (with a reason) without running Lua.  Errors as
 * gen_check. */
mmt_status gen_check_for(gen_template *t, const gen_config *cfg, const char *dtype,
                         const char *layout, bool *valid, char *why, size_t whylen, ut_err *err);
/* gen_check_for for an op (NULL: gen_check_for): constraints(p, nil, dtype, layout, op).  A
 * template without epilogues is invalid for any op (with a reason); an op that is not one for
 * dtype is MMT_ERR_INVALID_ARG.  No decision tree: every call runs Lua. */
mmt_status gen_check_op_for(gen_template *t, const gen_config *cfg, const char *dtype,
                            const char *layout, const gen_op *op, bool *valid, char *why,
                            size_t whylen, ut_err *err);

/* Emits the kernel for cfg, dtype and layout (emit(p, dtype, layout) in Lua).  Does not run
 * the constraints: call gen_check first.  Validates the returned table (malformed ->
 * MMT_ERR_TEMPLATE naming the bad field); MMT_ERR_INVALID_ARG for an unsupported dtype or
 * layout or an out-of-list config.  out is filled only on success. */
mmt_status gen_emit(gen_template *t, const gen_config *cfg, const char *dtype, const char *layout,
                    gen_kernel *out, ut_err *err);
/* gen_emit for an op (NULL: gen_emit): emit(p, dtype, layout, op).  MMT_ERR_INVALID_ARG also for
 * a template without epilogues or an op that is not one for dtype (gen_op_valid). */
mmt_status gen_emit_op(gen_template *t, const gen_config *cfg, const char *dtype,
                       const char *layout, const gen_op *op, gen_kernel *out, ut_err *err);
/* Whether t declares epilogues (emits op kernels). */
bool gen_has_epilogues(const gen_template *t);
void gen_kernel_clear(gen_kernel *k);

/* The most bytes gen_kernel_launch_text writes, NUL included (a kernel name of 255 characters
 * and four tensor maps fit). */
#define GEN_LAUNCH_TEXT_MAX 1024
/* The launch description of k, everything of the kernel table but its source and the dtype
 * and layout it was emitted for, as one line of text: kernel name, block, shared bytes, grid
 * rules, requirements, exclusive, workspace, dependent launch, arch and tensor maps.  Two
 * kernels with the same source and the same text launch the same way; hashed with the source
 * it names what was compiled and run (tests/data/emit_golden.txt holds its hash).  Errors:
 * MMT_ERR_INVALID_ARG (NULL, or outlen too short for the text; GEN_LAUNCH_TEXT_MAX always
 * does), out then "". */
mmt_status gen_kernel_launch_text(const gen_kernel *k, char *out, size_t outlen, ut_err *err);

/* Grid for a problem from a kernel's grid rule on a device of sm_count multiprocessors (used
 * by per-SM dimensions only), each dimension rounded up to whole clusters (the blocks past the
 * problem's are the kernel's to idle).  M or N == 0 gives a 0 dimension: launch nothing (a
 * per-SM dimension too).  Errors: MMT_ERR_INVALID_ARG when a dimension exceeds the hardware limit
 * (x < 2^31, y and z < 65536), a size is < 0, or a per-SM rule gets sm_count < 1. */
mmt_status gen_grid_eval(const gen_grid_dim grid[3], int64_t m, int64_t n, int64_t k,
                         int sm_count, unsigned out[3], ut_err *err);

/* Blocks of a cluster along grid dimension g (its `cluster`, 0 read as 1), and of one whole
 * cluster of k (the product over its grid; 1: none). */
int gen_grid_cluster(const gen_grid_dim *g);
int gen_kernel_cluster_blocks(const gen_kernel *k);

/* The tile_order snippet's MMT_SHORT_GRID: a grid of tiles at most this many tall or wide is
 * walked column by column or row by row whatever its `group`. */
#define GEN_SHORT_GRID 8
/* Whether config cfg of t, emitted as k, is on problem p the same kernel as its `group` = 1
 * config, which is valid too: a template that loads the tile_order snippet and has a `group`
 * parameter walks a grid (x: tile columns, y: tile rows in whole clusters) at most
 * GEN_SHORT_GRID tiles tall or wide the same way whatever the group, so the tuner times the
 * group = 1 config alone.  False for a per-SM (persistent) grid, whose tile grid is the
 * kernel's own.  Errors (a failing constraint function) read as false. */
bool gen_group_twin(gen_template *t, const gen_config *cfg, const gen_kernel *k,
                    const gen_problem *p);

/* gen_problem's align_bytes of these values (byte addresses and leading dimensions in bytes):
 * the largest power of two <= 16 dividing every one of values[0..count); 0 is divisible by
 * all.  1 at least. */
int gen_align_bytes(const uint64_t *values, int count);
/* True when the problem meets the requirements (multiples, alignment, and each ld >= the row
 * width its layout gives; ldc >= N / 2 for a gated op, whose C and D have half the product's
 * columns). */
bool gen_requires_met(const gen_requires *r, const gen_problem *p);

/* Bytes of one element of dtype ("f32" -> 4); 0 for an unknown dtype. */
int gen_dtype_size(const char *dtype);
/* Whether dtype is an FP8 type ("e4m3", "e5m2"): the input of op kernels only (gen_op_valid:
 * D is f32, f16, bf16 or FP8 with its scale), never of a plain GEMM. */
bool gen_dtype_fp8(const char *dtype);
/* The other FP8 type ("e4m3" <-> "e5m2": B's of a mixed op); NULL for any other dtype. */
const char *gen_dtype_fp8_other(const char *dtype);
/* The element types mmtune knows: dtype's index in them (0 .. GEN_DTYPES - 1), -1 for an
 * unknown one; and the name of index i (NULL out of range). */
#define GEN_DTYPES 7
int gen_dtype_index(const char *dtype);
const char *gen_dtype_name(int i);

#endif /* MMT_GEN_H */
