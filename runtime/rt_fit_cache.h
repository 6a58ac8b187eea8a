/*
 * rt_fit_cache.h -- the performance model's fits kept on disk (the cubin cache folder's
 * fit-*.model files), so that a fresh process reads the model of a database in a few ms
 * instead of fitting it again.  Prefix rt_fit_cache_.
 *
 * A file is named after the database's real path and the GPU model, and starts with a key:
 * what it was fitted from (the database's rows stamp, the device, the templates).  A file whose key differs
 * is ignored and, after the next fit, replaced.  Failures only cost a fit: nothing here
 * returns an error.
 */
#ifndef MMT_RT_FIT_CACHE_H
#define MMT_RT_FIT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "rt_model.h"

/* What a fit cache file says it was fitted from (compared byte for byte). */
typedef struct {
  char magic[8];
  int64_t max_id; /* db_rows_stamp */
  uint64_t files;
  int32_t sm_count, cc_major; /* the device the model was fitted for */
  char device_name[128];
  uint64_t templates; /* the templates it was fitted under (set by the caller; 0: none) */
} rt_fit_key;

/* The fit cache file of (db, device_name) in folder dir into path[len], and what it must say
 * into key; false when there is no cache (dir NULL) or the database does not answer (then
 * the fit is not kept). */
bool rt_fit_cache_file(const char *dir, db_handle *db, const char *device_name,
                       const rt_model_device *dev, char *path, size_t len, rt_fit_key *key);
/* The model in the file at path when it says key (owned: rt_model_free); NULL when not. */
rt_model *rt_fit_cache_read(const char *path, const rt_fit_key *key);
/* Writes model m, fitted from what key says, to the file at path in folder dir (created). */
void rt_fit_cache_write(const char *dir, const char *path, const rt_fit_key *key,
                        const rt_model *m);

#endif /* MMT_RT_FIT_CACHE_H */
