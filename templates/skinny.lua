-- skinny.lua: GEMM where one of M and N is small (at most 64): GEMV, decode-size batches.
--
-- Such a product is memory-bound: its time is the bytes of the large operand (the weight
-- matrix W, K x L with L the large one of M, N) over the memory bandwidth.  A tensor-core
-- tile of 64 or 128 rows wastes most of its work on the small side and leaves most SMs idle,
-- so this family streams W instead: every element of W is read once (per block row of the
-- small side), with 16-byte loads, and the small operand X (S x K, S the small one of M, N)
-- is read from L1/L2, where it stays (all blocks share it).  Accumulation is fp32 on the CUDA
-- cores; C is rounded once.
--
-- Two kernel bodies, chosen by how W is stored (the layout and side decide, not a parameter):
--   dot  (W K-contiguous: side=0 with B "t", side=1 with A "n"; the decode x.W^T case): a warp
--        owns RL rows of W and walks K in chunks of 32 lanes x V elements (16 bytes a lane);
--        each lane keeps BS x RL partial dot products, reduced over the warp by shuffles.
--        Where X is not K-contiguous (side=0 "tt", side=1 "nn"), the block stages each step's
--        slice of X through shared memory, transposed, so that X's loads are coalesced.
--   axpy (W L-contiguous): a lane owns RL vectors of V neighbouring columns of W and walks
--        K one row at a time, adding X(s, k) * W(k, :) for the BS rows of its block.  LANES
--        lanes share a row: a warp covers 32 / LANES rows of K at a time, each LANES x V x RL
--        columns wide, and adds its rows' sums by shuffles at the end.  LANES = 32: a warp's
--        load is a 512-byte stretch of one row; 16 and 8 (2 or 4 rows of 256 or 128 bytes)
--        keep more rows in flight for the same registers, which measured 2-7% faster on fp32
--        GEMVs with split-K.  A lane loads its next UNROLL rows before it multiplies the
--        last ones (two sets of registers), so a warp always has loads in flight; with that,
--        narrow blocks whose 8 or 16 warps split all of K (KW = WARPS, no split-K) became the
--        fastest for 1 x 4096 GEMVs (fp32 nn, 8 warps: 0.0380 -> 0.0278 ms, 16 warps 0.0265;
--        they had been 1.2-3x slower than split-K while each group of loads waited for the
--        last to land).  16 warps are for this body alone (the dot body's were slower).
-- In both, KW warps of a block split K between them and add their partial sums through
-- shared memory; the other WARPS / KW warp groups of the block own other rows (columns) of W.
-- SPLIT > 1 (with KW = 1) splits K across blocks instead, for problems with too few blocks
-- to fill the GPU (a 1 x 4096 GEMV in the axpy body has 8): grid.z slices of K whose sums
-- meet in the fp32 workspace, added in slice order by the last to arrive (the split_k
-- snippet).
-- A block owns BS rows of the small side: grid.x walks the small side in steps of BS (the
-- fastest, so the blocks sharing a slice of W run together and re-read it from L2).
--
-- Everything is bounds-checked: K tails, the last rows or columns of W, the small side's
-- edge; vec=1 asks for 16-byte aligned operands (requires.align) and vec=0 runs anywhere.

local elem = mmt.lib("elem")
local dependent_launch, load_stream = mmt.snippet("dependent_launch"), mmt.snippet("load_stream")
local gemm, limits, split_k = mmt.lib("gemm"), mmt.lib("limits"), mmt.lib("split_k")
local skinny = mmt.lib("skinny")
local epilogue = mmt.lib("epilogue")

-- The store of C(s, l), s and l the expressions of its row of S and of L, v its sum: the plain
-- GEMM's, or an op kernel's (lib/epilogue.lua: the product's element (s, l), SIDE 1 (l, s);
-- one element at a time, so no gated op), at `indent`.
local function store_c(op, indent, s, l, v)
  if op then
    return string.format("%sepi_store(E, C, ldc, beta, SIDE ? %s : %s, SIDE ? %s : %s, alpha * %s);\n",
                         indent, l, s, s, l, v)
  end
  return mmt.subst([[
${i}elem_t* const c = Cg + ${s} * C_S + ${l} * C_L;
${i}const float v = alpha * ${v};
${i}*c = to_elem(beta == 0.0f ? v : v + beta * to_float(*c));
]], {i = indent, s = s, l = l, v = v})
end

-- dot: W(k, l) at W[l * w_ld + k].
local dot_body = [[
  const long long l0 = ((long long)blockIdx.y * RG + group) * RL;
  const elem_t* wrow[RL];
#pragma unroll
  for (int r = 0; r < RL; r++) wrow[r] = W + (l0 + r < L ? l0 + r : L - 1) * w_ld;
  float acc[BS][RL];
#pragma unroll
  for (int s = 0; s < BS; s++)
#pragma unroll
    for (int r = 0; r < RL; r++) acc[s][r] = 0.0f;
  /* The products of one chunk with a K-contiguous X: this lane's V elements of W's RL rows
   * (w) and of X's BS rows at k. */
  auto dot_chunk = [&](const float (&w)[RL][V], long long k) {
#pragma unroll
    for (int s = 0; s < BS; s++) {
      float x[V];
      load_v(X + XOFF(s) + k, x);
#pragma unroll
      for (int r = 0; r < RL; r++)
#pragma unroll
        for (int j = 0; j < V; j++) acc[s][r] = fmaf(x[j], w[r][j], acc[s][r]);
    }
  };
  /* Chunks of 32 * V elements of K; K part kpart takes chunks kpart, kpart + KW, ...; a lane
   * takes V elements of a chunk.  The elements after the last whole chunk go to the part
   * whose turn is next, element by element. */
  const int chunks = K / (32 * V);
  /* X is K-contiguous, or (x_ld == 1) a single row of S that is: its loads are coalesced. */
#if X_KMAJOR
  if (true) {
#else
  if (S == 1 && x_ld == 1) {
#endif
    int c = kpart;
    for (; c + (UNROLL - 1) * KW < chunks; c += UNROLL * KW) {
      float w[UNROLL][RL][V];
#pragma unroll
      for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int r = 0; r < RL; r++) load_w(wrow[r] + (long long)(c + u * KW) * (32 * V) + lane * V, w[u][r]);
#pragma unroll
      for (int u = 0; u < UNROLL; u++)
        dot_chunk(w[u], (long long)(c + u * KW) * (32 * V) + lane * V);
    }
    for (; c < chunks; c += KW) { /* the chunks left over from the unrolled steps */
      float w[RL][V];
#pragma unroll
      for (int r = 0; r < RL; r++) load_w(wrow[r] + (long long)c * (32 * V) + lane * V, w[r]);
      dot_chunk(w, (long long)c * (32 * V) + lane * V);
    }
  }
#if !X_KMAJOR
  else {
    /* X is S-contiguous (K rows of S): a lane's V elements of K for one s lie V rows apart, a
     * load each, and a warp's load touches 32 sectors; X's L1 wavefronts outnumbered W's about
     * 60 to 1 (4096x16x4096 nn ran at 1/25 of its bandwidth).  So at each step of UNROLL * KW
     * chunks, the block copies the step's rows of X to shared memory once, with coalesced
     * loads (consecutive threads, consecutive s), transposed to K-contiguous (a row of S every
     * XS_LD floats), and every warp reads its V elements back as 16-byte vectors.  The next
     * step's X is loaded into registers (XS_PER a thread) while this step computes, so its
     * latency hides behind the math.  Every warp takes every step (the syncs); a chunk past
     * the last is skipped. */
    float* const xs = red + XS_OFFSET;
    const long long kwhole = (long long)chunks * (32 * V);
    float xv[XS_PER];
    load_xs(xv, X, x_ld, 0, kwhole, s0, S);
    for (int c0 = 0; c0 < chunks; c0 += UNROLL * KW) {
      float w[UNROLL][RL][V];
#pragma unroll
      for (int u = 0; u < UNROLL; u++)
        if (c0 + u * KW + kpart < chunks)
#pragma unroll
          for (int r = 0; r < RL; r++)
            load_w(wrow[r] + (long long)(c0 + u * KW + kpart) * (32 * V) + lane * V, w[u][r]);
      {
        float* const row = xs + (threadIdx.x % BS) * XS_LD + threadIdx.x / BS;
#pragma unroll
        for (int q = 0; q < XS_PER; q++)
          if (threadIdx.x / BS + q * (WARPS * 32 / BS) < XS_K) row[q * (WARPS * 32 / BS)] = xv[q];
      }
      __syncthreads();
      if (c0 + UNROLL * KW < chunks)
        load_xs(xv, X, x_ld, (long long)(c0 + UNROLL * KW) * (32 * V), kwhole, s0, S);
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        if (c0 + u * KW + kpart >= chunks) break;
        const int i0 = (u * KW + kpart) * (32 * V) + lane * V;
#pragma unroll
        for (int s = 0; s < BS; s++) {
          float x[V];
#pragma unroll
          for (int j = 0; j < V; j += 4) {
            const float4 q = *reinterpret_cast<const float4*>(xs + s * XS_LD + i0 + j);
            x[j] = q.x;
            x[j + 1] = q.y;
            x[j + 2] = q.z;
            x[j + 3] = q.w;
          }
#pragma unroll
          for (int r = 0; r < RL; r++)
#pragma unroll
            for (int j = 0; j < V; j++) acc[s][r] = fmaf(x[j], w[u][r][j], acc[s][r]);
        }
      }
      __syncthreads();
    }
  }
#endif
  if (kpart == chunks % KW) /* the tail: fewer than 32 * V elements, one at a time */
    for (int k = chunks * (32 * V) + lane; k < K; k += 32) {
      float w[RL];
#pragma unroll
      for (int r = 0; r < RL; r++) w[r] = to_float(__ldg(wrow[r] + k));
#pragma unroll
      for (int s = 0; s < BS; s++) {
        const float x = to_float(__ldg(X + (X_KMAJOR ? XOFF(s) + k : (long long)k * x_ld + XOFF(s))));
#pragma unroll
        for (int r = 0; r < RL; r++) acc[s][r] = fmaf(x, w[r], acc[s][r]);
      }
    }
  /* Over the warp's lanes, then over the K parts: part 0 adds the others' sums. */
#pragma unroll
  for (int s = 0; s < BS; s++)
#pragma unroll
    for (int r = 0; r < RL; r++)
#pragma unroll
      for (int o = 16; o > 0; o /= 2) acc[s][r] += __shfl_xor_sync(0xffffffffu, acc[s][r], o);
#if KW > 1
  if (kpart > 0 && lane == 0)
#pragma unroll
    for (int s = 0; s < BS; s++)
#pragma unroll
      for (int r = 0; r < RL; r++) red[((kpart - 1) * RG + group) * (BS * RL) + s * RL + r] = acc[s][r];
  __syncthreads();
  if (kpart > 0) return;
#pragma unroll
  for (int s = 0; s < BS; s++)
#pragma unroll
    for (int r = 0; r < RL; r++)
      for (int q = 0; q < KW - 1; q++) acc[s][r] += red[(q * RG + group) * (BS * RL) + s * RL + r];
#endif
]] .. skinny.reduce .. [[  /* Lane i stores sum i = s * RL + r (BS * RL <= 32). */
#pragma unroll
  for (int s = 0; s < BS; s++)
#pragma unroll
    for (int r = 0; r < RL; r++)
      if (lane == s * RL + r && s0 + s < S && l0 + r < L) {
${store_dot}      }
]]

-- axpy: W(k, l) at W[k * w_ld + l].
local axpy_body = [[
  /* Lane's columns: l0 + (LANES * j + lane % LANES) * V + (0..V-1) for j < RL; its rows: sub,
   * sub + RW, ... of its K part's. */
  const int sub = lane / LANES;
  const long long l0 = ((long long)blockIdx.y * RG + group) * (LANES * V * RL);
  long long col[RL];
  bool whole[RL]; /* all V columns inside W: one vector load (VEC), else element by element */
#pragma unroll
  for (int j = 0; j < RL; j++) {
    col[j] = l0 + (LANES * j + lane % LANES) * V;
    whole[j] = VEC && col[j] + V <= L;
  }
  float acc[BS][RL][V];
#pragma unroll
  for (int s = 0; s < BS; s++)
#pragma unroll
    for (int j = 0; j < RL; j++)
#pragma unroll
      for (int e = 0; e < V; e++) acc[s][j][e] = 0.0f;
  /* K part kpart takes the RW rows from kpart * RW, then those KW * RW on, ..., a group of
   * UNROLL at a time; a lane takes row sub of each RW.  W's words stay raw (16 bytes) in
   * registers until their products: the next group's loads are issued before this group's
   * products, so a warp keeps loads in flight while it multiplies (two groups of registers;
   * a warp that waited for each group to land before loading the next had half the loads in
   * flight, and the fp32 GEMV moved W at 2.3 TB/s against 2.6 for the dot body). */
  constexpr int STEP = UNROLL * KW * RW;
  auto load_group = [&](uint4 (&w)[UNROLL][RL], int k0) {
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const int k = k0 + u * KW * RW;
#pragma unroll
      for (int j = 0; j < RL; j++) w[u][j] = load_w_raw(W + (long long)k * w_ld + col[j], k < K, whole[j], col[j], L);
    }
  };
  /* Rows past K hold zeros in w and x: their products add nothing, and no branch keeps the
   * group's loads of X from being issued together (all of them first where they are few;
   * many would cost more registers than the waits they save). */
  auto load_x = [&](float (&x)[UNROLL][BS], int u, int k0) {
    const int k = k0 + u * KW * RW;
#pragma unroll
    for (int s = 0; s < BS; s++)
      x[u][s] = k < K ? to_float(__ldg(X + (X_KMAJOR ? XOFF(s) + k : (long long)k * x_ld + XOFF(s)))) : 0.0f;
  };
  constexpr bool X_FIRST = UNROLL * BS <= 16;
  auto fma_group = [&](const uint4 (&w)[UNROLL][RL], int k0) {
    float x[UNROLL][BS];
    if constexpr (X_FIRST) {
#pragma unroll
      for (int u = 0; u < UNROLL; u++) load_x(x, u, k0);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      if constexpr (!X_FIRST) load_x(x, u, k0);
      float f[RL][V];
#pragma unroll
      for (int j = 0; j < RL; j++) unpack(w[u][j], f[j]);
#pragma unroll
      for (int s = 0; s < BS; s++)
#pragma unroll
        for (int j = 0; j < RL; j++)
#pragma unroll
          for (int e = 0; e < V; e++) acc[s][j][e] = fmaf(x[u][s], f[j][e], acc[s][j][e]);
    }
  };
  uint4 wa[UNROLL][RL], wb[UNROLL][RL];
  int k0 = kpart * RW + sub;
  load_group(wa, k0);
  while (k0 < K) { /* two groups a turn, so that neither register set is copied */
    load_group(wb, k0 + STEP);
    fma_group(wa, k0);
    k0 += STEP;
    if (k0 >= K) break;
    load_group(wa, k0 + STEP);
    fma_group(wb, k0);
    k0 += STEP;
  }
#if RW > 1
  /* Over the warp's rows: then every lane holds its columns' sums for the whole warp. */
#pragma unroll
  for (int i = 0; i < BS * RL * V; i++)
#pragma unroll
    for (int o = 16; o >= LANES; o /= 2)
      (&acc[0][0][0])[i] += __shfl_xor_sync(0xffffffffu, (&acc[0][0][0])[i], o);
#endif
#define NACC (BS * RL * V) /* a lane's sums, acc[s][j][e] */
]] .. skinny.meet .. [[  if (sub > 0) return; /* the same sums as lane lane % LANES */
#pragma unroll
  for (int s = 0; s < BS; s++) {
    if (s0 + s >= S) break;
#pragma unroll
    for (int j = 0; j < RL; j++)
#pragma unroll
      for (int e = 0; e < V; e++)
        if (col[j] + e < L) {
${store_axpy}        }
  }
]]

local source = [[
/*
 * ${name} -- mmtune template "skinny", ${ctype}, row-major, layout ${layout}:
 * C = alpha * op(A)*op(B) + beta * C for problems where ${small} is small (at most 64).
 * ${small_op} is the small operand X (S x K, S = ${small}); ${big_op} is the streamed operand W (K x L,
 * L = ${big}), stored ${w_doc}: the ${body} body (see the template's header).
 * fp32 accumulation on the CUDA cores (tf32 problems get full fp32 products), C rounded once.
 *
 * Parameters:
 *   SIDE   = ${side} which of M (0) and N (1) is the small side S
 *   BS     = ${bs} rows of S per block (grid.x = ceil(S / BS))
 *   RL     = ${rl} dot: rows of W per warp; axpy: vectors of V columns of W per lane
 *   LANES  = ${lanes} axpy: lanes that share a row of W (a warp takes 32 / LANES rows at a time)
 *   WARPS  = ${warps} warps per block (16: the axpy body only)
 *   KW     = ${kw} warps of a block that split K (the block's WARPS / KW groups own different W)
 *   UNROLL = ${unroll} chunks (dot) or rows (axpy) of W loaded before they are used
 *   VEC    = ${vec} 1: 16-byte loads of W (and of X where K is contiguous); requires 16-byte
 *                 aligned operands and pitches.  0: element loads, any alignment
 *   SPLIT  = ${split} slices of K across blocks (grid.z): slice z takes K columns [z * KC,
 *                 min(K, (z + 1) * KC)), KC = ceil(ceil(K / SPLIT) / SLICE_STEP) * SLICE_STEP
 *                 (SLICE_STEP = ${slice_step}: dot, a chunk of 32 x V, so vector loads stay
 *                 aligned; axpy, 8 rows of W), and the slices of a block's sums meet in the
 *                 workspace WS (splitk_reduce)
 * Derived: V = ${v} elements in 16 bytes; a block owns LB = ${lb} of L's indices.
 * Launch: block (${threads}, 1, 1), grid (ceil(S / BS), ceil(L / LB), SPLIT), ${shared_bytes} bytes of
 * dynamic shared memory (the K split's partial sums, the staged X).  The blocks of one slice
 * of W (all of S) are neighbours in launch order, so W is read from DRAM once and re-read
 * from L2.
 * K == 0 writes alpha * 0 + beta * C; when beta == 0, C is not read.
 */
#define SIDE ${side}
#define BS ${bs}
#define RL ${rl}
#define LANES ${lanes}
#define RW (32 / LANES) /* axpy: rows of W a warp loads at a time */
#define WARPS ${warps}
#define KW ${kw}
#define RG (WARPS / KW) /* warp groups of a block, each owning its own rows of W */
#define SPLITK_THREADS (WARPS * 32) /* split-K's meeting: every thread of the block */
#define SPLITK_TID threadIdx.x
#define UNROLL ${unroll}
#define VEC ${vec}
#define SPLIT ${split}
#define SLICE_STEP ${slice_step}
#define V ${v}
#define LB ${lb}
#define A_T ${a_t} /* 1: A stored transposed, K rows of M (lda >= M); 0: M rows of K */
#define B_T ${b_t} /* 1: B stored transposed, N rows of K (ldb >= K); 0: K rows of N */
/* X is ${x_doc}.  Dot with an S-contiguous X: a step's X (XS_K elements of K, BS rows of S)
 * staged in shared memory from float XS_OFFSET, XS_LD floats a row. */
#define XS_K ${xs_k}
#define XS_LD ${xs_ld}
#define XS_OFFSET ${xs_offset}
#define XS_PER ${xs_per} /* elements of the staged X a thread loads a step (at least 1) */
${elem}${dependent_launch}${epilogue}]] .. split_k.helpers .. [[${load_stream}
/* 16 bytes (V elements) as floats. */
__device__ __forceinline__ void unpack(const uint4 v, float* f) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    if constexpr (sizeof(elem_t) == 2) {
      f[2 * i] = to_float((elem_t)(w[i] & 0xffffu));
      f[2 * i + 1] = to_float((elem_t)(w[i] >> 16));
    } else {
      f[i] = __uint_as_float(w[i]);
    }
  }
}

/* V elements from p (16-byte aligned when VEC) as floats. */
__device__ __forceinline__ void load_v(const elem_t* p, float* f) {
#if VEC
  unpack(__ldg(reinterpret_cast<const uint4*>(p)), f);
#else
#pragma unroll
  for (int j = 0; j < V; j++) f[j] = to_float(__ldg(p + j));
#endif
}

/* V elements of W from p (16-byte aligned when VEC), as floats.  W is read once, so its
 * 16-byte loads do not allocate in L1 (load_stream), which keeps L1 for X, read by every
 * warp: 1-3% on batch-1 GEMVs (a plain cold read of 32-64 MiB: 7%). */
__device__ __forceinline__ void load_w(const elem_t* p, float* f) {
#if VEC
  unpack(load_stream(p), f);
#else
  load_v(p, f);
#endif
}

/* 16 bytes of W at p as raw words, V elements from column col: one 16-byte load where all V
 * are inside W (whole: VEC and col + V <= L), else element by element, zero past K (in_k
 * false) or L. */
__device__ __forceinline__ uint4 load_w_raw(const elem_t* p, bool in_k, bool whole, long long col,
                                            int L) {
  if (in_k && whole) return load_stream(p);
  union { elem_t e[V]; uint4 u; } r;
#pragma unroll
  for (int j = 0; j < V; j++) r.e[j] = in_k && col + j < L ? __ldg(p + j) : (elem_t)0;
  return r.u;
}

/* Dot with an S-contiguous X: the thread's XS_PER elements of a step's X, as floats (0 past
 * the staged rows or the whole chunks, kwhole).  Element q of thread t is row kb + i of K,
 * i = t / BS + q * (WARPS * 32 / BS), and row s0 + t % BS of S (BS divides the threads), so
 * one pointer and one stride serve every q. */
__device__ __forceinline__ void load_xs(float (&xv)[XS_PER], const elem_t* X, long long x_ld,
                                        long long kb, long long kwhole, int s0, int S) {
  constexpr int QS = WARPS * 32 / BS; /* rows of K a pass of the block's threads covers */
  const int i0 = threadIdx.x / BS;
  const elem_t* const p = X + (kb + i0) * x_ld + min(s0 + (int)(threadIdx.x % BS), S - 1);
  const long long stride = QS * x_ld;
#pragma unroll
  for (int q = 0; q < XS_PER; q++) {
    const int i = i0 + q * QS;
    xv[q] = i < XS_K && kb + i < kwhole ? to_float(__ldg(p + q * stride)) : 0.0f;
  }
}

]] .. skinny.head .. [[  /* X's row s of S: its offset in X (K-contiguous: a row pointer; S-contiguous: a column),
   * rows past S clamped to the last one: their sums are computed and dropped, so no load
   * needs a guard.  A macro, not an array of BS offsets: the array's registers made ptxas
   * spill where the staged X's registers are live too. */
#define XOFF(s) ((long long)min(s0 + (s), S - 1) * (X_KMAJOR ? x_ld : 1))
#if W_KMAJOR /* the dot body */
]] .. dot_body .. [[
#else /* the axpy body */
]] .. axpy_body .. [[
#endif
}
${walk}]]

-- K's limit: the kernels index K with an int (64-bit indices cost the f16 axpy body 10% and
-- spilled), and step it past K by up to 2 * UNROLL * KW * RW (axpy) or 32 (the dot body's tail).
local MAX_K = (1 << 31) - 1 - 16384
local MAX_XS_PER = 16      -- registers a thread holds the next step's staged X in
-- lanes < 32 shapes the axpy body's warps; the dot body's lanes walk K (the body is the
-- layout's and side's, so the layout decides whether a config is valid)
local LANES_DOT = "lanes < 32 is for the axpy body (W L-contiguous)"
-- 16 warps a block: measured faster for the axpy body alone (f16 1x4096x4096 nn: 0.0180 ms
-- against 0.0205 for the best of 8 warps; the dot body's best 16-warp config in nt: 0.0175
-- against 0.0155), where a block of 16 K parts keeps a 1 x 4096 GEMV on all SMs without split-K
local WARPS16_DOT = "warps = 16 is for the axpy body (W L-contiguous)"

-- Which body a (side, layout) gets: W K-contiguous -> dot.
local function w_kmajor(side, layout)
  if side == 0 then return layout:sub(2, 2) == "t" end
  return layout:sub(1, 1) == "n"
end

local function vec_elems(dtype) return 16 // mmt.dtype(dtype).bytes end

-- The granularity of split-K's slices of K: dot, a chunk (32 lanes x V), so that the
-- K-contiguous vector loads stay aligned; axpy, 8 rows of W.
local function slice_step(dot, v) return dot and 32 * v or 8 end

-- Whether X (the small operand) is K-contiguous: side 0, X = A, when A is "n"; side 1, X = B,
-- when B is "t".  The dot body stages an X that is not through shared memory.
local function x_kmajor(side, layout)
  if side == 0 then return layout:sub(1, 1) == "n" end
  return layout:sub(2, 2) == "t"
end

-- Partial sums a thread keeps, and the shared memory, for a body: the K split's partial sums
-- (floats from 0), then, for dot with an S-contiguous X, the staged X (from XS_OFFSET, 16-byte
-- aligned: BS rows of XS_LD floats, XS_K = UNROLL * KW chunks of 32 x V and 4 floats of pad,
-- which keeps the rows' 16-byte alignment and halves the stores' bank conflicts).
local function sizes(p, dot, v, staged)
  local acc = dot and p.bs * p.rl or p.bs * p.rl * v
  local per_warp = dot and acc or acc * 32
  local floats = (p.kw - 1) * (p.warps // p.kw) * per_warp
  local xs = {k = 0, ld = 0, offset = 0, per = 1}
  if staged then
    xs.k = p.unroll * p.kw * 32 * v
    xs.ld = xs.k + 4
    xs.offset = (floats + 3) // 4 * 4
    xs.per = mmt.ceil_div(xs.k * p.bs, 32 * p.warps)
    floats = xs.offset + p.bs * xs.ld
  end
  return acc, floats * 4, xs
end

return {
  name = "skinny",
  description = "skinny GEMM (M or N <= 64): streams the large operand at the memory roofline",
  dtypes = {"f32", "tf32", "f16", "bf16"},
  layouts = gemm.LAYOUTS,
  epilogues = true,
  params = {
    {name = "side", values = {0, 1}},
    {name = "bs", values = {1, 2, 4, 8, 16}},
    {name = "rl", values = {1, 2, 4}},
    {name = "lanes", values = {32, 16, 8}},
    {name = "warps", values = {4, 8, 16}},
    {name = "kw", values = {1, 2, 4, 8, 16}},
    {name = "unroll", values = {1, 2, 4, 8}},
    {name = "vec", values = {0, 1}},
    {name = "split", values = {1, 4, 16, 32, 64}},
  },
  default = {side = 0, bs = 1, rl = 2, lanes = 32, warps = 4, kw = 1, unroll = 2, vec = 1,
             split = 1},
  constraints = function(p, prob, dtype, layout, op)
    -- grouped: the experts' rows are M (side 0), each expert's tile rows its own
    local ok, why = epilogue.fits(op, prob, false, p.split == 1, false, p.side == 0)
    if not ok then return false, why end
    if p.kw > p.warps then return false, "kw > warps: more K parts than warps" end
    -- dot: a lane stores sum s * rl + r, and the registers: at most 32 sums
    if p.bs * p.rl > 32 then return false, "bs * rl > 32 partial sums" end
    if p.rl * p.unroll > 8 then return false, "rl * unroll > 8 vectors of W in flight a lane" end
    -- K is split across blocks or within them, not both (a K part's warps leave early)
    if p.split > 1 and p.kw > 1 then return false, "split > 1 only with kw = 1" end
    -- the body (the layout's and side's) and the dtype's V decide the rest of the config's
    local dot, v = w_kmajor(p.side, layout), vec_elems(dtype)
    if dot and p.lanes < 32 then return false, LANES_DOT end
    local acc, shared, xs = sizes(p, dot, v, dot and not x_kmajor(p.side, layout))
    if xs.per > MAX_XS_PER then
      return false, "the staged X: over " .. MAX_XS_PER .. " elements a thread a step"
    end
    if not dot and acc > 64 then return false, "axpy: bs * rl * V > 64 partial sums a lane" end
    if p.warps > 8 then
      if dot then return false, WARPS16_DOT end
      if acc > 16 then return false, "warps = 16: bs * rl * V > 16 partial sums a lane (128 registers a thread)" end
    end
    -- the K split's sums and the staged X within what a block has without opting in
    local ok, why = limits.shared(shared, mmt.device.max_shared_static)
    if not ok then return false, why .. ": the K split's sums, the staged X" end
    if not prob then return true end
    if prob.K > MAX_K then return false, "K over 2^31 - 16385: the kernel's int index along K would wrap" end
    local lb = (p.warps // p.kw) * p.rl * (dot and 1 or p.lanes * v)
    return skinny.fits(p, prob, lb, 1, slice_step(dot, v), acc * 32 * p.warps * 4,
                       op and op.group)
  end,
  emit = function(p, dtype, layout, op)
    local dot = w_kmajor(p.side, layout)
    local v = vec_elems(dtype)
    local staged = dot and not x_kmajor(p.side, layout)
    local acc, shared, xs = sizes(p, dot, v, staged)
    local rg = p.warps // p.kw
    local lb = dot and rg * p.rl or rg * p.lanes * v * p.rl
    local name = string.format("mmt_skinny_%s_%s_s%d_b%d_r%d_w%d_k%d_u%d_v%d", dtype, layout,
                               p.side, p.bs, p.rl, p.warps, p.kw, p.unroll, p.vec)
    if p.lanes < 32 then name = name .. "_l" .. p.lanes end
    if p.split > 1 then name = name .. "_z" .. p.split end
    name = epilogue.name(name, op)
    local src = mmt.subst(source, skinny.group_vars(epilogue.vars(skinny.side_vars(p, gemm.vars(name, dtype, layout, {
      tile_rows = "BS",
      epilogue = epilogue.source(op, p.split == 1, skinny.walks(op)),
      store_dot = store_c(op, "        ", "(s0 + s)", "(l0 + r)", "acc[s][r]"),
      store_axpy = store_c(op, "          ", "(s0 + s)", "(col[j] + e)", "acc[s][j][e]"),
      small_op = p.side == 0 and "op(A)" or "op(B)^T", big_op = p.side == 0 and "op(B)" or "op(A)^T",
      w_doc = dot and "K-contiguous (each of its L rows holds K)"
                  or "L-contiguous (each of its K rows holds L)",
      body = dot and "dot" or "axpy", bs = p.bs, rl = p.rl,
      lanes = p.lanes, warps = p.warps, kw = p.kw, unroll = p.unroll, vec = p.vec, v = v, lb = lb,
      threads = 32 * p.warps, shared_bytes = shared,
      elem = "\n" .. elem[dtype], dependent_launch = "\n" .. dependent_launch,
      split = p.split, load_stream = "\n" .. load_stream,
      slice_step = slice_step(dot, v),
      xs_k = xs.k, xs_ld = xs.ld, xs_offset = xs.offset, xs_per = xs.per,
      x_doc = staged and "S-contiguous: staged through shared memory, K-contiguous"
                     or (x_kmajor(p.side, layout) and "K-contiguous" or "S-contiguous"),
    })), op), op))
    return skinny.kernel(p, name, src, lb, shared, acc * 32 * p.warps * 4,
                         p.vec == 1 and {align = 16} or nil, op)
  end,
}
