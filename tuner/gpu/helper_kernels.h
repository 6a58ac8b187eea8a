/*
 * gpu/helper_kernels.h -- the CUDA C of the helper kernels a measurement runs besides the
 * candidate (gpu/measure.h): the random fill of the inputs, the widening of 16-bit data to
 * float, the result check against the reference, the plain read bench times, the float64
 * reference (gpu/ref.h), the float64 epilogue of an op kernel's reference, and the
 * elementwise half of the SwiGLU baseline.  It is compiled into the binary as text:
 * tn_gpu_open compiles it with NVRTC, through the cubin cache.  Prefix tn_.
 */
#ifndef MMT_TN_GPU_HELPER_KERNELS_H
#define MMT_TN_GPU_HELPER_KERNELS_H

#include <stdint.h>

#include "gpu/measure.h"

/* The CUDA C of the helper kernels, one translation unit; owned (free), NULL when out of
 * memory.  Exposed so that CI compiles it with NVRTC without a GPU. */
char *tn_gpu_helpers_source(void);

/*
 * The SwiGLU baseline's second kernel (cuBLASLt cannot fuse a gate): after one GEMM of the
 * activations with the 2N-column weight [W_gate; W_up] (PyTorch's layout, which puts the gate
 * projection in X's first N columns and the up projection in the next N -- unlike
 * mmt_matmul's gated B, which interleaves them by column), one elementwise pass
 *   H[i][j] = silu(X[i][j]) * X[i][N + j],  silu(g) = g / (1 + e^-g),
 * in fp32, rounded once to dtype.  X is M x 2N (row pitch ldx >= 2N), H M x N (ldh >= N),
 * both of dtype "f16" or "bf16", device addresses on g's device, not overlapping; H's columns
 * N .. ldh-1 are left as they are.  Launched on `stream`, asynchronously (the context made
 * current first).  Vectorized to 16-byte loads and stores when N, both pitches and both
 * addresses allow (8 elements; else 4, 2, 1).  M or N == 0 launches nothing.
 * Errors: MMT_ERR_UNSUPPORTED (another dtype), MMT_ERR_INVALID_ARG (a negative size, a pitch
 * below its minimum, an address 0 or odd), MMT_ERR_CUDA (the launch).
 */
mmt_status tn_gpu_swiglu(tn_gpu *g, CUstream stream, const char *dtype, int64_t m, int64_t n,
                         CUdeviceptr x, int64_t ldx, CUdeviceptr h, int64_t ldh, ut_err *err);

#endif /* MMT_TN_GPU_HELPER_KERNELS_H */
