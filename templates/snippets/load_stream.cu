/* snippet load_stream (templates/snippets): 16 bytes from global memory that are read once (a
 * streamed weight matrix): ld.global.nc with L1::no_allocate, so they do not evict what other
 * warps read again from L1 (the small operand).  p: 16-byte aligned, read-only for the
 * kernel's lifetime. */
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
