/*
 * gpu/routing.c -- see gpu/routing.h.
 */
#include "gpu/routing.h"

#include <math.h>
#include <string.h>

const char *tn_route_name(tn_route_kind kind) {
  static const char *const names[TN_ROUTE_KINDS] = {"uniform", "zipf", "sparse"};
  return kind >= 0 && kind < TN_ROUTE_KINDS ? names[kind] : "?";
}

/* splitmix64's output function: whether expert z takes part in a sparse routing. */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void tn_route(tn_route_kind kind, int64_t g, int64_t rows, uint64_t seed, double *cdf,
              int *counts) {
  double total = 0;
  int64_t active = 0;
  for (int64_t z = 0; z < g; z++) {
    double w = 1.0;
    if (kind == TN_ROUTE_ZIPF) w = pow((double)(z + 1), -1.2);
    /* sparse: about half the experts, and the last one when none was drawn */
    if (kind == TN_ROUTE_SPARSE && (mix(seed * 0x100000001b3ull + (uint64_t)z) & 1) &&
        (active > 0 || z < g - 1))
      w = 0.0;
    active += w > 0;
    cdf[z] = total += w;
  }
  memset(counts, 0, (size_t)g * sizeof *counts);
  uint64_t x = seed | 1;
  for (int64_t i = 0; i < rows; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const double u = (double)(x >> 11) / 9007199254740992.0 * total;
    int64_t lo = 0, hi = g - 1; /* the first z with u < cdf[z]: never a zero-weight one */
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (u < cdf[mid])
        hi = mid;
      else
        lo = mid + 1;
    }
    counts[lo]++;
  }
}

void tn_route_offsets(int64_t g, const int *counts, int32_t *offsets) {
  offsets[0] = 0;
  for (int64_t z = 0; z < g; z++) offsets[z + 1] = offsets[z] + counts[z];
}
