/*
 * rt_device.h -- a CUDA device (primary context), loaded kernels and launches.  Prefix rt_.
 *
 * Every function returns MMT_ERR_NO_DRIVER / MMT_ERR_NO_DEVICE cleanly on a machine without a
 * driver or device.  The context is made current on the calling thread by each call that
 * needs it.
 */
#ifndef MMT_RT_DEVICE_H
#define MMT_RT_DEVICE_H

#include <cuda.h>
#include <stdbool.h>

#include "db.h"
#include "gen.h"
#include "rt_compile.h"
#include "rt_driver.h"

typedef struct {
  int ordinal;
  CUdevice dev;
  CUcontext ctx; /* retained primary context */
  db_device info;
  char arch[16];        /* "sm_90" */
  int max_shared_optin; /* bytes per block with the opt-in attribute */
  size_t total_mem;
  /* Stream-ordered scratch for repack launches (NULL where the device has no memory pools).
   * It keeps what it has reserved across synchronizations (release threshold: never), so
   * after the first unaligned call of a size, later ones allocate nothing. */
  CUmemoryPool scratch;
} rt_device;

/* Opens device `ordinal`: driver, device, primary context retained and made current, info
 * filled (uuid as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", arch "sm_<major><minor>"), the
 * scratch pool created.  On failure *out is zeroed.  Errors: MMT_ERR_NO_DRIVER,
 * MMT_ERR_NO_DEVICE (no device, or ordinal out of range: "device 3 requested but 1 CUDA
 * device(s) present"), MMT_ERR_CUDA. */
mmt_status rt_device_open(int ordinal, rt_device *out, ut_err *err);
/* Destroys the scratch pool (its memory is freed once no launch uses it) and releases the
 * primary context.  Safe on a zeroed struct. */
void rt_device_close(rt_device *d);
/* Makes the device's context current on this thread. */
mmt_status rt_device_bind(const rt_device *d, ut_err *err);

/* A kernel loaded from a cubin, with the compiler's resource figures. */
typedef struct {
  CUcontext ctx; /* the device's context (borrowed): made current to launch and unload */
  CUmodule module;
  CUfunction fn;
  unsigned block[3];
  gen_grid_dim grid[3];
  int sm_count; /* the device's multiprocessors: what a per-SM grid rule multiplies */
  unsigned shared_bytes;
  gen_requires requires;
  char dtype[8], layout[4]; /* what the kernel was emitted for (its tensor maps need them) */
  int ntensor_maps;
  gen_tensor_map tensor_maps[GEN_MAX_TENSOR_MAPS]; /* encoded at each launch */
  CUmemoryPool scratch; /* repack kernels only: the device's scratch pool (borrowed) */
  CUevent last_launch; /* exclusive kernels only: recorded after each launch, waited on by the
                          next, so launches on different streams never overlap */
  bool dependent_launch; /* the spec's, on a device of compute capability 9.0 or newer:
                            launched with programmatic stream serialization */
  int regs, static_shared_bytes, local_bytes, max_threads;
} rt_kernel;

/* Loads the cubin, looks up spec->kernel_name, raises the dynamic shared-memory limit when
 * the kernel's static plus spec->shared_bytes exceed 48 KiB, reads attributes, and copies
 * block, grid, shared_bytes and requires from spec (spec is not kept).  The kernel borrows
 * d's context: unload it before rt_device_close.
 * Errors: MMT_ERR_INVALID_ARG (no name, empty block, empty cubin), MMT_ERR_CUDA (e.g. kernel
 * name not in the module, cubin for another architecture), MMT_ERR_UNSUPPORTED (block threads
 * beyond the kernel's limit, "needs 1024 threads but kernel allows 768 (registers)", shared
 * memory beyond d->max_shared_optin, a kernel arch the device cannot run (rt_kernel_arch), or
 * tensor maps before sm_90, a repack kernel on a device without memory pools). */
mmt_status rt_kernel_load(const rt_device *d, const rt_cubin *cubin, const gen_kernel *spec,
                          rt_kernel *out, ut_err *err);
/* Unloads the module.  Safe on a zeroed struct. */
void rt_kernel_unload(rt_kernel *k);

/* Arguments of the GEMM kernel ABI (gen.h).  Device addresses. */
typedef struct {
  int64_t m, n, k;
  float alpha, beta;
  CUdeviceptr a, b, c;
  int64_t lda, ldb, ldc;
} rt_gemm_args;

/* Launches the kernel on stream (0: default) with the grid from gen_grid_eval.  Checks sizes
 * and leading dimensions are >= 0 and fit the kernel's int ABI, and the grid limits.  A grid
 * with a zero dimension (e.g. M == 0) launches nothing and returns MMT_OK.  Makes the
 * kernel's context current.  Does not synchronize.  An exclusive kernel's launch first waits
 * for its previous launch (whatever its stream); in a stream capture, the graph's replays
 * do (external event nodes).  A dependent-launch kernel may start while the kernel before it
 * in the stream finishes (it waits in the kernel before touching memory).  A kernel with
 * tensor maps gets them encoded (cuTensorMapEncodeTiled) over this launch's A and B and
 * appended to its arguments.
 * Errors: MMT_ERR_INVALID_ARG, MMT_ERR_CUDA. */
mmt_status rt_kernel_launch(const rt_kernel *k, const rt_gemm_args *args, CUstream stream,
                            ut_err *err);

#endif /* MMT_RT_DEVICE_H */
