/*
 * gpu/guard.h -- guarded device buffers: memory mapped between two unmapped ranges, so that
 * a kernel that touches one byte before or after an operand placed flush against either end
 * faults (CUDA_ERROR_ILLEGAL_ADDRESS) instead of reading a neighbour's bytes unnoticed, as
 * Tensile's verification does.  Prefix tn_.
 *
 * Built on the driver's virtual memory management: a virtual range is reserved with
 * cuMemAddressReserve and only its middle is backed (cuMemCreate, cuMemMap at the driver's
 * granularity); the granule before and the one after stay unmapped.  The tuner's
 * verification launch puts A, B and C in three of these (gpu/verify.c).
 */
#ifndef MMT_TN_GPU_GUARD_H
#define MMT_TN_GPU_GUARD_H

#include <stddef.h>

#include "rt_driver.h"

typedef struct {
  CUdeviceptr va;     /* the reserved range: [guard granule | mapped | guard granule] */
  size_t va_bytes;
  CUdeviceptr mapped; /* first mapped byte */
  size_t mapped_bytes;
  CUmemGenericAllocationHandle handle;
  int has_handle, is_mapped;
} tn_guard;

/* Which end of the mapped range an operand is flush against. */
typedef enum { TN_GUARD_END, TN_GUARD_START } tn_guard_side;

/* Whether device `dev` can have guarded buffers: MMT_OK with *gran the mapping granularity,
 * or MMT_ERR_UNSUPPORTED with the reason in err (no virtual memory management, or
 * $MMTUNE_GUARD_PAGES is "0": the fallback, testable on any GPU).  Other driver errors as
 * MMT_ERR_CUDA. */
mmt_status tn_guard_probe(const rt_cu *cu, CUdevice dev, size_t *gran, ut_err *err);

/* Makes g map at least `bytes` (rounded up to gran) on device dev, keeping what it has when
 * that is enough.  On failure g is freed (zeroed).  Errors: MMT_ERR_CUDA (out of memory
 * included). */
mmt_status tn_guard_reserve(const rt_cu *cu, CUdevice dev, size_t gran, tn_guard *g, size_t bytes,
                            ut_err *err);

/* Unmaps and frees everything; g is zeroed.  Safe on a zeroed struct.  The context must be
 * current and alive. */
void tn_guard_free(const rt_cu *cu, tn_guard *g);

/* Where an operand of `bytes` (<= g->mapped_bytes) starts: TN_GUARD_START, at the first
 * mapped byte; TN_GUARD_END, so that it ends at the last mapped byte, its start rounded down
 * to `align` (a power of two; the alignment the kernel is verified for), so it ends fewer than
 * `align` bytes before the unmapped granule. */
CUdeviceptr tn_guard_place(const tn_guard *g, size_t bytes, unsigned align, tn_guard_side side);

#endif /* MMT_TN_GPU_GUARD_H */
