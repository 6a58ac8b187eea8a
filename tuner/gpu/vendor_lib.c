/* gpu/vendor_lib.c -- see gpu/vendor_lib.h. */
#include "gpu/vendor_lib.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

mmt_status tn_vendor_open(const char *env, const char *const *names, int n, void **handle,
                          const char **lib, ut_err *err) {
  const char *chosen = getenv(env), *why = NULL;
  *handle = NULL;
  if (chosen && *chosen) {
    *handle = dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
    if (!*handle) why = dlerror();
  } else {
    chosen = names[0];
    for (int i = 0; i < n && !*handle; i++) {
      *handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
      if (*handle)
        chosen = names[i];
      else if (i == 0)
        why = dlerror(); /* the message tells of the library we want */
    }
  }
  *lib = chosen;
  if (!*handle)
    return ut_fail(err, MMT_ERR_NOT_FOUND, "%s not found: %s", chosen, why ? why : "dlopen failed");
  return MMT_OK;
}

mmt_status tn_vendor_symbol(void *handle, const char *lib, const char *peer, const char *name,
                            bool required, void *field, ut_err *err) {
  dlerror();
  void *sym = dlsym(handle, name);
  if (!sym && required) {
    const char *why = dlerror();
    return ut_fail(err, MMT_ERR_NOT_FOUND, "%s lacks %s (%s too old?): %s", lib, name, peer,
                   why ? why : "symbol is NULL");
  }
  /* POSIX guarantees that dlsym's result converts to a function pointer. */
  memcpy(field, &sym, sizeof sym);
  return MMT_OK;
}
