-- Sandbox test: the io library is not there, so this fails at load.
local f = io.open("/etc/passwd")
return {f = f}
