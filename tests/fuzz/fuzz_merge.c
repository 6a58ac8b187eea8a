/*
 * fuzz_merge.c -- libFuzzer target: any bytes as a source file of `mmtune db merge`
 * (db_merge).  Refused, the destination keeps its bytes; accepted, it passes db check; and
 * db check of the source agrees with the merge (it accepts exactly the files merge
 * accepts).
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *src = fz_path("src.db");
  fz_remove_db(src);
  if (!fz_write(src, data, size)) abort();
  ut_err e;
  db_check_report rep;
  const mmt_status checked = db_check(src, NULL, &rep, &e);
  const char *srcs[] = {src};
  mmt_status rc = db_merge(fz_dst_path(), srcs, 1, NULL, NULL, &e);
  fz_dst_after(rc, "merge into a database");
  if ((checked == MMT_OK) != (rc == MMT_OK)) {
    fprintf(stderr, "fuzz check failed: db check says %s, merge says %s (%s)\n",
            mmt_status_name(checked), mmt_status_name(rc), e.msg);
    abort();
  }
  return 0;
}
