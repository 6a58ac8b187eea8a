-- reg_tiled.lua: the fp32 SIMT register-blocked GEMM (the CUTLASS SIMT / "how to optimize a
-- CUDA matmul" recipe), the template meant to come close to cuBLAS SGEMM without tensor cores.
--
-- A block computes a BM x BN tile of C and walks K in steps of BK.  Each step stages a BM x BK
-- tile of A (stored transposed, As[k][m]) and a BK x BN tile of B (Bs[k][n]) in shared memory;
-- each thread then accumulates a TM x TN tile of C in registers as BK outer products of a TM
-- column of As and a TN row of Bs, both contiguous, so they are read with float4 loads.
-- Threads are grouped into warp tiles (4 x 8 threads where the block allows) so that a warp
-- reads few distinct shared-memory words per step and stores whole 128-byte lines of C.
-- The pipeline depth (STAGES), vector width of global loads (VEC), shared-memory padding and
-- block-order swizzle are parameters; see the comment block of the emitted source.
-- A and B may be stored either way (layouts nn, nt, tn, tt): a tile is read along whichever
-- of its dimensions is contiguous in memory, and whichever operand arrives with K
-- contiguous is transposed on its way into shared memory, so the compute loop is the same
-- for all four.
-- split > 1 adds split-K for problems with few tiles of C (skinny or deep-K): grid.z slices of
-- K, whose partial sums meet in an fp32 workspace, where the last slice of a tile adds them in
-- slice order and writes C (the split_k snippet and library).  With split = 1 the
-- preprocessor leaves exactly the kernel without it.
--
-- The default is the classic 128 x 128 block of 256 threads with an 8 x 8 register tile and a
-- register-prefetch double buffer (stages=2), float4 loads (vec=4) and group=8: the shape
-- that is fast on large square problems on every recent GPU.  vec=4 kernels declare what they
-- need in `requires` (K % 4, N % 4, 16-byte alignment); problems that do not meet it are
-- served by a vec=1 config (tuned) or by another template, as the dispatcher decides.

local gemm, limits, split_k = mmt.lib("gemm"), mmt.lib("limits"), mmt.lib("split_k")
local epilogue = mmt.lib("epilogue")

-- Global -> registers -> shared memory (stages 1 and 2).  A is transposed on the way in.
local loaders_regs = [[

  /* The next tile in flight, in registers (zero outside the matrices). */
  float a_ld[A_LOADS * ALV], b_ld[B_LOADS * BLV];
  auto load_regs = [&]() { /* global -> registers: the next tile (zeros past the end of K) */
]] .. gemm.operands([[
#pragma unroll
    for (int l = 0; l < ${X}_LOADS; ++l) {
      const int dr = l * THREADS / ${X}_CH, dc = l * THREADS % ${X}_CH * ${X}LV;
      load_vec<${X}LV>(&${x}_ld[l * ${X}LV], ${x}_src + dr * (long long)ld${x} + dc, ${x}_in(${x}_r + dr, ${x}_c + dc));
    }
]]) .. [[
    a_src += a_step;
    b_src += b_step;
    k_left -= BK;
  };
  auto store_smem = [&](int stage) { /* registers -> shared memory stage, as As[k][m], Bs[k][n] */
    float* const as = As + stage * AS_SIZE;
    float* const bs = Bs + stage * BS_SIZE;
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
      const int r = a_r + l * THREADS / A_CH, c = a_c + l * THREADS % A_CH * ALV;
      if constexpr (A_T) {
        store_vec<ALV>(as + r * AS_LD + c, &a_ld[l * ALV]);
      } else {
#pragma unroll
        for (int j = 0; j < ALV; ++j) as[(c + j) * AS_LD + r] = a_ld[l * ALV + j];
      }
    }
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
      const int r = b_r + l * THREADS / B_CH, c = b_c + l * THREADS % B_CH * BLV;
      if constexpr (B_T) {
#pragma unroll
        for (int j = 0; j < BLV; ++j) bs[(c + j) * BS_LD + r] = b_ld[l * BLV + j];
      } else {
        store_vec<BLV>(bs + r * BS_LD + c, &b_ld[l * BLV]);
      }
    }
  };
]]

-- Global -> shared memory with cp.async (stages 3): zero-filled past the edges by src-size 0.
-- ${dst}: where element (r, c) of the stored tile goes, As[k][m] and Bs[k][n] whichever way
-- the operand is stored.
local loaders_async = [[

  auto copy_async = [&](int stage) { /* the next tile into stage */
    float* const as = As + stage * AS_SIZE;
    float* const bs = Bs + stage * BS_SIZE;
]] .. gemm.operands([[
#pragma unroll
    for (int l = 0; l < ${X}_LOADS; ++l) {
      const int r = ${x}_r + l * THREADS / ${X}_CH, c = ${x}_c + l * THREADS % ${X}_CH * ${X}LV;
      const bool ok = ${x}_in(r, c);
      const float* src = ok ? ${x}_src + (r - ${x}_r) * (long long)ld${x} + (c - ${x}_c) : ${X};
      cp_async<4 * ${X}LV>(${dst}, src, ok);
    }
]], {dst = "A_T ? as + r * AS_LD + c : as + c * AS_LD + r"},
    {dst = "B_T ? bs + c * BS_LD + r : bs + r * BS_LD + c"}) .. [[
    a_src += a_step;
    b_src += b_step;
    k_left -= BK;
  };
]]

local async_helpers = [[

/* cp.async (sm_80+): global -> shared without registers.  src-size 0 copies nothing and
 * zero-fills the destination (src must still be a valid address: callers pass the base). */
static __device__ __forceinline__ unsigned smem_u32(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
template <int BYTES> __device__ __forceinline__ void cp_async(float* dst, const float* src, bool ok) {
  if constexpr (BYTES == 16) /* .cg: L2 only, 16 bytes only */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_u32(dst)), "l"(src), "r"(ok ? 16 : 0) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                 :: "r"(smem_u32(dst)), "l"(src), "n"(BYTES), "r"(ok ? BYTES : 0) : "memory");
}
static __device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> static __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
]]

local main_loops = {
  [1] = [[
  for (int kt = 0; kt < k_tiles; ++kt) {
    load_regs();
    store_smem(0);
    __syncthreads();
    compute(0);
    __syncthreads(); /* the next step overwrites the stage */
  }
]],
  [2] = [[
  load_regs();
  store_smem(0);
  __syncthreads();
  for (int kt = 0; kt < k_tiles; ++kt) {
    /* Unconditional, so that the compiler issues the loads before the math: past the end
     * every load is predicated off (zeros) and the stage written is never read. */
    load_regs(); /* tile kt + 1: in flight while tile kt is computed */
    compute(kt & 1);
    /* Stage (kt + 1) & 1 was last read in step kt - 1, which every thread has finished. */
    store_smem((kt + 1) & 1);
    __syncthreads();
  }
]],
  [3] = [[
  /* Ring of STAGES stages: tile t lives in stage t % STAGES; one commit group per tile (empty
   * past the end, so that wait_group counts stay uniform). */
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) copy_async(s);
    cp_async_commit();
  }
  int read = 0, write = STAGES - 1;
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>(); /* this thread's copies of tile kt have landed */
    __syncthreads(); /* everyone's have, and everyone is done with tile kt - 1 (stage write) */
    if (kt + STAGES - 1 < k_tiles) copy_async(write); /* tile kt + STAGES - 1 */
    cp_async_commit();
    compute(read);
    read = read == STAGES - 1 ? 0 : read + 1;
    write = write == STAGES - 1 ? 0 : write + 1;
  }
]],
}

-- Epilogue stores of one VB-wide piece v of row c_row at column c (when beta == 0, C is not
-- read).
local store_vec4 = [[
      if (c < n_left) { /* N % 4 == 0 and c % VB == 0: the whole piece is inside C */
        if (beta != 0.0f) {
          float old[VB];
          load_vec<VB>(old, c_row + c, true);
#pragma unroll
          for (int j = 0; j < VB; ++j) v[j] += beta * old[j];
        }
        store_vec<VB>(c_row + c, v);
      }]]
local store_scalar = [[
#pragma unroll
      for (int j = 0; j < VB; ++j) {
        if (c + j >= n_left) break;
        ${ctype}* const p = c_row + c + j;
        *p = beta == 0.0f ? v[j] : v[j] + beta * *p;
      }]]

-- The plain GEMM's epilogue.
local plain_epilogue = [[
  /* Epilogue: C = alpha * acc + beta * C, masked at the edges of C. */
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = warp_m * WM + i / VA * (WY * VA) + ly * VA + i % VA; /* row in the tile */
    if (r >= m_left) continue;
    ${ctype}* const c_row = C + (row0 + r) * (long long)ldc + col0;
#pragma unroll
    for (int cb = 0; cb < TN / VB; ++cb) {
      const int c = warp_n * WN + cb * (WX * VB) + lx * VB; /* column in the tile */
      float v[VB];
#pragma unroll
      for (int j = 0; j < VB; ++j) v[j] = alpha * acc[i][cb * VB + j];
#if VEC == 4
]] .. store_vec4 .. [[

#else
]] .. store_scalar .. [[

#endif
    }
  }
]]

-- An op kernel's (lib/epilogue.lua): the same walk, each VB-wide piece (VB = 4: TN is 4 or 8)
-- stored as pairs of neighbouring columns by epi_store2, C and D at any alignment.
local op_epilogue = [[
  /* Epilogue (the epilogue snippet): D = the op of alpha * acc and beta * C, masked at the
   * edges; a piece's columns c + j, c + j + 1 (c a multiple of VB, VB even) are a pair. */
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = warp_m * WM + i / VA * (WY * VA) + ly * VA + i % VA; /* row in the tile */
    if (r >= m_left) continue;
#pragma unroll
    for (int cb = 0; cb < TN / VB; ++cb) {
      const int c = warp_n * WN + cb * (WX * VB) + lx * VB; /* column in the tile */
#pragma unroll
      for (int j = 0; j < VB; j += 2)
        if (c + j < n_left)
          epi_store2(E, C, ldc, beta, row0 + r, col0 + c + j, alpha * acc[i][cb * VB + j],
                     alpha * acc[i][cb * VB + j + 1], c + j + 1 < n_left);
    }
  }
]]

local tile_order = mmt.snippet("tile_order")

-- The kernel.  Its variants are chosen by its own #defines (#if), as in every template: the
-- emitted source names each parameter once and can be read, and changed, on its own.
local source = [[
/*
 * ${name} -- mmtune template "reg_tiled", ${ctype}, row-major, layout ${layout}:
 * C = alpha * op(A)*op(B) + beta * C, A stored ${a_doc}, B stored ${b_doc}.
 * SIMT register-blocked GEMM.  A block computes a BM x BN tile of C, walking K in steps of BK:
 * each step stages a BM x BK tile of A, stored transposed (As[k][m]), and a BK x BN tile of B
 * (Bs[k][n]) in shared memory; each thread accumulates a TM x TN tile of C in registers as BK
 * outer products of a TM column of As and a TN row of Bs, both contiguous, read as float4.
 * Tiles hanging over the edge of a matrix are zero-filled and stores are masked, so any
 * M, N, K >= 1 works (within what VEC requires).
 *
 * Parameters:
 *   BM     = ${d_bm} rows of C per block
 *   BN     = ${d_bn} columns of C per block
 *   BK     = ${d_bk} K step: columns of A and rows of B staged per pipeline stage
 *   TM     = ${d_tm} rows of C per thread (the register tile), read as TM/4 float4 of As
 *   TN     = ${d_tn} columns of C per thread, read as TN/4 float4 of Bs
 *   VEC    = ${d_vec} global access width.  1: scalar loads and stores, nothing required of
 *                 the problem.  4: float4 loads of A and B (along their contiguous
 *                 dimension), float4 stores of C; requires that dimension of A and of B, and
 *                 N, to be multiples of 4 and 16-byte aligned A, B, C and row pitches
 *   STAGES = ${d_stages} pipeline depth.  1: one buffer (load, sync, compute, sync).  2: two
 *                 buffers; the next tile is loaded into registers while the current one is
 *                 computed, one sync per step.  3: a ring of three buffers filled by cp.async
 *                 (sm_80+); an operand stored with K contiguous is copied 4 bytes at a
 *                 time (the copy transposes it), the other 4 * VEC bytes at a time
 *   PAD    = ${d_pad} floats of padding per shared-memory row: staggers the banks of the
 *                 transposed stores into As, keeps rows 16-byte aligned
 *   GROUP  = ${d_group} block-order swizzle: consecutive blocks walk down GROUP block rows before
 *                 moving one block column right, so the blocks running at one time share
 *                 rows of A and columns of B in L2 (1: plain row-major block order; a grid
 *                 at most 8 blocks tall or wide: see the tile_order snippet)]] .. split_k.doc .. [[

 * Derived: THREADS = (BM/TM) * (BN/TN) = ${threads} threads per block, in warps of WY x WX =
 * ${wy} x ${wx} threads; a warp computes a WM x WN = ${wm} x ${wn} warp tile of C, thread (ly, lx)
 * holding rows ly*VA + c*WY*VA + (0..VA-1) and columns lx*VB + c*WX*VB + (0..VB-1) of it.
 * Launch: block (THREADS, 1, 1), grid (ceil(N / BN), ceil(M / BM), SPLIT), dynamic shared memory
 * STAGES * BK * ((BM + PAD) + (BN + PAD)) * 4 = ${shared_bytes} bytes.
 * Correct for any M, N, K >= 1 with lda, ldb at least the stored row widths, ldc >= N (and
 * what VEC requires);
 * K == 0 writes alpha * 0 + beta * C; when beta == 0, C is not read (a NaN already in C is
 * overwritten, as in BLAS).
 */
${defines}
#define A_T ${a_t} /* 1: A stored transposed, K rows of M (lda >= M); 0: M rows of K (lda >= K) */
#define B_T ${b_t} /* 1: B stored transposed, N rows of K (ldb >= K); 0: K rows of N (ldb >= N) */

#define TY (BM / TM)         /* threads along M */
#define TX (BN / TN)         /* threads along N */
#define THREADS (TY * TX)
#define VA (TM < 4 ? TM : 4) /* floats per shared-memory read of the A fragment */
#define VB (TN < 4 ? TN : 4) /* floats per shared-memory read of the B fragment */
#define AS_LD (BM + PAD)     /* row pitch of As[k][m] */
#define BS_LD (BN + PAD)     /* row pitch of Bs[k][n] */
#define AS_SIZE (BK * AS_LD) /* floats of As per stage */
#define BS_SIZE (BK * BS_LD) /* floats of Bs per stage */
/* Warp tile: WY x WX threads per warp (WX along N), computing WM x WN of C. */
#define WX ${wx}
#define WY (32 / WX)
#define WM (WY * TM)
#define WN (WX * TN)
/* Tile loads, over the tiles as stored: ROWS x COLS, COLS contiguous in memory.  ALV, BLV
 * floats per global load (VEC, or 1 when cp.async copies an operand stored with K
 * contiguous: that copy transposes it); CH loads per stored row; LOADS per thread per tile. */
#define A_ROWS (A_T ? BK : BM)
#define A_COLS (A_T ? BM : BK)
#define B_ROWS (B_T ? BN : BK)
#define B_COLS (B_T ? BK : BN)
#define ALV ${alv}
#define BLV ${blv}
#define A_CH (A_COLS / ALV)
#define A_LOADS (A_ROWS * A_CH / THREADS)
#define B_CH (B_COLS / BLV)
#define B_LOADS (B_ROWS * B_CH / THREADS)
/* Blocks per SM asked of the compiler (__launch_bounds__): 65536 / (THREADS * MIN_BLOCKS)
 * registers per thread at most. */
#define MIN_BLOCKS ${min_blocks}

/* W (1, 2 or 4) consecutive floats at p into r, or zeros when !ok; p is 4W-byte aligned. */
template <int W> __device__ __forceinline__ void load_vec(float* r, const float* p, bool ok) {
  if constexpr (W == 4) {
    const float4 v = ok ? *reinterpret_cast<const float4*>(p) : make_float4(0.f, 0.f, 0.f, 0.f);
    r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
  } else if constexpr (W == 2) {
    const float2 v = ok ? *reinterpret_cast<const float2*>(p) : make_float2(0.f, 0.f);
    r[0] = v.x; r[1] = v.y;
  } else {
    r[0] = ok ? *p : 0.f;
  }
}

/* r[0..W-1] to the W consecutive floats at p (4W-byte aligned). */
template <int W> __device__ __forceinline__ void store_vec(float* p, const float* r) {
  if constexpr (W == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(r[0], r[1], r[2], r[3]);
  } else if constexpr (W == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(r[0], r[1]);
  } else {
    *p = r[0];
  }
}
]] .. "#if STAGES == 3" .. async_helpers .. "#endif" .. split_k.helpers .. [[
${tile_order}${epilogue}
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
]] .. gemm.abi .. split_k.param .. [[)
{
${batch}  extern __shared__ float4 mmt_smem[];                  /* 16-byte aligned */
  float* const As = reinterpret_cast<float*>(mmt_smem); /* [STAGES][BK][AS_LD], A transposed */
  float* const Bs = As + STAGES * AS_SIZE;              /* [STAGES][BK][BS_LD] */

]] .. gemm.tile .. split_k.slice .. [[
  /* This thread's place: warp (warp_m, warp_n) of the block, lane (ly, lx) of the warp. */
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = warp / (TX / WX), warp_n = warp % (TX / WX);
  const int ly = lane / WX, lx = lane % WX;

  /* Tile loads: load l of this thread covers element or vector tid + l * THREADS of the stored
   * tile, row (tid + l * THREADS) / CH, so neighbouring threads read neighbouring addresses. */
  const int a_r = tid / A_CH, a_c = tid % A_CH * ALV; /* stored row, column of load 0 */
  const int b_r = tid / B_CH, b_c = tid % B_CH * BLV;
  const float* a_src = A + (A_T ? (long long)a_r * lda + row0 + a_c  /* load 0 of the next tile */
                                : (row0 + a_r) * (long long)lda + a_c);
  const float* b_src = B + (B_T ? (col0 + b_r) * (long long)ldb + b_c
                                : (long long)b_r * ldb + col0 + b_c);
]] .. gemm.k_walk .. gemm.in_tile .. [[
#if STAGES == 3
]] .. loaders_async .. [[
#else
]] .. loaders_regs .. [[
#endif
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  /* Outer products over one staged tile.  This thread's fragments start at As[k][a_frag] and
   * Bs[k][b_frag]; the VA-wide pieces of A lie WY * VA apart, those of B WX * VB apart. */
  const int a_frag = warp_m * WM + ly * VA, b_frag = warp_n * WN + lx * VB;
  auto compute = [&](int stage) {
    const float* as = As + stage * AS_SIZE + a_frag;
    const float* bs = Bs + stage * BS_SIZE + b_frag;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int c = 0; c < TM / VA; ++c) load_vec<VA>(&a[c * VA], as + kk * AS_LD + c * (WY * VA), true);
#pragma unroll
      for (int c = 0; c < TN / VB; ++c) load_vec<VB>(&b[c * VB], bs + kk * BS_LD + c * (WX * VB), true);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  };

  /* K / BK rounded up, without overflowing K + BK - 1. */
  const int k_tiles = K / BK + (K % BK != 0);
#if STAGES == 1
]] .. main_loops[1] .. [[
#elif STAGES == 2
]] .. main_loops[2] .. [[
#else
]] .. main_loops[3] .. [[
#endif
]] .. split_k.reduce .. [[
${epilogue_loop}}
]]

local MAX_REGS = 200 -- cap of the register estimate (255 is the hardware limit)
local REG_MARGIN = 16 -- registers the estimate leaves free (ptxas needs more than it counts)

-- Everything derived from a config and layout (shared by constraints and emit).
local function derive(p, layout)
  local d = {}
  d.ty, d.tx = p.bm // p.tm, p.bn // p.tn
  d.threads = d.ty * d.tx
  -- Warp shape: 4 x 8 threads (a warp then reads 4 float4 of As and 8 of Bs per piece, and
  -- stores 128-byte lines of C); narrower blocks take a taller warp, shorter ones a wider.
  if d.tx < 8 then
    d.wx = d.tx
  elseif d.ty < 4 then
    d.wx = 32 // d.ty
  else
    d.wx = 8
  end
  d.wy = 32 // d.wx
  -- cp.async cannot transpose: an operand stored with K contiguous goes 4 bytes at a time
  d.a_t, d.b_t = gemm.transposed(layout)
  d.alv = (p.stages == 3 and not d.a_t) and 1 or p.vec
  d.blv = (p.stages == 3 and d.b_t) and 1 or p.vec
  d.a_loads = p.bm * p.bk / d.alv / d.threads -- a float: integral when the split is even
  d.b_loads = p.bk * p.bn / d.blv / d.threads
  d.shared_bytes = p.stages * p.bk * ((p.bm + p.pad) + (p.bn + p.pad)) * 4
  -- Registers: accumulators, one fragment of each, ~24 for addresses and indices, and the
  -- tile in flight: the staged floats (stages 1, 2) or, for cp.async, about one register per
  -- copy (capped: the copies of a large tile share affine addresses).
  local in_flight
  if p.stages <= 2 then
    in_flight = (p.bm * p.bk + p.bk * p.bn) // d.threads
  else
    in_flight = math.min(math.floor(d.a_loads + d.b_loads), 16)
  end
  d.regs = p.tm * p.tn + p.tm + p.tn + 24 + in_flight
  -- The estimate must leave REG_MARGIN of the budget free (the SM's registers shared by the
  -- block's threads, 255 per thread at most, MAX_REGS by choice).  Occupancy hint (__launch_bounds__ minimum blocks):
  -- when the estimate fits 128 registers with that margin, ask for 16 warps per SM (at most
  -- 128 registers per thread) and as many blocks as shared memory lets in; otherwise leave
  -- the compiler free (up to 255 registers, one block of up to 256 threads).
  d.reg_limit = math.min(MAX_REGS, limits.regs_per_thread(d.threads) - REG_MARGIN)
  d.min_blocks = 1
  if d.regs + REG_MARGIN <= 128 and d.threads <= 256 then
    d.min_blocks = math.max(1, math.min(512 // d.threads, limits.blocks_by_shared(d.shared_bytes)))
  end
  return d
end

-- split = 1 keeps the name (and source) of the kernel without split-K.
local function kernel_name(p, layout)
  return gemm.tiled_name(string.format("mmt_reg_tiled_%s_m%d_n%d_k%d_tm%d_tn%d_v%d_s%d_p%d_g%d",
                                       layout, p.bm, p.bn, p.bk, p.tm, p.tn, p.vec, p.stages,
                                       p.pad, p.group), p.split)
end

-- The space, in the order of the kernel's #defines and comment block (gemm.param_vars).
local params = {
  {name = "bm", values = {32, 64, 128, 256}},
  {name = "bn", values = {32, 64, 128, 256}},
  {name = "bk", values = {8, 16, 32}},
  {name = "tm", values = {4, 8, 16}},
  {name = "tn", values = {4, 8}},
  {name = "vec", values = {1, 4}},
  {name = "stages", values = {1, 2, 3}},
  {name = "pad", values = {0, 4}},
  {name = "group", values = {1, 8}},
  {name = "split", values = {1, 2, 4, 8, 16}},
}

return {
  name = "reg_tiled",
  description = "SIMT register-blocked GEMM: TM x TN per thread, float4, pipelined, split-K",
  dtypes = {"f32"}, layouts = gemm.LAYOUTS, epilogues = true,
  params = params,
  default = {bm = 128, bn = 128, bk = 8, tm = 8, tn = 8, vec = 4, stages = 2, pad = 4, group = 8,
             split = 1},

  constraints = function(p, prob, dtype, layout, op)
    local ok, why = epilogue.fits(op, prob, true, p.split == 1, false, true)
    if not ok then return false, why end
    if p.tm > p.bm or p.tn > p.bn then
      return false, "the thread tile is larger than the block tile"
    end
    if p.tm > 2 * p.tn or p.tn > 2 * p.tm then
      return false, "thread tile more than twice as tall as wide (or wide as tall)"
    end
    if p.bm > 4 * p.bn or p.bn > 4 * p.bm then
      return false, "block tile more than four times as tall as wide (or wide as tall)"
    end
    -- The layout decides which operand cp.async copies 4 bytes at a time (stages = 3), hence
    -- the loads per thread and the registers.
    local d = derive(p, layout)
    if d.threads < 64 or d.threads > 512 then
      return false, string.format("(bm/tm)*(bn/tn) = %d threads, outside 64..512", d.threads)
    end
    -- split-K in one pipelined variant per block shape keeps the space at about 1.7 times
    -- the space without it instead of 5 times
    return gemm.tiled_fits(p, prob, d, d.shared_bytes,
                           p.stages >= 2 and p.pad == 4 and p.group == 1,
                           "stages 2 or 3, pad=4, group=1")
  end,

  emit = function(p, dtype, layout, op)
    local name = epilogue.name(kernel_name(p, layout), op)
    local d = derive(p, layout)
    local vars = gemm.vars(name, dtype, layout, {
      threads = d.threads, wx = d.wx, wy = d.wy, wm = d.wy * p.tm, wn = d.wx * p.tn,
      alv = d.alv, blv = d.blv, min_blocks = d.min_blocks, shared_bytes = d.shared_bytes,
      tile_order = tile_order, split_a = "A", split_b = "B",
      epilogue = epilogue.source(op, p.split == 1),
      epilogue_loop = op and op_epilogue or mmt.subst(plain_epilogue, {ctype = "float"}),
    })
    gemm.param_vars(vars, p, params)
    epilogue.vars(vars, op)
    local req
    if p.vec == 4 then -- whole float4 along each contiguous dimension: A's, B's and C's (N)
      req = {m_multiple = d.a_t and 4 or 1, n_multiple = 4,
             k_multiple = (not d.a_t or d.b_t) and 4 or 1, align = 16}
    else
      req = {m_multiple = 1, n_multiple = 1, k_multiple = 1, align = mmt.dtype(dtype).bytes}
    end
    return gemm.tiled_kernel(p, name, mmt.subst(source, vars), d.threads, d.shared_bytes, req,
                             false)
  end,
}
