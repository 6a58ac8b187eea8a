-- Sandbox test: an infinite loop while loading hits the instruction budget.
local n = 0
while true do
  n = n + 1
end
