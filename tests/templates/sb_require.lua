-- Sandbox test: require is removed (no package library, no C modules).
local os = require("os")
return {os = os}
