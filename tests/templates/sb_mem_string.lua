-- Sandbox test: a string doubling without bound hits the memory cap.
local s = "x"
while true do
  s = s .. s
end
