/* gpu/prune.c -- see gpu/prune.h. */
#include "gpu/prune.h"

#include <stdio.h>

bool tn_prune(const tn_kernel_figures *k, const tn_device_limits *d, char *why, size_t whylen) {
  char sink[1];
  if (!why) {
    why = sink;
    whylen = sizeof sink;
  }
  if (k->local_bytes > 0) {
    snprintf(why, whylen, "spills: %d bytes of local memory per thread (%d registers)",
             k->local_bytes, k->regs);
    return true;
  }
  /* Registers are allocated per warp in units of 256 (8 per thread, rounded up). */
  long regs_per_thread = (k->regs + 7) / 8 * 8;
  long warps = (k->threads + 31) / 32;
  if (regs_per_thread * 32 * warps > d->regs_per_block) {
    snprintf(why, whylen, "%d threads x %d registers exceed the %d registers a block may use",
             k->threads, k->regs, d->regs_per_block);
    return true;
  }
  if (k->shared_bytes > d->shared_per_block) {
    snprintf(why, whylen, "%d bytes of shared memory exceed the %d a block may have",
             k->shared_bytes, d->shared_per_block);
    return true;
  }
  why[0] = '\0';
  return false;
}
