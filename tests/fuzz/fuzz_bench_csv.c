/*
 * fuzz_bench_csv.c -- libFuzzer target: any bytes as the CSV of `mmtune report --bench`
 * (tn_report_read_bench).  It must end with an exit code, its entries within what it read.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "report/report_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fz_path("bench.csv");
  if (!fz_write(path, data, size)) abort();
  report r = {.bench_path = path, .device = "GPU A"};
  ut_err e;
  int ex = tn_report_read_bench(&r, &e);
  if (ex < 0 || ex > 2 || (ex == 0 && r.nbench < 1) || (size_t)r.nbench > size) {
    fprintf(stderr, "fuzz check failed: exit %d with %d entries from %zu bytes\n", ex, r.nbench,
            size);
    abort();
  }
  free(r.bench);
  return 0;
}
