/* bench_cli.c -- see bench_cli.h. */
#include "bench_cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "cli/args.h"
#include "util.h"

const char *bench_prog = "bench";

int bench_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", bench_prog);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (try --help)\n");
  va_end(ap);
  return 2;
}

int bench_parse_number(const char *text, const char *what, int64_t min, int64_t max,
                       int64_t *out) {
  ut_err err = {{0}};
  if (tn_parse_i64(text, what, min, max, out, &err) == MMT_OK) return 0;
  return bench_usage_error("%s", err.msg);
}

int bench_option_error(int c, char **argv) {
  if (c == ':') return bench_usage_error("option '%s' needs a value", argv[optind - 1]);
  if (optopt) return bench_usage_error("unknown option '-%c'", optopt);
  return bench_usage_error("unknown option '%s'", argv[optind - 1]);
}

int bench_parse_mnk(int argc, char **argv, int first, int64_t *m, int64_t *n, int64_t *k) {
  int npos = argc - first, bad = 0;
  if (npos == 0) return 0;
  if (npos != 3) return bench_usage_error("expected M N K or nothing, got %d sizes", npos);
  if ((bad = bench_parse_number(argv[first], "M", 1, TN_DIM_MAX, m)) ||
      (bad = bench_parse_number(argv[first + 1], "N", 1, TN_DIM_MAX, n)) ||
      (bad = bench_parse_number(argv[first + 2], "K", 1, TN_DIM_MAX, k)))
    return bad;
  return 0;
}

uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
