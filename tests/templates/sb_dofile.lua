-- Sandbox test: dofile is removed (no reading other files).
dofile("/etc/passwd")
return {}
