-- Sandbox test: emit returns something malformed, chosen by the `case` parameter.
-- case 0 is well formed (the default config must be).
local function good()
  return {
    source = "extern \"C\" __global__ void k_ok() {}",
    kernel = "k_ok",
    block = {32, 1, 1},
    grid = {x = {"N", 32}, y = {"M", 1}, z = 1},
  }
end

local broken = {
  [1] = function(r) r.source = nil end,
  [2] = function(r) r.block = {0, 1, 1} end,
  [3] = function(r) r.block = {64, 32, 1} end,
  [4] = function(r) r.grid = {x = {"Q", 32}} end,
  [5] = function(r) r.grid = {x = {"N", 0}} end,
  [6] = function(r) r.kernel = "k_missing" end,
  [7] = function(r) r.kernel = "not an identifier" end,
  [8] = function(r) r.requires = {align = 3} end,
  [9] = function() return "a string" end,
  [10] = function(r) r.sorce = r.source end,
  [11] = function() error("boom") end,
  [12] = function(r) r.shared_bytes = -1 end,
  [13] = function(r) r.exclusive = "yes" end,
  [14] = function(r) r.arch = "sm_9x" end,
  [15] = function(r) r.requires = {align = 16}; r.tensor_maps = {{operand = "C", box = {4, 8}}} end,
  [16] = function(r) r.requires = {align = 16}; r.tensor_maps = {{operand = "A", box = {0, 8}}} end,
  [17] = function(r)
    r.requires = {align = 16}
    r.tensor_maps = {{operand = "A", box = {32, 8}, swizzle = 48}}
  end,
  [18] = function(r)
    r.requires = {align = 16}
    r.tensor_maps = {{operand = "B", box = {64, 8}, swizzle = 128}} -- 256 bytes a row
  end,
  [19] = function(r) r.tensor_maps = {{operand = "A", box = {4, 8}}} end, -- align 4
  [20] = function(r) r.repack = 1 end,
  [21] = function(r) r.grid = {x = {"SM", 65}} end, -- at most 64 blocks per SM
  [22] = function(r) r.dependent_launch = 1 end,
  [23] = function(r) r.exclusive = true; r.dependent_launch = true end,
  [24] = function(r) r.exclusive = true; r.workspace = 100 end, -- not a multiple of 16
  [25] = function(r) r.workspace = 1024 end, -- without exclusive
  [26] = function(r) r.exclusive = true; r.workspace = 512 * 1024 end, -- over 256 KiB a block
  -- well formed: an exclusive kernel with 4 KiB of workspace a block
  [27] = function(r) r.exclusive = true; r.workspace = 4096 end,
  -- well formed: an sm_90a kernel with two maps, repacked, persistent (two blocks per SM),
  -- launched as a dependent
  [28] = function(r)
    r.dependent_launch = true
    r.grid = {x = {"SM", 2}}
    r.arch = "sm_90a"
    r.repack = true
    r.store_any_align = true
    r.source = r.source .. "\nextern \"C\" __global__ void mmt_copy_rows() {}"
    r.requires = {align = 16}
    r.tensor_maps = {{operand = "A", box = {32, 128}, swizzle = 128},
                     {operand = "B", box = {4, 64}}}
  end,
  [29] = function(r) r.store_any_align = true end, -- without repack
  [30] = function(r) -- not a boolean
    r.repack = true; r.store_any_align = 1
    r.source = r.source .. "\nextern \"C\" __global__ void mmt_copy_rows() {}"
  end,
  [31] = function(r) r.repack = true end, -- without the runtime's copy kernel
  [32] = function(r) r.arch = "sm_90a"; r.cluster = 2 end, -- not a table
  [33] = function(r) r.arch = "sm_90a"; r.cluster = {y = 9} end, -- over 8
  [34] = function(r) r.arch = "sm_90a"; r.cluster = {x = 4, y = 4} end, -- 16 blocks
  [35] = function(r) r.arch = "sm_90a"; r.grid = {x = {"SM", 1}}; r.cluster = {x = 2} end,
  [36] = function(r) r.cluster = {y = 2} end, -- no arch
  [37] = function(r) r.arch = "sm_80"; r.cluster = {y = 2} end, -- an arch without clusters
  -- well formed: clusters of two along y
  [38] = function(r) r.arch = "sm_90a"; r.cluster = {y = 2} end,
  [39] = function(r) r.epilogue_overlap = 1 end, -- not a boolean
  -- well formed: a unit's epilogue under the next unit's main loop
  [40] = function(r) r.epilogue_overlap = true end,
  [41] = function(r) r.walks_experts = 1 end, -- not a boolean
  [42] = function(r) r.walks_experts = true end, -- not a masked op's kernel (a plain one)
}

return {
  name = "sb_bad_emit",
  dtypes = {"f32"},
  params = {{name = "case", values = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                   23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38,
                                   39, 40, 41, 42}}},
  emit = function(p)
    local r = good()
    if p.case == 0 then return r end
    local replaced = broken[p.case](r)
    if replaced ~= nil then return replaced end
    return r
  end,
}
