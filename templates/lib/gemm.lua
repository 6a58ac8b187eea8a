-- lib/gemm.lua: what GEMM templates do the same way: the placeholders of the kernel ABI and of
-- the layout (templates/README.md, "Layouts"), and the checks, parameter #defines, name,
-- CUDA pieces (the block's tile, the walk along K) and kernel table of the tiled families.

local limits = mmt.lib("limits")
local split_k = mmt.lib("split_k")

local M = {}

-- Every layout (A's letter first; t: stored transposed).
M.LAYOUTS = {"nn", "nt", "tn", "tt"}

-- The kernel ABI (templates/README.md): the name and the parameters up to ldc (an op kernel's:
-- up to its epilogue, lib/epilogue.lua's vars); the kernel adds its own after it (tensor maps,
-- the workspace) and the closing parenthesis.
M.abi = [[
${name}(int M, int N, int K, float alpha,
        const ${ctype}* __restrict__ A, int lda,
        const ${ctype}* __restrict__ B, int ldb,
        float beta, ${c_type}* __restrict__ C, int ldc${epi_param}]]

-- Whether A and B are stored transposed in `layout` ("nn" .. "tt", A's letter first).
function M.transposed(layout)
  return layout:sub(1, 1) == "t", layout:sub(2, 2) == "t"
end

-- The placeholders every kernel source shares, with `extra`'s added: name, dtype, ctype (the
-- ABI's element type), layout, a_t and b_t (1: stored transposed, for #define A_T ${a_t}),
-- a_doc and b_doc (how each is stored, for the comment block), and lib/epilogue.lua's
-- (c_type, epi_param, c_global, batch) as the plain kernel has them.
function M.vars(name, dtype, layout, extra)
  local a_t, b_t = M.transposed(layout)
  local vars = {
    name = name, dtype = dtype, ctype = mmt.dtype(dtype).ctype, layout = layout,
    -- an op kernel's (lib/epilogue.lua's vars): the plain kernel's text here
    c_type = mmt.dtype(dtype).ctype, epi_param = "", batch = "",
    c_global = "  elem_t* const Cg = reinterpret_cast<elem_t*>(C);\n",
    a_t = a_t and 1 or 0, b_t = b_t and 1 or 0,
    a_doc = a_t and "transposed (K rows of M)" or "as is (M rows of K)",
    b_doc = b_t and "transposed (N rows of K)" or "as is (K rows of N)",
  }
  for k, v in pairs(extra) do vars[k] = v end
  return vars
end

-- The placeholders of the parameters of `params` (the template's list), into vars:
-- ${d_<name>}, each one's value 4 columns wide, for the comment block, and ${defines}, a line
-- `#define <NAME> <value>` each, in the list's order, so that the kernel names every
-- parameter it is built for.
function M.param_vars(vars, p, params)
  local defines = {}
  for i, param in ipairs(params) do
    local value = p[param.name]
    vars["d_" .. param.name] = string.format("%-4d", value)
    defines[i] = string.format("#define %s %d", param.name:upper(), value)
  end
  vars.defines = table.concat(defines, "\n")
  return vars
end

-- Tiled kernels (a block a BM x BN tile of C, grid (ceil(N / bn), ceil(M / bm), split), K in
-- steps of bk, split-K: reg_tiled, mma_sync).

-- A block of a config fits: its tiles' loads split evenly over the threads (d.a_loads and
-- d.b_loads, the copies a thread makes of A's and B's tile, whole numbers of at least one),
-- `shared` bytes of shared memory, and the register estimate d.regs within d.reg_limit.
local function block_fits(d, shared)
  for _, t in ipairs({{"A", d.a_loads}, {"B", d.b_loads}}) do
    if t[2] < 1 or t[2] ~= math.floor(t[2]) then
      return false, "the " .. t[1] .. " tile does not split evenly over the threads"
    end
  end
  local ok, why = limits.shared(shared)
  if not ok then return false, why end
  if d.regs > d.reg_limit then
    return false, string.format("about %d registers per thread (limit %d): would spill", d.regs,
                                d.reg_limit)
  end
  return true
end

-- The checks of a tiled config after its own, d being what it derives: the block fits
-- (block_fits, `shared` bytes of shared memory); split > 1 only in the variant that
-- `split_variant` says it is (split-K is for problems with few tiles of C, and its slicing
-- does not depend on the main loop: one variant per block shape is enough; `split_doc` names
-- it); and the problem (nil: none) fits: grid.y, and split-K's slices of at least two steps
-- of bk with its workspace (a tile of fp32 a block).
function M.tiled_fits(p, prob, d, shared, split_variant, split_doc)
  local ok, why = block_fits(d, shared)
  if not ok then return false, why end
  if p.split > 1 and not split_variant then return false, "split > 1 only with " .. split_doc end
  if not prob then return true end
  ok, why = M.rows_fit(prob, p.bm)
  if not ok then return false, why end
  local tiles = mmt.ceil_div(prob.M, p.bm) * mmt.ceil_div(prob.N, p.bn)
  return split_k.fits(p.split, prob.K, p.bk, 2, tiles, p.bm * p.bn * 4)
end

-- The block's tile of C, first in the kernel: its launch index renumbered by the tile_order
-- snippet (mmt_tile_of), its first row and column, and the rows and columns of C left.
M.tile = [[
  /* Block tile: the launch order (blockIdx.x fastest) renumbered by the tile_order snippet
   * (GROUP block rows walked top to bottom before moving right).  64-bit: grid.x * grid.y may
   * pass 2^32. */
  const long long grid_n = gridDim.x, grid_m = gridDim.y;
  const long long pid = (long long)blockIdx.y * grid_n + blockIdx.x;
  long long tile_row, tile_col;
  mmt_tile_of(pid, grid_m, grid_n, GROUP, &tile_row, &tile_col);
${group}  const long long row0 = tile_row * BM, col0 = tile_col * BN; /* first row, column of the tile */
  const int m_left = (int)(M - row0), n_left = (int)(N - col0);  /* >= 1: rows, columns left */
]]

-- The walk of a tiled kernel's loads along K, after its a_src and b_src (where its loads of
-- the next K tile of A and B start): the steps from one K tile to the next, and K left from
-- the next tile on; each load of a tile moves a_src and b_src by a step and k_left by BK.
M.k_walk = [[
  const long long a_step = A_T ? BK * (long long)lda : BK; /* from one K tile to the next */
  const long long b_step = B_T ? BK : BK * (long long)ldb;
  int k_left = K; /* K from the next tile on; <= 0 past the end */
]]

-- a_in(r, c) and b_in(r, c): whether stored element (r, c) of the next K tile lies inside A
-- and B (k_left, and the block tile's m_left and n_left: gemm.tile).
M.in_tile = [[
  /* Whether stored element (r, c) of the next tile lies inside A (B). */
  auto a_in = [&](int r, int c) { return A_T ? r < k_left && c < m_left : r < m_left && c < k_left; };
  auto b_in = [&](int r, int c) { return B_T ? r < n_left && c < k_left : r < k_left && c < n_left; };
]]

-- `text` for A, then for B: the code that is the same for both operands, written once.  ${X}
-- is the operand's letter (A_LOADS, Ag), ${x} the lowercase one (a_src, lda), and `a` and `b`
-- hold each operand's values of any other placeholder of the text (nil: none).
function M.operands(text, a, b)
  local function one(X, values)
    local vars = {X = X, x = X:lower()}
    for k, v in pairs(values or {}) do vars[k] = v end
    return mmt.subst(text, vars)
  end
  return one("A", a) .. one("B", b)
end

-- Whether a problem (nil: none, any) needs at most max_grid_y blocks of `tile` rows of M.
function M.rows_fit(prob, tile)
  if not prob then return true end
  return limits.grid_y(mmt.ceil_div(prob.M, tile), "M")
end

-- The kernel name with split-K's suffix: split = 1 keeps the name of the kernel without it.
function M.tiled_name(name, split)
  if split > 1 then return name .. "_split" .. split end
  return name
end

-- The kernel table of a tiled kernel of `threads` threads (pdl: it waits for the kernel
-- before it, the dependent_launch snippet's pdl_wait).
function M.tiled_kernel(p, name, source, threads, shared, requires, pdl)
  return split_k.launch({
    source = source,
    kernel = name,
    block = {x = threads, y = 1, z = 1},
    grid = {x = {"N", p.bn}, y = {"M", p.bm}, z = p.split},
    shared_bytes = shared,
    requires = requires,
  }, p.split, p.bm * p.bn * 4, pdl)
end

return M
