-- Sandbox test: a syntax error on line 3.
local x =
local y = 2
return {}
