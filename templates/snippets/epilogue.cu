/* snippet epilogue (templates/snippets): what an op kernel does with its product before it
 * stores it (gen.h, "Epilogues"; the op ABI), written once for every template that declares
 * epilogues = true.  lib/epilogue.lua writes its #defines before it:
 *   EPI_OUT      D's and C's type out_t: 0 f32, 1 f16, 2 bf16, 3 e4m3, 4 e5m2 (FP8: D =
 *                its value times *E.scale_d (1 when NULL), saturated; *E.amax collects the
 *                largest |value| before that scale, NaN aside)
 *   EPI_BIAS     0 none, 1 bias[j] by column of the product, 2 bias[i] by row
 *   EPI_BIAS_F32 1: the bias vector is float; 0: out_t
 *   EPI_SCALE_ROW, EPI_SCALE_COL   1: scale_row[i], scale_col[j] multiply the product
 *   EPI_SCALE_TENSOR                1: scale_row[0] * scale_col[0] (A's and B's per-tensor
 *                                   scales) multiply every element
 *   EPI_ACT      0 none, 1 relu, 2 gelu (tanh form), 3 gelu (erf form), 4 silu
 *   EPI_GATED    1: product columns 2j (gate) and 2j + 1 (up) make D's column j
 *   EPI_Z        1: blockIdx.z is the problem of the batch; 0: the kernel's own (split-K)
 *   EPI_GROUPED  (grouped ops only) 1 contiguous, 2 masked: see EPI_GROUP below
 *   EPI_WALK     (masked only) 1: the kernel's blocks walk the experts (epi_walk_experts)
 *   EPI_C        1: the op adds beta * C (gen_op.residual); 0: it is launched with beta 0 and
 *                its kernel has no code that reads C (beta is read as 0)
 * Its names (out_t, epi_*) do not meet the elem snippets' (elem_t, to_elem, to_float), so a
 * kernel has both.  Everything is computed in fp32 and D is rounded once.
 *
 * A kernel calls, once, before it reads A, B or C:
 *   EPI_BATCH(A, B, C, E)   its pointers moved to problem blockIdx.z of the batch (EPI_Z)
 * and stores each value v = alpha * (its accumulator) of product element (r, c) (row and
 * column in the whole product, 64-bit) with
 *   epi_store(E, C, ldc, beta, r, c, v)                 one element (not gated)
 *   epi_store2(E, C, ldc, beta, r, c, v0, v1, two)      elements (r, c) and (r, c + 1), c even,
 *                                                       the second only when `two`; gated: the
 *                                                       pair makes D[r][c / 2] (two is true)
 *   epi_gate(E, C, ldc, beta, r, c, vg, vu)             gated: D[r][c / 2] from the gate (r, c)
 *                                                       and the up projection (r, c + 1), c even,
 *                                                       for a kernel that gathers the pair itself
 * C is read only when beta != 0 (a NaN there does not propagate when beta == 0), and never
 * without EPI_C.
 * A grouped op's kernel also calls, once its tile row is known and before it uses it:
 *   EPI_GROUP(A, B, C, E, M, TILE_ROW, BM)   the block's expert: pointers, M and the tile row
 *                                            made the expert's (returns when it has none)
 * or, a kernel that walks many tiles a block (wgmma's persistent loop; contiguous only), once
 * in one whole warp epi_group_table into shared memory, then for each tile epi_group_lookup
 * and epi_group_vectors on a copy of E.  A masked kernel of EPI_WALK is a device function of
 * the ABI's arguments and `long long epi_z`, the expert (EPI_BATCH and EPI_GROUP take it for
 * blockIdx.z), which its entry point calls through epi_walk_experts.
 * An FP8 D also needs, in the code that stores a tile (the same warps, converged, at its end):
 *   EPI_AMAX_DECL   before the stores: the thread's running amax
 *   EPI_AMAX_ARG    after the last argument of each epi_store, epi_store2, epi_gate
 *   EPI_AMAX_FLUSH  after the stores: the warp's amax into *E.amax (an atomic max)
 * which are empty for the other types. */
#ifndef EPI_GROUPED
#define EPI_GROUPED 0
#endif
#ifndef EPI_WALK
#define EPI_WALK 0
#endif
/* The block's problem of the batch: blockIdx.z, or the expert a walk is at (EPI_WALK). */
#if EPI_WALK
#define EPI_BLOCK_Z epi_z
#else
#define EPI_BLOCK_Z blockIdx.z
#endif
/* beta as the epilogue uses it.  mmt_matmul keys a call with beta != 0 apart (a residual), so
 * any other op's kernel runs with beta 0: its C path compiles away, where a test of beta at
 * each group of pairs doubled the whole-tile loop's code and cost a store-bound kernel (Q K^T
 * writing a gigabyte of D) a fifth of its time. */
#if EPI_C
#define EPI_BETA(beta) (beta)
#else
#define EPI_BETA(beta) 0.0f
#endif
struct __align__(8) mmt_epilogue {
  void* D;
  long long ldd;
  const void* bias;
  const float* scale_row;
  const float* scale_col;
  long long batch_a, batch_b, batch_c, batch_d; /* elements from one problem to the next */
#if EPI_OUT >= 3 || EPI_GROUPED
  const float* scale_d; /* FP8 D: its scale (NULL: 1) */
  float* amax;          /* FP8 D: the largest |D| before the scale, by atomic max (NULL: none) */
#endif
#if EPI_GROUPED
  const int* group_rows; /* contiguous: G + 1 row offsets; masked: G row counts */
  int* group_error;      /* set to 1 when group_rows break their rules (mmtune.h) */
  long long groups;      /* G */
#endif
};
static_assert(sizeof(mmt_epilogue) == (EPI_GROUPED ? 112 : EPI_OUT >= 3 ? 88 : 72),
              "mmt_epilogue is the runtime's GEN_EPILOGUE_BYTES (a prefix of it but for FP8 "
              "and grouped ops)");

#if EPI_OUT == 0
typedef float out_t;
__device__ __forceinline__ out_t epi_to_out(float x) { return x; }
__device__ __forceinline__ float epi_from_out(out_t x) { return x; }
#elif EPI_OUT >= 3
typedef unsigned char out_t;
/* Two codes, lo in the low byte (cvt puts its first source in the upper half), saturating. */
__device__ __forceinline__ unsigned short epi_fp8x2(float lo, float hi) {
  unsigned short r;
#if EPI_OUT == 3
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}
__device__ __forceinline__ float epi_from_out(out_t x) {
  unsigned h; /* the code widened to f16 (exact), then to float */
#if EPI_OUT == 3
  asm("{.reg .b16 t; mov.b16 t, %1; cvt.rn.f16x2.e4m3x2 %0, t;}\n" : "=r"(h) : "h"((unsigned short)x));
#else
  asm("{.reg .b16 t; mov.b16 t, %1; cvt.rn.f16x2.e5m2x2 %0, t;}\n" : "=r"(h) : "h"((unsigned short)x));
#endif
  float r;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(r) : "h"((unsigned short)h));
  return r;
}
#else
typedef unsigned short out_t;
__device__ __forceinline__ out_t epi_to_out(float x) {
  out_t r;
#if EPI_OUT == 1
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
#else
  asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
#endif
  return r;
}
__device__ __forceinline__ float epi_from_out(out_t h) {
#if EPI_OUT == 1
  float r;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(r) : "h"(h));
  return r;
#else
  return __uint_as_float((unsigned)h << 16);
#endif
}
#endif

/* FP8 D: the value x stored as out_t after *E.scale_d, its |x| into the thread's amax.  The
 * other types: rounded once. */
#if EPI_OUT >= 3
#define EPI_AMAX_DECL float epi_amax = 0.0f;
#define EPI_AMAX_ARG , epi_amax
#define EPI_AMAX_PARAM , float& epi_amax
#define EPI_AMAX_FLUSH(E) epi_amax_flush(E, epi_amax)
__device__ __forceinline__ float epi_scale_d(const mmt_epilogue& E) {
  return E.scale_d ? __ldg(E.scale_d) : 1.0f;
}
__device__ __forceinline__ out_t epi_out(const mmt_epilogue& E, float x, float& epi_amax) {
  epi_amax = fmaxf(epi_amax, fabsf(x));
  return (out_t)epi_fp8x2(x * epi_scale_d(E), 0.0f);
}
__device__ __forceinline__ unsigned short epi_out2(const mmt_epilogue& E, float x0, float x1,
                                                   float& epi_amax) {
  epi_amax = fmaxf(epi_amax, fmaxf(fabsf(x0), fabsf(x1)));
  const float s = epi_scale_d(E);
  return epi_fp8x2(x0 * s, x1 * s);
}
/* The warp's largest into *E.amax: non-negative floats order as their bits. */
__device__ __forceinline__ void epi_amax_flush(const mmt_epilogue& E, float m) {
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (E.amax && (threadIdx.x & 31) == 0)
    atomicMax(reinterpret_cast<unsigned*>(E.amax), __float_as_uint(m));
}
#else
#define EPI_AMAX_DECL
#define EPI_AMAX_ARG
#define EPI_AMAX_PARAM
#define EPI_AMAX_FLUSH(E) \
  do {                    \
  } while (0)
#define epi_out(E, x) epi_to_out(x)
#endif

/* The activation, NaN in NaN out (relu too: x < 0 is false for NaN).
 * Where D is 16-bit or FP8, GELU (tanh form) and SiLU are 0.5 x (1 + tanh(u)) with the
 * hardware's tanh.approx: one MUFU operation an element, where x * sigmoid takes two (ex2
 * and rcp), and the activation is most of an epilogue's arithmetic.  Its error, under 2^-10.9
 * of tanh, is 2^-12 |x| of the activation at most, under half the rounding of an f16 D and
 * far under the bounds D's type is verified to.  An f32 D is held to 1e-5: there the sigmoid
 * form, __expf (ex2.approx: a few ulp) and __fdividef (2 ulp; no IEEE division's slow-path
 * call per element; a denominator past 2^126 gives 0, x * sigmoid's limit at x -> -inf). */
#if EPI_OUT != 0 && (EPI_ACT == 2 || EPI_ACT == 4)
__device__ __forceinline__ float epi_tanh(float u) {
  float t;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(t) : "f"(u));
  return t;
}
#endif

__device__ __forceinline__ float epi_act(float x) {
#if EPI_ACT == 1
  return x < 0.0f ? 0.0f : x;
#elif EPI_ACT == 2 && EPI_OUT != 0 /* tanh(u), u = sqrt(2/pi) (x + 0.044715 x^3) */
  const float h = 0.5f * x;
  return fmaf(h, epi_tanh(0.7978845608028654f * fmaf(0.044715f * x, x * x, x)), h);
#elif EPI_ACT == 2 /* 0.5 x (1 + tanh(u)) = x * sigmoid(2u): no tanhf (a call, a stack frame) */
  const float u2 = 1.5957691216057308f * (x + 0.044715f * x * x * x); /* 2 sqrt(2/pi) (...) */
  return __fdividef(x, 1.0f + __expf(-u2));
#elif EPI_ACT == 3
  return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
#elif EPI_ACT == 4 && EPI_OUT != 0 /* x sigmoid(x) = 0.5 x (1 + tanh(x / 2)) */
  const float h = 0.5f * x;
  return fmaf(h, epi_tanh(h), h);
#elif EPI_ACT == 4
  return __fdividef(x, 1.0f + __expf(-x)); /* exp's overflow: x * (1 / inf) = -0, the limit */
#else
  return x;
#endif
}

/* The problem of the batch this block computes: the kernel's A, B and C moved to it (D:
 * epi_d; a walk's E.D here, the expert's copy of E).  A macro: the pointers may be
 * __restrict__ parameters. */
#if EPI_Z
#define EPI_BATCH(A, B, C, E)                                                   \
  do {                                                                          \
    const long long epi_z_ = EPI_BLOCK_Z;                                       \
    (A) += epi_z_ * (E).batch_a;                                                \
    (B) += epi_z_ * (E).batch_b;                                                \
    (C) += epi_z_ * (E).batch_c;                                                \
    if (EPI_WALK) (E).D = reinterpret_cast<out_t*>((E).D) + epi_z_ * (E).batch_d; \
  } while (0)
#else
#define EPI_BATCH(A, B, C, E) \
  do {                        \
  } while (0)
#endif
__device__ __forceinline__ out_t* epi_d(const mmt_epilogue& E) {
#if EPI_Z && !EPI_WALK
  return reinterpret_cast<out_t*>(E.D) + (long long)blockIdx.z * E.batch_d;
#else
  return reinterpret_cast<out_t*>(E.D);
#endif
}

#if EPI_GROUPED
/* Grouped (mmtune.h's mmt_group_mode): which expert the block's tile row t is, its first
 * row (in A's and D's rows as launched) and its rows; false when the tile has no rows.
 * zb is the block's problem (EPI_BLOCK_Z), a masked call's expert.
 * Contiguous: the launch's tile rows are the experts' in turn, each expert's rows in whole
 * tiles of bm (ceil(rows / bm) of them, so ceil(M / bm) + min(G, M) tile rows cover any
 * routing: an expert with rows has at most one partial tile);
 * t becomes the tile row within the expert.  The warp reads the G + 1 offsets 32 at a time
 * (every lane active: this runs first), scans the experts' tile counts and finds t's.
 * Masked: zb is the expert, its rows the first group_rows[z] of its M.  An expert
 * whose rows break the rules (an offset below 0, past M or below the one before; a count
 * below 0 or past M) has no tiles, and group_error is set. */
__device__ __forceinline__ bool epi_group_find(const mmt_epilogue& E, int M, int bm,
                                               long long zb, long long& t, long long& z,
                                               long long& first, int& rows) {
  /* group_rows is often the kernel before's output (the router's): under programmatic
   * dependent launch (the dependent_launch snippet), wait for it first; a no-op otherwise */
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
#if EPI_GROUPED == 1
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x & 31, G = (int)E.groups;
  long long before = 0; /* tiles of the experts before this chunk of 32 */
  for (int g0 = 0; g0 < G; g0 += 32) {
    const int g = g0 + lane;
    int lo = 0, hi = 0;
    if (g < G) lo = __ldg(E.group_rows + g), hi = __ldg(E.group_rows + g + 1);
    const bool ok = 0 <= lo && lo <= hi && hi <= M;
    const long long tiles = g < G && ok ? ((long long)hi - lo + bm - 1) / bm : 0;
    long long incl = tiles; /* the warp's inclusive scan */
    for (int o = 1; o < 32; o <<= 1) {
      const long long v = __shfl_up_sync(full, incl, o);
      if (lane >= o) incl += v;
    }
    if (__ballot_sync(full, g < G && !ok) && lane == 0) *E.group_error = 1;
    const long long start = before + incl - tiles;
    const unsigned hit = __ballot_sync(full, tiles > 0 && t >= start && t < start + tiles);
    if (hit) {
      const int src = __ffs(hit) - 1;
      z = g0 + src;
      first = __shfl_sync(full, lo, src);
      rows = __shfl_sync(full, hi - lo, src);
      t -= __shfl_sync(full, start, src);
      return true;
    }
    before += __shfl_sync(full, incl, 31);
  }
  return false;
#else
  z = zb;
  first = 0;
  rows = __ldg(E.group_rows + z);
  if (rows < 0 || rows > M) {
    if (threadIdx.x == 0) *E.group_error = 1;
    return false;
  }
  return t * bm < rows;
#endif
}

#if EPI_WALK
/* Masked, the block's walk of the experts: slice blockIdx.z of the launch's Z = gridDim.z
 * (which may be below G: the runtime sizes it by the call's group_tokens) takes experts z,
 * z + Z, z + 2Z, ..., and of them runs tile(z) for each whose count reaches its tile row t of
 * bm rows, or breaks the rules (epi_group_find then sets group_error), the block synced
 * between two.  A decode step's few hit experts of many then cost the launch no block for
 * each empty one's tile (a grid of all G queued about 30,000 blocks that only read a count,
 * 13 us of a one-token step of 160 experts).  Every warp reads 32 of the slice's counts at
 * once, the next 32 while the hits of these run; all threads of the block are active. */
template <class Tile>
__device__ __forceinline__ void epi_walk_experts(const mmt_epilogue& E, long long t, int bm,
                                                 Tile tile) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory"); /* group_rows: see epi_group_find */
#endif
  const unsigned full = 0xffffffffu;
  const long long G = E.groups, Z = gridDim.z, step = 32 * Z, lane = threadIdx.x & 31;
  const long long reach = t * bm; /* an expert of more rows has this tile row */
  long long z = blockIdx.z + lane * Z;
  int rows = z < G ? __ldg(E.group_rows + z) : 0;
  bool synced = true;
  for (long long z0 = blockIdx.z; z0 < G; z0 += step, z += step) {
    const int next = z + step < G ? __ldg(E.group_rows + z + step) : 0;
    unsigned hits = __ballot_sync(full, z < G && (rows < 0 || rows > reach));
    while (hits) {
      const int j = __ffs(hits) - 1;
      hits &= hits - 1;
      if (!synced) __syncthreads(); /* the last expert's tile is done with shared memory */
      synced = false;
      tile(z0 + j * Z);
    }
    rows = next;
  }
}
#endif

#if EPI_GROUPED == 1
/* Contiguous, for a kernel that walks tiles itself: a table of where the experts' tile rows
 * start (bm rows a tile, each expert's last partial), in shared memory, read by each tile's
 * epi_group_lookup.  With S = ceil(G / cap) experts a step (1 up to cap experts), table[j] is
 * the tile rows of experts [0, jS), for j = 0 .. ceil(G / S), the last entry all of them;
 * cap + 1 ints hold it for any G.  One whole warp builds it, scanning the offsets as
 * epi_group_find does; an expert whose rows break the rules has no tiles, and group_error is
 * set.  The caller syncs the block after it. */
__device__ __forceinline__ int epi_group_step(const mmt_epilogue& E, int cap) {
  return (int)((E.groups + cap - 1) / cap);
}
__device__ __forceinline__ int epi_group_tiles(const mmt_epilogue& E, int g, int M, int bm,
                                               int& lo, int& hi) {
  lo = __ldg(E.group_rows + g), hi = __ldg(E.group_rows + g + 1);
  return 0 <= lo && lo <= hi && hi <= M ? (int)(((long long)hi - lo + bm - 1) / bm) : -1;
}
__device__ __forceinline__ void epi_group_table(const mmt_epilogue& E, int M, int bm, int cap,
                                                int* table) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory"); /* group_rows: see epi_group_find */
#endif
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x & 31, G = (int)E.groups, S = epi_group_step(E, cap);
  int before = 0;
  if (lane == 0) table[0] = 0;
  for (int g0 = 0; g0 < G; g0 += 32) {
    const int g = g0 + lane;
    int lo, hi, tiles = 0;
    if (g < G) tiles = epi_group_tiles(E, g, M, bm, lo, hi);
    if (__ballot_sync(full, tiles < 0) && lane == 0) *E.group_error = 1;
    if (tiles < 0) tiles = 0;
    int incl = tiles;
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(full, incl, o);
      if (lane >= o) incl += v;
    }
    if (g < G && ((g + 1) % S == 0 || g + 1 == G)) table[(g + S) / S] = before + incl;
    before += __shfl_sync(full, incl, 31);
  }
}

/* Tile row t's expert z, its first row and rows, t made the row within it; false for a tile
 * row past every expert's.  The table's last entry at or below t, then its step's experts in
 * turn (one with S = 1): empty ones and those that break the rules have no tiles. */
__device__ __forceinline__ bool epi_group_lookup(const mmt_epilogue& E, const int* table,
                                                 int M, int bm, int cap, long long& t,
                                                 long long& z, long long& first, int& rows) {
  const int G = (int)E.groups, S = epi_group_step(E, cap), J = (G + S - 1) / S;
  if (t >= table[J]) return false;
  int lo = 0, hi = J - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (table[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  long long before = table[lo];
  for (int g = lo * S; g < G; ++g) {
    int r0, r1;
    const int tiles = epi_group_tiles(E, g, M, bm, r0, r1);
    if (tiles > 0 && t < before + tiles) {
      z = g, first = r0, rows = r1 - r0, t -= before;
      return true;
    }
    if (tiles > 0) before += tiles;
  }
  return false; /* not reached: the table's last entry counts every tile */
}
#endif

/* The block's expert (epi_group_find): A, C and D moved to its first row (contiguous; a masked
 * expert's block is the batch's, EPI_BATCH), B to its weight, M to its rows, the per-column
 * vectors to its own (the z-th of G) and the per-row ones to its rows; TILE_ROW within it.
 * Returns from the kernel when the tile has no rows.  A is row-major (lda apart), C ldc. */
#define EPI_GROUP(A, B, C, E, M, TILE_ROW, BM)                                               \
  do {                                                                                       \
    long long epi_z_, epi_first_;                                                            \
    int epi_rows_;                                                                           \
    if (!epi_group_find((E), (M), (BM), EPI_BLOCK_Z, (TILE_ROW), epi_z_, epi_first_, epi_rows_)) \
      return;                                                                                \
    const long long epi_row_base_ = EPI_GROUPED == 1 ? epi_first_ : epi_z_ * (long long)(M);   \
    (A) += epi_first_ * lda;                                                                 \
    (C) += epi_first_ * ldc;                                                                 \
    (E).D = reinterpret_cast<out_t*>((E).D) + epi_first_ * (E).ldd;                          \
    if (EPI_GROUPED == 1) (B) += epi_z_ * (E).batch_b;                                         \
    epi_group_vectors((E), epi_z_, epi_row_base_, N);                                        \
    (M) = epi_rows_;                                                                         \
  } while (0)

/* The expert's vectors: by column the z-th of G (N each; one a tensor scale), by row from
 * its first row. */
__device__ __forceinline__ void epi_group_vectors(mmt_epilogue& E, long long z, long long row0,
                                                  int N) {
#if EPI_BIAS
  const long long b = EPI_BIAS == 1 ? z * N : row0;
#if EPI_BIAS_F32
  E.bias = reinterpret_cast<const float*>(E.bias) + b;
#else
  E.bias = reinterpret_cast<const out_t*>(E.bias) + b;
#endif
#endif
#if EPI_SCALE_ROW
  E.scale_row += row0;
#endif
#if EPI_SCALE_COL
  E.scale_col += z * N;
#endif
#if EPI_SCALE_TENSOR
  E.scale_col += z;
#endif
}
#endif

/* A per-tensor scale at p, read-only for the kernel's life, through an asm the compiler may
 * merge with the same one elsewhere: a __ldg of it was issued again after every store to D (a
 * store might alias it), and in wgmma's ping-pong kernels those loads in flight took the
 * registers that made its FP8 and scale=tensor kernels spill. */
__device__ __forceinline__ float epi_tensor_scale(const float* p) {
  float x;
  asm("ld.global.nc.f32 %0, [%1];" : "=f"(x) : "l"(p));
  return x;
}

/* The per-row and per-column vectors' values at product element (r, c), read (those the op
 * has not: 0, never used): the column's (epi_col_vecs) and the row's (epi_row_vecs) apart, for
 * a kernel that reads a column's once for all its rows. */
struct epi_vecs {
  float bias, scale_row, scale_col;
};
__device__ __forceinline__ epi_vecs epi_col_vecs(const mmt_epilogue& E, long long c) {
  epi_vecs w = {0.0f, 0.0f, 0.0f};
#if EPI_SCALE_COL
  w.scale_col = __ldg(E.scale_col + c);
#endif
#if EPI_BIAS == 1 && EPI_BIAS_F32
  w.bias = __ldg(reinterpret_cast<const float*>(E.bias) + c);
#elif EPI_BIAS == 1
  w.bias = epi_from_out(reinterpret_cast<const out_t*>(E.bias)[c]);
#endif
  return w;
}
/* w (a column's) with row r's values. */
__device__ __forceinline__ epi_vecs epi_row_vecs(const mmt_epilogue& E, long long r, epi_vecs w) {
#if EPI_SCALE_ROW
  w.scale_row = __ldg(E.scale_row + r);
#endif
#if EPI_BIAS == 2 && EPI_BIAS_F32
  w.bias = __ldg(reinterpret_cast<const float*>(E.bias) + r);
#elif EPI_BIAS == 2
  w.bias = epi_from_out(reinterpret_cast<const out_t*>(E.bias)[r]);
#endif
  return w;
}
__device__ __forceinline__ epi_vecs epi_vecs_at(const mmt_epilogue& E, long long r, long long c) {
  return epi_row_vecs(E, r, epi_col_vecs(E, c));
}

/* alpha * P[r][c] (v) scaled and biased by the vectors' values w there: x of gen.h's formula. */
__device__ __forceinline__ float epi_x_with(const mmt_epilogue& E, float v, const epi_vecs& w) {
#if EPI_SCALE_ROW
  v *= w.scale_row;
#endif
#if EPI_SCALE_COL
  v *= w.scale_col;
#endif
#if EPI_SCALE_TENSOR /* the same two floats for every element */
  v *= epi_tensor_scale(E.scale_row) * epi_tensor_scale(E.scale_col);
#endif
#if EPI_BIAS
  v += w.bias;
#endif
  return v;
}

__device__ __forceinline__ float epi_x(const mmt_epilogue& E, float v, long long r, long long c) {
  return epi_x_with(E, v, epi_vecs_at(E, r, c));
}

/* beta * C[r][c], or 0 without reading C. */
__device__ __forceinline__ float epi_c(const out_t* C, int ldc, float beta, long long r,
                                       long long c) {
  return EPI_BETA(beta) == 0.0f ? 0.0f : beta * epi_from_out(C[r * ldc + c]);
}

/* D[r][c]'s value before it is rounded (not gated): act(x + beta * C[r][c]). */
__device__ __forceinline__ float epi_value(const mmt_epilogue& E, const out_t* C, int ldc,
                                           float beta, long long r, long long c, float v) {
  return epi_act(epi_x(E, v, r, c) + epi_c(C, ldc, beta, r, c));
}

#if EPI_OUT == 1 || EPI_OUT == 2
/* Two values of a 16-bit D as one 32-bit pair, lo at the lower address. */
__device__ __forceinline__ unsigned epi_pack2(float lo, float hi) {
  return (unsigned)epi_to_out(lo) | (unsigned)epi_to_out(hi) << 16;
}
#endif

#if (EPI_OUT == 1 || EPI_OUT == 2) && !EPI_GATED
/* A 16-bit D's pairs in runs, for a kernel's path over whole tiles: the reads of a run of pairs
 * first, then their values and stores.  D may be C (in place), so a read that follows a store
 * in program order is issued after it: a kernel that read and stored pair by pair waited on
 * memory once a pair, and the bias and residual ops of a cooperative 128 x 256 wgmma kernel
 * took a tenth more time than its plain GEMM (8192 x 4096 x 4096 f16, H100).  The per-column
 * vectors of a run of columns (epi_col_vecs) are read once for the tile's rows, C's pairs
 * (epi_c_pair, 4-byte aligned) once a row.  EPI_RUN: groups of four pairs a run, so that a
 * run's reads take at most about 32 registers. */
#define EPI_RUN ((EPI_BIAS == 1) + EPI_SCALE_COL >= 2 ? 1 : (EPI_BIAS == 1) + EPI_SCALE_COL ? 2 : 4)
__device__ __forceinline__ unsigned epi_c_pair(const out_t* C, int ldc, float beta, long long r,
                                               long long c) {
  return EPI_BETA(beta) == 0.0f ? 0u : *reinterpret_cast<const unsigned*>(C + r * ldc + c);
}
/* D's pair from alpha * P's (v0, v1), the vectors' values there (w0, w1) and C's pair c2. */
__device__ __forceinline__ unsigned epi_pair(const mmt_epilogue& E, float beta, unsigned c2,
                                             const epi_vecs& w0, const epi_vecs& w1, float v0,
                                             float v1) {
  float x0 = epi_x_with(E, v0, w0), x1 = epi_x_with(E, v1, w1);
  if (EPI_BETA(beta) != 0.0f) {
    x0 += beta * epi_from_out((out_t)(c2 & 0xffffu));
    x1 += beta * epi_from_out((out_t)(c2 >> 16));
  }
  return epi_pack2(epi_act(x0), epi_act(x1));
}
#endif

#if !EPI_GATED
__device__ __forceinline__ void epi_store(const mmt_epilogue& E, const out_t* C, int ldc,
                                          float beta, long long r, long long c,
                                          float v EPI_AMAX_PARAM) {
  epi_d(E)[r * E.ldd + c] = epi_out(E, epi_value(E, C, ldc, beta, r, c, v) EPI_AMAX_ARG);
}
#endif

#if EPI_GATED
/* D[r][c / 2]'s value before it is rounded: act(gate) * up + beta * C[r][c / 2]. */
__device__ __forceinline__ float epi_gate_value(const mmt_epilogue& E, const out_t* C, int ldc,
                                                float beta, long long r, long long c, float vg,
                                                float vu) {
  return epi_act(epi_x(E, vg, r, c)) * epi_x(E, vu, r, c + 1) + epi_c(C, ldc, beta, r, c >> 1);
}

__device__ __forceinline__ void epi_gate(const mmt_epilogue& E, const out_t* C, int ldc,
                                         float beta, long long r, long long c, float vg,
                                         float vu EPI_AMAX_PARAM) {
  epi_d(E)[r * E.ldd + (c >> 1)] =
      epi_out(E, epi_gate_value(E, C, ldc, beta, r, c, vg, vu) EPI_AMAX_ARG);
}
#endif

__device__ __forceinline__ void epi_store2(const mmt_epilogue& E, const out_t* C, int ldc,
                                           float beta, long long r, long long c, float v0,
                                           float v1, bool two EPI_AMAX_PARAM) {
#if EPI_GATED
  epi_gate(E, C, ldc, beta, r, c, v0, v1 EPI_AMAX_ARG);
#else
  const float x0 = epi_value(E, C, ldc, beta, r, c, v0);
  out_t* const d = epi_d(E) + r * E.ldd + c;
  if (!two) {
    d[0] = epi_out(E, x0 EPI_AMAX_ARG);
    return;
  }
  const float x1 = epi_value(E, C, ldc, beta, r, c + 1, v1);
  if ((reinterpret_cast<unsigned long long>(d) & (2 * sizeof(out_t) - 1)) == 0) {
#if EPI_OUT == 0
    *reinterpret_cast<float2*>(d) = make_float2(x0, x1);
#elif EPI_OUT >= 3
    *reinterpret_cast<unsigned short*>(d) = epi_out2(E, x0, x1 EPI_AMAX_ARG);
#else
    *reinterpret_cast<unsigned*>(d) = epi_pack2(x0, x1);
#endif
  } else {
    d[0] = epi_out(E, x0 EPI_AMAX_ARG);
    d[1] = epi_out(E, x1 EPI_AMAX_ARG);
  }
#endif
}
