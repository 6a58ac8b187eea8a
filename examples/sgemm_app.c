/*
 * sgemm_app.c -- a small application using libmmtune: C = A*B (fp32, row-major) on GPU 0
 * through mmt_sgemm, checked against a CPU loop.  Prints which kernel the dispatcher chose.
 * Without a GPU it prints why (mmt_errmsg) and exits 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <mmtune.h>

#define M 256
#define N 192
#define K 320

int main(void) {
  mmt_context *ctx = NULL;
  mmt_status rc = mmt_open(&ctx, 0, NULL);
  if (rc != MMT_OK) {
    fprintf(stderr, "sgemm_app: mmt_open: %s: %s\n", mmt_status_name(rc), mmt_errmsg(ctx));
    mmt_close(ctx);
    return 1;
  }
  static float a[M * K], b[K * N], c[M * N];
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  float *da = NULL, *db = NULL, *dc = NULL;
  int failed = cudaMalloc((void **)&da, sizeof a) || cudaMalloc((void **)&db, sizeof b) ||
               cudaMalloc((void **)&dc, sizeof c) ||
               cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice) ||
               cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice);
  if (!failed) rc = mmt_sgemm(ctx, M, N, K, da, K, db, N, dc, N, NULL);
  if (!failed && rc == MMT_OK) failed = cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost) != 0;
  double worst = 0;
  for (int i = 0; i < M && !failed && rc == MMT_OK; i++)
    for (int j = 0; j < N; j++) {
      double ref = 0;
      for (int k = 0; k < K; k++) ref += (double)a[i * K + k] * b[k * N + j];
      double err = fabs(c[i * N + j] - ref);
      if (err > worst) worst = err;
    }
  mmt_choice how;
  if (!failed && rc == MMT_OK && mmt_sgemm_explain(ctx, M, N, K, K, N, N, &how) == MMT_OK)
    printf("sgemm_app: %dx%dx%d via %s %s (%s), max abs error %.2e\n", M, N, K,
           how.template_name, how.params, mmt_choice_kind_name(how.kind), worst);
  if (rc != MMT_OK) fprintf(stderr, "sgemm_app: mmt_sgemm: %s\n", mmt_errmsg(ctx));
  cudaFree(da), cudaFree(db), cudaFree(dc);
  mmt_close(ctx);
  return failed || rc != MMT_OK || worst > 1e-3 ? 1 : 0;
}
