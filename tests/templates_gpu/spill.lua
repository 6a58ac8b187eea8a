-- A template whose kernel keeps an array indexed at run time, which the compiler must place
-- in local memory: the tuner must record `pruned` without timing it.
return {
  name = "spill",
  description = "test only: uses local memory",
  dtypes = {"f32"},
  params = { {name = "variant", values = {0}} },
  emit = function(p, dtype)
    return {
      source = [[
extern "C" __global__ void mmt_test_spill(int M, int N, int K, float alpha, const float *A, int lda,
                                          const float *B, int ldb, float beta, float *C, int ldc) {
  float scratch[64];
  for (int i = 0; i < 64; ++i) scratch[i] = A[i % K];
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  if (row >= M || col >= N) return;
  C[(long long)row * ldc + col] = alpha * scratch[(row * 7 + col) & 63];
}
]],
      kernel = "mmt_test_spill",
      block = {16, 16, 1},
      grid = {x = {"N", 16}, y = {"M", 16}, z = 1},
    }
  end,
}
