/*
 * rt_driver.h -- the CUDA driver API, loaded with dlopen("libcuda.so.1") at run time.
 * Prefix rt_.  mmtune never links libcuda, so every binary starts (and explains itself) on a
 * machine without a driver.
 *
 * Usage: `const rt_cu *cu; if ((rc = rt_driver(&cu, err))) return rc; cu->cuInit(0);`
 * rt_driver() loads once per process (thread-safe) and calls cuInit(0).
 */
#ifndef MMT_RT_DRIVER_H
#define MMT_RT_DRIVER_H

#include <cuda.h>

#include "util.h"

/* The driver entry points mmtune uses.  X(name) declares a field `name` with the prototype
 * cuda.h gives; cuda.h's #defines map names to their current versions (cuMemAlloc ->
 * cuMemAlloc_v2), and the loader resolves the versioned symbol. */
#define RT_DRIVER_FUNCS(X)                                                                         \
  X(cuInit)                                                                                        \
  X(cuDriverGetVersion)                                                                            \
  X(cuGetErrorName)                                                                                \
  X(cuGetErrorString)                                                                              \
  X(cuDeviceGetCount)                                                                              \
  X(cuDeviceGet)                                                                                   \
  X(cuDeviceGetName)                                                                               \
  X(cuDeviceGetUuid)                                                                               \
  X(cuDeviceGetAttribute)                                                                          \
  X(cuDeviceTotalMem)                                                                              \
  X(cuDevicePrimaryCtxRetain)                                                                      \
  X(cuDevicePrimaryCtxRelease)                                                                     \
  X(cuCtxSetCurrent)                                                                               \
  X(cuCtxGetCurrent)                                                                               \
  X(cuCtxSynchronize)                                                                              \
  X(cuModuleLoadData)                                                                              \
  X(cuModuleUnload)                                                                                \
  X(cuModuleGetFunction)                                                                           \
  X(cuFuncGetAttribute)                                                                            \
  X(cuFuncSetAttribute)                                                                            \
  X(cuLaunchKernel)                                                                                \
  X(cuLaunchKernelEx)                                                                              \
  X(cuTensorMapEncodeTiled)                                                                        \
  X(cuMemAlloc)                                                                                    \
  X(cuMemFree)                                                                                     \
  X(cuMemHostAlloc)                                                                                \
  X(cuMemFreeHost)                                                                                 \
  X(cuMemHostGetDevicePointer)                                                                     \
  X(cuMemcpyHtoD)                                                                                  \
  X(cuMemcpyDtoH)                                                                                  \
  X(cuMemcpyDtoD)                                                                                  \
  X(cuMemcpy2DAsync)                                                                               \
  X(cuMemPoolCreate)                                                                               \
  X(cuMemPoolDestroy)                                                                              \
  X(cuMemPoolSetAttribute)                                                                         \
  X(cuMemAllocFromPoolAsync)                                                                       \
  X(cuMemFreeAsync)                                                                                \
  X(cuMemsetD8)                                                                                    \
  X(cuMemsetD16)                                                                                   \
  X(cuMemsetD32)                                                                                   \
  X(cuMemsetD32Async)                                                                              \
  X(cuMemAddressReserve)                                                                           \
  X(cuMemAddressFree)                                                                              \
  X(cuMemCreate)                                                                                   \
  X(cuMemRelease)                                                                                  \
  X(cuMemMap)                                                                                      \
  X(cuMemUnmap)                                                                                    \
  X(cuMemSetAccess)                                                                                \
  X(cuMemGetAllocationGranularity)                                                                 \
  X(cuMemGetInfo)                                                                                  \
  X(cuStreamCreate)                                                                                \
  X(cuStreamDestroy)                                                                               \
  X(cuStreamSynchronize)                                                                           \
  X(cuStreamWaitEvent)                                                                             \
  X(cuStreamIsCapturing)                                                                           \
  X(cuStreamGetId)                                                                                 \
  X(cuEventCreate)                                                                                 \
  X(cuEventDestroy)                                                                                \
  X(cuEventRecord)                                                                                 \
  X(cuEventRecordWithFlags)                                                                        \
  X(cuEventSynchronize)                                                                            \
  X(cuEventElapsedTime)                                                                            \
  X(cuStreamBeginCapture)                                                                          \
  X(cuStreamEndCapture)                                                                            \
  X(cuGraphInstantiate)                                                                            \
  X(cuGraphLaunch)                                                                                 \
  X(cuGraphExecDestroy)                                                                            \
  X(cuGraphDestroy)

typedef struct {
#define RT_DRIVER_FIELD_(name) __typeof__(&name) name;
  RT_DRIVER_FUNCS(RT_DRIVER_FIELD_)
#undef RT_DRIVER_FIELD_
} rt_cu;

/* Loads the driver once and returns its table (*cu is NULL on failure; cu may be NULL to only
 * check).  The library is $MMTUNE_LIBCUDA when set (read at the first call; for tests), else
 * "libcuda.so.1".  Errors: MMT_ERR_NO_DRIVER (library missing: "libcuda.so.1 not found (no
 * NVIDIA driver?): <dlerror>", or a symbol missing: the message names it), MMT_ERR_NO_DEVICE
 * (cuInit said CUDA_ERROR_NO_DEVICE), MMT_ERR_CUDA (cuInit failed otherwise, e.g. the
 * toolkit's stub library: the message has the driver's error name).  The result is
 * remembered: later calls return the same status and message at once.  Thread-safe. */
mmt_status rt_driver(const rt_cu **cu, ut_err *err);

/* Formats a failed driver call: "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
 * (cuGetErrorName/String when the driver is loaded, else the number).  Returns MMT_ERR_CUDA.
 * `what` names the call. */
mmt_status rt_cu_fail(ut_err *err, const char *what, CUresult r);

/* Checks a driver call inside a function that has `mmt_status rc`, `ut_err *err` and a
 * `cleanup:` label. */
#define RT_CU_CHECK(cu, call)                                     \
  do {                                                            \
    CUresult rt_r_ = (cu)->call;                                  \
    if (rt_r_ != CUDA_SUCCESS) {                                  \
      rc = rt_cu_fail(err, #call, rt_r_);                         \
      goto cleanup;                                               \
    }                                                             \
  } while (0)

#endif /* MMT_RT_DRIVER_H */
