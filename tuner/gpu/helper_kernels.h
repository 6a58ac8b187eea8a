/*
 * gpu/helper_kernels.h -- the CUDA C of the helper kernels a measurement runs besides the
 * candidate (gpu/measure.h): the random fill of the inputs, the widening of 16-bit data to
 * float, the result check against the reference, the plain read bench times, the float64
 * reference (gpu/ref.h) and the float64 epilogue of an op kernel's reference.  It is compiled into the binary as text: tn_gpu_open compiles it with
 * NVRTC, through the cubin cache.  Prefix tn_.
 */
#ifndef MMT_TN_GPU_HELPER_KERNELS_H
#define MMT_TN_GPU_HELPER_KERNELS_H

/* The CUDA C of the helper kernels, one translation unit; owned (free), NULL when out of
 * memory.  Exposed so that CI compiles it with NVRTC without a GPU. */
char *tn_gpu_helpers_source(void);

#endif /* MMT_TN_GPU_HELPER_KERNELS_H */
