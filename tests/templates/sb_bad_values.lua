-- Sandbox test: a parameter value list that is not all integers.
return {
  name = "sb_bad_values",
  dtypes = {"f32"},
  params = {
    {name = "tile", values = {8, 16, 32}},
    {name = "unroll", values = {1, 2.5}},
  },
  emit = function() return {} end,
}
