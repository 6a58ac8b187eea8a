/*
 * matmul_ref.h -- the float64 reference of mmt_matmul (include/mmtune.h's definition) on host
 * copies of its operands, for tests that check a call's D element by element, and the error
 * bound a D of each output type is held to.
 */
#ifndef MMT_TESTS_MATMUL_REF_H
#define MMT_TESTS_MATMUL_REF_H

#include <stdint.h>

#include "mmtune.h"

/* Host copies of a call's operands, laid out as the descriptor says (its leading dimensions
 * and strides, in elements); NULL where the call has none. */
typedef struct {
  const void *a, *b, *c, *bias;
  const float *scale_row, *scale_col;
} mr_host;

/* Element idx of a buffer of type t, widened to double. */
double mr_load(mmt_dtype t, const void *base, int64_t idx);
/* Stores x rounded to type t (to nearest even) as element idx. */
void mr_store(mmt_dtype t, void *base, int64_t idx, double x);
/* The offset of element (i, j) of a rows x cols matrix stored in order (transposed: stored as
 * its transpose) with leading dimension ld. */
int64_t mr_offset(mmt_order order, int trans, int64_t i, int64_t j, int64_t ld);
/* The activation in double. */
double mr_act(mmt_activation act, double x);
/* D[i][j] of problem z, in double: the whole expression (scale_mode's scales too), before D's
 * rounding.  Grouped: z is the expert and i a row of A and D as stored (contiguous: any of
 * the expert's rows; masked: a row of its block).  Neither reads group_rows.  *scale gets a
 * magnitude of its terms (the sum of |products| times the factors, plus |bias| and |beta C|),
 * against which a rounding error is measured; may be NULL. */
double mr_element(const mmt_matmul_desc *d, const mr_host *h, int64_t z, int64_t i, int64_t j,
                  double *scale);

#endif /* MMT_TESTS_MATMUL_REF_H */
