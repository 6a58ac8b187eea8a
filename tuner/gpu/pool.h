/*
 * gpu/pool.h -- a pool of CPU threads compiling CUDA sources with NVRTC (through the disk
 * cubin cache) ahead of the GPU.  Prefix tn_.
 *
 * The submitting thread emits sources (Lua is single-threaded) and submits them; worker
 * threads compile; tn_pool_next() hands results back in SUBMISSION order, so the consumer
 * (the GPU loop) sees a deterministic sequence while compiles run ahead in parallel.
 * One producer/consumer thread; internally synchronized.
 */
#ifndef MMT_TN_GPU_POOL_H
#define MMT_TN_GPU_POOL_H

#include <stdbool.h>

#include "rt_compile.h"
#include "util.h"

typedef struct tn_pool tn_pool;

typedef struct {
  void *tag;          /* what the submitter passed */
  mmt_status rc;      /* MMT_OK or the compile failure */
  char error[512];    /* first lines of the failure ("" when ok) */
  rt_cubin cubin;     /* owned by the receiver when rc == MMT_OK (rt_cubin_free) */
  bool cache_hit;
  double seconds;     /* wall time of this compile */
} tn_pool_result;

/* arch: the device's ("sm_90").  threads <= 0: the number of online CPUs.  cache_dir NULL: no disk cache. */
mmt_status tn_pool_start(int threads, const char *arch, const char *cache_dir, tn_pool **out,
                         ut_err *err);
/* Queues a compile.  The pool copies source and name.  kernel_arch is the kernel's own
 * architecture (gen_kernel.arch; NULL or "": none): the job compiles for what rt_kernel_arch
 * picks from it and the pool's arch, and fails (MMT_ERR_UNSUPPORTED) when that device arch
 * cannot run it. */
mmt_status tn_pool_submit(tn_pool *p, const char *source, const char *name,
                          const char *kernel_arch, void *tag, ut_err *err);
/* Blocks for the next result in submission order.  Returns false when every submitted job
 * has been handed back. */
bool tn_pool_next(tn_pool *p, tn_pool_result *out);
/* Number of submitted jobs not yet handed back. */
int tn_pool_pending(tn_pool *p);
/* Stops the threads (drops queued jobs) and frees.  NULL is a no-op. */
void tn_pool_free(tn_pool *p);

#endif /* MMT_TN_GPU_POOL_H */
