-- A template whose kernel writes far outside any allocation: the tuner must record `fault`
-- for it, replace its GPU worker and go on.
return {
  name = "fault",
  description = "test only: faults with an illegal address",
  dtypes = {"f32"},
  params = { {name = "variant", values = {0}} },
  emit = function(p, dtype)
    return {
      source = [[
extern "C" __global__ void mmt_test_fault(int M, int N, int K, float alpha, const float *A, int lda,
                                          const float *B, int ldb, float beta, float *C, int ldc) {
  C[(1ull << 46) + threadIdx.x] = 1.0f; /* unmapped: illegal address */
}
]],
      kernel = "mmt_test_fault",
      block = {32, 1, 1},
      grid = {x = 1, y = 1, z = 1},
    }
  end,
}
