-- arch90a.lua: a test template for the dispatcher (tests/test_dispatch.c), never compiled or
-- run.  Its kernel declares arch = "sm_90a", so only a chooser for an sm_90 device may pick it.
return {
  name = "arch90a",
  description = "test template: an sm_90a-only kernel",
  dtypes = {"f32"},
  params = {{name = "bx", values = {32}}},
  emit = function(p, dtype, layout)
    local name = "mmt_arch90a_" .. layout .. "_bx" .. p.bx
    return {
      source = "extern \"C\" __global__ void " .. name .. "() {}",
      kernel = name,
      block = {p.bx, 1, 1},
      grid = {x = {"N", p.bx}, y = {"M", 1}},
      arch = "sm_90a",
    }
  end,
}
