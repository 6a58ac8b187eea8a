-- A correct GEMM that also reads one element outside an operand: variant 0 the element after
-- the last one of B (past its extent), variant 1 the element before A's first.  The result
-- never depends on it, so only guard pages can catch it: the tuner's verification must record
-- `fault` for both and the dispatcher must never serve them.
return {
  name = "overread",
  description = "test only: reads one element outside B (0) or A (1)",
  dtypes = {"f32"},
  params = { {name = "variant", values = {0, 1}} },
  emit = function(p, dtype)
    local outside = p.variant == 0 and "B[(long long)(K - 1) * ldb + N]" or "A[-1]"
    return {
      source = ([[
extern "C" __global__ void mmt_test_overread_VARIANT(int M, int N, int K, float alpha,
    const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[(long long)row * lda + k] * B[(long long)k * ldb + col];
  /* One thread reads outside; a value the inputs never hold keeps the read in the code. */
  if (row == 0 && col == 0 && K > 0 && OUTSIDE == 1.5e38f) acc = 0.0f;
  C[(long long)row * ldc + col] = alpha * acc + (beta != 0.0f ? beta * C[(long long)row * ldc + col] : 0.0f);
}
]]):gsub("VARIANT", tostring(p.variant)):gsub("OUTSIDE", outside),
      kernel = "mmt_test_overread_" .. p.variant,
      block = {16, 16, 1},
      grid = {x = {"N", 16}, y = {"M", 16}, z = 1},
    }
  end,
}
