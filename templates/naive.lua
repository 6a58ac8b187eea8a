-- naive.lua: one thread per element of C, A and B read straight from global memory.
--
-- The baseline every other template is measured against: simple enough to be obviously
-- correct, slow because nothing is reused from fast memory.  The only choice is the block
-- shape, which decides how well a warp's loads of B coalesce (threads along x read
-- neighbouring columns) and how many blocks fit on an SM.

local source = [[
/*
 * ${name} -- mmtune template "naive", ${ctype}, row-major:
 * C = alpha * A*B + beta * C.
 * One thread computes one element of C, reading A and B straight from global memory.
 *
 * Parameters:
 *   BX = ${bx}  threads per block along x, the columns of C (N); neighbouring threads read
 *              neighbouring elements of a row of B, so larger BX coalesces better
 *   BY = ${by}  threads per block along y, the rows of C (M)
 * Launch: block (BX, BY, 1), grid (ceil(N / BX), ceil(M / BY), 1), no dynamic shared memory.
 * Correct for any M, N, K >= 1 with lda >= K, ldb >= N, ldc >= N; when beta == 0, C is not
 * read (a NaN already in C is overwritten, as in BLAS).
 */
#define BX ${bx}
#define BY ${by}

extern "C" __global__ void __launch_bounds__(BX * BY)
${name}(int M, int N, int K, float alpha,
        const ${ctype}* __restrict__ A, int lda,
        const ${ctype}* __restrict__ B, int ldb,
        float beta, ${ctype}* __restrict__ C, int ldc)
{
  /* 64-bit indices: blockIdx.x * BX passes 2^31 near the top of the int range, and
   * row * lda passes it for any large matrix. */
  const long long col = (long long)blockIdx.x * BX + threadIdx.x;
  const long long row = (long long)blockIdx.y * BY + threadIdx.y;
  if (row >= M || col >= N) return;

  const ${ctype}* a = A + row * lda;
  const ${ctype}* b = B + col;
  ${ctype} acc = 0;
  for (int k = 0; k < K; ++k)
    acc += a[k] * b[(long long)k * ldb];

  ${ctype}* c = C + row * ldc + col;
  if (beta == 0.0f)
    *c = alpha * acc;
  else
    *c = alpha * acc + beta * *c;
}
]]

local function kernel_name(p)
  return string.format("mmt_naive_bx%d_by%d", p.bx, p.by)
end

return {
  name = "naive",
  description = "one thread per element of C, global memory only (the baseline)",
  dtypes = {"f32"},
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
    if prob then
      if prob.layout ~= "nn" then
        return false, "only the nn layout (A and B not transposed)"
      end
      if mmt.ceil_div(prob.M, p.by) > 65535 then
        return false, "M needs more than 65535 blocks along grid y"
      end
    end
    return true
  end,

  emit = function(p, dtype)
    local name = kernel_name(p)
    local vars = {name = name, bx = p.bx, by = p.by, ctype = mmt.dtype(dtype).ctype}
    return {
      source = mmt.subst(source, vars),
      kernel = name,
      block = {p.bx, p.by, 1},
      grid = {x = {"N", p.bx}, y = {"M", p.by}, z = 1},
    }
  end,
}
