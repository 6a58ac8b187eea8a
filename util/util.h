/*
 * util.h -- small helpers every module shares: error messages, hashing, paths, files, time.
 * Prefix ut_.  No CUDA, Lua or SQLite here.
 */
#ifndef MMT_UTIL_H
#define MMT_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "mmtune.h"

/* An error message buffer passed down call chains.  Functions take `ut_err *err` (may be
 * NULL) and, on failure, fill it and return a non-zero mmt_status. */
typedef struct {
  char msg[1024];
} ut_err;

/* Formats the message into err (if not NULL) and returns status: `return ut_fail(err, ...)`.
 * A byte of it that is not printable UTF-8 (a control character other than newline and tab,
 * an invalid sequence) becomes '?': messages quote untrusted text. */
mmt_status ut_fail(ut_err *err, mmt_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends "prefix: " to an existing message. */
void ut_err_prefix(ut_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Empties the message. */
void ut_err_clear(ut_err *err);

/* 64-bit FNV-1a over bytes; ut_hash64_more continues a running hash. */
#define UT_HASH64_INIT 0xcbf29ce484222325ULL
uint64_t ut_hash64_more(uint64_t h, const void *data, size_t len);
uint64_t ut_hash64(const void *data, size_t len);
/* 16 lowercase hex digits + NUL into out[17]. */
void ut_hash64_hex(uint64_t h, char out[17]);

/* Reads a whole file into a NUL-terminated buffer owned by the caller (free).  len may be NULL.
 * Errors: MMT_ERR_IO (message names the path and errno text), MMT_ERR_NOMEM. */
mmt_status ut_read_file(const char *path, char **data, size_t *len, ut_err *err);
/* Writes a file atomically: a temporary in the same folder, then rename(). */
mmt_status ut_write_file_atomic(const char *path, const void *data, size_t len, ut_err *err);
/* Length of the UTF-8 sequence at s (at most n bytes); 0 when it is not a valid one (RFC
 * 3629: overlong forms, surrogates and code points past U+10FFFF refused). */
size_t ut_utf8_len(const unsigned char *s, size_t n);
/* mkdir -p with mode 0755. */
mmt_status ut_mkdir_p(const char *path, ut_err *err);
/* $XDG_CACHE_HOME/mmtune, else $HOME/.cache/mmtune, into out.  Does not create it. */
mmt_status ut_cache_dir(char *out, size_t outlen, ut_err *err);
/* Default database path: $MMTUNE_DB, else ut_cache_dir()/mmtune.db. */
mmt_status ut_default_db_path(char *out, size_t outlen, ut_err *err);
/* Default cubin cache folder: $MMTUNE_CACHE_DIR, else ut_cache_dir()/cubin. */
mmt_status ut_default_cubin_dir(char *out, size_t outlen, ut_err *err);

/* snprintf that reports truncation as MMT_ERR_INVALID_ARG. */
mmt_status ut_snprintf(char *out, size_t outlen, ut_err *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Copies src into dst (dstlen > 0), truncating to fit; always NUL-terminates.  For messages
 * and names where truncation is acceptable (snprintf "%s" would warn). */
void ut_copy(char *dst, size_t dstlen, const char *src);
/* strdup that returns NULL on NULL input. */
char *ut_strdup(const char *s);
/* A growable array: arr (may be NULL) reallocated to at least `need` elements of `elem`
 * bytes, doubling *cap.  NULL when out of memory: arr and *cap are then unchanged. */
void *ut_grow(void *arr, int *cap, int need, size_t elem);

/* Monotonic seconds. */
double ut_now_seconds(void);
/* Wall-clock Unix seconds. */
int64_t ut_unix_time(void);

#endif /* MMT_UTIL_H */
