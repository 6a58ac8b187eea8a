-- wgmma.lua: the Hopper (sm_90a) GEMM for f16, bf16 (fp32 accumulation, output in the input
-- type) and tf32 (f32 data, tf32 tensor-core math, f32 output): the CUTLASS sm90
-- warp-specialized / "fast.cu" recipe.  wgmma.mma_async reads both operands from a
-- multi-stage shared-memory ring that TMA (cp.async.bulk.tensor) fills, completion signalled
-- on mbarriers; one producer warpgroup issues the copies, 1 or 2 consumer warpgroups issue the
-- wgmma, and setmaxnreg moves registers from the producer to the consumers.
--
-- A block computes a BM x BN tile of C, walking K in steps of BK = 128 bytes (64 f16/bf16 or
-- 32 tf32 elements: one 128-byte swizzle row).  Each operand tile is staged as TMA copies it,
-- as stored (its contiguous dimension stays contiguous) with the 128-byte swizzle (an MN-major
-- B of 32 or 16 columns: the 64- or 32-byte one), and the
-- wgmma descriptors describe it as K-major or MN-major (the transpose immediates).  tf32
-- wgmma reads K-major operands only from shared memory, but its A may come from registers
-- instead: an MN-major A (layout tt; nn with swap, where the kernel's A is B) is loaded by
-- the consumers themselves, element by element, into wgmma's register fragments (RS), and
-- its B must be K-major (tf32 serves nt, tt, and nn with swap; not tn).  Consumer warpgroup w
-- computes rows w*BM/CONSUMERS.. of the tile with BM/CONSUMERS/64 wgmma m64nBN per k-step,
-- fp32 accumulators in registers; the epilogue stores them from registers, masked (16-bit
-- types: 16-byte stores after an exchange among the lanes of a quad).
--
-- The default is 128 x 256 with 2 consumers (m64n256k16 each, 128 accumulators a thread), a
-- 4-stage ring (192 KiB), one block per SM and group=8: the fast.cu / CUTLASS shape for large
-- square problems.
--
-- split > 1 adds split-K for problems with few tiles of C: grid.z = split slices of the K
-- tiles, which meet in an fp32 workspace (the split_k snippet, as in reg_tiled and mma_sync:
-- C rounded once, the same bits from run to run).
--
-- persist = 1 walks the tiles on a per-SM grid (the producer loads the next tile's K tiles
-- while the consumers store this one); persist = 2 (ping-pong) gives each consumer whole
-- tiles in turn, so that one's epilogue overlaps the other's wgmma.  A persistent op kernel
-- walks its whole batch's tiles.
--
-- cluster = 2 launches the blocks in thread-block clusters of two tile rows that share their
-- tile of B: each block loads half of each B stage and TMA multicasts it into both blocks'
-- rings, so the SMs pull a third (128 x 256 tiles) to a half (square tiles) less of B's
-- sectors from L2.  That pays where A's or B's rows straddle 32-byte sectors (3000^3 in 16
-- bits), not on rows of whole sectors, where the constraints refuse it.

local gemm, limits, split_k = mmt.lib("gemm"), mmt.lib("limits"), mmt.lib("split_k")
local epilogue = mmt.lib("epilogue")

-- The epilogues' loops over this thread's rows of the tile (64-row block i, half h: row
-- r0 + i * 64 + h * 8 of the block tile) around `body`, which starts inside them.
local function each_row(body)
  return [[
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
]] .. body .. [[
        }
]]
end

-- The epilogue, per element size.  f32 (tf32): a thread holds pairs of neighbouring columns
-- (8 bytes); in the common case two lanes swap pairs first, so that each stores 16 bytes (half
-- the store instructions: with a short K the epilogue is most of the kernel's time).
local epilogue32 = [[
    /* Epilogue: C = alpha * acc + beta * C, masked at the edges of C; each thread holds pairs
     * of neighbouring columns (accumulators 4j + 2h, 4j + 2h + 1: row ... + 8h, columns
     * 8j + 2 * (lane % 4), + 1).  A tile wholly inside C with beta == 0 (the common case)
     * takes a path without tests, where (up to 96 accumulators a thread) lanes q and q ^ 1
     * (q = lane % 4) swap a pair of strips 2u and 2u + 1: an even lane then holds columns
     * 16u + 2q .. + 3, an odd one 16u + 8 + 2(q - 1) .. + 3, one 16-byte store each (C's base
     * and pitch 16-byte aligned: c_vec16); with more it stores its pairs as they are.
     * Otherwise each pair is stored as it is; c_vec: C's base and row pitch allow
     * the 8-byte pair stores (always, but for a repack kernel, which leaves a misaligned C in
     * place: it then stores one element at a time). */
    const int r0 = cw * WG_M + warp * 16 + lane / 4; /* first row of this thread in the tile */
    const unsigned c_low = (unsigned)((reinterpret_cast<unsigned long long>(Cg) |
                                       (unsigned long long)ldc * sizeof(elem_t)) & 15);
    const bool c_vec = (c_low & 7) == 0, c_vec16 = c_low == 0;
    if (m_left >= BM && n_left >= BN && beta == 0.0f && c_vec16) {
#if MI * ACC <= 96 /* at most 96 accumulators (every 64-row block of the consumer's rows) */
      const bool odd = lane & 1;
      const int c_lane = odd ? 8 + 2 * ((lane & 3) - 1) : 2 * (lane & 3);
]] .. each_row([[
          elem_t* const c_row = Cg + (row0 + r0 + i * 64 + h * 8) * (long long)ldc + col0;
#pragma unroll
          for (int u = 0; u < BN / 16; ++u) {
            const float e0 = acc[i][8 * u + 2 * h], e1 = acc[i][8 * u + 2 * h + 1];
            const float o0 = acc[i][8 * u + 4 + 2 * h], o1 = acc[i][8 * u + 4 + 2 * h + 1];
            const float s0 = __shfl_xor_sync(0xffffffffu, odd ? e0 : o0, 1);
            const float s1 = __shfl_xor_sync(0xffffffffu, odd ? e1 : o1, 1);
            *reinterpret_cast<float4*>(c_row + 16 * u + c_lane) =
                odd ? make_float4(alpha * s0, alpha * s1, alpha * o0, alpha * o1)
                    : make_float4(alpha * e0, alpha * e1, alpha * s0, alpha * s1);
          }
]]) .. [[
#else /* 128 accumulators leave too few registers for the exchange: ptxas spills */
]] .. each_row([[
          elem_t* const c_row = Cg + (row0 + r0 + i * 64 + h * 8) * (long long)ldc + col0;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int c = j * 8 + (lane % 4) * 2;
            *reinterpret_cast<float2*>(c_row + c) =
                make_float2(alpha * acc[i][4 * j + 2 * h], alpha * acc[i][4 * j + 2 * h + 1]);
          }
]]) .. [[
#endif
    } else {
]] .. each_row([[
          const int r = r0 + i * 64 + h * 8; /* row in the block tile */
          if (r >= m_left) continue;
          elem_t* const c_row = Cg + (row0 + r) * (long long)ldc + col0;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int c = j * 8 + (lane % 4) * 2; /* column in the block tile */
            if (c >= n_left) continue;
            float v0 = alpha * acc[i][4 * j + 2 * h], v1 = alpha * acc[i][4 * j + 2 * h + 1];
            if (c_vec && c + 1 < n_left) { /* the pair is inside C: one 8-byte store */
              float2* const p = reinterpret_cast<float2*>(c_row + c);
              if (beta != 0.0f) {
                const float2 old = *p;
                v0 += beta * old.x;
                v1 += beta * old.y;
              }
              *p = make_float2(v0, v1);
            } else { /* the last column of an odd N, or a C not 8-byte aligned */
              c_row[c] = beta == 0.0f ? v0 : v0 + beta * c_row[c];
              if (c + 1 < n_left)
                c_row[c + 1] = beta == 0.0f ? v1 : v1 + beta * c_row[c + 1];
            }
          }
]]) .. [[
    }
]]

-- 16-bit: a pair of columns is 4 bytes, so the plain stores would write half sectors (twice the
-- sectors of C, four times the store instructions; at 1000^3 the epilogue was a third of the
-- kernel's time).  The four lanes of a quad exchange their pairs first (quad_transpose): lane q
-- then holds 8 neighbouring columns and stores them in one 16-byte store.
local epilogue16_helpers = [[

/* ---- epilogue: 16-byte stores of C ---- */
static __device__ __forceinline__ unsigned pick4(unsigned x0, unsigned x1, unsigned x2,
                                                 unsigned x3, int i) {
  return i == 0 ? x0 : i == 1 ? x1 : i == 2 ? x2 : x3;
}
/* A 4 x 4 transpose among the four lanes of a quad (lane % 4 = q): on entry lane t holds
 * p[jj] for jj = 0..3, on return lane q holds out[t] = lane t's p[q].  In round r lane q reads
 * lane (q + r) % 4, which sends its p[(t - r) % 4]; three shuffles, the rest selects (no
 * indexing of registers: no local memory).  Every lane of the warp must call it. */
static __device__ __forceinline__ uint4 quad_transpose(const unsigned (&p)[4], int lane) {
  const int q = lane & 3;
  unsigned got[4];
  got[0] = pick4(p[0], p[1], p[2], p[3], q);
#pragma unroll
  for (int r = 1; r < 4; ++r)
    got[r] = __shfl_sync(0xffffffffu, pick4(p[0], p[1], p[2], p[3], (q - r) & 3),
                         (lane & ~3) | ((q + r) & 3));
  uint4 out;
  out.x = pick4(got[0], got[1], got[2], got[3], (0 - q) & 3);
  out.y = pick4(got[0], got[1], got[2], got[3], (1 - q) & 3);
  out.z = pick4(got[0], got[1], got[2], got[3], (2 - q) & 3);
  out.w = pick4(got[0], got[1], got[2], got[3], (3 - q) & 3);
  return out;
}
]]
local epilogue16_pair_bits = [[
static __device__ __forceinline__ unsigned pair_bits(float lo, float hi, unsigned old,
                                                     float beta) {
  if (beta != 0.0f) {
    lo += beta * to_float((elem_t)(old & 0xffffu));
    hi += beta * to_float((elem_t)(old >> 16));
  }
  return pack2(lo, hi);
}
]]
local epilogue16 = [[
    /* Epilogue: C = alpha * acc + beta * C, masked at the edges of C.  For each group g of four
     * 8-column strips (j = 4g .. 4g + 3) a thread holds one pair of columns of each; after
     * quad_transpose, lane q holds the 8 columns of strip 4g + q: columns 32g + 8q .. + 7 of
     * its row, one 16-byte store (col0 and ldc keep it aligned: requires.align = 16).  With
     * beta != 0 the floats themselves are exchanged (lo and hi halves apart), so that C is
     * rounded once, after beta * C is added.  A tile wholly inside C with beta == 0 (the
     * common case) takes a path without tests, in a loop of its own.  c_vec: C's base and row
     * pitch allow the 16-byte stores: always, but for a repack kernel, which leaves a
     * misaligned C in place: 8-byte aligned, it stores 8 bytes at a time (and reads old C 4
     * bytes at a time); less, it stores through shared memory (below).  The general path
     * below sees C 8-byte aligned at least: its pairs of columns are 4-byte stores. */
    const int r0 = cw * WG_M + warp * 16 + lane / 4; /* first row of this thread in the tile */
    const int q = lane & 3;
    const unsigned c_low = (unsigned)((reinterpret_cast<unsigned long long>(Cg) |
                                       (unsigned long long)ldc * sizeof(elem_t)) & 15);
    const bool c_vec = c_low == 0;
    if (m_left >= BM && n_left >= BN && c_vec && beta == 0.0f) {
      /* The common case in a loop of its own: the tests of the general one below, interleaved
       * with these stores, spread this path over more code than the instruction cache holds,
       * and with a short K the epilogue is most of the kernel's time (Nsight Compute,
       * 4096x4096x64 f16, 128x256 tiles: 37% of the warps' stalls were instruction fetch). */
]] .. each_row([[
          elem_t* const c_row = Cg + (row0 + r0 + i * 64 + h * 8) * (long long)ldc + col0;
#pragma unroll
          for (int g = 0; g < BN / 32; ++g) {
            unsigned p[4];
#pragma unroll
            for (int jj = 0; jj < 4; ++jj)
              p[jj] = pack2(alpha * acc[i][4 * (4 * g + jj) + 2 * h],
                            alpha * acc[i][4 * (4 * g + jj) + 2 * h + 1]);
            *reinterpret_cast<uint4*>(c_row + g * 32 + q * 8) = quad_transpose(p, lane);
          }
]]) .. [[
#if REPACK
    } else if ((c_low & 7) != 0) {
      /* C's base or pitch is not 8-byte aligned (a repack kernel leaves such a C in place).
       * Stored from the accumulators' layout, a store would cover 8 rows and a part of each
       * of their sectors, 4 or 2 bytes at a time (4095x4097x255 f16, 2-byte rows: 0.163 ms
       * against 0.040 with the pitches padded).  Instead each warp stages its 16 rows of a
       * 64-row block in shared memory, SC columns at a time, in fp32, and stores them row by
       * row: LPR lanes a row take the 16-byte aligned blocks of its bytes, each block's 8
       * elements read from the stage where they sit, one 16-byte store where the block lies
       * wholly inside C's row, element stores at the row's two ends (0.088 ms there).  8-byte
       * rows keep the path below: two 8-byte stores a lane ran 2500x2500x64 in 0.0203 ms
       * against 0.0255 staged. */
      float* const stage = epi_stage + (cw * 4 + warp) * 16 * STAGE_LD;
      constexpr int LPR = SC / 8 + 1, RPI = 32 / LPR; /* lanes a row, rows an instruction */
#pragma unroll /* the accumulators' indices must be constants (else they go to local memory) */
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int cc = 0; cc < BN / SC; ++cc) {
#pragma unroll
          for (int jj = 0; jj < SC / 8; ++jj)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int j = cc * (SC / 8) + jj;
              *reinterpret_cast<float2*>(stage + (lane / 4 + 8 * h) * STAGE_LD + 8 * jj + 2 * q) =
                  make_float2(alpha * acc[i][4 * j + 2 * h], alpha * acc[i][4 * j + 2 * h + 1]);
            }
          __syncwarp();
          const int rt0 = cw * WG_M + i * 64 + warp * 16; /* the warp's first row in the tile */
          const int ncols = n_left - cc * SC < SC ? n_left - cc * SC : SC;
#pragma unroll 1
          for (int rr = 0; rr < 16; rr += RPI) {
            const int rs = rr + lane / LPR, b = lane % LPR; /* stage row, block */
            if (lane >= RPI * LPR || rs >= 16 || rt0 + rs >= m_left || ncols <= 0) continue;
            elem_t* const row = Cg + (row0 + rt0 + rs) * (long long)ldc + col0 + cc * SC;
            const int off = (int)((reinterpret_cast<unsigned long long>(row) & 15) / sizeof(elem_t));
            const int e0 = 8 * b - off; /* the block's first element of the row segment */
            if (e0 >= ncols) continue;
            const float* const src = stage + rs * STAGE_LD;
            if (e0 >= 0 && e0 + 8 <= ncols) {
              uint4 old = make_uint4(0u, 0u, 0u, 0u);
              if (beta != 0.0f) old = *reinterpret_cast<const uint4*>(row + e0);
              const unsigned o[4] = {old.x, old.y, old.z, old.w};
              unsigned w[4];
#pragma unroll
              for (int t = 0; t < 4; ++t)
                w[t] = pair_bits(src[e0 + 2 * t], src[e0 + 2 * t + 1], o[t], beta);
              *reinterpret_cast<uint4*>(row + e0) = make_uint4(w[0], w[1], w[2], w[3]);
            } else {
#pragma unroll
              for (int t = 0; t < 8; ++t) {
                const int e = e0 + t;
                if (e < 0 || e >= ncols) continue;
                float v = src[e];
                if (beta != 0.0f) v += beta * to_float(row[e]);
                row[e] = to_elem(v);
              }
            }
          }
          __syncwarp(); /* the stage is read before the next columns overwrite it */
        }
#endif
    } else {
]] .. each_row([[
          const int r = r0 + i * 64 + h * 8; /* row in the block tile */
          elem_t* const c_row = Cg + (row0 + (r < m_left ? r : 0)) * (long long)ldc + col0;
          if (beta == 0.0f) {
#pragma unroll
            for (int g = 0; g < BN / 32; ++g) {
              const int c = g * 32 + q * 8; /* this lane's first column after the exchange */
              unsigned p[4];
#pragma unroll
              for (int jj = 0; jj < 4; ++jj)
                p[jj] = pack2(alpha * acc[i][4 * (4 * g + jj) + 2 * h],
                              alpha * acc[i][4 * (4 * g + jj) + 2 * h + 1]);
              const uint4 v = quad_transpose(p, lane);
              if (r < m_left) {
                if (c_vec && c + 8 <= n_left) {
                  *reinterpret_cast<uint4*>(c_row + c) = v;
                } else if (c + 8 <= n_left) { /* 8-byte aligned C (repack kernels) */
                  *reinterpret_cast<uint2*>(c_row + c) = make_uint2(v.x, v.y);
                  *reinterpret_cast<uint2*>(c_row + c + 4) = make_uint2(v.z, v.w);
                } else {
                  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                  for (int t = 0; t < 4; ++t) {
                    const int ct = c + 2 * t;
                    if (ct + 1 < n_left) {
                      *reinterpret_cast<unsigned*>(c_row + ct) = w[t];
                    } else {
                      if (ct < n_left) c_row[ct] = (elem_t)(w[t] & 0xffffu);
                      if (ct + 1 < n_left) c_row[ct + 1] = (elem_t)(w[t] >> 16);
                    }
                  }
                }
              }
            }
          } else {
            /* The row's old C first, all loads in flight at once: one at a time, each waiting
             * for the store before it, they would cost a round trip to memory each. */
            uint4 old[BN / 32];
#pragma unroll
            for (int g = 0; g < BN / 32; ++g) {
              const int c = g * 32 + q * 8;
              old[g] = c_vec && r < m_left && c + 8 <= n_left
                           ? *reinterpret_cast<const uint4*>(c_row + c)
                           : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
            for (int g = 0; g < BN / 32; ++g) {
              const int c = g * 32 + q * 8;
              unsigned lo[4], hi[4];
#pragma unroll
              for (int jj = 0; jj < 4; ++jj) {
                lo[jj] = __float_as_uint(alpha * acc[i][4 * (4 * g + jj) + 2 * h]);
                hi[jj] = __float_as_uint(alpha * acc[i][4 * (4 * g + jj) + 2 * h + 1]);
              }
              const uint4 vl = quad_transpose(lo, lane), vh = quad_transpose(hi, lane);
              const float fl[4] = {__uint_as_float(vl.x), __uint_as_float(vl.y),
                                   __uint_as_float(vl.z), __uint_as_float(vl.w)};
              const float fh[4] = {__uint_as_float(vh.x), __uint_as_float(vh.y),
                                   __uint_as_float(vh.z), __uint_as_float(vh.w)};
              if (r >= m_left) continue; /* after the shuffles, which need every lane */
              if (c_vec && c + 8 <= n_left) {
                *reinterpret_cast<uint4*>(c_row + c) =
                    make_uint4(pair_bits(fl[0], fh[0], old[g].x, beta),
                               pair_bits(fl[1], fh[1], old[g].y, beta),
                               pair_bits(fl[2], fh[2], old[g].z, beta),
                               pair_bits(fl[3], fh[3], old[g].w, beta));
              } else {
#pragma unroll
                for (int t = 0; t < 4; ++t) {
                  const int ct = c + 2 * t;
                  if (ct + 1 < n_left) {
                    unsigned* const p = reinterpret_cast<unsigned*>(c_row + ct);
                    *p = pair_bits(fl[t], fh[t], *p, beta);
                  } else {
                    if (ct < n_left)
                      c_row[ct] = to_elem(fl[t] + beta * to_float(c_row[ct]));
                    if (ct + 1 < n_left)
                      c_row[ct + 1] = to_elem(fh[t] + beta * to_float(c_row[ct + 1]));
                  }
                }
              }
            }
          }
]]) .. [[
    }
]]

-- SWAP: the tile is one of C^T, so a thread's neighbouring accumulators (the pairs of columns
-- above) are neighbouring rows of C, and its rows' 8 lanes of a quad hold 8 neighbouring
-- elements of C's row: one element a store, 8 lanes writing 16 (f16) or 32 (f32) contiguous
-- bytes.  C is small where SWAP pays (M at most 64), so the simple stores cost little.
local epilogue_swap = [[
    /* Epilogue (SWAP): C = alpha * acc + beta * C, masked at the edges of C.  Kernel row r of
     * the tile (an index of N) and kernel column c (an index of M) are C's element
     * (col0 + c, row0 + r); accumulators as above: 4j + 2h + e is row ... + 8h, column
     * 8j + 2 * (lane % 4) + e. */
    const int r0 = cw * WG_M + warp * 16 + lane / 4; /* first row of this thread in the tile */
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + i * 64 + h * 8;
        if (r >= m_left) continue;
        elem_t* const c_col = Cg + row0 + r; /* column row0 + r of C */
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int c = j * 8 + (lane % 4) * 2 + e;
            if (c >= n_left) continue;
            elem_t* const p = c_col + (col0 + c) * (long long)ldc;
            const float v = alpha * acc[i][4 * j + 2 * h + e];
            *p = to_elem(beta == 0.0f ? v : v + beta * to_float(*p));
          }
      }
]]

-- The plain GEMM's epilogue, by element size and swap.
local plain_epilogue = [[
#if SWAP
]] .. epilogue_swap .. [[
#elif ELEM_BYTES == 2
]] .. epilogue16 .. [[
#else
]] .. epilogue32 .. [[
#endif
]]

-- An op kernel's epilogue (lib/epilogue.lua): the accumulators' walk of the plain ones, each
-- pair stored by epi_store2 (with SWAP, where a thread's pairs lie along a column of C, each
-- element by epi_store: such configs take no gated op), C and D at any alignment.
local op_epilogue = [[
    /* Epilogue (the epilogue snippet): D = the op of alpha * acc and beta * C, masked at the
     * edges; accumulators 4j + 2h + e: row r0 + 64i + 8h, column 8j + 2 * (lane % 4) + e of
     * the kernel's tile (SWAP: C's element (col0 + column, row0 + row)). */
    const int r0 = cw * WG_M + warp * 16 + lane / 4; /* first row of this thread in the tile */
    EPI_AMAX_DECL /* FP8 D: this thread's largest |D| (empty for the other types) */
#if !SWAP && !EPI_GATED && (EPI_OUT == 1 || EPI_OUT == 2)
    /* A 16-bit D: a pair is 4 bytes, so pair stores would write half sectors (the op kernels
     * ran at 0.35x a strided-batched cuBLAS on attention's Q K^T, K = 64, where the epilogue is
     * the kernel).  A tile wholly inside D with D 16-byte aligned (and C 4-byte, when read):
     * in runs of EPI_RUN groups of columns (the epilogue snippet: a run's reads, then its
     * stores), the values as the pairs make them, then the quad exchange of the plain epilogue
     * and one 16-byte store a lane. */
    out_t* const d_tile = epi_d(E) + row0 * E.ldd + col0;
    const bool d_vec =
        ((reinterpret_cast<unsigned long long>(d_tile) | (unsigned long long)E.ldd * 2) & 15) == 0;
    const bool c_pairs =
        beta == 0.0f || ((reinterpret_cast<unsigned long long>(C) | (unsigned long long)ldc * 2) & 3) == 0;
    if (m_left >= BM && n_left >= BN && d_vec && c_pairs) {
      const int q = lane & 3;
      constexpr int RUN = (BN / 32) % EPI_RUN == 0 ? EPI_RUN : (BN / 32) % 2 == 0 ? 2 : 1;
#pragma unroll
      for (int g0 = 0; g0 < BN / 32; g0 += RUN) {
        epi_vecs wc[RUN][4][2]; /* the run's per-column vectors: pair (g, jj), column e */
#pragma unroll
        for (int g = 0; g < RUN; ++g)
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              wc[g][jj][e] = epi_col_vecs(E, col0 + (4 * (g0 + g) + jj) * 8 + 2 * q + e);
]] .. each_row([[
          const int r = r0 + i * 64 + h * 8; /* row in the tile */
          out_t* const d_row = d_tile + r * E.ldd;
          unsigned c2[RUN][4]; /* C's pairs of the run in this row (beta != 0) */
#pragma unroll
          for (int g = 0; g < RUN; ++g)
#pragma unroll
            for (int jj = 0; jj < 4; ++jj)
              c2[g][jj] = epi_c_pair(C, ldc, beta, row0 + r, col0 + (4 * (g0 + g) + jj) * 8 + 2 * q);
#pragma unroll
          for (int g = 0; g < RUN; ++g) {
            unsigned p[4];
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
              const int j = 4 * (g0 + g) + jj;
              p[jj] = epi_pair(E, beta, c2[g][jj], epi_row_vecs(E, row0 + r, wc[g][jj][0]),
                               epi_row_vecs(E, row0 + r, wc[g][jj][1]), alpha * acc[i][4 * j + 2 * h],
                               alpha * acc[i][4 * j + 2 * h + 1]);
            }
            *reinterpret_cast<uint4*>(d_row + (g0 + g) * 32 + q * 8) = quad_transpose(p, lane);
          }
]]) .. [[
      }
    } else
#elif !SWAP && EPI_GATED && (EPI_OUT == 1 || EPI_OUT == 2)
    /* Gated, the same for D's columns: a lane's pair makes one element (column 4j + q of
     * strip j), 2 bytes.  Lane q packs strips 8g + 2jj and + 1 into p[jj]; after the exchange
     * it holds columns 32g + 8q + t (low halves) and 32g + 8q + 4 + t (high halves) from lane
     * t, which two byte permutations put in order: 8 columns, one 16-byte store. */
    out_t* const d_tile = epi_d(E) + row0 * E.ldd + col0 / 2;
    const bool d_vec =
        ((reinterpret_cast<unsigned long long>(d_tile) | (unsigned long long)E.ldd * 2) & 15) == 0;
    if (BN % 64 == 0 && m_left >= BM && n_left >= BN && d_vec) {
      const int q = lane & 3;
]] .. each_row([[
          const int r = r0 + i * 64 + h * 8; /* row in the tile */
          out_t* const d_row = d_tile + r * E.ldd;
#pragma unroll
          for (int g = 0; g < BN / 64; ++g) {
            unsigned p[4];
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
              const int j = 8 * g + 2 * jj, c = j * 8 + 2 * q;
              p[jj] = epi_pack2(epi_gate_value(E, C, ldc, beta, row0 + r, col0 + c,
                                               alpha * acc[i][4 * j + 2 * h],
                                               alpha * acc[i][4 * j + 2 * h + 1]),
                                epi_gate_value(E, C, ldc, beta, row0 + r, col0 + c + 8,
                                               alpha * acc[i][4 * j + 4 + 2 * h],
                                               alpha * acc[i][4 * j + 4 + 2 * h + 1]));
            }
            const uint4 t = quad_transpose(p, lane);
            *reinterpret_cast<uint4*>(d_row + g * 32 + q * 8) =
                make_uint4(__byte_perm(t.x, t.y, 0x5410), __byte_perm(t.z, t.w, 0x5410),
                           __byte_perm(t.x, t.y, 0x7632), __byte_perm(t.z, t.w, 0x7632));
          }
]]) .. [[
    } else
#endif
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + i * 64 + h * 8; /* row in the kernel's tile */
        if (r >= m_left) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int c = j * 8 + (lane % 4) * 2; /* column in the kernel's tile */
          if (c >= n_left) continue;
          const float v0 = alpha * acc[i][4 * j + 2 * h], v1 = alpha * acc[i][4 * j + 2 * h + 1];
#if SWAP
          epi_store(E, C, ldc, beta, col0 + c, row0 + r, v0 EPI_AMAX_ARG);
          if (c + 1 < n_left) epi_store(E, C, ldc, beta, col0 + c + 1, row0 + r, v1 EPI_AMAX_ARG);
#else
          epi_store2(E, C, ldc, beta, row0 + r, col0 + c, v0, v1, c + 1 < n_left EPI_AMAX_ARG);
#endif
        }
      }
    EPI_AMAX_FLUSH(E); /* the warp's amax (every lane here) */
]]

-- A grouped op's tile (lib/epilogue.lua; the epilogue snippet), in the producer's and the
-- consumers' walks alike: row0 made the expert's row in A and D (contiguous) or the tile
-- skipped past the expert's rows (masked); m_end, where its rows end; gz, the expert (B's z).
-- Not grouped: m_end is M.
local group_lookup = [[
    long long gt = row0 / BM, gz, gfirst;
    int grows;
    if (!epi_group_lookup(E, group_table, MK, BM, GROUP_TABLE, gt, gz, gfirst, grows)) continue;
    row0 = gfirst + gt * BM; /* the tile's first row in A and D */
]]
local group_count = [[
    const int grows = __ldg(E.group_rows + blockIdx.z); /* A, C and D are moved to problem z */
    if (grows < 0 || grows > MK) { /* bad counts: no tiles, the error word set */
      *E.group_error = 1;
      continue;
    }
    if (row0 >= grows) continue;
]]
local group_tile = {
  producer = {none = "", c = group_lookup .. "    (void)grows;\n", m = group_count},
  consumer = {
    none = "",
    c = group_lookup .. "    const long long m_end = gfirst + grows;\n",
    m = group_count .. "    const long long m_end = grows;\n",
  },
}
-- A contiguous grouped op's tile table (epi_group_table): at most this many steps of experts
-- in shared memory (4 bytes each), one expert a step up to this many.
local GROUP_TABLE = 1024
-- An op kernel's persistent tile rows: a contiguous grouped op's G more (every expert's last,
-- partial tile: epi_group_table); its table of the experts' tile rows, built once a block.
local grid_m_plain =
  "  const long long grid_n = NK / BN + (NK % BN != 0), grid_m = MK / BM + (MK % BM != 0);"
local grid_m_op = [[
  const long long grid_n = NK / BN + (NK % BN != 0);
#if EPI_GROUPED == 1
  const long long grid_m = MK / BM + (MK % BM != 0) + E.groups;
#else
  const long long grid_m = MK / BM + (MK % BM != 0);
#endif]]
local group_table_define = [[
/* A contiguous grouped op's table of the experts' tile rows: at most this many steps (after
 * the barriers in shared memory; epi_group_table). */
#define GROUP_TABLE ]] .. GROUP_TABLE .. "\n"
local group_table_build = [[
#if EPI_GROUPED == 1
  /* the experts' tile rows, read once a block: each tile finds its expert in shared memory */
  int* const group_table = reinterpret_cast<int*>(
      mmt_smem + (((empty + 8 * STAGES + 15u) & ~15u) - smem_u32(mmt_smem)));
  if (tid < 32) epi_group_table(E, MK, BM, GROUP_TABLE, group_table);
  __syncthreads();
#endif
]]

-- A contiguous grouped op's vectors by column: the tile's expert's (a copy of E, the
-- kernel's E_all, moved); by row: rows as stored.  (Masked: op_start moves E once.)
local group_vectors = [[
    mmt_epilogue E = E_all;
    epi_group_vectors(E, gz, 0, N);
]]

-- An op kernel's start: C moved to the block's problem of the batch, and the z of the boxes
-- its tensor maps load (3-D maps: gen.h, "Epilogues"), 0 for a matrix every problem shares.
-- ${ma}, ${mb}: the problem's operands the maps tmA and tmB cover.
local op_start = [[
  EPI_BATCH(A, B, C, E); /* this block's problem of the batch: C; A and B by the maps' z */
  const int za = E.batch_${ma} != 0 && EPI_Z ? (int)blockIdx.z : 0;
  const int zb = E.batch_${mb} != 0 && EPI_Z ? (int)blockIdx.z : 0;
#if EPI_GROUPED == 1
  const mmt_epilogue E_all = E; /* each tile's copy moves its vectors to its expert's */
  (void)zb;                     /* B's z is each tile's expert */
#elif EPI_GROUPED == 2
  epi_group_vectors(E, blockIdx.z, (long long)blockIdx.z * M, N); /* the block's expert's */
#endif
]]

-- A persistent op kernel that is not grouped walks the tiles of the whole batch, problem after
-- problem, rather than one problem a block: so a batch of many small problems (attention's
-- heads) keeps its running blocks on neighbouring tiles of a few problems, whose operands L2
-- then holds (one problem a block had each SM stream its own head: 0.54x cuBLAS at 128 heads
-- of P V, seq 4096, d 128), and no problem waits for the one block it was dealt.  EPI_Z is 0
-- here: each tile moves C and D itself (blockIdx.z is the block's place, not a problem).
local batch_walk = {
  -- the runtime's grid: gridDim.z = the batch, gridDim.x blocks each (its per-SM grid shared)
  walk = [[
  const long long tiles = grid_n * grid_m; /* of one problem of the batch */
  const long long first_tile = (long long)blockIdx.z * gridDim.x + blockIdx.x;
  const long long tile_step = (long long)gridDim.x * gridDim.z, tile_end = tiles * gridDim.z;]],
  start = [[
  const mmt_epilogue E_all = E; /* each tile's copy moves D to the tile's problem */
  const out_t* const C_all = C;
]],
  producer = [[
        const long long bz = pid / tiles; /* the tile's problem: the z of its boxes */
        const int za = E.batch_${ma} != 0 ? (int)bz : 0, zb = E.batch_${mb} != 0 ? (int)bz : 0;
]],
  consumer = [[
    const long long bz = pid / tiles; /* the tile's problem: its C and D */
    mmt_epilogue E = E_all;
    E.D = reinterpret_cast<out_t*>(E_all.D) + bz * E_all.batch_d;
    const out_t* const C = C_all + bz * E_all.batch_c;
]],
}

-- persist = 2, ping-pong (CUTLASS's name for it): the two consumers take the block's tiles in
-- turn, each a whole tile, so that one's epilogue runs while the other's wgmma keep the tensor
-- cores busy; with both on one tile (persist = 1) the tensor cores wait out every epilogue, and
-- an op's (a bias, GELU) cost 0.82x cuBLASLt at 8192 x 4096 x 4096 where the plain GEMM was
-- even.  The producer is unchanged: it fills the ring with every tile's K tiles in order, and a
-- consumer steps its ring position over the other's.  The mainloops take turns through two
-- named barriers (2 + pp: consumer pp's turn): a consumer waits on a full barrier by its phase's
-- parity, which tells apart only the phase it waits for and the one before, so it must not wait
-- on a stage before the other consumer has seen the stage's earlier fills; and the tensor cores
-- are then one consumer's at a time.
local ping_pong = {
  wg_m_define = "BM /* rows of C per consumer warpgroup: PERSIST 2, whole tiles in turn */",
  empty_arrivals = "4 * CLUSTER /* PERSIST 2: one consumer reads a stage */",
  consumer_ids = [[
    /* PERSIST 2: consumer pp computes every other tile of the block's walk, all its rows (cw,
     * the consumer's place among the tile's rows, is 0) */
    const int pp = wg - 1, cw = 0, warp = tid % 128 / 32, lane = tid % 32;]],
  consumer_tiles = [[
    /* PERSIST 2: the other consumer's tiles pass this one's ring position by their K tiles
     * (kt1 - kt0 a tile: no split, no tile skipped) */
    auto pass_tile = [&]() {
      s += kt1 - kt0;
      phase ^= (unsigned)(s / STAGES) & 1u;
      s %= STAGES;
    };
    if (pp) pass_tile();
    for (long long pid = first_tile + pp * tile_step; pid < tile_end;
         pid += 2 * tile_step, pass_tile()) {
    /* this consumer's turn: the other has waited for all of its tile's stages (the block's
     * first tile goes first) */
    if (pid != first_tile) {
      if (pp) asm volatile("bar.sync 3, 256;\n" ::: "memory");
      else asm volatile("bar.sync 2, 256;\n" ::: "memory");
    }
]],
  mainloop_done = [[
    /* the other consumer's turn, if it has a tile after this one */
    if (pid + tile_step < tile_end) {
      if (pp) asm volatile("bar.arrive 2, 256;\n" ::: "memory");
      else asm volatile("bar.arrive 3, 256;\n" ::: "memory");
    }
]],
  persist_doc = "\n *                    2: persistent, the two consumers taking whole tiles in turn\n" ..
                " *                    (ping-pong: one stores C while the other's wgmma run)",
}
local ping_pong_off = {
  wg_m_define = "(BM / CONSUMERS) /* rows of C per consumer warpgroup */",
  empty_arrivals = "4 * CONSUMERS * CLUSTER",
  consumer_ids = "    const int cw = wg - 1, warp = tid % 128 / 32, lane = tid % 32;",
  consumer_tiles = "    for (long long pid = first_tile; pid < tile_end; pid += tile_step) {\n",
  mainloop_done = "",
  persist_doc = "",
}

-- The storage type declaration and its conversions, per dtype (lib/elem: pack2(lo, hi) rounds
-- two floats to one 32-bit pair, lo at the lower address; to_elem rounds one; to_float widens
-- one).
local elem = mmt.lib("elem")

-- Per dtype: what the comment block says of the types, and the wgmma type suffix.
local dtype_info = {
  f16 = {
    doc_type = "__half in and out, fp32 accumulation",
    wgmma_type = "f16.f16",
  },
  bf16 = {
    doc_type = "__nv_bfloat16 in and out, fp32 accumulation",
    wgmma_type = "bf16.bf16",
  },
  tf32 = {
    doc_type = "float in and out, the tensor cores reading A and B as tf32\n" ..
               " * (their low 13 mantissa bits dropped), fp32 accumulation",
    wgmma_type = "tf32.tf32",
  },
  e4m3 = {
    doc_type = "FP8 e4m3 A and B (both K-major), fp32 accumulation (promoted: see\n" ..
               " * PROMOTE), D of the op's type",
    wgmma_type = "e4m3.e4m3",
  },
  e5m2 = {
    doc_type = "FP8 e5m2 A and B (both K-major), fp32 accumulation (promoted: see\n" ..
               " * PROMOTE), D of the op's type",
    wgmma_type = "e5m2.e5m2",
  },
}

-- Whether dtype is one of the FP8 types.
local function fp8(dtype)
  return dtype == "e4m3" or dtype == "e5m2"
end

-- wgmma's A and B types: the dtype's, or for a mixed op the problem's A's (the dtype) and
-- B's (the other FP8 type), in the order wgmma reads them (swap: B's rows are its A).
local function wgmma_types(dtype, op, swap)
  if op and op.mixed_fp8 then
    local other = dtype == "e4m3" and "e5m2" or "e4m3"
    return swap and other .. "." .. dtype or dtype .. "." .. other
  end
  return dtype_info[dtype].wgmma_type
end

-- FP8 (e4m3, e5m2): wgmma's FP8 accumulation is not fp32's over a long K (its partial sums
-- keep fewer bits), so the kernel promotes them: each interval of PROMOTE K tiles (128
-- elements each) accumulates into partial sums that start at zero, and at its end the
-- consumers wait for their wgmma and add them into the fp32 accumulators.  PROMOTE = 0 (fast
-- accumulation) is the 16-bit types' code: one accumulator over all of K.
local promote_doc = [[
 *   PROMOTE   = ${d_promote} FP8: K tiles (128 elements each) per interval of wgmma's own FP8
 *                    accumulation; at each interval's end its partial sums are added into the
 *                    fp32 accumulators (see "Promotion").  0: none, wgmma accumulates over all
 *                    of K ("fast accumulation": an op that allows it, fast_accum)
 * Promotion (PROMOTE > 0): the wgmma of an interval write part[][] (the first k-step of the
 * interval with scale-d 0: it starts at zero); at the interval's end (and the slice's) the
 * consumers wait for every wgmma in flight, release both stages they still hold and add part
 * into acc in fp32.  Inside an interval one group stays in flight, as without.
]]

local promote_halves_doc = [[
 * By halves (BN = 256, PROMOTE = 1): part holds half the tile's columns; each K tile runs
 * the first half's k-steps, waits and adds, then the second's (see wgmma_half).
]]

-- The interval's partial sums into the accumulators: as they are, or (block scales, an
-- interval of one K tile: K block kt) times A's scale of the element's row and B's of the
-- tile's 128 columns (bn <= 128 divides 128: one B block a tile).  Register r of 64-row block
-- i holds row 16 * warp + lane / 4 + 8 * (r / 2 % 2) of the block (see "Accumulators").
local promote_add_plain = [[
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
          for (int r = 0; r < ACC; ++r) acc[i][r] += part[i][r];
]]
-- Block scales (the rows' of A times one block of B's 128 columns: a tile of 128 or fewer, or
-- a half of 256) times an interval's partial sums, for promote_add_block and by halves: s_ab,
-- loaded ahead (block_scales_next).
local block_add = [[
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
          for (int ${hv} = 0; ${hv} < 2; ++${hv}) {
            const float s = s_ab[i][${hv}][${sb_index}];
#pragma unroll
            for (int r = 2 * ${hv}; r < ${regs}; r += 4) {
              acc[i][${at}r] += part[i][r] * s;
              acc[i][${at}r + 1] += part[i][r + 1] * s;
            }
          }
]]
local promote_add_block = mmt.subst(block_add, {hv = "h", sb_index = "0", regs = "ACC", at = ""})
-- Block scales two K tiles ahead: a load issued when its tile's wgmma are waited for stalls
-- the consumer by a memory latency each K tile (up to 2 x 256 cycles of the tensor cores').
-- Loaded one tile ahead, ptxas still waited for them within the tile: it copies a loop-carried
-- register to its next home as soon as the old value's last use is past, which was before the
-- tile's first wait; a copy of a load issued a tile earlier waits for nothing.  At the top of
-- tile kt the scales of kt become their products s_ab (sa_next * sb_next), those of kt + 1
-- move to the _next registers and kt + 2's are loaded.  Register r of 64-row block i holds
-- row 16 * warp + lane / 4 + 8 * (r / 2 % 2) of the block (see "Accumulators").
local block_scales_decl = [[
    float s_ab[MI][2][SB_BLOCKS], sa_next[MI][2], sb_next, sa_after[MI][2], sb_after;
    const long long sa_row = row0 + cw * WG_M + 16 * warp + lane / 4; /* the thread's first */
    block_scales(E, kt0, MK, k_tiles, sa_row, col0, n_left, lane, sa_next, sb_next);
    if (kt0 + 1 < kt1)
      block_scales(E, kt0 + 1, MK, k_tiles, sa_row, col0, n_left, lane, sa_after, sb_after);
]]
local block_scales_next = [[
#pragma unroll
      for (int h = 0; h < SB_BLOCKS; ++h) {
        const float sb = __shfl_sync(0xffffffffu, sb_next, h); /* lane h: block h, tile kt */
#pragma unroll
        for (int i = 0; i < MI; ++i)
          s_ab[i][0][h] = sa_next[i][0] * sb, s_ab[i][1][h] = sa_next[i][1] * sb;
      }
#pragma unroll
      for (int i = 0; i < MI; ++i) sa_next[i][0] = sa_after[i][0], sa_next[i][1] = sa_after[i][1];
      sb_next = sb_after;
      if (kt + 2 < kt1)
        block_scales(E, kt + 2, MK, k_tiles, sa_row, col0, n_left, lane, sa_after, sb_after);
]]
local block_scales_fn = [[
/* Block scales of K block kt: s_a[kt][row] (float[KB][M]) of this thread's rows row + i * 64
 * + 8 * h, and s_b[col0 / 128 + h][kt] (float[ceil(N / 128)][KB]) of the tile's blocks of B
 * (SB_BLOCKS: a tile of 256 promoted by halves has 2, one a half; a smaller one lies in one);
 * a row or a block past the matrix is 0 (its zeros times 0). */
#define SB_BLOCKS (BN / 128 > 1 ? BN / 128 : 1)
static __device__ __forceinline__ void block_scales(const mmt_epilogue& E, int kt, long long MK,
                                                    int k_tiles, long long row, long long col0,
                                                    int n_left, int lane, float (&sa)[MI][2],
                                                    float& sb) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long r = row + i * 64 + 8 * h;
      sa[i][h] = r < MK ? __ldg(E.scale_row + (long long)kt * MK + r) : 0.f;
    }
  /* B's scales are the warp's alike: loaded by lane h (block h) and shuffled to all.  The
   * other lanes load tile kt + 1's (in the same sector, unused), so that no load is uniform:
   * ptxas would keep a uniform one in a uniform register and move it there at once, waiting
   * a memory latency before the tile's wgmma. */
  const int h = lane % SB_BLOCKS, t = min(kt + (lane / SB_BLOCKS) % 2, k_tiles - 1);
  sb = h * 128 < n_left ? __ldg(E.scale_col + (col0 / 128 + h) * k_tiles + t) : 0.f;
}
]]
-- The consumers' wait after a K tile's wgmma (#if !RS): without promotion (every dtype but
-- FP8's promoting kernels), one group stays in flight and the stage before is released.
local wait_plain = [[
      /* One group stays in flight: the previous tile's wgmma are done, its stage is free. */
      wgmma_wait<1>();
      if (kt > kt0 && lane == 0) release_stage(empty + 8 * prev);
      prev = s;
]]
local wait_promote = [[
      if ((kt + 1 - kt0) % PROMOTE == 0 || kt + 1 == kt1) {
        /* The interval ends: every wgmma done, both stages free, part added into acc. */
        wgmma_wait<0>();
        acc_fence(part);
        if (lane == 0) {
          if (held) release_stage(empty + 8 * prev);
          release_stage(empty + 8 * s);
        }
        held = false;
${promote_add}      } else {
        /* One group stays in flight: the previous tile's wgmma are done, its stage is free. */
        wgmma_wait<1>();
        if (held && lane == 0) release_stage(empty + 8 * prev);
        prev = s;
        held = true;
      }
]]

-- A K tile's wgmma and the wait after them: every kernel's but promotion by halves.
local mma_issue_plain = [[
      acc_fence(${wgmma_acc});
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / KSTEP; ++kk)
#pragma unroll
        for (int i = 0; i < MI; ++i)
#if RS
          wgmma_rs(acc[i], af[kk][i], db + ((kk * B_KSTEP_BYTES) >> 4));
#else
          wgmma(${wgmma_acc}[i], da + ((i * A_MBLOCK_BYTES + kk * A_KSTEP_BYTES) >> 4),
                db + ((kk * B_KSTEP_BYTES) >> 4)${wgmma_scale_d});
#endif
      wgmma_commit();
      acc_fence(${wgmma_acc});
#if RS
      /* None stays in flight: the next stage's fragments may take these registers (a wgmma
       * reads its A registers until it is waited for), and the stage is free at once. */
      wgmma_wait<0>();
      if (lane == 0) release_stage(empty + 8 * s);
#else
${ss_wait}#endif
]]

-- Promotion by halves (FP8, BN = 256 promoting): 128 accumulators a thread leave no room for
-- the partial sums of the whole tile, so each half of its columns runs the K tile's k-steps
-- into part (BN / 2 columns) from zero, is waited for and added into its half of acc; the
-- stage is free after the second half.  One K tile an interval (PROMOTE = 1).  Register r of
-- an n = BN / 2 wgmma holds the column that register r of an n = BN one does (8 columns every
-- 4 registers), so half h is acc's registers h * ACC / 2 on.
local mma_issue_halves = [[
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        part_fence(part);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; ++kk)
#pragma unroll
          for (int i = 0; i < MI; ++i)
            wgmma_half(part[i], da + ((i * A_MBLOCK_BYTES + kk * A_KSTEP_BYTES) >> 4),
                       db + ((h * (BN / 2) * B_ROW_BYTES + kk * B_KSTEP_BYTES) >> 4), kk);
        wgmma_commit();
        wgmma_wait<0>();
        part_fence(part);
        if (h == 1 && lane == 0) release_stage(empty + 8 * s);
${half_add}      }
]]
local half_add_plain = [[
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
          for (int r = 0; r < ACC / 2; ++r) acc[i][h * (ACC / 2) + r] += part[i][r];
]]
-- Block scales by halves: half h is B's block col0 / 128 + h of 128 columns (a tile of 256
-- starts on a block).
local half_add_block = mmt.subst(block_add, {hv = "hr", sb_index = "h", regs = "ACC / 2",
                                             at = "h * (ACC / 2) + "})
-- The whole tile's wgmma (SS: both operands in shared memory); promotion by halves has its
-- own (wgmma_half_fn) and leaves this one out.
local wgmma_fn = [[
/* d += A (64 x KSTEP, descriptor da) * B (KSTEP x BN, descriptor db);
 * ${trans_doc}. */
static __device__ __forceinline__ void wgmma(float (&d)[ACC], unsigned long long da,
                                             unsigned long long db${scale_d_param}) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %${scale_arg}, 0;\n"
               "${wgmma_op}\n"
${wgmma_regs}
               " %${da_arg}, %${db_arg}, p, 1, 1${trans_imm};\n}\n"
${wgmma_outs}
               : "l"(da), "l"(db), "r"(${scale_d_value}));
}
]]
-- Promotion by halves: the n = BN / 2 wgmma into part, and part's fence.
local wgmma_half_fn = [[
/* Promotion by halves (see "Promotion"): d = (k-step kk > 0 ? d : 0) + A (64 x KSTEP,
 * descriptor da) * B's columns at db (KSTEP x BN / 2); both K-major. */
static __device__ __forceinline__ void wgmma_half(float (&d)[ACC / 2], unsigned long long da,
                                                  unsigned long long db, int kk) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %${half_scale_arg}, 0;\n"
               "${wgmma_half_op}\n"
${wgmma_half_regs}
               " %${half_da_arg}, %${half_db_arg}, p, 1, 1;\n}\n"
${wgmma_half_outs}
               : "l"(da), "l"(db), "r"(kk));
}
static __device__ __forceinline__ void part_fence(float (&d)[MI][ACC / 2]) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int r = 0; r < ACC / 2; ++r) asm volatile("" : "+f"(d[i][r]) :: "memory");
}
]]

-- Split-K: the slices of a tile meet through the split_k snippet, whose barrier is the consumer
-- warpgroups' alone (the producer warpgroup may still be issuing copies, or gone).
local split_helpers = "\n#if SPLIT > 1" .. [[

/* Barrier `id` among `count` threads (a multiple of 32), the others not held: the consumer
 * warpgroups alone. */
static __device__ __forceinline__ void named_bar(unsigned id, unsigned count) {
  asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(count) : "memory");
}
#define SPLITK_SYNC() named_bar(CONSUMER_BAR, 128 * CONSUMERS)
#endif]] .. split_k.helpers

-- A repack kernel's module also holds the runtime's copies into aligned rows (gen.h,
-- GEN_COPY_ROWS_KERNEL).
local copy_rows = mmt.snippet("copy_rows")
local tile_order, dependent_launch = mmt.snippet("tile_order"), mmt.snippet("dependent_launch")

local source = [[
/*
 * ${name}
 * mmtune template "wgmma", ${dtype}: ${doc_type}.
 * Row-major, layout ${layout}: C = alpha * op(A)*op(B) + beta * C, A stored ${a_doc},
 * B stored ${b_doc}.
 * Hopper tensor cores through wgmma.mma_async (sm_90a only), fed by TMA.
 * A block computes a BM x BN tile of C, walking K in steps of BK.  Warpgroup 0 is the producer:
 * one thread issues the TMA copies (cp.async.bulk.tensor) of each K tile of A and B into a ring
 * of STAGES shared-memory stages; warpgroups 1..CONSUMERS are the consumers: each waits for a
 * stage, issues its wgmma on it and hands the stage back.  Tiles hanging over the edge of A or B
 * are zero-filled by TMA and stores of C are masked, so any M, N, K >= 1 works; TMA needs
 * 16-byte aligned A, B and row pitches (requires.align = 16).
 *
 * Parameters:
 *   BM        = ${d_bm} rows of C per block
 *   BN        = ${d_bn} columns of C per block: the N of every wgmma (m64nBN)
 *   STAGES    = ${d_stages} shared-memory stages of the TMA ring (STAGES - 1 K tiles in flight
 *                    while one is computed).  Small tiles take deep rings: a grid of 64 blocks
 *                    of 64 x 32 (swap, a decode batch on 4096 rows of weights) streams them at
 *                    the copy bandwidth with 12 to 16 stages (about 190 KiB in flight a block),
 *                    without split-K's meeting
 *   CONSUMERS = ${d_consumers} consumer warpgroups: consumer w computes rows w*WG_M..(w+1)*WG_M-1
 *                    of the block tile, WG_M = BM / CONSUMERS, as WG_M / 64 wgmma of 64 rows
 *   BLOCKS    = ${d_blocks} blocks per SM asked of the compiler (__launch_bounds__): sets the
 *                    register budget split between the warpgroups (see PRODUCER_REGS)
 *   GROUP     = ${d_group} block-order swizzle: consecutive blocks walk down GROUP block rows
 *                    before moving one block column right, so the blocks running at one time
 *                    share rows of A and columns of B in L2 (1: plain row-major block
 *                    order; a grid at most 8 blocks tall or wide: see the tile_order snippet)
 *   REPACK    = ${d_repack} 1: for problems whose pointers or row pitches are not 16-byte aligned
 *                    (lda = 4097), the runtime copies A, B and C into aligned buffers (rows
 *                    padded), runs this kernel on them and copies C back, in stream order;
 *                    the copies are part of every launch's time.  The kernel is the same
 *   SPLIT     = ${d_split} split-K, so that a problem with few tiles of C still fills the GPU:
 *                    grid.z = SPLIT slices of the K tiles (1: none).  See "Split-K" below
 *   PERSIST   = ${d_persist} 1: a persistent grid, BLOCKS blocks per SM, each walking the tiles
 *                    pid = blockIdx.x, + gridDim.x, ...: the producer runs on into the next
 *                    tile's K tiles while the consumers store this one's C, so a problem of
 *                    many short tiles (small K) does not wait for each tile's loads and stores
 *                    in turn.  0: one tile a block${persist_doc}
 *   SWAP      = ${d_swap} 1: the kernel computes C^T = op(B)^T op(A)^T (CUTLASS's "swap AB"), for a
 *                    small M (decode batches): the large op(B) is wgmma's 64-row side, streamed
 *                    by TMA in tiles of BM of its N, and op(A)'s M rows are the wgmma's BN
 *                    columns (16 or 32 do: no tile of 64 mostly zeros).  Every name below is
 *                    the kernel's: "M" is N, "N" is M, A is op(B)^T and B is op(A)^T; the
 *                    epilogue stores the tile transposed.  0: C = op(A) op(B) as named
 *   CLUSTER   = ${d_cluster} blocks of a thread-block cluster (grid y; 1: none): CLUSTER tile rows
 *                    of one tile column, which share their B tile.  Block rank r of the
 *                    cluster loads part r of each B stage (BN / CLUSTER rows of a K-major B,
 *                    BK / CLUSTER k rows of an MN-major one) and TMA multicasts it to every
 *                    block of the cluster, so each block reads its A tile and 1 / CLUSTER of
 *                    B from L2.  A stage is refilled only once every block's consumers have
 *                    released it (the empty barriers count the whole cluster's consumer
 *                    warps), and no block exits before the others (a last cluster barrier).
 *                    The grid's y is rounded up to whole clusters: a block whose tile row
 *                    lies past M still loads its part of B and runs its wgmma, but loads no
 *                    A and stores nothing
${promote_doc} * Derived: BK = ${bk} (128 bytes of K per stage), THREADS = 128 * (CONSUMERS + 1) = ${threads},
 * WG_M = ${wg_m}, ${acc} fp32 accumulators per consumer thread.
 * Launch: block (THREADS, 1, 1), grid (ceil(N / BN), ceil(M / BM) rounded up to CLUSTER, SPLIT),
 * clusters (1, CLUSTER, 1) (PERSIST: BLOCKS times the device's SMs, 1, 1: the runtime's per-SM
 * grid rule), dynamic shared
 * memory ${shared_bytes} bytes: STAGES * (BM + BN) * 128 bytes of tiles, 1024-byte aligned by hand
 * (the 128-byte swizzle repeats every 1024 bytes and TMA and wgmma both apply it to absolute
 * shared addresses), 16 * STAGES bytes of mbarriers, and 1024 bytes of alignment slack; with
 * REPACK in 16 bits, then the epilogue's stage for a misaligned C (see the epilogue).
 * Extra arguments: tmA, tmB, the TMA maps of A and B as stored (dimension 0 the contiguous one),
 * box and swizzle as declared in the kernel table (tensor_maps), encoded by the runtime; with
 * SPLIT > 1, WS, the fp32 workspace (BM * BN floats a block).
 *
 * Shared memory, per stage (16-byte chunk j of a 128-byte row r is stored at chunk j ^ (r % 8):
 * the 128-byte swizzle, written by TMA and undone by wgmma through the descriptors).
 *   K-major operand (${k_major_doc}): ROWS x BK, one 128-byte row per row
 *     of the operand (one TMA box of {BK, ROWS}).  Descriptor: SBO = 1024 (8 rows to the next
 *     8), LBO unused (1); the wgmma of k-step kk starts kk * 32 bytes into the rows.
 *   MN-major operand (${mn_major_doc}): ROWS / 64 chunks of 64 x BK, chunk c holding
 *     elements c*64..c*64+63 of the M (N) dimension, one 128-byte row per k (one TMA box of
 *     {64, BK} per chunk).  Descriptor: LBO = BK * 128 (one 64-wide chunk to the next along
 *     M or N), SBO = 1024 (8 k rows to the next 8); k-step kk starts kk * KSTEP * 128 bytes in.
 *     A B of BN = 32 or 16 (16 bits) is one chunk of rows of B_ROW_BYTES = BN * 2 bytes under
 *     the 64- or 32-byte swizzle (chunk j of row r at j ^ (r / 2 % 4), j ^ (r / 4 % 2)):
 *     LBO = BK * B_ROW_BYTES, SBO = 8 * B_ROW_BYTES, k-step kk at kk * KSTEP * B_ROW_BYTES.
 * Barriers: full[s] (1 arrival: the producer's expect_tx; completes when the stage's bytes
 * have landed, B's parts from every block of the cluster) and empty[s] (4 * CONSUMERS *
 * CLUSTER arrivals: lane 0 of every consumer warp of the cluster once its wgmma reading the
 * stage are done).  Both are waited on by phase parity; the producer's wait
 * for a fresh ring asks for the parity before the first phase, which passes at once.
 * Accumulators (PTX ISA, wgmma D fragment of m64nN): thread t of a consumer warpgroup holds,
 * in register r of 64-row block i, row 16 * (t / 32) + (t % 32) / 4 + 8 * (r / 2 % 2), column
 * 8 * (r / 4) + 2 * (t % 4) + r % 2 of the block's 64 x BN tile.
 * Split-K (SPLIT > 1): of the KT = ceil(K / BK) K tiles, slice z = blockIdx.z loads and
 * computes tiles [KT * z / SPLIT, KT * (z + 1) / SPLIT): whole tiles, as equal as possible;
 * a slice may get none (KT < SPLIT, K == 0) and adds 0.  The slices of a tile meet in the
 * workspace WS (the split_k snippet, its barrier the consumer warpgroups' alone): each stores
 * its fp32 sums there and counts itself in; the last to arrive adds every slice's sums in
 * slice order and runs the epilogue, the others are done.  C is read and written once and
 * rounded once, the bits do not depend on which slice finished last, and no slice waits for
 * another.  The arrival counters and the workspace belong to the module: two launches must
 * never overlap (the kernel table says exclusive).  At most SPLITK_TILES tiles of C.
 * Correct for any M, N, K >= 1 with lda, ldb at least the stored row widths, ldc >= N;
 * K == 0 writes alpha * 0 + beta * C; when beta == 0, C is not read (a NaN already in C is
 * overwritten, as in BLAS).
 */
${defines}
/* The kernel's operands as stored (with SWAP, its A is op(B)^T and its B is op(A)^T): */
#define A_T ${a_t} /* 1: its A is MN-major (A stored K rows of M; SWAP: B stored K rows of N) */
#define RS ${rs}   /* 1: its A reaches wgmma through registers (tf32 with A_T: see "RS") */
#define B_T ${b_t} /* 1: its B is K-major (B stored N rows of K; SWAP: A stored M rows of K) */
#define ELEM_BYTES ${elem_bytes}

#define BK (128 / ELEM_BYTES)   /* K per stage: one 128-byte swizzle row */
#define KSTEP (32 / ELEM_BYTES) /* K of one wgmma: ${kstep} (32 bytes) */
#define THREADS (128 * (CONSUMERS + 1))
#define WG_M ${wg_m_define}
#define MI (WG_M / 64)        /* wgmma per consumer per k-step (64 rows each) */
#define ACC (BN / 2)          /* fp32 accumulators per thread per 64-row block */
#if REPACK && ELEM_BYTES == 2
#define SC (BN < 32 ? BN : 32) /* columns of a misaligned C a warp stages at a time */
#define STAGE_LD (SC + 4)      /* floats a staged row (4 more: fewer bank conflicts) */
#endif
#define A_STAGE_BYTES (BM * 128)
#define B_STAGE_BYTES (BN * 128)
#define A_CHUNK (128 / ELEM_BYTES) /* M of one MN-major box of A: a 128-byte row */
/* Byte offsets in a stage: one 64-row block of A (64 K-major rows, or 64 / A_CHUNK MN chunks
 * of BK rows), and one k-step (32 bytes along a K-major row, KSTEP rows of an MN-major chunk). */
#define A_MBLOCK_BYTES (A_T ? 64 / A_CHUNK * BK * 128 : 64 * 128)
#define A_KSTEP_BYTES (A_T ? KSTEP * 128 : 32)
/* An MN-major B (B_T 0) narrower than 128 bytes (BN = 32 or 16 in 16 bits) has rows of BN
 * elements under the swizzle of that width (64 or 32 bytes: TMA and wgmma agree on each), so
 * no box of 64 hangs over a narrow tile; otherwise rows of 128 bytes, as A's. */
#define B_ROW_BYTES ${b_row_bytes}
#define B_CHUNK (B_ROW_BYTES / ELEM_BYTES) /* N of one MN-major box of B */
#define B_SWIZZLE ${b_swizzle_mode} /* the descriptor's mode for B: 1, 2, 3 = 128, 64, 32 bytes */
#define B_KSTEP_BYTES (B_T ? 32 : KSTEP * B_ROW_BYTES)
/* setmaxnreg: the producer warpgroup gives registers back (PRODUCER_REGS), the consumers take
 * them (CONSUMER_REGS), within the block's registers at launch: min(255, 65536 / (THREADS *
 * BLOCKS)) rounded down to 8 a thread, which ptxas then allocates exactly (0, 0: no exchange,
 * with one consumer alone in an SM).  ptxas compiles all the code, the consumers' included,
 * within that launch budget: the exchange is headroom at run time, not more registers for
 * the compiler. */
#define PRODUCER_REGS ${producer_regs}
#define CONSUMER_REGS ${consumer_regs}
/* Named barrier of the consumer warpgroups alone (0 is __syncthreads'): split-K's meeting. */
#define CONSUMER_BAR 1
${group_table_define}
/* The element type of the ABI.  NVRTC has no cuda.h or fp16 headers and mmtune passes no
 * include path, so the kernel declares what it needs itself. */${elem_decl}
/* CUtensorMap's size and alignment (the runtime fills it with cuTensorMapEncodeTiled). */
struct __align__(64) mmt_tensor_map { unsigned long long opaque[16]; };

]] .. split_helpers .. [[
static __device__ __forceinline__ unsigned smem_u32(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
${epilogue16_block}
/* ---- mbarriers and TMA ---- */
static __device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
/* One arrival that also expects `bytes` more of transactions (the TMA copies of a stage). */
static __device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(bar), "r"(bytes) : "memory");
}
#if CLUSTER == 1 /* (a cluster's consumers arrive through mbar_arrive_cluster) */
static __device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
#endif
/* Waits until the phase of parity `parity` has completed. */
static __device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
/* TMA: the box at (c0, c1) (elements along dimension 0, rows) of the map into shared memory
 * at dst, completing `bar`'s transactions.  Elements outside the matrix arrive as zeros. */
static __device__ __forceinline__ void tma_load(unsigned dst, const mmt_tensor_map* map, int c0,
                                                int c1${z_param}, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.${tma_rank}d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3${z_operand}}], [%4];\n"
               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1),
                  "r"(bar)${z_input}
               : "memory");
}

#if CLUSTER > 1
/* ---- thread-block clusters ---- */
static __device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
/* Every thread of every block of the cluster: the writes before it (barrier inits, remote
 * arrivals) are visible to the cluster after it. */
static __device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n"
               "barrier.cluster.wait.acquire;\n" ::: "memory");
}
/* One arrival on the barrier at local address `bar` in block `rank` of the cluster.  The
 * arrive's default semantics (release at CTA scope): the wgmma that read the stage are done
 * and nothing is written before it; asked to release at cluster scope it fenced every
 * arrival, and a 128 x 128 kernel ran 3x slower (4096^3 f16: 0.706 ms against 0.239). */
static __device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
  asm volatile("{\n.reg .b32 remote;\n"
               "mapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
               :: "r"(bar), "r"(rank) : "memory");
}
/* tma_load into the same offsets of the shared memory of every block in `mask` (bit r: rank
 * r), completing each one's `bar` at that offset. */
static __device__ __forceinline__ void tma_load_multicast(unsigned dst, const mmt_tensor_map* map,
                                                          int c0, int c1${z_param}, unsigned bar,
                                                          unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.${tma_rank}d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%2, %3${z_operand_mc}}], [%4], %5;\n"
               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1),
                  "r"(bar), "h"(mask)${z_input}
               : "memory");
}
#endif
/* This block's part of a box of B (all of it without CLUSTER) into stage memory `dst`: its own
 * ring's, or with CLUSTER the same offsets of every block's (each `bar` at that offset). */
static __device__ __forceinline__ void load_b(unsigned dst, const mmt_tensor_map* map, int c0,
                                              int c1${z_param}, unsigned bar) {
#if CLUSTER > 1
  tma_load_multicast(dst, map, c0, c1${z_arg}, bar, (1u << CLUSTER) - 1);
#else
  tma_load(dst, map, c0, c1${z_arg}, bar);
#endif
}
/* A consumer warp is done with a stage: it counts itself in on the stage's empty barrier of
 * every block of the cluster (whose producers multicast into this block's stage). */
static __device__ __forceinline__ void release_stage(unsigned bar) {
#if CLUSTER > 1
#pragma unroll
  for (unsigned r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(bar, r);
#else
  mbar_arrive(bar);
#endif
}

/* ---- wgmma ---- */
/* Shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address,
 * leading and stride byte offsets (all >> 4), the swizzle (mode in bits 62-63: 1, 2, 3 = 128,
 * 64, 32 bytes), base offset 0 (stages are 1024-byte aligned; a k-step's offset moves along
 * the first row, or by whole 8-row groups of a narrower swizzle). */
static __device__ __forceinline__ unsigned long long make_desc(unsigned addr, unsigned lbo,
                                                               unsigned sbo, unsigned mode) {
  return (unsigned long long)((addr & 0x3ffffu) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
         (unsigned long long)(sbo >> 4) << 32 | (unsigned long long)mode << 62;
}
static __device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> static __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
/* Pins the accumulators at this point of the instruction stream: the compiler may not move
 * their reads or writes across it (wgmma writes them asynchronously, behind its back). */
static __device__ __forceinline__ void acc_fence(float (&d)[MI][ACC]) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int r = 0; r < ACC; ++r) asm volatile("" : "+f"(d[i][r]) :: "memory");
}
#if !RS
${wgmma_fn}#else
/* RS: A's fragments of one wgmma through registers.  Element v of thread t of the consumer
 * warpgroup (PTX ISA, wgmma .tf32 A register fragment; CUTLASS's ALayout_64x8) is row
 * 16 * (t / 32) + (t % 32) / 4 + 8 * (v % 2), column (t % 4) + 4 * (v / 2) of the 64 x KSTEP
 * slice of A.  Read from one 64-row block of a stage (64 / A_CHUNK MN-major boxes of BK rows
 * of 128 bytes, the 128-byte swizzle: the 16-byte chunk j of row r at j ^ (r % 8)) at k-step
 * kk.  Lanes (t % 4) read four rows of the box, which the swizzle spreads over the banks but
 * for pairs: two wavefronts a load. */
static __device__ __forceinline__ void load_a_frag(unsigned (&a)[4], unsigned block, int kk,
                                                   int t) {
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const int m = 16 * (t / 32) + (t % 32) / 4 + 8 * (v % 2);
    const int k = kk * KSTEP + t % 4 + 4 * (v / 2);
    unsigned off = (unsigned)(m / A_CHUNK * (BK * 128) + k * 128 + m % A_CHUNK * ELEM_BYTES);
    off ^= (off >> 7 & 7u) << 4;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(a[v]) : "r"(block + off));
  }
}
/* d += A (64 x KSTEP, fragments a) * B (KSTEP x BN, descriptor db); B K-major.  The registers
 * of a stay untouched until the wgmma reading them are waited for. */
static __device__ __forceinline__ void wgmma_rs(float (&d)[ACC], const unsigned (&a)[4],
                                                unsigned long long db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %${rs_scale_arg}, 0;\n"
               "${wgmma_op}\n"
${wgmma_regs}
               " {%${ra0}, %${ra1}, %${ra2}, %${ra3}}, %${rs_db_arg}, p, 1, 1;\n}\n"
${wgmma_outs}
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
#endif
${wgmma_half_fn}
${tile_order}
${dependent_launch}${epilogue}${block_scales_fn}
/* First row and column of C of tile pid, renumbered by the tile_order snippet (GROUP tile rows
 * walked top to bottom before moving right).  With CLUSTER, pid numbers the clusters' tiles
 * of CLUSTER * BM rows (grid_m of them), and block `rank` of the cluster takes its BM rows of
 * one. */
static __device__ __forceinline__ void tile_origin(long long pid, long long grid_m,
                                                   long long grid_n, unsigned rank,
                                                   long long& row0, long long& col0) {
  long long tile_row, tile_col;
  mmt_tile_of(pid, grid_m, grid_n, GROUP, &tile_row, &tile_col);
  row0 = tile_row * (BM * CLUSTER) + rank * BM;
  col0 = tile_col * BN;
}

extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS)
]] .. gemm.abi .. [[,
        const __grid_constant__ mmt_tensor_map tmA,
        const __grid_constant__ mmt_tensor_map tmB]] .. split_k.param .. [[)
{
  extern __shared__ __align__(1024) unsigned char mmt_smem[];
  const unsigned a_smem = (smem_u32(mmt_smem) + 1023u) & ~1023u; /* [STAGES][A_STAGE_BYTES] */
  const unsigned b_smem = a_smem + STAGES * A_STAGE_BYTES;         /* [STAGES][B_STAGE_BYTES] */
  const unsigned full = b_smem + STAGES * B_STAGE_BYTES;           /* [STAGES] mbarriers */
  const unsigned empty = full + 8 * STAGES;                        /* [STAGES] mbarriers */
#if REPACK && ELEM_BYTES == 2
  /* the epilogue's stage for a misaligned C: [CONSUMERS * 4 warps][16][STAGE_LD] floats */
  float* const epi_stage = reinterpret_cast<float*>(
      mmt_smem + (((empty + 8 * STAGES + 15u) & ~15u) - smem_u32(mmt_smem)));
#endif
${c_global}  /* The kernel's rows and columns: M and N, or with SWAP N and M (its tile is one of C^T). */
#if SWAP
  const int MK = N, NK = M;
#else
  const int MK = M, NK = N;
#endif

  /* The tiles of C this block computes, numbered pid = tile row * grid_n + tile column: one
   * (its launch index, blockIdx.x fastest), or with PERSIST every gridDim.x-th from blockIdx.x
   * (a grid of BLOCKS blocks per SM that stays resident and walks all the tiles).  64-bit:
   * grid_n * grid_m may pass 2^32. */
#if PERSIST
${grid_m_persist}
${persist_walk}
#else
  const long long grid_n = gridDim.x, grid_m = gridDim.y / CLUSTER;
  const long long first_tile = (long long)(blockIdx.y / CLUSTER) * grid_n + blockIdx.x;
  const long long tile_step = 1, tile_end = first_tile + 1;
#endif
#if CLUSTER > 1
  const unsigned rank = cluster_rank(); /* blockIdx.y % CLUSTER: clusters are (1, CLUSTER, 1) */
#else
  const unsigned rank = 0;
#endif

  const int tid = threadIdx.x, wg = tid / 128;
  /* This block's K tiles [kt0, kt1): all of them (K / BK rounded up, without overflow), or
   * slice blockIdx.z of SPLIT (see "Split-K"; the products stay below 2^31). */
  const int k_tiles = K / BK + (K % BK != 0);
  const int kt0 = k_tiles * ${k_slice} / SPLIT;
  const int kt1 = k_tiles * (${k_slice} + 1) / SPLIT;

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, ${empty_arrivals});
    }
    /* the initialized barriers are visible to the async proxy (TMA's complete_tx) */
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  /* and, with CLUSTER, to the other blocks (their multicasts and arrivals) */
#if CLUSTER > 1
  cluster_sync();
#else
  __syncthreads();
#endif
  /* Programmatic dependent launch (the kernel table's dependent_launch; the dependent_launch
   * snippet): nothing above reads or writes global memory. */
  pdl_wait(tid == 0);
${group_table_build}
  if (wg == 0) {
    /* ---- producer: one thread issues the TMA copies of every K tile of every tile ---- */
#if PRODUCER_REGS
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(PRODUCER_REGS));
#endif
    if (tid == 0) {
      asm volatile("prefetch.tensormap [%0];\n"
                   :: "l"(reinterpret_cast<unsigned long long>(&tmA)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n"
                   :: "l"(reinterpret_cast<unsigned long long>(&tmB)) : "memory");
      int s = 0;
      unsigned phase = 0; /* of the ring: flips each time s wraps; runs on from tile to tile */
      for (long long pid = first_tile; pid < tile_end; pid += tile_step) {
        long long row0, col0;
        tile_origin(${tile_pid}, grid_m, grid_n, rank, row0, col0);
${batch_tile_producer}${group_tile_producer}        for (int kt = kt0; kt < kt1; ++kt) {
          /* Stage s was last read by K tile kt - STAGES (of this tile or the one before):
           * wait until the consumers released it (on the first round, the parity before the
           * first phase: passes at once). */
          mbar_wait(empty + 8 * s, phase ^ 1);
          /* A block past M (the last cluster's) loads no A: its sums are never stored. */
          const bool a_rows = row0 < MK;
          mbar_expect_tx(full + 8 * s, (a_rows ? BM * 128 : 0) + BN * 128);
          const int k0 = kt * BK;
          const unsigned a_dst = a_smem + s * A_STAGE_BYTES, b_dst = b_smem + s * B_STAGE_BYTES;
          if (a_rows) {
#if A_T /* MN-major: BM / A_CHUNK boxes of A_CHUNK (M) x BK (K) */
#pragma unroll
            for (int c = 0; c < BM / A_CHUNK; ++c)
              tma_load(a_dst + c * (BK * 128), &tmA, (int)row0 + c * A_CHUNK, k0${za}, full + 8 * s);
#else   /* K-major: one box of BK (K) x BM (M) */
            tma_load(a_dst, &tmA, k0, (int)row0${za}, full + 8 * s);
#endif
          }
          /* B: this block's part `rank` (all of B without CLUSTER), to every block of the
           * cluster */
#if B_T /* K-major: a box of BK (K) x BN / CLUSTER (N) */
          load_b(b_dst + rank * (BN / CLUSTER * 128), &tmB, k0,
                 (int)col0 + (int)rank * (BN / CLUSTER)${zb}, full + 8 * s);
#else   /* MN-major: BN / B_CHUNK boxes of B_CHUNK (N) x BK / CLUSTER (K) */
#pragma unroll
          for (int c = 0; c < BN / B_CHUNK; ++c)
            load_b(b_dst + c * (BK * B_ROW_BYTES) + rank * (BK / CLUSTER * B_ROW_BYTES), &tmB,
                   (int)col0 + c * B_CHUNK, k0 + (int)rank * (BK / CLUSTER)${zb}, full + 8 * s);
#endif
          if (++s == STAGES) s = 0, phase ^= 1;
        }
      }
    }
  } else {
    /* ---- consumers: wgmma on each stage, then hand it back; then the tile's epilogue, while
     * the producer already fills the freed stages with the next tile's K tiles ---- */
#if CONSUMER_REGS
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(CONSUMER_REGS));
#endif
${consumer_ids}
    /* Descriptors of stage 0, k-step 0: this consumer's first 64-row block of A (RS: none),
     * and B.  LBO, SBO: see "Shared memory" above. */
#if !RS
    const unsigned long long a_desc =
        make_desc(a_smem + cw * MI * A_MBLOCK_BYTES, A_T ? BK * 128 : 16, 1024, 1);
#endif
    const unsigned long long b_desc = B_T ? make_desc(b_smem, 16, 1024, 1)
                                          : make_desc(b_smem, BK * B_ROW_BYTES, 8 * B_ROW_BYTES,
                                                      B_SWIZZLE);
    int s = 0;
    unsigned phase = 0;
    /* The tiles (one unless PERSIST); the body is the whole pass over one tile, left at the
     * loop's own indentation. */
${consumer_tiles}    long long row0, col0;
    tile_origin(${tile_pid}, grid_m, grid_n, rank, row0, col0);
${batch_tile_consumer}${group_tile_consumer}${group_vectors}    const int m_left = (int)(${m_end} - row0), n_left = (int)(NK - col0); /* >= 1: rows, columns left */
    float acc[MI][ACC];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int r = 0; r < ACC; ++r) acc[i][r] = 0.f;
${prev_decl}${promote_decl}    for (int kt = kt0; kt < kt1; ++kt) {
${block_scales_next}      mbar_wait(full + 8 * s, phase); /* the stage's bytes have landed */
#if !RS
      const unsigned long long da = a_desc + ((unsigned)(s * A_STAGE_BYTES) >> 4);
#endif
      const unsigned long long db = b_desc + ((unsigned)(s * B_STAGE_BYTES) >> 4);
#if RS /* this stage's fragments of A, all loaded before the fence that orders them */
      unsigned af[BK / KSTEP][MI][4];
#pragma unroll
      for (int kk = 0; kk < BK / KSTEP; ++kk)
#pragma unroll
        for (int i = 0; i < MI; ++i)
          load_a_frag(af[kk][i], a_smem + s * A_STAGE_BYTES + (cw * MI + i) * A_MBLOCK_BYTES, kk,
                      tid % 128);
#endif
${mma_issue}      if (++s == STAGES) s = 0, phase ^= 1;
    }
${mainloop_done}    wgmma_wait<0>();
    acc_fence(acc);
${last_release}#if CLUSTER > 1
    if (m_left <= 0) continue; /* a block of the last cluster past M: it loaded only B */
#endif
#if SPLIT > 1
    /* Split-K: the slices of this tile meet in the workspace; the last to arrive goes on with
     * the sum and writes C, the others are done.  The tile's number: its row and column of
     * tiles (with CLUSTER, pid is the cluster's). */
    if (!splitk_reduce<MI * ACC, 128 * CONSUMERS>(&acc[0][0], WS,
                                                  row0 / BM * grid_n + col0 / BN, tid - 128))
      continue;
#endif

${epilogue_code}    } /* tiles */
  }
#if CLUSTER > 1
  /* No block leaves while another may still multicast into its ring or arrive on its
   * barriers. */
  cluster_sync();
#endif
}
#if REPACK
]] .. copy_rows .. [[
#endif
]]

local MAX_ACC = 128 -- fp32 accumulators per consumer thread at most
local PRODUCER_REGS = 24 -- what the producer keeps when registers are exchanged
local MAX_CONSUMER_REGS = 240
-- Registers a consumer thread needs besides its accumulators (descriptors, addresses, loop
-- state, the epilogue's pointers); fitted to ptxas (NVRTC 13.0, sm_90a): see README.
local CONSUMER_OVERHEAD = 40
-- split > 1 only for problems with fewer tiles of C than this many waves of one block on each
-- of the device's SMs (more tiles fill the GPU without split-K).
local SPLIT_MAX_WAVES = 2

-- Whether dtype and layout are tf32 nn, which wgmma serves with swap alone (its A, op(B)^T,
-- through registers), at any size: swap's tiles are not limited to a small M there, nor to one
-- tile a block (persist), nor to 16-byte aligned problems (repack).
local function rs_swap(dtype, layout)
  return dtype == "tf32" and layout == "nn"
end

-- Everything derived from a config (shared by constraints and emit).
local function derive(p, dtype, op)
  local d = {}
  d.threads = 128 * (p.consumers + 1)
  d.wg_m = p.persist == 2 and p.bm or p.bm // p.consumers -- ping-pong: whole tiles each
  d.acc = d.wg_m * p.bn // 128
  -- FP8 promoting at BN = 256: the partial sums of half the columns at a time (a whole tile's
  -- would double 128 accumulators a thread)
  d.halves = fp8(dtype) and p.promote > 0 and p.bn == 256
  d.tiles = p.stages * (p.bm + p.bn) * 128
  -- repack in 16 bits: the epilogue's stage for a misaligned C, 16 rows of SC + 4 floats a
  -- consumer warp (SC = min(BN, 32): 18 KiB for two consumers), 16-byte aligned after the
  -- barriers
  d.stage = (p.repack == 1 and dtype ~= "tf32") and
            p.consumers * 4 * 16 * (math.min(p.bn, 32) + 4) * 4 + 16 or 0
  -- a contiguous grouped op: the experts' tile table (epi_group_table), GROUP_TABLE + 1 ints
  -- after the barriers, 16-byte aligned
  d.group_table = op and op.group and op.group:sub(1, 1) == "c" and 4 * (GROUP_TABLE + 1) + 16
                  or 0
  d.shared_bytes = d.tiles + 16 * p.stages + 1024 + d.stage + d.group_table
  -- split-K: the split_k snippet's flag, a little static shared memory
  d.static_bytes = p.split > 1 and 16 or 0
  -- Registers: the launch budget is min(255, 65536 / (THREADS * BLOCKS)) rounded down to 8
  -- a thread; setmaxnreg hands the producer's share to the consumers at run time (the
  -- producer keeps 24, the consumers take the rest: a multiple of 8, at most 240), and ptxas
  -- compiles the consumers' code within that count.  The accumulators are held to the launch
  -- budget (MAX_ACC) and so are the RS fragments; only promotion's partial sums use the
  -- consumers' count (constraints).  One consumer alone in an SM has nothing to gain (255
  -- each already).
  d.reg_limit = math.min(255, limits.regs_per_thread(d.threads * p.blocks) // 8 * 8)
  if p.consumers == 1 and p.blocks == 1 then
    d.producer_regs, d.consumer_regs = 0, 0
  else
    d.producer_regs = PRODUCER_REGS
    d.consumer_regs = math.min(MAX_CONSUMER_REGS,
        (d.reg_limit * d.threads - 128 * PRODUCER_REGS) // (128 * p.consumers) // 8 * 8)
  end
  return d
end

-- The kernel's operands (swap: op(B)^T and op(A)^T) in the terms of A_T and B_T: whether its
-- A is MN-major, whether its B is K-major.
local function kernel_majors(layout, swap)
  local a_t, b_t = gemm.transposed(layout)
  if swap then return not b_t, not a_t end
  return a_t, b_t
end

-- Why tf32 has no kernel for this layout and swap, or nil: tf32 wgmma reads a K-major B from
-- shared memory only (an MN-major A it takes through registers: RS).
local function tf32_refusal(dtype, layout, swap)
  if dtype ~= "tf32" then return nil end
  local _, kb_t = kernel_majors(layout, swap)
  if kb_t then return nil end
  if layout == "tn" then
    return "tf32 wgmma needs one operand K-major: layout tn has none (nt, tt, or nn with swap)"
  end
  return "tf32 wgmma reads its B K-major only: layout " .. layout .. " needs swap = " ..
         (swap and 0 or 1)
end

-- Why FP8 has no kernel for this op, layout and promotion, or nil: wgmma reads FP8 operands
-- K-major only (from shared memory: no transpose immediates, and no RS path here), and D has
-- a wider type than the inputs (an op kernel only).
local function fp8_refusal(dtype, layout, swap, op, promote)
  if not fp8(dtype) then
    if promote ~= 1 then return "promote: FP8 only (the other types accumulate in fp32)" end
    return nil
  end
  if op and op.scale_block and promote ~= 1 then
    return "block scales: promote = 1 (one K block of 128 an interval)"
  end
  if not op then return dtype .. ": an op kernel only (D of type f32, f16 or bf16)" end
  local ka_t, kb_t = kernel_majors(layout, swap)
  if ka_t or not kb_t then
    return "FP8 wgmma reads both operands K-major: layout nt only (A stored M x K, B N x K)"
  end
  if promote == 0 and not op.fast_accum then
    return "promote = 0 (fast accumulation) only for an op that allows it (fast_accum)"
  end
  return nil
end

-- Whether the kernel's A reaches wgmma through registers (RS): tf32 with that A MN-major.
local function takes_rs(dtype, layout, swap)
  return dtype == "tf32" and (kernel_majors(layout, swap))
end

local function kernel_name(p, dtype, layout)
  return string.format("mmt_wgmma_%s_%s_m%d_n%d_s%d_c%d_b%d_g%d_r%d_k%d_p%d", dtype, layout,
                       p.bm, p.bn, p.stages, p.consumers, p.blocks, p.group, p.repack, p.split,
                       p.persist) .. (p.swap == 1 and "_w1" or "") ..
         (p.cluster > 1 and "_q" .. p.cluster or "") ..
         (fp8(dtype) and "_f" .. p.promote or "")
end

-- The wgmma instruction for n columns: the register list of its n / 2 accumulators (8 a line)
-- and their "+f" operands (6 a line).
local function wgmma_pieces(n)
  local count = n // 2
  local function lines(per, item, first, next_, sep, close)
    local out = {}
    for i = 0, count - 1, per do
      local items = {}
      for r = i, math.min(i + per - 1, count - 1) do items[#items + 1] = item(r) end
      local last = i + per >= count
      out[#out + 1] = (i == 0 and first or next_) .. table.concat(items, ", ") ..
                      (last and close or sep)
    end
    return table.concat(out, "\n")
  end
  local regs = lines(8, function(r) return "%" .. r end, '               "{', '               " ',
                     ',"', '},"')
  local outs = lines(6, function(r) return string.format('"+f"(d[%d])', r) end,
                     "               : ", "                 ", ",", "")
  return regs, outs, count
end

-- The space, in the order of the kernel's #defines and comment block (gemm.param_vars).
local params = {
  {name = "bm", values = {64, 128, 256}},
  {name = "bn", values = {16, 32, 64, 128, 192, 256}},
  {name = "stages", values = {2, 3, 4, 5, 6, 8, 12, 16}},
  {name = "consumers", values = {1, 2}},
  {name = "blocks", values = {1, 2}},
  {name = "group", values = {1, 8, 16}},
  {name = "repack", values = {0, 1}},
  {name = "split", values = {1, 2, 4, 8}},
  {name = "persist", values = {0, 1, 2}},
  {name = "swap", values = {0, 1}},
  {name = "cluster", values = {1, 2}},
  {name = "promote", values = {0, 1, 2, 4}},
}
-- The kernels of the types without promotion define the parameters before it only (their
-- sources as they were before FP8).
local params_plain = {table.unpack(params, 1, #params - 1)}

return {
  name = "wgmma",
  description = "Hopper GEMM (f16, bf16, tf32; e4m3, e5m2 with an epilogue): wgmma + TMA ring, " ..
                "warp-specialized, sm_90a",
  dtypes = {"f16", "bf16", "tf32", "e4m3", "e5m2"},
  layouts = gemm.LAYOUTS,
  epilogues = true,
  params = params,
  default = {bm = 128, bn = 256, stages = 4, consumers = 2, blocks = 1, group = 8, repack = 0,
             split = 1, persist = 0, swap = 0, cluster = 1, promote = 1},

  constraints = function(p, prob, dtype, layout, op)
    local d = derive(p, dtype, op)
    local swap = p.swap == 1
    if d.wg_m < 64 then
      return false, string.format("bm/consumers = %d rows per consumer: wgmma needs 64", d.wg_m)
    end
    if d.acc > MAX_ACC then
      return false, string.format("%d accumulators per consumer thread (more than %d)", d.acc,
                                  MAX_ACC)
    end
    local ok, why = limits.shared(d.shared_bytes + d.static_bytes)
    if not ok then return false, why end
    if p.blocks > limits.blocks_by_shared(d.shared_bytes + d.static_bytes) then
      return false, string.format("%d blocks of %d bytes of shared memory do not fit an SM",
                                  p.blocks, d.shared_bytes)
    end
    if p.persist >= 1 and p.split > 1 then
      return false, "persist: a grid per SM, no split-K slices"
    end
    if p.persist == 2 then
      -- ping-pong: two consumers taking whole tiles in turn; their rows of the ring are
      -- counted per tile, so every tile has the same K tiles and none is skipped
      if p.consumers ~= 2 then return false, "persist = 2: two consumers (ping-pong)" end
      if swap or p.repack == 1 then return false, "persist = 2: not with swap or repack" end
      if op and op.group then return false, "persist = 2: not with a grouped op" end
    end
    if swap then
      -- a small M's limits, but for tf32 nn (which swaps at every size and alignment)
      if not rs_swap(dtype, layout) then
        if p.bn > 64 then
          return false, "swap: for a small M, at most 64 of it a tile (bn <= 64; tf32 nn: any)"
        end
        if p.repack == 1 then return false, "swap: not with repack (tf32 nn: with it)" end
        if p.persist >= 1 then return false, "swap: not with persist (tf32 nn: with it)" end
      end
    elseif p.bn < 32 then
      return false, "bn = 16 only with swap (the epilogues store 32 columns at a time)"
    end
    if p.cluster > 1 then
      -- the large tiles that L2 feeds (the few-tile and mid-size problems)
      if p.persist >= 1 or swap or p.repack == 1 then
        return false, "cluster: not with persist, swap or repack"
      end
      if p.bn < 64 then return false, "cluster: bn >= 64 (a shared B tile worth halving)" end
    end
    why = tf32_refusal(dtype, layout, swap) or fp8_refusal(dtype, layout, swap, op, p.promote)
    if why then return false, why end
    if op and p.repack == 1 then
      return false, "repack: not with an epilogue (the copies know C only)"
    end
    -- with swap a thread's pairs lie along C's columns: no gated op.  Block scales: FP8 with
    -- promote = 1 (checked above), one 128-column block of B a tile or a half of it (bn =
    -- 256), rows as named (no swap), one problem (the scales have no batch stride)
    ok, why = epilogue.fits(op, prob, not swap, p.split == 1,
                            fp8(dtype) and not swap and (128 % p.bn == 0 or d.halves),
                            not swap)
    if not ok then return false, why end
    if op and op.group and p.cluster > 1 then
      return false, "grouped: no cluster (its blocks' tile rows may be two experts')"
    end
    if op and op.scale_block and prob and prob.batch > 1 then
      return false, "block scales: one problem a call (no batch)"
    end
    -- RS: a stage's fragments of A, 4 registers a k-step and 64-row block
    local regs, what = d.acc + CONSUMER_OVERHEAD, ""
    if d.halves and p.promote ~= 1 then
      return false, "promote = 1 at bn = 256 (its partial sums hold half the columns of one " ..
                    "K tile)"
    end
    if fp8(dtype) and p.promote > 0 then
      regs, what = regs + (d.halves and d.acc // 2 or d.acc), " with the partial sums of promotion"
    end
    if takes_rs(dtype, layout, swap) then
      regs, what = regs + 16 * (d.wg_m // 64), " with A's fragments"
    end
    -- ptxas allocates the consumers' code within setmaxnreg's count, not the launch budget:
    -- a promoting 128 x 192 tile's 96 accumulators and 96 partial sums a thread compile with
    -- no spill at 168 launch registers (SASS up to R236; 8 spare: 64 x 64 ping-pong in two
    -- blocks spilled at its exact count).  RS's fragments keep the launch budget: tf32's
    -- 256 x 128 spilled within 240.
    local limit = d.reg_limit
    if fp8(dtype) and p.promote > 0 and d.consumer_regs > 0 then
      limit = math.max(limit, d.consumer_regs - 8)
    end
    if regs > limit then
      return false, string.format("about %d registers per consumer thread%s (limit %d): would " ..
                                  "spill", regs, what, limit)
    end
    if not prob then return true end
    -- the kernel's rows and columns (swap: N and M)
    local rows, cols = prob.M, prob.N
    if swap then rows, cols = prob.N, prob.M end
    ok, why = limits.grid_y(mmt.ceil_div(mmt.ceil_div(rows, p.bm), p.cluster) * p.cluster,
                            swap and "N" or "M")
    if not ok then return false, why end
    if p.cluster > 1 then
      if mmt.ceil_div(rows, p.bm) < p.cluster then
        return false, string.format("cluster: fewer tile rows (%d) than blocks in a cluster",
                                    mmt.ceil_div(rows, p.bm))
      end
      -- Multicast pays where rows straddle 32-byte sectors (a 128-byte row of a tile then
      -- reads five): 3000^3 f16 0.112 ms against 0.126, 5000^3 0.482 against 0.520.  On rows
      -- of whole sectors clusters measured 1-15% slower (1536^3 to 8192^3, 512x512x16384).
      local bytes = mmt.dtype(dtype).bytes
      if prob.lda * bytes % 32 == 0 and prob.ldb * bytes % 32 == 0 then
        return false, "cluster: A's and B's rows are whole 32-byte sectors (multicast pays " ..
                      "where they are not)"
      end
    end
    if p.repack == 1 and prob.align >= 16 then
      return false, "repack: the problem is 16-byte aligned already"
    end
    -- Split-K only where it can pay: few tiles of C, and at least one whole K tile a slice
    -- (below that the meeting costs more than the slices gain).
    local tiles = mmt.ceil_div(rows, p.bm) * mmt.ceil_div(cols, p.bn)
    local most = SPLIT_MAX_WAVES * mmt.device.sm_count
    if p.split > 1 and tiles >= most then
      return false, string.format("split-K: %d tiles of C fill the GPU (%d or more)", tiles, most)
    end
    return split_k.fits(p.split, prob.K, 128 // mmt.dtype(dtype).bytes, 1, tiles,
                        p.bm * p.bn * 4)
  end,

  emit = function(p, dtype, layout, op)
    local name = epilogue.name(kernel_name(p, dtype, layout), op)
    local dt = mmt.dtype(dtype)
    local info = dtype_info[dtype]
    local d = derive(p, dtype, op)
    local swap = p.swap == 1
    local ka_t, kb_t = kernel_majors(layout, swap)
    local rs = takes_rs(dtype, layout, swap)
    local bk = 128 // dt.bytes
    -- an MN-major B's rows: 128 bytes, or BN elements where that is narrower (BN = 32 or 16
    -- in 16 bits), under a swizzle of the rows' width
    local b_row = kb_t and 128 or math.min(128, p.bn * dt.bytes)
    local regs, outs, count = wgmma_pieces(p.bn)
    local k_major, mn_major = {}, {}
    table.insert(ka_t and mn_major or k_major, "A: ROWS = BM")
    table.insert(kb_t and k_major or mn_major, "B: ROWS = BN")
    -- a_t, b_t: the kernel's A MN-major, its B K-major (the layout's with swap's roles)
    local vars = gemm.vars(name, dtype, layout, {
      doc_type = op and op.mixed_fp8 and
                 string.format("FP8 %s A and %s B (both K-major), fp32 accumulation (promoted: " ..
                               "see\n * PROMOTE), D of the op's type",
                               dtype, dtype == "e4m3" and "e5m2" or "e4m3") or info.doc_type,
      k_major_doc = #k_major > 0 and table.concat(k_major, "; ") or "none in this layout",
      mn_major_doc = #mn_major > 0 and table.concat(mn_major, "; ") or "none in this layout",
      a_t = ka_t and 1 or 0, b_t = kb_t and 1 or 0, elem_bytes = dt.bytes,
      b_row_bytes = b_row, b_swizzle_mode = ({[128] = 1, [64] = 2, [32] = 3})[b_row],
      bk = bk, kstep = 32 // dt.bytes, threads = d.threads, wg_m = d.wg_m, acc = d.acc,
      shared_bytes = d.shared_bytes,
      producer_regs = d.producer_regs, consumer_regs = d.consumer_regs,
      tile_order = tile_order, dependent_launch = dependent_launch,
      elem_decl = "\n" .. elem[dtype],
      wgmma_op = string.format("wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s", p.bn,
                               32 // dt.bytes, wgmma_types(dtype, op, swap)),
      wgmma_regs = regs, wgmma_outs = outs,
      da_arg = count, db_arg = count + 1, scale_arg = count + 2,
      rs = rs and 1 or 0, ra0 = count, ra1 = count + 1, ra2 = count + 2, ra3 = count + 3,
      rs_db_arg = count + 4, rs_scale_arg = count + 5,
      -- the transpose immediates (16-bit types only): the kernel's A MN-major (A stored
      -- transposed; swap: B stored as is), its B MN-major (B stored as is; swap: A transposed)
      trans_imm = (dtype == "tf32" or fp8(dtype)) and "" or
                  string.format(", %d, %d", ka_t and 1 or 0, kb_t and 0 or 1),
      trans_doc = (dtype == "tf32" or fp8(dtype)) and "both K-major" or
                  string.format("A %s, B %s (the transpose immediates)",
                                ka_t and "MN-major" or "K-major", kb_t and "K-major" or "MN-major"),
    })
    gemm.param_vars(vars, p, fp8(dtype) and params or params_plain)
    local promote = fp8(dtype) and p.promote > 0
    local blocks = op and op.scale_block -- promoting, one K tile an interval
    local scales_decl = blocks and block_scales_decl or ""
    vars.promote_doc = fp8(dtype) and mmt.subst(promote_doc, vars) or ""
    vars.scale_d_param = promote and ", int scale_d" or ""
    vars.scale_d_value = promote and "scale_d" or "1"
    vars.promote_decl = promote and "    float part[MI][ACC]; /* an interval's partial sums */\n" ..
                        "    bool held = false; /* stage prev is not released yet */\n" ..
                        scales_decl or ""
    vars.wgmma_acc = promote and "part" or "acc"
    vars.wgmma_scale_d = promote and ",\n                kk > 0 || (kt - kt0) % PROMOTE != 0" or ""
    vars.ss_wait = promote and mmt.subst(wait_promote, {
      promote_add = blocks and promote_add_block or promote_add_plain}) or
      wait_plain
    -- the stage the last wgmma read, still held (by halves none is: each K tile frees its own)
    vars.last_release = string.format(
        "#if !RS\n    /* The last stage is free too: the producer may fill it with the next " ..
        "tile's first. */\n    if (%s && lane == 0) release_stage(empty + 8 * prev);\n" ..
        "#endif\n",
        promote and "held" or "kt1 > kt0")
    vars.mma_issue = mmt.subst(mma_issue_plain, vars)
    vars.wgmma_fn = mmt.subst(wgmma_fn, vars)
    vars.prev_decl = "#if !RS\n    int prev = 0; /* the stage the wgmma still in flight read */\n" ..
                     "#endif\n"
    vars.block_scales_fn = blocks and block_scales_fn or ""
    vars.block_scales_next = blocks and block_scales_next or ""
    vars.wgmma_half_fn = ""
    if d.halves then
      local hregs, houts, hcount = wgmma_pieces(p.bn // 2)
      vars.promote_doc = vars.promote_doc .. promote_halves_doc
      vars.promote_decl = "    float part[MI][ACC / 2]; /* half the columns' partial sums */\n" ..
                          scales_decl
      vars.last_release, vars.wgmma_fn, vars.prev_decl = "", "", ""
      vars.mma_issue = mmt.subst(mma_issue_halves, {
        half_add = blocks and half_add_block or half_add_plain})
      vars.wgmma_half_fn = mmt.subst(wgmma_half_fn, {
        wgmma_half_op = string.format("wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s", p.bn // 2,
                                      32 // dt.bytes, wgmma_types(dtype, op, swap)),
        wgmma_half_regs = hregs, wgmma_half_outs = houts, half_da_arg = hcount,
        half_db_arg = hcount + 1, half_scale_arg = hcount + 2})
    end
    epilogue.vars(vars, op)
    -- an op kernel: the epilogue, C and D of its type, 3-D maps whose z is the batch
    local walk = op and not op.group and p.persist >= 1
    vars.epilogue = epilogue.source(op, p.split == 1 and not walk)
    vars.epilogue_code = op and op_epilogue or plain_epilogue
    -- the 16-byte stores' helpers: all of them for the plain 16-bit epilogue (its text as it
    -- has been: a plain kernel's source stays the same, so its rows stay current), the quad
    -- exchange alone for an op with a 16-bit D
    local out16 = op and (op.out == "f16" or op.out == "bf16")
    vars.epilogue16_block = op and ("#if !SWAP && " .. (out16 and "1" or "0") ..
                                    epilogue16_helpers .. "#endif") or
                            ("#if !SWAP && ELEM_BYTES == 2" .. epilogue16_helpers ..
                             epilogue16_pair_bits .. "#endif")
    -- the K slice: blockIdx.z, which an op kernel's batch takes unless it splits K
    vars.k_slice = op and "(SPLIT > 1 ? (int)blockIdx.z : 0)" or "(int)blockIdx.z"
    local operands = {ma = swap and "b" or "a", mb = swap and "a" or "b"}
    vars.c_global = walk and batch_walk.start or op and mmt.subst(op_start, operands)
                    or "  elem_t* const Cg = reinterpret_cast<elem_t*>(C);\n"
    vars.persist_walk = walk and batch_walk.walk or
      "  const long long first_tile = blockIdx.x, tile_step = gridDim.x, tile_end = grid_n * grid_m;"
    vars.tile_pid = walk and "pid % tiles" or "pid"
    vars.batch_tile_producer = walk and mmt.subst(batch_walk.producer, operands) or ""
    vars.batch_tile_consumer = walk and batch_walk.consumer or ""
    local pp = p.persist == 2 and ping_pong or ping_pong_off
    for _, k in ipairs({"wg_m_define", "empty_arrivals", "consumer_ids", "consumer_tiles",
                        "mainloop_done", "persist_doc"}) do
      vars[k] = pp[k]
    end
    vars.tma_rank = op and 3 or 2
    vars.z_param = op and ", int c2" or ""
    vars.z_arg = op and ", c2" or ""
    vars.z_operand = op and ", %5" or ""
    vars.z_operand_mc = op and ", %6" or ""
    vars.z_input = op and ', "r"(c2)' or ""
    vars.za = op and ", za" or ""
    local grouped = op and op.group and op.group:sub(1, 1)
    -- a contiguous grouped op's B: each tile's expert's weight, or the one all share (stride
    -- 0: the map holds one matrix)
    vars.zb = grouped == "c" and ", (E.batch_b != 0 ? (int)gz : 0)" or op and ", zb" or ""
    vars.group_tile_producer = group_tile.producer[grouped or "none"]
    vars.group_tile_consumer = group_tile.consumer[grouped or "none"]
    vars.group_vectors = grouped == "c" and group_vectors or ""
    vars.m_end = grouped and "m_end" or "MK"
    -- an op kernel's grouped parts (a plain kernel's text stays as it has been)
    vars.group_table_define = op and group_table_define or ""
    vars.group_table_build = op and group_table_build or ""
    vars.grid_m_persist = op and grid_m_op or grid_m_plain
    -- TMA boxes, as stored: a K-major operand in one box of {BK, rows}, an MN-major one in
    -- boxes of {row_bytes (128, or B's narrower rows), BK}; B's cut in `parts` (cluster: each
    -- block of the cluster loads one part and multicasts it) along its rows.
    local function box(mn_major, rows, row_bytes, parts)
      if mn_major then return {row_bytes // dt.bytes, bk // parts} end
      return {bk, rows // parts}
    end
    return split_k.launch({
      source = mmt.subst(source, vars),
      kernel = name,
      block = {x = d.threads, y = 1, z = 1},
      -- persist: BLOCKS blocks per SM, resident, walking the tiles
      -- swap: the kernel's columns are M, its rows N
      grid = p.persist >= 1 and {x = {"SM", p.blocks}} or
             swap and {x = {"M", p.bn}, y = {"N", p.bm}, z = p.split} or
             {x = {"N", p.bn}, y = {"M", p.bm}, z = p.split},
      cluster = p.cluster > 1 and {y = p.cluster} or nil,
      shared_bytes = d.shared_bytes,
      requires = {align = 16},
      repack = p.repack == 1,
      -- The epilogue tests C's alignment (c_vec): a repack launch copies only A and B (C's
      -- stores: 16 bits under 8-byte alignment through shared memory, see the epilogue).
      store_any_align = p.repack == 1,
      -- ping-pong: one consumer's epilogue under the other's wgmma
      epilogue_overlap = p.persist == 2,
      arch = "sm_90a",
      -- the kernel's A and B, in its argument order (tmA, tmB)
      tensor_maps = {
        {operand = swap and "B" or "A", box = box(ka_t, p.bm, 128, 1), swizzle = 128},
        {operand = swap and "A" or "B", box = box(not kb_t, p.bn, b_row, p.cluster),
         swizzle = b_row},
      },
    }, p.split, p.bm * p.bn * 4, true) -- split-K's workspace: the fp32 sums, BM x BN a block
  end,
}
