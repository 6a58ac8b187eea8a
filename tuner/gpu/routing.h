/*
 * gpu/routing.h -- mixture-of-experts routings drawn for grouped problems: how many of a
 * call's rows (tokens times top-k) each expert gets.  The tuner times a grouped candidate
 * over several (gpu/measure.h), bench's grouped family compares peers on them.  Prefix tn_.
 * Host code only; deterministic for a seed.
 */
#ifndef MMT_TN_GPU_ROUTING_H
#define MMT_TN_GPU_ROUTING_H

#include <stdint.h>

typedef enum {
  TN_ROUTE_UNIFORM, /* each row's expert drawn uniformly: balanced */
  TN_ROUTE_ZIPF,    /* expert z drawn with weight 1 / (z + 1)^1.2: a few hot experts */
  TN_ROUTE_SPARSE,  /* uniform over a drawn half of the experts, the rest empty */
  TN_ROUTE_KINDS
} tn_route_kind;

/* The name of kind ("uniform", "zipf", "sparse"). */
const char *tn_route_name(tn_route_kind kind);

/* Routes `rows` rows (>= 0) to g experts (g >= 1) as kind says, with a fixed generator seeded
 * by seed: counts[z] the rows of expert z (they add up to rows).  cdf: g doubles of scratch. */
void tn_route(tn_route_kind kind, int64_t g, int64_t rows, uint64_t seed, double *cdf, int *counts);

/* The contiguous layout's G + 1 offsets of counts (offsets[0] = 0, offsets[g] their sum). */
void tn_route_offsets(int64_t g, const int *counts, int32_t *offsets);

#endif /* MMT_TN_GPU_ROUTING_H */
