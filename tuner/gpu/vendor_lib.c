/* gpu/vendor_lib.c -- see gpu/vendor_lib.h. */
#include "gpu/vendor_lib.h"

#include "rt_dl.h"

mmt_status tn_vendor_open(const char *env, const char *const *names, int n, void **handle,
                          const char **lib, ut_err *err) {
  const char *why;
  if (!(*handle = rt_dl_open(env, names, n, lib, &why)))
    return ut_fail(err, MMT_ERR_NOT_FOUND, "%s not found: %s", *lib, why ? why : "dlopen failed");
  return MMT_OK;
}

mmt_status tn_vendor_symbol(void *handle, const char *lib, const char *peer, const char *name,
                            bool required, void *field, ut_err *err) {
  const char *why = rt_dl_symbol(handle, name, field);
  if (why && required)
    return ut_fail(err, MMT_ERR_NOT_FOUND, "%s lacks %s (%s too old?): %s", lib, name, peer, why);
  return MMT_OK;
}
