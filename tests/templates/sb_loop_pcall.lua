-- Sandbox test: catching the budget error with pcall does not escape the budget.
while true do
  pcall(function()
    while true do end
  end)
end
