/*
 * bench_blas.c -- mmtune-blas-bench: SGEMM on host memory through libmmtune_blas (every call on
 * the GPU, transfers included) against the CPU BLAS alone, per square size n, to pick
 * MMTUNE_BLAS_THRESHOLD and to check the speed-up on large products.
 *
 *   mmtune-blas-bench [N ...]        (default: 64 128 256 384 512 768 1024 2048 4096)
 *
 * The CPU BLAS is the one the shim would use ($MMTUNE_BLAS_CPU_LIBRARY, else libblas.so.3),
 * loaded here a second time and called directly.  Each size: C = A * B (column-major, no
 * transpose, beta = 0) on random inputs; one untimed call each (the GPU side compiles or
 * loads its kernel), then the median wall time of calls until 0.5 s or 9 calls; the largest
 * difference between the two results relative to the largest |C|.  The last line names the
 * smallest n from which the GPU path was faster at every larger measured size, as 2*n^3 flops.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mmtune_blas.h"

typedef void sgemm_fn(const char *transa, const char *transb, const int *m, const int *n,
                      const int *k, const float *alpha, const float *a, const int *lda,
                      const float *b, const int *ldb, const float *beta, float *c, const int *ldc,
                      size_t la, size_t lb);

/* The shim's sgemm_ (this program links libmmtune_blas). */
void sgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b, const int *ldb,
            const float *beta, float *c, const int *ldc, size_t la, size_t lb);

enum { MAX_RUNS = 9 };

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median seconds of C = A * B through f (one untimed call first). */
static double time_sgemm(sgemm_fn *f, int n, const float *a, const float *b, float *c) {
  const float one = 1, zero = 0;
  f("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
  double t[MAX_RUNS], start = now_s();
  int runs = 0;
  while (runs < MAX_RUNS && (runs < 3 || now_s() - start < 0.5)) {
    double t0 = now_s();
    f("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
    t[runs++] = now_s() - t0;
  }
  qsort(t, (size_t)runs, sizeof t[0], cmp_double);
  return runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
}

int main(int argc, char **argv) {
  static const int defaults[] = {64, 128, 256, 384, 512, 768, 1024, 2048, 4096};
  int sizes[64], count = 0;
  for (int i = 1; i < argc && count < 64; i++) {
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < 1 || v > 32768) {
      fprintf(stderr, "mmtune-blas-bench: '%s' is not a size in 1..32768\n", argv[i]);
      return 2;
    }
    sizes[count++] = (int)v;
  }
  if (!count)
    for (; count < (int)(sizeof defaults / sizeof defaults[0]); count++) sizes[count] = defaults[count];
  const char *lib = getenv("MMTUNE_BLAS_CPU_LIBRARY");
  lib = lib && *lib ? lib : "libblas.so.3";
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  sgemm_fn *cpu = h ? (sgemm_fn *)dlsym(h, "sgemm_") : NULL;
  if (!cpu) {
    fprintf(stderr, "mmtune-blas-bench: no sgemm_ in the CPU BLAS %s: %s\n", lib, dlerror());
    return 1;
  }
  setenv("MMTUNE_BLAS_THRESHOLD", "0", 1); /* every call of the shim on the GPU */
  printf("SGEMM on host memory, C = A * B, column-major; CPU BLAS %s\n", lib);
  printf("%6s %12s %12s %9s %10s\n", "n", "mmtune ms", "CPU ms", "speed-up", "max diff");
  int crossover = -1;
  for (int s = 0; s < count; s++) {
    const int n = sizes[s];
    size_t elems = (size_t)n * (size_t)n;
    float *a = malloc(elems * sizeof *a), *b = malloc(elems * sizeof *b);
    float *c_gpu = malloc(elems * sizeof *c_gpu), *c_cpu = malloc(elems * sizeof *c_cpu);
    if (!a || !b || !c_gpu || !c_cpu) {
      fprintf(stderr, "mmtune-blas-bench: out of memory at n = %d\n", n);
      return 1;
    }
    srand(1234u + (unsigned)n);
    for (size_t i = 0; i < elems; i++) a[i] = (float)rand() / RAND_MAX - 0.5f;
    for (size_t i = 0; i < elems; i++) b[i] = (float)rand() / RAND_MAX - 0.5f;
    const double gpu_s = time_sgemm(sgemm_, n, a, b, c_gpu);
    const double cpu_s = time_sgemm(cpu, n, a, b, c_cpu);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < elems; i++) {
      diff = fmax(diff, fabs((double)c_gpu[i] - (double)c_cpu[i]));
      scale = fmax(scale, fabs((double)c_cpu[i]));
    }
    printf("%6d %12.3f %12.3f %8.2fx %10.1e\n", n, gpu_s * 1e3, cpu_s * 1e3, cpu_s / gpu_s,
           scale > 0 ? diff / scale : diff);
    crossover = gpu_s < cpu_s ? (crossover < 0 ? n : crossover) : -1;
    free(a), free(b), free(c_gpu), free(c_cpu);
  }
  mmtune_blas_stats_t st;
  mmtune_blas_stats(&st);
  printf("shim counters: gpu %llu, cpu %llu, fallbacks %llu\n", (unsigned long long)st.gpu_calls,
         (unsigned long long)st.cpu_calls, (unsigned long long)st.gpu_fallbacks);
  if (crossover > 0)
    printf("GPU faster from n = %d on: MMTUNE_BLAS_THRESHOLD=%.0f (2*n^3)\n", crossover,
           2.0 * crossover * crossover * crossover);
  else
    printf("GPU not faster at the largest size measured\n");
  return st.gpu_fallbacks ? 1 : 0;
}
