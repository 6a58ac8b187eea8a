/*
 * sgemm_app.c -- a small application using libmmtune: C = alpha * A * B + beta * C in fp32
 * with column-major matrices, as a BLAS/cuBLAS caller would write it, on GPU 0 through
 * mmt_gemm, checked against a CPU loop.  Prints which kernel the dispatcher chose
 * (mmt_explain).  Without a GPU it prints why (mmt_errmsg) and exits 1.
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
  /* Column-major: element (i, j) of an r x c matrix with leading dimension r is x[i + j*r]. */
  static float a[M * K], b[K * N], c[M * N], out[M * N];
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  for (int i = 0; i < M * N; i++) c[i] = (float)((i * 3) % 7) / 7.0f - 0.5f;
  const float alpha = 1.5f, beta = 0.5f;
  float *da = NULL, *db = NULL, *dc = NULL;
  int failed = cudaMalloc((void **)&da, sizeof a) || cudaMalloc((void **)&db, sizeof b) ||
               cudaMalloc((void **)&dc, sizeof c) ||
               cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice) ||
               cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice) ||
               cudaMemcpy(dc, c, sizeof c, cudaMemcpyHostToDevice);
  if (!failed)
    rc = mmt_gemm(ctx, MMT_COL_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, M, N, K, alpha, da, M, db, K,
                  beta, dc, M, MMT_F32, NULL);
  if (!failed && rc == MMT_OK) failed = cudaMemcpy(out, dc, sizeof out, cudaMemcpyDeviceToHost) != 0;
  double worst = 0;
  for (int j = 0; j < N && !failed && rc == MMT_OK; j++)
    for (int i = 0; i < M; i++) {
      double ref = 0;
      for (int k = 0; k < K; k++) ref += (double)a[i + k * M] * b[k + j * K];
      ref = alpha * ref + beta * c[i + j * M];
      double err = fabs(out[i + j * M] - ref);
      if (err > worst) worst = err;
    }
  mmt_choice how;
  const mmt_problem p = {MMT_COL_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, M, N, K, M, K, M, MMT_F32};
  if (!failed && rc == MMT_OK && mmt_explain(ctx, &p, &how) == MMT_OK)
    printf("sgemm_app: %dx%dx%d column-major via %s %s (%s, kernel layout %s), max abs error %.2e\n",
           M, N, K, how.template_name, how.params, mmt_choice_kind_name(how.kind), how.layout,
           worst);
  if (rc != MMT_OK) fprintf(stderr, "sgemm_app: mmt_gemm: %s\n", mmt_errmsg(ctx));
  if (failed) fprintf(stderr, "sgemm_app: a CUDA runtime call failed\n");
  cudaFree(da), cudaFree(db), cudaFree(dc);
  mmt_close(ctx);
  return failed || rc != MMT_OK || worst > 1e-3 ? 1 : 0;
}
