/*
 * rt_compile.h -- NVRTC: CUDA C source -> cubin for one architecture, with an on-disk cubin
 * cache.  Prefix rt_.  Needs no GPU and no driver (runs in CI).
 *
 * Cache key: hash of (source, options, NVRTC version).  Entries are written atomically
 * (<dir>/<key>.cubin), so concurrent compilers and crashed runs never leave a torn file.
 * Thread-safe: NVRTC programs are per call; many threads may compile at once.
 */
#ifndef MMT_RT_COMPILE_H
#define MMT_RT_COMPILE_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

typedef struct {
  void *data; /* owned (free) */
  size_t size;
} rt_cubin;

void rt_cubin_free(rt_cubin *c);

/* mmtune's fixed NVRTC options, what every compile passes after the architecture option:
 * *opts points at the first of the returned count. */
int rt_compile_fixed_options(const char *const **opts);

/* "13.0" (nvrtcVersion) into out. */
mmt_status rt_nvrtc_version(char *out, size_t outlen, ut_err *err);

/*
 * Compiles `source` for `arch` ("sm_90", "sm_80", "sm_90a") with mmtune's fixed options
 * (-std=c++17, -default-device, --use_fast_math is NOT used).  `name` labels the program in
 * logs.  On success *cubin is filled.  *log (may be NULL) receives the NVRTC log, owned by
 * the caller, on success and on failure (NULL when empty).
 * Errors: MMT_ERR_COMPILE (message starts with the first error line of the log),
 * MMT_ERR_INVALID_ARG (bad arch text), MMT_ERR_NOMEM.
 */
mmt_status rt_compile(const char *source, const char *name, const char *arch, rt_cubin *cubin,
                      char **log, ut_err *err);

/*
 * The architecture to compile a kernel for on a device of `device_arch` ("sm_90"), given the
 * kernel's own `kernel_arch` (gen_kernel.arch; NULL or "": none).  No arch of its own: the
 * device's.  An arch-specific one ("sm_90a": wgmma, setmaxnreg) runs only on exactly its
 * base ("sm_90") and is compiled as itself.  A plain one ("sm_80") is a minimum: the device's
 * own arch when it is at least that.  Errors: MMT_ERR_UNSUPPORTED when the device cannot run
 * the kernel ("the kernel needs sm_90a (compute capability 9.0 exactly); the device is
 * sm_80"), MMT_ERR_INVALID_ARG for malformed arch text.
 */
mmt_status rt_kernel_arch(const char *device_arch, const char *kernel_arch, char out[16],
                          ut_err *err);

/*
 * rt_compile through the disk cache in `cache_dir` (created if missing; NULL or "": no cache).
 * The entry is <cache_dir>/<16 hex>.cubin, the hex a hash of (source, options with the
 * architecture, NVRTC version); `name` is not part of the key.  *hit (may be NULL) says
 * whether the cubin came from the cache; on a hit *log is NULL (nothing was compiled).  An
 * entry that is not a whole ELF file (torn, truncated, foreign) is a miss and is rewritten.
 * A cache that cannot be written is not an error (the cubin is still returned).
 */
mmt_status rt_compile_cached(const char *cache_dir, const char *source, const char *name,
                             const char *arch, rt_cubin *cubin, bool *hit, char **log, ut_err *err);

/* A template's kernel for a device: rt_compile_cached for the architecture rt_kernel_arch
 * picks from device_arch and the kernel's own kernel_arch (gen_kernel.arch), written to
 * arch_out (may be NULL) when it succeeds.  What the tuner's compile pool, `mmtune bench` and
 * `mmtune measure` do with an emitted kernel.  Errors: rt_kernel_arch's and
 * rt_compile_cached's. */
mmt_status rt_compile_for_device(const char *cache_dir, const char *device_arch,
                                 const char *kernel_arch, const char *source, const char *name,
                                 rt_cubin *cubin, bool *hit, char arch_out[16], ut_err *err);

/* One kernel of rt_compile_batch: what to compile (borrowed) and what came of it. */
typedef struct {
  const char *source, *name; /* IN: as rt_compile_cached's */
  char arch[16];             /* IN: "sm_90a" (rt_kernel_arch's answer) */
  rt_cubin cubin;            /* OUT: on success; the caller frees it (rt_cubin_free) */
  char *log;                 /* OUT: the NVRTC log, as rt_compile_cached's (free) */
  mmt_status rc;             /* OUT */
  ut_err err;                /* OUT: the message when rc != MMT_OK */
} rt_compile_job;

/*
 * rt_compile_cached of each of count jobs, up to `threads` at once (0: one per online CPU,
 * at most 64), on threads of its own (the calling thread alone when none can start); returns
 * when all are done.  Each job's outcome is in the job: a failed compile does not stop the
 * others.  What a cold start (mmt_matmul_prepare) and the template tests use, where compiles
 * are independent and NVRTC's single-threaded front end is the bottleneck.
 */
void rt_compile_batch(const char *cache_dir, rt_compile_job *jobs, int count, int threads);

#endif /* MMT_RT_COMPILE_H */
