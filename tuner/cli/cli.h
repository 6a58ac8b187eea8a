/*
 * cli/cli.h -- the mmtune CLI's commands.  Each takes the arguments after the command name
 * (argv[0] is the command name), parses its own options, prints to stdout/stderr, and returns
 * the process exit code: 0 success, 1 the work failed, 2 bad arguments (one-line message on
 * stderr: "mmtune <cmd>: <problem>").
 */
#ifndef MMT_TN_CLI_CLI_H
#define MMT_TN_CLI_CLI_H

#define TN_EXIT_OK 0
#define TN_EXIT_FAIL 1
#define TN_EXIT_USAGE 2

int tn_cmd_tune(int argc, char **argv);      /* cli/tune.c: the main job (default command) */
int tn_cmd_bench(int argc, char **argv);     /* cli/bench.c */
int tn_cmd_templates(int argc, char **argv); /* cli/templates.c */
int tn_cmd_space(int argc, char **argv);     /* cli/space.c */
int tn_cmd_emit(int argc, char **argv);      /* cli/emit.c */
int tn_cmd_compile(int argc, char **argv);   /* cli/compile.c */
int tn_cmd_measure(int argc, char **argv);   /* cli/measure.c */
int tn_cmd_show(int argc, char **argv);      /* cli/show.c */
int tn_cmd_explain(int argc, char **argv);   /* cli/explain.c */
int tn_cmd_model(int argc, char **argv);     /* cli/model.c */
int tn_cmd_db(int argc, char **argv);        /* cli/db.c */
int tn_cmd_report(int argc, char **argv);    /* cli/report.c */
int tn_cmd_worker(int argc, char **argv);    /* gpu/worker.c: hidden; the GPU worker process */

/* Prints "mmtune <cmd>: <message>" on stderr and returns TN_EXIT_USAGE. */
int tn_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* MMT_TN_CLI_CLI_H */
