/*
 * mmtune.h -- the public API of libmmtune: tuned GPU matrix multiplication.
 *
 * An application opens a context on a CUDA device and an mmtune database (filled by the
 * `mmtune` CLI), then calls mmt_sgemm() with device pointers.  The context picks, for each
 * shape, the fastest verified kernel recorded for this GPU model; if the exact shape was
 * never tuned it uses the nearest tuned shape whose kernel is valid for the asked one, else a
 * template default.  mmt_sgemm_explain() says which of these it did.
 *
 * Conventions (the whole header):
 *  - Every function that can fail returns mmt_status; MMT_OK is 0.  Details of the last
 *    failure on a context (NVRTC log, SQL error, driver error name) are in mmt_errmsg().
 *  - The library never prints, exits or aborts.
 *  - This header includes no CUDA header: device pointers are plain pointers from
 *    cudaMalloc/cuMemAlloc, and a stream is a CUstream / cudaStream_t passed as void *.
 *  - Thread safety: a context may be used by one host thread at a time in this version.
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

typedef struct {
  const char *db_path;   /* database file; NULL: $MMTUNE_DB, else $XDG_CACHE_HOME/mmtune/mmtune.db */
  const char *cache_dir; /* cubin cache folder; NULL: $XDG_CACHE_HOME/mmtune/cubin */
} mmt_options;

/*
 * Opens a context on CUDA device `device` (ordinal) with the database in `options`.
 * A missing database is not an error (every call then uses template defaults); a corrupt or
 * foreign file is (MMT_ERR_DB_CORRUPT).
 * ctx:     OUT: the new context, owned by the caller (mmt_close).  On failure *ctx is a
 *          context holding only the error message (read mmt_errmsg, then mmt_close), or NULL
 *          when even that could not be allocated.
 * options: may be NULL for defaults; strings are copied.
 * Errors: MMT_ERR_NO_DRIVER, MMT_ERR_NO_DEVICE, MMT_ERR_CUDA, MMT_ERR_DB*, MMT_ERR_NOMEM.
 */
mmt_status mmt_open(mmt_context **ctx, int device, const mmt_options *options);

/* Frees the context, its loaded modules and database handle.  mmt_close(NULL) is a no-op. */
void mmt_close(mmt_context *ctx);

/* Details of the last failure on ctx ("" if none).  Owned by ctx, valid until the next call
 * on ctx.  mmt_errmsg(NULL) returns a static string. */
const char *mmt_errmsg(const mmt_context *ctx);

/* How a kernel was chosen for a problem. */
typedef enum {
  MMT_CHOICE_EXACT = 0,   /* tuned for exactly this shape on this GPU model */
  MMT_CHOICE_NEAREST = 1, /* tuned for another shape; config valid for this one */
  MMT_CHOICE_DEFAULT = 2  /* nothing tuned applies: a template's default config */
} mmt_choice_kind;

typedef struct {
  mmt_choice_kind kind;
  char template_name[64]; /* e.g. "smem_tiled" */
  char params[256];       /* canonical "name=value,..." */
  int64_t tuned_m, tuned_n, tuned_k; /* shape the record was measured on (0 for DEFAULT) */
  double tuned_ms;        /* median time measured for that record (0 for DEFAULT) */
  double tuned_tflops;    /* TFLOP/s of that record (0 for DEFAULT) */
} mmt_choice;

/*
 * C = A * B in single precision, all matrices row-major on the device:
 *   A is M x K with leading dimension lda (>= K), B is K x N with ldb (>= N),
 *   C is M x N with ldc (>= N).  Leading dimensions are in elements.
 * stream: a CUstream / cudaStream_t, or NULL for the legacy default stream.
 * The call is asynchronous with respect to the host, like cuBLAS.  The first call for a shape
 * may compile (NVRTC, then the disk cache) and load a module; later calls reuse it.
 * M or N == 0 is valid and launches nothing; K == 0 writes C = 0 (M, N > 0).
 * Pointers must be non-NULL and 4-byte aligned for the matrices the problem touches; the
 * kernel is chosen for the actual alignment, so a misaligned-for-vectors pointer gets a
 * kernel that does not need it, never a wrong result.
 * Errors: MMT_ERR_INVALID_ARG (negative size, ld too small, NULL or misaligned pointer),
 * MMT_ERR_UNSUPPORTED (a size above 2^31 - 1, or no kernel fits), MMT_ERR_COMPILE,
 * MMT_ERR_CUDA; on a context whose mmt_open failed, that open's status.
 */
mmt_status mmt_sgemm(mmt_context *ctx, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float *C, int64_t ldc, void *stream);

/*
 * Says which kernel mmt_sgemm would use for this problem, without launching or compiling.
 * Pointers are unknown here, so alignment is what the leading dimensions allow (as for
 * pointers from cudaMalloc).  M or N == 0: MMT_OK with kind DEFAULT and an empty
 * template_name (nothing would be launched).
 * choice: OUT.
 */
mmt_status mmt_sgemm_explain(mmt_context *ctx, int64_t M, int64_t N, int64_t K, int64_t lda,
                             int64_t ldb, int64_t ldc, mmt_choice *choice);

/* Name of a choice kind: "exact", "nearest", "default". */
const char *mmt_choice_kind_name(mmt_choice_kind kind);

#ifdef __cplusplus
}
#endif
#endif /* MMTUNE_H */
