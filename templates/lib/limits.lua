-- lib/limits.lua: what a config or a problem must fit on the device (mmt.device), for the
-- constraints of every template.  Each check returns true, or false and the reason, as
-- constraints do, so a template returns its result or stops at its first failure:
--   local ok, why = limits.shared(bytes)
--   if not ok then return false, why end
-- The limits are read when a check runs (mmt.device may not be read while a template loads).

local M = {}

-- A grid of `blocks` along y: `what` (the problem's dimension, "M") gives the reason.
function M.grid_y(blocks, what)
  local max = mmt.device.max_grid_y
  if blocks > max then
    return false, string.format("%s needs more than %d blocks along grid y", what, max)
  end
  return true
end

-- `bytes` of shared memory a block, within `cap` (default: what a block may opt in to).
function M.shared(bytes, cap)
  local max = cap or mmt.device.max_shared
  if bytes > max then
    return false, string.format("%d bytes of shared memory (more than %d KiB)", bytes,
                                max // 1024)
  end
  return true
end

-- Blocks of `bytes` of shared memory each that fit a multiprocessor's (the system keeps
-- reserved_shared of it for each block).
function M.blocks_by_shared(bytes)
  return mmt.device.sm_shared // (bytes + mmt.device.reserved_shared)
end

-- Registers a thread may have when `threads` threads share a multiprocessor's.
function M.regs_per_thread(threads)
  return mmt.device.regs_per_sm // threads
end

return M
