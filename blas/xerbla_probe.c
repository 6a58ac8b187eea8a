/*
 * xerbla_probe.c -- one GEMM call with one bad argument, for xerbla_parity.sh: which error
 * handler it reaches, with what, and whether the program carries on.
 *
 * Built in four variants, by which handlers the program defines (PROBE_XERBLA: xerbla_,
 * PROBE_CBLAS_XERBLA: cblas_xerbla and, as a program using it must, the CBLAS globals
 * RowMajorStrg and CBLAS_CallFromC), each linked once with netlib's libblas (the reference)
 * and once with libmmtune_blas alone.
 *
 * usage: xerbla_probe ROUTINE CASE
 *   ROUTINE  sgemm_, sbgemm_, shgemm_, cblas_sgemm, cblas_sbgemm or cblas_shgemm
 *   CASE     the bad argument of an otherwise valid 2x3x4 call: transa, transb, m, n, k, lda,
 *            ldb or ldc; for a CBLAS routine also order, and each prefixed row: or col:
 * Prints each handler call on stdout, then "continued" (with the globals, where defined) and
 * exits 0 -- unless a handler ends the program.  Exits 77 when ROUTINE is not in the process
 * (the 16-bit GEMMs are the shim's, not netlib's), 2 on a bad usage.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bl.h"

#ifdef PROBE_CBLAS_XERBLA
/* The program's own, as netlib's CBLAS test programs define them; netlib's cblas_sgemm and
 * the shim must write these, not libblas's. */
int RowMajorStrg, CBLAS_CallFromC;

static void print_globals(void) {
  printf(" RowMajorStrg=%d CBLAS_CallFromC=%d", RowMajorStrg, CBLAS_CallFromC);
}

void cblas_xerbla(int info, const char *rout, const char *form, ...);
void cblas_xerbla(int info, const char *rout, const char *form, ...) {
  va_list ap;
  printf("cblas_xerbla(%d, '%s', '", info, rout);
  va_start(ap, form);
  vprintf(form, ap);
  va_end(ap);
  printf("')");
  print_globals();
  printf("\n");
}
#else
static void print_globals(void) {}
#endif

#ifdef PROBE_XERBLA
void xerbla_(const char *name, const int *info, size_t name_len);
void xerbla_(const char *name, const int *info, size_t name_len) {
  printf("xerbla_('%.*s', %d)", (int)name_len, name, *info);
  print_globals();
  printf("\n");
}
#endif

/* The valid call: M 2, N 3, K 4, no transposes, packed; the case's argument made bad. */
typedef struct {
  bool cblas;
  int order, transa, transb, m, n, k, lda, ldb, ldc;
} probe_call;

/* False when c is not a case of a routine of that kind (CBLAS or not). */
static bool make_call(const char *c, bool cblas, probe_call *call) {
  bool row = strncmp(c, "row:", 4) == 0, col = strncmp(c, "col:", 4) == 0;
  if (row || col) c += 4;
  *call = (probe_call){.cblas = cblas,
                       .order = row ? BL_ROW_MAJOR : BL_COL_MAJOR,
                       .transa = BL_NO_TRANS,
                       .transb = BL_NO_TRANS,
                       .m = 2,
                       .n = 3,
                       .k = 4,
                       .lda = row ? 4 : 2,
                       .ldb = row ? 3 : 4,
                       .ldc = row ? 3 : 2};
  if (strcmp(c, "order") == 0 && cblas) call->order = 7;
  else if (strcmp(c, "transa") == 0) call->transa = 7;
  else if (strcmp(c, "transb") == 0) call->transb = 7;
  else if (strcmp(c, "m") == 0) call->m = -1;
  else if (strcmp(c, "n") == 0) call->n = -1;
  else if (strcmp(c, "k") == 0) call->k = -1;
  else if (strcmp(c, "lda") == 0) call->lda = 1;
  else if (strcmp(c, "ldb") == 0) call->ldb = 1;
  else if (strcmp(c, "ldc") == 0) call->ldc = 1;
  else return false;
  return cblas == (row || col);
}

static char trans_char(int t) { return t == BL_NO_TRANS ? 'N' : 'X'; }

/* The 16-bit GEMMs, looked up: a netlib program has none, and must still link. */
typedef void (*f77_gemm16_fn)(const char *, const char *, const int *, const int *,
                              const int *, const float *, const uint16_t *, const int *,
                              const uint16_t *, const int *, const float *, float *,
                              const int *, size_t, size_t);
typedef void (*cblas_gemm16_fn)(int, int, int, int, int, int, float, const uint16_t *, int,
                                const uint16_t *, int, float, float *, int);

/* Makes the call; false when the routine is not in this process. */
static bool call_routine(const char *name, probe_call p) {
  float a[64] = {0}, b[64] = {0}, c[64] = {0}, alpha = 1, beta = 0;
  uint16_t a16[64] = {0}, b16[64] = {0};
  char ta = trans_char(p.transa), tb = trans_char(p.transb);
  /* sgemm_ and cblas_sgemm by name, bound at link time as a netlib program's are. */
  if (strcmp(name, "sgemm_") == 0) {
    sgemm_(&ta, &tb, &p.m, &p.n, &p.k, &alpha, a, &p.lda, b, &p.ldb, &beta, c, &p.ldc, 1, 1);
    return true;
  }
  if (strcmp(name, "cblas_sgemm") == 0) {
    cblas_sgemm(p.order, p.transa, p.transb, p.m, p.n, p.k, alpha, a, p.lda, b, p.ldb, beta, c,
                p.ldc);
    return true;
  }
  void *sym = dlsym(RTLD_DEFAULT, name);
  if (!sym) return false;
  if (p.cblas) {
    cblas_gemm16_fn f;
    memcpy(&f, &sym, sizeof f);
    f(p.order, p.transa, p.transb, p.m, p.n, p.k, alpha, a16, p.lda, b16, p.ldb, beta, c,
      p.ldc);
  } else {
    f77_gemm16_fn f;
    memcpy(&f, &sym, sizeof f);
    f(&ta, &tb, &p.m, &p.n, &p.k, &alpha, a16, &p.lda, b16, &p.ldb, &beta, c, &p.ldc, 1, 1);
  }
  return true;
}

int main(int argc, char **argv) {
  static const char *const routines[] = {"sgemm_",      "sbgemm_",      "shgemm_",
                                         "cblas_sgemm", "cblas_sbgemm", "cblas_shgemm"};
  bool known = false;
  for (size_t i = 0; argc == 3 && i < sizeof routines / sizeof routines[0]; i++)
    known = known || strcmp(argv[1], routines[i]) == 0;
  probe_call call;
  if (!known || !make_call(argv[2], strncmp(argv[1], "cblas_", 6) == 0, &call)) {
    fprintf(stderr, "usage: xerbla_probe ROUTINE CASE (see xerbla_probe.c)\n");
    return 2;
  }
#ifdef PROBE_CBLAS_XERBLA
  RowMajorStrg = CBLAS_CallFromC = call.cblas ? 5 : 0; /* netlib's CBLAS sets both, then 0 */
#endif
  if (!call_routine(argv[1], call)) {
    printf("%s: not in this process\n", argv[1]);
    return 77;
  }
  printf("continued");
  print_globals();
  printf("\n");
  return 0;
}
