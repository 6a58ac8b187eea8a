-- A template whose kernel never finishes: the tuner's watchdog must kill the worker, record
-- `timeout`, and go on.
return {
  name = "hang",
  description = "test only: spins forever",
  dtypes = {"f32"},
  params = { {name = "variant", values = {0}} },
  emit = function(p, dtype)
    return {
      source = [[
extern "C" __global__ void mmt_test_hang(int M, int N, int K, float alpha, const float *A, int lda,
                                         const float *B, int ldb, float beta, float *C, int ldc) {
  /* C is poisoned with NaN (0x7fc00000) before the launch: this never becomes true. */
  volatile unsigned *flag = (volatile unsigned *)C;
  while (flag[0] != 0x12345u) {
  }
}
]],
      kernel = "mmt_test_hang",
      block = {32, 1, 1},
      grid = {x = 1, y = 1, z = 1},
    }
  end,
}
