/*
 * bench_cli.h -- what the bench programs share on their command line: one-line usage errors
 * (exit code 2), numbers, option errors from getopt_long, the optional "M N K", and a clock.
 * Prefix bench_.  Each program sets bench_prog to its name before parsing.
 */
#ifndef MMT_BENCH_CLI_H
#define MMT_BENCH_CLI_H

#include <stdint.h>

extern const char *bench_prog;

/* Prints "<prog>: <message> (try --help)" on stderr; returns 2, the exit code. */
int bench_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses text as an integer in [min, max] into *out: 0, else a usage error's 2. */
int bench_parse_number(const char *text, const char *what, int64_t min, int64_t max,
                       int64_t *out);
/* The usage error for what getopt_long returned as c (':' a missing value, else unknown). */
int bench_option_error(int c, char **argv);
/* The positional arguments from argv[first]: none (the sizes stay), or M N K, each in
 * [1, 2^31 - 1].  0, else a usage error's 2. */
int bench_parse_mnk(int argc, char **argv, int first, int64_t *m, int64_t *n, int64_t *k);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

#endif /* MMT_BENCH_CLI_H */
