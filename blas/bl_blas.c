/* bl_blas.c -- the exported entry points of libmmtune_blas (see mmtune_blas.h and bl.h):
 * check the arguments as reference BLAS does, turn the call into one column-major bl_gemm,
 * route it, count it.  The environment is read, and the CPU BLAS loaded, once, at the first
 * call.
 *
 * Errors go where netlib's BLAS and CBLAS send them (the "errors" section below says how):
 * xerbla_, cblas_xerbla and the CBLAS globals RowMajorStrg and CBLAS_CallFromC are looked up
 * by name in the process's global scope first (the program's own handler wins, as it does
 * over libblas's), then in the CPU BLAS; where neither has a handler, the shim does what
 * netlib's own would. */
#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bl.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bl_config g_cfg = {.threshold = BL_DEFAULT_THRESHOLD,
                          .staging = BL_STAGE_PANELS,
                          .cpu_library = BL_DEFAULT_CPU_LIBRARY};
static atomic_bool g_inited;
static atomic_int g_cpu_blas; /* mmtune_blas_stats_t.cpu_blas */
static atomic_uint_fast64_t g_gpu_calls, g_cpu_calls, g_noop_calls, g_error_calls, g_fallbacks;

void bl_say(const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "mmtune_blas: %s\n", line); /* one write per line where stderr allows */
}

static void init_once(void) {
  char warn[2048];
  if (bl_config_parse(&g_cfg, getenv("MMTUNE_BLAS_THRESHOLD"), getenv("MMTUNE_BLAS_DEVICE"),
                      getenv("MMTUNE_BLAS_VERBOSE"), getenv("MMTUNE_BLAS_CPU_LIBRARY"),
                      getenv("MMTUNE_BLAS_STAGING"), warn, sizeof warn)) {
    for (char *line = strtok(warn, "\n"); line; line = strtok(NULL, "\n")) bl_say("%s", line);
  }
  atomic_store(&g_cpu_blas, bl_cpu_load(&g_cfg));
  atomic_store(&g_inited, true);
}

static const bl_config *config(void) {
  int rc = pthread_once(&g_once, init_once);
  if (rc) bl_say("pthread_once: %s; using the defaults", strerror(rc));
  return &g_cfg;
}

static void count(atomic_uint_fast64_t *counter) {
  atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* A validated call: nothing, the GPU, or the CPU. */
static void run(const bl_gemm *g) {
  const bl_config *cfg = config();
  if (bl_is_noop(g)) {
    count(&g_noop_calls);
  } else if (!bl_wants_gpu(g, cfg->threshold)) {
    bl_cpu_gemm(g);
    count(&g_cpu_calls);
  } else if (bl_gpu_gemm(cfg, g) == BL_GPU_DONE) {
    count(&g_gpu_calls);
  } else {
    bl_cpu_gemm(g);
    count(&g_cpu_calls);
    count(&g_fallbacks);
  }
}

/* ---- errors ----
 *
 * Netlib's CBLAS (LAPACK 3.11: CBLAS/src/xerbla.c, cblas_xerbla.c, cblas_sgemm.c; Debian's
 * libblas.so.3 holds it with the Fortran BLAS) has two handlers, either of which a program
 * may define:
 *   xerbla_(name, &info, len)  what the Fortran routines call.  CBLAS's own, when the global
 *       CBLAS_CallFromC is set (a C wrapper is running), passes the error on as
 *       cblas_xerbla(info + 1, "cblas_" and the first 6 characters of name in lower case,
 *       ""); otherwise it prints "Parameter %d to routine %s was incorrect" and returns.
 *   cblas_xerbla(info, rout, form, ...)  what the C wrappers call for the arguments they
 *       check themselves (the order, the transposes).  CBLAS's own prints that line (the
 *       numbers of a GEMM's M, N and LDA, LDB swapped back when the global RowMajorStrg is
 *       set), then form, and calls exit(-1).
 * So a program with only xerbla_ sees a CBLAS call's bad M, K or leading dimension there,
 * as the Fortran SGEMM reports it, and carries on; a bad order or transpose still ends it.
 * The shim calls the handler netlib's routine would, found as that routine's call finds it,
 * with the globals set as netlib sets them. */

typedef void (*xerbla_fn)(const char *name, const int *info, size_t name_len);
typedef void (*cblas_xerbla_fn)(int info, const char *rout, const char *form, ...);

/* Weak references, never used to call: they put the four names in this library's dynamic
 * symbol table, so that a program linked with it (instead of with a libblas that defines
 * them) gets its own definitions exported, as linking with libblas does, where lookup()
 * finds them. */
extern void xerbla_(const char *name, const int *info, size_t name_len) __attribute__((weak));
extern void cblas_xerbla(int info, const char *rout, const char *form, ...)
    __attribute__((weak));
extern int RowMajorStrg __attribute__((weak));
extern int CBLAS_CallFromC __attribute__((weak));
__attribute__((used)) static const struct {
  xerbla_fn xerbla;
  cblas_xerbla_fn cblas_xerbla;
  int *row_major_strg, *call_from_c;
} g_mentioned = {xerbla_, cblas_xerbla, &RowMajorStrg, &CBLAS_CallFromC};

/* A symbol from the global scope (the program, then the libraries it loaded), else from the
 * CPU BLAS: the order in which a netlib libblas's own references find them.  Looked up at
 * each error, as a lazily bound call is, so a library loaded later with RTLD_GLOBAL counts. */
static void *lookup(const char *name) {
  void *sym = dlsym(RTLD_DEFAULT, name);
  return sym ? sym : bl_cpu_symbol(name);
}

static void set_global(int *global, int value) {
  if (global) *global = value;
}

/* cblas_xerbla(info, rout, form, value); without one anywhere, CBLAS's own: its message,
 * then exit(-1) (status 255), as under netlib.  row_major_strg: RowMajorStrg's value. */
static void report_cblas(int info, const char *rout, int row_major_strg, const char *form,
                         int value) {
  void *sym = lookup("cblas_xerbla");
  if (sym) {
    cblas_xerbla_fn handler;
    memcpy(&handler, &sym, sizeof handler);
    handler(info, rout, form, value);
    return;
  }
  /* Every routine here is a GEMM, the only kind whose numbers bl_cblas_user_info maps. */
  bl_cblas_error e = {.info = info, .row_major_strg = row_major_strg};
  if (info)
    fprintf(stderr, "Parameter %d to routine %s was incorrect\n", bl_cblas_user_info(e), rout);
  fprintf(stderr, form, value);
  exit(-1);
}

/* XERBLA(name, info) as a Fortran routine calls it; from_c: within a C wrapper
 * (CBLAS_CallFromC set).  Without an xerbla_ anywhere, CBLAS's own. */
static void report_f77(const char *name, int info, bool from_c, int row_major_strg) {
  void *sym = lookup("xerbla_");
  if (sym) {
    xerbla_fn handler;
    memcpy(&handler, &sym, sizeof handler);
    handler(name, &info, strlen(name)); /* name as netlib passes it: "SGEMM " */
    return;
  }
  if (!from_c) {
    fprintf(stderr, "Parameter %d to routine %s was incorrect\n", info, name);
    return;
  }
  char rout[16] = "cblas_"; /* "SGEMM " makes "cblas_sgemm ", space and all, as netlib's */
  for (size_t i = 0; i < 6 && name[i]; i++) rout[6 + i] = (char)tolower((unsigned char)name[i]);
  report_cblas(info + 1, rout, row_major_strg, "", 0);
}

static void f77_error(const char *name, int info) {
  count(&g_error_calls);
  report_f77(name, info, false, 0);
}

/* rout: the CBLAS name ("cblas_sgemm"); f77_name: the Fortran routine's ("SGEMM "). */
static void cblas_error(const char *rout, const char *f77_name, bl_cblas_error e) {
  count(&g_error_calls);
  int *row_major_strg = lookup("RowMajorStrg"), *call_from_c = lookup("CBLAS_CallFromC");
  set_global(call_from_c, 1);
  set_global(row_major_strg, e.row_major_strg);
  if (e.f77_info)
    report_f77(f77_name, e.f77_info, true, e.row_major_strg);
  else
    report_cblas(e.info, rout, e.row_major_strg, e.form, e.value);
  set_global(call_from_c, 0); /* as netlib leaves both */
  set_global(row_major_strg, 0);
}

/* ---- entry points ---- */

static bool is_trans(char c) { return c != 'N' && c != 'n'; } /* after bl_check_f77 */

static void f77_gemm(const char *name, bl_elem elem, const char *transa, const char *transb,
                     const int *m, const int *n, const int *k, const float *alpha, const void *a,
                     const int *lda, const void *b, const int *ldb, const float *beta, float *c,
                     const int *ldc) {
  config();
  int info = bl_check_f77(*transa, *transb, *m, *n, *k, *lda, *ldb, *ldc);
  if (info) {
    f77_error(name, info);
    return;
  }
  bl_gemm g = {is_trans(*transa), is_trans(*transb), *m, *n, *k, *alpha, *beta, a, *lda, b,
               *ldb, c, *ldc, elem};
  run(&g);
}

static void cblas_gemm(const char *rout, const char *f77_name, bl_elem elem, int order,
                       int transa, int transb, int m, int n, int k, float alpha, const void *a,
                       int lda, const void *b, int ldb, float beta, float *c, int ldc) {
  config();
  bl_cblas_error e = bl_check_cblas(order, transa, transb, m, n, k, lda, ldb, ldc);
  if (e.info) {
    cblas_error(rout, f77_name, e);
    return;
  }
  bool ta = transa != BL_NO_TRANS, tb = transb != BL_NO_TRANS;
  /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
  bl_gemm g = order == BL_COL_MAJOR
                  ? (bl_gemm){ta, tb, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc, elem}
                  : (bl_gemm){tb, ta, n, m, k, alpha, beta, b, ldb, a, lda, c, ldc, elem};
  run(&g);
}

void sgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
            const float *beta, float *c, const int *ldc, size_t transa_len, size_t transb_len) {
  (void)transa_len, (void)transb_len; /* only the first character counts, as in LSAME */
  f77_gemm("SGEMM ", BL_F32, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  cblas_gemm("cblas_sgemm", "SGEMM ", BL_F32, order, transa, transb, m, n, k, alpha, a, lda, b,
             ldb, beta, c, ldc);
}

void sbgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const float *alpha, const uint16_t *a, const int *lda, const uint16_t *b,
             const int *ldb, const float *beta, float *c, const int *ldc, size_t transa_len,
             size_t transb_len) {
  (void)transa_len, (void)transb_len;
  f77_gemm("SBGEMM ", BL_BF16, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void cblas_sbgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                  const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta, float *c,
                  int ldc) {
  cblas_gemm("cblas_sbgemm", "SBGEMM ", BL_BF16, order, transa, transb, m, n, k, alpha, a, lda,
             b, ldb, beta, c, ldc);
}

void shgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const float *alpha, const uint16_t *a, const int *lda, const uint16_t *b,
             const int *ldb, const float *beta, float *c, const int *ldc, size_t transa_len,
             size_t transb_len) {
  (void)transa_len, (void)transb_len;
  f77_gemm("SHGEMM ", BL_F16, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void cblas_shgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                  const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta, float *c,
                  int ldc) {
  cblas_gemm("cblas_shgemm", "SHGEMM ", BL_F16, order, transa, transb, m, n, k, alpha, a, lda,
             b, ldb, beta, c, ldc);
}

/* ---- counters ---- */

void mmtune_blas_stats(mmtune_blas_stats_t *out) {
  char desc[8];
  memset(out, 0, sizeof *out);
  out->gpu_calls = atomic_load(&g_gpu_calls);
  out->cpu_calls = atomic_load(&g_cpu_calls);
  out->noop_calls = atomic_load(&g_noop_calls);
  out->error_calls = atomic_load(&g_error_calls);
  out->gpu_fallbacks = atomic_load(&g_fallbacks);
  out->threshold = BL_DEFAULT_THRESHOLD;
  if (atomic_load(&g_inited)) { /* g_cfg is written before g_inited, never after */
    out->threshold = g_cfg.threshold;
    out->device = g_cfg.device;
  }
  bl_gpu_state(&out->gpu_state, &out->gpu_status, desc, sizeof desc);
  out->cpu_blas = atomic_load(&g_cpu_blas);
}

/* MMTUNE_BLAS_VERBOSE: one line at exit with the counters, for people and for the tests. */
__attribute__((destructor)) static void summary(void) {
  bl_config cfg;
  if (atomic_load(&g_inited))
    cfg = g_cfg;
  else if (bl_config_parse(&cfg, NULL, NULL, getenv("MMTUNE_BLAS_VERBOSE"), NULL, NULL, NULL,
                           0))
    return; /* no call was made, and the variable is not a level */
  if (!cfg.verbose) return;
  mmtune_blas_stats_t s;
  char gpu[640];
  int state, status;
  mmtune_blas_stats(&s);
  bl_gpu_state(&state, &status, gpu, sizeof gpu);
  bl_say("summary: gpu=%llu cpu=%llu noop=%llu errors=%llu fallbacks=%llu threshold=%.17g "
         "cpu_blas=%s gpu_state=%d gpu: %s",
         (unsigned long long)s.gpu_calls, (unsigned long long)s.cpu_calls,
         (unsigned long long)s.noop_calls, (unsigned long long)s.error_calls,
         (unsigned long long)s.gpu_fallbacks, s.threshold,
         s.cpu_blas > 0 ? cfg.cpu_library : s.cpu_blas < 0 ? "none (built-in loop)" : "not loaded",
         state, gpu);
}
