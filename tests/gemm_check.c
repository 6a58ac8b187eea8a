/* gemm_check.c -- see gemm_check.h. */
#include "gemm_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "half16.h"

enum { OP_A, OP_B, OP_C, OPS };
static const char k_op_names[OPS] = {'A', 'B', 'C'};

/* How elements are stored: 4-byte floats, or 2-byte f16 or bf16 patterns. */
typedef struct {
  int bytes;
  bool f16;
} storage;

static storage storage_of(const char *dtype) {
  if (!strcmp(dtype, "f32") || !strcmp(dtype, "tf32")) return (storage){4, false};
  if (!strcmp(dtype, "f16")) return (storage){2, true};
  if (!strcmp(dtype, "bf16")) return (storage){2, false};
  fail_msg("gemm_check: no storage for dtype '%s'", dtype);
  return (storage){0, false};
}

static float get_elem(storage st, const void *buf, size_t i) {
  if (st.bytes == 4) return ((const float *)buf)[i];
  const uint16_t h = ((const uint16_t *)buf)[i];
  return st.f16 ? th_f16_to_f32(h) : th_bf16_to_f32(h);
}

static void set_elem(storage st, void *buf, size_t i, float v) {
  if (st.bytes == 4)
    ((float *)buf)[i] = v;
  else
    ((uint16_t *)buf)[i] = st.f16 ? th_f32_to_f16(v) : th_f32_to_bf16(v);
}

static void set_nan(storage st, void *buf, size_t i) {
  if (st.bytes == 4)
    ((uint32_t *)buf)[i] = 0x7fc00000u;
  else
    ((uint16_t *)buf)[i] = 0x7fffu;
}

static bool same_bits(storage st, const void *x, const void *y, size_t i) {
  const size_t b = (size_t)st.bytes;
  return memcmp((const char *)x + i * b, (const char *)y + i * b, b) == 0;
}

static float draw(gc_values values, uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  if (values == GC_VALUES_1000THS) return (float)((*s >> 40) % 2001) / 1000.0f - 1.0f;
  return (float)((int)((*s >> 40) % 129) - 64) / 64.0f;
}

/* A case laid out on the host: its operands as first given to the kernel, and the
 * reference. */
typedef struct {
  const gc_case *c;
  const char *layout;
  storage st;
  int64_t ld[OPS], offset[OPS];
  size_t count[OPS];    /* elements of each allocation */
  void *host[OPS];      /* A, B and the initial C */
  double *want, *absum; /* per element of C's allocation (the result's only) */
} problem;

static const char *label_of(const gc_case *c) { return c->label ? c->label : "(no label)"; }

/* Lays out and fills c's operands. */
static void problem_init(problem *p, const gc_case *c) {
  memset(p, 0, sizeof *p);
  p->c = c;
  p->layout = c->layout ? c->layout : "nn";
  p->st = storage_of(c->dtype ? c->dtype : "f32");
  if (gen_layout_index(p->layout) < 0) fail_msg("gemm_check: layout '%s'", p->layout);
  int64_t width[OPS], rows[OPS];
  gen_min_ld(p->layout, c->m, c->n, c->k, width);
  gen_stored_rows(p->layout, c->m, c->n, c->k, rows);
  const int64_t ld[OPS] = {c->lda, c->ldb, c->ldc};
  uint64_t seed = (uint64_t)(c->m * 131 + c->n * 17 + c->k) + c->seed;
  for (int i = 0; i < OPS; i++) {
    p->ld[i] = ld[i] ? ld[i] : width[i] > 0 ? width[i] : 1;
    p->offset[i] = c->offset[i];
    if (p->ld[i] < width[i] || p->offset[i] < 0)
      fail_msg("gemm_check: %s: ld%c %lld, offset %lld for a row of %lld", label_of(c),
               k_op_names[i], (long long)p->ld[i], (long long)p->offset[i], (long long)width[i]);
    p->count[i] = (size_t)(rows[i] * p->ld[i] + p->offset[i]) + 1;
    p->host[i] = malloc(p->count[i] * (size_t)p->st.bytes);
    assert_non_null(p->host[i]);
    for (size_t j = 0; j < p->count[i]; j++) {
      if (i == OP_C && c->beta == 0.0f)
        set_nan(p->st, p->host[i], j);
      else
        set_elem(p->st, p->host[i], j, draw(c->values, &seed));
    }
  }
  p->want = calloc(p->count[OP_C], sizeof *p->want);
  p->absum = calloc(p->count[OP_C], sizeof *p->absum);
  assert_true(p->want && p->absum);
}

static void problem_free(problem *p) {
  for (int i = 0; i < OPS; i++) free(p->host[i]);
  free(p->want);
  free(p->absum);
}

/* The index in C's allocation of the result's element (i, j). */
static size_t c_index(const problem *p, int64_t i, int64_t j) {
  return (size_t)(p->offset[OP_C] + i * p->ld[OP_C] + j);
}

/* want and absum over the result, in float64 from the stored values. */
static void reference(problem *p) {
  const gc_case *c = p->c;
  const bool ta = p->layout[0] == 't', tb = p->layout[1] == 't';
  const int64_t m = c->m, n = c->n, k = c->k, lda = p->ld[OP_A], ldb = p->ld[OP_B];
  /* op(A) as m rows of k and op(B) as n rows of k, widened once: the inner loop then reads
   * both contiguously */
  double *ar = malloc(sizeof *ar * (size_t)(m * k + 1));
  double *br = malloc(sizeof *br * (size_t)(n * k + 1));
  assert_true(ar && br);
  const size_t ao = (size_t)p->offset[OP_A], bo = (size_t)p->offset[OP_B];
  for (int64_t i = 0; i < m; i++)
    for (int64_t q = 0; q < k; q++)
      ar[i * k + q] = get_elem(p->st, p->host[OP_A], ao + (size_t)(ta ? q * lda + i : i * lda + q));
  for (int64_t j = 0; j < n; j++)
    for (int64_t q = 0; q < k; q++)
      br[j * k + q] = get_elem(p->st, p->host[OP_B], bo + (size_t)(tb ? j * ldb + q : q * ldb + j));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0, sabs = 0;
      const double *ai = ar + i * k, *bj = br + j * k;
      for (int64_t q = 0; q < k; q++) {
        const double prod = ai[q] * bj[q];
        acc += prod;
        sabs += fabs(prod);
      }
      const size_t at = c_index(p, i, j);
      const double c0 = c->beta == 0.0f ? 0.0 : get_elem(p->st, p->host[OP_C], at);
      p->want[at] = c->alpha * acc + (double)c->beta * c0;
      p->absum[at] = fabs((double)c->alpha) * sabs;
    }
  free(ar);
  free(br);
}

/* Whether element `at` of C's allocation is in the result; *row and *col receive its place
 * (row -1: before the base). */
static bool in_result(const problem *p, size_t at, int64_t *row, int64_t *col) {
  const int64_t from_base = (int64_t)at - p->offset[OP_C];
  *row = from_base < 0 ? -1 : from_base / p->ld[OP_C];
  *col = from_base < 0 ? from_base : from_base % p->ld[OP_C];
  return *row >= 0 && *row < p->c->m && *col < p->c->n;
}

/* Prints the failure line for element `at` of C (what: the check it failed) and fails. */
static void fail_at(const problem *p, int run, size_t at, double got, double want,
                    const char *what) {
  const gc_case *c = p->c;
  int64_t row, col;
  char place[96];
  const bool result = in_result(p, at, &row, &col);
  if (row < 0)
    snprintf(place, sizeof place, "before the base");
  else if (row >= c->m)
    snprintf(place, sizeof place, "past the last row");
  else
    snprintf(place, sizeof place, "row %lld, col %lld%s", (long long)row, (long long)col,
             result ? "" : ", padding");
  fprintf(stderr,
          "%s, %s %lldx%lldx%lld (lda %lld, ldb %lld, ldc %lld, offsets %lld %lld %lld), "
          "run %d: C[%zu] (%s) = %.9g, want %.9g (%s)\n",
          label_of(c), p->layout, (long long)c->m, (long long)c->n, (long long)c->k,
          (long long)p->ld[OP_A], (long long)p->ld[OP_B], (long long)p->ld[OP_C],
          (long long)p->offset[OP_A], (long long)p->offset[OP_B], (long long)p->offset[OP_C],
          run + 1, at, place, got, want, what);
  fail();
}

/* Checks C as run `run` left it (got) against the reference, the initial C and the first
 * run's C (first; NULL on the first run). */
static void check_run(const problem *p, int run, const void *got, const void *first) {
  const gc_case *c = p->c;
  const void *c0 = p->host[OP_C];
  for (size_t at = 0; at < p->count[OP_C]; at++) {
    const double g = get_elem(p->st, got, at);
    int64_t row, col;
    if (!in_result(p, at, &row, &col)) {
      if (!same_bits(p->st, got, c0, at))
        fail_at(p, run, at, g, get_elem(p->st, c0, at), "untouched");
    } else {
      const double w = p->want[at];
      const double bound = c->atol + c->rtol * fabs(w) + c->unit * p->absum[at];
      if (!(fabs(g - w) <= bound)) {
        char what[48];
        snprintf(what, sizeof what, "bound %.3g", bound);
        fail_at(p, run, at, g, w, what);
      }
    }
    if (first && !same_bits(p->st, got, first, at))
      fail_at(p, run, at, g, get_elem(p->st, first, at), "run 1's bits");
  }
}

/* A device copy of each operand. */
static void to_device(const rt_cu *cu, const problem *p, CUdeviceptr dev[OPS]) {
  for (int i = 0; i < OPS; i++) {
    const size_t bytes = p->count[i] * (size_t)p->st.bytes;
    assert_int_equal(cu->cuMemAlloc(&dev[i], bytes), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyHtoD(dev[i], p->host[i], bytes), CUDA_SUCCESS);
  }
}

/* A and B as the kernel left them: the bits they were given. */
static void check_inputs(const rt_cu *cu, const problem *p, const CUdeviceptr dev[OPS]) {
  for (int i = OP_A; i <= OP_B; i++) {
    const size_t bytes = p->count[i] * (size_t)p->st.bytes;
    void *back = malloc(bytes);
    assert_non_null(back);
    assert_int_equal(cu->cuMemcpyDtoH(back, dev[i], bytes), CUDA_SUCCESS);
    if (memcmp(back, p->host[i], bytes) != 0) {
      fprintf(stderr, "%s, %s %lldx%lldx%lld: the kernel wrote into %c\n", label_of(p->c),
              p->layout, (long long)p->c->m, (long long)p->c->n, (long long)p->c->k, k_op_names[i]);
      fail();
    }
    free(back);
  }
}

void gc_run(const rt_cu *cu, const rt_kernel *k, const gc_case *c) {
  problem p;
  problem_init(&p, c);
  reference(&p);
  CUdeviceptr dev[OPS];
  to_device(cu, &p, dev);
  const size_t bytes = (size_t)p.st.bytes;
  const rt_gemm_args args = {.m = c->m,
                             .n = c->n,
                             .k = c->k,
                             .alpha = c->alpha,
                             .beta = c->beta,
                             .a = dev[OP_A] + (CUdeviceptr)p.offset[OP_A] * bytes,
                             .b = dev[OP_B] + (CUdeviceptr)p.offset[OP_B] * bytes,
                             .c = dev[OP_C] + (CUdeviceptr)p.offset[OP_C] * bytes,
                             .lda = p.ld[OP_A],
                             .ldb = p.ld[OP_B],
                             .ldc = p.ld[OP_C]};
  const size_t c_bytes = p.count[OP_C] * bytes;
  void *got = malloc(c_bytes), *first = malloc(c_bytes);
  assert_true(got && first);
  const int runs = c->runs > 0 ? c->runs : 1;
  for (int run = 0; run < runs; run++) {
    ut_err e;
    if (run > 0) assert_int_equal(cu->cuMemcpyHtoD(dev[OP_C], p.host[OP_C], c_bytes), CUDA_SUCCESS);
    mmt_status rc = rt_kernel_launch(k, &args, NULL, &e);
    if (rc) fprintf(stderr, "%s: %s\n", label_of(c), e.msg);
    assert_int_equal(rc, MMT_OK);
    assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyDtoH(got, dev[OP_C], c_bytes), CUDA_SUCCESS);
    check_run(&p, run, got, run > 0 ? first : NULL);
    if (run == 0) memcpy(first, got, c_bytes);
  }
  check_inputs(cu, &p, dev);
  for (int i = 0; i < OPS; i++) assert_int_equal(cu->cuMemFree(dev[i]), CUDA_SUCCESS);
  free(got);
  free(first);
  problem_free(&p);
}

double gc_roundoff(const char *dtype) {
  const storage st = storage_of(dtype ? dtype : "f32");
  return st.bytes == 4 ? 0x1p-24 : st.f16 ? 0x1p-11 : 0x1p-8;
}
