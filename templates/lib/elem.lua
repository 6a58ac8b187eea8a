-- lib/elem.lua: the storage type of each dtype, for the templates whose one kernel body serves
-- several: the text of its elem_* snippet (elem_t, pack2, to_elem, to_float: see the snippets),
-- by dtype; tf32 data is f32's; the FP8 types share one (bytes, no conversions).

local f32, fp8 = mmt.snippet("elem_f32"), mmt.snippet("elem_fp8")

return {f32 = f32, tf32 = f32, f16 = mmt.snippet("elem_f16"), bf16 = mmt.snippet("elem_bf16"),
        e4m3 = fp8, e5m2 = fp8}
