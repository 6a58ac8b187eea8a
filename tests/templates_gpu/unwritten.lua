-- A template whose kernel never writes the last row of C: the NaN poison must show it
-- ("NaN/Inf elements").
return {
  name = "unwritten",
  description = "test only: skips the last row",
  dtypes = {"f32"},
  params = { {name = "variant", values = {0}} },
  emit = function(p, dtype)
    return {
      source = [[
extern "C" __global__ void mmt_test_unwritten(int M, int N, int K, float alpha, const float *A,
                                              int lda, const float *B, int ldb, float beta, float *C,
                                              int ldc) {
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  if (row >= M - 1 || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[(long long)row * lda + k] * B[(long long)k * ldb + col];
  C[(long long)row * ldc + col] = alpha * acc;
}
]],
      kernel = "mmt_test_unwritten",
      block = {16, 16, 1},
      grid = {x = {"N", 16}, y = {"M", 16}, z = 1},
    }
  end,
}
