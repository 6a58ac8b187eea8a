-- lib/split_k.lua: split-K, for the templates whose grid.z slices K (SPLIT > 1): the slices of
-- a tile of C meet in an fp32 workspace, where the last to arrive adds them in slice order and
-- writes C (the split_k snippet).  The Lua checks, the kernel table's fields, and the CUDA
-- pieces of a tiled GEMM kernel (reg_tiled, mma_sync) that defines SPLIT, BK, A_T, B_T and
-- THREADS and names its tile `pid`, its thread `tid` and its accumulators `acc`.

local M = {}

-- Whether a split-K config can run a problem of K columns: slices of at least `steps` steps
-- of `step` columns, and the split_k snippet's limits (tiles of C, workspace: `bytes` a
-- block).  True for split = 1.
function M.fits(split, K, step, steps, tiles, bytes)
  if split == 1 then return true end
  if K < steps * split * step then
    return false, string.format("split-K slices of less than %s of %d (K < %d)",
                                steps == 1 and "one step" or steps .. " steps", step,
                                steps * split * step)
  end
  local why = mmt.split_k_refusal(tiles, split, bytes)
  if why then return false, why end
  return true
end

-- The kernel table's split-K fields, into k: with split > 1 the slices meet in the workspace
-- (`bytes` a block) under arrival counters in module globals, so two launches must not
-- overlap (exclusive); otherwise a kernel that waits for the one before it (the
-- dependent_launch snippet's pdl_wait) says so.
function M.launch(k, split, bytes, pdl)
  k.exclusive = split > 1
  k.workspace = split > 1 and bytes or nil
  k.dependent_launch = pdl and split == 1 or nil
  return k
end

-- The snippet, for SPLIT > 1 only (its counters would cost every other module 256 KiB).
M.helpers = "\n#if SPLIT > 1\n" .. mmt.snippet("split_k") .. "#endif\n"

-- The parameter's line of the kernel's comment block (${d_split}: SPLIT, 4 columns wide).
M.doc = [[

 *   SPLIT  = ${d_split} split-K, so that a problem with few tiles of C still fills the GPU: grid.z =
 *                 SPLIT slices of K (1: none).  Slice z computes the partial product over the
 *                 K columns [z*KC, min(K, (z+1)*KC)), KC = ceil(ceil(K / SPLIT) / BK) * BK
 *                 (whole K steps; the last slices may be shorter, or empty: they add 0).
 *                 The slices of a tile meet in the workspace WS (fp32, BM * BN floats per
 *                 block): the last to arrive adds them in slice order and runs the epilogue
 *                 (splitk_reduce; deterministic, and C is rounded to its type once).
 *                 Launches must not overlap (exclusive): the workspace and the arrival
 *                 counters belong to the kernel.]]

-- After the kernel's last ABI parameter: the workspace.
M.param = [[

#if SPLIT > 1
        , float* __restrict__ WS
#endif
        ]]

-- Before the main loop: the operands (${split_a}, ${split_b}: the kernel's names of A and B)
-- and K narrowed to this block's slice, so that the rest is the kernel without split-K.
M.slice = [[
#if SPLIT > 1
  { /* Split-K: this block computes slice blockIdx.z of K (splitk_slice); from here on
     * ${split_a}, ${split_b} and K describe it.  k0 % BK == 0 or k0 == K: they keep their
     * alignment. */
    const long long k0 = splitk_slice<SPLIT, BK>(K);
    ${split_a} += A_T ? k0 * lda : k0;
    ${split_b} += B_T ? k0 : k0 * ldb;
  }
#endif
]]

-- Before the epilogue: the slices meet; only the last goes on.
M.reduce = [[
#if SPLIT > 1
  /* Split-K: the slices of this tile add up in the workspace; the last to arrive goes on
   * with the sum and writes C, the others are done. */
  if (!splitk_reduce<sizeof acc / sizeof(float), THREADS>((float*)acc, WS, pid, tid)) return;
#endif
]]

return M
