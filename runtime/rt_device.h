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
  gen_device limits;    /* what its templates' configs must fit (mmt.device), from the driver */
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

/* The workspace of a kernel that asks for one (gen_kernel.workspace_per_block): device memory
 * the kernel keeps between launches, grown to the largest launch so far and reused.  A buffer
 * it outgrows is retired, not freed, until the kernel is unloaded: a launch in flight or a
 * CUDA graph captured with it keeps using it.  Launches of such a kernel are exclusive, so
 * they never share the buffer at one time. */
#define RT_WORKSPACE_MIN_BYTES ((size_t)1 << 20) /* the first allocation's floor */
#define RT_WORKSPACE_RETIRED 48 /* doubling from 1 MiB never retires more */
typedef struct {
  CUdeviceptr ptr;
  size_t bytes;
  unsigned allocs; /* allocations so far: a warm launch that fits adds none */
  int retired_count;
  CUdeviceptr retired[RT_WORKSPACE_RETIRED];
} rt_workspace;

/* The L2 promotion of a TMA map over rows at `base`, `pitch` bytes apart: 256 bytes where
 * every row starts on a 128-byte line, else 128.  A row off a line straddles two, and 256-byte
 * promotion then fetches up to 512 bytes for its 128 (3000^3 f16 nn, 6000-byte rows: 0.1423
 * ms with 256, 0.1264 with 128; aligned shapes the same either way;
 * docs/history/wgmma-shapes.md). */
CUtensorMapL2promotion rt_tma_l2_promotion(uint64_t base, uint64_t pitch);

/* The size to allocate for a launch needing `need` bytes when `have` are allocated: 0 when
 * they suffice, else the larger of twice `have` and `need` rounded up to RT_WORKSPACE_MIN_BYTES
 * (so a kernel whose problems grow one by one allocates O(log) times). */
size_t rt_workspace_grow_size(size_t need, size_t have);

/* Where an exclusive kernel's last launch went, so that the next one on the same stream can
 * skip the wait for it: stream order already puts it after that launch, and every launch
 * before it is ordered before that one.  The stream is known by cuStreamGetId's id, which no
 * other stream of the process ever gets (a handle can be reused once its stream is destroyed).
 * Once a launch has been captured into a graph, replays may run on any stream at any time, so
 * from then on every launch waits. */
typedef struct {
  unsigned long long stream_id; /* of the last launch; 0: none, or one inside a capture */
  bool captured;                /* a launch was captured: every later launch waits */
  uint64_t waits;               /* launches that waited on the event (for tests) */
} rt_launch_trail;

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
  CUfunction copy_fn;   /* repack kernels only: the module's GEN_COPY_ROWS_KERNEL */
  bool copy_dependent;  /* ... launched with programmatic stream serialization (sm_90 on) */
  CUevent last_launch; /* exclusive kernels only: recorded after each launch, waited on by the
                          next, so launches on different streams never overlap */
  rt_launch_trail *trail; /* exclusive kernels only, owned: where the last launch went */
  bool dependent_launch; /* the spec's, on a device of compute capability 9.0 or newer:
                            launched with programmatic stream serialization */
  bool epilogue;      /* an op kernel (the spec's op is not ""): takes an rt_epilogue after ldc */
  bool walks_experts; /* the spec's: a masked kernel whose grid.z may be below G */
  unsigned workspace_per_block; /* the spec's: bytes per block of the grid (0: none) */
  rt_workspace *ws;             /* owned, when workspace_per_block > 0 */
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
 * tensor maps before sm_90, a repack kernel on a device without memory pools), MMT_ERR_CUDA (a
 * repack kernel whose module lacks GEN_COPY_ROWS_KERNEL). */
mmt_status rt_kernel_load(const rt_device *d, const rt_cubin *cubin, const gen_kernel *spec,
                          rt_kernel *out, ut_err *err);
/* Unloads the module.  Safe on a zeroed struct. */
void rt_kernel_unload(rt_kernel *k);

/* The op ABI's epilogue argument (gen.h; the epilogue snippet's struct mmt_epilogue, the same
 * members in the same order).  Device addresses; 0 for a vector the op does not read. */
typedef struct {
  CUdeviceptr d;
  int64_t ldd;
  CUdeviceptr bias, scale_row, scale_col;
  int64_t batch_a, batch_b, batch_c, batch_d; /* elements from one problem to the next */
  CUdeviceptr scale_d, amax; /* an FP8 D's scale and amax (0: none); other kernels' structs
                                end before them (but grouped ones') */
  CUdeviceptr group_rows;    /* grouped: G + 1 row offsets (contiguous) or G counts (masked) */
  CUdeviceptr group_error;   /* grouped: an int the kernels set to 1 on bad group_rows */
  int64_t groups;            /* grouped: G; only grouped kernels' structs hold these three */
} rt_epilogue;
_Static_assert(sizeof(rt_epilogue) == GEN_EPILOGUE_BYTES, "rt_epilogue is the op ABI's struct");

/* Arguments of the GEMM kernel ABI (gen.h).  Device addresses. */
typedef struct {
  int64_t m, n, k;
  float alpha, beta;
  CUdeviceptr a, b, c;
  int64_t lda, ldb, ldc;
  const rt_epilogue *epi; /* an op kernel's epilogue (required there, ignored elsewhere) */
  int64_t batch;  /* an op kernel's problems (0 read as 1): grid.z when its rule is the constant
                    1, at most 65535; a kernel with any other grid.z takes 1 only */
  char group;     /* an op kernel's grouping (gen_op's): 'c' contiguous launches grid.z 1 and
                    min(G, M) more tile rows (batch is G), 'm' masked grid.z = G (a kernel
                    that walks the experts: min(G, tokens)); 0 none */
  int64_t tokens; /* masked: the call's group_tokens, the rows of all experts (0: not known) */
} rt_gemm_args;

/* The grid a launch of k with args gets: k's rule (gen_grid_eval) and then the batch's, a
 * grouped call's experts' (see rt_gemm_args' batch, group and tokens).  Errors:
 * gen_grid_eval's; MMT_ERR_INVALID_ARG for a batch the kernel cannot take (over 65535, or a
 * grid.z of its own), MMT_ERR_UNSUPPORTED for a contiguous call's tile rows past the limit. */
mmt_status rt_launch_grid(const rt_kernel *k, const rt_gemm_args *args, unsigned grid[3],
                          ut_err *err);
/* rt_launch_grid for a kernel emitted but not loaded (what `mmtune explain` prints): the grid
 * a launch of spec with args gets on a device of sm_count SMs.  The same errors. */
mmt_status rt_spec_launch_grid(const gen_kernel *spec, int sm_count, const rt_gemm_args *args,
                               unsigned grid[3], ut_err *err);

/* Bytes of workspace a launch of k with args needs: the blocks of its grid times
 * k->workspace_per_block (0 for a kernel without).  Errors: gen_grid_eval's. */
mmt_status rt_workspace_need(const rt_kernel *k, const rt_gemm_args *args, size_t *bytes,
                             ut_err *err);

/* Grows k's workspace (a kernel without one: nothing) to what a launch with args needs, as
 * that launch would, so that the launch allocates nothing -- inside a stream capture too.
 * Launches of k must not race it (the dispatcher holds its lock).  Makes the kernel's context
 * current.  Errors: gen_grid_eval's, MMT_ERR_CUDA (cuMemAlloc), MMT_ERR_NOMEM. */
mmt_status rt_workspace_reserve(const rt_kernel *k, const rt_gemm_args *args, ut_err *err);

/* Launches the kernel on stream (0: default) with the grid from gen_grid_eval.  Checks sizes
 * and leading dimensions are >= 0 and fit the kernel's int ABI, and the grid limits.  A grid
 * with a zero dimension (e.g. M == 0) launches nothing and returns MMT_OK.  Makes the
 * kernel's context current.  Does not synchronize.  An exclusive kernel's launch first waits
 * for its previous launch (whatever its stream; on the same stream, stream order does it: see
 * rt_launch_trail); in a stream capture, the graph's replays do (external event nodes).
 * Launches of one exclusive kernel must not race each other (the dispatcher makes them under
 * its lock).  A dependent-launch kernel may start while the kernel before it
 * in the stream finishes (it waits in the kernel before touching memory).  A kernel with
 * tensor maps gets them encoded (cuTensorMapEncodeTiled) over this launch's A and B and
 * appended to its arguments; a kernel with a workspace gets its buffer last, grown first when
 * this launch needs more (cuMemAlloc: inside a stream capture that may be refused, and the
 * error says to make the call once before capturing).
 * Errors: MMT_ERR_INVALID_ARG, MMT_ERR_CUDA. */
mmt_status rt_kernel_launch(const rt_kernel *k, const rt_gemm_args *args, CUstream stream,
                            ut_err *err);

#endif /* MMT_RT_DEVICE_H */
