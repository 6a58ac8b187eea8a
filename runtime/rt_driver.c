/* rt_driver.c -- see rt_driver.h.  Loads libcuda.so.1 with dlopen once per process. */
#include "rt_driver.h"
#include "rt_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define RT_STR2_(x) #x
/* Stringizes after macro expansion: RT_STR_(cuMemAlloc) is "cuMemAlloc_v2". */
#define RT_STR_(x) RT_STR2_(x)

/* The default library; MMTUNE_LIBCUDA (read at the first load) replaces it. */
#define RT_LIBCUDA "libcuda.so.1"

/* Written once inside pthread_once, read-only afterwards. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct {
  mmt_status status;
  ut_err err;
  void *handle;
  rt_cu cu;
} g_drv;

/* Names the driver may not be able to give (a stub library, a failed cuInit). */
static const char *fallback_error_name(CUresult r) {
  switch (r) {
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case CUDA_ERROR_OPERATING_SYSTEM: return "CUDA_ERROR_OPERATING_SYSTEM";
    default: return NULL;
  }
}

/* Looks up one symbol and stores it in the table field at `field`. */
static mmt_status resolve_one(void *handle, const char *lib, const char *name, void *field,
                              ut_err *err) {
  const char *why = rt_dl_symbol(handle, name, field);
  if (why)
    return ut_fail(err, MMT_ERR_NO_DRIVER, "%s lacks driver symbol %s (driver too old?): %s", lib,
                   name, why);
  return MMT_OK;
}

static mmt_status resolve_symbols(void *handle, const char *lib, rt_cu *cu, ut_err *err) {
  mmt_status rc;
#define RT_DRIVER_RESOLVE_(name)                                              \
  _Static_assert(sizeof cu->name == sizeof(void *), "function pointer size"); \
  if ((rc = resolve_one(handle, lib, RT_STR_(name), &cu->name, err))) return rc;
  RT_DRIVER_FUNCS(RT_DRIVER_RESOLVE_)
#undef RT_DRIVER_RESOLVE_
  return MMT_OK;
}

static mmt_status load_driver(ut_err *err) {
  static const char *const names[] = {RT_LIBCUDA};
  const char *lib, *why;
  mmt_status rc = MMT_OK;
  void *handle = rt_dl_open("MMTUNE_LIBCUDA", names, 1, &lib, &why);
  if (!handle)
    return ut_fail(err, MMT_ERR_NO_DRIVER, "%s not found (no NVIDIA driver?): %s", lib,
                   why ? why : "dlopen failed");
  if ((rc = resolve_symbols(handle, lib, &g_drv.cu, err))) goto cleanup;
  CUresult r = g_drv.cu.cuInit(0);
  /* Once cuInit ran the library stays loaded, even when it failed: it may hold threads. */
  g_drv.handle = handle;
  handle = NULL;
  if (r != CUDA_SUCCESS) {
    rc = rt_cu_fail(err, "cuInit", r);
    if (r == CUDA_ERROR_NO_DEVICE) rc = MMT_ERR_NO_DEVICE;
  }
cleanup:
  if (handle) dlclose(handle);
  return rc;
}

static void load_once(void) {
  ut_err_clear(&g_drv.err);
  g_drv.status = load_driver(&g_drv.err);
  if (g_drv.status) memset(&g_drv.cu, 0, sizeof g_drv.cu);
}

mmt_status rt_driver(const rt_cu **cu, ut_err *err) {
  if (cu) *cu = NULL;
  int prc = pthread_once(&g_once, load_once);
  if (prc != 0) return ut_fail(err, MMT_ERR_NO_DRIVER, "pthread_once failed: %s", strerror(prc));
  if (g_drv.status) return ut_fail(err, g_drv.status, "%s", g_drv.err.msg);
  if (cu) *cu = &g_drv.cu;
  return MMT_OK;
}

mmt_status rt_cu_fail(ut_err *err, const char *what, CUresult r) {
  const char *name = NULL, *text = NULL;
  /* The table is all NULL until a library is loaded (and after a failed load); the driver
   * may also fail to name an error (the toolkit's stub library does). */
  if (g_drv.cu.cuGetErrorName && g_drv.cu.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
  if (g_drv.cu.cuGetErrorString && g_drv.cu.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
  if (!name) name = fallback_error_name(r);
  if (name && text) return ut_fail(err, MMT_ERR_CUDA, "%s: %s (%s)", what, name, text);
  if (name) return ut_fail(err, MMT_ERR_CUDA, "%s: %s (error %d)", what, name, (int)r);
  return ut_fail(err, MMT_ERR_CUDA, "%s: CUDA error %d", what, (int)r);
}
