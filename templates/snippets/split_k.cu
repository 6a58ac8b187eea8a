/* snippet split_k (templates/snippets): split-K through an fp32 workspace.  A tile of C whose
 * K is computed in parts, by different blocks, meets in the kernel's workspace argument: each
 * part stores its partial sums there, in fp32, and counts itself in; the last part to arrive
 * adds every part's sums in a fixed order and runs the epilogue, the others are done.  C is
 * read and written once, by that block, and rounded to its type once; the order of the sum
 * does not depend on the order the parts finished in, so results are the same bits from run
 * to run.  The kernel's table says exclusive = true and declares its workspace: the counters
 * and the workspace belong to the module, so two launches must never overlap.
 *
 * A part's sums: NACC accumulators per thread (in registers; the same order in every block)
 * of THREADS threads, stored as [NACC][THREADS] floats (accumulator i of thread tid at
 * i * THREADS + tid: a warp's stores and loads are coalesced), 4 * NACC * THREADS bytes.
 *
 * Two levels:
 *   splitk_reduce<NACC, THREADS>(acc, WS, tile, tid): for kernels whose grid.z is the number
 *     of slices of K (blockIdx.z the slice) and whose workspace is 4 * NACC * THREADS bytes a
 *     block: true for the last slice of tile `tile` (below SPLITK_TILES), acc then holding
 *     the sum of every slice in slice order 0, 1, ...
 *   splitk_arrive<NACC, THREADS>(acc, part, tile, share, total, tid) stores acc at `part` and
 *     adds `share` to the tile's count: true for the part that completes `total`, which then
 *     sums the parts itself with splitk_add (its own sums read back from `part`, so that the
 *     order is the caller's, not the arrival order).  For other splits of K (stream-K).
 * Every thread of the THREADS calls them; they synchronise with SPLITK_SYNC(), which is
 * __syncthreads() unless the kernel defines it first (a barrier of those threads alone, when
 * the block has others, e.g. a warp-specialized producer that has left).  tid is the thread's
 * index among the THREADS (0 counts the part in).
 *
 * splitk_arrivals[t] counts what has arrived of tile t: zero when the module loads, and the
 * last part sets it back to zero for the next launch. */
#define SPLITK_TILES 65536
__device__ unsigned int splitk_arrivals[SPLITK_TILES];
#ifndef SPLITK_SYNC
#define SPLITK_SYNC() __syncthreads()
#endif

template <int nacc, int threads> /* lowercase: a template's macros are uppercase */
__device__ __forceinline__ bool splitk_arrive(const float* acc, float* __restrict__ part,
                                              long long tile, unsigned share, unsigned total,
                                              int tid) {
  float* const mine = part + tid;
#pragma unroll
  for (int i = 0; i < nacc; ++i) __stcg(mine + i * threads, acc[i]);
  /* Release: every thread's sums are visible GPU-wide before thread 0 counts the part in. */
  __threadfence();
  SPLITK_SYNC();
  __shared__ unsigned splitk_last;
  if (tid == 0) {
    const unsigned before = atomicAdd(&splitk_arrivals[tile], share);
    splitk_last = before + share == total;
    if (splitk_last) splitk_arrivals[tile] = 0u; /* every part is in: ready for the next launch */
  }
  SPLITK_SYNC();
  if (!splitk_last) return false;
  __threadfence(); /* acquire: the other parts' sums, read through L2 (not a stale L1 line) */
  return true;
}

/* acc += the sums of one part (stored by splitk_arrive at `part`), its nacc loads issued
 * together (one round trip to L2 a part, not one a sum). */
template <int nacc, int threads>
__device__ __forceinline__ void splitk_add(float* acc, const float* __restrict__ part, int tid) {
#pragma unroll
  for (int i = 0; i < nacc; ++i) acc[i] += __ldcg(part + tid + i * threads);
}

template <int nacc, int threads>
__device__ __forceinline__ bool splitk_reduce(float* acc, float* __restrict__ ws, long long tile,
                                              int tid) {
  const unsigned slices = gridDim.z;
  /* The tile's parts: [slice][nacc][threads]. */
  float* const tile_ws = ws + tile * (long long)slices * nacc * threads;
  if (!splitk_arrive<nacc, threads>(acc, tile_ws + (long long)blockIdx.z * nacc * threads, tile,
                                    1u, slices, tid))
    return false;
  /* Slice by slice from zero, this block's own sums read back too (so acc holds the total and
   * no second array of nacc registers is needed). */
#pragma unroll
  for (int i = 0; i < nacc; ++i) acc[i] = 0.f;
  for (unsigned z = 0; z < slices; ++z)
    splitk_add<nacc, threads>(acc, tile_ws + (long long)z * nacc * threads, tid);
  return true;
}
