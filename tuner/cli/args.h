/*
 * cli/args.h -- parsing of the CLI's arguments: numbers, shapes, shape files, lists.  Prefix tn_.
 * Every failure returns MMT_ERR_INVALID_ARG (MMT_ERR_IO for an unreadable file) with a
 * one-line message naming the argument and the offending text, e.g.
 *   "M must be an integer in [1, 2147483647], got '0'".
 */
#ifndef MMT_TN_CLI_ARGS_H
#define MMT_TN_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

typedef struct {
  int64_t m, n, k;
} tn_shape;

/* Largest M, N or K mmtune accepts (the kernel ABI passes int). */
#define TN_DIM_MAX 2147483647LL

/* A shard of a plan: this process's part when N processes (on N nodes, or a Slurm array's
 * tasks) split it, together covering it exactly once.  compile: item i of the plan, in its
 * deterministic order, belongs to shard i % N (tn_shard_owns).  tune: the plan's problems in
 * dtype-major order are cut into N contiguous blocks (tn_shard_owns_block). */
#define TN_SHARD_MAX 65536
typedef struct {
  int index, count;
} tn_shard;
static inline bool tn_shard_owns(tn_shard s, int64_t item) {
  return s.count <= 1 || item % s.count == s.index;
}
/* Whether position pos (0 <= pos < total) of a plan cut into s.count contiguous blocks, as even
 * as can be, is in block s.index.  Block I of N is blocks I*n .. I*n+n-1 of N*n, so a shard
 * splits again among n GPUs without leaving its block.  tune keeps a dtype's problems
 * together so: kernels are compiled per dtype, not per shape, so a shard compiles each once,
 * and its model learns from the dtype's other shapes (round-robin on two GPUs compiled 40%
 * more kernels than one GPU did, docs/history/node-and-cluster.md). */
static inline bool tn_shard_owns_block(tn_shard s, int64_t pos, int64_t total) {
  return s.count <= 1 || pos * s.count / total == s.index;
}
/* Parses "I/N" with 0 <= I < N <= TN_SHARD_MAX ("bad --shard 'x': expected I/N, e.g. 0/4",
 * or the part that is out of range).  *out is written only on success. */
mmt_status tn_parse_shard(const char *text, tn_shard *out, ut_err *err);

/* Parses a whole decimal integer in [min, max].  `what` names it in the message.  Rejects
 * empty text, whitespace, '+', '-' where min >= 0 ("-3"), trailing junk ("12x"), a value
 * below min, and a value above max or beyond int64 (that message ends in " (out of range)").
 * Leading zeros are accepted ("007" is 7).  *out is written only on success. */
mmt_status tn_parse_i64(const char *text, const char *what, int64_t min, int64_t max, int64_t *out,
                        ut_err *err);
/* Parses a positive double (e.g. seconds) in (0, max]: plain decimal digits with an optional
 * '.' and exponent ("2", "0.5", "1e3"); rejects signs, whitespace, "inf", "nan", hexadecimal,
 * 0 and underflow.  Message: "--budget must be a positive number of seconds, got 'abc'"; above
 * max: "..., at most 3600, got '4000' (out of range)".  *out is written only on success. */
mmt_status tn_parse_seconds(const char *text, const char *what, double max, double *out, ut_err *err);
/* The same for a quantity that is not a time: "--x must be a positive number, got 'abc'". */
mmt_status tn_parse_positive(const char *text, const char *what, double max, double *out,
                             ut_err *err);

/* "MxNxK" with a lowercase 'x' ("M,N,K" is NOT accepted: commas separate shapes).  Each in
 * [1, TN_DIM_MAX], parsed as tn_parse_i64.  Errors name the whole text: "shape must be MxNxK
 * (e.g. 1024x1024x1024), got '12x3'", "shape '0x5x5': M must be an integer in [1, ...]". */
mmt_status tn_parse_shape(const char *text, tn_shape *out, ut_err *err);

/* A --shapes argument: an existing regular file (one "M N K" or "MxNxK" per line, fields
 * separated by spaces or tabs, '#' starts a comment, blank lines ignored; errors start with
 * "shapes file 'f.txt' line 3: "), otherwise a comma-separated list of MxNxK.  An argument
 * that looks like a path (holds '/' or ends in ".txt") but does not exist is MMT_ERR_IO
 * "shapes file 'x' not found"; so is a folder.  The messages do not name the option (the
 * caller prefixes "--shapes: "): "shapes list has an empty item in '1x1x1,,2x2x2'",
 * "shape must be MxNxK (...), got '1x2'".  *shapes is owned by the caller (free); on error it
 * is NULL and *count 0.  At least one shape, else an error. */
mmt_status tn_parse_shapes(const char *arg, tn_shape **shapes, int *count, ut_err *err);

/* What a line of a shapes file may add after its shape, for `mmtune tune`: "epilogue=OP" (an
 * mmt_matmul op, gen_op_parse's text, checked by the caller) and "batch=N" (1..65535), in any
 * order.  op "" and batch 0: not given. */
#define TN_SHAPE_OP_MAX 96
typedef struct {
  char op[TN_SHAPE_OP_MAX];
  int64_t batch;
} tn_shape_extra;
/* tn_parse_shapes with each shape's extras into *extra (owned, as *shapes; a list's shapes
 * have none).  tn_parse_shapes refuses a line with extras, naming the field. */
mmt_status tn_parse_shapes_extra(const char *arg, tn_shape **shapes, tn_shape_extra **extra,
                                 int *count, ut_err *err);

/* Splits "a,b,c" into owned strings (free with tn_list_free); items are kept verbatim
 * (no trimming).  An empty argument or item ("a,,b", ",a", "a,") is an error naming `what`.
 * On error *items is NULL and *count 0. */
mmt_status tn_split_list(const char *arg, const char *what, char ***items, int *count, ut_err *err);
/* Frees each item, then the array.  tn_list_free(NULL, n) is a no-op. */
void tn_list_free(char **items, int count);

#endif /* MMT_TN_CLI_ARGS_H */
