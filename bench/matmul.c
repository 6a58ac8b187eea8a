/*
 * matmul.c -- mmtune-matmul-bench: mmt_matmul against its peers, side by side in one run, on the
 * forms a transformer calls (include/mmtune.h, mmt_matmul; docs/performance.md quotes it).
 * Its families live here but for grouped (matmul_grouped.c) and quantize (matmul_quantize.c);
 * matmul_bench.h is what they share.
 *
 * Usage:
 *   mmtune-matmul-bench [--device N] [--db PATH] [--dtype f16|bf16] [--family F,...]
 *                       [--weights FILE] [--batches M,...] [--cold] [--runs N] [--csv FILE]
 * Families (default all):
 *   linear     y = gelu(x W^T + b), layout nt, on every weight of --weights and every batch of
 *              --batches; the peer: cuBLASLt with CUBLASLT_EPILOGUE_GELU_BIAS
 *   swiglu     h = silu(x W_g^T) * (x W_u^T) on the gate_up weights (N: the product's 2 x
 *              intermediate); mmt_matmul's gated call on the interleaved weight against cuBLAS's
 *              GEMM on [W_g; W_u] followed by one elementwise silu(g) * u kernel
 *   residual   D = x W^T + C, D apart from C (beta 1); the peer: cuBLASLt, same C and D
 *   f32out     D = x W^T in f32 from 16-bit inputs; the peer: cuBLASLt
 *   attention  strided batches of Q K^T (nt, M = N = seq, K = head dim) and P V (nn, M = seq,
 *              N = head dim, K = seq), batch x heads 32, 128, 512, seq 128 to 4096, head dim 64
 *              and 128 (a case whose operands would pass 6 GiB is left out); the peer:
 *              cublasGemmStridedBatchedEx
 *   host       host time a warm call costs: mmt_gemm, mmt_matmul of the same plain problem, and
 *              mmt_matmul with a bias (an op kernel), 256 x 256 x 256; the three in turn, 7
 *              times, each the median of its 7
 *   quantize   mmt_quantize of each weight (N x K, --dtype to e4m3) in every scale mode, and
 *              per tensor with a given scale (one pass, amax out: "given"); the
 *              peer: a plain read of the same bytes (x, q and the scales; gpu/bandwidth.h), so
 *              the ratio is the share of that read's speed the cast reaches
 *   grouped    mixture-of-experts layers (G experts' N x K weights, layout nt): one contiguous
 *              grouped mmt_matmul over R routed rows (1 to 16384; uniform and Zipf-skewed
 *              routings drawn on the host, some experts empty) against one
 *              cublasGemmGroupedBatchedEx call over the experts that got rows; a second line
 *              ("grp-loop") against a loop of plain mmt_matmul calls, one an expert; at 64
 *              routed rows or fewer a third ("grp-read") against a plain read of the weights
 *              of the experts with rows (gpu/bandwidth.h): the share of its speed the call
 *              reaches.  Up to 256 routed rows the same cases in the masked layout too (G
 *              blocks as deep as the fullest expert, the counts in device memory): "masked",
 *              "msk-loop", "msk-read"
 *   coldstart  (only when named) the first calls of the linear family's layers on a fresh
 *              context and an empty cubin cache, one by one and after mmt_matmul_prepare
 *   online     (only when named) --online-shapes never-tuned Linear layers called in a loop
 *              while online tuning (mmt_options.online, --online-budget seconds a shape) tunes
 *              them beside it: the loop's speed meanwhile against its untuned speed, and when
 *              each shape is served EXACT (matmul_online.c; at most --online-limit seconds)
 * Method: random inputs drawn on the device (never zeros), D of both
 * libraries compared first (relative Frobenius difference, the output type's tolerance: a
 * mismatch is reported and left out of the figures), warm-up runs, then --runs timed runs
 * launched back to back with an event between each two, the median; where one library's median
 * is past 1.25x the other's, both are timed again and each keeps its faster (mb_time_pair: a
 * single timing can run 2x slow in one run and not the next).  Inputs rotate over copies
 * that add up to 3x the L2 (--cold: more than twice the L2 between two runs of one copy, so
 * every run reads its operands from DRAM).  Prints one line per case (ms of each, peer / mmtune:
 * above 1, mmtune is faster) and, per family, the geometric mean and the smallest ratio.
 * Without a GPU it prints one line "mmtune-matmul-bench: <reason>" and exits 1; bad arguments
 * exit 2.
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cli.h"
#include "gen.h"
#include "gpu/helper_kernels.h"
#include "gpu/ref.h"
#include "half16.h"
#include "matmul_bench.h"
#include "report/csv.h"
#include "rt_compile.h"

#define PROG "mmtune-matmul-bench"
#define HOST_CALLS 2000
#define HOST_ROUNDS 7

static const char *const k_family[FAMILIES] = {"linear",    "swiglu", "residual", "f32out",
                                               "attention", "host",   "quantize", "grouped",
                                               "coldstart", "online"};

static void print_usage(void) {
  printf("usage: " PROG " [--device N] [--db PATH] [--dtype f16|bf16] [--family F,...]\n"
         "       [--weights FILE] [--batches M,...] [--cold] [--runs N] [--csv FILE]\n"
         "       [--online-shapes N] [--online-budget S] [--online-limit S]\n"
         "mmt_matmul against cuBLASLt's epilogues, cuBLAS + an elementwise SwiGLU,\n"
         "cublasGemmStridedBatchedEx and cublasGemmGroupedBatchedEx, side by side\n"
         "(bench/matmul.c says how it measures).\n"
         "  --family F,...   linear, swiglu, residual, f32out, attention, host, quantize,\n"
         "                   grouped, coldstart, online\n"
         "                   (default all but coldstart and online)\n"
         "  --weights FILE   N K name per line (default bench/llm_layers.txt)\n"
         "  --batches M,...  batch sizes of the Linear families (default 1,16,128,2048,8192)\n"
         "  --cold           every timed run reads its operands from DRAM\n"
         "  --runs N         timed runs a case (default 30, at most %d)\n"
         "  --csv FILE       the cases as CSV too\n"
         "  --online-shapes N   the online family's shapes (default 50)\n"
         "  --online-budget S   its tuning seconds a shape (default: the library's)\n"
         "  --online-limit S    its tuning phase's cap in seconds (default 600)\n",
         MAX_RUNS);
}

static int parse_list(const char *text, bench_opts *o) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  o->nbatches = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (o->nbatches == 16) return bench_usage_error("--batches: at most 16");
    int bad = bench_parse_number(t, "--batches", 1, INT32_MAX, &o->batches[o->nbatches++]);
    if (bad) return bad;
  }
  return o->nbatches ? 0 : bench_usage_error("--batches is empty");
}

static int parse_families(const char *text, bench_opts *o) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  memset(o->family, 0, sizeof o->family);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int f = 0;
    while (f < FAMILIES && strcmp(t, k_family[f])) f++;
    if (f == FAMILIES)
      return bench_usage_error("--family '%s' is not one of linear, swiglu, residual, f32out, "
                               "attention, host, quantize, grouped, coldstart, online",
                               t);
    o->family[f] = true;
  }
  return 0;
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, bench_opts *o) {
  static const struct option longs[] = {{"device", required_argument, NULL, 'd'},
                                        {"db", required_argument, NULL, 'b'},
                                        {"dtype", required_argument, NULL, 't'},
                                        {"family", required_argument, NULL, 'f'},
                                        {"weights", required_argument, NULL, 'w'},
                                        {"batches", required_argument, NULL, 'm'},
                                        {"cold", no_argument, NULL, 'c'},
                                        {"runs", required_argument, NULL, 'r'},
                                        {"csv", required_argument, NULL, 'o'},
                                        {"online-shapes", required_argument, NULL, 'S'},
                                        {"online-budget", required_argument, NULL, 'B'},
                                        {"online-limit", required_argument, NULL, 'L'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  *o = (bench_opts){.dtype = "f16",
                    .weights = MMT_BENCH_DIR "/llm_layers.txt",
                    .runs = 30,
                    .batches = {1, 16, 128, 2048, 8192},
                    .nbatches = 5,
                    .online_limit = 600};
  for (int f = 0; f < FAMILIES; f++) o->family[f] = f != F_COLDSTART && f != F_ONLINE;
  int64_t device = 0, runs = 30, shapes = 50, budget = 0, limit = 600;
  int c, bad = 0;
  opterr = 0;
  while (!bad && (c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
    switch (c) {
    case 'd': bad = bench_parse_number(optarg, "--device", 0, INT_MAX, &device); break;
    case 'b': o->db = optarg; break;
    case 't': o->dtype = optarg; break;
    case 'f': bad = parse_families(optarg, o); break;
    case 'w': o->weights = optarg; break;
    case 'm': bad = parse_list(optarg, o); break;
    case 'c': o->cold = true; break;
    case 'r': bad = bench_parse_number(optarg, "--runs", 3, MAX_RUNS, &runs); break;
    case 'o': o->csv = optarg; break;
    case 'S': bad = bench_parse_number(optarg, "--online-shapes", 1, 1000, &shapes); break;
    case 'B': bad = bench_parse_number(optarg, "--online-budget", 1, 3600, &budget); break;
    case 'L': bad = bench_parse_number(optarg, "--online-limit", 1, 86400, &limit); break;
    case 'h': print_usage(); return 0;
    default: return bench_option_error(c, argv);
    }
  }
  if (bad) return bad;
  if (optind < argc) return bench_usage_error("unexpected argument '%s'", argv[optind]);
  if (strcmp(o->dtype, "f16") && strcmp(o->dtype, "bf16"))
    return bench_usage_error("--dtype '%s' is not f16 or bf16", o->dtype);
  o->type = strcmp(o->dtype, "f16") ? MMT_BF16 : MMT_F16;
  o->device = (int)device;
  o->runs = (int)runs;
  o->online_shapes = (int)shapes;
  o->online_budget = (double)budget;
  o->online_limit = (double)limit;
  return -1;
}

/* ---- the device ---- */

/* Random elements of a type on the device (a hash of the index and seed: never zero). */
static const char FILL_SOURCE[] =
    "extern \"C\" __global__ void bench_fill(void *x, unsigned long long n,\n"
    "                                        unsigned long long seed, int type) {\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < n; i += (unsigned long long)gridDim.x * blockDim.x) {\n"
    "    unsigned long long z = (seed + i + 1) * 0x9E3779B97F4A7C15ULL;\n"
    "    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ULL;\n"
    "    z ^= z >> 29;\n"
    "    float v = (0.125f + 0.875f * (float)(z >> 40) / 16777216.0f) * (z & 1 ? -1.f : 1.f);\n"
    "    if (type == 0) ((float *)x)[i] = v;\n"
    "    else if (type == 3) {\n"
    "      unsigned u = __float_as_uint(v);\n"
    "      ((unsigned short *)x)[i] = (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);\n"
    "    } else {\n"
    "      unsigned short h;\n"
    "      asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v));\n"
    "      ((unsigned short *)x)[i] = h;\n"
    "    }\n"
    "  }\n"
    "}\n";

int mb_size_of(mmt_dtype t) { return t == MMT_F32 ? 4 : 2; }

mmt_status mb_fill(bench *b, CUdeviceptr x, size_t n, mmt_dtype t, ut_err *err) {
  mmt_status rc = MMT_OK;
  unsigned long long count = n, seed = b->seed++ * 0x100000001b3ull;
  int type = (int)t;
  void *args[] = {&x, &count, &seed, &type};
  unsigned blocks = (unsigned)((n + 255) / 256 < 8192 ? (n + 255) / 256 : 8192);
  if (blocks)
    RT_CU_CHECK(b->cu,
                cuLaunchKernel(b->fill_fn, blocks, 1, 1, 256, 1, 1, 0, b->stream, args, NULL));
cleanup:
  return rc;
}

static mmt_status open_bench(bench *b, const bench_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  memset(b, 0, sizeof *b);
  b->o = o;
  b->seed = 0x2545f4914f6cdd1dull;
  mmt_options opts = {.db_path = o->db};
  if ((rc = mmt_open(&b->ctx, o->device, &opts)))
    return ut_fail(err, rc, "mmt_open: %s: %s", mmt_status_name(rc), mmt_errmsg(b->ctx));
  if ((rc = rt_device_open(o->device, &b->dev, err))) return rc;
  if ((rc = rt_driver(&b->cu, err))) return rc;
  if ((rc = tn_gpu_open(o->device, NULL, &b->g, err))) return rc;
  if ((rc = rt_device_bind(&b->dev, err))) return rc;
  if ((rc = tn_cublas_open(&b->cb, err))) return rc;
  if ((rc = tn_cublaslt_open(&b->lt, err))) return rc;
  const rt_cu *cu = b->cu;
  RT_CU_CHECK(cu, cuStreamCreate(&b->stream, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i <= MAX_RUNS; i++) RT_CU_CHECK(cu, cuEventCreate(&b->ev[i], CU_EVENT_DEFAULT));
  RT_CU_CHECK(cu,
              cuDeviceGetAttribute(&b->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, b->dev.dev));
  rt_cubin cubin = {0};
  if ((rc = rt_compile(FILL_SOURCE, "bench_fill", b->dev.arch, &cubin, NULL, err))) return rc;
  CUresult r = cu->cuModuleLoadData(&b->fill_mod, cubin.data);
  rt_cubin_free(&cubin);
  if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuModuleLoadData", r);
  RT_CU_CHECK(cu, cuModuleGetFunction(&b->fill_fn, b->fill_mod, "bench_fill"));
cleanup:
  return rc;
}

static void close_bench(bench *b) {
  if (b->lt) tn_cublaslt_close(b->lt);
  if (b->cb) tn_cublas_close(b->cb);
  if (b->cu && b->dev.ctx) {
    b->cu->cuCtxSetCurrent(b->dev.ctx);
    for (int i = 0; i <= MAX_RUNS; i++)
      if (b->ev[i]) b->cu->cuEventDestroy(b->ev[i]);
    if (b->stream) b->cu->cuStreamDestroy(b->stream);
    if (b->fill_mod) b->cu->cuModuleUnload(b->fill_mod);
  }
  tn_gpu_close(b->g);
  rt_device_close(&b->dev);
  mmt_close(b->ctx);
  if (b->csv) fclose(b->csv);
}

/* ---- one case ---- */

static int by_value(const void *x, const void *y) {
  const double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

void mb_sort(double *v, int n) { qsort(v, (size_t)n, sizeof *v, by_value); }

double mb_median(double *v, int n) {
  mb_sort(v, n);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

size_t mb_padded(int64_t elems) { return (size_t)(elems + 127) / 128 * 128; }

/* The median of `runs` timed launches, each on the next copy, after warm-up. */
mmt_status mb_time_ms(bench *b, launch_fn fn, void *user, int copies, double *ms, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = b->cu;
  const int runs = b->o->runs, timed = b->o->cold && copies > 1 ? copies - 1 : copies;
  double t[MAX_RUNS];
  /* warm-up: module loads and plans outside the figures, clocks up from idle */
  for (uint64_t t0 = bench_now_ns(); bench_now_ns() - t0 < 100000000ull;) {
    for (int i = 0; i < 4 && !rc; i++) rc = fn(b, user, copies - 1, err);
    if (rc) return rc;
    RT_CU_CHECK(cu, cuStreamSynchronize(b->stream));
  }
  if ((rc = fn(b, user, copies - 1, err))) return rc; /* keeps the device busy */
  RT_CU_CHECK(cu, cuEventRecord(b->ev[0], b->stream));
  for (int i = 0; i < runs; i++) {
    if ((rc = fn(b, user, i % timed, err))) return rc;
    RT_CU_CHECK(cu, cuEventRecord(b->ev[i + 1], b->stream));
  }
  RT_CU_CHECK(cu, cuEventSynchronize(b->ev[runs]));
  for (int i = 0; i < runs; i++) {
    float e = 0;
    RT_CU_CHECK(cu, cuEventElapsedTime(&e, b->ev[i], b->ev[i + 1]));
    t[i] = e;
  }
  *ms = mb_median(t, runs);
cleanup:
  return rc;
}

mmt_status mb_time_pair(bench *b, launch_fn fn_mm, launch_fn fn_peer, void *user, int copies,
                        double *mm_ms, double *peer_ms, ut_err *err) {
  mmt_status rc;
  if ((rc = mb_time_ms(b, fn_mm, user, copies, mm_ms, err)) ||
      (rc = mb_time_ms(b, fn_peer, user, copies, peer_ms, err)))
    return rc;
  if (*mm_ms <= MB_RETIME_RATIO * *peer_ms && *peer_ms <= MB_RETIME_RATIO * *mm_ms) return MMT_OK;
  double again[2];
  if ((rc = mb_time_ms(b, fn_mm, user, copies, &again[0], err)) ||
      (rc = mb_time_ms(b, fn_peer, user, copies, &again[1], err)))
    return rc;
  *mm_ms = fmin(*mm_ms, again[0]);
  *peer_ms = fmin(*peer_ms, again[1]);
  return MMT_OK;
}

/* Copies of a set: 3x the L2 (warm), or cold enough, within MAX_COPIES and the memory cap. */
int mb_copies_for(const bench *b, size_t set_bytes) {
  size_t want = b->o->cold ? (2 * (size_t)b->l2_bytes + set_bytes - 1) / set_bytes + 2
                           : (3 * (size_t)b->l2_bytes + set_bytes - 1) / set_bytes;
  if (want < 1) want = 1;
  if (want > MAX_COPIES) want = MAX_COPIES;
  while (want > 1 && want * set_bytes > OPERANDS_MAX_BYTES) want--;
  return (int)want;
}

/* The relative Frobenius difference of two device matrices of `n` elements of type t. */
mmt_status mb_compare(bench *b, CUdeviceptr x, CUdeviceptr y, size_t n, mmt_dtype t, double *rel,
                      ut_err *err) {
  mmt_status rc = MMT_OK;
  const size_t bytes = n * (size_t)mb_size_of(t);
  unsigned char *hx = malloc(bytes), *hy = malloc(bytes);
  if (!hx || !hy) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of host memory (%zu bytes)", 2 * bytes);
    goto cleanup;
  }
  RT_CU_CHECK(b->cu, cuStreamSynchronize(b->stream));
  RT_CU_CHECK(b->cu, cuMemcpyDtoH(hx, x, bytes));
  RT_CU_CHECK(b->cu, cuMemcpyDtoH(hy, y, bytes));
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < n; i++) {
    double u, v;
    if (t == MMT_F32) {
      u = ((float *)hx)[i], v = ((float *)hy)[i];
    } else if (t == MMT_F16) {
      u = th_f16_to_f32(((uint16_t *)hx)[i]), v = th_f16_to_f32(((uint16_t *)hy)[i]);
    } else {
      u = th_bf16_to_f32(((uint16_t *)hx)[i]), v = th_bf16_to_f32(((uint16_t *)hy)[i]);
    }
    d2 += (u - v) * (u - v);
    r2 += v * v;
  }
  *rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
  if (isnan(*rel)) *rel = INFINITY;
cleanup:
  free(hx);
  free(hy);
  return rc;
}

void mb_report(bench *b, tally *tl, const char *family, const char *what, double mm_ms,
               double peer_ms, double rel, double tol, const char *kernel) {
  const bool ok = rel <= tol;
  const double ratio = peer_ms / mm_ms;
  printf("%-9s %-34s %10.4f %10.4f %6.3fx  %s%s\n", family, what, mm_ms, peer_ms, ratio, kernel,
         ok ? "" : "  MISMATCH (left out)");
  if (b->csv) { /* the kernel's parameters hold commas: RFC 4180 quotes them */
    char num[4][32];
    snprintf(num[0], sizeof num[0], "%.6f", mm_ms);
    snprintf(num[1], sizeof num[1], "%.6f", peer_ms);
    snprintf(num[2], sizeof num[2], "%.4f", ratio);
    snprintf(num[3], sizeof num[3], "%.3g", rel);
    const char *const fields[] = {
        family, b->o->dtype, what, num[0], num[1], num[2], num[3], ok ? "ok" : "mismatch", kernel};
    tn_csv_row(b->csv, fields, 9);
  }
  if (!ok) {
    tl->mismatched++;
    return;
  }
  tl->log_sum += log(ratio);
  tl->min = tl->count ? fmin(tl->min, ratio) : ratio;
  tl->count++;
}

void mb_kernel_of(bench *b, const mmt_matmul_desc *d, char *out, size_t len) {
  mmt_choice c;
  if (mmt_explain_matmul(b->ctx, d, &c) != MMT_OK) {
    snprintf(out, len, "?");
    return;
  }
  snprintf(out, len, "%s %s %s", mmt_choice_kind_name(c.kind), c.template_name, c.params);
}

/* ---- the Linear families: linear, residual, f32out ---- */

void mb_count_log(void *user, mmt_log_level level, const char *line) {
  mb_log_counts *l = user;
  int n = 0;
  (void)level;
  if (strstr(line, "(compiled by NVRTC)")) l->nvrtc++;
  if (strstr(line, "(cubin from the cache)")) l->cached++;
  if (strstr(line, "(compiled ahead)")) l->ahead++;
  if (sscanf(line, "online: new results; %d problems choose again", &n) == 1) l->rechosen += n;
  if (!strncmp(line, "online tuning stops", 19))
    snprintf(l->stopped, sizeof l->stopped, "%s", line);
}

mmt_status mb_temp_dir(char dir[64], const char *what, ut_err *err) {
  snprintf(dir, 64, "/tmp/mmt_bench_XXXXXX");
  return mkdtemp(dir) ? MMT_OK : ut_fail(err, MMT_ERR_IO, "cannot make %s in /tmp", what);
}

void mb_remove_dir(const char *dir) {
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* x (M x K) W^T (W: N x K), row-major, one problem: the plain descriptor of a Linear layer. */
mmt_matmul_desc mb_linear_desc(int64_t m, int64_t n, int64_t k, mmt_dtype in, mmt_dtype out) {
  return (mmt_matmul_desc){.order = MMT_ROW_MAJOR,
                           .trans_b = MMT_TRANS,
                           .m = m,
                           .n = n,
                           .k = k,
                           .in_type = in,
                           .out_type = out,
                           .alpha = 1,
                           .lda = k,
                           .ldb = k,
                           .ldd = n,
                           .batch = 1};
}

typedef struct {
  mmt_matmul_desc d;
  tn_lt_plan *plan;
  CUdeviceptr a, b, c, d_mm, d_lt, bias;
  size_t set_bytes;
  size_t a_bytes, b_bytes, c_bytes, d_bytes;
} linear_case;

static mmt_status run_mm(bench *b, void *user, int copy, ut_err *err) {
  linear_case *lc = user;
  mmt_matmul_desc d = lc->d;
  const size_t off = (size_t)copy * lc->set_bytes;
  d.a = (const void *)(uintptr_t)(lc->a + off);
  d.b = (const void *)(uintptr_t)(lc->b + off);
  if (d.c) d.c = (const void *)(uintptr_t)(lc->c + off);
  d.d = (void *)(uintptr_t)(lc->d_mm + off);
  mmt_status rc = mmt_matmul(b->ctx, &d, b->stream);
  return rc ? ut_fail(err, rc, "mmt_matmul: %s", mmt_errmsg(b->ctx)) : MMT_OK;
}

static mmt_status run_lt(bench *b, void *user, int copy, ut_err *err) {
  linear_case *lc = user;
  const size_t off = (size_t)copy * lc->set_bytes;
  return tn_cublaslt_run(b->lt, lc->plan, b->stream, lc->a + off, lc->b + off,
                         lc->d.c ? lc->c + off : 0, lc->d_lt + off, lc->bias, err);
}

/* One Linear case: x (M x K) W^T (W: N x K) in the family's form. */
static mmt_status linear_one(bench *b, int family, int64_t m, int64_t n, int64_t k,
                             const char *name, tally *tl, ut_err *err) {
  mmt_status rc = MMT_OK;
  const mmt_dtype in = b->o->type, out = family == F_F32OUT ? MMT_F32 : in;
  linear_case lc = {0};
  lc.d = mb_linear_desc(m, n, k, in, out);
  tn_lt_problem lp = {.layout = "nt",
                      .m = m,
                      .n = n,
                      .k = k,
                      .lda = k,
                      .ldb = k,
                      .ldc = n,
                      .ldd = n,
                      .batch = 1,
                      .alpha = 1};
  snprintf(lp.in_dtype, sizeof lp.in_dtype, "%s", b->o->dtype);
  snprintf(lp.out_dtype, sizeof lp.out_dtype, "%s", out == MMT_F32 ? "f32" : b->o->dtype);
  if (family == F_LINEAR) {
    lc.d.bias_mode = lp.bias_mode = MMT_BIAS_COL;
    lc.d.bias_type = out; /* cuBLASLt's bias is D's type */
    lc.d.act = lp.act = MMT_ACT_GELU_TANH;
  }
  if (family == F_RESIDUAL) {
    lc.d.beta = lp.beta = 1;
    lc.d.ldc = n;
    lc.d.c = (const void *)(uintptr_t)1; /* set per copy */
  }
  const size_t ie = (size_t)mb_size_of(in), oe = (size_t)mb_size_of(out);
  lc.a_bytes = (size_t)(m * k) * ie, lc.b_bytes = (size_t)(n * k) * ie;
  lc.c_bytes = family == F_RESIDUAL ? (size_t)(m * n) * oe : 0;
  lc.d_bytes = (size_t)(m * n) * oe;
  /* one set: A, B, C, D (mmtune's), D (the peer's), each 256-byte aligned */
  const size_t al = 256, sa = (lc.a_bytes + al - 1) / al * al, sb = (lc.b_bytes + al - 1) / al * al;
  const size_t sc = (lc.c_bytes + al - 1) / al * al, sd = (lc.d_bytes + al - 1) / al * al;
  lc.set_bytes = sa + sb + sc + 2 * sd;
  const int copies = mb_copies_for(b, lc.set_bytes);
  CUdeviceptr base = 0, bias = 0;
  char what[96], kernel[400] = "";
  snprintf(what, sizeof what, "%lldx%lldx%lld %s", (long long)m, (long long)n, (long long)k, name);
  RT_CU_CHECK(b->cu, cuMemAlloc(&base, lc.set_bytes * (size_t)copies));
  RT_CU_CHECK(b->cu, cuMemAlloc(&bias, (size_t)n * oe + 256));
  lc.a = base, lc.b = base + sa, lc.c = base + sa + sb, lc.d_mm = lc.c + sc, lc.d_lt = lc.d_mm + sd;
  if (family == F_LINEAR) /* the other families' plans have no bias: cuBLASLt gets none */
    lc.bias = bias, lc.d.bias = (const void *)(uintptr_t)bias;
  for (int i = 0; i < copies && !rc; i++) {
    const size_t off = (size_t)i * lc.set_bytes;
    if (!(rc = mb_fill(b, lc.a + off, lc.a_bytes / ie, in, err)) &&
        !(rc = mb_fill(b, lc.b + off, lc.b_bytes / ie, in, err)) && lc.c_bytes)
      rc = mb_fill(b, lc.c + off, lc.c_bytes / oe, out, err);
  }
  if (!rc) rc = mb_fill(b, bias, (size_t)n, out, err);
  if (!rc) rc = tn_cublaslt_plan(b->lt, &lp, &lc.plan, err);
  if (rc == MMT_ERR_UNSUPPORTED) { /* no cuBLASLt algorithm: nothing to compare with */
    printf("%-9s %-34s cuBLASLt has no algorithm: %s\n", k_family[family], what, err->msg);
    tl->failed++;
    rc = MMT_OK;
    goto cleanup;
  }
  double rel = INFINITY, mm_ms = 0, lt_ms = 0, rel_tol, max_tol;
  if (!rc) rc = run_mm(b, &lc, 0, err);
  if (!rc) rc = run_lt(b, &lc, 0, err);
  if (!rc) rc = mb_compare(b, lc.d_mm, lc.d_lt, lc.d_bytes / oe, out, &rel, err);
  if (!rc) rc = mb_time_pair(b, run_mm, run_lt, &lc, copies, &mm_ms, &lt_ms, err);
  if (rc) goto cleanup;
  mb_kernel_of(b, &lc.d, kernel, sizeof kernel);
  tn_tolerance(out == MMT_F32 ? "f32" : b->o->dtype, &rel_tol, &max_tol);
  if (in != out && out == MMT_F32) rel_tol = 1e-3; /* two libraries' fp32 sums of 16-bit products */
  mb_report(b, tl, k_family[family], what, mm_ms, lt_ms, rel, rel_tol, kernel);
cleanup:
  tn_lt_plan_free(lc.plan);
  if (base) b->cu->cuMemFree(base);
  if (bias) b->cu->cuMemFree(bias);
  return rc;
}

/* ---- swiglu ---- */

typedef struct {
  mmt_matmul_desc d;
  CUdeviceptr a, w, h_mm, tmp, h_peer;
  size_t set_bytes;
  int64_t m, n2, k;
} swiglu_case;

static mmt_status swiglu_mm(bench *b, void *user, int copy, ut_err *err) {
  swiglu_case *sc = user;
  mmt_matmul_desc d = sc->d;
  const size_t off = (size_t)copy * sc->set_bytes;
  d.a = (const void *)(uintptr_t)(sc->a + off);
  d.b = (const void *)(uintptr_t)(sc->w + off);
  d.d = (void *)(uintptr_t)(sc->h_mm + off);
  mmt_status rc = mmt_matmul(b->ctx, &d, b->stream);
  return rc ? ut_fail(err, rc, "mmt_matmul: %s", mmt_errmsg(b->ctx)) : MMT_OK;
}

/* cuBLAS on [W_g; W_u] into tmp (M x 2N: gate, then up), then silu(g) * u. */
static mmt_status swiglu_peer(bench *b, void *user, int copy, ut_err *err) {
  swiglu_case *sc = user;
  const size_t off = (size_t)copy * sc->set_bytes;
  mmt_status rc =
      tn_cublas_gemm(b->cb, b->stream, b->o->dtype, "nt", sc->m, sc->n2, sc->k, 1.0f, sc->a + off,
                     sc->k, sc->w + off, sc->k, 0.0f, sc->tmp + off, sc->n2, err);
  if (!rc)
    rc = tn_gpu_swiglu(b->g, b->stream, b->o->dtype, sc->m, sc->n2 / 2, sc->tmp + off, sc->n2,
                       sc->h_peer + off, sc->n2 / 2, err);
  return rc;
}

static mmt_status swiglu_one(bench *b, int64_t m, int64_t n2, int64_t k, const char *name,
                             tally *tl, ut_err *err) {
  mmt_status rc = MMT_OK;
  const mmt_dtype t = b->o->type;
  const size_t e = 2, al = 256;
  swiglu_case sc = {.m = m, .n2 = n2, .k = k};
  sc.d = mb_linear_desc(m, n2 / 2, k, t, t);
  sc.d.act = MMT_ACT_SILU, sc.d.gated = 1;
  const size_t sa = ((size_t)(m * k) * e + al - 1) / al * al;
  const size_t sw = ((size_t)(n2 * k) * e + al - 1) / al * al;
  const size_t sh = ((size_t)(m * n2 / 2) * e + al - 1) / al * al;
  const size_t st = ((size_t)(m * n2) * e + al - 1) / al * al;
  sc.set_bytes = sa + sw + 2 * sh + st;
  const int copies = mb_copies_for(b, sc.set_bytes);
  CUdeviceptr base = 0;
  char what[96], kernel[400];
  snprintf(what, sizeof what, "%lldx%lldx%lld %s", (long long)m, (long long)n2, (long long)k, name);
  RT_CU_CHECK(b->cu, cuMemAlloc(&base, sc.set_bytes * (size_t)copies));
  sc.a = base, sc.w = base + sa, sc.h_mm = sc.w + sw, sc.h_peer = sc.h_mm + sh;
  sc.tmp = sc.h_peer + sh;
  for (int i = 0; i < copies && !rc; i++) {
    const size_t off = (size_t)i * sc.set_bytes;
    if (!(rc = mb_fill(b, sc.a + off, (size_t)(m * k), t, err)))
      rc = mb_fill(b, sc.w + off, (size_t)(n2 * k), t, err);
  }
  double mm_ms = 0, peer_ms = 0;
  if (!rc) rc = swiglu_mm(b, &sc, 0, err);
  if (!rc) rc = mb_time_pair(b, swiglu_mm, swiglu_peer, &sc, copies, &mm_ms, &peer_ms, err);
  if (rc) goto cleanup;
  /* the same random weight read two ways: the outputs differ by arrangement, not compared */
  mb_kernel_of(b, &sc.d, kernel, sizeof kernel);
  mb_report(b, tl, "swiglu", what, mm_ms, peer_ms, 0, 1, kernel);
cleanup:
  if (base) b->cu->cuMemFree(base);
  return rc;
}

/* ---- attention ---- */

typedef struct {
  mmt_matmul_desc d;
  const char *layout;
  CUdeviceptr a, bm, d_mm, d_peer;
  size_t set_bytes;
} attn_case;

static mmt_status attn_mm(bench *b, void *user, int copy, ut_err *err) {
  attn_case *ac = user;
  mmt_matmul_desc d = ac->d;
  const size_t off = (size_t)copy * ac->set_bytes;
  d.a = (const void *)(uintptr_t)(ac->a + off);
  d.b = (const void *)(uintptr_t)(ac->bm + off);
  d.d = (void *)(uintptr_t)(ac->d_mm + off);
  mmt_status rc = mmt_matmul(b->ctx, &d, b->stream);
  return rc ? ut_fail(err, rc, "mmt_matmul: %s", mmt_errmsg(b->ctx)) : MMT_OK;
}

static mmt_status attn_peer(bench *b, void *user, int copy, ut_err *err) {
  attn_case *ac = user;
  const mmt_matmul_desc *d = &ac->d;
  const size_t off = (size_t)copy * ac->set_bytes;
  return tn_cublas_gemm_strided_batched(b->cb, b->stream, b->o->dtype, b->o->dtype, ac->layout,
                                        d->m, d->n, d->k, d->alpha, ac->a + off, d->lda,
                                        d->stride_a, ac->bm + off, d->ldb, d->stride_b, 0.0f,
                                        ac->d_peer + off, d->ldd, d->stride_d, d->batch, err);
}

/* One batch of `heads` problems: Q K^T (qk) or P V, sequence s, head dimension hd. */
static mmt_status attn_one(bench *b, bool qk, int64_t heads, int64_t s, int64_t hd, tally *tl,
                           ut_err *err) {
  mmt_status rc = MMT_OK;
  const mmt_dtype t = b->o->type;
  const int64_t m = s, n = qk ? s : hd, k = qk ? hd : s;
  attn_case ac = {.layout = qk ? "nt" : "nn"};
  ac.d = (mmt_matmul_desc){.order = MMT_ROW_MAJOR,
                           .trans_b = qk ? MMT_TRANS : MMT_NO_TRANS,
                           .m = m,
                           .n = n,
                           .k = k,
                           .in_type = t,
                           .out_type = t,
                           .alpha = qk ? 1.0f / sqrtf((float)hd) : 1.0f,
                           .lda = k,
                           .ldb = qk ? k : n,
                           .ldd = n,
                           .batch = heads,
                           .stride_a = m * k,
                           .stride_b = n * k,
                           .stride_d = m * n};
  const size_t e = 2, al = 256;
  const size_t sa = ((size_t)(heads * m * k) * e + al - 1) / al * al;
  const size_t sb = ((size_t)(heads * n * k) * e + al - 1) / al * al;
  const size_t sd = ((size_t)(heads * m * n) * e + al - 1) / al * al;
  ac.set_bytes = sa + sb + 2 * sd;
  if (ac.set_bytes > OPERANDS_MAX_BYTES) return MMT_OK; /* left out: see the top */
  const int copies = mb_copies_for(b, ac.set_bytes);
  CUdeviceptr base = 0;
  char what[96], kernel[400];
  snprintf(what, sizeof what, "%s x%lld seq %lld d %lld", qk ? "QK^T" : "PV", (long long)heads,
           (long long)s, (long long)hd);
  RT_CU_CHECK(b->cu, cuMemAlloc(&base, ac.set_bytes * (size_t)copies));
  ac.a = base, ac.bm = base + sa, ac.d_mm = ac.bm + sb, ac.d_peer = ac.d_mm + sd;
  for (int i = 0; i < copies && !rc; i++) {
    const size_t off = (size_t)i * ac.set_bytes;
    if (!(rc = mb_fill(b, ac.a + off, (size_t)(heads * m * k), t, err)))
      rc = mb_fill(b, ac.bm + off, (size_t)(heads * n * k), t, err);
  }
  double rel = INFINITY, mm_ms = 0, peer_ms = 0, rel_tol, max_tol;
  if (!rc) rc = attn_mm(b, &ac, 0, err);
  if (!rc) rc = attn_peer(b, &ac, 0, err);
  if (!rc) rc = mb_compare(b, ac.d_mm, ac.d_peer, (size_t)(heads * m * n), t, &rel, err);
  if (!rc) rc = mb_time_pair(b, attn_mm, attn_peer, &ac, copies, &mm_ms, &peer_ms, err);
  if (rc) goto cleanup;
  mb_kernel_of(b, &ac.d, kernel, sizeof kernel);
  tn_tolerance(b->o->dtype, &rel_tol, &max_tol);
  mb_report(b, tl, "attention", what, mm_ms, peer_ms, rel, rel_tol, kernel);
cleanup:
  if (base) b->cu->cuMemFree(base);
  return rc;
}

/* ---- host ---- */

/* Nanoseconds of host time a warm call on ctx costs: HOST_CALLS calls, synchronized every
 * 100. */
static mmt_status host_ns(bench *b, mmt_context *ctx, const mmt_matmul_desc *d, bool gemm,
                          double *ns, ut_err *err) {
  mmt_status rc = MMT_OK;
  uint64_t spent = 0;
  for (int i = 0; i < HOST_CALLS / 100 + 1 && !rc; i++) {
    const uint64_t t0 = bench_now_ns();
    for (int j = 0; j < 100 && !rc; j++)
      rc = gemm ? mmt_gemm(ctx, MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_TRANS, d->m, d->n, d->k, 1, d->a,
                           d->lda, d->b, d->ldb, 0, d->d, d->ldd, d->in_type, b->stream)
                : mmt_matmul(ctx, d, b->stream);
    if (i > 0) spent += bench_now_ns() - t0; /* the first hundred warm up */
    if (!rc) RT_CU_CHECK(b->cu, cuStreamSynchronize(b->stream));
  }
  if (rc && !err->msg[0]) ut_fail(err, rc, "%s", mmt_errmsg(ctx));
  *ns = (double)spent / (HOST_CALLS / 100 * 100);
cleanup:
  return rc;
}

/* What recording (mmt_options.record) costs a warm call: the op call d on two contexts of
 * one fresh database in a folder of its own, one recording, in turn HOST_ROUNDS times. */
static mmt_status host_recording(bench *b, const mmt_matmul_desc *d, ut_err *err) {
  char dir[64], db[96];
  mmt_status rc = mb_temp_dir(dir, "a database folder", err);
  if (rc) return rc;
  snprintf(db, sizeof db, "%s/record.db", dir);
  mmt_context *ctx[2] = {NULL, NULL};
  for (int i = 0; i < 2 && !rc; i++) {
    const mmt_options opts = {.db_path = db, .cache_dir = dir, .record = i};
    if ((rc = mmt_open(&ctx[i], b->o->device, &opts)))
      ut_fail(err, rc, "mmt_open: %s: %s", mmt_status_name(rc), mmt_errmsg(ctx[i]));
  }
  double ns[2][HOST_ROUNDS];
  for (int r = 0; r < HOST_ROUNDS && !rc; r++)
    for (int i = 0; i < 2 && !rc; i++) rc = host_ns(b, ctx[i], d, false, &ns[i][r], err);
  if (!rc) {
    const double off = mb_median(ns[0], HOST_ROUNDS), on = mb_median(ns[1], HOST_ROUNDS);
    printf("host      the same op call on a fresh database: %.0f ns, recording %.0f ns (%+.0f "
           "ns)\n",
           off, on, on - off);
  }
  for (int i = 0; i < 2; i++) mmt_close(ctx[i]);
  mb_remove_dir(dir);
  return rc;
}

static mmt_status host_family(bench *b, ut_err *err) {
  mmt_status rc = MMT_OK;
  const int64_t n = 256;
  CUdeviceptr base = 0;
  RT_CU_CHECK(b->cu, cuMemAlloc(&base, (size_t)(4 * n * n) * 2 + 1024));
  mmt_matmul_desc d = mb_linear_desc(n, n, n, b->o->type, b->o->type);
  d.a = (const void *)(uintptr_t)base;
  d.b = (const void *)(uintptr_t)(base + (size_t)(n * n) * 2);
  d.d = (void *)(uintptr_t)(base + (size_t)(2 * n * n) * 2);
  /* the three in turn, HOST_ROUNDS times: each figure the median of its rounds, so that a
   * slow stretch of the host (or of the GPU behind the calls) lands on all three alike */
  double gs[HOST_ROUNDS], ps[HOST_ROUNDS], os[HOST_ROUNDS];
  mmt_matmul_desc op = d;
  op.bias_mode = MMT_BIAS_COL;
  op.bias = (const void *)(uintptr_t)(base + (size_t)(3 * n * n) * 2);
  rc = mb_fill(b, base, (size_t)(2 * n * n), b->o->type, err);
  for (int r = 0; r < HOST_ROUNDS && !rc; r++)
    if (!(rc = host_ns(b, b->ctx, &d, true, &gs[r], err)) &&
        !(rc = host_ns(b, b->ctx, &d, false, &ps[r], err)))
      rc = host_ns(b, b->ctx, &op, false, &os[r], err);
  const double g = rc ? 0 : mb_median(gs, HOST_ROUNDS), p = rc ? 0 : mb_median(ps, HOST_ROUNDS),
               o = rc ? 0 : mb_median(os, HOST_ROUNDS);
  if (!rc)
    printf("host      %lldx%lldx%lld %s: mmt_gemm %.0f ns a call, mmt_matmul %.0f ns (plain), "
           "%.0f ns (bias: an op kernel); over mmt_gemm: %+.0f ns, %+.0f ns\n",
           (long long)n, (long long)n, (long long)n, b->o->dtype, g, p, o, p - g, o - g);
  if (!rc) rc = host_recording(b, &op, err);
cleanup:
  if (base) b->cu->cuMemFree(base);
  return rc;
}

/* ---- the run ---- */

typedef struct {
  int64_t n, k;
  char name[48];
} weight;

/* The weights of FILE ("N K name" a line, '#' comments). */
static int read_weights(const char *path, weight *w, int cap, int *count) {
  FILE *f = fopen(path, "r");
  if (!f) return bench_usage_error("--weights: cannot open '%s'", path);
  char line[256];
  *count = 0;
  while (fgets(line, sizeof line, f) && *count < cap) {
    long long n, k;
    char name[48] = "";
    if (line[0] == '#' || sscanf(line, "%lld %lld %47s", &n, &k, name) < 2) continue;
    w[*count] = (weight){n, k, ""};
    snprintf(w[*count].name, sizeof w[*count].name, "%s", name);
    (*count)++;
  }
  fclose(f);
  return *count ? 0 : bench_usage_error("--weights: no weight in '%s'", path);
}

static void summary(const char *family, const tally *tl) {
  if (!tl->count && !tl->mismatched && !tl->failed) return;
  printf("%-9s geomean %.3fx, min %.3fx over %d case%s", family,
         tl->count ? exp(tl->log_sum / tl->count) : 0.0, tl->count ? tl->min : 0.0, tl->count,
         tl->count == 1 ? "" : "s");
  if (tl->mismatched) printf(", %d MISMATCHED", tl->mismatched);
  if (tl->failed) printf(", %d without a peer", tl->failed);
  printf("\n");
}

static mmt_status run(bench *b, const weight *w, int nw, ut_err *err) {
  const bench_opts *o = b->o;
  tally tl[FAMILIES] = {{0}};
  mmt_status rc = MMT_OK;
  printf("%-9s %-34s %10s %10s %7s  %s\n", "family", "case", "mmtune ms", "peer ms", "ratio",
         "mmtune's kernel");
  for (int f = F_LINEAR; f <= F_F32OUT && !rc; f++) {
    if (!o->family[f]) continue;
    for (int i = 0; i < nw && !rc; i++) {
      const bool gate_up = strstr(w[i].name, "gate_up") != NULL;
      if (gate_up != (f == F_SWIGLU)) continue;
      for (int j = 0; j < o->nbatches && !rc; j++)
        rc = f == F_SWIGLU
                 ? swiglu_one(b, o->batches[j], w[i].n, w[i].k, w[i].name, &tl[f], err)
                 : linear_one(b, f, o->batches[j], w[i].n, w[i].k, w[i].name, &tl[f], err);
    }
  }
  static const int64_t heads[3] = {32, 128, 512}, seqs[4] = {128, 512, 1024, 4096},
                       dims[2] = {64, 128};
  for (int h = 0; h < 3 && o->family[F_ATTENTION] && !rc; h++)
    for (int s = 0; s < 4 && !rc; s++)
      for (int d = 0; d < 2 && !rc; d++)
        for (int qk = 1; qk >= 0 && !rc; qk--)
          rc = attn_one(b, qk, heads[h], seqs[s], dims[d], &tl[F_ATTENTION], err);
  if (!rc && o->family[F_HOST]) rc = host_family(b, err);
  for (int i = 0; i < nw && o->family[F_QUANTIZE] && !rc; i++) {
    for (int mode = MMT_QUANT_TENSOR; mode <= MMT_QUANT_128X128 && !rc; mode++)
      rc = mb_quantize_one(b, w[i].n, w[i].k, (mmt_quant_mode)mode, false, w[i].name,
                           &tl[F_QUANTIZE], err);
    if (!rc) /* per tensor with a given scale */
      rc = mb_quantize_one(b, w[i].n, w[i].k, MMT_QUANT_TENSOR, true, w[i].name, &tl[F_QUANTIZE],
                           err);
  }
  tally grouped[2] = {{0}}, masked[3] = {{0}};
  grouped_tallies gc = {{&tl[F_GROUPED], &grouped[0], &grouped[1]},
                        {"grouped", "grp-loop", "grp-read"}},
                  gm = {{&masked[0], &masked[1], &masked[2]}, {"masked", "msk-loop", "msk-read"}};
  if (!rc && o->family[F_GROUPED]) rc = mb_grouped_family(b, &gc, &gm, err);
  if (!rc && o->family[F_COLDSTART]) {
    int64_t shapes[64][2];
    for (int i = 0; i < nw; i++) shapes[i][0] = w[i].n, shapes[i][1] = w[i].k;
    rc = mb_coldstart_family(b, shapes, nw, err);
  }
  if (!rc && o->family[F_ONLINE]) rc = mb_online_family(b, err);
  printf("\n");
  for (int f = 0; f < FAMILIES; f++) summary(k_family[f], &tl[f]);
  for (int i = 1; i < 3; i++) summary(gc.name[i], gc.vs[i]);
  for (int i = 0; i < 3; i++) summary(gm.name[i], gm.vs[i]);
  return rc;
}

int main(int argc, char **argv) {
  bench_prog = PROG;
  bench_opts o;
  int ex = parse_args(argc, argv, &o);
  if (ex >= 0) return ex;
  static weight w[64];
  int nw = 0;
  if ((ex = read_weights(o.weights, w, 64, &nw))) return ex;
  bench b;
  ut_err err = {{0}};
  mmt_status rc = open_bench(&b, &o, &err);
  if (!rc && o.csv && !(b.csv = fopen(o.csv, "w")))
    rc = ut_fail(&err, MMT_ERR_IO, "cannot write '%s'", o.csv);
  if (b.csv) fprintf(b.csv, "family,dtype,case,mmtune_ms,peer_ms,ratio,rel_diff,check,kernel\n");
  if (!rc) {
    printf("%s, %s, %s%s\n", b.dev.info.name, o.dtype, o.cold ? "cold" : "warm",
           o.db ? "" : " (the default database)");
    rc = run(&b, w, nw, &err);
  }
  close_bench(&b);
  if (rc) {
    fprintf(stderr, PROG ": %s\n", err.msg);
    return 1;
  }
  return 0;
}
