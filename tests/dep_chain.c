/* dep_chain.c -- see dep_chain.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "dep_chain.h"
#include "half16.h"

void dc_dependent_chain(const rt_cu *cu, const rt_kernel *k) {
  enum { n = 512, steps = 16 };
  const size_t count = (size_t)n * n, bytes = count * 2;
  uint16_t *x = malloc(bytes), *bm = calloc(count, 2), *got = malloc(bytes);
  int *perm = malloc(n * sizeof *perm), *from = malloc(n * sizeof *from);
  int *next = malloc(n * sizeof *next);
  assert_true(x && bm && got && perm && from && next);
  uint64_t seed = 99;
  for (size_t i = 0; i < count; i++) { /* i / 64 for |i| <= 64: exact in f16 */
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = th_f32_to_f16((float)((int)((seed >> 40) % 129) - 64) / 64.0f);
  }
  for (int i = 0; i < n; i++) perm[i] = (i * 37 + 11) % n; /* 37 is prime to 512 */
  for (int kk = 0; kk < n; kk++) bm[(size_t)kk * n + (size_t)perm[kk]] = th_f32_to_f16(1.0f);
  CUdeviceptr buf[2], b = 0;
  assert_int_equal(cu->cuMemAlloc(&buf[0], bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&buf[1], bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&b, bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(buf[0], x, bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(b, bm, bytes), CUDA_SUCCESS);
  ut_err e;
  for (int s = 0; s < steps; s++) {
    const rt_gemm_args args = {.m = n, .n = n, .k = n, .alpha = 1, .beta = 0, .a = buf[s % 2],
                               .b = b, .c = buf[(s + 1) % 2], .lda = n, .ldb = n, .ldc = n};
    assert_int_equal(rt_kernel_launch(k, &args, NULL, &e), MMT_OK);
  }
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(got, buf[steps % 2], bytes), CUDA_SUCCESS);
  /* C = A B has C[i][col] = A[i][perm^-1(col)]: with A[i][c] = X[i][from[c]], the new from
   * is from o perm^-1. */
  for (int col = 0; col < n; col++) from[col] = col;
  for (int s = 0; s < steps; s++) {
    for (int kk = 0; kk < n; kk++) next[perm[kk]] = from[kk];
    memcpy(from, next, n * sizeof *from);
  }
  for (int i = 0; i < n; i++)
    for (int col = 0; col < n; col++) {
      const uint16_t want = x[(size_t)i * n + (size_t)from[col]];
      if (got[(size_t)i * n + col] != want)
        fail_msg("after %d launches C[%d][%d] = %g, want %g", steps, i, col,
                 th_f16_to_f32(got[(size_t)i * n + col]), th_f16_to_f32(want));
    }
  cu->cuMemFree(buf[0]), cu->cuMemFree(buf[1]), cu->cuMemFree(b);
  free(x), free(bm), free(got), free(perm), free(from), free(next);
}
