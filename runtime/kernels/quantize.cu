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
 * (E5M2: 0 e4m3, 1 e5m2) and vector width (V: 16 bytes of x a load, 4 f32 or 8 16-bit
 * elements, when every row start is aligned to it, else 1), named
 * mmt_quant_<kind>_<in>_<out>_v<V> (kind: row, 1x128, 128x128, cast, small, given; and
 * mmt_quant_amax_<in>_v<V>).
 *
 * Memory-bound: each kernel issues all of a thread's loads before it uses any (four to eight
 * 16-byte loads in flight a thread), holds what it read in registers between the amax and the
 * cast wherever a group fits, and indexes without 64-bit division in its loops. */

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
/* The 8 16-bit elements of a 16-byte word, widened. */
template <int IN> __device__ void widen8(const uint4 &w, float *v) {
  const u32 u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; i++)
    v[2 * i] = elem<IN>::get((u16)u[i]), v[2 * i + 1] = elem<IN>::get((u16)(u[i] >> 16));
}
template <int IN> struct vec_t<IN, 8> {
  static __device__ void load(const u16 *p, float *v) { widen8<IN>(*(const uint4 *)p, v); }
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

/* Four codes of v[0..3] * inv in a u32. */
template <int E5M2> __device__ u32 fp8x4(const float *v, float inv) {
  return fp8x2<E5M2>(v[0] * inv, v[1] * inv) | (u32)fp8x2<E5M2>(v[2] * inv, v[3] * inv) << 16;
}

/* V codes of v[] * inv stored at q. */
template <int E5M2, int V> __device__ void store(u8 *q, const float *v, float inv) {
  if (V == 8) {
    *(uint2 *)q = make_uint2(fp8x4<E5M2>(v, inv), fp8x4<E5M2>(v + 4, inv));
  } else if (V == 4) {
    *(u32 *)q = fp8x4<E5M2>(v, inv);
  } else {
    *q = (u8)fp8x2<E5M2>(v[0] * inv, 0.0f);
  }
}

/* |v| when finite, else 0: what amax counts. */
__device__ float finite_abs(float v) {
  const float a = fabsf(v);
  return a <= FLT_MAX_FINITE ? a : 0.0f;
}

template <int V> __device__ float vec_amax(const float *v, float m) {
#pragma unroll
  for (int e = 0; e < V; e++) m = fmaxf(m, finite_abs(v[e]));
  return m;
}

/* The largest finite value of the FP8 type. */
#define FP8_MAX(E5M2) ((E5M2) ? 57344.0f : 448.0f)

/* A scale from amax / FP8_MAX: at least the smallest normal, rounded up to a power of two when
 * asked.  Idempotent: finishing a finished scale gives it back (per tensor relies on it). */
__device__ float scale_finish(float s, int pow2) {
  if (!(s >= FLT_MIN_NORMAL)) s = FLT_MIN_NORMAL;
  if (pow2) {
    u32 bits = __float_as_uint(s);
    if (bits & 0x7fffffu) bits = (bits & 0x7f800000u) + 0x800000u;
    s = __uint_as_float(bits);
  }
  return s;
}

/* The scale of a group of largest finite magnitude amax. */
template <int E5M2> __device__ float scale_of(float amax, int pow2) {
  return scale_finish(amax / FP8_MAX(E5M2), pow2);
}

/* The largest m over aligned groups of `width` lanes (a power of two up to 32), in each. */
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

/* Loads per lane: four 16-byte loads in flight (V = 1: four elements, a group of 128 per
 * warp). */
#define LOADS 4

/* Groups of one row by 128 columns (scale[cb * rows + r], cb = c / 128): a warp per segment
 * of a row, LOADS * 32 * V columns (8 groups of 16-bit, 4 of f32, 1 of single elements), its
 * loads all issued before the amax, held in registers for the cast.  Eight warps a block. */
template <int IN, int E5M2, int V>
__device__ void group_1x128(const typename elem<IN>::t *x, long long ldx, u8 *q, long long ldq,
                            int rows, int cols, float *scale, int pow2) {
  const int SEG = LOADS * 32 * V, lane = threadIdx.x % 32;
  const int segs = (cols + SEG - 1) / SEG;
  const long long w = (long long)blockIdx.x * 8 + threadIdx.x / 32;
  if (w >= (long long)rows * segs) return;
  const int r = (int)(w / segs), c0 = (int)(w % segs) * SEG;
  const typename elem<IN>::t *xr = x + r * ldx;
  float v[LOADS * V];
#pragma unroll
  for (int u = 0; u < LOADS; u++) {
    const int c = c0 + (u * 32 + lane) * V;
    if (c < cols)
      vec_t<IN, V>::load(xr + c, v + u * V);
    else
#pragma unroll
      for (int e = 0; e < V; e++) v[u * V + e] = 0.0f;
  }
  u8 *qr = q + r * ldq;
  if (V == 1) { /* the segment is one group */
    float m = 0.0f;
#pragma unroll
    for (int u = 0; u < LOADS; u++) m = vec_amax<1>(v + u, m);
    const float s = scale_of<E5M2>(warp_max(m, 32), pow2), inv = 1.0f / s;
#pragma unroll
    for (int u = 0; u < LOADS; u++) {
      const int c = c0 + u * 32 + lane;
      if (c < cols) store<E5M2, 1>(qr + c, v + u, inv);
    }
    if (lane == 0 && c0 < cols) scale[(long long)(c0 / 128) * rows + r] = s;
    return;
  }
  /* each load covers 32 * V / 128 groups of 128 / V lanes */
  const int width = 128 / V;
#pragma unroll
  for (int u = 0; u < LOADS; u++) {
    const int c = c0 + (u * 32 + lane) * V;
    const float s = scale_of<E5M2>(warp_max(vec_amax<V>(v + u * V, 0.0f), width), pow2);
    if (c < cols) {
      store<E5M2, V>(qr + c, v + u * V, 1.0f / s);
      if (lane % width == 0) scale[(long long)(c / 128) * rows + r] = s;
    }
  }
}

/* 128 x 128 groups of a 16-bit x in 16-byte loads (walk_128x128 below): lane l of warp w
 * holds 8 elements of rows 2w + l / 16 + 16i (i < 8) at column 8 (l % 16) of group g, as
 * loaded: 8 words of 16-bit pairs.  Elements past the matrix are zeros. */
template <int IN>
__device__ void load_group16(const u16 *x, long long ldx, int rows, int cols, int cbs, int g,
                             uint4 (&w)[8]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int r0 = (g / cbs) * 128 + 2 * warp + lane / 16, c = (g % cbs) * 128 + (lane % 16) * 8;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const int r = r0 + 16 * i;
    w[i] = r < rows && c < cols ? *(const uint4 *)(x + r * ldx + c) : make_uint4(0u, 0u, 0u, 0u);
  }
}

/* Groups of 128 x 128 of a 16-bit x, 16-byte loads: a block walks groups blockIdx.x,
 * + gridDim.x, ... (a grid of the blocks the device keeps resident, rt_quantize.c) and issues
 * the next group's loads before the amax and the cast of this one, so that its loads are in
 * flight through the block's reduction and stores.  (A block a group waited for its loads,
 * then reduced and stored with none in flight: 0.58-0.62x of a plain read of its bytes.)
 * Held as loaded, 32 words a group, two groups a thread. */
template <int IN, int E5M2>
__device__ void walk_128x128(const u16 *x, long long ldx, u8 *q, long long ldq, int rows, int cols,
                             float *scale, int pow2) {
  const int cbs = (cols + 127) / 128, groups = (rows + 127) / 128 * cbs;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  long long g = blockIdx.x;
  if (g >= groups) return;
  uint4 cur[8], next[8];
  load_group16<IN>(x, ldx, rows, cols, cbs, (int)g, cur);
  for (; g < groups; g += gridDim.x) {
    if (g + gridDim.x < groups)
      load_group16<IN>(x, ldx, rows, cols, cbs, (int)(g + gridDim.x), next);
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      float v[8];
      widen8<IN>(cur[i], v);
      m = vec_amax<8>(v, m);
    }
    const float s = scale_of<E5M2>(block_max(m), pow2), inv = 1.0f / s;
    const int r0 = (int)(g / cbs) * 128 + 2 * warp + lane / 16;
    const int c = (int)(g % cbs) * 128 + (lane % 16) * 8;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int r = r0 + 16 * i;
      if (r < rows && c < cols) {
        float v[8];
        widen8<IN>(cur[i], v);
        store<E5M2, 8>(q + r * ldq + c, v, inv);
      }
    }
    if (threadIdx.x == 0) scale[g] = s; /* g = rb * cbs + cb */
#pragma unroll
    for (int i = 0; i < 8; i++) cur[i] = next[i];
  }
}

/* Groups of 128 x 128 (scale[rb * CB + cb], CB = ceil(cols / 128)): 16-bit x in 16-byte loads
 * walks (above); otherwise a block of 256 threads per group, each holding 64 elements, its
 * loads all issued first.  A row of the group is 128 / V lanes wide (at most 32; V = 1: four
 * loads a lane), a warp covers RPW of its rows at a time, the 8 warps 8 * RPW. */
template <int IN, int E5M2, int V>
__device__ void group_128x128(const typename elem<IN>::t *x, long long ldx, u8 *q, long long ldq,
                              int rows, int cols, float *scale, int pow2) {
  if (V == 8) {
    walk_128x128<IN, E5M2>((const u16 *)x, ldx, q, ldq, rows, cols, scale, pow2);
    return;
  }
  const int LPR = 128 / V < 32 ? 128 / V : 32; /* lanes a row */
  const int RPW = 32 / LPR;                     /* rows of a warp's load */
  const int PER_ROW = 128 / (LPR * V);          /* loads a lane makes of one row */
  const int STEPS = 128 / (8 * RPW);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, cbs = (cols + 127) / 128;
  const int rb = blockIdx.x / cbs, cb = blockIdx.x % cbs;
  const int r0 = rb * 128 + warp * RPW + lane / LPR, cl = cb * 128 + (lane % LPR) * V;
  float v[64];
#pragma unroll
  for (int i = 0; i < STEPS; i++)
#pragma unroll
    for (int h = 0; h < PER_ROW; h++) {
      const int r = r0 + i * 8 * RPW, c = cl + h * LPR * V;
      float *t = v + (i * PER_ROW + h) * V;
      if (r < rows && c < cols)
        vec_t<IN, V>::load(x + r * ldx + c, t);
      else
#pragma unroll
        for (int e = 0; e < V; e++) t[e] = 0.0f;
    }
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; i++) m = fmaxf(m, finite_abs(v[i]));
  const float s = scale_of<E5M2>(block_max(m), pow2), inv = 1.0f / s;
#pragma unroll
  for (int i = 0; i < STEPS; i++)
#pragma unroll
    for (int h = 0; h < PER_ROW; h++) {
      const int r = r0 + i * 8 * RPW, c = cl + h * LPR * V;
      if (r < rows && c < cols) store<E5M2, V>(q + r * ldq + c, v + (i * PER_ROW + h) * V, inv);
    }
  if (threadIdx.x == 0) scale[(long long)rb * cbs + cb] = s;
}

/* Groups of one whole row (scale[r]): a block of 256 threads per row, in chunks of
 * 256 * LOADS * V columns.  The amax pass holds the last chunk in registers; the cast pass
 * stores it first, then reads the others again, last to first (the most recently read, most
 * likely still in L1 or L2).  A row of one chunk (2048 f32 or 8192 16-bit elements at V) is
 * read once. */
template <int IN, int E5M2, int V>
__device__ void group_row(const typename elem<IN>::t *x, long long ldx, u8 *q, long long ldq,
                          int rows, int cols, float *scale, int pow2) {
  const int CHUNK = 256 * LOADS * V;
  const int r = blockIdx.x, chunks = (cols + CHUNK - 1) / CHUNK;
  const typename elem<IN>::t *xr = x + r * ldx;
  u8 *qr = q + r * ldq;
  float v[LOADS * V], m = 0.0f;
  for (int k = 0; k < chunks; k++) {
#pragma unroll
    for (int u = 0; u < LOADS; u++) {
      const int c = k * CHUNK + (u * 256 + threadIdx.x) * V;
      if (c < cols)
        vec_t<IN, V>::load(xr + c, v + u * V);
      else
#pragma unroll
        for (int e = 0; e < V; e++) v[u * V + e] = 0.0f;
    }
#pragma unroll
    for (int u = 0; u < LOADS; u++) m = vec_amax<V>(v + u * V, m);
  }
  const float s = scale_of<E5M2>(block_max(m), pow2), inv = 1.0f / s;
  for (int k = chunks - 1; k >= 0; k--) {
    if (k < chunks - 1)
#pragma unroll
      for (int u = 0; u < LOADS; u++) {
        const int c = k * CHUNK + (u * 256 + threadIdx.x) * V;
        if (c < cols) vec_t<IN, V>::load(xr + c, v + u * V);
      }
#pragma unroll
    for (int u = 0; u < LOADS; u++) {
      const int c = k * CHUNK + (u * 256 + threadIdx.x) * V;
      if (c < cols) store<E5M2, V>(qr + c, v + u * V, inv);
    }
  }
  if (threadIdx.x == 0) scale[r] = s;
}

/* One scale for the matrix, in two launches after scale[0] = 0: the amax pass leaves there
 * amax / FP8_MAX, by an atomic max of each block's (division by a positive constant keeps
 * the order, so the largest quotient is the largest amax's, to the bit; non-negative floats
 * order as their bits); the cast, every block finishing the scale from it (scale_finish),
 * block (0, 0) storing it in its place -- a block that reads it after that store finishes it
 * again to the same value.  Both passes walk the matrix as
 * rows (a contiguous matrix comes as one row of rows * cols elements, rt_quantize.c) of
 * cols / V vectors on a 2-D grid: rows r = blockIdx.y, + gridDim.y, ...; in a row, LOADS
 * vectors a thread, 256 apart.  The cast walks rows and vectors last to first: what the amax
 * pass read last is what L2 still holds. */
template <int IN, int V>
__device__ void tensor_amax(const typename elem<IN>::t *x, long long ldx, int rows, int cols,
                            int e5m2, float *amax) {
  const int per_row = cols / V, step = gridDim.x * 256 * LOADS;
  float v[LOADS * V], m = 0.0f;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const typename elem<IN>::t *xr = x + r * ldx;
    for (int j0 = blockIdx.x * 256 * LOADS + threadIdx.x; j0 < per_row; j0 += step) {
#pragma unroll
      for (int u = 0; u < LOADS; u++) {
        const int j = j0 + u * 256;
        if (j < per_row)
          vec_t<IN, V>::load(xr + (long long)j * V, v + u * V);
        else
#pragma unroll
          for (int e = 0; e < V; e++) v[u * V + e] = 0.0f;
      }
#pragma unroll
      for (int u = 0; u < LOADS; u++) m = vec_amax<V>(v + u * V, m);
    }
  }
  m = block_max(m);
  if (threadIdx.x == 0) atomicMax((u32 *)amax, __float_as_uint(m / FP8_MAX(e5m2)));
}

template <int IN, int E5M2, int V>
__device__ void tensor_cast(const typename elem<IN>::t *x, long long ldx, u8 *q, long long ldq,
                            int rows, int cols, float *scale, int pow2) {
  const int per_row = cols / V, step = gridDim.x * 256 * LOADS;
  const float s = scale_finish(*scale, pow2), inv = 1.0f / s; /* the quotient, or s itself */
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale = s;
  float v[LOADS * V];
  for (int rr = blockIdx.y; rr < rows; rr += gridDim.y) {
    const int r = rows - 1 - rr;
    const typename elem<IN>::t *xr = x + r * ldx;
    u8 *qr = q + r * ldq;
    for (int j0 = blockIdx.x * 256 * LOADS + threadIdx.x; j0 < per_row; j0 += step) {
#pragma unroll
      for (int u = 0; u < LOADS; u++) {
        const int j = per_row - 1 - (j0 + u * 256);
        if (j >= 0) vec_t<IN, V>::load(xr + (long long)j * V, v + u * V);
      }
#pragma unroll
      for (int u = 0; u < LOADS; u++) {
        const int j = per_row - 1 - (j0 + u * 256);
        if (j >= 0) store<E5M2, V>(qr + (long long)j * V, v + u * V, inv);
      }
    }
  }
}

/* A small matrix with one scale (at most RT_QUANT_SMALL elements, rt_quantize.h: a decode
 * step's activations): one block does the amax, the cast (x again, from L1) and the scale, in
 * one launch instead of a memset and three.  The same arithmetic as the three kernels', so the
 * same bits. */
template <int IN, int E5M2, int V>
__device__ void group_small(const typename elem<IN>::t *x, long long ldx, u8 *q, long long ldq,
                            int rows, int cols, float *scale, int pow2) {
  const int per_row = cols / V, n = rows * per_row;
  float v[V], m = 0.0f;
  for (int i = threadIdx.x; i < n; i += 256) {
    vec_t<IN, V>::load(x + (long long)(i / per_row) * ldx + (i % per_row) * V, v);
    m = vec_amax<V>(v, m);
  }
  const float s = scale_of<E5M2>(block_max(m), pow2), inv = 1.0f / s;
  for (int i = threadIdx.x; i < n; i += 256) {
    const long long r = i / per_row, c = (long long)(i % per_row) * V;
    vec_t<IN, V>::load(x + r * ldx + c, v);
    store<E5M2, V>(q + r * ldq + c, v, inv);
  }
  if (threadIdx.x == 0) scale[0] = s;
}

/* One scale the caller gives (static or delayed scaling: *given, read from device memory), so
 * x is read once, walked as tensor_amax walks it: each code x * (1 / *given) as the cast's,
 * the amax as the amax pass's into *amax (when not NULL; zeroed before the launch), and
 * scale[0] = *given by block (0, 0) (given may be scale: the same value). */
template <int IN, int E5M2, int V>
__device__ void tensor_given(const typename elem<IN>::t *x, long long ldx, u8 *q, long long ldq,
                             int rows, int cols, const float *given, float *scale, float *amax) {
  const int per_row = cols / V, step = gridDim.x * 256 * LOADS;
  const float s = *given, inv = 1.0f / s;
  float v[LOADS * V], m = 0.0f;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const typename elem<IN>::t *xr = x + r * ldx;
    u8 *qr = q + r * ldq;
    for (int j0 = blockIdx.x * 256 * LOADS + threadIdx.x; j0 < per_row; j0 += step) {
#pragma unroll
      for (int u = 0; u < LOADS; u++)
        if (j0 + u * 256 < per_row)
          vec_t<IN, V>::load(xr + (long long)(j0 + u * 256) * V, v + u * V);
#pragma unroll
      for (int u = 0; u < LOADS; u++)
        if (j0 + u * 256 < per_row) {
          m = vec_amax<V>(v + u * V, m);
          store<E5M2, V>(qr + (long long)(j0 + u * 256) * V, v + u * V, inv);
        }
    }
  }
  if (amax) { /* the same for every thread of the block: block_max's barriers are met */
    m = block_max(m);
    if (threadIdx.x == 0) atomicMax((u32 *)amax, __float_as_uint(m));
  }
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) scale[0] = s;
}

/* The extern "C" entry points, one per instance; blocks an SM keeps at least, by kind (128 x
 * 128: the walk's grid, rt_quantize.c's WALK_BLOCKS_PER_SM). */
#define MIN_BLOCKS_row 1
#define MIN_BLOCKS_1x128 1
#define MIN_BLOCKS_128x128 2
#define MIN_BLOCKS_small 1
#define MMT_QUANT_GROUPS(KIND, IN, INAME, E5M2, ONAME, V)                                          \
  extern "C" __global__ void __launch_bounds__(256, MIN_BLOCKS_##KIND)                             \
      mmt_quant_##KIND##_##INAME##_##ONAME##_v##V(const void *x, long long ldx, void *q,           \
                                                  long long ldq, int rows, int cols, float *scale, \
                                                  int pow2) {                                      \
    group_##KIND<IN, E5M2, V>((const elem<IN>::t *)x, ldx, (u8 *)q, ldq, rows, cols, scale, pow2); \
  }
#define MMT_QUANT_TENSOR(IN, INAME, E5M2, ONAME, V)                                                \
  extern "C" __global__ void __launch_bounds__(256) mmt_quant_cast_##INAME##_##ONAME##_v##V(       \
      const void *x, long long ldx, void *q, long long ldq, int rows, int cols, float *scale,      \
      int pow2) {                                                                                  \
    tensor_cast<IN, E5M2, V>((const elem<IN>::t *)x, ldx, (u8 *)q, ldq, rows, cols, scale, pow2);  \
  }
#define MMT_QUANT_GIVEN(IN, INAME, E5M2, ONAME, V)                                                 \
  extern "C" __global__ void __launch_bounds__(256) mmt_quant_given_##INAME##_##ONAME##_v##V(      \
      const void *x, long long ldx, void *q, long long ldq, int rows, int cols,                    \
      const float *given, float *scale, float *amax) {                                             \
    tensor_given<IN, E5M2, V>((const elem<IN>::t *)x, ldx, (u8 *)q, ldq, rows, cols, given, scale, \
                              amax);                                                               \
  }
#define MMT_QUANT_AMAX(IN, INAME, V)                                                               \
  extern "C" __global__ void __launch_bounds__(256) mmt_quant_amax_##INAME##_v##V(                 \
      const void *x, long long ldx, int rows, int cols, int e5m2, float *amax) {                   \
    tensor_amax<IN, V>((const elem<IN>::t *)x, ldx, rows, cols, e5m2, amax);                       \
  }
#define MMT_QUANT_OUT(IN, INAME, E5M2, ONAME, V)                                                   \
  MMT_QUANT_GROUPS(row, IN, INAME, E5M2, ONAME, V)                                                 \
  MMT_QUANT_GROUPS(1x128, IN, INAME, E5M2, ONAME, V)                                               \
  MMT_QUANT_GROUPS(128x128, IN, INAME, E5M2, ONAME, V)                                             \
  MMT_QUANT_GROUPS(small, IN, INAME, E5M2, ONAME, V)                                               \
  MMT_QUANT_TENSOR(IN, INAME, E5M2, ONAME, V)                                                      \
  MMT_QUANT_GIVEN(IN, INAME, E5M2, ONAME, V)
#define MMT_QUANT_IN(IN, INAME, V)                                                                 \
  MMT_QUANT_AMAX(IN, INAME, V)                                                                     \
  MMT_QUANT_OUT(IN, INAME, 0, e4m3, V)                                                             \
  MMT_QUANT_OUT(IN, INAME, 1, e5m2, V)
#define MMT_QUANT_ALL(V)                                                                           \
  MMT_QUANT_IN(0, f32, V)                                                                          \
  MMT_QUANT_IN(1, f16, V)                                                                          \
  MMT_QUANT_IN(2, bf16, V)

#define MMT_QUANT_WIDE                                                                             \
  MMT_QUANT_IN(0, f32, 4)                                                                          \
  MMT_QUANT_IN(1, f16, 8)                                                                          \
  MMT_QUANT_IN(2, bf16, 8)

MMT_QUANT_ALL(1)
MMT_QUANT_WIDE

