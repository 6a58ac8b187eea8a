/* bl_gpu.c -- see bl.h: the GPU path.  One mmtune context, opened at the first call that
 * reaches the threshold, on the device's primary context (the one mmt_gemm uses), with a
 * non-blocking stream of its own and one grow-only device buffer (bl_plan_gpu lays the
 * matrices out in it).  A call binds the primary context, copies A, B (when read) and C
 * (when beta != 0) in with 2D copies, runs mmt_gemm, waits, copies C's M x N elements back,
 * and gives the thread its previous current context back.  The mutex makes it one call at a
 * time: the buffer is shared.
 *
 * Failures: a failed open makes the GPU unavailable for the process (every call then runs on
 * the CPU); so does any driver failure afterwards (a broken context stays broken).  A call
 * the GPU path declines for its own sake (device memory exhausted, no kernel for the
 * problem, a compile error) runs on the CPU and the next one tries again.  Either way C is
 * untouched until the kernel has finished, so the CPU can compute the call instead.  The
 * context, stream and buffer live until the process exits (freeing them from a destructor
 * at exit would race the driver's own teardown).
 *
 * libmmtune.so itself is loaded with dlopen at that first call (found through this library's
 * RUNPATH: beside it once installed), not linked: a preloaded shim then costs a process that
 * never reaches the threshold nothing (no NVRTC, Lua or SQLite loaded), and the CPU path
 * works where they are missing.  mmt_status_name comes from the util archive.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bl.h"
#include "mmtune.h"
#include "rt_driver.h"

#define BL_ALLOC_ROUND ((size_t)2 << 20) /* device buffer sizes: multiples of 2 MiB */

/* The functions of libmmtune.so this file calls, with the prototypes mmtune.h gives. */
#define BL_MMT_FUNCS(X) X(mmt_open) X(mmt_close) X(mmt_errmsg) X(mmt_gemm)

static struct {
#define BL_MMT_FIELD_(name) __typeof__(&name) name;
  BL_MMT_FUNCS(BL_MMT_FIELD_)
#undef BL_MMT_FIELD_
} g_mmt; /* written under g_gpu.lock before state becomes 1 */

static struct {
  pthread_mutex_t lock;
  int state;          /* mmtune_blas_stats_t.gpu_state */
  mmt_status status;  /* state -1: why */
  char desc[640];     /* for the summary line */
  bool said_declined; /* the first declined call was reported (verbose) */
  mmt_context *ctx;
  const rt_cu *cu;
  CUdevice dev;
  CUcontext cuctx; /* the device's primary context, retained */
  CUstream stream;
  CUdeviceptr buf;
  size_t cap;
} g_gpu = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void log_line(void *user, mmt_log_level level, const char *message) {
  (void)user;
  static const char *const names[] = {"error", "warning", "info", "debug"};
  bl_say("mmtune %s: %s", names[level <= MMT_LOG_DEBUG ? level : MMT_LOG_DEBUG], message);
}

static void make_unavailable(const bl_config *cfg, mmt_status status, const char *why) {
  g_gpu.state = -1;
  g_gpu.status = status;
  snprintf(g_gpu.desc, sizeof g_gpu.desc, "unavailable (%s: %.560s)", mmt_status_name(status), why);
  if (cfg->verbose) bl_say("GPU %s; calls run on the CPU from now on", g_gpu.desc);
}

/* Loads libmmtune (MMT_LIBMMTUNE_SONAME, from CMake) into g_mmt; false with why filled. */
static bool load_mmtune(char *why, size_t why_len) {
  void *handle = dlopen(MMT_LIBMMTUNE_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *e = dlerror();
    snprintf(why, why_len, "%.480s", e ? e : "dlopen(" MMT_LIBMMTUNE_SONAME ") failed");
    return false;
  }
  void *sym;
#define BL_MMT_RESOLVE_(name)                                                      \
  if (!(sym = dlsym(handle, #name))) {                                             \
    snprintf(why, why_len, "%s lacks %s", MMT_LIBMMTUNE_SONAME, #name);            \
    dlclose(handle);                                                               \
    return false;                                                                  \
  }                                                                                \
  memcpy(&g_mmt.name, &sym, sizeof sym);
  BL_MMT_FUNCS(BL_MMT_RESOLVE_)
#undef BL_MMT_RESOLVE_
  return true; /* the handle stays open for the process */
}

/* The driver objects of the open context: primary context, stream. */
static mmt_status open_driver(const bl_config *cfg, char *name, size_t name_len, ut_err *err) {
  mmt_status rc = rt_driver(&g_gpu.cu, err);
  const rt_cu *cu = g_gpu.cu;
  CUcontext prev = NULL;
  bool bound = false;
  if (rc) return rc;
  RT_CU_CHECK(cu, cuDeviceGet(&g_gpu.dev, cfg->device));
  RT_CU_CHECK(cu, cuDeviceGetName(name, (int)name_len, g_gpu.dev));
  RT_CU_CHECK(cu, cuDevicePrimaryCtxRetain(&g_gpu.cuctx, g_gpu.dev));
  RT_CU_CHECK(cu, cuCtxGetCurrent(&prev));
  RT_CU_CHECK(cu, cuCtxSetCurrent(g_gpu.cuctx));
  bound = true;
  RT_CU_CHECK(cu, cuStreamCreate(&g_gpu.stream, CU_STREAM_NON_BLOCKING));
cleanup:
  if (bound) {
    CUresult r = cu->cuCtxSetCurrent(prev);
    if (r != CUDA_SUCCESS && !rc) rc = rt_cu_fail(err, "cuCtxSetCurrent", r);
  }
  if (rc && g_gpu.cuctx) {
    cu->cuDevicePrimaryCtxRelease(g_gpu.dev); /* failing already: its result adds nothing */
    g_gpu.cuctx = NULL;
  }
  return rc;
}

static void open_gpu(const bl_config *cfg) {
  mmt_options opt;
  memset(&opt, 0, sizeof opt);
  if (cfg->verbose) {
    opt.log = log_line;
    opt.log_level = cfg->verbose >= 2 ? MMT_LOG_INFO : MMT_LOG_WARN;
  }
  char why[512];
  if (!load_mmtune(why, sizeof why)) {
    make_unavailable(cfg, MMT_ERR_NOT_FOUND, why);
    return;
  }
  mmt_status rc = g_mmt.mmt_open(&g_gpu.ctx, cfg->device, &opt);
  if (rc) {
    snprintf(why, sizeof why, "mmt_open(device %d): %s", cfg->device, g_mmt.mmt_errmsg(g_gpu.ctx));
    g_mmt.mmt_close(g_gpu.ctx);
    g_gpu.ctx = NULL;
    make_unavailable(cfg, rc, why);
    return;
  }
  char name[256] = "";
  ut_err err = {{0}};
  if ((rc = open_driver(cfg, name, sizeof name, &err))) {
    g_mmt.mmt_close(g_gpu.ctx);
    g_gpu.ctx = NULL;
    make_unavailable(cfg, rc, err.msg);
    return;
  }
  g_gpu.state = 1;
  snprintf(g_gpu.desc, sizeof g_gpu.desc, "open on device %d (%s)", cfg->device, name);
  if (cfg->verbose)
    bl_say("GPU %s; calls with 2*M*N*K >= %.17g flops run on it", g_gpu.desc, cfg->threshold);
}

/* A device buffer of at least `need` bytes.  MMT_ERR_NOMEM when the device has no room. */
static mmt_status reserve(size_t need, ut_err *err) {
  const rt_cu *cu = g_gpu.cu;
  if (need <= g_gpu.cap) return MMT_OK;
  if (g_gpu.buf) {
    CUresult r = cu->cuMemFree(g_gpu.buf);
    g_gpu.buf = 0;
    g_gpu.cap = 0;
    if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuMemFree", r);
  }
  size_t want;
  if (__builtin_add_overflow(need, BL_ALLOC_ROUND - 1, &want))
    return ut_fail(err, MMT_ERR_NOMEM, "%zu bytes of device memory", need);
  want -= want % BL_ALLOC_ROUND;
  CUresult r = g_gpu.cu->cuMemAlloc(&g_gpu.buf, want);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    g_gpu.buf = 0;
    return ut_fail(err, MMT_ERR_NOMEM, "cuMemAlloc(%zu bytes): out of device memory", want);
  }
  if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuMemAlloc", r);
  g_gpu.cap = want;
  return MMT_OK;
}

/* One 2D copy of an operand between host (at host, op->host_ld) and the buffer. */
static mmt_status copy(const bl_operand *op, const void *host, bool to_device, ut_err *err) {
  mmt_status rc = MMT_OK;
  CUDA_MEMCPY2D d;
  memset(&d, 0, sizeof d);
  CUdeviceptr dev = g_gpu.buf + op->dev_offset;
  if (to_device) {
    d.srcMemoryType = CU_MEMORYTYPE_HOST;
    d.srcHost = host;
    d.srcPitch = op->host_ld * sizeof(float);
    d.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    d.dstDevice = dev;
    d.dstPitch = op->dev_ld * sizeof(float);
  } else {
    d.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    d.srcDevice = dev;
    d.srcPitch = op->dev_ld * sizeof(float);
    d.dstMemoryType = CU_MEMORYTYPE_HOST;
    d.dstHost = (void *)(uintptr_t)host;
    d.dstPitch = op->host_ld * sizeof(float);
  }
  d.WidthInBytes = op->rows * sizeof(float);
  d.Height = op->cols;
  RT_CU_CHECK(g_gpu.cu, cuMemcpy2DAsync(&d, g_gpu.stream));
cleanup:
  return rc;
}

/* Failures that leave the GPU usable for the next call. */
static bool declined_only(mmt_status s) {
  return s == MMT_ERR_NOMEM || s == MMT_ERR_UNSUPPORTED || s == MMT_ERR_COMPILE ||
         s == MMT_ERR_INVALID_ARG || s == MMT_ERR_TEMPLATE || s == MMT_ERR_TEMPLATE_LIMIT;
}

/* Inputs in, mmt_gemm, wait.  Nothing touches the host's C. */
static mmt_status compute(const bl_gemm *g, const bl_plan *p, ut_err *err) {
  mmt_status rc = reserve(p->bytes, err);
  if (rc) return rc;
  CUdeviceptr base = g_gpu.buf;
  if (p->a.used && (rc = copy(&p->a, g->a, true, err))) return rc;
  if (p->b.used && (rc = copy(&p->b, g->b, true, err))) return rc;
  if (p->upload_c && (rc = copy(&p->c, g->c, true, err))) return rc;
  const void *a = p->a.used ? (const void *)(uintptr_t)(base + p->a.dev_offset) : NULL;
  const void *b = p->b.used ? (const void *)(uintptr_t)(base + p->b.dev_offset) : NULL;
  void *c = (void *)(uintptr_t)(base + p->c.dev_offset);
  rc = g_mmt.mmt_gemm(g_gpu.ctx, MMT_COL_MAJOR, g->trans_a ? MMT_TRANS : MMT_NO_TRANS,
                g->trans_b ? MMT_TRANS : MMT_NO_TRANS, g->m, g->n, g->k, g->alpha, a,
                (int64_t)p->a.dev_ld, b, (int64_t)p->b.dev_ld, g->beta, c, (int64_t)p->c.dev_ld,
                MMT_F32, g_gpu.stream);
  if (rc) return ut_fail(err, rc, "mmt_gemm: %s", g_mmt.mmt_errmsg(g_gpu.ctx));
  CUresult r = g_gpu.cu->cuStreamSynchronize(g_gpu.stream);
  if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuStreamSynchronize (mmt_gemm)", r);
  return MMT_OK;
}

/* C back to the host, and wait. */
static mmt_status fetch(const bl_gemm *g, const bl_plan *p, ut_err *err) {
  mmt_status rc = copy(&p->c, g->c, false, err);
  if (rc) return rc;
  CUresult r = g_gpu.cu->cuStreamSynchronize(g_gpu.stream);
  if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuStreamSynchronize (copy of C)", r);
  return MMT_OK;
}

static bl_gpu_result run(const bl_config *cfg, const bl_gemm *g, const bl_plan *p) {
  const rt_cu *cu = g_gpu.cu;
  ut_err e = {{0}}, *err = &e;
  CUcontext prev = NULL;
  bool bound = false, computed = false, fetched = false;
  mmt_status rc = MMT_OK;
  RT_CU_CHECK(cu, cuCtxGetCurrent(&prev));
  if (prev != g_gpu.cuctx) RT_CU_CHECK(cu, cuCtxSetCurrent(g_gpu.cuctx));
  bound = true;
  if ((rc = compute(g, p, err))) goto cleanup;
  computed = true;
  if ((rc = fetch(g, p, err))) goto cleanup;
  fetched = true;
cleanup:
  if (bound && prev != g_gpu.cuctx) {
    CUresult r = cu->cuCtxSetCurrent(prev); /* mmt_gemm may have bound the context too */
    if (r != CUDA_SUCCESS && !rc) rc = rt_cu_fail(err, "cuCtxSetCurrent (restore)", r);
  }
  if (!rc) return BL_GPU_DONE;
  /* The copy of C failed part way: C cannot be recomputed.  Rare enough to say always. */
  if (computed && !fetched)
    bl_say("copying C back from the GPU failed (%s); this call's C is undefined", e.msg);
  if (declined_only(rc)) {
    if (cfg->verbose && !g_gpu.said_declined)
      bl_say("a GPU call ran on the CPU instead (%s: %s); later ones are only counted",
             mmt_status_name(rc), e.msg);
    g_gpu.said_declined = true;
  } else {
    make_unavailable(cfg, rc, e.msg);
  }
  return computed ? BL_GPU_DONE : BL_GPU_DECLINED;
}

bl_gpu_result bl_gpu_gemm(const bl_config *cfg, const bl_gemm *g) {
  bl_gpu_result res = BL_GPU_DECLINED;
  bl_gemm f32 = *g;
  float *bufs = NULL;
  bl_plan p;
  pthread_mutex_lock(&g_gpu.lock);
  if (g_gpu.state == 0) open_gpu(cfg);
  /* 16-bit inputs: converted (exactly) to fp32 on the host, once the GPU is known usable. */
  if (g_gpu.state == 1 && (g->elem == BL_F32 || bl_to_f32(g, &f32, &bufs)) &&
      bl_plan_gpu(&f32, &p))
    res = run(cfg, &f32, &p);
  pthread_mutex_unlock(&g_gpu.lock);
  free(bufs);
  return res;
}

void bl_gpu_state(int *state, int *status, char *desc, size_t desc_len) {
  pthread_mutex_lock(&g_gpu.lock);
  *state = g_gpu.state;
  *status = (int)g_gpu.status;
  snprintf(desc, desc_len, "%s", g_gpu.state == 0 ? "not opened" : g_gpu.desc);
  pthread_mutex_unlock(&g_gpu.lock);
}
