-- Sandbox test: Lua runs __gc finalizers with hooks off, beyond the instruction budget, so
-- setmetatable refuses a metatable that has one.
local guard = setmetatable({}, {__gc = function()
  while true do end
end})
return {guard = guard}
