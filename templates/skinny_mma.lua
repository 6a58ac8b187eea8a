-- skinny_mma.lua: skinny GEMM (M or N at most 64) in 16 bits or FP8 on the tensor cores, for
-- the decode end of a Linear layer (x * W^T, layout nt) at batches of about 1 to 64.
--
-- Like skinny (see its header), it streams the large operand W (K x L, stored K-contiguous:
-- L rows of K) once, with 16-byte loads, and reads the small one X (S x K, K-contiguous) from
-- L1/L2.  skinny multiplies on the CUDA cores, which at a batch of 8 or more cannot keep up
-- with the bytes (8x4096x4096 is 0.27 GFLOP in the 11 us that its 32 MiB take at 3 TB/s); this
-- family multiplies with mma.sync.m16n8k16, W on the 16-row side of the MMA and X on the
-- 8-column side, so that a batch of 8 wastes nothing.
--
-- The operands go from global memory to the MMA fragments with no shared memory and no
-- ldmatrix: a dot product does not care in which order it visits K, so each lane loads 16
-- bytes (8 consecutive elements of K) of two rows of W, g and g + 8 (g = lane / 4), at
-- element 8 * (lane % 4) of a chunk of 32, and 16 bytes of row g of X at the same place; the
-- MMA's "logical" K of step h (0, 1) is then the physical elements 8t + 4h .. 8t + 4h + 3
-- (t = lane % 4) on both sides, the same permutation of K for A and B, so the products pair up
-- as they must.  A chunk is two MMA steps; a warp owns RL tiles of 16 rows of W and all BS rows
-- of its block's X (BS / 8 tiles of 8), a block RG = WARPS / KW such warps side by side (they
-- read the same X from L1) and KW of them along K.  W's loads skip L1 (they are read once);
-- X's stay there.
--
-- Split-K across blocks (grid.z) meets in the fp32 workspace (the split_k snippet), as in
-- skinny; with KW > 1 too: a block's K parts add up in shared memory first, then part 0's warps
-- alone meet the other slices (SPLITK_SYNC: a named barrier over their RG * 32 threads), so a
-- warp can own many rows of W (X's fragments reused across them) and the grid still fill the
-- GPU.  C(s, l) is fragment element i of tile (r, n) of the warp: l = l0 + 16 r + g + 8 (i
-- / 2), s = s0 + 8 n + 2 t + i % 2.  Everything is bounds-checked: rows of W past L and of X
-- past S are clamped (their sums dropped), a K tail under a chunk is loaded element by element
-- (zeros past K).  Requires 16-byte aligned operands and pitches; other problems go to skinny.
--
-- FP8 (e4m3, e5m2; an op kernel, D of a wider type or FP8) is the same kernel with
-- mma.sync.m16n8k32, whose fragments hold the same 8 bytes of K a lane and row as m16n8k16's,
-- twice the elements: a lane's 16 bytes are 16 elements of K, a chunk 64, the MMA step h's
-- elements 16t + 8h .. 16t + 8h + 7, and nothing else moves.  FP8 has no CUDA-core family
-- (skinny's dot would convert every element), so it comes here from a batch of 1: W's bytes
-- bound the kernel either way.  On sm_90 ptxas makes each m16n8k32 two HMMA.16816 on f16
-- (F2FP converts the FP8 pairs; every e4m3 and e5m2 value is an f16, so the products are
-- exact).  Each MMA's products still start from zero and are added to the sums on the CUDA
-- cores (wgmma.lua's promotion, at an interval of one MMA of 32), so the sums are fp32's
-- where the MMA is the tensor cores' own FP8 accumulation (sm_89, newer GPUs) too, fast
-- accumulation allowed or not.  Block scales are wgmma's alone; an FP8 D keeps its amax as
-- wgmma's epilogue does (EPI_AMAX_*).  The 16-bit kernels' text is as it was without FP8.

local elem = mmt.lib("elem")
local dependent_launch, load_stream = mmt.snippet("dependent_launch"), mmt.snippet("load_stream")
local mma_16816, mma_16832 = mmt.snippet("mma_16816"), mmt.snippet("mma_16832")
local gemm, split_k, skinny = mmt.lib("gemm"), mmt.lib("split_k"), mmt.lib("skinny")
local epilogue = mmt.lib("epilogue")

local source = [[
/*
 * ${name} -- mmtune template "skinny_mma", ${ctype}, row-major, layout nt:
 * C = alpha * op(A)*op(B) + beta * C for problems where ${small} is small (at most 64), on the
 * tensor cores (mma.sync.${mma_shape}, fp32 accumulation${promote_doc}), C rounded once.
 * ${small_op} is the small operand X (S x K, S = ${small}), ${big_op} the streamed operand W
 * (L x K, L = ${big}); both K-contiguous.  The permuted-K fragments: see the template's header.
 *
 * Parameters:
 *   SIDE   = ${side} which of M (0) and N (1) is the small side S
 *   BS     = ${bs} rows of S per block (NT = BS / 8 MMA tiles of 8; grid.x = ceil(S / BS))
 *   RL     = ${rl} tiles of 16 rows of W per warp
 *   WARPS  = ${warps} warps per block
 *   KW     = ${kw} warps of a block that split K (chunk c to part c % KW)
 *   UNROLL = ${unroll} chunks of ${chunk} elements of K loaded before they are used
 *   SPLIT  = ${split} slices of K across blocks (grid.z), each a whole number of chunks, meeting
 *                 in the workspace WS (splitk_reduce)
 * Launch: block (${threads}, 1, 1), grid (ceil(S / BS), ceil(L / ${lb}), SPLIT), ${shared_bytes} bytes of
 * dynamic shared memory (the K parts' sums).  The blocks of one slice of W (all of S) are
 * neighbours in launch order, so W is read from DRAM once.
 * K == 0 writes alpha * 0 + beta * C; when beta == 0, C is not read.
 */
#define SIDE ${side}
#define BS ${bs}
#define NT (BS / 8)
#define RL ${rl}
#define WARPS ${warps}
#define KW ${kw}
#define RG (WARPS / KW)
#define UNROLL ${unroll}
#define SPLIT ${split}
#define SLICE_STEP ${chunk} /* split-K's slices: whole chunks of ${chunk} elements of K */
#define A_T 0 /* layout nt: A stored as M rows of K */
#define B_T 1 /* and B as N rows of K */
#define NACC (RL * NT * 4) /* a lane's sums */
/* split-K's meeting: with KW > 1 only part 0's warps are left, RG * 32 threads (SPLITK_SYNC) */
#define SPLITK_THREADS (RG * 32)
#define SPLITK_TID (group * 32 + lane)
#if KW > 1 /* split-K's barrier: the warps of K part 0 alone (the others have left) */
#define SPLITK_SYNC() asm volatile("bar.sync 1, %0;\n" ::"n"(RG * 32) : "memory")
#endif
${elem}${dependent_launch}${epilogue}]] .. split_k.helpers .. [[
${mma}
${load_stream}

${step_fns}
/* One chunk (two MMA steps) of every tile pair of the warp. */
__device__ __forceinline__ void mma_chunk(float (&acc)[RL][NT][4], const uint4 (&w)[RL][2],
                                          const uint4 (&x)[NT]) {
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int r = 0; r < RL; r++)
#pragma unroll
      for (int n = 0; n < NT; n++) mma_step(acc[r][n], w[r][0], w[r][1], x[n], h);
}

]] .. skinny.head .. [[
  const int g = lane / 4, t = lane % 4;
  const long long l0 = ((long long)blockIdx.y * RG + group) * (RL * 16);
  /* The lane's rows, clamped to the last: W rows l0 + 16 r + g + 8 h, X rows s0 + 8 n + g. */
  const elem_t* wp[RL][2];
#pragma unroll
  for (int r = 0; r < RL; r++)
#pragma unroll
    for (int h = 0; h < 2; h++)
      wp[r][h] = W + min(l0 + 16 * r + g + 8 * h, (long long)L - 1) * w_ld + ${vec} * t;
  const elem_t* xp[NT];
#pragma unroll
  for (int n = 0; n < NT; n++) xp[n] = X + (long long)min(s0 + 8 * n + g, S - 1) * x_ld + ${vec} * t;
  float acc[RL][NT][4];
#pragma unroll
  for (int r = 0; r < RL; r++)
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[r][n][i] = 0.0f;
  const int chunks = K / ${chunk};
  int c = kpart;
  for (; c + (UNROLL - 1) * KW < chunks; c += UNROLL * KW) {
    uint4 w[UNROLL][RL][2], x[UNROLL][NT];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const long long k = (long long)(c + u * KW) * ${chunk};
#pragma unroll
      for (int r = 0; r < RL; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) w[u][r][h] = load_stream(wp[r][h] + k);
#pragma unroll
      for (int n = 0; n < NT; n++) x[u][n] = __ldg(reinterpret_cast<const uint4*>(xp[n] + k));
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) mma_chunk(acc, w[u], x[u]);
  }
  for (; c < chunks; c += KW) { /* chunks left over from the unrolled steps */
    const long long k = (long long)c * ${chunk};
    uint4 w[RL][2], x[NT];
#pragma unroll
    for (int r = 0; r < RL; r++)
#pragma unroll
      for (int h = 0; h < 2; h++) w[r][h] = load_stream(wp[r][h] + k);
#pragma unroll
    for (int n = 0; n < NT; n++) x[n] = __ldg(reinterpret_cast<const uint4*>(xp[n] + k));
    mma_chunk(acc, w, x);
  }
  if (K % ${chunk} != 0 && kpart == chunks % KW) { /* the tail: under a chunk, element loads */
    const long long k = (long long)chunks * ${chunk};
    const int left = K - (int)k - ${vec} * t;
    uint4 w[RL][2], x[NT];
#pragma unroll
    for (int r = 0; r < RL; r++)
#pragma unroll
      for (int h = 0; h < 2; h++) w[r][h] = load_tail(wp[r][h] + k, left);
#pragma unroll
    for (int n = 0; n < NT; n++) x[n] = load_tail(xp[n] + k, left);
    mma_chunk(acc, w, x);
  }
]] .. skinny.meet .. [[${store}}
${walk}]]

-- The K tail's loads and one MMA step of a chunk, 16-bit (the text as it was before FP8).
local step_fns_16 = [[
/* 8 elements from p, those at or past element `left` as 0 (the K tail, element loads). */
__device__ __forceinline__ uint4 load_tail(const elem_t* p, int left) {
  unsigned w[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const unsigned lo = 2 * i < left ? __ldg(p + 2 * i) : 0u;
    const unsigned hi = 2 * i + 1 < left ? __ldg(p + 2 * i + 1) : 0u;
    w[i] = lo | hi << 16;
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/* d += (16 x 16 of W) * (16 x 8 of X^T): MMA step h of a chunk, from the 16-byte vectors of
 * rows g (lo) and g + 8 (hi) of W and row g of X. */
__device__ __forceinline__ void mma_step(float (&d)[4], const uint4& lo, const uint4& hi,
                                         const uint4& x, int h) {
  const unsigned a0 = h ? lo.z : lo.x, a1 = h ? hi.z : hi.x, a2 = h ? lo.w : lo.y,
                 a3 = h ? hi.w : hi.y, b0 = h ? x.z : x.x, b1 = h ? x.w : x.y;
  mma_16816(d, {a0, a1, a2, a3}, {b0, b1});
}
]]

-- The same for FP8: 16 elements a lane's load, and each MMA's products promoted.
local step_fns_fp8 = [[
/* 16 elements from p, those at or past element `left` as 0 (the K tail, byte loads). */
__device__ __forceinline__ uint4 load_tail(const elem_t* p, int left) {
  unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int e = 0; e < 16; e++)
    if (e < left) w[e / 4] |= (unsigned)__ldg(p + e) << 8 * (e % 4);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/* d += (16 x 32 of W) * (32 x 8 of X^T): MMA step h of a chunk, from the 16-byte vectors of
 * rows g (lo) and g + 8 (hi) of W and row g of X; the products from zero, then added in fp32
 * (promoted: see the template's header). */
__device__ __forceinline__ void mma_step(float (&d)[4], const uint4& lo, const uint4& hi,
                                         const uint4& x, int h) {
  const unsigned a0 = h ? lo.z : lo.x, a1 = h ? hi.z : hi.x, a2 = h ? lo.w : lo.y,
                 a3 = h ? hi.w : hi.y, b0 = h ? x.z : x.x, b1 = h ? x.w : x.y;
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mma_16832(part, {a0, a1, a2, a3}, {b0, b1});
#pragma unroll
  for (int i = 0; i < 4; i++) d[i] += part[i];
}
]]

-- A lane's sums one by one: sum i of mma tile (r, n) is C(s, l) (both stores below walk so).
local walk_sums = [[#pragma unroll
  for (int r = 0; r < RL; r++)
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const long long l = l0 + 16 * r + g + 8 * (i / 2);
        const int s = s0 + 8 * n + 2 * t + i % 2;
]]

-- The plain GEMM's stores of C(s, l).
local plain_store = walk_sums .. [[
        if (l < L && s < S) {
          elem_t* const p = Cg + s * C_S + l * C_L;
          const float v = alpha * acc[r][n][i];
          *p = to_elem(beta == 0.0f ? v : v + beta * to_float(*p));
        }
      }
]]

-- An op kernel's (lib/epilogue.lua): C(s, l) is the product's element (s, l) (SIDE 0) or
-- (l, s).  SIDE 1: a lane's sums i and i + 1 are neighbouring columns s, s + 1 (s even), one
-- epi_store2.  SIDE 0: the columns are W's rows l; for a gated op the gate (l even: g even) and
-- the up projection (l + 1) are lanes 4 apart, and the lane of the gate takes its partner's.
local op_store = [[
${amax_decl}#if SIDE == 1
#pragma unroll
  for (int r = 0; r < RL; r++)
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int i = 0; i < 4; i += 2) {
        const long long l = l0 + 16 * r + g + 8 * (i / 2);
        const int s = s0 + 8 * n + 2 * t;
        if (l < L && s < S)
          epi_store2(E, C, ldc, beta, l, s, alpha * acc[r][n][i], alpha * acc[r][n][i + 1],
                     s + 1 < S${amax_arg});
      }
#else
]] .. walk_sums .. [[
        const float v = alpha * acc[r][n][i];
#if EPI_GATED /* every lane shuffles; lanes of even g (rows l even) store */
        const float up = __shfl_down_sync(0xffffffffu, v, 4);
        if ((g & 1) == 0 && l < L && s < S) epi_gate(E, C, ldc, beta, s, l, v, up${amax_arg});
#else
        if (l < L && s < S) epi_store(E, C, ldc, beta, s, l, v${amax_arg});
#endif
      }
#endif
${amax_flush}]]

-- An FP8 D's amax around op_store (the epilogue snippet's EPI_AMAX_*), empty for the others.
local function amax_vars(op)
  if not (op and (op.out == "e4m3" or op.out == "e5m2")) then
    return {amax_decl = "", amax_arg = "", amax_flush = ""}
  end
  return {amax_decl = "  EPI_AMAX_DECL /* FP8 D: this lane's largest |D| */\n",
          amax_arg = " EPI_AMAX_ARG",
          amax_flush = "  EPI_AMAX_FLUSH(E); /* the warp's amax (part 0's warps are whole) */\n"}
end

local MAX_VECTORS = 24 -- 16-byte vectors a lane holds in flight (UNROLL x (2 RL + NT))

local function fp8(dtype) return dtype == "e4m3" or dtype == "e5m2" end

-- Elements of K in a lane's 16 bytes.
local function vec_elems(dtype) return fp8(dtype) and 16 or 8 end

-- The MMA's A and B types (FP8): W's and X's.  A mixed op's problem has A of the dtype and B
-- of the other FP8 type; W is B on side 0, A on side 1.
local function mma_types(dtype, op, side)
  if not (op and op.mixed_fp8) then return dtype, dtype end
  local other = dtype == "e4m3" and "e5m2" or "e4m3"
  if side == 0 then return other, dtype end
  return dtype, other
end

-- The placeholders that differ by dtype: the MMA, its shape, K's step and the step functions.
local function dtype_vars(vars, dtype, op, side)
  local v = vec_elems(dtype)
  vars.vec, vars.chunk = v, 4 * v
  if fp8(dtype) then
    local a, b = mma_types(dtype, op, side)
    vars.mma = mmt.subst(mma_16832, {a_type = a, b_type = b})
    vars.mma_shape, vars.step_fns = "m16n8k32", step_fns_fp8
    vars.promote_doc = "; each MMA's products promoted into them"
    -- an op kernel always: D's stores are the snippet's (a grouped op's line; the 16-bit op
    -- kernels' text is left as it was)
    vars.group_roles = "  (void)C_S, (void)C_L; /* D's stores are the snippet's */\n"
  else
    vars.mma = mmt.subst(mma_16816, {mma_type = dtype})
    vars.mma_shape, vars.step_fns, vars.promote_doc = "m16n8k16", step_fns_16, ""
  end
  return vars
end

-- What a config's launch derives from its parameters: a lane's sums, the block's rows of W
-- (lb), its shared memory for the K parts' sums and its split-K workspace (part 0's threads'
-- sums), in bytes.
local function sizes(p)
  local nacc = p.rl * (p.bs // 8) * 4
  local groups = p.warps // p.kw
  return {nacc = nacc, lb = groups * p.rl * 16, shared = (p.kw - 1) * groups * nacc * 32 * 4,
          workspace = nacc * 32 * groups * 4}
end

return {
  name = "skinny_mma",
  description = "skinny GEMM (M or N <= 64) in 16 bits or FP8 (an op), layout nt: streams W " ..
                "into tensor-core MMAs",
  dtypes = {"f16", "bf16", "e4m3", "e5m2"},
  layouts = {"nt"},
  epilogues = true,
  params = {
    {name = "side", values = {0, 1}},
    {name = "bs", values = {8, 16, 32}},
    {name = "rl", values = {1, 2, 4}},
    {name = "warps", values = {4, 8}},
    {name = "kw", values = {1, 2, 4, 8}},
    {name = "unroll", values = {1, 2, 4, 8}},
    {name = "split", values = {1, 2, 4, 8, 16}},
  },
  default = {side = 0, bs = 8, rl = 1, warps = 4, kw = 1, unroll = 4, split = 1},
  constraints = function(p, prob, dtype, layout, op)
    if fp8(dtype) and not op then
      return false, dtype .. ": an op kernel only (D of type f32, f16, bf16 or FP8)"
    end
    -- grouped: the experts' rows are M (side 0), each expert's tile rows its own
    local ok, why = epilogue.fits(op, prob, true, p.split == 1, false, p.side == 0)
    if not ok then return false, why end
    if p.kw > p.warps then return false, "kw > warps: more K parts than warps" end
    if p.unroll * (2 * p.rl + p.bs // 8) > MAX_VECTORS then
      return false, "unroll * (2 rl + bs / 8) > " .. MAX_VECTORS .. " vectors in flight a lane"
    end
    if not prob then return true end
    local z = sizes(p)
    return skinny.fits(p, prob, z.lb, 8, 4 * vec_elems(dtype), z.workspace, op and op.group)
  end,
  emit = function(p, dtype, layout, op)
    local z = sizes(p)
    local name = string.format("mmt_skinny_mma_%s_s%d_b%d_r%d_w%d_k%d_u%d", dtype, p.side, p.bs,
                               p.rl, p.warps, p.kw, p.unroll)
    if p.split > 1 then name = name .. "_z" .. p.split end
    name = epilogue.name(name, op)
    local src = mmt.subst(source, dtype_vars(skinny.group_vars(epilogue.vars(skinny.side_vars(p, gemm.vars(name, dtype, layout, {
      tile_rows = "BS",
      epilogue = epilogue.source(op, p.split == 1, skinny.walks(op)),
      store = op and mmt.subst(op_store, amax_vars(op)) or plain_store, load_stream = load_stream,
      small_op = p.side == 0 and "op(A) = A" or "op(B)^T = B",
      big_op = p.side == 0 and "op(B)^T = B" or "op(A) = A",
      bs = p.bs, rl = p.rl, warps = p.warps, kw = p.kw, unroll = p.unroll,
      split = p.split, lb = z.lb, threads = 32 * p.warps, shared_bytes = z.shared,
      elem = "\n" .. elem[dtype], dependent_launch = "\n" .. dependent_launch,
    })), op), op), dtype, op, p.side))
    return skinny.kernel(p, name, src, z.lb, z.shared, z.workspace, {align = 16}, op)
  end,
}
