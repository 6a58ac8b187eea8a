-- Sandbox test: loads fine, but emit never returns (the budget stops it per call).
return {
  name = "sb_loop_emit",
  dtypes = {"f32"},
  params = {{name = "x", values = {1}}},
  emit = function(p)
    local n = p.x
    while n > 0 do
      n = n + 1
    end
    return {}
  end,
}
