-- mma_sync.lua: the Ampere-style tensor-core GEMM for f16 and bf16 (fp32 accumulation), the
-- CUTLASS sm80 / "fast.cu" recipe: warp-level mma.sync.m16n8k16 fed by ldmatrix from a
-- swizzled (or padded) shared-memory ring that cp.async fills STAGES - 1 tiles ahead.
--
-- A block computes a BM x BN tile of C, walking K in steps of BK.  Each operand tile is
-- staged in shared memory as it is stored in global memory (its contiguous dimension stays
-- contiguous), so every copy is a straight 16-byte (or 4-byte) cp.async and the layout only
-- changes which ldmatrix variant reads it back: plain for an operand stored with K
-- contiguous, .trans for the other.  Each warp computes a WM x WN tile of C as
-- (WM/16) x (WN/8) mma tiles, fp32 accumulators in registers.
--
-- vec picks the global access path.  8: 16-byte cp.async, which needs the contiguous
-- dimensions to be multiples of 8 and 16-byte alignment (declared in `requires`).  2: 4-byte
-- cp.async (multiples of 2, 4-byte alignment).  0 and 1: the unaligned paths for any size,
-- any pitch, any 2-byte alignment (4097 x 4097, lda = 4097).  0, "realigned 16-byte copies":
-- cp.async copies the 16-byte-aligned chunks that cover each stored row of a tile (one more
-- chunk than the row has units) into a raw staging ring STAGES - 1 tiles ahead; one tile
-- ahead, each thread reads two neighbouring raw chunks back, shifts the 8 elements it wants
-- into place by the row's misalignment (selects and byte permutes, no register indexing) and
-- stores them as one 16-byte vector to the swizzled tile (the chunks that straddle an end of
-- an operand are read element by element instead, so nothing outside it is read: a cp.async
-- reads its whole 16 bytes whatever its src-size).  1: element loads into registers
-- one tile ahead, packed in pairs.  Both store the same swizzled layout, so the ldmatrix +
-- mma core is the same.  split > 1 adds reg_tiled's split-K (grid.z slices of K that meet
-- in an fp32 workspace: the split_k snippet and library).
--
-- The default is a 128 x 128 x 32 block of 4 warps of 64 x 64, a 4-stage cp.async ring,
-- 16-byte copies and group=8: the shape that is fast for large aligned square problems.

local gemm, limits, split_k = mmt.lib("gemm"), mmt.lib("limits"), mmt.lib("split_k")
local epilogue = mmt.lib("epilogue")

local elem = mmt.lib("elem") -- the storage type and its conversions, per dtype
local mma_16816 = mmt.snippet("mma_16816")

local async_helpers = [[

/* cp.async (sm_80+): global -> shared without registers.  src-size 0 copies nothing and
 * zero-fills the destination (src must still be a valid address: callers pass the base). */
template <int BYTES>
__device__ __forceinline__ void cp_async(unsigned dst, const elem_t* src, bool ok) {
  if constexpr (BYTES == 16) /* .cg: L2 only, 16 bytes only */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                 :: "r"(dst), "l"(src), "n"(BYTES), "r"(ok ? BYTES : 0) : "memory");
}
static __device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> static __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
]]

-- VEC = 8 or 2: global -> shared with cp.async, zero-filled past the edges by src-size 0 (the
-- contiguous dimensions are multiples of UNIT, so a unit is wholly inside or outside).
local loaders_async = [[

  auto copy_async = [&](int stage) { /* the next tile into stage */
    const unsigned as = smem_u32(As + stage * A_STAGE), bs = smem_u32(Bs + stage * B_STAGE);
]] .. gemm.operands([[
#pragma unroll
    for (int l = 0; l < ${X}_LOADS; ++l) {
      const int dr = l * THREADS / ${X}_UPR, dc = l * THREADS % ${X}_UPR * UNIT;
      const bool ok = ${x}_in(${x}_r + dr, ${x}_c + dc);
      cp_async<2 * UNIT>(${x}s + 2 * tile_off<${X}_COLS>(${x}_r + dr, ${x}_c + dc),
                         ok ? ${x}_src + dr * (long long)ld${x} + dc : ${X}g, ok);
    }
]]) .. [[
    a_src += a_step;
    b_src += b_step;
    k_left -= BK;
  };
]]

-- VEC = 0: the realigned 16-byte path.  Pieces of the source, empty for the other widths.
local raw_defines = [[

/* VEC = 0: a raw stage holds each stored row of a tile as the COLS / 8 + 1 16-byte chunks of
 * global memory that cover it, from the chunk of its first element on (see copy_raw_tile and
 * realign). */
#define A_RAW (A_ROWS * (A_COLS + 8)) /* elements of A per raw stage */
#define B_RAW (B_ROWS * (B_COLS + 8))]]

local raw_smem = [[

  elem_t* const Ar = Bs + TILES * B_STAGE; /* [STAGES][A_RAW], VEC = 0: raw tiles */
  elem_t* const Br = Ar + STAGES * A_RAW;  /* [STAGES][B_RAW] */]]

local raw_helpers = [[

/* VEC = 0.  cp.async of the 16-byte chunk at src (16-byte aligned) that reads only its first
 * `bytes` (0 .. 16) from global memory; the rest of the 16 bytes in shared memory are zeros. */
static __device__ __forceinline__ void cp_async_part(unsigned dst, const elem_t* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}
/* The place (0 .. 7) of element p in the 16-byte chunk that holds it, and that chunk. */
static __device__ __forceinline__ int mis8(const elem_t* p) {
  return (int)(reinterpret_cast<unsigned long long>(p) >> 1) & 7;
}
static __device__ __forceinline__ const elem_t* chunk_of(const elem_t* p) {
  return reinterpret_cast<const elem_t*>(reinterpret_cast<unsigned long long>(p) & ~15ull);
}
/* Bytes wanted of the raw chunk that starts s elements before column c of a stored row (c a
 * multiple of 8, s the row's misalignment), which covers columns c - s .. c - s + 7; `cols`
 * columns of the row are inside the matrix (0: the row is outside).  The chunk is wanted when
 * a column of it that the tile uses (>= 0) is inside, and then only up to the last column
 * inside; what a copy does not read is zero-filled. */
static __device__ __forceinline__ int raw_bytes(int cols, int c, int s) {
  return max(c - s, 0) < cols ? 2 * min(cols - c + s, 8) : 0;
}
/* The first `bytes` of raw chunk q (16-byte aligned) to shared memory at dst, the rest zeros.
 * A cp.async of a chunk reads all 16 bytes whatever its src-size (compute-sanitizer sees a
 * 16-byte read), so a chunk that straddles an end of the operand [lo, hi), the one of its
 * first element when that is not 16-byte aligned and the one of its last, is read element by
 * element: eight predicated 2-byte loads issued together (one memory latency, not eight: the
 * block that does this is the last to finish), one 16-byte store.  Any other chunk is copied
 * as usual. */
static __device__ __forceinline__ void copy_chunk(unsigned dst, const elem_t* q, int bytes,
                                                  const elem_t* lo, const elem_t* hi) {
  if (q >= lo && q + 8 <= hi) {
    cp_async_part(dst, q, bytes);
    return;
  }
  const int e0 = max((int)(lo - q), 0), e1 = min(bytes / 2, (int)(hi - q));
  unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (e >= e0 && e < e1) w[e / 2] |= (unsigned)q[e] << (16 * (e % 2));
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n"
               :: "r"(dst), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
}
/* This thread's copies of one operand's next tile (ROWS x COLS as stored, LOADS copies per
 * thread) into the raw stage at shared address `raw`: raw chunk c / 8 of stored row r for the
 * units (r, c) of the VEC = 8 mapping (r0, c0 the first, at `src` in global memory, ld the
 * row pitch), and the last raw chunk (column COLS) of rows tid + l * THREADS.  rows x cols of
 * the tile are inside the matrix.  INSIDE: the whole tile and 8 columns more are (rows >=
 * ROWS, cols >= COLS + 8), so every chunk is read whole, but a last one that holds no column
 * of the tile (s == 0), and the bounds need no checks; `safe` is the source of empty copies
 * (a valid address: the chunk of the matrix's first element; src-size 0 reads nothing). */
template <int ROWS, int COLS, int LOADS, bool INSIDE>
__device__ __forceinline__ void copy_raw_tile(unsigned raw, const elem_t* src, int r0, int c0,
                                              long long ld, int rows, int cols,
                                              const elem_t* safe) {
  constexpr int UPR = COLS / 8, EXTRA = (ROWS + THREADS - 1) / THREADS;
#pragma unroll
  for (int l = 0; l < LOADS; ++l) {
    const int dr = l * THREADS / UPR, dc = l * THREADS % UPR * 8;
    const int r = r0 + dr, c = c0 + dc;
    const elem_t* const p = src + dr * ld + dc; /* element (r, c) */
    const unsigned dst = raw + 2 * (r * (COLS + 8) + c);
    if constexpr (INSIDE) {
      cp_async_part(dst, chunk_of(p), 16);
    } else {
      const int n = raw_bytes(r < rows ? cols : 0, c, mis8(p));
      cp_async_part(dst, n ? chunk_of(p) : safe, n);
    }
  }
#pragma unroll
  for (int l = 0; l < EXTRA; ++l) {
    const int r = threadIdx.x + l * THREADS;
    if (ROWS % THREADS == 0 || r < ROWS) {
      const elem_t* const p = src + (r - r0) * ld + (COLS - c0); /* element (r, COLS) */
      const int s = mis8(p); /* 0: no column of the tile in this chunk */
      const unsigned dst = raw + 2 * (r * (COLS + 8) + COLS);
      if constexpr (INSIDE) {
        cp_async_part(dst, chunk_of(p), s ? 16 : 0);
      } else {
        const int n = raw_bytes(r < rows && s ? cols : 0, COLS, s);
        cp_async_part(dst, n ? chunk_of(p) : safe, n);
      }
    }
  }
}
/* copy_raw_tile's copies for a tile that must be checked (see a_near in the loaders): the
 * matrix occupies [lo, hi) and one of its ends may be in reach, so each chunk goes through
 * copy_chunk.  A rolled loop over the same copies, out of line: such a tile is rare (one or
 * two per block and operand), and inlined, even rolled, its checks cost the largest tiles
 * registers they do not have (a spill at 255) and the main loop of the others time. */
template <int ROWS, int COLS, int LOADS>
__device__ __noinline__ void copy_raw_tile_checked(unsigned raw, const elem_t* src, int r0,
                                                      int c0, long long ld, int rows, int cols,
                                                      const elem_t* safe, const elem_t* lo,
                                                      const elem_t* hi) {
  constexpr int UPR = COLS / 8, EXTRA = (ROWS + THREADS - 1) / THREADS;
#pragma unroll 1
  for (int l = 0; l < LOADS + EXTRA; ++l) {
    const elem_t* p;
    unsigned dst;
    int n;
    if (l < LOADS) {
      const int dr = l * THREADS / UPR, dc = l * THREADS % UPR * 8;
      const int r = r0 + dr, c = c0 + dc;
      p = src + dr * ld + dc; /* element (r, c) */
      dst = raw + 2 * (r * (COLS + 8) + c);
      n = raw_bytes(r < rows ? cols : 0, c, mis8(p));
    } else {
      const int r = threadIdx.x + (l - LOADS) * THREADS;
      if (ROWS % THREADS != 0 && r >= ROWS) break;
      p = src + (r - r0) * ld + (COLS - c0); /* element (r, COLS) */
      const int s = mis8(p);
      dst = raw + 2 * (r * (COLS + 8) + COLS);
      n = raw_bytes(r < rows && s ? cols : 0, COLS, s);
    }
    if (n) copy_chunk(dst, chunk_of(p), n, lo, hi);
    else cp_async_part(dst, safe, 0);
  }
}
/* The 8 elements of stored row r, columns c .. c + 7 (c a multiple of 8), from the raw row
 * to their place in the swizzled tile, one 16-byte load of each of the two raw chunks that
 * hold them and one 16-byte store.  Raw chunk j holds columns 8j - s .. 8j - s + 7 (s the
 * row's misalignment), so the unit is elements s .. s + 7 of chunks c / 8 and c / 8 + 1, a
 * shift by s / 2 words and s % 2 halves: selects by 2 words (s & 4) and by 1 word (s & 2)
 * over the 8 words, then one byte permute per word for the half (s & 1), with no indexing
 * of registers (which would go to local memory).  Elements outside the matrix are zeros
 * already (raw_bytes). */
template <int COLS>
__device__ __forceinline__ void realign(const elem_t* raw, elem_t* tile, int r, int c, int s) {
  const uint4 lo = *reinterpret_cast<const uint4*>(raw + r * (COLS + 8) + c);
  const uint4 hi = *reinterpret_cast<const uint4*>(raw + r * (COLS + 8) + c + 8);
  const bool by2 = s & 4, by1 = s & 2;
  const unsigned v0 = by2 ? lo.z : lo.x, v1 = by2 ? lo.w : lo.y, v2 = by2 ? hi.x : lo.z,
                 v3 = by2 ? hi.y : lo.w, v4 = by2 ? hi.z : hi.x, v5 = by2 ? hi.w : hi.y;
  const unsigned w0 = by1 ? v1 : v0, w1 = by1 ? v2 : v1, w2 = by1 ? v3 : v2,
                 w3 = by1 ? v4 : v3, w4 = by1 ? v5 : v4;
  const unsigned half = s & 1 ? 0x5432u : 0x3210u; /* bytes 2..5 or 0..3 of (y:x) */
  uint4 out;
  out.x = __byte_perm(w0, w1, half);
  out.y = __byte_perm(w1, w2, half);
  out.z = __byte_perm(w2, w3, half);
  out.w = __byte_perm(w3, w4, half);
  *reinterpret_cast<uint4*>(tile + tile_off<COLS>(r, c)) = out;
}
]]

local loaders_raw = [[

  /* VEC = 0 (copy_raw_tile, realign).  The row of unit l of this thread lies dr rows below
   * that of unit 0, dr * ld elements on, and K steps and the columns of units are multiples
   * of 8 elements: its misalignment is the same in every tile. */
  const int a_s0 = mis8(a_src), b_s0 = mis8(b_src);
  const int a_ld8 = lda & 7, b_ld8 = ldb & 7;
  const elem_t* const a_safe = chunk_of(Ag); /* source of empty copies: a valid address */
  const elem_t* const b_safe = chunk_of(Bg);
  /* One past the last element of A (B) the problem addresses (the last stored row ends at
   * its width, not at the pitch): macros, worked out where a checked tile needs them, since
   * kept live they would cost registers that the largest tiles do not have. */
#define A_END (Ag + (A_T ? (K - 1LL) * lda + M : (M - 1LL) * lda + K))
#define B_END (Bg + (B_T ? (N - 1LL) * ldb + K : (K - 1LL) * ldb + N))
  /* Which tiles are copied with checks (copy_raw_tile_checked).  A tile that has `rows`
   * stored rows and `cols` columns of the matrix from its first element on (ld the pitch)
   * has chunks that end at most COLS + 8 elements past the start of its last row inside,
   * and the matrix's last element is (rows - 1) * ld + cols - 1 past the tile's first, so a
   * chunk can pass the end only when max(rows - ROWS, 0) * ld + cols < COLS + 8; and only
   * when that end is not 16-byte aligned (else no chunk straddles it).  Taken here, without
   * the product, as cols < COLS + 8 with the tile holding the last row or rows shorter than
   * COLS + 8 (more tiles checked, never fewer).  Of rows and cols one is K left and the
   * other is fixed for the block, so the part that is fixed is worked out once: near (the
   * block's tiles can reach the end), then a compare per tile, since in the blocks at the
   * matrices' edges, the last to finish, every tile is an edge tile. */
  const bool a_near = mis8(A_END) != 0 && (A_T ? m_left < A_COLS + 8
                                                : m_left <= A_ROWS || lda < A_COLS + 8);
  const bool b_near = mis8(B_END) != 0 && (B_T ? n_left <= B_ROWS || ldb < B_COLS + 8
                                                : n_left < B_COLS + 8);
  /* The next tile into raw stage `stage`.  The tile at an operand's first element is the
   * first K tile of block row 0 (A), of block column 0 (B), and is checked when that
   * element is not 16-byte aligned (its chunk starts before it): `first` is a constant where
   * copy_raw is called (the prologue's first copy), so no other copy spends a register on
   * it. */
  auto copy_raw = [&](int stage, bool first) {
    const unsigned ar = smem_u32(Ar + stage * A_RAW), br = smem_u32(Br + stage * B_RAW);
    /* stored rows and columns of the next tile inside A (B) */
    const int a_rows = A_T ? k_left : m_left, a_cols = A_T ? m_left : k_left;
    const int b_rows = B_T ? n_left : k_left, b_cols = B_T ? k_left : n_left;
    const bool a_origin = first && row0 == 0 && mis8(Ag) != 0;
    const bool b_origin = first && col0 == 0 && mis8(Bg) != 0;
    if (a_rows >= A_ROWS && a_cols >= A_COLS + 8 && !a_origin) /* all but the edge tiles */
      copy_raw_tile<A_ROWS, A_COLS, A_LOADS, true>(ar, a_src, a_r, a_c, lda, 0, 0, a_safe);
    else if (!a_origin && !(a_near && (A_T ? k_left <= A_ROWS || lda < A_COLS + 8
                                           : k_left < A_COLS + 8)))
      copy_raw_tile<A_ROWS, A_COLS, A_LOADS, false>(ar, a_src, a_r, a_c, lda, a_rows, a_cols,
                                                    a_safe);
    else
      copy_raw_tile_checked<A_ROWS, A_COLS, A_LOADS>(ar, a_src, a_r, a_c, lda, a_rows, a_cols,
                                                     a_safe, Ag, A_END);
    if (b_rows >= B_ROWS && b_cols >= B_COLS + 8 && !b_origin)
      copy_raw_tile<B_ROWS, B_COLS, B_LOADS, true>(br, b_src, b_r, b_c, ldb, 0, 0, b_safe);
    else if (!b_origin && !(b_near && (B_T ? k_left < B_COLS + 8
                                           : k_left <= B_ROWS || ldb < B_COLS + 8)))
      copy_raw_tile<B_ROWS, B_COLS, B_LOADS, false>(br, b_src, b_r, b_c, ldb, b_rows, b_cols,
                                                    b_safe);
    else
      copy_raw_tile_checked<B_ROWS, B_COLS, B_LOADS>(br, b_src, b_r, b_c, ldb, b_rows, b_cols,
                                                     b_safe, Bg, B_END);
    a_src += a_step;
    b_src += b_step;
    k_left -= BK;
  };
  /* Realigns this thread's units of the raw tile in raw stage `stage` into swizzled stage
   * `tile`: unit j (A's copies, then B's) when j % KSTEPS == kk, so that each k-step of the
   * main loop takes a share; kk < 0: all. */
  auto realign_part = [&](int stage, int tile, int kk) {
    const elem_t* const ar = Ar + stage * A_RAW;
    const elem_t* const br = Br + stage * B_RAW;
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l)
      if (kk < 0 || l % KSTEPS == kk) {
        const int dr = l * THREADS / A_UPR, dc = l * THREADS % A_UPR * UNIT;
        realign<A_COLS>(ar, As + tile * A_STAGE, a_r + dr, a_c + dc, (a_s0 + dr * a_ld8) & 7);
      }
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l)
      if (kk < 0 || (A_LOADS + l) % KSTEPS == kk) {
        const int dr = l * THREADS / B_UPR, dc = l * THREADS % B_UPR * UNIT;
        realign<B_COLS>(br, Bs + tile * B_STAGE, b_r + dr, b_c + dc, (b_s0 + dr * b_ld8) & 7);
      }
  };
]]

local main_loop_raw = [[
  /* VEC = 0: raw tile t lives in raw stage t % STAGES (one commit group per tile, empty past
   * the end), swizzled tile t in stage t % 2.  Step kt copies raw tile kt + STAGES - 1 into
   * the stage of raw tile kt - 1 (realigned during step kt - 2, two barriers ago), realigns
   * raw tile kt + 1 into swizzled stage (kt + 1) % 2 (last read by step kt - 1, before the
   * barrier that ended it), a share per k-step between the mma of tile kt, then waits for
   * raw tile kt + 2: copies have STAGES - 2 steps to land. */
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) copy_raw(s, s == 0);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>(); /* raw tile 0 has landed (this thread's copies) */
  __syncthreads();             /* (everyone's) */
  realign_part(0, 0, -1);      /* tile 0 (K == 0: unused) */
  cp_async_wait<STAGES - 3>(); /* raw tile 1 has landed */
  __syncthreads();             /* and swizzled tile 0 is written */
  int raw_next = 1, raw_write = STAGES - 1; /* raw stages of tiles kt + 1, kt + STAGES - 1 */
  load_frags(0, 0, 0);
  for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      if (kk == 0) {
        if (kt + STAGES - 1 < k_tiles) copy_raw(raw_write, false); /* tile kt + STAGES - 1 */
        cp_async_commit();
      }
      /* Not guarded by kt + 1 < k_tiles, so that the realign mixes with the mma: past the end
       * it moves stale data into a stage that is never read. */
      realign_part(raw_next, (kt + 1) & 1, kk);
      if (kk < KSTEPS - 1) load_frags(kt & 1, kk + 1, (kk + 1) % 2);
      mma_step(kk % 2);
      if (kk == KSTEPS - 1) { /* on to tile kt + 1 (past the end: stale, unused fragments) */
        cp_async_wait<STAGES - 3>(); /* raw tile kt + 2 has landed */
        __syncthreads(); /* everyone's has, tile kt + 1 is realigned, tile kt is read */
        raw_next = raw_next == STAGES - 1 ? 0 : raw_next + 1;
        raw_write = raw_write == STAGES - 1 ? 0 : raw_write + 1;
        load_frags((kt + 1) & 1, 0, 0); /* KSTEPS is even: k-step 0 uses buffer 0 */
      }
    }
  }
  cp_async_wait<0>(); /* nothing in flight at exit (the last groups are empty) */
]]

-- VEC = 1: global -> registers -> shared memory, a pair of elements per copy.  Two 2-byte
-- loads (any alignment, each masked), packed into one 4-byte shared store at the pair's place
-- in the swizzled tile.
local loaders_regs = [[

  /* The next tile in flight, in registers: pairs of elements, zero outside the matrices. */
  unsigned a_ld[A_LOADS], b_ld[B_LOADS];
  auto load_pair = [](const elem_t* p, bool lo, bool hi) {
    return (unsigned)(lo ? __ldg(p) : 0) | (unsigned)(hi ? __ldg(p + 1) : 0) << 16;
  };
  auto load_regs = [&]() { /* global -> registers: the next tile (zeros past the end of K) */
]] .. gemm.operands([[
#pragma unroll
    for (int l = 0; l < ${X}_LOADS; ++l) {
      const int dr = l * THREADS / ${X}_UPR, dc = l * THREADS % ${X}_UPR * UNIT;
      const int r = ${x}_r + dr, c = ${x}_c + dc;
      ${x}_ld[l] = load_pair(${x}_src + dr * (long long)ld${x} + dc, ${x}_in(r, c), ${x}_in(r, c + 1));
    }
]]) .. [[
    a_src += a_step;
    b_src += b_step;
    k_left -= BK;
  };
  auto store_smem = [&](int stage) { /* registers -> shared memory stage */
    elem_t* const as = As + stage * A_STAGE;
    elem_t* const bs = Bs + stage * B_STAGE;
]] .. gemm.operands([[
#pragma unroll
    for (int l = 0; l < ${X}_LOADS; ++l) {
      const int r = ${x}_r + l * THREADS / ${X}_UPR, c = ${x}_c + l * THREADS % ${X}_UPR * UNIT;
      *reinterpret_cast<unsigned*>(${x}s + tile_off<${X}_COLS>(r, c)) = ${x}_ld[l];
    }
]]) .. [[
  };
]]

local main_loop_async = [[
  /* Ring of STAGES stages: tile t lives in stage t % STAGES; one commit group per tile (empty
   * past the end, so that wait_group counts stay uniform).  The copy of tile kt + STAGES - 1
   * is issued at the start of tile kt, into the stage tile kt - 1 used: its last ldmatrix
   * came before the barrier that ended tile kt - 1. */
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) copy_async(s);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>(); /* tile 0 has landed (this thread's copies) */
  __syncthreads();             /* (everyone's) */
  int read = 0, write = STAGES - 1;
  load_frags(read, 0, 0);
  for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      if (kk == 0) {
        if (kt + STAGES - 1 < k_tiles) copy_async(write); /* tile kt + STAGES - 1 */
        cp_async_commit();
      }
      if (kk < KSTEPS - 1) load_frags(read, kk + 1, (kk + 1) % 2);
      mma_step(kk % 2);
      if (kk == KSTEPS - 1) { /* on to tile kt + 1 (past the end: stale, unused fragments) */
        cp_async_wait<STAGES - 2>(); /* tile kt + 1 has landed */
        __syncthreads(); /* everyone's has, and everyone is done reading tile kt */
        read = read == STAGES - 1 ? 0 : read + 1;
        write = write == STAGES - 1 ? 0 : write + 1;
        load_frags(read, 0, 0); /* KSTEPS is even: k-step 0 uses buffer 0 */
      }
    }
  }
  cp_async_wait<0>(); /* nothing in flight at exit (the last groups are empty) */
]]

local main_loop_regs = [[
  /* Two stages: tile kt + 1 is loaded into registers at the start of tile kt and stored to
   * the other stage after tile kt's last mma are issued; that stage was last read before the
   * barrier that ended tile kt - 1. */
  load_regs();
  store_smem(0);
  __syncthreads();
  load_frags(0, 0, 0);
  for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      /* Not guarded by kt + 1 < k_tiles, so that the compiler issues the loads early: past
       * the end every load is predicated off (zeros) and the stage written is never read. */
      if (kk == 0) load_regs(); /* tile kt + 1 */
      if (kk < KSTEPS - 1) load_frags(kt & 1, kk + 1, (kk + 1) % 2);
      mma_step(kk % 2);
      if (kk == KSTEPS - 1) {
        store_smem((kt + 1) & 1);
        __syncthreads();
        load_frags((kt + 1) & 1, 0, 0); /* KSTEPS is even: k-step 0 uses buffer 0 */
      }
    }
  }
]]

-- Epilogue stores of the pair (v0, v1) at row c_row, column c (when beta == 0, C is not
-- read).
local store_pair = [[
        if (c < n_left) { /* N is even: the pair is inside C */
          unsigned* const p = reinterpret_cast<unsigned*>(c_row + c); /* 4-byte aligned */
          if (beta != 0.0f) {
            const unsigned old = *p;
            v0 += beta * to_float((elem_t)(old & 0xffffu));
            v1 += beta * to_float((elem_t)(old >> 16));
          }
          *p = pack2(v0, v1);
        }]]
local store_scalar = [[
        elem_t* const p = c_row + c;
        if (c < n_left)
          p[0] = to_elem(beta == 0.0f ? v0 : v0 + beta * to_float(p[0]));
        if (c + 1 < n_left)
          p[1] = to_elem(beta == 0.0f ? v1 : v1 + beta * to_float(p[1]));]]

-- Both epilogues walk the accumulators alike: a lane's rows of the warp's tile (those past
-- the edge skipped), then its pairs of columns.
local walk_rows = [[
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wm0 + i * 16 + (lane >> 2) + h * 8; /* row in the block tile */
      if (r >= m_left) continue;
]]
local walk_cols = [[
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const int c = wn0 + j * 8 + (lane & 3) * 2; /* column in the block tile */
]]

-- The epilogue of the plain GEMM: C = alpha * acc + beta * C, C of the inputs' type.
local plain_epilogue = [[
  /* Epilogue: C = alpha * acc + beta * C, masked at the edges of C.  Accumulator e of mma
   * tile (i, j) is row i*16 + lane/4 + 8*(e/2), column j*8 + 2*(lane%4) + e%2 of the warp's
   * tile: each lane stores pairs of neighbouring columns. */
]] .. walk_rows .. [[
      elem_t* const c_row = Cg + (row0 + r) * (long long)ldc + col0;
]] .. walk_cols .. [[
        float v0 = alpha * acc[i][j][2 * h], v1 = alpha * acc[i][j][2 * h + 1];
#if VEC <= 1
]] .. store_scalar .. [[

#else
]] .. store_pair .. [[

#endif
      }
    }
]]

-- The epilogue of an op kernel (lib/epilogue.lua): the same walk over the accumulators, each
-- pair stored by epi_store2 (C and D of the op's type, at any alignment).
local op_epilogue = [[
  /* Epilogue (the epilogue snippet): D = the op of alpha * acc and beta * C, masked at the
   * edges.  Accumulator e of mma tile (i, j) is row i*16 + lane/4 + 8*(e/2), column j*8 +
   * 2*(lane%4) + e%2 of the warp's tile: each lane holds pairs of neighbouring columns, the
   * first even (N is even when the op is gated). */
]] .. walk_rows .. walk_cols .. [[
        if (c < n_left)
          epi_store2(E, C, ldc, beta, row0 + r, col0 + c, alpha * acc[i][j][2 * h],
                     alpha * acc[i][j][2 * h + 1], c + 1 < n_left);
      }
    }
]]

local tile_order, dependent_launch = mmt.snippet("tile_order"), mmt.snippet("dependent_launch")

local source = [[
/*
 * ${name}
 * mmtune template "mma_sync": ${ctype} (${dtype}) in and out, fp32 accumulation, row-major,
 * layout ${layout}: C = alpha * op(A)*op(B) + beta * C, A stored ${a_doc},
 * B stored ${b_doc}.  Tensor cores through mma.sync (sm_80+).
 * A block computes a BM x BN tile of C, walking K in steps of BK.  Each step stages the BM x BK
 * tile of A and the BK x BN tile of B in shared memory as they are stored (the contiguous
 * dimension stays contiguous); each warp reads its fragments back with ldmatrix (.trans for
 * an operand stored with K strided) and accumulates a WM x WN tile of C in fp32 registers
 * with mma.sync.m16n8k16.  Tiles hanging over the edge of a matrix are zero-filled and stores
 * are masked, so any M, N, K >= 1 works (within what VEC requires).
 *
 * Parameters:
 *   BM     = ${d_bm} rows of C per block
 *   BN     = ${d_bn} columns of C per block
 *   BK     = ${d_bk} K step: columns of A and rows of B staged per pipeline stage (BK / 16 mma
 *                 k-steps per stage)
 *   WM     = ${d_wm} rows of C per warp: WM / 16 mma tiles of 16 rows
 *   WN     = ${d_wn} columns of C per warp: WN / 8 mma tiles of 8 columns
 *   STAGES = ${d_stages} shared-memory stages.  VEC = 8 or 2: a ring filled by cp.async STAGES - 1
 *                 tiles ahead of the one computed, one __syncthreads per step.  VEC = 0: a
 *                 ring of STAGES raw tiles filled by cp.async STAGES - 1 tiles ahead, realigned
 *                 one tile ahead into two swizzled tiles (see realign).  VEC = 1: 2, the next
 *                 tile is loaded into registers while the current one is computed
 *   VEC    = ${d_vec} global access width in elements.  8: 16-byte cp.async.cg copies and 4-byte
 *                 stores of C; requires the contiguous dimension of A and of B to be multiples
 *                 of 8, N even, and 16-byte aligned A, B, C and row pitches.  2: 4-byte
 *                 cp.async.ca copies (multiples of 2, N even, 4-byte alignment).  0: nothing
 *                 required: realigned 16-byte copies, 16-byte cp.async.cg of the aligned
 *                 chunks that cover each row (row start rounded down to 16 bytes, one chunk
 *                 more for the tail), shifted into place by the row's misalignment on the
 *                 way to the swizzled tile (the chunks that straddle an end of an operand
 *                 are read element by element: nothing outside it is read); 2-byte stores
 *                 of C.  1: nothing required: 2-byte
 *                 loads into registers, packed in pairs into shared memory, 2-byte stores of C
 *   SWZ    = ${d_swz} shared-memory layout.  1: XOR swizzle of 16-byte chunks (see tile_off).
 *                 0: rows padded by 8 elements (16 bytes)
 *   GROUP  = ${d_group} block-order swizzle: consecutive blocks walk down GROUP block rows before
 *                 moving one block column right, so the blocks running at one time share
 *                 rows of A and columns of B in L2 (1: plain row-major block order; a grid
 *                 at most 8 blocks tall or wide: see the tile_order snippet)]] .. split_k.doc .. [[

 * Derived: THREADS = (BM / WM) * (BN / WN) * 32 = ${threads} threads per block (warp (wm, wn) of
 * the block computes rows wm*WM.., columns wn*WN.. of its tile).
 * Launch: block (THREADS, 1, 1), grid (ceil(N / BN), ceil(M / BM), SPLIT), dynamic shared memory
 * ${smem_formula} = ${shared_bytes} bytes.
 * Fragments (PTX ISA, mma.m16n8k16 with 16-bit inputs; lane = 4 * g + t):
 *   A (16 x 16, row): 4 registers of 2 elements, rows g (regs 0, 2) and g + 8 (regs 1, 3),
 *     columns (k) 2t, 2t+1 (regs 0, 1) and 2t+8, 2t+9 (regs 2, 3);
 *   B (16 x 8, col): 2 registers, column (n) g, rows (k) 2t, 2t+1 (reg 0) and 2t+8, 2t+9 (reg 1);
 *   C (16 x 8, fp32): 4 registers, rows g (0, 1) and g + 8 (2, 3), columns 2t, 2t+1.
 *   ldmatrix.x4 loads four 8 x 8 matrices, lanes 8q..8q+7 giving the row addresses of matrix q,
 *   and hands lane 4g + t elements (g, 2t), (g, 2t+1) of each (with .trans, of its transpose):
 *   exactly the A, B registers above when the matrices are taken in that order.
 * Correct for any M, N, K >= 1 with lda, ldb at least the stored row widths, ldc >= N (and
 * what VEC requires); K == 0 writes alpha * 0 + beta * C; when beta == 0, C is not read (a NaN
 * already in C is overwritten, as in BLAS).
 */
${defines}
#define A_T ${a_t} /* 1: A stored transposed, K rows of M (lda >= M); 0: M rows of K (lda >= K) */
#define B_T ${b_t} /* 1: B stored transposed, N rows of K (ldb >= K); 0: K rows of N (ldb >= N) */

#define WARPS_N (BN / WN)
#define THREADS ((BM / WM) * WARPS_N * 32)
#define MI (WM / 16) /* mma tiles per warp along M */
#define NI (WN / 8)  /* mma tiles per warp along N */
#define KSTEPS (BK / 16) /* mma k-steps per stage */
/* The tiles as stored: ROWS x COLS, COLS contiguous (in global and in shared memory). */
#define A_ROWS (A_T ? BK : BM)
#define A_COLS (A_T ? BM : BK)
#define B_ROWS (B_T ? BN : BK)
#define B_COLS (B_T ? BK : BN)
#define A_STAGE (A_ROWS * (SWZ ? A_COLS : A_COLS + 8)) /* elements of A per stage */
#define B_STAGE (B_ROWS * (SWZ ? B_COLS : B_COLS + 8))
#define TILES (VEC == 0 ? 2 : STAGES) /* swizzled stages (VEC = 0: STAGES are raw ones) */
/* Tile loads: UNIT elements per copy (16 bytes for VEC = 8 and 0, else a pair, 4 bytes); UPR
 * copies per stored row, LOADS per thread per tile. */
#define UNIT (VEC == 8 || VEC == 0 ? 8 : 2)
#define A_UPR (A_COLS / UNIT)
#define A_LOADS (A_ROWS * A_UPR / THREADS)
#define B_UPR (B_COLS / UNIT)
#define B_LOADS (B_ROWS * B_UPR / THREADS)
#if VEC == 0]] .. raw_defines .. [[

#endif
/* Blocks per SM asked of the compiler (__launch_bounds__): 65536 / (THREADS * MIN_BLOCKS)
 * registers per thread at most. */
#define MIN_BLOCKS ${min_blocks}

/* The element type of the ABI and its conversions (products are fp32 in the tensor cores). */
${elem}
static __device__ __forceinline__ unsigned smem_u32(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
/* Element offset of (r, c) in a shared tile of COLS columns: COLS / 8 chunks of 16 bytes per
 * row.  Shared memory has 32 banks of 4 bytes: eight 16-byte bank groups per 128 bytes.
 * ldmatrix reads each 8 x 8 matrix as 8 rows of one 16-byte chunk, at the same column of 8
 * consecutive rows; with a row pitch that is a multiple of 128 bytes those 8 chunks would all
 * fall in one bank group (8-way conflict).  SWZ = 1 stores chunk j of row r at chunk
 * j ^ s(r) of the row, s(r) = r % 8 when a row has 8 chunks or more, so 8 consecutive rows
 * put one column in 8 different groups; a row of 4 chunks (64 bytes, COLS = 32) shares its
 * 128 bytes with the next row, and s(r) = (r / 2) % 4 with the row's half makes 8 different
 * groups again.  Copies write 8 consecutive chunks of one row (two rows when COLS = 32) per
 * 128 bytes, which the XOR only permutes: conflict-free too.  SWZ = 0 pads each row by 16
 * bytes instead, shifting each row by one group (16 bytes more per row). */
template <int COLS> __device__ __forceinline__ int tile_off(int r, int c) {
  if constexpr (SWZ) {
    /* XOR over the 16-byte chunks a row has (8, 4 or 2), so that the 8 rows one ldmatrix
     * reads fall in different banks. */
    const int s = COLS >= 64 ? (r & 7) : COLS == 32 ? ((r >> 1) & 3) : ((r >> 2) & 1);
    return r * COLS + ((((c >> 3) ^ s) << 3) | (c & 7));
  } else {
    return r * (COLS + 8) + c;
  }
}

/* ldmatrix.x4: r[q] = this lane's part of matrix q, whose 8 row addresses lanes 8q..8q+7
 * give (16-byte aligned).  TRANS: of the transposed matrix. */
template <bool TRANS>
__device__ __forceinline__ void ldsm_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                        unsigned addr) {
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

/* mma_16816: d += a * b on one 16 x 8 x 16 tile (fragments: see the top comment). */
${mma_16816}
#if VEC != 1]] .. async_helpers .. [[#endif
#if VEC == 0]] .. raw_helpers .. [[#endif]] .. split_k.helpers .. [[
${tile_order}
${dependent_launch}${epilogue}
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
]] .. gemm.abi .. split_k.param .. [[)
{
  extern __shared__ uint4 mmt_smem[];                     /* 16-byte aligned */
  elem_t* const As = reinterpret_cast<elem_t*>(mmt_smem); /* [TILES][A_STAGE] */
  elem_t* const Bs = As + TILES * A_STAGE;                /* [TILES][B_STAGE] */
#if VEC == 0]] .. raw_smem .. [[

#endif
${batch}  const elem_t* __restrict__ Ag = reinterpret_cast<const elem_t*>(A);
  const elem_t* __restrict__ Bg = reinterpret_cast<const elem_t*>(B);
${c_global}
]] .. gemm.tile .. split_k.slice .. [[
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int wm0 = warp / WARPS_N * WM, wn0 = warp % WARPS_N * WN; /* the warp's tile of C */

  /* Tile loads: copy l of this thread moves unit tid + l * THREADS of the stored tile, row
   * (tid + l * THREADS) / UPR, so a warp moves 32 consecutive units of a row. */
  const int a_r = tid / A_UPR, a_c = tid % A_UPR * UNIT; /* stored row, column of copy 0 */
  const int b_r = tid / B_UPR, b_c = tid % B_UPR * UNIT;
  const elem_t* a_src = Ag + (A_T ? (long long)a_r * lda + row0 + a_c  /* copy 0, next tile */
                                  : (row0 + a_r) * (long long)lda + a_c);
  const elem_t* b_src = Bg + (B_T ? (col0 + b_r) * (long long)ldb + b_c
                                  : (long long)b_r * ldb + col0 + b_c);
]] .. gemm.k_walk .. [[
  /* Programmatic dependent launch (the kernel table's dependent_launch; the dependent_launch
   * snippet): nothing above reads or writes global memory. */
  pdl_wait(tid == 0);
#if VEC == 0
]] .. loaders_raw .. [[
#else

]] .. gemm.in_tile .. [[
#if VEC == 1
]] .. loaders_regs .. [[
#else
]] .. loaders_async .. [[
#endif
#endif
  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  /* Fragments of two k-steps: the mma of k-step kk use buffer kk % 2 while the ldmatrix of
   * the next k-step (of the next tile, after the last) fill the other, so the tensor cores
   * need not wait for shared memory, not even across the barrier between two tiles. */
  unsigned fa[2][MI][4], fb[2][NI][2];
  /* ldmatrix of k-step kk of the tile in stage into buffer buf.  One ldmatrix.x4 per 16 rows
   * of A: lanes 0-15 give rows 0-15 of its first 8 k, lanes 16-31 of the next 8 (stored
   * K x M: lanes 8q + i give k row i (+8 for q >= 2) of m block q % 2, transposed); one per
   * 16 columns of B, matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15,
   * k 8-15): the registers of two mma tiles. */
  auto load_frags = [&](int stage, int kk, int buf) {
    const unsigned as = smem_u32(As + stage * A_STAGE), bs = smem_u32(Bs + stage * B_STAGE);
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      const int r = A_T ? kk * 16 + (lane >> 4) * 8 + (lane & 7) : wm0 + i * 16 + (lane & 15);
      const int c = A_T ? wm0 + i * 16 + (lane >> 3 & 1) * 8 : kk * 16 + (lane >> 4) * 8;
      ldsm_x4<A_T>(fa[buf][i][0], fa[buf][i][1], fa[buf][i][2], fa[buf][i][3],
                   as + 2 * tile_off<A_COLS>(r, c));
    }
#pragma unroll
    for (int j = 0; j < NI; j += 2) {
      const int r = B_T ? wn0 + j * 8 + (lane >> 4) * 8 + (lane & 7)
                        : kk * 16 + (lane >> 3 & 1) * 8 + (lane & 7);
      const int c = B_T ? kk * 16 + (lane >> 3 & 1) * 8 : wn0 + j * 8 + (lane >> 4) * 8;
      ldsm_x4<!B_T>(fb[buf][j][0], fb[buf][j][1], fb[buf][j + 1][0], fb[buf][j + 1][1],
                    bs + 2 * tile_off<B_COLS>(r, c));
    }
  };
  auto mma_step = [&](int buf) { /* the warp's MI x NI mma tiles on one k-step */
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j) mma_16816(acc[i][j], fa[buf][i], fb[buf][j]);
  };

  /* K / BK rounded up, without overflowing K + BK - 1. */
  const int k_tiles = K / BK + (K % BK != 0);
#if VEC == 0
]] .. main_loop_raw .. [[
#elif VEC == 1
]] .. main_loop_regs .. [[
#else
]] .. main_loop_async .. [[
#endif
]] .. split_k.reduce .. [[
${epilogue_loop}}
]]

local MAX_REGS = 240 -- cap of the register estimate (255 is the hardware limit)
local REG_MARGIN = 16 -- registers the occupancy hint leaves above the estimate

-- Everything derived from a config and layout (shared by constraints and emit).
local function derive(p, layout)
  local d = {}
  d.warps = (p.bm // p.wm) * (p.bn // p.wn)
  d.threads = 32 * d.warps
  d.a_t, d.b_t = gemm.transposed(layout)
  d.unit = (p.vec == 8 or p.vec == 0) and 8 or 2
  -- Copies per thread per tile (a float: integral when the tile splits evenly); the same for
  -- every layout, only the orientation of the stored tile changes.
  d.a_loads = p.bm * p.bk / d.unit / d.threads
  d.b_loads = p.bn * p.bk / d.unit / d.threads
  -- Shared memory.  Swizzled tiles are dense; padded rows add 8 elements, so the size depends
  -- on the orientation: the worst of the two is what the config must fit, so that its
  -- validity does not depend on the layout.  VEC = 0 has two swizzled stages and STAGES raw
  -- ones, whose rows have one 16-byte chunk more.
  local function operand(rows, cols) -- elements of one operand in every stage
    local tile = rows * (p.swz == 1 and cols or cols + 8)
    if p.vec == 0 then return 2 * tile + p.stages * rows * (cols + 8) end
    return p.stages * tile
  end
  d.shared_max = (math.max(operand(p.bm, p.bk), operand(p.bk, p.bm)) +
                  math.max(operand(p.bn, p.bk), operand(p.bk, p.bn))) * 2
  d.shared_bytes = ((d.a_t and operand(p.bk, p.bm) or operand(p.bm, p.bk)) +
                    (d.b_t and operand(p.bn, p.bk) or operand(p.bk, p.bn))) * 2
  -- Registers: the fp32 accumulators, two k-steps of fragments (4 per 16 rows of A, 2 per 8
  -- columns of B), ~32 for addresses and indices, and the tile in flight: each element
  -- (VEC = 1: a 2-byte load lands in its own register until the pair is packed, plus its
  -- address share, 5/4 per element) or, for cp.async, about one per two copies (their
  -- addresses; VEC = 0: 12 more for the realign, its two raw chunks and select stages and
  -- the shift of each unit, which ptxas keeps across tiles).  Fitted to ptxas (NVRTC 13.0,
  -- sm_90): no valid config spills in layout nn; about 2% of the tn ones spill 4 to 8 bytes
  -- (templates/README.md, mma_sync design); no valid VEC = 0 config spills in any layout.
  if p.vec == 1 then
    d.in_flight = (5 * (p.bm + p.bn) * p.bk // d.threads + 3) // 4
  elseif p.vec == 0 then
    d.in_flight = math.floor(d.a_loads + d.b_loads) // 2 + 12
  else
    d.in_flight = math.floor(d.a_loads + d.b_loads) // 2
  end
  d.regs = p.wm * p.wn // 32 + 2 * (p.wm // 4 + p.wn // 4) + 32 + d.in_flight
  d.reg_limit = math.min(MAX_REGS, limits.regs_per_thread(d.threads))
  -- Occupancy hint (__launch_bounds__ minimum blocks): the most blocks per SM, up to 4, whose
  -- register share (a multiple of 8, at most 255) leaves REG_MARGIN above the estimate and
  -- whose shared memory fits; without it ptxas spends registers freely (up to 255) on
  -- hoisted addresses and a 32-accumulator kernel would run 4 warps per SM.
  d.min_blocks = 1
  for b = 2, 4 do
    local share = math.min(255, limits.regs_per_thread(b * d.threads) // 8 * 8)
    if d.regs + REG_MARGIN <= share and b * d.threads <= mmt.device.max_threads_sm and
       b <= limits.blocks_by_shared(d.shared_bytes) then
      d.min_blocks = b
    end
  end
  return d
end

-- split = 1 keeps the name (and source) of the kernel without split-K.
local function kernel_name(p, dtype, layout)
  return gemm.tiled_name(string.format("mmt_mma_sync_%s_%s_m%d_n%d_k%d_wm%d_wn%d_s%d_v%d_z%d_g%d",
                                       dtype, layout, p.bm, p.bn, p.bk, p.wm, p.wn, p.stages,
                                       p.vec, p.swz, p.group), p.split)
end

-- The space, in the order of the kernel's #defines and comment block (gemm.param_vars).
local params = {
  {name = "bm", values = {16, 32, 64, 128, 256}},
  {name = "bn", values = {64, 128, 256}},
  {name = "bk", values = {32, 64}},
  {name = "wm", values = {16, 32, 64}},
  {name = "wn", values = {32, 64}},
  {name = "stages", values = {2, 3, 4, 5}},
  {name = "vec", values = {0, 1, 2, 8}},
  {name = "swz", values = {0, 1}},
  {name = "group", values = {1, 8}},
  {name = "split", values = {1, 4, 16}},
}

return {
  name = "mma_sync",
  description = "tensor-core GEMM (f16, bf16): mma.sync + ldmatrix, cp.async ring, any size",
  dtypes = {"f16", "bf16"},
  layouts = gemm.LAYOUTS,
  epilogues = true,
  params = params,
  default = {bm = 128, bn = 128, bk = 32, wm = 64, wn = 64, stages = 4, vec = 8, swz = 1,
             group = 8, split = 1},

  constraints = function(p, prob, dtype, layout, op)
    -- Blocks of 16 or 32 rows are for decode-size batches (M of 8 to 32: one tensor-core tile
    -- high, the weights streamed once); narrower warps than 32 rows only there.
    if p.wm > p.bm then
      return false, string.format("wm=%d is more than bm=%d", p.wm, p.bm)
    end
    if p.wm == 16 and p.bm > 32 then
      return false, "wm=16 only with bm of 16 or 32"
    end
    local d = derive(p, layout)
    if d.threads < 64 or d.threads > 512 then
      return false, string.format("(bm/wm)*(bn/wn) = %d warps: %d threads, outside 64..512",
                                  d.warps, d.threads)
    end
    if p.vec == 1 and p.stages ~= 2 then
      return false, "vec=1 loads through registers: stages=2 only"
    end
    if p.vec == 0 and p.stages < 3 then
      return false, "vec=0 copies STAGES - 1 raw tiles ahead of the realigned one: stages >= 3"
    end
    if p.vec == 0 and p.swz ~= 1 then
      return false, "vec=0 realigns into swizzled tiles: swz=1 (padding only costs memory)"
    end
    local ok, why = epilogue.fits(op, prob, true, p.split == 1, false, true)
    if not ok then return false, why end
    -- split-K: one pipeline per block shape and width (block order matters little then)
    return gemm.tiled_fits(p, prob, d, d.shared_max,
                           p.stages <= 3 and p.swz == 1 and p.group == 1,
                           "stages 2 or 3, swz=1, group=1")
  end,

  emit = function(p, dtype, layout, op)
    local name = epilogue.name(kernel_name(p, dtype, layout), op)
    local d = derive(p, layout)
    local vars = gemm.vars(name, dtype, layout, {
      elem = elem[dtype],
      mma_16816 = mmt.subst(mma_16816, {mma_type = dtype}), -- PTX names f16, bf16 alike
      threads = d.threads, shared_bytes = d.shared_bytes, min_blocks = d.min_blocks,
      smem_formula = p.vec == 0 and "(2 * (A_STAGE + B_STAGE) + STAGES * (A_RAW + B_RAW)) * 2"
                     or "STAGES * (A_STAGE + B_STAGE) * 2",
      tile_order = tile_order, split_a = "Ag", split_b = "Bg", dependent_launch = dependent_launch,
      epilogue = epilogue.source(op, p.split == 1),
      epilogue_loop = op and op_epilogue or plain_epilogue,
    })
    epilogue.vars(vars, op)
    gemm.param_vars(vars, p, params)
    -- What the copies and the stores of C need: whole units along the contiguous dimension of
    -- A (K, or M when transposed) and of B (N, or K when transposed), pairs along N (C), and
    -- the unit's alignment.
    local req
    if p.vec <= 1 then
      req = {m_multiple = 1, n_multiple = 1, k_multiple = 1, align = mmt.dtype(dtype).bytes}
    else
      local u = d.unit
      req = {m_multiple = d.a_t and u or 1,
             n_multiple = d.b_t and 2 or u,
             k_multiple = (not d.a_t or d.b_t) and u or 1,
             align = 2 * u}
    end
    -- Without split-K a launch may start while the kernel before it finishes (sm_90 and
    -- newer): every thread waits (griddepcontrol.wait) before it touches global memory.
    return gemm.tiled_kernel(p, name, mmt.subst(source, vars), d.threads, d.shared_bytes, req,
                             true)
  end,
}
