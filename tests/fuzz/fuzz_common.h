/*
 * fuzz_common.h -- what the libFuzzer targets of tests/fuzz share: a scratch folder, a
 * destination database with rows in it, and the checks every input must pass.  A failed
 * check abort()s, which libFuzzer reports as a crash with the input that caused it.
 */
#ifndef MMT_FUZZ_COMMON_H
#define MMT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

/* The scratch folder (made once per process) and path `name` in it. */
const char *fz_path(const char *name);
/* Writes data[0..size) to path, replacing it; false on failure. */
bool fz_write(const char *path, const uint8_t *data, size_t size);
/* Removes a database file and its side files. */
void fz_remove_db(const char *path);

/* The destination every input is merged or imported into: a database with a few rows,
 * made once, and remade when inputs have grown it past a few MiB.  fz_dst_path() makes it. */
const char *fz_dst_path(void);
/* After a call on the destination: refused (rc != MMT_OK), its bytes must be as before;
 * accepted, db_check must pass on it (its bytes become the new "before"). */
void fz_dst_after(mmt_status rc, const char *what);
/* After a call on a destination that did not exist: refused, it must still not exist;
 * accepted, db_check must pass on it.  Removes it. */
void fz_fresh_after(const char *path, mmt_status rc, const char *what);

#endif /* MMT_FUZZ_COMMON_H */
