/* snippet elem_f16 (templates/snippets): the f16 storage type and its conversions.
 * NVRTC has no built-in cuda_fp16.h and mmtune passes no include path, so the kernel declares
 * the ABI's type itself (the header's size and alignment); it only moves 16-bit patterns,
 * elem_t being the bits of one element.  pack2(lo, hi) rounds two floats to one 32-bit pair
 * (lo at the lower address), to_elem rounds one, to_float widens one; rounding is to nearest
 * even (cvt.rn; cvt.rn.f16x2.f32 puts its first source in the upper half). */
#ifndef __CUDA_FP16_TYPES_EXIST__
struct __align__(2) __half { unsigned short x; };
#endif
typedef unsigned short elem_t;
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ elem_t to_elem(float x) {
  elem_t r;
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float to_float(elem_t h) {
  float r;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(r) : "h"(h));
  return r;
}
