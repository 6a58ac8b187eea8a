-- naive.lua: one thread per element of C, A and B read straight from global memory.
--
-- The baseline every other template is measured against: simple enough to be obviously
-- correct, slow because nothing is reused from fast memory.  The only choice is the block
-- shape, which decides how well a warp's loads of B coalesce (threads along x read
-- neighbouring columns) and how many blocks fit on an SM.

local gemm = mmt.lib("gemm")

local source = [[
/*
 * ${name} -- mmtune template "naive", ${ctype}, row-major, layout ${layout}:
 * C = alpha * op(A)*op(B) + beta * C (A_T, B_T: operand stored transposed).
 * One thread computes one element of C, reading A and B straight from global memory.
 *
 * Parameters:
 *   BX = ${bx}  threads per block along x, the columns of C (N); neighbouring threads read
 *              neighbouring elements of a row of B, so larger BX coalesces better
 *   BY = ${by}  threads per block along y, the rows of C (M)
 * Launch: block (BX, BY, 1), grid (ceil(N / BX), ceil(M / BY), 1), no dynamic shared memory.
 * Correct for any M, N, K >= 1 with lda, ldb at least the stored row widths and ldc >= N;
 * when beta == 0, C is not read (a NaN already in C is overwritten, as in BLAS).
 */
#define BX ${bx}
#define BY ${by}
#define A_T ${a_t} /* 1: A stored as K rows of M (lda >= M); 0: M rows of K (lda >= K) */
#define B_T ${b_t} /* 1: B stored as N rows of K (ldb >= K); 0: K rows of N (ldb >= N) */

extern "C" __global__ void __launch_bounds__(BX * BY)
]] .. gemm.abi .. [[)
{
  /* 64-bit indices: blockIdx.x * BX passes 2^31 near the top of the int range, and
   * row * lda passes it for any large matrix. */
  const long long col = (long long)blockIdx.x * BX + threadIdx.x;
  const long long row = (long long)blockIdx.y * BY + threadIdx.y;
  if (row >= M || col >= N) return;

  /* Element k of this row of op(A) and of this column of op(B) lie a_k and b_k apart. */
  const ${ctype}* a = A + (A_T ? row : row * lda);
  const ${ctype}* b = B + (B_T ? col * ldb : col);
  const long long a_k = A_T ? lda : 1, b_k = B_T ? 1 : ldb;
  ${ctype} acc = 0;
  for (int k = 0; k < K; ++k)
    acc += a[k * a_k] * b[k * b_k];

  ${ctype}* c = C + row * ldc + col;
  if (beta == 0.0f)
    *c = alpha * acc;
  else
    *c = alpha * acc + beta * *c;
}
]]

local function kernel_name(p, layout)
  return string.format("mmt_naive_%s_bx%d_by%d", layout, p.bx, p.by)
end

return {
  name = "naive",
  description = "one thread per element of C, global memory only (the baseline)",
  dtypes = {"f32"}, layouts = gemm.LAYOUTS,
  params = {
    {name = "bx", values = {8, 16, 32, 64, 128, 256}},
    {name = "by", values = {1, 2, 4, 8, 16, 32}},
  },
  default = {bx = 32, by = 8},

  constraints = function(p, prob)
    local threads = p.bx * p.by
    if threads < 32 then
      return false, "fewer than 32 threads per block leaves part of a warp idle"
    end
    if threads > 1024 then
      return false, "more than 1024 threads per block"
    end
    return gemm.rows_fit(prob, p.by)
  end,

  emit = function(p, dtype, layout)
    local name = kernel_name(p, layout)
    local vars = gemm.vars(name, dtype, layout, {bx = p.bx, by = p.by})
    return {
      source = mmt.subst(source, vars),
      kernel = name,
      block = {p.bx, p.by, 1},
      grid = {x = {"N", p.bx}, y = {"M", p.by}, z = 1},
    }
  end,
}
