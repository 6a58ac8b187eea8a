-- reg_tiled.lua (test): shadows the real reg_tiled for tests/test_dispatch.c; refuses every problem, so
-- the dispatcher has no default left and must report MMT_ERR_UNSUPPORTED.
return {
  name = "reg_tiled",
  dtypes = {"f32"},
  params = {{name = "x", values = {1}}},
  constraints = function(p, prob)
    if prob then return false, "refuses every problem (test)" end
    return true
  end,
  emit = function(p, dtype)
    return {source = "extern \"C\" __global__ void k() {}", kernel = "k", block = {32, 1, 1},
            grid = {x = {"N", 32}, y = {"M", 1}, z = 1}}
  end,
}
