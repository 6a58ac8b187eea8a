/* rt_fit_cache.c -- see rt_fit_cache.h: the performance model's fits on disk. */
#include "rt_fit_cache.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

bool rt_fit_cache_file(const char *dir, db_handle *db, const char *device_name,
                       const rt_model_device *dev, char *path, size_t len, rt_fit_key *key) {
  if (!dir || !db || !device_name || !db_path(db)) return false;
  ut_err e;
  memset(key, 0, sizeof *key);
  memcpy(key->magic, "mmtfitk2", sizeof key->magic);
  if (db_rows_stamp(db, &key->max_id, &key->files, &e)) return false;
  key->sm_count = dev->sm_count;
  key->cc_major = dev->cc_major;
  ut_copy(key->device_name, sizeof key->device_name, device_name);
  char full[PATH_MAX];
  const char *file = realpath(db_path(db), full) ? full : db_path(db);
  uint64_t h = ut_hash64(file, strlen(file) + 1);
  h = ut_hash64_more(h, device_name, strlen(device_name));
  char hex[17];
  ut_hash64_hex(h, hex);
  return !ut_snprintf(path, len, &e, "%s/fit-%s.model", dir, hex);
}

/* Mapped, not read, and the model keeps the mapping: the rows (7 MB at 10^5) are used in
 * place, where copying them into new pages cost a fresh process about 4 ms of page faults. */
rt_model *rt_fit_cache_read(const char *path, const rt_fit_key *key) {
  rt_model *m = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0) return NULL;
  if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof *key) {
    const size_t len = (size_t)st.st_size;
    /* populated: the pages are mapped in one call, not faulted in one by one */
    char *data = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    ut_err e;
    if (data != MAP_FAILED) {
      if (!memcmp(data, key, sizeof *key))
        (void)rt_model_unpack_map(data, len, sizeof *key, &m, &e); /* takes the mapping */
      else
        munmap(data, len);
    }
  }
  close(fd);
  return m;
}

void rt_fit_cache_write(const char *dir, const char *path, const rt_fit_key *key,
                        const rt_model *m) {
  void *bytes = NULL;
  size_t len = 0;
  ut_err e;
  if (rt_model_pack(m, &bytes, &len, &e)) return;
  char *data = malloc(sizeof *key + len);
  if (data && !ut_mkdir_p(dir, &e)) {
    memcpy(data, key, sizeof *key);
    memcpy(data + sizeof *key, bytes, len);
    (void)ut_write_file_atomic(path, data, sizeof *key + len, &e);
  }
  free(data);
  free(bytes);
}
