-- Sandbox test: a __gc added after setmetatable never marks the object for finalization, so
-- this loads, and closing the state (gen_free) does not run the looping finalizer.
local mt = {}
local guard = setmetatable({}, mt)
mt.__gc = function()
  while true do end
end

return {
  name = "sb_gc_late",
  dtypes = {"f32"},
  params = {{name = "x", values = {1}}},
  emit = function(p)
    assert(guard) -- an upvalue: keeps the object alive until the state closes
    local name = "k" .. p.x
    return {source = "__global__ void " .. name .. "() {}", kernel = name, block = {1}, grid = {x = 1}}
  end,
}
