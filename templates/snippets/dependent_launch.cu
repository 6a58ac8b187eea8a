/* snippet dependent_launch (templates/snippets): programmatic dependent launch, for kernels
 * whose table says dependent_launch = true (the runtime launches them so on compute capability
 * 9.0 and newer).  Such a launch may start while the kernel before it in the stream is still
 * running: call pdl_wait(leader) in every thread before it reads or writes global memory.
 * Past the wait that kernel has completed and its writes are visible; the launch after this
 * one may start as soon as every block's leader (one thread) has got there.  Before sm_90, and
 * without such a launch, both instructions are no-ops. */
__device__ __forceinline__ void pdl_wait(bool leader) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (leader) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
