/*
 * tn_bench.c -- `mmtune bench M N K`: the table the classic matmul samples print, for one
 * shape: CPU serial, CPU multithreaded, the naive and shared-memory GPU kernels (their
 * default configs: the samples' kernels), and the tuned best from the database.  Every row is
 * verified against the float64 reference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_choose.h"
#include "tn_cli.h"
#include "tn_measure.h"
#include "tn_opts.h"
#include "tn_ref.h"

static const tn_opt BENCH_OPTS[] = {
    {"device", 'd', "N", "CUDA device ordinal (default 0)"},
    {"db", 0, "PATH", "results database for the tuned row (default as for tune)"},
    {"cache-dir", 0, "DIR", "cubin cache (default ~/.cache/mmtune/cubin)"},
    {"threads", 0, "N", "threads of the multithreaded CPU row (default: CPU count)"},
    {"cpu-max-gflop", 0, "G", "serial CPU row: above G GFLOP, time a slice of rows and scale it "
                              "(default 20); CPU rows skipped above 10x G"},
};

static const tn_cmd_spec BENCH_SPEC = {
    "bench", "M N K [--device N] [--db PATH] [options]",
    "Times C = A*B (fp32, row-major, M x K times K x N) on the CPU and the GPU, verifies every\n"
    "result against a float64 reference, and prints one row per implementation.",
    BENCH_OPTS, (int)(sizeof BENCH_OPTS / sizeof BENCH_OPTS[0])};

typedef struct {
  tn_shape s;
  int device, threads;
  double cpu_max_gflop;
  char db_path[4096], cache_dir[4096];
  double serial_ms; /* 0: the serial row was skipped */
} bench_run;

static void print_header(void) {
  printf("%-22s %-30s %11s %9s %9s %-8s %9s\n", "implementation", "config", "ms", "TFLOP/s",
         "speed-up", "verified", "rel err");
}

static void print_row(const bench_run *b, const char *what, const char *cfg, double ms, bool ok,
                      double rel_err) {
  double flop = 2.0 * (double)b->s.m * (double)b->s.n * (double)b->s.k;
  char speedup[32] = "-";
  if (b->serial_ms > 0 && ms > 0) snprintf(speedup, sizeof speedup, "%.1fx", b->serial_ms / ms);
  printf("%-22s %-30s %11.4f %9.3f %9s %-8s %9.1e\n", what, cfg, ms, flop / (ms * 1e-3) / 1e12,
         speedup, ok ? "yes" : "NO", rel_err);
}

static void print_skip(const char *what, const char *why) { printf("%-22s %s\n", what, why); }

/* Times C = A*B on the CPU over the first `rows` rows of A (all of them, or a slice whose
 * time scales linearly to the whole: each row costs the same), checks those rows against the
 * reference, and prints the row; returns the time scaled to all M rows. */
static mmt_status cpu_row(bench_run *b, const char *what, int threads, int64_t rows, const float *a,
                          const float *bm, float *c, const double *ref, double *ms_out,
                          ut_err *err) {
  int64_t m = b->s.m, n = b->s.n, k = b->s.k;
  tn_fill_nan(c, (size_t)(rows * n));
  double t0 = ut_now_seconds();
  mmt_status rc = tn_cpu_sgemm(rows, n, k, a, k, bm, n, c, n, threads, err);
  if (rc) return rc;
  double ms = (ut_now_seconds() - t0) * 1e3 * (double)m / (double)rows;
  tn_check chk;
  tn_compare(rows, n, c, n, ref, n, "f32", &chk);
  char cfg[64];
  if (rows == m)
    snprintf(cfg, sizeof cfg, "%d thread%s", threads, threads > 1 ? "s" : "");
  else
    snprintf(cfg, sizeof cfg, "%d thread%s, est. from %lld rows", threads, threads > 1 ? "s" : "",
             (long long)rows);
  *ms_out = ms;
  if (threads == 1) b->serial_ms = ms; /* the speed-up column's base */
  print_row(b, what, cfg, ms, chk.pass, chk.rel_err);
  return MMT_OK;
}

/* The CPU rows: host inputs, a float64 reference, serial and threaded fp32 GEMM.  Above
 * --cpu-max-gflop the serial row times a slice of rows and scales it (marked "est."). */
static int bench_cpu(bench_run *b) {
  int ex = TN_EXIT_FAIL;
  int64_t m = b->s.m, n = b->s.n, k = b->s.k;
  double gflop = 2.0 * (double)m * (double)n * (double)k / 1e9;
  float *a = NULL, *bm = NULL, *c = NULL;
  double *ref = NULL, ms = 0;
  ut_err err;
  if (gflop > 10 * b->cpu_max_gflop) {
    print_skip("CPU serial", "skipped: above 10x --cpu-max-gflop");
    print_skip("CPU multithreaded", "skipped: above 10x --cpu-max-gflop");
    return TN_EXIT_OK;
  }
  a = malloc(sizeof *a * (size_t)(m * k));
  bm = malloc(sizeof *bm * (size_t)(k * n));
  c = malloc(sizeof *c * (size_t)(m * n));
  ref = malloc(sizeof *ref * (size_t)(m * n));
  if (!a || !bm || !c || !ref) {
    fprintf(stderr, "mmtune bench: not enough host memory for the CPU rows\n");
    goto cleanup;
  }
  uint64_t seed = (uint64_t)ut_unix_time();
  tn_fill_random(a, (size_t)(m * k), &seed);
  tn_fill_random(bm, (size_t)(k * n), &seed);
  if (tn_ref_gemm(m, n, k, a, k, bm, n, ref, n, b->threads, &err)) goto fail;
  int64_t serial_rows = gflop <= b->cpu_max_gflop ? m : (int64_t)((double)m * b->cpu_max_gflop / gflop);
  if (serial_rows < 1) serial_rows = 1;
  if (cpu_row(b, "CPU serial", 1, serial_rows, a, bm, c, ref, &ms, &err)) goto fail;
  if (cpu_row(b, "CPU multithreaded", b->threads, m, a, bm, c, ref, &ms, &err)) goto fail;
  ex = TN_EXIT_OK;
  goto cleanup;
fail:
  fprintf(stderr, "mmtune bench: %s\n", err.msg);
cleanup:
  free(a);
  free(bm);
  free(c);
  free(ref);
  return ex;
}

/* Compiles and measures one kernel; prints its row. */
static mmt_status bench_kernel(bench_run *b, tn_gpu *g, const char *what, const char *cfg,
                               const gen_kernel *spec, bool *verified, ut_err *err) {
  rt_cubin cubin = {0};
  mmt_status rc = rt_compile_cached(b->cache_dir, spec->source, spec->kernel_name,
                                    tn_gpu_device(g)->arch, &cubin, NULL, NULL, err);
  if (rc) return rc;
  tn_measure_opts o = {.m = b->s.m, .n = b->s.n, .k = b->s.k, .lda = b->s.k, .ldb = b->s.n,
                       .ldc = b->s.n, .dtype = "f32", .seed = (uint64_t)ut_unix_time(),
                       .budget_ms = 500, .max_runs = 50};
  tn_measurement m;
  rc = tn_gpu_measure(g, &cubin, spec, &o, &m, err);
  rt_cubin_free(&cubin);
  if (rc) return rc;
  *verified = m.status == DB_OK;
  if (m.status == DB_OK)
    print_row(b, what, cfg, m.ms_median, true, m.rel_err);
  else
    printf("%-22s %-30s %s: %s\n", what, cfg, db_status_name(m.status), m.error);
  return MMT_OK;
}

/* A template's default config (the classic samples' kernels). */
static mmt_status bench_default(bench_run *b, tn_gpu *g, const char *name, const char *what,
                                bool *verified, ut_err *err) {
  gen_template *t = NULL;
  gen_kernel spec = {0};
  gen_config cfg;
  char params[256];
  mmt_status rc = gen_load_named(name, &t, err);
  if (rc) return rc;
  gen_config_default(t, &cfg);
  if (!(rc = gen_config_format(t, &cfg, params, sizeof params, err)) &&
      !(rc = gen_emit(t, &cfg, "f32", &spec, err)))
    rc = bench_kernel(b, g, what, params, &spec, verified, err);
  gen_kernel_clear(&spec);
  gen_free(t);
  return rc;
}

/* The database's choice for this shape (exact or nearest tuned record). */
static mmt_status bench_tuned(bench_run *b, tn_gpu *g, bool *verified, ut_err *err) {
  db_handle *db = NULL;
  rt_chooser *ch = NULL;
  rt_choice choice = {0};
  mmt_status rc = db_open(b->db_path, true, &db, err);
  if (rc == MMT_ERR_NOT_FOUND) {
    print_skip("tuned (database)", "no database: run mmtune --device N --shapes MxNxK first");
    return MMT_OK;
  }
  if (rc) return rc;
  gen_problem p = {.dtype = "f32", .layout = "nn", .m = b->s.m, .n = b->s.n, .k = b->s.k,
                   .lda = b->s.k, .ldb = b->s.n, .ldc = b->s.n, .align_bytes = 4};
  if (!(rc = rt_chooser_new(&ch, err)) &&
      !(rc = rt_choose(ch, db, tn_gpu_device(g)->info.name, &p, &choice, err))) {
    if (choice.kind == MMT_CHOICE_DEFAULT) {
      print_skip("tuned (database)", "shape not tuned on this GPU model: run mmtune --shapes MxNxK");
    } else {
      char what[64], cfg[320];
      snprintf(what, sizeof what, "tuned (%s)", mmt_choice_kind_name(choice.kind));
      snprintf(cfg, sizeof cfg, "%s %s", choice.template_name, choice.params);
      rc = bench_kernel(b, g, what, cfg, &choice.spec, verified, err);
    }
  }
  rt_choice_clear(&choice);
  rt_chooser_free(ch);
  db_close(db);
  return rc;
}

static int bench_gpu(bench_run *b) {
  tn_gpu *g = NULL;
  ut_err err = {{0}};
  bool v1 = false, v2 = false, v3 = true;
  mmt_status rc = tn_gpu_open(b->device, b->cache_dir, &g, &err);
  if (rc) {
    fprintf(stderr, "mmtune bench: cannot use device %d: %s\n", b->device, err.msg);
    return TN_EXIT_FAIL;
  }
  if (!(rc = bench_default(b, g, "naive", "GPU naive", &v1, &err)) &&
      !(rc = bench_default(b, g, "smem_tiled", "GPU shared-mem tiled", &v2, &err)))
    rc = bench_tuned(b, g, &v3, &err);
  printf("device: %s (%s, %d SMs)\n", tn_gpu_device(g)->info.name, tn_gpu_device(g)->arch,
         tn_gpu_device(g)->info.sm_count);
  tn_gpu_close(g);
  if (rc) {
    fprintf(stderr, "mmtune bench: %s\n", err.msg);
    return TN_EXIT_FAIL;
  }
  return v1 && v2 && v3 ? TN_EXIT_OK : TN_EXIT_FAIL;
}

static int parse_bench(bench_run *b, const tn_opts *o) {
  int64_t dims[3], x;
  const char *names[3] = {"M", "N", "K"};
  if (o->npos != 3) return tn_usage_error("bench", "expected M N K, got %d argument(s)", o->npos);
  for (int i = 0; i < 3; i++)
    if (tn_opt_i64("bench", o->pos[i], names[i], 1, TN_DIM_MAX, &dims[i])) return TN_EXIT_USAGE;
  b->s = (tn_shape){dims[0], dims[1], dims[2]};
  const char *v;
  if ((v = tn_opts_get(o, "device")) && tn_opt_device("bench", v, &b->device)) return TN_EXIT_USAGE;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  b->threads = cpus > 0 ? (int)cpus : 1;
  if ((v = tn_opts_get(o, "threads"))) {
    if (tn_opt_i64("bench", v, "--threads", 1, 4096, &x)) return TN_EXIT_USAGE;
    b->threads = (int)x;
  }
  b->cpu_max_gflop = 20;
  ut_err err;
  if ((v = tn_opts_get(o, "cpu-max-gflop")) &&
      tn_parse_positive(v, "--cpu-max-gflop", 1e9, &b->cpu_max_gflop, &err))
    return tn_usage_error("bench", "%s", err.msg);
  int ex = tn_opt_db_path("bench", tn_opts_get(o, "db"), b->db_path, sizeof b->db_path);
  if (ex) return ex;
  v = tn_opts_get(o, "cache-dir");
  if (v ? ut_snprintf(b->cache_dir, sizeof b->cache_dir, &err, "%s", v)
        : ut_default_cubin_dir(b->cache_dir, sizeof b->cache_dir, &err))
    return tn_usage_error("bench", "%s", err.msg);
  return TN_EXIT_OK;
}

int tn_cmd_bench(int argc, char **argv) {
  tn_opts o;
  bench_run b;
  memset(&b, 0, sizeof b);
  int ex = tn_opts_parse(&BENCH_SPEC, argc, argv, &o);
  if (!ex && !o.help) ex = parse_bench(&b, &o);
  if (!ex && !o.help) {
    printf("C = A*B, fp32, row-major, M=%lld N=%lld K=%lld (%.1f GFLOP)\n", (long long)b.s.m,
           (long long)b.s.n, (long long)b.s.k, 2.0 * (double)b.s.m * (double)b.s.n * (double)b.s.k / 1e9);
    print_header();
    ex = bench_cpu(&b);
    int gex = bench_gpu(&b);
    if (!ex) ex = gex;
  }
  tn_opts_free(&o);
  return ex;
}
