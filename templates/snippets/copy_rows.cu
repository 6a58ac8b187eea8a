/* snippet copy_rows (templates/snippets): the runtime's copies for a repack kernel (gen.h,
 * gen_requires.repack).  A repack kernel's module must define mmt_copy_rows: the runtime
 * copies each operand that is not 16-byte aligned into a buffer whose rows are (and C back)
 * with it, one launch for the operands going in and one for C coming out.
 *
 * Job j copies rows[j] rows of width[j] bytes from src[j] (rows src_pitch[j] bytes apart) to
 * dst[j] (dst_pitch[j] apart); either side may be aligned to anything.  A row is cut into the
 * 16-byte aligned blocks of its destination.  A block inside the row moves as one 16-byte
 * store, from one 16-byte load where the source is aligned alike, else from the two aligned
 * 16-byte loads that hold its bytes, shifted into place (mmt_copy_shift), so that a 16-bit row
 * at a 2-byte address moves in 16-byte loads and stores all the same (element loads ran at
 * half of the copy bandwidth, as did cudaMemcpy2D on such rows, on an H100).  The blocks at
 * the row's ends, and those whose aligned source words would reach past the row, move in
 * units of the largest power of two dividing both addresses and the width.  Nothing is read
 * or written outside the rows' width bytes.
 * A warp takes one segment of MMT_COPY_SEG_BLOCKS blocks of a row at a time, the segments of
 * all jobs in turn (segment w of job j while w < rows[j] * MMT_COPY_SEGS(width[j])), lane i
 * blocks i, i + 32, ..., MMT_COPY_ROUND of them a round, every load of a round before its
 * stores. */
#define MMT_COPY_JOBS 3
#define MMT_COPY_SEG_BLOCKS 256
#define MMT_COPY_ROUND 4
/* segments of a row of w bytes: its blocks, (w + 30) / 16 at most (it may start anywhere in one) */
#define MMT_COPY_SEGS(w) (((w) + 30) / 16 / MMT_COPY_SEG_BLOCKS + 1)
struct mmt_copy_jobs {
  unsigned long long src[MMT_COPY_JOBS], dst[MMT_COPY_JOBS];
  unsigned long long src_pitch[MMT_COPY_JOBS], dst_pitch[MMT_COPY_JOBS];
  unsigned long long width[MMT_COPY_JOBS], rows[MMT_COPY_JOBS];
  int njobs;
};

/* Bytes sh .. sh + 15 of the 32 bytes lo, hi (sh < 16, the same for the whole row). */
__device__ __forceinline__ uint4 mmt_copy_shift(uint4 lo, uint4 hi, unsigned sh) {
  const unsigned w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const unsigned q = sh / 4, r = 8 * (sh % 4);
  unsigned x[5];
#pragma unroll
  for (int k = 0; k < 5; ++k) /* selects, not an index known at run time (local memory) */
    x[k] = q == 0 ? w[k] : q == 1 ? w[k + 1] : q == 2 ? w[k + 2] : w[k + 3];
  return make_uint4(__funnelshift_r(x[0], x[1], r), __funnelshift_r(x[1], x[2], r),
                    __funnelshift_r(x[2], x[3], r), __funnelshift_r(x[3], x[4], r));
}

/* Bytes [b0, b1) of a row, at most 16 of them, in units of U (b0, b1, s and d multiples of
 * its size): every load before the first store (the compiler cannot move a load above a store
 * that may alias it, and a chain of eight round trips to memory costs microseconds). */
template <typename U>
__device__ __forceinline__ void mmt_copy_units(const unsigned char* s, unsigned char* d,
                                               long long b0, long long b1) {
  constexpr int N = 16 / sizeof(U);
  U v[N];
#pragma unroll
  for (int t = 0; t < N; ++t)
    if (b0 + t * (long long)sizeof(U) < b1) v[t] = __ldg(reinterpret_cast<const U*>(s + b0) + t);
#pragma unroll
  for (int t = 0; t < N; ++t)
    if (b0 + t * (long long)sizeof(U) < b1) reinterpret_cast<U*>(d + b0)[t] = v[t];
}

/* a[j] with constant indices, so that the argument's arrays stay in the constant bank (an
 * index known only at run time copies the whole argument to local memory) */
__device__ __forceinline__ unsigned long long mmt_copy_pick(
    const unsigned long long a[MMT_COPY_JOBS], int j) {
  return j == 0 ? a[0] : j == 1 ? a[1] : a[2];
}

extern "C" __global__ void __launch_bounds__(256, 2) mmt_copy_rows(const mmt_copy_jobs jobs) {
#if __CUDA_ARCH__ >= 900
  /* launched as a programmatic dependent of the kernel before it (its C), on sm_90 and newer */
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const unsigned lane = threadIdx.x % 32;
  const unsigned long long warps = (unsigned long long)gridDim.x * (blockDim.x / 32);
  const unsigned long long warp0 =
      (unsigned long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
#pragma unroll 1
  for (int j = 0; j < jobs.njobs && j < MMT_COPY_JOBS; ++j) {
    const unsigned long long src = mmt_copy_pick(jobs.src, j), dst = mmt_copy_pick(jobs.dst, j);
    const unsigned long long src_pitch = mmt_copy_pick(jobs.src_pitch, j);
    const unsigned long long dst_pitch = mmt_copy_pick(jobs.dst_pitch, j);
    const unsigned long long width = mmt_copy_pick(jobs.width, j);
    const unsigned long long segs = MMT_COPY_SEGS(width);
    const unsigned long long items = mmt_copy_pick(jobs.rows, j) * segs;
    for (unsigned long long w = warp0; w < items; w += warps) {
      const unsigned long long row = w / segs, seg = w % segs;
      const unsigned long long sa = src + row * src_pitch, da = dst + row * dst_pitch;
      const unsigned char* const s = reinterpret_cast<const unsigned char*>(sa);
      unsigned char* const d = reinterpret_cast<unsigned char*>(da);
      const unsigned long long low = sa | da | width | 16ull;
      const unsigned unit = (unsigned)(low & (~low + 1)); /* lowest set bit: 1 .. 16 */
      const unsigned sh = (unsigned)((sa - da) & 15);     /* where a block's bytes start */
      const long long need = sh ? 32 : 16, wid = (long long)width;
      /* block b: the destination's bytes [off, off + 16) of the row, off = 16 b - (da & 15) */
      const long long off0 = -(long long)(da & 15);
      const unsigned long long b1 = (width + (da & 15) + 15) / 16; /* blocks of the row */
      const unsigned long long seg_end = (seg + 1) * MMT_COPY_SEG_BLOCKS;
      const unsigned long long bend = b1 < seg_end ? b1 : seg_end;
#pragma unroll 1
      for (unsigned long long b = seg * MMT_COPY_SEG_BLOCKS + lane; b < bend;
           b += 32 * MMT_COPY_ROUND) {
        uint4 lo[MMT_COPY_ROUND], hi[MMT_COPY_ROUND];
        bool wide[MMT_COPY_ROUND];
#pragma unroll
        for (int t = 0; t < MMT_COPY_ROUND; ++t) {
          const long long off = off0 + 16 * (long long)(b + 32 * t);
          /* the aligned source words s + off - sh .. + need inside the row */
          wide[t] = b + 32 * t < bend && off - (long long)sh >= 0 &&
                    off - (long long)sh + need <= wid;
          if (wide[t]) {
            const uint4* const q = reinterpret_cast<const uint4*>(s + off - sh);
            lo[t] = __ldg(q);
            hi[t] = sh ? __ldg(q + 1) : lo[t];
          }
        }
#pragma unroll
        for (int t = 0; t < MMT_COPY_ROUND; ++t) {
          const long long off = off0 + 16 * (long long)(b + 32 * t);
          if (wide[t]) {
            *reinterpret_cast<uint4*>(d + off) = sh ? mmt_copy_shift(lo[t], hi[t], sh) : lo[t];
          } else if (b + 32 * t < bend) {
            const long long e0 = off > 0 ? off : 0, e1 = off + 16 < wid ? off + 16 : wid;
            switch (unit) {
              case 8: mmt_copy_units<uint2>(s, d, e0, e1); break;
              case 4: mmt_copy_units<unsigned>(s, d, e0, e1); break;
              case 2: mmt_copy_units<unsigned short>(s, d, e0, e1); break;
              default: mmt_copy_units<unsigned char>(s, d, e0, e1); break;
            }
          }
        }
      }
    }
  }
}
