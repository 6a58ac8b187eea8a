/*
 * test_blas.c -- libmmtune_blas: the error numbers of reference SGEMM and CBLAS (checked
 * against Debian's netlib libblas.so.3 3.11 over 200,000 random argument sets when written),
 * the environment, the routing, the GPU copy plan (its chunks through the pinned slots, its
 * column panels, the host copy threads), the 16-bit conversions, and results through the
 * exported entry points (padded leading dimensions, every transpose, both CBLAS orders,
 * alpha / beta / K special cases, 16-bit inputs, matrices large enough for the slots and
 * panels, several threads at once), with the counters proving which path each call took.
 *
 * The environment picks the mode (CMakeLists.txt runs all three): MMTUNE_BLAS_THRESHOLD=0
 * requires every computing call on the GPU (exit 77 without a GPU or driver);
 * MMTUNE_BLAS_CPU_LIBRARY set requires the built-in loop; otherwise the default threshold.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bl.h"
#include "mmtune.h"
#include "mmtune_blas.h"

/* ---- the error handlers the shim must find by name (as netlib's test programs define) ---- */

void xerbla_(const char *name, const int *info, size_t name_len);
void cblas_xerbla(int info, const char *rout, const char *form, ...);
extern int RowMajorStrg, CBLAS_CallFromC;
int RowMajorStrg, CBLAS_CallFromC;

static struct {
  int calls;
  const char *handler; /* "xerbla_" or "cblas_xerbla" */
  char name[32];
  size_t name_len;
  int info;
  int row_major_strg; /* RowMajorStrg as the handler saw it */
  int call_from_c;    /* CBLAS_CallFromC as the handler saw it */
  char detail[128];   /* form formatted */
} g_seen;

void xerbla_(const char *name, const int *info, size_t name_len) {
  g_seen.calls++;
  g_seen.handler = "xerbla_";
  g_seen.name_len = name_len;
  snprintf(g_seen.name, sizeof g_seen.name, "%.*s", (int)name_len, name);
  g_seen.info = *info;
  g_seen.row_major_strg = RowMajorStrg;
  g_seen.call_from_c = CBLAS_CallFromC;
}

void cblas_xerbla(int info, const char *rout, const char *form, ...) {
  va_list ap;
  g_seen.calls++;
  g_seen.handler = "cblas_xerbla";
  snprintf(g_seen.name, sizeof g_seen.name, "%s", rout);
  g_seen.info = info;
  g_seen.row_major_strg = RowMajorStrg;
  g_seen.call_from_c = CBLAS_CallFromC;
  va_start(ap, form);
  vsnprintf(g_seen.detail, sizeof g_seen.detail, form, ap);
  va_end(ap);
}

/* ---- modes and counters ---- */

typedef enum { MODE_DEFAULT, MODE_GPU, MODE_BUILTIN } test_mode;
static test_mode g_mode;

static mmtune_blas_stats_t stats(void) {
  mmtune_blas_stats_t s;
  mmtune_blas_stats(&s);
  return s;
}

/* ---- argument checks ---- */

static void test_f77_numbers(void **state) {
  (void)state;
  /* transa, transb, m, n, k, lda, ldb, ldc -> INFO */
  assert_int_equal(bl_check_f77('N', 'N', 2, 3, 4, 2, 4, 2), 0);
  assert_int_equal(bl_check_f77('t', 'c', 2, 3, 4, 4, 3, 2), 0);
  assert_int_equal(bl_check_f77('X', 'N', 2, 3, 4, 2, 4, 2), 1);
  assert_int_equal(bl_check_f77('N', 'x', 2, 3, 4, 2, 4, 2), 2);
  assert_int_equal(bl_check_f77('N', 'N', -1, 3, 4, 1, 4, 1), 3);
  assert_int_equal(bl_check_f77('N', 'N', 2, -1, 4, 2, 4, 2), 4);
  assert_int_equal(bl_check_f77('N', 'N', 2, 3, -1, 2, 1, 2), 5);
  assert_int_equal(bl_check_f77('N', 'N', 2, 3, 4, 1, 4, 2), 8);
  assert_int_equal(bl_check_f77('T', 'N', 2, 3, 4, 3, 4, 2), 8); /* rows of A^T storage: K */
  assert_int_equal(bl_check_f77('N', 'N', 2, 3, 4, 2, 3, 2), 10);
  assert_int_equal(bl_check_f77('N', 'T', 2, 3, 4, 2, 2, 2), 10); /* rows of B^T storage: N */
  assert_int_equal(bl_check_f77('N', 'N', 2, 3, 4, 2, 4, 1), 13);
  assert_int_equal(bl_check_f77('N', 'N', 0, 0, 0, 0, 1, 1), 8); /* ld >= max(1, rows) */
  assert_int_equal(bl_check_f77('N', 'N', 0, 0, 0, 1, 1, 1), 0);
  assert_int_equal(bl_check_f77('N', 'N', -1, -1, -1, 0, 0, 0), 3); /* the first check wins */
}

static void test_f77_errors_reach_xerbla(void **state) {
  (void)state;
  float a[16] = {0}, b[16] = {0}, c[16], alpha = 1, beta = 0;
  for (int i = 0; i < 16; i++) c[i] = (float)i;
  int m = 2, n = 3, k = 4, lda = 1, ldb = 4, ldc = 2, neg = -1;
  uint64_t errors = stats().error_calls;

  memset(&g_seen, 0, sizeof g_seen);
  sgemm_("N", "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
  assert_int_equal(g_seen.calls, 1);
  assert_string_equal(g_seen.name, "SGEMM ");
  assert_int_equal(g_seen.name_len, 6);
  assert_int_equal(g_seen.info, 8);
  assert_int_equal(g_seen.call_from_c, 0); /* not a CBLAS call: netlib's SGEMM leaves it */
  for (int i = 0; i < 16; i++) assert_true(c[i] == (float)i); /* C untouched */

  memset(&g_seen, 0, sizeof g_seen);
  sgemm_("N", "Q", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
  assert_int_equal(g_seen.info, 2);

  const uint16_t *h = (const uint16_t *)a;
  memset(&g_seen, 0, sizeof g_seen);
  sbgemm_("N", "N", &neg, &n, &k, &alpha, h, &lda, h, &ldb, &beta, c, &ldc, 1, 1);
  assert_string_equal(g_seen.name, "SBGEMM ");
  assert_int_equal(g_seen.info, 3);
  memset(&g_seen, 0, sizeof g_seen);
  shgemm_("T", "N", &m, &n, &k, &alpha, h, &ldb, h, &ldb, &beta, c, &neg, 1, 1);
  assert_string_equal(g_seen.name, "SHGEMM ");
  assert_int_equal(g_seen.info, 13);
  assert_int_equal(stats().error_calls, errors + 4);
}

/* A bad argument of a valid 2x3x4 cblas_sgemm call, as Debian's netlib libblas.so.3 3.11
 * reports it (recorded from it; xerbla_parity.sh compares the two): the order and the
 * transposes, which its C wrapper checks, go to cblas_xerbla; the rest, which the Fortran
 * SGEMM it calls checks, to xerbla_ as SGEMM's numbers (this program defines xerbla_; CBLAS's
 * own would pass them on to cblas_xerbla as info + 1).  Both with RowMajorStrg 1 once the
 * order is known to be row-major and CBLAS_CallFromC 1, both 0 afterwards. */
static void test_cblas_numbers(void **state) {
  (void)state;
  enum { ORDER, TA, TB, M, N, K, LDA, LDB, LDC, CASES };
  /* cblas_xerbla's number (the Fortran one + 1 from M on) and RowMajorStrg */
  static const int want[2][CASES][2] = {
      /* row-major */ {{1, 0}, {2, 1}, {2, 1}, {5, 1}, {4, 1}, {6, 1}, {11, 1}, {9, 1}, {14, 1}},
      /* col-major */ {{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {9, 0}, {11, 0}, {14, 0}},
  };
  /* What a person reads in netlib's message of a row-major call (RowMajorStrg undone); for a
   * column-major call it is the number passed. */
  static const int row_user[CASES] = {1, 2, 2, 4, 5, 6, 9, 11, 14};
  float a[64] = {0}, b[64] = {0}, c[64] = {0};
  for (int col = 0; col < 2; col++) {
    for (int which = 0; which < CASES; which++) {
      int order = col ? BL_COL_MAJOR : BL_ROW_MAJOR, ta = BL_NO_TRANS, tb = BL_NO_TRANS;
      int m = 2, n = 3, k = 4, lda = col ? m : k, ldb = col ? k : n, ldc = col ? m : n;
      switch (which) {
        case ORDER: order = 7; break;
        case TA: ta = 7; break;
        case TB: tb = 7; break;
        case M: m = -1; break;
        case N: n = -1; break;
        case K: k = -1; break;
        case LDA: lda = 1; break;
        case LDB: ldb = 1; break;
        case LDC: ldc = 1; break;
      }
      bool fortran = which >= M; /* found by the Fortran SGEMM */
      int info = want[col][which][0], f77_info = fortran ? info - 1 : 0;
      bl_cblas_error e = bl_check_cblas(order, ta, tb, m, n, k, lda, ldb, ldc);
      assert_int_equal(e.info, info);
      assert_int_equal(e.f77_info, f77_info);
      assert_int_equal(e.row_major_strg, want[col][which][1]);
      assert_int_equal(bl_cblas_user_info(e), col ? info : row_user[which]);

      memset(&g_seen, 0, sizeof g_seen);
      RowMajorStrg = CBLAS_CallFromC = 5;
      cblas_sgemm(order, ta, tb, m, n, k, 1, a, lda, b, ldb, 0, c, ldc);
      assert_int_equal(g_seen.calls, 1);
      assert_string_equal(g_seen.handler, fortran ? "xerbla_" : "cblas_xerbla");
      assert_string_equal(g_seen.name, fortran ? "SGEMM " : "cblas_sgemm");
      assert_int_equal(g_seen.info, fortran ? f77_info : info);
      assert_int_equal(g_seen.row_major_strg, want[col][which][1]);
      assert_int_equal(g_seen.call_from_c, 1);
      assert_int_equal(RowMajorStrg, 0); /* as netlib leaves them */
      assert_int_equal(CBLAS_CallFromC, 0);
    }
  }
  memset(&g_seen, 0, sizeof g_seen);
  cblas_sgemm(BL_COL_MAJOR, 114, BL_NO_TRANS, 2, 3, 4, 1, a, 2, b, 4, 0, c, 2);
  assert_string_equal(g_seen.detail, "Illegal TransA setting, 114\n");
  cblas_sgemm(55, BL_NO_TRANS, BL_NO_TRANS, 2, 3, 4, 1, a, 2, b, 4, 0, c, 2);
  assert_string_equal(g_seen.detail, "Illegal layout setting, 55\n");
  /* Row-major with M and N both negative: netlib's swapped call checks N first. */
  assert_int_equal(bl_check_cblas(BL_ROW_MAJOR, BL_NO_TRANS, BL_NO_TRANS, -1, -1, 4, 4, 3, 3).info,
                   4);
  /* The 16-bit GEMMs alike, with their own names. */
  const uint16_t *h = (const uint16_t *)a;
  cblas_sbgemm(BL_COL_MAJOR, BL_NO_TRANS, BL_TRANS, 2, 3, 4, 1, h, 2, h, 2, 0, c, 2);
  assert_string_equal(g_seen.handler, "xerbla_");
  assert_string_equal(g_seen.name, "SBGEMM ");
  assert_int_equal(g_seen.info, 10);
  cblas_shgemm(BL_ROW_MAJOR, BL_NO_TRANS, BL_NO_TRANS, 2, 3, -4, 1, h, 4, h, 3, 0, c, 3);
  assert_string_equal(g_seen.name, "SHGEMM ");
  assert_int_equal(g_seen.info, 5);
  assert_int_equal(g_seen.row_major_strg, 1);
  cblas_shgemm(BL_ROW_MAJOR, 7, BL_NO_TRANS, 2, 3, 4, 1, h, 4, h, 3, 0, c, 3);
  assert_string_equal(g_seen.handler, "cblas_xerbla");
  assert_string_equal(g_seen.name, "cblas_shgemm");
  assert_int_equal(g_seen.info, 2);
}

/* ---- environment and routing ---- */

static void test_config(void **state) {
  (void)state;
  bl_config c;
  char warn[512];
  assert_int_equal(bl_config_parse(&c, NULL, NULL, NULL, NULL, NULL, warn, sizeof warn), 0);
  assert_true(c.threshold == BL_DEFAULT_THRESHOLD);
  assert_int_equal(c.device, 0);
  assert_int_equal(c.verbose, 0);
  assert_int_equal(c.staging, BL_STAGE_PANELS);
  assert_string_equal(c.cpu_library, "libblas.so.3");
  assert_string_equal(warn, "");
  assert_int_equal(
      bl_config_parse(&c, "0", "3", "2", "/x/libopenblas.so.0", "0", warn, sizeof warn), 0);
  assert_true(c.threshold == 0.0);
  assert_int_equal(c.device, 3);
  assert_int_equal(c.verbose, 2);
  assert_int_equal(c.staging, BL_STAGE_DIRECT);
  assert_string_equal(c.cpu_library, "/x/libopenblas.so.0");
  assert_int_equal(bl_config_parse(&c, "1e9", "", "7", "", "1", warn, sizeof warn), 0);
  assert_true(c.threshold == 1e9);
  assert_int_equal(c.verbose, 2);
  assert_int_equal(c.staging, BL_STAGE_PINNED);
  assert_string_equal(c.cpu_library, "libblas.so.3");
  assert_int_equal(bl_config_parse(&c, "-5", "gpu0", "yes", NULL, "3", warn, sizeof warn), 4);
  assert_true(c.threshold == BL_DEFAULT_THRESHOLD);
  assert_int_equal(c.device, 0);
  assert_int_equal(c.verbose, 0);
  assert_int_equal(c.staging, BL_STAGE_PANELS);
  assert_non_null(strstr(warn, "MMTUNE_BLAS_THRESHOLD=\"-5\" ignored"));
  assert_non_null(strstr(warn, "MMTUNE_BLAS_DEVICE=\"gpu0\" ignored"));
  assert_non_null(strstr(warn, "MMTUNE_BLAS_VERBOSE=\"yes\" ignored"));
  assert_non_null(strstr(warn, "MMTUNE_BLAS_STAGING=\"3\" ignored: not 0, 1 or 2; using 2"));
  assert_int_equal(bl_config_parse(&c, "12abc", NULL, NULL, NULL, "", warn, sizeof warn), 1);
  assert_int_equal(bl_config_parse(&c, "inf", NULL, NULL, NULL, NULL, NULL, 0), 1);
  assert_int_equal(bl_config_parse(&c, NULL, NULL, NULL, NULL, "-1", NULL, 0), 1);
  assert_int_equal(c.staging, BL_STAGE_PANELS);
}

static bl_gemm call(int m, int n, int k, float alpha, float beta) {
  return (bl_gemm){false, false, m, n, k, alpha, beta, NULL, m > 1 ? m : 1, NULL, k > 1 ? k : 1,
                   NULL, m > 1 ? m : 1, BL_F32};
}

static void test_routing(void **state) {
  (void)state;
  bl_gemm g = call(256, 256, 128, 1, 0); /* 2*256*256*128 = 2^24 flops */
  assert_true(bl_flops(&g) == 16777216.0);
  assert_true(bl_wants_gpu(&g, 16777216.0));
  g.k = 127;
  assert_false(bl_wants_gpu(&g, 16777216.0));
  assert_true(bl_wants_gpu(&g, 0));
  /* Quick returns, as netlib's SGEMM makes them. */
  assert_true(bl_is_noop(&(bl_gemm){.m = 0, .n = 5, .k = 5, .alpha = 1, .beta = 0}));
  assert_true(bl_is_noop(&(bl_gemm){.m = 5, .n = 0, .k = 5, .alpha = 1, .beta = 0}));
  assert_true(bl_is_noop(&(bl_gemm){.m = 5, .n = 5, .k = 0, .alpha = 1, .beta = 1}));
  assert_true(bl_is_noop(&(bl_gemm){.m = 5, .n = 5, .k = 5, .alpha = 0, .beta = 1}));
  assert_false(bl_is_noop(&(bl_gemm){.m = 5, .n = 5, .k = 0, .alpha = 1, .beta = 0.5f}));
  assert_false(bl_wants_gpu(&(bl_gemm){.m = 0, .n = 5, .k = 5, .alpha = 1}, 0));
  /* C = beta C reads neither A nor B: 0 flops, so the GPU only at threshold 0. */
  g = call(4096, 4096, 4096, 0, 2);
  assert_false(bl_reads_ab(&g));
  assert_true(bl_flops(&g) == 0);
  assert_false(bl_wants_gpu(&g, 1));
  assert_true(bl_wants_gpu(&g, 0));
  /* No overflow at the largest sizes. */
  g = call(2147483647, 2147483647, 2147483647, 1, 0);
  assert_true(bl_flops(&g) > 1.9e28);
}

static void test_plan(void **state) {
  (void)state;
  bl_plan p;
  /* 5x3x7, A 5x7 at lda 9, B 7x3 at ldb 8, C at ldc 6; beta 0: C is not uploaded. */
  bl_gemm g = {false, false, 5, 3, 7, 1, 0, NULL, 9, NULL, 8, NULL, 6, BL_F32};
  assert_true(bl_plan_gpu(&g, &p));
  assert_true(p.a.used && p.b.used && p.c.used);
  assert_false(p.upload_c);
  assert_int_equal(p.a.rows, 5);
  assert_int_equal(p.a.cols, 7);
  assert_int_equal(p.a.host_ld, 9);
  assert_int_equal(p.a.dev_ld, 8);
  assert_int_equal(p.a.dev_offset, 0);
  assert_int_equal(p.b.rows, 7);
  assert_int_equal(p.b.cols, 3);
  assert_int_equal(p.b.dev_ld, 8);
  assert_int_equal(p.b.dev_offset, 256);
  assert_int_equal(p.c.rows, 5);
  assert_int_equal(p.c.cols, 3);
  assert_int_equal(p.c.host_ld, 6);
  assert_int_equal(p.c.dev_offset, 512);
  assert_int_equal(p.bytes, 768);
  /* Transposed storage: A^T is K x M, B^T is N x K; beta != 0 uploads C. */
  g = (bl_gemm){true, true, 5, 3, 700, 1, 0.5f, NULL, 700, NULL, 3, NULL, 5, BL_F32};
  assert_true(bl_plan_gpu(&g, &p));
  assert_int_equal(p.a.rows, 700);
  assert_int_equal(p.a.cols, 5);
  assert_int_equal(p.a.dev_ld, 700);
  assert_int_equal(p.b.rows, 3);
  assert_int_equal(p.b.cols, 700);
  assert_int_equal(p.b.dev_ld, 4);
  assert_int_equal(p.b.dev_offset, 700 * 5 * 4 / 256 * 256 + 256);
  assert_true(p.upload_c);
  /* alpha == 0: only C travels; A and B keep leading dimensions mmt_gemm accepts. */
  g.alpha = 0;
  assert_true(bl_plan_gpu(&g, &p));
  assert_false(p.a.used || p.b.used);
  assert_int_equal(p.a.dev_ld, 700);
  assert_int_equal(p.b.dev_ld, 3);
  assert_int_equal(p.c.dev_offset, 0);
  assert_int_equal(p.bytes, 256);
  /* A pitch the driver may refuse, and 16-bit inputs, are not planned. */
  g = (bl_gemm){false, false, 5, 3, 7, 1, 0, NULL, 600000000, NULL, 8, NULL, 6, BL_F32};
  assert_false(bl_plan_gpu(&g, &p));
  g = (bl_gemm){false, false, 5, 3, 7, 1, 0, NULL, 9, NULL, 8, NULL, 6, BL_BF16};
  assert_false(bl_plan_gpu(&g, &p));
}

/* ---- staging: chunks, panels, host copies ---- */

static bl_operand operand(size_t rows, size_t cols, size_t host_ld) {
  return (bl_operand){true, rows, cols, host_ld, (rows + 3) / 4 * 4, 0};
}

/* The chunks of s, in order, tile s->part exactly (each starts where the one before ended,
 * down a column and then across, and the last ends at the part's end), and each fits a
 * slot of slot_elems: its columns at s->pitch, each moving bl_stage_width elements. */
static void check_chunks(const bl_operand *op, const bl_stage *s, size_t slot_elems) {
  bl_rect p = s->part;
  size_t row = p.row0, col = p.col0, covered = 0;
  for (size_t i = 0; i < s->count; i++) {
    bl_rect c = bl_stage_chunk(s, i);
    size_t width = bl_stage_width(s, c);
    assert_true(c.rows > 0 && c.cols > 0);
    assert_int_equal(c.row0, row);
    assert_int_equal(c.col0, col);
    assert_true(c.row0 + c.rows <= p.row0 + p.rows && c.col0 + c.cols <= p.col0 + p.cols);
    assert_true(c.rows == p.rows || c.cols == 1); /* whole rows of the part, or a piece */
    assert_true(width >= c.rows && (c.cols == 1 || width <= s->pitch));
    assert_true((c.cols - 1) * s->pitch + width <= slot_elems);
    if (s->contiguous) { /* the DMA stays in the operand's columns */
      assert_int_equal(width, op->dev_ld);
      assert_int_equal(c.row0, 0);
    }
    covered += c.rows * c.cols;
    row += c.rows;
    if (row == p.row0 + p.rows) row = p.row0, col += c.cols;
  }
  assert_int_equal(covered, p.rows * p.cols);
  if (p.rows && p.cols) assert_int_equal(col, p.col0 + p.cols);
}

/* Moves `part` of a rows x cols operand (leading dimension host_ld) to a device buffer and
 * back through one slot of slot_elems, with the plan's chunks and bl_pool_copy as bl_gpu.c
 * does (memcpy standing in for the DMA), and checks that every element of the part arrived
 * where it belongs and nothing else was written: not the host's padding, not what is
 * outside the part, not past the slot. */
static void check_staging(bl_pool *pool, size_t rows, size_t cols, size_t host_ld, bl_rect part,
                          size_t slot_elems) {
  bl_operand op = operand(rows, cols, host_ld);
  size_t host_n = host_ld * cols, dev_n = op.dev_ld * cols;
  float *host = malloc(host_n * sizeof(float)), *back = malloc(host_n * sizeof(float));
  float *dev = malloc(dev_n * sizeof(float)), *slot = malloc((slot_elems + 1) * sizeof(float));
  assert_true(host && back && dev && slot);
  for (size_t i = 0; i < host_n; i++) host[i] = (float)i, back[i] = -2;
  for (size_t i = 0; i < dev_n; i++) dev[i] = -1;
  slot[slot_elems] = -3; /* a guard after the slot */
  bl_stage s;
  assert_true(bl_stage_plan(&op, part, slot_elems, &s));
  check_chunks(&op, &s, slot_elems);
  for (int down = 0; down < 2; down++) {
    for (size_t i = 0; i < s.count; i++) {
      bl_rect c = bl_stage_chunk(&s, i);
      size_t width = bl_stage_width(&s, c);
      float *h = (down ? back : host) + c.row0 + c.col0 * host_ld;
      float *d = dev + c.row0 + c.col0 * op.dev_ld;
      assert_true(c.row0 + (c.col0 + c.cols - 1) * op.dev_ld + width <= dev_n);
      if (!down) {
        bl_pool_copy(pool, slot, s.pitch * sizeof(float), h, host_ld * sizeof(float),
                     c.rows * sizeof(float), c.cols);
        for (size_t j = 0; j < c.cols; j++) /* the DMA */
          memcpy(d + j * op.dev_ld, slot + j * s.pitch, width * sizeof(float));
      } else {
        for (size_t j = 0; j < c.cols; j++)
          memcpy(slot + j * s.pitch, d + j * op.dev_ld, width * sizeof(float));
        bl_pool_copy(pool, h, host_ld * sizeof(float), slot, s.pitch * sizeof(float),
                     c.rows * sizeof(float), c.cols);
      }
      assert_true(slot[slot_elems] == -3);
    }
  }
  for (size_t j = 0; j < cols; j++)
    for (size_t i = 0; i < host_ld; i++) {
      bool in = i >= part.row0 && i < part.row0 + part.rows && j >= part.col0 &&
                j < part.col0 + part.cols;
      if (!(back[i + j * host_ld] == (in ? host[i + j * host_ld] : -2)))
        fail_msg("element (%zu, %zu) of %zu x %zu (ld %zu), part (%zu, %zu) %zu x %zu, slot %zu",
                 i, j, rows, cols, host_ld, part.row0, part.col0, part.rows, part.cols,
                 slot_elems);
      if (i < rows && !in) assert_true(dev[i + j * op.dev_ld] == -1);
    }
  free(host), free(back), free(dev), free(slot);
}

static void test_stage_plan(void **state) {
  (void)state;
  bl_stage s;
  /* 4096 x 4096 through 16 MiB slots: 4 chunks of 1024 whole columns, one range each. */
  bl_operand op = operand(4096, 4096, 4096);
  assert_true(bl_stage_plan(&op, (bl_rect){0, 0, 4096, 4096}, 4u << 20, &s));
  assert_int_equal(s.count, 4);
  assert_int_equal(s.chunk_cols, 1024);
  assert_int_equal(s.pitch, 4096);
  assert_true(s.contiguous);
  check_chunks(&op, &s, 4u << 20);
  /* Columns evened out: 4097 columns, at most 1023 a slot, make 5 chunks of 820 (and 817),
   * packed at dev_ld 4100 with the padding. */
  op = operand(4097, 4097, 5000);
  assert_true(bl_stage_plan(&op, (bl_rect){0, 0, 4097, 4097}, 4u << 20, &s));
  assert_int_equal(s.pitch, 4100);
  assert_int_equal(s.count, 5);
  assert_int_equal(s.chunk_cols, 820);
  assert_int_equal(bl_stage_chunk(&s, 4).cols, 4097 - 4 * 820);
  check_chunks(&op, &s, 4u << 20);
  /* A row range (B's rows for a panel with trans_b): packed tightly, not contiguous. */
  assert_true(bl_stage_plan(&op, (bl_rect){1024, 0, 1024, 4097}, 1u << 20, &s));
  assert_false(s.contiguous);
  assert_int_equal(s.pitch, 1024);
  assert_int_equal(s.chunk_cols, 820); /* 1024 a slot at most, evened out */
  assert_int_equal(s.count, 5);
  check_chunks(&op, &s, 1u << 20);
  /* One column, one row. */
  op = operand(1000, 1, 1000);
  assert_true(bl_stage_plan(&op, (bl_rect){0, 0, 1000, 1}, 4096, &s));
  assert_int_equal(s.count, 1);
  op = operand(1, 10000, 3);
  assert_true(bl_stage_plan(&op, (bl_rect){0, 0, 1, 10000}, 1000, &s));
  assert_int_equal(s.pitch, 4);
  assert_int_equal(s.count, 40);
  check_chunks(&op, &s, 1000);
  /* A column larger than a slot: pieces of rows, evened out (10^9 rows, 2^22 a slot: 239
   * pieces of 4184101 rows), each column in turn. */
  op = operand(1000000000, 3, 1000000000);
  assert_true(bl_stage_plan(&op, (bl_rect){0, 0, 1000000000, 3}, 1u << 22, &s));
  assert_int_equal(s.pieces, 239);
  assert_int_equal(s.chunk_cols, 1);
  assert_int_equal(s.chunk_rows, 4184101);
  assert_int_equal(s.count, 3 * 239);
  assert_false(s.contiguous);
  check_chunks(&op, &s, 1u << 22);
  /* Huge column counts, and a slot that holds one element. */
  op = operand(2, 2147483647, 2);
  assert_true(bl_stage_plan(&op, (bl_rect){0, 0, 2, 2147483647}, 1u << 22, &s));
  assert_int_equal(s.chunk_cols, 1u << 20);
  assert_int_equal(s.count, 2048);
  check_chunks(&op, &s, 1u << 22);
  op = operand(3, 2, 3);
  assert_true(bl_stage_plan(&op, (bl_rect){0, 0, 3, 2}, 1, &s));
  assert_int_equal(s.count, 6);
  check_chunks(&op, &s, 1);
  /* Nothing to move; no slot. */
  assert_true(bl_stage_plan(&op, (bl_rect){0, 0, 3, 0}, 16, &s));
  assert_int_equal(s.count, 0);
  assert_false(bl_stage_plan(&op, (bl_rect){0, 0, 3, 2}, 0, &s));
}

static void test_stage_copies(void **state) {
  (void)state;
  static const size_t slots[] = {1, 5, 7, 64, 1000, 100000};
  for (size_t t = 0; t < sizeof slots / sizeof slots[0]; t++) {
    check_staging(NULL, 1, 1, 1, (bl_rect){0, 0, 1, 1}, slots[t]);
    check_staging(NULL, 13, 9, 16, (bl_rect){0, 0, 13, 9}, slots[t]);     /* whole */
    check_staging(NULL, 13, 9, 13, (bl_rect){0, 3, 13, 4}, slots[t]);     /* columns */
    check_staging(NULL, 13, 9, 20, (bl_rect){5, 0, 6, 9}, slots[t]);      /* rows */
    check_staging(NULL, 300, 7, 301, (bl_rect){0, 0, 300, 7}, slots[t]);  /* tall */
    check_staging(NULL, 2, 500, 5, (bl_rect){0, 100, 2, 400}, slots[t]);  /* wide */
  }
  /* Chunks large enough to be split over threads. */
  bl_pool *pool = bl_pool_create(3);
  assert_non_null(pool);
  check_staging(pool, 700, 900, 703, (bl_rect){0, 0, 700, 900}, 300000);
  check_staging(pool, 701, 900, 701, (bl_rect){0, 256, 701, 512}, 1u << 20);
  check_staging(pool, 1000, 600, 1001, (bl_rect){256, 0, 512, 600}, 200000);
  check_staging(pool, 1u << 20, 2, 1u << 20, (bl_rect){0, 0, 1u << 20, 2}, 400000); /* pieces */
  bl_pool_destroy(pool);
}

static void test_panels(void **state) {
  (void)state;
  bl_plan p;
  bl_panels ps;
  bl_rect b, c;
  /* 4096^3: 4 panels of 1024 columns; each reads its columns of B, or its rows with
   * trans_b. */
  bl_gemm g = {false, false, 4096, 4096, 4096, 1, 0, NULL, 4096, NULL, 4096, NULL, 4096, BL_F32};
  assert_true(bl_plan_gpu(&g, &p));
  ps = bl_plan_panels(&p, BL_PANELS_MAX);
  assert_int_equal(ps.count, 4);
  assert_int_equal(ps.width, 1024);
  bl_panel_parts(&p, false, ps, 2, &b, &c);
  assert_true(c.row0 == 0 && c.col0 == 2048 && c.rows == 4096 && c.cols == 1024);
  assert_true(b.row0 == 0 && b.col0 == 2048 && b.rows == 4096 && b.cols == 1024);
  g.trans_b = true;
  assert_true(bl_plan_gpu(&g, &p));
  bl_panel_parts(&p, true, ps, 3, &b, &c);
  assert_true(b.row0 == 3072 && b.col0 == 0 && b.rows == 1024 && b.cols == 4096);
  assert_int_equal(bl_plan_panels(&p, 2).count, 2);
  assert_int_equal(bl_plan_panels(&p, 1).count, 1);
  assert_int_equal(bl_plan_panels(&p, 99).count, BL_PANELS_MAX);
  /* Every width of C is covered once; panels but the last are aligned and wide enough. */
  static const int widths[] = {2047, 2048, 2100, 3000, 5000, 100000};
  for (int t = 0; t < 6; t++) {
    for (int tb = 0; tb < 2; tb++) {
      g = (bl_gemm){false, tb, 2048, widths[t], 4096, 1, 0.5f, NULL, 2048, NULL,
                    tb ? widths[t] : 4096, NULL, 2048, BL_F32};
      assert_true(bl_plan_gpu(&g, &p));
      ps = bl_plan_panels(&p, BL_PANELS_MAX);
      assert_true(widths[t] < 2048 ? ps.count == 1 : ps.count >= 2 && ps.count <= 4);
      size_t next = 0;
      for (size_t j = 0; j < ps.count; j++) {
        bl_panel_parts(&p, tb, ps, j, &b, &c);
        assert_int_equal(c.col0, next);
        assert_int_equal(c.rows, 2048);
        if (j + 1 < ps.count) {
          assert_int_equal(c.cols % BL_PANEL_ALIGN, 0);
          assert_true(c.cols >= BL_PANEL_MIN);
        }
        assert_int_equal(tb ? b.row0 : b.col0, c.col0);
        assert_int_equal(tb ? b.rows : b.cols, c.cols);
        assert_int_equal(tb ? b.cols : b.rows, 4096); /* all of K */
        next += c.cols;
      }
      assert_int_equal(next, (size_t)widths[t]);
    }
  }
  g = (bl_gemm){false, false, 4096, 3000, 4096, 1, 0, NULL, 4096, NULL, 4096, NULL, 4096, BL_F32};
  assert_true(bl_plan_gpu(&g, &p));
  ps = bl_plan_panels(&p, BL_PANELS_MAX);
  assert_true(ps.count == 2 && ps.width == 1536);
  /* One panel: B not read, or too small to be worth hiding (K = 1: 64 KiB). */
  g.alpha = 0;
  assert_true(bl_plan_gpu(&g, &p));
  assert_int_equal(bl_plan_panels(&p, BL_PANELS_MAX).count, 1);
  g = (bl_gemm){false, false, 4096, 4096, 1, 1, 0, NULL, 4096, NULL, 1, NULL, 4096, BL_F32};
  assert_true(bl_plan_gpu(&g, &p));
  ps = bl_plan_panels(&p, BL_PANELS_MAX);
  assert_true(ps.count == 1 && ps.width == 4096);
}

static void test_split_and_pool(void **state) {
  (void)state;
  /* Parts tile the total, sizes differing by one byte at most. */
  static const size_t totals[] = {0, 1, 7, 8, 1000003};
  for (int t = 0; t < 5; t++)
    for (size_t parts = 1; parts <= 9; parts++) {
      size_t at = 0, lo = (size_t)-1, hi = 0;
      for (size_t i = 0; i < parts; i++) {
        size_t begin, end;
        bl_split(totals[t], parts, i, &begin, &end);
        assert_int_equal(begin, at);
        lo = end - begin < lo ? end - begin : lo;
        hi = end - begin > hi ? end - begin : hi;
        at = end;
      }
      assert_int_equal(at, totals[t]);
      assert_true(hi - lo <= 1);
    }
  /* A range that starts and ends inside lines copies exactly those bytes. */
  unsigned char src[5 * 8], dst[5 * 10];
  for (int i = 0; i < 40; i++) src[i] = (unsigned char)(i + 1);
  memset(dst, 0, sizeof dst);
  bl_copy_range(dst, 10, src, 8, 6, 4, 15); /* lines of 6 bytes: line 0 from 4, lines 1-2 */
  for (int l = 0; l < 5; l++)
    for (int x = 0; x < 10; x++) {
      int linear = l * 6 + x;
      bool in = x < 6 && linear >= 4 && linear < 15;
      assert_int_equal(dst[l * 10 + x], in ? src[l * 8 + x] : 0);
    }
  /* The pool: as many threads as asked, and a copy split over them equals memcpy's. */
  bl_pool *pool = bl_pool_create(4);
  assert_non_null(pool);
  assert_int_equal(bl_pool_threads(pool), 4);
  assert_int_equal(bl_pool_threads(NULL), 1);
  size_t width = 3001, lines = 1000, sp = 3011, dp = 3005;
  unsigned char *a = malloc(sp * lines), *z = calloc(dp, lines);
  assert_true(a && z);
  for (size_t i = 0; i < sp * lines; i++) a[i] = (unsigned char)(i * 7 + 3);
  for (int rep = 0; rep < 20; rep++) { /* the helpers sleep and wake between copies */
    memset(z, 0, dp * lines);
    bl_pool_copy(pool, z, dp, a, sp, width - (size_t)rep, lines);
    for (size_t l = 0; l < lines; l++) {
      assert_memory_equal(z + l * dp, a + l * sp, width - (size_t)rep);
      for (size_t x = width - (size_t)rep; x < dp; x++) assert_int_equal(z[l * dp + x], 0);
    }
  }
  bl_pool_destroy(pool);
  bl_pool_destroy(NULL);
  bl_pool_copy(NULL, z, dp, a, sp, 5, 0); /* nothing */
  free(a), free(z);
}

static void test_conversions(void **state) {
  (void)state;
  assert_true(bl_bf16_to_float(0x3f80) == 1.0f);
  assert_true(bl_bf16_to_float(0xc000) == -2.0f);
  assert_true(bl_bf16_to_float(0x3fc0) == 1.5f);
  assert_true(isinf(bl_bf16_to_float(0x7f80)));
  assert_true(isnan(bl_bf16_to_float(0x7fc0)));
  assert_true(bl_f16_to_float(0x3c00) == 1.0f);
  assert_true(bl_f16_to_float(0xc000) == -2.0f);
  assert_true(bl_f16_to_float(0x7bff) == 65504.0f);
  assert_true(bl_f16_to_float(0x0001) == 0x1p-24f);   /* smallest subnormal */
  assert_true(bl_f16_to_float(0x03ff) == 1023 * 0x1p-24f);
  assert_true(bl_f16_to_float(0x0400) == 0x1p-14f);   /* smallest normal */
  assert_true(bl_f16_to_float(0x8000) == 0.0f && signbit(bl_f16_to_float(0x8000)));
  assert_true(isinf(bl_f16_to_float(0xfc00)) && bl_f16_to_float(0xfc00) < 0);
  assert_true(isnan(bl_f16_to_float(0x7e00)));
}

/* ---- results through the entry points ---- */

typedef enum { API_F77, API_CBLAS_COL, API_CBLAS_ROW } api;

typedef struct {
  api api;
  bl_elem elem;
  bool ta, tb;
  int m, n, k;
  int pad_a, pad_b, pad_c; /* leading dimension minus its minimum */
  float alpha, beta;
  bool poison; /* NaN in C (beta == 0 must not read it) or in A and B (alpha == 0) */
} problem;

static _Thread_local uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void) {
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (uint32_t)(g_rng >> 16);
}
/* A random value exactly representable in every element type: small integers / 8. */
static float rnd_value(void) { return (float)((int)(rnd() % 33) - 16) / 8.0f; }

static uint16_t to_bits(float f, bl_elem e) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if (e == BL_BF16) return (uint16_t)(u >> 16); /* exact for these values */
  if (f == 0) return (uint16_t)((u >> 16) & 0x8000u);
  int ex;
  float frac = frexpf(fabsf(f), &ex); /* |f| = frac * 2^ex, frac in [0.5, 1) */
  uint16_t man = (uint16_t)((frac * 2 - 1) * 1024);
  return (uint16_t)(((u >> 16) & 0x8000u) | (uint16_t)((ex - 1 + 15) << 10) | man);
}

/* A stored matrix: `rows` x `cols` in the call's storage order, leading dimension ld. */
typedef struct {
  size_t rows, cols, ld; /* rows: along the leading dimension's direction */
  float *f;              /* the values */
  uint16_t *h;           /* their 16-bit form (elem != BL_F32) */
} matrix;

static matrix make(size_t rows, size_t cols, size_t ld, bl_elem e) {
  matrix x = {rows, cols, ld, calloc(ld * (cols ? cols : 1), sizeof(float)),
              calloc(ld * (cols ? cols : 1), sizeof(uint16_t))};
  assert_non_null(x.f);
  assert_non_null(x.h);
  for (size_t i = 0; i < ld * cols; i++) {
    x.f[i] = rnd_value();
    x.h[i] = to_bits(x.f[i], e);
  }
  return x;
}

static void release(matrix *x) {
  free(x->f);
  free(x->h);
}

/* Element (i, j) of op(X) for a matrix stored as x (row-major storage transposes the index). */
static double at(const matrix *x, bool row_major, bool trans, size_t i, size_t j) {
  if (trans) {
    size_t t = i;
    i = j, j = t;
  }
  return row_major ? x->f[i * x->ld + j] : x->f[i + j * x->ld];
}

static void call_shim(const problem *p, const matrix *a, const matrix *b, float *c, int ldc) {
  int m = p->m, n = p->n, k = p->k, lda = (int)a->ld, ldb = (int)b->ld;
  const char *ta = p->ta ? "T" : "N", *tb = p->tb ? "t" : "n";
  int cta = p->ta ? BL_TRANS : BL_NO_TRANS, ctb = p->tb ? BL_CONJ_TRANS : BL_NO_TRANS;
  int order = p->api == API_CBLAS_ROW ? BL_ROW_MAJOR : BL_COL_MAJOR;
  if (p->elem == BL_F32) {
    if (p->api == API_F77)
      sgemm_(ta, tb, &m, &n, &k, &p->alpha, a->f, &lda, b->f, &ldb, &p->beta, c, &ldc, 1, 1);
    else
      cblas_sgemm(order, cta, ctb, m, n, k, p->alpha, a->f, lda, b->f, ldb, p->beta, c, ldc);
  } else if (p->elem == BL_BF16) {
    if (p->api == API_F77)
      sbgemm_(ta, tb, &m, &n, &k, &p->alpha, a->h, &lda, b->h, &ldb, &p->beta, c, &ldc, 1, 1);
    else
      cblas_sbgemm(order, cta, ctb, m, n, k, p->alpha, a->h, lda, b->h, ldb, p->beta, c, ldc);
  } else {
    if (p->api == API_F77)
      shgemm_(ta, tb, &m, &n, &k, &p->alpha, a->h, &lda, b->h, &ldb, &p->beta, c, &ldc, 1, 1);
    else
      cblas_shgemm(order, cta, ctb, m, n, k, p->alpha, a->h, lda, b->h, ldb, p->beta, c, ldc);
  }
}

#define SENTINEL 12345.0f

/* C after the call against a double reference (inside M x N) and SENTINEL (the padding);
 * returns the number of wrong elements, printing the first few. */
static int check_values(const problem *p, const matrix *a, const matrix *b, const float *c0,
                        const matrix *c) {
  bool row = p->api == API_CBLAS_ROW;
  size_t m = (size_t)p->m, n = (size_t)p->n, k = (size_t)p->k, ldc = c->ld;
  int bad = 0;
  for (size_t i = 0; i < m && bad < 3; i++) {
    for (size_t j = 0; j < n && bad < 3; j++) {
      double s = 0, mag = 0;
      for (size_t l = 0; p->alpha != 0 && l < k; l++) {
        double x = at(a, row, p->ta, i, l) * at(b, row, p->tb, l, j);
        s += x;
        mag += fabs(x);
      }
      size_t idx = row ? i * ldc + j : i + j * ldc;
      double old = c0[idx], want = (double)p->alpha * s, got = c->f[idx];
      double scaled = p->beta != 0 ? (double)p->beta * old : 0; /* beta == 0: C not read */
      want += scaled;
      double tol = 4.0 * (double)(k + 2) * FLT_EPSILON * (fabs(p->alpha) * mag + fabs(scaled));
      if (!(fabs(got - want) <= tol + 1e-30) && bad++ < 3)
        printf("C(%zu,%zu) = %.9g, want %.9g\n", i, j, got, want);
    }
  }
  for (size_t j = 0; j < c->cols; j++)
    for (size_t i = c->rows; i < ldc; i++)
      if (c->f[i + j * ldc] != SENTINEL && bad++ < 3) printf("padding (%zu,%zu) written\n", i, j);
  return bad;
}

/* Whether exactly the right counter moved for one call of p. */
static bool check_counters(const problem *p, const mmtune_blas_stats_t *before,
                           const mmtune_blas_stats_t *after) {
  bl_gemm g = {false, false, p->m, p->n, p->k, p->alpha, p->beta, NULL, 1, NULL, 1, NULL, 1,
               p->elem};
  uint64_t dg = after->gpu_calls - before->gpu_calls, dc = after->cpu_calls - before->cpu_calls;
  uint64_t dn = after->noop_calls - before->noop_calls;
  uint64_t df = after->gpu_fallbacks - before->gpu_fallbacks;
  bool noop = bl_is_noop(&g), ok;
  if (noop) ok = dn == 1 && dg == 0 && dc == 0;
  else if (g_mode == MODE_GPU) ok = dg == 1 && dc == 0;
  else if (bl_wants_gpu(&g, after->threshold)) ok = (dg == 1 && dc == 0) || (dc == 1 && df == 1);
  else ok = dc == 1 && dg == 0;
  if (!ok)
    printf("counters moved gpu +%llu cpu +%llu noop +%llu fallbacks +%llu\n",
           (unsigned long long)dg, (unsigned long long)dc, (unsigned long long)dn,
           (unsigned long long)df);
  return ok;
}

/* Runs p through the shim and checks C and, with check_path, which counter moved (other
 * threads' calls move them too).  Returns 0, or 1 after printing what differed (so that
 * threads can report without cmocka). */
static int check_problem(const problem *p, bool check_path) {
  bool row = p->api == API_CBLAS_ROW;
  size_t m = (size_t)p->m, n = (size_t)p->n, k = (size_t)p->k;
  /* Storage shapes in the call's order: rows = along the leading dimension. */
  size_t a_outer = p->ta ? k : m, a_inner = p->ta ? m : k; /* op(A) = M x K */
  size_t b_outer = p->tb ? n : k, b_inner = p->tb ? k : n;
  size_t a_rows = row ? a_inner : a_outer, a_cols = row ? a_outer : a_inner;
  size_t b_rows = row ? b_inner : b_outer, b_cols = row ? b_outer : b_inner;
  size_t c_rows = row ? n : m, c_cols = row ? m : n;
  size_t lda = (a_rows ? a_rows : 1) + (size_t)p->pad_a;
  size_t ldb = (b_rows ? b_rows : 1) + (size_t)p->pad_b;
  size_t ldc = (c_rows ? c_rows : 1) + (size_t)p->pad_c;
  matrix a = make(a_rows, a_cols, lda, p->elem), b = make(b_rows, b_cols, ldb, p->elem);
  matrix c = make(c_rows, c_cols, ldc, BL_F32);
  float *c0 = malloc(ldc * (c_cols ? c_cols : 1) * sizeof(float));
  if (!c0) return 1;
  for (size_t j = 0; j < c_cols; j++)
    for (size_t i = 0; i < ldc; i++) {
      float *v = &c.f[i + j * ldc];
      if (i >= c_rows) *v = SENTINEL;
      else if (p->poison && p->beta == 0) *v = NAN;
    }
  if (p->poison && p->alpha == 0) {
    for (size_t i = 0; i < lda * a_cols; i++) a.f[i] = NAN, a.h[i] = 0x7fc0;
    for (size_t i = 0; i < ldb * b_cols; i++) b.f[i] = NAN, b.h[i] = 0x7fc0;
  }
  memcpy(c0, c.f, ldc * c_cols * sizeof(float));
  mmtune_blas_stats_t before = stats();
  call_shim(p, &a, &b, c.f, (int)ldc);
  mmtune_blas_stats_t after = stats();
  int bad = check_values(p, &a, &b, c0, &c);
  if (check_path && !check_counters(p, &before, &after)) bad++;
  if (bad)
    printf("  in: api %d elem %d trans %d%d %dx%dx%d pads %d %d %d alpha %g beta %g poison %d\n",
           (int)p->api, (int)p->elem, p->ta, p->tb, p->m, p->n, p->k, p->pad_a, p->pad_b,
           p->pad_c, (double)p->alpha, (double)p->beta, p->poison);
  release(&a);
  release(&b);
  release(&c);
  free(c0);
  return bad ? 1 : 0;
}

static void test_results(void **state) {
  (void)state;
  static const int sizes[][3] = {{0, 3, 2}, {3, 0, 2}, {1, 1, 1}, {2, 3, 0}, {5, 3, 7},
                                 {17, 9, 33}, {64, 64, 64}, {67, 45, 129}};
  static const float alphas[] = {1.0f, 0.7f, 0.0f}, betas[] = {0.0f, 1.0f, 1.3f};
  int failures = 0, runs = 0;
  for (int api_i = 0; api_i < 3; api_i++)
    for (int s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++)
      for (int t = 0; t < 4; t++)
        for (int ab = 0; ab < 9; ab++) {
          problem p = {(api)api_i, BL_F32, t & 1, (t >> 1) & 1, sizes[s][0], sizes[s][1],
                       sizes[s][2], (int)(rnd() % 3), (int)(rnd() % 5), (int)(rnd() % 4),
                       alphas[ab / 3], betas[ab % 3], (ab + s) % 2 == 0};
          failures += check_problem(&p, true);
          runs++;
        }
  /* Larger problems: several tiles and a ragged edge on the GPU; above 2^25 flops. */
  static const int big[][3] = {{300, 257, 250}, {129, 513, 300}};
  for (int s = 0; s < 2; s++)
    for (int t = 0; t < 4; t++) {
      problem p = {(api)(t % 3), BL_F32, t & 1, (t >> 1) & 1, big[s][0], big[s][1], big[s][2],
                   t, 3 - t, 1, 0.5f, t == 2 ? 0.0f : -1.0f, t == 2};
      failures += check_problem(&p, true);
      runs++;
    }
  /* On the GPU, parts of a matrix of 1 MiB or more go through the pinned slots: C of 34 MB
   * in more chunks than there are slots, both ways (beta != 0); columns of 8.8 MB, larger
   * than a slot, in pieces; B of 16 MiB or more in column panels of C (the last narrower),
   * by columns with C uploaded panel by panel (the first panel's 1.3 MB through the slots),
   * and by rows of B with trans_b (the row-major call with TransA: it computes C^T = B^T A^T,
   * so its A is the column-major B).  Not with the built-in loop: slow, and it tests nothing
   * new there. */
  static const problem staged[] = {
      {API_F77, BL_F32, false, false, 2048, 4200, 16, 1, 3, 5, 1.0f, 1.5f, false},
      {API_CBLAS_COL, BL_F32, false, false, 2200000, 1, 2, 3, 0, 1, 0.5f, -1.0f, false},
      {API_F77, BL_F32, true, false, 256, 2300, 2000, 1, 2, 0, 1.0f, 0.5f, false},
      {API_CBLAS_ROW, BL_F32, true, false, 2048, 16, 2048, 0, 1, 3, -1.0f, 0.5f, false},
  };
  for (int s = 0; g_mode != MODE_BUILTIN && s < (int)(sizeof staged / sizeof staged[0]); s++) {
    failures += check_problem(&staged[s], true);
    runs++;
  }
  printf("%d problems, %d failed\n", runs, failures);
  assert_int_equal(failures, 0);
}

static void test_16bit_results(void **state) {
  (void)state;
  static const int sizes[][3] = {{1, 1, 1}, {3, 2, 0}, {5, 3, 7}, {33, 17, 65}, {200, 150, 300}};
  int failures = 0, runs = 0;
  for (int e = BL_BF16; e <= BL_F16; e++)
    for (int api_i = 0; api_i < 3; api_i++)
      for (int s = 0; s < 5; s++)
        for (int t = 0; t < 4; t++) {
          problem p = {(api)api_i, (bl_elem)e, t & 1, (t >> 1) & 1, sizes[s][0], sizes[s][1],
                       sizes[s][2], t, (int)(rnd() % 3), 2, t == 3 ? 0.0f : 1.5f,
                       t == 1 ? 0.0f : 0.25f, t == 1 || t == 3};
          failures += check_problem(&p, true);
          runs++;
        }
  printf("%d problems, %d failed\n", runs, failures);
  assert_int_equal(failures, 0);
}

static void *thread_main(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  int failures = 0;
  for (int i = 0; i < 6; i++) {
    problem p = {(api)((seed + (unsigned)i) % 3), BL_F32, i & 1, (i >> 1) & 1,
                 20 + (int)(seed * 7 + (unsigned)i * 13) % 90, 30 + i * 11, 40 + (int)seed * 5,
                 i % 3, 1, 2, 1.0f, i % 2 ? 0.5f : 0.0f, false};
    failures += check_problem(&p, false);
  }
  return (void *)(uintptr_t)failures;
}

static void test_threads(void **state) {
  (void)state;
  pthread_t t[4];
  uintptr_t failures = 0;
  for (uintptr_t i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&t[i], NULL, thread_main, (void *)i), 0);
  for (int i = 0; i < 4; i++) {
    void *r;
    assert_int_equal(pthread_join(t[i], &r), 0);
    failures += (uintptr_t)r;
  }
  assert_int_equal(failures, 0);
}

static void test_mode_state(void **state) {
  (void)state;
  mmtune_blas_stats_t s = stats();
  if (g_mode == MODE_BUILTIN) {
    assert_int_equal(s.cpu_blas, -1); /* the variable named this library: refused */
  } else {
    assert_int_equal(s.cpu_blas, 1);
  }
  if (g_mode == MODE_GPU) {
    assert_int_equal(s.gpu_state, 1);
    assert_true(s.threshold == 0);
    assert_int_equal(s.cpu_calls, 0);
    assert_int_equal(s.gpu_fallbacks, 0);
    assert_true(s.gpu_calls > 0);
  } else {
    assert_true(s.threshold == BL_DEFAULT_THRESHOLD);
    assert_true(s.cpu_calls > 0);
  }
  printf("gpu %llu cpu %llu noop %llu errors %llu fallbacks %llu gpu_state %d\n",
         (unsigned long long)s.gpu_calls, (unsigned long long)s.cpu_calls,
         (unsigned long long)s.noop_calls, (unsigned long long)s.error_calls,
         (unsigned long long)s.gpu_fallbacks, s.gpu_state);
}

int main(void) {
  const char *t = getenv("MMTUNE_BLAS_THRESHOLD"), *lib = getenv("MMTUNE_BLAS_CPU_LIBRARY");
  g_mode = t && strcmp(t, "0") == 0            ? MODE_GPU
           : lib && strstr(lib, "libmmtune_blas") ? MODE_BUILTIN
                                                  : MODE_DEFAULT;
  if (g_mode == MODE_GPU) { /* one call opens the GPU: skip the whole program without one */
    float a = 1, b = 2, c = 0, one = 1, zero = 0;
    int n1 = 1;
    sgemm_("N", "N", &n1, &n1, &n1, &one, &a, &n1, &b, &n1, &zero, &c, &n1, 1, 1);
    mmtune_blas_stats_t s = stats();
    if (s.gpu_state != 1) {
      printf("GPU unavailable: %s\n", mmt_status_name((mmt_status)s.gpu_status));
      if (s.gpu_status == MMT_ERR_NO_DRIVER || s.gpu_status == MMT_ERR_NO_DEVICE) return 77;
      return 1;
    }
    if (c != 2.0f) return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f77_numbers),   cmocka_unit_test(test_f77_errors_reach_xerbla),
      cmocka_unit_test(test_cblas_numbers), cmocka_unit_test(test_config),
      cmocka_unit_test(test_routing),       cmocka_unit_test(test_plan),
      cmocka_unit_test(test_stage_plan),    cmocka_unit_test(test_stage_copies),
      cmocka_unit_test(test_panels),        cmocka_unit_test(test_split_and_pool),
      cmocka_unit_test(test_conversions),   cmocka_unit_test(test_results),
      cmocka_unit_test(test_16bit_results), cmocka_unit_test(test_threads),
      cmocka_unit_test(test_mode_state),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
