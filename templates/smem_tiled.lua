-- smem_tiled.lua: the classic shared-memory tiled kernel.
--
-- A block computes a TILE x TILE tile of C.  It walks K in steps of TILE: the block's threads
-- copy one TILE x TILE tile of A and one of B into shared memory (zero-filling whatever lies
-- past the edges of the matrices), synchronize, and accumulate from shared memory.  Each
-- element loaded from global memory is then used TILE times.
--
-- The default (tile=32, pad=0, unroll=1, rpt=1) is the textbook sample kernel; the other
-- parameters are the usual first steps past it.

local gemm = mmt.lib("gemm")

local source = [[
/*
 * ${name} -- mmtune template "smem_tiled", ${ctype}, row-major, layout ${layout}:
 * C = alpha * op(A)*op(B) + beta * C (A_T, B_T: operand stored transposed).
 * A block computes a TILE x TILE tile of C from TILE x TILE tiles of A and B staged in shared
 * memory; tiles that hang over the edge of a matrix are zero-filled, so any size works.
 *
 * Parameters:
 *   TILE   = ${tile}  edge of the square tile of C a block computes, and the K step
 *   PAD    = ${pad}  extra columns per shared-memory row (1 staggers rows across banks)
 *   UNROLL = ${unroll}  #pragma unroll factor of the inner k loop over a tile (1: not unrolled)
 *   RPT    = ${rpt}  rows of C per thread: the block is TILE x (TILE / RPT) threads and each
 *                thread computes RPT outputs spaced TILE / RPT rows apart, reusing one value
 *                of B from shared memory RPT times
 * Launch: block (TILE, TILE / RPT, 1), grid (ceil(N / TILE), ceil(M / TILE), 1), no dynamic
 * shared memory (the tiles are static: 2 * TILE * (TILE + PAD) * sizeof(${ctype}) bytes).
 * A transposed operand is read along its contiguous dimension (threadIdx.x walks M of A or
 * K of B) and stored transposed into its tile, so the loads coalesce whatever the layout.
 * Correct for any M, N, K >= 1 with lda, ldb at least the stored row widths and ldc >= N;
 * when beta == 0, C is not read (a NaN already in C is overwritten, as in BLAS).
 */
#define TILE ${tile}
#define PAD ${pad}
#define RPT ${rpt}
#define ROWS (TILE / RPT) /* threads along y */
#define A_T ${a_t} /* 1: A stored as K rows of M (lda >= M); 0: M rows of K (lda >= K) */
#define B_T ${b_t} /* 1: B stored as N rows of K (ldb >= K); 0: K rows of N (ldb >= N) */

extern "C" __global__ void __launch_bounds__(TILE * ROWS)
]] .. gemm.abi .. [[)
{
  __shared__ ${ctype} As[TILE][TILE + PAD];
  __shared__ ${ctype} Bs[TILE][TILE + PAD];
  const int tx = threadIdx.x, ty = threadIdx.y;
  /* 64-bit indices: row * lda passes 2^31 for any large matrix. */
  const long long row0 = (long long)blockIdx.y * TILE;
  const long long col0 = (long long)blockIdx.x * TILE, col = col0 + tx;

  ${ctype} acc[RPT];
#pragma unroll
  for (int r = 0; r < RPT; ++r) acc[r] = 0;

  /* k0 is 64-bit so k0 += TILE cannot overflow when K is near INT_MAX. */
  for (long long k0 = 0; k0 < K; k0 += TILE) {
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      const int ly = ty + r * ROWS; /* row of the tile this thread loads */
      if (A_T) { /* As[m][k] = A[k][m]: tx walks m, contiguous */
        const long long m = row0 + tx, k = k0 + ly;
        As[tx][ly] = (m < M && k < K) ? A[k * lda + m] : (${ctype})0;
      } else {
        const long long m = row0 + ly, k = k0 + tx;
        As[ly][tx] = (m < M && k < K) ? A[m * lda + k] : (${ctype})0;
      }
      if (B_T) { /* Bs[k][n] = B[n][k]: tx walks k, contiguous */
        const long long k = k0 + tx, n = col0 + ly;
        Bs[tx][ly] = (k < K && n < N) ? B[n * ldb + k] : (${ctype})0;
      } else {
        const long long k = k0 + ly;
        Bs[ly][tx] = (k < K && col < N) ? B[k * ldb + col] : (${ctype})0;
      }
    }
    __syncthreads();
#pragma unroll ${unroll}
    for (int kk = 0; kk < TILE; ++kk) {
      const ${ctype} b = Bs[kk][tx];
#pragma unroll
      for (int r = 0; r < RPT; ++r) acc[r] += As[ty + r * ROWS][kk] * b;
    }
    __syncthreads(); /* the next iteration overwrites the tiles */
  }

  if (col >= N) return; /* only after the loop: every thread must reach __syncthreads */
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const long long row = row0 + ty + r * ROWS;
    if (row >= M) break;
    ${ctype}* c = C + row * ldc + col;
    if (beta == 0.0f)
      *c = alpha * acc[r];
    else
      *c = alpha * acc[r] + beta * *c;
  }
}
]]

local function kernel_name(p, layout)
  return string.format("mmt_smem_tiled_%s_t%d_p%d_u%d_r%d", layout, p.tile, p.pad, p.unroll,
                       p.rpt)
end

return {
  name = "smem_tiled",
  description = "classic square shared-memory tiling (TILE x TILE tiles of A and B per step)",
  dtypes = {"f32"}, layouts = gemm.LAYOUTS,
  params = {
    {name = "tile", values = {8, 16, 32}},
    {name = "pad", values = {0, 1}},
    {name = "unroll", values = {1, 2, 4, 8, 16, 32}},
    {name = "rpt", values = {1, 2, 4, 8}},
  },
  default = {tile = 32, pad = 0, unroll = 1, rpt = 1},

  constraints = function(p, prob)
    if p.unroll > p.tile then
      return false, "unroll is larger than the tile's k loop"
    end
    if p.tile * p.tile // p.rpt < 32 then
      return false, "fewer than 32 threads per block leaves part of a warp idle"
    end
    return gemm.rows_fit(prob, p.tile)
  end,

  emit = function(p, dtype, layout)
    local name = kernel_name(p, layout)
    local vars = gemm.vars(name, dtype, layout,
                           {tile = p.tile, pad = p.pad, unroll = p.unroll, rpt = p.rpt})
    return {
      source = mmt.subst(source, vars),
      kernel = name,
      block = {x = p.tile, y = p.tile // p.rpt, z = 1},
      grid = {x = {"N", p.tile}, y = {"M", p.tile}, z = 1},
      shared_bytes = 0,
      requires = {m_multiple = 1, n_multiple = 1, k_multiple = 1, align = mmt.dtype(dtype).bytes},
    }
  end,
}
