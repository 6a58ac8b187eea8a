/* gpu/helper_kernels.c -- see gpu/helper_kernels.h. */
#include "gpu/helper_kernels.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/measure_int.h"
#include "gpu/ref.h"

/* Random fill on the device: splitmix64 of (seed, index) -> an odd multiple of 2^-24 in
 * (-1, 1), so no element is ever zero (like tn_fill_random, with its own stream), stored as
 * float (bits 32), or rounded to nearest even as f16 (16) or bf16 (-16; by hand:
 * cvt.rn.bf16.f32 needs sm_80; the values are never NaN).  FP8 (8: e4m3, -8: e5m2) draws the
 * code itself: a sign, one of the four binades [2^-3, 2^1) and a mantissa, so no element is
 * zero, subnormal or NaN.  And the widening of 16-bit and FP8 data to float (exact; NaN stays
 * NaN), which lets the float64 reference and the check below read what a kernel read and
 * wrote. */
static const char FILL_SOURCE[] =
    "extern \"C\" __global__ void mmt_fill_uniform(void *x, unsigned long long n,\n"
    "                                              unsigned long long seed, int bits) {\n"
    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < n; i += stride) {\n"
    "    unsigned long long z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;\n"
    "    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;\n"
    "    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;\n"
    "    z ^= z >> 31;\n"
    "    float v = (float)(2.0 * (double)(z >> 40) + 1.0 - 16777216.0) * (1.0f / 16777216.0f);\n"
    "    if (bits == 32) {\n"
    "      ((float *)x)[i] = v;\n"
    "    } else if (bits == 8 || bits == -8) {\n"
    "      const unsigned sign = (unsigned)(z >> 63) << 7, binade = (unsigned)(z >> 61) & 3u;\n"
    "      ((unsigned char *)x)[i] = (unsigned char)(\n"
    "          bits == 8 ? sign | (4u + binade) << 3 | ((unsigned)(z >> 58) & 7u)\n"
    "                    : sign | (12u + binade) << 2 | ((unsigned)(z >> 59) & 3u));\n"
    "    } else if (bits == -16) {\n"
    "      unsigned u = __float_as_uint(v);\n"
    "      ((unsigned short *)x)[i] = (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);\n"
    "    } else {\n"
    "      unsigned short h;\n"
    "      asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v));\n"
    "      ((unsigned short *)x)[i] = h;\n"
    "    }\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void mmt_widen_16(const unsigned short *x, float *y,\n"
    "                                          unsigned long long n, int bf16) {\n"
    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < n; i += stride) {\n"
    "    unsigned short h = x[i];\n"
    "    float f;\n"
    "    if (bf16) f = __uint_as_float((unsigned)h << 16);\n"
    "    else asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "    y[i] = f;\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void mmt_widen_8(const unsigned char *x, float *y,\n"
    "                                       unsigned long long n, int e5m2) {\n"
    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < n; i += stride) {\n"
    "    const unsigned v = x[i], mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;\n"
    "    const unsigned top = e5m2 ? 31 : 15, e = (v & 0x7f) >> mbits, m = v & ((1u << mbits) - "
    "1);\n"
    "    float f;\n"
    "    if (e == top && (e5m2 || m == 7))\n"
    "      f = e5m2 && m == 0 ? __int_as_float(0x7f800000) : __int_as_float(0x7fc00000);\n"
    "    else if (e == 0)\n"
    "      f = scalbnf((float)m, 1 - (int)bias - (int)mbits);\n"
    "    else\n"
    "      f = scalbnf((float)((1u << mbits) + m), (int)e - (int)bias - (int)mbits);\n"
    "    y[i] = v & 0x80 ? -f : f;\n"
    "  }\n"
    "}\n";

/* The comparison of C's first `rows` of M rows with the float64 reference, reduced on the
 * device so that only a few numbers cross the bus: sums of squares of (C - R) and R, max
 * |C - R| and max |R| (as bits: non-negative doubles order like unsigned integers), NaN/Inf
 * count and first position, and writes into C's padding columns (n..ldc of every row but the
 * last) or its rows from `rows` on (a masked expert's past its count), all left NaN, with the
 * first position.  Nothing past C's last element is read: it may be unmapped (gpu/guard.h).
 * x - x != 0 is true exactly for NaN and Inf. */
static const char CHECK_SOURCE[] =
    "extern \"C\" __global__ void mmt_check_f32(long long M, long long rows, long long N,\n"
    "    const float *C, long long ldc, const double *R, long long ldr, double *sums,\n"
    "    unsigned long long *st) {\n"
    "  double d2 = 0, r2 = 0, dmax = 0, rmax = 0;\n"
    "  unsigned long long bad = 0, first_bad = ~0ull, outside = 0, first_out = ~0ull;\n"
    "  for (long long i = blockIdx.x; i < M; i += gridDim.x)\n"
    "    for (long long j = threadIdx.x; j < (i == M - 1 ? N : ldc); j += blockDim.x) {\n"
    "      unsigned long long at = (unsigned long long)i * ldc + j;\n"
    "      float c = C[at];\n"
    "      if (j >= N || i >= rows) {\n"
    "        if (c == c) { outside++; first_out = min(first_out, at); }\n"
    "        continue;\n"
    "      }\n"
    "      double r = R[(unsigned long long)i * ldr + j], d = (double)c - r;\n"
    "      if (d - d != 0.0 || r - r != 0.0) { bad++; first_bad = min(first_bad, at); continue; }\n"
    "      d2 += d * d; r2 += r * r; dmax = fmax(dmax, fabs(d)); rmax = fmax(rmax, fabs(r));\n"
    "    }\n"
    "  for (int off = 16; off > 0; off /= 2) {\n"
    "    d2 += __shfl_down_sync(0xffffffffu, d2, off);\n"
    "    r2 += __shfl_down_sync(0xffffffffu, r2, off);\n"
    "    dmax = fmax(dmax, __shfl_down_sync(0xffffffffu, dmax, off));\n"
    "    rmax = fmax(rmax, __shfl_down_sync(0xffffffffu, rmax, off));\n"
    "    bad += __shfl_down_sync(0xffffffffu, bad, off);\n"
    "    first_bad = min(first_bad, __shfl_down_sync(0xffffffffu, first_bad, off));\n"
    "    outside += __shfl_down_sync(0xffffffffu, outside, off);\n"
    "    first_out = min(first_out, __shfl_down_sync(0xffffffffu, first_out, off));\n"
    "  }\n"
    "  if ((threadIdx.x & 31) != 0) return;\n"
    "  atomicAdd(&sums[0], d2);\n"
    "  atomicAdd(&sums[1], r2);\n"
    "  atomicMax(&st[0], (unsigned long long)__double_as_longlong(dmax));\n"
    "  atomicMax(&st[1], (unsigned long long)__double_as_longlong(rmax));\n"
    "  atomicAdd(&st[2], bad);\n"
    "  atomicMin(&st[3], first_bad);\n"
    "  atomicAdd(&st[4], outside);\n"
    "  atomicMin(&st[5], first_out);\n"
    "}\n";

/* The reference of an op kernel's D (gen.h, "Epilogues"; alpha 1, beta 0, or 1 with a
 * residual's C) from the float64 products P (nz problems of M x N, row stride N), the float
 * copies of the vectors (bias by column (1) or row (2), scales when srow / scol) and of C
 * (NULL: none; problem z's row r at z * c_stride + r * ldc), into D (nz x M x n_out), in
 * float64. */
/* Block scales (gen.h, scale_block) on the widened inputs of an nt problem, in place, before
 * the float64 reference multiplies them: A's row r (M x K) times s[k / 128][r] (float[KB][M]),
 * or with b_side B's row r (N x K) times s[r / 128][k / 128] (float[ceil(N / 128)][KB]).  The
 * products of FP8 values and fp32 scales are rounded to float once. */
static const char BLOCK_SCALE_SOURCE[] =
    "extern \"C\" __global__ void mmt_block_scale(float *x, long long rows, long long cols,\n"
    "    long long ld, const float *s, int b_side, long long m, long long kb) {\n"
    "  const unsigned long long total = (unsigned long long)(rows * cols);\n"
    "  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < total; i += stride) {\n"
    "    const long long r = (long long)(i / cols), k = (long long)(i % cols);\n"
    "    x[r * ld + k] *= b_side ? s[r / 128 * kb + k / 128] : s[k / 128 * m + r];\n"
    "  }\n"
    "}\n";

static const char EPILOGUE_SOURCE[] =
    "__device__ double mmt_act_f64(int act, double x) {\n"
    "  if (act == 1) return x < 0 ? 0.0 : x;\n"
    "  if (act == 2) return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * "
    "x)));\n"
    "  if (act == 3) return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));\n"
    "  if (act == 4) return x / (1.0 + exp(-x));\n"
    "  return x;\n"
    "}\n"
    "extern \"C\" __global__ void mmt_epilogue_f64(long long M, long long N, long long nz,\n"
    "    const double *P, double *D, long long n_out, int bias, const float *vb, int srow,\n"
    "    const float *vr, int scol, const float *vc, int act, int gated, const float *C,\n"
    "    long long ldc, long long c_stride) {\n"
    "  const unsigned long long total = (unsigned long long)(nz * M * n_out);\n"
    "  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < total; i += stride) {\n"
    "    const long long j = (long long)(i % n_out), row = (long long)(i / n_out);\n"
    "    const long long r = row % M;\n"
    "    const double *p = P + (unsigned long long)row * N;\n"
    "    double x[2];\n"
    "    for (int h = 0; h < (gated ? 2 : 1); h++) {\n"
    "      const long long c = gated ? 2 * j + h : j;\n"
    "      double v = p[c];\n"
    "      if (srow) v *= vr[srow == 2 ? 0 : r]; /* 2: a per-tensor scale */\n"
    "      if (scol) v *= vc[scol == 2 ? 0 : c];\n"
    "      if (bias) v += vb[bias == 1 ? c : r];\n"
    "      x[h] = v;\n"
    "    }\n"
    "    const double c = C ? (double)C[(unsigned long long)(row / M) * c_stride +\n"
    "                                    (unsigned long long)r * ldc + j] : 0.0;\n"
    "    D[i] = gated ? mmt_act_f64(act, x[0]) * x[1] + c : mmt_act_f64(act, x[0] + c);\n"
    "  }\n"
    "}\n";

/* A plain read of n16 16-byte words from p: what a memory-bound kernel's time compares with.
 * Grid-stride, four independent 16-byte loads a thread in flight (a stride apart), past L1
 * (read once); what it reads folds into one word, stored only when it equals a value nothing
 * checks, so that no load can be dropped. */
static const char READ_SOURCE[] =
    "__device__ __forceinline__ unsigned mmt_read16(const uint4 *p) {\n"
    "  unsigned x, y, z, w;\n"
    "  asm(\"ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\"\n"
    "      : \"=r\"(x), \"=r\"(y), \"=r\"(z), \"=r\"(w) : \"l\"(p));\n"
    "  return x ^ y ^ z ^ w;\n"
    "}\n"
    "extern \"C\" __global__ void mmt_read_bytes(const uint4 *p, unsigned long long n16,\n"
    "                                            unsigned *sink) {\n"
    "  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "  unsigned acc = 0;\n"
    "  for (; i + 3 * stride < n16; i += 4 * stride)\n"
    "    acc ^= mmt_read16(p + i) ^ mmt_read16(p + i + stride) ^\n"
    "           mmt_read16(p + i + 2 * stride) ^ mmt_read16(p + i + 3 * stride);\n"
    "  for (; i < n16; i += stride) acc ^= mmt_read16(p + i);\n"
    "  if (acc == 0x9E3779B9u) *sink = acc;\n"
    "}\n";

/* SwiGLU's elementwise half, for the baseline that runs it after one GEMM on [W_gate; W_up]:
 * X is M x 2N (row pitch ldx) holding the gate projection in columns 0 .. N-1 and the up
 * projection in N .. 2N-1; H (M x N, pitch ldh) = silu(gate) * up, in fp32 from the widened
 * 16-bit values (exact), rounded once to nearest even (bf16 by hand, as the fill does: sm_75
 * has no cvt.rn.bf16.f32; NaN stays a quiet NaN).  silu(g) = g / (1 + e^-g): e^-g overflowing
 * gives g / inf = -0, the limit.  Memory-bound: each thread moves `lanes` elements (8: 16-byte
 * loads and stores) of one row, for every row its y index strides to.  Columns N .. ldh-1 of
 * H are never written.  Launch (tn_gpu_swiglu): block (bx, 256 / bx) with bx covering a row's
 * N / lanes vectors up to 256; grid (ceil(N / lanes / bx), min(ceil(M / by), 65535)). */
static const char SWIGLU_SOURCE[] =
    "template <int V> struct mmt_lanes;\n"
    "template <> struct mmt_lanes<8> { typedef uint4 type; };\n"
    "template <> struct mmt_lanes<4> { typedef uint2 type; };\n"
    "template <> struct mmt_lanes<2> { typedef unsigned type; };\n"
    "template <> struct mmt_lanes<1> { typedef unsigned short type; };\n"
    "__device__ __forceinline__ float mmt_widen(unsigned short h, int bf16) {\n"
    "  if (bf16) return __uint_as_float((unsigned)h << 16);\n"
    "  float f;\n"
    "  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "  return f;\n"
    "}\n"
    "__device__ __forceinline__ unsigned short mmt_narrow(float v, int bf16) {\n"
    "  if (bf16) {\n"
    "    unsigned u = __float_as_uint(v);\n"
    "    if (v != v) return (unsigned short)((u >> 16) | 0x40u);\n"
    "    return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);\n"
    "  }\n"
    "  unsigned short h;\n"
    "  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v));\n"
    "  return h;\n"
    "}\n"
    "template <int V>\n"
    "__device__ __forceinline__ void mmt_swiglu_rows(const unsigned short *__restrict__ x,\n"
    "    long long ldx, unsigned short *__restrict__ h, long long ldh, long long M, long long N,\n"
    "    int bf16) {\n"
    "  typedef typename mmt_lanes<V>::type lanes_t;\n"
    "  const long long j = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V;\n"
    "  if (j >= N) return;\n"
    "  for (long long i = (long long)blockIdx.y * blockDim.y + threadIdx.y; i < M;\n"
    "       i += (long long)gridDim.y * blockDim.y) {\n"
    "    union { lanes_t v; unsigned short s[V]; } gate, up, out;\n"
    "    gate.v = *(const lanes_t *)(x + i * ldx + j);\n"
    "    up.v = *(const lanes_t *)(x + i * ldx + N + j);\n"
    "#pragma unroll\n"
    "    for (int e = 0; e < V; ++e) {\n"
    "      float g = mmt_widen(gate.s[e], bf16), u = mmt_widen(up.s[e], bf16);\n"
    "      out.s[e] = mmt_narrow(g / (1.0f + expf(-g)) * u, bf16);\n"
    "    }\n"
    "    *(lanes_t *)(h + i * ldh + j) = out.v;\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void mmt_swiglu_16(const unsigned short *__restrict__ x,\n"
    "    long long ldx, unsigned short *__restrict__ h, long long ldh, long long M, long long N,\n"
    "    int bf16, int lanes) {\n"
    "  switch (lanes) {\n"
    "    case 8: mmt_swiglu_rows<8>(x, ldx, h, ldh, M, N, bf16); break;\n"
    "    case 4: mmt_swiglu_rows<4>(x, ldx, h, ldh, M, N, bf16); break;\n"
    "    case 2: mmt_swiglu_rows<2>(x, ldx, h, ldh, M, N, bf16); break;\n"
    "    default: mmt_swiglu_rows<1>(x, ldx, h, ldh, M, N, bf16); break;\n"
    "  }\n"
    "}\n";

char *tn_gpu_helpers_source(void) {
  const char *ref = tn_ref_gpu_source();
  size_t len = strlen(FILL_SOURCE) + strlen(CHECK_SOURCE) + strlen(READ_SOURCE) +
               strlen(BLOCK_SCALE_SOURCE) + strlen(EPILOGUE_SOURCE) + strlen(SWIGLU_SOURCE) +
               strlen(ref) + 7;
  char *source = malloc(len);
  if (source)
    snprintf(source, len, "%s\n%s\n%s\n%s\n%s\n%s\n%s", FILL_SOURCE, CHECK_SOURCE, READ_SOURCE,
             BLOCK_SCALE_SOURCE, EPILOGUE_SOURCE, SWIGLU_SOURCE, ref);
  return source;
}

/* The widest lanes (16-bit elements a thread moves at once) that every row start and both
 * halves of X meet: a power of two dividing N, both pitches and both addresses' elements. */
static int swiglu_lanes(int64_t n, int64_t ldx, int64_t ldh, CUdeviceptr x, CUdeviceptr h) {
  int lanes = 8;
  while (lanes > 1 && (n % lanes || ldx % lanes || ldh % lanes || x % (2u * (unsigned)lanes) ||
                       h % (2u * (unsigned)lanes)))
    lanes /= 2;
  return lanes;
}

mmt_status tn_gpu_swiglu(tn_gpu *g, CUstream stream, const char *dtype, int64_t m, int64_t n,
                         CUdeviceptr x, int64_t ldx, CUdeviceptr h, int64_t ldh, ut_err *err) {
  const bool f16 = dtype && !strcmp(dtype, "f16"), bf16 = dtype && !strcmp(dtype, "bf16");
  if (!f16 && !bf16)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "the SwiGLU kernel takes f16 or bf16, not %s",
                   dtype ? dtype : "NULL");
  if (m < 0 || n < 0 || ldx < 2 * n || ldh < n)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "SwiGLU: M=%lld N=%lld ldx=%lld (at least 2N) ldh=%lld (at least N)",
                   (long long)m, (long long)n, (long long)ldx, (long long)ldh);
  if (m == 0 || n == 0) return MMT_OK;
  if (!x || !h || x % 2 || h % 2)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "SwiGLU: x = 0x%llx, h = 0x%llx (2-byte aligned)",
                   (unsigned long long)x, (unsigned long long)h);
  mmt_status rc = rt_device_bind(&g->dev, err);
  if (rc) return rc;
  const int lanes = swiglu_lanes(n, ldx, ldh, x, h);
  const int64_t vectors = n / lanes; /* a row's, one a thread */
  unsigned bx = 1;
  while (bx < 256 && (int64_t)bx < vectors) bx *= 2;
  const unsigned by = 256 / bx;
  const int64_t gx = (vectors + bx - 1) / bx, gy_all = (m + by - 1) / by;
  if (gx > INT_MAX)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "SwiGLU: N=%lld is too wide", (long long)n);
  const unsigned gy = gy_all > 65535 ? 65535u : (unsigned)gy_all;
  long long ldx_arg = ldx, ldh_arg = ldh, m_arg = m, n_arg = n;
  int bf16_arg = bf16, lanes_arg = lanes;
  void *params[] = {&x, &ldx_arg, &h, &ldh_arg, &m_arg, &n_arg, &bf16_arg, &lanes_arg};
  RT_CU_CHECK(
      g->cu, cuLaunchKernel(g->swiglu_fn, (unsigned)gx, gy, 1, bx, by, 1, 0, stream, params, NULL));
cleanup:
  return rc;
}
