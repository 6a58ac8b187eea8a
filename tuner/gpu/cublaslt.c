/* gpu/cublaslt.c -- see gpu/cublaslt.h.  Loads libcublasLt with dlopen once per process. */
#include "gpu/cublaslt.h"
#include "gpu/vendor_lib.h"

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "rt_driver.h"

/* The part of cublasLt.h (CUDA 13) this file uses, declared here: the build needs no cuBLAS
 * header (cuda.h only, for the driver's table).  Enums are passed as unsigned int, the type C
 * makes them compatible with.  The descriptors are pointers to structs never looked into. */
typedef unsigned lt_status;                /* cublasStatus_t */
typedef struct cublasLtContext *lt_handle; /* cublasLtHandle_t */
typedef struct lt_desc_s *lt_desc;         /* cublasLtMatmulDesc_t */
typedef struct lt_layout_s *lt_layout;     /* cublasLtMatrixLayout_t */
typedef struct lt_pref_s *lt_pref;         /* cublasLtMatmulPreference_t */
typedef struct {
  uint64_t data[8];
} lt_algo; /* cublasLtMatmulAlgo_t */
typedef struct {
  lt_algo algo;
  size_t workspace_size;
  lt_status state;
  float waves_count;
  int reserved[4];
} lt_heuristic; /* cublasLtMatmulHeuristicResult_t */

#define LT_STATUS_SUCCESS 0u
#define LT_STATUS_NOT_SUPPORTED 15u  /* CUBLAS_STATUS_NOT_SUPPORTED */
#define LT_OP_N 0                    /* cublasOperation_t CUBLAS_OP_N (int32_t attribute) */
#define LT_OP_T 1                    /* CUBLAS_OP_T */
#define LT_R_32F 0u                  /* cudaDataType CUDA_R_32F */
#define LT_R_16F 2u                  /* CUDA_R_16F */
#define LT_R_16BF 14u                /* CUDA_R_16BF */
#define LT_R_8F_E4M3 28u             /* CUDA_R_8F_E4M3 */
#define LT_R_8F_E5M2 29u             /* CUDA_R_8F_E5M2 */
#define LT_COMPUTE_32F 68u           /* cublasComputeType_t CUBLAS_COMPUTE_32F */
#define LT_COMPUTE_32F_PEDANTIC 69u  /* CUBLAS_COMPUTE_32F_PEDANTIC */
#define LT_COMPUTE_32F_FAST_TF32 77u /* CUBLAS_COMPUTE_32F_FAST_TF32 */
#define LT_DESC_TRANSA 3u            /* cublasLtMatmulDescAttributes_t, int32_t */
#define LT_DESC_TRANSB 4u            /* int32_t */
#define LT_DESC_EPILOGUE 7u          /* uint32_t */
#define LT_DESC_BIAS_POINTER 8u      /* const void * */
#define LT_DESC_A_SCALE_POINTER 17u  /* const void * (float) */
#define LT_DESC_B_SCALE_POINTER 18u
#define LT_DESC_D_SCALE_POINTER 20u /* const void * (float): an FP8 D's scale */
#define LT_DESC_AMAX_D_POINTER 21u  /* void * (float): an FP8 D's amax */
#define LT_DESC_FAST_ACCUM 25u      /* int8_t */
#define LT_DESC_A_SCALE_MODE 31u    /* int32_t, cublasLtMatmulMatrixScale_t */
#define LT_DESC_B_SCALE_MODE 32u
#define LT_SCALE_SCALAR_32F 0 /* cublasLtMatmulMatrixScale_t */
#define LT_SCALE_OUTER_VEC_32F 3
#define LT_SCALE_VEC128_32F 4
#define LT_SCALE_BLK128x128_32F 5
#define LT_LAYOUT_BATCH_COUNT 5u          /* cublasLtMatrixLayoutAttribute_t, int32_t */
#define LT_LAYOUT_STRIDED_BATCH_OFFSET 6u /* int64_t */
#define LT_PREF_MAX_WORKSPACE_BYTES 1u    /* cublasLtMatmulPreferenceAttributes_t, uint64_t */
#define LT_PREF_MIN_ALIGNMENT_A_BYTES 5u  /* uint32_t; B, C, D follow */
#define LT_PREF_MIN_ALIGNMENT_B_BYTES 6u
#define LT_PREF_MIN_ALIGNMENT_C_BYTES 7u
#define LT_PREF_MIN_ALIGNMENT_D_BYTES 8u
#define LT_EPILOGUE_DEFAULT 1u /* cublasLtEpilogue_t */
#define LT_EPILOGUE_RELU 2u
#define LT_EPILOGUE_BIAS 4u
#define LT_EPILOGUE_RELU_BIAS 6u
#define LT_EPILOGUE_GELU 32u
#define LT_EPILOGUE_GELU_BIAS 36u

/* X(symbol, return type, parameter list): the entry points, all required.  The descriptor
 * types are parameters, so that the check below can put the header's in their place. */
#define LT_FUNCS(X, DESC, LAYOUT, PREF, ALGO, HEURISTIC)                                           \
  X(cublasLtCreate, lt_status, (lt_handle *))                                                      \
  X(cublasLtDestroy, lt_status, (lt_handle))                                                       \
  X(cublasLtGetVersion, size_t, (void))                                                            \
  X(cublasLtMatmulDescCreate, lt_status, (DESC *, unsigned, unsigned))                             \
  X(cublasLtMatmulDescDestroy, lt_status, (DESC))                                                  \
  X(cublasLtMatmulDescSetAttribute, lt_status, (DESC, unsigned, const void *, size_t))             \
  X(cublasLtMatrixLayoutCreate, lt_status, (LAYOUT *, unsigned, uint64_t, uint64_t, int64_t))      \
  X(cublasLtMatrixLayoutDestroy, lt_status, (LAYOUT))                                              \
  X(cublasLtMatrixLayoutSetAttribute, lt_status, (LAYOUT, unsigned, const void *, size_t))         \
  X(cublasLtMatmulPreferenceCreate, lt_status, (PREF *))                                           \
  X(cublasLtMatmulPreferenceDestroy, lt_status, (PREF))                                            \
  X(cublasLtMatmulPreferenceSetAttribute, lt_status, (PREF, unsigned, const void *, size_t))       \
  X(cublasLtMatmulAlgoGetHeuristic, lt_status,                                                     \
    (lt_handle, DESC, LAYOUT, LAYOUT, LAYOUT, LAYOUT, PREF, int, HEURISTIC *, int *))              \
  X(cublasLtMatmul, lt_status,                                                                     \
    (lt_handle, DESC, const void *, const void *, LAYOUT, const void *, LAYOUT, const void *,      \
     const void *, LAYOUT, void *, LAYOUT, const ALGO *, void *, size_t, struct CUstream_st *))
/* Optional (the names of statuses in messages). */
#define LT_OPTIONAL_FUNCS(X)                                                                       \
  X(cublasLtGetStatusName, const char *, (lt_status))                                              \
  X(cublasLtGetStatusString, const char *, (lt_status))

/* Where the build can see the toolkit header (the mmtune build), each declaration above is
 * checked against it at compile time, with the header's descriptor types in place of this
 * file's (a pointer is a pointer; the two structs passed by address must match in layout),
 * and so is every constant: a mismatch fails the build. */
#if defined(__has_include)
#if __has_include(<cublasLt.h>)
/* It declares cublasLtLoggerForceDisable() without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#define LT_CHECK_(sym, ret, params)                                                                \
  _Static_assert(_Generic(&sym, ret(*) params : 1, default : 0), #sym " differs from cublasLt.h");
LT_FUNCS(LT_CHECK_, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t,
         cublasLtMatmulAlgo_t, cublasLtMatmulHeuristicResult_t)
LT_OPTIONAL_FUNCS(LT_CHECK_)
#undef LT_CHECK_
_Static_assert(sizeof(lt_algo) == sizeof(cublasLtMatmulAlgo_t) &&
                   sizeof(lt_heuristic) == sizeof(cublasLtMatmulHeuristicResult_t) &&
                   offsetof(lt_heuristic, algo) ==
                       offsetof(cublasLtMatmulHeuristicResult_t, algo) &&
                   offsetof(lt_heuristic, workspace_size) ==
                       offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
                   offsetof(lt_heuristic, state) ==
                       offsetof(cublasLtMatmulHeuristicResult_t, state) &&
                   offsetof(lt_heuristic, waves_count) ==
                       offsetof(cublasLtMatmulHeuristicResult_t, wavesCount) &&
                   sizeof(((lt_heuristic *)0)->reserved) ==
                       sizeof(((cublasLtMatmulHeuristicResult_t *)0)->reserved),
               "cublasLt.h structs");
_Static_assert(CUBLAS_STATUS_SUCCESS == LT_STATUS_SUCCESS &&
                   CUBLAS_STATUS_NOT_SUPPORTED == LT_STATUS_NOT_SUPPORTED &&
                   CUBLAS_OP_N == LT_OP_N && CUBLAS_OP_T == LT_OP_T && CUDA_R_32F == LT_R_32F &&
                   CUDA_R_16F == LT_R_16F && CUDA_R_16BF == LT_R_16BF &&
                   CUDA_R_8F_E4M3 == LT_R_8F_E4M3 && CUDA_R_8F_E5M2 == LT_R_8F_E5M2 &&
                   CUBLAS_COMPUTE_32F == LT_COMPUTE_32F &&
                   CUBLAS_COMPUTE_32F_PEDANTIC == LT_COMPUTE_32F_PEDANTIC &&
                   CUBLAS_COMPUTE_32F_FAST_TF32 == LT_COMPUTE_32F_FAST_TF32,
               "cublas_api.h constants");
_Static_assert(CUBLASLT_MATMUL_DESC_TRANSA == LT_DESC_TRANSA &&
                   CUBLASLT_MATMUL_DESC_TRANSB == LT_DESC_TRANSB &&
                   CUBLASLT_MATMUL_DESC_EPILOGUE == LT_DESC_EPILOGUE &&
                   CUBLASLT_MATMUL_DESC_BIAS_POINTER == LT_DESC_BIAS_POINTER &&
                   CUBLASLT_MATMUL_DESC_A_SCALE_POINTER == LT_DESC_A_SCALE_POINTER &&
                   CUBLASLT_MATMUL_DESC_B_SCALE_POINTER == LT_DESC_B_SCALE_POINTER &&
                   CUBLASLT_MATMUL_DESC_FAST_ACCUM == LT_DESC_FAST_ACCUM &&
                   CUBLASLT_MATMUL_DESC_A_SCALE_MODE == LT_DESC_A_SCALE_MODE &&
                   CUBLASLT_MATMUL_DESC_B_SCALE_MODE == LT_DESC_B_SCALE_MODE &&
                   CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F == LT_SCALE_SCALAR_32F &&
                   CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F == LT_SCALE_OUTER_VEC_32F &&
                   CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F == LT_SCALE_VEC128_32F &&
                   CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F == LT_SCALE_BLK128x128_32F &&
                   CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT == LT_LAYOUT_BATCH_COUNT &&
                   CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET == LT_LAYOUT_STRIDED_BATCH_OFFSET &&
                   CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES == LT_PREF_MAX_WORKSPACE_BYTES &&
                   CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES == LT_PREF_MIN_ALIGNMENT_A_BYTES &&
                   CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES == LT_PREF_MIN_ALIGNMENT_B_BYTES &&
                   CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES == LT_PREF_MIN_ALIGNMENT_C_BYTES &&
                   CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES == LT_PREF_MIN_ALIGNMENT_D_BYTES,
               "cublasLt.h attributes");
_Static_assert(CUBLASLT_EPILOGUE_DEFAULT == LT_EPILOGUE_DEFAULT &&
                   CUBLASLT_EPILOGUE_RELU == LT_EPILOGUE_RELU &&
                   CUBLASLT_EPILOGUE_BIAS == LT_EPILOGUE_BIAS &&
                   CUBLASLT_EPILOGUE_RELU_BIAS == LT_EPILOGUE_RELU_BIAS &&
                   CUBLASLT_EPILOGUE_GELU == LT_EPILOGUE_GELU &&
                   CUBLASLT_EPILOGUE_GELU_BIAS == LT_EPILOGUE_GELU_BIAS,
               "cublasLt.h epilogues");
#endif
#endif

typedef struct {
#define LT_FIELD_(sym, ret, params) ret(*sym) params;
  LT_FUNCS(LT_FIELD_, lt_desc, lt_layout, lt_pref, lt_algo, lt_heuristic)
  LT_OPTIONAL_FUNCS(LT_FIELD_)
#undef LT_FIELD_
} lt_table;
/* dlsym's void * is copied into each field. */
_Static_assert(sizeof(lt_table) % sizeof(void *) == 0, "a table of function pointers");

/* Written once inside pthread_once, read-only afterwards. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct {
  mmt_status status;
  ut_err err;
  void *handle;
  lt_table fn;
} g_lib;

struct tn_cublaslt {
  lt_handle h;
  const rt_cu *cu;
  CUdeviceptr workspace; /* TN_LT_WORKSPACE_BYTES */
  char version[32];
};

/* cuBLASLt's A, B, C, D: mmtune's B, A, C, D. */
enum { LT_A, LT_B, LT_C, LT_D };

struct tn_lt_plan {
  lt_desc desc;
  lt_layout layout[4]; /* [LT_C] is [LT_D] when beta == 0 (then destroyed once) */
  lt_algo algo;
  float alpha, beta;
  bool has_bias;
  const void *desc_bias; /* the bias address the descriptor holds */
  tn_lt_scale scale;     /* FP8: A's and B's scales, set by tn_cublaslt_set_scales */
  bool scales_set, fast_accum;
  const void *desc_scale[2]; /* the scale addresses the descriptor holds (cuBLASLt's A, B) */
  unsigned align;            /* bytes */
  int64_t batch, ldc, ldd, stride_c, stride_d;
  char config[128];
};

/* Names for a library that cannot give them. */
static const char *fallback_status_name(lt_status s) {
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

/* "cublasLtMatmul: CUBLAS_STATUS_INVALID_VALUE (an invalid value was used as an argument)",
 * as `rc` (MMT_ERR_CUDA, or MMT_ERR_UNSUPPORTED for what cuBLASLt does not support). */
static mmt_status lt_fail_as(ut_err *err, mmt_status rc, const char *what, lt_status s) {
  const char *name = g_lib.fn.cublasLtGetStatusName ? g_lib.fn.cublasLtGetStatusName(s) : NULL;
  const char *text = g_lib.fn.cublasLtGetStatusString ? g_lib.fn.cublasLtGetStatusString(s) : NULL;
  if (!name) name = fallback_status_name(s);
  if (name && text) return ut_fail(err, rc, "%s: %s (%s)", what, name, text);
  if (name) return ut_fail(err, rc, "%s: %s", what, name);
  return ut_fail(err, rc, "%s: cuBLAS status %u", what, s);
}

static mmt_status lt_fail(ut_err *err, const char *what, lt_status s) {
  return lt_fail_as(err, MMT_ERR_CUDA, what, s);
}

/* ---- loading ---- */

static mmt_status load_library(ut_err *err) {
  static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so"};
  const char *lib;
  mmt_status rc = tn_vendor_open("MMTUNE_LIBCUBLASLT", names, 2, &g_lib.handle, &lib, err);
  if (rc) return rc;
#define LT_SYMBOL_(sym, required, e)                                                               \
  tn_vendor_symbol(g_lib.handle, lib, "cuBLASLt", #sym, required, &g_lib.fn.sym, e)
#define LT_REQUIRED_(sym, ret, params)                                                             \
  if ((rc = LT_SYMBOL_(sym, true, err))) return rc;
#define LT_OPTIONAL_(sym, ret, params) LT_SYMBOL_(sym, false, NULL);
  /* On a failure below the library stays loaded: its initializers may have started threads. */
  LT_FUNCS(LT_REQUIRED_, lt_desc, lt_layout, lt_pref, lt_algo, lt_heuristic)
  LT_OPTIONAL_FUNCS(LT_OPTIONAL_)
#undef LT_REQUIRED_
#undef LT_OPTIONAL_
#undef LT_SYMBOL_
  return MMT_OK;
}

static void load_once(void) {
  ut_err_clear(&g_lib.err);
  g_lib.status = load_library(&g_lib.err);
  if (g_lib.status) memset(&g_lib.fn, 0, sizeof g_lib.fn);
}

/* ---- the handle ---- */

mmt_status tn_cublaslt_open(tn_cublaslt **out, ut_err *err) {
  mmt_status rc = MMT_OK;
  *out = NULL;
  int prc = pthread_once(&g_once, load_once);
  if (prc != 0) return ut_fail(err, MMT_ERR_NOT_FOUND, "pthread_once failed: %s", strerror(prc));
  if (g_lib.status) return ut_fail(err, g_lib.status, "%s", g_lib.err.msg);
  const rt_cu *cu = NULL;
  if ((rc = rt_driver(&cu, err))) return rc;
  tn_cublaslt *lt = calloc(1, sizeof *lt);
  if (!lt) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  lt->cu = cu;
  RT_CU_CHECK(cu, cuMemAlloc(&lt->workspace, TN_LT_WORKSPACE_BYTES));
  lt_status s = g_lib.fn.cublasLtCreate(&lt->h);
  if (s != LT_STATUS_SUCCESS) {
    lt->h = NULL; /* left unspecified on failure */
    rc = lt_fail(err, "cublasLtCreate", s);
    goto cleanup;
  }
  /* CUBLAS_VERSION's encoding: major * 10000 + minor * 100 + patch. */
  const size_t v = g_lib.fn.cublasLtGetVersion();
  snprintf(lt->version, sizeof lt->version, "%zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
cleanup:
  if (rc) {
    tn_cublaslt_close(lt);
    return rc;
  }
  *out = lt;
  return MMT_OK;
}

void tn_cublaslt_close(tn_cublaslt *lt) {
  if (!lt) return;
  if (lt->h) g_lib.fn.cublasLtDestroy(lt->h);
  if (lt->workspace) lt->cu->cuMemFree(lt->workspace);
  free(lt);
}

const char *tn_cublaslt_version(const tn_cublaslt *lt) { return lt->version; }

/* ---- the problem ---- */

/* What a checked problem maps to in cuBLASLt's terms. */
typedef struct {
  const char *layout, *in, *out;               /* the names, defaults filled in */
  unsigned in_type, b_type, out_type, compute; /* b_type: B's, in_type unless FP8 mixes */
  unsigned c_type; /* C's: D's, but bf16 for an FP8 D (cuBLASLt's FP8 D has a 16-bit C) */
  const char *compute_name;
  unsigned epilogue;
  const char *epilogue_name;
  int in_size, out_size;
  unsigned align;
} lt_mapping;

/* The cudaDataType and size of a dtype cuBLASLt takes here; another dtype mmtune knows is
 * unsupported, any other name invalid.  `field` names the side in messages. */
static mmt_status map_dtype(const char *field, const char *dtype, unsigned *type, int *size,
                            ut_err *err) {
  static const struct {
    const char *name;
    unsigned type;
    int size;
  } types[] = {{"f32", LT_R_32F, 4},   {"tf32", LT_R_32F, 4},     {"f16", LT_R_16F, 2},
               {"bf16", LT_R_16BF, 2}, {"e4m3", LT_R_8F_E4M3, 1}, {"e5m2", LT_R_8F_E5M2, 1}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (!strcmp(dtype, types[i].name)) {
      *type = types[i].type;
      *size = types[i].size;
      return MMT_OK;
    }
  if (gen_dtype_index(dtype) >= 0)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "%s %s: no cuBLASLt baseline (f32, tf32, f16, bf16, e4m3, e5m2)", field, dtype);
  return ut_fail(err, MMT_ERR_INVALID_ARG, "%s '%s' is not a dtype", field, dtype);
}

/* FP8 inputs: any of the outputs, fp32 compute, layout nt (cuBLASLt's FP8 GEMMs are "TN": its
 * A transposed, its B not, which is mmtune's B stored N x K and A stored M x K), and the
 * scale modes of gpu/cublaslt.h. */
static mmt_status map_fp8(const tn_lt_problem *p, lt_mapping *m, ut_err *err) {
  if (strcmp(p->layout[0] ? p->layout : "nn", "nt") != 0)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "%s inputs: cuBLASLt's FP8 GEMM takes layout nt only",
                   m->in);
  if (p->scale < TN_LT_SCALE_NONE || p->scale > TN_LT_SCALE_BLOCK)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "scale %d is not a tn_lt_scale", (int)p->scale);
  if (p->scale == TN_LT_SCALE_BLOCK && p->batch > 1)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "block scales: one problem (batch 1)");
  m->compute = LT_COMPUTE_32F;
  m->compute_name = "CUBLAS_COMPUTE_32F";
  return MMT_OK;
}

/* The types: which output each input allows, and the compute type. */
static mmt_status map_types(const tn_lt_problem *p, lt_mapping *m, ut_err *err) {
  mmt_status rc;
  m->in = p->in_dtype;
  if ((rc = map_dtype("in_dtype", m->in, &m->in_type, &m->in_size, err))) return rc;
  m->b_type = m->in_type;
  if (p->b_dtype[0] && strcmp(p->b_dtype, m->in)) {
    int b_size = 0;
    if ((rc = map_dtype("b_dtype", p->b_dtype, &m->b_type, &b_size, err))) return rc;
    if (b_size != 1 || m->in_size != 1)
      return ut_fail(err, MMT_ERR_INVALID_ARG,
                     "b_dtype %s: B differs from A (%s) only as the other FP8 type", p->b_dtype,
                     m->in);
  }
  const bool tf32 = !strcmp(m->in, "tf32");
  m->out = p->out_dtype[0] ? p->out_dtype : tf32 ? "f32" : m->in;
  if ((rc = map_dtype("out_dtype", m->out, &m->out_type, &m->out_size, err))) return rc;
  if (!strcmp(m->out, "tf32") || (m->out_size == 1 && m->in_size != 1))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "out_dtype %s: an output is f32, f16 or bf16 (FP8 after FP8 inputs)", m->out);
  m->c_type = m->out_size == 1 ? LT_R_16BF : m->out_type;
  if (m->out_size == 1 && (p->beta != 0.0f || p->bias_mode != MMT_BIAS_NONE))
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "an FP8 D (%s): no C and no bias in this baseline",
                   m->out);
  if (m->in_size == 1) return map_fp8(p, m, err);
  if (p->scale != TN_LT_SCALE_NONE || p->fast_accum)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "%s inputs: cuBLASLt scales A and B and accumulates fast in FP8 GEMMs only",
                   m->in);
  /* cuBLASLt's GEMMs with fp32 compute: D of the inputs' type, or f32 from 16-bit inputs. */
  if (m->out_type != m->in_type && m->out_type != LT_R_32F)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "cuBLASLt has no %s x %s -> %s GEMM (D is f32 or the inputs' type)", m->in,
                   m->in, m->out);
  if (m->in_type == LT_R_32F && m->out_type != LT_R_32F)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "cuBLASLt has no %s x %s -> %s GEMM", m->in, m->in,
                   m->out);
  m->compute = m->in_type != LT_R_32F ? LT_COMPUTE_32F
               : tf32                 ? LT_COMPUTE_32F_FAST_TF32
                                      : LT_COMPUTE_32F_PEDANTIC;
  m->compute_name = m->compute == LT_COMPUTE_32F             ? "CUBLAS_COMPUTE_32F"
                    : m->compute == LT_COMPUTE_32F_FAST_TF32 ? "CUBLAS_COMPUTE_32F_FAST_TF32"
                                                             : "CUBLAS_COMPUTE_32F_PEDANTIC";
  return MMT_OK;
}

/* The epilogue of (bias_mode, act). */
static mmt_status map_epilogue(const tn_lt_problem *p, lt_mapping *m, ut_err *err) {
  if (p->bias_mode != MMT_BIAS_NONE && p->bias_mode != MMT_BIAS_COL && p->bias_mode != MMT_BIAS_ROW)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "bias_mode %d is not an mmt_bias", (int)p->bias_mode);
  if (p->bias_mode == MMT_BIAS_ROW)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "bias_mode MMT_BIAS_ROW: cuBLASLt's bias is a vector of N, a value for each "
                   "column of D; none is over M");
  const bool bias = p->bias_mode == MMT_BIAS_COL;
  switch (p->act) {
  case MMT_ACT_NONE:
    m->epilogue = bias ? LT_EPILOGUE_BIAS : LT_EPILOGUE_DEFAULT;
    m->epilogue_name = bias ? "CUBLASLT_EPILOGUE_BIAS" : "CUBLASLT_EPILOGUE_DEFAULT";
    return MMT_OK;
  case MMT_ACT_RELU:
    m->epilogue = bias ? LT_EPILOGUE_RELU_BIAS : LT_EPILOGUE_RELU;
    m->epilogue_name = bias ? "CUBLASLT_EPILOGUE_RELU_BIAS" : "CUBLASLT_EPILOGUE_RELU";
    return MMT_OK;
  case MMT_ACT_GELU_TANH:
    m->epilogue = bias ? LT_EPILOGUE_GELU_BIAS : LT_EPILOGUE_GELU;
    m->epilogue_name = bias ? "CUBLASLT_EPILOGUE_GELU_BIAS" : "CUBLASLT_EPILOGUE_GELU";
    return MMT_OK;
  case MMT_ACT_GELU_ERF:
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "act MMT_ACT_GELU_ERF: cuBLASLt's GELU is the tanh form (MMT_ACT_GELU_TANH)");
  case MMT_ACT_SILU:
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "act MMT_ACT_SILU: no cuBLASLt epilogue");
  }
  return ut_fail(err, MMT_ERR_INVALID_ARG, "act %d is not an mmt_activation", (int)p->act);
}

/* Sizes, leading dimensions, batch and strides. */
static mmt_status check_shape(const tn_lt_problem *p, const char *layout, ut_err *err) {
  const int64_t sizes[] = {p->m, p->n, p->k};
  static const char *const size_names[] = {"m", "n", "k"};
  for (int i = 0; i < 3; i++) {
    if (sizes[i] < 0)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s = %lld is negative", size_names[i],
                     (long long)sizes[i]);
    if (sizes[i] == 0 || sizes[i] > INT_MAX)
      return ut_fail(err, MMT_ERR_UNSUPPORTED, "%s = %lld: cuBLASLt sizes here are 1 .. 2^31 - 1",
                     size_names[i], (long long)sizes[i]);
  }
  int64_t width[3];
  gen_min_ld(layout, p->m, p->n, p->k, width);
  const bool reads_c = p->beta != 0.0f;
  const struct {
    const char *name;
    int64_t ld, min;
    bool used;
  } lds[] = {{"lda", p->lda, width[0], true},
             {"ldb", p->ldb, width[1], true},
             {"ldc", p->ldc, p->n, reads_c},
             {"ldd", p->ldd, p->n, true}};
  for (int i = 0; i < 4; i++)
    if (lds[i].used && lds[i].ld < lds[i].min)
      return ut_fail(err, MMT_ERR_INVALID_ARG,
                     "%s = %lld is below %lld (layout %s, M=%lld N=%lld K=%lld)", lds[i].name,
                     (long long)lds[i].ld, (long long)lds[i].min, layout, (long long)p->m,
                     (long long)p->n, (long long)p->k);
  if (p->batch < 1)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "batch = %lld: at least 1", (long long)p->batch);
  if (p->batch > INT_MAX)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "batch = %lld: cuBLASLt takes int32",
                   (long long)p->batch);
  const struct {
    const char *name;
    int64_t stride;
  } strides[] = {{"stride_a", p->stride_a},
                 {"stride_b", p->stride_b},
                 {"stride_c", p->stride_c},
                 {"stride_d", p->stride_d}};
  for (int i = 0; i < 4; i++)
    if (strides[i].stride < 0)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s = %lld is negative", strides[i].name,
                     (long long)strides[i].stride);
  const int64_t d_extent = (p->m - 1) * p->ldd + p->n;
  if (p->batch > 1 && p->stride_d < d_extent)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "stride_d = %lld: D's problems overlap (at least (M - 1) * ldd + N = %lld)",
                   (long long)p->stride_d, (long long)d_extent);
  return MMT_OK;
}

static mmt_status map_problem(const tn_lt_problem *p, lt_mapping *m, ut_err *err) {
  mmt_status rc;
  memset(m, 0, sizeof *m);
  m->layout = p->layout[0] ? p->layout : "nn";
  if (gen_layout_index(m->layout) < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "layout '%s' is not one of nn, nt, tn, tt", p->layout);
  if ((rc = map_types(p, m, err)) || (rc = map_epilogue(p, m, err)) ||
      (rc = check_shape(p, m->layout, err)))
    return rc;
  const int align = p->align_bytes ? p->align_bytes : 256;
  const int least = m->in_size > m->out_size ? m->in_size : m->out_size;
  if (align < least || align > 256 || (align & (align - 1)))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "align_bytes = %d: a power of two from %d (the largest element) to 256",
                   p->align_bytes, least);
  m->align = (unsigned)align;
  return MMT_OK;
}

mmt_status tn_lt_problem_check(const tn_lt_problem *p, ut_err *err) {
  lt_mapping m;
  return map_problem(p, &m, err);
}

/* ---- plans ---- */

static mmt_status desc_set(lt_desc desc, unsigned attr, const char *name, const void *value,
                           size_t size, ut_err *err) {
  lt_status s = g_lib.fn.cublasLtMatmulDescSetAttribute(desc, attr, value, size);
  if (s == LT_STATUS_SUCCESS) return MMT_OK;
  char what[96];
  snprintf(what, sizeof what, "cublasLtMatmulDescSetAttribute(%s)", name);
  return lt_fail(err, what, s);
}

/* One matrix layout (column-major, as cuBLASLt reads it), with its batch when batch > 1;
 * `which` names it in messages. */
static mmt_status make_layout(lt_layout *out, unsigned type, int64_t rows, int64_t cols, int64_t ld,
                              int64_t batch, int64_t stride, const char *which, ut_err *err) {
  const lt_table *fn = &g_lib.fn;
  char what[96];
  lt_status s = fn->cublasLtMatrixLayoutCreate(out, type, (uint64_t)rows, (uint64_t)cols, ld);
  if (s != LT_STATUS_SUCCESS) {
    *out = NULL;
    snprintf(what, sizeof what, "cublasLtMatrixLayoutCreate(%s)", which);
    return lt_fail(err, what, s);
  }
  if (batch == 1) return MMT_OK;
  const int32_t count = (int32_t)batch;
  if ((s = fn->cublasLtMatrixLayoutSetAttribute(*out, LT_LAYOUT_BATCH_COUNT, &count,
                                                sizeof count)) != LT_STATUS_SUCCESS) {
    snprintf(what, sizeof what, "cublasLtMatrixLayoutSetAttribute(%s, BATCH_COUNT)", which);
    return lt_fail(err, what, s);
  }
  if ((s = fn->cublasLtMatrixLayoutSetAttribute(*out, LT_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                sizeof stride)) != LT_STATUS_SUCCESS) {
    snprintf(what, sizeof what, "cublasLtMatrixLayoutSetAttribute(%s, STRIDED_BATCH_OFFSET)",
             which);
    return lt_fail(err, what, s);
  }
  return MMT_OK;
}

/* The heuristic's preferences: the handle's workspace, every matrix at the problem's
 * alignment. */
static mmt_status make_preference(lt_pref *out, unsigned align, ut_err *err) {
  const lt_table *fn = &g_lib.fn;
  lt_status s = fn->cublasLtMatmulPreferenceCreate(out);
  if (s != LT_STATUS_SUCCESS) {
    *out = NULL;
    return lt_fail(err, "cublasLtMatmulPreferenceCreate", s);
  }
  const uint64_t workspace = TN_LT_WORKSPACE_BYTES;
  const uint32_t bytes = align;
  if ((s = fn->cublasLtMatmulPreferenceSetAttribute(*out, LT_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                    sizeof workspace)) != LT_STATUS_SUCCESS)
    return lt_fail(err, "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", s);
  static const unsigned attrs[] = {LT_PREF_MIN_ALIGNMENT_A_BYTES, LT_PREF_MIN_ALIGNMENT_B_BYTES,
                                   LT_PREF_MIN_ALIGNMENT_C_BYTES, LT_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; i++)
    if ((s = fn->cublasLtMatmulPreferenceSetAttribute(*out, attrs[i], &bytes, sizeof bytes)) !=
        LT_STATUS_SUCCESS)
      return lt_fail(err, "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_BYTES)", s);
  return MMT_OK;
}

/* FP8: fast accumulation and the scale modes, cuBLASLt's A being mmtune's B: mmtune A's 1 x 128
 * blocks are cuBLASLt B's VEC128, B's 128 x 128 blocks its A's BLK128x128; outer vectors and
 * per-tensor scalars the same on both sides. */
static mmt_status set_scale_modes(tn_lt_plan *plan, ut_err *err) {
  mmt_status rc;
  if (plan->fast_accum) {
    const int8_t on = 1;
    if ((rc = desc_set(plan->desc, LT_DESC_FAST_ACCUM, "FAST_ACCUM", &on, sizeof on, err)))
      return rc;
  }
  if (plan->scale == TN_LT_SCALE_NONE || plan->scale == TN_LT_SCALE_TENSOR) return MMT_OK;
  const int32_t lt_a =
      plan->scale == TN_LT_SCALE_OUTER ? LT_SCALE_OUTER_VEC_32F : LT_SCALE_BLK128x128_32F;
  const int32_t lt_b =
      plan->scale == TN_LT_SCALE_OUTER ? LT_SCALE_OUTER_VEC_32F : LT_SCALE_VEC128_32F;
  if ((rc = desc_set(plan->desc, LT_DESC_A_SCALE_MODE, "A_SCALE_MODE", &lt_a, sizeof lt_a, err)) ||
      (rc = desc_set(plan->desc, LT_DESC_B_SCALE_MODE, "B_SCALE_MODE", &lt_b, sizeof lt_b, err)))
    return rc;
  /* The heuristic refuses vector and block scale modes without scale pointers
   * (CUBLAS_STATUS_INVALID_VALUE): placeholders until tn_cublaslt_set_scales sets the real ones,
   * as the bias pointer's. */
  const void *placeholder = (const void *)(uintptr_t)256;
  if ((rc = desc_set(plan->desc, LT_DESC_A_SCALE_POINTER, "A_SCALE_POINTER", &placeholder,
                     sizeof placeholder, err)))
    return rc;
  return desc_set(plan->desc, LT_DESC_B_SCALE_POINTER, "B_SCALE_POINTER", &placeholder,
                  sizeof placeholder, err);
}

mmt_status tn_cublaslt_set_scales(tn_lt_plan *plan, uint64_t scale_a, uint64_t scale_b,
                                  ut_err *err) {
  if (plan->scale == TN_LT_SCALE_NONE)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "the plan has no scales");
  if (!scale_a || !scale_b || scale_a % 16 || scale_b % 16)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "scales 0x%llx, 0x%llx: both needed, 16-byte aligned",
                   (unsigned long long)scale_a, (unsigned long long)scale_b);
  /* swapped: cuBLASLt's A is mmtune's B */
  const void *a = (const void *)(uintptr_t)scale_b, *b = (const void *)(uintptr_t)scale_a;
  if (plan->scales_set && a == plan->desc_scale[0] && b == plan->desc_scale[1]) return MMT_OK;
  plan->desc_scale[0] = a, plan->desc_scale[1] = b;
  mmt_status rc;
  if ((rc = desc_set(plan->desc, LT_DESC_A_SCALE_POINTER, "A_SCALE_POINTER", &a, sizeof a, err)) ||
      (rc = desc_set(plan->desc, LT_DESC_B_SCALE_POINTER, "B_SCALE_POINTER", &b, sizeof b, err)))
    return rc;
  plan->scales_set = true;
  return MMT_OK;
}

/* An FP8 D's scale and amax pointers (before the heuristic: an algorithm must write amax). */
static mmt_status set_d_scale(tn_lt_plan *plan, const tn_lt_problem *p, ut_err *err) {
  const void *s = (const void *)(uintptr_t)p->scale_d;
  void *a = (void *)(uintptr_t)p->amax;
  mmt_status rc = MMT_OK;
  if (s) rc = desc_set(plan->desc, LT_DESC_D_SCALE_POINTER, "D_SCALE_POINTER", &s, sizeof s, err);
  if (!rc && a)
    rc = desc_set(plan->desc, LT_DESC_AMAX_D_POINTER, "AMAX_D_POINTER", &a, sizeof a, err);
  return rc;
}

/* The descriptor: compute and scale type, transposes, epilogue, and for a bias a placeholder
 * address at the problem's alignment (the heuristic reads the alignment off it; each run
 * writes the real one). */
static mmt_status make_desc(tn_lt_plan *plan, const lt_mapping *m, ut_err *err) {
  mmt_status rc;
  lt_status s = g_lib.fn.cublasLtMatmulDescCreate(&plan->desc, m->compute, LT_R_32F);
  if (s != LT_STATUS_SUCCESS) {
    plan->desc = NULL;
    return lt_fail(err, "cublasLtMatmulDescCreate", s);
  }
  /* cuBLASLt's A is mmtune's B, its B mmtune's A: each transposed when stored 't'. */
  const int32_t op_a = m->layout[1] == 't' ? LT_OP_T : LT_OP_N;
  const int32_t op_b = m->layout[0] == 't' ? LT_OP_T : LT_OP_N;
  const uint32_t epilogue = m->epilogue;
  if ((rc = desc_set(plan->desc, LT_DESC_TRANSA, "TRANSA", &op_a, sizeof op_a, err)) ||
      (rc = desc_set(plan->desc, LT_DESC_TRANSB, "TRANSB", &op_b, sizeof op_b, err)) ||
      (rc = desc_set(plan->desc, LT_DESC_EPILOGUE, "EPILOGUE", &epilogue, sizeof epilogue, err)))
    return rc;
  if ((rc = set_scale_modes(plan, err))) return rc;
  if (!plan->has_bias) return MMT_OK;
  plan->desc_bias = (const void *)(uintptr_t)m->align;
  return desc_set(plan->desc, LT_DESC_BIAS_POINTER, "BIAS_POINTER", &plan->desc_bias,
                  sizeof plan->desc_bias, err);
}

/* cuBLASLt's four layouts of the problem (the mapping in gpu/cublaslt.h). */
static mmt_status make_layouts(tn_lt_plan *plan, const tn_lt_problem *p, const lt_mapping *m,
                               ut_err *err) {
  mmt_status rc;
  const bool ta = m->layout[0] == 't', tb = m->layout[1] == 't';
  if ((rc = make_layout(&plan->layout[LT_A], m->b_type, tb ? p->k : p->n, tb ? p->n : p->k, p->ldb,
                        p->batch, p->stride_b, "A: mmtune's B", err)) ||
      (rc = make_layout(&plan->layout[LT_B], m->in_type, ta ? p->m : p->k, ta ? p->k : p->m, p->lda,
                        p->batch, p->stride_a, "B: mmtune's A", err)) ||
      (rc = make_layout(&plan->layout[LT_D], m->out_type, p->n, p->m, p->ldd, p->batch, p->stride_d,
                        "D", err)))
    return rc;
  if (p->beta == 0.0f && m->c_type == m->out_type) {
    plan->layout[LT_C] = plan->layout[LT_D]; /* C is not read: D stands in */
    return MMT_OK;
  }
  if (p->beta == 0.0f) /* an FP8 D: C of its own type, not read (D's address stands in) */
    return make_layout(&plan->layout[LT_C], m->c_type, p->n, p->m, p->ldd, p->batch, p->stride_d,
                       "C", err);
  return make_layout(&plan->layout[LT_C], m->out_type, p->n, p->m, p->ldc, p->batch, p->stride_c,
                     "C", err);
}

mmt_status tn_cublaslt_plan(tn_cublaslt *lt, const tn_lt_problem *p, tn_lt_plan **out,
                            ut_err *err) {
  mmt_status rc;
  lt_mapping m;
  *out = NULL;
  if ((rc = map_problem(p, &m, err))) return rc;
  tn_lt_plan *plan = calloc(1, sizeof *plan);
  if (!plan) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  *plan = (tn_lt_plan){.alpha = p->alpha,
                       .beta = p->beta,
                       .has_bias = p->bias_mode == MMT_BIAS_COL,
                       .scale = p->scale,
                       .fast_accum = p->fast_accum,
                       .align = m.align,
                       .batch = p->batch,
                       .ldc = p->ldc,
                       .ldd = p->ldd,
                       .stride_c = p->stride_c,
                       .stride_d = p->stride_d};
  lt_pref pref = NULL;
  lt_heuristic best;
  memset(&best, 0, sizeof best);
  int count = 0;
  if ((rc = make_desc(plan, &m, err)) || (rc = set_d_scale(plan, p, err)) ||
      (rc = make_layouts(plan, p, &m, err)) || (rc = make_preference(&pref, m.align, err)))
    goto cleanup;
  lt_status s = g_lib.fn.cublasLtMatmulAlgoGetHeuristic(lt->h, plan->desc, plan->layout[LT_A],
                                                        plan->layout[LT_B], plan->layout[LT_C],
                                                        plan->layout[LT_D], pref, 1, &best, &count);
  if (s == LT_STATUS_SUCCESS && count >= 1 && best.state == LT_STATUS_SUCCESS) {
    plan->algo = best.algo;
    snprintf(plan->config, sizeof plan->config, "cublasLtMatmul %s, %s, workspace %zu B",
             m.compute_name, m.epilogue_name, best.workspace_size);
    goto cleanup;
  }
  char what[384];
  snprintf(what, sizeof what,
           "cuBLASLt has no algorithm for %s x %s -> %s, layout %s, M=%lld N=%lld K=%lld, batch "
           "%lld, %s, %s, %u-byte aligned (cublasLtMatmulAlgoGetHeuristic)",
           m.in, m.in, m.out, m.layout, (long long)p->m, (long long)p->n, (long long)p->k,
           (long long)p->batch, m.compute_name, m.epilogue_name, m.align);
  if (s == LT_STATUS_SUCCESS)
    rc = ut_fail(err, MMT_ERR_UNSUPPORTED, "%s: %s", what,
                 count < 1 ? "none returned" : "its best is not usable");
  else
    rc =
        lt_fail_as(err, s == LT_STATUS_NOT_SUPPORTED ? MMT_ERR_UNSUPPORTED : MMT_ERR_CUDA, what, s);
cleanup:
  if (pref) g_lib.fn.cublasLtMatmulPreferenceDestroy(pref);
  if (rc) {
    tn_lt_plan_free(plan);
    return rc;
  }
  *out = plan;
  return MMT_OK;
}

mmt_status tn_cublaslt_run(tn_cublaslt *lt, tn_lt_plan *plan, struct CUstream_st *stream,
                           uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t bias,
                           ut_err *err) {
  const bool reads_c = plan->beta != 0.0f;
  const struct {
    const char *name;
    uint64_t addr;
    bool used;
  } addrs[] = {{"a", a, true},
               {"b", b, true},
               {"c", c, reads_c},
               {"d", d, true},
               {"bias", bias, plan->has_bias}};
  for (int i = 0; i < 5; i++) {
    if (addrs[i].used && addrs[i].addr == 0)
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s is 0", addrs[i].name);
    if (addrs[i].used && addrs[i].addr % plan->align != 0)
      return ut_fail(err, MMT_ERR_INVALID_ARG,
                     "%s = 0x%llx is not %u-byte aligned, as the plan's align_bytes promised",
                     addrs[i].name, (unsigned long long)addrs[i].addr, plan->align);
  }
  if (!plan->has_bias && bias != 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "bias given, but the plan has no bias epilogue");
  if (plan->scale != TN_LT_SCALE_NONE && !plan->scales_set)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "the plan's scales are not set (tn_cublaslt_set_scales)");
  if (reads_c && c == d &&
      (plan->ldc != plan->ldd || (plan->batch > 1 && plan->stride_c != plan->stride_d)))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "c == d (in place) needs ldc == ldd and stride_c == stride_d");
  mmt_status rc;
  const void *bias_ptr = (const void *)(uintptr_t)bias;
  if (plan->has_bias && bias_ptr != plan->desc_bias) {
    if ((rc = desc_set(plan->desc, LT_DESC_BIAS_POINTER, "BIAS_POINTER", &bias_ptr, sizeof bias_ptr,
                       err)))
      return rc;
    plan->desc_bias = bias_ptr;
  }
  /* Swapped: cuBLASLt's A is mmtune's B (see the mapping in gpu/cublaslt.h). */
  lt_status s = g_lib.fn.cublasLtMatmul(
      lt->h, plan->desc, &plan->alpha, (const void *)(uintptr_t)b, plan->layout[LT_A],
      (const void *)(uintptr_t)a, plan->layout[LT_B], &plan->beta,
      (const void *)(uintptr_t)(reads_c ? c : d), plan->layout[LT_C], (void *)(uintptr_t)d,
      plan->layout[LT_D], &plan->algo, (void *)(uintptr_t)lt->workspace, TN_LT_WORKSPACE_BYTES,
      stream);
  return s == LT_STATUS_SUCCESS ? MMT_OK : lt_fail(err, "cublasLtMatmul", s);
}

const char *tn_lt_plan_config(const tn_lt_plan *plan) { return plan->config; }

void tn_lt_plan_free(tn_lt_plan *plan) {
  if (!plan) return;
  const lt_table *fn = &g_lib.fn;
  for (int i = 0; i < 4; i++)
    if (plan->layout[i] && (i != LT_C || plan->layout[LT_C] != plan->layout[LT_D]))
      fn->cublasLtMatrixLayoutDestroy(plan->layout[i]);
  if (plan->desc) fn->cublasLtMatmulDescDestroy(plan->desc);
  free(plan);
}
