/*
 * cli/opts.h -- option parsing shared by the CLI's commands (implemented in cli/opts.c).
 * Prefix tn_.  Part of tn_cmdline: the commands, multi-GPU tune and the report use it.
 *
 * One syntax for every command:
 *   --name VALUE, --name=VALUE, -x VALUE, -xVALUE   an option with a value
 *   --flag, -f                                      a flag
 *   --                                              everything after it is positional
 * Options and positional arguments may be mixed in any order.  "-" alone and words that start
 * with "-" and a digit ("-1") are positional, so a negative number reaches the number parser
 * and gets its message.  -h and --help print the command's help.
 *
 * Every helper that returns an int returns a process exit code (cli/cli.h): TN_EXIT_OK, or
 * TN_EXIT_USAGE after printing one line "mmtune <cmd>: <problem>" on stderr, or TN_EXIT_FAIL
 * (work failed, message printed) where documented.
 */
#ifndef MMT_TN_CLI_OPTS_H
#define MMT_TN_CLI_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/args.h"
#include "gen.h"
#include "mmtune.h"

#define TN_OPTS_MAX 32

/* One option of a command. */
typedef struct {
  const char *name; /* long name without dashes: "db" for --db */
  char short_name;  /* 'j' for -j; 0 for none */
  const char *arg;  /* placeholder of the value in help ("PATH"); NULL for a flag */
  const char *help; /* one line for the command's --help */
} tn_opt;

/* A command's options and help text. */
typedef struct {
  const char *name;  /* "space" */
  const char *usage; /* what follows "mmtune space" in the usage line */
  const char *about; /* the help's body: what the command does, one or more lines */
  const tn_opt *opts;
  int nopts; /* <= TN_OPTS_MAX */
} tn_cmd_spec;

/* The parsed command line. */
typedef struct {
  const tn_cmd_spec *spec;
  const char *value[TN_OPTS_MAX]; /* per option of spec: last value, "" for a flag; NULL absent */
  char **pos;                     /* positional arguments in order; array owned, strings borrowed */
  int npos;
  bool help; /* -h/--help was given: the help has been printed, the caller returns TN_EXIT_OK */
} tn_opts;

/* Parses argv[1..argc-1] (argv[0] is the command name) against spec.  Prints the help on
 * stdout for -h/--help.  Errors (exit 2): unknown option, missing value, a value given to a
 * flag.  Free with tn_opts_free in every case. */
int tn_opts_parse(const tn_cmd_spec *spec, int argc, char **argv, tn_opts *out);
void tn_opts_free(tn_opts *o);
/* The value of option `name` (long name), or NULL when absent; "" for a flag given. */
const char *tn_opts_get(const tn_opts *o, const char *name);
bool tn_opts_has(const tn_opts *o, const char *name);
/* Prints the help of spec on stdout: as text, or as a Markdown section after
 * tn_opts_help_markdown(true) (the CLI reference, docs/cli.md). */
void tn_opts_print_help(const tn_cmd_spec *spec);
void tn_opts_help_markdown(bool on);

/* Prints "mmtune <cmd>: <message>" as one line on stderr (like tn_usage_error) and returns
 * TN_EXIT_FAIL: for work that failed, not for bad arguments. */
int tn_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* tn_parse_i64 with the usage error on failure.  `what` names the value in the message. */
int tn_opt_i64(const char *cmd, const char *text, const char *what, int64_t min, int64_t max,
               int64_t *out);
/* A --device ordinal in [0, INT_MAX]. */
int tn_opt_device(const char *cmd, const char *text, int *out);
/* --dtype: NULL -> "f32"; a dtype gen knows, else exit 2. *out borrows text. */
int tn_opt_dtype(const char *cmd, const char *text, const char **out);
/* An element type the library serves (mmt_dtype: f32, tf32, f16, bf16); usage error else. */
int tn_opt_served_dtype(const char *cmd, const char *text, mmt_dtype *out);
/* --layout: NULL -> "nn"; "nn", "nt", "tn" or "tt" (gen.h), else exit 2. *out borrows text. */
int tn_opt_layout(const char *cmd, const char *text, const char **out);
/* --shard I/N (tn_parse_shard): NULL -> 0/1 (everything); a bad one -> exit 2 naming the
 * problem. */
int tn_opt_shard(const char *cmd, const char *text, tn_shard *out);

/* --db: text, or ut_default_db_path() when NULL.  Exit 1 when the default cannot be formed. */
int tn_opt_db_path(const char *cmd, const char *text, char *out, size_t outlen);
/* --shapes: tn_parse_shapes; *shapes owned by the caller (free). */
int tn_opt_shapes(const char *cmd, const char *text, tn_shape **shapes, int *count);
/* --templates a,b (or NULL: every template on the search path, sorted): loads them.
 * Unknown or badly named template -> exit 2 "unknown template 'x'"; one that fails to load ->
 * exit 1 with gen's message on stderr.  *ts owned: tn_templates_free. */
int tn_opt_templates(const char *cmd, const char *list, gen_template ***ts, int *count);
/* Loads the named templates (as above; names[] as given on the command line). */
int tn_load_templates(const char *cmd, char **names, int nnames, gen_template ***ts, int *count);
void tn_templates_free(gen_template **ts, int count);

/* The --epilogue option of a command (gen_op_parse's text, for inputs of dtype) into *op and
 * *has (false: none given, the plain GEMM); exit 2 naming the bad field. */
int tn_opt_epilogue(const char *cmd, const tn_opts *o, const char *dtype, gen_op *op, bool *has);
/* tn_opt_epilogue for a command that measures the op's kernels (bench, measure): a grouped op
 * is refused too (no routings are drawn to measure it on yet). */
int tn_opt_measured_epilogue(const char *cmd, const tn_opts *o, const char *dtype, gen_op *op,
                             bool *has);

#endif /* MMT_TN_CLI_OPTS_H */
