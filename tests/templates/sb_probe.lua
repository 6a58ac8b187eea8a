-- Sandbox test: each `what` runs one probe of the sandbox or the mmt library and reports the
-- result as the constraint's reason (what = 0 is valid, so the default config passes).
local probes = {
  [1] = function() return tostring(getmetatable(_G)) end,
  [2] = function() return tostring((pcall(setmetatable, _G, nil))) end,
  [3] = function()
    return type(rawget(_G, "print")) .. type(rawget(_G, "collectgarbage")) .. type(string.dump)
  end,
  [4] = function()
    return type(rawget(_G, "io")) .. type(rawget(_G, "os")) .. type(rawget(_G, "debug")) ..
           type(rawget(_G, "package")) .. type(rawget(_G, "coroutine"))
  end,
  [5] = function()
    return mmt.ceil_div(7, 2) .. "," .. mmt.ceil_div(8, 2) .. "," .. mmt.ceil_div(0, 3) .. "," ..
           mmt.ceil_div(-7, 2)
  end,
  [6] = function()
    return tostring(mmt.is_pow2(64)) .. tostring(mmt.is_pow2(96)) .. tostring(mmt.is_pow2(0))
  end,
  [7] = function() return mmt.subst("a${x}b${y}c$d", {x = 1, y = "z"}) end,
  [8] = function() return select(2, pcall(mmt.subst, "${nope}", {})) end,
  [9] = function() return mmt.dtype("f32").ctype .. mmt.dtype("f32").bytes end,
  [10] = function() return select(2, pcall(mmt.dtype, "f8")) end,
  [11] = function() return select(2, pcall(function() return undefined_x end)) end,
  [12] = function() return select(2, pcall(mmt.ceil_div, 1, 0)) end,
}

return {
  name = "sb_probe",
  dtypes = {"f32"},
  params = {{name = "what", values = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}}},
  constraints = function(p, prob)
    if p.what == 0 then return true end
    if p.what == 13 then
      if not prob then return false, "no problem" end
      return false, string.format("%d,%d,%d,%d,%d,%d,%d,%s,%s", prob.M, prob.N, prob.K, prob.lda,
                                  prob.ldb, prob.ldc, prob.align, prob.dtype, prob.layout)
    end
    return false, probes[p.what]()
  end,
  emit = function() return {} end,
}
