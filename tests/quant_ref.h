/* quant_ref.h -- mmt_quantize (mmtune.h) on the host, bit for bit: the scale of each group
 * and the FP8 code of each element, for tests to compare the GPU's with.  Prefix qr_. */
#ifndef MMT_TESTS_QUANT_REF_H
#define MMT_TESTS_QUANT_REF_H

#include <stdint.h>

#include "mmtune.h"

/* x: the host copy of d->x's rows (pitch d->ldx, in_type's bits); q: rows x cols codes at
 * pitch d->ldq (other bytes untouched); scale: mmt_quantize_scales floats.  d's pointers are
 * not read. */
void qr_quantize(const mmt_quantize_desc *d, const void *x, uint8_t *q, float *scale);

/* The same with a given scale (per tensor: d->given_scale set, its value `given` here):
 * q cast with it, *scale = given, *amax = x's largest finite |x| (d's pointers not read). */
void qr_quantize_given(const mmt_quantize_desc *d, const void *x, float given, uint8_t *q,
                       float *scale, float *amax);

#endif /* MMT_TESTS_QUANT_REF_H */
