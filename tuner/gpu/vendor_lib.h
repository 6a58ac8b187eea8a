/*
 * gpu/vendor_lib.h -- opening a vendor library (cuBLAS, cuBLASLt) and looking up its entry
 * points (rt_dl.h), with the peers' error messages: the peers are never linked, so that
 * mmtune runs without them.  Prefix tn_.
 */
#ifndef MMT_TN_GPU_VENDOR_LIB_H
#define MMT_TN_GPU_VENDOR_LIB_H

#include <stdbool.h>

#include "util.h"

/* Opens the library named by the environment variable `env` when it is set and not empty,
 * else the first of names[0..n) that dlopen finds (a versioned soname first).  On success
 * *handle is the library and *lib its name; on failure MMT_ERR_NOT_FOUND, the message naming
 * the library asked for (env's, else names[0]) and dlopen's reason. */
mmt_status tn_vendor_open(const char *env, const char *const *names, int n, void **handle,
                          const char **lib, ut_err *err);

/* Looks up `name` in `handle` into the function pointer stored at `field` (NULL when it is
 * missing).  A missing required symbol is MMT_ERR_NOT_FOUND naming `lib`, the symbol and
 * `peer` ("cuBLAS too old?"); a missing optional one is MMT_OK (err may be NULL then). */
mmt_status tn_vendor_symbol(void *handle, const char *lib, const char *peer, const char *name,
                            bool required, void *field, ut_err *err);

#endif
