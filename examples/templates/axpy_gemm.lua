-- axpy_gemm.lua: the worked example of docs/templates.md, a template written from scratch.
--
-- A thread computes COLS elements of one row of C.  It walks K; at each k it loads one value
-- of A and adds that value times COLS elements of row k of B to its sums (an "axpy"), so each
-- load of A serves COLS products.  f32, f16 and bf16 share one kernel body through the
-- elem_* snippets; layouts nn and nt differ only in how a row of op(B) is addressed.
--
-- Try it (from the repository root):
--   export MMTUNE_TEMPLATE_PATH=$PWD/examples/templates
--   mmtune space axpy_gemm                         # the valid configs
--   mmtune emit axpy_gemm cols=4 --dtype f16       # the CUDA C of one config
--   mmtune compile --arch sm_90 axpy_gemm          # NVRTC, no GPU needed
--   mmtune measure axpy_gemm --shape 1000x999x1001 --device 0
--   mmtune --device 0 --templates axpy_gemm --shapes 1024x1024x1024

-- Snippets are read while the file loads (not inside emit): each one's text is folded into
-- the template's hash, so rows measured with an older snippet are retuned.
local elem = {f32 = mmt.snippet("elem_f32"), f16 = mmt.snippet("elem_f16"),
              bf16 = mmt.snippet("elem_bf16")}

local source = [[
/*
 * ${name} -- example template "axpy_gemm", ${ctype}, row-major, layout ${layout}:
 * C = alpha * A * op(B) + beta * C, op(B) = B (nn) or B^T (nt).
 * A thread computes COLS elements of one row of C, BX columns apart (so a warp's loads of a
 * row of B are contiguous in nn); a block computes BX * COLS neighbouring columns of one row.
 * Products are summed in fp32 and C is rounded to its type once.
 *
 * Parameters:
 *   BX     = ${bx}  threads per block, all along N
 *   COLS   = ${cols}  elements of C per thread
 *   UNROLL = ${unroll}  #pragma unroll factor of the k loop (1: not unrolled)
 * Launch: block (BX, 1, 1), grid (ceil(N / (BX * COLS)), M, 1), no shared memory.
 * Correct for any M (up to 65535: grid y), N, K >= 1 and any pitches allowed by the layout;
 * when beta == 0, C is not read.
 */
${elem}
#define BX ${bx}
#define COLS ${cols}
#define B_T ${b_t} /* 1: B stored as N rows of K (ldb >= K); 0: K rows of N (ldb >= N) */

extern "C" __global__ void __launch_bounds__(BX)
${name}(int M, int N, int K, float alpha,
        const ${ctype}* __restrict__ A, int lda,
        const ${ctype}* __restrict__ B, int ldb,
        float beta, ${ctype}* __restrict__ C, int ldc)
{
  const elem_t* const a = reinterpret_cast<const elem_t*>(A);
  const elem_t* const b = reinterpret_cast<const elem_t*>(B);
  elem_t* const c = reinterpret_cast<elem_t*>(C);
  /* 64-bit offsets: row * lda passes 2^31 on large matrices. */
  const long long row = blockIdx.y;
  const long long col0 = (long long)blockIdx.x * BX * COLS + threadIdx.x;

  float acc[COLS];
#pragma unroll
  for (int j = 0; j < COLS; ++j) acc[j] = 0.0f;

#pragma unroll ${unroll}
  for (int k = 0; k < K; ++k) {
    const float x = to_float(a[row * lda + k]);
#pragma unroll
    for (int j = 0; j < COLS; ++j) {
      const long long col = col0 + (long long)j * BX;
      if (col < N)
        acc[j] += x * to_float(B_T ? b[col * ldb + k] : b[(long long)k * ldb + col]);
    }
  }

#pragma unroll
  for (int j = 0; j < COLS; ++j) {
    const long long col = col0 + (long long)j * BX;
    if (col >= N) break;
    elem_t* const p = c + row * ldc + col;
    *p = to_elem(beta == 0.0f ? alpha * acc[j] : alpha * acc[j] + beta * to_float(*p));
  }
}
]]

return {
  name = "axpy_gemm",
  description = "example: a thread computes COLS elements of a row of C, one axpy per k",
  dtypes = {"f32", "f16", "bf16"},
  layouts = {"nn", "nt"},
  params = {
    {name = "bx", values = {32, 64, 128, 256}},
    {name = "cols", values = {1, 2, 4, 8}},
    {name = "unroll", values = {1, 4}},
  },
  default = {bx = 128, cols = 2, unroll = 1},

  -- prob == nil: is the config itself sensible?  Otherwise: can it run this problem?
  constraints = function(p, prob)
    if p.bx * p.cols > 1024 then
      return false, "a block's row strip is at most 1024 columns"
    end
    if prob and prob.M > 65535 then
      return false, "grid y is one block per row of C: M at most 65535"
    end
    return true
  end,

  emit = function(p, dtype, layout)
    -- One name per config, dtype and layout: the cubin cache and a module never mix two.
    local name = string.format("axpy_gemm_%s_%s_bx%d_c%d_u%d", dtype, layout, p.bx, p.cols,
                               p.unroll)
    local source_text = mmt.subst(source, {
      name = name, ctype = mmt.dtype(dtype).ctype, layout = layout, elem = elem[dtype],
      bx = p.bx, cols = p.cols, unroll = p.unroll,
      b_t = layout:sub(2, 2) == "t" and 1 or 0,
    })
    return {
      source = source_text,
      kernel = name,
      block = {x = p.bx},
      grid = {x = {"N", p.bx * p.cols}, y = {"M", 1}},
    }
  end,
}
