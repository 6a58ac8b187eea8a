/* quantize.cu -- mmt_quantize's kernels (runtime/rt_quantize.h): f32, f16 or bf16 to e4m3 or
 * e5m2 with the dequantization scales of a group of elements, the largest finite magnitude
 * (amax) of the group over the type's largest finite value:
 *   scale = max(amax / FP8_MAX, FLT_MIN)    (rounded up to a power of two when asked)
 *   q     = cvt.rn.satfinite(x * (1 / scale))
 * so that x ~ q * scale, |x * (1 / scale)| <= FP8_MAX (a larger rounding saturates), an
 * infinity saturates to the largest finite value and NaN stays NaN (neither counts towards
 * amax), and a group of zeros gets the smallest normal scale instead of a division by zero.
 * Compiled by NVRTC for sm_89 or newer (the FP8 conversions), with no header: the 16-bit
 * types are read as their bits.  Row-major matrices, rows x cols, pitch in elements.
 *
 * The kernels come in one instance per input type (IN: 0 f32, 1 f16, 2 bf16), output type
 * (E5M2: 0 e4m3, 1 e5m2) and vector width (V: 4 elements a load when every row start is
 * aligned to it, else 1), named mmt_quant_<kind>_<in>_<out>_v<V> (kind: row, 1x128, 128x128,
 * cast; and mmt_quant_amax_<in>_v<V>, mmt_quant_scale_<out>). */

#define FLT_MIN_NORMAL 1.17549435e-38f
#define FLT_MAX_FINITE 3.40282347e+38f

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

template <int IN> struct elem;
template <> struct elem<0> {
  typedef float t;
  static __device__ float get(float v) { return v; }
};
template <> struct elem<1> {
  typedef u16 t;
  static __device__ float get(u16 h) {
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
    return r;
  }
};
template <> struct elem<2> {
  typedef u16 t;
  static __device__ float get(u16 h) { return __uint_as_float((u32)h << 16); }
};

/* V consecutive elements, widened to float. */
template <int IN, int V> struct vec_t;
template <int IN> struct vec_t<IN, 1> {
  static __device__ void load(const typename elem<IN>::t *p, float *v) { v[0] = elem<IN>::get(*p); }
};
template <> struct vec_t<0, 4> {
  static __device__ void load(const float *p, float *v) {
    const float4 f = *(const float4 *)p;
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  }
};
template <int IN> struct vec_t<IN, 4> {
  static __device__ void load(const u16 *p, float *v) {
    const uint2 w = *(const uint2 *)p;
    v[0] = elem<IN>::get((u16)w.x), v[1] = elem<IN>::get((u16)(w.x >> 16));
    v[2] = elem<IN>::get((u16)w.y), v[3] = elem<IN>::get((u16)(w.y >> 16));
  }
};

/* Two FP8 codes in a u16, lo in the low byte (cvt puts its first source in the upper half). */
template <int E5M2> __device__ u16 fp8x2(float lo, float hi) {
  u16 r;
  if (E5M2)
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

/* V codes of v[] * inv stored at q. */
template <int E5M2, int V> __device__ void store(u8 *q, const float *v, float inv) {
  if (V == 4) {
    const u32 w = fp8x2<E5M2>(v[0] * inv, v[1] * inv) | (u32)fp8x2<E5M2>(v[2] * inv, v[3] * inv)
                                                            << 16;
    *(u32 *)q = w;
  } else {
    *q = (u8)fp8x2<E5M2>(v[0] * inv, 0.0f);
  }
}

/* |v| when finite, else 0: what amax counts. */
__device__ float finite_abs(float v) {
  const float a = fabsf(v);
  return a <= FLT_MAX_FINITE ? a : 0.0f;
}

/* The scale of a group of largest finite magnitude amax. */
template <int E5M2> __device__ float scale_of(float amax, int pow2) {
  float s = amax / (E5M2 ? 57344.0f : 448.0f);
  if (!(s >= FLT_MIN_NORMAL)) s = FLT_MIN_NORMAL;
  if (pow2) {
    u32 bits = __float_as_uint(s);
    if (bits & 0x7fffffu) bits = (bits & 0x7f800000u) + 0x800000u;
    s = __uint_as_float(bits);
  }
  return s;
}

__device__ float warp_max(float m, int width) {
  for (int o = width / 2; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  return m;
}

/* The block's largest value (256 threads), in every thread. */
__device__ float block_max(float m) {
  __shared__ float part[8];
  m = warp_max(m, 32);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = m;
  __syncthreads();
  m = part[0];
  for (int w = 1; w < 8; w++) m = fmaxf(m, part[w]);
  __syncthreads();
  return m;
}

/* Groups of one row by 128 columns (scale[cb * rows + r], cb = c / 128): a warp per group,
 * its elements held in registers between the amax and the cast.  Eight warps a block. */
template <int IN, int E5M2, int V>
__device__ void group_1x128(const typename elem<IN>::t *x, long long ldx, u8 *q, long long ldq,
                            int rows, int cols, float *scale, int pow2) {
  const int lane = threadIdx.x % 32, cbs = (cols + 127) / 128;
  const long long g = (long long)blockIdx.x * 8 + threadIdx.x / 32;
  if (g >= (long long)rows * cbs) return;
  const int r = (int)(g / cbs), cb = (int)(g % cbs);
  const int held = 128 / (32 * V);
  float v[128 / 32];
  float m = 0.0f;
#pragma unroll
  for (int h = 0; h < held; h++) {
    const int c = cb * 128 + (h * 32 + lane) * V;
    if (c < cols)
      vec_t<IN, V>::load(x + r * ldx + c, v + h * V);
    else
      for (int e = 0; e < V; e++) v[h * V + e] = 0.0f;
    for (int e = 0; e < V; e++) m = fmaxf(m, finite_abs(v[h * V + e]));
  }
  const float s = scale_of<E5M2>(warp_max(m, 32), pow2), inv = 1.0f / s;
#pragma unroll
  for (int h = 0; h < held; h++) {
    const int c = cb * 128 + (h * 32 + lane) * V;
    if (c < cols) store<E5M2, V>(q + r * ldq + c, v + h * V, inv);
  }
  if (lane == 0) scale[(long long)cb * rows + r] = s;
}

/* Groups of 128 x 128 (scale[rb * CB + cb], CB = ceil(cols / 128)): a block of 256 threads
 * per group, each holding 64 elements: a warp's lanes cover 32 * V columns, the 8 warps
 * every 8th row. */
template <int IN, int E5M2, int V>
__device__ void group_128x128(const typename elem<IN>::t *x, long long ldx, u8 *q, long long ldq,
                              int rows, int cols, float *scale, int pow2) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, cbs = (cols + 127) / 128;
  const int rb = blockIdx.x / cbs, cb = blockIdx.x % cbs;
  const int chunks = 128 / (32 * V); /* column chunks of a row per lane */
  float v[64];
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; i++) {
    const int r = rb * 128 + warp + 8 * i;
    for (int h = 0; h < chunks; h++) {
      const int c = cb * 128 + (h * 32 + lane) * V;
      float *t = v + (i * chunks + h) * V;
      if (r < rows && c < cols)
        vec_t<IN, V>::load(x + r * ldx + c, t);
      else
        for (int e = 0; e < V; e++) t[e] = 0.0f;
      for (int e = 0; e < V; e++) m = fmaxf(m, finite_abs(t[e]));
    }
  }
  const float s = scale_of<E5M2>(block_max(m), pow2), inv = 1.0f / s;
#pragma unroll
  for (int i = 0; i < 16; i++) {
    const int r = rb * 128 + warp + 8 * i;
    for (int h = 0; h < chunks; h++) {
      const int c = cb * 128 + (h * 32 + lane) * V;
      if (r < rows && c < cols) store<E5M2, V>(q + r * ldq + c, v + (i * chunks + h) * V, inv);
    }
  }
  if (threadIdx.x == 0) scale[(long long)rb * cbs + cb] = s;
}

/* Groups of one whole row (scale[r]): a warp per row, reading it twice (the second time
 * mostly from L1), eight rows a block. */
template <int IN, int E5M2, int V>
__device__ void group_row(const typename elem<IN>::t *x, long long ldx, u8 *q, long long ldq,
                          int rows, int cols, float *scale, int pow2) {
  const int lane = threadIdx.x % 32;
  const long long r = (long long)blockIdx.x * 8 + threadIdx.x / 32;
  if (r >= rows) return;
  float v[V], m = 0.0f;
  for (int c = lane * V; c < cols; c += 32 * V) {
    vec_t<IN, V>::load(x + r * ldx + c, v);
    for (int e = 0; e < V; e++) m = fmaxf(m, finite_abs(v[e]));
  }
  const float s = scale_of<E5M2>(warp_max(m, 32), pow2), inv = 1.0f / s;
  for (int c = lane * V; c < cols; c += 32 * V) {
    vec_t<IN, V>::load(x + r * ldx + c, v);
    store<E5M2, V>(q + r * ldq + c, v, inv);
  }
  if (lane == 0) scale[r] = s;
}

/* One scale for the matrix, in three launches after *amax = 0: the amax, by an atomic max of
 * each block's (non-negative floats order as their bits); the cast, every block deriving the
 * scale from it; then scale[0] = the scale, over the amax. */
template <int IN, int V>
__device__ void tensor_amax(const typename elem<IN>::t *x, long long ldx, int rows, int cols,
                            float *amax) {
  const long long per_row = cols / V, n = (long long)rows * per_row;
  float v[V], m = 0.0f;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    vec_t<IN, V>::load(x + (i / per_row) * ldx + (i % per_row) * V, v);
    for (int e = 0; e < V; e++) m = fmaxf(m, finite_abs(v[e]));
  }
  m = block_max(m);
  if (threadIdx.x == 0) atomicMax((u32 *)amax, __float_as_uint(m));
}

template <int IN, int E5M2, int V>
__device__ void tensor_cast(const typename elem<IN>::t *x, long long ldx, u8 *q, long long ldq,
                            int rows, int cols, const float *amax, int pow2) {
  const long long per_row = cols / V, n = (long long)rows * per_row;
  const float inv = 1.0f / scale_of<E5M2>(*amax, pow2);
  float v[V];
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / per_row, c = (i % per_row) * V;
    vec_t<IN, V>::load(x + r * ldx + c, v);
    store<E5M2, V>(q + r * ldq + c, v, inv);
  }
}

template <int E5M2> __device__ void tensor_scale(float *scale, int pow2) {
  scale[0] = scale_of<E5M2>(scale[0], pow2);
}

/* The extern "C" entry points, one per instance. */
#define MMT_QUANT_GROUPS(KIND, IN, INAME, E5M2, ONAME, V)                                          \
  extern "C" __global__ void __launch_bounds__(256) mmt_quant_##KIND##_##INAME##_##ONAME##_v##V(   \
      const void *x, long long ldx, void *q, long long ldq, int rows, int cols, float *scale,      \
      int pow2) {                                                                                  \
    group_##KIND<IN, E5M2, V>((const elem<IN>::t *)x, ldx, (u8 *)q, ldq, rows, cols, scale, pow2); \
  }
#define MMT_QUANT_TENSOR(IN, INAME, E5M2, ONAME, V)                                                \
  extern "C" __global__ void __launch_bounds__(256) mmt_quant_cast_##INAME##_##ONAME##_v##V(       \
      const void *x, long long ldx, void *q, long long ldq, int rows, int cols, float *scale,      \
      int pow2) {                                                                                  \
    tensor_cast<IN, E5M2, V>((const elem<IN>::t *)x, ldx, (u8 *)q, ldq, rows, cols, scale, pow2);  \
  }
#define MMT_QUANT_AMAX(IN, INAME, V)                                                               \
  extern "C" __global__ void __launch_bounds__(256) mmt_quant_amax_##INAME##_v##V(                 \
      const void *x, long long ldx, int rows, int cols, float *amax) {                             \
    tensor_amax<IN, V>((const elem<IN>::t *)x, ldx, rows, cols, amax);                             \
  }
#define MMT_QUANT_OUT(IN, INAME, E5M2, ONAME, V)                                                   \
  MMT_QUANT_GROUPS(row, IN, INAME, E5M2, ONAME, V)                                                 \
  MMT_QUANT_GROUPS(1x128, IN, INAME, E5M2, ONAME, V)                                               \
  MMT_QUANT_GROUPS(128x128, IN, INAME, E5M2, ONAME, V)                                             \
  MMT_QUANT_TENSOR(IN, INAME, E5M2, ONAME, V)
#define MMT_QUANT_IN(IN, INAME, V)                                                                 \
  MMT_QUANT_AMAX(IN, INAME, V)                                                                     \
  MMT_QUANT_OUT(IN, INAME, 0, e4m3, V)                                                             \
  MMT_QUANT_OUT(IN, INAME, 1, e5m2, V)
#define MMT_QUANT_ALL(V)                                                                           \
  MMT_QUANT_IN(0, f32, V)                                                                          \
  MMT_QUANT_IN(1, f16, V)                                                                          \
  MMT_QUANT_IN(2, bf16, V)

MMT_QUANT_ALL(1)
MMT_QUANT_ALL(4)

extern "C" __global__ void mmt_quant_scale_e4m3(float *scale, int pow2) {
  tensor_scale<0>(scale, pow2);
}
extern "C" __global__ void mmt_quant_scale_e5m2(float *scale, int pow2) {
  tensor_scale<1>(scale, pow2);
}
