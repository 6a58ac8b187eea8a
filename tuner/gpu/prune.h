/*
 * gpu/prune.h -- which compiled candidates are never timed.  Prefix tn_.
 *
 * After a candidate compiles and loads, the compiler's figures (read from the module with
 * cuFuncGetAttribute) can rule it out before any launch: a kernel that spills to local memory
 * is not a contender, and one whose block needs more registers or shared memory than a
 * multiprocessor has cannot launch at all.  Pure function of the figures: unit-tested on the
 * CPU with known numbers.
 */
#ifndef MMT_TN_GPU_PRUNE_H
#define MMT_TN_GPU_PRUNE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
  int regs;          /* registers per thread */
  int local_bytes;   /* local memory per thread (spills, run-time indexed arrays) */
  int threads;       /* threads per block */
  int shared_bytes;  /* static + dynamic shared memory per block */
} tn_kernel_figures;

typedef struct {
  int regs_per_block;        /* registers a block may use: 65536 on sm_70..sm_90 */
  int shared_per_block;   /* the opt-in maximum per block */
} tn_device_limits;

/* True when the candidate must not be timed; why (may be NULL) gets the reason. */
bool tn_prune(const tn_kernel_figures *k, const tn_device_limits *d, char *why, size_t whylen);

#endif /* MMT_TN_GPU_PRUNE_H */
