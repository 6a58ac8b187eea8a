/* test_runtime.c -- runtime/: NVRTC compile and cubin cache (CPU), driver loading without a
 * driver (CPU, in forked children), device, kernel load and launch (GPU; skipped without one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_compile.h"
#include "rt_device.h"
#include "rt_driver.h"
#include "rt_provenance.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static const char k_add_one[] =
    "extern \"C\" __global__ void add_one(float *p, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) p[i] += 1.0f;\n"
    "}\n";

/* Uses dynamic shared memory so a large request is meaningful. */
static const char k_smem[] =
    "extern \"C\" __global__ void smem_copy(float *p, int n) {\n"
    "  extern __shared__ float buf[];\n"
    "  int i = threadIdx.x;\n"
    "  if (i < n) { buf[i] = p[i] * 2.0f; __syncthreads(); p[i] = buf[i]; }\n"
    "}\n";

/* At most 256 threads per block. */
static const char k_bounded[] =
    "extern \"C\" __global__ void __launch_bounds__(256) bounded(float *p) {\n"
    "  p[threadIdx.x] = 0.0f;\n"
    "}\n";

/* The GEMM ABI of gen.h, written by hand: C = alpha*A*B + beta*C, row-major. */
static const char k_gemm[] =
    "extern \"C\" __global__ void gemm_naive(int M, int N, int K, float alpha,\n"
    "    const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {\n"
    "  int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  if (row >= M || col >= N) return;\n"
    "  float acc = 0.0f;\n"
    "  for (int k = 0; k < K; k++) acc += A[row * lda + k] * B[k * ldb + col];\n"
    "  float *c = &C[row * ldc + col];\n"
    "  *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;\n"
    "}\n";

static const char k_syntax_error[] =
    "extern \"C\" __global__ void broken(float *p) {\n"
    "  p[0] = 1.0f +;\n"
    "}\n";

static void assert_elf(const rt_cubin *c) {
  assert_non_null(c->data);
  assert_true(c->size > 64);
  assert_memory_equal(c->data, "\177ELF", 4);
}

static void make_temp_dir(char *dir, size_t len) {
  snprintf(dir, len, "/tmp/mmt_rt_XXXXXX");
  assert_non_null(mkdtemp(dir));
}

static void remove_tree(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Number of *.cubin files in dir; the first one's path into first (may be NULL). */
static int count_cubins(const char *dir, char *first, size_t firstlen) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 6, ".cubin") != 0) continue;
    if (n++ == 0 && first) snprintf(first, firstlen, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  return n;
}

/* Number of entries in dir besides . and .. */
static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

/* ---- NVRTC (CPU) ------------------------------------------------------------------------- */

static void test_nvrtc_version(void **state) {
  (void)state;
  char v[16];
  ut_err e;
  assert_int_equal(rt_nvrtc_version(v, sizeof v, &e), MMT_OK);
  assert_true(strncmp(v, "13.", 3) == 0);
  char tiny[3];
  assert_int_equal(rt_nvrtc_version(tiny, sizeof tiny, &e), MMT_ERR_INVALID_ARG);
}

static void test_compile_archs(void **state) {
  (void)state;
  const char *archs[] = {"sm_90", "sm_80", "sm_90a"};
  for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
    rt_cubin c;
    char *log = NULL;
    ut_err e;
    mmt_status rc = rt_compile(k_add_one, "add_one.cu", archs[i], &c, &log, &e);
    if (rc) print_error("%s: %s\n", archs[i], e.msg);
    assert_int_equal(rc, MMT_OK);
    assert_elf(&c);
    free(log);
    rt_cubin_free(&c);
    assert_null(c.data);
  }
  rt_cubin_free(NULL);
}

static void test_compile_error(void **state) {
  (void)state;
  rt_cubin c;
  char *log = NULL;
  ut_err e;
  assert_int_equal(rt_compile(k_syntax_error, "broken.cu", "sm_90", &c, &log, &e), MMT_ERR_COMPILE);
  assert_non_null(strstr(e.msg, "error"));
  assert_non_null(strstr(e.msg, "broken.cu"));
  assert_non_null(log);
  assert_true(strlen(log) > 0);
  assert_non_null(strstr(log, "error"));
  assert_null(c.data);
  free(log);
  /* log may be NULL */
  assert_int_equal(rt_compile(k_syntax_error, NULL, "sm_90", &c, NULL, &e), MMT_ERR_COMPILE);
  assert_non_null(strstr(e.msg, "error"));
}

static void test_bad_arch(void **state) {
  (void)state;
  const char *bad[] = {"sm_x", "", "compute_90;rm", "sm_9", "sm_90b", "sm_", "sm_1234", "90"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rt_cubin c;
    char *log = (char *)"unset";
    ut_err e;
    assert_int_equal(rt_compile(k_add_one, "x.cu", bad[i], &c, &log, &e), MMT_ERR_INVALID_ARG);
    assert_non_null(strstr(e.msg, "architecture"));
    assert_null(log);
    assert_null(c.data);
    bool hit = true;
    assert_int_equal(rt_compile_cached("/tmp", k_add_one, "x.cu", bad[i], &c, &hit, NULL, &e),
                     MMT_ERR_INVALID_ARG);
    assert_false(hit);
  }
  rt_cubin c;
  ut_err e;
  assert_int_equal(rt_compile(k_add_one, "x.cu", NULL, &c, NULL, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(rt_compile(NULL, "x.cu", "sm_90", &c, NULL, &e), MMT_ERR_INVALID_ARG);
}

/* ---- the cubin cache (CPU) --------------------------------------------------------------- */

static void compile_cached_ok(const char *dir, const char *src, rt_cubin *c, bool *hit) {
  ut_err e;
  mmt_status rc = rt_compile_cached(dir, src, "k.cu", "sm_90", c, hit, NULL, &e);
  if (rc) print_error("%s\n", e.msg);
  assert_int_equal(rc, MMT_OK);
  assert_elf(c);
}

/* Which architecture a kernel is compiled for, and when a device is refused: an sm_90a
 * (wgmma) kernel on anything but sm_90, a plain minimum on an older device. */
static void test_kernel_arch(void **state) {
  (void)state;
  static const struct {
    const char *device, *kernel, *want; /* want NULL: refused as unsupported */
  } cases[] = {
      {"sm_90", NULL, "sm_90"},    {"sm_90", "", "sm_90"},      {"sm_90", "sm_90a", "sm_90a"},
      {"sm_80", "sm_90a", NULL},   {"sm_100", "sm_90a", NULL},  {"sm_89", "sm_90a", NULL},
      {"sm_90", "sm_80", "sm_90"}, {"sm_80", "sm_80", "sm_80"}, {"sm_75", "sm_80", NULL},
      {"sm_100", "sm_100a", "sm_100a"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[16] = "unchanged";
    ut_err e;
    mmt_status rc = rt_kernel_arch(cases[i].device, cases[i].kernel, out, &e);
    if (cases[i].want) {
      assert_int_equal(rc, MMT_OK);
      assert_string_equal(out, cases[i].want);
    } else {
      assert_int_equal(rc, MMT_ERR_UNSUPPORTED);
      assert_non_null(strstr(e.msg, cases[i].kernel));
      assert_non_null(strstr(e.msg, cases[i].device));
    }
  }
  char out[16];
  ut_err e;
  assert_int_equal(rt_kernel_arch("sm_90", "sm90a", out, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(rt_kernel_arch("gpu", NULL, out, &e), MMT_ERR_INVALID_ARG);
}

static void test_cache_hit_miss(void **state) {
  (void)state;
  char dir[64], sub[128], path[512];
  make_temp_dir(dir, sizeof dir);
  snprintf(sub, sizeof sub, "%s/made/by/cache", dir); /* created on first write */
  rt_cubin a, b, c;
  bool hit = true;
  compile_cached_ok(sub, k_add_one, &a, &hit);
  assert_false(hit);
  assert_int_equal(count_cubins(sub, path, sizeof path), 1);
  compile_cached_ok(sub, k_add_one, &b, &hit);
  assert_true(hit);
  assert_int_equal(a.size, b.size);
  assert_memory_equal(a.data, b.data, a.size);
  /* a different source is a different key */
  compile_cached_ok(sub, k_gemm, &c, &hit);
  assert_false(hit);
  assert_int_equal(count_cubins(sub, NULL, 0), 2);
  rt_cubin_free(&c);
  compile_cached_ok(sub, k_gemm, &c, &hit);
  assert_true(hit);
  /* another architecture too */
  rt_cubin d;
  ut_err e;
  assert_int_equal(rt_compile_cached(sub, k_add_one, "k.cu", "sm_80", &d, &hit, NULL, &e), MMT_OK);
  assert_false(hit);
  assert_int_equal(count_cubins(sub, NULL, 0), 3);
  rt_cubin_free(&a);
  rt_cubin_free(&b);
  rt_cubin_free(&c);
  rt_cubin_free(&d);
  /* no cache folder: a plain compile */
  compile_cached_ok(NULL, k_add_one, &a, &hit);
  assert_false(hit);
  rt_cubin_free(&a);
  remove_tree(dir);
}

/* Writes bytes over the cache entry, then expects a miss and a rewritten, valid entry. */
static void corrupt_and_recompile(const char *dir, const char *path, const void *bytes, size_t len,
                                  const rt_cubin *good) {
  ut_err e;
  assert_int_equal(ut_write_file_atomic(path, bytes, len, &e), MMT_OK);
  rt_cubin c;
  bool hit = true;
  compile_cached_ok(dir, k_add_one, &c, &hit);
  assert_false(hit);
  assert_memory_equal(c.data, good->data, good->size);
  rt_cubin_free(&c);
  char *data = NULL;
  size_t size = 0;
  assert_int_equal(ut_read_file(path, &data, &size, &e), MMT_OK);
  assert_int_equal(size, good->size);
  assert_memory_equal(data, good->data, size);
  free(data);
  compile_cached_ok(dir, k_add_one, &c, &hit);
  assert_true(hit);
  rt_cubin_free(&c);
}

static void test_cache_corrupt(void **state) {
  (void)state;
  char dir[64], path[512];
  make_temp_dir(dir, sizeof dir);
  rt_cubin good;
  bool hit;
  compile_cached_ok(dir, k_add_one, &good, &hit);
  assert_int_equal(count_cubins(dir, path, sizeof path), 1);
  corrupt_and_recompile(dir, path, "garbage, not ELF", 16, &good);
  corrupt_and_recompile(dir, path, "", 0, &good);
  /* torn: a valid header but the file ends early */
  corrupt_and_recompile(dir, path, good.data, good.size / 2, &good);
  corrupt_and_recompile(dir, path, good.data, 40, &good);
  assert_int_equal(count_cubins(dir, NULL, 0), 1);
  rt_cubin_free(&good);
  remove_tree(dir);
}

static void test_cache_unwritable(void **state) {
  (void)state;
  char dir[64], file[128], below[160];
  make_temp_dir(dir, sizeof dir);
  snprintf(file, sizeof file, "%s/in_the_way", dir);
  ut_err e;
  assert_int_equal(ut_write_file_atomic(file, "x", 1, &e), MMT_OK);
  snprintf(below, sizeof below, "%s/sub", file);
  const char *dirs[] = {file, below};
  for (int i = 0; i < 2; i++) {
    rt_cubin c;
    bool hit = true;
    compile_cached_ok(dirs[i], k_add_one, &c, &hit);
    assert_false(hit);
    rt_cubin_free(&c);
  }
  /* a compile error through the cache is still an error, with its log */
  rt_cubin c;
  char *log = NULL;
  assert_int_equal(rt_compile_cached(dir, k_syntax_error, "b.cu", "sm_90", &c, NULL, &log, &e),
                   MMT_ERR_COMPILE);
  assert_non_null(log);
  free(log);
  assert_int_equal(count_cubins(dir, NULL, 0), 0);
  remove_tree(dir);
}

typedef struct {
  const char *dir;
  int failures;
  rt_cubin first[3]; /* the thread's cubin of each source */
} compile_job;

static const char *const k_thread_sources[3] = {k_add_one, k_smem, k_gemm};

static void *compile_thread(void *arg) {
  compile_job *job = arg;
  for (int round = 0; round < 2; round++) {
    for (int s = 0; s < 3; s++) {
      rt_cubin c;
      ut_err e;
      mmt_status rc =
          rt_compile_cached(job->dir, k_thread_sources[s], "t.cu", "sm_90", &c, NULL, NULL, &e);
      if (rc || c.size < 4 || memcmp(c.data, "\177ELF", 4) != 0) {
        job->failures++;
        rt_cubin_free(&c);
        continue;
      }
      if (round == 0)
        job->first[s] = c;
      else
        rt_cubin_free(&c);
    }
  }
  return NULL;
}

static void test_compile_threads(void **state) {
  (void)state;
  enum { nthreads = 4 };
  char dir[64];
  make_temp_dir(dir, sizeof dir);
  pthread_t th[nthreads];
  compile_job jobs[nthreads];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < nthreads; i++) {
    jobs[i].dir = dir;
    assert_int_equal(pthread_create(&th[i], NULL, compile_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < nthreads; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < nthreads; i++) {
    assert_int_equal(jobs[i].failures, 0);
    for (int s = 0; s < 3; s++) {
      /* NVRTC is deterministic: every thread got the same bytes, cached or not */
      assert_int_equal(jobs[i].first[s].size, jobs[0].first[s].size);
      assert_memory_equal(jobs[i].first[s].data, jobs[0].first[s].data, jobs[0].first[s].size);
    }
  }
  for (int i = 0; i < nthreads; i++)
    for (int s = 0; s < 3; s++) rt_cubin_free(&jobs[i].first[s]);
  /* three entries and no temporaries left behind */
  assert_int_equal(count_cubins(dir, NULL, 0), 3);
  assert_int_equal(count_entries(dir), 3);
  remove_tree(dir);
}

/* ---- the driver without a driver (CPU; children, since the driver loads once) ------------ */

#define CHILD_CHECK(cond)                                                             \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "child: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

/* Runs fn in a forked child with MMTUNE_LIBCUDA=lib (NULL: unset); returns its exit status. */
static int run_child(const char *lib, int (*fn)(const char *lib)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (lib)
      setenv("MMTUNE_LIBCUDA", lib, 1);
    else
      unsetenv("MMTUNE_LIBCUDA");
    fflush(NULL);
    _exit(fn(lib));
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* rt_driver and everything above it fail with `want`, repeatedly, without crashing. */
static int expect_no_driver(mmt_status want, const char *needle) {
  for (int i = 0; i < 3; i++) {
    const rt_cu *cu = (const rt_cu *)&cu;
    ut_err e;
    memset(&e, 0, sizeof e);
    mmt_status rc = rt_driver(&cu, &e);
    if (rc != want) fprintf(stderr, "child: rt_driver: %s: %s\n", mmt_status_name(rc), e.msg);
    CHILD_CHECK(rc == want);
    CHILD_CHECK(cu == NULL);
    CHILD_CHECK(strstr(e.msg, needle) != NULL);
    rt_device d;
    memset(&d, 0x5a, sizeof d);
    CHILD_CHECK(rt_device_open(0, &d, &e) == want);
    CHILD_CHECK(strstr(e.msg, needle) != NULL);
    CHILD_CHECK(d.ctx == NULL && d.info.name[0] == '\0');
    rt_device_close(&d);
    rt_device_close(NULL);
    CHILD_CHECK(rt_device_bind(&d, &e) == want);
    CHILD_CHECK(rt_driver(NULL, NULL) == want);
    rt_kernel k;
    memset(&k, 0, sizeof k);
    rt_kernel_unload(&k);
    rt_kernel_unload(NULL);
  }
  return 0;
}

static int child_missing_library(const char *lib) {
  (void)lib;
  return expect_no_driver(MMT_ERR_NO_DRIVER, "libcuda.so.1 not found (no NVIDIA driver?): ");
}

static int child_missing_symbols(const char *lib) {
  (void)lib;
  return expect_no_driver(MMT_ERR_NO_DRIVER, "lacks driver symbol cuInit");
}

static int child_stub_library(const char *lib) {
  (void)lib;
  /* the toolkit's link stub exports everything; its cuInit says CUDA_ERROR_STUB_LIBRARY */
  return expect_no_driver(MMT_ERR_CUDA, "cuInit: CUDA_ERROR_STUB_LIBRARY");
}

/* Several threads racing into the first load all see the same answer. */
static void *driver_thread(void *arg) {
  ut_err e;
  *(mmt_status *)arg = rt_driver(NULL, &e);
  return NULL;
}

static int child_threads(const char *lib) {
  (void)lib;
  pthread_t th[8];
  mmt_status rcs[8];
  for (int i = 0; i < 8; i++)
    CHILD_CHECK(pthread_create(&th[i], NULL, driver_thread, &rcs[i]) == 0);
  for (int i = 0; i < 8; i++) CHILD_CHECK(pthread_join(th[i], NULL) == 0);
  for (int i = 0; i < 8; i++) CHILD_CHECK(rcs[i] == MMT_ERR_NO_DRIVER);
  return 0;
}

static void test_driver_missing_library(void **state) {
  (void)state;
  assert_int_equal(run_child("/nonexistent/mmtune/libcuda.so.1", child_missing_library), 0);
  assert_int_equal(run_child("/nonexistent/mmtune/libcuda.so.1", child_threads), 0);
}

static void test_driver_missing_symbols(void **state) {
  (void)state;
  assert_int_equal(run_child("libm.so.6", child_missing_symbols), 0);
}

static void test_driver_stub(void **state) {
  (void)state;
  const char *candidates[] = {"/usr/local/cuda/lib64/stubs/libcuda.so",
                              "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so",
                              "/usr/lib/x86_64-linux-gnu/stubs/libcuda.so"};
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
    if (access(candidates[i], R_OK) != 0) continue;
    assert_int_equal(run_child(candidates[i], child_stub_library), 0);
    return;
  }
  print_message("no CUDA stub libcuda.so found\n");
  skip();
}

/* This machine's own driver, in this process: only meaningful without one. */
static void test_driver_absent_here(void **state) {
  (void)state;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    print_message("libcuda.so.1 is present: nothing to check\n");
    skip();
  }
  assert_int_equal(run_child(NULL, child_missing_library), 0);
}

/* rt_kernel_load's refusals that come before the driver is touched: a kernel with tensor maps
 * on a device before sm_90, tensor maps over a dtype the runtime cannot encode, and a repack
 * kernel on a device without a scratch pool.  The device is a stand-in (a non-null context
 * that is never used). */
static void test_load_refusals(void **state) {
  (void)state;
  rt_device d;
  memset(&d, 0, sizeof d);
  d.ctx = (CUcontext)(uintptr_t)1;
  d.info.cc_major = 8;
  snprintf(d.arch, sizeof d.arch, "sm_80");
  char byte = 0;
  rt_cubin c = {.data = &byte, .size = 1};
  gen_kernel spec = {.kernel_name = (char *)"tma_kernel", .block = {128, 1, 1},
                     .ntensor_maps = 1};
  snprintf(spec.dtype, sizeof spec.dtype, "f16");
  spec.tensor_maps[0] = (gen_tensor_map){.operand = 'A', .box = {64, 64}, .swizzle = 128};
  rt_kernel k;
  ut_err e;
  assert_int_equal(rt_kernel_load(&d, &c, &spec, &k, &e), MMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "kernel 'tma_kernel'"));
  assert_non_null(strstr(e.msg, "tensor maps (TMA) need sm_90 or newer; the device is sm_80"));
  assert_null(k.module);
  d.info.cc_major = 9;
  snprintf(d.arch, sizeof d.arch, "sm_90");
  snprintf(spec.dtype, sizeof spec.dtype, "f99");
  assert_int_equal(rt_kernel_load(&d, &c, &spec, &k, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "tensor maps over an unknown dtype 'f99'"));
  assert_null(k.module);
  snprintf(spec.dtype, sizeof spec.dtype, "f16");
  spec.requires.repack = true;
  assert_int_equal(rt_kernel_load(&d, &c, &spec, &k, &e), MMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "repack needs stream-ordered allocation (memory pools)"));
  assert_null(k.module);
}

/* Argument checks of rt_kernel_launch come before any driver call. */

static void test_launch_args(void **state) {
  (void)state;
  rt_kernel k;
  memset(&k, 0, sizeof k);
  rt_gemm_args a = {.m = 16, .n = 16, .k = 16, .alpha = 1, .lda = 16, .ldb = 16, .ldc = 16};
  ut_err e;
  assert_int_equal(rt_kernel_launch(&k, &a, NULL, &e), MMT_ERR_INVALID_ARG);
  assert_int_equal(rt_kernel_launch(NULL, &a, NULL, &e), MMT_ERR_INVALID_ARG);
  k.fn = (CUfunction)(uintptr_t)1; /* never called */
  k.grid[0] = (gen_grid_dim){'N', 16, 1};
  k.grid[1] = (gen_grid_dim){'M', 16, 1};
  k.grid[2] = (gen_grid_dim){0, 1, 1};
  rt_gemm_args bad = a;
  bad.m = -1;
  assert_int_equal(rt_kernel_launch(&k, &bad, NULL, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "M = -1"));
  bad = a;
  bad.k = (int64_t)INT_MAX + 1;
  assert_int_equal(rt_kernel_launch(&k, &bad, NULL, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "K = 2147483648"));
  bad = a;
  bad.ldc = -5;
  assert_int_equal(rt_kernel_launch(&k, &bad, NULL, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "ldc"));
  /* an empty grid launches nothing, so needs no driver */
  bad = a;
  bad.m = 0;
  mmt_status rc = rt_kernel_launch(&k, &bad, NULL, &e);
  if (rc) print_error("%s\n", e.msg);
  assert_int_equal(rc, MMT_OK);
}

/* TMA maps promote L2 fetches to 256 bytes only over rows that start on 128-byte lines; rows
 * off a line (a pitch of 6000 bytes, a base 16 bytes in) get 128. */
static void test_tma_l2_promotion(void **state) {
  (void)state;
  const uint64_t line = 0x7f0000000000ull; /* a base on a 128-byte line */
  assert_int_equal(rt_tma_l2_promotion(line, 8192), CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  assert_int_equal(rt_tma_l2_promotion(line, 6016), CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  assert_int_equal(rt_tma_l2_promotion(line, 6000), CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  assert_int_equal(rt_tma_l2_promotion(line, 8000), CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  assert_int_equal(rt_tma_l2_promotion(line + 16, 8192), CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

/* A kernel of these grid rules on a device of 132 SMs, loaded nowhere: what the launch's
 * grid and workspace arithmetic read. */
static rt_kernel kernel_of_grid(gen_grid_dim x, gen_grid_dim y, gen_grid_dim z) {
  rt_kernel k;
  memset(&k, 0, sizeof k);
  k.grid[0] = x, k.grid[1] = y, k.grid[2] = z;
  k.sm_count = 132;
  return k;
}

/* The workspace sizing rules: a launch needs the blocks of its grid times the kernel's bytes
 * per block; the buffer grows to at least that, doubling, in whole MiB, and not at all when
 * it suffices. */
static void test_workspace_sizing(void **state) {
  (void)state;
  const size_t mib = RT_WORKSPACE_MIN_BYTES;
  assert_int_equal(mib, 1u << 20);
  assert_int_equal(rt_workspace_grow_size(0, 0), 0);
  assert_int_equal(rt_workspace_grow_size(1, 0), mib);
  assert_int_equal(rt_workspace_grow_size(mib, 0), mib);
  assert_int_equal(rt_workspace_grow_size(mib + 1, 0), 2 * mib);
  assert_int_equal(rt_workspace_grow_size(mib, mib), 0);            /* fits: reused */
  assert_int_equal(rt_workspace_grow_size(mib + 1, mib), 2 * mib);  /* doubles */
  assert_int_equal(rt_workspace_grow_size(mib + 1, 3 * mib), 0);
  assert_int_equal(rt_workspace_grow_size(7 * mib, 3 * mib), 7 * mib); /* need beats double */
  assert_int_equal(rt_workspace_grow_size(SIZE_MAX, 0), SIZE_MAX);      /* no overflow */
  /* Doubling from the floor, the retired list never fills before size_t does. */
  size_t have = 0;
  int grown = 0;
  while (have < SIZE_MAX / 2) have = rt_workspace_grow_size(have + 1, have), grown++;
  assert_true(grown <= RT_WORKSPACE_RETIRED);

  rt_kernel k = kernel_of_grid((gen_grid_dim){'N', 64, 1}, (gen_grid_dim){'M', 32, 1},
                               (gen_grid_dim){0, 16, 1});
  rt_gemm_args a = {.m = 100, .n = 129, .k = 10000, .alpha = 1, .lda = 10000, .ldb = 129, .ldc = 129};
  ut_err e;
  size_t need = 1;
  assert_int_equal(rt_workspace_need(&k, &a, &need, &e), MMT_OK);
  assert_int_equal(need, 0); /* no workspace asked */
  k.workspace_per_block = 32 * 64 * 4;
  assert_int_equal(rt_workspace_need(&k, &a, &need, &e), MMT_OK);
  assert_int_equal(need, (size_t)3 * 4 * 16 * 32 * 64 * 4); /* 3 x 4 tiles, 16 slices */
  a.m = 0; /* an empty grid needs nothing */
  assert_int_equal(rt_workspace_need(&k, &a, &need, &e), MMT_OK);
  assert_int_equal(need, 0);
}

/* The grids of grouped launches: a contiguous call's tile rows for the experts' partial tiles,
 * a masked call's experts on grid.z, as many slices as its rows can hit when its kernel walks
 * them (and all G when the rows are not known or reach G). */
static void test_launch_grid_grouped(void **state) {
  (void)state;
  rt_epilogue epi = {.groups = 160};
  rt_kernel k =
      kernel_of_grid((gen_grid_dim){'M', 1, 1}, (gen_grid_dim){'N', 8, 1}, (gen_grid_dim){0, 1, 1});
  k.epilogue = true;
  rt_gemm_args a = {.m = 3,
                    .n = 1536,
                    .k = 5120,
                    .lda = 5120,
                    .ldb = 5120,
                    .ldc = 1536,
                    .epi = &epi,
                    .batch = 160,
                    .group = 'm'};
  ut_err e;
  unsigned grid[3];
  assert_int_equal(rt_launch_grid(&k, &a, grid, &e), MMT_OK);
  assert_int_equal(grid[0], 3), assert_int_equal(grid[1], 192), assert_int_equal(grid[2], 160);
  a.tokens = 2; /* two rows in all: a kernel that does not walk still launches every expert */
  assert_int_equal(rt_launch_grid(&k, &a, grid, &e), MMT_OK);
  assert_int_equal(grid[2], 160);
  k.walks_experts = true;
  const int64_t tokens[] = {0, 1, 2, 159, 160, 1000};
  const unsigned slices[] = {160, 1, 2, 159, 160, 160};
  for (int i = 0; i < 6; i++) {
    a.tokens = tokens[i];
    assert_int_equal(rt_launch_grid(&k, &a, grid, &e), MMT_OK);
    assert_int_equal(grid[0], 3), assert_int_equal(grid[1], 192);
    assert_int_equal(grid[2], slices[i]);
  }
  a.group = 'c', a.m = 40, a.tokens = 0; /* contiguous: 40 tile rows and 40 experts' partials */
  assert_int_equal(rt_launch_grid(&k, &a, grid, &e), MMT_OK);
  assert_int_equal(grid[0], 80), assert_int_equal(grid[2], 1);
  a.batch = 70000; /* past grid.z's limit: refused, whatever the kernel */
  a.group = 'm';
  assert_int_equal(rt_launch_grid(&k, &a, grid, &e), MMT_ERR_INVALID_ARG);
  assert_non_null(strstr(e.msg, "65535"));
}

/* ---- GPU (skipped without a driver and device) ------------------------------------------- */

static void open_or_skip(rt_device *d) {
  ut_err e;
  mmt_status rc = rt_device_open(0, d, &e);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE || rc == MMT_ERR_CUDA) {
    print_message("no GPU: %s: %s\n", mmt_status_name(rc), e.msg);
    skip();
  }
  if (rc) print_error("%s\n", e.msg);
  assert_int_equal(rc, MMT_OK);
}

/* A kernel's hash follows what is compiled and launched, nothing else; a row is current
 * exactly while its kernel is what the template emits. */
static void test_kernel_hash(void **state) {
  (void)state;
  gen_template *t = NULL;
  ut_err e;
  gen_config cfg;
  gen_kernel k = {0};
  assert_int_equal(gen_load_named("naive", &t, &e), MMT_OK);
  gen_config_default(t, &cfg);
  assert_int_equal(gen_emit(t, &cfg, "f32", "nt", &k, &e), MMT_OK);
  char h[17], again[17], other[17];
  rt_kernel_hash(&k, h);
  assert_int_equal(strlen(h), 16);
  rt_kernel_hash(&k, again);
  assert_string_equal(h, again);
  /* one byte of source, one thread of the block, the grid, the arch: another kernel */
  char *src = k.source;
  k.source = malloc(strlen(src) + 2);
  assert_non_null(k.source);
  sprintf(k.source, "%s ", src);
  rt_kernel_hash(&k, other);
  assert_string_not_equal(h, other);
  free(k.source);
  k.source = src;
  k.block[0]++;
  rt_kernel_hash(&k, other);
  assert_string_not_equal(h, other);
  k.block[0]--;
  k.grid[0].tile++;
  rt_kernel_hash(&k, other);
  assert_string_not_equal(h, other);
  k.grid[0].tile--;
  snprintf(k.arch, sizeof k.arch, "sm_90a");
  rt_kernel_hash(&k, other);
  assert_string_not_equal(h, other);
  k.arch[0] = '\0';
  rt_kernel_hash(&k, again);
  assert_string_equal(h, again);

  char params[256];
  assert_int_equal(gen_config_format(t, &cfg, params, sizeof params, &e), MMT_OK);
  bool current = false;
  /* measured with this kernel, under another template text: current, by emitting */
  rt_row_kernel row = {.template_hash = "0123456789abcdef",
                       .kernel_hash = h,
                       .params = params,
                       .dtype = "f32",
                       .layout = "nt"};
  assert_int_equal(rt_row_current(t, &row, NULL, &current, &e), MMT_OK);
  assert_true(current);
  assert_int_equal(rt_row_current(t, &row, &k, &current, &e), MMT_OK);
  assert_true(current);
  /* another kernel: stale, whatever the template text says */
  row.kernel_hash = other;
  row.template_hash = gen_source_hash(t);
  assert_int_equal(rt_row_current(t, &row, &k, &current, &e), MMT_OK);
  assert_false(current);
  row.template_hash = "0123456789abcdef";
  assert_int_equal(rt_row_current(t, &row, NULL, &current, &e), MMT_OK);
  assert_false(current);
  /* the same kernel in another layout is another kernel */
  row.kernel_hash = h;
  row.layout = "nn";
  assert_int_equal(rt_row_current(t, &row, NULL, &current, &e), MMT_OK);
  assert_false(current);
  /* params that are not this template's: stale, not an error */
  row.layout = "nt";
  row.params = "nonsense=1";
  assert_int_equal(rt_row_current(t, &row, NULL, &current, &e), MMT_OK);
  assert_false(current);
  /* before kernel hashes: current while the template is as measured */
  row.params = params;
  row.kernel_hash = "";
  assert_int_equal(rt_row_current(t, &row, NULL, &current, &e), MMT_OK);
  assert_false(current);
  row.template_hash = gen_source_hash(t);
  assert_int_equal(rt_row_current(t, &row, NULL, &current, &e), MMT_OK);
  assert_true(current);
  gen_kernel_clear(&k);
  gen_free(t);
}

static void test_gpu_device(void **state) {
  (void)state;
  rt_device d;
  open_or_skip(&d);
  print_message("%s %s %s, %d SMs, driver %d, %zu MiB, %d B shared opt-in\n", d.info.name,
                d.info.uuid, d.arch, d.info.sm_count, d.info.driver_version, d.total_mem >> 20,
                d.max_shared_optin);
  assert_true(strlen(d.info.name) > 0);
  assert_true(strncmp(d.info.uuid, "GPU-", 4) == 0);
  assert_int_equal(strlen(d.info.uuid), 40);
  assert_true(d.info.cc_major >= 7);
  assert_true(d.info.sm_count > 0);
  assert_true(d.info.driver_version >= 12000);
  assert_true(d.total_mem > 0);
  assert_true(d.max_shared_optin >= 48 * 1024);
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d%d", d.info.cc_major, d.info.cc_minor);
  assert_string_equal(d.arch, arch);
  ut_err e;
  assert_int_equal(rt_device_bind(&d, &e), MMT_OK);
  rt_device other;
  assert_int_equal(rt_device_open(99, &other, &e), MMT_ERR_NO_DEVICE);
  assert_non_null(strstr(e.msg, "device 99 requested but"));
  assert_int_equal(rt_device_open(-1, &other, &e), MMT_ERR_NO_DEVICE);
  rt_device_close(&other);
  rt_device_close(&d);
  rt_device_close(&d);
}

/* Compiles src for the device and loads it with a spec of the given block and shared size. */
static mmt_status load_src(const rt_device *d, const char *src, const char *name, unsigned threads,
                           unsigned shared, rt_kernel *k, ut_err *e) {
  rt_cubin c;
  mmt_status rc = rt_compile(src, name, d->arch, &c, NULL, e);
  if (rc) return rc;
  gen_kernel spec;
  memset(&spec, 0, sizeof spec);
  spec.kernel_name = (char *)name;
  spec.block[0] = threads;
  spec.block[1] = spec.block[2] = 1;
  spec.grid[0] = (gen_grid_dim){'M', threads, 1};
  spec.grid[1] = spec.grid[2] = (gen_grid_dim){0, 1, 1};
  spec.shared_bytes = shared;
  spec.requires = (gen_requires){1, 1, 1, 4, false, false};
  rc = rt_kernel_load(d, &c, &spec, k, e);
  rt_cubin_free(&c);
  return rc;
}

/* Runs a (float *p, int n) kernel over n floats 0..n-1 and reads them back into out. */
static void run_vector_kernel(const rt_kernel *k, int n, float *out) {
  const rt_cu *cu;
  ut_err e;
  assert_int_equal(rt_driver(&cu, &e), MMT_OK);
  CUdeviceptr p = 0;
  for (int i = 0; i < n; i++) out[i] = (float)i;
  assert_int_equal(cu->cuMemAlloc(&p, (size_t)n * sizeof(float)), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(p, out, (size_t)n * sizeof(float)), CUDA_SUCCESS);
  void *params[] = {&p, &n};
  unsigned grid = ((unsigned)n + k->block[0] - 1) / k->block[0];
  assert_int_equal(
      cu->cuLaunchKernel(k->fn, grid, 1, 1, k->block[0], 1, 1, k->shared_bytes, NULL, params, NULL),
      CUDA_SUCCESS);
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(out, p, (size_t)n * sizeof(float)), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemFree(p), CUDA_SUCCESS);
}

static void test_gpu_kernel_load(void **state) {
  (void)state;
  rt_device d;
  open_or_skip(&d);
  rt_kernel k;
  ut_err e;
  float out[1000];
  mmt_status rc = load_src(&d, k_add_one, "add_one", 128, 0, &k, &e);
  if (rc) print_error("%s\n", e.msg);
  assert_int_equal(rc, MMT_OK);
  assert_true(k.regs > 0 && k.max_threads >= 128 && k.local_bytes == 0);
  run_vector_kernel(&k, 1000, out);
  for (int i = 0; i < 1000; i++) assert_true(out[i] == (float)i + 1.0f);
  rt_kernel_unload(&k);
  rt_kernel_unload(&k);
  /* a name that is not in the module */
  rt_cubin c;
  assert_int_equal(rt_compile(k_add_one, "add_one", d.arch, &c, NULL, &e), MMT_OK);
  gen_kernel spec = {.kernel_name = (char *)"no_such_kernel", .block = {128, 1, 1}};
  assert_int_equal(rt_kernel_load(&d, &c, &spec, &k, &e), MMT_ERR_CUDA);
  assert_non_null(strstr(e.msg, "no_such_kernel"));
  assert_null(k.module);
  /* a repack kernel whose module lacks the runtime's copy kernel (the copy_rows snippet) */
  if (d.scratch) {
    spec.kernel_name = (char *)"add_one";
    spec.requires = (gen_requires){1, 1, 1, 16, true, false};
    assert_int_equal(rt_kernel_load(&d, &c, &spec, &k, &e), MMT_ERR_CUDA);
    assert_non_null(
        strstr(e.msg, "repack kernel 'add_one': its module has no " GEN_COPY_ROWS_KERNEL));
    assert_null(k.module);
  }
  rt_cubin_free(&c);
  /* the block beyond the kernel's launch bounds */
  assert_int_equal(load_src(&d, k_bounded, "bounded", 1024, 0, &k, &e), MMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "needs 1024 threads but kernel allows 256"));
  rt_device_close(&d);
}

static void test_gpu_shared_memory(void **state) {
  (void)state;
  rt_device d;
  open_or_skip(&d);
  rt_kernel k;
  ut_err e;
  float out[256];
  /* beyond the device's opt-in limit */
  unsigned too_much = (unsigned)d.max_shared_optin + 4;
  assert_int_equal(load_src(&d, k_smem, "smem_copy", 256, too_much, &k, &e), MMT_ERR_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "shared memory"));
  /* above 48 KiB and within the limit: the attribute is raised and the launch works */
  unsigned big = (unsigned)d.max_shared_optin < 96 * 1024 ? 64 * 1024 : 96 * 1024;
  mmt_status rc = load_src(&d, k_smem, "smem_copy", 256, big, &k, &e);
  if (rc) print_error("%s\n", e.msg);
  assert_int_equal(rc, MMT_OK);
  run_vector_kernel(&k, 256, out);
  for (int i = 0; i < 256; i++) assert_true(out[i] == 2.0f * (float)i);
  rt_kernel_unload(&k);
  rt_device_close(&d);
}

/* Host data for the GEMM test: A (M x lda), B (K x ldb), C (M x ldc), row-major. */
typedef struct {
  int64_t m, n, k, lda, ldb, ldc;
  float *a, *b, *c, *want;
} gemm_case;

static void gemm_case_fill(gemm_case *g) {
  g->a = malloc((size_t)(g->m * g->lda) * sizeof(float));
  g->b = malloc((size_t)(g->k * g->ldb) * sizeof(float));
  g->c = malloc((size_t)(g->m * g->ldc) * sizeof(float));
  g->want = malloc((size_t)(g->m * g->ldc) * sizeof(float));
  assert_true(g->a && g->b && g->c && g->want);
  for (int64_t i = 0; i < g->m * g->lda; i++) g->a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  for (int64_t i = 0; i < g->k * g->ldb; i++) g->b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  for (int64_t i = 0; i < g->m * g->ldc; i++) g->c[i] = (float)(i % 3);
  memcpy(g->want, g->c, (size_t)(g->m * g->ldc) * sizeof(float));
}

static void gemm_cpu(gemm_case *g, float alpha, float beta) {
  for (int64_t i = 0; i < g->m; i++)
    for (int64_t j = 0; j < g->n; j++) {
      double acc = 0;
      for (int64_t p = 0; p < g->k; p++) acc += (double)g->a[i * g->lda + p] * g->b[p * g->ldb + j];
      float *w = &g->want[i * g->ldc + j];
      *w = (float)(alpha * acc + beta * *w);
    }
}

static void gemm_case_free(gemm_case *g) {
  free(g->a);
  free(g->b);
  free(g->c);
  free(g->want);
}

static CUdeviceptr to_device(const rt_cu *cu, const float *h, size_t count) {
  CUdeviceptr p = 0;
  assert_int_equal(cu->cuMemAlloc(&p, count * sizeof(float)), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(p, h, count * sizeof(float)), CUDA_SUCCESS);
  return p;
}

static void test_gpu_gemm_launch(void **state) {
  (void)state;
  rt_device d;
  open_or_skip(&d);
  const rt_cu *cu;
  ut_err e;
  assert_int_equal(rt_driver(&cu, &e), MMT_OK);
  rt_cubin c;
  assert_int_equal(rt_compile(k_gemm, "gemm_naive", d.arch, &c, NULL, &e), MMT_OK);
  gen_kernel spec = {.kernel_name = (char *)"gemm_naive",
                     .block = {16, 16, 1},
                     .grid = {{'N', 16}, {'M', 16}, {0, 1}},
                     .requires = {1, 1, 1, 4}};
  rt_kernel k;
  mmt_status rc = rt_kernel_load(&d, &c, &spec, &k, &e);
  if (rc) print_error("%s\n", e.msg);
  assert_int_equal(rc, MMT_OK);
  rt_cubin_free(&c);
  assert_int_equal(k.grid[0].dim, 'N');
  assert_int_equal(k.requires.align_bytes, 4);
  /* odd sizes and padded leading dimensions */
  gemm_case g = {.m = 17, .n = 33, .k = 65, .lda = 67, .ldb = 35, .ldc = 40};
  gemm_case_fill(&g);
  const float alpha = 1.5f, beta = 0.5f;
  gemm_cpu(&g, alpha, beta);
  rt_gemm_args a = {.m = g.m,
                    .n = g.n,
                    .k = g.k,
                    .alpha = alpha,
                    .beta = beta,
                    .lda = g.lda,
                    .ldb = g.ldb,
                    .ldc = g.ldc};
  a.a = to_device(cu, g.a, (size_t)(g.m * g.lda));
  a.b = to_device(cu, g.b, (size_t)(g.k * g.ldb));
  a.c = to_device(cu, g.c, (size_t)(g.m * g.ldc));
  rc = rt_kernel_launch(&k, &a, NULL, &e);
  if (rc) print_error("%s\n", e.msg);
  assert_int_equal(rc, MMT_OK);
  /* M == 0 launches nothing */
  rt_gemm_args empty = a;
  empty.m = 0;
  assert_int_equal(rt_kernel_launch(&k, &empty, NULL, &e), MMT_OK);
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyDtoH(g.c, a.c, (size_t)(g.m * g.ldc) * sizeof(float)), CUDA_SUCCESS);
  for (int64_t i = 0; i < g.m * g.ldc; i++)
    if (fabsf(g.c[i] - g.want[i]) > 1e-4f * (1.0f + fabsf(g.want[i]))) {
      print_error("C[%lld] = %g, want %g\n", (long long)i, g.c[i], g.want[i]);
      fail();
    }
  assert_int_equal(cu->cuMemFree(a.a), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemFree(a.b), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemFree(a.c), CUDA_SUCCESS);
  gemm_case_free(&g);
  rt_kernel_unload(&k);
  rt_device_close(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      /* forked first, while this process has no threads of its own */
      cmocka_unit_test(test_driver_missing_library),
      cmocka_unit_test(test_driver_missing_symbols),
      cmocka_unit_test(test_driver_stub),
      cmocka_unit_test(test_driver_absent_here),
      cmocka_unit_test(test_nvrtc_version),
      cmocka_unit_test(test_compile_archs),
      cmocka_unit_test(test_compile_error),
      cmocka_unit_test(test_bad_arch),
      cmocka_unit_test(test_kernel_arch),
      cmocka_unit_test(test_cache_hit_miss),
      cmocka_unit_test(test_cache_corrupt),
      cmocka_unit_test(test_cache_unwritable),
      cmocka_unit_test(test_compile_threads),
      cmocka_unit_test(test_load_refusals),
      cmocka_unit_test(test_launch_args),
      cmocka_unit_test(test_tma_l2_promotion),
      cmocka_unit_test(test_workspace_sizing),
      cmocka_unit_test(test_launch_grid_grouped),
      cmocka_unit_test(test_kernel_hash),
      cmocka_unit_test(test_gpu_device),
      cmocka_unit_test(test_gpu_kernel_load),
      cmocka_unit_test(test_gpu_shared_memory),
      cmocka_unit_test(test_gpu_gemm_launch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
