/*
 * gemm_check.h -- the GPU results check the template tests share (test_templates,
 * test_mma_sync, test_wgmma, test_skinny): one kernel on one GEMM problem, launched from
 * random operands and checked element by element against a float64 reference.  Prefix gc_.
 * cmocka assertions; needs a GPU (the caller skips without one).
 *
 * What gc_run does with a case c:
 * - Operands.  A, B and C are stored row-major in c->dtype, each in its own device allocation
 *   of rows * ld + offset + 1 elements (rows: gen_stored_rows for c->layout; one element of
 *   slack past the last row); the kernel gets the address `offset` elements into it.  Every
 *   element of the allocations (offset prefix, padding and slack included) is drawn from
 *   c->values with one generator seeded with m * 131 + n * 17 + k + c->seed: all of A, then
 *   all of B, then all of C.  With beta == 0, C is NaN throughout instead (it must not be
 *   read).
 * - Reference.  C = alpha op(A) op(B) + beta C in float64, from the stored (rounded) values.
 * - Launches.  c->runs launches, each from the initial C (rewritten before each launch after
 *   the first).  After each one, every element of C's allocation is checked:
 *     inside the M x N result, |got - want| <= atol + rtol * |want| + unit * sum_k |alpha a b|
 *     (the last term: what rounding partial sums can lose, for kernels that sum in a lower
 *     precision than float64 or in another order);
 *     outside it (pitch padding, the offset prefix, the slack), the initial bits, untouched;
 *     from the second run on, also the first run's bits, everywhere (split-K kernels add
 *     their slices in a fixed order, whichever block finishes first).
 *   After the last run, A's and B's allocations hold the bits they were given.
 * - A failure prints one line to stderr, naming the label, layout, shape, pitches, offsets,
 *   run, the element (its index from the allocation's start, and its row and column), got and
 *   want, then fail()s.
 */
#ifndef MMT_TESTS_GEMM_CHECK_H
#define MMT_TESTS_GEMM_CHECK_H

#include <stdint.h>

#include "rt_device.h"
#include "rt_driver.h"

/* The values a case's operands are drawn from. */
typedef enum {
  GC_VALUES_64THS = 0, /* i / 64 for |i| <= 64: exact in f16, bf16 and tf32, so a kernel that
                          rounds its inputs to those computes on the reference's values */
  GC_VALUES_1000THS,   /* i / 1000 - 1 for 0 <= i <= 2000: finer than the 16-bit types and tf32
                          hold, for f32 kernels (a product rounded to tf32 shows) */
} gc_values;

/* One problem for one kernel.  Zero is a sensible value of every field but m, n, k (designated
 * initializers: a caller sets what it needs). */
typedef struct {
  const char *label;  /* names the kernel in failure messages (NULL: none) */
  const char *dtype;  /* "f32" (NULL), "tf32" (stored as f32), "f16" or "bf16" */
  const char *layout; /* "nn" (NULL), "nt", "tn" or "tt": A's letter first, 't' stored
                         transposed */
  int64_t m, n, k;
  int64_t lda, ldb, ldc; /* row pitches in elements, at least the row widths (gen_min_ld);
                            0: the row width (at least 1) */
  float alpha, beta;
  int64_t offset[3]; /* elements between each allocation's start and A, B, C (misaligned
                        bases) */
  int runs;          /* launches from the same C (0: one) */
  double rtol, atol; /* bound on an element of the result: atol + rtol * |want| + ... */
  double unit;       /* ... + unit * sum over k of |alpha a b| */
  gc_values values;  /* what A, B and C are drawn from */
  uint64_t seed;     /* added to the shape's seed, m * 131 + n * 17 + k */
} gc_case;

/* Runs kernel k (loaded, for c's dtype and layout) on case c as the top of this file says;
 * passes or fail()s.  The kernel's requirements and constraints must take the problem: that
 * is the caller's to check. */
void gc_run(const rt_cu *cu, const rt_kernel *k, const gc_case *c);

/* The unit roundoff of dtype's storage: 2^-11 for f16, 2^-8 for bf16, 2^-24 for f32 and
 * tf32 (stored as f32). */
double gc_roundoff(const char *dtype);

#endif /* MMT_TESTS_GEMM_CHECK_H */
