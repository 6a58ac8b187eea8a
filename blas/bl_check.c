/* bl_check.c -- see bl.h: the argument checks of reference SGEMM and CBLAS, with their
 * error numbers.  Written from the documented behaviour of netlib's SGEMM and cblas_sgemm
 * (LAPACK 3.11) and checked against Debian's libblas.so.3 by test_blas.c. */
#include "bl.h"

static bool is_trans_char(char c) {
  return c == 'N' || c == 'n' || c == 'T' || c == 't' || c == 'C' || c == 'c';
}

static int max1(int x) { return x > 1 ? x : 1; }

int bl_check_f77(char transa, char transb, int m, int n, int k, int lda, int ldb, int ldc) {
  bool nota = transa == 'N' || transa == 'n', notb = transb == 'N' || transb == 'n';
  int rows_a = nota ? m : k, rows_b = notb ? k : n;
  if (!is_trans_char(transa)) return 1;
  if (!is_trans_char(transb)) return 2;
  if (m < 0) return 3;
  if (n < 0) return 4;
  if (k < 0) return 5;
  if (lda < max1(rows_a)) return 8;
  if (ldb < max1(rows_b)) return 10;
  if (ldc < max1(m)) return 13;
  return 0;
}

/* The Fortran character of a CBLAS transpose value, or 0 when it is not one. */
static char trans_char(int t) {
  switch (t) {
    case BL_NO_TRANS: return 'N';
    case BL_TRANS: return 'T';
    case BL_CONJ_TRANS: return 'C';
    default: return 0;
  }
}

/* An error the C wrapper finds itself (it reports it to cblas_xerbla directly). */
static bl_cblas_error c_error(int info, int row_major_strg, const char *form, int value) {
  return (bl_cblas_error){.info = info, .row_major_strg = row_major_strg, .form = form,
                          .value = value};
}

bl_cblas_error bl_check_cblas(int order, int transa, int transb, int m, int n, int k, int lda,
                              int ldb, int ldc) {
  bl_cblas_error e = {.form = ""};
  char ta = trans_char(transa), tb = trans_char(transb);
  int info;
  if (order == BL_COL_MAJOR) {
    if (!ta) return c_error(2, 0, "Illegal TransA setting, %d\n", transa);
    if (!tb) return c_error(3, 0, "Illegal TransB setting, %d\n", transb);
    info = bl_check_f77(ta, tb, m, n, k, lda, ldb, ldc);
  } else if (order == BL_ROW_MAJOR) {
    /* netlib calls the Fortran SGEMM with B and A, N and M swapped. */
    if (!ta) return c_error(2, 1, "Illegal TransA setting, %d\n", transa);
    if (!tb) return c_error(2, 1, "Illegal TransB setting, %d\n", transb);
    info = bl_check_f77(tb, ta, n, m, k, ldb, lda, ldc);
    e.row_major_strg = 1;
  } else {
    return c_error(1, 0, "Illegal layout setting, %d\n", order);
  }
  if (info) {
    e.f77_info = info;
    e.info = info + 1; /* CBLAS's xerbla_ adds the order, the argument before the Fortran ones */
  }
  return e;
}

int bl_cblas_user_info(bl_cblas_error e) {
  if (!e.row_major_strg) return e.info;
  switch (e.info) {
    case 4: return 5;
    case 5: return 4;
    case 9: return 11;
    case 11: return 9;
    default: return e.info;
  }
}
