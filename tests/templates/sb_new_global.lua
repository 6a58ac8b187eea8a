-- Sandbox test: creating a global is an error; templates use locals.
helper = function() return 1 end
return {}
