-- Sandbox test: load is removed (no compiling text or bytecode at run time).
local f = load("return 1")
return {f = f}
