/* snippet elem_bf16 (templates/snippets): the bf16 storage type and its conversions, as
 * elem_f16 (the same names and contracts); bf16 -> fp32 is exact: the bits are fp32's upper
 * half. */
#ifndef __CUDA_BF16_TYPES_EXIST__
struct __align__(2) __nv_bfloat16 { unsigned short x; };
#endif
typedef unsigned short elem_t;
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ elem_t to_elem(float x) {
  elem_t r;
  asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float to_float(elem_t h) {
  return __uint_as_float((unsigned)h << 16);
}
