/* bl_gpu.c -- see bl.h: the GPU path.  One mmtune context, opened at the first call that
 * reaches the threshold, on the device's primary context (the one mmt_gemm uses), with two
 * non-blocking streams of its own (copies, and kernels when a call has panels) and one
 * grow-only device buffer (bl_plan_gpu lays the matrices out in it).  A call binds the
 * primary context, copies A, B (when read) and C (when beta != 0) in, runs mmt_gemm, waits,
 * copies C's M x N elements back, and gives the thread its previous current context back.
 * The mutex makes it one call at a time: the buffers are shared.
 *
 * Copies (MMTUNE_BLAS_STAGING): the driver copies pageable memory at a fraction of what the
 * bus carries, so a part of a matrix of BL_STAGE_MIN bytes or more goes through pinned host
 * memory: BL_SLOTS slots, allocated at the first call that needs them and grown (up to
 * BL_SLOT_BYTES a slot) when a later call needs more, kept until exit.  An upload packs a
 * chunk (bl_stage_plan) from the caller's memory into the next slot with host threads
 * (bl_pool), and queues its DMA; an event recorded after the DMA tells when the slot may be
 * filled again, so the packing of chunk i + 1 runs while chunk i crosses the bus.  The
 * download of C queues BL_SLOTS chunks' DMAs ahead and unpacks each into the caller's C once
 * its event has passed.  Smaller parts, or every part with MMTUNE_BLAS_STAGING=0 or when the
 * host cannot pin memory, are copied directly with one 2D copy.  With panels (bl_plan_panels:
 * wide C, large B), panel j's mmt_gemm runs on the kernel stream, after an event that says
 * its B and C parts arrived, while the host uploads panel j + 1's parts.
 *
 * Failures: a failed open makes the GPU unavailable for the process (every call then runs on
 * the CPU); so does any driver failure afterwards (a broken context stays broken).  A call
 * the GPU path declines for its own sake (device memory exhausted, no kernel for the
 * problem, a compile error) runs on the CPU and the next one tries again.  Either way C is
 * untouched until every panel's kernel has finished, so the CPU can compute the call instead.
 * The context, streams, events, buffers and copy threads live until the process exits
 * (freeing them from a destructor at exit would race the driver's own teardown).
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
#include <unistd.h>

#include "bl.h"
#include "mmtune.h"
#include "rt_driver.h"

#define BL_ALLOC_ROUND ((size_t)2 << 20) /* device buffer and slot sizes: multiples of 2 MiB */
#define BL_SLOTS 4                        /* pinned slots: chunks in flight at once */
#define BL_SLOT_BYTES ((size_t)8 << 20)   /* the most one slot grows to: one chunk */
#define BL_COPY_THREADS 8                 /* the most host threads that pack and unpack */
/* Parts of a matrix below this go by a direct copy: the driver's own staging of pageable
 * memory moves 1 MiB in about 0.1 ms, near the fixed costs of a call, so the slots would buy
 * little; and a process whose calls are all small never pins memory. */
#define BL_STAGE_MIN ((size_t)1 << 20)

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
  CUstream stream;  /* copies, and the kernel of a call without panels */
  CUstream kstream; /* the kernels of a call with panels */
  CUdeviceptr buf;
  size_t cap;
  CUevent slot_done[BL_SLOTS];        /* on stream, after the last DMA of each slot */
  CUevent panel_ready[BL_PANELS_MAX]; /* on stream, after panel j's uploads */
  char *slots;         /* BL_SLOTS pinned slots of slot_bytes each; NULL: none yet */
  size_t slot_bytes;
  unsigned next_slot;  /* the slot the next chunk takes, modulo BL_SLOTS */
  bool pin_failed;     /* cuMemHostAlloc ran out: the slots stay as they are */
  bool pool_made;      /* bl_pool_create was called (pool NULL: the caller copies alone) */
  bl_pool *pool;
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
  RT_CU_CHECK(cu, cuStreamCreate(&g_gpu.kstream, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < BL_SLOTS; i++)
    RT_CU_CHECK(cu, cuEventCreate(&g_gpu.slot_done[i], CU_EVENT_DISABLE_TIMING));
  for (int i = 0; i < BL_PANELS_MAX; i++)
    RT_CU_CHECK(cu, cuEventCreate(&g_gpu.panel_ready[i], CU_EVENT_DISABLE_TIMING));
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

/* The bytes of a chunk of a part of `bytes`: a quarter of it, so that packing and DMA
 * overlap even for a part of a few MiB, at least BL_STAGE_MIN (each chunk costs a wake-up of
 * the copy threads and an event) and at most `slot`. */
static size_t chunk_bytes(size_t bytes, size_t slot) {
  size_t chunk = bytes / BL_SLOTS;
  if (chunk < BL_STAGE_MIN) chunk = BL_STAGE_MIN;
  return chunk < slot ? chunk : slot;
}

/* Pinned slots for a planned call: when a matrix it reads or writes holds BL_STAGE_MIN bytes
 * or more, slots of its chunks' size (at most BL_SLOT_BYTES), unless they are that large
 * already.  The host out of pinned memory is no error: the call copies directly
 * (g_gpu.slots NULL), or through the smaller slots of before. */
static mmt_status reserve_slots(const bl_config *cfg, const bl_plan *p, ut_err *err) {
  const rt_cu *cu = g_gpu.cu;
  const bl_operand *ops[] = {&p->a, &p->b, &p->c};
  size_t want = 0;
  for (int i = 0; i < 3; i++) {
    size_t bytes = ops[i]->dev_ld * sizeof(float) * ops[i]->cols; /* no overflow: planned */
    size_t chunk = chunk_bytes(bytes, BL_SLOT_BYTES);
    if (ops[i]->used && bytes >= BL_STAGE_MIN && chunk > want) want = chunk;
  }
  want = (want + BL_ALLOC_ROUND - 1) / BL_ALLOC_ROUND * BL_ALLOC_ROUND;
  if (want <= g_gpu.slot_bytes || g_gpu.pin_failed) return MMT_OK;
  void *fresh = NULL;
  CUresult r = cu->cuMemHostAlloc(&fresh, BL_SLOTS * want, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    g_gpu.pin_failed = true; /* not tried again */
    if (cfg->verbose)
      bl_say("cuMemHostAlloc(%zu bytes): out of memory; larger copies from pageable memory",
             BL_SLOTS * want);
    return MMT_OK;
  }
  if (r != CUDA_SUCCESS) return rt_cu_fail(err, "cuMemHostAlloc", r);
  if (g_gpu.slots) { /* every DMA of the old slots has finished: the last call waited */
    r = cu->cuMemFreeHost(g_gpu.slots);
    g_gpu.slots = NULL;
    g_gpu.slot_bytes = 0;
    if (r != CUDA_SUCCESS) {
      cu->cuMemFreeHost(fresh); /* failing already: its result adds nothing */
      return rt_cu_fail(err, "cuMemFreeHost", r);
    }
  }
  g_gpu.slots = fresh;
  g_gpu.slot_bytes = want;
  if (!g_gpu.pool_made) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus >= 2 * BL_COPY_THREADS ? BL_COPY_THREADS : cpus >= 2 ? (int)cpus / 2 : 1;
    g_gpu.pool = bl_pool_create(threads);
    g_gpu.pool_made = true;
  }
  if (cfg->verbose)
    bl_say("copies of %zu bytes or more through %d pinned slots of %zu MiB, packed by %d "
           "threads",
           BL_STAGE_MIN, BL_SLOTS, want >> 20, bl_pool_threads(g_gpu.pool));
  return MMT_OK;
}

/* Element (r.row0, r.col0) of op: in the caller's memory at host, and in the buffer. */
static char *host_at(const bl_operand *op, const void *host, bl_rect r) {
  return (char *)(uintptr_t)host + (r.row0 + r.col0 * op->host_ld) * sizeof(float);
}
static CUdeviceptr dev_at(const bl_operand *op, bl_rect r) {
  return g_gpu.buf + op->dev_offset + (r.row0 + r.col0 * op->dev_ld) * sizeof(float);
}

/* One 2D copy of `lines` lines of `width` bytes between host memory and the buffer, queued on
 * the copy stream (pitches in bytes). */
static mmt_status copy2d(CUdeviceptr dev, size_t dev_pitch, const void *host, size_t host_pitch,
                         size_t width, size_t lines, bool to_device, ut_err *err) {
  mmt_status rc = MMT_OK;
  CUDA_MEMCPY2D d;
  memset(&d, 0, sizeof d);
  if (to_device) {
    d.srcMemoryType = CU_MEMORYTYPE_HOST;
    d.srcHost = host;
    d.srcPitch = host_pitch;
    d.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    d.dstDevice = dev;
    d.dstPitch = dev_pitch;
  } else {
    d.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    d.srcDevice = dev;
    d.srcPitch = dev_pitch;
    d.dstMemoryType = CU_MEMORYTYPE_HOST;
    d.dstHost = (void *)(uintptr_t)host;
    d.dstPitch = host_pitch;
  }
  d.WidthInBytes = width;
  d.Height = lines;
  RT_CU_CHECK(g_gpu.cu, cuMemcpy2DAsync(&d, g_gpu.stream));
cleanup:
  return rc;
}

/* Whether `part` goes through the slots (else by one direct copy), and its plan if so. */
static bool staged(const bl_operand *op, bl_rect part, bool stage, bl_stage *s) {
  size_t bytes = part.rows * part.cols * sizeof(float); /* no overflow: planned */
  if (!stage || !g_gpu.slots || bytes < BL_STAGE_MIN) return false;
  size_t chunk = chunk_bytes(bytes, g_gpu.slot_bytes);
  return bl_stage_plan(op, part, chunk / sizeof(float), s) && s->count > 0;
}

/* The DMA of chunk c of plan s between `slot` and the buffer, then the slot's event.  Whole
 * columns at the device pitch move with their padding: one contiguous range. */
static mmt_status chunk_dma(const bl_operand *op, const bl_stage *s, bl_rect c, unsigned k,
                            bool to_device, ut_err *err) {
  mmt_status rc = MMT_OK;
  size_t width = bl_stage_width(s, c) * sizeof(float);
  const char *slot = g_gpu.slots + k * g_gpu.slot_bytes;
  if ((rc = copy2d(dev_at(op, c), op->dev_ld * sizeof(float), slot, s->pitch * sizeof(float),
                   width, c.cols, to_device, err)))
    return rc;
  RT_CU_CHECK(g_gpu.cu, cuEventRecord(g_gpu.slot_done[k], g_gpu.stream));
cleanup:
  return rc;
}

/* Queues the upload of `part` of op from the caller's matrix at host. */
static mmt_status upload(const bl_operand *op, bl_rect part, const void *host, bool stage,
                         ut_err *err) {
  mmt_status rc = MMT_OK;
  bl_stage s;
  if (!staged(op, part, stage, &s))
    return copy2d(dev_at(op, part), op->dev_ld * sizeof(float), host_at(op, host, part),
                  op->host_ld * sizeof(float), part.rows * sizeof(float), part.cols, true, err);
  for (size_t i = 0; i < s.count; i++) {
    bl_rect c = bl_stage_chunk(&s, i);
    unsigned k = g_gpu.next_slot++ % BL_SLOTS;
    RT_CU_CHECK(g_gpu.cu, cuEventSynchronize(g_gpu.slot_done[k])); /* its last DMA is done */
    bl_pool_copy(g_gpu.pool, g_gpu.slots + k * g_gpu.slot_bytes, s.pitch * sizeof(float),
                 host_at(op, host, c), op->host_ld * sizeof(float), c.rows * sizeof(float),
                 c.cols);
    if ((rc = chunk_dma(op, &s, c, k, true, err))) return rc;
  }
cleanup:
  return rc;
}

/* Copies all of C back to the caller's c, and waits. */
static mmt_status download(const bl_operand *op, float *host, bool stage, ut_err *err) {
  mmt_status rc = MMT_OK;
  bl_rect all = {0, 0, op->rows, op->cols};
  bl_stage s;
  if (!staged(op, all, stage, &s)) {
    rc = copy2d(dev_at(op, all), op->dev_ld * sizeof(float), host, op->host_ld * sizeof(float),
                op->rows * sizeof(float), op->cols, false, err);
    if (rc) return rc;
    RT_CU_CHECK(g_gpu.cu, cuStreamSynchronize(g_gpu.stream));
    return MMT_OK;
  }
  unsigned first = g_gpu.next_slot; /* chunk i uses slot (first + i) % BL_SLOTS */
  g_gpu.next_slot += (unsigned)(s.count % BL_SLOTS);
  for (size_t i = 0; i < s.count && i < BL_SLOTS; i++)
    if ((rc = chunk_dma(op, &s, bl_stage_chunk(&s, i), (first + (unsigned)i) % BL_SLOTS, false,
                        err)))
      return rc;
  for (size_t i = 0; i < s.count; i++) {
    bl_rect c = bl_stage_chunk(&s, i);
    unsigned k = (first + (unsigned)(i % BL_SLOTS)) % BL_SLOTS;
    RT_CU_CHECK(g_gpu.cu, cuEventSynchronize(g_gpu.slot_done[k]));
    bl_pool_copy(g_gpu.pool, host_at(op, host, c), op->host_ld * sizeof(float),
                 g_gpu.slots + k * g_gpu.slot_bytes, s.pitch * sizeof(float),
                 c.rows * sizeof(float), c.cols);
    if (i + BL_SLOTS < s.count &&
        (rc = chunk_dma(op, &s, bl_stage_chunk(&s, i + BL_SLOTS), k, false, err)))
      return rc;
  }
cleanup:
  return rc;
}

/* Failures that leave the GPU usable for the next call. */
static bool declined_only(mmt_status s) {
  return s == MMT_ERR_NOMEM || s == MMT_ERR_UNSUPPORTED || s == MMT_ERR_COMPILE ||
         s == MMT_ERR_INVALID_ARG || s == MMT_ERR_TEMPLATE || s == MMT_ERR_TEMPLATE_LIMIT;
}

/* mmt_gemm on panel c of C (columns of C) and part b of B, on stream ks. */
static mmt_status gemm_panel(const bl_gemm *g, const bl_plan *p, bl_rect b, bl_rect c,
                             CUstream ks, ut_err *err) {
  const void *a = p->a.used ? (const void *)(uintptr_t)(g_gpu.buf + p->a.dev_offset) : NULL;
  const void *bd = p->b.used ? (const void *)(uintptr_t)dev_at(&p->b, b) : NULL;
  void *cd = (void *)(uintptr_t)dev_at(&p->c, c);
  mmt_status rc = g_mmt.mmt_gemm(
      g_gpu.ctx, MMT_COL_MAJOR, g->trans_a ? MMT_TRANS : MMT_NO_TRANS,
      g->trans_b ? MMT_TRANS : MMT_NO_TRANS, g->m, (int64_t)c.cols, g->k, g->alpha, a,
      (int64_t)p->a.dev_ld, bd, (int64_t)p->b.dev_ld, g->beta, cd, (int64_t)p->c.dev_ld, MMT_F32,
      ks);
  if (rc) return ut_fail(err, rc, "mmt_gemm: %s", g_mmt.mmt_errmsg(g_gpu.ctx));
  return MMT_OK;
}

/* Inputs in, mmt_gemm on each panel, wait.  Nothing touches the host's C. */
static mmt_status compute(const bl_config *cfg, const bl_gemm *g, const bl_plan *p, bool stage,
                          ut_err *err) {
  const rt_cu *cu = g_gpu.cu;
  mmt_status rc = MMT_OK;
  bl_panels ps = bl_plan_panels(p, cfg->staging == BL_STAGE_PANELS ? BL_PANELS_MAX : 1);
  CUstream ks = ps.count > 1 ? g_gpu.kstream : g_gpu.stream;
  bl_rect all_a = {0, 0, p->a.rows, p->a.cols};
  if (p->a.used && (rc = upload(&p->a, all_a, g->a, stage, err))) return rc;
  for (size_t j = 0; j < ps.count; j++) {
    bl_rect b, c;
    bl_panel_parts(p, g->trans_b, ps, j, &b, &c);
    if (p->b.used && (rc = upload(&p->b, b, g->b, stage, err))) return rc;
    if (p->upload_c && (rc = upload(&p->c, c, g->c, stage, err))) return rc;
    if (ks != g_gpu.stream) {
      RT_CU_CHECK(cu, cuEventRecord(g_gpu.panel_ready[j], g_gpu.stream));
      RT_CU_CHECK(cu, cuStreamWaitEvent(ks, g_gpu.panel_ready[j], 0));
    }
    if ((rc = gemm_panel(g, p, b, c, ks, err))) return rc;
  }
  RT_CU_CHECK(cu, cuStreamSynchronize(ks));
cleanup:
  return rc;
}

static bl_gpu_result run(const bl_config *cfg, const bl_gemm *g, const bl_plan *p) {
  const rt_cu *cu = g_gpu.cu;
  ut_err e = {{0}}, *err = &e;
  CUcontext prev = NULL;
  bool bound = false, computed = false, fetched = false;
  bool stage = cfg->staging != BL_STAGE_DIRECT;
  mmt_status rc = MMT_OK;
  RT_CU_CHECK(cu, cuCtxGetCurrent(&prev));
  if (prev != g_gpu.cuctx) RT_CU_CHECK(cu, cuCtxSetCurrent(g_gpu.cuctx));
  bound = true;
  if ((rc = reserve(p->bytes, err))) goto cleanup;
  if (stage && (rc = reserve_slots(cfg, p, err))) goto cleanup;
  if ((rc = compute(cfg, g, p, stage, err))) goto cleanup;
  computed = true;
  if ((rc = download(&p->c, g->c, stage, err))) goto cleanup;
  fetched = true;
cleanup:
  /* A declined call may leave copies and kernels queued: they finish before the next call
   * reuses the buffers and slots. */
  if (bound && rc && declined_only(rc)) {
    CUresult r = cu->cuCtxSynchronize();
    if (r != CUDA_SUCCESS) rc = rt_cu_fail(err, "cuCtxSynchronize (after a declined call)", r);
  }
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
