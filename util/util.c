/* util.c -- see util.h. */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

size_t ut_utf8_len(const unsigned char *s, size_t n) {
  if (n == 0) return 0;
  unsigned c = s[0];
  size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (!len || len > n) return 0;
  unsigned cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return 0;
  return len;
}

/* Messages quote what came from outside (a database's schema text, an export's keys, a
 * template's output): a byte that is not printable UTF-8 becomes '?', so a message never
 * carries terminal escapes or binary to whoever prints it.  Newlines and tabs stay (logs,
 * tracebacks). */
static void keep_printable(char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    size_t len = ut_utf8_len((const unsigned char *)s + i, n - i);
    if (!len || ((c < 0x20 || c == 0x7f) && c != '\n' && c != '\t')) {
      s[i++] = '?';
      continue;
    }
    i += len;
  }
}

mmt_status ut_fail(ut_err *err, mmt_status status, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    keep_printable(err->msg);
  }
  return status;
}

void ut_err_prefix(ut_err *err, const char *fmt, ...) {
  if (!err) return;
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  char old[sizeof err->msg];
  memcpy(old, err->msg, sizeof old);
  size_t n = strlen(prefix);
  if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
  memcpy(err->msg, prefix, n);
  memcpy(err->msg + n, ": ", 2);
  size_t room = sizeof err->msg - n - 3;
  size_t oldlen = strnlen(old, room);
  memcpy(err->msg + n + 2, old, oldlen);
  err->msg[n + 2 + oldlen] = '\0';
  keep_printable(err->msg); /* the prefix, and the old text cut mid-character */
}

void ut_err_clear(ut_err *err) {
  if (err) err->msg[0] = '\0';
}

uint64_t ut_hash64_more(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t ut_hash64(const void *data, size_t len) { return ut_hash64_more(UT_HASH64_INIT, data, len); }

void ut_hash64_hex(uint64_t h, char out[17]) { snprintf(out, 17, "%016llx", (unsigned long long)h); }

mmt_status ut_read_file(const char *path, char **data, size_t *len, ut_err *err) {
  mmt_status rc = MMT_OK;
  char *buf = NULL;
  FILE *f = fopen(path, "rb");
  *data = NULL;
  if (!f) return ut_fail(err, MMT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) {
    rc = ut_fail(err, MMT_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    goto cleanup;
  }
  long size = ftell(f);
  if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
    rc = ut_fail(err, MMT_ERR_IO, "cannot read '%s': not a regular file", path);
    goto cleanup;
  }
  buf = malloc((size_t)size + 1);
  if (!buf) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory reading '%s'", path);
    goto cleanup;
  }
  if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
    rc = ut_fail(err, MMT_ERR_IO, "short read on '%s'", path);
    goto cleanup;
  }
  buf[size] = '\0';
  if (len) *len = (size_t)size;
  *data = buf;
  buf = NULL;
cleanup:
  free(buf);
  fclose(f);
  return rc;
}

mmt_status ut_write_file_atomic(const char *path, const void *data, size_t len, ut_err *err) {
  char tmp[4096];
  /* mkstemp: a unique temporary per writer, so threads of one process never share one. */
  mmt_status rc = ut_snprintf(tmp, sizeof tmp, err, "%s.tmp.XXXXXX", path);
  if (rc) return rc;
  int fd = mkstemp(tmp);
  if (fd < 0) return ut_fail(err, MMT_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    close(fd);
    unlink(tmp);
    return ut_fail(err, MMT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
  }
  size_t wrote = fwrite(data, 1, len, f);
  int close_rc = fclose(f);
  if (wrote != len || close_rc != 0) {
    unlink(tmp);
    return ut_fail(err, MMT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
  }
  if (chmod(tmp, 0644) != 0 || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return ut_fail(err, MMT_ERR_IO, "cannot move '%s' to '%s': %s", tmp, path, strerror(e));
  }
  return MMT_OK;
}

mmt_status ut_mkdir_p(const char *path, ut_err *err) {
  char buf[4096];
  mmt_status rc = ut_snprintf(buf, sizeof buf, err, "%s", path);
  if (rc) return rc;
  for (char *p = buf + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char saved = *p;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return ut_fail(err, MMT_ERR_IO, "cannot create folder '%s': %s", buf, strerror(errno));
    *p = saved;
    if (saved == '\0') break;
  }
  struct stat st;
  if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    return ut_fail(err, MMT_ERR_IO, "'%s' exists and is not a folder", buf);
  return MMT_OK;
}

mmt_status ut_cache_dir(char *out, size_t outlen, ut_err *err) {
  const char *xdg = getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return ut_snprintf(out, outlen, err, "%s/mmtune", xdg);
  const char *home = getenv("HOME");
  if (!home || !home[0])
    return ut_fail(err, MMT_ERR_NOT_FOUND, "neither XDG_CACHE_HOME nor HOME is set");
  return ut_snprintf(out, outlen, err, "%s/.cache/mmtune", home);
}

static mmt_status default_under_cache(const char *env, const char *leaf, char *out, size_t outlen,
                                      ut_err *err) {
  const char *v = getenv(env);
  if (v && v[0]) return ut_snprintf(out, outlen, err, "%s", v);
  char dir[4096];
  mmt_status rc = ut_cache_dir(dir, sizeof dir, err);
  if (rc) return rc;
  return ut_snprintf(out, outlen, err, "%s/%s", dir, leaf);
}

mmt_status ut_default_db_path(char *out, size_t outlen, ut_err *err) {
  return default_under_cache("MMTUNE_DB", "mmtune.db", out, outlen, err);
}

mmt_status ut_default_cubin_dir(char *out, size_t outlen, ut_err *err) {
  return default_under_cache("MMTUNE_CACHE_DIR", "cubin", out, outlen, err);
}

mmt_status ut_snprintf(char *out, size_t outlen, ut_err *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, outlen, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= outlen)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "text too long (%d bytes, limit %zu)", n, outlen - 1);
  return MMT_OK;
}

void ut_copy(char *dst, size_t dstlen, const char *src) {
  size_t n = strnlen(src, dstlen - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

char *ut_strdup(const char *s) { return s ? strdup(s) : NULL; }

double ut_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t ut_unix_time(void) { return (int64_t)time(NULL); }

void *ut_grow(void *arr, int *cap, int need, size_t elem) {
  if (need <= *cap) return arr;
  int c = *cap ? *cap * 2 : 64;
  while (c < need) c *= 2;
  void *p = realloc(arr, (size_t)c * elem);
  if (p) *cap = c;
  return p;
}
