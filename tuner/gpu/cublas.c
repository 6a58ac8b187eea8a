/* gpu/cublas.c -- see gpu/cublas.h.  Loads libcublas with dlopen once per process. */
#include "gpu/cublas.h"
#include "gpu/vendor_lib.h"

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The part of cublas_api.h (CUDA 13) this file uses, declared here so that it compiles
 * without the toolkit's include path.  The enums are passed as unsigned int, the type C makes
 * them compatible with. */
typedef struct cublasContext *cb_handle; /* cublasHandle_t */
typedef unsigned cb_status;              /* cublasStatus_t */
#define CB_STATUS_SUCCESS 0u
#define CB_OP_N 0u             /* cublasOperation_t CUBLAS_OP_N */
#define CB_OP_T 1u             /* CUBLAS_OP_T */
#define CB_PEDANTIC_MATH 2u    /* cublasMath_t CUBLAS_PEDANTIC_MATH */
#define CB_DEFAULT_MATH 0u     /* CUBLAS_DEFAULT_MATH */
#define CB_R_16F 2u            /* cudaDataType CUDA_R_16F */
#define CB_R_16BF 14u          /* CUDA_R_16BF */
#define CB_COMPUTE_32F 68u     /* cublasComputeType_t CUBLAS_COMPUTE_32F */
#define CB_COMPUTE_32F_PEDANTIC 69u /* CUBLAS_COMPUTE_32F_PEDANTIC */
#define CB_COMPUTE_32F_FAST_TF32 77u /* CUBLAS_COMPUTE_32F_FAST_TF32 */
#define CB_R_32F 0u            /* CUDA_R_32F */
#define CB_GEMM_DEFAULT (-1)   /* cublasGemmAlgo_t CUBLAS_GEMM_DEFAULT */

/* X(symbol, return type, parameter list): the entry points, all required. */
#define CB_FUNCS(X)                                                                                \
  X(cublasCreate_v2, cb_status, (cb_handle *))                                                     \
  X(cublasDestroy_v2, cb_status, (cb_handle))                                                      \
  X(cublasGetVersion_v2, cb_status, (cb_handle, int *))                                            \
  X(cublasSetStream_v2, cb_status, (cb_handle, struct CUstream_st *))                              \
  X(cublasSetMathMode, cb_status, (cb_handle, unsigned))                                           \
  X(cublasSgemm_v2, cb_status,                                                                     \
    (cb_handle, unsigned, unsigned, int, int, int, const float *, const float *, int,              \
     const float *, int, const float *, float *, int))                                             \
  X(cublasGemmEx, cb_status,                                                                       \
    (cb_handle, unsigned, unsigned, int, int, int, const void *, const void *, unsigned, int,      \
     const void *, unsigned, int, const void *, void *, unsigned, int, unsigned, int))             \
  X(cublasGemmStridedBatchedEx, cb_status,                                                         \
    (cb_handle, unsigned, unsigned, int, int, int, const void *, const void *, unsigned, int,      \
     long long, const void *, unsigned, int, long long, const void *, void *, unsigned, int,       \
     long long, int, unsigned, int))
/* Optional: cuBLAS 11.4.2 and later. */
#define CB_OPTIONAL_FUNCS(X)                          \
  X(cublasGetStatusName, const char *, (cb_status)) \
  X(cublasGetStatusString, const char *, (cb_status))
/* Optional, 12.5 and later.  Not checked against the header: C's _Generic does not take an
 * array of cublasOperation_t for one of unsigned (the enum's type), though they are alike. */
#define CB_GROUPED_FUNCS(X)                                                                        \
  X(cublasGemmGroupedBatchedEx, cb_status,                                                         \
    (cb_handle, const unsigned *, const unsigned *, const int *, const int *, const int *,         \
     const void *, const void *const *, unsigned, const int *, const void *const *, unsigned,      \
     const int *, const void *, void *const *, unsigned, const int *, int, const int *, unsigned))

/* Where the build can see the toolkit header (the mmtune build), each declaration above is
 * checked against it at compile time: a mismatch fails the build. */
#if defined(__has_include)
#if __has_include(<cublas_api.h>)
#include <cublas_api.h>
#define CB_CHECK_(sym, ret, params) \
  _Static_assert(_Generic(&sym, ret(*) params: 1, default: 0), #sym " differs from cublas_api.h");
CB_FUNCS(CB_CHECK_)
CB_OPTIONAL_FUNCS(CB_CHECK_)
#undef CB_CHECK_
_Static_assert(CUBLAS_STATUS_SUCCESS == CB_STATUS_SUCCESS && CUBLAS_OP_N == CB_OP_N &&
                   CUBLAS_OP_T == CB_OP_T && CUBLAS_PEDANTIC_MATH == CB_PEDANTIC_MATH &&
                   CUBLAS_DEFAULT_MATH == CB_DEFAULT_MATH && CUDA_R_16F == CB_R_16F &&
                   CUDA_R_16BF == CB_R_16BF && CUBLAS_COMPUTE_32F == CB_COMPUTE_32F &&
                   CUBLAS_GEMM_DEFAULT == CB_GEMM_DEFAULT && CUDA_R_32F == CB_R_32F &&
                   CUBLAS_COMPUTE_32F_FAST_TF32 == CB_COMPUTE_32F_FAST_TF32 &&
                   CUBLAS_COMPUTE_32F_PEDANTIC == CB_COMPUTE_32F_PEDANTIC,
               "cublas_api.h constants");
#endif
#endif

typedef struct {
#define CB_FIELD_(sym, ret, params) ret(*sym) params;
  CB_FUNCS(CB_FIELD_)
  CB_OPTIONAL_FUNCS(CB_FIELD_)
  CB_GROUPED_FUNCS(CB_FIELD_)
#undef CB_FIELD_
} cb_table;
/* dlsym's void * is copied into each field. */
_Static_assert(sizeof(cb_table) % sizeof(void *) == 0, "a table of function pointers");

/* Written once inside pthread_once, read-only afterwards. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct {
  mmt_status status;
  ut_err err;
  void *handle;
  cb_table fn;
} g_lib;

struct tn_cublas {
  cb_handle h;
  struct CUstream_st *stream; /* the handle's stream, set only when it changes */
  unsigned math;              /* the handle's math mode, set only when it changes */
  char version[32];
};

/* Names for a library that cannot give them (cublasGetStatusName is 11.4.2 and later). */
static const char *fallback_status_name(cb_status s) {
  switch (s) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return NULL;
  }
}

/* Formats a failed cuBLAS call: "cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE (an invalid
 * value was used as an argument)".  Returns MMT_ERR_CUDA. */
static mmt_status cb_fail(ut_err *err, const char *what, cb_status s) {
  const char *name = g_lib.fn.cublasGetStatusName ? g_lib.fn.cublasGetStatusName(s) : NULL;
  const char *text = g_lib.fn.cublasGetStatusString ? g_lib.fn.cublasGetStatusString(s) : NULL;
  if (!name) name = fallback_status_name(s);
  if (name && text) return ut_fail(err, MMT_ERR_CUDA, "%s: %s (%s)", what, name, text);
  if (name) return ut_fail(err, MMT_ERR_CUDA, "%s: %s", what, name);
  return ut_fail(err, MMT_ERR_CUDA, "%s: cuBLAS status %u", what, s);
}

static mmt_status load_library(ut_err *err) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so"};
  const char *lib;
  mmt_status rc = tn_vendor_open("MMTUNE_LIBCUBLAS", names, 2, &g_lib.handle, &lib, err);
  if (rc) return rc;
#define CB_SYMBOL_(sym, required, e)                                                               \
  tn_vendor_symbol(g_lib.handle, lib, "cuBLAS", #sym, required, &g_lib.fn.sym, e)
#define CB_REQUIRED_(sym, ret, params)                                                             \
  if ((rc = CB_SYMBOL_(sym, true, err))) return rc;
#define CB_OPTIONAL_(sym, ret, params) CB_SYMBOL_(sym, false, NULL);
  /* On a failure below the library stays loaded: its initializers may have started threads. */
  CB_FUNCS(CB_REQUIRED_)
  CB_OPTIONAL_FUNCS(CB_OPTIONAL_)
  CB_GROUPED_FUNCS(CB_OPTIONAL_)
#undef CB_REQUIRED_
#undef CB_OPTIONAL_
#undef CB_SYMBOL_
  return MMT_OK;
}

static void load_once(void) {
  ut_err_clear(&g_lib.err);
  g_lib.status = load_library(&g_lib.err);
  if (g_lib.status) memset(&g_lib.fn, 0, sizeof g_lib.fn);
}

mmt_status tn_cublas_open(tn_cublas **out, ut_err *err) {
  mmt_status rc = MMT_OK;
  *out = NULL;
  int prc = pthread_once(&g_once, load_once);
  if (prc != 0) return ut_fail(err, MMT_ERR_NOT_FOUND, "pthread_once failed: %s", strerror(prc));
  if (g_lib.status) return ut_fail(err, g_lib.status, "%s", g_lib.err.msg);
  const cb_table *fn = &g_lib.fn;
  tn_cublas *cb = calloc(1, sizeof *cb);
  if (!cb) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  cb_status s;
  int v = 0;
  if ((s = fn->cublasCreate_v2(&cb->h)) != CB_STATUS_SUCCESS) {
    cb->h = NULL; /* cuBLAS leaves it unspecified on failure */
    rc = cb_fail(err, "cublasCreate_v2", s);
  } else if ((cb->math = CB_PEDANTIC_MATH),
             (s = fn->cublasSetMathMode(cb->h, CB_PEDANTIC_MATH)) != CB_STATUS_SUCCESS) {
    rc = cb_fail(err, "cublasSetMathMode(CUBLAS_PEDANTIC_MATH)", s);
  } else if ((s = fn->cublasGetVersion_v2(cb->h, &v)) != CB_STATUS_SUCCESS) {
    rc = cb_fail(err, "cublasGetVersion_v2", s);
  }
  if (rc) {
    tn_cublas_close(cb);
    return rc;
  }
  /* CUBLAS_VERSION is major * 10000 + minor * 100 + patch. */
  snprintf(cb->version, sizeof cb->version, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  *out = cb;
  return MMT_OK;
}

void tn_cublas_close(tn_cublas *cb) {
  if (!cb) return;
  if (cb->h) g_lib.fn.cublasDestroy_v2(cb->h);
  free(cb);
}

const char *tn_cublas_version(const tn_cublas *cb) { return cb->version; }

/* Points the handle at `stream` and the math mode of the call (each set only when it changes):
 * fp32 pedantic (no TF32); tf32 and 16-bit inputs the default mode, tensor cores included (tf32
 * asked for through the compute type). */
static mmt_status set_stream_and_math(tn_cublas *cb, struct CUstream_st *stream, bool f32,
                                      ut_err *err) {
  const cb_table *fn = &g_lib.fn;
  cb_status s;
  if (stream != cb->stream) {
    if ((s = fn->cublasSetStream_v2(cb->h, stream)) != CB_STATUS_SUCCESS)
      return cb_fail(err, "cublasSetStream_v2", s);
    cb->stream = stream;
  }
  unsigned math = f32 ? CB_PEDANTIC_MATH : CB_DEFAULT_MATH;
  if (math != cb->math) {
    if ((s = fn->cublasSetMathMode(cb->h, math)) != CB_STATUS_SUCCESS)
      return cb_fail(err, "cublasSetMathMode", s);
    cb->math = math;
  }
  return MMT_OK;
}

mmt_status tn_cublas_gemm(tn_cublas *cb, struct CUstream_st *stream, const char *dtype,
                          const char *layout, int64_t m, int64_t n, int64_t k, float alpha,
                          uint64_t a, int64_t lda, uint64_t b, int64_t ldb, float beta, uint64_t c,
                          int64_t ldc, ut_err *err) {
  bool f32 = !dtype || !strcmp(dtype, "f32"), tf32 = dtype && !strcmp(dtype, "tf32");
  unsigned type = tf32 ? CB_R_32F : dtype && !strcmp(dtype, "bf16") ? CB_R_16BF : CB_R_16F;
  if (!f32 && !tf32 && strcmp(dtype, "f16") && strcmp(dtype, "bf16"))
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "no cuBLAS call for dtype %s", dtype);
  const int64_t dims[] = {m, n, k, lda, ldb, ldc};
  for (int i = 0; i < 6; i++)
    if (dims[i] < 0 || dims[i] > INT_MAX)
      return ut_fail(err, MMT_ERR_UNSUPPORTED,
                     "cuBLAS takes int sizes: M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld",
                     (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldb,
                     (long long)ldc);
  const cb_table *fn = &g_lib.fn;
  cb_status s;
  mmt_status rc = set_stream_and_math(cb, stream, f32, err);
  if (rc) return rc;
  /* Row-major C = op(A) * op(B) is column-major C^T = op(B)^T * op(A)^T: swap the operands
   * and M, N.  Read column-major, a row-major operand stored as is is its own transpose, so
   * cuBLAS transposes exactly the operands the layout stores transposed. */
  bool ta = layout && layout[0] == 't', tb = layout && layout[0] && layout[1] == 't';
  if (!f32) {
    s = fn->cublasGemmEx(cb->h, tb ? CB_OP_T : CB_OP_N, ta ? CB_OP_T : CB_OP_N, (int)n, (int)m,
                         (int)k, &alpha, (const void *)(uintptr_t)b, type, (int)ldb,
                         (const void *)(uintptr_t)a, type, (int)lda, &beta, (void *)(uintptr_t)c,
                         type, (int)ldc, tf32 ? CB_COMPUTE_32F_FAST_TF32 : CB_COMPUTE_32F,
                         CB_GEMM_DEFAULT);
    return s == CB_STATUS_SUCCESS ? MMT_OK : cb_fail(err, "cublasGemmEx", s);
  }
  s = fn->cublasSgemm_v2(cb->h, tb ? CB_OP_T : CB_OP_N, ta ? CB_OP_T : CB_OP_N, (int)n, (int)m,
                         (int)k, &alpha,
                         (const float *)(uintptr_t)b, (int)ldb, (const float *)(uintptr_t)a,
                         (int)lda, &beta, (float *)(uintptr_t)c, (int)ldc);
  return s == CB_STATUS_SUCCESS ? MMT_OK : cb_fail(err, "cublasSgemm_v2", s);
}

/* cudaDataType of a dtype ("tf32": f32 data); false for one cuBLAS has no GEMM of here. */
static bool data_type(const char *dtype, unsigned *type) {
  static const struct {
    const char *name;
    unsigned type;
  } types[] = {{"f32", CB_R_32F}, {"tf32", CB_R_32F}, {"f16", CB_R_16F}, {"bf16", CB_R_16BF}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (!strcmp(dtype, types[i].name)) {
      *type = types[i].type;
      return true;
    }
  return false;
}

mmt_status tn_cublas_gemm_strided_batched(tn_cublas *cb, struct CUstream_st *stream,
                                          const char *dtype, const char *out_dtype,
                                          const char *layout, int64_t m, int64_t n, int64_t k,
                                          float alpha, uint64_t a, int64_t lda, int64_t stride_a,
                                          uint64_t b, int64_t ldb, int64_t stride_b, float beta,
                                          uint64_t c, int64_t ldc, int64_t stride_c, int64_t batch,
                                          ut_err *err) {
  if (!dtype) dtype = "f32";
  const bool tf32 = !strcmp(dtype, "tf32"), f32 = !strcmp(dtype, "f32");
  if (!out_dtype || !*out_dtype) out_dtype = tf32 ? "f32" : dtype;
  unsigned in_type = 0, out_type = 0;
  if (!data_type(dtype, &in_type) || !data_type(out_dtype, &out_type) ||
      !strcmp(out_dtype, "tf32") || (out_type != in_type && out_type != CB_R_32F) ||
      (in_type == CB_R_32F && out_type != CB_R_32F))
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "no cublasGemmStridedBatchedEx for %s -> %s (f32, tf32 -> f32; f16, bf16 -> "
                   "the same or f32)",
                   dtype, out_dtype);
  const int64_t dims[] = {m, n, k, lda, ldb, ldc, batch};
  for (int i = 0; i < 7; i++)
    if (dims[i] < 0 || dims[i] > INT_MAX)
      return ut_fail(err, MMT_ERR_UNSUPPORTED,
                     "cuBLAS takes int sizes: M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld "
                     "batch=%lld",
                     (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldb,
                     (long long)ldc, (long long)batch);
  if (batch < 1 || stride_a < 0 || stride_b < 0 || stride_c < 0 || (batch > 1 && stride_c == 0))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "batch=%lld (at least 1), stride_a=%lld stride_b=%lld stride_c=%lld (not "
                   "negative; C's not 0 when batch > 1)",
                   (long long)batch, (long long)stride_a, (long long)stride_b, (long long)stride_c);
  mmt_status rc = set_stream_and_math(cb, stream, f32, err);
  if (rc) return rc;
  const unsigned compute = f32    ? CB_COMPUTE_32F_PEDANTIC
                           : tf32 ? CB_COMPUTE_32F_FAST_TF32
                                  : CB_COMPUTE_32F;
  /* As tn_cublas_gemm: C^T = op(B)^T op(A)^T, each problem at its stride. */
  bool ta = layout && layout[0] == 't', tb = layout && layout[0] && layout[1] == 't';
  cb_status s = g_lib.fn.cublasGemmStridedBatchedEx(
      cb->h, tb ? CB_OP_T : CB_OP_N, ta ? CB_OP_T : CB_OP_N, (int)n, (int)m, (int)k, &alpha,
      (const void *)(uintptr_t)b, in_type, (int)ldb, (long long)stride_b,
      (const void *)(uintptr_t)a, in_type, (int)lda, (long long)stride_a, &beta,
      (void *)(uintptr_t)c, out_type, (int)ldc, (long long)stride_c, (int)batch, compute,
      CB_GEMM_DEFAULT);
  return s == CB_STATUS_SUCCESS ? MMT_OK : cb_fail(err, "cublasGemmStridedBatchedEx", s);
}

mmt_status tn_cublas_gemm_grouped(tn_cublas *cb, struct CUstream_st *stream, const char *dtype,
                                  const char *layout, int64_t count, const int *m, int64_t n,
                                  int64_t k, float alpha, int64_t lda, int64_t ldb, float beta,
                                  int64_t ldc, uint64_t ptrs, ut_err *err) {
  if (!g_lib.fn.cublasGemmGroupedBatchedEx)
    return ut_fail(err, MMT_ERR_NOT_FOUND,
                   "cublasGemmGroupedBatchedEx: not in this cuBLAS "
                   "(12.5 and later have it)");
  unsigned type = 0;
  if (!dtype || (strcmp(dtype, "f16") && strcmp(dtype, "bf16")) || !data_type(dtype, &type))
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "no grouped cuBLAS GEMM for %s (f16, bf16)",
                   dtype ? dtype : "(null)");
  const int64_t dims[] = {count, n, k, lda, ldb, ldc};
  for (int i = 0; i < 6; i++)
    if (dims[i] < 1 || dims[i] > INT_MAX)
      return ut_fail(err, MMT_ERR_INVALID_ARG,
                     "count=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld: each 1 to 2^31 - 1",
                     (long long)count, (long long)n, (long long)k, (long long)lda, (long long)ldb,
                     (long long)ldc);
  if (!m || !ptrs) return ut_fail(err, MMT_ERR_INVALID_ARG, "m and ptrs are needed");
  for (int64_t g = 0; g < count; g++)
    if (m[g] < 1)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "m[%lld] = %d: each problem at least one row",
                     (long long)g, m[g]);
  mmt_status rc = set_stream_and_math(cb, stream, false, err);
  if (rc) return rc;
  /* cuBLAS takes an array of each argument, one per group: G groups of one problem. */
  const size_t c = (size_t)count;
  unsigned *ops = malloc(2 * c * sizeof *ops);
  int *ints = malloc(7 * c * sizeof *ints);
  float *scalars = malloc(2 * c * sizeof *scalars);
  if (!ops || !ints || !scalars) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory (%lld problems)", (long long)count);
    goto cleanup;
  }
  /* As tn_cublas_gemm: C^T = op(B)^T op(A)^T, so cuBLAS's A is B and its m is N. */
  const bool ta = layout && layout[0] == 't', tb = layout && layout[0] && layout[1] == 't';
  int *cm = ints, *cn = ints + c, *ck = ints + 2 * c, *l_a = ints + 3 * c, *l_b = ints + 4 * c,
      *l_c = ints + 5 * c, *sizes = ints + 6 * c;
  for (size_t g = 0; g < c; g++) {
    ops[g] = tb ? CB_OP_T : CB_OP_N, ops[c + g] = ta ? CB_OP_T : CB_OP_N;
    cm[g] = (int)n, cn[g] = m[g], ck[g] = (int)k;
    l_a[g] = (int)ldb, l_b[g] = (int)lda, l_c[g] = (int)ldc;
    sizes[g] = 1;
    scalars[g] = alpha, scalars[c + g] = beta;
  }
  const void *const *p = (const void *const *)(uintptr_t)ptrs;
  cb_status s = g_lib.fn.cublasGemmGroupedBatchedEx(
      cb->h, ops, ops + c, cm, cn, ck, scalars, p + c, type, l_a, p, type, l_b, scalars + c,
      (void *const *)(uintptr_t)(ptrs + 16 * c), type, l_c, (int)count, sizes, CB_COMPUTE_32F);
  if (s != CB_STATUS_SUCCESS) rc = cb_fail(err, "cublasGemmGroupedBatchedEx", s);
cleanup:
  free(ops);
  free(ints);
  free(scalars);
  return rc;
}
