-- Sandbox test: a table growing without bound hits the memory cap.
local t = {}
local i = 0
while true do
  i = i + 1
  t[i] = {i, i}
end
