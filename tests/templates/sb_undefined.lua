-- Sandbox test: reading a global nobody defined is an error (strict globals).
local tile = default_tile_size
return {tile = tile}
