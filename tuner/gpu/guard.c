/* gpu/guard.c -- see gpu/guard.h. */
#include "gpu/guard.h"

#include <stdlib.h>
#include <string.h>

/* Pinned device memory on dev: what cuMemCreate backs the mapped range with. */
static CUmemAllocationProp device_prop(CUdevice dev) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

mmt_status tn_guard_probe(const rt_cu *cu, CUdevice dev, size_t *gran, ut_err *err) {
  mmt_status rc = MMT_OK;
  const char *env = getenv("MMTUNE_GUARD_PAGES");
  if (env && strcmp(env, "0") == 0)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "MMTUNE_GUARD_PAGES=0");
  int vmm = 0;
  RT_CU_CHECK(cu, cuDeviceGetAttribute(
                      &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  if (!vmm)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "the driver has no virtual memory management on this device");
  CUmemAllocationProp prop = device_prop(dev);
  RT_CU_CHECK(cu, cuMemGetAllocationGranularity(gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
cleanup:
  return rc;
}

void tn_guard_free(const rt_cu *cu, tn_guard *g) {
  if (g->is_mapped) cu->cuMemUnmap(g->mapped, g->mapped_bytes);
  if (g->has_handle) cu->cuMemRelease(g->handle);
  if (g->va) cu->cuMemAddressFree(g->va, g->va_bytes);
  memset(g, 0, sizeof *g);
}

mmt_status tn_guard_reserve(const rt_cu *cu, CUdevice dev, size_t gran, tn_guard *g, size_t bytes,
                            ut_err *err) {
  mmt_status rc = MMT_OK;
  size_t want = (bytes + gran - 1) / gran * gran;
  if (want == 0) want = gran;
  if (g->va && g->mapped_bytes >= want) return MMT_OK;
  tn_guard_free(cu, g);
  /* One unmapped granule on each side of the mapped ones: a reserved range is never given to
   * another allocation, so those addresses stay invalid. */
  RT_CU_CHECK(cu, cuMemAddressReserve(&g->va, want + 2 * gran, gran, 0, 0));
  g->va_bytes = want + 2 * gran;
  g->mapped = g->va + gran;
  g->mapped_bytes = want;
  CUmemAllocationProp prop = device_prop(dev);
  RT_CU_CHECK(cu, cuMemCreate(&g->handle, want, &prop, 0));
  g->has_handle = 1;
  RT_CU_CHECK(cu, cuMemMap(g->mapped, want, 0, g->handle, 0));
  g->is_mapped = 1;
  CUmemAccessDesc access = {.location = prop.location,
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  RT_CU_CHECK(cu, cuMemSetAccess(g->mapped, want, &access, 1));
cleanup:
  if (rc) tn_guard_free(cu, g);
  return rc;
}

CUdeviceptr tn_guard_place(const tn_guard *g, size_t bytes, unsigned align, tn_guard_side side) {
  if (side == TN_GUARD_START) return g->mapped;
  CUdeviceptr end = g->mapped + g->mapped_bytes;
  return (end - bytes) & ~(CUdeviceptr)(align - 1);
}
