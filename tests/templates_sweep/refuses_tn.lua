-- refuses_tn.lua: a test template for the sweep planner (tests/test_sweep_plan.c), not a
-- real kernel: one thread per element of C, like naive.  Its config `wide = 1` has no kernel
-- where A is stored transposed (layouts tn, tt): emit refuses it there with a reason, as a
-- real template does for a config its constraints cannot judge without the layout (skinny's
-- lanes < 32 where W is K-contiguous).

local source = [[
/* ${name} -- test template "refuses_tn", float, row-major, layout ${layout}:
 * C = alpha * op(A)*op(B) + beta * C, one thread an element.  WIDE = ${wide} (no effect). */
#define A_T ${a_t}
#define B_T ${b_t}
extern "C" __global__ void ${name}(int M, int N, int K, float alpha, const float* __restrict__ A,
                                   int lda, const float* __restrict__ B, int ldb, float beta,
                                   float* __restrict__ C, int ldc) {
  const long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long row = (long long)blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (long long k = 0; k < K; ++k)
    acc += A[A_T ? k * lda + row : row * lda + k] * B[B_T ? col * ldb + k : k * ldb + col];
  float* const c = C + row * ldc + col;
  *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}
]]

return {
  name = "refuses_tn",
  description = "test template: config wide=1 has no kernel for A stored transposed",
  dtypes = {"f32"},
  layouts = {"nn", "nt", "tn", "tt"},
  params = {
    {name = "bx", values = {32, 64}},
    {name = "wide", values = {0, 1}},
  },
  default = {bx = 32, wide = 0},
  constraints = function() return true end,
  emit = function(p, dtype, layout)
    if p.wide == 1 and layout:sub(1, 1) == "t" then
      error("test refusal: wide = 1 needs A stored M rows of K, not layout " .. layout, 0)
    end
    local name = string.format("mmt_refuses_tn_%s_bx%d_w%d", layout, p.bx, p.wide)
    return {
      source = mmt.subst(source, {name = name, layout = layout, wide = p.wide,
                                  a_t = layout:sub(1, 1) == "t" and 1 or 0,
                                  b_t = layout:sub(2, 2) == "t" and 1 or 0}),
      kernel = name,
      block = {p.bx, 4, 1},
      grid = {x = {"N", p.bx}, y = {"M", 4}, z = 1},
    }
  end,
}
