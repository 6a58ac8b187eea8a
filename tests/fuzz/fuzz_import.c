/*
 * fuzz_import.c -- libFuzzer target: any text as an export for `mmtune db import`
 * (db_import_json).  Each input is imported into a destination with rows and into one that
 * does not exist: refused, neither may change; accepted, both must pass db check.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1); /* db_import_json reads a NUL-terminated text */
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  ut_err e;
  const char *dst = fz_dst_path();
  mmt_status rc = db_import_json(dst, "input", text, size, NULL, NULL, &e);
  fz_dst_after(rc, "import into a database");
  const char *fresh = fz_path("fresh.db");
  rc = db_import_json(fresh, "input", text, size, NULL, NULL, &e);
  fz_fresh_after(fresh, rc, "import into a new file");
  free(text);
  return 0;
}
