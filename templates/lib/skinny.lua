-- lib/skinny.lua: what skinny and skinny_mma share, the two families for problems whose small
-- side S (M or N, `side` 0 or 1) is at most 64: the roles of the operands (X, S x K, the small
-- one; W, K x L, the streamed one), the limits of a problem, the grid, and the head of the
-- kernel.  The kernel defines SIDE, BS, KW, SPLIT, SLICE_STEP (split-K's step along K), A_T,
-- B_T and the elem_t of an elem_* snippet before it pastes `head`.

local limits = mmt.lib("limits")
local split_k = mmt.lib("split_k")

local M = {}

M.MAX_SMALL = 64 -- the small side's limit: the families are for skinny problems

-- The small and large sides of a problem: (S, L) = (M, N) for side 0, (N, M) for side 1.
function M.sides(p, prob)
  if p.side == 0 then return prob.M, prob.N end
  return prob.N, prob.M
end

-- The problem's checks: the small side, a block's rows of S (`bs` above `bs_min` at most
-- twice the small side), grid.y (ceil(L / lb) blocks of lb rows of W), split-K's slices of
-- `step` columns of K and its workspace (`workspace` bytes a block).  A grouped op's small
-- side is its experts' rows together, each expert its own tile rows of bs (EPI_GROUP): a few
-- tokens an expert however many in all, so its sum has no limit here.
function M.fits(p, prob, lb, bs_min, step, workspace, grouped)
  local small, big = M.sides(p, prob)
  if small > M.MAX_SMALL and not grouped then
    return false, "the small side (" .. (p.side == 0 and "M" or "N") .. ") is over " ..
                  M.MAX_SMALL
  end
  if p.bs > bs_min and p.bs >= 2 * small then
    return false, "bs is over twice the small side"
  end
  local ok, why = limits.grid_y(mmt.ceil_div(big, lb), "L")
  if not ok then return false, why end
  local blocks = mmt.ceil_div(small, p.bs) * mmt.ceil_div(big, lb)
  return split_k.fits(p.split, prob.K, step, 1, blocks, workspace)
end

-- The placeholders of the comment block that name the sides.
function M.side_vars(p, vars)
  vars.side = p.side
  vars.small, vars.big = p.side == 0 and "M" or "N", p.side == 0 and "N" or "M"
  return vars
end

-- Whether op's kernel walks a masked call's experts (the epilogue snippet's EPI_WALK): the
-- decode regime these families serve has a few hit experts of many.
function M.walks(op)
  return op ~= nil and op.group == "masked"
end

-- The kernel table: a block of `warps` warps, grid.x over S in steps of bs, grid.y over L in
-- steps of lb, grid.z the split-K slices (a batch's problems, or the slices of a walk of the
-- experts: the runtime's).
function M.kernel(p, name, source, lb, shared, workspace, requires, op)
  local small, big = p.side == 0 and "M" or "N", p.side == 0 and "N" or "M"
  return split_k.launch({
    source = source,
    kernel = name,
    block = {32 * p.warps, 1, 1},
    grid = {x = {small, p.bs}, y = {big, lb}, z = p.split},
    shared_bytes = shared,
    requires = requires,
    walks_experts = M.walks(op) or nil,
  }, p.split, workspace, true)
end

-- The kernel ABI's parameters (gen.h), an op kernel's epilogue last; and the qualifiers of an
-- entry point.  The head and a walk's entry point both declare them.
local ABI = [[int M, int N, int K, float alpha, const ${ctype}* __restrict__ A, int lda,
    const ${ctype}* __restrict__ B, int ldb, float beta, ${c_type}* __restrict__ C, int ldc${epi_param}]]
local ENTRY = 'extern "C" __global__ void __launch_bounds__(WARPS * 32)'

-- The placeholders of head for op (after lib/epilogue.lua's vars): a grouped op's tile row of
-- BS rows, moved within its expert (EPI_GROUP), else blockIdx.x; the entry point, which for a
-- walk (M.walks) is a device function of the ABI and the expert, and ${walk}, after the
-- kernel's text, the entry point that calls it for each expert the block walks.
function M.group_vars(vars, op)
  local grouped = op and op.group
  vars.group_head = grouped and "  long long tile_row = blockIdx.x; /* of its expert's rows */\n" ..
                    vars.group or ""
  vars.tile_row = grouped and "(int)tile_row" or "blockIdx.x"
  vars.group_roles = grouped and "  (void)C_S, (void)C_L; /* D's stores are the snippet's */\n" or ""
  local walks = M.walks(op)
  vars.entry = walks and "__device__ __forceinline__ void" or ENTRY
  vars.entry_name = walks and vars.name .. "_expert" or vars.name
  vars.walk_param = walks and ", long long epi_z" or ""
  vars.walk = walks and mmt.subst([[

/* The entry point: the experts this block walks (epi_walk_experts), each one's tile. */
]] .. ENTRY .. "\n${name}(" .. ABI .. [[)
{
  epi_walk_experts(E, blockIdx.x, BS, [&](long long z) {
    ${name}_expert(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, E, z);
  });
}
]], vars) or ""
  return vars
end

-- The kernel's signature and first lines: the ABI, the block's problem of a batch and a
-- grouped op's expert (its tile row of BM = BS rows within it), the roles (X, W and their
-- pitches, C(s, l) at Cg + s * C_S + l * C_L), the K parts' shared sums, the warp's place,
-- the dependent launch's wait, and this block's slice of K.  Its placeholders of an op kernel
-- are lib/epilogue.lua's (vars); an op kernel has no Cg and stores C(s, l) through the snippet.
M.head = [[
${entry}
${entry_name}(]] .. ABI .. [[${walk_param}
#if SPLIT > 1
    , float* __restrict__ WS
#endif
    )
{
${batch}${group_head}  const elem_t* const Ag = reinterpret_cast<const elem_t*>(A);
  const elem_t* const Bg = reinterpret_cast<const elem_t*>(B);
${c_global}  /* The roles: X (S x K) and W (K x L) as stored, C(s, l) at Cg + s * C_S + l * C_L. */
#if SIDE == 0
  const int S = M, L = N;
  const elem_t* X = Ag;
  const elem_t* W = Bg;
  const long long x_ld = lda, w_ld = ldb, C_S = ldc, C_L = 1;
#define X_KMAJOR (!A_T)
#define W_KMAJOR (B_T)
#else
  const int S = N, L = M;
  const elem_t* X = Bg;
  const elem_t* W = Ag;
  const long long x_ld = ldb, w_ld = lda, C_S = 1, C_L = ldc;
#define X_KMAJOR (B_T)
#define W_KMAJOR (!A_T)
#endif
${group_roles}  /* [KW - 1][RG][...]: the other K parts' partial sums; then what the kernel stages */
  extern __shared__ __align__(16) float red[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kpart = warp % KW, group = warp / KW;
  const int s0 = ${tile_row} * BS;
  pdl_wait(threadIdx.x == 0);
#if SPLIT > 1
  { /* This block's slice of K (splitk_slice): X, W and K narrowed to it (K = 0 for an empty
     * slice: it adds 0).  k0 is a multiple of SLICE_STEP, so 16-byte alignment holds. */
    const long long k0 = splitk_slice<SPLIT, SLICE_STEP>(K);
    X += X_KMAJOR ? k0 : k0 * x_ld;
    W += W_KMAJOR ? k0 : k0 * w_ld;
  }
#endif
]]

-- After a lane's NACC sums (acc, an array of floats) are whole for its warp: the K parts of
-- each warp group add up in shared memory (red: [part - 1][group][NACC][lane], the same
-- layout of sums in every warp), part 0 going on with them; then the slices meet (reduce).
M.meet = [[
#if KW > 1
  /* Part 0 of each group adds the other parts' sums. */
  if (kpart > 0)
#pragma unroll
    for (int i = 0; i < NACC; i++)
      red[(((kpart - 1) * RG + group) * NACC + i) * 32 + lane] = ((float*)acc)[i];
  __syncthreads();
  if (kpart > 0) return;
  for (int q = 0; q < KW - 1; q++)
#pragma unroll
    for (int i = 0; i < NACC; i++) ((float*)acc)[i] += red[((q * RG + group) * NACC + i) * 32 + lane];
#endif
]]

-- The slices of this block meet in the workspace (splitk_reduce: SPLITK_THREADS of the block,
-- thread SPLITK_TID, take part) and the last goes on with the sums.
M.reduce = [[
#if SPLIT > 1
  if (!splitk_reduce<sizeof acc / sizeof(float), SPLITK_THREADS>(
          (float*)acc, WS, (long long)blockIdx.y * gridDim.x + blockIdx.x, SPLITK_TID))
    return;
#endif
]]
M.meet = M.meet .. M.reduce

return M
