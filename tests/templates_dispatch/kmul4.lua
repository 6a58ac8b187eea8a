-- kmul4.lua: a test template for the dispatcher (tests/test_dispatch.c), not a real kernel.
--
-- Like naive, but it reads A four elements at a time as float4, so its kernel requires
-- K % 4 == 0 and 16-byte aligned A (rows included: lda * 4 bytes).  Its constraints refuse
-- N > 4096, so the dispatcher has a config that fails for some problems by requirement and
-- for others by constraint.

local source = [[
/*
 * ${name} -- test template "kmul4": C = alpha * A*B + beta * C, row-major, float.
 * One thread per element of C; A is read as float4, hence K % 4 == 0 and 16-byte alignment.
 *   BX = ${bx}  threads per block along x (columns of C)
 */
#define BX ${bx}

extern "C" __global__ void __launch_bounds__(BX * 4)
${name}(int M, int N, int K, float alpha,
        const float* __restrict__ A, int lda,
        const float* __restrict__ B, int ldb,
        float beta, float* __restrict__ C, int ldc)
{
  const long long col = (long long)blockIdx.x * BX + threadIdx.x;
  const long long row = (long long)blockIdx.y * 4 + threadIdx.y;
  if (row >= M || col >= N) return;
  const float4* a = (const float4*)(A + row * lda);
  float acc = 0;
  for (int k4 = 0; k4 < K / 4; ++k4) {
    const float4 v = a[k4];
    const long long k = 4LL * k4;
    acc += v.x * B[k * ldb + col] + v.y * B[(k + 1) * ldb + col]
         + v.z * B[(k + 2) * ldb + col] + v.w * B[(k + 3) * ldb + col];
  }
  float* c = C + row * ldc + col;
  *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}
]]

return {
  name = "kmul4",
  description = "test template: float4 loads of A (requires K % 4 == 0, 16-byte alignment)",
  dtypes = {"f32"},
  params = {
    {name = "bx", values = {32, 64}},
  },
  default = {bx = 32},

  constraints = function(p, prob)
    if prob and prob.N > 4096 then
      return false, "test constraint: N > 4096"
    end
    return true
  end,

  emit = function(p, dtype)
    local name = string.format("mmt_kmul4_bx%d", p.bx)
    return {
      source = mmt.subst(source, {name = name, bx = p.bx}),
      kernel = name,
      block = {p.bx, 4, 1},
      grid = {x = {"N", p.bx}, y = {"M", 4}, z = 1},
      requires = {k_multiple = 4, align = 16},
    }
  end,
}
