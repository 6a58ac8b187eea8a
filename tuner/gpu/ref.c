/* gpu/ref.c -- see gpu/ref.h: random inputs, CPU reference and float32 GEMMs, verification. */
#include "gpu/ref.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"

/* ---- random inputs ---- */

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit state, passes BigCrush, ~1 ns a value. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void tn_fill_random(float *x, size_t count, uint64_t *seed) {
  /* The top 24 bits u of each value give (2u + 1 - 2^24) / 2^24: odd multiples of 2^-24 in
   * [-1 + 2^-24, 1 - 2^-24], exact in float, symmetric, and never 0 (so never all zeros). */
  const float scale = 1.0f / 16777216.0f; /* 2^-24 */
  for (size_t i = 0; i < count; i++) {
    int32_t u = (int32_t)(splitmix64(seed) >> 40);
    x[i] = (float)(2 * u + 1 - 16777216) * scale;
  }
}

void tn_fill_nan(float *x, size_t count) {
  for (size_t i = 0; i < count; i++) x[i] = NAN;
}

/* ---- GEMM row kernels ----
 * Both GEMMs use the i-k-j order: row i of the output is zeroed, then for each k the row k
 * of B, scaled by A[i][k], is added to it.  The inner loop runs over contiguous memory in B
 * and the output, so it streams and vectorizes.  Each output element is summed over k in
 * increasing order whatever the blocking or threading, so results do not depend on them.
 *
 * The j loop is written as blocks of 8 plus a scalar tail: at -O2, GCC 12 vectorizes only
 * loops whose trip count is known to fit the vector width ("very cheap" cost model), which
 * the fixed 8-wide block is and a plain j < n loop is not (3.5x slower measured for 1024^3
 * float on the 2-core build machine). */

/* Rows of B per k block: a block of B (KB x n floats) is reused by every row of the thread's
 * range while it is in cache, instead of streaming all of B from memory once per row (2.8x
 * faster float at 4096^3, where B outgrows the caches; 16 to 256 measure alike). */
#define KB 128

typedef struct tn_job tn_job;
struct tn_job {
  void (*rows)(const tn_job *job); /* computes rows [row0, row1) */
  int64_t n, k;
  const float *a, *b;
  int64_t lda, ldb, ldo;
  void *out; /* double * (reference) or float * (sgemm) */
  int64_t row0, row1;
};

static void axpy_f64(int64_t n, double s, const float *restrict x, double *restrict y) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int u = 0; u < 8; u++) y[j + u] += s * (double)x[j + u];
  for (; j < n; j++) y[j] += s * (double)x[j];
}

static void axpy_f32(int64_t n, float s, const float *restrict x, float *restrict y) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int u = 0; u < 8; u++) y[j + u] += s * x[j + u];
  for (; j < n; j++) y[j] += s * x[j];
}

static void ref_rows(const tn_job *job) {
  double *out = job->out;
  for (int64_t i = job->row0; i < job->row1; i++)
    memset(out + i * job->ldo, 0, (size_t)job->n * sizeof *out);
  for (int64_t k0 = 0; k0 < job->k; k0 += KB) {
    int64_t k1 = k0 + KB < job->k ? k0 + KB : job->k;
    for (int64_t i = job->row0; i < job->row1; i++) {
      const float *arow = job->a + i * job->lda;
      for (int64_t kk = k0; kk < k1; kk++)
        axpy_f64(job->n, (double)arow[kk], job->b + kk * job->ldb, out + i * job->ldo);
    }
  }
}

static void sgemm_rows(const tn_job *job) {
  float *out = job->out;
  for (int64_t i = job->row0; i < job->row1; i++)
    memset(out + i * job->ldo, 0, (size_t)job->n * sizeof *out);
  for (int64_t k0 = 0; k0 < job->k; k0 += KB) {
    int64_t k1 = k0 + KB < job->k ? k0 + KB : job->k;
    for (int64_t i = job->row0; i < job->row1; i++) {
      const float *arow = job->a + i * job->lda;
      for (int64_t kk = k0; kk < k1; kk++)
        axpy_f32(job->n, arow[kk], job->b + kk * job->ldb, out + i * job->ldo);
    }
  }
}

/* ---- threads ---- */

/* Test hook (tn_ref_test_fail_threads): pthread_create "fails" after this many successes. */
static int fail_threads_after = -1;

void tn_ref_test_fail_threads(int after) { fail_threads_after = after; }

static int create_thread(pthread_t *t, void *(*fn)(void *), void *arg) {
  if (fail_threads_after == 0) return -1;
  if (fail_threads_after > 0) fail_threads_after--;
  return pthread_create(t, NULL, fn, arg);
}

static void *job_main(void *arg) {
  const tn_job *job = arg;
  job->rows(job);
  return NULL;
}

/* Splits rows [0, m) of proto into `threads` contiguous ranges, runs all but the last on new
 * threads and the last on this one.  If a thread cannot be created (or the job array cannot
 * be allocated), this thread computes those rows itself: the result is the same, only slower,
 * so the fallback needs no error. */
static void run_rows(const tn_job *proto, int64_t m, int threads) {
  if (threads > m) threads = (int)m;
  if (threads > 256) threads = 256;
  tn_job *jobs = threads > 1 ? malloc((size_t)threads * sizeof *jobs) : NULL;
  pthread_t *tids = jobs ? malloc((size_t)threads * sizeof *tids) : NULL;
  bool *started = tids ? calloc((size_t)threads, sizeof *started) : NULL;
  if (!started) {
    tn_job one = *proto;
    one.row0 = 0;
    one.row1 = m;
    one.rows(&one);
    goto cleanup;
  }
  for (int t = 0; t < threads; t++) {
    jobs[t] = *proto;
    jobs[t].row0 = m * t / threads;
    jobs[t].row1 = m * (t + 1) / threads;
    if (t < threads - 1) started[t] = create_thread(&tids[t], job_main, &jobs[t]) == 0;
  }
  for (int t = 0; t < threads; t++)
    if (!started[t]) jobs[t].rows(&jobs[t]);
  for (int t = 0; t < threads; t++)
    if (started[t]) pthread_join(tids[t], NULL);
cleanup:
  free(started);
  free(tids);
  free(jobs);
}

/* Checks the arguments of both GEMMs. */
static mmt_status check_gemm(const char *name, int64_t m, int64_t n, int64_t k, const void *a,
                             int64_t lda, const void *b, int64_t ldb, const void *out, int64_t ldo,
                             ut_err *err) {
  if (m < 0 || n < 0 || k < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s: negative size %lldx%lldx%lld", name, (long long)m,
                   (long long)n, (long long)k);
  if (lda < k || ldb < n || ldo < n)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "%s: leading dimension too small (lda %lld < K %lld, ldb %lld or ld of the "
                   "output %lld < N %lld)",
                   name, (long long)lda, (long long)k, (long long)ldb, (long long)ldo,
                   (long long)n);
  if ((m > 0 && n > 0 && !out) || (m > 0 && k > 0 && !a) || (n > 0 && k > 0 && !b))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s: NULL matrix pointer", name);
  return MMT_OK;
}

static mmt_status run_gemm(const char *name, void (*rows)(const tn_job *), int64_t m, int64_t n,
                           int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                           void *out, int64_t ldo, int threads, ut_err *err) {
  mmt_status rc = check_gemm(name, m, n, k, a, lda, b, ldb, out, ldo, err);
  if (rc != MMT_OK) return rc;
  if (m == 0 || n == 0) return MMT_OK;
  tn_job proto = {.rows = rows,
                  .n = n,
                  .k = k,
                  .a = a,
                  .b = b,
                  .lda = lda,
                  .ldb = ldb,
                  .ldo = ldo,
                  .out = out,
                  .row0 = 0,
                  .row1 = m};
  run_rows(&proto, m, threads < 1 ? 1 : threads);
  return MMT_OK;
}

mmt_status tn_ref_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, double *ref, int64_t ldr, int threads, ut_err *err) {
  return run_gemm("tn_ref_gemm", ref_rows, m, n, k, a, lda, b, ldb, ref, ldr, threads, err);
}

/* Stored operand x (rows of `cols`, pitch ld) transposed into a packed cols x rows copy. */
static float *transposed_copy(const float *x, int64_t rows, int64_t cols, int64_t ld) {
  float *t = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *t);
  if (!t) return NULL;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) t[c * rows + r] = x[r * ld + c];
  return t;
}

mmt_status tn_ref_gemm_layout(const char *layout, int64_t m, int64_t n, int64_t k, const float *a,
                              int64_t lda, const float *b, int64_t ldb, double *ref, int64_t ldr,
                              int threads, ut_err *err) {
  int li = gen_layout_index(layout);
  if (li < 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "tn_ref_gemm_layout: unknown layout '%s'",
                   layout ? layout : "(null)");
  if (li == 0) return tn_ref_gemm(m, n, k, a, lda, b, ldb, ref, ldr, threads, err);
  int64_t ld[3];
  gen_min_ld(layout, m, n, k, ld);
  if (m < 0 || n < 0 || k < 0 || lda < ld[0] || ldb < ld[1] || ldr < ld[2])
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "tn_ref_gemm_layout: bad sizes %lldx%lldx%lld or leading dimension (%s: lda "
                   "%lld, ldb %lld, ldr %lld)",
                   (long long)m, (long long)n, (long long)k, layout, (long long)lda,
                   (long long)ldb, (long long)ldr);
  /* A transposed operand is packed into its nn form first: O(size) next to O(m*n*k). */
  float *at = NULL, *bt = NULL;
  bool ta = layout[0] == 't', tb = layout[1] == 't';
  if ((ta && m > 0 && k > 0 && (!a || !(at = transposed_copy(a, k, m, lda)))) ||
      (tb && n > 0 && k > 0 && (!b || !(bt = transposed_copy(b, n, k, ldb))))) {
    free(at);
    return ut_fail(err, (ta && !a) || (tb && !b) ? MMT_ERR_INVALID_ARG : MMT_ERR_NOMEM,
                   "tn_ref_gemm_layout: %s", (ta && !a) || (tb && !b) ? "NULL matrix pointer"
                                                                       : "out of memory");
  }
  mmt_status rc = tn_ref_gemm(m, n, k, ta ? at : a, ta ? k : lda, tb ? bt : b, tb ? n : ldb, ref,
                              ldr, threads, err);
  free(at);
  free(bt);
  return rc;
}

mmt_status tn_cpu_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float *c, int64_t ldc, int threads,
                        ut_err *err) {
  return run_gemm("tn_cpu_sgemm", sgemm_rows, m, n, k, a, lda, b, ldb, c, ldc, threads, err);
}

/* ---- verification ---- */

bool tn_tolerance(const char *dtype, double *rel_tol, double *max_tol) {
  /* f32: a float32 sum of K products of values in [-1, 1) loses about 0.4 * sqrt(K) * 2^-24
   * in relative Frobenius norm when summed in sequence (each rounding adds an error
   * proportional to the running sum; they add up like a random walk), and GPU kernels,
   * which sum in several partial sums, lose less.  K = 16384 gives about 3e-6 (measured:
   * test_ref's f32_tolerance_margin), 3x under 1e-5; the max-element error is well under
   * 1e-4.  A wrong index, a missed tail or a half-precision path gives errors of 1e-3 and
   * more.  The margin shrinks as sqrt(K): K beyond about 2^18 may need a looser bound.
   * tf32 keeps 10 mantissa bits of the f32 inputs: rounded, about 2^-11 relative error per
   * input; truncated (what wgmma does with f32 operands read straight from shared memory), up
   * to 2^-10 and biased towards zero, about 8e-4 in relative norm on uniform data, hence 2e-3.
   * f16 and bf16 keep 10 and 7 bits but the reference uses the same rounded inputs.
   * FP8 (e4m3, e5m2): the reference reads the same bytes, and products of two FP8 values are
   * exact in fp32, but Hopper's FP8 wgmma keeps fewer bits than fp32 in its own sums: a
   * kernel that promotes them into fp32 every few hundred elements is held to tf32's bound;
   * "fp8_fast" (fast accumulation, wgmma's sum over all of K, where the caller allows it) to
   * the 16-bit types'.  Both to be confirmed against the GPU's figures at K = 16384.
   * An FP8 D ("e4m3_d", "e5m2_d") rounds each element to within half an ulp, 2^-4 and 2^-3 of
   * it: just above those, in both measures. */
  static const struct {
    const char *name;
    double rel, max;
  } table[] = {
      {"f32", 1e-5, 1e-4},      {"tf32", 2e-3, 2e-2},   {"f16", 1e-2, 5e-2},
      {"bf16", 1e-2, 5e-2},     {"e4m3", 2e-3, 2e-2},   {"e5m2", 2e-3, 2e-2},
      {"fp8_fast", 1e-2, 5e-2}, {"e4m3_d", 7e-2, 7e-2}, {"e5m2_d", 1.4e-1, 1.4e-1},
  };
  for (size_t i = 0; dtype && i < sizeof table / sizeof table[0]; i++) {
    if (strcmp(dtype, table[i].name) != 0) continue;
    *rel_tol = table[i].rel;
    *max_tol = table[i].max;
    return true;
  }
  return false;
}

/* First pass: NaN/Inf count and location, largest |ref| and |C - ref| over finite pairs. */
static void scan_bad_and_max(int64_t m, int64_t n, const float *c, int64_t ldc, const double *ref,
                             int64_t ldr, tn_check *out, double *max_ref, double *max_diff) {
  *max_ref = 0.0;
  *max_diff = 0.0;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double cv = c[i * ldc + j], rv = ref[i * ldr + j];
      if (!isfinite(cv) || !isfinite(rv)) {
        if (out->bad_count++ == 0) {
          out->bad_row = i;
          out->bad_col = j;
        }
        continue;
      }
      double d = fabs(cv - rv);
      if (d > *max_diff) *max_diff = d;
      if (fabs(rv) > *max_ref) *max_ref = fabs(rv);
    }
  }
}

/* Second pass: Frobenius norms, scaled by `scale` so the squares cannot overflow. */
static void frobenius(int64_t m, int64_t n, const float *c, int64_t ldc, const double *ref,
                      int64_t ldr, double scale, double *norm_diff, double *norm_ref) {
  double sd = 0.0, sr = 0.0;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double cv = c[i * ldc + j], rv = ref[i * ldr + j];
      if (!isfinite(cv) || !isfinite(rv)) continue;
      double d = (cv - rv) / scale, r = rv / scale;
      sd += d * d;
      sr += r * r;
    }
  }
  *norm_diff = sqrt(sd) * scale;
  *norm_ref = sqrt(sr) * scale;
}

void tn_compare(int64_t m, int64_t n, const float *c, int64_t ldc, const double *ref, int64_t ldr,
                const char *dtype, tn_check *out) {
  double rel_tol = 0.0, max_tol = 0.0;
  bool known = tn_tolerance(dtype, &rel_tol, &max_tol);
  *out = (tn_check){
      .rel_err = 0.0, .max_err = 0.0, .bad_count = 0, .bad_row = -1, .bad_col = -1, .pass = false};
  if (m < 0) m = 0;
  if (n < 0) n = 0;
  double max_ref, max_diff, norm_diff, norm_ref;
  scan_bad_and_max(m, n, c, ldc, ref, ldr, out, &max_ref, &max_diff);
  double scale = max_ref > max_diff ? max_ref : max_diff;
  if (scale == 0.0) scale = 1.0;
  frobenius(m, n, c, ldc, ref, ldr, scale, &norm_diff, &norm_ref);
  /* An all-zero reference has no scale to be relative to: the errors are then absolute. */
  out->rel_err = norm_ref > 0.0 ? norm_diff / norm_ref : norm_diff;
  out->max_err = max_ref > 0.0 ? max_diff / max_ref : max_diff;
  out->pass = known && out->bad_count == 0 && out->rel_err <= rel_tol && out->max_err <= max_tol;
}

/* ---- GPU reference ---- */

/* One thread per output element, summed in double in increasing k like ref_rows.  The
 * product of two floats is exact in double (24 + 24 bits < 53), so a fused multiply-add gives
 * the same sums as the CPU's multiply then add: the two references agree bit for bit.
 * The loops stride by the grid, so a grid capped at 65535 blocks in y still covers M. */
static const char ref_gpu_source[] =
    "/* mmtune float64 reference GEMM: R = op(A) * op(B), row-major, float inputs, double\n"
    " * sums; ta, tb: A, B stored transposed (the layouts of gen.h).\n"
    " * Each 16x16 block computes a 64x64 tile of R (4x4 per thread) from 64x16 and 16x64\n"
    " * double tiles of A and B in shared memory.  Every R element sums k = 0..K-1 in order.\n"
    " * Launch: block (16, 16), grid (ceil(N/64), min(ceil(M/64), 65535)); rows stride by the\n"
    " * grid. */\n"
    "extern \"C\" __global__ void mmt_ref_gemm_f64(int M, int N, int K, int ta, int tb,\n"
    "    const float *__restrict__ A, int lda, const float *__restrict__ B, int ldb,\n"
    "    double *__restrict__ R, int ldr) {\n"
    "  __shared__ double As[16][65]; /* As[k][row] */\n"
    "  __shared__ double Bs[16][65]; /* Bs[k][col] */\n"
    "  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;\n"
    "  const long long col0 = (long long)blockIdx.x * 64;\n"
    "  for (long long row0 = (long long)blockIdx.y * 64; row0 < M;\n"
    "       row0 += (long long)gridDim.y * 64) {\n"
    "    double acc[4][4];\n"
    "    for (int i = 0; i < 4; ++i)\n"
    "      for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;\n"
    "    for (int k0 = 0; k0 < K; k0 += 16) {\n"
    "      for (int e = tid; e < 1024; e += 256) {\n"
    "        int r = e / 16, kk = e % 16, c = e % 64, kb = e / 64;\n"
    "        long long gr = row0 + r, gc = col0 + c;\n"
    "        As[kk][r] = (gr < M && k0 + kk < K)\n"
    "            ? (double)A[ta ? (unsigned long long)(k0 + kk) * lda + gr\n"
    "                           : (unsigned long long)gr * lda + k0 + kk] : 0.0;\n"
    "        Bs[kb][c] = (gc < N && k0 + kb < K)\n"
    "            ? (double)B[tb ? (unsigned long long)gc * ldb + k0 + kb\n"
    "                           : (unsigned long long)(k0 + kb) * ldb + gc] : 0.0;\n"
    "      }\n"
    "      __syncthreads();\n"
    "      for (int kk = 0; kk < 16; ++kk) {\n"
    "        double a[4], b[4];\n"
    "        for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];\n"
    "        for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];\n"
    "        for (int i = 0; i < 4; ++i)\n"
    "          for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];\n"
    "      }\n"
    "      __syncthreads();\n"
    "    }\n"
    "    for (int i = 0; i < 4; ++i)\n"
    "      for (int j = 0; j < 4; ++j) {\n"
    "        long long r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;\n"
    "        if (r < M && c < N) R[(unsigned long long)r * ldr + c] = acc[i][j];\n"
    "      }\n"
    "  }\n"
    "}\n";

const char *tn_ref_gpu_source(void) { return ref_gpu_source; }
