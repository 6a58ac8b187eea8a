/* half16.h -- host conversions between float and the 16-bit GPU types, for tests that fill
 * f16/bf16 buffers and read them back.  Round to nearest even; NaN stays NaN. */
#ifndef MMT_TESTS_HALF16_H
#define MMT_TESTS_HALF16_H

#include <stdint.h>

uint16_t th_f32_to_f16(float f);
float th_f16_to_f32(uint16_t h);
uint16_t th_f32_to_bf16(float f);
float th_bf16_to_f32(uint16_t h);

#endif /* MMT_TESTS_HALF16_H */
