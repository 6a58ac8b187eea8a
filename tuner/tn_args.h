/*
 * tn_args.h -- parsing of the CLI's arguments: numbers, shapes, shape files, lists.  Prefix tn_.
 * Every failure returns MMT_ERR_INVALID_ARG (MMT_ERR_IO for an unreadable file) with a
 * one-line message naming the argument and the offending text, e.g.
 *   "M must be an integer in [1, 2147483647], got '0'".
 */
#ifndef MMT_TN_ARGS_H
#define MMT_TN_ARGS_H

#include <stdint.h>

#include "util.h"

typedef struct {
  int64_t m, n, k;
} tn_shape;

/* Largest M, N or K mmtune accepts (the kernel ABI passes int). */
#define TN_DIM_MAX 2147483647LL

/* Parses a whole decimal integer in [min, max].  `what` names it in the message.  Rejects
 * empty text, signs where min >= 0 ("-3"), trailing junk ("12x"), and overflow. */
mmt_status tn_parse_i64(const char *text, const char *what, int64_t min, int64_t max, int64_t *out,
                        ut_err *err);
/* Parses a positive double (e.g. seconds) in (0, max]. */
mmt_status tn_parse_seconds(const char *text, const char *what, double max, double *out, ut_err *err);

/* "MxNxK" (also "M,N,K" is NOT accepted: commas separate shapes). Each in [1, TN_DIM_MAX]. */
mmt_status tn_parse_shape(const char *text, tn_shape *out, ut_err *err);

/* A --shapes argument: an existing file (one "M N K" or "MxNxK" per line, '#' comments and
 * blank lines ignored; the message names file:line on error), otherwise a comma-separated list
 * of MxNxK.  *shapes is owned by the caller (free).  At least one shape, else an error. */
mmt_status tn_parse_shapes(const char *arg, tn_shape **shapes, int *count, ut_err *err);

/* Splits "a,b,c" into owned strings (free each, then the array); empty items are an error. */
mmt_status tn_split_list(const char *arg, const char *what, char ***items, int *count, ut_err *err);
void tn_list_free(char **items, int count);

#endif /* MMT_TN_ARGS_H */
