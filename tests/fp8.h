/* fp8.h -- host conversions between float and the OCP 8-bit floats (e4m3: bias 7, no
 * infinity, NaN S.1111.111, largest 448; e5m2: bias 15, infinities, largest 57344), for tests
 * that make FP8 operands and read them back.  To FP8 as the GPU's cvt.rn.satfinite does: round
 * to nearest even, a magnitude past the largest finite value (infinity too) saturates to it,
 * NaN stays NaN.  Prefix fp8_. */
#ifndef MMT_TESTS_FP8_H
#define MMT_TESTS_FP8_H

#include <stdint.h>

#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f

uint8_t fp8_e4m3_from_f32(float f);
float fp8_e4m3_to_f32(uint8_t v);
uint8_t fp8_e5m2_from_f32(float f);
float fp8_e5m2_to_f32(uint8_t v);

#endif /* MMT_TESTS_FP8_H */
