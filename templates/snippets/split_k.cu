/* snippet split_k (templates/snippets): split-K through an fp32 workspace, for kernels whose
 * grid.z is the number of slices of K (blockIdx.z the slice) and whose table says
 * exclusive = true and workspace = (fp32 bytes per block: 4 * NACC * THREADS).
 *
 * Every block of a tile of C narrows K to its slice (splitk_slice), computes the slice's
 * partial sums, then calls
 * splitk_reduce<NACC, THREADS>(acc, WS, tile, tid) with its NACC accumulators per thread (in
 * registers; the same order in every block), the kernel's workspace argument, the tile's
 * number (below grid.x * grid.y, at most SPLITK_TILES) and the thread's index (below
 * THREADS).  Each slice stores its sums to its own place in the workspace, in fp32; the last
 * slice of the tile to arrive gets true back with acc holding the sum of every slice, added
 * in slice order 0, 1, ... whatever order the slices finished in (so results are the same
 * bits from run to run), and runs the epilogue; the others get false and are done.  C is read
 * and written once, by that block, and rounded to its type once.
 *
 * splitk_arrivals[t] counts the slices of tile t that have arrived: zero when the module
 * loads, and the last slice sets it back to zero for the next launch.  The counters and the
 * workspace belong to the module, hence exclusive: two launches must never overlap.
 *
 * Every thread of the THREADS calls it; it synchronises them with SPLITK_SYNC(), which is
 * __syncthreads() unless the kernel defines it first: a barrier of those threads alone, for a
 * block that has others (wgmma's producer warpgroup, still issuing copies or gone). */
#define SPLITK_TILES 65536
__device__ unsigned int splitk_arrivals[SPLITK_TILES];
#ifndef SPLITK_SYNC
#define SPLITK_SYNC() __syncthreads()
#endif

/* Slice blockIdx.z of K, for a kernel whose grid.z is its `split` slices: columns [k0, k0 + kc)
 * cut at K, kc = ceil(ceil(K / split) / step) * step (whole steps of `step` columns: the main
 * loop's, or its vector loads' alignment; the last slices may be shorter, or empty).  K becomes
 * the slice's length (0 for an empty slice: it adds 0) and k0 is returned, for the kernel to
 * move its operands by.  64-bit: split * kc may pass 2^31 when K is near it. */
template <int split, int step>
__device__ __forceinline__ long long splitk_slice(int& K) {
  const long long per = K / split + (K % split != 0); /* ceil(K / split) */
  const long long kc = (per + step - 1) / step * step;  /* whole steps per slice */
  const long long k0 = min((long long)blockIdx.z * kc, (long long)K);
  K = (int)min(kc, K - k0);
  return k0;
}

template <int nacc, int threads> /* lowercase: a template's macros are uppercase */
__device__ __forceinline__ bool splitk_reduce(float* acc, float* __restrict__ ws, long long tile,
                                              int tid) {
  const unsigned slices = gridDim.z, slice = blockIdx.z;
  /* The tile's partial sums: [slice][nacc][threads], a thread's accumulator i of slice z at
   * (z * nacc + i) * threads + tid, so that a warp's stores and loads are coalesced. */
  float* const tile_ws = ws + tile * (long long)slices * nacc * threads;
  float* const mine = tile_ws + (long long)slice * nacc * threads + tid;
#pragma unroll
  for (int i = 0; i < nacc; ++i) __stcg(mine + i * threads, acc[i]);
  /* Release: every thread's sums are visible GPU-wide before thread 0 counts the slice in. */
  __threadfence();
  SPLITK_SYNC();
  __shared__ unsigned splitk_last;
  if (tid == 0) {
    const unsigned before = atomicAdd(&splitk_arrivals[tile], 1u);
    splitk_last = before == slices - 1;
    if (splitk_last) splitk_arrivals[tile] = 0u; /* every slice is in: ready for the next launch */
  }
  SPLITK_SYNC();
  if (!splitk_last) return false;
  __threadfence(); /* acquire: the other slices' sums, read through L2 (not a stale L1 line) */
  /* Slice by slice from zero, this block's own sums read back too (so acc holds the total and
   * no second array of nacc registers is needed).  A thread with few sums loads `batch`
   * slices' sums together, then adds them in slice order: one round trip to L2 for `batch`
   * slices, not one a slice (an fp32 GEMV's last block, 4 sums a thread and 16-64 slices, took
   * 2-5% of the whole kernel less).  Many sums are loads enough in flight already. */
  constexpr int batch = nacc <= 4 ? 8 : nacc <= 8 ? 4 : nacc <= 16 ? 2 : 1;
#pragma unroll
  for (int i = 0; i < nacc; ++i) acc[i] = 0.f;
  unsigned z = 0;
  for (; z + batch <= slices; z += batch) {
    float part[batch][nacc];
#pragma unroll
    for (int b = 0; b < batch; ++b)
#pragma unroll
      for (int i = 0; i < nacc; ++i)
        part[b][i] = __ldcg(tile_ws + (long long)(z + b) * nacc * threads + tid + i * threads);
#pragma unroll
    for (int b = 0; b < batch; ++b)
#pragma unroll
      for (int i = 0; i < nacc; ++i) acc[i] += part[b][i];
  }
  for (; z < slices; ++z) { /* the slices after the last whole batch */
    const float* const part = tile_ws + (long long)z * nacc * threads + tid;
#pragma unroll
    for (int i = 0; i < nacc; ++i) acc[i] += __ldcg(part + i * threads);
  }
  return true;
}
