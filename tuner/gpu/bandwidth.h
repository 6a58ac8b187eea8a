/*
 * gpu/bandwidth.h -- what memory-bound kernels can reach on the device, for `mmtune bench`'s
 * figures: the copy bandwidth, and the time of a plain read of a problem's bytes.  On the
 * measurement's device context (gpu/measure.h).  Prefix tn_.
 */
#ifndef MMT_TN_GPU_BANDWIDTH_H
#define MMT_TN_GPU_BANDWIDTH_H

#include <stdbool.h>

#include "gpu/measure.h"

/* The device's copy bandwidth in bytes per second (read plus write): the median of timed
 * device-to-device copies of a buffer 4x the L2 (at least 256 MiB), what a memory-bound kernel
 * can hope to reach. */
mmt_status tn_gpu_copy_bandwidth(tn_gpu *g, double *bytes_per_s, ut_err *err);

/* The time in ms of the fastest plain read of `bytes` (rounded up to 16) that a kernel does
 * (16-byte loads past L1, the fastest of a few grids), timed as tn_gpu_measure times a kernel:
 * back-to-back launches with an event between each two, the median, over copies rotated as a
 * problem's are (cold: more than twice the L2 between two reads of one copy, for reads of
 * about 13 KB and more at a 50 MiB L2).  What a memory-bound kernel moving those bytes can
 * reach at that size: below a few tens of MiB the launch's ramp-up and drain are a visible
 * share of the time, which a copy bandwidth measured over a large buffer does not show.
 * Errors: MMT_ERR_CUDA. */
mmt_status tn_gpu_read_ms(tn_gpu *g, double bytes, bool cold, double *ms, ut_err *err);

#endif /* MMT_TN_GPU_BANDWIDTH_H */
