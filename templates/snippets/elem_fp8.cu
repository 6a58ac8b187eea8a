/* snippet elem_fp8 (templates/snippets): the FP8 storage types (OCP e4m3 and e5m2, one byte),
 * which NVRTC has no header for, and elem_t, a byte: the A and B of an FP8 op kernel, read by
 * the tensor cores alone (wgmma's .e4m3/.e5m2), so no conversion is declared here; D has the
 * op's type (the epilogue snippet's out_t). */
#ifndef __CUDA_FP8_TYPES_EXIST__
struct __align__(1) __nv_fp8_e4m3 { unsigned char x; };
struct __align__(1) __nv_fp8_e5m2 { unsigned char x; };
#endif
typedef unsigned char elem_t;
