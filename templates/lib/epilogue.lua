-- lib/epilogue.lua: op kernels (gen.h, "Epilogues"; templates/README.md, "Epilogues") for every
-- template that declares `epilogues = true`: the checks, the kernel name's suffix, the ABI's
-- placeholders and the CUDA text (the epilogue snippet under its #defines).  `op` is the table
-- emit and constraints get (nil: the plain GEMM, whose kernel none of this touches).

local snippet = mmt.snippet("epilogue")

local M = {}

local OUT = {f32 = 0, f16 = 1, bf16 = 2, e4m3 = 3, e5m2 = 4}
local ACT = {none = 0, relu = 1, gelu_tanh = 2, gelu_erf = 3, silu = 4}

-- Whether a config can carry op on prob (nil: any problem): `pairs`, its stores hand
-- epi_store2 neighbouring column pairs (c even), which a gated op needs; `batch_z`, grid.z is
-- free for the batch (false for a split-K config, whose slices it is); `block_scales`, its main
-- loop applies block scales (scale_block: they are not the epilogue's); `groups`, its tile row
-- comes from lib/gemm.lua's tile, where EPI_GROUP makes it an expert's, or from a walk of its
-- own that finds each tile's expert (wgmma: epi_group_table, epi_group_lookup) (grouped ops).
function M.fits(op, prob, pairs, batch_z, block_scales, groups)
  if not op then return true end
  if op.group and not (groups and batch_z) then
    return false, "grouped: not by this config (mma_sync, reg_tiled and wgmma without " ..
                  "split-K, swap or cluster, skinny and skinny_mma of side 0 without split-K are)"
  end
  if op.scale_block and not block_scales then
    return false, "block scales: not applied by this config (wgmma FP8 with promote = 1, " ..
                  "bn <= 128 and no swap apply them)"
  end
  if op.gated and not pairs then
    return false, "a gated epilogue needs stores of column pairs"
  end
  if prob and prob.batch > 1 and not batch_z then
    return false, "a batch needs grid.z, which this config's split-K takes"
  end
  if prob and op.gated and prob.N % 2 ~= 0 then
    return false, "a gated epilogue needs an even N (gate and up columns)"
  end
  return true
end

-- The kernel name of op's kernel ("" added for nil): every field of the op in it, so that two
-- ops never share a name.
function M.name(name, op)
  if not op then return name end
  local bias = op.bias and (op.bias:sub(1, 1) .. (op.bias_type == "f32" and "32" or "")) or "0"
  local scale = op.scale_block and "b" or op.scale_tensor and "t" or
                string.format("%d%d", op.scale_row and 1 or 0, op.scale_col and 1 or 0)
  return string.format("%s_o%s_b%s_s%s_a%d%s%s%s%s", name, op.out, bias, scale, ACT[op.act],
                       op.gated and "_g" or "", op.mixed_fp8 and "_x" or "",
                       op.group and ("_g" .. op.group:sub(1, 1)) or "", op.residual and "_r" or "")
end

-- The placeholders of an op kernel into vars (the plain kernel's text for nil): ${c_type}, C's
-- type, and ${epi_param}, the epilogue's argument after ldc (lib/gemm.lua's abi has both);
-- ${c_global}, the kernel's elem_t view Cg of C (none in an op kernel, whose stores are the
-- snippet's); ${batch}, the move of A, B and C to the block's problem of the batch, first;
-- ${group}, in lib/gemm.lua's tile, a grouped op's move to the block's expert (EPI_GROUP, of
-- the pointers vars.split_a and vars.split_b name: the kernel's loads start from them; its
-- tile rows of vars.tile_rows rows, BM if not named).
function M.vars(vars, op)
  vars.c_type = op and "const out_t" or vars.ctype
  vars.epi_param = op and ",\n        mmt_epilogue E" or ""
  vars.c_global = op and "" or "  elem_t* const Cg = reinterpret_cast<elem_t*>(C);\n"
  vars.batch = op and "  EPI_BATCH(A, B, C, E); /* this block's problem of the batch */\n" or ""
  vars.group = op and op.group and
               string.format("  EPI_GROUP(%s, %s, C, E, M, tile_row, %s); /* the block's expert */\n",
                             vars.split_a or "A", vars.split_b or "B", vars.tile_rows or "BM") or
               ""
  return vars
end

-- The CUDA text of op's epilogue ("" for nil), pasted after the kernel's elem snippet;
-- batch_z as for M.fits; walk, a masked op's kernel whose blocks walk the experts (the
-- snippet's EPI_WALK; lib/skinny.lua's).
function M.source(op, batch_z, walk)
  if not op then return "" end
  local bias = op.bias == "col" and 1 or op.bias == "row" and 2 or 0
  return string.format([[

/* The epilogue (the epilogue snippet): out=%s, bias=%s, scale_row=%d, scale_col=%d,
 * scale_tensor=%d, act=%s, gated=%d, residual=%d. */
#define EPI_OUT %d
#define EPI_BIAS %d
#define EPI_BIAS_F32 %d
#define EPI_SCALE_ROW %d
#define EPI_SCALE_COL %d
#define EPI_SCALE_TENSOR %d
#define EPI_ACT %d
#define EPI_GATED %d
#define EPI_Z %d
#define EPI_C %d
]], op.out, op.bias or "none", op.scale_row and 1 or 0, op.scale_col and 1 or 0,
      op.scale_tensor and 1 or 0, op.act, op.gated and 1 or 0, op.residual and 1 or 0,
      OUT[op.out], bias, op.bias_type == "f32" and 1 or 0, op.scale_row and 1 or 0,
      op.scale_col and 1 or 0, op.scale_tensor and 1 or 0, ACT[op.act], op.gated and 1 or 0,
      batch_z and 1 or 0, op.residual and 1 or 0) ..
      (op.group and string.format("#define EPI_GROUPED %d /* %s */\n",
                                  op.group == "contiguous" and 1 or 2, op.group) or "") ..
      (walk and "#define EPI_WALK 1\n" or "") .. snippet
end

return M
